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


def check_criteria(criteria) -> list | None:
    """HF's `stopping_criteria` (a StoppingCriteriaList or a list of StoppingCriteria) as a list, None
    for none; a clear error for anything else."""
    if criteria is None:
        return None
    if not isinstance(criteria, (list, tuple)) or not all(callable(c) for c in criteria):
        raise ValueError("stopping_criteria must be a list of callables (HF's StoppingCriteriaList of "
                         f"StoppingCriteria: criterion(input_ids, scores) -> (batch,) bool), got {criteria!r}")
    return list(criteria) or None


class EosStop:
    """Stopping bookkeeping for one generate call over a static batch whose first `real` rows are
    requests: at EOS ids (`eos_token_id`; None: none), at stop strings (`strings`, a
    dak.runtime.stop_strings.StopStrings already started; None: none) and at HF stopping criteria,
    all marked on the device as each step is recorded. As in HF, a stopped request's later tokens are `pad_token_id` only
    where EOS ids are given; without them it keeps its tokens and only the early end applies.
    `every_step`: read whether all are done after every step (a streamer syncs every step anyway,
    and then sees no step past the end), else every CHECK_EVERY steps. `criteria` (HF's
    StoppingCriteria, after `start_criteria`) are called after every step as HF calls them: with
    the (real, prompt + new) ids, prompts left-padded with the pad id, and scores None (HF passes
    scores only with output_scores)."""

    def __init__(self, eos_token_id, pad_token_id, vocab: int, batch: int, real: int, device,
                 strings=None, every_step: bool = False, criteria=None):
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
        self.criteria, self.seq, self.width = criteria, None, 0

    def start_criteria(self, ids: torch.Tensor, plen: list[int], max_new: int) -> None:
        """The ids the criteria see: each real prompt (`ids` right-padded, `plen` long) at the end of
        `ids.shape[1]` columns, left-padded with the pad id as HF lays out a batch, then the new tokens."""
        self.width = ids.shape[1]
        self.seq = torch.full((self.real, self.width + max_new), int(self.pad), dtype=torch.long, device=ids.device)
        for i, n in enumerate(plen):
            self.seq[i, self.width - n:self.width] = ids[i, :n]

    def record(self, out: torch.Tensor, t: int, tok: torch.Tensor) -> None:
        """Write step t's tokens into out[:, t]: pad where a request was already done (with EOS
        ids), then mark the requests whose token is an EOS, completes a stop string or meets a
        criterion as done."""
        col = torch.where(self.done, self.pad, tok) if self.pads else tok
        out[:, t] = col
        new = torch.isin(tok, self.eos) if self.pads else None
        if self.strings is not None:
            hit = self.strings.step(col)
            new = hit if new is None else new | hit
        if self.criteria:
            hit = torch.zeros_like(self.done)
            hit[:self.real] = self._criteria(col[:self.real], t)
            new = hit if new is None else new | hit
        if new is not None:
            new &= ~self.done
            self.ended = torch.where(new, t, self.ended)
            self.done |= new

    def _criteria(self, col: torch.Tensor, t: int) -> torch.Tensor:
        self.seq[:, self.width + t] = col
        ids = self.seq[:, :self.width + t + 1]
        hit = torch.zeros(self.real, dtype=torch.bool, device=col.device)
        for c in self.criteria:
            got = c(ids, None)
            if not (isinstance(got, torch.Tensor) and got.dtype == torch.bool and tuple(got.shape) == (self.real,)):
                raise ValueError(f"stopping criterion {c!r} returned {got!r}; HF's StoppingCriteria return a "
                                 f"(batch,) bool tensor, here ({self.real},)")
            hit |= got.to(hit.device)
        return hit

    def finished(self, t: int) -> bool:
        """Every real request done? Read from the device only every CHECK_EVERY steps (every step
        with `every_step`)."""
        if (t + 1) % CHECK_EVERY and not self.every_step:
            return False
        return bool(self.done[:self.real].all())

    def length(self, generated: int) -> int:
        """Columns to return: up to the last request's stop once all are done, else `generated`."""
        if bool(self.done[:self.real].all()):
            return int(self.ended[:self.real].max()) + 1
        return generated

    def stopped_steps(self) -> tuple:
        """Per real request, the step it stopped at (EOS or stop string), or None."""
        done, ended = self.done[:self.real].tolist(), self.ended[:self.real].tolist()
        return tuple(e if d else None for d, e in zip(done, ended))
