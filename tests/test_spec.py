import json

import pytest

from dak.models import BUILTIN_CONFIGS, Workload, builtin_config, list_operators, load_spec, minimum_hbm_set
from dak.models.spec import ModelSpec

# Published parameter counts (model.num_parameters() of the HF checkpoints).
PUBLISHED_PARAMS = {
    "llama-2-7b": 6_738_415_616,
    "llama-2-70b": 68_976_648_192,
    "llama-3-8b": 8_030_261_248,
    "mistral-7b": 7_241_732_096,
    "qwen2.5-7b": 7_615_616_512,
    "qwen3-8b": 8_190_735_360,
    "qwen3-32b": 32_762_123_264,
}


def _param_bytes(name, dtype="bf16"):
    spec = load_spec(name)
    w = Workload("decode", 1, 16, 16, dtype)
    ops = [o for o in list_operators(spec, w) if o.kind != "attention"]
    return sum(o.bytes for o in ops) + minimum_hbm_set(spec, w).small_params


@pytest.mark.parametrize("name", sorted(PUBLISHED_PARAMS))
def test_weight_bytes_match_published_parameter_counts(name):
    assert _param_bytes(name) == 2 * PUBLISHED_PARAMS[name]
    assert _param_bytes(name, "fp32") == 4 * PUBLISHED_PARAMS[name]


def test_golden_config_values():
    s = load_spec("llama-2-70b")
    assert (s.hidden_size, s.intermediate_size, s.num_layers, s.num_heads, s.num_kv_heads, s.vocab_size) == \
        (8192, 28672, 80, 64, 8, 32000)
    c = builtin_config("llama-3-70b")
    assert c["vocab_size"] == 128256 and c["rope_theta"] == 500000
    q = load_spec("qwen2.5-7b")
    assert (q.hidden_size, q.intermediate_size, q.num_layers, q.num_heads, q.num_kv_heads, q.vocab_size) == \
        (3584, 18944, 28, 28, 4, 152064)
    assert q.qkv_bias and not q.o_bias
    o = load_spec("opt-6.7b")
    assert o.learned_positions == 2048 + 2 and o.tie_word_embeddings and o.qkv_bias and o.mlp_bias
    assert not o.gated_mlp and o.intermediate_size == 16384
    assert load_spec("tiny-llama").num_kv_heads < load_spec("tiny-llama").num_heads
    q3 = load_spec("qwen3-32b")
    assert (q3.hidden_size, q3.q_dim, q3.kv_dim, q3.num_layers) == (5120, 8192, 1024, 64)
    assert q3.qk_norm and not q3.qkv_bias and not q3.o_bias and q3.norm_params_per_layer == 2 * 5120 + 2 * 128
    assert not any(load_spec(n).qk_norm for n in ("llama-3-8b", "qwen2.5-7b", "mistral-7b", "opt-6.7b"))
    assert load_spec("tiny-qwen3").q_dim > load_spec("tiny-qwen3").hidden_size  # as Qwen3-32B's


def test_all_builtins_parse_and_are_hf_complete():
    for name, cfg in BUILTIN_CONFIGS.items():
        s = load_spec(name)
        assert s.num_layers >= 1
        for key in ("model_type", "architectures", "torch_dtype", "vocab_size", "hidden_size"):
            assert key in cfg, (name, key)
    for name in ("tiny-llama", "tiny-opt", "tiny-qwen2", "tiny-mistral", "tiny-qwen3"):
        s = load_spec(name)
        assert 2 <= s.num_layers <= 4 and 64 <= s.hidden_size <= 128


@pytest.mark.parametrize("name", ["tiny-llama", "tiny-opt", "tiny-qwen2", "tiny-mistral", "tiny-qwen3"])
def test_tiny_configs_instantiate_in_transformers(name):
    transformers = pytest.importorskip("transformers")
    torch = pytest.importorskip("torch")
    cfg = builtin_config(name)
    config = transformers.CONFIG_MAPPING[cfg["model_type"]](**cfg)
    torch.manual_seed(0)
    model = getattr(transformers, cfg["architectures"][0])(config)
    n = sum(p.numel() for p in model.parameters())  # tied parameters are counted once
    assert _param_bytes(name, "fp32") == 4 * n


def test_unknown_model_lists_builtins():
    with pytest.raises(ValueError, match="unknown model 'gpt-5'.*llama-2-70b.*tiny-llama"):
        load_spec("gpt-5")


def test_local_paths(tmp_path):
    cfg = builtin_config("llama-2-7b")
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    assert load_spec(str(tmp_path)).hidden_size == 4096
    assert load_spec(str(tmp_path / "config.json")).num_layers == 32


def test_malformed_configs(tmp_path):
    (tmp_path / "config.json").write_text("{oops")
    with pytest.raises(ValueError, match="not valid JSON"):
        load_spec(str(tmp_path))
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ValueError, match="no config.json"):
        load_spec(str(empty))
    cfg = builtin_config("llama-2-7b")
    del cfg["intermediate_size"]
    with pytest.raises(ValueError, match="intermediate_size"):
        ModelSpec.from_config(cfg)
    with pytest.raises(ValueError, match="model_type"):
        ModelSpec.from_config({"hidden_size": 4})
    with pytest.raises(ValueError, match="unsupported model_type 'gpt2'"):
        ModelSpec.from_config({"model_type": "gpt2"})
    cfg = builtin_config("llama-2-7b")
    cfg["num_hidden_layers"] = "32"
    with pytest.raises(ValueError, match="num_hidden_layers"):
        ModelSpec.from_config(cfg)
    cfg = builtin_config("llama-2-70b")
    cfg["num_key_value_heads"] = 7
    with pytest.raises(ValueError, match="num_key_value_heads"):
        ModelSpec.from_config(cfg)
