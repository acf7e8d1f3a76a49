"""What `dak calibrate` measures, decided without a GPU (this is what `--dry-run` prints).

For a model and workload: every distinct operator shape (``dak.planner.curves.op_key``) with
the host fractions to time it at -- whole row tiles of ``tile_rows`` for linears, whole
requests for attention, always including x = 0 and x = 1 -- plus the link grid (host programs
x pipeline depth) of the congestion measurement and the window grid searched per linear point,
and the projection sets whose fused all-HBM product is timed (dak.calibrate.fusion).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..models import Workload, list_operators
from ..models.spec import ModelSpec
from ..planner.curves import linear_tokens, op_key
from .fusion import FusionSet, fusion_sets, has_bias

LINEAR_RATIOS = (0.0, 0.005, 0.01, 0.02, 0.035, 0.05, 0.1, 0.25, 0.5, 0.75, 1.0)
QUICK_RATIOS = (0.0, 0.01, 0.05, 0.25, 1.0)
LINK_GRID = tuple((p, s) for p in (2, 4, 8, 16, 32, 64) for s in (2, 3, 4, 6))
QUICK_LINK_GRID = tuple((p, s) for p in (4, 8, 16, 64) for s in (3, 4))
WINDOW_GRID = tuple((p, s) for p in (4, 8, 16, 32, 64) for s in (3, 4, 6))
QUICK_WINDOW_GRID = tuple((p, s) for p in (8, 16, 64) for s in (3, 4))
KERNEL_DTYPES = ("bf16", "fp16")


@dataclass(frozen=True)
class ShapeJob:
    """One operator shape to time. Linears: m x k weight, n tokens, points = host rows.
    Attention: points = host requests (m = requests, k = 0)."""
    key: str
    kind: str                  # 'linear' | 'attention'
    m: int
    k: int
    n: int
    bias: bool
    points: tuple[int, ...]    # host rows (linear) or host requests (attention), ascending
    count: int                 # operators of this shape in the model
    names: str                 # e.g. 'q_proj, k_proj, o_proj'

    @property
    def xs(self) -> tuple[float, ...]:
        return tuple(p / self.m for p in self.points)


@dataclass(frozen=True)
class CalibrationPlan:
    model: str
    workload: Workload
    quick: bool
    tune: bool
    tile_rows: int
    shapes: tuple[ShapeJob, ...]
    link_grid: tuple[tuple[int, int], ...]
    window_grid: tuple[tuple[int, int], ...]
    fusion: tuple[FusionSet, ...] = ()

    def estimate_s(self) -> float:
        """Rough wall time on an H200: fixed probes + per point (tuning sweep or a window search)."""
        per_point = (6.0 if self.tune else 1.0) + 0.08 * len(self.window_grid)
        points = sum(len(s.points) for s in self.shapes)
        return 25.0 + 1.2 * len(self.link_grid) + (points + len(self.fusion)) * per_point


def row_points(m: int, tile_rows: int, ratios) -> tuple[int, ...]:
    """Host rows for each target ratio, rounded up to whole tiles (the planner's units), deduplicated."""
    rows = {min(m, math.ceil(r * m / tile_rows - 1e-9) * tile_rows) for r in ratios}
    return tuple(sorted(rows | {0, m}))


def request_points(batch: int, quick: bool) -> tuple[int, ...]:
    if not quick or batch <= 4:
        return tuple(range(batch + 1))
    return tuple(sorted({0, 1, batch // 4, batch // 2, batch}))


def make_plan(spec: ModelSpec, workload: Workload, quick: bool = False, tune: bool = True,
              tile_rows: int = 64, attention: bool = True, ratios=None) -> CalibrationPlan:
    if workload.dtype not in KERNEL_DTYPES:
        raise ValueError(f"dak calibrate times the split kernels, which run {' and '.join(KERNEL_DTYPES)}; "
                         f"got --dtype {workload.dtype}")
    ratios = ratios or (QUICK_RATIOS if quick else LINEAR_RATIOS)
    jobs: dict[str, ShapeJob] = {}
    ops = list_operators(spec, workload, tile_rows)
    for op in ops:
        key = op_key(op)
        if key is None or (op.kind == "attention" and (not attention or workload.phase != "decode")):
            continue
        if key in jobs:
            j = jobs[key]
            names = j.names if op.kind in j.names.split(", ") else f"{j.names}, {op.kind}"
            jobs[key] = ShapeJob(**{**j.__dict__, "count": j.count + 1, "names": names})
            continue
        if op.kind == "attention":
            jobs[key] = ShapeJob(key, "attention", op.units, 0, workload.batch, False,
                                 request_points(op.units, quick), 1, "attention")
        else:
            m, k = op.shape
            jobs[key] = ShapeJob(key, "linear", m, k, linear_tokens(op), has_bias(op, workload.dtype_bytes),
                                 row_points(m, tile_rows, ratios), 1, op.kind)
    return CalibrationPlan(model=spec.name, workload=workload, quick=quick, tune=tune, tile_rows=tile_rows,
                           shapes=tuple(jobs.values()),
                           link_grid=QUICK_LINK_GRID if quick else LINK_GRID,
                           window_grid=QUICK_WINDOW_GRID if quick else WINDOW_GRID,
                           fusion=fusion_sets(ops, workload.dtype_bytes))


def describe(plan: CalibrationPlan) -> str:
    w = plan.workload
    out = [f"dak calibrate plan: {plan.model}, {w.phase} B={w.batch} L={w.prompt_len} G={w.gen_len} {w.dtype}"
           f"{' (quick)' if plan.quick else ''}, split-linear configs {'tuned' if plan.tune else 'heuristic'}",
           "1. device: HBM read (cuBLAS GEMV), copy-engine H2D, dense bf16 matmul FLOP/s",
           f"2. host link: split-kernel host reads for {len(plan.link_grid)} (host programs, stages) "
           f"settings, alone and next to HBM readers (congestion)",
           f"3. operator curves ({len(plan.shapes)} shapes; congestion window searched over "
           f"{len(plan.window_grid)} (host programs, stages) per linear point):"]
    for s in plan.shapes:
        what = f"{s.m}x{s.k} n={s.n}{' +bias' if s.bias else ''}" if s.kind == "linear" else f"B={s.m}"
        xs = ", ".join(f"{x:.3g}" for x in s.xs)
        out.append(f"   {s.names:<28} x{s.count:<4} {what:<22} x = {xs}")
    for fs in plan.fusion:
        out.append(f"4. fused {'/'.join(fs.kinds)} product all in HBM ({fs.m}x{fs.k} n={fs.n}): the "
                   f"members' x = 0 share and unfused_op_overhead_s")
    out.append(f"estimated time: about {plan.estimate_s() / 60:.1f} min")
    return "\n".join(out)
