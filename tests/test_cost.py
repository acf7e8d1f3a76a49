from collections import namedtuple

import pytest

from dak.hardware import HardwareProfile
from dak.planner.cost import effective_bandwidth, op_time, peak_ratio, segments

Op = namedtuple("Op", "bytes traffic flops")
PROF = HardwareProfile("t", hbm_bandwidth=4e12, host_bandwidth_ce=1e11, host_bandwidth_sm=1e12,
                       flops=1e15, sm_count=1, smem_per_sm=1, hbm_capacity=1, host_ram=1)


def test_memory_bound_peak():
    op = Op(10e9, 10e9, 0.0)
    # x* = B_h/(B_h+B_g) = 0.2, T = D/(B_g+B_h) = 2 ms, EB = 5 TB/s
    assert peak_ratio(op, PROF) == pytest.approx(0.2)
    assert op_time(op, 0.2, PROF) == pytest.approx(2e-3)
    assert effective_bandwidth(op, 0.2, PROF) == pytest.approx(5e12)
    assert op_time(op, 0.0, PROF) == pytest.approx(2.5e-3)
    assert op_time(op, 1.0, PROF) == pytest.approx(10e-3)
    s = segments(op, 0, PROF)
    assert [x.slope for x in s] == pytest.approx([-1 / 4e12, 1 / 1e12])
    assert [x.length for x in s] == pytest.approx([2e9, 8e9])


def test_compute_bound_free_range():
    op = Op(10e9, 10e9, 3e12)  # T_comp = 3 ms, B_i = 10e9/3e-3 = 3.33 TB/s
    assert op_time(op, 0.0, PROF) == pytest.approx(3e-3)
    # free until x = B_h/B_i = 0.3; HBM side never exceeds T_comp (B_g > B_i)
    assert op_time(op, 0.3, PROF) == pytest.approx(3e-3)
    assert op_time(op, 0.5, PROF) == pytest.approx(5e-3)
    s = segments(op, 0, PROF)
    flat = [v for x in s for v in (x.start, x.length, x.slope)]
    assert flat == pytest.approx([0.0, 3e9, 0.0, 3e9, 7e9, 1e-12])
    op2 = Op(10e9, 10e9, 2.2e12)  # T_comp 2.2 ms: HBM side bound until x_lo = 1 - 2.2e-3*4e12/1e10 = 0.12
    assert peak_ratio(op2, PROF) == pytest.approx(0.12)
    assert [x.length for x in segments(op2, 0, PROF)] == pytest.approx([1.2e9, 1.0e9, 7.8e9])


def test_traffic_not_bytes():
    op = Op(1e9, 1e6, 0.0)  # embedding-like: slope scaled by traffic/bytes
    s = segments(op, 0, PROF)
    assert s[1].slope == pytest.approx(1e-3 / 1e12)
    assert op_time(op, 1.0, PROF) == pytest.approx(1e6 / 1e12)


def test_segments_reproduce_time():
    for op in (Op(5e9, 5e9, 0), Op(5e9, 3e9, 4e12), Op(2e9, 1e9, 1e9)):
        t, h = op_time(op, 0, PROF), 0.0
        for seg in segments(op, 0, PROF):
            assert seg.start == pytest.approx(h)
            h += seg.length
            t += seg.slope * seg.length
            assert op_time(op, h / op.bytes, PROF) == pytest.approx(t, rel=1e-9)
        assert h == pytest.approx(op.bytes)
