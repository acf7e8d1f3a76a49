"""Stopping at end-of-sequence tokens (and stop strings, dak.runtime.stop_strings), the way HF's
generate does, around a static decode graph.

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
    """Stopping bookkeeping for one generate call over a static batch whose first `real` rows are
    requests: at EOS ids (`eos_token_id`; None: none) and at stop strings (`strings`, a
    dak.runtime.stop_strings.StopStrings; None: none). As in HF, a stopped request's later tokens
    are `pad_token_id` only where EOS ids are given; without them it keeps its tokens and only the
    early end applies. `every_step`: check stop strings as each step is recorded (a streamer syncs
    every step anyway), else every CHECK_EVERY steps and at the end."""

    def __init__(self, eos_token_id, pad_token_id, vocab: int, batch: int, real: int, device,
                 strings=None, every_step: bool = False):
        ids = [] if eos_token_id is None else token_ids(eos_token_id, "eos_token_id", vocab)
        self.eos = torch.tensor(ids, dtype=torch.long, device=device)
        self.pads = bool(ids)
        if pad_token_id is not None:
            pad = token_ids(pad_token_id, "pad_token_id", vocab)[0]
        else:  # HF's default: the first EOS id (unused without EOS ids: nothing is padded then)
            pad = ids[0] if ids else 0
        self.pad = torch.tensor(pad, device=device)
        self.done = torch.zeros(batch, dtype=torch.bool, device=device)
        self.done[real:] = True  # padding rows of the static batch never hold generation up
        self.ended = torch.zeros(batch, dtype=torch.long, device=device)  # step of each request's stop
        self.real = real
        self.strings, self.every_step = strings, every_step
        self.out, self.recorded = None, 0

    def record(self, out: torch.Tensor, t: int, tok: torch.Tensor) -> None:
        """Write step t's tokens into out[:, t]: pad where a request was already done (with EOS
        ids), then mark the requests whose token is an EOS (or, every_step, completes a stop
        string) as done."""
        out[:, t] = torch.where(self.done, self.pad, tok) if self.pads else tok
        if self.pads:
            new = torch.isin(tok, self.eos) & ~self.done
            self.ended = torch.where(new, t, self.ended)
            self.done |= new
        self.out, self.recorded = out, t + 1
        if self.strings is not None and self.every_step:
            self._scan()

    def _scan(self) -> None:
        """Mark the requests whose stop string the recorded steps complete (before any EOS of
        theirs): done at that step, their later recorded tokens pad (with EOS ids)."""
        lo = min(self.strings.first_needed(), self.recorded)  # only the columns the scan still needs
        done, ended = self.done[:self.real].tolist(), self.ended[:self.real].tolist()
        rows = self.out[:self.real, lo:self.recorded].tolist()
        new = [row[:max(0, ended[i] + 1 - lo)] if done[i] else row for i, row in enumerate(rows)]
        for i, t in self.strings.scan(new, lo).items():
            self.done[i], self.ended[i] = True, t
            if self.pads:
                self.out[i, t + 1:self.recorded] = self.pad

    def finished(self, t: int) -> bool:
        """Every real request done? Read from the GPU only every CHECK_EVERY steps (every step with
        `every_step`, whose streamer syncs anyway, so that it sees no step past the end)."""
        if (t + 1) % CHECK_EVERY and not self.every_step:
            return False
        if self.strings is not None and not self.every_step:
            self._scan()
        return bool(self.done[:self.real].all())

    def length(self, generated: int) -> int:
        """Columns to return: up to the last request's stop once all are done, else `generated`."""
        if self.strings is not None and not self.every_step and self.out is not None:
            self._scan()
        if bool(self.done[:self.real].all()):
            return int(self.ended[:self.real].max()) + 1
        return generated

    def stopped_steps(self) -> tuple:
        """Per real request, the step it stopped at (EOS or stop string), or None."""
        done, ended = self.done[:self.real].tolist(), self.ended[:self.real].tolist()
        return tuple(e if d else None for d, e in zip(done, ended))
