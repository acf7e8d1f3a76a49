"""Projection sets as the runtime runs them all in HBM: one fused product per q/k/v or gate/up set.

The operator curves time each linear alone. All in HBM, the runtime multiplies a decoder layer's
q/k/v (and gate/up) set as one matrix (dak.nn.fused_proj), and that one launch reads HBM faster
than its members one by one: a profile whose x = 0 points are the members alone overstates the
all-HBM step (seventeenth session, H200, Llama-2-7B: operators 140.0 us a layer against a
measured step of 118.9 us, so the measured layer overhead clamped to 0) and prices a member's
first host rows as nearly free, while they cost the set its fusion.

`fusion_sets` finds the sets of one layer (CPU); calibrate times each set's fused product
(`time_fused`, GPU) and `fused_results` turns those times into
- one curve per member shape under `dak.planner.curves.fused_key`: the shape's own points with
  x = 0 replaced by the member's byte share of the fused time, and
- ``unfused_op_overhead_s``: (members' times alone - fused time) / (members - 1), the mean over
  sets -- what `dak.planner.overhead.fusion_overhead` charges per extra launch once a member
  holds host rows.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..measured import Curve
from ..planner.curves import FUSED_SUFFIX, PROJECTION_GROUPS, linear_tokens, op_key


def has_bias(op, dtype_bytes: int) -> bool:
    """Whether a linear operator's rows carry a bias element (its row bytes exceed K weights)."""
    return (op.unit_bytes // op.unit_rows) // dtype_bytes != op.shape[1]


@dataclass(frozen=True)
class FusionSet:
    """One layer's projection set: member kinds, their shape keys and rows, the shared k."""
    kinds: tuple[str, ...]
    keys: tuple[str, ...]
    rows: tuple[int, ...]
    k: int
    n: int
    bias: bool

    @property
    def m(self) -> int:
        return sum(self.rows)


def fusion_sets(ops, dtype_bytes: int) -> tuple[FusionSet, ...]:
    """The projection sets of the first decoder layer of `ops` with >= 2 members."""
    layers = [op.layer for op in ops if op.layer is not None]
    if not layers:
        return ()
    first = {op.kind: op for op in ops if op.layer == min(layers)}
    out = []
    for group in PROJECTION_GROUPS:
        members = [first[k] for k in group if k in first and first[k].shape is not None]
        if len(members) < 2 or len({op.shape[1] for op in members}) != 1:
            continue
        out.append(FusionSet(tuple(op.kind for op in members), tuple(op_key(op) for op in members),
                             tuple(op.shape[0] for op in members), members[0].shape[1],
                             linear_tokens(members[0]), any(has_bias(op, dtype_bytes) for op in members)))
    return tuple(out)


def fused_results(sets, fused_times, curves) -> tuple[list[Curve], float | None]:
    """(fused-key curves, unfused_op_overhead_s or None) from each set's fused time (seconds, None
    where it failed) and the members' own curves (by key; a set missing one is skipped)."""
    table = {c.key: c for c in curves}
    made: dict[str, Curve] = {}
    extras = []
    for fs, t in zip(sets, fused_times):
        if t is None or any(key not in table for key in fs.keys):
            continue
        alone = [dict(table[key].points).get(0.0) for key in fs.keys]
        if any(a is None for a in alone):
            continue
        extras.append(max(0.0, (sum(alone) - t) / (len(fs.keys) - 1)))
        for key, rows in zip(fs.keys, fs.rows):
            share = t * rows / fs.m
            pts = tuple((x, share if x == 0.0 else y) for x, y in table[key].points)
            note = f"{table[key].note}; x = 0: its share of the fused {'/'.join(fs.kinds)} product ({fs.m}x{fs.k})"
            made.setdefault(key + FUSED_SUFFIX, Curve(key + FUSED_SUFFIX, pts, note))
    return list(made.values()), (sum(extras) / len(extras) if extras else None)


def time_fused(fs: FusionSet, dtype: str, tile_rows: int, tune: bool) -> float:
    """GPU: seconds of the set's fused product all in HBM, timed as the curves' x = 0 points are."""
    from .linear import LinearShape
    shape = LinearShape(fs.m, fs.k, fs.n, fs.bias, dtype, tile_rows, tune)
    try:
        return shape.time_point(0).time_s
    finally:
        del shape
