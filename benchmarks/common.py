"""Benchmark helpers: CUDA-graph timing, measured link bandwidth, run metadata."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

import torch


def git_sha() -> str:
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


def _event_ms(fn: Callable[[], object]) -> float:
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    fn()
    e.record()
    e.synchronize()
    return s.elapsed_time(e)


def graph_time_ms(calls: list[Callable[[], object]], target_ms: float = 30.0) -> float:
    """Median time of one call, measured by replaying a CUDA graph of several calls.

    `calls` are equivalent launches over different buffers (rotated so repeated calls do not hit
    L2). Warms up eagerly first so compilation stays outside the graph.
    """
    for fn in calls:
        fn()
    torch.cuda.synchronize()
    one = max(_event_ms(calls[0]), 1e-3)
    per_graph = max(len(calls), min(40, int(0.3 / one) + 1))
    per_graph = -(-per_graph // len(calls)) * len(calls)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for fn in calls:
            fn()
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for i in range(per_graph):
            calls[i % len(calls)]()
    g.replay()
    torch.cuda.synchronize()
    replays = int(min(25, max(5, target_ms / (one * per_graph))))
    times = [_event_ms(g.replay) / per_graph for _ in range(replays)]
    del g
    return statistics.median(times)


def h2d_bandwidth(nbytes: int = 1 << 30) -> float:
    """Copy-engine host-to-device bandwidth (bytes/s) from an exact-size pinned buffer."""
    from dak.host import PinnedBuffer
    src = PinnedBuffer((nbytes // 4096, 2048), torch.float16)
    src.tensor.fill_(1.0)
    dst = torch.empty(src.tensor.shape, dtype=torch.float16, device="cuda")
    dst.copy_(src.tensor, non_blocking=True)
    times = [_event_ms(lambda: dst.copy_(src.tensor, non_blocking=True)) for _ in range(5)]
    src.free()
    return src.nbytes / (statistics.median(times) * 1e-3)


def write_json(path: str | Path, payload: dict) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=1))
