"""Fewer, larger host parts when every split operator costs a fixed excess.

The greedy spreads the host share over every operator that can hide it (the roofline's
optimum). Measured end to end, each split operator also costs a fixed excess (launches, the
copy engine's start-up, host KV staging; ``dak.planner.overhead``), so spreading thin can lose
to concentrating. `consolidate` keeps some operator kinds (all q_proj, all attention, ...)
entirely in HBM and re-solves the greedy over the rest, choosing the set of kinds that
minimizes the predicted step (the plan passes dak.planner.stream's chain model; the ranking
of kind sets below uses sum_i T_i(x_i) + overheads).

The search is exhaustive over kind sets (2^kinds, at most 2^MAX_EXHAUSTIVE_KINDS): a
one-kind-at-a-time descent gets stuck where no single kind helps but several together do
(OPT-6.7B at x = 5%: attention and the four attention projections only pay off together).
Each set is scored on the continuous solution with identical operators (same kind and shape
in every layer) solved as one class, then the best few and every set scored within
EXACT_MARGIN of the best are placed exactly (whole units). A
placement is taken only when it beats the greedy's by more than `min_gain`; a profile without
per-operator overheads therefore keeps the greedy's placement.

Where dak.planner.stream.exact_search holds (decode of more than 64 tokens; $DAK_CONSOLIDATE_EXACT=1/0
forces it) and a `predict` is given (decode: the chain model), every kind set is placed exactly
and judged by `predict`, not only the continuous ranking's best few. The ranking prices host parts
by the roofline read in place, the chain model as copied ahead, so its best few can miss the chain
model's best: on `h100-sxm`, Llama-2-7B at batch 512 and 5% the exact search predicts 25.25 against
25.89 ms (measured on an H100, forty-third session: 24.6 against 26.1 ms; at 20% 94.9 against 103.0).
It costs 1-3 s a plan on 2 CPU cores (2^kinds placements; 0.1-0.5 s without it).
"""

from __future__ import annotations

import dataclasses
import itertools

from .cost import op_time, segments
from .greedy import fill_by_slope, round_to_units, solve_continuous
from .overhead import split_overhead
from .stream import exact_search

MAX_EXHAUSTIVE_KINDS = 14  # beyond: one kind at a time (descent)
EXACT_CANDIDATES = 4       # best-scored kind sets always placed exactly
EXACT_MARGIN = 0.05        # ... and every set scored within this of the best (the score is continuous:
EXACT_MAX = 64             # rounding to whole units moves it by a few percent), at most EXACT_MAX


def _place(ops, R: int, profile, off: frozenset, predict, memo: dict | None = None):
    """(predict(host bytes), units per op) with kinds `off` kept in HBM, or None when the other
    operators cannot hold R bytes. `memo`: round_to_units' cache, shared by one search's calls."""
    idx = [i for i, op in enumerate(ops) if op.kind not in off]
    sub = [ops[i] for i in idx]
    if sum(op.bytes for op in sub) < R:
        return None
    xs, _ = solve_continuous(sub, R, profile)
    ks = [0] * len(ops)
    for i, k in zip(idx, round_to_units(sub, xs, R, profile, memo)):
        ks[i] = k
    host = [op.host_bytes_for(k) for op, k in zip(ops, ks)]
    if sum(host) < R:
        return None
    return predict(host), ks


def _classes(ops, profile):
    """Identical operators (equal but for name and layer) as [(representative, count, segments)]."""
    groups: dict = {}
    for op in ops:
        key = dataclasses.replace(op, name="", layer=None)
        groups.setdefault(key, [op, 0])[1] += 1
    return [(rep, m, [(s.slope, s.length * m) for s in segments(rep, 0, profile)]) for rep, m in groups.values()]


def _score(classes, R: int, profile, workload, off: frozenset) -> float | None:
    """Continuous predicted time with kinds `off` in HBM; equal slopes share in proportion to
    their length, as in `solve_continuous` (identical operators get identical shares)."""
    live = [c for c in classes if c[0].kind not in off]
    if sum(rep.bytes * m for rep, m, _ in live) < R:
        return None
    segs = sorted((slope, ci, length) for ci, (_, _, ss) in enumerate(live) for slope, length in ss)
    h = fill_by_slope(segs, float(R), len(live))
    total = 0.0
    for (rep, m, _), hc in zip(live, h):
        per = hc / m
        total += m * (op_time(rep, min(1.0, per / rep.bytes) if rep.bytes else 0.0, profile)
                      + split_overhead([rep], [per], workload, profile))
    return total + sum(m * op_time(rep, 0.0, profile) for rep, m, _ in classes if rep.kind in off)


def _descent(ops, R, profile, kinds, best, min_gain, predict):
    off: frozenset = frozenset()
    while True:
        trials = [(res, off | {k}) for k in kinds if k not in off
                  for res in [_place(ops, R, profile, off | {k}, predict)] if res is not None]
        if not trials:
            return best[1]
        res, cand = min(trials, key=lambda t: t[0][0])
        if res[0] >= best[0] * (1 - min_gain):
            return best[1]
        best, off = res, cand


def consolidate(ops, R: int, profile, workload, min_gain: float = 0.005, predict=None) -> list[int]:
    """Host units per operator (see the module doc). `predict(host bytes per op)`: the step time a
    placement is judged by (default: operator times plus split overheads, as `_score` ranks)."""
    exact = predict is not None and exact_search(workload)
    if predict is None:
        def predict(host):
            t = sum(op_time(op, h / op.bytes if op.bytes else 0.0, profile) for op, h in zip(ops, host))
            return t + split_overhead(ops, host, workload, profile)
    greedy = _place(ops, R, profile, frozenset(), predict)
    if R <= 0 or greedy is None:
        return greedy[1] if greedy else [0] * len(ops)
    kinds = sorted({op.kind for op in ops})
    if len(kinds) > MAX_EXHAUSTIVE_KINDS:
        return _descent(ops, R, profile, kinds, greedy, min_gain, predict)
    if exact:  # every kind set placed exactly (all kinds off cannot hold R: _place says None)
        sets = [frozenset(off) for n in range(1, len(kinds)) for off in itertools.combinations(kinds, n)]
        return _best_of(ops, R, profile, sets, greedy, min_gain, predict)
    classes = _classes(ops, profile)
    scored = []
    for n in range(1, len(kinds) + 1):
        for off in itertools.combinations(kinds, n):
            s = _score(classes, R, profile, workload, frozenset(off))
            if s is not None:
                scored.append((s, frozenset(off)))
    scored.sort(key=lambda t: (t[0], sorted(t[1])))
    near = [c for i, c in enumerate(scored)
            if i < EXACT_CANDIDATES or c[0] <= scored[0][0] * (1 + EXACT_MARGIN)][:EXACT_MAX]
    return _best_of(ops, R, profile, [off for _, off in near], greedy, min_gain, predict)


def _best_of(ops, R: int, profile, sets, greedy, min_gain: float, predict) -> list[int]:
    """Units of the best exact placement of the kind sets `sets` kept in HBM, if it beats the
    greedy's (predict, units) by more than `min_gain`; else the greedy's."""
    best, memo = greedy, {}
    for off in sets:
        res = _place(ops, R, profile, off, predict, memo)
        if res is not None and res[0] < best[0]:
            best = res
    return best[1] if best[0] < greedy[0] * (1 - min_gain) else greedy[1]
