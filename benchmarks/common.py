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


def split_kernel_call(x: torch.Tensor, w_host: torch.Tensor, w_hbm: torch.Tensor):
    """A no-argument call of dak's split kernel on `x` with its untuned decode config, every host
    row read in place (ce_share 0): for probes that time the kernel itself beside other work."""
    from dataclasses import replace

    from dak.kernels.config import heuristic_config
    from dak.kernels.split_linear import split_linear
    n, k = x.shape
    sms = torch.cuda.get_device_properties(x.device).multi_processor_count if x.is_cuda else 4
    cfg = replace(heuristic_config(n, w_host.shape[0], w_hbm.shape[0], k, sms, x.is_cuda), ce_share=0.0,
                  hbm_cublas=False)
    out = torch.empty(n, w_host.shape[0] + w_hbm.shape[0], dtype=x.dtype, device=x.device)
    return lambda: split_linear(x, w_host, w_hbm, None, cfg, out=out)
