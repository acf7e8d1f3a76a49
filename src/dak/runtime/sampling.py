"""Sampling of the next tokens from fp32 logits, capturable (no host sync): greedy argmax, or
Gumbel-max sampling after HF's own logits warpers (temperature, top-h, top-k, top-p, min-p, typical-p,
epsilon and eta cutoffs, in the order and on the conditions HF's generate applies them); HF's repetition
penalty before either."""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Sampling:
    do_sample: bool = False
    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    min_p: float = 0.0  # HF's MinPLogitsWarper: drop tokens below min_p x the likeliest one's probability
    typical_p: float = 1.0  # HF's TypicalLogitsWarper (locally typical sampling); 1 = off
    epsilon_cutoff: float = 0.0  # HF's EpsilonLogitsWarper: drop tokens below this probability; 0 = off
    eta_cutoff: float = 0.0  # HF's EtaLogitsWarper: an epsilon cutoff scaled by the entropy; 0 = off
    top_h: float | None = None  # HF's TopHLogitsWarper (entropy-bounded top tokens), in (0, 1]; None = off
    repetition_penalty: float = 1.0  # HF's: logits of tokens seen (prompt and generated) / p if > 0, * p if < 0
    hold_eos: bool = False  # EOS ids held back (-inf) for requests short of their min_new_tokens (the step's key)
    rules: object = None  # dak.runtime.processors.Rules: n-gram, bad-word, bias and suppress rules (None: off)
    external: bool = False  # the caller's logits processors run on the host: the graph stops at the logits

    def __post_init__(self):
        if not (self.temperature > 0 and math.isfinite(self.temperature)):
            raise ValueError(f"temperature must be a positive number, got {self.temperature}")
        if isinstance(self.top_k, bool) or not isinstance(self.top_k, int) or self.top_k < 0:
            raise ValueError(f"top_k must be an integer >= 0 (0 = off), got {self.top_k!r}")
        for name, lo, hi, closed_lo, closed_hi in (("top_p", 0, 1, False, True), ("min_p", 0, 1, True, True),
                                                   ("typical_p", 0, 1, False, True),
                                                   ("epsilon_cutoff", 0, 1, True, False),
                                                   ("eta_cutoff", 0, 1, True, False)):
            v = getattr(self, name)
            if (isinstance(v, bool) or not isinstance(v, (int, float))
                    or not ((lo <= v if closed_lo else lo < v) and (v <= hi if closed_hi else v < hi))):
                span = f"{'[' if closed_lo else '('}{lo}, {hi}{']' if closed_hi else ')'}"
                raise ValueError(f"{name} must be in {span}, got {v!r}")
        h = self.top_h
        if h is not None and (isinstance(h, bool) or not isinstance(h, (int, float)) or not 0 < h <= 1):
            raise ValueError(f"top_h must be in (0, 1] (or None: off), got {h!r}")
        p = self.repetition_penalty
        if isinstance(p, bool) or not isinstance(p, (int, float)) or not (p > 0 and math.isfinite(p)):
            raise ValueError(f"repetition_penalty must be a positive number (1.0 = off), got {p!r}")


def greedy(logits: torch.Tensor) -> torch.Tensor:
    """logits.argmax(-1) for (B, V) logits, the first maximum on ties, in two passes over chunks
    of the vocabulary where V splits evenly: torch's one-pass argmax reduces each row in one
    block (27 us for 8 x 128256 on the H200, fifteenth session's profile), the chunked max
    spreads a row over many."""
    b, v = logits.shape
    chunks = next((c for c in (64, 48, 32, 24, 16) if v % c == 0 and v // c >= 256), 1)
    if chunks == 1:
        return logits.argmax(-1)
    vals, idx = logits.view(b, chunks, v // chunks).max(-1)   # first maximum within each chunk
    best = vals.argmax(-1, keepdim=True)                      # first chunk holding the row's maximum
    return (best * (v // chunks) + idx.gather(1, best)).squeeze(1)


def penalize(logits: torch.Tensor, seen: torch.Tensor, penalty: float) -> torch.Tensor:
    """HF's RepetitionPenaltyLogitsProcessor over a (B, >= V) bool mask of the tokens seen so far."""
    hit = seen[:, :logits.shape[-1]]
    return torch.where(hit, torch.where(logits < 0, logits * penalty, logits / penalty), logits)


def hold_eos(logits: torch.Tensor, eos: torch.Tensor, active: torch.Tensor) -> torch.Tensor:
    """HF's MinNewTokensLengthLogitsProcessor: the EOS ids (a (>= V,) bool mask) at -inf in the
    rows of `active` (B,) requests, which have fewer new tokens than their minimum."""
    return logits.masked_fill(eos[:logits.shape[-1]].unsqueeze(0) & active.unsqueeze(1), -math.inf)


def sample(logits: torch.Tensor, s: Sampling, seen: torch.Tensor | None = None) -> torch.Tensor:
    """(B, V) fp32 logits -> (B,) int64 next tokens; capturable (no host sync). `seen`: the
    (B, >= V) bool mask of tokens seen, needed when s.repetition_penalty != 1."""
    if s.repetition_penalty != 1:
        if seen is None:
            raise ValueError("a repetition penalty needs the mask of tokens seen (sample(..., seen=))")
        logits = penalize(logits, seen, s.repetition_penalty)
    return draw(logits, s)


def draw(logits: torch.Tensor, s: Sampling) -> torch.Tensor:
    """(B, V) fp32 logits, every logits processor applied -> (B,) int64 next tokens: greedy argmax, or
    HF's warpers and a Gumbel-max draw; capturable."""
    if not s.do_sample:
        return greedy(logits)
    width = top_width(s, logits.shape[-1])
    if width:  # draw among the top-k candidates only: no pass of the later warpers over the vocabulary
        vals, idx = warp_top(logits, s, width)
        return idx.gather(1, (vals + _gumbel(vals)).argmax(-1, keepdim=True)).squeeze(1)
    return greedy(warp(logits, s) + _gumbel(logits))


def _gumbel(like: torch.Tensor) -> torch.Tensor:
    return -torch.log(-torch.log(torch.rand_like(like).clamp_(1e-20, 1.0)))


def top_width(s: Sampling, vocab: int) -> int:
    """How many candidates a top-k sample is drawn from (0: the whole vocabulary): 2 x top_k, so that
    up to top_k tokens tying the k-th logit stay in, where that is at most 1/8 of the vocabulary."""
    return 2 * s.top_k if s.top_k and 16 * s.top_k <= vocab else 0


def warp_top(logits: torch.Tensor, s: Sampling, width: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(values, token ids), each (B, width): the `width` likeliest tokens after HF's warpers that run
    before top-k (temperature, top-h), then top-k and the later warpers on those candidates only. The
    tokens top-k drops are -inf, so they weigh nothing in a later warper's softmax: scattered back
    into the vocabulary (-inf elsewhere) this is warp()'s result, unless more than width - top_k
    tokens tie the k-th logit (HF keeps every tie; the ties past `width` are left out). Top-p then
    sorts `width` values a row instead of the vocabulary (Llama-2-7B at batch 512 on an H100: sampling
    with top-k 50 and top-p 0.9 cost 2.06 ms a decode step over the vocabulary, fifty-third session)."""
    from transformers.generation.logits_process import TopKLogitsWarper
    ws = warpers(s)
    cut = next(i for i, w in enumerate(ws) if isinstance(w, TopKLogitsWarper))
    for w in ws[:cut]:
        logits = w(None, logits)
    vals, idx = logits.topk(width, dim=-1)
    for w in ws[cut:]:
        vals = w(None, vals)
    return vals, idx


def warp(logits: torch.Tensor, s: Sampling) -> torch.Tensor:
    """(B, V) fp32 logits after HF's warpers for `s` (tokens left out at -inf): Gumbel-max over them
    samples as HF's softmax + multinomial does."""
    for w in warpers(s):
        logits = w(None, logits)
    return logits


@functools.lru_cache(maxsize=64)
def warpers(s: Sampling) -> tuple:
    """HF's own logits warpers for sampling setting `s`, in the order and on the conditions of HF's
    GenerationMixin._get_logits_processor (one request a row, so min_tokens_to_keep 1)."""
    from transformers.generation import logits_process as lp
    out = []
    if s.temperature != 1.0:
        out.append(lp.TemperatureLogitsWarper(float(s.temperature)))
    if s.top_h is not None:  # HF 4.57+; its Categorical checks its argument: run unchecked
        out.append(_unchecked(lp.TopHLogitsWarper(top_h=float(s.top_h))))
    if s.top_k != 0:
        out.append(lp.TopKLogitsWarper(top_k=s.top_k))
    if s.top_p < 1.0:
        out.append(lp.TopPLogitsWarper(top_p=float(s.top_p)))
    if s.min_p > 0:  # HF applies it whenever set; at 0 it drops nothing
        out.append(lp.MinPLogitsWarper(min_p=float(s.min_p)))
    if s.typical_p < 1.0:
        out.append(lp.TypicalLogitsWarper(mass=s.typical_p))
    if 0.0 < s.epsilon_cutoff < 1.0:
        out.append(lp.EpsilonLogitsWarper(epsilon=s.epsilon_cutoff))
    if 0.0 < s.eta_cutoff < 1.0:
        out.append(_unchecked(lp.EtaLogitsWarper(epsilon=s.eta_cutoff)))
    return tuple(out)


def _unchecked(warper):
    """`warper` with torch.distributions' argument checks off while it runs: HF's Eta and TopH warpers
    build a Categorical, whose check of the logits reads a flag on the host (a sync, which graph
    capture refuses). The logits are finite or -inf here, which the check would pass."""
    from torch.distributions import Distribution

    def call(ids, scores):
        before = Distribution._validate_args
        Distribution.set_default_validate_args(False)
        try:
            return warper(ids, scores)
        finally:
            Distribution.set_default_validate_args(before)
    return call
