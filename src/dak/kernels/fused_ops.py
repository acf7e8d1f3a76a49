"""One-launch RMSNorm, LayerNorm and rotary embedding, rounding like the eager code they replace.

A decode step of a 7B model runs ~40 small kernels per layer besides its linears and attention;
in a CUDA graph each still costs a few microseconds, which at batch 8 is as long as reading the
weights. HF's RMSNorm is 8 kernels and its rotary embedding 10 (q and k); here each is one.
torch's LayerNorm (OPT) is one kernel already but takes ~8 us at decode shapes on the H200.

    rms_norm:  y = w * round(x * rsqrt(mean(x^2) + eps))          (x in fp32, as LlamaRMSNorm)
    layer_norm: y = round((x - mean) * rsqrt(var + eps) * w + b)  (fp32 throughout, as torch)
    rotary:    q' = round(q * cos) + round(rotate_half(q) * sin)  (each product rounded, as HF)

Both run under the Triton interpreter on the CPU; `rotary` returns contiguous (B, H, L, D).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from dak.kernels.attention_config import next_pow2
from dak.runtime_env import env_flag, interpreting


@triton.jit
def _rms_norm_kernel(x_ptr, w_ptr, y_ptr, n_cols, stride_x, stride_y, eps,
                     BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    x = tl.load(x_ptr + row * stride_x + offs, mask=mask, other=0.0).to(tl.float32)
    r = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / n_cols + eps)
    h = (x * r).to(y_ptr.dtype.element_ty).to(tl.float32)  # HF rounds before the weight
    w = tl.load(w_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * stride_y + offs, (w * h).to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _layer_norm_kernel(x_ptr, w_ptr, b_ptr, y_ptr, n_cols, stride_x, stride_y, eps,
                       BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    x = tl.load(x_ptr + row * stride_x + offs, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + offs, mask=mask, other=0.0).to(tl.float32)  # issued with x's load, not after
    b = tl.load(b_ptr + offs, mask=mask, other=0.0).to(tl.float32)  # the reductions (latency)
    mean = tl.sum(x, axis=0) / n_cols
    d = tl.where(mask, x - mean, 0.0)
    r = 1.0 / tl.sqrt(tl.sum(d * d, axis=0) / n_cols + eps)
    tl.store(y_ptr + row * stride_y + offs, (d * r * w + b).to(y_ptr.dtype.element_ty), mask=mask)


def need_kernel_device(name: str, *tensors: torch.Tensor) -> None:
    """Refuse tensors on different devices, or off the GPU without the Triton interpreter."""
    dev = tensors[0].device
    for t in tensors[1:]:
        if t.device != dev:
            raise ValueError(f"{name}: tensors on {dev} and {t.device}; move one of them")
    if dev.type != "cuda" and not interpreting():
        raise ValueError(f"{name}: tensors on {dev}; the kernel needs a CUDA GPU (or TRITON_INTERPRET=1 "
                         "to run it on the CPU)")


def _rows(x: torch.Tensor, params) -> torch.Tensor:
    """x as contiguous rows, after checking each of `params` against its last axis."""
    for name, p in params:
        if p.dim() != 1 or x.shape[-1] != p.shape[-1]:
            raise ValueError(f"{name} {tuple(p.shape)} does not match the last axis of x {tuple(x.shape)}")
        if x.dtype != p.dtype:
            raise ValueError(f"x is {x.dtype} but the {name} is {p.dtype}")
        if x.device != p.device:
            raise ValueError(f"x is on {x.device} but the {name} on {p.device}; move one of them")
    x2 = x.reshape(-1, x.shape[-1])
    return x2 if x2.stride(-1) == 1 else x2.contiguous()


def _launch_norm(kernel, x: torch.Tensor, x2: torch.Tensor, params, eps: float) -> torch.Tensor:
    n = x2.shape[-1]
    y = torch.empty(x2.shape, dtype=x.dtype, device=x.device)
    if x2.shape[0]:
        kernel[(x2.shape[0],)](x2, *params, y, n, x2.stride(0), y.stride(0), float(eps), BLOCK=next_pow2(n),
                               num_warps=4 if n <= 4096 else 8, enable_fp_fusion=False)
    return y.view(x.shape)


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """RMSNorm over the last axis of `x` (any leading shape, contiguous last axis)."""
    return _launch_norm(_rms_norm_kernel, x, _rows(x, [("weight", weight)]), (weight,), eps)


def layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float) -> torch.Tensor:
    """LayerNorm with weight and bias over the last axis of `x` (F.layer_norm's result)."""
    x2 = _rows(x, [("weight", weight), ("bias", bias)])
    return _launch_norm(_layer_norm_kernel, x, x2, (weight, bias), eps)


def rotary_rows() -> int:
    """Head vectors a rotary program rotates: 1 on a GPU (a program per vector: the launch's width), 64
    under the CPU interpreter, which pays for every program's every operation in Python (the fused
    rotary kernels were 60% of a tiny model's generate there with one vector a program)."""
    return 64 if interpreting() else 1


@triton.jit
def _rotate_rows(src_ptr, cos_ptr, sin_ptr, dst_ptr, row0, n_rows, heads, seq, s_b, s_h, s_l, c_b, c_l,
                 HALF: tl.constexpr, ROWS: tl.constexpr, w_ptr=None, eps=0.0, NORM: tl.constexpr = False):
    """Head vectors row0 .. row0 + ROWS - 1 (those < n_rows; row = (b, h, l)) of src:
    dst = round(src * cos) + round(rotate_half(src) * sin). Returns (rows, in range, lo, hi), the
    last two (ROWS, HALF) in dst's dtype. NORM: src is first RMS-normed over the head vector with
    weight w_ptr, rounded as _rms_norm_kernel rounds (Qwen3's q and k norms)."""
    rows = row0 + tl.arange(0, ROWS).to(tl.int64)
    ok = (rows < n_rows)[:, None]
    l_ = rows % seq
    h = (rows // seq) % heads
    b = rows // (seq * heads)
    offs = tl.arange(0, HALF)[None, :]
    src = src_ptr + (b * s_b + h * s_h + l_ * s_l)[:, None]
    cs = (b * c_b + l_ * c_l)[:, None]
    x1 = tl.load(src + offs, mask=ok).to(tl.float32)
    x2 = tl.load(src + HALF + offs, mask=ok).to(tl.float32)
    ty = dst_ptr.dtype.element_ty
    if NORM:
        r = 1.0 / tl.sqrt((tl.sum(x1 * x1, axis=1) + tl.sum(x2 * x2, axis=1)) / (2 * HALF) + eps)
        w1 = tl.load(w_ptr + offs).to(tl.float32)
        w2 = tl.load(w_ptr + HALF + offs).to(tl.float32)
        x1 = (w1 * (x1 * r[:, None]).to(ty).to(tl.float32)).to(ty).to(tl.float32)  # HF rounds before the weight
        x2 = (w2 * (x2 * r[:, None]).to(ty).to(tl.float32)).to(ty).to(tl.float32)
    c1 = tl.load(cos_ptr + cs + offs, mask=ok).to(tl.float32)
    c2 = tl.load(cos_ptr + cs + HALF + offs, mask=ok).to(tl.float32)
    s1 = tl.load(sin_ptr + cs + offs, mask=ok).to(tl.float32)
    s2 = tl.load(sin_ptr + cs + HALF + offs, mask=ok).to(tl.float32)
    lo = ((x1 * c1).to(ty).to(tl.float32) + (-x2 * s1).to(ty).to(tl.float32)).to(ty)
    hi = ((x2 * c2).to(ty).to(tl.float32) + (x1 * s2).to(ty).to(tl.float32)).to(ty)
    dst = dst_ptr + (rows * (2 * HALF))[:, None]
    tl.store(dst + offs, lo, mask=ok)
    tl.store(dst + HALF + offs, hi, mask=ok)
    return rows, ok, lo, hi


@triton.jit
def _rotary_kernel(src_ptr, cos_ptr, sin_ptr, dst_ptr, n_rows, heads, seq,
                   s_b, s_h, s_l, c_b, c_l, HALF: tl.constexpr, ROWS: tl.constexpr):
    """One program per ROWS (b, h, l) head vectors of one tensor."""
    _rotate_rows(src_ptr, cos_ptr, sin_ptr, dst_ptr, tl.program_id(0).to(tl.int64) * ROWS, n_rows, heads, seq,
                 s_b, s_h, s_l, c_b, c_l, HALF, ROWS)


@triton.jit
def _rotary_qk_kernel(q_ptr, k_ptr, cos_ptr, sin_ptr, qo_ptr, ko_ptr, q_rows, k_rows, q_progs, q_heads, k_heads,
                      seq, qs_b, qs_h, qs_l, ks_b, ks_h, ks_l, c_b, c_l, HALF: tl.constexpr, ROWS: tl.constexpr):
    """q's and k's head vectors in one launch: programs [0, q_progs) rotate q, ROWS vectors each, the rest k."""
    pid = tl.program_id(0).to(tl.int64)
    if pid < q_progs:
        _rotate_rows(q_ptr, cos_ptr, sin_ptr, qo_ptr, pid * ROWS, q_rows, q_heads, seq, qs_b, qs_h, qs_l, c_b, c_l,
                     HALF, ROWS)
    else:
        _rotate_rows(k_ptr, cos_ptr, sin_ptr, ko_ptr, (pid - q_progs) * ROWS, k_rows, k_heads, seq, ks_b, ks_h, ks_l,
                     c_b, c_l, HALF, ROWS)


def rotary_ok(x: torch.Tensor, cos: torch.Tensor) -> bool:
    """Whether `rotary` takes (B, H, L, D) x with (B, L, D) cos/sin (else use HF's own)."""
    d = x.shape[-1]
    return (x.dim() == 4 and cos.dim() == 3 and d >= 2 and d == next_pow2(d) and x.stride(-1) == 1
            and cos.shape[-1] == d and cos.stride(-1) == 1 and cos.dtype == x.dtype
            and cos.shape[1] == x.shape[2] and cos.shape[0] in (1, x.shape[0]))


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    b, h, l_, d = x.shape
    out = torch.empty((b, h, l_, d), dtype=x.dtype, device=x.device)
    if out.numel():
        c_b = 0 if cos.shape[0] == 1 else cos.stride(0)
        rows = rotary_rows()
        _rotary_kernel[(triton.cdiv(b * h * l_, rows),)](
            x, cos, sin, out, b * h * l_, h, l_, x.stride(0), x.stride(1), x.stride(2), c_b, cos.stride(1),
            HALF=d // 2, ROWS=rows, num_warps=1, enable_fp_fusion=False)  # no FMA: round each product, as HF
    return out


def rotary(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor):
    """HF's apply_rotary_pos_emb (unsqueeze_dim=1) for q (B, Hq, L, D), k (B, Hk, L, D).

    One launch for q and k (default; 1% faster decode on Llama-2-7B/Llama-3-8B, H200, 2026-12-02),
    or two (q, then k) with $DAK_ROTARY_ONE_LAUNCH=0: the same programs and rounding."""
    if not (rotary_ok(q, cos) and rotary_ok(k, cos)) or sin.shape != cos.shape or sin.stride() != cos.stride():
        raise ValueError(f"rotary needs (B, H, L, D) q/k with a power-of-two D and (B|1, L, D) cos/sin of "
                         f"their dtype; got q {tuple(q.shape)}, k {tuple(k.shape)}, cos {tuple(cos.shape)}")
    need_kernel_device("rotary", q, k, cos, sin)
    if q.shape[-1] != k.shape[-1] or q.shape[0] != k.shape[0] or not env_flag("DAK_ROTARY_ONE_LAUNCH", True):
        return _rotate(q, cos, sin), _rotate(k, cos, sin)
    (b, hq, l_, d), hk = q.shape, k.shape[1]
    qo = torch.empty((b, hq, l_, d), dtype=q.dtype, device=q.device)
    ko = torch.empty((b, hk, l_, d), dtype=k.dtype, device=k.device)
    if qo.numel() + ko.numel():
        c_b = 0 if cos.shape[0] == 1 else cos.stride(0)
        rows = rotary_rows()
        q_progs, k_progs = triton.cdiv(b * hq * l_, rows), triton.cdiv(b * hk * l_, rows)
        _rotary_qk_kernel[(q_progs + k_progs,)](
            q, k, cos, sin, qo, ko, b * hq * l_, b * hk * l_, q_progs, hq, hk, l_, q.stride(0), q.stride(1),
            q.stride(2), k.stride(0), k.stride(1), k.stride(2), c_b, cos.stride(1), HALF=d // 2, ROWS=rows,
            num_warps=1, enable_fp_fusion=False)  # no FMA: round each product, as HF
    return qo, ko
