"""Bad input found by the thirty-sixth session's audit: paths that cannot be written or are not dak results,
baselines that do not run, a run without a decode step, seeds, scoring ids, and a bad $DAK_PIN_METHOD
(test_host_release.py) each give a clear error (or an honest report), never a traceback (CPU)."""

import json
import os

import pytest
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

import dak  # noqa: E402
import dak.host  # noqa: E402  (not imported by `import dak`: the leak checks below read it)
from dak.cli.main import main  # noqa: E402


def _err(capsys, argv, rc=2):
    assert main(argv) == rc
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err


def test_paths_that_cannot_be_written_are_errors_before_any_work(tmp_path, capsys):
    missing = str(tmp_path / "nodir" / "p.json")
    assert "No such file or directory" in _err(capsys, ["hardware", "h200-pcie", "--save", missing])
    assert "is a directory: give a file name" in _err(capsys, ["calibrate", "--rebase", "h200-pcie",
                                                              "--out", str(tmp_path)])
    assert f"folder {tmp_path / 'nodir'} does not exist" in _err(capsys, ["calibrate", "--model", "tiny-llama",
                                                                          "--out", missing])
    # --base is resolved before measuring (before the GPU check, too: on the CPU this names the base)
    assert "unknown hardware 'bogus'" in _err(capsys, ["calibrate", "--model", "tiny-llama", "--base", "bogus",
                                                       "--out", str(tmp_path / "p.json")])
    assert not os.listdir(tmp_path)


@pytest.mark.parametrize("content", ['{"a": 1}', "[1, 2]", '{"rows": [], "meta": 3}', "not json"])
def test_a_json_that_is_not_a_bench_result_is_refused(tmp_path, capsys, content):
    path = tmp_path / "x.json"
    path.write_text(content)
    want = "cannot read result JSON" if content == "not json" else "is not a `dak bench e2e` result"
    assert want in _err(capsys, ["bench", "e2e", "--replot", str(path)])
    err = _err(capsys, ["bench", "e2e", "--models", "tiny-llama", "--out", str(path), "--append", "--dry-run"])
    assert want in err and path.read_text() == content


def test_a_baseline_that_cannot_run_exits_non_zero_with_its_reason(capsys):
    wl = ["generate", "--model", "tiny-llama", "--batch", "2", "--prompt-len", "4", "--gen-len", "3"]
    err = _err(capsys, wl + ["--baseline", "prefetch", "--host-ratio", "50%"], rc=1)
    assert "--baseline prefetch did not run (skipped): prefetch infeasible" in err
    assert "wrote /" not in capsys.readouterr().out  # no temporary path that is gone already
    assert "keeps every weight in HBM: drop --host-ratio" in _err(capsys, wl + ["--baseline", "all-hbm",
                                                                            "--host-ratio", "10%"])


def test_one_new_token_reports_no_tpot_instead_of_zeros(capsys):
    wl = ["generate", "--model", "tiny-llama", "--batch", "1", "--prompt-len", "2", "--gen-len", "1"]
    assert main(wl) == 0
    out = capsys.readouterr().out
    assert "TPOT n/a: no decode step ran" in out and "0.0 tokens/s" not in out
    assert main(wl + ["--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["steps"] == 0 and got["ttft_s"] > 0
    assert got["tpot_s"] is None and got["tokens_per_s"] is None and got["measured_over_predicted"] is None


@pytest.mark.parametrize("seed", ["x", None, 2**70, -1, 1.5, True])
def test_offload_refuses_a_bad_seed_before_building(seed):
    before = dak.host.pinned_bytes()
    with pytest.raises(ValueError, match=r"seed must be an integer in \[0, 2\*\*63\)"):
        dak.offload("tiny-llama", batch=1, max_len=8, seed=seed)
    assert dak.host.pinned_bytes() == before


@pytest.mark.parametrize("flag, value", [("graphs", "no"), ("tune", "x")])
def test_offload_refuses_non_bool_switches(flag, value):
    with pytest.raises(ValueError, match=f"{flag} must be True"):
        dak.offload("tiny-llama", batch=1, max_len=8, **{flag: value})


def test_cli_refuses_a_seed_out_of_range(capsys):
    for seed in ("1000000000000000000000000", "-1"):
        assert "--seed must be an integer in [0, 2**63)" in _err(capsys, ["generate", "--model", "tiny-llama",
                                                                         "--gen-len", "2", "--seed", seed])


def test_scoring_forward_refuses_bad_ids_with_a_message():
    model = dak.offload("tiny-llama", batch=2, max_len=8, graphs=False, progress=False)
    try:
        vocab = model.config.vocab_size
        ok = torch.randint(0, vocab, (2, 5))
        ref = model(ok, use_cache=False).logits.float()
        assert ref.shape == (2, 5, vocab) and torch.isfinite(ref).all()
        for ids, msg in ((torch.full((2, 5), vocab), r"token ids must be in \[0, "),
                         (torch.full((2, 5), -1), r"token ids must be in \[0, "),
                         (ok[0], "must be a \\(batch, length\\) tensor"),
                         (ok[:, :0], "length >= 1"),
                         (ok.float(), "must be a \\(batch, length\\) tensor")):
            with pytest.raises(ValueError, match=msg):
                model(ids, use_cache=False)
            with pytest.raises(ValueError, match=msg):
                model(input_ids=ids, use_cache=False)
        assert torch.equal(model(ok, use_cache=False).logits.float(), ref)  # still works after the refusals
        assert not model.training and not any(m.training for m in model.modules())  # offloaded in eval mode
        with pytest.raises(RuntimeError, match="inference-only model: its split kernels have no backward"):
            model.train()  # what a fine-tuning loop calls first: refused, not a torch error at backward()
        assert not any(m.training for m in model.modules())  # nothing switched to train mode
        assert model.eval() is model and model.train(False) is model and not model.training
        assert torch.equal(model(ok, use_cache=False).logits.float(), ref)
    finally:
        model.dak_free()


@pytest.mark.parametrize("argv, msg", [
    (["--batch", "20000", "--prompt-len", "8", "--host-ratio", "50%"], "no host_ratio fits: the workload needs"),
    (["--batch", "20000", "--prompt-len", "8", "--hbm-budget", "100GiB"], "more than HBM (140.40 GiB) and host_ram"),
    (["--batch", "100000000", "--prompt-len", "8"], "exceeds h200-pcie's HBM capacity 140.40 GiB: reduce the batch"),
    (["--reserve", "200GiB"], "reduce the batch or the prompt/generation lengths, or the reserve"),
])
def test_plans_that_no_budget_can_hold_say_what_to_reduce(capsys, argv, msg):
    """Not "raise --hbm-budget" (which --host-ratio excludes, or beyond the GPU's capacity)."""
    err = _err(capsys, ["plan", "--model", "llama-2-7b", "--hardware", "h200-pcie"] + argv)
    assert msg in err and "raise --hbm-budget to" not in err and "raise host_ratio" not in err


@pytest.mark.parametrize("content", [None, '{"x":', '{"name": 3}'])
def test_a_bad_dak_profile_is_refused_up_front_naming_the_variable(tmp_path, monkeypatch, capsys, content):
    path = tmp_path / "p.json"
    if content is not None:
        path.write_text(content)
    monkeypatch.setenv("DAK_PROFILE", str(path))
    assert f"DAK_PROFILE='{path}'" in _err(capsys, ["plan", "--model", "tiny-llama"])
    before = dak.host.pinned_bytes()
    with pytest.raises(ValueError, match="DAK_PROFILE="):
        dak.offload("tiny-llama", batch=1, max_len=8)
    assert dak.host.pinned_bytes() == before


@pytest.mark.parametrize("kw, msg", [(dict(host_ratio=True), "host_ratio must be a fraction"),
                                     (dict(host_ratio=0.5, row_tile=1.5), "row_tile must be an integer"),
                                     (dict(host_ratio=0.5, row_tile="64"), "row_tile must be an integer")])
def test_split_linear_refuses_bools_and_non_integer_tiles(kw, msg):
    from dak.nn import SplitLinear
    lin = torch.nn.Linear(32, 96, bias=False, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match=msg):
        SplitLinear.from_linear(lin, **kw)


def test_prompt_with_a_folder_without_tokenizer_files_says_so(tmp_path, capsys):
    from dak.models.configs import BUILTIN_CONFIGS
    (tmp_path / "config.json").write_text(json.dumps(BUILTIN_CONFIGS["tiny-llama"]))
    err = _err(capsys, ["generate", "--model", str(tmp_path), "--prompt", "hello", "--gen-len", "2"])
    assert f"{tmp_path} has no tokenizer files (tokenizer.json" in err and "sentencepiece" not in err


def test_position_limits_hold_in_plan_offload_and_the_cpu_stand_in(capsys):
    """Learned positions past their table are errors in `dak plan` as in dak.offload (plan accepted them); a rotary
    model past its trained positions is warned about everywhere; the CPU stand-in of `dak generate` checks the
    requested model's limits, not the stand-in's. A run past a sliding window is planned (attended as HF does)."""
    capsys.readouterr()
    assert main(["plan", "--model", "mistral-7b", "--prompt-len", "4000", "--gen-len", "97"]) == 0  # past the window
    assert "error" not in capsys.readouterr().err
    assert "opt-6.7b's max_position_embeddings 2048" in _err(capsys, ["plan", "--model", "opt-6.7b",
                                                                      "--prompt-len", "2000", "--gen-len", "49"])
    capsys.readouterr()
    assert main(["plan", "--model", "llama-2-7b", "--prompt-len", "4000", "--gen-len", "97"]) == 0
    assert "trained for 4096 positions and this run reaches 4097" in capsys.readouterr().err
    assert main(["plan", "--model", "llama-2-7b", "--prompt-len", "4000", "--gen-len", "96"]) == 0
    assert "warning" not in capsys.readouterr().err
    if not torch.cuda.is_available():  # generate runs tiny-llama for opt-6.7b here: opt-6.7b's table still holds
        assert "opt-6.7b's max_position_embeddings 2048" in _err(
            capsys, ["generate", "--model", "opt-6.7b", "--prompt-len", "2040", "--gen-len", "9"])
    before = dak.host.pinned_bytes()
    with pytest.raises(ValueError, match="tiny-opt's max_position_embeddings 256"):
        dak.offload("tiny-opt", batch=1, prompt_len=250, gen_len=7)
    assert dak.host.pinned_bytes() == before
    with pytest.warns(UserWarning, match="tiny-llama was trained for 512 positions and this run reaches 513"):
        dak.offload("tiny-llama", batch=1, prompt_len=500, gen_len=13, tune=False).dak_free()


def test_plan_refuses_strict_budget_for_a_prefill_plan(capsys):
    assert "drop --strict-budget or use --phase decode" in _err(
        capsys, ["plan", "--model", "llama-2-7b", "--phase", "prefill", "--strict-budget"])


@pytest.mark.skipif(torch.cuda.is_available(), reason="the note is for the CPU interpreter")
def test_long_runs_in_the_interpreter_are_noted_before_they_start(capsys, monkeypatch):
    """prompt 512 + 8 new tokens took 6 minutes in the interpreter: say so before building, not after."""
    from dak.cli.generate import SLOW_INTERPRETER_LEN

    def stop(*a, **k):
        raise ValueError("stopped before building")
    monkeypatch.setattr(dak, "offload", stop)
    argv = ["generate", "--model", "llama-2-7b", "--batch", "1", "--prompt-len"]
    for gen, noted in (("1", False), ("2", True)):
        assert main(argv + [str(SLOW_INTERPRETER_LEN - 1), "--gen-len", gen]) == 2
        got = capsys.readouterr()
        assert "stopped before building" in got.err
        assert (f"{SLOW_INTERPRETER_LEN - 1} + {gen} tokens run in the interpreter for minutes" in got.out) is noted


@pytest.mark.parametrize("np_v, tr_v, refused", [("2.4.0", "3.6.0", True), ("2.4.1", "3.5.1+git", True),
                                                 ("2.3.5", "3.6.0", False), ("2.4.0", "3.7.0", False)])
def test_the_interpreter_with_a_numpy_it_cannot_run_is_refused_up_front(monkeypatch, capsys, np_v, tr_v, refused):
    """triton <= 3.6's interpreter fails on numpy >= 2.4 with a TypeError deep in a kernel: dak
    says so, and what to install, before any kernel runs."""
    import numpy
    import triton
    from dak import runtime_env
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    monkeypatch.setattr(numpy, "__version__", np_v)
    monkeypatch.setattr(triton, "__version__", tr_v)
    runtime_env.interpreter_problem.cache_clear()
    try:
        from dak.switches import check_environment
        warned = [w for w in check_environment()[0] if "numpy<2.4" in w]
        if refused:
            with pytest.raises(RuntimeError, match=r"numpy<2.4"):
                runtime_env.kernel_device()
            with pytest.raises(RuntimeError, match=r"cannot run with numpy " + np_v):
                dak.offload("tiny-llama", batch=1, max_len=8, tune=False)
            assert len(warned) == 1 and "planning still works" in warned[0], "every dak command warns first"
            assert main(["generate", "--model", "tiny-llama", "--host-ratio", "0.5", "--batch", "1",
                         "--prompt-len", "4", "--gen-len", "2"]) == 2, "an error line, not a traceback"
            assert "dak: error: TRITON_INTERPRET=1 is set" in capsys.readouterr().err
        else:
            assert runtime_env.kernel_device().type == "cpu" and not warned
    finally:
        runtime_env.interpreter_problem.cache_clear()


@pytest.mark.skipif(torch.cuda.is_available(), reason="the stand-in runs only without a GPU")
def test_the_cpu_stand_in_runs_the_requested_plans_host_share(capsys, monkeypatch):
    """`dak generate --model llama-2-7b --hbm-budget 8GiB` without a GPU runs tiny-llama at the host
    share llama-2-7b's plan has at that budget (8 GiB holds all of tiny-llama, which would split
    nothing); without a budget nothing is carried over; a budget too small for the requested
    model is refused as on the GPU."""
    from dak.hardware import get_profile
    from dak.models import load_spec
    from dak.runtime.offload import placement_for, workload_for
    seen = {}

    def stop(name, **kw):
        seen.clear()
        seen.update(kw, name=name)
        raise ValueError("stopped before building")
    monkeypatch.setattr(dak, "offload", stop)
    argv = ["generate", "--model", "llama-2-7b", "--batch", "2", "--prompt-len", "8", "--gen-len", "4"]
    for budget, policy in (("8GiB", "consolidated"), ("11GiB", "uniform")):
        assert main(argv + ["--hbm-budget", budget, "--policy", policy]) == 2
        out = capsys.readouterr().out
        want = placement_for(load_spec("llama-2-7b"), workload_for(2, None, 8, 4, torch.bfloat16),
                             get_profile("h200-pcie"), budget, policy, None).offload_ratio
        assert 0.05 < want < 0.7 and seen["name"] == "tiny-llama" and seen["hbm_budget"] is None
        assert seen["host_ratio"] == pytest.approx(want) and seen["strict_budget"] is False, seen
        assert f"{policy} plan at --hbm-budget {budget} keeps {100 * want:.1f}% of its operator bytes" in out
    assert main(argv) == 2 and seen["host_ratio"] is None and seen["hbm_budget"] is None
    assert main(argv + ["--host-ratio", "20%"]) == 2 and seen["host_ratio"] == pytest.approx(0.2)
    err = _err(capsys, argv + ["--hbm-budget", "1MiB"])
    assert "raise --hbm-budget" in err and seen["host_ratio"] == pytest.approx(0.2)  # refused before offload
