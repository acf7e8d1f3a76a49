"""Large-N split linear timed the way the runtime runs it in a decode step: chained by copy-ahead.

`linear_large_n` times one operator alone: its first copy starts only when the operator is
called, so every call pays the copy engine's start-up (about 15 us before the first byte lands;
HARDWARE.md: 8 MiB at 48 GB/s against 55 for 1 GiB) and the GEMM left after its last byte. In a
decode step (dak.runtime.engine, also at batch 512, where every operator takes the large-N
path) the SplitLinears are chained by dak.kernels.copy_ahead: operator i+1's copy is queued
behind operator i's, into the other staging slot, so the link streams from one operator into
the next. Here `ops` SplitLinears of one shape (the same weight, each in its own pinned buffer
and HBM part) run one after another in such a chain, captured in a CUDA graph; the time per
operator is the replay's time / ops, the chain's start-up and its last GEMM included. Each
variant (chunks, taper, fork; with more than one chunk, also under $DAK_CHAIN_ONE_CHUNK=0, where
every operator keeps its chunks instead of all but the last copying in one memcpy) has its output
checked against x @ W^T before it is timed.
"""

from __future__ import annotations

import os

import torch

from dak.kernels import copy_ahead
from dak.kernels.config import KernelConfig, finalize
from dak.kernels.split_linear_ce import ce_rows
from dak.kernels.timing import graph_time_ms
from dak.kernels.tuning import token_bucket
from dak.nn import SplitLinear

CHAIN_GRID = [dict(ce_share=1.0, ce_chunks=ch, hbm_cublas=True, ce_taper=tp, ce_fork=fk)
              for ch, tp, fk in ((1, 1.0, False), (1, 1.0, True), (2, 1.0, False), (2, 1.0, True), (4, 0.5, False))]


def torch_chain_ms(x: torch.Tensor, w, ops: int) -> float:
    """Per-operator ms of `ops` back-to-back all-HBM torch linears on x in one graph: the chain's
    all-HBM reference (a long run of large GEMMs may hold lower clocks than one alone). `w` is
    one weight (used `ops` times) or a list of weights taken in turn (distinct weights keep a
    small operator's chain out of L2)."""
    ws = w if isinstance(w, (list, tuple)) else [w]
    return graph_time_ms([lambda: [torch.nn.functional.linear(x, ws[i % len(ws)]) for i in range(ops)]],
                         target_ms=20.0, max_replays=9) / ops


def chain_modules(w: torch.Tensor, m_h: int, ops: int, row_tile: int) -> list[SplitLinear]:
    """`ops` SplitLinears holding `w` with its first m_h rows in pinned memory (untuned)."""
    return [SplitLinear(w, host_rows=m_h, row_tile=row_tile, tune=False) for _ in range(ops)]


def chain_step(mods: list[SplitLinear], x: torch.Tensor, cfg: KernelConfig):
    """Give every module `cfg` for x's token count, chain them; returns the chained step. A
    config that stages no host row by the copy engine has nothing to chain: the step then runs
    the modules one after another, as a decode step does."""
    copy_ahead.unlink(mods)  # an earlier chain of these modules (link_chain relinks only what it records)
    for mod in mods:
        mod._configs[token_bucket(x.shape[0])] = cfg

    def run():
        return [mod(x) for mod in mods]
    with copy_ahead.record_chain() as order:
        run()
    chains = ce_rows(cfg, mods[0].host_rows) and cfg.host_kernel != "cuda_multicast"
    expect = len(mods) if chains else 0
    if copy_ahead.link_chain(order, x.shape[0]) != expect:
        raise RuntimeError(f"{expect} of the {len(mods)} operators should have been chained")

    def step():
        with copy_ahead.copy_ahead_step(x.device):
            return run()
    return step


def chain_error(step, ref: torch.Tensor) -> float:
    """Largest relative difference of any operator's output in `step()` from `ref` (inf for NaN)."""
    scale = ref.abs().max().clamp_min(1e-6)
    errs = [((y.float() - ref).abs().max() / scale).item() for y in step()]
    return max(e if e == e else float("inf") for e in errs)


def chained_variants(mods: list[SplitLinear], x: torch.Tensor, w: torch.Tensor, sms: int, base: dict,
                     grid: list[dict] = CHAIN_GRID) -> list[dict]:
    """Per `grid` variant (fields over `base`): its config fields and the chain's time per
    operator in ms; with more than one chunk, once per $DAK_CHAIN_ONE_CHUNK rule."""
    m, m_h = w.shape[0], mods[0].host_rows
    ref = x.float() @ w.float().t()
    out, saved = [], os.environ.get("DAK_CHAIN_ONE_CHUNK")
    for kw, rule in [(kw, r) for kw in grid for r in (("1", "0") if kw["ce_chunks"] > 1 else ("1",))]:
        cfg = finalize(KernelConfig(**{**base, **kw}), m_h, m - m_h, sms)
        os.environ["DAK_CHAIN_ONE_CHUNK"] = rule  # 1: all but the chain's last copied in one memcpy
        step = chain_step(mods, x, cfg)
        err = chain_error(step, ref)
        if not err <= 2e-2:
            raise RuntimeError(f"chained split linear differs from x @ W^T (rel. {err:.3g}) for {kw}")
        t = graph_time_ms([step], target_ms=20.0, max_replays=9) / len(mods)
        out.append({"ce_chunks": cfg.ce_chunks, "ce_taper": cfg.ce_taper, "ce_fork": cfg.ce_fork,
                    "one_chunk_but_last": rule == "1", "t_ms": t, "config": cfg.to_dict()})
    if saved is None:
        os.environ.pop("DAK_CHAIN_ONE_CHUNK")
    else:
        os.environ["DAK_CHAIN_ONE_CHUNK"] = saved
    copy_ahead.unlink(mods)
    return out
