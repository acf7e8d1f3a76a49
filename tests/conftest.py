"""Shared test set-up. Without a GPU, Triton kernels run in its CPU interpreter; tests marked
`gpu` are skipped cleanly."""

import os

import pytest
import torch

if not torch.cuda.is_available():
    # Must happen before any test module imports triton-backed dak code.
    os.environ.setdefault("TRITON_INTERPRET", "1")


def _has_cuda() -> bool:
    return torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET", "0") in ("", "0")


def pytest_collection_modifyitems(config, items):
    if _has_cuda():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (run on the device machine)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
