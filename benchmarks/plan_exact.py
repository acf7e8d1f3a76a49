"""The consolidated plan with and without $DAK_CONSOLIDATE_EXACT=1, as `dak bench e2e` builds it (CPU only).

    PYTHONPATH=src python3 benchmarks/plan_exact.py [--models M,...] [--ratios 1,2,5,10] [--batch 8]
        [--hardware PRESET|PROFILE.json] [--out JSON]

Per (model, ratio): the predicted decode step of dak-consolidated's plan as it is (its kind sets
ranked by the continuous score, the best few placed exactly) and with every kind set placed
exactly and judged by the chain model (dak.planner.consolidate), the kinds each puts on the host,
and the planning time of each. Predictions only: which plan is faster on a GPU is H139's question.
"""

from __future__ import annotations

import argparse
import time

from dak.bench.e2e_cases import E2EConfig, plan_cases
from dak.bench.meta import metadata, write_json
from dak.switches import environment


def host_kinds(placement) -> list[str]:
    return sorted({op.kind for op in placement.ops if op.host_bytes})


def planned(cfg: E2EConfig, exact: bool) -> tuple[list, float]:
    """(cases, seconds) with the switch set as asked; the caller's environment is restored."""
    with environment({"DAK_CONSOLIDATE_EXACT": "1" if exact else "0"}):
        t = time.perf_counter()
        cases = plan_cases(cfg)
        return cases, time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="llama-2-7b,llama-3-8b,opt-6.7b,opt-30b")
    ap.add_argument("--ratios", default="1,2,5,10", help="offload ratios in percent")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--hardware", default="h200-pcie", help="preset name or calibrated profile JSON")
    ap.add_argument("--out", default=None, help="write the rows as JSON here")
    a = ap.parse_args()
    rows = []
    try:
        for model in a.models.split(","):
            for r in a.ratios.split(","):
                cfg = E2EConfig(models=(model,), batches=(a.batch,), ratios=(float(r) / 100,),
                                systems=("dak-consolidated",), hardware=a.hardware)
                (ranked,), t_ranked = planned(cfg, False)
                (exact,), t_exact = planned(cfg, True)
                if ranked.placement is None or exact.placement is None:
                    print(f"{model} {r}%: not planned ({ranked.skip or exact.skip})")
                    continue
                p0, p1 = ranked.placement.predicted_s, exact.placement.predicted_s
                rows.append(dict(model=model, batch=a.batch, ratio_pct=float(r), hardware=cfg.hardware,
                                 ranked_s=p0, exact_s=p1, gain=p0 / p1, ranked_kinds=host_kinds(ranked.placement),
                                 exact_kinds=host_kinds(exact.placement), plan_s=[t_ranked, t_exact]))
                print(f"{model:11s} {r:>3s}%  ranked {p0 * 1e3:8.3f} ms  exact {p1 * 1e3:8.3f} ms  {p0 / p1:.3f}x  "
                      f"[{t_ranked:.1f} / {t_exact:.1f} s]  exact on host: {', '.join(host_kinds(exact.placement))}",
                      flush=True)
    except (ValueError, OSError) as e:  # unknown model or profile, ratio outside [0, 100]% or not a number
        ap.error(str(e))
    if a.out:
        write_json(a.out, {"meta": metadata(), "rows": rows})
        print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
