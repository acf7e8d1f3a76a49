"""dak.offload and generate refuse bad input with clear errors, before pinning anything (CPU)."""

import os

import pytest
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

import dak  # noqa: E402
from dak.cli.main import main  # noqa: E402
from dak.hardware import get_profile  # noqa: E402
from dak.host import pinned_bytes  # noqa: E402


@pytest.fixture(scope="module")
def tiny():
    model = dak.offload("tiny-mistral", batch=2, max_len=12, policy="uniform", host_ratio=0.5, dtype=torch.float16, tune=False)
    yield model
    model.dak_free()


def test_budget_below_the_minimum_hbm_set():
    with pytest.raises(ValueError, match="minimum HBM-resident set"):
        dak.offload("llama-2-7b", hbm_budget="1MiB", batch=8, max_len=64)


def test_host_ram_too_small_is_refused_before_pinning():
    small = get_profile("h200-pcie")
    from dataclasses import replace
    small = replace(small, host_ram=1 << 30)
    before = pinned_bytes()
    with pytest.raises(ValueError, match="host"):
        dak.offload("llama-2-70b", hbm_budget="40GiB", hardware=small, batch=8, max_len=64)
    assert pinned_bytes() == before


def test_hbm_check_counts_copy_engine_staging(monkeypatch):
    """Staging (two copy-ahead slots of the largest copied host part, plus the largest host part
    for prefill) is refused up front when it does not fit beside the plan's HBM bytes."""
    from dak.runtime.offload import check_memory, placement_for, staging_bytes_for, workload_for
    from dak.models.spec import ModelSpec, load_config
    name, cfg = load_config("llama-2-7b")
    spec = ModelSpec.from_config(cfg, name=name)
    w = workload_for(8, 64, None, None, torch.bfloat16)
    pl = placement_for(spec, w, get_profile("h200-pcie"), None, "greedy", 0.2)
    lin = [op for op in pl.ops if op.kind not in ("attention", "embed_tokens", "embed_positions")]
    big = max(op.host_bytes for op in lin)
    assert big > 0 and staging_bytes_for(pl) == 3 * big  # uniform 20%: every linear copies
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda d=None: (pl.hbm_bytes + 2 * big, 1 << 40))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda d=None: "a test GPU")
    with pytest.raises(ValueError, match="copy-engine staging needs"):
        check_memory(pl, 0, torch.device("cuda"))
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda d=None: (pl.hbm_bytes + 3 * big, 1 << 40))
    check_memory(pl, 0, torch.device("cuda"))


def test_streamed_plan_counts_its_staging_once(monkeypatch):
    """A streamed placement holds its copy-engine staging inside hbm_bytes: the memory check
    must not add it again, and must still refuse one byte less."""
    from dak.baselines.e2e import budget_for
    from dak.models.spec import ModelSpec, load_config
    from dak.runtime.offload import check_memory, placement_for, staging_bytes_for, workload_for
    name, cfg = load_config("opt-6.7b")
    spec = ModelSpec.from_config(cfg, name=name)
    w = workload_for(8, None, 32, 32, torch.bfloat16)
    prof = get_profile("h200-pcie")
    pl = placement_for(spec, w, prof, budget_for(spec, w, 0.02, prof), "streamed", None)
    assert pl.staging_bytes > 0 and staging_bytes_for(pl) == pl.staging_bytes
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda d=None: "a test GPU")
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda d=None: (pl.hbm_bytes, 1 << 40))
    check_memory(pl, 0, torch.device("cuda"))
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda d=None: (pl.hbm_bytes - 1, 1 << 40))
    with pytest.raises(ValueError, match="lower hbm_budget"):
        check_memory(pl, 0, torch.device("cuda"))


def test_infeasible_streamed_plan_is_refused_before_allocating():
    from dak.baselines.e2e import budget_for
    from dak.models.spec import ModelSpec, load_config
    from dak.runtime.offload import workload_for
    name, cfg = load_config("tiny-llama")
    spec = ModelSpec.from_config(cfg, name=name)
    budget = budget_for(spec, workload_for(2, 12, None, None, torch.bfloat16), 0.99, get_profile("h200-pcie"))
    before = pinned_bytes()
    with pytest.raises(ValueError, match="streamed infeasible.*consolidated or greedy"):
        dak.offload("tiny-llama", hbm_budget=budget, policy="streamed", batch=2, max_len=12)
    assert pinned_bytes() == before


def test_sliding_layers_are_hfs():
    """The layers that attend through a sliding window, as HF's modules do: all of Mistral's, Qwen2/Qwen3's from
    max_window_layers on when use_sliding_window is set, an explicit layer_types list; none for Llama (HF's Llama
    attends in full whatever its config says) or without a window."""
    from dak.models.spec import load_spec, sliding_layers
    assert sliding_layers({"model_type": "mistral", "sliding_window": 256}, 3) == (256, (0, 1, 2))
    assert sliding_layers({"model_type": "mistral", "sliding_window": None}, 3) == (0, ())
    assert sliding_layers({"model_type": "qwen2", "sliding_window": 64, "use_sliding_window": False}, 4) == (0, ())
    assert sliding_layers({"model_type": "qwen2", "sliding_window": 64, "use_sliding_window": True,
                           "max_window_layers": 2}, 4) == (64, (2, 3))
    assert sliding_layers({"model_type": "qwen3", "sliding_window": 64, "layer_types": [
        "full_attention", "sliding_attention", "full_attention"]}, 3) == (64, (1,))
    assert sliding_layers({"model_type": "llama", "sliding_window": 64, "layer_types": ["sliding_attention"]}, 1) == (0, ())
    spec = load_spec("mistral-7b")
    assert spec.window_at(0) == spec.window_at(31) == 4096 and load_spec("qwen2.5-7b").window_at(27) == 0
    from dak.models.ops import Workload, list_operators
    w = Workload("decode", 8, 8000, 64)  # past the window: each step reads 4096 keys a request
    att = [op for op in list_operators(spec, w) if op.kind == "attention"]
    per_key = spec.kv_elements_per_token() * w.dtype_bytes * w.batch
    assert len(att) == 32 and all(op.traffic == per_key * 4096 for op in att)
    assert all(op.bytes == per_key * (8000 + 64) for op in att)  # the cache still holds every position
    short = Workload("decode", 8, 2000, 64)  # inside it: the whole context, as without a window
    assert [op.traffic for op in list_operators(spec, short) if op.kind == "attention"][0] == per_key * short.context


def test_unsupported_architecture(tmp_path):
    (tmp_path / "config.json").write_text('{"model_type": "gpt2", "n_embd": 64}')
    with pytest.raises(ValueError, match="unsupported model_type"):
        dak.offload(str(tmp_path), batch=1, max_len=8)


def test_bad_arguments():
    with pytest.raises(ValueError, match="host_ratio"):
        dak.offload("tiny-llama", batch=1, max_len=8, policy="uniform", host_ratio=1.5)
    with pytest.raises(ValueError, match="dtype"):
        dak.offload("tiny-llama", batch=1, max_len=8, dtype=torch.float32)
    with pytest.raises(ValueError, match="prefetch"):
        dak.offload("tiny-llama", batch=1, max_len=8, policy="prefetch")
    with pytest.raises(ValueError, match="max_len"):
        dak.offload("tiny-llama", batch=1)
    with pytest.raises(ValueError, match="batch"):
        dak.offload("tiny-llama", batch=0, max_len=8)
    with pytest.raises(ValueError, match="built-in name"):
        dak.offload(42, batch=1, max_len=8)
    with pytest.raises(ValueError, match="strict_budget must be True or False"):
        dak.offload("tiny-llama", batch=1, max_len=8, strict_budget="yes")
    with pytest.raises(ValueError, match="does not apply to host_ratio"):
        dak.offload("tiny-llama", batch=1, max_len=8, strict_budget=True, policy="uniform", host_ratio=0.5)
    with pytest.raises(ValueError, match="HF causal LM with a .config"):
        dak.offload(torch.nn.Linear(3, 3), batch=1, max_len=8)
    from runtime_checks import hf_model as _hf_model
    from transformers import AutoModelForCausalLM
    with torch.device("meta"):
        empty = AutoModelForCausalLM.from_config(_hf_model("tiny-llama").config)
    before = pinned_bytes()
    with pytest.raises(ValueError, match="have no data \\(meta device"):
        dak.offload(empty, batch=1, max_len=8)
    assert pinned_bytes() == before
    for kw, name in (({"prompt_len": 4, "gen_len": -3}, "gen_len"), ({"prompt_len": 0, "gen_len": 2}, "prompt_len"),
                     ({"max_len": 0}, "max_len"), ({"max_len": 8.5}, "max_len")):
        with pytest.raises(ValueError, match=f"{name} must be an integer >= 1"):
            dak.offload("tiny-llama", batch=1, **kw)


def test_generate_beyond_the_cache(tiny):
    ids = torch.randint(0, 100, (3, 4))
    with pytest.raises(ValueError, match="batch 2"):
        tiny.generate(ids, max_new_tokens=2)
    with pytest.raises(ValueError, match="max_len"):
        tiny.generate(ids[:2], max_new_tokens=9)
    with pytest.raises(ValueError, match="token ids"):
        tiny.generate(torch.full((2, 4), 10**6), max_new_tokens=1)
    with pytest.raises(ValueError, match="prompt_lengths"):
        tiny.generate(ids[:2], max_new_tokens=1, prompt_lengths=[0, 4])
    with pytest.raises(ValueError, match="does not support"):
        tiny.generate(ids[:2], max_new_tokens=1, num_beams=4)
    with pytest.raises(ValueError, match="temperature"):
        tiny.generate(ids[:2], max_new_tokens=1, do_sample=True, temperature=0)
    with pytest.raises(ValueError, match="prompt_len >= 1"):
        tiny.generate(ids[:2, :0], max_new_tokens=1)


def test_generate_after_free_is_a_clear_error():
    model = dak.offload("tiny-llama", batch=1, max_len=8, policy="uniform", host_ratio=0.5, dtype=torch.float16, tune=False)
    ids = torch.randint(0, 100, (1, 3))
    assert model.generate(ids, max_new_tokens=1).shape == (1, 4)
    model.dak_free()
    with pytest.raises(RuntimeError, match="released by dak_free"):
        model.generate(ids, max_new_tokens=1)
    with pytest.raises(RuntimeError, match="released by dak_free"):
        model(ids)
    model.dak_free()  # a second free does nothing


def test_fewer_prompts_and_sampling(tiny):
    ids = torch.randint(0, 100, (1, 4))
    out = tiny.generate(ids, max_new_tokens=3, do_sample=True, top_k=5, top_p=0.9)
    assert out.shape == (1, 7) and torch.equal(out[:, :4], ids.to(out.device))
    assert int(out.max()) < tiny.config.vocab_size


def test_cli_generate_runs_and_rejects_bad_input(capsys):
    assert main(["generate", "--model", "tiny-llama", "--batch", "1", "--prompt-len", "3", "--gen-len", "2",
                 "--host-ratio", "50%", "--kv-ahead"]) == 0
    out = capsys.readouterr().out
    assert "TPOT" in out and "predicted TPOT" in out and "effective bandwidth" in out
    assert "kv-ahead:" in out  # on the CPU no layer stages host K/V: it says so
    assert main(["generate", "--model", "tiny-llama", "--batch", "1", "--prompt-len", "3", "--gen-len", "2",
                 "--host-ratio", "50%", "--no-kv-ahead"]) == 0
    assert "kv-ahead:" not in capsys.readouterr().out
    assert main(["generate", "--model", "tiny-llama", "--batch", "1", "--prompt-len", "3", "--gen-len", "2",
                 "--host-ratio", "0", "--fuse-projections"]) == 0
    assert "fused projections: " in capsys.readouterr().out
    assert main(["generate", "--model", "tiny-llama", "--batch", "1", "--prompt-len", "3", "--gen-len", "2",
                 "--host-ratio", "0", "--stop-at-eos"]) == 0
    assert "TPOT" in capsys.readouterr().out
    assert main(["generate", "--model", "tiny-llama", "--batch", "1", "--prompt-len", "3", "--gen-len", "2",
                 "--host-ratio", "0.5", "--repetition-penalty", "1.2"]) == 0
    assert "TPOT" in capsys.readouterr().out
    assert main(["generate", "--model", "tiny-llama", "--batch", "1", "--prompt-len", "3", "--gen-len", "2",
                 "--host-ratio", "0.5", "--baseline", "uva"]) == 0
    assert "uva: TPOT" in capsys.readouterr().out
    for argv, msg in ((["--host-ratio", "2"], "ratio"), (["--dtype", "fp32"], "dtype"),
                      (["--batch", "x"], "--batch"), (["--batch", "-1"], "--batch must be an integer >= 1"),
                      (["--prompt-len", "-3"], "--prompt-len must be an integer >= 1"), (["--prompt", "hi"], "tokenizer"),
                      (["--baseline", "dak-greedy"], "--baseline"),
                      (["--baseline", "uva", "--hbm-budget", "1GiB"], "--host-ratio"),
                      (["--baseline", "uva", "--sample"], "drop --sample"),
                      (["--baseline", "uva", "--top-p", "0.5"], "drop --top-p"),
                      (["--baseline", "uva", "--chat"], "drop --chat"),
                      (["--temperature", "0.7"], "--temperature applies to sampling: add --sample"),
                      (["--top-k", "3"], "--top-k applies to sampling: add --sample"),
                      (["--sample", "--temperature", "0"], "--temperature must be a positive number, got 0.0"),
                      (["--sample", "--temperature", "hot"], "--temperature must be a number, got 'hot'"),
                      (["--sample", "--top-k", "2.5"], "--top-k must be an integer, got '2.5'"),
                      (["--sample", "--top-k", "-1"], "--top-k must be an integer >= 0 (0 = off), got -1"),
                      (["--sample", "--top-p", "1.5"], "--top-p must be in (0, 1], got 1.5"),
                      (["--sample", "--top-p", "nan"], "--top-p must be in (0, 1], got nan"),
                      (["--min-p", "0.1"], "--min-p applies to sampling: add --sample"),
                      (["--sample", "--min-p", "2"], "--min-p must be in [0, 1], got 2.0"),
                      (["--baseline", "uva", "--stop", "x"], "drop --stop"),
                      (["--baseline", "prefetch", "--policy", "greedy", "--no-graphs"], "drop --policy, --no-graphs"),
                      (["--host-ratio", "5%", "--hbm-budget", "3GiB"], "give --hbm-budget or --host-ratio, not both"),
                      (["--repetition-penalty", "0"], "--repetition-penalty must be a positive number"),
                      (["--repetition-penalty", "lots"], "--repetition-penalty must be a number"),
                      (["--no-repeat-ngram-size", "-1"], "--no-repeat-ngram-size must be an integer >= 0 (0 = off)"),
                      (["--no-repeat-ngram-size", "2.5"], "--no-repeat-ngram-size must be an integer, got '2.5'"),
                      (["--baseline", "uva", "--no-repeat-ngram-size", "2"], "drop --no-repeat-ngram-size"),
                      (["--num-return-sequences", "2"], "--num-return-sequences samples several outputs a prompt: "
                                                        "add --sample"),
                      (["--sample", "--num-return-sequences", "0"], "--num-return-sequences must be an integer >= 1"),
                      (["--sample", "--num-return-sequences", "2"], "--num-return-sequences prints K outputs of each "
                                                                    "--prompt: give --prompt")):
        assert main(["generate", "--model", "tiny-llama", "--gen-len", "1"] + argv) == 2
        assert msg in capsys.readouterr().err
    # without a GPU an unknown model is still an error (not silently replaced by tiny-llama)
    assert main(["generate", "--model", "no-such-model", "--gen-len", "1"]) == 2
    assert "unknown model 'no-such-model'" in capsys.readouterr().err


@pytest.mark.parametrize("name,switch,default", [("DAK_GRAPHS", "graphs_default", True),
                                                  ("DAK_CE_FORK", "ce_fork_enabled", False)])
def test_diagnostic_switches_take_only_0_or_1(monkeypatch, name, switch, default):
    import dak.shares
    fn = getattr(dak.shares, switch)
    monkeypatch.delenv(name, raising=False)
    assert fn() is default
    monkeypatch.setenv(name, "0")
    assert fn() is False
    monkeypatch.setenv(name, "1")
    assert fn() is True
    monkeypatch.setenv(name, "off")
    with pytest.raises(ValueError, match=f"{name} must be 0 or 1"):
        fn()


def test_a_failed_checkpoint_load_leaves_no_host_buffers(tmp_path):
    """A checkpoint that lacks a tensor fails after the host rows were allocated (and, on a GPU,
    pinned): once the error is handled nothing of the half-built model stays alive."""
    import gc

    from safetensors.torch import load_file, save_file

    from dak.host import PinnedBuffer
    from runtime_checks import hf_model as _hf_model

    def live():
        gc.collect()
        return sum(type(o) is PinnedBuffer for o in gc.get_objects())

    _hf_model("tiny-llama").save_pretrained(tmp_path)
    kw = dict(batch=1, max_len=8, policy="uniform", host_ratio=0.5, dtype=torch.float16, tune=False)
    before, pinned = live(), pinned_bytes()
    model = dak.offload(str(tmp_path), **kw)
    assert live() > before  # the count sees a built model's buffers
    model.dak_free()
    del model
    assert live() == before and pinned_bytes() == pinned
    tensors = load_file(tmp_path / "model.safetensors")
    tensors.pop("model.layers.1.mlp.down_proj.weight")
    save_file({k: v.clone() for k, v in tensors.items()}, tmp_path / "model.safetensors", metadata={"format": "pt"})
    try:
        dak.offload(str(tmp_path), **kw)
        raise AssertionError("a checkpoint without down_proj must be refused")
    except ValueError as e:
        assert "lacks 1 tensors" in str(e) and "down_proj" in str(e)
    assert live() == before and pinned_bytes() == pinned


def test_streamer_gets_the_prompt_then_each_step(tiny):
    """HF's streamer protocol: put(prompt ids), put(each step's tokens), end(); the pieces make
    the returned sequence. A bad streamer or bad input leaves the streamer untouched."""
    class Collect:
        def __init__(self):
            self.puts, self.ended = [], 0

        def put(self, ids):
            assert ids.device.type == "cpu"
            self.puts.append(ids.clone())

        def end(self):
            self.ended += 1

    ids = torch.randint(0, 100, (2, 4))
    s = Collect()
    seq = tiny.generate(ids, max_new_tokens=5, streamer=s)
    assert s.ended == 1 and len(s.puts) == 6 and torch.equal(s.puts[0], ids)
    assert torch.equal(torch.cat([s.puts[0]] + [p[:, None] for p in s.puts[1:]], dim=1), seq.cpu())
    with pytest.raises(ValueError, match="put\\(ids\\) and end\\(\\)"):
        tiny.generate(ids, max_new_tokens=1, streamer=object())
    s = Collect()
    with pytest.raises(ValueError, match="token ids"):
        tiny.generate(torch.full((2, 4), 10**6), max_new_tokens=1, streamer=s)
    assert s.puts == [] and s.ended == 0


def test_a_quantized_checkpoint_is_refused(tmp_path):
    """An int8 tensor under a weight's name (as int8 checkpoints store them) is refused, not cast."""
    from safetensors.torch import load_file, save_file

    from runtime_checks import hf_model as _hf_model
    _hf_model("tiny-llama").save_pretrained(tmp_path)
    tensors = load_file(tmp_path / "model.safetensors")
    key = "model.layers.0.mlp.up_proj.weight"
    tensors[key] = torch.randint(-127, 127, tensors[key].shape, dtype=torch.int8)
    save_file({k: v.clone() for k, v in tensors.items()}, tmp_path / "model.safetensors", metadata={"format": "pt"})
    before = pinned_bytes()
    with pytest.raises(ValueError, match="up_proj.weight' is I8, not a float: quantized checkpoints"):
        dak.offload(str(tmp_path), batch=1, max_len=8, policy="uniform", host_ratio=0.5, dtype=torch.float16, tune=False)
    assert pinned_bytes() == before


def test_moving_an_offloaded_model_is_refused_before_anything_moves(tiny):
    """.half()/.float()/.to(other device) would convert the HBM rows but not the pinned host rows:
    refused, with no tensor converted; a move to where it already is passes."""
    norm = next(p for n, p in tiny.named_parameters() if "norm" in n)
    dtype, device = norm.dtype, norm.device
    for move in (lambda m: m.float(), lambda m: m.to(torch.bfloat16), lambda m: m.to("meta")):
        with pytest.raises(RuntimeError, match="keeps its rows where the placement put them"):
            move(tiny)
        assert norm.dtype == dtype and norm.device == device
    assert tiny.to(device) is tiny and tiny.to(dtype) is tiny
    assert tiny.generate(torch.randint(0, 100, (2, 3)), max_new_tokens=2).shape == (2, 5)


def test_hf_aliases_inputs_and_max_length(tiny):
    ids = torch.randint(0, 100, (2, 4))
    want = tiny.generate(ids, max_new_tokens=3)
    assert torch.equal(tiny.generate(inputs=ids, max_length=7), want)
    with pytest.raises(ValueError, match="max_new_tokens 32 exceeds"):  # the default: 32 new tokens
        tiny.generate(ids)
    for kw, msg in (({"max_new_tokens": 3, "max_length": 7}, "not both"), ({"max_length": 4}, "integer > 4"),
                    ({"inputs": ids}, "once")):
        with pytest.raises(ValueError, match=msg):
            tiny.generate(ids, **kw)
    with pytest.raises(ValueError, match="once"):
        tiny.generate(max_new_tokens=1)


@pytest.mark.parametrize("v", [128256, 32000, 50272, 1000, 7])
def test_greedy_is_argmax_with_first_maximum_on_ties(v):
    """The chunked greedy pick equals torch's argmax, ties included: a row whose maximum repeats
    in two chunks, one whose maximum repeats inside a chunk, one at the last index."""
    from dak.runtime.engine import greedy
    g = torch.Generator().manual_seed(v)
    logits = torch.randn(6, v, generator=g)
    top = float(logits.max()) + 1
    logits[0, [v // 3, v - 2]] = top            # across chunks: the first wins
    logits[1, [v // 2, v // 2 + 1]] = top       # adjacent: the first wins
    logits[2, -1] = top
    logits[3] = 0.0                             # all equal: index 0
    logits[4, :v // 2] = float("-inf")
    got = greedy(logits)
    assert got.dtype == torch.int64 and torch.equal(got, logits.argmax(-1))
    bf = logits.to(torch.bfloat16)               # rounding makes many ties
    assert torch.equal(greedy(bf), bf.argmax(-1))
