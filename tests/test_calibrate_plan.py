"""`dak calibrate` without a GPU: the measurement plan, --dry-run, the clear refusal, --compare."""

import dataclasses

import pytest
import torch

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


def test_cli_dry_run_and_refusal(capsys, monkeypatch):
    assert main(["calibrate", "--model", "tiny-llama", "--quick", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "dak calibrate plan: tiny-llama" in out and "(quick)" in out and "lm_head" in out
    monkeypatch.setenv("TRITON_INTERPRET", "1")  # as on a CPU machine (conftest sets it there), on a GPU's too
    assert main(["calibrate", "--model", "tiny-llama", "--quick"]) == 2
    # a GPU machine's numpy may be too new for the interpreter: a warning may come first, then the refusal
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("dak: error:")]
    assert len(errors) == 1 and errors[0].startswith("dak: error: dak calibrate measures a GPU"), errors
    assert "--dry-run" in errors[0]


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
    assert "a decode step takes" not in s
    s = summary(_profile(), {"layer_slope": (1.705e-4, 1.621e-4)})
    assert "a decode step takes 170.50 us per layer, its operators 162.10 us" in s


def test_layer_overhead_flow_on_the_cpu(monkeypatch):
    """The per-layer small-kernel measurement builds two depths and takes the slope beyond the
    planner's operator time (here with fake step times; the GPU smoke test measures for real)."""
    import dak.calibrate.overhead as ov
    from dak.hardware import get_profile
    from dak.models import Workload
    seen = []

    def fake(cfg, name, w, profile, gen_len):  # 1 ms + 0.3 ms/layer measured
        n = cfg["num_hidden_layers"]
        seen.append((name, n, w.batch, gen_len))
        return 1e-3 + 3e-4 * n, 0.0

    monkeypatch.setattr(ov, "step_time", fake)
    w = Workload("decode", 4, 16, 8)
    prof = get_profile("h200-pcie")
    ops = ov.planned_layer_slope("tiny-llama", w, prof, depths=(1, 3))
    assert 0 < ops < 3e-4
    got = ov.layer_overhead("tiny-llama", w, prof, depths=(1, 3), gen_len=5)
    assert got == pytest.approx(3e-4 - ops) and seen == [("tiny-llama", 1, 4, 5), ("tiny-llama", 3, 4, 5)]
    monkeypatch.setattr(ov, "step_time", lambda cfg, *a: (1e-3, 0.0))
    assert ov.layer_overhead("tiny-llama", w, prof) == 0.0  # never negative
    with pytest.raises(ValueError, match="two layer counts"):
        ov.layer_overhead("tiny-llama", w, prof, depths=(3, 3))


@pytest.mark.parametrize("model,switch,field", [("tiny-llama", None, "fused_layer_overhead_s"),
                                                ("tiny-llama", "0", "layer_overhead_s"),
                                                ("tiny-opt", None, "layer_overhead_s")])
def test_a_slope_measured_on_fused_layers_sets_the_fused_field(model, switch, field, monkeypatch):
    """`dak calibrate` stores the slope where the planner will read it: a gated-MLP model whose
    layers dak fuses measures fused_layer_overhead_s, anything else layer_overhead_s."""
    from dak.calibrate.overhead import overhead_field
    if switch is None:
        monkeypatch.delenv("DAK_FUSED_LAYER", raising=False)
    else:
        monkeypatch.setenv("DAK_FUSED_LAYER", switch)
    assert overhead_field(model) == field


def test_layer_overhead_is_taken_against_the_profiles_own_curves():
    """With measured curves the operators' share of a layer is what the curves say, not the
    roofline: otherwise a profile counts the operators' own inefficiency twice."""
    import dataclasses
    from dak.calibrate.overhead import planned_layer_slope
    from dak.hardware import get_profile
    from dak.measured import Curve
    from dak.models import Workload, load_spec
    from dak.models.ops import list_operators
    from dak.models.spec import ModelSpec, load_config
    from dak.planner.curves import op_key
    w = Workload("decode", 4, 16, 8)
    name, cfg = load_config("tiny-llama")
    one, three = (list_operators(ModelSpec.from_config(dict(cfg, num_hidden_layers=n), name=name), w)
                  for n in (1, 3))
    per_layer = {op_key(op) for op in three if op.layer == 1}
    assert None not in per_layer and len(per_layer) >= 4
    t_op = 7e-5  # every operator shape measured flat at 70 us
    keys = {op_key(op) for op in three if op_key(op)}
    curved = dataclasses.replace(get_profile("h200-pcie"),
                                 curves=tuple(Curve(k, ((0.0, t_op), (1.0, t_op))) for k in sorted(keys)))
    layer_ops = (len(three) - len(one)) // 2
    assert planned_layer_slope("tiny-llama", w, curved) == pytest.approx(layer_ops * t_op, rel=1e-6)
    assert planned_layer_slope("tiny-llama", w, get_profile("h200-pcie")) < layer_ops * t_op / 10
    assert load_spec("tiny-llama").num_layers > 1


def test_step_time_runs_a_cut_model_through_the_engine():
    """One real (CPU, interpreter) step_time: the model cut to one layer is built, decoded and freed."""
    import os
    if not torch.cuda.is_available():
        os.environ.setdefault("TRITON_INTERPRET", "1")
    from dak.calibrate.overhead import step_time
    from dak.hardware import get_profile
    from dak.host import pinned_bytes
    from dak.models import Workload
    from dak.models.spec import load_config
    name, cfg = load_config("tiny-llama")
    before = pinned_bytes()
    tpot, ops = step_time(dict(cfg, num_hidden_layers=1), name, Workload("decode", 2, 4, 2, "fp16"),
                          get_profile("h200-pcie"), gen_len=3)
    assert tpot > 0 and 0 < ops < tpot and pinned_bytes() == before
