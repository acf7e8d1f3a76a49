"""Pick split-attention launch configs by a short timed sweep, cached in memory and on disk.

Coordinate descent from `heuristic_config`, one knob at a time (copy-engine share and chunks
when staging exists, host program cap, host load path, key tile, pipeline depth, warps, HBM splits, HBM load path), each candidate timed by
CUDA-graph replay. It runs before first use for a (GPU, dtype, host requests, HBM requests,
kv heads, group, max_len, head_dim) key and never inside CUDA graph capture. The disk cache
lives in $DAK_CACHE_DIR (default ~/.cache/dak)/split_attention.json.
"""

from __future__ import annotations

from dataclasses import replace

import torch

from dak.kernels.attention_config import MAX_SPLITS, AttentionConfig, finalize, heuristic_config
from dak.kernels.config_cache import ConfigCache, Runs, as_runs, time_or_inf

CACHE: ConfigCache[AttentionConfig] = ConfigCache("split_attention", AttentionConfig, AttentionConfig.to_dict)


def tune_key(gpu: str, dtype: torch.dtype, b_h: int, b_g: int, kv_heads: int, group: int,
             max_len: int, head_dim: int, staging: bool) -> str:
    return (f"{gpu}|{str(dtype).removeprefix('torch.')}|bh{b_h}|bg{b_g}|hkv{kv_heads}|g{group}"
            f"|s{max_len}|d{head_dim}|st{int(staging)}")


def _knobs(b_h: int, b_g: int, tma_ok: bool, staging: bool):
    """Knobs in sweep order; each maps the best config so far to (candidate, keep_splits) pairs."""
    knobs = []
    if b_h and staging:
        knobs.append(lambda c: [(replace(c, ce_share=x), True) for x in (0.0, 0.5, 1.0)])
        knobs.append(lambda c: [(replace(c, ce_chunks=n), True) for n in (1, 2, 4, 8)])
    if b_h:
        knobs.append(lambda c: [(replace(c, host_programs=p), False) for p in (8, 16, 32)])
        if tma_ok:
            knobs.append(lambda c: [(replace(c, host_tma=not c.host_tma), True)])
    knobs.append(lambda c: [(replace(c, block_n=n), False) for n in (32, 64, 128)])
    knobs.append(lambda c: [(replace(c, num_stages=s), True) for s in (2, 3, 4)])
    knobs.append(lambda c: [(replace(c, num_warps=w), True) for w in (4, 8)])
    if b_g:
        knobs.append(lambda c: [(replace(c, hbm_splits=min(MAX_SPLITS, max(1, int(c.hbm_splits * f)))), True)
                                for f in (0.5, 2)])
        if tma_ok:
            knobs.append(lambda c: [(replace(c, hbm_tma=not c.hbm_tma), True)])
    return knobs


def sweep(run: Runs, b_h: int, b_g: int, kv_heads: int, group: int,
          max_len: int, head_dim: int, sms: int, tma_ok: bool, staging: bool = False
          ) -> tuple[AttentionConfig, list[tuple[dict, float]]]:
    """Coordinate-descent sweep; `run(cfg)` launches once (a list of such: the same launch over
    different buffers, rotated so that the timing misses L2). Returns (best, [(config, ms)])."""
    if torch.cuda.is_current_stream_capturing():
        raise RuntimeError("split-attention tuning cannot run inside CUDA graph capture; "
                           "call prepare_decode() before capturing")
    seen: dict[AttentionConfig, float] = {}
    runs = as_runs(run)

    def measure(cfg: AttentionConfig, keep: bool) -> tuple[AttentionConfig, float]:
        cfg = finalize(cfg, b_h, b_g, kv_heads, max_len, sms, keep_splits=keep)
        if cfg not in seen:
            seen[cfg] = time_or_inf(*[lambda r=r: r(cfg) for r in runs])
        return cfg, seen[cfg]

    best, best_t = measure(heuristic_config(b_h, b_g, kv_heads, group, max_len, head_dim, sms, staging), True)
    for knob in _knobs(b_h, b_g, tma_ok, staging):
        for cand, keep in knob(best):
            cand, t = measure(cand, keep)
            if t < best_t * 0.99:
                best, best_t = cand, t
    return best, [(c.to_dict(), t) for c, t in seen.items()]


def get_or_tune(key: str, run: Runs, b_h: int, b_g: int,
                kv_heads: int, group: int, max_len: int, head_dim: int, sms: int, tma_ok: bool,
                tune: bool, staging: bool = False) -> AttentionConfig:
    """The cached config for `key`, else a swept one (tune=True, saved to disk) or the heuristic."""
    hit = CACHE.get(key)
    if hit is not None:
        return hit
    if tune:
        cfg, _ = sweep(run, b_h, b_g, kv_heads, group, max_len, head_dim, sms, tma_ok, staging)
    else:
        cfg = heuristic_config(b_h, b_g, kv_heads, group, max_len, head_dim, sms, staging)
    CACHE.put(key, cfg, persist=tune)
    return cfg
