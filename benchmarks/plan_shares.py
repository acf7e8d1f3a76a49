"""Which host shares the e2e plans keep, and on which data path (CPU only, no GPU).

    PYTHONPATH=src python3 benchmarks/plan_shares.py [--models M,...] [--ratios 1,2,5,10] [--batch 8]
        [--system dak-consolidated|dak-greedy|dak-uniform] [--hardware PRESET|PROFILE.json]

Per (model, ratio): the placement `dak bench e2e` builds for that system (default
dak-consolidated): linears with host rows, grouped by kind and row count, each marked "in place"
or "copy engine" by the planner's own rule for the untuned launcher
(dak.planner.stream.uses_copy_engine), plus the attentions with host requests. The twenty-second
session used it to see that no consolidated plan keeps a thin in-place share on a layer matrix
>= 7168 rows (where the 32-row in-place tiles of dak.shares.inplace_tiles_enabled act); the
twenty-third that dak-greedy's plans do.
"""

from __future__ import annotations

import argparse
from collections import Counter

from dak.bench.e2e_cases import E2EConfig, plan_cases
from dak.planner.stream import many_tokens, uses_copy_engine


def shares(placement) -> Counter:
    out: Counter = Counter()
    many = many_tokens(placement.workload)
    for op in placement.ops:
        if op.layer is None:
            continue
        if op.host_requests:
            out[(op.kind, "host requests")] += 1
        elif op.host_rows:
            path = "copy engine" if uses_copy_engine(op, op.host_bytes, many) else "in place"
            out[(f"{op.kind} ({op.shape[0]} rows)", path)] += 1
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="llama-2-7b,llama-3-8b,opt-6.7b,opt-30b")
    ap.add_argument("--ratios", default="1,2,5,10", help="offload ratios in percent")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--system", default="dak-consolidated", choices=("dak-consolidated", "dak-greedy", "dak-uniform"))
    ap.add_argument("--hardware", default="h200-pcie", help="preset name or calibrated profile JSON")
    ap.add_argument("--free-hbm-gib", type=float, default=140.0, help="free HBM the budgets assume")
    a = ap.parse_args()
    try:
        cfg = E2EConfig(models=tuple(a.models.split(",")), batches=(a.batch,),
                        ratios=tuple(float(r) / 100 for r in a.ratios.split(",")), systems=(a.system,),
                        hardware=a.hardware)
        cases = plan_cases(cfg, free_hbm=int(a.free_hbm_gib * 2**30))
    except (ValueError, OSError) as e:  # unknown model or profile, ratio outside [0, 100]% or not a number, batch < 1
        ap.error(str(e))
    for case in cases:
        if case.placement is None:
            print(f"{case.model} {100 * case.x_req:g}%: not planned ({case.skip})")
            continue
        layers = shares(case.placement)
        text = "; ".join(f"{k} {p} x{n}" for (k, p), n in sorted(layers.items())) or "no layer share on the host"
        pl = case.placement
        pred = (f" (predicted {pl.predicted_s * 1e3:.2f} ms, link {pl.link_s * 1e3:.2f} ms"
                f"{', one GEMV once staged' if pl.one_gemv else ''})" if pl.feasible else "")
        print(f"{case.model} {100 * case.x_req:g}% {a.system}{pred}: {text}")


if __name__ == "__main__":
    main()
