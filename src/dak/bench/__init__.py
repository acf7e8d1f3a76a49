"""Benchmarks that ship with the package (`dak bench ...`) and their run metadata."""
