"""Shared test set-up. Without a GPU, Triton kernels run in its CPU interpreter; tests marked
`gpu` are skipped cleanly."""

import os

import pytest
import torch

if not torch.cuda.is_available():
    # Must happen before any test module imports triton-backed dak code.
    os.environ.setdefault("TRITON_INTERPRET", "1")

    # The interpreted kernels are Python-bound: `pytest -n auto` (the README's command) runs a worker per
    # core, and the thread pools of torch, OpenMP and BLAS in every worker would only contend for the
    # cores. Workers inherit this process's environment.
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(var, "1")
    torch.set_num_threads(1)

    from interp_patch import install  # noqa: E402 -- a faster interpreter for the suite (see its doc)
    install()


def _has_cuda() -> bool:
    return torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET", "0") in ("", "0")


def pytest_collection_modifyitems(config, items):
    if _has_cuda():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (run on the device machine)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
