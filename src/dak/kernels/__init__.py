"""Triton kernels and their launchers. Importing this package imports triton."""
