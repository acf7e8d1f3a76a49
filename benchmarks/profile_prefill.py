"""Where does a prefill's time go? TTFT of dak's placements against the prefetch baseline's.

`dak bench e2e` measured dak's TTFT (eager prefill + first token) up to 2.9x the prefetch
baseline's at batch 8 (OPT-6.7B at 5%: 122.9 / 42.7 ms), while its TPOT is lower. For each
--systems entry (a dak policy, or prefetch / uva as `dak bench e2e` builds them; profile_step.build)
at each ratio this times engine.prefill wall-clock (median of --repeats, after a warm-up) and
profiles one prefill with torch.profiler: GPU time per kernel category, GPU busy time (the rest of
the wall time is the host: Python, launches, syncs) and the top kernels. Since the nineteenth
session the Engine captures the prefill per prompt bucket, so after the warm-up this times the
replay; `DAK_PREFILL_GRAPHS=0` profiles the eager prefill (as H32-H34 did).

    PYTHONPATH=src python3 benchmarks/profile_prefill.py --model opt-6.7b --ratios 0.05 --out prefill.json

Without a GPU it runs tiny-llama under the Triton interpreter (a flow check).
"""

import argparse
import os
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import metadata, write_json  # noqa: E402
from profile_step import BASELINES, POLICIES, build, category, tally  # noqa: E402


def _sync(engine):
    if engine.device.type == "cuda":
        torch.cuda.synchronize(engine.device)


def prefill_once(engine, ids, plen) -> float:
    _sync(engine)
    t0 = time.perf_counter()
    engine.prefill(ids, plen)
    _sync(engine)
    return time.perf_counter() - t0


def profile_prefill(engine, ids, plen, top: int = 25):
    """(category -> (kernels, GPU us), busy us, top kernels [(name, category, count, us)], top CPU-side
    events by self time [{name, count, self_us}]: ops and CUDA runtime calls, syncs among them) of one prefill."""
    from torch.profiler import ProfilerActivity, profile
    cuda = engine.device.type == "cuda"
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=acts) as prof:
        engine.prefill(ids, plen)
        _sync(engine)
    events = prof.events()
    per, names = tally(events, cuda)
    host = defaultdict(lambda: [0, 0.0])  # CPU-side events (ops, CUDA runtime calls): count, self us
    for ev in events:
        if ev.device_type == torch.autograd.DeviceType.CPU:
            host[ev.name][0] += 1
            host[ev.name][1] += ev.self_cpu_time_total
    ranked = sorted(names.items(), key=lambda kv: -kv[1][1])[:top]
    host_top = sorted(host.items(), key=lambda kv: -kv[1][1])[:top]
    return ({c: tuple(v) for c, v in per.items()}, sum(v[1] for v in per.values()),
            [(n[:160], category(n), c, us) for n, (c, us) in ranked],
            [{"name": n[:160], "count": c, "self_us": us} for n, (c, us) in host_top])


def run(model, batch, prompt_len, gen_len, ratio, system, repeats):
    from dak.models import Workload
    w = Workload("decode", batch, prompt_len, gen_len, "bf16")
    engine, placement, free = build(model, w, ratio, system)
    try:
        ids = torch.randint(3, engine.model.config.vocab_size, (batch, prompt_len)).to(engine.device)
        plen = torch.full((batch,), prompt_len, dtype=torch.int32, device=engine.device)
        engine.generate(ids, 2)  # warm-up: configs, compiles, graph capture
        walls = [prefill_once(engine, ids, plen) for _ in range(repeats)]
        table, busy, kernels, host = profile_prefill(engine, ids, plen)
        return {"model": model, "batch": batch, "prompt_len": prompt_len, "x_req": ratio, "system": system,
                "offload_ratio": placement.offload_ratio if placement else None,
                "prefill_wall_s": statistics.median(walls), "walls_s": walls, "gpu_busy_us": busy,
                "categories": {c: {"kernels": n, "us": us} for c, (n, us) in sorted(table.items(), key=lambda kv: -kv[1][1])},
                "top_kernels": [{"name": k, "category": c, "count": n, "us": us} for k, c, n, us in kernels],
                "host_top": host}
    finally:
        free()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="opt-6.7b")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--prompt-len", type=int, default=32)
    ap.add_argument("--gen-len", type=int, default=32, help="as `dak bench e2e` (the plan depends on it)")
    ap.add_argument("--ratios", default="0.05", help="host ratios (fractions), comma list")
    ap.add_argument("--systems", default="consolidated,prefetch", help="comma list of " + ", ".join(POLICIES + BASELINES))
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out", default="prefill-profile.json")
    a = ap.parse_args(argv)
    name = a.model
    if not torch.cuda.is_available():
        print("no GPU: tiny-llama's CPU ops under the Triton interpreter (a flow check)")
        name, a.batch, a.prompt_len, a.gen_len, a.repeats = "tiny-llama", 2, 4, 2, 1
    rows = []
    for r in (float(v) for v in a.ratios.split(",") if v):
        for system in a.systems.split(","):
            row = run(name, a.batch, a.prompt_len, a.gen_len, r, system, a.repeats)
            rows.append(row)
            print(f"{name} B={a.batch} L={a.prompt_len} x={100 * r:.1f}% {system}: prefill {1e3 * row['prefill_wall_s']:.2f} ms "
                  f"wall, GPU busy {row['gpu_busy_us'] / 1e3:.2f} ms", flush=True)
            for c, v in row["categories"].items():
                print(f"    {c:14s} {v['kernels']:6d} kernels {v['us'] / 1e3:8.3f} ms")
            for k in row["top_kernels"][:12]:
                print(f"    {k['count']:5d} x {k['us'] / 1e3:8.3f} ms  [{k['category']}] {k['name'][:100]}")
            print("  CPU side, by self time:")
            for k in row["host_top"][:20]:
                print(f"    {k['count']:5d} x {k['self_us'] / 1e3:8.3f} ms  {k['name'][:100]}")
    write_json(a.out, {"meta": metadata(), "rows": rows})
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
