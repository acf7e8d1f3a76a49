"""Measured split-linear curves and congestion windows (CUDA GPU only).

For one weight shape (M x K, n tokens) and each host row count M_H of the plan, the module the
runtime uses (`dak.nn.SplitLinear`, tuned or heuristic config, torch at M_H = 0) is timed by
CUDA-graph replay over enough weight copies that replays miss L2. Where host rows are read in
place by SM loads (copy-engine share < 1), the congestion window is then searched: every
(host programs, pipeline depth) of the grid on top of the module's config, against the
un-capped setting (one host program per host work item). A faster window becomes the curve
point, is recorded as a `dak.measured.Window`, and seeds the split-linear tuning cache so that
the kernels launch with it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import torch

from dak.kernels.config import finalize
from dak.kernels.config_cache import time_or_inf
from dak.kernels.timing import graph_time_ms
from dak.measured import Window

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
MAX_COPIES = 6


@dataclass
class PointResult:
    host_rows: int
    time_s: float
    config: dict | None
    window: Window | None = None


def window_key(dtype: torch.dtype, n: int, m_h: int, m_g: int, k: int, bias: bool) -> str:
    """`dak.kernels.tuning.tune_key` without the GPU name (how profiles name launch shapes)."""
    from dak.kernels.tuning import tune_key
    return tune_key("", dtype, n, m_h, m_g, k, bias).split("|", 1)[1]


class LinearShape:
    """Weights of one shape, kept while its points are timed (one HBM master, copies per point)."""

    def __init__(self, m: int, k: int, n: int, bias: bool, dtype: str, tile_rows: int, tune: bool):
        self.m, self.k, self.n, self.tile_rows, self.tune = m, k, n, tile_rows, tune
        self.dtype = DTYPES[dtype]
        gen = torch.Generator(device="cuda").manual_seed(0)
        self.weight = (torch.randn(m, k, device="cuda", generator=gen) * 0.02).to(self.dtype)
        self.bias = torch.randn(m, device="cuda", generator=gen).to(self.dtype) if bias else None
        self.x = torch.randn(n, k, device="cuda", generator=gen).to(self.dtype)
        l2 = getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 64 << 20) or (64 << 20)
        self.copies = max(1, min(MAX_COPIES, math.ceil(3 * l2 / (m * k * self.dtype.itemsize))))
        self.sms = torch.cuda.get_device_properties(0).multi_processor_count

    def modules(self, m_h: int):
        from dak.nn import SplitLinear
        mods = [SplitLinear(self.weight, self.bias, host_rows=m_h, row_tile=self.tile_rows, tune=self.tune)
                for _ in range(self.copies)]
        cfgs = [mod.prepare(self.n) for mod in mods]
        return mods, cfgs[0]

    def time_point(self, m_h: int, window_grid=()) -> PointResult:
        mods, cfg = self.modules(m_h)
        t = graph_time_ms([lambda mod=mod: mod(self.x) for mod in mods]) * 1e-3
        res = PointResult(m_h, t, None if cfg is None else cfg.to_dict())
        if cfg is not None and cfg.ce_share < 1 and window_grid:
            res = self._search_window(mods, cfg, res, window_grid)
        del mods
        return res

    def _search_window(self, mods, cfg, res: PointResult, grid) -> PointResult:
        m_h, m_g = res.host_rows, self.m - res.host_rows
        out = torch.empty(self.n, self.m, device="cuda", dtype=self.dtype)

        def timed(c) -> float:
            c = finalize(c, m_h, m_g, self.sms)
            return time_or_inf(lambda: [mod._launch(self.x, c, out) for mod in mods]) * 1e-3 / len(mods)

        default = timed(cfg)
        uncapped = timed(replace(cfg, host_programs=1 << 20))
        if not math.isfinite(default):
            return res
        uncapped = uncapped if math.isfinite(uncapped) else default
        best, best_t = cfg, default
        for p, s in grid:
            cand = replace(cfg, host_programs=p, num_stages=s)
            t = timed(cand)
            if t < best_t * 0.99:
                best, best_t = cand, t
        best = finalize(best, m_h, m_g, self.sms)
        key = window_key(self.dtype, self.n, m_h, m_g, self.k, self.bias is not None)
        win = Window(key, best.host_programs, best.num_stages, best_t, uncapped, default)
        if best_t < default * 0.99:
            seed_tuning_cache(mods[0], self.n, m_h, best)
        return PointResult(m_h, min(res.time_s, best_t), best.to_dict(), win)


def seed_tuning_cache(mod, n: int, m_h: int, cfg) -> None:
    """Make `cfg` the tuned config of this launch shape for later runs (memory and disk cache).

    Uses dak.kernels.tuning's private cache helpers; see the calibrate report for the public
    hook the kernels should offer instead."""
    from dak.kernels import tuning
    key = tuning.tune_key(mod._gpu, mod.dtype, n, m_h, mod.out_features - m_h, mod.in_features,
                          mod.bias is not None)
    tuning.store(key, cfg)


def measure_curve(shape: LinearShape, points, window_grid=(), progress=None) -> list[PointResult]:
    """Time every host row count in `points`; `progress()` is called after each."""
    out = []
    for m_h in points:
        out.append(shape.time_point(m_h, window_grid))
        torch.cuda.empty_cache()
        if progress:
            progress()
    return out
