"""benchmarks/profile_step.py builds dak policies and the e2e baselines alike (CPU flow check:
tiny-llama under the Triton interpreter, so kernels show up as CPU ops)."""

import os
import sys
from pathlib import Path

import pytest
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import profile_step  # noqa: E402


@pytest.mark.parametrize("policy,fuse", [("consolidated", False), ("prefetch", False), ("prefetch", True)])
def test_profiles_a_dak_policy_and_a_baseline(policy, fuse):
    row = profile_step.run("tiny-llama", 2, 4, 2, 0.1, 1, policy, fuse)
    assert row["policy"] == policy and row["x_req"] == 0.1 and row["fused_projections"] == fuse
    assert 0 < row["offload_ratio"] < 0.5 and row["tpot_graph_s"] > 0
    assert row["busy_us_per_step"] == pytest.approx(sum(c["us_per_step"] for c in row["categories"].values()))
    assert row["categories"]
    top = [k["us_per_step"] for k in row["top_kernels"]]
    assert top and top == sorted(top, reverse=True) and sum(top) <= row["busy_us_per_step"] * (1 + 1e-9)
    gpu = torch.cuda.is_available()  # replay timings need captured graphs
    assert (row["replay_ms_by_bucket"] is not None) == gpu and (row["tpot_graph_again_s"] is not None) == gpu


def test_a_baseline_that_cannot_be_built_says_why():
    with pytest.raises(ValueError, match="prefetch at x = 0.3: prefetch infeasible"):
        profile_step.run("tiny-llama", 2, 4, 2, 0.3, 1, "prefetch")
    with pytest.raises(ValueError, match="unknown policy 'fast'"):
        profile_step.run("tiny-llama", 2, 4, 2, 0.1, 1, "fast")


def test_too_few_generated_tokens_for_the_profiled_steps_is_refused():
    with pytest.raises(ValueError, match=r"gen_len \(3\) must be >= 2 x steps \(2\)"):
        profile_step.run("tiny-llama", 2, 4, 3, 0.1, 2, "consolidated")


@pytest.mark.parametrize("cap,steps", [(16, 20), (64, 20), (2, 5), (37, 1)])
def test_timed_replays_stay_inside_their_bucket(cap, steps):
    # F3 on the H200: 20 replays of each bucket graph after a generate pushed the cache lengths
    # past max_len, and the copy-engine attention wrote its token out of its staged slot
    start, n = profile_step.replay_window(cap, steps)
    assert 1 <= start and 1 <= n <= steps and start + n == cap


def test_a_bucket_too_short_to_time_is_refused():
    with pytest.raises(ValueError, match="cache length 1 leaves no room"):
        profile_step.replay_window(1, 20)


def test_trace_writes_the_eager_steps_trace(tmp_path):
    out, trace = tmp_path / "p.json", tmp_path / "t"
    profile_step.main(["--ratios", "0.1", "--steps", "1", "--out", str(out), "--trace", str(trace)])
    import json
    events = json.loads((tmp_path / "t-eager-x0.1.json").read_text())["traceEvents"]
    assert events and json.loads(out.read_text())
