"""`dak calibrate` without a GPU: the measurement plan, --dry-run, the clear refusal, --compare."""

import dataclasses

import pytest

from dak.calibrate import describe, make_plan
from dak.calibrate.report import compare, summary
from dak.cli.main import main
from dak.hardware import PRESETS
from dak.measured import Curve, LinkSample, Window
from dak.models import Workload, list_operators, load_spec
from dak.planner import op_key


@pytest.mark.parametrize("model,quick", [("llama-2-7b", False), ("tiny-opt", True), ("tiny-qwen2", False)])
def test_plan_covers_every_shape(model, quick):
    spec, w = load_spec(model), Workload("decode", 6, 100, 20)
    pl = make_plan(spec, w, quick=quick, tile_rows=64)
    ops = list_operators(spec, w, 64)
    keys = [op_key(o) for o in ops if op_key(o)]
    assert {s.key for s in pl.shapes} == set(keys)
    assert sum(s.count for s in pl.shapes) == len(keys)
    for s in pl.shapes:
        assert s.points[0] == 0 and s.points[-1] == s.m and list(s.points) == sorted(set(s.points))
        if s.kind == "linear":
            assert all(p % 64 == 0 or p == s.m for p in s.points) and s.n == 6
            first = s.names.split(", ")[0]
            want = (model == "tiny-opt" and first != "lm_head") or \
                (model == "tiny-qwen2" and first in ("q_proj", "k_proj", "v_proj"))
            assert s.bias == want
        else:
            assert s.m == 6 and (s.points == tuple(range(7)) or quick)
    text = describe(pl)
    assert "estimated time" in text and f"{len(pl.shapes)} shapes" in text


def test_plan_options():
    spec = load_spec("tiny-llama")
    assert not any(s.kind == "attention" for s in make_plan(spec, Workload("prefill", 2, 16, 0)).shapes)
    assert not any(s.kind == "attention" for s in make_plan(spec, Workload("decode", 2, 16, 4), attention=False).shapes)
    with pytest.raises(ValueError, match="bf16 and fp16.*fp32"):
        make_plan(spec, Workload("decode", 2, 16, 4, "fp32"))


def test_cli_dry_run_and_refusal(capsys):
    assert main(["calibrate", "--model", "tiny-llama", "--quick", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "dak calibrate plan: tiny-llama" in out and "(quick)" in out and "lm_head" in out
    assert main(["calibrate", "--model", "tiny-llama", "--quick"]) == 2  # this CPU machine has no GPU
    err = capsys.readouterr().err
    assert err.startswith("dak: error: dak calibrate measures a GPU") and "--dry-run" in err


def _profile(scale=1.0):
    return dataclasses.replace(
        PRESETS["h200-pcie"], hbm_bandwidth=3.7e12 * scale, meta={"gpu": "NVIDIA H200"},
        curves=(Curve("c", ((0.0, 1e-5), (0.5, 9e-5), (1.0, 1.1e-4))),),
        windows=(Window("w", 8, 4, 1e-5, 1.2e-5, 1.1e-5),), link=(LinkSample(8, 4, 50e9, 3e12),))


def test_compare_and_summary(tmp_path, capsys):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    _profile().to_json(str(a))
    _profile(1.03).to_json(str(b))
    assert main(["calibrate", "--compare", str(a), str(b)]) == 0
    assert "largest bandwidth difference 2.9" in capsys.readouterr().out
    _profile(1.2).to_json(str(b))
    assert main(["calibrate", "--compare", str(a), str(b)]) == 1
    text, worst = compare(_profile(), _profile(1.2))
    assert worst == pytest.approx(0.2 / 1.2) and "curve points: 3" in text
    s = summary(_profile(), {"hbm_alone": 3.3e12, "failures": ["x: boom"]})
    assert "gain over un-capped host programs min 1.20x" in s
    assert "1 point(s) > 5% above the convex envelope" in s and "FAILED (roofline used instead): x: boom" in s
    assert "0.91x" in s  # HBM next to the host readers vs alone
