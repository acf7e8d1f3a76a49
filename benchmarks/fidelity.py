"""Fidelity of the planner: predicted vs measured per-operator time, and measured end to end.

For a calibrated profile, a model and workload, and several offload levels (share of operator
bytes that must live on the host), it plans with the greedy twice -- on the profile's measured
curves and on the pure roofline -- and times every distinct (operator shape, host rows or
requests) of both placements with the same modules the calibration timed (SplitLinear with the
tuning cache calibrate seeded, split decode attention); a q/k/v or gate/up member whose whole set
is in HBM counts as its byte share of the set's fused product, as the runtime runs it. It reports:
- the share of operators whose predicted time (measured cost model) is within 10% of measured,
  next to the same share for the roofline's predictions;
- end to end: the sum of measured operator times of each placement (operators run one after
  another; embeddings, which are not timed, count with their predicted time in both).

    DAK_CACHE_DIR=... PYTHONPATH=src python benchmarks/fidelity.py --profile prof.json \
        --model llama-2-7b --offload 0.2,0.5,0.8 --out fidelity.json
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import metadata, write_json  # noqa: E402

from dak.calibrate import make_plan  # noqa: E402
from dak.hardware import get_profile  # noqa: E402
from dak.models import Workload, list_operators, load_spec, minimum_hbm_set  # noqa: E402
from dak.planner import op_key, plan  # noqa: E402
from dak.planner.cost import op_time  # noqa: E402


def placements(spec, w, profile, offloads, tile_rows):
    ops = list_operators(spec, w, tile_rows)
    op_bytes = sum(o.bytes for o in ops)
    total = op_bytes + minimum_hbm_set(spec, w).total
    for f in offloads:
        budget = int(total - f * op_bytes)
        yield f, {cm: plan(spec, w, profile, budget, "greedy", tile_rows, cost_model=cm)
                  for cm in ("measured", "roofline")}


def measure(groups, jobs, spec, w, tile_rows, tune):
    """{(key, host units): seconds} for every group, one LinearShape per shape."""
    from dak.calibrate.attention import time_attention
    from dak.calibrate.linear import LinearShape
    times = {}
    for key in sorted({k for k, _ in groups}):
        job = jobs[key]
        wanted = sorted(rows for k, rows in groups if k == key)
        if job.kind == "attention":
            for b_h in wanted:
                times[(key, b_h)] = time_attention(spec, w, b_h, tune)
            continue
        shape = LinearShape(job.m, job.k, job.n, job.bias, w.dtype, tile_rows, tune)
        for m_h in wanted:
            times[(key, m_h)] = shape.time_point(m_h).time_s
            print(f"  {key} host rows {m_h}: {times[(key, m_h)] * 1e6:.1f} us", flush=True)
        del shape
    return times


def fused_shares(spec, w, ops, tile_rows, tune) -> dict:
    """{member shape key: seconds}: each member's byte share of its projection set's fused product
    all in HBM, timed as calibrate times it (dak.calibrate.fusion) -- how the runtime runs a
    q/k/v or gate/up set whose members are all in HBM, and what a fused curve's x = 0 point is."""
    from dak.calibrate.fusion import fusion_sets, time_fused
    shares = {}
    for fs in fusion_sets(list(ops.values()), w.dtype_bytes):
        t = time_fused(fs, w.dtype, tile_rows, tune)
        print(f"  fused {'/'.join(fs.kinds)} ({fs.m}x{fs.k}): {t * 1e6:.1f} us", flush=True)
        for key, rows in zip(fs.keys, fs.rows):
            shares.setdefault(key, t * rows / fs.m)
    return shares


def fused_members(pl, ops) -> set:
    """Names of the operators of placement `pl` the runtime multiplies fused
    (dak.planner.overhead.fused_projection_ops); `ops`: operators by name."""
    from dak.planner.overhead import fused_projection_ops
    idx = fused_projection_ops([ops[p.name] for p in pl.ops], [p.host_bytes for p in pl.ops])
    return {pl.ops[i].name for i in idx}


def host_units(p) -> int:
    return p.host_requests if p.kind == "attention" else p.host_rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--profile", required=True)
    ap.add_argument("--model", default="llama-2-7b")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--prompt-len", type=int, default=512)
    ap.add_argument("--gen-len", type=int, default=128)
    ap.add_argument("--offload", default="0.05,0.2,0.5,0.8", help="host shares of operator bytes")
    ap.add_argument("--tile-rows", type=int, default=64)
    ap.add_argument("--no-tune", action="store_true")
    ap.add_argument("--out", default="fidelity.json")
    a = ap.parse_args()
    spec, profile = load_spec(a.model), get_profile(a.profile)
    w = Workload("decode", a.batch, a.prompt_len, a.gen_len)
    ops = {o.name: o for o in list_operators(spec, w, a.tile_rows)}
    jobs = {j.key: j for j in make_plan(spec, w, tile_rows=a.tile_rows).shapes}
    plans = list(placements(spec, w, profile, [float(f) for f in a.offload.split(",")], a.tile_rows))
    groups = {(op_key(ops[p.name]), host_units(p)) for _, pls in plans for pl in pls.values() for p in pl.ops
              if op_key(ops[p.name]) in jobs}
    times = measure(groups, jobs, spec, w, a.tile_rows, not a.no_tune)
    shares = fused_shares(spec, w, ops, a.tile_rows, not a.no_tune)
    rows, summary = [], []
    for f, pls in plans:
        e2e = {}
        for cm, pl in pls.items():
            # each operator alone (what `measure` times): its curve or roofline, copies included;
            # a placement's op.time_s leaves copy-engine rows' link time to the step (dak.planner.stream)
            prof = profile if cm == "measured" else profile.roofline_only()
            measured_total = predicted_total = 0.0
            fused = fused_members(pl, ops)
            for p in pl.ops:
                key = op_key(ops[p.name])
                t, pred = times.get((key, host_units(p))), op_time(ops[p.name], p.ratio, prof)
                if p.name in fused and key in shares:  # the runtime multiplies the set as one matrix
                    t = shares[key]
                measured_total += pred if t is None else t
                predicted_total += pred
                if t is not None:
                    rows.append({"offload": f, "cost_model": cm, "op": p.name, "kind": p.kind, "ratio": p.ratio,
                                 "predicted_s": pred, "measured_s": t, "error": pred / t - 1})
            e2e[cm] = {"predicted_s": predicted_total, "measured_s": measured_total}
        summary.append({"offload": f, **{f"{cm}_{k}": v for cm, d in e2e.items() for k, v in d.items()}})
        print(f"offload {f:.2f}: measured TPOT, greedy on measured curves {e2e['measured']['measured_s'] * 1e3:.3f} ms "
              f"(predicted {e2e['measured']['predicted_s'] * 1e3:.3f}), on roofline "
              f"{e2e['roofline']['measured_s'] * 1e3:.3f} ms (predicted {e2e['roofline']['predicted_s'] * 1e3:.3f}); "
              f"ratio {e2e['roofline']['measured_s'] / e2e['measured']['measured_s']:.3f}x", flush=True)
    for cm in ("measured", "roofline"):
        errs = [abs(r["error"]) for r in rows if r["cost_model"] == cm]
        within = sum(e <= 0.10 for e in errs) / max(1, len(errs))
        print(f"{cm} cost model: {100 * within:.1f}% of {len(errs)} operator placements predicted within 10% "
              f"(target >= 90% for measured)")
    never_worse = all(s["measured_measured_s"] <= s["roofline_measured_s"] * 1.01 for s in summary)
    print(f"greedy on measured curves never slower than on the roofline (1% noise): {never_worse}")
    write_json(a.out, {"meta": {**metadata(), "profile": a.profile, "profile_meta": profile.meta},
                       "summary": summary, "rows": rows})


if __name__ == "__main__":
    main()
