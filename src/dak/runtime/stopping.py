"""Stopping at end-of-sequence tokens (and stop strings, dak.runtime.stop_strings), the way HF's
generate does, around a static decode graph.

The captured decode step always runs for the whole static batch; stopping happens outside it:
after each step, a request that has produced an EOS token is marked done and its later tokens
are replaced by the pad token (HF's convention). Generation ends early once every real request
is done. That check never stalls the GPU (DoneFlags): after each step the done mask is copied to
pinned host memory behind an event, and the host reads the newest copy that has landed, waiting
only for the one `AHEAD` steps back. So a finished batch runs at most `AHEAD` steps past its end,
and the host stays at most that far ahead of the GPU, which keeps the next steps queued.
"""

from __future__ import annotations

from collections import deque

import torch

AHEAD = 1  # a decode step (milliseconds) outlasts the host's work to queue the next (well under one)


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
    `every_step`: read whether all are done at once after every step (a streamer syncs every step
    anyway, and then sees no step past the end), else through DoneFlags. `criteria` (HF's
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
        self.strings = strings
        self.criteria, self.seq, self.width = criteria, None, 0
        self.flags = None if every_step else DoneFlags(batch, real, self.done.device)

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

    def finished(self, t: int, wait: bool = False) -> bool:
        """Every real request done, after step t? With `every_step` (or `wait`) read at once; else
        as far as DoneFlags has seen: at step t, certainly at step t - AHEAD."""
        if self.flags is None:
            return bool(self.done[:self.real].all())
        self.flags.push(t, self.done)
        return self.flags.read(t, wait)

    def length(self, generated: int) -> int:
        """Columns to return: up to the last request's stop once all are done, else `generated`."""
        if bool(self.done[:self.real].all()):
            return int(self.ended[:self.real].max()) + 1
        return generated

    def stopped_steps(self) -> tuple:
        """Per real request, the step it stopped at (EOS or stop string), or None."""
        done, ended = self.done[:self.real].tolist(), self.ended[:self.real].tolist()
        return tuple(e if d else None for d, e in zip(done, ended))


class DoneFlags:
    """Whether every real request is done, read without stalling the GPU. push(t, done) copies the
    (batch,) done mask after step t into a pinned host slot behind an event; read(t) takes the
    newest copy that has landed (event.query), and waits (event.synchronize) only for the copies of
    steps <= t - `ahead`: the host keeps `ahead` steps queued and learns of an end at most `ahead`
    steps late. On a CPU a copy lands at once: read(t) sees step t. `event`: a factory of objects
    with record/query/synchronize (torch.cuda.Event on a GPU; a test may pass its own)."""

    def __init__(self, batch: int, real: int, device, ahead: int | None = None, event=None):
        device = torch.device(device)
        ahead = AHEAD if ahead is None else ahead
        if event is None and device.type == "cuda":
            event = torch.cuda.Event
        self.real, self.ahead = real, ahead
        self.slots = torch.zeros((ahead + 1, batch), dtype=torch.bool, pin_memory=device.type == "cuda")
        self.events = [event() for _ in range(ahead + 1)] if event is not None else None
        self.pending = deque()  # (step, slot index) copied, not read yet
        self.seen = False  # all done, in the newest copy read

    def push(self, t: int, done: torch.Tensor) -> None:
        i = t % (self.ahead + 1)  # its last step, t - ahead - 1, was read by read(t - 1)
        self.slots[i].copy_(done, non_blocking=True)
        if self.events is not None:
            self.events[i].record()
        self.pending.append((t, i))

    def read(self, t: int, wait: bool = False) -> bool:
        newest = None
        while self.pending:
            step, i = self.pending[0]
            if self.events is not None and not self.events[i].query():
                if step > t - self.ahead and not wait:
                    break
                self.events[i].synchronize()
            newest = self.pending.popleft()[1]
        if newest is not None:
            self.seen = bool(self.slots[newest, :self.real].all())
        return self.seen
