"""Calibrated profiles: the preset's fitted per-operator costs they inherit, `dak calibrate
--rebase`, and the chain model's use of a measured all-HBM time for copy-engine linears (CPU)."""

import dataclasses
import json

import pytest

from dak.calibrate.inherit import INHERITED, base_preset_for, inherit_unmeasured
from dak.cli.main import main
from dak.hardware import get_profile
from dak.measured import Curve
from dak.models import Workload, list_operators, load_spec
from dak.planner import op_key
from dak.planner.stream import chain_time
from dak.shares import ce_min_share

H200 = get_profile("h200-pcie")


def _bare(**kw):
    return dataclasses.replace(H200, name="h200-calibrated", copy_op_overhead_s=0.0, inplace_op_overhead_s=0.0,
                               attention_host_excess=0.0, meta={"gpu": "NVIDIA H200"}, **kw)


def test_base_preset_by_gpu_name():
    assert base_preset_for("NVIDIA H200") == "h200-pcie"
    assert base_preset_for("NVIDIA H200 NVL") == "h200-pcie"
    assert base_preset_for("NVIDIA GH200 480GB") is None  # its preset fits nothing
    assert base_preset_for("NVIDIA RTX PRO 6000") is None and base_preset_for("") is None


def test_inherit_fills_only_what_the_profile_leaves_at_zero():
    got = inherit_unmeasured(_bare(), H200)
    assert all(getattr(got, f) == getattr(H200, f) > 0 for f in INHERITED)
    assert got.meta["inherited"] == {f: "h200-pcie" for f in INHERITED} and got.meta["gpu"] == "NVIDIA H200"
    mine = dataclasses.replace(_bare(), copy_op_overhead_s=2e-6)
    got = inherit_unmeasured(mine, H200)
    assert got.copy_op_overhead_s == 2e-6 and "copy_op_overhead_s" not in got.meta["inherited"]
    assert inherit_unmeasured(H200, H200) is H200  # nothing to take


def test_rebase_cli(tmp_path, capsys):
    src, out = tmp_path / "p.json", tmp_path / "q.json"
    _bare().to_json(str(src))
    assert main(["calibrate", "--rebase", str(src), "--out", str(out)]) == 0
    prof = get_profile(str(out))
    assert prof.copy_op_overhead_s == H200.copy_op_overhead_s and "inherited" in json.loads(out.read_text())["meta"]
    assert main(["calibrate", "--rebase", str(src), "--base", "none", "--out", str(out)]) == 0
    assert get_profile(str(out)).copy_op_overhead_s == 0.0
    capsys.readouterr()
    assert main(["calibrate", "--rebase", str(src), "--base", "nonesuch", "--out", str(out)]) == 2
    assert "unknown hardware 'nonesuch'" in capsys.readouterr().err


def test_copy_engine_linear_prices_its_hbm_rows_on_the_measured_curve():
    w = Workload("decode", 8, 32, 32)
    ops = list_operators(load_spec("llama-2-7b"), w)
    i = next(j for j, op in enumerate(ops) if op.kind == "down_proj")
    op = ops[i]
    host = [0] * len(ops)
    host[i] = op.host_bytes_for(op.units // 4)
    x = host[i] / op.bytes
    assert x > ce_min_share()
    roof = chain_time(ops, host, H200)
    assert roof.copy_engine[i] and roof.times[i] == pytest.approx((1 - x) * op.traffic / H200.hbm_bandwidth)
    t0 = 3 * op.traffic / H200.hbm_bandwidth  # a measured all-HBM time far from the roofline's
    prof = dataclasses.replace(H200, curves=(Curve(op_key(op), ((0.0, t0), (1.0, 50 * t0))),))
    assert chain_time(ops, host, prof).times[i] == pytest.approx((1 - x) * t0)
