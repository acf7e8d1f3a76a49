"""benchmarks/fit_ce_rate.py: rows re-priced at candidate copy-engine rates, re-planned rows told apart."""

import dataclasses
import json
import sys
from pathlib import Path

import numpy as np
import pytest

from dak.baselines.e2e import budget_for
from dak.hardware import PRESETS
from dak.models import Workload, load_spec
from dak.planner import plan
from dak.switches import environment, run_environ

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import fit_ce_rate as fcr  # noqa: E402

W = Workload("decode", 8, 32, 32)
DATE = "2026-12-05T17:32:12"  # before the h100-sxm refit and the thirty-fourth session's default changes


def _results(tmp_path, true_rate, ratios=(0.02, 0.1)):
    """A bench JSON whose rows ran the h100-sxm-s32 plans and measured exactly what they cost at
    `true_rate` (its plans' predictions with that copy-engine rate), under the switches of its date."""
    ran_on, truth = PRESETS["h100-sxm-s32"], dataclasses.replace(PRESETS["h100-sxm-s32"], host_bandwidth_ce=true_rate)
    spec, rows = load_spec("llama-2-7b"), []
    for x in ratios:
        budget = budget_for(spec, W, x, ran_on)
        with environment(run_environ(None, DATE)):
            ran = plan(spec, W, ran_on, budget, "consolidated", fused=True)
            # the time the plan that ran costs at the true rate (same placement, other rate)
            cost = plan(spec, W, truth, budget, "consolidated", fused=True)
        assert [o.host_units for o in cost.ops] == [o.host_units for o in ran.ops], "pick ratios the rate keeps"
        rows.append({"model": "llama-2-7b", "system": "dak-consolidated", "kind": "ratio", "status": "ok", "x_req": x, "batch": 8,
                     "prompt_len": 32, "gen_len": 32, "dtype": "bf16", "hbm_budget": budget,
                     "tpot_s": cost.predicted_s, "host_bytes": ran.host_bytes})
    rows.append(dict(rows[0], x_req=0.0))  # all in HBM: not a copy-engine row, left out
    rows.append(dict(rows[0], system="prefetch"))  # a baseline: left out
    path = tmp_path / "e2e.json"
    path.write_text(json.dumps({"meta": {"date": DATE},
                                "config": {"hardware": "h100-sxm", "fuse_projections": True}, "rows": rows}))
    return path


def test_the_true_rate_prices_every_kept_row_exactly_and_a_wrong_rate_does_not(tmp_path):
    true_rate = float(np.random.default_rng().uniform(49.0, 50.0)) * 1e9
    path = _results(tmp_path, true_rate)
    rows = fcr.rows_of([str(path)])
    assert len(rows) == 2 and all(prof is PRESETS["h100-sxm-s32"] for _, prof in rows)  # run_profile: dated before
    got = fcr.price(rows, true_rate)
    assert [(m, x) for m, x, _, _ in got] == [("llama-2-7b", 0.02), ("llama-2-7b", 0.1)]
    for _, _, ratio, moved in got:
        assert ratio == pytest.approx(1.0, rel=1e-9) and moved == 0.0
    far = fcr.price(rows, 20e9)  # far too slow a link: re-plans or prices the link-bound row well above
    assert any(r is None or r > 1.2 for _, x, r, _ in far if x == 0.1)
    for _, _, r, mv in far:
        assert r is None or mv == 0  # a kept plan has nothing moved


def test_cli_prints_each_rate_and_rejects_bad_rates(tmp_path, capsys):
    path = _results(tmp_path, 49.5e9, ratios=(0.02,))
    assert fcr.main(["--results", str(path), "--rates", "49.5,20"]) == 0
    out = capsys.readouterr().out
    assert " 49.50 GB/s: 1 of 1 plans kept, within 10% 1 of 1, median predicted/measured 1.000" in out
    assert " 20.00 GB/s" in out
    for bad in ("fast", "-3", "0"):
        with pytest.raises(SystemExit):
            fcr.main(["--results", str(path), "--rates", bad])
        assert "--rates" in capsys.readouterr().err
    empty = tmp_path / "none.json"
    empty.write_text(json.dumps({"meta": {}, "config": {}, "rows": []}))
    with pytest.raises(SystemExit):
        fcr.main(["--results", str(empty)])
    assert "no dak row at x > 0" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        fcr.main(["--results", str(tmp_path / "missing.json")])
    assert "cannot read a dak bench e2e JSON" in capsys.readouterr().err


def test_copy_overheads_sweep_the_per_copy_start_up_instead(tmp_path, capsys):
    """--copy-overheads prices the rows with copy_op_overhead_s at each candidate: the rows' own value
    (the preset's) prices them as the rate sweep does at the preset's rate; a far larger one does not."""
    prof = PRESETS["h100-sxm-s32"]
    path = _results(tmp_path, prof.host_bandwidth_ce, ratios=(0.02,))
    rows = fcr.rows_of([str(path)])
    got = fcr.price(rows, prof.copy_op_overhead_s, "copy_op_overhead_s")
    assert got == fcr.price(rows, prof.host_bandwidth_ce) and got[0][2] == pytest.approx(1.0, rel=1e-9)
    far = fcr.price(rows, 1e-3, "copy_op_overhead_s")  # 1 ms a copy: re-planned or priced well above
    assert far[0][2] is None or far[0][2] > 1.2
    us = prof.copy_op_overhead_s * 1e6
    assert fcr.main(["--results", str(path), "--copy-overheads", f"{us},1000"]) == 0
    out = capsys.readouterr().out
    assert f"{us:6.2f} us: 1 of 1 plans kept, within 10% 1 of 1, median predicted/measured 1.000" in out
    for bad in ("slow", "-1"):
        with pytest.raises(SystemExit):
            fcr.main(["--results", str(path), "--copy-overheads", bad])
        assert "--copy-overheads" in capsys.readouterr().err

