"""Large-N split linear (prefill, large-batch decode): the amplifying host path against the paths
that fetch each host tile once. Run through `bench_linear.py --large-n`.

Per (shape, N, host share x) it times, by CUDA-graph replay, the best of a small fixed grid of
configs for each host path:
  triton          host tiles re-read once per token block (the amplifying version)
  triton_once     host tile read once, other token blocks from an HBM slot
  cuda_multicast  host tile read once per cluster span (TMA multicast, clusters 2/4/8)
  ce              all host rows staged by the copy engine in chunks, multiplied by cuBLAS
  ce_cublas       as ce, and the HBM rows by cuBLAS too (no split kernel); chunks 2/4/8, equal or
                  shrinking (ce_taper), their GEMMs after or beside the HBM GEMM (ce_fork)
  ce_chained      ce_cublas in a chain of CHAIN_OPS operators linked by copy-ahead, as a decode
                  step runs them (linear_chain.py): time per operator; chunks 1/2/4
and records link bytes per host byte (counted from each grid), the dense compute time
T_comp = 2NMK / F (F = torch's all-HBM FLOP/s on this shape at the run's largest N), the
compute-aware bound max(T_comp, (1-x)C/B_g, xC/B_h) (B_g = torch's GEMV bandwidth on this
shape at N = 8, B_h = copy-engine H2D), EB = C / t, each time over the bound, and the speedup
of every path over the amplifying one. `tune` also runs dak's own sweep and records its pick.
"""

from __future__ import annotations

import torch

from dak.host import PinnedBuffer, device_matrix
from dak.kernels.config import KernelConfig, finalize
from dak.kernels.split_linear_checks import host_link_bytes, tma_compatible
from dak.kernels.split_linear_route import run_split_linear
from dak.kernels.timing import graph_time_ms
from dak.kernels.tuning import sweep
from dak.nn.split_linear import host_rows_for
from linear_chain import chain_modules, chained_variants, torch_chain_ms

HBM_SIDE = dict(block_m=64, block_k=64, num_warps=4, num_stages=3)  # HBM rows of every variant
GRIDS = {
    "triton": [dict(host_kernel="triton", block_n=bn, host_programs=hp) for bn in (64, 128) for hp in (32, 132)],
    "triton_once": [dict(host_kernel="triton_once", block_n=bn, host_programs=hp)
                    for bn in (64, 128) for hp in (32, 132)],
    "cuda_multicast": [dict(host_kernel="cuda_multicast", mc_cluster=c, mc_block_m=bm, mc_block_n=bn,
                            host_programs=132, block_n=128)
                       for c, bm, bn in ((2, 128, 128), (4, 64, 128), (8, 64, 256))],
    "ce": [dict(ce_share=1.0, ce_chunks=ch, block_n=128) for ch in (4, 8)],
    "ce_cublas": [dict(ce_share=1.0, ce_chunks=ch, hbm_cublas=True, ce_taper=tp, ce_fork=fk)
                  for ch in (2, 4, 8) for tp in (1.0, 0.5, 0.3) for fk in (False, True)
                  if ch > 2 or tp != 0.3],  # two chunks: 0.5 and 0.3 differ by at most a tile
}
PATHS = (*GRIDS, "ce_chained")
CHAIN_OPS = 8  # operators per ce_chained chain
VARIED = ("ce_chunks", "ce_taper", "ce_fork", "host_programs", "block_n", "mc_cluster")  # recorded per variant


def _time(fn) -> float:
    try:
        return graph_time_ms([fn], target_ms=10.0, max_replays=7)
    except (ValueError, RuntimeError) as exc:  # a variant this machine cannot run
        print(f"    skipped: {str(exc).splitlines()[0][:160]}", flush=True)
        return float("inf")


def _entry(t, cfg, bound, c, n, m_h, k, es, b_h, variants) -> dict:
    return {
        "t_ms": t, "config": cfg.to_dict(), "eb": c / (t * 1e-3), "over_bound": t / bound,
        "host_link_bytes_per_host_byte": host_link_bytes(n, m_h, k, es, cfg) / (m_h * k * es),
        "link_time_ratio": t * 1e-3 * b_h / (m_h * k * es),  # >= bytes/host byte when link-bound
        "variants": variants,
    }


def bench_large_n(name, m, k, tokens, ratios, b_h, dtype, row_tile, paths, tune, rows_out):
    es = torch.empty((), dtype=dtype).element_size()
    c = m * k * es
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    w = device_matrix(m, k, dtype, torch.device("cuda"))
    w.normal_()
    pinned = PinnedBuffer.from_tensor(w)
    x8 = torch.randn(8, k, device="cuda").to(dtype)
    b_g = c / (graph_time_ms([lambda: torch.nn.functional.linear(x8, w)]) * 1e-3)
    xs = {n: torch.randn(n, k, device="cuda").to(dtype) for n in tokens}
    t_torch = {n: graph_time_ms([lambda n=n: torch.nn.functional.linear(xs[n], w)]) for n in tokens}
    flops = max(2 * n * m * k / (t_torch[n] * 1e-3) for n in tokens)
    chains: dict[int, list] = {}  # host rows -> ce_chained's modules
    t_torch_chain: dict[int, float] = {}  # N -> per-operator ms of CHAIN_OPS all-HBM linears in a row
    print(f"{name}: B_g {b_g / 1e9:.0f} GB/s (N=8), dense {flops / 1e12:.0f} TFLOP/s, B_h {b_h / 1e9:.1f} GB/s",
          flush=True)
    for n in tokens:
        x = xs[n]
        out = torch.empty(n, m, device="cuda", dtype=dtype)
        t_comp = 2 * n * m * k / flops * 1e3
        for r in ratios:
            m_h = host_rows_for(m, row_tile, host_ratio=r)
            xr = m_h / m
            if m_h == 0:
                continue
            wh, wg = pinned.tensor[:m_h], w[m_h:]
            bound = max(t_comp, (1 - xr) * c / b_g * 1e3, xr * c / b_h * 1e3)
            row = {"shape": name, "M": m, "K": k, "N": n, "x_req": r, "x": xr, "host_rows": m_h, "bytes": c,
                   "t_torch_ms": t_torch[n], "T_comp_ms": t_comp, "bound_ms": bound, "B_g": b_g, "B_h": b_h,
                   "dense_flops": flops, "paths": {}}
            for path in paths:
                if path == "ce_chained":
                    if m_h not in chains:
                        chains[m_h] = chain_modules(w, m_h, CHAIN_OPS, row_tile)
                    variants = chained_variants(chains[m_h], x, w, sms, {**HBM_SIDE, "hbm_programs": 2 * sms})
                    v = min(variants, key=lambda v: v["t_ms"])
                    entry = _entry(v["t_ms"], KernelConfig(**v["config"]), bound, c, n, m_h, k, es, b_h,
                                   [{f: v[f] for f in ("ce_chunks", "ce_taper", "ce_fork", "one_chunk_but_last", "t_ms")}
                                    for v in variants])
                    if n not in t_torch_chain:
                        t_torch_chain[n] = torch_chain_ms(x, w, CHAIN_OPS)
                    entry.update(chain_ops=CHAIN_OPS, t_torch_chain_ms=t_torch_chain[n],
                                 over_torch_chain=v["t_ms"] / t_torch_chain[n])
                    row["paths"][path] = entry
                    continue
                best, variants = (float("inf"), None), []
                for kw in GRIDS[path]:
                    cfg = finalize(KernelConfig(**{**HBM_SIDE, "hbm_programs": 2 * sms, **kw}), m_h, m - m_h, sms)
                    t = _time(lambda cfg=cfg: run_split_linear(x, wh, wg, None, cfg, sms, out=out))
                    variants.append({**{f: getattr(cfg, f) for f in VARIED if f in kw}, "t_ms": t})
                    best = min(best, (t, cfg), key=lambda p: p[0])
                t, cfg = best
                if cfg is None:
                    continue
                row["paths"][path] = _entry(t, cfg, bound, c, n, m_h, k, es, b_h, variants)
            if tune:
                tma_ok = tma_compatible(wh) and (m_h == m or tma_compatible(wg))
                cfg, _ = sweep(lambda cf: run_split_linear(x, wh, wg, None, cf, sms, out=out), n, m_h, m - m_h,
                               k, sms, tma_ok)
                t = _time(lambda: run_split_linear(x, wh, wg, None, cfg, sms, out=out))
                row["paths"]["tuned"] = {"t_ms": t, "config": cfg.to_dict(), "eb": c / (t * 1e-3),
                                         "over_bound": t / bound,
                                         "host_link_bytes_per_host_byte":
                                             host_link_bytes(n, m_h, k, es, cfg) / (m_h * k * es)}
            amp = row["paths"].get("triton", {}).get("t_ms")
            for p in row["paths"].values():
                p["speedup_vs_amplifying"] = amp / p["t_ms"] if amp else None
            fastest = min(row["paths"], key=lambda p: row["paths"][p]["t_ms"], default=None)
            row["fastest"] = fastest
            rows_out.append(row)
            print(f"{name:14s} N={n:5d} x={100 * xr:5.1f}% bound {bound * 1e3:9.1f}us (T_comp {t_comp * 1e3:8.1f}) "
                  + " ".join(f"{p}={v['t_ms'] * 1e3:.1f}us/{v['over_bound']:.2f}b/"
                             f"amp{v['host_link_bytes_per_host_byte']:.1f}" for p, v in row["paths"].items()),
                  flush=True)
    pinned.free()
    chains.clear()
