"""Check (and grid-fit) the copy-ahead chain model of dak.planner.stream on measured runs.

Every dak row at x > 0 of the given `dak bench e2e` JSONs is re-planned on the CPU with the
profile the run used and the system's policy; the row must have been measured with that
planner's placement (the script says when the host bytes differ). For each point of a grid
over the chain model's knobs (the profile's copy_op_overhead_s on the compute side and the link
side, and the p-norm CONTENTION_NORM) it counts the rows predicted within 10% and the worst
error, best first; then prints every row's predicted/measured with the profile as it is.

    PYTHONPATH=src python3 benchmarks/fit_chain_model.py benchmarks/results/e2e-streamed-s7-h200.json ...

CONTENTION_NORM = 6 and copy_op_overhead_s = 13.9 us came from this on the session-7 runs
(e2e-streamed-s7, e2e-opt-30b-streamed-s7, e2e-fused-s7: 35 rows, 34 within 10%).
"""

import argparse
import dataclasses
import itertools
import json

from dak.hardware import get_profile
from dak.models import Workload, list_operators, load_spec
from dak.planner import plan
from dak.defaults import DEFAULT_KV_AHEAD
from dak.planner.overhead import step_overhead
from dak.planner.stream import chained


def rows_of(paths, profile):
    out = []
    for path in paths:
        data = json.load(open(path))
        fused = data.get("config", {}).get("fuse_projections", False)
        for r in data["rows"]:
            if not r["system"].startswith("dak-") or r.get("status") != "ok" or not r["x_req"]:
                continue
            w = Workload("decode", r["batch"], r["prompt_len"], r["gen_len"], r["dtype"])
            spec = load_spec(r["model"])
            pl = plan(spec, w, profile, r["hbm_budget"], r["system"].removeprefix("dak-"), fused=fused)
            if pl.host_bytes != r.get("host_bytes", pl.host_bytes):
                print(f"note: {r['model']} {r['x_req']} {r['system']} re-planned with {pl.host_bytes} host bytes, "
                      f"the run had {r['host_bytes']}")
            out.append((f"{r['model']} x={r['x_req']:.2f} {r['system']}", spec, w, list_operators(spec, w),
                        [o.host_bytes for o in pl.ops], fused, r["tpot_s"]))
    return out


def predict(p, spec, w, ops, host, fused, compute_ce, link_ce, norm):
    """The planner's chain model (dak.planner.stream.chained: local times, the step's small kernels,
    split-operator and fusion overheads, the first copy, one GEMV once staged where it decides so)
    with the copy-engine operator's start-up split into its two sides and the p-norm `norm`; at
    the profile's own copy_op_overhead_s on both sides and CONTENTION_NORM it is the planner's."""
    base = step_overhead(spec, w, p)
    ct, extra = chained(ops, host, w, p, fused, kv_ahead=DEFAULT_KV_AHEAD, base=base)
    n_ce = sum(ct.copy_engine)
    a = sum(ct.times) + base + extra + n_ce * (compute_ce - p.copy_op_overhead_s)
    link = ct.link_s + n_ce * (link_ce - p.copy_op_overhead_s)
    return (a ** norm + link ** norm) ** (1 / norm) if link > 0 else a


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("results", nargs="+", help="dak bench e2e JSON files")
    ap.add_argument("--hardware", default="h200-pcie", help="the profile that re-plans every row, as the runs "
                    "planned with it (rows re-planned differently from their run are noted; the table's rows before "
                    "the thirty-first session planned with h200-pcie-cublas)")
    args = ap.parse_args()
    profile = get_profile(args.hardware)
    rows = rows_of(args.results, profile)
    grid = []
    for ca, cl, norm in itertools.product([5e-6, 10e-6, 13.9e-6, 18e-6, 22e-6], [0.0, 7e-6, 13.9e-6, 22e-6],
                                          [2, 4, 6, 8, 12, 64]):
        errs = [predict(profile, *r[1:6], ca, cl, norm) / r[6] - 1 for r in rows]
        grid.append((sum(abs(e) <= 0.1 for e in errs), -max(abs(e) for e in errs), ca, cl, norm))
    grid.sort(reverse=True)
    print(f"{len(rows)} rows; best grid points (within 10%, worst error, compute-side s, link-side s, p):")
    for n, worst, ca, cl, norm in grid[:8]:
        print(f"  {n:3d}  {-worst:6.1%}  {ca * 1e6:5.1f} us  {cl * 1e6:5.1f} us  p={norm}")
    p0 = dataclasses.replace(profile)
    print(f"with {args.hardware} as it is (copy_op_overhead_s {p0.copy_op_overhead_s * 1e6:.1f} us both sides, p=6):")
    for r in rows:
        pred = predict(p0, *r[1:6], p0.copy_op_overhead_s, p0.copy_op_overhead_s, 6)
        print(f"  {r[0]:40s} measured {r[6] * 1e3:8.2f} ms  predicted/measured {pred / r[6]:.2f}")


if __name__ == "__main__":
    main()
