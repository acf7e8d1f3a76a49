"""Shared test fixtures: the `gpu` marker skips cleanly without CUDA."""

import os

import pytest


def _has_cuda() -> bool:
    try:
        import torch
    except ImportError:  # pragma: no cover
        return False
    return torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") != "1"


def pytest_collection_modifyitems(config, items):
    if _has_cuda():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (run on the device machine)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
