"""Write new K/V tokens into a split KV cache, each request straight to its home.

One launch covers every request: programs of host requests store into pinned host memory
(GPU threads write over the host link), the others into HBM. Positions and counts come from
device tensors, so the launch is capturable in a CUDA graph (no host reads of data).

    dst[b, h, start_b + t, :] = src[b, h, t, :]   for t < min(count_b, L), 0 <= start_b + t < S

src: (Bs, Hkv, L, D) any strides with a contiguous last axis; dst sides: (B_H, Hkv, S, D) host
and (B - B_H, Hkv, S, D) HBM; start/count: (>= Bs,) int32 on the source's device; start is
shifted by `shift` (append passes the lengths after the new token and shift = -1).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from dak.kernels.attention_config import next_pow2


@triton.jit
def _kv_write_kernel(
    k_ptr, v_ptr, start_ptr, count_ptr, kh_ptr, vh_ptr, kg_ptr, vg_ptr,
    B_H, KV_HEADS, L, MAX_LEN, shift,
    stride_kb, stride_kh, stride_kl, stride_vb, stride_vh, stride_vl,
    stride_hb, stride_hh, stride_hs, stride_gb, stride_gh, stride_gs,
    HAS_START: tl.constexpr, HAS_COUNT: tl.constexpr, BLOCK_L: tl.constexpr, HEAD_DIM: tl.constexpr,
):
    pid = tl.program_id(0)
    b = pid // KV_HEADS
    h = pid % KV_HEADS
    offs_t = tl.program_id(1) * BLOCK_L + tl.arange(0, BLOCK_L)
    offs_d = tl.arange(0, HEAD_DIM)
    start = shift
    if HAS_START:
        start += tl.load(start_ptr + b)
    n = L
    if HAS_COUNT:
        n = tl.minimum(tl.load(count_ptr + b), L)
    pos = start + offs_t
    mask = ((offs_t < n) & (pos >= 0) & (pos < MAX_LEN))[:, None]
    src_k = k_ptr + b.to(tl.int64) * stride_kb + h * stride_kh + offs_t[:, None].to(tl.int64) * stride_kl
    src_v = v_ptr + b.to(tl.int64) * stride_vb + h * stride_vh + offs_t[:, None].to(tl.int64) * stride_vl
    k = tl.load(src_k + offs_d[None, :], mask=mask)
    v = tl.load(src_v + offs_d[None, :], mask=mask)
    if b < B_H:
        off = b.to(tl.int64) * stride_hb + h * stride_hh + pos[:, None].to(tl.int64) * stride_hs + offs_d[None, :]
        tl.store(kh_ptr + off, k, mask=mask)
        tl.store(vh_ptr + off, v, mask=mask)
    else:
        off = ((b - B_H).to(tl.int64) * stride_gb + h * stride_gh + pos[:, None].to(tl.int64) * stride_gs
               + offs_d[None, :])
        tl.store(kg_ptr + off, k, mask=mask)
        tl.store(vg_ptr + off, v, mask=mask)


def store_sides(k_host, v_host, k_hbm, v_hbm):
    """(kh, vh, kg, vg) for a store kernel: an empty side is replaced by the other (its programs
    never address it, but the launch needs valid pointers and strides)."""
    kh, vh = (k_host, v_host) if k_host.shape[0] else (k_hbm, v_hbm)
    kg, vg = (k_hbm, v_hbm) if k_hbm.shape[0] else (kh, vh)
    return kh, vh, kg, vg


def kv_write(k: torch.Tensor, v: torch.Tensor, k_host: torch.Tensor, v_host: torch.Tensor,
             k_hbm: torch.Tensor, v_hbm: torch.Tensor, start: torch.Tensor | None,
             count: torch.Tensor | None, shift: int = 0) -> None:
    """Store src tokens k, v (Bs, Hkv, L, D) into the split cache (see the module docstring).

    Shapes, dtypes and placement are checked by the caller (`SplitKVCache`); K and V sides
    must share their strides.
    """
    bs, kv_heads, n_tok, d = k.shape
    if bs == 0 or n_tok == 0 or kv_heads == 0:
        return
    b_h = k_host.shape[0]
    s = k_hbm.shape[2]
    kh, vh, kg, vg = store_sides(k_host, v_host, k_hbm, v_hbm)
    block_l = min(64, max(4, next_pow2(n_tok)))  # extra rows are masked
    grid = (bs * kv_heads, triton.cdiv(n_tok, block_l))
    _kv_write_kernel[grid](
        k, v, start if start is not None else k, count if count is not None else k,
        kh, vh, kg, vg, b_h, kv_heads, n_tok, s, shift,
        k.stride(0), k.stride(1), k.stride(2), v.stride(0), v.stride(1), v.stride(2),
        *kh.stride()[:3], *kg.stride()[:3],
        HAS_START=start is not None, HAS_COUNT=count is not None, BLOCK_L=block_l, HEAD_DIM=d,
        num_warps=4,
    )
