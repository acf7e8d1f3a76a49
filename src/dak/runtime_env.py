"""Where kernels may run: a CUDA GPU, or Triton's CPU interpreter (TRITON_INTERPRET=1).

Nothing here creates a CUDA context at import time.
"""

from __future__ import annotations

import os

import torch

KERNEL_DTYPES = (torch.bfloat16, torch.float16)


def interpreting() -> bool:
    """True when Triton kernels run in the CPU interpreter (TRITON_INTERPRET=1)."""
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def env_flag(name: str, default: bool) -> bool:
    """$name as an on/off switch: '1' on, '0' off, unset `default`; anything else is an error."""
    raw = os.environ.get(name)
    if raw is None:
        return default
    if raw not in ("0", "1"):
        raise ValueError(f"{name} must be 0 or 1, got {raw!r}")
    return raw == "1"


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
