"""The DAK three-stage greedy and its rounding to whole units.

Continuous problem (h_i host bytes of op i, C_i its resident bytes, R the host
bytes required):

    minimize  sum_i T_i(h_i)   s.t.  sum_i h_i = R,  0 <= h_i <= C_i

Every T_i is convex piecewise linear in h_i (see ``cost.segments``), so filling
segments in order of increasing slope is exactly optimal.  The slope classes
are the paper's three stages: (1) negative slopes -- memory-bound ops moved
towards their peak x* = B_h/(B_h+B_g); (2) zero slopes -- compute-bound ops
inside their free range; (3) positive slopes, cheapest first (e.g. embeddings
whose traffic << bytes).  Segments of equal slope share the remaining bytes in
proportion to their length, which makes the result deterministic.
"""

from __future__ import annotations

import heapq
import math

from ..hardware import HardwareProfile
from .cost import envelope_time, op_time, segments

_REL = 1e-12


def fill_by_slope(segs, amount: float, n: int) -> list[float]:
    """Fill `amount` bytes into segments (slope, index, length), sorted by slope, cheapest first;
    segments of (numerically) equal slope share in proportion to their length. Returns the
    bytes given to each index in range(n)."""
    h, remaining, i = [0.0] * n, amount, 0
    while i < len(segs) and remaining > 0:
        j = i                                  # group of (numerically) equal slopes
        while j + 1 < len(segs) and abs(segs[j + 1][0] - segs[i][0]) <= _REL * max(
                abs(segs[i][0]), abs(segs[j + 1][0])):
            j += 1
        length = sum(s[2] for s in segs[i:j + 1])
        frac = 1.0 if remaining >= length else remaining / length
        for _, k, n_k in segs[i:j + 1]:
            h[k] += n_k * frac
        remaining -= length * frac
        i = j + 1
    return h


def solve_continuous(ops, host_bytes: float, profile: HardwareProfile,
                     spare_link: bool = False) -> tuple[list[float], float]:
    """Optimal host fractions x_i (list) and the objective sum_i T_i(x_i) in seconds (T_i: the
    envelope of a measured curve, `cost.envelope_time`).

    ``spare_link`` additionally fills every negative-slope segment even beyond
    ``host_bytes`` (using the host link as extra bandwidth when the model fits).
    """
    total = float(sum(op.bytes for op in ops))
    if host_bytes < 0 or host_bytes > total * (1 + 1e-12):
        raise ValueError(f"host bytes {host_bytes} must lie in [0, {total}] (the offloadable bytes)")
    segs = [s for i, op in enumerate(ops) for s in segments(op, i, profile)]
    if spare_link:
        host_bytes = max(host_bytes, sum(s.length for s in segs if s.slope < 0))
    segs.sort(key=lambda s: (s.slope, s.op_index, s.start))
    h = fill_by_slope([(s.slope, s.op_index, s.length) for s in segs], min(float(host_bytes), total), len(ops))
    xs = [min(1.0, hi / op.bytes) if op.bytes > 0 else 0.0 for hi, op in zip(h, ops)]
    return xs, sum(envelope_time(op, x, profile) for op, x in zip(ops, xs))


def floor_units(ops, xs) -> list[int]:
    """Whole units per op whose bytes stay within its share x (the start of round_to_units)."""
    ks = []
    for op, x in zip(ops, xs):
        target = x * op.bytes * (1 + 1e-12)
        k = min(op.units, int(math.floor(target / op.unit_bytes))) if op.unit_bytes else 0
        while k < op.units and op.host_bytes_for(k + 1) <= target:
            k += 1
        ks.append(k)
    return ks


def round_to_units(ops, xs, host_bytes: float, profile: HardwareProfile, memo: dict | None = None) -> list[int]:
    """Whole host units per op covering ``host_bytes``.

    Floors each op to whole units, then adds single units where the marginal
    time increase per byte, (T(k+1) - T(k)) / bytes(unit), is smallest (a heap),
    until the host bytes reach ``host_bytes``.  Returns the unit counts k_i.
    ``memo``: a dict kept across calls on the same op objects and profile (the consolidated
    search rounds a thousand kind sets; thin units such as an embedding's rows make each
    call add thousands), caching each op's marginals in a list indexed by k.
    """
    ks = floor_units(ops, xs)
    deficit = host_bytes - sum(op.host_bytes_for(k) for op, k in zip(ops, ks))
    memo = {} if memo is None else memo
    # per op: its marginals by unit count (None: not yet computed), kept in `memo` across calls
    tables = [memo.setdefault((id(op), "marginals"), [None] * (op.units + 1)) for op in ops]

    def marginal(i: int, k: int) -> float:
        op, table = ops[i], tables[i]
        m = table[k]
        if m is None:
            b0, b1 = op.host_bytes_for(k), op.host_bytes_for(k + 1)
            m = table[k] = (op_time(op, b1 / op.bytes, profile) - op_time(op, b0 / op.bytes, profile)) / (b1 - b0)
        return m

    heap = [(marginal(i, ks[i]), i) for i, op in enumerate(ops) if ks[i] < op.units]
    heapq.heapify(heap)
    while deficit > 0 and heap:
        m, i = heapq.heappop(heap)
        op, table, k = ops[i], tables[i], ks[i]
        ub, total = op.unit_bytes, op.bytes
        whole = total // ub if ub else 0       # units k < whole add ub bytes: op.host_bytes_for(k + 1) - (k)
        top = heap[0][0] if heap else None
        while True:                            # keep adding while this op stays cheapest
            deficit -= ub if k < whole else min((k + 1) * ub, total) - min(k * ub, total)
            k += 1
            if deficit <= 0 or k >= op.units:
                break
            m = table[k]
            if m is None:
                m = marginal(i, k)
            if top is not None and m > top:
                heapq.heappush(heap, (m, i))
                break
        ks[i] = k
    if deficit > 0:
        raise ValueError(f"cannot place {host_bytes} host bytes: only {sum(o.bytes for o in ops)} are offloadable")
    return ks
