"""One-launch residual add + RMSNorm, and SiLU-and-multiply, rounding like HF's eager code.

A Llama-family decoder layer at decode runs, besides its linears and attention, a residual add
then the post-attention RMSNorm, and in the MLP `act_fn(gate) * up` (SiLU, then a multiply):
four launches that these two kernels do in two (on by default, `$DAK_FUSED_LAYER=0` turns them
off; see dak.runtime.fused). Each rounds where the eager code rounds:

    add_rms_norm: s = round(x + r);  y = w * round(s * rsqrt(mean(s^2) + eps))   (returns s, y)
    silu_mul:     y = round(round(silu(g)) * u)                                 (silu in fp32)

and for OPT's layer (dak.runtime.fused_opt, the default), the residual add + LayerNorm after attention:

    add_layer_norm: s = round(x + r);  y = round((s - mean) * rsqrt(var + eps) * w + b)   (returns s, y)

Both take any leading shape with a contiguous last axis (the MLP's gate and up may be column
slices of one fused projection output) and run under the Triton interpreter on the CPU.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from dak.kernels.attention_config import next_pow2
from dak.kernels.fused_ops import _rows, need_kernel_device


@triton.jit
def _add_norm_kernel(x_ptr, r_ptr, w_ptr, b_ptr, s_ptr, y_ptr, n_cols, stride_x, stride_r, stride_s, stride_y, eps,
                     LAYER: tl.constexpr, BLOCK: tl.constexpr):
    """s = round(x + r), then RMSNorm(s) as HF (LAYER False) or LayerNorm(s) as torch (LAYER True)."""
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    ty = y_ptr.dtype.element_ty
    x = tl.load(x_ptr + row * stride_x + offs, mask=mask, other=0.0).to(tl.float32)
    r = tl.load(r_ptr + row * stride_r + offs, mask=mask, other=0.0).to(tl.float32)
    s = (x + r).to(ty)  # the residual stream, rounded as the eager add rounds it
    tl.store(s_ptr + row * stride_s + offs, s, mask=mask)
    sf = s.to(tl.float32)
    w = tl.load(w_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    if LAYER:  # fp32 throughout, as torch's LayerNorm
        d = tl.where(mask, sf - tl.sum(sf, axis=0) / n_cols, 0.0)
        inv = 1.0 / tl.sqrt(tl.sum(d * d, axis=0) / n_cols + eps)
        b = tl.load(b_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        y = d * inv * w + b
    else:
        inv = 1.0 / tl.sqrt(tl.sum(sf * sf, axis=0) / n_cols + eps)
        y = w * (sf * inv).to(ty).to(tl.float32)  # HF rounds before the weight
    tl.store(y_ptr + row * stride_y + offs, y.to(ty), mask=mask)


@triton.jit
def _silu_mul_kernel(g_ptr, u_ptr, y_ptr, n_cols, stride_g, stride_u, stride_y, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    col = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = col < n_cols
    ty = y_ptr.dtype.element_ty
    g = tl.load(g_ptr + row * stride_g + col, mask=mask, other=0.0).to(tl.float32)
    u = tl.load(u_ptr + row * stride_u + col, mask=mask, other=0.0).to(tl.float32)
    a = (g / (1.0 + tl.exp(-g))).to(ty).to(tl.float32)
    tl.store(y_ptr + row * stride_y + col, (a * u).to(ty), mask=mask)


def _check(name: str, a: torch.Tensor, b: torch.Tensor) -> None:
    if a.shape != b.shape:
        raise ValueError(f"{name}: shapes {tuple(a.shape)} and {tuple(b.shape)} differ")
    if a.dtype != b.dtype or a.dtype not in (torch.bfloat16, torch.float16):
        raise ValueError(f"{name}: needs two bf16 or two fp16 tensors, got {a.dtype} and {b.dtype}")
    need_kernel_device(name, a, b)


def _add_norm(name, x, residual, weight, bias, eps):
    _check(name, x, residual)
    params = [("weight", weight)] + ([("bias", bias)] if bias is not None else [])
    x2, r2 = _rows(x, params), _rows(residual, [])
    n = x2.shape[-1]
    s = torch.empty(x2.shape, dtype=x.dtype, device=x.device)
    y = torch.empty_like(s)
    if x2.shape[0]:
        _add_norm_kernel[(x2.shape[0],)](x2, r2, weight, weight if bias is None else bias, s, y, n, x2.stride(0),
                                         r2.stride(0), s.stride(0), y.stride(0), float(eps), LAYER=bias is not None,
                                         BLOCK=next_pow2(n), num_warps=4 if n <= 4096 else 8, enable_fp_fusion=False)
    return s.view(x.shape), y.view(x.shape)


def add_rms_norm(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float):
    """(residual + x, RMSNorm(residual + x)) over the last axis, as HF's decoder layer computes them."""
    return _add_norm("add_rms_norm", x, residual, weight, None, eps)


def add_layer_norm(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float):
    """(residual + x, LayerNorm(residual + x)) over the last axis, as OPT's decoder layer computes
    them after attention (the LayerNorm as dak.kernels.fused_ops.layer_norm: fp32 throughout)."""
    if bias is None:
        raise ValueError("add_layer_norm needs the LayerNorm's bias (a LayerNorm without one is not fused)")
    return _add_norm("add_layer_norm", x, residual, weight, bias, eps)


def silu_mul(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    """round(round(silu(gate)) * up), as `act_fn(gate_proj(x)) * up_proj(x)` in HF's MLPs."""
    _check("silu_mul", gate, up)
    g2, u2 = _rows(gate, []), _rows(up, [])
    rows, n = g2.shape
    y = torch.empty((rows, n), dtype=gate.dtype, device=gate.device)
    block = min(1024, next_pow2(max(n, 16)))
    if rows and n:
        _silu_mul_kernel[(rows, triton.cdiv(n, block))](g2, u2, y, n, g2.stride(0), u2.stride(0), y.stride(0),
                                                         BLOCK=block, num_warps=4, enable_fp_fusion=False)
    return y.view(gate.shape)
