"""Fewer, larger host parts when every split operator costs a fixed excess.

The greedy spreads the host share over every operator that can hide it (the roofline's
optimum). Measured end to end, each split operator also costs a fixed excess (launches, the
copy engine's start-up, host KV staging; ``dak.planner.overhead``), so spreading thin can lose
to concentrating. `consolidate` starts from the greedy and, one operator kind at a time (all
q_proj, all attention, ...), takes the kind off the host and re-solves the greedy over the
rest while that lowers sum_i T_i(x_i) + overheads by more than `min_gain`. A profile without
per-operator overheads keeps the greedy's placement.
"""

from __future__ import annotations

from .cost import op_time
from .greedy import round_to_units, solve_continuous
from .overhead import split_overhead


def _place(ops, R: int, profile, workload, off: frozenset):
    """(predicted operator time + split overheads, units per op) with kinds `off` kept in HBM,
    or None when the other operators cannot hold R bytes."""
    idx = [i for i, op in enumerate(ops) if op.kind not in off]
    sub = [ops[i] for i in idx]
    if sum(op.bytes for op in sub) < R:
        return None
    xs, _ = solve_continuous(sub, R, profile)
    ks = [0] * len(ops)
    for i, k in zip(idx, round_to_units(sub, xs, R, profile)):
        ks[i] = k
    host = [op.host_bytes_for(k) for op, k in zip(ops, ks)]
    if sum(host) < R:
        return None
    t = sum(op_time(op, h / op.bytes if op.bytes else 0.0, profile) for op, h in zip(ops, host))
    return t + split_overhead(ops, host, workload, profile), ks


def consolidate(ops, R: int, profile, workload, min_gain: float = 0.005) -> list[int]:
    """Host units per operator (see the module doc)."""
    best = _place(ops, R, profile, workload, frozenset())
    if R <= 0 or best is None:
        return best[1] if best else [0] * len(ops)
    off: frozenset = frozenset()
    kinds = sorted({op.kind for op in ops})
    while True:
        trials = [(res, off | {k}) for k in kinds if k not in off
                  for res in [_place(ops, R, profile, workload, off | {k})] if res is not None]
        if not trials:
            return best[1]
        res, cand = min(trials, key=lambda t: t[0][0])
        if res[0] >= best[0] * (1 - min_gain):
            return best[1]
        best, off = res, cand
