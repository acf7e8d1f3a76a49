"""End-to-end baselines as module swaps on a model that `dak.runtime.build.place` put in its homes.

- `UVASplit` (vLLM's --cpu-offload-gb): a `SplitLinear` whose rows all live in pinned host
  memory becomes torch's matmul on a CUDA (UVA) view of that memory: the whole weight is read
  in place over the host link every step.
- `LayerPrefetcher` + `PrefetchSplit` (vLLM/SGLang's prefetch offloader, FlexGen): each
  layer's host rows (of every linear in it) sit back to back in one pinned buffer. A forward
  pre-hook on layer l copies layer l+1's host rows, by the copy engine on a side stream, into
  one of two alternating HBM staging buffers and makes the main stream wait for layer l's own
  copy. With an even number of layers the copy of layer 0 for the next step is issued during
  the last layer (and joined at its end), so every copy overlaps one layer of compute and the
  whole step captures into one CUDA graph. Each split linear then computes its staged rows and
  its HBM rows with torch's matmul and concatenates the outputs.

Both take x (..., K) in the weight dtype and return (..., M). Without a GPU (Triton
interpreter tests) the copies are plain synchronous CPU copies and the math is the same.

With `fuse=True` (the comparison for dak's fused projections, dak.nn.fused_proj) the prefetch
baseline fuses too: a layer's q/k/v (gate/up) stage their host rows back to back, so
`PrefetchGroup` multiplies them as one staged matrix and their HBM rows as one fused HBM
matrix (two matmuls per group instead of two per member), then gives each member its columns.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from dak.host import PinnedBuffer
from dak.nn.fused_proj import GROUPS, SharedProduct, stack
from dak.nn.split_linear import SplitLinear
from dak.runtime.embedding import device_view


class UVASplit(nn.Module):
    """y = x @ W^T + b with all of W (M, K) in pinned host memory, read in place by cuBLAS."""

    def __init__(self, split: SplitLinear):
        super().__init__()
        if split.host_rows != split.out_features:
            raise ValueError(f"UVASplit needs every row on the host, got {split.host_rows} of {split.out_features}")
        self.__dict__["_owner"] = split  # keeps the pinned rows alive; not a submodule
        self._host = split._host  # freed by the backend's free()
        self.in_features, self.out_features = split.in_features, split.out_features
        self.weight_view = device_view(split.w_host, split.w_hbm.device)
        self.register_buffer("bias", split.bias, persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.weight_view, self.bias)


class PrefetchSplit(nn.Module):
    """A split linear whose host rows are read from its layer's HBM staging buffer."""

    def __init__(self, split: SplitLinear, staged: torch.Tensor):
        super().__init__()
        self.in_features, self.out_features = split.in_features, split.out_features
        self.m_h = split.host_rows
        self.register_buffer("w_hbm", split.w_hbm, persistent=False)
        self.register_buffer("staged", staged, persistent=False)
        b = split.bias
        self.register_buffer("bias_h", None if b is None else b[:self.m_h], persistent=False)
        self.register_buffer("bias_g", None if b is None else b[self.m_h:], persistent=False)
        self._group = None  # (PrefetchGroup, index) when fused with its siblings

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self._group is not None:
            return self._group[0].output(self._group[1], x)
        if self.m_h == 0:
            return F.linear(x, self.w_hbm, self.bias_g)
        y_h = F.linear(x, self.staged, self.bias_h)
        if self.m_h == self.out_features:
            return y_h
        return torch.cat([y_h, F.linear(x, self.w_hbm, self.bias_g)], dim=-1)


class PrefetchGroup(SharedProduct):
    """Sibling PrefetchSplits (q/k/v or gate/up of one layer) as one staged and one HBM matmul.

    staged: the members' staged rows, back to back in the layer's staging buffer, as one
    (sum of host rows, K) matrix. The members' HBM rows and biases become views of fused copies."""

    def __init__(self, members: list[PrefetchSplit], staged: torch.Tensor):
        super().__init__(len(members))
        self.staged = staged
        self.w_g, views = stack([m.w_hbm for m in members])
        has_bias = members[0].bias_g is not None
        self.b_h = stack([m.bias_h for m in members])[0] if has_bias else None
        self.b_g = stack([m.bias_g for m in members])[0] if has_bias else None
        self.cols = []  # per member: ((host a, b), (HBM a, b))
        h = g = 0
        for i, m in enumerate(members):
            m.w_hbm = views[i]
            m._group = (self, i)
            g_rows = m.out_features - m.m_h
            self.cols.append(((h, h + m.m_h), (g, g + g_rows)))
            h, g = h + m.m_h, g + g_rows
        self.out = [m.out_features for m in members]

    def output(self, i: int, x: torch.Tensor) -> torch.Tensor:
        x2 = x.reshape(-1, x.shape[-1])
        y_h, y_g = self.product(i, x, lambda: (
            F.linear(x2, self.staged, self.b_h) if self.staged.shape[0] else None,
            F.linear(x2, self.w_g, self.b_g) if self.w_g.shape[0] else None))
        (ha, hb), (ga, gb) = self.cols[i]
        parts = [y[:, a:b] for y, a, b in ((y_h, ha, hb), (y_g, ga, gb)) if b > a]
        y = parts[0] if len(parts) == 1 else torch.cat(parts, dim=-1)
        return y.reshape(*x.shape[:-1], self.out[i])


class LayerPrefetcher:
    """Double-buffered, one-layer-ahead copy of every layer's host rows (see the module doc).

    layers: per decoder layer, the (qualified name, SplitLinear) pairs placed in it. `install`
    swaps each SplitLinear for a `PrefetchSplit` and registers the hooks on `blocks` (the
    model's decoder layers, in order).
    """

    def __init__(self, layers: list[list[tuple[str, SplitLinear]]], device: torch.device, dtype: torch.dtype):
        self.device, self.n = device, len(layers)
        self.cuda = device.type == "cuda"
        self.sizes = [sum(s.host_rows * s.in_features for _, s in ops) for ops in layers]
        self.host = [PinnedBuffer((1, max(n, 1)), dtype) if n else None for n in self.sizes]
        self.stage = [torch.empty(max(self.sizes + [1]), dtype=dtype, device=device) for _ in range(2)]
        self.wrap = self.n % 2 == 0  # layer 0 can be staged during the last layer
        self.side = None
        if self.cuda:
            from dak.kernels.streams import side_stream
            self.side = side_stream(device, "layer-prefetch")
        self.ready = [torch.cuda.Event() if self.cuda else None for _ in range(self.n)]
        self.layers = layers
        self.staging_bytes = 2 * self.stage[0].numel() * self.stage[0].element_size()

    def install(self, model: nn.Module, blocks, fuse: bool = False) -> int:
        """Swap the splits and hook the blocks; with `fuse`, group siblings (PrefetchGroup).
        Returns the number of groups fused."""
        from dak.runtime.build import _set
        if len(blocks) != self.n:
            raise ValueError(f"{self.n} planned layers but the model has {len(blocks)} decoder layers")
        fused = 0
        for l, ops in enumerate(self.layers):
            off, placed = 0, {}
            for name, split in ops:
                rows = split.host_rows * split.in_features
                if rows:
                    self.host[l].tensor[0, off:off + rows].copy_(split.w_host.reshape(-1))
                staged = self.stage[l % 2][off:off + rows].view(split.host_rows, split.in_features)
                placed[name] = (PrefetchSplit(split, staged), off, rows)
                _set(model, name, placed[name][0])
                split._host.free()
                off += rows
            if fuse:
                fused += self._fuse(placed, self.stage[l % 2])
            blocks[l].register_forward_pre_hook(lambda mod, args, l=l: self._before(l))
        self.layers = []  # the swapped SplitLinears (and their pinned rows) can go now
        if self.wrap:
            blocks[-1].register_forward_hook(lambda mod, args, out: self._join())
            self._copy(0, sync=True)  # what the last layer of the previous step would have staged
        return fused

    @staticmethod
    def _fuse(placed: dict, stage: torch.Tensor) -> int:
        """Group the q/k/v and gate/up PrefetchSplits of one layer whose staged rows are back to back."""
        n = 0
        parents = {name.rpartition(".")[0] for name in placed}
        for parent in parents:
            for names in GROUPS:
                got = [placed.get(f"{parent}.{leaf}") for leaf in names]
                if any(g is None for g in got):
                    continue
                mods = [g[0] for g in got]
                same = {(m.in_features, m.bias_g is None) for m in mods}
                back_to_back = all(got[i][1] + got[i][2] == got[i + 1][1] for i in range(len(got) - 1))
                if len(same) != 1 or not back_to_back:
                    continue
                k = mods[0].in_features
                staged = stage[got[0][1]:got[0][1] + sum(g[2] for g in got)].view(-1, k)
                PrefetchGroup(mods, staged)
                n += 1
        return n

    def _copy(self, l: int, sync: bool = False) -> None:
        if not self.sizes[l]:
            return
        dst, src = self.stage[l % 2][:self.sizes[l]], self.host[l].tensor[0, :self.sizes[l]]
        if not self.cuda or sync:
            dst.copy_(src)
            return
        self.side.wait_stream(torch.cuda.current_stream(self.device))  # the buffer's previous layer is done
        with torch.cuda.stream(self.side):
            dst.copy_(src, non_blocking=True)
            self.ready[l].record(self.side)

    def _before(self, l: int) -> None:
        if not self.cuda:
            self._copy(l)
            return
        if l == 0 and not self.wrap:
            self._copy(0)
        nxt = l + 1 if l + 1 < self.n else (0 if self.wrap else None)
        if nxt is not None:
            self._copy(nxt)
        # with wrap, layer 0's copy was joined at the end of the previous step (in its own graph
        # replay): a wait here would be on an event recorded outside this capture
        if self.sizes[l] and not (l == 0 and self.wrap):
            torch.cuda.current_stream(self.device).wait_event(self.ready[l])

    def _join(self) -> None:
        if self.cuda and self.sizes[0]:
            torch.cuda.current_stream(self.device).wait_event(self.ready[0])

    def free(self) -> None:
        for buf in self.host:
            if buf is not None:
                buf.free()
        self.host, self.stage = [], []
