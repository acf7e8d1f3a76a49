"""HF's `logits_processor` argument: the caller's own LogitsProcessors, run on the host side of each
decode step, as HF runs them (after every processor generate builds from its settings, before the
sampling warpers).

Their code is arbitrary Python (it may read the ids on the host, index with Python lists, sync), so
it cannot be captured: the decode graph then stops at the processed logits (Sampling.external), the
caller's processors run eagerly on the real requests' rows, and the draw (greedy argmax or HF's
warpers and a Gumbel-max draw) and the token write follow eagerly. Each step pays those launches
(nothing here waits for the GPU; a processor that reads a value on the host does). They see what
HF's see: the (requests, input width + new tokens) ids, each prompt left-padded with the pad id as HF
lays out a batch (dak keeps prompts right-padded), then the new tokens, a finished request's padded
with the pad id as in HF; and the (requests, vocab) fp32 scores.
"""

from __future__ import annotations

import torch

# HF's processor classes that generate builds from a setting dak applies: passing one of these while that
# setting is on would, in HF, replace the built one at its place in the list; dak asks for one or the other
BUILT = {"RepetitionPenaltyLogitsProcessor": "repetition_penalty",
         "MinNewTokensLengthLogitsProcessor": "min_new_tokens / min_length",
         "MinLengthLogitsProcessor": "min_new_tokens / min_length",
         "NoRepeatNGramLogitsProcessor": "no_repeat_ngram_size", "NoBadWordsLogitsProcessor": "bad_words_ids",
         "SequenceBiasLogitsProcessor": "sequence_bias", "SuppressTokensLogitsProcessor": "suppress_tokens",
         "SuppressTokensAtBeginLogitsProcessor": "begin_suppress_tokens",
         "ForcedBOSTokenLogitsProcessor": "forced_bos_token_id", "ForcedEOSTokenLogitsProcessor": "forced_eos_token_id",
         "InfNanRemoveLogitsProcessor": "remove_invalid_values",
         "ExponentialDecayLengthPenalty": "exponential_decay_length_penalty"}


def as_list(processors) -> list:
    """HF's `logits_processor` (a LogitsProcessorList or a list of callables proc(input_ids, scores) ->
    scores) as a list ([] for None); a clear error for anything else."""
    if processors is None:
        return []
    if not isinstance(processors, (list, tuple)) or not all(callable(p) for p in processors):
        raise ValueError("logits_processor must be a list of callables (HF's LogitsProcessorList of "
                         f"LogitsProcessor: processor(input_ids, scores) -> scores), got {processors!r}")
    return list(processors)


def host_processors(logits_processor, prefix_allowed_tokens_fn, sampling, k: int) -> list | None:
    """What one generate call runs on the host: HF's PrefixConstrainedLogitsProcessor for
    `prefix_allowed_tokens_fn` (batch_id = row // k, k copies of a prompt; its place in HF's list is
    before the forced BOS/EOS, which dak applies in the graph, so the two are not taken together), then
    the caller's `logits_processor`; None for neither."""
    out = []
    if prefix_allowed_tokens_fn is not None:
        if not callable(prefix_allowed_tokens_fn):
            raise ValueError("prefix_allowed_tokens_fn must be a callable (batch_id, input_ids) -> list of allowed "
                             f"token ids, as in HF; got {prefix_allowed_tokens_fn!r}")
        rules = sampling.rules
        if rules is not None and (rules.forced_bos is not None or rules.forced_eos):
            raise ValueError("prefix_allowed_tokens_fn with forced_bos_token_id / forced_eos_token_id is not "
                             "supported: HF applies the prefix constraint first, dak after them; pass one or the other")
        from transformers.generation.logits_process import PrefixConstrainedLogitsProcessor
        out.append(PrefixConstrainedLogitsProcessor(prefix_allowed_tokens_fn, k))
    return out + as_list(logits_processor) or None


def check_processors(processors, sampling, min_new: int) -> list:
    """`processors` (as_list's argument) as a list, refusing a processor of a class generate also
    builds from a setting of this call."""
    processors = as_list(processors)
    from dak.runtime.processors import Rules
    r = sampling.rules or Rules()
    on = {"repetition_penalty": sampling.repetition_penalty != 1, "min_new_tokens / min_length": min_new > 0,
          "no_repeat_ngram_size": r.ngram > 0, "bad_words_ids": bool(r.bias), "sequence_bias": bool(r.bias),
          "suppress_tokens": bool(r.suppress), "begin_suppress_tokens": bool(r.begin_suppress),
          "forced_bos_token_id": r.forced_bos is not None, "forced_eos_token_id": bool(r.forced_eos),
          "remove_invalid_values": r.invalid, "exponential_decay_length_penalty": bool(r.decay)}
    for p in processors:
        setting = BUILT.get(type(p).__name__)
        if setting is not None and on.get(setting):
            raise ValueError(f"logits_processor holds a {type(p).__name__}, and this call's {setting} builds one "
                             "too (HF would use yours in its place): pass the setting or the processor, not both")
    return processors


class HostProcessors:
    """The caller's processors over one generate call: `ids` (real, width) right-padded prompts of
    `plen` tokens; `pad` the id HF pads with. `scores` / `logits`: keep each step's scores (the
    processed logits, after the warpers of a sampling `s`: HF's output_scores) / raw fp32 logits (HF's
    output_logits) of the real requests, in `kept_scores` / `kept_logits`."""

    def __init__(self, processors: list, ids: torch.Tensor, plen: list[int], max_new: int, pad: int,
                 scores: bool = False, logits: bool = False, s=None):
        self.procs, self.real, self.width = processors, ids.shape[0], ids.shape[1]
        self.seq = torch.full((self.real, self.width + max_new), pad, dtype=torch.long, device=ids.device)
        for i, n in enumerate(plen):
            self.seq[i, self.width - n:self.width] = ids[i, :n]
        self.sampling = s
        self.kept_scores = [] if scores else None
        self.kept_logits = [] if logits else None

    def __call__(self, t: int, held: torch.Tensor, raw: torch.Tensor | None = None) -> torch.Tensor:
        """New token t's logits: the real rows of `held` (batch, V) fp32 through every processor, written
        back into `held` (the padding rows of the static batch are left as they are); `raw` the step's
        logits before any processor (kept when asked for)."""
        ids = self.seq[:, :self.width + t]
        if self.procs:
            scores = held[:self.real].clone()
            for p in self.procs:
                got = p(ids, scores)
                if not (isinstance(got, torch.Tensor) and tuple(got.shape) == tuple(scores.shape)
                        and got.is_floating_point()):
                    raise ValueError(f"logits processor {p!r} returned {_describe(got)}; HF's LogitsProcessors "
                                     f"return the (batch, vocab) float scores, here {tuple(scores.shape)}")
                scores = got
            held[:self.real] = scores.to(held.device, held.dtype)
        if self.kept_scores is not None:
            from dak.runtime.sampling import warp
            kept = held[:self.real].clone()
            self.kept_scores.append(warp(kept, self.sampling) if self.sampling.do_sample else kept)
        if self.kept_logits is not None:
            self.kept_logits.append(raw[:self.real].clone())
        return held

    def kept(self, cols: int) -> tuple:
        """(scores, logits): the first `cols` steps' of each, as tuples (None where not kept)."""
        return tuple(None if k is None else tuple(k[:cols]) for k in (self.kept_scores, self.kept_logits))

    def record(self, t: int, col: torch.Tensor) -> None:
        """New token t of each real request as returned (a finished request's is the pad id)."""
        self.seq[:, self.width + t] = col[:self.real].to(self.seq.device)


def _describe(got) -> str:
    if isinstance(got, torch.Tensor):
        return f"a {got.dtype} tensor of shape {tuple(got.shape)}"
    return repr(got)[:80]
