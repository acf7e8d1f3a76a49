"""benchmarks/link_floor.py and the benchmarks' use of it, off the GPU: the floor keeps the
bound's HBM term and takes the fastest measured link time; the counts separate misses the link
allows from misses it does not; bench_linear's hbm_fork variant."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import link_floor  # noqa: E402
from dak.kernels.config import KernelConfig  # noqa: E402


def test_floor_is_the_hbm_term_or_the_fastest_link_time():
    f = link_floor.floor_fields(0.030, 0.020, {"copy": 0.031, "sm": 0.026}, bound_ms=0.019)
    assert f["floor_ms"] == pytest.approx(0.026)  # link-bound: the in-place read beat the copy
    assert f["dak_over_floor"] == pytest.approx(0.030 / 0.026)
    assert f["floor_over_bound"] == pytest.approx(0.026 / 0.019)
    g = link_floor.floor_fields(0.030, 0.028, {"copy": 0.010, "sm": None}, bound_ms=0.028)
    assert g["floor_ms"] == pytest.approx(0.028) and g["floor_over_bound"] == pytest.approx(1.0)
    assert g["t_link_ms"] == {"copy": 0.010, "sm": None}


@pytest.mark.parametrize("link,hbm,bound,dak", [({"copy": None}, 0.01, 0.01, 0.01), ({}, 0.01, 0.01, 0.01),
                                                ({"copy": 0.0}, 0.01, 0.01, 0.01), ({"copy": 0.01}, 0.01, 0.0, 0.01),
                                                ({"copy": 0.01}, -1.0, 0.01, 0.01), ({"copy": 0.01}, 0.01, 0.01, 0)])
def test_floor_rejects_missing_or_non_positive_times(link, hbm, bound, dak):
    with pytest.raises(ValueError):
        link_floor.floor_fields(dak, hbm, link, bound)


def test_floor_counts_split_reachable_misses_from_unreachable_ones():
    rows = [  # (dak/bound, dak/floor, floor/bound)
        dict(dak_over_bound=1.02, dak_over_floor=1.02, floor_over_bound=1.0, floor_ms=1),  # within both
        dict(dak_over_bound=1.40, dak_over_floor=1.03, floor_over_bound=1.36, floor_ms=1),  # out of reach alone
        dict(dak_over_bound=1.30, dak_over_floor=1.30, floor_over_bound=1.0, floor_ms=1),  # a real miss
        dict(dak_over_bound=1.30),  # no floor measured: not counted
    ]
    assert link_floor.floor_counts(rows) == {"rows": 3, "within_bound": 1, "within_floor": 2,
                                             "floor_above_bound": 1, "missed_reachable": 1}


def test_copy_ms_rejects_bad_pairs():
    import torch
    with pytest.raises(ValueError, match="at least one"):
        link_floor.copy_ms([])
    with pytest.raises(ValueError, match="mismatch"):
        link_floor.copy_ms([(torch.zeros(4), torch.zeros(5))])


def test_bench_linear_fork_variant():
    bench_linear = pytest.importorskip("bench_linear")
    staged = KernelConfig(block_m=32, ce_share=1.0, hbm_cublas=True, host_programs=8, hbm_programs=100)
    f = bench_linear.fork_variant(staged, 8, 640, 10000, 132)
    assert f.hbm_fork and not f.hbm_cublas and f.ce_share == 1.0
    in_place = KernelConfig(block_m=32, host_programs=8, hbm_programs=100)
    assert bench_linear.fork_variant(in_place, 1, 64, 4000, 132).hbm_fork
    assert bench_linear.fork_variant(in_place, 65, 64, 4000, 132) is None  # not a decode batch
    assert bench_linear.fork_variant(in_place, 8, 0, 4000, 132) is None  # no host rows
    assert bench_linear.fork_variant(in_place, 8, 64, 0, 132) is None  # no HBM rows
    assert bench_linear.fork_variant(KernelConfig(host_kernel="cuda_multicast"), 8, 64, 64, 132) is None
    assert bench_linear.fork_variant(f, 8, 640, 10000, 132) is None  # already forked
