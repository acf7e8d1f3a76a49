"""benchmarks/fit_chain_model.py prices a placement as the planner does, at the profile's own knobs."""

import json
import random
import sys
from pathlib import Path

import pytest

from dak.baselines.e2e import budget_for
from dak.hardware import get_profile
from dak.models import Workload, load_spec
from dak.planner import plan
from dak.planner.stream import CONTENTION_NORM, uses_copy_engine

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import fit_chain_model as fcm  # noqa: E402

W = Workload("decode", 8, 32, 32)


@pytest.mark.parametrize("hardware", ["h200-pcie", "h200-pcie-gemv"])
def test_predict_at_the_profiles_knobs_is_the_planners_prediction(hardware, tmp_path):
    prof = get_profile(hardware)
    model = random.choice(["llama-2-7b", "opt-6.7b", "llama-3-8b"])
    rows = []
    for x in (0.01, random.choice([0.02, 0.05]), 0.1):  # one GEMV (OPT at 1%), in place, link-bound copies
        spec = load_spec(model)
        budget = budget_for(spec, W, x, prof)
        pl = plan(spec, W, prof, budget, "consolidated")
        rows.append({"model": model, "system": "dak-consolidated", "status": "ok", "x_req": x, "batch": 8,
                     "prompt_len": 32, "gen_len": 32, "dtype": "bf16", "hbm_budget": budget,
                     "host_bytes": pl.host_bytes, "tpot_s": pl.predicted_s * random.uniform(0.8, 1.2)})
    path = tmp_path / "e2e.json"
    path.write_text(json.dumps({"config": {"fuse_projections": True}, "rows": rows}))
    got = fcm.rows_of([str(path)], prof)
    assert len(got) == 3
    for (name, spec, w, ops, host, fused, measured), row in zip(got, rows):
        want = plan(spec, w, prof, row["hbm_budget"], "consolidated").predicted_s
        c = prof.copy_op_overhead_s
        assert fcm.predict(prof, spec, w, ops, host, fused, c, c, CONTENTION_NORM) == pytest.approx(want, rel=1e-9)
        more = fcm.predict(prof, spec, w, ops, host, fused, c + 5e-6, c, CONTENTION_NORM)
        n_ce = sum(uses_copy_engine(op, h) for op, h in zip(ops, host))
        assert (more > want) == (n_ce > 0)  # the compute-side knob moves only plans with copies
