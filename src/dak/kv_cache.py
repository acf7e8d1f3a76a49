"""`SplitKVCache`: a static KV cache split by request between pinned host memory and HBM.

For each layer, K and V of requests [0, host_requests) live in an exact-size pinned host buffer
(`dak.host.PinnedBuffer`, 16-byte aligned rows) and those of requests [host_requests, batch)
in HBM. Each side is a contiguous (requests, kv_heads, max_len, head_dim) tensor, so one
(request, kv head) is max_len x head_dim consecutive elements: long contiguous reads over the
host link, and a 2-D (rows, head_dim) view for TMA.

Writes (`append`, `write`, `write_prompt`) are one Triton launch each that stores every request's
tokens straight into its home; positions come from device tensors, so they are capturable in
CUDA graphs. `lengths` is an int32 device tensor the caller advances (e.g. `lengths += 1` at
the start of a decode step, then `append` and attention for every layer).
"""

from __future__ import annotations

from typing import Callable

import torch

from dak.host import PinnedBuffer
from dak.kernels.attention_checks import check_lengths
from dak.kernels.attention_config import HEAD_DIMS
from dak.runtime_env import KERNEL_DTYPES, kernel_device


def _capturing() -> bool:
    return torch.cuda.is_available() and torch.cuda.is_current_stream_capturing()


class SplitKVCache:
    """K/V for `layers` x `batch` requests x `max_len` tokens, requests [0, host_requests) on the host.

    k_host(l), v_host(l): (host_requests, kv_heads, max_len, head_dim) pinned CPU tensors.
    k_hbm(l), v_hbm(l): (batch - host_requests, kv_heads, max_len, head_dim) HBM tensors.
    lengths: (batch,) int32 on the device, zeros at first. Contents start uninitialised;
    kernels never read past a request's length. staging_requests > 0 adds one layer's worth of
    HBM staging (k, v) for that many host requests, which lets decode attention move host K/V
    with the copy engine (`AttentionConfig.ce_share`). on_pinned(nbytes) is called after each
    layer's pinned buffer (a progress bar).
    """

    def __init__(self, layers: int, batch: int, max_len: int, kv_heads: int, head_dim: int,
                 dtype: torch.dtype = torch.bfloat16, host_requests: int = 0,
                 device: torch.device | str | None = None, staging_requests: int = 0,
                 on_pinned: Callable[[int], None] | None = None):
        for name, val, lo in (("layers", layers, 1), ("batch", batch, 1), ("max_len", max_len, 1),
                              ("kv_heads", kv_heads, 1), ("host_requests", host_requests, 0),
                              ("staging_requests", staging_requests, 0)):
            if isinstance(val, bool) or not isinstance(val, int) or val < lo:
                raise ValueError(f"{name} must be an integer >= {lo}, got {val!r}")
        if host_requests > batch or staging_requests > host_requests:
            raise ValueError(f"need staging_requests ({staging_requests}) <= host_requests ({host_requests}) "
                             f"<= batch ({batch}); host_requests cannot exceed batch")
        if head_dim not in HEAD_DIMS:
            raise ValueError(f"head_dim {head_dim} is not supported; use one of {HEAD_DIMS}")
        if dtype not in KERNEL_DTYPES:
            raise ValueError(f"dtype {dtype} is not supported; use torch.bfloat16 or torch.float16")
        self.device = torch.device(device) if device is not None else kernel_device()
        self.layers, self.batch, self.max_len = layers, batch, max_len
        self.kv_heads, self.head_dim, self.dtype = kv_heads, head_dim, dtype
        self.host_requests = host_requests
        side = (kv_heads, max_len, head_dim)
        per_layer = host_requests * kv_heads * max_len
        self._host = []
        for _ in range(layers):  # on_pinned(bytes) after each layer's buffer (a progress bar)
            self._host.append(PinnedBuffer((2 * per_layer, head_dim), dtype))
            if on_pinned is not None and per_layer:
                on_pinned(2 * per_layer * head_dim * self._host[-1].tensor.element_size())
        self._k_host = [buf.tensor[:per_layer].view(host_requests, *side) for buf in self._host]
        self._v_host = [buf.tensor[per_layer:].view(host_requests, *side) for buf in self._host]
        self._hbm = torch.empty((layers, 2, batch - host_requests, *side), dtype=dtype, device=self.device)
        self.lengths = torch.zeros(batch, dtype=torch.int32, device=self.device)
        # HBM staging for the copy-engine path, shared by all layers (they run one after another)
        self.staging = tuple(torch.empty((staging_requests, *side), dtype=dtype, device=self.device)
                             for _ in range(2)) if staging_requests else None
        self.configs: dict = {}  # launch configs planned for this cache (see dak.nn.split_attention)
        # decode attention's copy-engine path copies positions [0, copy_rows) of each staged
        # request (None: all max_len); set by whoever knows no length exceeds it (dak's Engine)
        self.copy_rows: int | None = None

    # ----- the parts -----
    def k_host(self, layer: int) -> torch.Tensor:
        return self._k_host[self._layer(layer)]

    def v_host(self, layer: int) -> torch.Tensor:
        return self._v_host[self._layer(layer)]

    def k_hbm(self, layer: int) -> torch.Tensor:
        return self._hbm[self._layer(layer), 0]

    def v_hbm(self, layer: int) -> torch.Tensor:
        return self._hbm[self._layer(layer), 1]

    def parts(self, layer: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """(k_host, v_host, k_hbm, v_hbm) of one layer, in the kernel's argument order."""
        return self.k_host(layer), self.v_host(layer), self.k_hbm(layer), self.v_hbm(layer)

    @property
    def host_bytes(self) -> int:
        return sum(buf.nbytes for buf in self._host)

    @property
    def hbm_bytes(self) -> int:
        return self._hbm.numel() * self._hbm.element_size()

    @property
    def pinned(self) -> bool:
        return all(buf.pinned for buf in self._host)

    def _layer(self, layer: int) -> int:
        if isinstance(layer, bool) or not isinstance(layer, int) or not 0 <= layer < self.layers:
            raise ValueError(f"layer must be an integer in [0, {self.layers}), got {layer!r}")
        return layer

    # ----- writes -----
    def _check_src(self, name: str, t: torch.Tensor, dims: int) -> None:
        want = "(batch, kv_heads, head_dim)" if dims == 3 else "(batch, kv_heads, tokens, head_dim)"
        if t.dim() != dims or t.shape[1] != self.kv_heads or t.shape[-1] != self.head_dim:
            raise ValueError(f"{name} must be {want} with kv_heads={self.kv_heads} and "
                             f"head_dim={self.head_dim}, got {tuple(t.shape)}")
        if t.shape[0] > self.batch:
            raise ValueError(f"{name} has {t.shape[0]} requests but the cache holds {self.batch}")
        if t.dtype != self.dtype:
            raise ValueError(f"{name} has dtype {t.dtype}; the cache stores {self.dtype} (use .to({self.dtype}))")
        if t.device != self.device:
            raise ValueError(f"{name} is on {t.device}; the cache's device is {self.device}")
        if t.stride(-1) != 1:
            raise ValueError(f"{name} needs a contiguous head_dim axis (strides {t.stride()}); call .contiguous()")

    def write(self, layer: int, k: torch.Tensor, v: torch.Tensor, start: torch.Tensor | None = None,
              count: torch.Tensor | None = None, shift: int = 0, validate: bool = True, first: int = 0) -> None:
        """Store tokens k, v (Bs, Hkv, L, D) of requests [first, first + Bs) at positions
        start[b] + shift + t, t < count[b] (all L tokens when count is None; start 0 when None;
        start/count index the Bs given requests). Capturable; `validate` (eager only, a device
        sync) checks that the positions fit in max_len."""
        from dak.kernels.kv_write import kv_write
        layer = self._layer(layer)
        self._check_src("k", k, 4)
        self._check_src("v", v, 4)
        if k.shape != v.shape:
            raise ValueError(f"k and v shapes differ: {tuple(k.shape)} vs {tuple(v.shape)}")
        bs, n_tok = k.shape[0], k.shape[2]
        if isinstance(first, bool) or not isinstance(first, int) or first < 0 or first + bs > self.batch:
            raise ValueError(f"requests [{first}, {first} + {bs}) do not fit the cache's batch {self.batch}")
        validate = validate and not _capturing()
        for name, t in (("start", start), ("count", count)):
            if t is not None:
                check_lengths(t, bs, self.max_len, self.device, validate=False, name=name)
        if validate and bs:
            lo = shift + (0 if start is None else int(start[:bs].min()))
            n = torch.full((bs,), n_tok, device=self.device) if count is None else count[:bs].clamp(max=n_tok)
            last = (n + shift + (0 if start is None else start[:bs])).max()
            if lo < 0 or int(last) > self.max_len:
                raise ValueError(f"writing positions [{lo}, {int(last)}) does not fit the cache's "
                                 f"max_len {self.max_len}; build the cache with a larger max_len")
        kv_write(k, v, *self._request_parts(layer, first, bs), start, count, shift)

    def _request_parts(self, layer: int, first: int, count: int):
        """parts() of requests [first, first + count): host requests come first, then HBM ones."""
        kh, vh, kg, vg = self.parts(layer)
        if first == 0 and count == self.batch:
            return kh, vh, kg, vg
        b_h = kh.shape[0]
        h0, h1 = min(first, b_h), min(first + count, b_h)
        g0, g1 = max(first - b_h, 0), max(first + count - b_h, 0)
        return kh[h0:h1], vh[h0:h1], kg[g0:g1], vg[g0:g1]

    def append(self, layer: int, k_new: torch.Tensor, v_new: torch.Tensor,
               lengths: torch.Tensor | None = None, validate: bool = True) -> None:
        """Store the decode token k_new, v_new (Bs, Hkv, D) of each request at position lengths[b] - 1.

        `lengths` (default `self.lengths`) counts the tokens including this one, the same
        tensor decode attention then reads."""
        self._check_src("k_new", k_new, 3)
        self._check_src("v_new", v_new, 3)
        lengths = self.lengths if lengths is None else lengths
        if validate and not _capturing() and k_new.shape[0]:
            check_lengths(lengths, k_new.shape[0], self.max_len, self.device, validate=True)
            if int(lengths[:k_new.shape[0]].min()) < 1:
                raise ValueError("append needs lengths >= 1 (they count the new token); "
                                 "advance the lengths before appending")
        self.write(layer, k_new.unsqueeze(2), v_new.unsqueeze(2), lengths, None, shift=-1, validate=False)

    def append_rotated(self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cos: torch.Tensor,
                       sin: torch.Tensor, norms=None, lengths: torch.Tensor | None = None):
        """Rotate the decode token's q and k (HF's rotary embedding) and append k and v as `append`
        does, in one launch (dak.kernels.rotary_append); q, k, v are (Bs, H, 1, D); `norms`: (q weight,
        k weight, eps) RMS-norms q and k over each head vector first. Returns the rotated (q, k).
        Capturable; lengths are not validated."""
        from dak.kernels.rotary_append import rotary_append
        self._check_src("k", k, 4)
        self._check_src("v", v, 4)
        lengths = self.lengths if lengths is None else lengths
        check_lengths(lengths, k.shape[0], self.max_len, self.device, validate=False)
        return rotary_append(q, k, v, cos, sin, *self._request_parts(self._layer(layer), 0, k.shape[0]), lengths,
                             norms)

    def prepare_writes(self) -> None:
        """Compile the append kernel now (a launch that stores nothing), so that a first append
        inside CUDA graph capture does not compile there."""
        zeros = torch.zeros(self.batch, self.kv_heads, 1, self.head_dim, dtype=self.dtype, device=self.device)
        no_len = torch.zeros(self.batch, dtype=torch.int32, device=self.device)  # position -1: masked
        self.write(0, zeros, zeros, no_len, None, shift=-1, validate=False)

    def write_prompt(self, layer: int, k: torch.Tensor, v: torch.Tensor,
                     prompt_lengths: torch.Tensor | None = None, validate: bool = True, first: int = 0) -> None:
        """Store prompts k, v (Bs, Hkv, L, D) of requests [first, first + Bs) at positions
        [0, prompt_lengths[b]) (right padding beyond a request's prompt length is not stored; all
        L tokens when None)."""
        self.write(layer, k, v, None, prompt_lengths, validate=validate, first=first)

    def gather(self, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
        """K, V of every request as (batch, Hkv, max_len, D) copies on the device (for checks)."""
        kh, vh, kg, vg = self.parts(layer)
        return (torch.cat([kh.to(self.device), kg]), torch.cat([vh.to(self.device), vg]))

    def free(self) -> None:
        for buf in self._host:
            buf.free()
        self._host, self._k_host, self._v_host, self._hbm = [], [], [], None
