"""Host K/V copied ahead, priced as the runtime copies it: re-price committed e2e runs (CPU).

Two things the planner now mirrors (thirtieth session), for an attention priced as copied a layer
ahead (a calibrated one, or any under $DAK_ROOFLINE_KV_AHEAD=1):
- the engine's decode graphs copy each staged request's K/V up to the cache-length bucket of the
  step (dak.runtime.engine, 4 buckets by default), not just the positions in use: the link time
  is priced at those rows (Operator.copy_traffic, dak.models.ops.copied_rows: 55.7 of 64
  positions at prompt 32 + 32 new tokens, against 48.5 attended on average);
- the untuned attention config reads host K/V under 4 MiB a layer in place, without the copy
  engine (dak.shares.ATTENTION_CE_MIN_BYTES): such parts are priced as read in place.
This script re-plans every dak row of the given `bench e2e` JSONs as its run planned it (the run's
profile and $DAK_* switches, dak.switches.run_environ; the previous pricing) and prints predicted / measured for that
placement under the previous and the current pricing, and whether the current one plans the row
differently.

    PYTHONPATH=src python3 benchmarks/price_kv_copies.py benchmarks/results/e2e-h47-{a,b,c}-s21-h200.json \\
        benchmarks/results/e2e-h50-{a,b}-s21-h200.json [--profile RUN_PATH=LOCAL] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
from contextlib import contextmanager

import dak.models.ops as model_ops
import dak.planner.overhead as overhead
from dak.bench.meta import git_sha
from dak.defaults import DEFAULT_FUSE_PROJECTIONS, DEFAULT_KV_AHEAD, DEFAULT_KV_BUCKETS
from dak.hardware import get_profile, run_profile
from dak.models import Workload, list_operators, load_spec
from dak.planner import plan
from dak.planner.overhead import step_overhead
from dak.planner.stream import chain_predict
from dak.switches import environment, run_environ


@contextmanager
def previous_pricing():
    """The planner before the thirtieth session: every host K/V part of an attention priced as
    copied ahead (none read in place), at the attended context rather than the bucket's rows."""
    rows, floor = model_ops.copied_rows, overhead.ATTENTION_CE_MIN_BYTES
    model_ops.copied_rows = lambda w: w.context
    overhead.ATTENTION_CE_MIN_BYTES = 1
    try:
        yield
    finally:
        model_ops.copied_rows, overhead.ATTENTION_CE_MIN_BYTES = rows, floor


def reprice(path: str, moved: dict) -> list[dict]:
    d = json.load(open(path))
    out = []
    with environment(run_environ(d["meta"].get("env"), d["meta"].get("date"))):
        hw = d["config"].get("hardware") or "h200-pcie"
        prof = get_profile(moved[hw]) if hw in moved else run_profile(hw, d["meta"].get("date"))
        for r in d["rows"]:
            if not r["system"].startswith("dak-") or r.get("status") != "ok" or r.get("kind") != "ratio":
                continue
            w = Workload("decode", r["batch"], r["prompt_len"], r["gen_len"], r["dtype"],
                         d["config"].get("kv_buckets", DEFAULT_KV_BUCKETS))
            spec, policy = load_spec(r["model"]), r["system"].removeprefix("dak-")
            kw = dict(fused=DEFAULT_FUSE_PROJECTIONS, kv_ahead=DEFAULT_KV_AHEAD)
            base = step_overhead(spec, w, prof)
            with previous_pricing():
                ran = plan(spec, w, prof, r["hbm_budget"], policy, **kw)
                host = [o.host_bytes for o in ran.ops]
                old = chain_predict(list_operators(spec, w), host, w, prof, base=base, **kw)
            new = chain_predict(list_operators(spec, w), host, w, prof, base=base, **kw)
            own = plan(spec, w, prof, r["hbm_budget"], policy, **kw)
            out.append(dict(file=os.path.basename(path), model=r["model"], system=r["system"], x=r["x_req"],
                            measured_s=r["tpot_s"], host_kv_bytes=sum(o.host_bytes for o in ran.ops
                                                                      if o.name.endswith("attention")),
                            plan_as_run=abs(ran.host_bytes - r["planned"]["host_bytes"]) < 2 ** 20,
                            old_over_measured=old / r["tpot_s"], new_over_measured=new / r["tpot_s"],
                            new_plan_differs=[o.host_bytes for o in own.ops] != host))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", nargs="+", help="bench e2e JSONs")
    ap.add_argument("--profile", action="append", default=[], metavar="RUN_PATH=LOCAL",
                    help="where a profile a run names (e.g. in a device's $OUT) lies here; repeatable")
    ap.add_argument("--json", default=None, help="write the rows and the command here")
    args = ap.parse_args()
    if any("=" not in m for m in args.profile):
        ap.error("--profile takes RUN_PATH=LOCAL")
    moved = dict(m.split("=", 1) for m in args.profile)
    rows = [row for path in args.results for row in reprice(path, moved)]
    for r in rows:
        print(f"{r['file'][:24]:24} {r['model']:10} {r['x']:5.0%} host KV {r['host_kv_bytes'] / 2**20:5.0f} MiB"
              f"{'' if r['plan_as_run'] else ' (plan != run)'}  measured {r['measured_s'] * 1e3:6.2f} ms"
              f"  pred/meas old {r['old_over_measured']:.3f} new {r['new_over_measured']:.3f}"
              f"{'  new pricing plans it differently' if r['new_plan_differs'] else ''}")
    moved_rows = [r for r in rows if abs(r["old_over_measured"] - r["new_over_measured"]) > 1e-4]
    print(f"{len(moved_rows)} of {len(rows)} rows priced differently (host K/V copied ahead)")
    for lim in (0.05, 0.10):
        print(f"  within {lim:.0%}: old {sum(abs(r['old_over_measured'] - 1) <= lim for r in moved_rows)}, "
              f"new {sum(abs(r['new_over_measured'] - 1) <= lim for r in moved_rows)}")
    if moved_rows:
        med = {k: statistics.median(abs(r[k] - 1) for r in moved_rows) for k in ("old_over_measured", "new_over_measured")}
        print(f"  median |pred/meas - 1|: old {med['old_over_measured']:.3f}, new {med['new_over_measured']:.3f}")
    if args.json:
        with open(args.json, "w") as f:
            cmd = " ".join(["PYTHONPATH=src python3 benchmarks/price_kv_copies.py", *args.results]
                           + [f"--profile {m}" for m in args.profile])
            json.dump(dict(git_sha=git_sha(), command=cmd, rows=rows), f, indent=1)


if __name__ == "__main__":
    main()
