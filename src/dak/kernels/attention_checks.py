"""Input checks of the split decode-attention launcher: every error says what to do instead."""

from __future__ import annotations

import torch

from dak.kernels.attention_config import HEAD_DIMS
from dak.runtime_env import KERNEL_DTYPES, interpreting


def _check_side(name: str, t: torch.Tensor, kv_heads: int, max_len: int, head_dim: int,
                dtype: torch.dtype, host: bool, device: torch.device) -> None:
    if t.dim() != 4 or tuple(t.shape[1:]) != (kv_heads, max_len, head_dim):
        raise ValueError(f"{name} must be (requests, {kv_heads}, {max_len}, {head_dim}) like the other "
                         f"cache parts, got {tuple(t.shape)}")
    if t.dtype != dtype:
        raise ValueError(f"{name} has dtype {t.dtype} but the query is {dtype}; cast the query "
                         f"(query.to({t.dtype})) or build the cache in {dtype}")
    if t.numel() and t.stride(3) != 1:
        raise ValueError(f"{name} must have a contiguous last (head_dim) axis, got strides {t.stride()}")
    if not t.numel():
        return
    if host:
        if t.device.type != "cpu":
            raise ValueError(f"{name} must be in pinned host memory, got a tensor on {t.device}")
        if not interpreting() and not t.is_pinned():
            raise ValueError(f"{name} is pageable host memory; the GPU reads only pinned memory in place. "
                             "Allocate it with dak.kv_cache.SplitKVCache or dak.host.PinnedBuffer")
    elif t.device != device:
        raise ValueError(f"{name} is on {t.device} but the query is on {device}; "
                         "HBM cache parts must be on the query's device")


def check_lengths(lengths: torch.Tensor, batch: int, max_len: int, device: torch.device,
                  validate: bool, name: str = "lengths") -> None:
    """`lengths` must be an int32 (>= batch,) tensor on `device`; with `validate`, its first
    `batch` values are read back (a device sync) and must lie in [0, max_len]."""
    if lengths.dim() != 1 or lengths.shape[0] < batch:
        raise ValueError(f"{name} must be a 1-D tensor with at least {batch} entries (one per request), "
                         f"got shape {tuple(lengths.shape)}")
    if lengths.dtype != torch.int32:
        raise ValueError(f"{name} must be torch.int32, got {lengths.dtype}; use {name}.to(torch.int32)")
    if lengths.device != device:
        raise ValueError(f"{name} is on {lengths.device}; move it to {device} (the query's device)")
    if validate and batch:
        lo, hi = (int(x) for x in torch.aminmax(lengths[:batch]))
        if lo < 0 or hi > max_len:
            raise ValueError(f"{name} must lie in [0, {max_len}] (the cache's max length), got values in "
                             f"[{lo}, {hi}]; build the cache with a larger max_len")


def check_attention_args(q, k_host, v_host, k_hbm, v_hbm, lengths, out, validate: bool):
    """Validate launcher inputs; return (Bq, Hq, D, B_H, Hkv, S). Raises ValueError saying what to fix."""
    if q.dim() != 3:
        raise ValueError(f"query must be (batch, q_heads, head_dim) for decode, got shape {tuple(q.shape)}")
    if q.dtype not in KERNEL_DTYPES:
        raise ValueError(f"query has dtype {q.dtype}; split attention supports torch.bfloat16 and torch.float16")
    if q.stride(2) != 1:
        raise ValueError(f"query must have a contiguous head_dim axis (strides {q.stride()}); "
                         "call query.contiguous()")
    if not interpreting() and q.device.type != "cuda":
        raise ValueError(f"query must be on the GPU, got {q.device}")
    bq, hq, d = q.shape
    if d not in HEAD_DIMS:
        raise ValueError(f"head_dim {d} is not supported; use one of {HEAD_DIMS}")
    if k_hbm.dim() != 4 or k_host.dim() != 4:
        raise ValueError("cache parts must be 4-D (requests, kv_heads, max_len, head_dim), got "
                         f"{tuple(k_host.shape)} and {tuple(k_hbm.shape)}")
    _, kv_heads, s, dk = k_hbm.shape
    if dk != d:
        raise ValueError(f"the cache has head_dim {dk} but the query {d}")
    if kv_heads < 1 or hq % kv_heads:
        raise ValueError(f"query heads ({hq}) must be a positive multiple of the cache's kv heads "
                         f"({kv_heads}) for GQA/MQA")
    for name, t, host in (("k_host", k_host, True), ("v_host", v_host, True),
                          ("k_hbm", k_hbm, False), ("v_hbm", v_hbm, False)):
        _check_side(name, t, kv_heads, s, d, q.dtype, host, q.device)
    b_h, b = k_host.shape[0], k_host.shape[0] + k_hbm.shape[0]
    if v_host.shape[0] != b_h or v_hbm.shape[0] != k_hbm.shape[0]:
        raise ValueError("K and V cache parts must hold the same requests")
    if bq > b:
        raise ValueError(f"query batch {bq} exceeds the cache's {b} requests; build a larger cache "
                         "or split the batch")
    check_lengths(lengths, bq, s, q.device, validate)
    if out is not None and (tuple(out.shape) != (bq, hq, d) or out.dtype != q.dtype
                            or out.device != q.device or out.stride(2) != 1):
        raise ValueError(f"out must be a ({bq}, {hq}, {d}) {q.dtype} tensor on {q.device} with a "
                         f"contiguous last axis, got {tuple(out.shape)} {out.dtype} on {out.device}")
    return bq, hq, d, b_h, kv_heads, s


def check_window(window) -> int:
    """A sliding window as the kernel takes it: a positive key count, or 0 for none (None, 0)."""
    if window is None:
        return 0
    if isinstance(window, bool) or not isinstance(window, int) or window < 0:
        raise ValueError(f"window must be a positive number of keys (or None/0 for full attention), got {window!r}")
    return window
