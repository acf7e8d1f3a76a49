"""Roofline cost model of one split operator.

An operator with resident bytes C, per-step traffic D and FLOPs W keeps a
fraction x of its bytes (and traffic) in pinned host memory.  The HBM part is
read at B_g = ``hbm_bandwidth`` and the host part concurrently at B_h =
``split_host_bandwidth`` (the faster of SM zero-copy loads and the copy engine, which dak's
kernels choose between per shape); compute runs at F = ``flops``:

    T(x)  = max(T_comp, (1-x)*D/B_g, x*D/B_h),   T_comp = W/F       [seconds]
    EB(x) = D / T(x)                                                [bytes/s]

Memory-bound ops (T_comp < D/(B_g+B_h)) are fastest at x* = B_h/(B_h+B_g).
Compute-bound ops are free (T = T_comp) for x in [x_lo, x_hi] with
x_lo = max(0, 1 - B_g/B_i) and x_hi = min(1, B_h/B_i), B_i = D/T_comp.

As a function of host bytes h = x*C, T is convex piecewise linear with up to
three segments, slopes -(D/C)/B_g, 0 and +(D/C)/B_h  (seconds per byte).

When the profile carries a measured curve for the op's shape (``dak calibrate``), ``segments``
use its convex envelope instead and ``op_time`` its measured points (see ``dak.planner.curves``);
``roofline_time`` is always the formula above (the bound's).

A profile may also state ``gemv_bandwidth``: the HBM rate of dak's all-HBM decode GEMV
(dak.kernels.hbm_gemv), which runs every decode linear held wholly in HBM at up to
GEMV_MAX_TOKENS tokens. ``op_time`` prices such an operator at that rate (``hbm_time``); split
operators keep ``hbm_bandwidth`` (their kernels and fitted excesses are the roofline's), and so
does the bound.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..hardware import HardwareProfile
from ..shares import gemv_enabled
from .curves import curve_for, curve_pieces, envelope, interpolate, measured_time


@dataclass(frozen=True)
class Segment:
    """A linear piece of T(h) for one op: h in [start, start+length) bytes, dT/dh = slope."""
    op_index: int
    start: float
    length: float
    slope: float


def compute_time(flops: float, profile: HardwareProfile) -> float:
    return flops / profile.flops


GEMV_MAX_TOKENS = 16  # mirrors dak.kernels.hbm_gemv.MAX_TOKENS: the decode batches the GEMV serves


def runs_gemv(op, profile: HardwareProfile) -> bool:
    """Whether an all-HBM `op` runs dak's decode GEMV at the profile's gemv_bandwidth: a linear
    (not an embedding lookup) of 1..GEMV_MAX_TOKENS tokens, with the GEMV on ($DAK_HBM_GEMV) and
    the profile stating the rate."""
    if not profile.gemv_bandwidth or op.shape is None or op.kind == "attention" or op.kind.startswith("embed"):
        return False
    out_f, in_f = op.shape
    tokens = op.flops / (2.0 * out_f * in_f) if out_f and in_f else 0.0
    return 0 < tokens <= GEMV_MAX_TOKENS and gemv_enabled()


def hbm_time(op, profile: HardwareProfile, gemv: bool = True) -> float:
    """Seconds for `op` all in HBM: its measured point at x = 0 where a curve has one, else the
    roofline at the decode GEMV's rate (`runs_gemv`; `gemv` False: at hbm_bandwidth, as cuBLAS
    multiplies a copy-engine operator's HBM rows)."""
    curve = curve_for(op, profile)
    if curve is not None:
        return measured_time(curve, 0.0)
    return _uncalibrated_time(op, 0.0, profile, gemv)


def op_time(op, x: float, profile: HardwareProfile) -> float:
    """T(x) in seconds for an op, host fraction x: its measured points, else the roofline (all in
    HBM: `hbm_time`)."""
    curve = curve_for(op, profile)
    if curve is not None:
        return measured_time(curve, x)
    return _uncalibrated_time(op, x, profile, True)


def _uncalibrated_time(op, x: float, profile: HardwareProfile, gemv: bool) -> float:
    """The roofline, with an all-HBM decode linear at the GEMV's rate where `gemv` and runs_gemv."""
    if x <= 0 and gemv and runs_gemv(op, profile):
        return max(op.flops / profile.flops, op.traffic / profile.gemv_bandwidth)
    return roofline_time(op, x, profile)


def envelope_time(op, x: float, profile: HardwareProfile) -> float:
    """T(x) of the continuous problem the greedy solves: the measured curve's convex envelope,
    else the roofline."""
    curve = curve_for(op, profile)
    if curve is not None:
        return interpolate(envelope(curve), x)
    return roofline_time(op, x, profile)


def roofline_time(op, x: float, profile: HardwareProfile) -> float:
    """Roofline T(x) in seconds for an op (anything with .traffic and .flops), host fraction x."""
    return max(op.flops / profile.flops,
               (1.0 - x) * op.traffic / profile.hbm_bandwidth,
               x * op.traffic / profile.split_host_bandwidth)


def effective_bandwidth(op, x: float, profile: HardwareProfile) -> float:
    """EB(x) = traffic / T(x) in bytes/s (0 for an op with no time)."""
    t = op_time(op, x, profile)
    return op.traffic / t if t > 0 else 0.0


def peak_ratio(op, profile: HardwareProfile) -> float:
    """Smallest x minimizing T: B_h/(B_h+B_g) when memory-bound, else x_lo of the free range."""
    curve = curve_for(op, profile)
    if curve is not None:  # the first lowest point of the envelope
        hull = envelope(curve)
        return min(hull, key=lambda p: (p[1], p[0]))[0]
    bg, bh = profile.hbm_bandwidth, profile.split_host_bandwidth
    tc = op.flops / profile.flops
    if op.traffic <= 0:
        return 0.0
    if tc <= op.traffic / (bg + bh):
        return bh / (bh + bg)
    return max(0.0, 1.0 - tc * bg / op.traffic)


def segments(op, index: int, profile: HardwareProfile) -> list[Segment]:
    """The linear pieces of T as a function of host bytes h in [0, op.bytes]."""
    C, D = float(op.bytes), float(op.traffic)
    if C <= 0:
        return []
    curve = curve_for(op, profile)
    if curve is not None:
        return [Segment(index, a, n, s) for a, n, s in curve_pieces(curve, C)]
    if D <= 0:
        return [Segment(index, 0.0, C, 0.0)]
    bg, bh = profile.hbm_bandwidth, profile.split_host_bandwidth
    tc = op.flops / profile.flops
    down, up = -(D / C) / bg, (D / C) / bh
    if tc <= D / (bg + bh):                    # memory-bound: V shape
        xs = bh / (bh + bg)
        pieces = [(0.0, xs, down), (xs, 1.0, up)]
    else:                                      # compute-bound: flat bottom
        lo, hi = max(0.0, 1.0 - tc * bg / D), min(1.0, tc * bh / D)
        pieces = [(0.0, lo, down), (lo, hi, 0.0), (hi, 1.0, up)]
    return [Segment(index, a * C, (b - a) * C, s) for a, b, s in pieces if b > a]
