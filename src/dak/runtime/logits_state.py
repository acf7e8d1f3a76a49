"""The device state of HF's logits processors over one static batch, kept by the engine and read by
its captured decode step: the tokens seen (repetition penalty), the EOS ids and the cache length from
which each request may end (min_new_tokens), the token rules' tensors, each request's token history
and prompt length (dak.runtime.processors), and the processed logits the caller's host-side processors
start from (dak.runtime.host_processors). Buffers are allocated before any capture (allocate) and
refilled per call (start); `process` and `note` run inside the graph.
"""

from __future__ import annotations

import torch

from dak.runtime.sampling import Sampling, hold_eos, penalize


class LogitsState:
    def __init__(self, batch: int, vocab: int, max_len: int, device):
        self.batch, self.vocab, self.max_len, self.device = batch, vocab, max_len, device
        self.seen: torch.Tensor | None = None  # (batch, V + 1) tokens seen, for a repetition penalty
        self.eos_ids: torch.Tensor | None = None  # (V,) bool: the EOS ids min_new_tokens holds back
        self.min_until: torch.Tensor | None = None  # (batch,) cache length from which a request may end
        self.history: torch.Tensor | None = None  # (batch, max_len) each request's ids, for token rules
        self.starts: torch.Tensor | None = None  # (batch,) prompt lengths: new tokens = cache length - this
        self.held: torch.Tensor | None = None  # (batch, V) fp32 processed logits, for host processors
        self.rules: dict = {}  # Rules -> RuleState

    def allocate(self, s: Sampling) -> None:
        """The buffers `s` needs (before any capture: a graph keeps their addresses)."""
        b, v, dev = self.batch, self.vocab, self.device
        if s.repetition_penalty != 1 and self.seen is None:
            self.seen = torch.zeros(b, v + 1, dtype=torch.bool, device=dev)
        if s.hold_eos and self.eos_ids is None:
            self.eos_ids = torch.zeros(v, dtype=torch.bool, device=dev)
            self.min_until = torch.zeros(b, dtype=torch.int32, device=dev)
        if s.external and self.held is None:
            self.held = torch.zeros(b, v, dtype=torch.float32, device=dev)
        if s.rules is None:
            return
        if s.rules not in self.rules:
            from dak.runtime.processors import RuleState
            self.rules[s.rules] = RuleState(s.rules, v, dev)
        if self.starts is None:
            self.starts = torch.zeros(b, dtype=torch.int32, device=dev)
        if s.rules.needs_history and self.history is None:
            self.history = torch.zeros(b, self.max_len, dtype=torch.long, device=dev)

    def start(self, s: Sampling, ids: torch.Tensor, plen: torch.Tensor, max_new: int, eos=None,
              min_new: int = 0) -> None:
        """One call's values: right-padded prompts `ids` (batch, L) of `plen` tokens, `max_new` new
        tokens, the EOS ids `eos` (a tensor) held back for `min_new` new tokens."""
        if s.hold_eos:
            self.eos_ids.zero_()
            self.eos_ids[eos] = True
            self.min_until.copy_(plen + min_new)
        if s.repetition_penalty != 1:  # a right-padded prompt's own tokens (HF leaves left padding out)
            pad = torch.arange(ids.shape[1], device=ids.device) >= plen.to(ids.device).unsqueeze(1)
            self.seen.zero_()
            self.seen.scatter_(1, ids.masked_fill(pad, self.vocab), True)  # padding: the spare last column
        if s.rules is not None:
            self.starts.copy_(plen)
            self.rules[s.rules].final.fill_(max_new - 1)
            if s.rules.needs_history:  # right-padded: a row's pads are overwritten by its new tokens
                self.history[:, :ids.shape[1]] = ids

    def process(self, logits: torch.Tensor, s: Sampling, lengths: torch.Tensor) -> torch.Tensor:
        """The logits after HF's logits processors, in HF's order: the token rules' sequence biases
        and bans, the EOS ids at -inf for requests whose cache (`lengths`) is shorter than min_until,
        the repetition penalty, then the rules HF applies after it (dak.runtime.processors)."""
        rules = self.rules[s.rules] if s.rules is not None else None
        if rules is not None:
            logits = rules.early(logits, self.history, lengths)
        if s.hold_eos:
            logits = hold_eos(logits, self.eos_ids, lengths < self.min_until)
        if s.repetition_penalty != 1:
            logits = penalize(logits, self.seen, s.repetition_penalty)
        if rules is not None:
            logits = rules.late(logits, lengths - self.starts)
        return logits

    def note(self, tok: torch.Tensor, s: Sampling, lengths: torch.Tensor) -> None:
        """The new tokens (B,) into the tokens seen (under a penalty) and the history (at each
        request's position: after its tokens so far)."""
        if s.repetition_penalty != 1:
            self.seen.scatter_(1, tok.unsqueeze(1), True)
        if s.rules is not None and s.rules.needs_history:
            self.history.scatter_(1, lengths.long().unsqueeze(1), tok.unsqueeze(1))
