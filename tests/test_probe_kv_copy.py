"""benchmarks/probe_kv_copy.py: the CPU flow check copies the right positions and a wrong copy is caught."""

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import probe_kv_copy  # noqa: E402


def test_flow_check_copies_the_requested_positions():
    rows = probe_kv_copy.run((2, 3, 8, 16), 1, [3, 8], torch.device("cpu"))
    assert [r["rows"] for r in rows] == [3, 8]


def test_a_wrong_copy_is_caught():
    host, dev = probe_kv_copy.make((2, 3, 8, 16), torch.device("cpu"))
    for h, d in zip(host, dev):
        d.copy_(h.kv)
    probe_kv_copy.check(host, dev, 5)
    dev[1][1, 2, 4, 0] += 1
    with pytest.raises(AssertionError, match="differs"):
        probe_kv_copy.check(host, dev, 5)
    probe_kv_copy.check(host, dev, 4)  # position 4 is outside the copied rows


def test_bad_arguments():
    with pytest.raises(SystemExit, match="--layers must be >= 1"):
        probe_kv_copy.main(["--layers", "0"])
    with pytest.raises(SystemExit, match="unknown model"):
        probe_kv_copy.main(["--models", "gpt-5"])
