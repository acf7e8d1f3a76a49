"""What `generate` takes from the model's generation config when an argument is not given, as
HF's generate does: the EOS and pad ids and the sampling settings. A checkpoint folder's
generation_config.json is read by `dak.offload` before anything is built (read_generation_config);
a model built from a config alone gets HF's GenerationConfig.from_model_config (its config.json's
ids). Explicit arguments always win: eos_token_id=None never stops, as in HF.
"""

from __future__ import annotations

import copy
import os
import warnings
from types import SimpleNamespace

from dak.runtime.stopping import token_ids

UNSET = object()  # a generate argument not given
RULES = ("no_repeat_ngram_size", "bad_words_ids", "sequence_bias", "suppress_tokens", "begin_suppress_tokens",
         "forced_bos_token_id", "forced_eos_token_id", "remove_invalid_values", "exponential_decay_length_penalty")
# HF's own defaults where the generation config leaves a setting unset (transformers 5: None there)
HF_DEFAULTS = {"do_sample": False, "temperature": 1.0, "top_k": 50, "top_p": 1.0, "min_p": 0.0, "typical_p": 1.0,
               "epsilon_cutoff": 0.0, "eta_cutoff": 0.0, "top_h": None, "repetition_penalty": 1.0}  # min_p None (off) in HF: 0 drops nothing
GREEDY_KEEPS = ("repetition_penalty",)  # what HF applies to greedy decoding too (a logits processor)


def read_generation_config(folder: str):
    """A checkpoint folder's generation_config.json as HF's GenerationConfig, or None without one
    (HF's from_pretrained gives a model this; local files only). Read before anything is built."""
    path = os.path.join(folder, "generation_config.json")
    if not os.path.isfile(path):
        return None
    from transformers import GenerationConfig
    try:
        return GenerationConfig.from_pretrained(folder, local_files_only=True)
    except (OSError, ValueError) as e:
        raise ValueError(f"could not read {path}: {e}; fix the file or remove it (the model's config.json "
                         "then gives generate its eos_token_id)") from None


APPLIED = set(HF_DEFAULTS) | {"eos_token_id", "pad_token_id", "bos_token_id", "decoder_start_token_id",
                               "transformers_version", "_from_model_config", "min_new_tokens", "min_length",
                               "stop_strings", "max_time", "num_return_sequences"} | set(RULES)
# settings that do not change which tokens come out (what HF returns, caching, compiling, beam-only
# options without beams), or values that leave a processor off
NO_EFFECT = {"use_cache", "cache_implementation", "cache_config", "compile_config", "disable_compile", "low_memory",
             "length_penalty", "early_stopping", "trust_remote_code", "is_assistant", "prefill_chunk_size",
             "renormalize_logits"}  # a log-softmax after the warpers: the same tokens (applied to kept scores)
NEUTRAL = {"num_beams": 1, "num_beam_groups": 1, "num_return_sequences": 1, "min_length": 0, "min_new_tokens": 0,
           "no_repeat_ngram_size": 0, "typical_p": 1.0, "epsilon_cutoff": 0.0, "eta_cutoff": 0.0, "min_p": 0.0,
           "diversity_penalty": 0.0, "encoder_repetition_penalty": 1.0, "guidance_scale": 1.0}


def ignored_settings(gc) -> list[str]:
    """The generation config's settings (those it sets away from HF's defaults) that change HF's
    tokens but dak's generate does not apply: max_length / max_new_tokens (dak's default is 32 new
    tokens), beams, other logits processors, ... Warned about once, when the model is offloaded."""
    try:
        diff = gc.to_diff_dict()
    except AttributeError:  # not an HF GenerationConfig: nothing is read from it but the ids and sampling
        return []
    return sorted(k for k, v in diff.items() if v is not None and k not in APPLIED and k not in NO_EFFECT
                  and not k.startswith(("output_", "return_", "assistant_", "num_assistant_"))
                  and NEUTRAL.get(k, object()) != v)


APPLIED_TEXT = ("eos/pad ids, do_sample, temperature, top_k, top_p, min_p, typical_p, epsilon_cutoff, eta_cutoff, top_h, "
                "repetition_penalty, no_repeat_ngram_size, bad_words_ids, sequence_bias, suppress_tokens, "
                "begin_suppress_tokens, forced_bos_token_id, forced_eos_token_id, remove_invalid_values, "
                "exponential_decay_length_penalty, renormalize_logits, min_new_tokens, min_length, stop_strings, "
                "max_time and num_return_sequences")


def warn_ignored(model) -> None:
    """Warn once (at offload) about the generation config's settings dak's generate will not apply."""
    ignored = ignored_settings(getattr(model, "generation_config", None))
    if ignored:
        warnings.warn(f"dak: the model's generation config sets {', '.join(ignored)}, which dak's generate does "
                      f"not apply (it takes {APPLIED_TEXT} from it; 32 new tokens unless max_new_tokens "
                      "is given)",
                      UserWarning, stacklevel=3)


LENGTHS = ("max_new_tokens", "max_length")  # taken from a config passed to generate, not from the model's


def call_config(model, generation_config):
    """What one generate call reads its defaults from: the model itself, or for HF's
    `generate(generation_config=...)` a stand-in whose generation config is the given one with the
    settings it leaves unset (None) taken from the model's, as HF's _prepare_generation_config merges
    them (arguments still win over both). The given config's own settings that dak does not apply are
    refused: they are the caller's request, not a checkpoint's default (which is only warned about)."""
    if generation_config is None:
        return model
    from transformers import GenerationConfig
    if not isinstance(generation_config, GenerationConfig):
        raise ValueError(f"generation_config must be a transformers GenerationConfig, got "
                         f"{type(generation_config).__name__}; or pass the settings to generate as arguments")
    refused = [k for k in ignored_settings(generation_config) if k not in LENGTHS]
    if refused:
        raise ValueError(f"the given generation_config sets {', '.join(refused)}, which dak's generate does not "
                         f"apply: leave them unset (it applies max_new_tokens, max_length, {APPLIED_TEXT})")
    gc = copy.deepcopy(generation_config)
    base = getattr(model, "generation_config", None)
    for k, v in (base.to_dict() if base is not None else {}).items():  # HF: update(defaults_only=True)
        if getattr(gc, k, None) is None and k not in LENGTHS:
            setattr(gc, k, v)
    return SimpleNamespace(generation_config=gc, config=model.config, dak_gc_name="the given generation_config")


def gc_name(model) -> str:
    """How error messages name where a setting not given came from."""
    return getattr(model, "dak_gc_name", "the model's generation_config")


def config_lengths(model, max_new_tokens, max_length):
    """(max_new_tokens, max_length) of one generate call: as given, else those of a generation_config
    passed to it (a call's config; the model's own max_length is not applied: dak's default is 32)."""
    if max_new_tokens is not None or max_length is not None or not hasattr(model, "dak_gc_name"):
        return max_new_tokens, max_length
    gc = model.generation_config
    if gc.max_new_tokens is not None:
        return gc.max_new_tokens, None
    return None, gc.max_length


def return_sequences(model, given, do_sample: bool, prompts: int, batch: int) -> int:
    """HF's num_return_sequences: as given, else the generation config's, else 1; more than 1 needs
    sampling (HF's rule) and room in the offloaded batch for every copy of every prompt."""
    where = ""
    if given is UNSET:
        given, where = getattr(getattr(model, "generation_config", None), "num_return_sequences", None), \
            f" ({gc_name(model)})"
        given = 1 if given is None else given
    if isinstance(given, bool) or not isinstance(given, int) or given < 1:
        raise ValueError(f"num_return_sequences{where} must be an integer >= 1, got {given!r}")
    if given > 1 and not do_sample:
        raise ValueError(f"num_return_sequences{where} is {given}, but greedy decoding gives one sequence a "
                         "prompt (as in HF): pass do_sample=True, or num_return_sequences=1")
    if given * prompts > batch:
        raise ValueError(f"num_return_sequences{where} {given} x {prompts} prompts = {given * prompts} sequences; "
                         f"this model was offloaded for batch {batch} (pass batch= to dak.offload to change it)")
    return given


def settings(model, defaults: dict, given: dict) -> tuple[dict, list[str]]:
    """({name: value}, the names taken from the generation config) for each name of `defaults`: as
    given, else the model's generation config's (None there is HF's "unset"), else the default."""
    gc = getattr(model, "generation_config", None)
    args, from_config = {}, []
    for name, default in defaults.items():
        value = given.get(name, UNSET)
        if value is UNSET:
            value = getattr(gc, name, None)
            from_config += [name] if value is not None else []
            value = default if value is None else value
        args[name] = value
    return args, from_config


def sampling_for(model, **given):
    """The Sampling of one generate call: do_sample, temperature, top_k, top_p, min_p, typical_p,
    epsilon_cutoff, eta_cutoff, repetition_penalty each as given (arguments left out are not in `given`), else the model's generation config's,
    else HF's default (HF_DEFAULTS; top_k 50 as in HF). Greedy calls keep only the repetition
    penalty (so all plain greedy calls share one decode graph), as HF ignores the rest then."""
    from dak.runtime.sampling import Sampling
    args, from_config = settings(model, HF_DEFAULTS, given)
    if not args["do_sample"]:
        args = {k: args[k] for k in GREEDY_KEEPS}
        from_config = [k for k in from_config if k in GREEDY_KEEPS]
    try:
        return Sampling(**args)
    except ValueError as e:
        if not from_config:
            raise
        raise ValueError(f"{e} ({gc_name(model)} set {', '.join(from_config)}: pass them to "
                         "generate)") from None


def rules_for(model, eos_token_id, width: int, **given):
    """The token rules (dak.runtime.processors.Rules, or None) of one generate call: each of RULES
    as given (arguments left out are not in `given`), else the generation config's; `width` the
    input's padded length."""
    from dak.runtime.processors import token_rules
    args, from_config = settings(model, dict.fromkeys(RULES), given)
    where = f" ({gc_name(model)} set {', '.join(from_config)})" if from_config else ""
    return token_rules(model.config.vocab_size, eos_token_id, width=width, where=where, **args)


OUTPUTS = ("return_dict_in_generate", "output_scores", "output_logits", "renormalize_logits", "output_attentions",
           "output_hidden_states")


def outputs_for(model, **given) -> tuple[bool, bool, bool, bool]:
    """(return_dict_in_generate, output_scores, output_logits, renormalize_logits) of one generate call,
    each as given, else the generation config's, else False (HF's); HF returns the scores and logits only
    in the dict, and renormalize_logits log-softmaxes the scores after the warpers (the tokens stay).
    Attentions and hidden states are not kept by dak's graphs: refused where they would be returned."""
    args, from_config = settings(model, dict.fromkeys(OUTPUTS, False), given)
    for name, value in args.items():
        if not isinstance(value, bool):
            where = f" ({gc_name(model)})" if name in from_config else ""
            raise ValueError(f"{name}{where} must be True or False, got {value!r}")
    if args["return_dict_in_generate"] and (args["output_attentions"] or args["output_hidden_states"]):
        which = [k for k in ("output_attentions", "output_hidden_states") if args[k]]
        where = f" ({gc_name(model)} set {', '.join(k for k in which if k in from_config)})" \
            if set(which) & set(from_config) else ""
        raise ValueError(f"dak's generate does not return attentions or hidden states ({', '.join(which)}"
                         f"{where}): leave them False; it returns sequences, scores (output_scores) and logits "
                         "(output_logits)")
    return args["return_dict_in_generate"], args["output_scores"], args["output_logits"], args["renormalize_logits"]


def min_new_for(model, width: int, min_new_tokens=UNSET, min_length=UNSET) -> int:
    """New tokens before a request may end at EOS, as HF: min_new_tokens, and min_length (prompt
    + new, the prompt counted at the input's padded `width`), each as given, else the generation
    config's; the larger of the two."""
    gc = getattr(model, "generation_config", None)
    out = 0
    for name, value in (("min_new_tokens", min_new_tokens), ("min_length", min_length)):
        where = "" if value is not UNSET else f" ({gc_name(model)})"
        value = getattr(gc, name, None) if value is UNSET else value
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"{name}{where} must be an integer >= 0, got {value!r}")
        out = max(out, value if name == "min_new_tokens" else value - width)
    return out


def generation_ids(model, eos_token_id=UNSET, pad_token_id=UNSET):
    """(eos_token_id, pad_token_id) for one generate call: an argument given wins (eos_token_id=None:
    no stopping); one not given comes from the model's generation config. Ids taken from there are
    checked against the vocabulary with a hint."""
    gc = getattr(model, "generation_config", None)
    from_config = eos_token_id is UNSET
    if from_config:
        eos_token_id = getattr(gc, "eos_token_id", None)
    if pad_token_id is UNSET:
        pad_token_id = getattr(gc, "pad_token_id", None)
    if from_config and eos_token_id is not None:
        vocab = model.config.vocab_size
        for name, value in (("eos_token_id", eos_token_id), ("pad_token_id", pad_token_id)):
            if value is None:
                continue
            try:
                token_ids(value, name, vocab)
            except ValueError as e:
                raise ValueError(f"{gc_name(model)}.{name}: {e}; pass eos_token_id=None to generate "
                                 f"without stopping, or valid ids") from None
    return eos_token_id, pad_token_id
