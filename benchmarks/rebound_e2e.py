"""Recompute the batch-8 table's bounds at other HBM read rates (CPU only, no GPU).

`dak bench e2e` stores each row's bound (the greedy placement's roofline at the row's HBM budget,
`dak.baselines.e2e.roofline_bound`) under the hardware profile of its run. The `h200-pcie`
preset's HBM rate is 3.7 TB/s, cuBLAS's GEMV when the preset was measured; since the sixteenth
session dak's own GEMV reads faster than that on large matrices, so that bound is not a hard one
(OPT-30B all in HBM runs at 1.06 x it). This re-plans every dak row's bound with the preset's
HBM rate replaced by each --hbm-rate (e.g. `dak calibrate`'s 4.14-4.19 TB/s, or the fastest
GEMV read measured, 4.36 TB/s on Llama-3-8B's LM head) and prints EB/bound at each, with how
many rows reach 0.9. It first checks that the preset's own rate reproduces the stored bounds.

    PYTHONPATH=src python3 benchmarks/rebound_e2e.py benchmarks/results/e2e-h200.json --hbm-rate 4.14e12,4.36e12
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import math

from dak.baselines.e2e import roofline_bound
from dak.hardware import get_profile
from dak.models import Workload, load_spec


def dak_rows(rows: list[dict], batch: int, system: str) -> list[dict]:
    """The finished rows of `system` at `batch` with an offload ratio, by model then ratio."""
    keep = [r for r in rows if r["system"] == system and r["batch"] == batch and r["kind"] == "ratio"
            and r.get("tpot_s") and r.get("bound_s")]
    return sorted(keep, key=lambda r: (r["model"], r["x_req"]))


@functools.lru_cache(maxsize=None)
def _spec(model: str):
    return load_spec(model)  # one read of the model's config per run, not one per row and rate


def bound_at(row: dict, rate: float | None, hardware: str = "h200-pcie") -> float:
    """The row's roofline bound with the profile's HBM rate replaced by `rate` (None: as it is)."""
    profile = get_profile(hardware)
    if rate is not None:
        profile = dataclasses.replace(profile, hbm_bandwidth=rate)
    w = Workload("decode", row["batch"], row["prompt_len"], row["gen_len"], row["dtype"])
    return roofline_bound(_spec(row["model"]), w, profile, row["hbm_budget"])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("results", help="a `dak bench e2e` JSON (e.g. benchmarks/results/e2e-h200.json)")
    ap.add_argument("--hbm-rate", default="4.14e12,4.36e12", help="comma-separated HBM read rates, bytes/s")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--system", default="dak-consolidated")
    a = ap.parse_args(argv)
    try:
        rates = [float(v) for v in a.hbm_rate.split(",")]
    except ValueError:
        raise SystemExit(f"--hbm-rate must be comma-separated numbers in bytes/s, got {a.hbm_rate!r}") from None
    if not rates or any(not math.isfinite(v) or v <= 0 for v in rates):
        raise SystemExit(f"--hbm-rate values must be positive, got {a.hbm_rate!r}")
    rows = dak_rows(json.load(open(a.results))["rows"], a.batch, a.system)
    if not rows:
        raise SystemExit(f"no finished {a.system} rows at batch {a.batch} in {a.results}")
    off = [r for r in rows if abs(bound_at(r, None) - r["bound_s"]) > 1e-3 * r["bound_s"]]
    if off:
        print(f"note: {len(off)} rows' stored bound differs from today's preset (older runs): "
              + ", ".join(f"{r['model']} {100 * r['x_req']:g}%" for r in off))
    head = "".join(f"  EB/bound@{v / 1e12:.2f}" for v in rates)
    print(f"{'model':12s} {'x':>5s} {'TPOT ms':>9s}  EB/bound(stored){head}")
    hits = [0] * (len(rates) + 1)
    for r in rows:
        ratios = [r["bound_s"] / r["tpot_s"]] + [bound_at(r, v) / r["tpot_s"] for v in rates]
        hits = [h + (q >= 0.9) for h, q in zip(hits, ratios)]
        print(f"{r['model']:12s} {100 * r['x_req']:4g}% {1e3 * r['tpot_s']:9.2f}  {ratios[0]:16.2f}"
              + "".join(f"  {q:{len(f'EB/bound@{v / 1e12:.2f}')}.2f}" for q, v in zip(ratios[1:], rates)))
    print(f"EB >= 0.9 x bound: {hits[0]}/{len(rows)} stored, "
          + ", ".join(f"{h}/{len(rows)} at {v / 1e12:.2f} TB/s" for h, v in zip(hits[1:], rates)))


if __name__ == "__main__":
    main()
