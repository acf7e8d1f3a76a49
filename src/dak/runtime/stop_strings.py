"""Stop strings (HF's `generate(stop_strings=..., tokenizer=...)`), checked on the device at
every step, as HF checks them.

HF's own StopStringCriteria decides: a request stops at the first step whose token completes one
of the strings (an occurrence that ends within that token's text; a string wholly in the prompt
does not count, one that starts in the prompt does; the token may run past the string's end,
"st" + "opera" for "stop"), matched on the vocabulary's token strings as HF matches them. The
stopping token is kept. The criterion runs on a (batch, width) window of each request's last
tokens kept on the device (width: the longest string's length, HF's `maximum_token_len`; before
a short prompt, an id HF maps to no text), a few small tensor operations a step: no host sync,
no decoding, and a stop found at the step it happens (dak.runtime.stopping pads from the next
step on, where EOS ids are set).
"""

from __future__ import annotations

import torch


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
    if not all(callable(getattr(tokenizer, m, None)) for m in ("get_vocab", "convert_tokens_to_string")):
        raise ValueError(f"tokenizer must be an HF tokenizer (with get_vocab and convert_tokens_to_string), "
                         f"got {type(tokenizer).__name__}")
    return list(strings)


class StopStrings:
    """HF's StopStringCriteria for `strings` under `tokenizer`, over a window of the last tokens;
    `start` binds it to one generate call's prompts."""

    def __init__(self, strings: list[str], tokenizer):
        from transformers.generation.stopping_criteria import StopStringCriteria
        try:
            self.criterion = StopStringCriteria(tokenizer=tokenizer, stop_strings=list(strings))
        except Exception as e:  # noqa: BLE001 -- a tokenizer HF cannot read token strings from
            raise ValueError(f"HF's StopStringCriteria refused stop strings {list(strings)!r} with this tokenizer "
                             f"({type(tokenizer).__name__}): {e}") from None
        self.strings = list(strings)
        self.width = int(self.criterion.maximum_token_len)
        self.window = None

    def start(self, prompts: list[list[int]], batch: int, device) -> None:
        """Begin a call over a static batch: `prompts` are the real requests' prompt ids (lists of
        ints, no padding); later rows, and the places before a short prompt, hold the id HF maps
        to no text."""
        c = self.criterion
        c.embedding_vec, c.target_lens = c.embedding_vec.to(device), c.target_lens.to(device)
        blank = c.embedding_vec.shape[0] - 1  # the row HF gives every id outside the vocabulary
        window = torch.full((batch, self.width), blank, dtype=torch.long)
        for i, p in enumerate(prompts):
            tail = p[-self.width:]
            window[i, self.width - len(tail):] = torch.tensor(tail, dtype=torch.long)
        self.window = window.to(device)

    def step(self, tok: torch.Tensor) -> torch.Tensor:
        """Append this step's (batch,) tokens; (batch,) bool: whose token completes a string."""
        self.window = torch.cat([self.window[:, 1:], tok.to(self.window.dtype)[:, None]], dim=1)
        return self.criterion(self.window, None)
