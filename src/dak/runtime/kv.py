"""The model's KV state under dak: per-layer split KV caches and the "dak" HF attention function.

The planner may give each layer its own number of host requests; layers with the same count
share one `SplitKVCache` (layers are looked up by `module.layer_idx`). All caches read one
`lengths` tensor (tokens cached per request, int32 on the device), which the engine advances
inside the captured decode step, so every layer sees the same positions.

`dak_attention` has transformers' AttentionInterface signature. It is registered as "dak";
models run with `config._attn_implementation = "dak"` and get `dak_kv=<DakKV>` through the
forward's kwargs (HF's own cache is not used: `use_cache=False`). With one query token per
request it appends the new K/V to the cache and runs split decode attention; with more it is a
right-padded prefill (torch SDPA on the prompt, K/V written to their homes).
"""

from __future__ import annotations

import torch

from dak.kv_cache import SplitKVCache

ATTN_NAME = "dak"
ROTARY_PENDING = "_dak_rotary_pending"  # on a decode query: (cos, sin) still to apply (dak.runtime.fused)


class DakKV:
    """Split KV caches for `layers` layers; `host_requests[l]` requests of layer l on the host."""

    def __init__(self, host_requests: list[int], batch: int, max_len: int, kv_heads: int, head_dim: int,
                 dtype: torch.dtype, device: torch.device, staging: bool = True, on_pinned=None):
        if len(host_requests) == 0:
            raise ValueError("need at least one layer")
        self.batch, self.max_len, self.device = batch, max_len, device
        self.where: list[tuple[SplitKVCache, int]] = []
        self.caches: dict[int, SplitKVCache] = {}
        groups: dict[int, list[int]] = {}
        for layer, b_h in enumerate(host_requests):
            groups.setdefault(int(b_h), []).append(layer)
        local: dict[int, int] = {}
        for b_h, layers in groups.items():
            self.caches[b_h] = SplitKVCache(len(layers), batch, max_len, kv_heads, head_dim, dtype,
                                            host_requests=b_h, device=device,
                                            staging_requests=b_h if staging and device.type == "cuda" else 0,
                                            on_pinned=on_pinned)
            for i, layer in enumerate(layers):
                local[layer] = i
        self.where = [(self.caches[int(b_h)], local[layer]) for layer, b_h in enumerate(host_requests)]
        self.lengths = torch.zeros(batch, dtype=torch.int32, device=device)
        self.ahead: dict | None = None  # layer -> dak.runtime.kv_ahead.Link, when linked
        self.prompt_lengths: torch.Tensor | None = None  # of the requests being prefilled
        self.prefill_first = 0  # the first request being prefilled (prefill runs in request chunks)

    @property
    def host_bytes(self) -> int:
        return sum(c.host_bytes for c in self.caches.values())

    @property
    def hbm_bytes(self) -> int:
        return sum(c.hbm_bytes for c in self.caches.values())

    def set_copy_rows(self, rows: int | None) -> None:
        """Decode attention copies positions [0, rows) of staged host requests (None: all);
        the caller promises no length exceeds rows while it is set."""
        for cache in self.caches.values():
            cache.copy_rows = None if rows is None or rows >= self.max_len else rows

    def prepare(self, q_heads: int, tune: bool) -> None:
        """Plan and compile decode attention and cache writes (before any graph capture)."""
        from dak.nn.split_attention import prepare_decode
        for cache in self.caches.values():
            prepare_decode(cache, q_heads, self.batch, tune=tune)

    def free(self) -> None:
        for cache in self.caches.values():
            cache.free()
        self.caches, self.where, self.ahead = {}, [], None
        self.freed = True


def dak_attention(module, query, key, value, attention_mask=None, scaling=None, dropout=0.0,
                  dak_kv: DakKV | None = None, **kwargs):
    """AttentionInterface function: returns (attn_output (B, L, Hq, D), None)."""
    from dak.nn.split_attention import prefill_attention, split_decode_attention
    from dak.runtime import kv_ahead
    if dak_kv is None:
        raise ValueError("the 'dak' attention needs dak_kv=<DakKV> in the model call; run the model "
                         "through dak.runtime.Engine")
    if dropout:
        raise ValueError("dak attention is inference-only; dropout must be 0")
    cache, layer = dak_kv.where[module.layer_idx]
    window = kwargs.get("sliding_window")  # HF's (Mistral; Qwen2/Qwen3 sliding layers): None for full attention
    rot = query.__dict__.pop(ROTARY_PENDING, None)  # q and k left unrotated by dak.runtime.fused
    if rot is not None:
        if query.shape[2] != 1:
            raise RuntimeError("dak: a deferred rotary embedding reached a prefill; this is a bug in dak")
        query, key = cache.append_rotated(layer, query, key, value, *rot, lengths=dak_kv.lengths)
    if query.shape[2] == 1:
        k_new, v_new = key[:, :, 0], value[:, :, 0]
        if rot is None:
            cache.append(layer, k_new, v_new, lengths=dak_kv.lengths, validate=False)
        step = kv_ahead.current(dak_kv, module.layer_idx)
        ahead = None if step is None else step.attention_args(module.layer_idx, k_new, v_new)
        # the kernel takes the query's batch and head strides: a q sliced out of a fused q/k/v product
        # (dak.runtime.fused_opt) is read where it lies, not copied by a launch of its own
        q = query if query.stride(-1) == 1 else query.contiguous()
        out = split_decode_attention(q, cache, layer, lengths=dak_kv.lengths, scale=scaling, ahead=ahead,
                                     window=window)
    else:
        # the Engine checked the prompts against max_len (check_prompts): no device sync per layer
        out = prefill_attention(query, key.contiguous(), value.contiguous(), cache, layer,
                                dak_kv.prompt_lengths, scale=scaling, first=dak_kv.prefill_first, validate=False,
                                window=window)
    return out.transpose(1, 2).contiguous(), None


def register() -> None:
    """Register "dak" with transformers' attention interface (idempotent)."""
    from transformers import AttentionInterface
    AttentionInterface.register(ATTN_NAME, dak_attention)
