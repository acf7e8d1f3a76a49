"""``ModelSpec``: the architecture numbers the planner needs, parsed from an HF config.

Supported ``model_type``: opt, llama (Llama 2 and 3, GQA through
``num_key_value_heads``), mistral, qwen2, qwen3 (dense: RMSNorm of every head's q and k).  Sizes are counts of elements, not bytes.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from ..jsonfile import load_json
from .configs import BUILTIN_CONFIGS, builtin_config

SUPPORTED_MODEL_TYPES = ("opt", "llama", "mistral", "qwen2", "qwen3")


@dataclass(frozen=True)
class ModelSpec:
    name: str
    model_type: str
    hidden_size: int
    intermediate_size: int          # ffn_dim for OPT
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    vocab_size: int
    max_position_embeddings: int
    qkv_bias: bool
    o_bias: bool
    mlp_bias: bool
    gated_mlp: bool                 # gate/up/down (llama family) vs fc1/fc2 (OPT)
    tie_word_embeddings: bool
    learned_positions: int          # rows of the learned positional table (OPT: max_pos + 2), else 0
    norm_params_per_layer: int      # elements of the layer norms in one layer
    final_norm_params: int
    qk_norm: bool = False           # an RMSNorm over every head's q and k before the rotary (Qwen3)
    sliding_window: int = 0         # keys a sliding layer attends (0: none)
    sliding_layers: tuple = ()      # the layers that attend through it

    def window_at(self, layer: int) -> int:
        """Keys layer `layer` attends at most (its sliding window), or 0 for all of them."""
        return self.sliding_window if layer in self.sliding_layers else 0

    @property
    def q_dim(self) -> int:
        return self.num_heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.num_kv_heads * self.head_dim

    def kv_elements_per_token(self) -> int:
        """K and V elements per token per layer: 2 * kv_heads * head_dim."""
        return 2 * self.kv_dim

    @classmethod
    def from_config(cls, cfg: dict, name: str = "custom") -> "ModelSpec":
        if not isinstance(cfg, dict):
            raise ValueError(f"model config {name!r} must be a JSON object")
        mt = cfg.get("model_type")
        if mt is None:
            raise ValueError(f"model config {name!r} has no field 'model_type' "
                             f"(supported: {', '.join(SUPPORTED_MODEL_TYPES)})")
        if mt not in SUPPORTED_MODEL_TYPES:
            raise ValueError(f"model config {name!r}: unsupported model_type {mt!r} "
                             f"(supported: {', '.join(SUPPORTED_MODEL_TYPES)})")

        def need(field: str) -> int:
            if field not in cfg:
                raise ValueError(f"model config {name!r} ({mt}) is missing field '{field}'")
            v = cfg[field]
            if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
                raise ValueError(f"model config {name!r}: field '{field}' must be a positive integer, got {v!r}")
            return v

        hidden = need("hidden_size")
        layers = need("num_hidden_layers")
        heads = need("num_attention_heads")
        vocab = need("vocab_size")
        max_pos = need("max_position_embeddings")
        if mt == "opt":
            ffn = need("ffn_dim")
            if hidden % heads:
                raise ValueError(f"model config {name!r}: field 'hidden_size' ({hidden}) is not divisible "
                                 f"by 'num_attention_heads' ({heads})")
            proj = cfg.get("word_embed_proj_dim", hidden)
            if proj != hidden:
                raise ValueError(f"model config {name!r}: field 'word_embed_proj_dim' != hidden_size "
                                 f"(project_in/project_out) is not supported")
            if not cfg.get("do_layer_norm_before", True):
                raise ValueError(f"model config {name!r}: field 'do_layer_norm_before'=false (OPT-350m "
                                 f"post-norm) is not supported")
            bias = bool(cfg.get("enable_bias", True))
            affine = bool(cfg.get("layer_norm_elementwise_affine", True))
            ln = 2 * hidden if affine else 0
            return cls(name=name, model_type=mt, hidden_size=hidden, intermediate_size=ffn,
                       num_layers=layers, num_heads=heads, num_kv_heads=heads,
                       head_dim=hidden // heads, vocab_size=vocab, max_position_embeddings=max_pos,
                       qkv_bias=bias, o_bias=bias, mlp_bias=bias, gated_mlp=False,
                       tie_word_embeddings=bool(cfg.get("tie_word_embeddings", True)),
                       learned_positions=max_pos + 2, norm_params_per_layer=2 * ln,
                       final_norm_params=ln)
        inter = need("intermediate_size")
        kv = need("num_key_value_heads") if "num_key_value_heads" in cfg else heads
        if heads % kv:
            raise ValueError(f"model config {name!r}: field 'num_attention_heads' ({heads}) must be a "
                             f"multiple of 'num_key_value_heads' ({kv})")
        if cfg.get("head_dim") is not None:
            head_dim = need("head_dim")
        elif hidden % heads:
            raise ValueError(f"model config {name!r}: field 'hidden_size' ({hidden}) is not divisible "
                             f"by 'num_attention_heads' ({heads}) and no 'head_dim' is given")
        else:
            head_dim = hidden // heads
        norms = 2 * hidden
        if mt == "qwen2":
            qkv_bias, o_bias, mlp_bias = True, False, False
        elif mt == "qwen3":  # q_norm and k_norm: one RMSNorm weight of head_dim each
            qkv_bias = o_bias = bool(cfg.get("attention_bias", False))
            mlp_bias, norms = False, 2 * hidden + 2 * head_dim
        elif mt == "llama":
            qkv_bias = o_bias = bool(cfg.get("attention_bias", False))
            mlp_bias = bool(cfg.get("mlp_bias", False))
        else:  # mistral
            qkv_bias = o_bias = mlp_bias = False
        window, sliding = sliding_layers(cfg, layers)
        return cls(name=name, model_type=mt, hidden_size=hidden, intermediate_size=inter,
                   num_layers=layers, num_heads=heads, num_kv_heads=kv, head_dim=head_dim,
                   vocab_size=vocab, max_position_embeddings=max_pos, qkv_bias=qkv_bias,
                   o_bias=o_bias, mlp_bias=mlp_bias, gated_mlp=True,
                   tie_word_embeddings=bool(cfg.get("tie_word_embeddings", False)),
                   learned_positions=0, norm_params_per_layer=norms,
                   final_norm_params=hidden, qk_norm=mt == "qwen3", sliding_window=window,
                   sliding_layers=sliding)


def load_config(name_or_path: str) -> tuple[str, dict]:
    """Return (display name, HF config dict) for a built-in name or a local path."""
    if name_or_path.strip().lower() in BUILTIN_CONFIGS:
        return name_or_path.strip().lower(), builtin_config(name_or_path)
    path = name_or_path
    if os.path.isdir(path):
        path = os.path.join(path, "config.json")
        if not os.path.isfile(path):
            raise ValueError(f"folder {name_or_path!r} has no config.json")
    elif not os.path.isfile(path):
        builtin_config(name_or_path)  # raises the "unknown model" error listing names
    cfg = load_json(path, "model config")
    base = os.path.basename(os.path.dirname(os.path.abspath(path))) or path
    return base, cfg


def load_spec(name_or_path: str) -> ModelSpec:
    """ModelSpec from a built-in name, a config.json path or a folder containing one."""
    name, cfg = load_config(name_or_path)
    return ModelSpec.from_config(cfg, name=name)


def sliding_layers(cfg: dict, layers: int) -> tuple[int, tuple]:
    """(window, the layers attending through it) as HF builds them: Mistral's sliding_window on
    every layer; Qwen2/Qwen3 with use_sliding_window on layers >= max_window_layers; an explicit
    layer_types list where the config has one. (0, ()) without a window."""
    win = cfg.get("sliding_window")
    if (isinstance(win, bool) or not isinstance(win, int) or win <= 0
            or cfg.get("model_type") not in ("mistral", "qwen2", "qwen3")):  # HF's Llama and OPT attend in full
        return 0, ()
    types = cfg.get("layer_types")
    if isinstance(types, (list, tuple)) and len(types) == layers:
        sliding = tuple(i for i, t in enumerate(types) if t == "sliding_attention")
    elif cfg.get("model_type") == "mistral":
        sliding = tuple(range(layers))
    elif cfg.get("use_sliding_window", False):
        first = cfg.get("max_window_layers", 0)
        sliding = tuple(range(first if isinstance(first, int) and first >= 0 else 0, layers))
    else:
        sliding = ()
    return (win, sliding) if sliding else (0, ())


def check_learned_positions(spec: ModelSpec, max_len: int) -> None:
    """Refuse a run past a learned position table (OPT's): those positions have no embedding."""
    if spec.learned_positions and max_len > spec.max_position_embeddings:
        raise ValueError(f"prompt_len + gen_len = {max_len} exceeds {spec.name}'s max_position_embeddings "
                         f"{spec.max_position_embeddings} (its learned position table): lower them")


def check_positions(cfg: dict, spec: ModelSpec, max_len: int) -> str | None:
    """Refuse a run of `max_len` positions that `cfg`'s model cannot attend exactly (learned positions
    past their table); return a warning when a rotary model runs past the positions it was trained
    for, else None. (A sliding window is attended as HF attends it: dak.kernels.split_attention.)"""
    check_learned_positions(spec, max_len)
    if max_len <= spec.max_position_embeddings:
        return None
    return (f"{spec.name} was trained for {spec.max_position_embeddings} positions and this run reaches {max_len}: "
            "tokens past the limit run (rotary positions extrapolate) but their quality is not what the model gives "
            "within it; lower prompt_len + gen_len to stay inside")
