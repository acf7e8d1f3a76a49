"""Planner on measured curves: convex envelope, exactness against the LP, and `dak plan` wiring."""

import dataclasses
import random

import numpy as np
import pytest
from scipy.optimize import linprog

from dak.cli.main import main
from dak.hardware import HardwareProfile, get_profile
from dak.measured import Curve
from dak.models import Workload, list_operators, load_spec
from dak.models.ops import Operator
from dak.planner import above_envelope, lower_hull, op_key, op_time, plan, roofline_time, solve_continuous
from dak.planner.curves import interpolate, token_bucket

H200 = get_profile("h200-pcie")
GIB = 2**30


def test_lower_hull_and_interpolation():
    pts = [(0.0, 5.0), (0.25, 4.0), (0.5, 3.5), (0.5, 2.0), (0.75, 2.5), (1.0, 4.0), (0.9, 9.0)]
    hull = lower_hull(pts)
    assert hull == ((0.0, 5.0), (0.5, 2.0), (0.75, 2.5), (1.0, 4.0))  # (0.25, 4) and (0.9, 9) lie above
    assert interpolate(hull, 0.25) == pytest.approx(3.5)
    assert interpolate(hull, 0.875) == pytest.approx(3.25)
    assert interpolate(hull, -1) == 5.0 and interpolate(hull, 2) == 4.0
    assert lower_hull([(0, 1), (0.5, 2), (1, 3)]) == ((0, 1), (1, 3))  # collinear middle dropped
    c = Curve("k", ((1.0, 4.0), (0.0, 5.0), (0.5, 2.0), (0.75, 2.5), (0.25, 4.0)))
    assert c.points[0] == (0.0, 5.0)  # sorted
    far = above_envelope(c, 0.05)
    assert far == [(0.25, 4.0, pytest.approx(3.5))]


def test_token_bucket_and_keys():
    assert [token_bucket(n) for n in (1, 8, 16, 17, 64, 65, 200)] == [16, 16, 16, 32, 64, 128, 256]
    ops = list_operators(load_spec("llama-2-7b"), Workload("decode", 8, 512, 128))
    keys = {op.name: op_key(op) for op in ops}
    assert keys["embed_tokens"] is None
    assert keys["layers.0.self_attn.q_proj"] == keys["layers.5.self_attn.o_proj"] == "linear|m4096|k4096|row8192|n16"
    assert keys["layers.0.mlp.down_proj"] == "linear|m4096|k11008|row22016|n16"
    assert keys["layers.0.self_attn.attention"].startswith("attention|B8|req")


def _op(i, C, rng):
    m = 64 * (i + 1)
    k = max(1, int(C) // (2 * m))
    return Operator(name=f"op{i}", kind="q_proj", layer=0, shape=(m, k), bytes=2 * m * k,
                    traffic=float(2 * m * k), flops=rng.uniform(0, 1e9), unit_bytes=2 * k, units=m,
                    unit_name="rows", unit_rows=1)


def _convex_points(rng, xs):
    """Convex piecewise-linear times (random decreasing-then-increasing slopes) at xs, plus noise
    points above it (non-convex measurements the envelope must drop)."""
    t0 = rng.uniform(1e-4, 5e-3)
    slopes = sorted(rng.uniform(-3 * t0, 20 * t0) for _ in xs[1:])
    pts, t = [(0.0, t0)], t0
    for (a, b), s in zip(zip(xs, xs[1:]), slopes):
        t = max(1e-6, t + s * (b - a))
        pts.append((b, t))
    hull = lower_hull(pts)
    noisy = [(x, interpolate(hull, x) * rng.uniform(1.0, 1.5)) for x in (rng.random() for _ in range(3))]
    return pts + noisy


def _lp(ops, R, prof):
    """min sum t_i, t_i >= each envelope line of op i, sum x_i C_i = R, 0 <= x <= 1 (ms, GB)."""
    n = len(ops)
    c = np.r_[np.zeros(n), np.ones(n)]
    A, b = [], []
    for i, op in enumerate(ops):
        hull = lower_hull(prof.curve_table[op_key(op)].points)
        for (x0, t0), (x1, t1) in zip(hull, hull[1:]):
            s = (t1 - t0) / (x1 - x0) * 1e3
            row = np.zeros(2 * n); row[i] = s; row[n + i] = -1.0
            A.append(row); b.append(s * x0 - t0 * 1e3)
    eq = np.r_[[op.bytes / 1e9 for op in ops], np.zeros(n)][None, :]
    res = linprog(c, A_ub=np.array(A), b_ub=b, A_eq=eq, b_eq=[R / 1e9], bounds=[(0, 1)] * n + [(None, None)] * n,
                  method="highs", options={"primal_feasibility_tolerance": 1e-10, "dual_feasibility_tolerance": 1e-10})
    assert res.status == 0, res.message
    return res.fun / 1e3


@pytest.mark.parametrize("seed", range(8))
def test_greedy_on_measured_curves_matches_lp(seed):
    rng = random.Random(seed)
    for _ in range(20):
        ops = [_op(i, rng.uniform(0.05, 5) * 1e9, rng) for i in range(rng.randint(1, 10))]
        curves = []
        for op in ops:
            xs = sorted({0.0, 1.0, *(round(rng.random(), 3) for _ in range(rng.randint(0, 8)))})
            curves.append(Curve(op_key(op), tuple(_convex_points(rng, xs))))
        prof = dataclasses.replace(H200, curves=tuple(curves))
        R = sum(op.bytes for op in ops) * rng.choice([0.0, 1.0, rng.uniform(0, 0.2), rng.random()])
        xs, obj = solve_continuous(ops, R, prof)
        assert sum(x * op.bytes for x, op in zip(xs, ops)) == pytest.approx(R, rel=1e-9, abs=1.0)
        assert obj == pytest.approx(_lp(ops, R, prof), rel=1e-6, abs=1e-12)


def _sampled_roofline(ops, prof, n=401):
    return tuple(Curve(op_key(op), tuple((i / (n - 1), roofline_time(op, i / (n - 1), prof)) for i in range(n)))
                 for op in {op_key(o): o for o in ops if op_key(o)}.values())


def test_plan_with_roofline_shaped_curves_matches_roofline():
    spec, w = load_spec("llama-3-8b"), Workload("decode", 8, 512, 128)
    ops = list_operators(spec, w)
    prof = dataclasses.replace(H200, curves=_sampled_roofline(ops, H200))
    # without KV copy-ahead: with it, a calibrated attention (timed reading its host K/V in place)
    # is priced as copied ahead, which the roofline is not (test_planner_stream's kv_ahead tests)
    measured = plan(spec, w, prof, 12 * GIB, kv_ahead=False)
    roof = plan(spec, w, prof, 12 * GIB, cost_model="roofline", kv_ahead=False)
    assert measured.cost_model == "measured" and roof.cost_model == "roofline" and roof.measured_ops == 0
    assert measured.measured_ops == len(ops) - 1  # all but embed_tokens
    assert measured.step_time_s == pytest.approx(roof.step_time_s, rel=2e-3)
    assert plan(spec, w, H200, 12 * GIB).cost_model == "roofline"  # auto, no curves
    with pytest.raises(ValueError, match="no measured curve.*dak calibrate"):
        plan(spec, w, H200, 12 * GIB, cost_model="measured")


def test_measured_curve_changes_the_plan():
    """A shape whose measured host reads run at half the roofline's B_h gets less host share."""
    spec, w = load_spec("llama-2-7b"), Workload("decode", 8, 512, 128)
    ops = list_operators(spec, w)
    half = dataclasses.replace(H200, host_bandwidth_sm=H200.host_bandwidth_sm / 2,
                               host_bandwidth_ce=H200.host_bandwidth_ce / 2)
    gate = [o for o in ops if o.kind == "gate_proj"][:1]
    curves = [c for c in _sampled_roofline(ops, H200, 101) if c.key != op_key(gate[0])]
    curves += _sampled_roofline(gate, half, 101)
    prof = dataclasses.replace(H200, curves=tuple(curves))
    pm, pr = plan(spec, w, prof, 8 * GIB), plan(spec, w, prof, 8 * GIB, cost_model="roofline")
    share = {p.name: p.ratio for p in pm.ops}
    share_r = {p.name: p.ratio for p in pr.ops}
    assert share["layers.0.mlp.gate_proj"] < share_r["layers.0.mlp.gate_proj"]
    op = next(o for o in ops if o.kind == "gate_proj")
    assert op_time(op, 0.5, prof) == pytest.approx(2 * roofline_time(op, 0.5, H200), rel=1e-6)
    # the measured plan is no worse under the measured costs than the roofline plan re-costed
    recost = sum(op_time(o, p.ratio, prof) for o, p in zip(ops, pr.ops))
    assert pm.step_time_s <= recost * (1 + 1e-9)


def test_plan_cli_shows_cost_model(tmp_path, capsys):
    spec, w = load_spec("llama-2-7b"), Workload("decode", 8, 512, 128)
    prof = dataclasses.replace(H200, name="cal", curves=_sampled_roofline(list_operators(spec, w), H200, 51),
                               meta={"gpu": "NVIDIA H200"})
    path = tmp_path / "cal.json"
    prof.to_json(str(path))
    base = ["plan", "--model", "llama-2-7b", "--hbm-budget", "8GiB", "--hardware", str(path)]
    assert main(base) == 0
    assert "cost model: measured curves (convex envelope) for 257 of 258 operators" in capsys.readouterr().out
    assert main(base + ["--cost-model", "roofline"]) == 0
    assert "cost model: roofline" in capsys.readouterr().out
    assert main(["plan", "--model", "llama-2-7b", "--cost-model", "measured"]) == 2
    assert "no measured curve" in capsys.readouterr().err
