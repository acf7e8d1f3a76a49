"""benchmarks/plan_exact.py: the consolidated plan with and without $DAK_CONSOLIDATE_EXACT, as bench e2e builds it."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dak.bench.e2e_cases import E2EConfig

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import plan_exact  # noqa: E402


def test_planned_sets_the_switch_only_inside_and_restores_it(monkeypatch):
    """The exact plan is never predicted slower, equals an unset switch at batch 512 (its default
    there), and the caller's value comes back (h100-sxm, Llama-2-7B at batch 512 and 5%, where
    the two differ)."""
    monkeypatch.setenv("DAK_CONSOLIDATE_EXACT", "0")
    cfg = E2EConfig(models=("llama-2-7b",), batches=(512,), ratios=(0.05,), systems=("dak-consolidated",),
                    hardware="h100-sxm")
    (exact,), _ = plan_exact.planned(cfg, True)
    assert os.environ["DAK_CONSOLIDATE_EXACT"] == "0"
    monkeypatch.delenv("DAK_CONSOLIDATE_EXACT")
    (ranked,), _ = plan_exact.planned(cfg, False)
    assert "DAK_CONSOLIDATE_EXACT" not in os.environ
    (unset,) = plan_exact.plan_cases(cfg)
    assert [o.host_bytes for o in exact.placement.ops] == [o.host_bytes for o in unset.placement.ops]
    assert exact.placement.predicted_s < 0.99 * ranked.placement.predicted_s
    assert exact.placement.host_bytes >= exact.required_host_bytes
    assert "attention" not in plan_exact.host_kinds(exact.placement)


def test_the_script_writes_its_rows_and_refuses_a_bad_ratio(tmp_path):
    out = tmp_path / "scan.json"
    cmd = [sys.executable, str(ROOT / "benchmarks/plan_exact.py"), "--models", "opt-6.7b", "--ratios", "2",
           "--hardware", "h200-pcie", "--out", str(out)]
    env = {"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"}
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    (row,) = json.loads(out.read_text())["rows"]
    assert row["model"] == "opt-6.7b" and row["ratio_pct"] == 2.0
    assert row["exact_s"] <= row["ranked_s"] and row["gain"] == pytest.approx(row["ranked_s"] / row["exact_s"])
    bad = subprocess.run(cmd[:4] + ["--ratios", "150"], capture_output=True, text=True, env=env, timeout=300)
    assert bad.returncode == 2 and "error" in bad.stderr
