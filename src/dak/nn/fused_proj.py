"""Projections of one input multiplied as one matrix: q/k/v and gate/up, where all live in HBM.

A decode step at small batch is a chain of GEMVs, and a GEMV on a 4096-wide matrix reaches
only about 60% of HBM bandwidth on an H200 (13.5 us for 33.5 MB; an 8192x8192 one reaches
95%): launch, ramp-up and tail are paid per matrix. vLLM-style engines therefore store q/k/v
(and gate/up) as one matrix. dak keeps the HF module layout, so `ProjectionGroup` fuses at run
time instead: the members' HBM weights (and biases) become row views of one fused matrix, so
seeded filling and checkpoint streaming write into it unchanged, and the first member called
computes the product for all of them.

Only members wholly in HBM are fused (a member with host rows keeps its split kernel). Call
protocol: the first call with an input computes the fused product; each other member called
with that same input object takes its columns (a view) once; any other call (another input, a
member called twice) recomputes. So any call order is correct, and nothing is held once every
member has been served. The one thing it assumes is HF's: the input is not modified in place
between the members' calls.
"""

from __future__ import annotations

import torch
from torch import nn

from dak.host import device_matrix
from dak.kernels.hbm_gemv import hbm_linear
from dak.nn.split_linear import SplitLinear
from dak.planner.overhead import PROJECTION_GROUPS as GROUPS  # HF attribute names, call order


def why_not_fused(members) -> str | None:
    """Why `members` cannot be one ProjectionGroup, or None if they can."""
    if len(members) < 2:
        return f"a projection group needs at least two members, got {len(members)}"
    for m in members:
        if not isinstance(m, SplitLinear) or m.host_rows or m._group is not None:
            return f"only ungrouped all-HBM SplitLinears can be fused, got {m!r}"
    first = members[0]
    if any((m.in_features, m.dtype, m.w_hbm.device, m.bias is None)
           != (first.in_features, first.dtype, first.w_hbm.device, first.bias is None) for m in members):
        return "fused projections need one in_features, dtype, device and bias presence"
    return None


def stack(parts: list[torch.Tensor]) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """A fresh tensor holding `parts` back to back along dim 0 (matrices keep device_matrix's
    16-byte row stride), and one view of it per part."""
    first, rows = parts[0], sum(p.shape[0] for p in parts)
    out = (device_matrix(rows, first.shape[1], first.dtype, first.device) if first.dim() == 2
           else torch.empty(rows, dtype=first.dtype, device=first.device))
    views, lo = [], 0
    with torch.no_grad():
        for p in parts:
            views.append(out[lo:lo + p.shape[0]])
            views[-1].copy_(p)
            lo += p.shape[0]
    return out, views


class SharedProduct:
    """The call protocol of the module doc: one product per input object, each member served once."""

    def __init__(self, members: int):
        self._all = frozenset(range(members))
        self._x: torch.Tensor | None = None   # the input of the last product
        self._y = None                        # that product
        self._pending: set[int] = set()       # members that may still take their part of it

    def product(self, i: int, x: torch.Tensor, compute):
        if i in self._pending and self._x is x:
            y = self._y
            self._pending.discard(i)
        else:
            y = compute()
            self._pending = set(self._all - {i})
            self._x, self._y = x, y
        if not self._pending:
            self._x = self._y = None
        return y


class ProjectionGroup(SharedProduct):
    """One fused (sum of rows, in_features) HBM matrix standing for `members` (see the module doc)."""

    def __init__(self, members: list[SplitLinear]):
        super().__init__(len(members))
        reason = why_not_fused(members)
        if reason is not None:
            raise ValueError(reason)
        self.weight, weights = stack([m.w_hbm for m in members])
        self.bias, biases = stack([m.bias for m in members]) if members[0].bias is not None else (None, None)
        self.tune = all(m.tune for m in members)
        self.bounds: list[tuple[int, int]] = []
        lo = 0
        for i, m in enumerate(members):
            m.w_hbm = weights[i]  # the member's buffers are now views of the fused ones
            if biases is not None:
                m.bias = biases[i]
            m._group = (self, i)
            self.bounds.append((lo, lo + m.out_features))
            lo += m.out_features

    def output(self, i: int, x: torch.Tensor, x2: torch.Tensor) -> torch.Tensor:
        """Member i's (tokens, rows) output for input x (x2: x as (tokens, in_features))."""
        y = self.product(i, x, lambda: hbm_linear(x2, self.weight, self.bias, self.tune))
        a, b = self.bounds[i]
        return y[:, a:b]


def group_of(module: nn.Module, names: tuple[str, ...]) -> ProjectionGroup | None:
    """The ProjectionGroup whose members are exactly `module`'s `names`, in that order (its fused
    matrix is then their rows back to back), or None."""
    parts = [getattr(getattr(module, n, None), "_group", None) for n in names]
    group = parts[0][0] if parts[0] is not None else None
    if (not isinstance(group, ProjectionGroup) or len(group.bounds) != len(names)
            or any(p is None or p[0] is not group or p[1] != i for i, p in enumerate(parts))):
        return None
    return group


def fuse_projections(model: nn.Module) -> int:
    """Fuse every q/k/v and gate/up set of `model` whose members are all-HBM SplitLinears with one
    input width, dtype and bias presence; returns how many groups were fused."""
    n = 0
    for mod in model.modules():
        for names in GROUPS:
            members = [getattr(mod, name, None) for name in names]
            if why_not_fused(members) is None:
                ProjectionGroup(members)
                n += 1
    return n
