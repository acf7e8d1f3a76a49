"""Benchmark helpers: measured link bandwidth, run metadata (timing lives in dak.kernels.timing)."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
import torch

from dak.kernels.timing import event_ms, graph_time_ms  # noqa: F401  (re-exported)


def git_sha() -> str:
    """HEAD's short sha; $DAK_GIT_SHA where the tree was copied without .git (device runs)."""
    if os.environ.get("DAK_GIT_SHA"):
        return os.environ["DAK_GIT_SHA"]
    try:
        return subprocess.check_output(["git", "rev-parse", "--short", "HEAD"], text=True,
                                       stderr=subprocess.DEVNULL).strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def metadata() -> dict:
    return {
        "gpu": torch.cuda.get_device_name(),
        "git_sha": git_sha(),
        "command": " ".join([Path(sys.executable).name] + sys.argv),
        "torch": torch.__version__,
        "date": time.strftime("%Y-%m-%dT%H:%M:%S"),
    }


def h2d_bandwidth(nbytes: int = 1 << 30) -> float:
    """Copy-engine host-to-device bandwidth (bytes/s) from an exact-size pinned buffer."""
    from dak.host import PinnedBuffer
    src = PinnedBuffer((nbytes // 4096, 2048), torch.float16)
    src.tensor.fill_(1.0)
    dst = torch.empty(src.tensor.shape, dtype=torch.float16, device="cuda")
    dst.copy_(src.tensor, non_blocking=True)
    times = [event_ms(lambda: dst.copy_(src.tensor, non_blocking=True)) for _ in range(5)]
    src.free()
    return src.nbytes / (statistics.median(times) * 1e-3)


def write_json(path: str | Path, payload: dict) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=1))
