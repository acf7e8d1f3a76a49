"""Measured cost curves: an operator's time T(x) taken from calibration instead of the roofline.

``dak calibrate`` times each operator shape at a grid of host fractions x (whole row tiles for
linears, whole requests for attention). The measurements carry what the roofline leaves out:
tile granularity, wave tails, launch floors, the kernel's real host-read rate. The planner
uses the *lower convex envelope* of the points, interpolated linearly:

    T(x) = hull(x),   hull = lower convex hull of {(x_j, t_j)}  (x_0 = 0, x_last = 1)

Convexity keeps the greedy exact: as a function of host bytes h = x*C the envelope is convex
piecewise linear, so filling its pieces by increasing slope (``greedy.solve_continuous``) is
still the LP optimum. A point far above the envelope (``above_envelope``) is a measurement the
planner will not reproduce -- e.g. a ratio where the tuned kernel chose badly; calibrate reports
those. Pure Python.
"""

from __future__ import annotations

import bisect
from functools import lru_cache

from ..measured import Curve

MAX_DECODE_TOKENS = 64  # mirrors dak.kernels.config (kept torch-free here)


def token_bucket(n: int) -> int:
    """The split-linear tuner's token bucket: 16, 32, 64, then powers of two."""
    p = 1 << max(0, (int(n) - 1).bit_length())
    return max(16, min(p, MAX_DECODE_TOKENS)) if n <= MAX_DECODE_TOKENS else p


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
    n = round(op.flops / (2 * m * k)) if m and k else 0
    return f"linear|m{m}|k{k}|row{op.unit_bytes // op.unit_rows}|n{token_bucket(n)}"


def lower_hull(points) -> tuple[tuple[float, float], ...]:
    """Lower convex hull of (x, t) points, x ascending (the lowest t kept for a repeated x)."""
    best: dict[float, float] = {}
    for x, t in points:
        best[x] = min(t, best.get(x, t))
    hull: list[tuple[float, float]] = []
    for p in sorted(best.items()):
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


def curve_for(op, profile) -> Curve | None:
    """The measured curve of ``op``'s shape in ``profile``, if it carries one."""
    if not profile.curves:
        return None
    key = op_key(op)
    return None if key is None else profile.curve_table.get(key)


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
