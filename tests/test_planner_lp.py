"""The greedy's continuous objective equals the LP optimum (scipy HiGHS)."""

import random
from collections import namedtuple

import numpy as np
import pytest
from scipy.optimize import linprog

from dak.hardware import HardwareProfile
from dak.planner import solve_continuous

Op = namedtuple("Op", "bytes traffic flops")


def _lp_optimum(ops, R, prof):
    """min sum t_i s.t. t_i >= T_comp, t_i >= (1-x_i) D/B_g, t_i >= x_i D/B_h, sum x_i C_i = R.

    Scaled: times in microseconds, bytes in GB.  Variables [x_1..x_n, t_1..t_n].
    """
    n = len(ops)
    c = np.r_[np.zeros(n), np.ones(n)]
    A, b = [], []
    for i, op in enumerate(ops):
        dg = op.traffic / prof.hbm_bandwidth * 1e6
        dh = op.traffic / prof.split_host_bandwidth * 1e6
        row = np.zeros(2 * n); row[i] = -dg; row[n + i] = -1.0
        A.append(row); b.append(-dg)
        row = np.zeros(2 * n); row[i] = dh; row[n + i] = -1.0
        A.append(row); b.append(0.0)
    eq = np.r_[[op.bytes / 1e9 for op in ops], np.zeros(n)][None, :]
    bounds = [(0, 1)] * n + [(op.flops / prof.flops * 1e6, None) for op in ops]
    res = linprog(c, A_ub=np.array(A), b_ub=b, A_eq=eq, b_eq=[R / 1e9], bounds=bounds, method="highs",
                  options={"primal_feasibility_tolerance": 1e-10, "dual_feasibility_tolerance": 1e-10})
    assert res.status == 0, res.message
    return res.fun / 1e6


def _instance(rng):
    prof = HardwareProfile("r", hbm_bandwidth=rng.uniform(1e12, 5e12), host_bandwidth_ce=5e10,
                           host_bandwidth_sm=rng.uniform(2e10, 1e12), flops=rng.uniform(2e14, 1e15),
                           sm_count=1, smem_per_sm=1, hbm_capacity=1, host_ram=1)
    ops = []
    for _ in range(rng.randint(1, 14)):
        C = rng.uniform(0.05, 20) * 1e9
        kind = rng.random()
        D = C if kind < 0.5 else C * rng.choice([rng.uniform(1e-4, 0.05), rng.uniform(0.3, 2.0)])
        mem_time = D / prof.hbm_bandwidth
        bound = rng.random()
        if bound < 0.4:
            flops = 0.0                                          # purely memory-bound
        elif bound < 0.7:
            flops = rng.uniform(0.01, 0.7) * mem_time * prof.flops  # memory-bound with some compute
        else:
            flops = rng.uniform(0.8, 4.0) * mem_time * prof.flops   # compute-bound at x = 0
        ops.append(Op(C, D, flops))
    total = sum(op.bytes for op in ops)
    R = total * rng.choice([0.0, 1.0, rng.uniform(0, 0.3), rng.uniform(0, 1)])
    return ops, R, prof


@pytest.mark.parametrize("seed", range(10))
def test_greedy_matches_lp(seed):
    rng = random.Random(seed)
    for _ in range(25):  # 250 instances in all
        ops, R, prof = _instance(rng)
        xs, obj = solve_continuous(ops, R, prof)
        assert all(0 <= x <= 1 for x in xs)
        assert sum(x * op.bytes for x, op in zip(xs, ops)) == pytest.approx(R, rel=1e-9, abs=1.0)
        assert obj == pytest.approx(_lp_optimum(ops, R, prof), rel=1e-6)


def test_spare_link_fills_negative_segments():
    prof = HardwareProfile("r", 4e12, 1e11, 1e12, 1e15, 1, 1, 1, 1)
    ops = [Op(10e9, 10e9, 0.0), Op(5e9, 5e9, 0.0)]
    xs, obj = solve_continuous(ops, 0.0, prof, spare_link=True)
    assert xs == pytest.approx([0.2, 0.2])
    assert obj == pytest.approx(15e9 / 5e12)
    xs0, obj0 = solve_continuous(ops, 0.0, prof)
    assert xs0 == [0.0, 0.0] and obj0 == pytest.approx(15e9 / 4e12)
