"""Where does a decode step's time go? GPU time per kernel category for dak.offload models.

For each offload ratio x: builds the model (seeded random weights, untuned configs) with the
placement `dak bench e2e` gives that x (`--policy consolidated` (default) or `greedy`: the
planner at the HBM budget that leaves x of the operator bytes on the host; `uniform`: x of
every operator; `prefetch` or `uva`: that baseline as `dak bench e2e` builds it), times the
CUDA-graphed decode step (TPOT), then profiles a few eager decode steps with torch.profiler and
sums GPU time per category (split kernel, cuBLAS, copy-engine copies, attention, KV writes,
norms, rotary, elementwise, other). Eager steps launch the same kernels as the graph, so the
per-category GPU time is comparable to TPOT; busy time below TPOT is idle GPU (launch gaps in
eager, waits on the link in either). On a GPU it then profiles replays of the captured decode
graph and reports when the host link (copy-engine copies) idles and what runs meanwhile
(benchmarks/step_timeline.py).

    PYTHONPATH=src python3 benchmarks/profile_step.py --model opt-6.7b --ratios 0,0.05 --out step.json

(Until 2026-12-01 it always built the uniform policy, so its rows were not the greedy placement
that `bench e2e` reports as dak-greedy; rows now carry their policy. Until the ninth session it
planned a cache 2 x steps longer than --gen-len (default 16), so its placement could differ from
`bench e2e`'s: OPT-30B at 5% got host rows on fc1/fc2 only, KV in HBM, where `bench e2e` puts
them on q/v/out/fc1/fc2 and every request's KV on the host. It now plans `bench e2e`'s workload.)

Without a GPU it runs tiny-llama under the Triton interpreter (CPU ops only; a flow check).
"""

import argparse
import os
import sys
from collections import defaultdict
from pathlib import Path

import torch

if not torch.cuda.is_available():  # the CPU flow check runs the kernels in Triton's interpreter
    os.environ.setdefault("TRITON_INTERPRET", "1")

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import metadata, write_json  # noqa: E402
from step_timeline import describe  # noqa: E402

import dak  # noqa: E402
from dak.defaults import DEFAULT_FUSE_PROJECTIONS  # noqa: E402
from dak.runtime.engine import Engine, Sampling  # noqa: E402

CATEGORIES = (  # first match wins; matched against lower-case kernel names
    ("split kernel", ("_split_linear_kernel", "split_linear")),
    ("hbm gemv", ("_gemv",)),
    ("copy engine", ("memcpy htod", "memcpy h2d")),
    ("attention", ("attn", "attention", "flash", "fmha")),
    ("kv write", ("_kv_write",)),
    ("gemm (cublas)", ("gemm", "nvjet", "cutlass", "xmma", "sm90")),
    ("norm", ("rms_norm", "layer_norm", "layernorm")),
    ("rotary", ("_rotary",)),
    ("copies", ("memcpy dtod", "copy_", "cat")),
    ("elementwise", ("elementwise", "vectorized", "reduce", "unrolled")),
)


def category(name: str) -> str:
    low = name.lower()
    for cat, keys in CATEGORIES:
        if any(k in low for k in keys):
            return cat
    return "other"


def tally(events, cuda: bool):
    """({category: [kernels, us]}, {kernel name: [kernels, us]}) of profiler `events`: GPU
    kernels (device time) on a GPU, top-level CPU ops (CPU time) without one."""
    per, names = defaultdict(lambda: [0, 0.0]), defaultdict(lambda: [0, 0.0])
    for ev in events:
        if cuda and ev.device_type != torch.autograd.DeviceType.CUDA:
            continue
        if not cuda and ev.cpu_parent is not None:
            continue  # top-level CPU ops only
        us = ev.device_time_total if cuda else ev.cpu_time_total
        for p in (per[category(ev.name)], names[ev.name]):
            p[0] += 1
            p[1] += us
    return per, names


def profile_steps(engine: Engine, steps: int, top: int = 30, trace: str | None = None):
    """(category -> (kernels per step, GPU us per step), busy us per step, the `top` kernel names by
    GPU time: [(name, category, kernels per step, us per step)]) over `steps` eager steps.
    `trace`: also write their Chrome trace there (GPU: eager copies against graph-replayed ones)."""
    from torch.profiler import ProfilerActivity, profile
    cuda = engine.device.type == "cuda"
    acts = [ProfilerActivity.CUDA] if cuda else [ProfilerActivity.CPU]
    with profile(activities=acts) as prof, torch.no_grad():  # as generate() runs it (the GEMV needs no autograd)
        for _ in range(steps):
            engine._step(Sampling())
        if cuda:
            torch.cuda.synchronize(engine.device)
    if trace:
        prof.export_chrome_trace(trace)
    per, names = tally(prof.events(), cuda)
    table = {c: (n / steps, us / steps) for c, (n, us) in per.items()}
    ranked = sorted(names.items(), key=lambda kv: -kv[1][1])[:top]
    kernels = [(name[:160], category(name), n / steps, us / steps) for name, (n, us) in ranked]
    return table, sum(us for _, us in table.values()), kernels


def graph_timeline(engine: Engine, steps: int, trace: str | None = None) -> dict | None:
    """GPU: the link timeline (step_timeline.link_report) of `steps` replays of the captured
    decode graph; None without a GPU or a captured graph. `trace`: also write the replays'
    Chrome trace there (every kernel and copy with its stream and, for copies, its bytes)."""
    from torch.profiler import ProfilerActivity, profile

    from step_timeline import Span, link_report
    graph = engine._graphs.get(Sampling())
    if engine.device.type != "cuda" or graph is None:
        return None
    torch.cuda.synchronize(engine.device)
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            graph.replay()
        torch.cuda.synchronize(engine.device)
    if trace:
        prof.export_chrome_trace(trace)
    spans = [Span(ev.name, ev.time_range.start, ev.time_range.end) for ev in prof.events()
             if ev.device_type == torch.autograd.DeviceType.CUDA]
    if not spans:
        return {"note": "the profiler recorded no kernels inside graph replays"}
    return link_report(spans, steps, lambda n: category(n) == "copy engine", category)


def replay_window(cap: int, steps: int) -> tuple[int, int]:
    """(start length, replays) for timing a bucket graph of cache length `cap`: each replay adds
    one token, so `replays` <= `steps` replays from `start` end at `cap`, never past it (past the
    bucket, a copy-engine path's staged slot has no row for the token: an out-of-bounds write)."""
    if cap < 2:
        raise ValueError(f"a bucket of cache length {cap} leaves no room to time replays (need >= 2)")
    n = max(1, min(steps, cap - 1))
    return cap - n, n


def replay_times(engine: Engine, steps: int = 20) -> dict | None:
    """GPU: ms per replay of each KV-length bucket's decode graph, up to `steps` back to back
    (replay_window: the cache lengths stay inside the bucket), timed by CUDA events without the
    profiler (None off the GPU). Set beside generate's TPOT, it says how much of a token's time
    lies outside the graph (launch, bucket switches, the loop). The cache lengths are restored."""
    graphs = engine._bucket_graphs.get(Sampling())
    if engine.device.type != "cuda" or not graphs:
        return None
    saved, lengths = engine.kv.lengths.clone(), engine.kv.lengths
    out = {}
    try:
        for cap, g in graphs:
            start, n = replay_window(cap, steps)
            lengths.fill_(start)
            g.replay()  # the first launch uploads the graph
            lengths.fill_(start)
            begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda.synchronize(engine.device)
            begin.record()
            for _ in range(n):
                g.replay()
            end.record()
            torch.cuda.synchronize(engine.device)
            out[str(cap)] = begin.elapsed_time(end) / n
    finally:
        lengths.copy_(saved)
    return out


POLICIES = ("consolidated", "greedy", "uniform")  # dak.offload policies
BASELINES = ("prefetch", "uva")  # built as `dak bench e2e` builds them, same Engine and graphs


def build(model_name, w, ratio, policy, fuse=False):
    """(engine, placement, free) for `policy` at host ratio `ratio` (dak: the placement `bench e2e`
    gives that x; baselines: `bench e2e`'s own case for that x)."""
    from dak.baselines.e2e import budget_for
    from dak.hardware import get_profile
    from dak.models import load_spec
    if policy in BASELINES:
        from dak.bench.e2e_cases import E2EConfig, plan_cases
        from dak.bench.e2e_systems import REGISTRY
        cfg = E2EConfig(models=(model_name,), batches=(w.batch,), prompt_len=w.prompt_len, gen_len=w.gen_len,
                        ratios=(ratio,), systems=(policy,), tune=False, fuse_projections=fuse)
        case, = plan_cases(cfg)
        if case.skip:
            raise ValueError(f"{policy} at x = {ratio:g}: {case.skip}")
        built = REGISTRY[policy](case, cfg)
        return built.engine, built.placement, built.free
    if policy == "uniform":
        kw = {"host_ratio": ratio}
    elif policy in POLICIES:
        kw = {"hbm_budget": budget_for(load_spec(model_name), w, ratio, get_profile("h200-pcie"))}
    else:
        raise ValueError(f"unknown policy {policy!r}: use one of {POLICIES + BASELINES}")
    model = dak.offload(model_name, batch=w.batch, prompt_len=w.prompt_len, gen_len=w.gen_len,
                        policy=policy, tune=False, fuse_projections=fuse, **kw)
    return model.dak_engine, model.dak_placement, model.dak_free


def run(model_name, batch, prompt_len, gen_len, ratio, steps, policy="consolidated", fuse=False, trace=None):
    from dak.models import Workload
    if gen_len < 2 * steps:
        raise ValueError(f"gen_len ({gen_len}) must be >= 2 x steps ({steps}): after a prefill the eager steps "
                         "and then the graph replays each decode `steps` tokens into the same cache")
    # the workload `dak bench e2e` plans (same max length, so the same placement), not a longer one
    w = Workload("decode", batch, prompt_len, gen_len, "bf16")
    engine, placement, free = build(model_name, w, ratio, policy, fuse)
    try:
        ids = torch.randint(3, engine.model.config.vocab_size, (batch, prompt_len))
        tpot = engine.generate(ids.to(engine.device), gen_len).tpot_s  # warm-up, graph capture, TPOT
        eager = Engine(engine.model, engine.kv, graphs=False)
        ids_dev = ids.to(eager.device)
        eager.prefill(ids_dev, torch.full((batch,), prompt_len, dtype=torch.int32, device=eager.device))
        table, busy, kernels = profile_steps(eager, steps, trace=trace and f"{trace}-eager-x{ratio:g}.json")
        timeline = graph_timeline(engine, steps, trace and f"{trace}-x{ratio:g}.json")
        replays = replay_times(engine)
        tpot_again = engine.generate(ids.to(engine.device), gen_len).tpot_s if replays else None
        return {"model": model_name, "batch": batch, "x_req": ratio, "policy": policy, "fused_projections": fuse,
                "offload_ratio": placement.offload_ratio, "tpot_graph_s": tpot,
                "planned_step_s": placement.step_time_s, "predicted_s": placement.predicted_s,
                "busy_us_per_step": busy,
                "categories": {c: {"kernels_per_step": n, "us_per_step": us} for c, (n, us) in
                               sorted(table.items(), key=lambda kv: -kv[1][1])},
                "top_kernels": [{"name": k, "category": c, "kernels_per_step": n, "us_per_step": us}
                                for k, c, n, us in kernels],
                "graph_timeline": timeline, "replay_ms_by_bucket": replays, "tpot_graph_again_s": tpot_again}
    finally:
        free()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="llama-2-7b")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--prompt-len", type=int, default=32)
    ap.add_argument("--gen-len", type=int, default=32, help="as `dak bench e2e` (the plan depends on it)")
    ap.add_argument("--ratios", default="0,0.05", help="host ratios (fractions), comma list")
    ap.add_argument("--policy", default="consolidated", choices=POLICIES + BASELINES,
                    help="a dak policy, or a baseline of `dak bench e2e` (prefetch, uva)")
    ap.add_argument("--steps", type=int, default=4, help="profiled eager decode steps")
    ap.add_argument("--fuse-projections", action=argparse.BooleanOptionalAction, default=DEFAULT_FUSE_PROJECTIONS,
                    help="q/k/v and gate/up as one matmul (dak.nn.fused_proj; default as `dak bench e2e`: "
                         f"{'on' if DEFAULT_FUSE_PROJECTIONS else 'off'})")
    ap.add_argument("--out", default="step-profile.json")
    ap.add_argument("--trace", default=None,
                    help="write each ratio's Chrome traces: eager steps to TRACE-eager-x<ratio>.json, "
                         "graph replays (GPU) to TRACE-x<ratio>.json")
    a = ap.parse_args(argv)
    name = a.model
    if not torch.cuda.is_available():
        print("no GPU: profiling tiny-llama's CPU ops under the Triton interpreter (a flow check)")
        name, a.batch, a.prompt_len, a.gen_len, a.steps = "tiny-llama", 2, 4, 2, 1
        if a.trace:
            print("no GPU: --trace writes the eager steps' trace only (graph replays need the GPU)")
    rows = []
    for r in (float(v) for v in a.ratios.split(",") if v):
        row = run(name, a.batch, a.prompt_len, a.gen_len, r, a.steps, a.policy, a.fuse_projections, a.trace)
        rows.append(row)
        how = "graph" if torch.cuda.is_available() else "interpreter"
        print(f"{name} B={a.batch} x={100 * r:.1f}% {a.policy}: TPOT {1e3 * row['tpot_graph_s']:.2f} ms ({how}), "
              f"planned {1e3 * row['planned_step_s']:.2f} ms, busy {row['busy_us_per_step'] / 1e3:.2f} ms/step")
        for c, v in row["categories"].items():
            print(f"    {c:14s} {v['kernels_per_step']:7.1f} kernels {v['us_per_step'] / 1e3:8.3f} ms")
        print("  top kernels (per step):")
        for k in row["top_kernels"]:
            print(f"    {k['kernels_per_step']:7.1f} x {k['us_per_step'] / 1e3:8.3f} ms  [{k['category']}] {k['name'][:110]}")
        if row["graph_timeline"] and "note" not in row["graph_timeline"]:
            print("\n".join(describe(row["graph_timeline"])))
        if row["replay_ms_by_bucket"]:
            by = ", ".join(f"cap {c}: {ms:.3f}" for c, ms in row["replay_ms_by_bucket"].items())
            print(f"    graph replays back to back (ms): {by}; generate again: TPOT "
                  f"{1e3 * row['tpot_graph_again_s']:.3f} ms")
    write_json(a.out, {"meta": metadata(), "rows": rows})
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
