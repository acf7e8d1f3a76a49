"""Built-in Hugging Face ``config.json`` dictionaries (no network access ever).

Values are copied from the published configs of each checkpoint.  The ``tiny-*``
entries are small but valid HF configs with deliberately odd sizes (and GQA in
tiny-llama / tiny-qwen2 / tiny-mistral / tiny-qwen3) so tests can instantiate them with
random weights in ``transformers``.
"""

from __future__ import annotations

import copy


def _llama(hidden, inter, layers, heads, kv, vocab, max_pos, rope_theta, dtype, eps=1e-5, **extra):
    cfg = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama",
        "hidden_size": hidden, "intermediate_size": inter, "num_hidden_layers": layers,
        "num_attention_heads": heads, "num_key_value_heads": kv, "vocab_size": vocab,
        "max_position_embeddings": max_pos, "rope_theta": rope_theta, "rms_norm_eps": eps,
        "hidden_act": "silu", "attention_bias": False, "mlp_bias": False,
        "tie_word_embeddings": False, "torch_dtype": dtype, "initializer_range": 0.02,
        "bos_token_id": 1, "eos_token_id": 2, "use_cache": True,
    }
    cfg.update(extra)
    return cfg


def _opt(hidden, ffn, layers, heads, vocab, max_pos, **extra):
    cfg = {
        "architectures": ["OPTForCausalLM"], "model_type": "opt",
        "hidden_size": hidden, "ffn_dim": ffn, "num_hidden_layers": layers,
        "num_attention_heads": heads, "vocab_size": vocab,
        "max_position_embeddings": max_pos, "word_embed_proj_dim": hidden,
        "do_layer_norm_before": True, "activation_function": "relu",
        "enable_bias": True, "layer_norm_elementwise_affine": True,
        "tie_word_embeddings": True, "torch_dtype": "float16", "dropout": 0.1,
        "attention_dropout": 0.0, "init_std": 0.02, "layerdrop": 0.0,
        "bos_token_id": 2, "eos_token_id": 2, "pad_token_id": 1, "use_cache": True,
    }
    cfg.update(extra)
    return cfg


def _qwen2(hidden, inter, layers, heads, kv, vocab, max_pos, **extra):
    cfg = {
        "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2",
        "hidden_size": hidden, "intermediate_size": inter, "num_hidden_layers": layers,
        "num_attention_heads": heads, "num_key_value_heads": kv, "vocab_size": vocab,
        "max_position_embeddings": max_pos, "rope_theta": 1000000.0, "rms_norm_eps": 1e-6,
        "hidden_act": "silu", "tie_word_embeddings": False, "torch_dtype": "bfloat16",
        "sliding_window": max_pos, "use_sliding_window": False, "max_window_layers": layers,
        "attention_dropout": 0.0, "initializer_range": 0.02,
        "bos_token_id": 151643, "eos_token_id": 151643, "use_cache": True,
    }
    cfg.update(extra)
    return cfg


def _qwen3(hidden, inter, layers, heads, kv, head_dim, vocab, max_pos, tie, **extra):
    cfg = {
        "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3",
        "hidden_size": hidden, "intermediate_size": inter, "num_hidden_layers": layers,
        "num_attention_heads": heads, "num_key_value_heads": kv, "head_dim": head_dim, "vocab_size": vocab,
        "max_position_embeddings": max_pos, "rope_theta": 1000000.0, "rms_norm_eps": 1e-6,
        "hidden_act": "silu", "attention_bias": False, "tie_word_embeddings": tie, "torch_dtype": "bfloat16",
        "sliding_window": None, "use_sliding_window": False, "max_window_layers": layers,
        "attention_dropout": 0.0, "initializer_range": 0.02,
        "bos_token_id": 151643, "eos_token_id": 151645, "use_cache": True,
    }
    cfg.update(extra)
    return cfg


def _mistral(hidden, inter, layers, heads, kv, vocab, max_pos, window, **extra):
    cfg = {
        "architectures": ["MistralForCausalLM"], "model_type": "mistral",
        "hidden_size": hidden, "intermediate_size": inter, "num_hidden_layers": layers,
        "num_attention_heads": heads, "num_key_value_heads": kv, "vocab_size": vocab,
        "max_position_embeddings": max_pos, "rope_theta": 10000.0, "rms_norm_eps": 1e-5,
        "hidden_act": "silu", "sliding_window": window, "tie_word_embeddings": False,
        "torch_dtype": "bfloat16", "initializer_range": 0.02,
        "bos_token_id": 1, "eos_token_id": 2, "use_cache": True,
    }
    cfg.update(extra)
    return cfg


BUILTIN_CONFIGS: dict[str, dict] = {
    "opt-6.7b": _opt(4096, 16384, 32, 32, 50272, 2048),
    "opt-30b": _opt(7168, 28672, 48, 56, 50272, 2048),
    "llama-2-7b": _llama(4096, 11008, 32, 32, 32, 32000, 4096, 10000.0, "float16"),
    "llama-2-70b": _llama(8192, 28672, 80, 64, 8, 32000, 4096, 10000.0, "float16"),
    "llama-3-8b": _llama(4096, 14336, 32, 32, 8, 128256, 8192, 500000.0, "bfloat16",
                         bos_token_id=128000, eos_token_id=128001),
    "llama-3-70b": _llama(8192, 28672, 80, 64, 8, 128256, 8192, 500000.0, "bfloat16",
                          bos_token_id=128000, eos_token_id=128001),
    "qwen2.5-7b": _qwen2(3584, 18944, 28, 28, 4, 152064, 32768,
                         sliding_window=131072, max_window_layers=28),
    "mistral-7b": _mistral(4096, 14336, 32, 32, 8, 32000, 32768, 4096),
    "qwen3-8b": _qwen3(4096, 12288, 36, 32, 8, 128, 151936, 40960, False),
    "qwen3-32b": _qwen3(5120, 25600, 64, 64, 8, 128, 151936, 40960, False),
    # Tiny test models: head_dim 16 or 20, odd vocab/intermediate sizes.
    "tiny-llama": _llama(96, 200, 3, 6, 2, 1001, 512, 10000.0, "float32",
                         pad_token_id=0),
    "tiny-opt": _opt(64, 144, 2, 4, 1003, 256, torch_dtype="float32", dropout=0.0),  # head_dim 16
    "tiny-qwen2": _qwen2(112, 232, 3, 7, 1, 997, 512, torch_dtype="float32",
                         bos_token_id=1, eos_token_id=2),
    "tiny-mistral": _mistral(64, 176, 4, 4, 2, 999, 512, 256, torch_dtype="float32"),
    # q_dim (5 x 32 = 160) wider than hidden (80), as Qwen3-32B's; tied embeddings, as the small Qwen3s
    "tiny-qwen3": _qwen3(80, 184, 3, 5, 1, 32, 1009, 512, True, torch_dtype="float32",
                         bos_token_id=1, eos_token_id=2),
}


def builtin_names() -> list[str]:
    return list(BUILTIN_CONFIGS)


def builtin_config(name: str) -> dict:
    """A deep copy of a built-in config dict; ValueError listing the names if unknown."""
    key = name.strip().lower()
    if key not in BUILTIN_CONFIGS:
        raise ValueError(f"unknown model {name!r}: pass a built-in name ({', '.join(BUILTIN_CONFIGS)}) "
                         f"or a path to a config.json file or a folder containing one")
    return copy.deepcopy(BUILTIN_CONFIGS[key])
