"""Split linear: Y = X @ W^T + b with W's rows split between pinned host memory and HBM.

W (M x K) is cut along its output rows: rows [0, M_H) live in pinned host memory (`w_host`),
rows [M_H, M) in HBM (`w_hbm`). One persistent launch computes all of Y (N x M):
programs [0, P_h) ("host programs") walk the host row tiles and read them over the host link
(plain loads or TMA); programs [P_h, P_h + P_g) walk the HBM row tiles. Each program writes its
own output columns, so there is no cross-program reduction. For N <= block_n (decode) a
program covers every token at once, so each host weight byte crosses the link exactly once;
for larger N the program loops over token blocks and re-reads its row tile once per block
(read amplification ceil(N / block_n)), unless cfg.host_kernel == "triton_once": then host
programs read each host tile once and serve the other token blocks from an HBM slot
(dak.kernels.split_linear_once).

Shapes and dtypes: x (N, K), w_host (M_H, K), w_hbm (M - M_H, K), bias (M,) or None, out (N, M);
all bf16 or all fp16, accumulation in fp32.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

from dak.kernels.config import KernelConfig, cdiv
from dak.kernels.split_linear_checks import check_split_args, host_link_bytes, tma_compatible  # noqa: F401
from dak.kernels.split_linear_once import _rows_once, once_workspace
from dak.kernels.split_linear_tiles import _mac, _store
from dak.runtime_env import interpreting


@triton.jit
def _rows(x_ptr, w_ptr, w_desc, b_ptr, y_ptr, first, step, n_rows, out_row0, N, K,
          stride_xn, stride_xk, stride_wm, stride_yn, stride_ym,
          HAS_BIAS: tl.constexpr, USE_TMA: tl.constexpr, EVEN_K: tl.constexpr, FLAT: tl.constexpr,
          BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
          NUM_STAGES: tl.constexpr, DOT_F32: tl.constexpr):
    """Row tiles first, first+step, ... of one weight buffer (n_rows rows) -> Y[:, out_row0 + ...].

    FLAT (all tokens fit one token tile): one flattened loop over (tile, k) pairs, so the
    software pipeline keeps loads in flight across tile boundaries. Otherwise: per tile, per
    token block, a pipelined loop over k (the row tile is re-read for each token block).
    """
    n_tiles = tl.cdiv(n_rows, BLOCK_M)
    k_iters = tl.cdiv(K, BLOCK_K)
    if FLAT:
        offs_n = tl.arange(0, BLOCK_N)
        mask_n = offs_n < N
        my_tiles = tl.cdiv(tl.maximum(n_tiles - first, 0), step)
        acc = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
        for it in tl.range(0, my_tiles * k_iters, num_stages=NUM_STAGES):
            ki = it % k_iters
            row0 = (first + (it // k_iters) * step) * BLOCK_M
            mask_m = (row0 + tl.arange(0, BLOCK_M)) < n_rows
            acc = _mac(acc, x_ptr, w_ptr, w_desc, row0, ki * BLOCK_K, offs_n, mask_n, mask_m, K,
                       stride_xn, stride_xk, stride_wm, USE_TMA, EVEN_K, BLOCK_M, BLOCK_K, DOT_F32)
            if ki == k_iters - 1:
                _store(acc, b_ptr, y_ptr, row0, n_rows, out_row0, offs_n, mask_n, stride_yn, stride_ym,
                       HAS_BIAS, BLOCK_M)
                acc = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
    else:
        for t in range(first, n_tiles, step):
            row0 = t * BLOCK_M
            mask_m = (row0 + tl.arange(0, BLOCK_M)) < n_rows
            for n0 in range(0, N, BLOCK_N):
                offs_n = n0 + tl.arange(0, BLOCK_N)
                mask_n = offs_n < N
                acc = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
                for ki in tl.range(0, k_iters, num_stages=NUM_STAGES):
                    acc = _mac(acc, x_ptr, w_ptr, w_desc, row0, ki * BLOCK_K, offs_n, mask_n, mask_m, K,
                               stride_xn, stride_xk, stride_wm, USE_TMA, EVEN_K, BLOCK_M, BLOCK_K, DOT_F32)
                _store(acc, b_ptr, y_ptr, row0, n_rows, out_row0, offs_n, mask_n, stride_yn, stride_ym,
                       HAS_BIAS, BLOCK_M)


@triton.jit
def _rows_split_k(x_ptr, w_ptr, w_desc, b_ptr, y_ptr, ws_ptr, cnt_ptr, first, step, n_rows, N, K,
                  stride_xn, stride_xk, stride_wm, stride_yn, stride_ym,
                  HAS_BIAS: tl.constexpr, USE_TMA: tl.constexpr, EVEN_K: tl.constexpr,
                  SPLIT_K: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                  BLOCK_K: tl.constexpr, NUM_STAGES: tl.constexpr, DOT_F32: tl.constexpr):
    """Decode host rows with split-K: work items (tile, k-slice), so few host row tiles still
    keep many host programs (and loads) in flight. Each item stores its fp32 partial in its own
    workspace slot; the last item of a tile to finish (per-tile counter) sums the SPLIT_K
    partials in a fixed order (deterministic), adds the bias, writes Y and resets the counter.
    Every host byte is still read once."""
    n_tiles = tl.cdiv(n_rows, BLOCK_M)
    k_iters = tl.cdiv(K, BLOCK_K)
    per = tl.cdiv(k_iters, SPLIT_K)
    offs_n = tl.arange(0, BLOCK_N)
    mask_n = offs_n < N
    offs_b = tl.arange(0, BLOCK_M)
    slot = offs_n[:, None] * BLOCK_M + offs_b[None, :]
    my_items = tl.cdiv(tl.maximum(n_tiles * SPLIT_K - first, 0), step)
    acc = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
    for it in tl.range(0, my_items * per, num_stages=NUM_STAGES):
        item = first + (it // per) * step
        kk = it % per
        tile = item // SPLIT_K
        ki = (item % SPLIT_K) * per + kk
        row0 = tile * BLOCK_M
        mask_m = ((row0 + offs_b) < n_rows) & (ki < k_iters)
        acc = _mac(acc, x_ptr, w_ptr, w_desc, row0, ki * BLOCK_K, offs_n, mask_n & (ki < k_iters), mask_m, K,
                   stride_xn, stride_xk, stride_wm, USE_TMA, EVEN_K, BLOCK_M, BLOCK_K, DOT_F32)
        if kk == per - 1:
            tl.store(ws_ptr + item * (BLOCK_N * BLOCK_M) + slot, acc)
            done = tl.atomic_add(cnt_ptr + tile, 1, sem="acq_rel")
            if done == SPLIT_K - 1:
                tot = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
                for s in tl.static_range(SPLIT_K):
                    tot += tl.load(ws_ptr + (tile * SPLIT_K + s) * (BLOCK_N * BLOCK_M) + slot,
                                   cache_modifier=".cg")
                _store(tot, b_ptr, y_ptr, row0, n_rows, 0, offs_n, mask_n, stride_yn, stride_ym,
                       HAS_BIAS, BLOCK_M)
                tl.atomic_xchg(cnt_ptr + tile, 0)
            acc = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)


@triton.jit
def _split_linear_kernel(
    # pointers (and TMA descriptors, or the same pointers when TMA is off)
    x_ptr, wh_ptr, wh_desc, wg_ptr, wg_desc, b_ptr, y_ptr, ws_ptr, cnt_ptr, slot_ptr,
    # sizes: tokens, reduction, host rows, HBM rows, host-once slot row length
    N, K, M_H, M_G, K_SLOT,
    # strides
    stride_xn, stride_xk, stride_whm, stride_wgm, stride_yn, stride_ym,
    # persistent grid split
    HOST_PROGS, HBM_PROGS,
    # meta-parameters
    HAS_BIAS: tl.constexpr, HOST_TMA: tl.constexpr, HBM_TMA: tl.constexpr, EVEN_K: tl.constexpr,
    FLAT: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    NUM_STAGES: tl.constexpr, DOT_F32: tl.constexpr, HOST_SPLIT_K: tl.constexpr, HOST_ONCE: tl.constexpr,
):
    pid = tl.program_id(0)
    if HOST_SPLIT_K > 1 and pid < HOST_PROGS:
        _rows_split_k(x_ptr, wh_ptr, wh_desc, b_ptr, y_ptr, ws_ptr, cnt_ptr, pid, HOST_PROGS, M_H, N, K,
                      stride_xn, stride_xk, stride_whm, stride_yn, stride_ym,
                      HAS_BIAS, HOST_TMA, EVEN_K, HOST_SPLIT_K, BLOCK_M, BLOCK_N, BLOCK_K, NUM_STAGES, DOT_F32)
    elif HOST_ONCE and pid < HOST_PROGS:
        _rows_once(x_ptr, wh_ptr, wh_desc, slot_ptr, b_ptr, y_ptr, pid, HOST_PROGS, M_H, N, K, K_SLOT,
                   stride_xn, stride_xk, stride_whm, stride_yn, stride_ym,
                   HAS_BIAS, HOST_TMA, EVEN_K, BLOCK_M, BLOCK_N, BLOCK_K, NUM_STAGES, DOT_F32)
    elif pid < HOST_PROGS:
        _rows(x_ptr, wh_ptr, wh_desc, b_ptr, y_ptr, pid, HOST_PROGS, M_H, 0, N, K,
              stride_xn, stride_xk, stride_whm, stride_yn, stride_ym,
              HAS_BIAS, HOST_TMA, EVEN_K, FLAT, BLOCK_M, BLOCK_N, BLOCK_K, NUM_STAGES, DOT_F32)
    else:
        _rows(x_ptr, wg_ptr, wg_desc, b_ptr, y_ptr, pid - HOST_PROGS, HBM_PROGS, M_G, M_H, N, K,
              stride_xn, stride_xk, stride_wgm, stride_yn, stride_ym,
              HAS_BIAS, HBM_TMA, EVEN_K, FLAT, BLOCK_M, BLOCK_N, BLOCK_K, NUM_STAGES, DOT_F32)


def _descriptor(w: torch.Tensor, cfg: KernelConfig):
    return TensorDescriptor(w, list(w.shape), [w.stride(0), 1], [cfg.block_m, cfg.block_k])


def split_linear(x: torch.Tensor, w_host: torch.Tensor, w_hbm: torch.Tensor, bias: torch.Tensor | None,
                 cfg: KernelConfig, out: torch.Tensor | None = None) -> torch.Tensor:
    """Y = x @ cat(w_host, w_hbm)^T + bias, in one launch. Returns `out` (allocated if None).

    `cfg` must come from `dak.kernels.config.finalize` / the tuner for these row counts.
    """
    n, k, m_h, m_g = check_split_args(x, w_host, w_hbm, bias, out)
    if out is None:
        out = torch.empty((n, m_h + m_g), dtype=x.dtype, device=x.device)
    if n == 0 or m_h + m_g == 0:
        return out
    if (m_h and cfg.host_programs < 1) or (m_g and cfg.hbm_programs < 1):
        raise ValueError(f"config {cfg} has no programs for a side that has rows; use finalize()")
    host_progs = cfg.host_programs if m_h else 0
    hbm_progs = cfg.hbm_programs if m_g else 0
    wh = w_host if m_h else w_hbm
    wg = w_hbm if m_g else w_host
    host_tma = bool(cfg.host_tma and m_h and tma_compatible(w_host))
    hbm_tma = bool(cfg.hbm_tma and m_g and tma_compatible(w_hbm))
    wh_desc = _descriptor(w_host, cfg) if host_tma else wh
    wg_desc = _descriptor(w_hbm, cfg) if hbm_tma else wg
    grid = (host_progs + hbm_progs,)
    split = cfg.host_split_k if (m_h and n <= cfg.block_n) else 1
    ws, cnt = split_k_workspace(x.device, cdiv(m_h, cfg.block_m), split, cfg) if split > 1 else (out, out)
    once = cfg.host_kernel == "triton_once" and m_h > 0 and n > cfg.block_n
    slots, k_slot = once_workspace(x.device, x.dtype, host_progs, k, cfg) if once else (out, 0)
    try:
        _launch(grid, x, wh, wh_desc, wg, wg_desc, bias, out, ws, cnt, slots, k_slot, n, k, m_h, m_g,
                host_progs, hbm_progs, host_tma, hbm_tma, split, once, cfg)
    except triton.runtime.errors.OutOfResources as exc:
        raise ValueError(f"launch config {cfg} needs more on-chip resources than this GPU has "
                         f"({exc}); use a smaller block_k, block_n or num_stages") from exc
    return out


_WORKSPACES: dict = {}
_OUTGROWN: list = []


def split_k_workspace(device: torch.device, tiles: int, split: int, cfg: KernelConfig):
    """(fp32 partials, int32 per-tile counters) for host split-K, shared per device.

    Launches on one stream may share it: each launch leaves its counters at zero. It only
    grows, never inside CUDA graph capture; outgrown buffers stay alive for graphs that use them.
    """
    floats = tiles * split * cfg.block_n * cfg.block_m
    ws, cnt = _WORKSPACES.get(device, (None, None))
    if ws is None or ws.numel() < floats or cnt.numel() < tiles:
        if device.type == "cuda" and torch.cuda.is_current_stream_capturing():
            raise RuntimeError("split-K workspace must be sized before CUDA graph capture; run the "
                               "launch (or SplitLinear.prepare) once outside capture first")
        old = _WORKSPACES.get(device)
        ws = torch.empty(max(floats, 0 if ws is None else ws.numel()), dtype=torch.float32, device=device)
        cnt = torch.zeros(max(tiles, 0 if cnt is None else cnt.numel()), dtype=torch.int32, device=device)
        if old is not None:
            _OUTGROWN.append(old)
        _WORKSPACES[device] = (ws, cnt)
    return ws, cnt


def _launch(grid, x, wh, wh_desc, wg, wg_desc, bias, out, ws, cnt, slots, k_slot, n, k, m_h, m_g,
            host_progs, hbm_progs, host_tma, hbm_tma, split, once, cfg):
    _split_linear_kernel[grid](
        x, wh, wh_desc, wg, wg_desc, bias if bias is not None else x, out, ws, cnt, slots,
        n, k, m_h, m_g, k_slot,
        x.stride(0), x.stride(1), wh.stride(0), wg.stride(0), out.stride(0), out.stride(1),
        host_progs, max(hbm_progs, 1),
        HAS_BIAS=bias is not None, HOST_TMA=host_tma, HBM_TMA=hbm_tma,
        EVEN_K=k % cfg.block_k == 0, FLAT=n <= cfg.block_n,
        BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n, BLOCK_K=cfg.block_k, NUM_STAGES=cfg.num_stages, DOT_F32=interpreting(),
        HOST_SPLIT_K=split, HOST_ONCE=once,
        num_warps=cfg.num_warps, num_stages=cfg.num_stages,
    )

