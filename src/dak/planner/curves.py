"""Measured cost curves: an operator's time T(x) taken from calibration instead of the roofline.

``dak calibrate`` times each operator shape at a grid of host fractions x (whole row tiles for
linears, whole requests for attention). The measurements carry what the roofline leaves out:
tile granularity, wave tails, launch floors, the kernel's real host-read rate. The greedy's
continuous solve orders host bytes by the *lower convex envelope* of the points:

    hull = lower convex hull of {(x_j, t_j)}  (x_0 = 0, x_last = 1)

Convexity keeps the greedy exact: as a function of host bytes h = x*C the envelope is convex
piecewise linear, so filling its pieces by increasing slope (``greedy.solve_continuous``) is
still the LP optimum. One operator at a ratio between two envelope vertices does not run at the
envelope, though (a point far above it, ``above_envelope``, is a ratio where the kernel is slow;
calibrate reports those), so an operator's time T(x) -- what rounding to whole units, the
consolidation and the predicted step use -- is the measured points interpolated linearly
(``measured_time``). Seventeenth session (H200, Llama-2-7B calibration, batch 8): pricing on the
envelope predicted 0.57-0.70 of the measured step at 1-2%.

The runtime multiplies a q/k/v or gate/up set as one matrix while all its members are in HBM
(dak.nn.fused_proj), faster than each alone. Calibrate times that fused product too and stores,
for each member's shape, a curve under ``fused_key`` whose x = 0 point is the member's byte share
of the fused time (its other points as the member alone); the planner prefers it for members of
those sets. Pure Python.
"""

from __future__ import annotations

import bisect
from functools import lru_cache

from ..measured import Curve

MAX_DECODE_TOKENS = 64  # mirrors dak.kernels.config (kept torch-free here)
PROJECTION_GROUPS = (("q_proj", "k_proj", "v_proj"), ("gate_proj", "up_proj"))  # HF names, call order
GROUPED_KINDS = frozenset(k for g in PROJECTION_GROUPS for k in g)
FUSED_SUFFIX = "|fused"


def token_bucket(n: int) -> int:
    """The split-linear tuner's token bucket: 16, 32, 64, then powers of two."""
    p = 1 << max(0, (int(n) - 1).bit_length())
    return max(16, min(p, MAX_DECODE_TOKENS)) if n <= MAX_DECODE_TOKENS else p


def linear_tokens(op) -> int:
    """Tokens per step of a linear operator (its FLOPs over 2 x M x K)."""
    m, k = op.shape
    return round(op.flops / (2 * m * k)) if m and k else 0


def op_key(op) -> str | None:
    """The key a measured curve of ``op``'s shape has; None for ops never measured (embeddings).

    Linear: ``linear|m<M>|k<K>|row<bytes per row>|n<token bucket>`` (row bytes encode dtype and
    bias). Attention: ``attention|B<requests>|req<bytes per request>|t<traffic bytes>``.
    """
    if op.kind == "attention":
        return f"attention|B{op.units}|req{op.unit_bytes}|t{round(op.traffic)}"
    if op.kind.startswith("embed") or op.shape is None:
        return None
    m, k = op.shape
    return f"linear|m{m}|k{k}|row{op.unit_bytes // op.unit_rows}|n{token_bucket(linear_tokens(op))}"


def fused_key(op) -> str | None:
    """The key of the curve measured for ``op`` as a member of its fused projection set (x = 0:
    its share of the fused product); None for operators outside those sets."""
    key = op_key(op)
    return None if key is None or op.kind not in GROUPED_KINDS else key + FUSED_SUFFIX


def _lowest_per_x(points) -> tuple[tuple[float, float], ...]:
    """(x, t) points by x ascending, the lowest t kept for a repeated x."""
    best: dict[float, float] = {}
    for x, t in points:
        best[x] = min(t, best.get(x, t))
    return tuple(sorted(best.items()))


def lower_hull(points) -> tuple[tuple[float, float], ...]:
    """Lower convex hull of (x, t) points, x ascending (the lowest t kept for a repeated x)."""
    hull: list[tuple[float, float]] = []
    for p in _lowest_per_x(points):
        while len(hull) >= 2:
            (ax, at), (bx, bt) = hull[-2], hull[-1]
            if (bx - ax) * (p[1] - at) - (bt - at) * (p[0] - ax) > 0:
                break                              # b lies strictly below the chord a-p
            hull.pop()
        hull.append(p)
    return tuple(hull)


@lru_cache(maxsize=4096)
def envelope(curve: Curve) -> tuple[tuple[float, float], ...]:
    return lower_hull(curve.points)


@lru_cache(maxsize=4096)
def measured_points(curve: Curve) -> tuple[tuple[float, float], ...]:
    """The curve's points by x ascending, the lowest time kept for a repeated x."""
    return _lowest_per_x(curve.points)


def measured_time(curve: Curve, x: float) -> float:
    """One operator's time at host fraction x: its measured points interpolated linearly."""
    return interpolate(measured_points(curve), x)


def interpolate(hull, x: float) -> float:
    """Piecewise-linear value of ``hull`` at x (clamped to [0, 1])."""
    x = min(1.0, max(0.0, x))
    i = bisect.bisect_right([p[0] for p in hull], x)
    if i == 0:
        return hull[0][1]
    if i >= len(hull):
        return hull[-1][1]
    (x0, t0), (x1, t1) = hull[i - 1], hull[i]
    return t0 + (t1 - t0) * (x - x0) / (x1 - x0)


def curve_for(op, profile, fused: bool = True) -> Curve | None:
    """The measured curve of ``op``'s shape in ``profile``, if it carries one: for a member of a
    fused projection set (`fused`, the runtime's default) its fused-set curve where measured."""
    if not profile.curves:
        return None
    key = op_key(op)
    if key is None:
        return None
    table = profile.curve_table
    fkey = fused_key(op) if fused else None
    return (fkey and table.get(fkey)) or table.get(key)


def curve_pieces(curve: Curve, op_bytes: float) -> list[tuple[float, float, float]]:
    """(start, length, slope) pieces of T as a function of host bytes h in [0, op_bytes]."""
    hull = envelope(curve)
    return [(x0 * op_bytes, (x1 - x0) * op_bytes, (t1 - t0) / ((x1 - x0) * op_bytes))
            for (x0, t0), (x1, t1) in zip(hull, hull[1:])]


def above_envelope(curve: Curve, tolerance: float = 0.05) -> list[tuple[float, float, float]]:
    """(x, measured, envelope) for points more than ``tolerance`` above the convex envelope."""
    hull = envelope(curve)
    return [(x, t, interpolate(hull, x)) for x, t in curve.points
            if t > interpolate(hull, x) * (1 + tolerance)]


def coverage(ops, profile) -> tuple[int, int]:
    """(ops with a measured curve, ops that could have one)."""
    keys = [op_key(op) for op in ops]
    measurable = [k for k in keys if k is not None]
    return sum(1 for k in measurable if k in profile.curve_table), len(measurable)
