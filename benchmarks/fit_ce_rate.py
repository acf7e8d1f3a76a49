"""Which copy-engine rate predicts measured decode steps best? Re-price `dak bench e2e` rows at
candidate `host_bandwidth_ce` values (CPU only).

Every dak row at x > 0 is re-planned with the profile its run planned with
(`dak.hardware.run_profile`, or `--hardware`) at each candidate rate. A row whose plan the rate
keeps (every operator's host units the same) is priced and compared with its measured TPOT; a
row the rate re-plans is only counted (its prediction would be for a placement that did not run).

    PYTHONPATH=src python3 benchmarks/fit_ce_rate.py --results benchmarks/results/e2e-h107-s33-h100.json \
        --rates 48.7,50,51,52,53

The thirty-third session set `h100-sxm`'s rate to 52 GB/s from this (calibrate's one 256 MiB copy
measured 48.7 GB/s; the decode step's chained copies price better at 52). `--copy-overheads 13.9,7`
sweeps the per-copy start-up instead (the thirty-eighth session: at 7 us every one of H114/H121's
six `h100-sxm` rows re-plans; H123 measures).
"""

import argparse
import dataclasses
import statistics
import sys
from pathlib import Path

from dak.hardware import get_profile

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fit_gemv_rate import priced, rows_of as e2e_rows  # noqa: E402  (the same rows, re-planned the same way)

SYSTEMS = ("dak-greedy", "dak-consolidated", "dak-streamed", "dak-uniform")


def rows_of(paths, hardware=None):
    """(row, the profile its run planned with) for every dak row at x > 0."""
    prof = get_profile(hardware) if hardware else None
    return [(r, prof or r["_profile"]) for r in e2e_rows(paths, SYSTEMS, max_batch=1 << 30) if r["x_req"]]


def moved(a, b):
    """The host bytes that sit on another operator in placement b than in a, as a share of a's."""
    return sum(abs(x.host_bytes - y.host_bytes) for x, y in zip(a.ops, b.ops)) / 2 / max(a.host_bytes, 1)


def price(rows, rate, field="host_bandwidth_ce"):
    """[(model, x, predicted/measured, share of host bytes re-planned)] with the profile's `field`
    (the copy-engine rate by default) at `rate` (predicted/measured None where the plan differs)."""
    out = []
    for r, prof in rows:
        ran, _, cand = priced(r, prof, dataclasses.replace(prof, **{field: rate}))
        same = [op.host_units for op in ran.ops] == [op.host_units for op in cand.ops]
        out.append((r["model"], r["x_req"], cand.predicted_s / r["tpot_s"] if same else None, moved(ran, cand)))
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--results", required=True, help="dak bench e2e JSONs, comma-separated")
    ap.add_argument("--rates", default="48.7,50,52", help="candidate copy-engine rates, GB/s, comma-separated")
    ap.add_argument("--hardware", help="the profile the runs planned with (default: each run's, dak.hardware.run_profile)")
    ap.add_argument("--copy-overheads", metavar="US,...", help="instead of rates: candidate copy_op_overhead_s "
                    "values in microseconds (the per-copy start-up of the copy-ahead chain's link time)")
    args = ap.parse_args(argv)
    opt, field, unit, scale, text = "--rates", "host_bandwidth_ce", "GB/s", 1e9, args.rates
    if args.copy_overheads is not None:
        opt, field, unit, scale, text = "--copy-overheads", "copy_op_overhead_s", "us", 1e-6, args.copy_overheads
    try:
        rates = [float(v) * scale for v in text.split(",")]
    except ValueError:
        ap.error(f"{opt} takes numbers in {unit}, comma-separated; got {text!r}")
    if not rates or min(rates) < 0 or (opt == "--rates" and min(rates) == 0):
        ap.error(f"{opt} must be {'positive' if opt == '--rates' else '>= 0'}")
    try:
        rows = rows_of(args.results.split(","), args.hardware)
    except (OSError, ValueError, KeyError) as e:
        ap.error(f"--results: cannot read a dak bench e2e JSON ({type(e).__name__}: {e})")
    if not rows:
        ap.error("no dak row at x > 0 in --results")
    for rate in rates:
        got = price(rows, rate, field)
        kept = [p for _, _, p, _ in got if p is not None]
        within = sum(abs(p - 1) <= 0.1 for p in kept)
        med = statistics.median(kept) if kept else float("nan")
        print(f"{rate / scale:6.2f} {unit}: {len(kept)} of {len(got)} plans kept, within 10% {within} of {len(kept)}, "
              f"median predicted/measured {med:.3f}")
        print("   " + ", ".join(f"{m} {x:.0%} " + (f"{p:.3f}" if p is not None else f"re-planned ({mv:.1%} moved)")
                              for m, x, p, mv in got))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
