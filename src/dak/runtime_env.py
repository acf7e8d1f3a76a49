"""Where kernels may run: a CUDA GPU, or Triton's CPU interpreter (TRITON_INTERPRET=1).

Nothing here creates a CUDA context at import time.
"""

from __future__ import annotations

import os

import torch

from .shares import env_flag, fused_layer_enabled  # noqa: F401 (re-exported: switches live in dak.shares)

KERNEL_DTYPES = (torch.bfloat16, torch.float16)


def interpreting() -> bool:
    """True when Triton kernels run in the CPU interpreter (TRITON_INTERPRET=1)."""
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def kernel_device() -> torch.device:
    """The device that holds HBM-resident tensors: cuda, or cpu under the interpreter.

    Raises RuntimeError with what to do when neither a GPU nor the interpreter is available.
    """
    if interpreting():
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise RuntimeError(
            "dak's split kernels need a CUDA GPU and none is visible "
            "(torch.cuda.is_available() is False). Run on a GPU machine, or set "
            "TRITON_INTERPRET=1 to run the Triton kernels slowly on the CPU for testing."
        )
    return torch.device("cuda", torch.cuda.current_device())


def sm_count(device: torch.device) -> int:
    """Streaming multiprocessors of `device` (a small fixed number under the interpreter)."""
    if device.type != "cuda":
        return 4
    return torch.cuda.get_device_properties(device).multi_processor_count


def gpu_name(device: torch.device) -> str:
    if device.type != "cuda":
        return "triton-interpreter"
    return torch.cuda.get_device_name(device)
