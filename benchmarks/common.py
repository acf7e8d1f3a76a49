"""Benchmark helpers: measured link bandwidth, run metadata (timing lives in dak.kernels.timing)."""

from __future__ import annotations

import statistics

import torch

from dak.bench.meta import git_sha, metadata, write_json  # noqa: F401  (re-exported)
from dak.kernels.timing import event_ms, graph_time_ms  # noqa: F401  (re-exported)


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
