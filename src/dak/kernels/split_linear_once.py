"""Host rows read over the link once for any token count, in Triton (no clusters).

Host memory is not cached in L2, so the plain split kernel (dak.kernels.split_linear) pulls a
host row tile across the link once per token block when N > block_n. Here each host program
owns its row tiles for all N: the pass over the first token block loads the tile from pinned
memory (plain loads or TMA), multiplies it and also stores it into the program's own slot of an
HBM workspace; the passes over the other token blocks read the slot (HBM / L2) instead of the
link. Link bytes per host byte = 1 at every N; the price is one HBM write of each host tile and
(ceil(N / block_n) - 1) HBM/L2 reads of it.

Workspace: (host programs, block_m, k_slot) elements of the weight dtype, k_slot =
ceil(K / block_k) * block_k (zero-padded columns, so slot reads need no K mask).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from dak.kernels.buffers import shared_buffer
from dak.kernels.config import KernelConfig, cdiv
from dak.kernels.split_linear_tiles import _load_w, _store, _xdot


@triton.jit
def _rows_once(x_ptr, w_ptr, w_desc, s_ptr, b_ptr, y_ptr, first, step, n_rows, N, K, K_SLOT,
               stride_xn, stride_xk, stride_wm, stride_yn, stride_ym,
               HAS_BIAS: tl.constexpr, USE_TMA: tl.constexpr, EVEN_K: tl.constexpr,
               BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
               NUM_STAGES: tl.constexpr, DOT_F32: tl.constexpr):
    """Host row tiles first, first+step, ... -> Y[:, tile rows], each tile fetched once.

    s_ptr: this launch's slot workspace; program `first` uses slot `first` (BLOCK_M x K_SLOT).
    """
    n_tiles = tl.cdiv(n_rows, BLOCK_M)
    k_iters = tl.cdiv(K, BLOCK_K)
    offs_b = tl.arange(0, BLOCK_M)
    slot = s_ptr + first * (BLOCK_M * K_SLOT) + offs_b[:, None] * K_SLOT
    for t in range(first, n_tiles, step):
        row0 = t * BLOCK_M
        mask_m = (row0 + offs_b) < n_rows
        offs_n = tl.arange(0, BLOCK_N)
        mask_n = offs_n < N
        acc = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
        for ki in tl.range(0, k_iters, num_stages=NUM_STAGES):  # over the link, once
            w = _load_w(w_ptr, w_desc, row0, ki * BLOCK_K, mask_m, K, stride_wm, USE_TMA, EVEN_K,
                        BLOCK_M, BLOCK_K)
            tl.store(slot + (ki * BLOCK_K + tl.arange(0, BLOCK_K))[None, :], w)
            acc = _xdot(acc, x_ptr, w, ki * BLOCK_K, offs_n, mask_n, K, stride_xn, stride_xk,
                        EVEN_K, BLOCK_K, DOT_F32)
        _store(acc, b_ptr, y_ptr, row0, n_rows, 0, offs_n, mask_n, stride_yn, stride_ym, HAS_BIAS, BLOCK_M)
        tl.debug_barrier()  # the slot is written by the whole program before anyone reads it
        for n0 in range(BLOCK_N, N, BLOCK_N):  # the other token blocks: from the HBM slot
            offs_n = n0 + tl.arange(0, BLOCK_N)
            mask_n = offs_n < N
            acc = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
            for ki in tl.range(0, k_iters, num_stages=NUM_STAGES):
                w = tl.load(slot + (ki * BLOCK_K + tl.arange(0, BLOCK_K))[None, :], cache_modifier=".cg")
                acc = _xdot(acc, x_ptr, w, ki * BLOCK_K, offs_n, mask_n, K, stride_xn, stride_xk,
                            EVEN_K, BLOCK_K, DOT_F32)
            _store(acc, b_ptr, y_ptr, row0, n_rows, 0, offs_n, mask_n, stride_yn, stride_ym, HAS_BIAS, BLOCK_M)
        tl.debug_barrier()  # every read of this tile's slot is done before the next tile's writes


def once_workspace(device: torch.device, dtype: torch.dtype, programs: int, k: int,
                   cfg: KernelConfig) -> tuple[torch.Tensor, int]:
    """(flat slot workspace of `dtype`, k_slot) for `programs` host programs, shared per device.

    Launches on one stream may share it (each program rewrites its slot before reading it). It
    only grows, never inside CUDA graph capture; outgrown buffers stay alive for graphs using them.
    """
    k_slot = cdiv(k, cfg.block_k) * cfg.block_k
    return shared_buffer("host-once slots", device, dtype, programs * cfg.block_m * k_slot, keep_outgrown=True), k_slot
