"""Decode-attention baselines, each over the same cache layout as dak's kernel.

- `SDPAAttention` ("torch"): all K/V in HBM, torch's scaled_dot_product_attention with one
  query token per request (B, Hq, 1, D) and `enable_gqa` for GQA/MQA (no repeated K/V). With
  every request at full length no mask is passed, so the flash and cuDNN paths qualify; with
  per-request lengths a boolean key mask is passed (flash cannot take one: efficient or math
  run). `backend` pins one path ("flash", "efficient", "cudnn", "math"); the benchmark times
  each and keeps the fastest.
- `PrefetchAttention` ("prefetch"): host requests' K/V copied by the copy engine into an HBM
  staging buffer on a side stream while the HBM requests are attended; then the staged ones.
  Attention itself is dak's kernel in its all-HBM form (flash-decoding), or SDPA.
- `UVAAttention` ("uva"): the whole cache in pinned host memory, read in place by SDPA through
  a CUDA (UVA) view, as vLLM's CPU offload reads offloaded tensors.

All take q (B, Hq, D) and lengths (int32, (B,) on the device, or None for full length) and
return (B, Hq, D) in q's dtype.
"""

from __future__ import annotations

from contextlib import nullcontext

import torch
import torch.nn.functional as F

from dak.baselines.linear import uva_view
from dak.kernels.attention_config import heuristic_config
from dak.kernels.split_attention import split_attention
from dak.runtime_env import sm_count


def sdpa_backends() -> dict:
    from torch.nn.attention import SDPBackend
    return {"flash": SDPBackend.FLASH_ATTENTION, "efficient": SDPBackend.EFFICIENT_ATTENTION,
            "cudnn": SDPBackend.CUDNN_ATTENTION, "math": SDPBackend.MATH}


def sdpa_decode(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, lengths: torch.Tensor | None = None,
                backend: str | None = None, scale: float | None = None) -> torch.Tensor:
    """Decode attention with torch SDPA: q (B, Hq, D) over k/v (B', Hkv, S, D), B <= B'.

    lengths None means every request has all S keys (no mask); otherwise keys >= lengths[b]
    are masked out (a request of length 0 then gives NaN, as SDPA does).
    """
    bq, s = q.shape[0], k.shape[2]
    k, v = k[:bq], v[:bq]
    mask = None
    if lengths is not None:
        mask = (torch.arange(s, device=q.device)[None, :] < lengths[:bq, None])[:, None, None, :]
    if backend is None:
        ctx = nullcontext()
    else:
        from torch.nn.attention import sdpa_kernel
        ctx = sdpa_kernel([sdpa_backends()[backend]])
    with ctx:
        out = F.scaled_dot_product_attention(q.unsqueeze(2), k, v, attn_mask=mask, scale=scale,
                                             enable_gqa=q.shape[1] != k.shape[1])
    return out.squeeze(2)


class SDPAAttention:
    """All K/V (B, Hkv, S, D) in HBM; torch SDPA (optionally one pinned backend)."""

    name = "torch"

    def __init__(self, k: torch.Tensor, v: torch.Tensor, backend: str | None = None):
        self.k, self.v, self.backend = k, v, backend

    def __call__(self, q: torch.Tensor, lengths: torch.Tensor | None = None) -> torch.Tensor:
        return sdpa_decode(q, self.k, self.v, lengths, self.backend)


def _empty_side(like: torch.Tensor) -> torch.Tensor:
    return torch.empty((0, *like.shape[1:]), dtype=like.dtype)


class DakHBMAttention:
    """dak's kernel with the whole (B, Hkv, S, D) K/V in HBM (flash-decoding), planned once."""

    def __init__(self, k: torch.Tensor, v: torch.Tensor, q_heads: int, config=None):
        b, kv_heads, s, d = k.shape
        self.k, self.v, self.none = k, v, _empty_side(k)
        self.cfg = config or heuristic_config(0, b, kv_heads, q_heads // kv_heads, s, d, sm_count(k.device))

    def __call__(self, q: torch.Tensor, lengths: torch.Tensor, out: torch.Tensor | None = None):
        return split_attention(q, self.none, self.none, self.k, self.v, lengths, self.cfg, out=out,
                               validate=False)


class PrefetchAttention:
    """Host requests' K/V staged into HBM by the copy engine, overlapped with the HBM requests."""

    name = "prefetch"

    def __init__(self, k_host: torch.Tensor, v_host: torch.Tensor, k_hbm: torch.Tensor,
                 v_hbm: torch.Tensor, q_heads: int, staging: tuple | None = None, use_sdpa: bool = False):
        self.b_h = k_host.shape[0]
        self.k_host, self.v_host = k_host, v_host
        if staging is None:
            staging = tuple(torch.empty(t.shape, dtype=t.dtype, device=k_hbm.device) for t in (k_host, v_host))
        self.k_stage, self.v_stage = staging
        self.use_sdpa = use_sdpa
        self.attend_g = DakHBMAttention(k_hbm, v_hbm, q_heads) if k_hbm.shape[0] else None
        self.attend_h = DakHBMAttention(self.k_stage, self.v_stage, q_heads) if self.b_h else None
        self.side = torch.cuda.Stream(device=k_hbm.device)
        self.copied = torch.cuda.Event()

    def _attend(self, part, q, lengths, out):
        if self.use_sdpa:
            out.copy_(sdpa_decode(q, part.k, part.v, lengths))
        else:
            part(q, lengths, out)

    def __call__(self, q: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(q)
        b_h = min(self.b_h, q.shape[0])
        main = torch.cuda.current_stream()
        if b_h:
            self.side.wait_stream(main)
            with torch.cuda.stream(self.side):
                self.k_stage.copy_(self.k_host, non_blocking=True)
                self.v_stage.copy_(self.v_host, non_blocking=True)
                self.copied.record(self.side)
        if q.shape[0] > b_h:
            self._attend(self.attend_g, q[b_h:], lengths[b_h:], out[b_h:])
        if b_h:
            main.wait_event(self.copied)
            self._attend(self.attend_h, q[:b_h], lengths[:b_h], out[:b_h])
        return out


class UVAAttention:
    """The whole cache (B, Hkv, S, D) in pinned host memory, read in place by torch SDPA."""

    name = "uva"

    def __init__(self, k_pinned: torch.Tensor, v_pinned: torch.Tensor, backend: str | None = None):
        self._source = (k_pinned, v_pinned)  # keeps the pinned memory alive
        self.k, self.v = (uva_view(t.reshape(-1, t.shape[-1])).view(t.shape) for t in (k_pinned, v_pinned))
        self.backend = backend

    def __call__(self, q: torch.Tensor, lengths: torch.Tensor | None = None) -> torch.Tensor:
        return sdpa_decode(q, self.k, self.v, lengths, self.backend)


BASELINES = {"torch": SDPAAttention, "prefetch": PrefetchAttention, "uva": UVAAttention}
