"""Rotary embedding and the decode token's KV append in one launch (default; `$DAK_ROTARY_KV=0` off).

A decode layer rotates q and k (dak.kernels.fused_ops, one launch), then stores the new k and v
into the split KV cache (dak.kernels.kv_write, another). Here the programs that rotate k also
store the rotated k and the unrotated v at position lengths[b] - 1 of request b's home (pinned
host memory for the first B_H requests, HBM for the rest), as kv_write does: one launch fewer per
layer, the same rounding (each product rounded, as HF) and the same stores.

    rotary_append(q, k, v, cos, sin, k_host, v_host, k_hbm, v_hbm, lengths) -> (q_rot, k_rot)

q (B, Hq, 1, D), k and v (B, Hkv, 1, D) with a contiguous last axis; cos/sin (B|1, 1, D);
lengths (>= B,) int32 counting this token; the cache sides as SplitKVCache.parts gives them.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from dak.kernels.fused_ops import _rotate_rows, need_kernel_device, rotary_ok, rotary_rows
from dak.kernels.kv_write import store_sides


@triton.jit
def _rotary_append_kernel(q_ptr, k_ptr, v_ptr, cos_ptr, sin_ptr, qo_ptr, ko_ptr, len_ptr,
                          kh_ptr, vh_ptr, kg_ptr, vg_ptr, q_rows, k_rows, q_progs, q_heads, k_heads, B_H, MAX_LEN,
                          qs_b, qs_h, ks_b, ks_h, vs_b, vs_h, c_b,
                          stride_hb, stride_hh, stride_hs, stride_gb, stride_gh, stride_gs, qw_ptr, kw_ptr, eps,
                          HALF: tl.constexpr, ROWS: tl.constexpr, NORM: tl.constexpr):
    """Programs [0, q_progs) rotate q's head vectors, ROWS each; the others rotate ROWS of k's (b, h)
    and store them and v's into the cache (masked stores: a request's home is host or HBM). NORM: q
    and k are RMS-normed over each head vector first (weights qw_ptr, kw_ptr)."""
    pid = tl.program_id(0).to(tl.int64)
    if pid < q_progs:
        _rotate_rows(q_ptr, cos_ptr, sin_ptr, qo_ptr, pid * ROWS, q_rows, q_heads, 1, qs_b, qs_h, 0, c_b, 0, HALF, ROWS,
                     qw_ptr, eps, NORM)
    else:
        rows, ok, lo, hi = _rotate_rows(k_ptr, cos_ptr, sin_ptr, ko_ptr, (pid - q_progs) * ROWS, k_rows, k_heads, 1,
                                        ks_b, ks_h, 0, c_b, 0, HALF, ROWS, kw_ptr, eps, NORM)
        b = (rows // k_heads)[:, None]
        h = (rows % k_heads)[:, None]
        offs = tl.arange(0, HALF)[None, :]
        v = v_ptr + b * vs_b + h * vs_h
        v_lo = tl.load(v + offs, mask=ok)
        v_hi = tl.load(v + HALF + offs, mask=ok)
        pos = (tl.load(len_ptr + b, mask=ok, other=0) - 1).to(tl.int64)
        put = ok & (pos >= 0) & (pos < MAX_LEN)
        host = put & (b < B_H)
        hbm = put & (b >= B_H)
        kd = kh_ptr + b * stride_hb + h * stride_hh + pos * stride_hs
        vd = vh_ptr + b * stride_hb + h * stride_hh + pos * stride_hs
        tl.store(kd + offs, lo, mask=host)
        tl.store(kd + HALF + offs, hi, mask=host)
        tl.store(vd + offs, v_lo, mask=host)
        tl.store(vd + HALF + offs, v_hi, mask=host)
        kd = kg_ptr + (b - B_H) * stride_gb + h * stride_gh + pos * stride_gs
        vd = vg_ptr + (b - B_H) * stride_gb + h * stride_gh + pos * stride_gs
        tl.store(kd + offs, lo, mask=hbm)
        tl.store(kd + HALF + offs, hi, mask=hbm)
        tl.store(vd + offs, v_lo, mask=hbm)
        tl.store(vd + HALF + offs, v_hi, mask=hbm)


def rotary_append(q, k, v, cos, sin, k_host, v_host, k_hbm, v_hbm, lengths, norms=None):
    """See the module doc. Returns (q_rot (B, Hq, 1, D), k_rot (B, Hkv, 1, D)), both contiguous.
    norms: (q weight, k weight, eps) to RMS-norm q and k over each head vector before the rotary
    (Qwen3's q_norm and k_norm, as its RMSNorm rounds), or None."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.dim() != 4 or t.shape[2] != 1 or t.stride(-1) != 1:
            raise ValueError(f"rotary_append: {name} must be (B, H, 1, D) with a contiguous last axis, "
                             f"got {tuple(t.shape)} strides {t.stride()}")
    if not (rotary_ok(q, cos) and rotary_ok(k, cos)) or sin.shape != cos.shape or sin.stride() != cos.stride():
        raise ValueError(f"rotary_append needs a power-of-two head_dim and (B|1, 1, D) cos/sin of q's dtype; "
                         f"got q {tuple(q.shape)}, cos {tuple(cos.shape)}")
    if v.shape != k.shape or q.shape[0] != k.shape[0] or q.shape[-1] != k.shape[-1] or v.dtype != k.dtype:
        raise ValueError(f"rotary_append: k {tuple(k.shape)}, v {tuple(v.shape)} and q {tuple(q.shape)} disagree")
    need_kernel_device("rotary_append", q, k, v, cos, sin, lengths)
    (b, hq, _, d), hk = q.shape, k.shape[1]
    b_h = k_host.shape[0]
    if b > b_h + k_hbm.shape[0] or lengths.dtype != torch.int32 or lengths.shape[0] < b:
        raise ValueError(f"rotary_append: {b} requests need a cache of at least {b} and int32 lengths of "
                         f">= {b}, got {b_h + k_hbm.shape[0]} and {lengths.dtype} {tuple(lengths.shape)}")
    if norms is not None:
        qw, kw, eps = norms
        if any(w.shape != (d,) or w.dtype != q.dtype or w.device != q.device or w.stride(0) != 1 for w in (qw, kw)):
            raise ValueError(f"rotary_append: the q and k norm weights must be ({d},) {q.dtype} on {q.device}")
    qo = torch.empty((b, hq, 1, d), dtype=q.dtype, device=q.device)
    ko = torch.empty((b, hk, 1, d), dtype=k.dtype, device=k.device)
    kh, vh, kg, vg = store_sides(k_host, v_host, k_hbm, v_hbm)
    if b and (hq + hk):
        rows = rotary_rows()
        q_progs, k_progs = triton.cdiv(b * hq, rows), triton.cdiv(b * hk, rows)
        _rotary_append_kernel[(q_progs + k_progs,)](
            q, k, v, cos, sin, qo, ko, lengths, kh, vh, kg, vg, b * hq, b * hk, q_progs, hq, hk, b_h, k_hbm.shape[2],
            q.stride(0), q.stride(1), k.stride(0), k.stride(1), v.stride(0), v.stride(1),
            0 if cos.shape[0] == 1 else cos.stride(0), *kh.stride()[:3], *kg.stride()[:3],
            *((cos, cos, 0.0) if norms is None else (norms[0], norms[1], float(norms[2]))),
            HALF=d // 2, ROWS=rows, NORM=norms is not None, num_warps=1,
            enable_fp_fusion=False)  # no FMA: round each product, as HF
    return qo, ko
