"""Fused projection sets in calibration: which sets are timed, the curves and overhead made from
their times, and how the planner uses them (CPU; the GPU timing is in test_calibrate_gpu.py)."""

import dataclasses
import random

import pytest

from dak.calibrate.fusion import fused_results, fusion_sets
from dak.calibrate.plan import make_plan
from dak.hardware import get_profile
from dak.measured import Curve
from dak.models import Workload, list_operators, load_spec
from dak.planner import op_key, op_time, plan
from dak.planner.curves import FUSED_SUFFIX, curve_for, fused_key, lower_hull, measured_time

H200 = get_profile("h200-pcie")
W = Workload("decode", 8, 32, 32)


@pytest.mark.parametrize("model, sets", [
    ("llama-3-8b", {("q_proj", "k_proj", "v_proj"): (6144, False), ("gate_proj", "up_proj"): (28672, False)}),
    ("llama-2-7b", {("q_proj", "k_proj", "v_proj"): (12288, False), ("gate_proj", "up_proj"): (22016, False)}),
    ("opt-6.7b", {("q_proj", "k_proj", "v_proj"): (12288, True)}),
])
def test_fusion_sets_of_each_family(model, sets):
    spec = load_spec(model)
    got = fusion_sets(list_operators(spec, W), W.dtype_bytes)
    assert {fs.kinds: (fs.m, fs.bias) for fs in got} == sets
    for fs in got:
        assert fs.k == spec.hidden_size and fs.n == W.batch
        assert all(key.startswith(f"linear|m{rows}|k{fs.k}|") for key, rows in zip(fs.keys, fs.rows))
    plan_ = make_plan(spec, W, quick=True, tune=False)
    assert plan_.fusion == got  # calibrate times exactly these


def _curve(key, rng):
    xs = sorted({0.0, 1.0, *(round(rng.random(), 3) for _ in range(4))})
    return Curve(key, tuple((x, rng.uniform(1e-5, 1e-3)) for x in xs), "alone")


@pytest.mark.parametrize("seed", range(4))
def test_fused_results_shares_and_overhead(seed):
    rng = random.Random(seed)
    sets = fusion_sets(list_operators(load_spec("llama-3-8b"), W), W.dtype_bytes)
    curves = [_curve(k, rng) for k in {key for fs in sets for key in fs.keys}]
    table = {c.key: c for c in curves}
    times = [rng.uniform(1e-5, 5e-5) for _ in sets]
    made, unfused = fused_results(sets, times, curves)
    by_key = {c.key: c for c in made}
    extras = []
    for fs, t in zip(sets, times):
        alone = [dict(table[k].points)[0.0] for k in fs.keys]
        extras.append(max(0.0, (sum(alone) - t) / (len(fs.keys) - 1)))
        for key, rows in zip(fs.keys, fs.rows):
            c = by_key[key + FUSED_SUFFIX]
            assert dict(c.points)[0.0] == pytest.approx(t * rows / fs.m)
            assert c.points[1:] == table[key].points[1:]  # x > 0: the member alone
    assert unfused == pytest.approx(sum(extras) / len(extras))
    # a failed fused timing or a missing member curve: that set adds nothing
    made2, unfused2 = fused_results(sets, [None, times[1]], curves)
    assert {c.key for c in made2} == {k + FUSED_SUFFIX for k in sets[1].keys}
    assert unfused2 == pytest.approx(extras[1])
    assert fused_results(sets, times, [])[0] == [] and fused_results(sets, times, [])[1] is None


def test_planner_prefers_fused_curves_for_members_only():
    spec = load_spec("llama-3-8b")
    ops = list_operators(spec, W)
    q = next(op for op in ops if op.kind == "q_proj")
    o = next(op for op in ops if op.kind == "o_proj")
    assert op_key(q) == op_key(o) and fused_key(o) is None and fused_key(q) == op_key(q) + FUSED_SUFFIX
    alone = Curve(op_key(q), ((0.0, 20e-6), (0.5, 30e-6), (1.0, 60e-6)))
    fused = Curve(fused_key(q), ((0.0, 12e-6), (0.5, 30e-6), (1.0, 60e-6)))
    prof = dataclasses.replace(H200, curves=(alone, fused))
    assert curve_for(q, prof) is fused and curve_for(o, prof) is alone
    assert curve_for(q, prof, fused=False) is alone
    assert op_time(q, 0.0, prof) == pytest.approx(12e-6) and op_time(o, 0.0, prof) == pytest.approx(20e-6)
    assert prof.without_fused_curves().curves == (alone,)
    # a plan without fused projections prices q at its own x = 0 time
    on = plan(spec, W, prof, policy="greedy")
    off = plan(spec, W, prof, policy="greedy", fused=False)
    t = {p.name: p.time_s for p in on.ops}
    t_off = {p.name: p.time_s for p in off.ops}
    assert t[q.name] == pytest.approx(12e-6, rel=1e-6) and t_off[q.name] == pytest.approx(20e-6, rel=1e-6)


def test_op_time_follows_the_measured_points_not_the_envelope():
    spec = load_spec("llama-2-7b")
    op = next(o for o in list_operators(spec, W) if o.kind == "down_proj")
    pts = ((0.0, 50e-6), (0.03, 80e-6), (0.1, 70e-6), (1.0, 900e-6))  # (0.03, 80) lies above the hull
    c = Curve(op_key(op), pts)
    prof = dataclasses.replace(H200, curves=(c,))
    assert (0.03, 80e-6) not in lower_hull(pts)
    assert op_time(op, 0.03, prof) == pytest.approx(80e-6)
    assert op_time(op, 0.015, prof) == pytest.approx(65e-6) == measured_time(c, 0.015)
    assert op_time(op, 0.55, prof) == pytest.approx((70e-6 + 900e-6) / 2)
