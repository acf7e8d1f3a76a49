"""Stop strings (HF's `generate(stop_strings=..., tokenizer=...)`), checked on the host around the
static decode graph.

As HF's StopStringCriteria, a request stops at the first step whose token completes one of the
strings: the string occurs in the decoded text and overlaps that step's token (a string already
in the prompt, or wholly inside earlier tokens, does not count; a token that runs past the
string's end, "st" + "opera" for "stop", does). The stopping token is kept. HF matches on the
tokenizer's token strings; dak matches on `tokenizer.decode` of a window of the last tokens
(prompt tokens included, so a string may start in the prompt), which agrees wherever decoding a
window is the concatenation of its tokens' text.

Each new token costs one `decode` (its window's text against the text one token shorter; 8.5 us
a token with an HF fast tokenizer on a 2-core CPU, 4.3 ms a step at batch 512). The graph never
waits for the check: without a streamer the new tokens are read every
`dak.runtime.stopping.CHECK_EVERY` steps (and at the end), and a request found stopped a few
steps back has its later tokens replaced by the pad token then; with a streamer (which already
syncs every step) each step is checked before the streamer sees it.
"""

from __future__ import annotations

import os

WINDOW_EXTRA = 4  # tokens beyond the longest string's length in characters (a token is >= 1 char)


def check_stop_strings(stop_strings, tokenizer) -> list[str] | None:
    """The strings as a list, None for none; a clear error for anything else (HF's rule: a
    tokenizer is needed)."""
    if stop_strings is None:
        return None
    strings = [stop_strings] if isinstance(stop_strings, str) else stop_strings
    if (not isinstance(strings, (list, tuple)) or not strings
            or any(not isinstance(s, str) or not s for s in strings)):
        raise ValueError(f"stop_strings must be a non-empty string or a non-empty list of them, got {stop_strings!r}")
    if tokenizer is None:
        raise ValueError("stop_strings need the model's tokenizer: pass tokenizer= to generate "
                         "(as HF's generate requires)")
    if not callable(getattr(tokenizer, "decode", None)):
        raise ValueError(f"tokenizer must have decode(ids) (an HF tokenizer), got {type(tokenizer).__name__}")
    return list(strings)


class StopStrings:
    """Per-request scan state of one generate call; `start` binds it to the call's prompts."""

    def __init__(self, strings: list[str], tokenizer):
        self.strings, self.tokenizer = strings, tokenizer
        self.window = max(len(s) for s in strings) + WINDOW_EXTRA
        self.start([])

    def start(self, prompts: list[list[int]]) -> None:
        """Begin a call: `prompts` are the real requests' prompt ids (lists of ints, no padding)."""
        self.prompts = [list(p[-self.window:]) for p in prompts]
        self.scanned = [0] * len(prompts)        # new tokens of each request already looked at
        self.stopped: list[int | None] = [None] * len(prompts)  # the step each request stopped at

    def _first_completing(self, ctx: list[int], toks: list[int]) -> int | None:
        """The index of the first of `toks` that completes a string (an occurrence overlapping its
        text), decoded after `ctx`, or None: one decode a token, each token's text found where its
        decoding parts from the one before (they can differ before the end: a partial UTF-8
        character, or clean-up of spaces, completed by the new token)."""
        before = self.tokenizer.decode(ctx)
        for k in range(len(toks)):
            text = self.tokenizer.decode(ctx + toks[:k + 1])
            new_from = len(os.path.commonprefix([before, text]))
            if any(s in text[max(0, new_from - len(s) + 1):] for s in self.strings):
                return k
            before = text
        return None

    def scan(self, new: list[list[int]], offset: int = 0) -> dict[int, int]:
        """{request: step} for the requests whose stop string is completed within `new` beyond what
        earlier scans looked at. new[i]: request i's new tokens from step `offset` on (up to its EOS if
        it had one); `offset` must leave each request's last `window` tokens before its first
        unscanned step in `new` (`first_needed`)."""
        found = {}
        for i, toks in enumerate(new):
            if self.stopped[i] is not None:
                continue
            end = offset + len(toks)
            first = self.scanned[i]
            if end > first:  # the new tokens after (at least) `window` tokens of context
                lo = first - self.window
                ctx = toks[max(0, lo - offset):first - offset]
                k = self._first_completing(self.prompts[i][len(self.prompts[i]) + lo:] + ctx if lo < 0 else ctx,
                                           toks[first - offset:])
                if k is not None:
                    self.stopped[i] = found[i] = first + k
                self.scanned[i] = end
        return found

    def first_needed(self) -> int:
        """The first step a scan must be given: `window` before the earliest unscanned step."""
        open_ = [n for n, st in zip(self.scanned, self.stopped) if st is None]
        return max(0, min(open_, default=0) - self.window)
