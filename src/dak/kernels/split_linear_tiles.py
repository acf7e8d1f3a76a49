"""Tile helpers shared by the split-linear Triton kernels (dak.kernels.split_linear and
dak.kernels.split_linear_once): load a weight tile, multiply it with a token tile, store Y.

Shapes: a weight tile is (BLOCK_M rows, BLOCK_K columns) of W (M x K); a token tile is
(BLOCK_N tokens, BLOCK_K columns) of X (N x K); the accumulator is (BLOCK_N, BLOCK_M) fp32.
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def _load_w(w_ptr, w_desc, row0, k0, mask_m, K, stride_wm,
            USE_TMA: tl.constexpr, EVEN_K: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr):
    """W[row0:row0+BLOCK_M, k0:k0+BLOCK_K], zero outside the rows in mask_m and past K."""
    if USE_TMA:
        return w_desc.load([row0, k0])
    offs_k = k0 + tl.arange(0, BLOCK_K)
    w_ptrs = w_ptr + (row0 + tl.arange(0, BLOCK_M))[:, None] * stride_wm + offs_k[None, :]
    if EVEN_K:
        return tl.load(w_ptrs, mask=mask_m[:, None], other=0.0)
    return tl.load(w_ptrs, mask=mask_m[:, None] & (offs_k[None, :] < K), other=0.0)


@triton.jit
def _xdot(acc, x_ptr, w, k0, offs_n, mask_n, K, stride_xn, stride_xk,
          EVEN_K: tl.constexpr, BLOCK_K: tl.constexpr, DOT_F32: tl.constexpr):
    """acc (BLOCK_N, BLOCK_M) += X[offs_n, k0:k0+BLOCK_K] @ w^T for a loaded weight tile w."""
    offs_k = k0 + tl.arange(0, BLOCK_K)
    x_ptrs = x_ptr + offs_n[:, None] * stride_xn + offs_k[None, :] * stride_xk
    if EVEN_K:
        x = tl.load(x_ptrs, mask=mask_n[:, None], other=0.0)
    else:
        x = tl.load(x_ptrs, mask=mask_n[:, None] & (offs_k[None, :] < K), other=0.0)
    if DOT_F32:  # Triton 3.6's interpreter mis-computes bf16 tl.dot: upcast there only
        return tl.dot(x.to(tl.float32), tl.trans(w.to(tl.float32)), acc, input_precision="ieee")
    return tl.dot(x, tl.trans(w), acc)


@triton.jit
def _mac(acc, x_ptr, w_ptr, w_desc, row0, k0, offs_n, mask_n, mask_m, K,
         stride_xn, stride_xk, stride_wm,
         USE_TMA: tl.constexpr, EVEN_K: tl.constexpr, BLOCK_M: tl.constexpr,
         BLOCK_K: tl.constexpr, DOT_F32: tl.constexpr):
    """acc (BLOCK_N, BLOCK_M) += X[offs_n, k0:k0+BLOCK_K] @ W[row0:row0+BLOCK_M, k0:k0+BLOCK_K]^T."""
    w = _load_w(w_ptr, w_desc, row0, k0, mask_m, K, stride_wm, USE_TMA, EVEN_K, BLOCK_M, BLOCK_K)
    return _xdot(acc, x_ptr, w, k0, offs_n, mask_n, K, stride_xn, stride_xk, EVEN_K, BLOCK_K, DOT_F32)


@triton.jit
def _store(acc, b_ptr, y_ptr, row0, n_rows, out_row0, offs_n, mask_n, stride_yn, stride_ym,
           HAS_BIAS: tl.constexpr, BLOCK_M: tl.constexpr):
    """Y[offs_n, out_row0 + row0 + i] = acc[:, i] (+ bias) for the rows i below n_rows."""
    offs_m = row0 + tl.arange(0, BLOCK_M)
    mask_m = offs_m < n_rows
    if HAS_BIAS:
        acc += tl.load(b_ptr + out_row0 + offs_m, mask=mask_m, other=0.0).to(tl.float32)[None, :]
    y_ptrs = y_ptr + offs_n[:, None] * stride_yn + (out_row0 + offs_m)[None, :] * stride_ym
    tl.store(y_ptrs, acc.to(y_ptr.dtype.element_ty), mask=mask_n[:, None] & mask_m[None, :])
