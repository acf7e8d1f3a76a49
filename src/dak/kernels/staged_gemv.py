"""One GEMV launch over a matrix stored in two parts: Y = X @ cat(W_top, W_rest)^T (+ b), N <= 16.

A copy-engine operator at decode (dak.kernels.split_linear_ce) has its host rows copied into an
HBM staging slot and its other rows resident in HBM: both parts are HBM reads, but the default path
multiplies them by two launches or more (the split kernel or cuBLAS for the resident rows, torch's
GEMM, split-K, for the staged ones) after waiting on the copy per chunk. Once the copies have landed (a copy-ahead
chain issues them one operator or more earlier) the whole product is one all-HBM GEMV: the
kernel of dak.kernels.hbm_gemv with TWO_PART, each program reading its BLOCK_M rows from the
part that holds them (so W_top's rows must be a multiple of BLOCK_M). split_linear_ce takes it
where the plan says (Placement.one_gemv: the copies hide behind compute) or $DAK_CE_ONE_GEMV=1.
"""

from __future__ import annotations

import torch

from dak.kernels.hbm_gemv import GemvConfig, check_gemv_args, heuristic, launch_gemv


def staged_config(m_top: int, m: int, k: int) -> GemvConfig | None:
    """The all-HBM heuristic's launch for an (m, k) matrix, its tile shrunk (to >= 16 rows) until it
    divides the top part's m_top rows; None if no such tile exists."""
    cfg = heuristic(m, k)
    for bm in (cfg.block_m, 32, 16):
        if bm <= cfg.block_m and m_top % bm == 0:
            return GemvConfig(bm, cfg.block_k, cfg.num_stages)
    return None


def staged_gemv(x: torch.Tensor, top: torch.Tensor, rest: torch.Tensor, bias: torch.Tensor | None = None,
                cfg: GemvConfig | None = None, out: torch.Tensor | None = None) -> torch.Tensor:
    """x @ cat(top, rest).T (+ bias) in one launch, without the cat. x (N, K), top (M1, K) and rest
    (M2, K) with unit column strides (any row strides), bias (M1 + M2,) or None; bf16/fp16, one
    dtype; cfg a Triton GemvConfig whose block_m divides M1 (default `staged_config`). Returns out
    (N, M1 + M2), allocated if None."""
    m_top = top.shape[0]
    check_gemv_args(x, rest, None, None)
    if m_top:
        check_gemv_args(x, top, None, None)
    m, (n, k) = m_top + rest.shape[0], x.shape
    cfg = cfg or staged_config(m_top, m, k)
    if cfg is None or cfg.backend != "triton" or m_top % cfg.block_m:
        raise ValueError(f"the top part's {m_top} rows need a Triton launch whose block_m divides them "
                         f"(got {cfg}); pad the top part to a multiple of 16 rows")
    if bias is not None and (bias.shape != (m,) or bias.dtype != x.dtype or bias.stride(0) != 1
                             or bias.device != x.device):
        raise ValueError(f"bias must be a contiguous ({m},) {x.dtype} tensor on {x.device}, got "
                         f"{tuple(bias.shape)} {bias.dtype} on {bias.device}")
    if out is None:
        out = torch.empty(n, m, dtype=x.dtype, device=x.device)
    elif out.shape != (n, m) or out.dtype != x.dtype or out.stride(1) != 1 or out.device != x.device:
        raise ValueError(f"out must be ({n}, {m}) {x.dtype} on {x.device} with unit column stride, got "
                         f"{tuple(out.shape)} {out.dtype} on {out.device}")
    if m_top:
        return launch_gemv(x, top, bias, out, m, cfg, rest=rest)
    return launch_gemv(x, rest, bias, out, m, cfg)  # no top part: the plain launch
