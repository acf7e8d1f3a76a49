"""SDPA-shaped entry points over a `SplitKVCache`: decode attention, prefill, and an HF adapter.

- `split_decode_attention(query, cache, layer, lengths)`: one new token per request, exact
  attention over the cache with the split kernel (host requests read in place from pinned memory).
- `prefill_attention(query, key, value, cache, layer)`: the prompt's own attention runs with
  torch SDPA on the prompt K/V already in HBM, while the K/V are written to their home in the
  cache (on a side stream when the cache has host requests).
- `hf_attention_forward`: the transformers AttentionInterface signature, for HF attention modules.

Launch configs are planned per (batch, query heads) with `prepare_decode` before first use
(tuned or heuristic), never inside CUDA graph capture: there an unprepared shape is an error.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from dak.kernels.attention_checks import check_window
from dak.kernels.attention_config import AttentionConfig
from dak.kernels.streams import side_stream
from dak.kv_cache import SplitKVCache
from dak.runtime_env import gpu_name, sm_count

def _capturing() -> bool:
    return torch.cuda.is_available() and torch.cuda.is_current_stream_capturing()


def prepare_decode(cache: SplitKVCache, q_heads: int, batch: int | None = None, tune: bool = False,
                   config: AttentionConfig | None = None) -> AttentionConfig:
    """Plan (and compile) decode attention for `batch` requests (default all) and `q_heads`.

    `config` pins a launch config; otherwise a cached or swept one (tune=True, on a GPU) or the
    heuristic. Must run outside CUDA graph capture.
    """
    from dak.kernels.attention_config import finalize
    from dak.kernels.attention_tuning import get_or_tune, tune_key
    from dak.kernels.split_attention import tma_view
    from dak.kernels.split_attention_ce import split_attention_ce
    batch = cache.batch if batch is None else batch
    if not 0 < batch <= cache.batch:
        raise ValueError(f"batch must be in [1, {cache.batch}] (the cache's requests), got {batch}")
    if q_heads < 1 or q_heads % cache.kv_heads:
        raise ValueError(f"query heads ({q_heads}) must be a positive multiple of the cache's kv heads "
                         f"({cache.kv_heads}) for GQA/MQA")
    if _capturing():
        raise RuntimeError(f"decode attention for batch {batch} and {q_heads} query heads was not "
                           f"prepared before CUDA graph capture; call prepare_decode(cache, {q_heads}, "
                           f"{batch}) or run it once outside capture first")
    b_h = min(batch, cache.host_requests)
    b_g = batch - b_h
    group = q_heads // cache.kv_heads
    sms = sm_count(cache.device)
    q = torch.randn(batch, q_heads, cache.head_dim, device=cache.device).to(cache.dtype)
    lengths = torch.full((batch,), cache.max_len, dtype=torch.int32, device=cache.device)
    parts = cache.parts(0)

    def run(cfg, lens=lengths, parts=parts):
        return split_attention_ce(q, *parts, lens, cfg, sms, cache.staging, validate=False)

    if config is not None:
        cfg = finalize(config, b_h, b_g, cache.kv_heads, cache.max_len, sms, keep_splits=True)
    else:
        tma_ok = all(t.numel() == 0 or tma_view(t) is not None for t in parts)
        staging = cache.staging is not None and cache.staging[0].shape[0] >= b_h
        key = tune_key(gpu_name(cache.device), cache.dtype, b_h, b_g, cache.kv_heads, group,
                       cache.max_len, cache.head_dim, staging)
        tune = tune and cache.device.type == "cuda"
        runs = [lambda c, p=p: run(c, parts=p) for p in _rotated_parts(cache)] if tune else run
        cfg = get_or_tune(key, runs, b_h, b_g, cache.kv_heads, group, cache.max_len, cache.head_dim,
                          sms, tma_ok, tune, staging)
        del runs
    run(cfg, torch.zeros_like(lengths))  # compile, outside capture
    cache.prepare_writes()
    cache.configs[(batch, q_heads)] = cfg
    return cfg


def _rotated_parts(cache: SplitKVCache) -> list[tuple[torch.Tensor, ...]]:
    """Cache parts for a tuning sweep whose HBM reads miss L2: other layers' parts first, then
    clones of layer 0's HBM parts, until the HBM parts make L2_MISS_BYTES (dak.kernels.timing);
    host parts are read over the link, not through L2, and are shared."""
    from dak.kernels.timing import L2_MISS_BYTES, l2_copies
    kh, vh, kg, vg = cache.parts(0)
    per_layer = 2 * kg.numel() * kg.element_size()
    want = min(8, max(1, -(-L2_MISS_BYTES // max(1, per_layer))))
    sets = [cache.parts(layer) for layer in range(min(want, cache.layers))]
    if len(sets) < want and kg.numel():
        sets += [(kh, vh, k, v) for k, v in l2_copies((kg, vg), L2_MISS_BYTES - len(sets) * per_layer,
                                                      want - len(sets) + 1)[1:]]
    return sets


def split_decode_attention(query: torch.Tensor, cache: SplitKVCache, layer: int,
                           lengths: torch.Tensor | None = None, scale: float | None = None,
                           out: torch.Tensor | None = None, ahead=None, window: int | None = None) -> torch.Tensor:
    """softmax(scale * q K^T) V over each request's first lengths[b] cached tokens.

    query: (B, Hq, D) or SDPA's (B, Hq, 1, D), bf16/fp16 on the cache's device, B <= cache.batch;
    lengths: (>= B,) int32 on the device (default `cache.lengths`); scale: default 1/sqrt(D).
    Returns a tensor shaped like `query` (written into `out` when given, shaped like query).
    ahead: the staged requests' copy queued earlier (dak.runtime.kv_ahead; see split_attention_ce).
    window: attend only each request's last `window` keys (HF's `sliding_window`); None for all.
    """
    from dak.kernels.split_attention_ce import split_attention_ce
    sdpa_shaped = query.dim() == 4
    if sdpa_shaped:
        if query.shape[2] != 1:
            raise ValueError(f"decode attention takes one query token per request, got query shape "
                             f"{tuple(query.shape)}; use prefill_attention for prompts")
        query = query.squeeze(2)
        out = None if out is None else out.squeeze(2)
    if query.dim() != 3:
        raise ValueError(f"query must be (B, Hq, D) or (B, Hq, 1, D), got {tuple(query.shape)}")
    bq, hq = query.shape[:2]
    cfg = cache.configs.get((bq, hq))
    if cfg is None:
        cfg = prepare_decode(cache, hq, bq)
    lengths = cache.lengths if lengths is None else lengths
    y = split_attention_ce(query, *cache.parts(layer), lengths, cfg, sm_count(cache.device), cache.staging,
                           scale=scale, out=out, rows=cache.copy_rows, ahead=ahead, window=window)
    return y.unsqueeze(2) if sdpa_shaped else y


def prefill_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, cache: SplitKVCache,
                      layer: int, prompt_lengths: torch.Tensor | None = None, scale: float | None = None,
                      is_causal: bool = True, first: int = 0, validate: bool = True,
                      window: int | None = None) -> torch.Tensor:
    """Causal prompt attention with torch SDPA on key/value in HBM, storing them into the cache.

    query (B, Hq, L, D), key/value (B, Hkv, L, D) on the cache's device, prompts right-padded to
    L, are requests [first, first + B) of the cache; only the first prompt_lengths[b] tokens
    (all L when None) are stored. Outputs at padded positions are not meaningful. Returns
    (B, Hq, L, D). `validate=False` skips the cache's position check (a device sync per call;
    for callers that checked the prompt lengths against max_len once, as dak's Engine does).
    `window`: each position attends only its last `window` keys (itself included; HF's
    `sliding_window`), through an explicit mask where the prompt is longer than the window.
    """
    if query.dim() != 4 or key.dim() != 4 or query.shape[2] != key.shape[2]:
        raise ValueError(f"query (B, Hq, L, D) and key (B, Hkv, L, D) must share B and L, got "
                         f"{tuple(query.shape)} and {tuple(key.shape)}")
    if query.shape[1] % key.shape[1]:
        raise ValueError(f"query heads ({query.shape[1]}) must be a multiple of kv heads ({key.shape[1]})")
    gqa = query.shape[1] != key.shape[1]
    mask = sliding_mask(query.shape[2], check_window(window), query.device) if is_causal else None
    causal = is_causal and mask is None
    overlap = cache.device.type == "cuda" and cache.host_requests > 0
    if not overlap:
        cache.write_prompt(layer, key, value, prompt_lengths, validate=validate, first=first)
        return F.scaled_dot_product_attention(query, key, value, attn_mask=mask, is_causal=causal, scale=scale,
                                              enable_gqa=gqa)
    main = torch.cuda.current_stream(cache.device)
    side = side_stream(cache.device, "prefill")
    side.wait_stream(main)
    with torch.cuda.stream(side):  # host writes cross the link while SDPA runs
        cache.write_prompt(layer, key, value, prompt_lengths, validate=validate, first=first)
    out = F.scaled_dot_product_attention(query, key, value, attn_mask=mask, is_causal=causal, scale=scale,
                                         enable_gqa=gqa)
    main.wait_stream(side)  # joined: key/value stay alive and ordered for the allocator
    return out


def sliding_mask(length: int, window: int, device: torch.device) -> torch.Tensor | None:
    """(length, length) bool mask of causal attention within a sliding window (key j of query i where
    i - window < j <= i, HF's rule), or None where the window covers every prompt position."""
    if not window or length <= window:
        return None
    i = torch.arange(length, device=device)
    d = i[:, None] - i[None, :]
    return (d >= 0) & (d < window)


def hf_attention_forward(module, query, key, value, attention_mask=None, scaling=None, dropout=0.0,
                         dak_cache: SplitKVCache | None = None, prompt_lengths=None, **kwargs):
    """transformers' AttentionInterface signature: returns (output (B, L, Hq, D), None).

    Register with `AttentionInterface.register("dak", hf_attention_forward)` and pass
    `dak_cache=` through the model call (no HF past_key_values). The caller sets
    `dak_cache.lengths` before each forward (prompt lengths for prefill; += 1 per decode step);
    `module.layer_idx` picks the layer. One token per request (L = 1) is decode: append, then
    split attention; longer L is a right-padded prefill. Causal masking (within HF's `sliding_window`
    when the module passes one); `attention_mask` is ignored (padding is expressed by the lengths).
    """
    if dak_cache is None:
        raise ValueError("hf_attention_forward needs dak_cache=<SplitKVCache> in the model call")
    if dropout:
        raise ValueError("split attention is inference-only; dropout must be 0")
    layer, window = module.layer_idx, kwargs.get("sliding_window")
    if query.shape[2] == 1:
        dak_cache.append(layer, key[:, :, 0], value[:, :, 0])
        out = split_decode_attention(query, dak_cache, layer, scale=scaling, window=window)
    else:
        out = prefill_attention(query, key, value, dak_cache, layer, prompt_lengths, scale=scaling, window=window)
    return out.transpose(1, 2).contiguous(), None
