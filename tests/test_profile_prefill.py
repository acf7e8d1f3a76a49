"""benchmarks/profile_prefill.py off the GPU: a dak policy and a baseline each give a timed,
profiled prefill (tiny-llama under the Triton interpreter; kernels show up as CPU ops)."""

import os
import sys
from pathlib import Path

import pytest
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import profile_prefill  # noqa: E402


@pytest.mark.parametrize("system", ["consolidated", "prefetch"])
def test_prefill_of_a_policy_and_a_baseline_is_timed_and_profiled(system):
    row = profile_prefill.run("tiny-llama", 2, 4, 2, 0.1, system, 2)
    assert row["system"] == system and 0 < row["offload_ratio"] < 0.5
    assert len(row["walls_s"]) == 2 and row["prefill_wall_s"] > 0
    assert row["gpu_busy_us"] == pytest.approx(sum(c["us"] for c in row["categories"].values()))
    top = [k["us"] for k in row["top_kernels"]]
    assert top and top == sorted(top, reverse=True)
