"""Stopping at end-of-sequence tokens, the way HF's generate does, around a static decode graph.

The captured decode step always runs for the whole static batch; stopping happens outside it:
after each step, a request that has produced an EOS token is marked done and its later tokens
are replaced by the pad token (HF's convention). Generation ends early once every real request
is done; that check reads one flag from the GPU, so it runs every `CHECK_EVERY` steps rather
than each step (a step costs tens of microseconds, a device-to-host read about as much).
"""

from __future__ import annotations

import torch

CHECK_EVERY = 8


def token_ids(value, name: str, vocab: int) -> list[int]:
    vals = [value] if isinstance(value, int) and not isinstance(value, bool) else value
    if (not isinstance(vals, (list, tuple)) or not vals
            or any(isinstance(v, bool) or not isinstance(v, int) for v in vals)):
        raise ValueError(f"{name} must be a token id or a non-empty list of them, got {value!r}")
    if any(not 0 <= v < vocab for v in vals):
        raise ValueError(f"{name} {value!r} is outside the vocabulary [0, {vocab})")
    return list(vals)


class EosStop:
    """EOS bookkeeping for one generate call over a static batch whose first `real` rows are requests."""

    def __init__(self, eos_token_id, pad_token_id, vocab: int, batch: int, real: int, device):
        self.eos = torch.tensor(token_ids(eos_token_id, "eos_token_id", vocab), device=device)
        pad = self.eos[0].item() if pad_token_id is None else token_ids(pad_token_id, "pad_token_id", vocab)[0]
        self.pad = torch.tensor(pad, device=device)
        self.done = torch.zeros(batch, dtype=torch.bool, device=device)
        self.done[real:] = True  # padding rows of the static batch never hold generation up
        self.ended = torch.zeros(batch, dtype=torch.long, device=device)  # step of each request's EOS
        self.real = real

    def record(self, out: torch.Tensor, t: int, tok: torch.Tensor) -> None:
        """Write step t's tokens into out[:, t]: pad where a request was already done, then mark
        the requests whose token is an EOS as done."""
        out[:, t] = torch.where(self.done, self.pad, tok)
        new = torch.isin(tok, self.eos) & ~self.done
        self.ended = torch.where(new, t, self.ended)
        self.done |= new

    def finished(self, t: int) -> bool:
        """Every real request done? Read from the GPU only every CHECK_EVERY steps."""
        return (t + 1) % CHECK_EVERY == 0 and bool(self.done[:self.real].all())

    def length(self, generated: int) -> int:
        """Columns to return: up to the last request's EOS once all are done, else `generated`."""
        if bool(self.done[:self.real].all()):
            return int(self.ended[:self.real].max()) + 1
        return generated

