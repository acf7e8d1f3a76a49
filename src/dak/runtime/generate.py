"""HF-style `generate` of an offloaded model (bound as `model.generate` by dak.offload): the
arguments HF's generate takes that dak supports, the rest refused; defaults from the model's
generation config (dak.runtime.generation_config); the work done by the engine (dak.runtime.engine)."""

from __future__ import annotations

from dataclasses import replace

import torch

from dak.runtime.generation_config import (OUTPUTS, RULES, UNSET, call_config, config_lengths, generation_ids,
                                           min_new_for, outputs_for, return_sequences, rules_for, sampling_for)
from dak.runtime.host_processors import host_processors
from dak.runtime.stop_strings import StopStrings, check_stop_strings
from dak.runtime.stopping import check_criteria


def generate(self, input_ids: torch.Tensor | None = None, max_new_tokens: int | None = None,
             do_sample=UNSET, temperature=UNSET, top_k=UNSET, top_p=UNSET, min_p=UNSET, typical_p=UNSET,
             epsilon_cutoff=UNSET, eta_cutoff=UNSET, top_h=UNSET, repetition_penalty=UNSET,
             prompt_lengths=None, eos_token_id=UNSET, pad_token_id=UNSET, attention_mask=None, streamer=None,
             max_length: int | None = None, inputs: torch.Tensor | None = None, min_new_tokens=UNSET,
             min_length=UNSET, stop_strings=UNSET, tokenizer=None, stopping_criteria=None, max_time=UNSET,
             generation_config=None, num_return_sequences=UNSET, logits_processor=None,
             prefix_allowed_tokens_fn=None, **more):
    """HF-style generate: returns (B, L + new) ids, the prompt followed by max_new_tokens new tokens,
    or fewer when every request reached `eos_token_id` (later tokens of a stopped request are
    `pad_token_id`; none before min_new_tokens / min_length). As in HF, eos_token_id, pad_token_id,
    min_new_tokens, min_length and the sampling settings (temperature, top_k, top_p, min_p, typical_p,
    epsilon_cutoff, eta_cutoff, top_h: HF's own warpers, dak.runtime.sampling; and the repetition penalty, which greedy
    decoding applies too) not given come from the model's generation_config
    (dak.runtime.generation_config); eos_token_id=None always generates max_new_tokens. A padded
    batch takes `attention_mask` (left or right padding, as a tokenizer returns it) or `prompt_lengths`
    (right padding); each request's new tokens continue its own prompt. `streamer` (HF's
    BaseStreamer protocol: put(ids), end()) gets the input ids, then each step's tokens as they
    come (a host sync per step). As in HF, `inputs` may stand for input_ids, and `max_length`
    (prompt + new tokens) for max_new_tokens (default 32). `stop_strings` (a string or a list; default
    the generation config's) stop a request at the token that completes one, as HF's StopStringCriteria
    does, and need the model's `tokenizer` (dak.runtime.stop_strings). `stopping_criteria` (HF's
    StoppingCriteriaList) and `max_time` (seconds; default the generation config's) stop requests as
    in HF: the criteria are called after every step with the ids so far and scores None
    (dak.runtime.stopping.EosStop). `generation_config` (HF's GenerationConfig) stands in for the
    model's for this call, as in HF: its unset settings come from the model's, arguments win over it,
    and its max_new_tokens or max_length apply; settings dak does not apply are refused.
    `num_return_sequences` k (sampling only, as in HF) generates k sequences a prompt, returned as
    rows b * k ... b * k + k - 1, as HF's do; k x prompts must fit the offloaded batch.
    HF's token rules no_repeat_ngram_size, bad_words_ids, sequence_bias, suppress_tokens,
    begin_suppress_tokens, forced_bos_token_id, forced_eos_token_id, remove_invalid_values and
    exponential_decay_length_penalty (keywords; default the generation config's) apply inside the
    decode graph (dak.runtime.processors), to greedy and sampled decoding alike, as in HF.
    `logits_processor` (HF's LogitsProcessorList) and `prefix_allowed_tokens_fn` (HF's callable
    (prompt index, ids) -> allowed token ids) run on the host at every step, after dak's processors
    and before the sampling warpers, as in HF (dak.runtime.host_processors): uncaptured, they cost
    an eager draw a step (and a host sync where a processor reads a value).
    `return_dict_in_generate` returns HF's GenerateDecoderOnlyOutput: `sequences`, and with
    `output_scores` / `output_logits` a tuple of each step's (batch, vocab) fp32 scores (processed and,
    sampling, warped, as HF's) / raw logits (each default the generation config's); keeping them runs
    each step's draw on the host, as the processors above."""
    from dak.runtime.prompts import prompts_from_mask, resolve_lengths
    rules = {k: more.pop(k) for k in RULES if k in more}
    outputs = {k: more.pop(k) for k in OUTPUTS if k in more}
    if more:
        raise ValueError(f"dak's generate does not support {sorted(more)}; it takes input_ids (or inputs), "
                         "max_new_tokens (or max_length), min_new_tokens (or min_length), do_sample, temperature, top_k, "
                         "top_p, min_p, typical_p, epsilon_cutoff, eta_cutoff, top_h, repetition_penalty, prompt_lengths, attention_mask, eos_token_id, pad_token_id, "
                         "streamer, stop_strings, tokenizer, stopping_criteria, max_time, generation_config, "
                         "num_return_sequences, logits_processor, prefix_allowed_tokens_fn, "
                         + ", ".join(RULES + OUTPUTS[:4]))
    model = call_config(self, generation_config)  # where settings not given come from
    max_new_tokens, max_length = config_lengths(model, max_new_tokens, max_length)
    input_ids, max_new_tokens = resolve_lengths(input_ids, inputs, max_new_tokens, max_length)
    eos_token_id, pad_token_id = generation_ids(model, eos_token_id, pad_token_id)
    min_new = min_new_for(model, input_ids.shape[-1], min_new_tokens, min_length)
    given = dict(do_sample=do_sample, temperature=temperature, top_k=top_k, top_p=top_p, min_p=min_p,
                 typical_p=typical_p, epsilon_cutoff=epsilon_cutoff, eta_cutoff=eta_cutoff, top_h=top_h,
                 repetition_penalty=repetition_penalty)
    sampling = sampling_for(model, **{k: v for k, v in given.items() if v is not UNSET})
    sampling = replace(sampling, rules=rules_for(model, eos_token_id, input_ids.shape[-1], **rules))
    if streamer is not None and not (callable(getattr(streamer, "put", None))
                                     and callable(getattr(streamer, "end", None))):
        raise ValueError(f"streamer must have put(ids) and end() (HF's BaseStreamer), got {type(streamer).__name__}")
    if stop_strings is UNSET:
        stop_strings = getattr(getattr(model, "generation_config", None), "stop_strings", None)
    strings = check_stop_strings(stop_strings, tokenizer)
    ids, prompt_lengths = prompts_from_mask(input_ids, attention_mask, prompt_lengths)
    k = 1
    if isinstance(ids, torch.Tensor) and ids.dim() == 2:  # else the engine's checks say what is wrong
        k = return_sequences(model, num_return_sequences, sampling.do_sample, ids.shape[0], self.dak_engine.batch)
        if k > 1:  # each prompt k times, in a row (HF's _expand_inputs_for_generation)
            input_ids, ids = input_ids.repeat_interleave(k, 0), ids.repeat_interleave(k, 0)
            if prompt_lengths is not None:
                plen = torch.as_tensor(prompt_lengths).flatten()
                if plen.numel() != ids.shape[0] // k:
                    raise ValueError(f"prompt_lengths must be {ids.shape[0] // k} values, one a prompt")
                prompt_lengths = plen.repeat_interleave(k)
    processors = host_processors(logits_processor, prefix_allowed_tokens_fn, sampling, k)
    as_dict, keep_scores, keep_logits, renormalize = outputs_for(model, **outputs)
    stops = None if strings is None else StopStrings(strings, tokenizer)
    criteria = check_criteria(stopping_criteria)
    if max_time is UNSET:
        max_time = getattr(getattr(model, "generation_config", None), "max_time", None)
    if max_time is not None:
        if isinstance(max_time, bool) or not isinstance(max_time, (int, float)) or not max_time > 0:
            raise ValueError(f"max_time must be a positive number of seconds (or None), got {max_time!r}")
        from transformers.generation.stopping_criteria import MaxTimeCriteria
        criteria = (criteria or []) + [MaxTimeCriteria(max_time=float(max_time))]
    started = []

    def stream(col):  # the prompt once the input has passed the engine's checks, then each step
        if not started:
            streamer.put(input_ids.cpu())
            started.append(True)
        streamer.put(col.cpu())
    try:
        res = self.dak_engine.generate(ids, max_new_tokens, prompt_lengths,
                                       sampling, eos_token_id, pad_token_id,
                                       on_token=None if streamer is None else stream, min_new_tokens=min_new,
                                       stop_strings=stops, criteria=criteria, processors=processors,
                                       outputs=(as_dict and keep_scores, as_dict and keep_logits))
    finally:
        if started:
            streamer.end()
    self.dak_last = res
    sequences = torch.cat([input_ids.to(res.tokens.device), res.tokens], dim=1)
    if not as_dict:
        return sequences
    from transformers.generation.utils import GenerateDecoderOnlyOutput
    scores = res.scores if res.scores is None or not renormalize else tuple(s.log_softmax(-1) for s in res.scores)
    return GenerateDecoderOnlyOutput(sequences=sequences, scores=scores, logits=res.logits)

