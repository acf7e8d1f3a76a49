"""The streamed placement's search, priced by dak.planner.stream's chain model.

`streamed` places the embeddings' free bytes first (a lookup reads B rows), then spreads the
rest evenly over one set of linear kinds (every set is tried), at a share above the copy-engine
threshold; the HBM the copies stage (two slots, and prefill's largest part) counts against the
budget. `consolidated` (dak.planner.plan) keeps the fastest predicted of its kind-set search, the
uniform split and the best streamed placement.
"""

from __future__ import annotations

import heapq
import itertools

from .stream import STAGED_PARTS, uses_copy_engine

MAX_STREAM_KINDS = 10  # linear kinds tried exhaustively (2^10 sets); beyond, the largest ones


def staging_for(ops, host_bytes, parts: int = STAGED_PARTS) -> int:
    """HBM the copy engine stages (dak.runtime.offload.staging_bytes_for): `parts` (staged_parts)
    x the largest copy-engine host part."""
    sizes = [h for op, h in zip(ops, host_bytes) if uses_copy_engine(op, h)]
    return parts * max(sizes, default=0)


def _free_first(ops, R: int) -> tuple[list[int], int]:
    """Units per op placing embeddings (cheapest traffic per byte first) toward R; bytes left."""
    ks = [0] * len(ops)
    for i in sorted((i for i, op in enumerate(ops) if op.kind.startswith("embed") and op.bytes),
                    key=lambda i: ops[i].traffic / ops[i].bytes):
        if R <= 0:
            break
        op = ops[i]
        k = min(op.units, -(-R // op.unit_bytes)) if op.unit_bytes else 0
        ks[i] = k
        R -= op.host_bytes_for(k)
    return ks, max(0, R)


def _spread(ops, base: list[int], rest: int, kinds: frozenset, parts: int = STAGED_PARTS) -> list[int] | None:
    """`base` plus an even share of `rest` bytes (and the staging it needs) over the ops of `kinds`,
    every share above the copy-engine threshold (more than `rest` when that is thinner); None
    when they cannot hold it. Shares are floored to whole units, raised to the threshold, then
    topped up a unit at a time on the thinnest op."""
    idx = [i for i, op in enumerate(ops) if op.kind in kinds and op.bytes]
    cap = sum(ops[i].bytes for i in idx)
    biggest = max((ops[i].bytes for i in idx), default=0)
    if not idx or cap - parts * biggest <= 0:
        return None
    x = rest / (cap - parts * biggest)  # covers rest plus the staging of the largest host part
    if x > 1.0:
        return None
    ks = list(base)
    for i in idx:
        op = ops[i]
        ks[i] = min(op.units, int(x * op.bytes) // op.unit_bytes)
        while ks[i] < op.units and not uses_copy_engine(op, op.host_bytes_for(ks[i])):
            ks[i] += 1  # at least the copy-engine threshold: a thin share would be read in place
    host = sum(ops[i].host_bytes_for(ks[i]) for i in idx)
    top = max(ops[i].host_bytes_for(ks[i]) for i in idx)
    heap = [(ops[i].host_bytes_for(ks[i]) / ops[i].bytes, i) for i in idx if ks[i] < ops[i].units]
    heapq.heapify(heap)
    while host - parts * top < rest:
        if not heap:
            return None
        _, i = heapq.heappop(heap)
        op = ops[i]
        before = op.host_bytes_for(ks[i])
        ks[i] += 1
        after = op.host_bytes_for(ks[i])
        host, top = host + after - before, max(top, after)
        if ks[i] < op.units:
            heapq.heappush(heap, (after / op.bytes, i))
    return ks


def streamed(ops, R: int, profile, predict, parts: int = STAGED_PARTS) -> tuple[float, list[int]] | None:
    """(predicted step, units per op) of the fastest streamed placement holding R host bytes
    besides its staging (`parts` x its largest host part), or None when none exists.
    `predict(host_bytes)` -> predicted step."""
    base, rest = _free_first(ops, R)
    if rest <= 0:
        return predict([op.host_bytes_for(k) for op, k in zip(ops, base)]), base
    sizes: dict = {}
    for op in ops:
        if op.bytes and op.kind != "attention" and not op.kind.startswith("embed"):
            sizes[op.kind] = sizes.get(op.kind, 0) + op.bytes
    kinds = sorted(sizes, key=lambda k: -sizes[k])[:MAX_STREAM_KINDS]
    best = None
    for n in range(1, len(kinds) + 1):
        for combo in itertools.combinations(kinds, n):
            ks = _spread(ops, base, rest, frozenset(combo), parts)
            if ks is None:
                continue
            t = predict([op.host_bytes_for(k) for op, k in zip(ops, ks)])
            if best is None or t < best[0]:
                best = (t, ks)
    return best
