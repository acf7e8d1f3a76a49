"""HF's token-rule logits processors, applied inside the captured decode step (no host sync):
no_repeat_ngram_size (NoRepeatNGramLogitsProcessor), bad_words_ids (NoBadWordsLogitsProcessor),
sequence_bias (SequenceBiasLogitsProcessor), suppress_tokens and begin_suppress_tokens
(SuppressTokens[AtBegin]LogitsProcessor).

The settings are checked and normalized by HF's own processor classes (their errors, their EOS
filter of bad words), then held as a frozen `Rules`, part of the decode graph's key (Sampling.rules).
Rules that look back at earlier tokens (n-grams, sequences of more than one token) read a per-request
token history on the device, (batch, max_len) ids filled from the prompts and by each step's token
at its position; a request's history is its own prompt and new tokens (HF's reads the padded input
row, padding included). `begin_suppress_tokens` applies to the first new token, as in HF.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Rules:
    ngram: int = 0               # no_repeat_ngram_size (0: off)
    bias: tuple = ()             # ((token ids...), bias) of sequence_bias and bad_words_ids (-inf), HF's order
    suppress: tuple = ()         # suppress_tokens
    begin_suppress: tuple = ()   # begin_suppress_tokens (the first new token only)

    @property
    def needs_history(self) -> bool:
        return self.ngram > 0 or any(len(seq) > 1 for seq, _ in self.bias)

    def report(self) -> dict:
        """What `dak generate --json` lists of them (the ones set)."""
        out = {"no_repeat_ngram_size": self.ngram, "sequence_rules": len(self.bias),
               "suppress_tokens": len(self.suppress), "begin_suppress_tokens": len(self.begin_suppress)}
        return {k: v for k, v in out.items() if v}


def token_rules(vocab: int, eos_token_id=None, no_repeat_ngram_size=None, bad_words_ids=None, sequence_bias=None,
                suppress_tokens=None, begin_suppress_tokens=None, where: str = "") -> Rules | None:
    """The Rules of one generate call (None: no rule set), each setting checked as HF's processor
    checks it, and token ids beyond the vocabulary refused (HF refuses them on first use)."""
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
    rules = Rules(ngram, tuple((tuple(int(t) for t in seq), float(b)) for seq, b in bias.items()), suppress, begin)
    return None if rules == Rules() else rules


def _ids(name: str, value, where: str) -> tuple:
    """A list of token ids (HF ignores ids outside the vocabulary there, and so does dak)."""
    if value is None:
        return ()
    if isinstance(value, int) or not all(isinstance(t, int) and not isinstance(t, bool) and t >= 0
                                         for t in value):
        raise ValueError(f"{name} must be a list of token ids (integers >= 0), got {value!r}{where}")
    return tuple(sorted(set(value)))


class RuleState:
    """A Rules' tensors on the device, built once before capture."""

    def __init__(self, rules: Rules, vocab: int, device):
        self.rules = rules
        add = torch.zeros(vocab, dtype=torch.float32)
        for seq, b in rules.bias:
            if len(seq) == 1:
                add[seq[0]] += b
        add[[t for t in rules.suppress if t < vocab]] = -math.inf
        self.add = add.to(device) if add.any() else None
        begin = torch.zeros(vocab, dtype=torch.bool)
        begin[[t for t in rules.begin_suppress if t < vocab]] = True
        self.begin = begin.to(device)
        groups: dict[int, list] = {}
        for seq, b in rules.bias:
            if len(seq) > 1:
                groups.setdefault(len(seq) - 1, []).append((seq, b))
        self.groups = [(torch.tensor([s[:-1] for s, _ in g], device=device),
                        torch.tensor([s[-1] for s, _ in g], device=device),
                        torch.tensor([b for _, b in g], dtype=torch.float32, device=device))
                       for g in groups.values()]

    def apply(self, logits: torch.Tensor, history: torch.Tensor | None, lengths: torch.Tensor,
              first: bool = False) -> torch.Tensor:
        """(B, V) fp32 logits with the rules applied; `lengths` (B,) tokens each request has so far
        (history[b, :lengths[b]]); `first`: the first new token (begin_suppress_tokens)."""
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
        if first and self.rules.begin_suppress:
            logits = logits.masked_fill(self.begin, -math.inf)
        return logits


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
