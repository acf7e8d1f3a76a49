import json
import time

import pytest

from dak.cli.main import main

BASE = ["plan", "--model", "llama-2-70b", "--hbm-budget", "40GiB", "--batch", "8", "--prompt-len", "512",
        "--gen-len", "128"]


def test_plan_llama2_70b(capsys):
    t0 = time.perf_counter()
    assert main(BASE) == 0
    assert time.perf_counter() - t0 < 5
    out = capsys.readouterr().out
    for word in ("greedy", "uniform", "prefetch", "TPOT", "gate_proj", "28672x8192"):
        assert word in out
    assert "no offload needed" not in out


def test_plan_per_layer_and_prefill(capsys):
    assert main(BASE + ["--per-layer", "--phase", "prefill", "--policy", "uniform", "--gen-len", "0"]) == 0
    out = capsys.readouterr().out
    assert "prefill time" in out and "\n79 " in out and "global" in out


def test_plan_fits_note(capsys):
    assert main(["plan", "--model", "tiny-llama", "--hbm-budget", "8GiB"]) == 0
    assert "fits in the HBM budget: no offload needed" in capsys.readouterr().out


@pytest.mark.parametrize("mode", [None, "0"])
def test_plan_says_when_copy_engine_linears_run_as_one_gemv(capsys, monkeypatch, mode):
    """OPT-6.7B at batch 8 with ~1% on the host: its out_proj copies hide under the step, so the plan
    runs them as one GEMV once staged (Placement.one_gemv) and says so; $DAK_CE_ONE_GEMV=0 not."""
    if mode is None:
        monkeypatch.delenv("DAK_CE_ONE_GEMV", raising=False)
    else:
        monkeypatch.setenv("DAK_CE_ONE_GEMV", mode)
    assert main(["plan", "--model", "opt-6.7b", "--hbm-budget", "14526201487", "--batch", "8", "--prompt-len", "32",
                 "--gen-len", "32"]) == 0
    out = capsys.readouterr().out
    assert "(hidden under the step)" in out
    assert ("runs as one GEMV once its copies land" in out) == (mode is None)


def test_plan_json_consistent(capsys):
    assert main(BASE + ["--json", "--hardware", "h200-pcie"]) == 0
    d = json.loads(capsys.readouterr().out)
    op_bytes = sum(o["bytes"] for o in d["ops"])
    assert d["hbm_bytes"] + d["host_bytes"] == d["total_bytes"] + d["staging_bytes"]
    assert d["total_bytes"] == op_bytes + d["min_hbm_bytes"]
    assert d["host_bytes"] == sum(o["host_bytes"] for o in d["ops"]) >= d["required_host_bytes"]
    assert d["hbm_bytes"] <= d["hbm_budget"] == 40 * 2**30
    assert d["step_time_s"] == pytest.approx(sum(o["time_s"] for o in d["ops"]))
    combined = (d["step_time_s"] ** 6 + d["link_s"] ** 6) ** (1 / 6)  # dak.planner.stream.combine
    assert d["effective_bandwidth"] == pytest.approx(d["total_traffic"] / combined)
    assert set(d["comparison"]) == {"greedy", "consolidated", "streamed", "uniform", "prefetch"}
    assert d["policy"] == "consolidated" and d["workload"]["batch"] == 8  # the default policy
    assert len(d["ops"]) == 80 * 8 + 2
    # staging beyond the plan: two copy-ahead slots + prefill's of the largest copied host part,
    # and one layer's host K/V per distinct host-request count plus two KV copy-ahead slots
    lin = [o["host_bytes"] for o in d["ops"] if o["kind"] not in ("attention", "embed_tokens") and o["host_bytes"]]
    req = {o["host_requests"] for o in d["ops"] if o["kind"] == "attention" and o["host_requests"]}
    kv_per_request = 2 * 8 * 128 * 2 * (512 + 128)  # one layer: K and V, kv heads, head dim, bf16, max_len
    assert req and d["staging_beyond_bytes"] == 3 * max(lin) + kv_per_request * (sum(req) + 2 * max(req))
    assert main(BASE + ["--hardware", "h200-pcie"]) == 0
    assert "copy-engine staging beyond that" in capsys.readouterr().out


def test_models_and_hardware(capsys, tmp_path):
    assert main(["models"]) == 0
    assert "llama-3-70b" in capsys.readouterr().out
    assert main(["hardware"]) == 0
    assert "rtx-pro-6000" in capsys.readouterr().out
    path = tmp_path / "h.json"
    assert main(["hardware", "gh200", "--save", str(path)]) == 0
    assert json.loads(path.read_text())["host_bandwidth_sm"] == 900e9
    capsys.readouterr()
    assert main(["plan", "--model", "llama-2-7b", "--hardware", str(path), "--hbm-budget", "8GiB"]) == 0
    assert "on gh200" in capsys.readouterr().out


def test_hardware_shows_the_fitted_costs_and_the_gemv_rate(capsys):
    from dak.hardware import PRESETS
    assert main(["hardware"]) == 0
    lines = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()}
    assert "decode GEMV at 4.19 TB/s" in lines["h200-pcie"] and "GEMV" not in lines["h200-pcie-cublas"]
    assert main(["hardware", "h200-pcie"]) == 0
    rows = dict(line.split(None, 1) for line in capsys.readouterr().out.splitlines())
    p = PRESETS["h200-pcie"]
    assert rows["layer_overhead_s"].strip() == f"{p.layer_overhead_s * 1e6:.1f} us"
    assert rows["attention_host_excess"].strip() == f"{p.attention_host_excess:g}"
    assert rows["gemv_bandwidth"].strip() == "4.19 TB/s"
    assert main(["hardware", "h200-pcie-cublas"]) == 0
    assert "gemv_bandwidth" not in capsys.readouterr().out
    assert main(["hardware", "gh200"]) == 0
    assert "layer_overhead_s" not in capsys.readouterr().out  # unset costs are not printed as zeros


@pytest.mark.parametrize("args,message", [
    (["plan", "--model", "llama-2-7b", "--hbm-budget", "100MiB"], "below the minimum HBM-resident set"),
    (["plan", "--model", "gpt-5"], "unknown model 'gpt-5'"),
    (["plan", "--model", "llama-2-7b", "--hbm-budget", "forty"], "cannot parse size 'forty'"),
    (["plan", "--model", "llama-2-7b", "--batch", "0"], "batch must be an integer >= 1"),
    (["plan", "--model", "llama-2-7b", "--batch", "eight"], "--batch must be an integer"),
    (["plan", "--model", "llama-2-7b", "--prompt-len", "-5"], "prompt_len"),
    (["plan", "--model", "llama-2-7b", "--dtype", "int4"], "unsupported dtype 'int4'"),
    (["plan", "--model", "llama-2-7b", "--hardware", "tpu"], "unknown hardware 'tpu'"),
    (["plan", "--model", "llama-2-7b", "--policy", "magic"], "unknown policy 'magic'"),
    (["plan", "--model", "llama-2-7b", "--host-ratio", "5%", "--hbm-budget", "9GiB"], "drop --hbm-budget"),
    (["plan", "--model", "llama-2-7b", "--host-ratio", "5%", "--strict-budget"], "drop --hbm-budget and --strict"),
    (["plan", "--model", "llama-2-7b", "--host-ratio", "150%"], "cannot parse ratio '150%'"),
    (["hardware", "nope"], "unknown hardware 'nope'"),
])
def test_cli_errors(capsys, args, message):
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("dak: error: ") and message in err
    assert "Traceback" not in err and err.count("\n") == 1


def test_cli_malformed_config(capsys, tmp_path):
    (tmp_path / "config.json").write_text('{"model_type": "llama", "hidden_size": 64}')
    assert main(["plan", "--model", str(tmp_path)]) == 2
    assert "missing field 'num_hidden_layers'" in capsys.readouterr().err


def test_usage_errors_return_2(capsys):
    assert main(["plan"]) == 2
    assert main([]) == 2


def test_strict_budget_fits_the_staging_inside(capsys):
    """Llama-2-70B at 100 GiB stages ~400 MiB beyond its plan; with --strict-budget plan and staging
    fit the 100 GiB together (JSON), and the text says what the plan got."""
    from dak.models import load_spec
    from dak.runtime.memory import staging_beyond
    from dak.runtime.offload import placement_for, workload_for
    args = ["plan", "--model", "llama-2-70b", "--hbm-budget", "100GiB", "--batch", "8", "--prompt-len", "512",
            "--gen-len", "128", "--hardware", "h200-pcie", "--json"]  # auto on an H100 would refuse 100 GiB
    assert main(args) == 0
    loose = json.loads(capsys.readouterr().out)
    assert loose["hbm_bytes"] + loose["staging_beyond_bytes"] > 100 * 2**30
    assert main(args + ["--strict-budget"]) == 0
    strict = json.loads(capsys.readouterr().out)
    assert strict["hbm_bytes"] + strict["staging_beyond_bytes"] <= 100 * 2**30 < loose["hbm_bytes"] + \
        loose["staging_beyond_bytes"]
    assert strict["host_bytes"] > loose["host_bytes"]
    assert main(args[:-1] + ["--strict-budget"]) == 0
    assert "--strict-budget: the plan got" in capsys.readouterr().out
    import torch
    from dak.hardware import get_profile
    spec, w = load_spec("llama-2-70b"), workload_for(8, None, 512, 128, torch.bfloat16)
    pl = placement_for(spec, w, get_profile("h200-pcie"), "100GiB", "consolidated", None, strict_budget=True)
    assert pl.hbm_bytes + staging_beyond(pl, spec) <= 100 * 2**30
    fits = placement_for(spec, w, get_profile("h200-pcie"), "139GiB", "consolidated", None, strict_budget=True)
    assert fits.host_bytes == 0 and staging_beyond(fits, spec) == 0  # nothing on the host: nothing staged


def test_plan_host_ratio_is_the_budget_of_that_share(capsys):
    """dak plan --host-ratio x plans at the budget `dak bench e2e` and `dak generate --host-ratio` use."""
    from dak.baselines.e2e import budget_for
    from dak.hardware import get_profile
    from dak.models import Workload, load_spec
    wl = ["--batch", "8", "--prompt-len", "32", "--gen-len", "32", "--json"]
    for x, text in ((0.02, "2%"), (0.25, "0.25")):
        budget = budget_for(load_spec("opt-6.7b"), Workload("decode", 8, 32, 32), x, get_profile("h200-pcie"))
        assert main(["plan", "--model", "opt-6.7b", "--host-ratio", text] + wl) == 0
        by_ratio = json.loads(capsys.readouterr().out)
        assert main(["plan", "--model", "opt-6.7b", "--hbm-budget", str(budget)] + wl) == 0
        assert by_ratio == json.loads(capsys.readouterr().out) and by_ratio["hbm_budget"] == budget
        assert by_ratio["offload_ratio"] >= x


def test_kv_buckets_reach_the_planner(capsys, monkeypatch):
    """dak plan --kv-buckets and dak.offload(kv_buckets=) plan with the engine's buckets: host K/V
    copied ahead are priced up to each step's bucket, so fewer buckets never predict a faster step."""
    import torch

    import dak
    from dak.baselines.e2e import budget_for
    from dak.hardware import get_profile
    from dak.models import Workload, load_spec
    monkeypatch.setenv("DAK_ROOFLINE_KV_AHEAD", "1")  # Llama-2-7B at 5%: every request's K/V on the host
    budget = budget_for(load_spec("llama-2-7b"), Workload("decode", 8, 32, 32), 0.05, get_profile("h200-pcie"))
    steps = []
    for kb in ("1", "4", "64"):
        assert main(["plan", "--model", "llama-2-7b", "--hbm-budget", str(budget), "--batch", "8", "--prompt-len",
                     "32", "--gen-len", "32", "--kv-buckets", kb, "--hardware", "h200-pcie", "--json"]) == 0
        out = json.loads(capsys.readouterr().out)
        assert out["workload"]["kv_buckets"] == int(kb)
        assert sum(o["host_bytes"] for o in out["ops"] if o["name"].endswith("attention")) > 0
        steps.append(out["comparison"]["consolidated"]["predicted_s"])
    assert steps[0] > steps[1] > steps[2]
    assert main(["plan", "--model", "tiny-llama", "--kv-buckets", "0"]) == 2
    assert "--kv-buckets" in capsys.readouterr().err
    model = dak.offload("tiny-llama", batch=2, max_len=8, policy="uniform", host_ratio=0.5, dtype=torch.float16, tune=False,
                        kv_buckets=2)
    try:
        assert model.dak_placement.workload.kv_buckets == 2 and model.dak_engine.kv_caps == (4, 8)
    finally:
        model.dak_free()
