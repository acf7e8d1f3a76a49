"""Price all-HBM decode linears at dak's GEMV rate: fit the layer overhead, check every e2e row.

The `h200-pcie` preset prices every HBM byte at hbm_bandwidth (3.7 TB/s, cuBLAS's GEMV), but the
decode step's all-HBM linears run dak's Triton GEMV (dak.kernels.hbm_gemv), which the sixteenth
session's sweep timed at 0.75-1.17x that rate's time per matrix: slower on 4096-row matrices,
faster on OPT-30B's. A profile's ``gemv_bandwidth`` prices those operators at the GEMV's own rate
(dak.planner.cost.hbm_time); the per-launch cost the sweep also shows then belongs to the layer
overhead, which this script refits.

1. The GEMV rate: an affine least-squares fit (bytes / B + c, relative error) of the sweep's
   heuristic-launch times (`--sweeps`, the non-gated matrices); B is the rate, c the per-launch
   cost (left to the layer overhead).
2. The layer overhead: every dak row at x = 0 of `--results` (the all-HBM step) gives
   (measured - operators at the GEMV rate) / layers; the candidate takes their mean as one
   layer_overhead_s for every layer (fused_layer_overhead_s 0), or `--layer-overhead` as given.
3. Every dak row at batch <= 16 of `--results` is re-planned as the run planned it (with
   `--hardware`, the run's profile; the script says where the host bytes differ from the run's)
   and that same placement is priced by the preset and by the candidate: predicted / measured
   for both, and whether the candidate would plan it differently.

    PYTHONPATH=src python3 benchmarks/fit_gemv_rate.py [--results benchmarks/results/e2e-h200.json]
        [--systems dak-consolidated] [--out candidate.json] [--leave-one-out] [--json fit.json]

Nothing here changes a default: `--out` writes the candidate profile, which `dak plan` and `dak
bench e2e --hardware` take (the e2e rows must be re-measured on it before it replaces the preset).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys

import numpy as np

from dak.bench.meta import git_sha
from dak.hardware import get_profile, run_profile
from dak.models import Workload, list_operators, load_spec
from dak.planner import plan
from dak.switches import environment, run_environ
from dak.planner.overhead import step_overhead
from dak.planner.stream import chain_predict
from dak.defaults import DEFAULT_FUSE_PROJECTIONS, DEFAULT_KV_AHEAD

SWEEPS = "benchmarks/results/sweep-gemv-llama-s16-h200.json,benchmarks/results/sweep-gemv-opt-s16-h200.json"


def gemv_rate(paths) -> tuple[float, float, float, float]:
    """(B bytes/s, c seconds, worst low, worst high ratio of fit / measured) of the sweeps' heuristic times."""
    b, t = [], []
    for path in paths:
        for r in json.load(open(path))["rows"]:
            if not r.get("gated"):  # the gated rows time a SiLU * up form the runtime does not use
                b.append(r["M"] * (r["K"] + (1 if r["bias"] else 0)) * 2)
                t.append(r["t_heuristic_ms"] * 1e-3)
    b, t = np.array(b, float), np.array(t, float)
    (inv, c), *_ = np.linalg.lstsq(np.stack([b / t, 1 / t], 1), np.ones_like(t), rcond=None)
    fit = (b * inv + c) / t
    return 1 / inv, c, float(fit.min()), float(fit.max())


def rows_of(paths, systems, max_batch: int = 16):
    """The rows to price, each with the profile its run planned with ("_profile": run_profile of
    the file's hardware and the row's run date, so a merged table's old and new rows each re-plan
    as they ran) and its $DAK_* switches ("_env": dak.switches.run_environ of the run's own and
    its date: defaults changed since it ran at their old values)."""
    seen = {}
    for path in paths:
        d = json.load(open(path))
        hw = d.get("config", {}).get("hardware") or "h200-pcie"
        for r in d["rows"]:
            if r["system"] in systems and r.get("status") == "ok" and r["batch"] <= max_batch and r.get("kind") == "ratio":
                run = r.get("run") or d.get("meta", {})
                date = run.get("date") or d.get("meta", {}).get("date")
                seen[(r["model"], r["system"], r["batch"], r["x_req"])] = dict(
                    r, _profile=run_profile(hw, date), _env=run_environ(run.get("env"), date))
    return list(seen.values())


def priced(r, run_profile, profile):
    """(the run's placement, its prediction on `profile`, the placement `profile` itself plans),
    all under the run's $DAK_* switches (r["_env"], where rows_of set it)."""
    w = Workload("decode", r["batch"], r["prompt_len"], r["gen_len"], r["dtype"])
    spec = load_spec(r["model"])
    policy = r["system"].removeprefix("dak-")
    kw = dict(fused=DEFAULT_FUSE_PROJECTIONS, kv_ahead=DEFAULT_KV_AHEAD)
    with environment(r.get("_env", {})):
        run_pl = plan(spec, w, run_profile, r["hbm_budget"], policy, **kw)
        host = [o.host_bytes for o in run_pl.ops]
        pred = chain_predict(list_operators(spec, w), host, w, profile, base=step_overhead(spec, w, profile), **kw)
        own = plan(spec, w, profile, r["hbm_budget"], policy, **kw)
    return run_pl, pred, own


def layer_residuals(rows, profile) -> list[float]:
    """(measured - predicted without layer overheads) / layers of each x = 0 row on `profile`."""
    bare = dataclasses.replace(profile, layer_overhead_s=0.0, fused_layer_overhead_s=0.0)
    out = []
    for r in rows:
        if r["x_req"] == 0:
            _, pred, _ = priced(r, bare, bare)
            out.append((r["model"], (r["tpot_s"] - pred) / load_spec(r["model"]).num_layers))
    return out


def leave_one_model_out(rows, base, cand, res) -> list[str]:
    """Each model's rows priced with the layer overhead fitted on the other models' x = 0 rows."""
    out = []
    for held in sorted({m for m, _ in res}):
        v = float(np.mean([x for m, x in res if m != held]))
        c = dataclasses.replace(cand, layer_overhead_s=v, fused_layer_overhead_s=0.0)
        errs = [priced(r, r.get("_profile", base), c)[1] / r["tpot_s"] for r in rows if r["model"] == held]
        ok = sum(abs(e - 1) <= 0.1 for e in errs)
        out.append(f"{held}: overhead {v * 1e6:.1f} us from the others, predicted/measured {min(errs):.2f}-"
                   f"{max(errs):.2f}, within 10% {ok} of {len(errs)}")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", default="benchmarks/results/e2e-h200.json", help="dak bench e2e JSONs, comma-separated")
    ap.add_argument("--systems", default="dak-consolidated", help="dak systems to check, comma-separated")
    ap.add_argument("--hardware", default=None, help="the profile the runs planned with (default: each row's own, "
                    "dak.hardware.run_profile; the candidate then starts from h200-pcie-cublas)")
    ap.add_argument("--sweeps", default=SWEEPS, help="sweep_gemv.py JSONs, comma-separated")
    ap.add_argument("--gemv-bandwidth", type=float, default=None, help="bytes/s (default: the sweeps' fit)")
    ap.add_argument("--layer-overhead", type=float, default=None, help="seconds (default: the x = 0 rows' mean)")
    ap.add_argument("--out", default=None, help="write the candidate profile here")
    ap.add_argument("--json", default=None, help="write the fit and every row's figures here")
    ap.add_argument("--leave-one-out", action="store_true",
                    help="also price each model with the layer overhead fitted on the other models")
    a = ap.parse_args()
    for name in ("gemv_bandwidth", "layer_overhead"):
        v = getattr(a, name)
        if v is not None and not (v > 0 and v != float("inf")):
            ap.error(f"--{name.replace('_', '-')} must be a positive number, got {v}")
    try:
        base = get_profile(a.hardware or "h200-pcie-cublas")
        rows = rows_of(a.results.split(","), set(a.systems.split(",")))
        if a.hardware:  # every row re-planned with the profile given
            rows = [dict(r, _profile=base) for r in rows]
        fitted = gemv_rate(a.sweeps.split(",")) if a.gemv_bandwidth is None else None
    except (OSError, ValueError, KeyError) as e:  # a missing or malformed JSON, an unknown profile
        ap.error(f"{type(e).__name__}: {e}")
    if not rows:
        ap.error(f"no {a.systems} rows at batch <= 16 in {a.results}")
    rate = a.gemv_bandwidth
    if rate is None:
        rate, c, lo, hi = fitted
        print(f"GEMV sweeps: {rate / 1e12:.3f} TB/s + {c * 1e6:.2f} us a launch (fit / measured {lo:.2f}-{hi:.2f})")
    cand = dataclasses.replace(base, name=f"{base.name}-gemv", gemv_bandwidth=rate)
    per_layer = a.layer_overhead
    res = layer_residuals(rows, cand)
    print("layer overhead left by x = 0 rows: " + ", ".join(f"{m} {v * 1e6:.1f} us" for m, v in res))
    if per_layer is None:
        if not res:
            ap.error("no x = 0 row to fit the layer overhead on: pass --layer-overhead")
        per_layer = float(np.mean([v for _, v in res]))
    cand = dataclasses.replace(cand, layer_overhead_s=per_layer, fused_layer_overhead_s=0.0)
    print(f"candidate: gemv_bandwidth {rate / 1e12:.3f} TB/s, layer_overhead_s {per_layer * 1e6:.1f} us "
          f"(preset: {base.layer_overhead_s * 1e6:.1f} / fused {base.fused_layer_overhead_s * 1e6:.1f} us)")
    print(f"{'row':34s} {'meas ms':>8s} {'run pl':>6s} {'preset':>7s} {'cand':>6s}  candidate's own plan")
    within, report = {"preset": 0, "cand": 0}, []
    for r in sorted(rows, key=lambda r: (r["model"], r["system"], r["x_req"])):
        run_pl, pred, own = priced(r, r.get("_profile", base), cand)
        same = "same" if run_pl.host_bytes == r.get("host_bytes", run_pl.host_bytes) else "DIFF"
        moved = [o.name for o, p in zip(run_pl.ops, own.ops) if o.host_units != p.host_units]
        mine = "same" if not moved and own.one_gemv == run_pl.one_gemv else (
            f"differs: {len(moved)} ops" + (f", one_gemv {own.one_gemv}" if own.one_gemv != run_pl.one_gemv else "")
            + f" (predicted {own.predicted_s * 1e3:.2f} ms)")
        e0, e1 = run_pl.predicted_s / r["tpot_s"], pred / r["tpot_s"]
        within["preset"] += abs(e0 - 1) <= 0.1
        within["cand"] += abs(e1 - 1) <= 0.1
        tag = f"{r['model']} {r['system'].removeprefix('dak-')} {100 * r['x_req']:g}% b{r['batch']}"
        print(f"{tag:34s} {r['tpot_s'] * 1e3:8.2f} {same:>6s} {e0:7.2f} {e1:6.2f}  {mine}")
        report.append({"row": tag, "run": r.get("run", {}).get("git_sha"), "measured_s": r["tpot_s"],
                       "run_host_bytes_match": same == "same", "preset_over_measured": e0,
                       "candidate_over_measured": e1, "candidate_plan": mine})
    print(f"within 10%: preset {within['preset']} of {len(rows)}, candidate {within['cand']} of {len(rows)}")
    loo = leave_one_model_out(rows, base, cand, res) if a.leave_one_out and len(res) > 1 else []
    for line in loo:
        print("leave one model out: " + line)
    if a.out:
        cand.to_json(a.out)
        print(f"wrote {a.out}")
    if a.json:
        meta = {"command": "python3 " + " ".join(sys.argv), "git_sha": git_sha(), "machine": "CPU (no GPU: planner only)",
                "results": a.results, "systems": a.systems, "hardware": a.hardware}
        with open(a.json, "w") as fh:
            json.dump({"meta": meta, "gemv_bandwidth": rate, "layer_overhead_s": per_layer,
                       "layer_residuals_s": dict(res), "within_10pct": within, "leave_one_model_out": loo,
                       "rows": report}, fh, indent=1)
            fh.write("\n")
        print(f"wrote {a.json}")


if __name__ == "__main__":
    main()
