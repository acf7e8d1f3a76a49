"""Decode GEMV for a weight wholly in HBM: Y = X @ W^T (+ b) for N <= 16 tokens, one Triton launch.

Why: inside a CUDA graph cuBLAS reads small decode GEMVs well below HBM bandwidth (H200, bf16, N = 8,
fifteenth session, `benchmarks/probe_pdl_chain.py`: 4096x4096 12.9 us, 4096x11008 28.0 us). This
kernel, one program per BLOCK_M rows walking all of K (every token at once: no read repeated), took
11.5 and 25.2 us, faster on 9 of 10 Llama-shaped matrices; a Llama-2-7B decode chain 1.067x cuBLAS's.

`hbm_linear(x2, w, bias)` is what dak's all-HBM linears call: this kernel where `gemv_enabled()`
(the default since the sixteenth session; $DAK_HBM_GEMV=0 turns it off) and the input is a decode
batch, torch's F.linear otherwise (H200, B = 8, x = 0/1/2%, `e2e-h6-*-s16-h200.json`: Llama-2-7B
4.38/4.39/4.45 -> 4.05/4.07/4.13 ms, OPT-6.7B 4.72/5.37/5.63 -> 4.66/5.23/5.61).
`swiglu_linear(x, w_gate_up)` ($DAK_GEMV_SILU=0 off) computes a Llama MLP's SiLU(gate) * up in the
fused gate/up GEMV's epilogue, each program reading matching gate and up rows: one launch fewer a
layer (`e2e-h10-*-s16-h200.json`: Llama-2-7B 3.98/4.00/4.06 -> 3.92/3.94/4.01 ms at 0/1/2%).
`hbm_gemv(..., relu=True)` and `hbm_gemv(..., residual=r)` apply OPT's ReLU and residual add
in the epilogue (dak.runtime.fused_opt). Configs: `heuristic(M, K)` (from the H200 sweep), or
with tune=True a short graph-timed sweep (cuBLAS one of its candidates) cached on disk per
(GPU, dtype, N, M, K, bias); the epilogue forms take the plain product's config (SwiGLU with
half its rows per program).

Shapes and dtypes: x (N, K) with unit column stride, w (M, K) with unit column stride (2M rows
for SwiGLU), bias (M,) or None; all bf16 or all fp16, fp32 accumulation; out (N, M) with unit
column stride (a column slice of a wider output is fine). dak.kernels.split_linear_ce uses it
for copy-engine operators' GEMMs under $DAK_CE_GEMV=1.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

import torch
import torch.nn.functional as F
import triton
import triton.language as tl
from triton.runtime.errors import OutOfResources

from dak.kernels.config_cache import ConfigCache, time_or_inf
from dak.kernels.fused_layer import silu_mul
from dak.kernels.fused_ops import need_kernel_device
from dak.kernels.timing import l2_copies
from dak.runtime_env import KERNEL_DTYPES, gpu_name, interpreting
from dak.shares import gemv_enabled, gemv_silu_enabled

MAX_TOKENS = 16  # the token tile: tl.dot needs >= 16 rows, and one tile covers every decode token


@dataclass(frozen=True)
class GemvConfig:
    """A launch config; backend "cublas" means torch's F.linear (a tuned sweep may pick it)."""
    block_m: int = 32
    block_k: int = 256
    num_stages: int = 4
    backend: str = "triton"
    num_warps: int = 4

    def to_dict(self) -> dict:
        return asdict(self)


CANDIDATES = [GemvConfig(bm, bk, st) for bm in (16, 32, 64) for bk in (128, 256) for st in (3, 4, 5, 6)
              if (bm, bk, st) != (64, 256, 6)]  # that one needs more shared memory than an H100/H200 has
CACHE: ConfigCache[GemvConfig] = ConfigCache("hbm_gemv", GemvConfig, GemvConfig.to_dict)


def heuristic(m: int, k: int) -> GemvConfig:
    """The untuned config, by rows (H200 sweep of 48 configs on every all-HBM decode linear of
    Llama-2-7B, Llama-3-8B, OPT-6.7B and OPT-30B, N = 8, bf16, sixteenth session: within 2.5% of
    the best on all 19 matrices, 1.02-1.25x cuBLAS): up to 4096 rows 32-row tiles with a deep
    pipeline; up to 8192 64 x 256 tiles; taller matrices 64 x 128 tiles, 3 stages up to 32768 rows."""
    if m <= 4096:
        return GemvConfig(32, 256, 6)
    if m <= 8192:
        return GemvConfig(64, 256, 4)
    if m <= 16384:
        return GemvConfig(64, 128, 4)
    if m <= 32768:
        return GemvConfig(64, 128, 3)
    return GemvConfig(64, 128, 4)


def untuned(m: int, k: int) -> GemvConfig:
    """The heuristic's config; in Triton's CPU interpreter, which pays per program, 128-row tiles
    (each row's sum is the same: only BLOCK_K orders it; halves the CPU tests' all-HBM decode)."""
    cfg = heuristic(m, k)
    return replace(cfg, block_m=128) if interpreting() else cfg


@triton.jit
def _load_w(w_rows, ks, mask_m, K, EVEN_M: tl.constexpr, EVEN_K: tl.constexpr):
    if EVEN_K:
        if EVEN_M:
            return tl.load(w_rows + ks[None, :])
        return tl.load(w_rows + ks[None, :], mask=mask_m[:, None], other=0.0)
    return tl.load(w_rows + ks[None, :], mask=mask_m[:, None] & (ks[None, :] < K), other=0.0)


@triton.jit
def _mma(x, w, acc, DOT_F32: tl.constexpr):
    if DOT_F32:  # Triton 3.6's interpreter mis-computes bf16 tl.dot: upcast there only
        return tl.dot(x.to(tl.float32), tl.trans(w.to(tl.float32)), acc, input_precision="ieee")
    return tl.dot(x, tl.trans(w), acc)


@triton.jit
def _gemv(x_ptr, w_ptr, b_ptr, r_ptr, y_ptr, N, M, K, stride_xn, stride_wm, stride_rn, stride_yn, SCALE_M, SCALE,
          v_ptr, stride_vm, TOP_M,
          HAS_BIAS: tl.constexpr, SWIGLU: tl.constexpr, RELU: tl.constexpr, HAS_RES: tl.constexpr,
          HAS_SCALE: tl.constexpr, TWO_PART: tl.constexpr,
          EVEN_M: tl.constexpr, EVEN_K: tl.constexpr,
          BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, DOT_F32: tl.constexpr):
    """Y[:, rows] for this program's BLOCK_M rows of W, every token at once, all of K. SWIGLU: W
    has 2M rows (gate, then up) and Y[:, j] = silu(gate_j) * up_j, this program reading its
    BLOCK_M gate rows and the matching up rows. HAS_SCALE: rows < SCALE_M times SCALE (OPT's q).
    TWO_PART: rows [0, TOP_M) of W at w_ptr, rows [TOP_M, M) at v_ptr (TOP_M % BLOCK_M == 0)."""
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    mask_m = offs_m < M
    mask_n = offs_n < N
    w_rows = w_ptr + offs_m.to(tl.int64)[:, None] * stride_wm
    if TWO_PART:  # each program's rows lie wholly in one part
        if tl.program_id(0) * BLOCK_M >= TOP_M:
            w_rows = v_ptr + (offs_m - TOP_M).to(tl.int64)[:, None] * stride_vm
    u_rows = w_rows + M.to(tl.int64) * stride_wm
    x_rows = x_ptr + offs_n[:, None] * stride_xn
    acc = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
    acc_u = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        ks = k0 + offs_k
        if EVEN_K:
            x = tl.load(x_rows + ks[None, :], mask=mask_n[:, None], other=0.0)
        else:
            x = tl.load(x_rows + ks[None, :], mask=mask_n[:, None] & (ks[None, :] < K), other=0.0)
        acc = _mma(x, _load_w(w_rows, ks, mask_m, K, EVEN_M, EVEN_K), acc, DOT_F32)
        if SWIGLU:
            acc_u = _mma(x, _load_w(u_rows, ks, mask_m, K, EVEN_M, EVEN_K), acc_u, DOT_F32)
    if HAS_BIAS:
        acc += tl.load(b_ptr + offs_m, mask=mask_m, other=0.0).to(tl.float32)[None, :]
        if SWIGLU:
            acc_u += tl.load(b_ptr + M + offs_m, mask=mask_m, other=0.0).to(tl.float32)[None, :]
    mask = mask_n[:, None] & mask_m[None, :]
    if RELU or HAS_RES or SWIGLU or HAS_SCALE:  # on the output rounded as F.linear rounds it, as eager ops see it
        acc = acc.to(y_ptr.dtype.element_ty).to(tl.float32)
        if HAS_SCALE:
            acc = tl.where((offs_m < SCALE_M)[None, :], acc * SCALE, acc)
        if SWIGLU:  # round(round(silu(gate)) * round(up)), as dak.kernels.fused_layer.silu_mul
            acc = (acc / (1.0 + tl.exp(-acc))).to(y_ptr.dtype.element_ty).to(tl.float32)
            acc = acc * acc_u.to(y_ptr.dtype.element_ty).to(tl.float32)
        if RELU:
            acc = tl.maximum(acc, 0.0)
        if HAS_RES:
            acc += tl.load(r_ptr + offs_n[:, None] * stride_rn + offs_m[None, :], mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + offs_n[:, None] * stride_yn + offs_m[None, :], acc.to(y_ptr.dtype.element_ty), mask=mask)


def check_gemv_args(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor | None, out: torch.Tensor | None,
                    swiglu: bool = False):
    """ValueError, saying what to pass instead, for inputs hbm_gemv cannot take (`swiglu`: the
    output is half w's rows wide)."""
    if x.dim() != 2 or w.dim() != 2 or x.shape[1] != w.shape[1]:
        raise ValueError(f"hbm_gemv needs x (N, K) and w (M, K), got {tuple(x.shape)} and {tuple(w.shape)}")
    if not 1 <= x.shape[0] <= MAX_TOKENS:
        raise ValueError(f"hbm_gemv takes 1..{MAX_TOKENS} tokens, got {x.shape[0]}; use F.linear (or "
                         "hbm_linear, which falls back to it) for larger batches")
    if x.dtype not in KERNEL_DTYPES or w.dtype != x.dtype or (bias is not None and bias.dtype != x.dtype):
        raise ValueError(f"hbm_gemv needs bf16 or fp16 x, w and bias of one dtype, got {x.dtype}, {w.dtype}, "
                         f"{None if bias is None else bias.dtype}")
    if x.stride(1) != 1 or w.stride(1) != 1 or (bias is not None and (bias.shape != (w.shape[0],) or
                                                                       bias.stride(0) != 1)):
        raise ValueError("hbm_gemv needs unit column strides in x and w and a contiguous (M,) bias; "
                         "call .contiguous() first")
    m = w.shape[0] // 2 if swiglu else w.shape[0]
    if out is not None and (out.shape != (x.shape[0], m) or out.dtype != x.dtype or out.stride(1) != 1):
        raise ValueError(f"out must be ({x.shape[0]}, {m}) {x.dtype} with unit column stride, "
                         f"got {tuple(out.shape)} {out.dtype} strides {out.stride()}")
    need_kernel_device("hbm_gemv", *(t for t in (x, w, bias, out) if t is not None))


def hbm_gemv(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor | None = None,
             cfg: GemvConfig | None = None, out: torch.Tensor | None = None,
             swiglu: bool = False, relu: bool = False,
             residual: torch.Tensor | None = None, scale_rows: tuple[int, float] | None = None) -> torch.Tensor:
    """x @ w.T (+ bias) by the Triton kernel (or cuBLAS where cfg.backend says so). `swiglu`: w
    (and bias) hold a gate then an up projection of M rows each; returns silu_mul(gate, up), (N, M).
    `relu`: relu of the (rounded) product; `residual` (N, M): residual + the (rounded) product;
    `scale_rows` (r, s): output columns [0, r) times s (OPT's q in a fused q/k/v), each rounded as
    the eager ops round them. (A matrix stored in two parts: dak.kernels.staged_gemv.)"""
    check_gemv_args(x, w, bias, out, swiglu)
    n, k = x.shape
    m = w.shape[0] // 2 if swiglu else w.shape[0]
    if scale_rows is not None and (swiglu or relu or residual is not None or not 0 <= scale_rows[0] <= w.shape[0]):
        raise ValueError(f"scale_rows needs 0 <= rows <= {w.shape[0]} (got {scale_rows[0]}) and no other epilogue")
    if swiglu and (w.shape[0] % 2 or relu or residual is not None):
        raise ValueError(f"swiglu needs w with an even number of rows (gate then up), got {w.shape[0]}, and no "
                         "relu or residual epilogue")
    if residual is not None and (residual.shape != (n, m) or residual.dtype != x.dtype or residual.device != x.device
                                 or residual.stride(1) != 1):
        raise ValueError(f"residual must be ({n}, {m}) {x.dtype} on {x.device} with unit column stride, got "
                         f"{tuple(residual.shape)} {residual.dtype} on {residual.device} strides {residual.stride()}")
    cfg = cfg or (swiglu_config(heuristic(2 * m, k)) if swiglu else heuristic(m, k))
    if out is None:
        out = torch.empty(n, m, dtype=x.dtype, device=x.device)
    if m == 0:
        return out
    if cfg.backend == "cublas":
        if not swiglu and not relu and residual is None and scale_rows is None:
            return torch.addmm(bias, x, w.t(), out=out) if bias is not None else torch.mm(x, w.t(), out=out)
        y = F.linear(x, w, bias)
        y = silu_mul(y[:, :m], y[:, m:]) if swiglu else torch.relu(y) if relu else y
        if scale_rows is not None:
            y[:, :scale_rows[0]] *= scale_rows[1]
        return out.copy_(residual + y if residual is not None else y)
    return launch_gemv(x, w, bias, out, m, cfg, residual=residual, scale_rows=scale_rows, swiglu=swiglu, relu=relu)


def launch_gemv(x, w, bias, out, m, cfg, residual=None, scale_rows=None, swiglu=False, relu=False, rest=None):
    """The _gemv launch over checked arguments; `rest`: rows [w's, m) stored apart (TWO_PART)."""
    r = residual if residual is not None else out
    v = w if rest is None else rest
    _gemv[(triton.cdiv(m, cfg.block_m),)](
        x, w, bias if bias is not None else w, r, out, x.shape[0], m, x.shape[1], x.stride(0), w.stride(0),
        r.stride(0), out.stride(0), *(scale_rows or (0, 1.0)), v, v.stride(0), 0 if rest is None else w.shape[0],
        HAS_BIAS=bias is not None, SWIGLU=swiglu, RELU=relu, HAS_RES=residual is not None,
        HAS_SCALE=scale_rows is not None, TWO_PART=rest is not None, EVEN_M=m % cfg.block_m == 0,
        EVEN_K=x.shape[1] % cfg.block_k == 0, BLOCK_M=cfg.block_m, BLOCK_N=MAX_TOKENS, BLOCK_K=cfg.block_k,
        DOT_F32=interpreting(), num_warps=cfg.num_warps, num_stages=cfg.num_stages,
        enable_fp_fusion=not swiglu and residual is None)
    return out


def gemv_key(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor | None) -> str:
    return f"{gpu_name(x.device)}|{str(x.dtype).removeprefix('torch.')}|n{x.shape[0]}|m{w.shape[0]}|k{w.shape[1]}|" \
           f"bias{int(bias is not None)}"


def tune_gemv(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor | None) -> GemvConfig:
    """The fastest of CANDIDATES and cuBLAS for this shape, each timed inside a CUDA graph over
    enough weight copies (>= 128 MB in all) that back-to-back launches do not hit L2."""
    copies = weight_copies(w)
    out = torch.empty(x.shape[0], w.shape[0], dtype=x.dtype, device=x.device)
    best, best_t = None, float("inf")
    for cfg in CANDIDATES + [GemvConfig(backend="cublas")]:
        try:
            t = time_or_inf(*[lambda c=c, cfg=cfg: hbm_gemv(x, c, bias, cfg, out) for c in copies])
        except OutOfResources:  # more shared memory than this GPU has: not a candidate here
            t = float("inf")
        if t < best_t:
            best, best_t = cfg, t
    return best or heuristic(*w.shape)


def weight_copies(w: torch.Tensor) -> list[torch.Tensor]:
    """`w` and as many copies of it as make >= 128 MB together (at most 7 copies)."""
    return [c for (c,) in l2_copies((w,))]


def config_for(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor | None, tune: bool) -> GemvConfig:
    """The cached config for this shape; else tuned (tune=True, on a GPU, outside graph capture),
    stored on disk; else the heuristic (kept in memory only)."""
    key = gemv_key(x, w, bias)
    cfg = CACHE.get(key)
    if cfg is None:
        capturing = x.device.type == "cuda" and torch.cuda.is_current_stream_capturing()
        tuned = tune and x.device.type == "cuda" and not capturing
        cfg = tune_gemv(x, w, bias) if tuned else untuned(*w.shape)
        CACHE.put(key, cfg, persist=tuned)
    return cfg


def gemv_applies(x2: torch.Tensor) -> bool:
    """Whether hbm_linear sends this (tokens, K) input to the GEMV: gemv_enabled() and 1..16
    tokens, bf16/fp16 with unit column stride, on a GPU or in the interpreter, no autograd."""
    return (gemv_enabled() and 1 <= x2.shape[0] <= MAX_TOKENS and x2.dtype in KERNEL_DTYPES and x2.stride(1) == 1
            and (x2.device.type == "cuda" or interpreting()) and not torch.is_grad_enabled())


def hbm_linear(x2: torch.Tensor, w: torch.Tensor, bias: torch.Tensor | None, tune: bool = False) -> torch.Tensor:
    """F.linear(x2, w, bias), by the GEMV kernel where gemv_applies(x2)."""
    if gemv_applies(x2):
        return hbm_gemv(x2, w, bias, config_for(x2, w, bias, tune))
    return F.linear(x2, w, bias)


def swiglu_config(cfg: GemvConfig) -> GemvConfig:
    """The SwiGLU launch for a plain (2M, K) product's config: half the output rows per program,
    so each still reads as many weight rows (gate and up) as the plain launch's programs."""
    return replace(cfg, block_m=max(16, cfg.block_m // 2))


def swiglu_linear(x2: torch.Tensor, w: torch.Tensor, bias: torch.Tensor | None,
                  tune: bool = False) -> torch.Tensor | None:
    """silu_mul(gate, up) of x2 @ w.T (+ bias), w = [gate rows; up rows], in one GEMV launch, where
    gemv_silu_enabled() and the GEMV applies to x2; else None (the caller runs the two steps)."""
    if not gemv_silu_enabled() or not gemv_applies(x2) or w.shape[0] % 2:
        return None
    return hbm_gemv(x2, w, bias, swiglu_config(config_for(x2, w, bias, tune)), swiglu=True)
