"""Split-linear benchmark: dak's one-launch split kernel against its bound and three baselines.

For each weight shape (M x K), token count N and host share x it records the median
CUDA-graph-replay time of: dak (tuned split kernel, with the tuned share of host rows moved by
the copy engine, see dak.kernels.split_linear_ce), torch (all in HBM, cuBLAS), prefetch
(copy engine into an HBM staging buffer, overlapped), uva (whole weight read in place from
pinned memory by cuBLAS). The bound is max((1-x) C / B_g, x C / B_h) with B_g = torch's
effective bandwidth on the same shape and N, and B_h = copy-engine H2D bandwidth, both
measured in this run. dak's time is its config's, or (decode) the same config with hbm_fork
(HBM rows by dak's GEMV beside a host-only kernel) where that ran faster (`t_dak_variants_ms`);
each case with host rows also records its link floor (link_floor.py: `floor_ms`,
`dak_over_floor`, `floor_over_bound`). Decode cases run without autograd, as the runtime does.
Writes JSON (with GPU name, git sha, command) and prints a table.
Tuned configs are read from and written to the tuning cache ($DAK_CACHE_DIR/split_linear.json;
`config_from_cache` in each row says which): point DAK_CACHE_DIR at an empty folder for fresh
sweeps, or at a cache from an earlier run on the same GPU to skip them.

    PYTHONPATH=src python benchmarks/bench_linear.py --out benchmarks/results/linear-h200.json

`--large-n` instead compares, per N in --tokens (default 256..8192), the amplifying host path
with the ones that fetch each host tile once (see benchmarks/linear_large_n.py):

    PYTHONPATH=src python benchmarks/bench_linear.py --large-n --out linear-large-n.json

`--chained` also times each decode case (x > 0) as a decode step runs it: CHAIN_OPS operators of
the shape chained by copy-ahead, time per operator, against the prefetch baseline chained one
operator ahead (see benchmarks/linear_decode_chain.py).
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import replace
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import h2d_bandwidth, metadata, write_json  # noqa: E402
from link_floor import copy_ms, floor_fields  # noqa: E402

from dak.kernels.timing import graph_time_ms  # noqa: E402

from dak.baselines import PrefetchLinear, TorchLinear, UVALinear  # noqa: E402
from dak.host import PinnedBuffer, device_matrix  # noqa: E402
from dak.kernels.split_linear_checks import host_link_bytes, tma_compatible  # noqa: E402
from dak.kernels.split_linear import split_linear  # noqa: E402
from dak.kernels.split_linear_ce import ce_rows, split_linear_ce, staging_buffer  # noqa: E402
from dak.kernels.split_linear_route import run_split_linear  # noqa: E402
from linear_decode_chain import add_chained  # noqa: E402
from linear_large_n import PATHS, bench_large_n  # noqa: E402
from dak.kernels.config import KernelConfig, finalize, heuristic_config  # noqa: E402
from dak.kernels import tuning  # noqa: E402
from dak.kernels.tuning import sweep  # noqa: E402
from dak.nn.split_linear import host_rows_for  # noqa: E402

SHAPES = {  # (M out_features, K in_features)
    "llama2-7b.qkvo": (4096, 4096), "llama2-7b.up": (11008, 4096), "llama2-7b.down": (4096, 11008),
    "opt-30b.qkvo": (7168, 7168), "opt-30b.fc1": (28672, 7168), "opt-30b.fc2": (7168, 28672),
    "llama3-70b.qo": (8192, 8192), "llama3-70b.up": (28672, 8192), "llama3-70b.down": (8192, 28672),
}
L2_BYTES = 60 << 20
SM_FLOOR_BYTES = 64 << 20  # above this the copy engine runs at B_h: the in-place floor read is skipped


def fork_variant(cfg: KernelConfig, n: int, m_h: int, m_g: int, sms: int) -> KernelConfig | None:
    """`cfg` with its HBM rows by dak's GEMV beside the host rows' kernel (hbm_fork), where that
    differs from `cfg` and applies (decode, both sides have rows, no CUDA multicast)."""
    if cfg.hbm_fork or cfg.host_kernel == "cuda_multicast" or n > 64 or not m_h or not m_g:
        return None
    return finalize(replace(cfg, hbm_cublas=False, hbm_fork=True), m_h, m_g, sms)


def link_floor(x, wh, stage, out, n, m_h, k, sms, tma_ok) -> dict:
    """Link times of this case's host rows alone (see link_floor.py): one copy-engine copy of
    their bytes into HBM, and (up to SM_FLOOR_BYTES) dak's split kernel reading them in place."""
    flat = m_h * wh.stride(0)
    src = wh.as_strided((flat,), (1,), wh.storage_offset())
    times = {"copy": copy_ms([(src, stage[:flat])]), "sm": None}
    if flat * wh.element_size() <= SM_FLOOR_BYTES:
        cfg = finalize(replace(heuristic_config(n, m_h, 0, k, sms, tma_ok), ce_share=0.0, ce_chunks=1,
                               hbm_cublas=False, hbm_fork=False), m_h, 0, sms)
        times["sm"] = graph_time_ms([lambda: split_linear(x, wh, wh[:0], None, cfg, out=out[:, :m_h])])
    return times


def tuned(dtype, n, m_h, m_g, k, sms, tma_ok, run):
    """(config, sweep trials, from_cache): the config cached in $DAK_CACHE_DIR for this launch
    shape (e.g. carried over from an earlier run on this GPU), else a fresh sweep, then cached."""
    key = tuning.tune_key(torch.cuda.get_device_name(), dtype, n, m_h, m_g, k, False)
    hit = tuning.cached(key)
    if hit is not None:
        return hit, [], True
    cfg, trials = sweep(run, n, m_h, m_g, k, sms, tma_ok)
    tuning.store(key, cfg)
    return cfg, trials, False


def bench_shape(name, m, k, tokens, ratios, b_h, dtype, tune, row_tile, rows_out, chained=False):
    es = torch.empty((), dtype=dtype).element_size()
    c = m * k * es
    copies = max(1, math.ceil(3 * L2_BYTES / c))  # rotate weights so replays do not hit L2
    w_gpu = [device_matrix(m, k, dtype, torch.device("cuda")) for _ in range(copies)]
    for w in w_gpu:
        w.normal_()
    pinned = PinnedBuffer.from_tensor(w_gpu[0])
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    for n in tokens:
        x = torch.randn(n, k, device="cuda").to(dtype)
        t_torch = graph_time_ms([lambda f=TorchLinear(w, None): f(x) for w in w_gpu])
        b_g = c / (t_torch * 1e-3)
        uva = UVALinear(pinned.tensor, None)
        t_uva = graph_time_ms([lambda: uva(x)])
        # dak's own kernel on an all-HBM weight: how close its HBM path is to cuBLAS
        out0 = torch.empty(n, m, device="cuda", dtype=dtype)
        cfg0, _, _ = tuned(dtype, n, 0, m, k, sms, True,
                           [lambda cf, w=w: split_linear_ce(x, pinned.tensor[:0], w, None, cf, None, sms, out=out0)
                            for w in w_gpu])
        t_kernel_hbm = graph_time_ms([lambda w=w: split_linear_ce(x, pinned.tensor[:0], w, None, cfg0, None,
                                                                  sms, out=out0) for w in w_gpu])
        print(f"{name:16s} N={n:4d} all-HBM: torch {t_torch*1e3:.1f}us, dak kernel {t_kernel_hbm*1e3:.1f}us",
              flush=True)
        for r in ratios:
            m_h = host_rows_for(m, row_tile, host_ratio=r)
            xr = m_h / m
            bound = max((1 - xr) * c / b_g, xr * c / b_h) * 1e3
            wh = pinned.tensor[:m_h]
            parts = [(wh, w[m_h:]) for w in w_gpu]
            out = torch.empty(n, m, device="cuda", dtype=dtype)
            trials, from_cache, t_variants, floor = [], False, {}, {}
            if m_h == 0:
                t_dak, cfg = t_torch, None  # SplitLinear with no host rows calls torch's matmul
            else:
                tma_ok = tma_compatible(wh) and (m_h == m or tma_compatible(parts[0][1]))
                stage = staging_buffer(torch.device("cuda"), dtype, m_h * wh.stride(0))

                def run(cf, p=parts[0]):
                    return run_split_linear(x, *p, None, cf, sms, stage, out=out)
                if tune:
                    cfg, trials, from_cache = tuned(dtype, n, m_h, m - m_h, k, sms, tma_ok,
                                                    [lambda cf, p=p: run(cf, p) for p in parts])
                else:
                    cfg = heuristic_config(n, m_h, m - m_h, k, sms, tma_ok)
                t_variants = {"config": graph_time_ms([lambda p=p: run(cfg, p) for p in parts])}
                fork = fork_variant(cfg, n, m_h, m - m_h, sms)
                if fork is not None:  # the tuner's knob, for configs cached before it had it
                    t_variants["hbm_fork"] = graph_time_ms([lambda p=p: run(fork, p) for p in parts])
                    cfg = fork if t_variants["hbm_fork"] < t_variants["config"] else cfg
                t_dak = min(t_variants.values())
                floor = floor_fields(t_dak, (1 - xr) * c / b_g * 1e3,
                                     link_floor(x, wh, stage, out, n, m_h, k, sms, tma_ok), bound)
            pre = [PrefetchLinear(*p, None) for p in parts]
            t_pre = graph_time_ms([lambda f=f: f(x) for f in pre]) if m_h else t_torch
            del pre
            amp = host_link_bytes(n, m_h, k, es, cfg) / (m_h * k * es) if cfg else 0.0
            row = {
                "shape": name, "M": m, "K": k, "N": n, "x_req": r, "x": xr, "host_rows": m_h,
                "bytes": c, "t_dak_ms": t_dak, "t_torch_ms": t_torch, "t_prefetch_ms": t_pre,
                "t_uva_ms": t_uva, "t_kernel_all_hbm_ms": t_kernel_hbm, "bound_ms": bound, "B_g": b_g, "B_h": b_h,
                "eb_dak": c / (t_dak * 1e-3), "dak_over_bound": t_dak / bound,
                "speedup_vs_torch": t_torch / t_dak, "speedup_vs_prefetch": t_pre / t_dak,
                "speedup_vs_uva": t_uva / t_dak, "host_link_bytes_per_host_byte": amp,
                "config": cfg.to_dict() if cfg else "torch",
                "ce_rows": ce_rows(cfg, m_h) if cfg and cfg.host_kernel != "cuda_multicast" else 0,
                "sweep": sorted(trials, key=lambda t: t[1])[:6] if m_h else [],
                "config_from_cache": from_cache, "t_dak_variants_ms": t_variants, **floor,
            }
            rows_out.append(row)
            print(f"{name:16s} N={n:4d} x={100*xr:6.2f}% dak {t_dak*1e3:9.1f}us bound {bound*1e3:9.1f}us "
                  f"r={t_dak/bound:5.2f} torch {t_torch*1e3:8.1f} pre {t_pre*1e3:9.1f} uva {t_uva*1e3:9.1f} "
                  f"EB {row['eb_dak']/1e9:7.1f}GB/s amp {amp:.0f} ce {row['ce_rows']}"
                  + (f" floor r={floor['dak_over_floor']:5.2f} (floor/bound {floor['floor_over_bound']:.2f})"
                     f" fork {t_variants.get('hbm_fork', math.nan) * 1e3:.1f}us" if floor else ""), flush=True)
    pinned.free()
    if chained:
        add_chained(name, w_gpu[0], tokens, ratios, row_tile, sms, rows_out)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shapes", default=None, help="comma list of: " + ",".join(SHAPES)
                    + " (default all; with --large-n opt-30b.qkvo, the paper's 7168x7168)")
    ap.add_argument("--tokens", default=None, help="token counts (default 1,8,32,128,512; with "
                    "--large-n 256,512,1024,2048,4096,8192)")
    ap.add_argument("--ratios", default=None, help="host shares in percent (default "
                    "0,0.5,1,2,5,10,25,50,100; with --large-n 10,50)")
    ap.add_argument("--large-n", action="store_true", help="amplifying vs read-once host paths per N")
    ap.add_argument("--paths", default=",".join(PATHS), help="--large-n: comma list of " + ",".join(PATHS))
    ap.add_argument("--tune-large", action="store_true", help="--large-n: also run dak's sweep per case")
    ap.add_argument("--dtype", default="bf16", choices=["bf16", "fp16"])
    ap.add_argument("--row-tile", type=int, default=16)
    ap.add_argument("--chained", action="store_true", help="also time each decode case chained by copy-ahead")
    ap.add_argument("--no-tune", action="store_true", help="use the heuristic config, no sweep")
    ap.add_argument("--out", default=None, help="JSON path (default benchmarks/results/linear-<gpu>.json)")
    a = ap.parse_args(argv)
    if a.large_n and a.chained:
        sys.exit("--chained times decode cases; with --large-n add ce_chained to --paths instead")
    if not torch.cuda.is_available():
        sys.exit("bench_linear needs a CUDA GPU")
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[a.dtype]
    large = a.large_n
    tokens = [int(t) for t in (a.tokens or ("256,512,1024,2048,4096,8192" if large else "1,8,32,128,512")).split(",")]
    ratios = [float(r) / 100 for r in (a.ratios or ("10,50" if large else "0,0.5,1,2,5,10,25,50,100")).split(",")]
    shapes = a.shapes or ("opt-30b.qkvo" if large else ",".join(SHAPES))
    paths = [p for p in a.paths.split(",") if p]
    if any(p not in PATHS for p in paths):
        sys.exit(f"unknown path in {a.paths!r}; choose from {', '.join(PATHS)}")
    b_h = h2d_bandwidth()
    print(f"measured copy-engine H2D bandwidth B_h = {b_h/1e9:.1f} GB/s", flush=True)
    rows: list[dict] = []
    meta = metadata()
    kind = "large-n-" if large else ""
    out = a.out or f"benchmarks/results/linear-{kind}{meta['gpu'].replace(' ', '_')}.json"
    for s in shapes.split(","):
        if s not in SHAPES:
            sys.exit(f"unknown shape {s!r}; choose from {', '.join(SHAPES)}")
        if large:
            bench_large_n(s, *SHAPES[s], tokens, ratios, b_h, dtype, a.row_tile, paths, a.tune_large, rows)
        else:  # without autograd, as the runtime decodes: dak's GEMV serves hbm_fork's HBM rows at <= 16 tokens
            with torch.no_grad():  # (H67-H70 ran with grad on: cuBLAS served them there)
                bench_shape(s, *SHAPES[s], tokens, ratios, b_h, dtype, not a.no_tune, a.row_tile, rows, a.chained)
        write_json(out, {"meta": meta, "B_h_copy_engine": b_h, "rows": rows})
        torch.cuda.empty_cache()
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
