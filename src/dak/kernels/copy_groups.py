"""Copy groups for copy-ahead: consecutive chained operators' host rows moved by one memcpy.

The prefetch baseline copies each layer's host rows in one copy; dak's chain copies each
operator's rows separately (six or seven copies per layer). With $DAK_COPY_GROUP_MIB = G > 0
(an experiment; default 0, off), `link_chain` groups consecutive chained operators whose whole
host part goes through the copy engine, up to G MiB per group, re-homes each group's host rows
into one pinned arena in call order (once, at link time, before any capture), and the step
copies a group with one memcpy into one staging slot; each operator then reads its rows at its
offset in the slot. Every host byte still crosses the link once.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from dak.host import PinnedBuffer


class _Arena:
    """One pinned buffer shared by several operators' host rows; freed with its last view."""

    def __init__(self, numel: int, dtype: torch.dtype, views: int):
        self.buf = PinnedBuffer((1, numel), dtype)
        self.buf.tensor.zero_()
        self.flat = self.buf.tensor[0]
        self.refs = views


class ArenaView:
    """An operator's host rows inside an `_Arena` (what `SplitLinear._host` holds after
    re-homing): `tensor` is the (rows, in_features) view with the operator's padded row stride."""

    def __init__(self, arena: _Arena, offset: int, rows: int, stride: int, cols: int):
        self.arena, self.offset = arena, offset
        self.tensor = arena.flat[offset:offset + rows * stride].view(rows, stride)[:, :cols]
        self.nbytes = rows * stride * self.tensor.element_size()
        self.pinned, self.method = arena.buf.pinned, arena.buf.method

    def free(self) -> None:
        if self.tensor is None:
            return
        self.tensor = None
        self.arena.refs -= 1
        if self.arena.refs == 0:
            self.arena.buf.free()


@dataclass(frozen=True)
class Group:
    """Operators copied together: the flat host source, and each member's element offset."""
    members: tuple
    src: torch.Tensor       # flat view of the members' host rows, contiguous, in order
    offsets: tuple[int, ...]
    numel: int


def _numel(mod) -> int:
    return mod.host_rows * mod.w_host.stride(0)


def _adjacent(mods) -> bool:
    es = mods[0].w_host.element_size()
    return all(b.w_host.data_ptr() == a.w_host.data_ptr() + _numel(a) * es for a, b in zip(mods, mods[1:]))


def _rehome(mods) -> None:
    """Move `mods`' host rows into one arena, in order (values kept, old buffers freed)."""
    arena = _Arena(sum(_numel(m) for m in mods), mods[0].dtype, len(mods))
    off = 0
    for m in mods:
        view = ArenaView(arena, off, m.host_rows, m.w_host.stride(0), m.in_features)
        view.tensor.copy_(m.w_host)
        old, m._host = m._host, view
        old.free()
        off += _numel(m)


def _groupable(mod, plan) -> bool:
    return plan.m_ce == mod.host_rows and mod.host_rows > 0


def plan_groups(chain, limit_bytes: int) -> list[list[int]]:
    """Indices of `chain` ((mod, cfg, plan), in call order) split into groups: runs of
    consecutive groupable operators of one dtype up to `limit_bytes` (0: every operator alone)."""
    groups: list[list[int]] = []
    size, open_ok = 0, False
    for i, (mod, _, plan) in enumerate(chain):
        nbytes = _numel(mod) * mod.w_host.element_size()
        ok = bool(limit_bytes) and _groupable(mod, plan)
        if ok and open_ok and chain[groups[-1][-1]][0].dtype == mod.dtype and size + nbytes <= limit_bytes:
            groups[-1].append(i)
            size += nbytes
        else:
            groups.append([i])
            size, open_ok = nbytes, ok
    return groups


def make_group(mods) -> Group | None:
    """A Group for `mods` (re-homed into one arena unless they already sit back to back there),
    or None for a single operator, or for operators already re-homed apart (a captured graph
    may hold their addresses: they are never moved twice)."""
    if len(mods) < 2:
        return None
    arena = getattr(mods[0]._host, "arena", None)
    if not (_adjacent(mods) and arena is not None
            and all(isinstance(m._host, ArenaView) and m._host.arena is arena for m in mods)):
        # not back to back in one arena (separate pinned buffers can sit back to back by
        # chance, with no single flat view over them: they are re-homed all the same)
        if any(isinstance(m._host, ArenaView) for m in mods):
            return None
        _rehome(mods)
    first = mods[0]._host
    base = first.arena.flat
    total = sum(_numel(m) for m in mods)
    offsets, off = [], 0
    for m in mods:
        offsets.append(off)
        off += _numel(m)
    return Group(tuple(mods), base[first.offset:first.offset + total], tuple(offsets), total)
