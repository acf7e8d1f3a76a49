"""GPU smoke run of `dak calibrate` on a small model: it finishes and writes a valid profile the
planner uses. About a minute on an H200 (quick grids, heuristic kernel configs)."""

import json

import pytest
import torch

from dak.calibrate import make_plan
from dak.calibrate.plan import QUICK_LINK_GRID
from dak.cli.main import main
from dak.hardware import get_profile
from dak.models import Workload, list_operators, load_spec, minimum_hbm_set
from dak.planner import op_time, plan
from dak.planner.curves import FUSED_SUFFIX

pytestmark = pytest.mark.gpu


def test_calibrate_smoke(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("DAK_CACHE_DIR", str(tmp_path / "cache"))
    out = tmp_path / "profile.json"
    args = ["--model", "tiny-llama", "--batch", "4", "--prompt-len", "64", "--gen-len", "16"]
    rc = main(["calibrate", *args, "--quick", "--no-tune", "--no-progress", "--out", str(out)])
    text = capsys.readouterr().out
    assert rc == 0, text
    assert "congestion windows" in text and "host link" in text and "per decoder layer" in text
    assert "FAILED" not in text, text
    raw = json.loads(out.read_text())
    assert raw["schema"] == 2
    prof = get_profile(str(out))
    assert prof.meta["gpu"] == torch.cuda.get_device_name(0) and prof.device_mismatch(prof.meta["gpu"]) is None
    assert all(prof.meta.get(k) for k in ("driver", "torch", "triton", "date"))
    assert 1e9 < prof.host_bandwidth_sm < prof.host_bandwidth_ce * 1.5 < prof.hbm_bandwidth
    assert prof.flops > 1e13 and prof.sm_count == torch.cuda.get_device_properties(0).multi_processor_count
    # beyond the operators as its own curves time them (>= 0; tiny ops are mostly launch time)
    assert 0 <= prof.layer_overhead_s < 1e-3, prof.layer_overhead_s
    assert "a decode step takes" in text
    assert len(prof.link) == len(QUICK_LINK_GRID) and all(s.hbm_bandwidth > 0 for s in prof.link)
    spec, w = load_spec("tiny-llama"), Workload("decode", 4, 64, 16)
    jobs = make_plan(spec, w, quick=True).shapes
    plan_ = make_plan(spec, w, quick=True)
    fused = {key + FUSED_SUFFIX for fs in plan_.fusion for key in fs.keys}
    assert {c.key for c in prof.curves} == {j.key for j in jobs} | fused and fused
    assert 0 < prof.unfused_op_overhead_s < 1e-3, prof.unfused_op_overhead_s  # tiny members: launch-bound
    for c in prof.curves:
        assert c.points[0][0] == 0 and c.points[-1][0] == 1 and all(0 < t < 0.1 for _, t in c.points)
    for win in prof.windows:
        assert win.time_s <= win.default_time_s * 1.0001 and win.host_programs >= 1
    ops = list_operators(spec, w)
    op_bytes = sum(o.bytes for o in ops)
    budget = minimum_hbm_set(spec, w).total + op_bytes // 2
    pl = plan(spec, w, prof, budget)
    assert pl.cost_model == "measured" and pl.measured_ops == len(ops) - 1
    roof = plan(spec, w, prof, budget, cost_model="roofline")
    recost = sum(op_time(o, p.ratio, prof) for o, p in zip(ops, roof.ops))  # under the measured costs
    assert pl.step_time_s <= recost * (1 + 1e-9)
