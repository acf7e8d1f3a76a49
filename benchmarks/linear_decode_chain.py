"""Decode-sized split linears timed the way a decode step runs them: `bench_linear.py --chained`.

`bench_linear.py` times one operator alone, so an operator whose host rows go through the copy
engine pays the engine's start-up on every call (HARDWARE.md: a 1 MiB copy alone moves 33.5
GB/s, 8 MiB 48, 1 GiB 55) and the staged rows' GEMV after its last byte. In a decode step
(dak.runtime.engine) the copy-engine SplitLinears are chained by dak.kernels.copy_ahead: the next
operator's copy is queued behind this one's, so the link streams on from one operator into the
next. Here CHAIN_OPS SplitLinears of one shape (each with its own pinned rows and HBM part, so
replays do not hit L2) run one after another in one CUDA graph; the time per operator is the
replay's time / CHAIN_OPS, the chain's first copy and last GEMV included. Variants per case:
  heuristic   the untuned config the runtime launches (`heuristic_config`)
  tuned       the config bench_linear timed the operator alone with (tuned or from the cache)
  in_place    every host row read in place by the split kernel's host programs (nothing chained)
  ce          every host row staged by copy-ahead, HBM rows by the split kernel; 1 or 2 chunks
  ce_cublas   every host row staged by copy-ahead, HBM rows by cuBLAS (prefetch's own GEMMs)
  ce_gemv     every host row staged by copy-ahead, HBM rows by dak's GEMV (hbm_fork)
  heuristic+fork, tuned+fork   those configs with hbm_fork: HBM rows by dak's GEMV beside a
              host-only split kernel (KernelConfig.hbm_fork)
Every variant's outputs are checked against x @ W^T before it is timed. The baseline beside it
is the prefetch baseline chained the same way (`prefetch_chain`): each operator's host rows
copied one operator ahead into the other of two HBM staging buffers, as the layer prefetcher
of the end-to-end bench does, HBM rows and staged rows multiplied by cuBLAS; and torch's
all-HBM linear over CHAIN_OPS distinct copies of the weight in a row.
"""

from __future__ import annotations

from dataclasses import replace

import torch

from dak.kernels import copy_ahead
from dak.kernels.config import KernelConfig, finalize, heuristic_config
from dak.kernels.split_linear_checks import tma_compatible
from dak.kernels.timing import graph_time_ms
from dak.nn.split_linear import host_rows_for
from linear_chain import chain_error, chain_modules, chain_step, torch_chain_ms

CHAIN_OPS = 8
VARIANTS = {
    "in_place": dict(ce_share=0.0, ce_chunks=1, hbm_cublas=False),
    "ce": dict(ce_share=1.0, ce_chunks=1, hbm_cublas=False),
    "ce_2chunks": dict(ce_share=1.0, ce_chunks=2, hbm_cublas=False),
    "ce_cublas": dict(ce_share=1.0, ce_chunks=1, hbm_cublas=True),
    "ce_gemv": dict(ce_share=1.0, ce_chunks=1, hbm_cublas=False, hbm_fork=True),
}


def prefetch_chain(mods, x: torch.Tensor):
    """step() of the prefetch baseline over the modules' own host and HBM parts, one operator
    ahead: operator i+1's host rows are copied into the other of two staging buffers while
    operator i runs, once operator i-1's staged GEMM has read that buffer."""
    n, m_h, k = x.shape[0], mods[0].host_rows, x.shape[1]
    hosts = [mod.w_host.as_strided((m_h, mod.w_host.stride(0)), (mod.w_host.stride(0), 1)) for mod in mods]
    bufs = [torch.empty(hosts[0].shape, dtype=x.dtype, device=x.device) for _ in range(2)]
    outs = [torch.empty(n, mod.out_features, dtype=x.dtype, device=x.device) for mod in mods]
    side = torch.cuda.Stream(x.device)

    def step():
        main = torch.cuda.current_stream(x.device)
        side.wait_stream(main)
        copied, freed = [], [None, None]

        def issue(i):
            with torch.cuda.stream(side):
                if freed[i % 2] is not None:
                    side.wait_event(freed[i % 2])
                bufs[i % 2].copy_(hosts[i], non_blocking=True)
                copied.append(torch.cuda.Event())
                copied[-1].record(side)
        issue(0)
        for i, mod in enumerate(mods):
            if i + 1 < len(mods):
                issue(i + 1)
            if mod.out_features > m_h:
                torch.mm(x, mod.w_hbm.t(), out=outs[i][:, m_h:])
            main.wait_event(copied[i])
            torch.mm(x, bufs[i % 2][:, :k].t(), out=outs[i][:, :m_h])
            freed[i % 2] = torch.cuda.Event()
            freed[i % 2].record(main)
        main.wait_stream(side)
        return outs
    return step


def _timed(step, ref: torch.Tensor, what: str) -> float:
    err = chain_error(step, ref)
    if not err <= 2e-2:
        raise RuntimeError(f"chained {what} differs from x @ W^T (rel. {err:.3g})")
    return graph_time_ms([step], target_ms=10.0, max_replays=7) / CHAIN_OPS


def add_chained(name: str, w: torch.Tensor, tokens, ratios, row_tile: int, sms: int, rows: list) -> None:
    """Add chained times to the rows bench_linear wrote for weight `w` (one per N and x > 0):
    t_chain_ms (best variant), chain_over_bound, the heuristic's, chained prefetch and torch."""
    m, k = w.shape
    by_key = {(r["N"], r["host_rows"]): r for r in rows if r["shape"] == name}
    t_torch: dict[int, float] = {}
    copies = [w] + [w.clone() for _ in range(CHAIN_OPS - 1)]  # distinct weights for torch's chain
    for ratio in ratios:
        m_h = host_rows_for(m, row_tile, host_ratio=ratio)
        if m_h == 0:
            continue
        mods = chain_modules(w, m_h, CHAIN_OPS, row_tile)
        tma_ok = tma_compatible(mods[0].w_host) and (m_h == m or tma_compatible(mods[0].w_hbm))
        for n in tokens:
            row = by_key.get((n, m_h))
            if row is None:
                continue
            x = torch.randn(n, k, device=w.device).to(w.dtype)
            ref = x.float() @ w.float().t()
            heur = heuristic_config(n, m_h, m - m_h, k, sms, tma_ok)
            variants = {"heuristic": heur}
            tuned = KernelConfig(**row["config"]) if isinstance(row.get("config"), dict) else heur
            if tuned != heur:
                variants["tuned"] = tuned
            for vname in list(variants):
                if m_h < m and not variants[vname].hbm_fork and variants[vname].host_kernel != "cuda_multicast":
                    variants[vname + "+fork"] = finalize(replace(variants[vname], hbm_cublas=False, hbm_fork=True),
                                                         m_h, m - m_h, sms)
            for vname, kw in VARIANTS.items():
                if kw.get("hbm_fork") and m_h == m:
                    continue
                cfg = finalize(replace(heur, **kw), m_h, m - m_h, sms)
                if all(cfg != c for c in variants.values()):
                    variants[vname] = cfg
            times = {v: _timed(chain_step(mods, x, cfg), ref, f"split linear ({v})") for v, cfg in variants.items()}
            t_pre = _timed(prefetch_chain(mods, x), ref, "prefetch")
            if n not in t_torch:
                t_torch[n] = torch_chain_ms(x, copies, CHAIN_OPS)
            best = min(times, key=times.get)
            row.update(chain_ops=CHAIN_OPS, t_chain_ms=times[best], chain_variant=best,
                       chain_config=variants[best].to_dict(), chain_variants_ms=times,
                       t_chain_heuristic_ms=times["heuristic"], t_prefetch_chain_ms=t_pre,
                       t_torch_chain_ms=t_torch[n], chain_over_bound=times[best] / row["bound_ms"],
                       chain_heuristic_over_bound=times["heuristic"] / row["bound_ms"],
                       chain_speedup_vs_prefetch_chain=t_pre / times[best])
            print(f"{name:16s} N={n:4d} x={100 * row['x']:6.2f}% chained: best {best} {times[best] * 1e3:8.1f}us "
                  f"r={row['chain_over_bound']:5.2f} heuristic r={row['chain_heuristic_over_bound']:5.2f} "
                  f"prefetch chained {t_pre * 1e3:8.1f}us ({row['chain_speedup_vs_prefetch_chain']:.2f}x) "
                  f"torch chained {t_torch[n] * 1e3:.1f}us", flush=True)
        copy_ahead.unlink(mods)
        del mods
        torch.cuda.empty_cache()
