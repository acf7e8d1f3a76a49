"""Fit the per-split-operator excesses of a hardware profile to measured end-to-end runs.

For every dak run at x > 0 (dak-greedy, dak-consolidated, dak-uniform) in `dak bench e2e` JSONs,
the placement is re-planned on the CPU as the run planned it (with `--hardware`, which must be
the profile the run used: the consolidated policy's choices depend on its overheads), and
(measured TPOT - predicted TPOT without per-operator excesses) is regressed on: the number of
split linears read in place, the number going through the copy engine, and the host-KV link
time of split attention. Prints the coefficients on all runs, then fitted on all models but
one and checked on it.

    PYTHONPATH=src python3 benchmarks/fit_split_overheads.py --results a.json,b.json
    PYTHONPATH=src python3 benchmarks/fit_split_overheads.py --results a.json --fix attention_host_excess=0.2

Since session 7 the planner predicts dak's placements with the copy-ahead chain model
(dak.planner.stream: compute side and link side combined), in which the excesses add linearly
only where the compute side sets the step; on link-bound rows this regression is approximate.
`benchmarks/fit_chain_model.py` checks the whole model.

`--fix NAME=VALUE` holds a coefficient (one of COEFFS) and fits the others; either way the
script ends with how many runs the profile's own coefficients and the fitted ones predict
within 10%.

History of the `h200-pcie` preset's inplace_op_overhead_s, copy_op_overhead_s and
attention_host_excess: 5.3 us / 23.4 us / 0.9 from e2e-h200.json (greedy and uniform runs with
four copy-engine chunks per operator, 2026-12-01 session 4); then refitted on the runs with one
chunk (session 5, see hardware_presets.py).
"""

import argparse
import dataclasses
import json

import numpy as np

from dak.bench.meta import merge_rows
from dak.hardware import get_profile
from dak.models import Workload, list_operators, load_spec
from dak.planner import plan
from dak.planner.overhead import split_overhead

FEATURES = ("inplace ops", "copy-engine ops", "host-KV link s")
COEFFS = ("inplace_op_overhead_s", "copy_op_overhead_s", "attention_host_excess")  # the profile fields


SYSTEMS = ("dak-greedy", "dak-consolidated", "dak-uniform")


def samples(rows, profile):
    bare = dataclasses.replace(profile, inplace_op_overhead_s=0.0, copy_op_overhead_s=0.0,
                               attention_host_excess=0.0)
    # each feature is the planner's own split_overhead with one coefficient set to 1
    units = [dataclasses.replace(bare, **{f: 1.0}) for f in COEFFS]
    out, seen = [], set()
    for r in rows:
        key = (r["model"], r["batch"], r["x_req"], r["system"])
        if r["system"] not in SYSTEMS or r.get("status") != "ok" or not r["x_req"] or key in seen:
            continue
        seen.add(key)
        w = Workload("decode", r["batch"], r["prompt_len"], r["gen_len"], r["dtype"])
        spec = load_spec(r["model"])
        pl = plan(spec, w, profile, hbm_budget=r["hbm_budget"], policy=r["system"].split("-")[1])
        if pl.host_bytes != r.get("host_bytes", pl.host_bytes):
            print(f"note: {key} re-planned with {pl.host_bytes} host bytes, the run had {r['host_bytes']}")
        ops, host = list_operators(spec, w), [o.host_bytes for o in pl.ops]
        out.append({"model": r["model"], "system": r["system"], "x": r["x_req"], "measured": r["tpot_s"],
                    "predicted": pl.predicted_s - split_overhead(ops, host, w, profile),
                    "f": np.array([split_overhead(ops, host, w, u) for u in units])})
    return out


def fit(data, fixed: dict | None = None):
    """Least-squares coefficients (in COEFFS order); `fixed` {index: value} are held."""
    fixed = fixed or {}
    free = [i for i in range(len(COEFFS)) if i not in fixed]
    c = np.zeros(len(COEFFS))
    for i, v in fixed.items():
        c[i] = v
    a = np.array([d["f"] for d in data])
    y = np.array([d["measured"] - d["predicted"] for d in data]) - a @ c
    if free:
        c[free] = np.linalg.lstsq(a[:, free], y, rcond=None)[0]
    return c


def within(data, c) -> int:
    """Runs whose prediction with coefficients `c` is within 10% of the measured TPOT."""
    return sum(abs((d["predicted"] + c @ d["f"]) / d["measured"] - 1) <= 0.1 for d in data)


def parse_fix(items) -> dict:
    fixed = {}
    for item in items:
        name, _, value = item.partition("=")
        if name not in COEFFS or not value:
            raise SystemExit(f"--fix takes NAME=VALUE with NAME one of {', '.join(COEFFS)}; got {item!r}")
        try:
            fixed[COEFFS.index(name)] = float(value)
        except ValueError:
            raise SystemExit(f"--fix {item!r}: {value!r} is not a number") from None
    return fixed


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--results", default="benchmarks/results/e2e-h200.json", help="comma list of result JSONs")
    ap.add_argument("--hardware", default="h200-pcie", help="the profile that re-plans every row, as the runs "
                    "planned with it (rows re-planned differently from their run are noted; the table's rows before "
                    "the thirty-first session planned with h200-pcie-cublas)")
    ap.add_argument("--fix", action="append", default=[], metavar="NAME=VALUE",
                    help=f"hold a coefficient ({', '.join(COEFFS)}); repeatable")
    a = ap.parse_args(argv)
    fixed = parse_fix(a.fix)
    payloads = []
    for path in (p for p in a.results.split(",") if p):
        try:
            with open(path) as fh:
                payloads.append(json.load(fh))
            if not isinstance(payloads[-1], dict) or "rows" not in payloads[-1]:
                raise ValueError("no 'rows' in it")
        except (OSError, ValueError) as e:
            raise SystemExit(f"cannot read `dak bench e2e` rows from {path!r}: {e}") from None
    profile = get_profile(a.hardware)
    data = samples(merge_rows(payloads), profile)  # a case in several files: the last file's row
    if len(data) < len(FEATURES) - len(fixed):
        raise SystemExit(f"{a.results}: only {len(data)} dak runs at x > 0; need at least {len(FEATURES)}")
    c_all = fit(data, fixed)
    print(f"{len(data)} runs: " + ", ".join(f"{n} {v:.4g}{' (held)' if i in fixed else ''}"
                                           for i, (n, v) in enumerate(zip(FEATURES, c_all))))
    for held in sorted({d["model"] for d in data}):
        c = fit([d for d in data if d["model"] != held], fixed)
        for sys_ in SYSTEMS:
            q = [(d["predicted"] + c @ d["f"]) / d["measured"] for d in data
                 if d["model"] == held and d["system"] == sys_]
            if q:
                print(f"held out {held} {sys_}: predicted/measured {', '.join(f'{v:.2f}' for v in q)}; "
                      f"within 10%: {sum(abs(v - 1) <= 0.1 for v in q)} of {len(q)}")
    own = np.array([getattr(profile, f) for f in COEFFS])
    print(f"within 10%: {within(data, own)} of {len(data)} with {profile.name}'s coefficients, "
          f"{within(data, c_all)} with the fitted ones (in-sample)")


if __name__ == "__main__":
    main()
