"""benchmarks/trace_copies.py against a synthetic Chrome trace whose answers are known."""

import gzip
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import trace_copies  # noqa: E402


def _copy(ts, dur, nbytes, stream):
    return {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pinned -> Device)", "ts": ts, "dur": dur,
            "args": {"stream": stream, "bytes": nbytes}}


def _trace():
    # two steps of 100 us: stream 1 copies 1 MB in 20 us at 0-20 and 40-60 (50 GB/s); stream 2 copies
    # 2 MB in 50 us at 10-60 (40 GB/s); a kernel and a device-to-host copy that must be ignored
    evs = []
    for t0 in (0.0, 100.0):
        evs += [_copy(t0, 20.0, 1_000_000, 1), _copy(t0 + 40, 20.0, 1_000_000, 1), _copy(t0 + 10, 50.0, 2_000_000, 2)]
    evs += [{"ph": "X", "cat": "kernel", "name": "gemm", "ts": 5.0, "dur": 50.0, "args": {}},
            {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoH (Device -> Pinned)", "ts": 70.0, "dur": 5.0,
             "args": {"stream": 1, "bytes": 64}}]
    return {"traceEvents": evs[::-1]}


def test_groups_rates_and_copies_in_flight(tmp_path):
    path = tmp_path / "t.json.gz"
    with gzip.open(path, "wt") as f:
        json.dump(_trace(), f)
    copies = trace_copies.h2d_copies(trace_copies.load(str(path)))
    assert len(copies) == 6 and [c["ts"] for c in copies] == sorted(c["ts"] for c in copies)
    rep = trace_copies.summarize(copies, 2)
    (g1, g2) = rep["groups"]
    assert (g1["stream"], g1["per_step"], g1["median_us"]) == (1, 2.0, 20.0) and g1["gbs"] == pytest.approx(50.0)
    assert (g2["stream"], g2["per_step"]) == (2, 1.0) and g2["gbs"] == pytest.approx(40.0)
    assert rep["bytes_per_step"] == 4_000_000
    assert rep["gbs_overall"] == pytest.approx(8_000_000 / 180.0 / 1e3)  # 8 MB over 180 us of copies
    assert trace_copies.device_streams(_trace()) == 3  # streams 1, 2 and the kernel's (None)
    # per step: 1 in flight at 0-10 and 20-40 (30 us), 2 at 10-20 and 40-60 (30 us); none between the
    # steps (60-100), which the window (0-160) holds once: 40 us over 2 steps
    assert rep["in_flight_us_per_step"] == {0: pytest.approx(20.0), 1: pytest.approx(30.0), 2: pytest.approx(30.0)}


def test_bad_input(tmp_path):
    with pytest.raises(ValueError, match="steps must be >= 1"):
        trace_copies.summarize([], 0)
    path = tmp_path / "empty.json"
    path.write_text(json.dumps({"traceEvents": []}))
    with pytest.raises(SystemExit, match="holds no host-to-device copies"):
        trace_copies.main([str(path)])
