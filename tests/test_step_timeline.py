"""The link-timeline analysis of benchmarks/step_timeline.py on hand-built timelines."""

import random
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from step_timeline import Span, describe, gaps, link_report, overlap, union  # noqa: E402


def _is_link(name):
    return name.startswith("Memcpy HtoD")


def _cat(name):
    return name.split("_")[0]


def test_link_idle_time_and_what_runs_meanwhile():
    # two steps of 100 us: copy 0-40, gemm 30-60 (10 us overlapping the copy), norm 70-80, then nothing
    spans = []
    for t0 in (0.0, 100.0):
        spans += [Span("Memcpy HtoD (Pinned -> Device)", t0, t0 + 40), Span("gemm_a", t0 + 30, t0 + 60),
                  Span("norm_b", t0 + 70, t0 + 80)]
    spans.append(Span("Memcpy HtoD (Pinned -> Device)", 195.0, 200.0))  # closes the window at 200
    rep = link_report(spans, 2, _is_link, _cat, top=3)
    assert rep["window_us_per_step"] == pytest.approx(100.0)
    assert rep["link_busy_us_per_step"] == pytest.approx((40 + 40 + 5) / 2)
    assert rep["link_idle_us_per_step"] == pytest.approx(100 - 85 / 2)
    during = rep["link_idle_during_us_per_step"]
    assert during["gemm"] == pytest.approx(20.0) and during["norm"] == pytest.approx(10.0)
    assert during["nothing"] == pytest.approx((10 + 20) / 2 + (10 + 15) / 2)
    g = rep["longest_link_gaps"]
    assert [x["us"] for x in g] == [60.0, 55.0]  # 40-100, 140-195
    assert g[0]["during"] == {"gemm": 20.0, "norm": 10.0} and g[0]["at_us"] == 40.0
    assert rep["gpu_busy_us_per_step"] == pytest.approx((60 + 10 + 60 + 10 + 5) / 2)
    assert "link busy 0.04 ms" in describe(rep)[0]
    assert rep["copies_per_step"] == 1.5 and rep["copy_us_summed_per_step"] == pytest.approx(42.5)
    assert rep["copy_us_median"] == 40.0 and "copies: 2/step, median 40.0 us" in describe(rep)[1]


def test_interval_helpers_against_a_dense_grid():
    rng = random.Random(3)
    for _ in range(50):
        a = [(s, s + rng.uniform(0, 10)) for s in (rng.uniform(0, 100) for _ in range(rng.randint(0, 12)))]
        b = [(s, s + rng.uniform(0, 10)) for s in (rng.uniform(0, 100) for _ in range(rng.randint(0, 12)))]
        ua, ub = union(a), union(b)
        grid = [i * 0.01 + 0.005 for i in range(12000)]
        inside = lambda t, iv: any(s <= t < e for s, e in iv)  # noqa: E731
        assert sum(e - s for s, e in ua) == pytest.approx(sum(0.01 for t in grid if inside(t, a)), abs=0.3)
        assert overlap(ua, ub) == pytest.approx(sum(0.01 for t in grid if inside(t, a) and inside(t, b)), abs=0.3)
        free = gaps(ua, 0.0, 120.0)
        assert sum(e - s for s, e in free) + sum(min(e, 120) - s for s, e in ua if s < 120) == pytest.approx(120.0)


def test_bad_input():
    with pytest.raises(ValueError, match="steps"):
        link_report([Span("x", 0, 1)], 0, _is_link, _cat)
    with pytest.raises(ValueError, match="no device spans"):
        link_report([], 1, _is_link, _cat)
