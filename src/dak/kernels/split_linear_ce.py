"""Split linear with part of the host rows moved by the copy engine instead of SM loads.

Measured on the H200 over PCIe Gen5 (benchmarks/results/probe-link-mix-h200.json): the copy
engine moves 55 GB/s, SM zero-copy loads 50-51 GB/s, and running both at once shares the same
~55 GB/s link. So once the host link sets an operator's time, the fastest way to bring host
rows in is the copy engine, pipelined so that compute never waits for the whole copy:

    main stream:    [ split kernel: zero-copy host rows [m_ce, m_h) + HBM rows ]------------+
    copy stream:    [copy chunk 0][copy chunk 1] ... [copy chunk C-1]                        |
    compute stream:           [GEMM chunk 0]  [GEMM chunk 1] ...   [GEMM chunk C-1] -> join -+

Host rows [0, m_ce) (m_ce = ce_share * m_h, rounded to row tiles) are copied chunk by chunk into
an HBM staging buffer (`staging`, at least (m_ce, row stride) elements; shared by operators that
run one after another on a stream) and each chunk is multiplied by torch's GEMM (cuBLAS picks
split-K for few, long rows) as soon as it lands, on a third stream, while the split kernel runs. Every host
byte still crosses the link once. With `hbm_cublas` (many tokens: prefill, large batches) every
host row is staged and the main stream multiplies the HBM rows by cuBLAS too, instead of the
split kernel. All ordering uses CUDA events, so the whole thing captures
into a CUDA graph. Under the interpreter (no GPU) the same steps run in order on the CPU.
By default (`dak.shares.ce_fork_enabled`) the chunk GEMMs run on the main stream after the split
kernel, not on a third stream: no fork and join per operator, so a captured decode step does not
spread over hundreds of graph-internal streams (measured faster); $DAK_CE_FORK=1 forks as drawn,
and so does a config with `ce_fork` (large N: the chunks' GEMMs fill the HBM GEMM's last wave).
`ce_taper` < 1 makes the chunks shrink, so the GEMM left after the last copy is short.
With `hbm_fork` the main stream's part is two launches instead of one split kernel: the in-place
host rows by a host-only split kernel on a forked stream (issued first, so its few link-bound
programs start at once), the HBM rows by dak's all-HBM GEMV (cuBLAS above 16 tokens) beside it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache

import torch

from dak.kernels.buffers import shared_buffer
from dak.kernels.config import KernelConfig, cdiv, finalize
from dak.kernels.fork_gemv import fork_config, parse_launch
from dak.kernels.hbm_gemv import GemvConfig, config_for, gemv_applies, hbm_gemv
from dak.kernels.staged_gemv import staged_config, staged_gemv
from dak.kernels.split_linear import check_split_args, split_linear
from dak.kernels.streams import fork, join, side_stream
from dak.shares import ce_fork_enabled, ce_gemv_enabled, one_gemv_mode


@dataclass(frozen=True)
class CEPlan:
    """Row ranges and per-launch configs of one copy-engine-assisted split linear."""

    m_ce: int  # host rows [0, m_ce) go through the copy engine
    chunks: tuple[tuple[int, int], ...]  # row ranges copied and multiplied one at a time
    main: KernelConfig  # zero-copy host rows [m_ce, m_h) and the HBM rows


def ce_rows(cfg: KernelConfig, m_h: int) -> int:
    """Host rows routed through the copy engine: ce_share of m_h rounded to whole row tiles."""
    if cfg.ce_share <= 0 or m_h == 0:
        return 0
    if cfg.ce_share >= 1:
        return m_h
    return min(m_h, round(cfg.ce_share * m_h / cfg.block_m) * cfg.block_m)


def chunk_bounds(rows: int, tile: int, chunks: int, taper: float = 1.0) -> tuple[tuple[int, int], ...]:
    """Row ranges of `rows` rows in at most `chunks` chunks of whole `tile`-row tiles (the last
    may end mid-tile), chunk i's share proportional to taper ** i; every chunk non-empty."""
    tiles = cdiv(rows, tile)
    n = max(1, min(chunks, tiles)) if rows else 0
    if n == 0:
        return ()
    if taper >= 1.0:  # equal chunks, the remainder in the last
        per = cdiv(tiles, n)
        cuts = [min(i * per, tiles) for i in range(n + 1)]
    else:
        weights = [taper ** i for i in range(n)]
        total, acc, cuts = sum(weights), 0.0, [0]
        for i, w in enumerate(weights[:-1]):
            acc += w
            # at least one tile per chunk, and room for one tile in each chunk still to come
            cuts.append(min(max(round(rows / tile * acc / total), cuts[-1] + 1), tiles - (n - 1 - i)))
        cuts.append(tiles)
    bounds = [(lo * tile, min(hi * tile, rows)) for lo, hi in zip(cuts, cuts[1:])]
    return tuple((lo, hi) for lo, hi in bounds if hi > lo)


@lru_cache(maxsize=4096)
def ce_plan(cfg: KernelConfig, m_h: int, m_g: int, sms: int) -> CEPlan:
    m_ce = ce_rows(cfg, m_h)
    chunks = chunk_bounds(m_ce, cfg.block_m, cfg.ce_chunks, cfg.ce_taper)
    main = finalize(replace(cfg, ce_share=0.0, ce_chunks=1, ce_taper=1.0, hbm_cublas=False, ce_fork=False,
                            hbm_fork=False, fork_gemv=""), m_h - m_ce, 0 if cfg.hbm_fork else m_g, sms)
    return CEPlan(m_ce, chunks, main)


def staging_rows_view(staging: torch.Tensor, rows: int, w_host: torch.Tensor) -> torch.Tensor:
    """(rows, K) view of `staging` with w_host's row stride, so chunk copies are one memcpy."""
    stride = w_host.stride(0)
    if staging.dim() != 1 or staging.numel() < rows * stride or staging.dtype != w_host.dtype:
        raise ValueError(f"staging must be a flat {w_host.dtype} buffer of at least {rows * stride} "
                         f"elements, got {tuple(staging.shape)} {staging.dtype}")
    return staging[: rows * stride].view(rows, stride)


def _padded_rows(w: torch.Tensor, lo: int, hi: int) -> torch.Tensor:
    """Rows [lo, hi) of `w` including the padding up to its row stride (one contiguous block)."""
    return w.as_strided((hi - lo, w.stride(0)), (w.stride(0), 1), w.storage_offset() + lo * w.stride(0))


def _gemm_into(out: torch.Tensor, x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor | None,
               gemv: bool | None = None, gemv_cfg: GemvConfig | None = None) -> None:
    """out = x @ w^T + bias by torch's GEMM, straight into `out` (a column slice of the output:
    cuBLAS writes it with the full row stride, no temporary); with $DAK_CE_GEMV=1 at a decode
    batch by dak's GEMV, which writes the slice the same way (`gemv`: whether the GEMV may serve,
    default ce_gemv_enabled(); `gemv_cfg`: its launch, default the cached or heuristic one)."""
    if (ce_gemv_enabled() if gemv is None else gemv) and gemv_applies(x):
        hbm_gemv(x, w, bias, gemv_cfg or config_for(x, w, bias, tune=False), out=out)
        return
    if bias is None:
        torch.mm(x, w.t(), out=out)
    else:
        torch.addmm(bias, x, w.t(), out=out)


def _hbm_beside_host(x: torch.Tensor, w_host: torch.Tensor, w_hbm: torch.Tensor, bias: torch.Tensor | None,
                     host_cfg: KernelConfig, out: torch.Tensor, gemv_cfg: GemvConfig | None = None) -> None:
    """out = x @ cat(w_host, w_hbm)^T + bias as two launches that run at once: the host rows by a
    host-only split kernel (`host_cfg`) on the forked "host" stream, issued first, and the HBM
    rows by dak's GEMV (launch `gemv_cfg`, else fork_config's; cuBLAS where the GEMV does not
    apply) on the caller's stream."""
    m_h = w_host.shape[0]

    def host():
        split_linear(x, w_host, w_hbm[:0], None if bias is None else bias[:m_h], host_cfg, out=out[:, :m_h])

    def hbm():
        _gemm_into(out[:, m_h:], x, w_hbm, None if bias is None else bias[m_h:], gemv=True,
                   gemv_cfg=gemv_cfg or fork_config(*w_hbm.shape))

    if not m_h or not w_hbm.shape[0] or x.device.type != "cuda":  # nothing to overlap, or the interpreter
        if m_h:
            host()
        if w_hbm.shape[0]:
            hbm()
        return
    main = torch.cuda.current_stream(x.device)
    side = fork(x.device, "host", main)
    with torch.cuda.stream(side):
        host()
    hbm()
    join(main, side)


def issue_copies(w_host: torch.Tensor, plan: CEPlan, stage: torch.Tensor, copy_s: torch.cuda.Stream) -> list:
    """Queue plan's chunk copies of w_host into `stage` on `copy_s`; one landed event per chunk."""
    landed = []
    with torch.cuda.stream(copy_s):
        for lo, hi in plan.chunks:
            stage[lo:hi].copy_(_padded_rows(w_host, lo, hi), non_blocking=True)
            ev = torch.cuda.Event()
            ev.record(copy_s)
            landed.append(ev)
    return landed


def split_linear_ce(x: torch.Tensor, w_host: torch.Tensor, w_hbm: torch.Tensor, bias: torch.Tensor | None,
                    cfg: KernelConfig, staging: torch.Tensor, sms: int,
                    out: torch.Tensor | None = None, ahead=None) -> torch.Tensor:
    """Y = x @ cat(w_host, w_hbm)^T + bias with host rows [0, m_ce) staged by the copy engine.

    Shapes and dtypes as `split_linear`; `staging` is a flat HBM buffer of w_host's dtype with
    at least m_ce * w_host.stride(0) elements. w_host must have whole padded rows in its storage
    (true for dak.host.PinnedBuffer). Returns `out` (allocated if None).

    `ahead` = (dak.kernels.copy_ahead.Step, the calling SplitLinear), GPU only: the copies were
    queued earlier into the operator's copy-ahead slot (`staging` is ignored); its GEMMs then
    release the slot.
    """
    n, k, m_h, m_g = check_split_args(x, w_host, w_hbm, bias, out)
    if out is None:
        out = torch.empty((n, m_h + m_g), dtype=x.dtype, device=x.device)
    plan = ce_plan(cfg, m_h, m_g, sms)
    if n == 0:
        return out

    def bias_of(lo, hi):
        return None if bias is None else bias[lo:hi]

    def rest():  # the main stream's part: in-place host rows [m_ce, m_h) and the HBM rows
        if cfg.hbm_cublas:  # m_ce == m_h
            if m_g:
                _gemm_into(out[:, m_h:], x, w_hbm, bias_of(m_h, m_h + m_g))
        elif cfg.hbm_fork:
            _hbm_beside_host(x, w_host[plan.m_ce:], w_hbm, bias_of(plan.m_ce, m_h + m_g), plan.main,
                             out[:, plan.m_ce:], parse_launch(cfg.fork_gemv) if cfg.fork_gemv else None)
        elif m_h - plan.m_ce + m_g:
            split_linear(x, w_host[plan.m_ce:], w_hbm, bias_of(plan.m_ce, m_h + m_g), plan.main,
                         out=out[:, plan.m_ce:])

    if plan.m_ce == 0:
        rest()
        return out
    end = w_host.storage_offset() + plan.m_ce * w_host.stride(0)
    if w_host.untyped_storage().nbytes() < end * w_host.element_size():
        raise ValueError("w_host's storage must hold whole padded rows; use a dak.host.PinnedBuffer")
    if ahead is not None:
        step, owner = ahead
        landed, stage = step.issued[id(owner)]
    else:
        stage = staging_rows_view(staging, plan.m_ce, w_host)

    one = _one_gemv(x, plan.m_ce, m_h, m_g, k, cfg, ahead)
    if one is not None and x.device.type != "cuda":  # interpreter: every copy, then the one launch
        stage[:m_h].copy_(_padded_rows(w_host, 0, m_h))
        return staged_gemv(x, stage[:m_h, :k], w_hbm, bias, one, out)
    if one is not None:  # the chain queued the copies earlier: wait for them, then one launch
        main = torch.cuda.current_stream(x.device)
        for ev in landed:
            main.wait_event(ev)
        staged_gemv(x, stage[:m_h, :k], w_hbm, bias, one, out)
        step.release(owner, main)
        return out

    def chunk(i):  # staged rows are HBM rows: torch's GEMM (split-K for few, long rows)
        lo, hi = plan.chunks[i]
        _gemm_into(out[:, lo:hi], x, stage[lo:hi, :k], bias_of(lo, hi))

    if x.device.type != "cuda":  # interpreter: same steps, in order
        for i, (lo, hi) in enumerate(plan.chunks):
            stage[lo:hi].copy_(_padded_rows(w_host, lo, hi))
            chunk(i)
        rest()
        return out
    main = torch.cuda.current_stream(x.device)
    copy_s = side_stream(x.device, "copy")
    comp_s = fork(x.device, "compute", main, cfg.ce_fork or ce_fork_enabled())  # or after rest() on main
    if ahead is None:
        copy_s.wait_stream(main)
        landed = issue_copies(w_host, plan, stage, copy_s)
    rest()
    with torch.cuda.stream(comp_s):
        for i, ev in enumerate(landed):
            comp_s.wait_event(ev)
            chunk(i)
    if ahead is not None:
        step.release(owner, comp_s)
    else:
        main.wait_stream(copy_s)  # unchained: join the copy stream now (a copy-ahead step joins at its end)
    join(main, comp_s)
    return out


def _one_gemv(x: torch.Tensor, m_ce: int, m_h: int, m_g: int, k: int, cfg: KernelConfig, ahead):
    """The staged_gemv launch for this call if it takes the one-GEMV path (dak.kernels.staged_gemv:
    the operator's plan says so (SplitLinear.one_gemv, set from Placement.one_gemv) or
    $DAK_CE_ONE_GEMV=1, not 0; every host row staged, a decode batch the GEMV serves, on the GPU
    only inside a copy-ahead chain (`ahead`); the interpreter stands in for one), else None."""
    mode = one_gemv_mode()
    wanted = mode if mode is not None else bool(ahead is not None and getattr(ahead[1], "one_gemv", False))
    if (not wanted or m_ce != m_h or not gemv_applies(x)
            or (x.device.type == "cuda" and ahead is None)):  # hbm_cublas or not: one launch for both parts
        return None
    return staged_config(m_h, m_h + m_g, k)


def staging_buffer(device: torch.device, dtype: torch.dtype, numel: int) -> torch.Tensor:
    """A flat HBM buffer of at least `numel` elements, shared by every caller on (device, dtype).

    Operators that run one after another on a stream can share it. It only grows (a new, larger
    buffer replaces the shared one; earlier holders keep theirs). Not callable inside capture.
    """
    return shared_buffer("copy-engine staging", device, dtype, numel)
