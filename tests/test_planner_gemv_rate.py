"""A profile's gemv_bandwidth: all-HBM decode linears priced at dak's GEMV rate, nothing else moved."""

import dataclasses
import sys
from pathlib import Path

import numpy as np
import pytest

from dak.baselines.e2e import budget_for, roofline_bound
from dak.hardware import PRESETS, HardwareProfile
from dak.models import Workload, list_operators, load_spec
from dak.planner import plan
from dak.planner.cost import hbm_time, op_time, roofline_time, runs_gemv
from dak.planner.stream import ce_local_time, chain_time, one_gemv_saving, uses_copy_engine

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import fit_gemv_rate as fgr  # noqa: E402

H200 = PRESETS["h200-pcie-cublas"]  # no gemv_bandwidth: the cuBLAS-rate baseline
W = Workload("decode", 8, 32, 32)


def _gemv(rate, **kw):
    return dataclasses.replace(H200, gemv_bandwidth=rate, **kw)


def _is_linear(op):
    return op.shape is not None and op.kind != "attention" and not op.kind.startswith("embed")


@pytest.mark.parametrize("model", ["llama-3-8b", "opt-6.7b"])
def test_all_hbm_decode_linears_take_the_gemv_rate_and_nothing_else_moves(model, monkeypatch):
    monkeypatch.delenv("DAK_HBM_GEMV", raising=False)
    rate = float(np.random.default_rng().uniform(3.9e12, 4.6e12))
    fast = _gemv(rate)
    ops = list_operators(load_spec(model), W)
    assert any(_is_linear(op) for op in ops) and any(not _is_linear(op) for op in ops)
    for op in ops:
        if _is_linear(op):
            assert runs_gemv(op, fast) and not runs_gemv(op, H200)
            assert op_time(op, 0.0, fast) == pytest.approx(max(op.flops / H200.flops, op.traffic / rate))
            assert hbm_time(op, fast, gemv=False) == roofline_time(op, 0.0, H200)
        else:  # embeddings, attention: the roofline as before
            assert not runs_gemv(op, fast) and op_time(op, 0.0, fast) == op_time(op, 0.0, H200)
        for x in (0.013, 0.5, 1.0):  # split operators keep hbm_bandwidth (their kernels' excesses were fitted on it)
            assert op_time(op, x, fast) == op_time(op, x, H200) == roofline_time(op, x, fast)
    wide = Workload("decode", 17, 32, 32)  # beyond the GEMV's tokens: cuBLAS
    assert not any(runs_gemv(op, fast) for op in list_operators(load_spec(model), wide))
    pre = Workload("prefill", 1, 32, 32)  # the prompt's GEMMs (the planner prices prefill without the GEMV)
    assert plan(load_spec(model), pre, fast).predicted_s == plan(load_spec(model), pre, H200).predicted_s
    monkeypatch.setenv("DAK_HBM_GEMV", "0")
    assert not any(runs_gemv(op, fast) for op in ops)


def test_all_hbm_prediction_drops_by_the_rate_and_the_bound_stays():
    """A model that fits: the predicted step differs from the preset's by exactly the linears'
    bytes at the two rates (same layer overhead); the roofline bound is the same either way."""
    spec = load_spec("llama-2-7b")
    rate = 4.3e12
    fast = _gemv(rate)
    a, b = plan(spec, W, H200), plan(spec, W, fast)
    lin = sum(op.traffic for op in list_operators(spec, W) if _is_linear(op))
    assert a.fits and b.fits and b.link_s == a.link_s == 0
    assert a.predicted_s - b.predicted_s == pytest.approx(lin / H200.hbm_bandwidth - lin / rate, rel=1e-6)
    opt = load_spec("opt-6.7b")  # where an absurd GEMV rate would move the greedy's rounding, were it used
    for s, x in ((spec, 0.05), (opt, 0.01), (opt, 0.02)):
        budget = budget_for(s, W, x, H200)
        for r in (rate, 1e14):
            assert roofline_bound(s, W, _gemv(r), budget) == roofline_bound(s, W, H200, budget)


def test_copy_engine_rows_stay_at_cublas_rate_and_one_gemv_saves_the_rate_difference(monkeypatch):
    """A copy-engine linear's HBM rows run cuBLAS (hbm_bandwidth); run as one GEMV once staged
    (dak.kernels.staged_gemv) it reads all its rows at the GEMV rate, and the saving says so."""
    monkeypatch.delenv("DAK_CE_ONE_GEMV", raising=False)
    spec = load_spec("opt-6.7b")
    ops = list_operators(spec, W)
    share = float(np.random.default_rng().uniform(0.03, 0.1))  # above the 2% copy-engine share; (1 - x) / 3.7 > 1 / 4.4 TB/s
    host = [op.host_bytes_for(max(1, round(op.units * share))) if op.kind == "fc1" else 0 for op in ops]
    assert sum(uses_copy_engine(op, h) for op, h in zip(ops, host)) == 32
    fast = _gemv(4.4e12)
    ct0, ct1 = chain_time(ops, host, H200), chain_time(ops, host, fast)
    for op, h, t0, t1 in zip(ops, host, ct0.times, ct1.times):
        if h:
            assert t1 == t0 == ce_local_time(op, h / op.bytes, fast)
        elif _is_linear(op):
            assert t1 == pytest.approx(op.traffic / 4.4e12)
    gain = sum(max(0.0, ce_local_time(op, h / op.bytes, fast) - op.traffic / 4.4e12) for op, h in zip(ops, host) if h)
    assert gain > 0
    assert one_gemv_saving(ops, host, W, fast) - one_gemv_saving(ops, host, W, H200) == pytest.approx(gain)
    slow = _gemv(1e12)  # a GEMV slower than cuBLAS saves nothing on the rate (never a negative saving)
    assert one_gemv_saving(ops, host, W, slow) == one_gemv_saving(ops, host, W, H200)


def test_profile_json_round_trip_and_bad_values(tmp_path):
    p = PRESETS["h200-pcie"]  # the default since the thirty-first session; h200-pcie-gemv its old name
    assert p.gemv_bandwidth > p.hbm_bandwidth and p.fused_layer_overhead_s == 0
    assert dataclasses.replace(PRESETS["h200-pcie-gemv"], name="h200-pcie") == p
    path = tmp_path / "p.json"
    p.to_json(str(path))
    assert HardwareProfile.from_json(str(path)) == p
    assert "gemv_bandwidth" not in H200.to_dict()  # an unset optional field stays out of the JSON
    for bad in (-1.0, float("nan"), "fast"):
        with pytest.raises(ValueError, match="gemv_bandwidth"):
            dataclasses.replace(H200, gemv_bandwidth=bad)


def test_fit_recovers_a_known_rate_and_launch_cost(tmp_path):
    rng = np.random.default_rng()
    rate, launch = rng.uniform(3.5e12, 4.5e12), rng.uniform(2e-6, 8e-6)
    rows = []
    for m, k in ((4096, 4096), (11008, 4096), (4096, 11008), (28672, 7168), (50272, 4096)):
        bias = bool(rng.integers(2))
        t = m * (k + bias) * 2 / rate + launch
        rows.append({"M": m, "K": k, "bias": bias, "gated": False, "t_heuristic_ms": t * 1e3})
    rows.append({"M": 4096, "K": 11008, "bias": False, "gated": True, "t_heuristic_ms": 1.0})  # left out
    path = tmp_path / "sweep.json"
    path.write_text(__import__("json").dumps({"rows": rows}))
    b, c, lo, hi = fgr.gemv_rate([str(path)])
    assert b == pytest.approx(rate, rel=1e-6) and c == pytest.approx(launch, rel=1e-4)
    assert lo == pytest.approx(1.0) and hi == pytest.approx(1.0)


def test_layer_residuals_read_back_a_known_overhead():
    """An x = 0 row measured at the candidate's own prediction with layer overhead v gives v back."""
    spec = load_spec("opt-6.7b")
    v = float(np.random.default_rng().uniform(5e-6, 40e-6))
    cand = _gemv(4.2e12, layer_overhead_s=v, fused_layer_overhead_s=0.0)
    pl = plan(spec, W, cand)
    row = {"model": "opt-6.7b", "system": "dak-consolidated", "batch": 8, "prompt_len": 32, "gen_len": 32,
           "dtype": "bf16", "x_req": 0.0, "hbm_budget": pl.hbm_budget, "tpot_s": pl.predicted_s}
    (name, got), = fgr.layer_residuals([row], cand)
    assert name == "opt-6.7b" and got == pytest.approx(v, rel=1e-6)


def test_leave_one_model_out_refits_without_the_held_model():
    """Rows measured at the candidate's own predictions with one overhead v for every model: each
    model, priced with the overhead of the others, is predicted exactly (and the fit reads v)."""
    v = float(np.random.default_rng().uniform(5e-6, 40e-6))
    cand = _gemv(4.2e12, layer_overhead_s=v, fused_layer_overhead_s=0.0)
    rows = []
    for model in ("opt-6.7b", "llama-2-7b"):
        spec = load_spec(model)
        for x in (0.0, 0.02):
            budget = budget_for(spec, W, x, H200)
            pl = plan(spec, W, H200, budget, "consolidated")  # the run's plan, priced by the candidate
            _, pred, _ = fgr.priced({"model": model, "system": "dak-consolidated", "batch": 8, "prompt_len": 32,
                                     "gen_len": 32, "dtype": "bf16", "hbm_budget": budget}, H200, cand)
            rows.append({"model": model, "system": "dak-consolidated", "batch": 8, "prompt_len": 32, "gen_len": 32,
                         "dtype": "bf16", "x_req": x, "hbm_budget": budget, "host_bytes": pl.host_bytes,
                         "tpot_s": pred})
    res = fgr.layer_residuals(rows, cand)
    assert [m for m, _ in res] == ["opt-6.7b", "llama-2-7b"] and all(r == pytest.approx(v) for _, r in res)
    lines = fgr.leave_one_model_out(rows, H200, cand, res)
    assert len(lines) == 2 and all("predicted/measured 1.00-1.00, within 10% 2 of 2" in line for line in lines)
    assert all(f"overhead {v * 1e6:.1f} us" in line for line in lines)
