"""benchmarks/probe_copy_chain.py off the GPU: its flow, and that its emulation of the prefetch
baseline (one copy per layer into alternating buffers) computes what the SplitLinears compute."""

import json
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import probe_copy_chain as probe  # noqa: E402
from dak.runtime_env import kernel_device  # noqa: E402


def test_prefetch_emulation_matches_the_split_linears_and_catches_a_wrong_row():
    torch.manual_seed(3)
    dev, shapes = kernel_device(), probe.SHAPES["tiny"]  # the GPU's, or the CPU under the interpreter
    xs = {k: torch.randn(3, k, dtype=torch.bfloat16).to(dev) for k in {s[1] for s in shapes}}
    mods = probe.build(shapes, 3, 0.4, 3, 1, dev)
    step, host = probe.layer_prefetch_step(mods, len(shapes), xs, dev)
    assert probe.check_prefetch_step(mods, step, xs) < 2e-2
    host[2].tensor[0, 7] += 4.0  # one weight of layer 2's host rows
    assert probe.check_prefetch_step(mods, step, xs) > 0.1
    host[1].tensor[0, 3] = float("nan")  # a NaN must fail the check too, not slip past max()
    assert probe.check_prefetch_step(mods, step, xs) == float("inf")
    for b in host:
        b.free()


def test_cpu_flow_writes_one_row_per_setting(tmp_path):
    if torch.cuda.is_available():
        pytest.skip("the probe's CPU flow; where a GPU is visible the probe times it (a benchmark, not a test)")
    out = tmp_path / "chain.json"
    probe.main(["--layers", "2", "--host-ratio", "0.5", "--settings", "1x1,2x4x3,1x1x2x64", "--out", str(out)])
    rows = json.loads(out.read_text())["rows"]
    assert [(r["streams"], r["chunks"], r["slots"], r["group_mib"]) for r in rows] == [(1, 1, 2, 0), (2, 4, 3, 0),
                                                                                       (1, 1, 2, 64)]
    assert [r["copies"] for r in rows] == [8, 8, 1]
    assert all(r["chained"] == r["ops"] == 8 and r["host_bytes"] > 0 for r in rows)
