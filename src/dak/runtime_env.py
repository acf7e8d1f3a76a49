"""Where kernels may run: a CUDA GPU, or Triton's CPU interpreter (TRITON_INTERPRET=1).

Nothing here creates a CUDA context at import time.
"""

from __future__ import annotations

import functools
import os

import torch

from .shares import env_flag, fused_layer_enabled  # noqa: F401 (re-exported: switches live in dak.shares)

KERNEL_DTYPES = (torch.bfloat16, torch.float16)


class EnvironmentProblem(RuntimeError):
    """This machine cannot run dak's kernels as asked (no GPU, an interpreter that cannot run):
    the message says what to change. The CLI prints it as an error, without a traceback."""


def interpreting() -> bool:
    """True when Triton kernels run in the CPU interpreter (TRITON_INTERPRET=1)."""
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def _version(text: str) -> tuple[int, int]:
    parts = (text.split("+")[0].split(".") + ["0"])[:2]
    return tuple(int("".join(c for c in p if c.isdigit()) or 0) for p in parts)


@functools.cache
def interpreter_problem() -> str:
    """Why Triton's CPU interpreter cannot run dak's kernels here ("" when it can): triton <= 3.6's
    interpreter turns one-element arrays into Python ints, which numpy >= 2.4 refuses (triton
    issue 9171), so every kernel would fail deep inside the interpreter with a TypeError."""
    import numpy
    import triton
    if _version(numpy.__version__) >= (2, 4) and _version(triton.__version__) <= (3, 6):
        return (f"TRITON_INTERPRET=1 is set, but Triton {triton.__version__}'s CPU interpreter cannot run "
                f"with numpy {numpy.__version__} (it needs numpy < 2.4; triton-lang/triton issue 9171). "
                "Install numpy<2.4 (pip install 'numpy<2.4'), or unset TRITON_INTERPRET on a GPU machine.")
    return ""


def kernel_device() -> torch.device:
    """The device that holds HBM-resident tensors: cuda, or cpu under the interpreter.

    Raises EnvironmentProblem with what to do when neither a GPU nor the interpreter is available.
    """
    if interpreting():
        problem = interpreter_problem()
        if problem:
            raise EnvironmentProblem(problem)
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise EnvironmentProblem(
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
