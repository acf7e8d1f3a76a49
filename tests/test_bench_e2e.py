"""`dak bench e2e` on the CPU: planning of every system's case, the seeded fill that does not
depend on the split, and a tiny model run through dak greedy/uniform, all-HBM, layer prefetch,
UVA (and accelerate when installed) in the Triton interpreter, whose tokens must agree."""

import dataclasses
import json

import pytest
import torch

from dak.baselines.e2e import budget_for, prefetch_placement, uva_placement
from dak.runtime.build import fill_random
from dak.bench.e2e_cases import E2EConfig, plan_cases, real_capacity_cases
from dak.bench.e2e_report import summarize
from dak.cli.main import main
from dak.hardware import get_profile
from dak.models.ops import Workload, list_operators, minimum_hbm_set
from dak.models.spec import load_spec

H200 = get_profile("h200-pcie")
ROW_FIELDS = ("ttft_s", "tpot_s", "tokens_per_s", "eb", "eb_kv", "bound_s", "eb_over_bound", "predicted_s",
              "predicted_over_measured", "host_bytes", "operator_bytes", "weight_traffic", "kv_traffic",
              "token_agreement", "first_mismatch_step", "build_s", "graphs")


@pytest.mark.parametrize("model,x", [("llama-2-7b", 0.02), ("opt-6.7b", 0.10), ("llama-3-8b", 0.40)])
def test_baseline_placements_hold_the_required_host_bytes(model, x):
    spec = load_spec(model)
    w = Workload("decode", 8, 32, 32)
    budget = budget_for(spec, w, x, H200)
    ops = list_operators(spec, w)
    need = sum(op.bytes for op in ops) + minimum_hbm_set(spec, w).total - budget
    assert need == pytest.approx(x * sum(op.bytes for op in ops), abs=1)
    uva = uva_placement(spec, w, H200, budget)
    host_ops = [o for o in uva.ops if o.host_bytes]
    # whole layer linears, a prefix of the execution order (no embeddings, lm_head or KV), overshoot < one op
    assert all(o.host_bytes == o.bytes for o in host_ops)
    linears = [o.name for o in uva.ops if o.kind != "attention" and o.layer is not None]
    assert linears[:len(host_ops)] == [o.name for o in host_ops]
    assert need <= uva.host_bytes < need + max(o.bytes for o in host_ops)
    pre = prefetch_placement(spec, w, H200, budget)
    assert pre.feasible and pre.host_bytes >= need
    assert all(o.host_bytes == 0 for o in pre.ops if o.kind == "attention" or o.layer is None)
    assert pre.hbm_bytes <= budget * 1.001 and pre.staging_bytes > 0
    assert pre.step_time_s >= plan_cases(E2EConfig(models=(model,), ratios=(x,), systems=("dak-greedy",)))[0].bound_s


def test_plan_cases_reuse_identical_builds_and_real_capacity_overflows():
    cases = plan_cases(E2EConfig(models=("llama-2-7b",), ratios=(0.0, 0.05)))
    at0 = {c.system: c for c in cases if c.x_req == 0}
    assert at0["dak-greedy"].same_as == "" and at0["accelerate"].same_as == ""
    assert {at0[s].same_as for s in ("dak-uniform", "all-hbm", "prefetch", "uva")} == {"dak-greedy"}
    assert "all-hbm" not in {c.system for c in cases if c.x_req}
    rc = real_capacity_cases(E2EConfig(models=(), real_capacity="llama-2-70b"), free_hbm=140 * 2**30)
    assert len(rc) == 1 and not rc[0].skip and rc[0].required_host_bytes > 4 * 2**30
    assert rc[0].placement.hbm_bytes <= rc[0].budget < 140 * 2**30


def test_fill_random_does_not_depend_on_the_split():
    from dak.nn.split_linear import SplitLinear
    lin = torch.nn.Linear(40, 131, dtype=torch.float16)
    parts = [SplitLinear.empty(131, 40, bias=True, dtype=torch.float16, host_rows=r, row_tile=1, tune=False)
             for r in (0, 17, 131)]
    full = []
    for mod in [lin] + parts:
        holder = torch.nn.Module()
        holder.proj = mod
        fill_random(holder, seed=3)
        full.append(mod.weight.data if mod is lin else mod.full_weight().cpu())  # a GPU's split: on it
    for f in full[1:]:
        assert torch.equal(f, full[0])
    assert full[0].float().std().item() == pytest.approx(0.02, rel=0.1)
    assert all(p.bias.abs().max() == 0 for p in parts)


def test_dry_run_cli(capsys):
    assert main(["bench", "e2e", "--dry-run", "--models", "opt-6.7b", "--ratios", "0,2",
                 "--real-capacity", "llama-2-70b"]) == 0
    out = capsys.readouterr().out
    for word in ("dak-greedy", "prefetch", "uva", "accelerate", "same build as dak-greedy", "real", "rough total"):
        assert word in out
    assert "kv ahead True" in out  # the default; --no-kv-ahead turns it off
    assert main(["bench", "e2e", "--dry-run", "--models", "opt-6.7b", "--ratios", "2", "--no-kv-ahead"]) == 0
    assert "kv ahead False" in capsys.readouterr().out
    assert main(["bench", "e2e", "--dry-run", "--models", "opt-6.7b", "--ratios", "2", "--fp32-reference"]) == 0
    assert ", fp32 reference" in capsys.readouterr().out
    assert main(["bench", "e2e", "--dry-run", "--models", "opt-6.7b", "--ratios", "0,2.5%"]) == 0
    percent = capsys.readouterr().out  # "2.5%" is 2.5 percent, as "2.5"
    assert main(["bench", "e2e", "--dry-run", "--models", "opt-6.7b", "--ratios", "0,2.5"]) == 0
    assert percent == capsys.readouterr().out and "2.5%" in percent
    assert main(["bench", "e2e", "--dry-run", "--models", "opt-6.7b", "--ratios", "0.5%"]) == 0  # below 1%: with "%"
    assert "0.5%" in capsys.readouterr().out


@pytest.mark.parametrize("args,message", [
    (["--systems", "dak-greedy,vllm"], "unknown system 'vllm'"),
    (["--ratios", "0,150"], "offload ratios must be in [0, 100]%"),
    (["--ratios", "two"], "--ratios takes percentages"),
    (["--ratios", "0,0.05"], "0.05 would be 0.05%, not 5%; write 5 for 5%, or 0.05% to run 0.05%"),
    (["--models", "llama-2-7b"], "only tiny-* models run"),
])
def test_cli_errors(capsys, args, message):
    if "tiny" in message and torch.cuda.is_available():
        pytest.skip("a GPU is present")
    assert main(["bench", "e2e"] + args) == 2
    assert message in capsys.readouterr().err


def test_tiny_model_through_every_system(tmp_path):
    from dak.bench.e2e import run_e2e
    out = tmp_path / "e2e.json"
    cfg = E2EConfig(models=("tiny-llama",), batches=(2,), prompt_len=4, gen_len=4, ratios=(0.0, 0.1),
                    dtype="fp16", repeats=1, out=str(out), plot=str(tmp_path / "e2e.png"))
    logs = []
    payload = run_e2e(cfg, log=logs.append)
    rows = json.loads(out.read_text())["rows"]
    assert len(rows) == len(payload["rows"]) == 15  # 8 systems at x = 0, all but all-HBM at 10%
    by = {(r["system"], r["x_req"]): r for r in rows}
    for (system, x), r in by.items():
        if system == "accelerate" and r["status"] == "unavailable":
            continue
        assert r["status"] == "ok", (system, x, r["note"])
        for f in ROW_FIELDS:
            assert f in r, (system, f)
        assert r["token_agreement"] == 1.0 and r["first_mismatch_step"] == -1, (system, x)
        # every system's prefill logits against the first one's: the same math, fp16 rounding apart
        assert r["first_logits_reference"] == "dak-greedy" and r["first_logits_err"] < 2e-2, (system, x)
        assert r["first_token_gap"] <= 2 * r["first_logits_err"] + 1e-7, (system, x)
    assert by[("dak-greedy", 0.0)]["first_logits_err"] == 0.0  # the reference itself
    ten = {s: by[(s, 0.1)] for s in ("dak-greedy", "dak-streamed", "dak-uniform", "prefetch", "uva")}
    need = ten["dak-greedy"]["required_host_bytes"]
    assert need > 0 and all(r["host_bytes"] >= need for r in ten.values())
    g = ten["dak-greedy"]  # its operators, the small kernels between them, and the link (chain model)
    layers = load_spec("tiny-llama").num_layers
    p = get_profile("h200-pcie")  # fused Llama layers: their own figure where the preset has one
    assert g["planned"]["overhead_s"] >= layers * (p.fused_layer_overhead_s or p.layer_overhead_s) > 0
    a = g["planned"]["step_time_s"] + g["planned"]["overhead_s"]
    assert g["predicted_s"] == pytest.approx((a ** 6 + g["planned"]["link_s"] ** 6) ** (1 / 6))
    assert g["predicted_s"] >= max(a, g["planned"]["link_s"])
    assert ten["prefetch"]["staging_bytes"] > 0
    assert by[("all-hbm", 0.0)]["note"].startswith("same build as dak-greedy")
    s = payload["summary"]
    assert [g["x_req"] for g in s["groups"]] == [0.0, 0.1] and "greedy_over_uniform" in s["groups"][1]
    assert any("targets:" in line for line in logs) and any(line.startswith(("wrote", "plot skipped")) for line in logs)
    assert summarize(rows) == json.loads(json.dumps(s))
    merged = tmp_path / "merged.json"
    assert main(["bench", "e2e", "--replot", f"{out},{out}", "--out", str(merged)]) == 0
    assert len(json.loads(merged.read_text())["rows"]) == len(rows)  # the same cases twice: the later run wins
    again = tmp_path / "again.json"  # a merged file merged once more keeps the runs it came from
    assert main(["bench", "e2e", "--replot", f"{merged},{out}", "--out", str(again)]) == 0
    assert len(json.loads(again.read_text())["merged_from"]) == 3


def test_first_logits_check_tells_a_near_tie_from_a_wrong_result():
    from dak.bench.e2e import _first_logits
    g = torch.Generator().manual_seed(7)
    ref = torch.randn(3, 11, generator=g)
    ref[1, 2], ref[1, 5] = ref.max() + 1.0, ref.max() + 1.0 - 1e-3  # request 1: two best logits 1e-3 apart
    refs, key = {}, ("m", 3, 4, 4)
    first = {"system": "a"}
    _first_logits(first, key, ref, ref.argmax(-1), refs)  # the first system is the reference
    assert (first["first_logits_err"], first["first_token_gap"], first["first_logits_reference"]) == (0.0, 0.0, "a")
    # a near-tie flipped by a rounding of 2e-3
    near = ref.clone()
    near[1, 5] += 2e-3
    row = {"system": "b"}
    _first_logits(row, key, near, near.argmax(-1), refs)
    scale = float(ref.abs().max())
    assert row["first_logits_reference"] == "a" and row["first_logits_err"] == pytest.approx(2e-3 / scale, rel=1e-3)
    assert 0 < row["first_token_gap"] <= 2 * row["first_logits_err"]
    # a wrong result: logits of another input; its tokens sit far below the reference's best
    wrong = torch.randn(3, 11, generator=g)
    row = {"system": "c"}
    _first_logits(row, key, wrong, wrong.argmax(-1), refs)
    assert row["first_logits_err"] > 0.2 and row["first_token_gap"] > 0.1


def test_merged_rows_keep_the_later_run_of_a_case_and_say_which_run():
    from dak.cli.bench import merge_rows

    def row(system, x, tpot):
        return {"model": "m", "batch": 8, "prompt_len": 32, "gen_len": 32, "kind": "ratio", "x_req": x,
                "system": system, "status": "ok", "tpot_s": tpot}
    old = {"meta": {"git_sha": "aaa", "date": "d1"}, "rows": [row("dak-greedy", 0.1, 3.0), row("prefetch", 0.1, 2.0)]}
    new = {"meta": {"git_sha": "bbb", "date": "d2", "env": {"DAK_CE_FORK": "0"}},
           "rows": [row("dak-greedy", 0.1, 1.0), row("dak-greedy", 0.2, 4.0)]}
    rows = merge_rows([old, new])
    by = {(r["system"], r["x_req"]): r for r in rows}
    assert len(rows) == 3 and by[("dak-greedy", 0.1)]["tpot_s"] == 1.0
    assert by[("dak-greedy", 0.1)]["run"]["git_sha"] == "bbb" and by[("prefetch", 0.1)]["run"]["git_sha"] == "aaa"
    assert by[("dak-greedy", 0.2)]["run"]["env"] == {"DAK_CE_FORK": "0"} and "env" not in by[("prefetch", 0.1)]["run"]
    assert old["rows"][0].get("run") is None  # the inputs are not modified


def test_uva_reads_whole_linears_in_place_appended_to_an_earlier_run(tmp_path):
    from dak.bench.e2e import run_e2e
    cfg = E2EConfig(models=("tiny-llama",), batches=(2,), prompt_len=4, gen_len=3, ratios=(0.5,),
                    systems=("dak-greedy",), dtype="fp16", repeats=1, out=str(tmp_path / "e2e.json"))
    run_e2e(cfg, log=lambda s: None)
    again = dataclasses.replace(cfg, systems=("uva",), append=True)
    payload = run_e2e(again, log=lambda s: None)
    greedy, uva = payload["rows"]
    assert greedy["status"] == uva["status"] == "ok", uva["note"]
    assert uva["uva_modules"] >= 3 and uva["planned"]["ops_split"] == uva["uva_modules"]
    assert uva["token_reference"] == "dak-greedy" and uva["token_agreement"] == 1.0  # tokens kept in the JSON
    assert len(payload["previous_runs"]) == 1 and payload["summary"]["groups"][0]["tpot_s"].keys() == {"dak-greedy", "uva"}


def test_summary_takes_the_consolidated_row_as_dak_where_it_ran():
    from dak.bench.e2e_report import summarize

    def row(system, tpot, x=0.1, batch=8):
        return {"model": "m", "batch": batch, "prompt_len": 32, "gen_len": 32, "kind": "ratio", "x_req": x,
                "system": system, "status": "ok", "tpot_s": tpot, "eb_over_bound": 0.5 / tpot,
                "predicted_over_measured": 1.0}
    s = summarize([row("dak-greedy", 3.0), row("dak-consolidated", 2.0), row("prefetch", 2.5),
                   row("dak-greedy", 4.0, x=0.2), row("prefetch", 5.0, x=0.2)])
    ten, twenty = s["groups"]
    assert ten["dak_system"] == "dak-consolidated" and ten["speedup_vs_best_baseline"] == pytest.approx(1.25)
    assert twenty["dak_system"] == "dak-greedy" and twenty["speedup_vs_best_baseline"] == pytest.approx(1.25)
    assert s["targets"]["small batch: never slower than a baseline"]["pass"] == 2


def test_merged_summary_compares_dak_only_with_its_own_run():
    from dak.bench.e2e_report import summarize

    def row(system, tpot, sha, kind="ratio", bound=None):
        return {"model": "m", "batch": 8, "prompt_len": 32, "gen_len": 32, "kind": kind, "x_req": 0.1,
                "system": system, "status": "ok", "tpot_s": tpot, "bound_s": bound, "eb_over_bound": 0.5,
                "predicted_over_measured": 1.0, "run": {"git_sha": sha, "date": sha}}
    s = summarize([row("uva", 1.0, "old"), row("dak-uniform", 1.5, "old"),  # an older run's baselines
                   row("dak-consolidated", 2.0, "new"), row("prefetch", 3.0, "new"), row("dak-uniform", 2.2, "new"),
                   row("dak-greedy", 9.0, "old", "real-capacity", 1.0),  # superseded by the consolidated run
                   row("dak-consolidated", 1.05, "new", "real-capacity", 1.0)])
    g, = s["groups"]
    assert g["best_baseline"] == "prefetch" and g["speedup_vs_best_baseline"] == pytest.approx(1.5)
    assert g["greedy_over_uniform"] == pytest.approx(1.1)
    assert s["targets"]["real capacity: completes with TPOT <= 1.1 x bound"] == {"pass": 1, "fail": 0, "failed": []}
    assert len(s["real_capacity"]) == 2  # both rows are still listed


def test_fused_projections_in_every_system_keep_the_tokens(tmp_path):
    """Fused q/k/v and gate/up: dak's all-HBM sets, prefetch's staged and HBM rows alike."""
    from dak.bench.e2e import run_e2e
    rows = {}
    for fuse in (False, True):
        cfg = E2EConfig(models=("tiny-llama",), batches=(2,), prompt_len=4, gen_len=4, ratios=(0.1,),
                        systems=("dak-consolidated", "prefetch", "uva"), dtype="fp16", repeats=1,
                        fuse_projections=fuse, out=str(tmp_path / f"e2e-{fuse}.json"), plot=None)
        rows[fuse] = {r["system"]: r for r in run_e2e(cfg, log=lambda *a: None)["rows"]}
    layers = load_spec("tiny-llama").num_layers
    on, off = rows[True], rows[False]
    assert on["prefetch"]["fused_groups"] == 2 * layers and off["prefetch"]["fused_groups"] == 0
    assert on["dak-consolidated"]["fused_groups"] > 0 and off["dak-consolidated"]["fused_groups"] == 0
    assert on["uva"]["fused_groups"] >= 0 and off["uva"]["fused_groups"] == 0
    for system, r in on.items():
        assert r["status"] == "ok", (system, r["note"])
        assert r["token_agreement"] == 1.0 and r["first_mismatch_step"] == -1, system
    assert on["dak-consolidated"]["tokens"] == off["dak-consolidated"]["tokens"]  # the reference system


def test_fp32_reference_agrees_with_dak_and_tells_other_weights_apart(tmp_path):
    """--fp32-reference: HF's fp32 model over the same seeded weights (tied OPT table, untied Llama)."""
    from dak.bench.e2e import _compare, prompts, run_e2e
    from dak.bench.e2e_reference import fp32_first_logits
    from dak.models.spec import load_config
    cfg = E2EConfig(models=("tiny-opt", "tiny-llama"), batches=(2,), prompt_len=5, gen_len=3, ratios=(0.3,),
                    systems=("dak-consolidated",), dtype="fp16", repeats=1, fp32_reference=True,
                    out=str(tmp_path / "e2e.json"), plot=None)
    logs = []
    rows = run_e2e(cfg, log=logs.append)["rows"]
    assert len(rows) == 2 and sum("fp32 reference on the" in line for line in logs) == 2
    for r in rows:
        assert r["status"] == "ok", r["note"]
        assert r["fp32_reference"].startswith("fp32 reference on the"), r["model"]
        assert 0 < r["fp32_logits_err"] < 5e-3, r["model"]  # fp16 rounding, not other weights
        assert r["fp32_token_gap"] <= 2 * r["fp32_logits_err"] + 1e-7, r["model"]
    _, tiny = load_config("tiny-opt")
    ids = prompts(tiny["vocab_size"], 2, 5, 0)
    same, _ = fp32_first_logits(tiny, ids, 0)
    other, _ = fp32_first_logits(tiny, ids, 1)
    assert _compare(other, other.argmax(-1), same)[0] > 0.2  # another seed's weights: far off


def test_fp32_reference_goes_where_it_fits_or_says_why_not():
    from dak.bench.e2e_reference import reference_device
    gib = 2**30
    assert reference_device(10 * gib, 40 * gib, 100 * gib)[0].type == "cuda"
    assert reference_device(50 * gib, 40 * gib, 200 * gib)[0].type == "cpu"
    assert reference_device(50 * gib, None, 200 * gib)[0].type == "cpu"
    device, why = reference_device(120 * gib, 70 * gib, 128 * gib)
    assert device is None and "needs 120.0 GiB" in why and "70.0 GiB free HBM" in why
    assert "no GPU" in reference_device(8 * gib, None, None)[1]


def test_a_failing_fp32_reference_is_recorded_and_the_run_goes_on(tmp_path, monkeypatch):
    import dak.bench.e2e_reference as reference
    from dak.bench.e2e import run_e2e

    def fail(*a, **kw):
        raise RuntimeError("CUDA out of memory. Tried to allocate 26.00 GiB\nmore lines")
    monkeypatch.setattr(reference, "fp32_first_logits", fail)
    cfg = E2EConfig(models=("tiny-llama",), batches=(2,), prompt_len=4, gen_len=2, ratios=(0.0,),
                    systems=("dak-consolidated",), dtype="fp16", repeats=1, fp32_reference=True,
                    out=str(tmp_path / "e2e.json"), plot=None)
    row, = run_e2e(cfg, log=lambda *a: None)["rows"]
    assert row["status"] == "ok" and "fp32_logits_err" not in row
    assert row["fp32_reference"] == "fp32 reference failed: RuntimeError: CUDA out of memory. Tried to allocate 26.00 GiB"
