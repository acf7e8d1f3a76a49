"""`SplitEmbedding`: a token (or position) table whose rows [0, m_h) live in pinned host memory.

A lookup reads only the gathered rows, so host rows cost a few hundred bytes each over the
link. Host rows are read in place through a CUDA (UVA) view of the pinned buffer. Both halves
are gathered for every id with clamped indices and the right one is selected: no data-
dependent shapes, so it captures into CUDA graphs. For tied embeddings (OPT) the table is the
lm_head `SplitLinear`'s own parts.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from dak.nn.split_state import gather, load_rows, refuse_moves, unexpected


def device_view(t: torch.Tensor, device: torch.device) -> torch.Tensor:
    """A CUDA (UVA) view of pinned host tensor `t` on a GPU; `t` itself on the CPU or when empty."""
    if device.type != "cuda" or t.numel() == 0:
        return t
    from dak.baselines.linear import uva_view
    return uva_view(t)


class SplitEmbedding(nn.Module):
    """ids (...) int64 -> (..., dim) rows of cat(w_host, w_hbm), for ids in [0, rows)."""

    def __init__(self, w_host: torch.Tensor, w_hbm: torch.Tensor, owner: object | None = None):
        super().__init__()
        if w_host.shape[1:] != w_hbm.shape[1:] or w_host.dtype != w_hbm.dtype:
            raise ValueError(f"host and HBM parts must share (dim, dtype), got {tuple(w_host.shape)} "
                             f"{w_host.dtype} and {tuple(w_hbm.shape)} {w_hbm.dtype}")
        # keeps the pinned memory alive (a PinnedBuffer or SplitLinear); not a submodule
        self.__dict__["_owner"] = owner
        self.m_h = w_host.shape[0]
        self.num_embeddings = w_host.shape[0] + w_hbm.shape[0]
        self.embedding_dim = w_hbm.shape[1]
        self._w_host = w_host
        self.host_view = device_view(w_host, w_hbm.device)
        self.register_buffer("w_hbm", w_hbm, persistent=False)

    def release(self) -> None:
        """Drop this table's references to its pinned rows (see dak_free)."""
        self._w_host = self.host_view = None
        self.__dict__["_owner"] = None
        self.w_hbm = None

    @property
    def weight(self) -> torch.Tensor:
        """The whole table gathered on the device (a copy; for checks, not the hot path)."""
        return torch.cat([self._w_host.to(self.w_hbm.device), self.w_hbm])

    def _apply(self, fn, recurse=True):
        refuse_moves(self, fn, (self.w_hbm,))
        return self

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        """As nn.Embedding's key: `weight`, gathered into a CPU copy (see dak.nn.split_state)."""
        destination[prefix + "weight"] = gather(self._w_host, self.w_hbm, repr(self))

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                              unexpected_keys, error_msgs):
        """Copy `weight` rows into their homes in place (a tied table shares the lm_head's)."""
        load_rows(state_dict, prefix + "weight", (self._w_host, self.w_hbm), repr(self), missing_keys, error_msgs)
        if strict:
            unexpected(state_dict, prefix, ("weight",), unexpected_keys)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        if ids.device != self.w_hbm.device:  # a CPU index into the mapped host rows would fault on the GPU
            raise ValueError(f"token ids are on {ids.device}, the embedding on {self.w_hbm.device}: move them "
                             f"with ids.to({str(self.w_hbm.device)!r})")
        if self.m_h == 0:
            return F.embedding(ids, self.w_hbm)
        if self.m_h == self.num_embeddings:
            return F.embedding(ids, self.host_view)
        on_host = ids < self.m_h
        h = F.embedding(ids.clamp(max=self.m_h - 1), self.host_view)
        g = F.embedding((ids - self.m_h).clamp(min=0), self.w_hbm)
        return torch.where(on_host.unsqueeze(-1), h, g)

    def extra_repr(self) -> str:
        return f"{self.num_embeddings}, {self.embedding_dim}, host_rows={self.m_h}"
