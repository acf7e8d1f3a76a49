"""Split decode attention: one query token per request over a KV cache split by request.

Requests [0, B_H) keep K/V in pinned host memory (`k_host`, `v_host`: (B_H, Hkv, S, D)), the
rest in HBM (`k_hbm`, `v_hbm`: (B - B_H, Hkv, S, D)). For each request b and query head h,

    out[b, h] = softmax(scale * q[b, h] @ K[b, h // G, :len_b]^T) @ V[b, h // G, :len_b]

with G = Hq / Hkv query heads per kv head (MHA G=1, GQA, MQA). Flash-decoding: the keys of a
(request, kv head) are cut into splits; a program holds the whole GQA group of queries (padded
to >= 16 rows for tl.dot), so each K/V tile is read once per group, and keeps an fp32 online
softmax. Programs [0, P_h) are persistent host programs: they loop over the host items and read
only host memory (plain loads or TMA), so at most P_h programs pull over the link; every other
program handles one HBM item. Splits write partial (m, l, acc) that `_merge_kernel` combines;
with one split per side the first kernel writes the output directly.

Shapes and dtypes: q (Bq, Hq, D) with Bq <= B, lengths (>= Bq,) int32 (keys per request,
clamped to [0, S]; a request of length 0 gets zeros), out (Bq, Hq, D); bf16 or fp16 throughout.
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

from dak.kernels.attention_config import AttentionConfig, group_rows, next_pow2
from dak.kernels.attention_checks import check_attention_args, check_window
from dak.runtime_env import interpreting

LOG2E = 1.4426950408889634


@triton.jit
def _item(q_ptr, k_ptr, v_ptr, k_desc, v_desc, len_ptr, o_ptr, acc_ptr, ml_ptr,
          item, req0, KV_HEADS, GROUP, MAX_LEN, N_SPLITS, scale_log2, WINDOW,
          stride_qb, stride_qh, stride_kb, stride_kh, stride_ks, stride_vb, stride_vh, stride_vs,
          stride_ob, stride_oh, stride_pb, stride_ph, stride_ps,
          USE_TMA: tl.constexpr, DIRECT: tl.constexpr, BLOCK_N: tl.constexpr,
          HEAD_DIM: tl.constexpr, GROUP_PAD: tl.constexpr, NUM_STAGES: tl.constexpr,
          DOT_F32: tl.constexpr):
    """Attend one item (request, kv head, split) of one side; req0 = first global request of the side.
    WINDOW > 0: only the request's last WINDOW keys (a sliding window; the tiles stay aligned to BLOCK_N
    and keys before the window are masked)."""
    split = item % N_SPLITS
    kvh = (item // N_SPLITS) % KV_HEADS
    req = item // (N_SPLITS * KV_HEADS)  # index within this side's buffers
    b = req0 + req                         # global request index
    seq = tl.minimum(tl.maximum(tl.load(len_ptr + b), 0), MAX_LEN)
    lo = tl.where(WINDOW > 0, tl.maximum(seq - WINDOW, 0), 0)  # the first key attended
    lo_tile = lo // BLOCK_N * BLOCK_N
    split_len = tl.cdiv(tl.cdiv(seq - lo_tile, N_SPLITS), BLOCK_N) * BLOCK_N
    start = lo_tile + split * split_len
    end = tl.minimum(start + split_len, seq)
    offs_g = tl.arange(0, GROUP_PAD)
    offs_d = tl.arange(0, HEAD_DIM)
    heads = kvh * GROUP + offs_g
    mask_g = offs_g < GROUP
    q = tl.load(q_ptr + b.to(tl.int64) * stride_qb + heads[:, None] * stride_qh + offs_d[None, :],
                mask=mask_g[:, None], other=0.0)
    if DOT_F32:  # Triton 3.6's interpreter mis-computes bf16 tl.dot: upcast there only
        q = q.to(tl.float32)
    k_base = req.to(tl.int64) * stride_kb + kvh.to(tl.int64) * stride_kh
    v_base = req.to(tl.int64) * stride_vb + kvh.to(tl.int64) * stride_vh
    row0 = (req * KV_HEADS + kvh) * MAX_LEN  # row of key 0 in the (B_side * Hkv * S, D) TMA view
    m = tl.full((GROUP_PAD,), float("-inf"), dtype=tl.float32)
    l = tl.zeros((GROUP_PAD,), dtype=tl.float32)
    acc = tl.zeros((GROUP_PAD, HEAD_DIM), dtype=tl.float32)
    n_tiles = tl.cdiv(tl.maximum(end - start, 0), BLOCK_N)
    for t in tl.range(0, n_tiles, num_stages=NUM_STAGES):
        n0 = start + t * BLOCK_N
        offs_n = n0 + tl.arange(0, BLOCK_N)
        mask_n = (offs_n < end) & (offs_n >= lo)
        if USE_TMA:  # rows past `end` are later keys or heads, maybe garbage: their scores are
            k = k_desc.load([row0 + n0, 0])  # masked below, and V's rows are zeroed (0 * NaN = NaN)
            v = tl.where(mask_n[:, None], v_desc.load([row0 + n0, 0]), 0.0)
        else:
            k = tl.load(k_ptr + k_base + offs_n[:, None].to(tl.int64) * stride_ks + offs_d[None, :],
                        mask=mask_n[:, None], other=0.0)
            v = tl.load(v_ptr + v_base + offs_n[:, None].to(tl.int64) * stride_vs + offs_d[None, :],
                        mask=mask_n[:, None], other=0.0)
        if DOT_F32:
            s = tl.dot(q, tl.trans(k.to(tl.float32)), input_precision="ieee")
        else:
            s = tl.dot(q, tl.trans(k))
        s = tl.where(mask_n[None, :], s * scale_log2, float("-inf"))
        m_new = tl.maximum(m, tl.max(s, axis=1))
        alpha = tl.math.exp2(m - m_new)
        p = tl.math.exp2(s - m_new[:, None])
        l = l * alpha + tl.sum(p, axis=1)
        if DOT_F32:
            acc = tl.dot(p, v.to(tl.float32), acc * alpha[:, None], input_precision="ieee")
        else:
            acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
        m = m_new
    if DIRECT:
        o = acc / tl.where(l > 0, l, 1.0)[:, None]  # an empty request has acc = 0
        tl.store(o_ptr + b.to(tl.int64) * stride_ob + heads[:, None] * stride_oh + offs_d[None, :],
                 o.to(o_ptr.dtype.element_ty), mask=mask_g[:, None])
    else:
        p_off = b.to(tl.int64) * stride_pb + heads * stride_ph + split * stride_ps
        tl.store(acc_ptr + p_off[:, None] * HEAD_DIM + offs_d[None, :], acc, mask=mask_g[:, None])
        tl.store(ml_ptr + p_off * 2, m, mask=mask_g)
        tl.store(ml_ptr + p_off * 2 + 1, l, mask=mask_g)


@triton.jit(do_not_specialize=["WINDOW"])  # one compile (before capture) serves every window, 0 included
def _split_decode_kernel(
    # pointers (and TMA descriptors, or the same pointers when TMA is off)
    q_ptr, kh_ptr, vh_ptr, kh_desc, vh_desc, kg_ptr, vg_ptr, kg_desc, vg_desc, len_ptr,
    o_ptr, acc_ptr, ml_ptr,
    # sizes
    B_H, KV_HEADS, GROUP, MAX_LEN, scale_log2, WINDOW,
    # strides
    stride_qb, stride_qh,
    stride_khb, stride_khh, stride_khs, stride_vhb, stride_vhh, stride_vhs,
    stride_kgb, stride_kgh, stride_kgs, stride_vgb, stride_vgh, stride_vgs,
    stride_ob, stride_oh, stride_pb, stride_ph, stride_ps,
    # work split
    HOST_PROGS, HOST_ITEMS, HOST_SPLITS, HBM_SPLITS,
    # meta-parameters
    HOST_TMA: tl.constexpr, HBM_TMA: tl.constexpr, DIRECT: tl.constexpr, BLOCK_N: tl.constexpr,
    HEAD_DIM: tl.constexpr, GROUP_PAD: tl.constexpr, NUM_STAGES: tl.constexpr, DOT_F32: tl.constexpr,
):
    pid = tl.program_id(0)
    if pid < HOST_PROGS:
        for item in range(pid, HOST_ITEMS, HOST_PROGS):
            _item(q_ptr, kh_ptr, vh_ptr, kh_desc, vh_desc, len_ptr, o_ptr, acc_ptr, ml_ptr,
                  item, 0, KV_HEADS, GROUP, MAX_LEN, HOST_SPLITS, scale_log2, WINDOW,
                  stride_qb, stride_qh, stride_khb, stride_khh, stride_khs, stride_vhb, stride_vhh, stride_vhs,
                  stride_ob, stride_oh, stride_pb, stride_ph, stride_ps,
                  HOST_TMA, DIRECT, BLOCK_N, HEAD_DIM, GROUP_PAD, NUM_STAGES, DOT_F32)
    else:
        _item(q_ptr, kg_ptr, vg_ptr, kg_desc, vg_desc, len_ptr, o_ptr, acc_ptr, ml_ptr,
              pid - HOST_PROGS, B_H, KV_HEADS, GROUP, MAX_LEN, HBM_SPLITS, scale_log2, WINDOW,
              stride_qb, stride_qh, stride_kgb, stride_kgh, stride_kgs, stride_vgb, stride_vgh, stride_vgs,
              stride_ob, stride_oh, stride_pb, stride_ph, stride_ps,
              HBM_TMA, DIRECT, BLOCK_N, HEAD_DIM, GROUP_PAD, NUM_STAGES, DOT_F32)


@triton.jit
def _merge_kernel(acc_ptr, ml_ptr, o_ptr, B_H, Q_HEADS, HOST_SPLITS, HBM_SPLITS,
                  stride_pb, stride_ph, stride_ob, stride_oh,
                  SPLITS_PAD: tl.constexpr, HEAD_DIM: tl.constexpr):
    """out[b, h] = sum_s 2^(m_s - M) acc_s / sum_s 2^(m_s - M) l_s over the request's splits."""
    pid = tl.program_id(0)
    b = pid // Q_HEADS
    h = pid % Q_HEADS
    n_splits = tl.where(b < B_H, HOST_SPLITS, HBM_SPLITS)
    offs_s = tl.arange(0, SPLITS_PAD)
    offs_d = tl.arange(0, HEAD_DIM)
    mask_s = offs_s < n_splits
    p_off = b.to(tl.int64) * stride_pb + h * stride_ph + offs_s
    m = tl.load(ml_ptr + p_off * 2, mask=mask_s, other=float("-inf"))
    l = tl.load(ml_ptr + p_off * 2 + 1, mask=mask_s, other=0.0)
    top = tl.max(m, axis=0)
    top = tl.where(top == float("-inf"), 0.0, top)
    w = tl.math.exp2(m - top)
    acc = tl.load(acc_ptr + p_off[:, None] * HEAD_DIM + offs_d[None, :], mask=mask_s[:, None], other=0.0)
    num = tl.sum(acc * w[:, None], axis=0)
    den = tl.sum(l * w, axis=0)
    o = num / tl.where(den > 0, den, 1.0)  # an empty request has num = 0
    tl.store(o_ptr + b.to(tl.int64) * stride_ob + h * stride_oh + offs_d, o.to(o_ptr.dtype.element_ty))


def tma_view(t: torch.Tensor) -> torch.Tensor | None:
    """The (B * Hkv * S, D) matrix view of a contiguous cache side, if TMA can address it."""
    if t.numel() == 0 or not t.is_contiguous() or t.data_ptr() % 16 or (t.shape[-1] * t.element_size()) % 16:
        return None
    rows = t.numel() // t.shape[-1]
    return t.view(rows, t.shape[-1]) if rows < 2**31 else None


def _side(k: torch.Tensor, v: torch.Tensor, use_tma: bool, block_n: int):
    """(k, v, k_desc, v_desc, tma_on) for one side; descriptors are the tensors when TMA is off."""
    kv, vv = (tma_view(k), tma_view(v)) if use_tma else (None, None)
    if kv is None or vv is None:
        return k, v, k, v, False
    d = k.shape[-1]
    desc = [TensorDescriptor(t, list(t.shape), [t.stride(0), 1], [block_n, d]) for t in (kv, vv)]
    return k, v, desc[0], desc[1], True


def split_attention(q: torch.Tensor, k_host: torch.Tensor, v_host: torch.Tensor, k_hbm: torch.Tensor,
                    v_hbm: torch.Tensor, lengths: torch.Tensor, cfg: AttentionConfig,
                    scale: float | None = None, out: torch.Tensor | None = None,
                    validate: bool = True, window: int | None = None) -> torch.Tensor:
    """Decode attention of q over the split cache in one or two launches; returns `out`.

    `window`: attend only each request's last `window` keys (a sliding window, as HF's
    `sliding_window`: the new token and the window - 1 before it); None or 0 for all.
    `cfg` comes from `dak.kernels.attention_config.heuristic_config` / `finalize` or the tuner.
    `validate` reads `lengths` back to check them (a device sync); it is skipped during CUDA
    graph capture, where the kernel clamps lengths to [0, S] instead.
    """
    if validate and torch.cuda.is_available() and torch.cuda.is_current_stream_capturing():
        validate = False
    bq, hq, d, b_h, kv_heads, s = check_attention_args(q, k_host, v_host, k_hbm, v_hbm, lengths, out, validate)
    window = check_window(window)
    if out is None:
        out = torch.empty((bq, hq, d), dtype=q.dtype, device=q.device)
    bq_h, bq_g = min(bq, b_h), max(0, bq - b_h)
    if bq == 0 or hq == 0:
        return out
    group = hq // kv_heads
    host_items = bq_h * kv_heads * cfg.host_splits
    host_progs = min(cfg.host_programs, host_items)
    n_hbm = bq_g * kv_heads * cfg.hbm_splits
    direct = (bq_h == 0 or cfg.host_splits == 1) and (bq_g == 0 or cfg.hbm_splits == 1)
    n_splits = max(cfg.host_splits if bq_h else 1, cfg.hbm_splits if bq_g else 1)
    if direct:
        acc = ml = out
        pstrides = (0, 0, 0)
    else:
        acc = torch.empty((bq, hq, n_splits, d), dtype=torch.float32, device=q.device)
        ml = torch.empty((bq, hq, n_splits, 2), dtype=torch.float32, device=q.device)
        pstrides = (hq * n_splits, n_splits, 1)  # in units of one split's partial
    host = _side(k_host, v_host, cfg.host_tma, cfg.block_n) if bq_h else None
    hbm = _side(k_hbm, v_hbm, cfg.hbm_tma, cfg.block_n) if bq_g else None
    host, hbm = host or hbm, hbm or host
    scale = 1.0 / math.sqrt(d) if scale is None else float(scale)
    grid = (host_progs + n_hbm,)
    try:
        _split_decode_kernel[grid](
            q, *host[:4], *hbm[:4], lengths, out, acc, ml,
            b_h, kv_heads, group, s, scale * LOG2E, window,
            q.stride(0), q.stride(1), *host[0].stride()[:3], *host[1].stride()[:3],
            *hbm[0].stride()[:3], *hbm[1].stride()[:3], out.stride(0), out.stride(1), *pstrides,
            host_progs, host_items, cfg.host_splits, cfg.hbm_splits,
            HOST_TMA=host[4], HBM_TMA=hbm[4], DIRECT=direct, BLOCK_N=cfg.block_n, HEAD_DIM=d,
            GROUP_PAD=group_rows(group), NUM_STAGES=cfg.num_stages, DOT_F32=interpreting(),
            num_warps=cfg.num_warps, num_stages=cfg.num_stages,
        )
        if not direct:
            _merge_kernel[(bq * hq,)](acc, ml, out, b_h, hq, cfg.host_splits, cfg.hbm_splits,
                                      pstrides[0], pstrides[1], out.stride(0), out.stride(1),
                                      SPLITS_PAD=next_pow2(n_splits), HEAD_DIM=d, num_warps=4)
    except triton.runtime.errors.OutOfResources as exc:
        raise ValueError(f"launch config {cfg} needs more on-chip resources than this GPU has "
                         f"({exc}); use a smaller block_n or num_stages") from exc
    return out
