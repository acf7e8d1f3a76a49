"""Split decode-attention benchmark: dak's split kernel against its bound and three baselines.

For each model's attention shape, batch B, context S (every request at full length) and host
fraction f (requests [0, fB) on the host) it records the median CUDA-graph-replay time of:
dak (split kernel, host side with plain loads and with TMA), torch (all KV in HBM, each SDPA
backend that takes the shape, the fastest kept), prefetch (copy engine stages the host
requests' KV into HBM on a side stream while the HBM requests are attended; then the staged
ones) and uva (the whole cache in pinned memory, read in place by the best SDPA backend).
dak's host paths: plain / tma (SM programs read host K/V in place) and ce (the copy engine
stages them in ~64 MiB chunks, each attended as it lands); its time is the fastest path.
C = one layer's K+V bytes; bound = max((1-f) C / B_g, f C / B_h) with B_g = torch's effective
bandwidth on that shape (C / t_torch) and B_h = copy-engine H2D bandwidth, both measured in
this run. Shapes whose KV exceeds --hbm-cap-gib are skipped, and fractions whose host part
exceeds --host-cap-gib (all printed). Writes JSON (GPU, git sha, command) and prints a table.

    PYTHONPATH=src python benchmarks/bench_attention.py --out benchmarks/results/attention-h200.json
    PYTHONPATH=src python benchmarks/bench_attention.py --dry-run     # the plan and a time estimate

`--chained` also times each case with host requests as a decode step runs it: 8 layers of the
shape linked by KV copy-ahead, time per layer, against the prefetch baseline chained one layer
ahead (benchmarks/attention_chain.py); cases whose 8 layers exceed --chain-cap-gib are left out.
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
from attention_chain import LAYERS, add_chain  # noqa: E402
from link_floor import copy_ms, floor_fields  # noqa: E402

from dak.baselines.attention import PrefetchAttention, UVAAttention, sdpa_decode  # noqa: E402
from dak.host import PinnedBuffer  # noqa: E402
from dak.kernels.attention_config import finalize, heuristic_config  # noqa: E402
from dak.kernels.attention_tuning import sweep  # noqa: E402
from dak.kernels.split_attention_ce import split_attention_ce  # noqa: E402
from dak.kernels.timing import graph_time_ms  # noqa: E402

MODELS = {"llama2-7b": (32, 32, 128), "llama3-8b": (32, 8, 128), "opt-30b": (56, 56, 128)}  # Hq, Hkv, D
SDPA_PATHS = ("flash", "cudnn", "efficient")
L2_BYTES = 60 << 20
GiB = 1 << 30
B_G_GUESS, B_H_GUESS = 3.5e12, 50e9  # only for --dry-run's estimate


def plan(models, batches, contexts, fractions, host_cap, hbm_cap, es):
    """[(model, B, S, C, [host request counts])] and the skipped combinations, as text."""
    shapes, skipped = [], []
    for name in models:
        hq, hkv, d = MODELS[name]
        for b in batches:
            for s in contexts:
                c = 2 * b * hkv * s * d * es
                if c > hbm_cap:
                    skipped.append(f"{name} B={b} S={s}: one layer's KV {c / GiB:.1f} GiB > HBM cap")
                    continue
                counts = []
                for f in fractions:
                    b_h = round(f * b)
                    if b_h * c / b > host_cap:
                        skipped.append(f"{name} B={b} S={s} f={f:g}: host part {b_h * c / b / GiB:.1f} GiB > host cap")
                    elif b_h not in counts:
                        counts.append(b_h)
                shapes.append((name, b, s, c, counts))
    return shapes, skipped


def estimate_s(shapes, host_cap, paths) -> float:
    """Rough seconds of GPU work (7 runs per timing), before compile and capture overheads."""
    total = 0.0
    for _, b, _, c, counts in shapes:
        total += 7 * len(SDPA_PATHS) * (c / B_G_GUESS + 2e-5)
        total += 7 * (c / B_H_GUESS) if c <= host_cap else 0
        for b_h in counts:
            f = b_h / b
            t = max((1 - f) * c / B_G_GUESS, f * c / B_H_GUESS) + 2e-5
            total += 7 * t * (len(paths) if b_h else 1) + (7 * (t + c / B_G_GUESS) if b_h else 0)
    return total


def timed(calls):
    """Median ms by graph replay, or None when the first eager call raises (unsupported path)."""
    try:
        return graph_time_ms(calls, target_ms=20.0, max_replays=10)
    except RuntimeError as exc:
        print(f"   (path unavailable: {str(exc).splitlines()[0][:100]})", flush=True)
        return None


def rel_err(y, ref) -> float:
    return ((y.float() - ref.float()).norm() / ref.float().norm()).item()


def host_link_ms(q, kh, vh, k_dst, v_dst, lengths, b_h, hkv, hq, s, d, sms) -> dict:
    """Link times of the host requests' K/V alone (see link_floor.py): one copy-engine copy of
    each into HBM, and dak's kernel attending the host requests alone, read in place (plain
    loads, its untuned config; None if that launch fails)."""
    times = {"copy": copy_ms([(kh, k_dst), (vh, v_dst)]), "sm": None}
    cfg = finalize(replace(heuristic_config(b_h, 0, hkv, hq // hkv, s, d, sms), host_tma=False, ce_share=0.0),
                   b_h, 0, hkv, s, sms, keep_splits=True)
    none = k_dst[:0]
    try:
        times["sm"] = graph_time_ms([lambda: split_attention_ce(q[:b_h], kh, vh, none, none, lengths[:b_h], cfg, sms,
                                                                validate=False)], target_ms=10.0, max_replays=9)
    except (RuntimeError, ValueError) as exc:
        print(f"   (in-place floor read unavailable: {str(exc).splitlines()[0][:100]})", flush=True)
    return times


def bench_shape(name, b, s, c, counts, pool, b_h_gbs, dtype, paths, tune, rows, sms, chain_cap=0):
    hq, hkv, d = MODELS[name]
    per_req = hkv * s * d
    es = torch.empty((), dtype=dtype).element_size()
    copies = min(8, max(1, math.ceil(3 * L2_BYTES / c)))  # rotate HBM KV so replays miss L2
    kv = [tuple(torch.empty(b, hkv, s, d, device="cuda", dtype=dtype).normal_() for _ in range(2))
          for _ in range(copies)]
    q = torch.randn(b, hq, d, device="cuda").to(dtype)
    lengths = torch.full((b,), s, dtype=torch.int32, device="cuda")
    half = pool.numel() // 2
    host_max = max(counts + ([b] if 2 * b * per_req <= pool.numel() else []))
    k_pool, v_pool = pool[:half], pool[half:2 * half]
    host_kv = [t[:host_max * per_req].view(host_max, hkv, s, d) for t in (k_pool, v_pool)]
    for dst, src in zip(host_kv, kv[0]):
        dst.copy_(src[:host_max])
    t_sdpa = {p: timed([lambda k=k, v=v, p=p: sdpa_decode(q, k, v, None, p) for k, v in kv]) for p in SDPA_PATHS}
    ok = {p: t for p, t in t_sdpa.items() if t is not None}
    if not ok:
        print(f"skip: {name} B={b} S={s}: no SDPA path takes this shape", flush=True)
        return
    best = min(ok, key=ok.get)
    t_torch, ref = ok[best], sdpa_decode(q, *kv[0], None, best)
    b_g = c / (t_torch * 1e-3)
    t_uva = None
    if host_max == b:
        uva = UVAAttention(*(t[:b] for t in host_kv), backend=best)
        t_uva = timed([lambda: uva(q)])
    for b_h in counts:
        f = b_h / b
        kh, vh = (t[:b_h] for t in host_kv)
        base = heuristic_config(b_h, b - b_h, hkv, hq // hkv, s, d, sms)
        t_paths, cfgs, errs, trials = {}, {}, {}, []
        for path in (paths if b_h else ["plain"]):
            cfg = finalize(replace(base, host_tma=path == "tma", ce_share=float(path == "ce"),
                                   ce_chunks=max(1, min(8, b_h * 2 * per_req * es // (64 << 20)))),
                           b_h, b - b_h, hkv, s, sms, keep_splits=True)

            def run(cf, k=kv[0][0], v=kv[0][1], validate=False):
                return split_attention_ce(q, kh, vh, k[b_h:], v[b_h:], lengths, cf, sms, (k[:b_h], v[:b_h]),
                                          validate=validate)
            if tune:
                cfg, trials = sweep([lambda cf, k=k, v=v: run(cf, k, v) for k, v in kv], b_h, b - b_h, hkv,
                                    hq // hkv, s, d, sms, path == "tma", path == "ce")  # rotated: misses L2
            errs[path] = rel_err(run(cfg, validate=True), ref)
            t_paths[path] = timed([lambda k=k, v=v, cfg=cfg: run(cfg, k, v) for k, v in kv])
            cfgs[path] = cfg.to_dict()
        path = min(t_paths, key=lambda p: t_paths[p] if t_paths[p] is not None else math.inf)
        t_dak = t_paths[path]
        t_pre = None
        if b_h:
            pres = [PrefetchAttention(kh, vh, k[b_h:], v[b_h:], hq, staging=(k[:b_h], v[:b_h])) for k, v in kv]
            t_pre = timed([lambda p=p: p(q, lengths) for p in pres])
            del pres
        t_link, t_hbm = f * c / b_h_gbs * 1e3, (1 - f) * c / b_g * 1e3
        bound = max(t_link, t_hbm)
        floor = floor_fields(t_dak, t_hbm, host_link_ms(q, kh, vh, kv[0][0][:b_h], kv[0][1][:b_h], lengths, b_h, hkv,
                                                        hq, s, d, sms), bound) if b_h else {}
        row = {
            "model": name, "Hq": hq, "Hkv": hkv, "D": d, "B": b, "S": s, "f": f, "host_requests": b_h,
            "kv_bytes": c, "t_dak_ms": t_dak, "dak_host_path": path, "t_dak_paths_ms": t_paths,
            "t_torch_ms": t_torch, "torch_path": best, "t_sdpa_paths_ms": t_sdpa, "t_prefetch_ms": t_pre,
            "t_uva_ms": t_uva, "bound_ms": bound, "link_share_of_bound": t_link / (t_link + t_hbm),
            "B_g": b_g, "B_h": b_h_gbs, "eb_dak": c / (t_dak * 1e-3), "dak_over_bound": t_dak / bound,
            "speedup_vs_torch": t_torch / t_dak,
            "speedup_vs_prefetch": t_pre / t_dak if t_pre else None,
            "speedup_vs_uva": t_uva / t_dak if t_uva else None,
            "rel_err_vs_torch": errs, "config": cfgs,
            "sweep": sorted(trials, key=lambda t: t[1])[:6], **floor,
        }
        rows.append(row)
        fmt = lambda t: f"{t * 1e3:10.1f}" if t else "         -"  # noqa: E731
        print(f"{name:10s} B={b:4d} S={s:6d} f={f:5.3f} dak {fmt(t_dak)}us ({path:5s}) bound {fmt(bound)} "
              f"r={t_dak / bound:5.2f} torch {fmt(t_torch)} ({best}) pre {fmt(t_pre)} uva {fmt(t_uva)} "
              f"EB {row['eb_dak'] / 1e9:7.1f}GB/s err {max(errs.values()):.1e}"
              + (f" floor r={floor['dak_over_floor']:5.2f} (floor/bound {floor['floor_over_bound']:.2f})" if floor
                 else ""), flush=True)
        if b_h and LAYERS * c <= chain_cap:
            add_chain(row, b, s, b_h, hkv, d, dtype, q, sms, best)
    del kv


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default=",".join(MODELS), help="comma list of: " + ",".join(MODELS))
    ap.add_argument("--batches", default="8,64,512")
    ap.add_argument("--contexts", default="256,2048,8192,32768")
    ap.add_argument("--fractions", default="0,0.125,0.25,0.5,1", help="host fractions of the requests")
    ap.add_argument("--host-paths", default="plain,tma,ce",
                    help="host paths to time: plain (SM loads), tma (SM TMA loads), ce (copy engine, pipelined)")
    ap.add_argument("--dtype", default="bf16", choices=["bf16", "fp16"])
    ap.add_argument("--host-cap-gib", type=float, default=16.0, help="max pinned bytes of one layer's host KV")
    ap.add_argument("--hbm-cap-gib", type=float, default=40.0, help="max bytes of one layer's whole KV")
    ap.add_argument("--tune", action="store_true", help="sweep each dak config (slow) instead of the heuristic")
    ap.add_argument("--chained", action="store_true", help="also time cases chained by KV copy-ahead")
    ap.add_argument("--chain-cap-gib", type=float, default=4.0, help="max KV bytes of a chained case's 8 layers")
    ap.add_argument("--dry-run", action="store_true", help="print the plan and a time estimate, run nothing")
    ap.add_argument("--out", default=None, help="JSON path (default benchmarks/results/attention-<gpu>.json)")
    a = ap.parse_args(argv)
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[a.dtype]
    es = torch.empty((), dtype=dtype).element_size()
    models = a.models.split(",")
    for m in models:
        if m not in MODELS:
            sys.exit(f"unknown model {m!r}; choose from {', '.join(MODELS)}")
    paths = [p for p in a.host_paths.split(",") if p]
    if not paths or set(paths) - {"plain", "tma", "ce"}:
        sys.exit("--host-paths takes a comma list of plain, tma, ce")
    if a.chain_cap_gib < 0:
        sys.exit(f"--chain-cap-gib must be >= 0, got {a.chain_cap_gib}")
    host_cap, hbm_cap = int(a.host_cap_gib * GiB), int(a.hbm_cap_gib * GiB)
    shapes, skipped = plan(models, [int(x) for x in a.batches.split(",")], [int(x) for x in a.contexts.split(",")],
                           [float(x) for x in a.fractions.split(",")], host_cap, hbm_cap, es)
    for line in skipped:
        print("skip:", line)
    pool_elems = max([2 * max(n + ([b] if c <= host_cap else [])) * c // (2 * b * es) for _, b, _, c, n in shapes]
                     + [0])
    print(f"{len(shapes)} shapes, {sum(len(n) for *_, n in shapes)} rows, pinned pool "
          f"{pool_elems * es / GiB:.1f} GiB, estimated GPU work {estimate_s(shapes, host_cap, paths):.0f} s "
          "(plus compiles, captures and pinning at ~0.8 s/GiB)", flush=True)
    if a.dry_run:
        return
    if not torch.cuda.is_available():
        sys.exit("bench_attention needs a CUDA GPU")
    b_h_gbs = h2d_bandwidth()
    print(f"measured copy-engine H2D bandwidth B_h = {b_h_gbs / 1e9:.1f} GB/s", flush=True)
    pool_buf = PinnedBuffer((max(1, pool_elems // 128), 128), dtype)
    pool = pool_buf.tensor.view(-1)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    meta = metadata()
    out = a.out or f"benchmarks/results/attention-{meta['gpu'].replace(' ', '_')}.json"
    rows: list[dict] = []
    for name, b, s, c, counts in shapes:
        try:
            bench_shape(name, b, s, c, counts, pool, b_h_gbs, dtype, paths, a.tune, rows, sms,
                        int(a.chain_cap_gib * GiB) if a.chained else 0)
        except torch.cuda.OutOfMemoryError:
            print(f"skip: {name} B={b} S={s}: out of HBM", flush=True)
            skipped.append(f"{name} B={b} S={s}: out of HBM")
        torch.cuda.empty_cache()
        write_json(out, {"meta": meta, "B_h_copy_engine": b_h_gbs, "skipped": skipped, "rows": rows})
    pool_buf.free()
    summarize(rows)
    print(f"wrote {out}")


def summarize(rows):
    """Per host fraction: dak/bound (median, max), speedups vs torch and prefetch (min, median);
    then the link-floor counts over the rows with host requests (link_floor.py)."""
    import statistics as st
    from link_floor import floor_counts
    print(f"{'f':>6s} {'rows':>4s} {'dak/bound med,max':>18s} {'vs torch min':>12s} "
          f"{'vs prefetch min,med':>20s} {'(not link>90%) min':>19s}")
    for f in sorted({r["f"] for r in rows}):
        rs = [r for r in rows if r["f"] == f]
        ratio = [r["dak_over_bound"] for r in rs]
        pre = [r["speedup_vs_prefetch"] for r in rs if r["speedup_vs_prefetch"]]
        pre_hbm = [r["speedup_vs_prefetch"] for r in rs if r["speedup_vs_prefetch"] and r["link_share_of_bound"] <= 0.9]
        show = lambda xs: f"{min(xs):.2f}, {st.median(xs):.2f}" if xs else "-"  # noqa: E731
        print(f"{f:6.3f} {len(rs):4d} {st.median(ratio):8.2f}, {max(ratio):7.2f} "
              f"{min(r['speedup_vs_torch'] for r in rs):12.3f} {show(pre):>20s} "
              f"{(f'{min(pre_hbm):.2f}' if pre_hbm else '-'):>19s}")
    fc = floor_counts(rows)
    print(f"host rows {fc['rows']}: within 1.05 x bound {fc['within_bound']}, within 1.05 x link floor "
          f"{fc['within_floor']}; floor itself > 1.05 x bound {fc['floor_above_bound']}; "
          f"missed where reachable {fc['missed_reachable']}")


if __name__ == "__main__":
    main()
