"""HF's token-rule logits processors, applied inside the captured decode step (no host sync):
no_repeat_ngram_size (NoRepeatNGramLogitsProcessor), bad_words_ids (NoBadWordsLogitsProcessor),
sequence_bias (SequenceBiasLogitsProcessor), suppress_tokens and begin_suppress_tokens
(SuppressTokens[AtBegin]LogitsProcessor), forced_bos_token_id and forced_eos_token_id
(Forced{BOS,EOS}TokenLogitsProcessor), remove_invalid_values (InfNanRemoveLogitsProcessor) and
exponential_decay_length_penalty (ExponentialDecayLengthPenalty).

The settings are checked and normalized by HF's own processor classes (their errors, their EOS
filter of bad words), then held as a frozen `Rules`, part of the decode graph's key (Sampling.rules).
Rules that look back at earlier tokens (n-grams, sequences of more than one token) read a per-request
token history on the device, (batch, max_len) ids filled from the prompts and by each step's token
at its position; a request's history is its own prompt and new tokens (HF's reads the padded input
row, padding included). Rules that depend on the step read each request's new-token count t (its
cache length less its prompt's), which is HF's cur_len less the input's width; the step forced_eos
fires at is a device value set per call (RuleState.final), so one graph serves every length.
HF applies the sequence bias before the repetition penalty and the rest after it: `early` and `late`
split them so (the engine's _held puts the penalty and the min_new_tokens hold between).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from dak.runtime.stopping import token_ids


@dataclass(frozen=True)
class Rules:
    ngram: int = 0               # no_repeat_ngram_size (0: off)
    bias: tuple = ()             # ((token ids...), bias) of sequence_bias and bad_words_ids (-inf), HF's order
    suppress: tuple = ()         # suppress_tokens
    begin_suppress: tuple = ()   # begin_suppress_tokens (at new token begin_at)
    begin_at: int = 0            # 1 where forced_bos_token_id takes the first new token (a 1-token input, as HF)
    forced_bos: int | None = None  # forced_bos_token_id, kept only for a 1-token input (HF forces it at cur_len 1)
    forced_eos: tuple = ()       # forced_eos_token_id: the only ids allowed at the last new token
    invalid: bool = False        # remove_invalid_values: nan -> 0, +-inf -> the fp32 extremes
    decay: tuple = ()            # exponential_decay_length_penalty: (start, factor, (eos ids...)); () off

    @property
    def needs_history(self) -> bool:
        return self.ngram > 0 or any(len(seq) > 1 for seq, _ in self.bias)

    def report(self) -> dict:
        """What `dak generate --json` lists of them (the ones set)."""
        out = {"no_repeat_ngram_size": self.ngram, "sequence_rules": len(self.bias),
               "suppress_tokens": len(self.suppress), "begin_suppress_tokens": len(self.begin_suppress),
               "forced_bos_token_id": self.forced_bos, "forced_eos_token_id": list(self.forced_eos),
               "remove_invalid_values": self.invalid, "exponential_decay_length_penalty": list(self.decay[:2])}
        return {k: v for k, v in out.items() if v or (k == "forced_bos_token_id" and v is not None)}


def token_rules(vocab: int, eos_token_id=None, no_repeat_ngram_size=None, bad_words_ids=None, sequence_bias=None,
                suppress_tokens=None, begin_suppress_tokens=None, forced_bos_token_id=None,
                forced_eos_token_id=None, remove_invalid_values=None, exponential_decay_length_penalty=None,
                width: int = 2, where: str = "") -> Rules | None:
    """The Rules of one generate call (None: no rule set), each setting checked as HF's processor
    checks it, and token ids beyond the vocabulary refused (HF refuses them on first use). `width`:
    the input's (padded) length, which decides whether forced_bos_token_id applies (HF: only to a
    1-token input)."""
    from transformers.generation import logits_process as lp
    ngram = 0 if no_repeat_ngram_size is None else no_repeat_ngram_size
    if isinstance(ngram, bool) or not isinstance(ngram, int) or ngram < 0:
        raise ValueError(f"no_repeat_ngram_size must be an integer >= 0 (0 = off), got {ngram!r}{where}")
    bias: dict = {}
    try:
        if sequence_bias is not None:
            bias.update(lp.SequenceBiasLogitsProcessor(sequence_bias=sequence_bias).sequence_bias)
        if bad_words_ids is not None:
            for seq, b in lp.NoBadWordsLogitsProcessor(bad_words_ids, eos_token_id=eos_token_id).sequence_bias.items():
                bias[seq] = bias.get(seq, 0.0) + b  # HF adds both processors' biases
    except ValueError as e:
        raise ValueError(f"{e}{where}") from None
    suppress = _ids("suppress_tokens", suppress_tokens, where)
    begin = _ids("begin_suppress_tokens", begin_suppress_tokens, where)
    far = sorted({t for seq in bias for t in seq if t >= vocab})
    if far:
        raise ValueError(f"sequence_bias / bad_words_ids hold token ids {far[:5]} beyond the model's vocabulary "
                         f"({vocab} ids){where}")
    try:
        bos = None if forced_bos_token_id is None else token_ids(forced_bos_token_id, "forced_bos_token_id", vocab)
        if bos is not None and len(bos) != 1:
            raise ValueError(f"forced_bos_token_id must be one token id, got {forced_bos_token_id!r}")
        forced_eos = () if forced_eos_token_id is None else tuple(
            token_ids(forced_eos_token_id, "forced_eos_token_id", vocab))
    except ValueError as e:
        raise ValueError(f"{e}{where}") from None
    if remove_invalid_values not in (None, True, False):
        raise ValueError(f"remove_invalid_values must be True or False, got {remove_invalid_values!r}{where}")
    decay = _decay(exponential_decay_length_penalty, eos_token_id, vocab, where)
    rules = Rules(ngram, tuple((tuple(int(t) for t in seq), float(b)) for seq, b in bias.items()), suppress, begin,
                  begin_at=int(bos is not None and width == 1),
                  forced_bos=bos[0] if bos is not None and width == 1 else None, forced_eos=forced_eos,
                  invalid=bool(remove_invalid_values), decay=decay)
    return None if rules == Rules() else rules


def _ids(name: str, value, where: str) -> tuple:
    """A list of token ids (HF ignores ids outside the vocabulary there, and so does dak)."""
    if value is None:
        return ()
    if isinstance(value, int) or not all(isinstance(t, int) and not isinstance(t, bool) and t >= 0
                                         for t in value):
        raise ValueError(f"{name} must be a list of token ids (integers >= 0), got {value!r}{where}")
    return tuple(sorted(set(value)))


def _decay(value, eos_token_id, vocab: int, where: str) -> tuple:
    """exponential_decay_length_penalty (start, factor) as (start, factor, eos ids), () for None."""
    if value is None:
        return ()
    ok = (isinstance(value, (tuple, list)) and len(value) == 2 and isinstance(value[0], int)
          and not isinstance(value[0], bool) and value[0] >= 0 and isinstance(value[1], (int, float))
          and not isinstance(value[1], bool) and math.isfinite(value[1]) and value[1] > 0)
    if not ok:
        raise ValueError("exponential_decay_length_penalty must be (start_index, decay_factor): an integer >= 0 "
                         f"and a positive number (1.0: no change), got {value!r}{where}")
    if eos_token_id is None:
        raise ValueError(f"exponential_decay_length_penalty raises the EOS ids' logits, but this call has no "
                         f"eos_token_id{where}: pass eos_token_id, or leave the penalty out")
    return int(value[0]), float(value[1]), tuple(sorted(set(token_ids(eos_token_id, "eos_token_id", vocab))))


class RuleState:
    """A Rules' tensors on the device, built once before capture. `final` (1,): the new-token index
    forced_eos fires at, set by each call (its max_new_tokens - 1) outside the graph."""

    def __init__(self, rules: Rules, vocab: int, device):
        self.rules = rules
        add = torch.zeros(vocab, dtype=torch.float32)
        for seq, b in rules.bias:
            if len(seq) == 1:
                add[seq[0]] += b
        self.add = add.to(device) if add.any() else None
        self.suppress = _mask(rules.suppress, vocab, device)
        self.begin = _mask(rules.begin_suppress, vocab, device)
        self.bos = _mask(() if rules.forced_bos is None else (rules.forced_bos,), vocab, device)
        self.eos = _mask(rules.forced_eos, vocab, device)
        self.decay_eos = torch.tensor(rules.decay[2] if rules.decay else [], dtype=torch.long, device=device)
        self.final = torch.full((1,), -1, dtype=torch.int32, device=device)
        groups: dict[int, list] = {}
        for seq, b in rules.bias:
            if len(seq) > 1:
                groups.setdefault(len(seq) - 1, []).append((seq, b))
        self.groups = [(torch.tensor([s[:-1] for s, _ in g], device=device),
                        torch.tensor([s[-1] for s, _ in g], device=device),
                        torch.tensor([b for _, b in g], dtype=torch.float32, device=device))
                       for g in groups.values()]

    def apply(self, logits: torch.Tensor, history: torch.Tensor | None, lengths: torch.Tensor,
              t: torch.Tensor) -> torch.Tensor:
        """(B, V) fp32 logits with every rule applied (no penalty between); `lengths` (B,) tokens each
        request has so far (history[b, :lengths[b]]); `t` (B,) its new tokens so far."""
        return self.late(self.early(logits, history, lengths), t)

    def early(self, logits: torch.Tensor, history: torch.Tensor | None, lengths: torch.Tensor) -> torch.Tensor:
        """The sequence biases and bad words, then the n-gram ban (HF: the bias before the repetition
        penalty; the -inf of bad words and n-grams is the same on either side of it)."""
        if self.add is not None:
            logits = logits + self.add
        n = lengths.long()
        for prefixes, last, bias in self.groups:  # a sequence's last token, where its prefix ends the row
            p = prefixes.shape[1]
            tail = history.gather(1, (n[:, None] - p + torch.arange(p, device=n.device)).clamp_min(0))
            match = (tail[:, None, :] == prefixes[None]).all(-1) & (n >= p)[:, None]
            logits = logits.index_add(1, last, torch.where(match, bias, 0.0))
        if self.rules.ngram:
            logits = ban_ngrams(logits, history, n, self.rules.ngram)
        return logits

    def late(self, logits: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        """What HF applies after the repetition penalty and min_new_tokens, in its order: forced BOS
        (new token 0), forced EOS (new token `final`), invalid values, the EOS length penalty,
        suppress_tokens, begin_suppress_tokens (new token begin_at). `t` (B,) new tokens so far."""
        r = self.rules
        t = t.long()
        for mask, at in ((self.bos, 0 if r.forced_bos is not None else None),
                         (self.eos, self.final if r.forced_eos else None)):
            if at is not None:  # the row's only tokens left: the forced ids, at logit 0
                forced = torch.where(mask, 0.0, -math.inf)
                logits = torch.where((t == at)[:, None], forced, logits)
        if r.invalid:
            big = torch.finfo(logits.dtype).max
            logits = logits.nan_to_num(0.0, big, -big)
        if r.decay:
            start, factor, _ = r.decay
            eos = logits[:, self.decay_eos]
            steps = (t - start).clamp_min(0).double()[:, None]  # HF: a Python float (double), then fp32
            penalty = eos.abs() * (torch.pow(factor, steps) - 1).to(logits.dtype)
            penalty = penalty.masked_fill(~torch.isfinite(eos), 0.0)
            logits = logits.index_add(1, self.decay_eos, penalty)
        if r.suppress:
            logits = logits.masked_fill(self.suppress, -math.inf)
        if r.begin_suppress:
            logits = logits.masked_fill(self.begin & (t == r.begin_at)[:, None], -math.inf)
        return logits


def _mask(ids, vocab: int, device) -> torch.Tensor:
    """(V,) bool: the ids (those past the vocabulary left out, as HF's suppression ignores them)."""
    mask = torch.zeros(vocab, dtype=torch.bool)
    mask[[t for t in ids if t < vocab]] = True
    return mask.to(device)


def ban_ngrams(logits: torch.Tensor, history: torch.Tensor, n: torch.Tensor, size: int) -> torch.Tensor:
    """HF's no_repeat_ngram_size over each row's first n[b] tokens: every token that followed an
    earlier occurrence of the row's last size - 1 tokens goes to -inf. One pass over the whole
    (static) history: windows past a row's length are masked out."""
    b, v = logits.shape
    win = history.unfold(1, size, 1)                                   # (B, S - size + 1, size)
    start = torch.arange(win.shape[1], device=n.device)
    last = history.gather(1, (n[:, None] - (size - 1) + torch.arange(size - 1, device=n.device)).clamp_min(0))
    hit = (win[:, :, :size - 1] == last[:, None, :]).all(-1) & (start[None] <= (n - size)[:, None])
    banned = torch.where(hit, win[:, :, size - 1].long(), v)           # misses to a spare column
    mask = torch.zeros(b, v + 1, dtype=torch.bool, device=logits.device).scatter_(1, banned, True)
    return logits.masked_fill(mask[:, :v], -math.inf)
