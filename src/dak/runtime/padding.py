"""HF-style `attention_mask` for dak's generate: padded batches as a tokenizer returns them.

dak runs a batch right-padded with per-request prompt lengths. A right-padded mask gives those
lengths directly; a left-padded one (HF's default for generation) is turned into right padding
by moving each row's prompt to the front. Either way the new tokens of a request continue its
own prompt, and generate returns the caller's input_ids followed by them (for left padding the
HF layout). Masks with holes or a mix of both sides are refused.
"""

from __future__ import annotations

import torch


def prompts_from_mask(input_ids: torch.Tensor, attention_mask, prompt_lengths) -> tuple[torch.Tensor, object]:
    """(ids right-padded for the engine, prompt lengths or None) for `attention_mask` (or None)."""
    if attention_mask is None:
        return input_ids, prompt_lengths
    if prompt_lengths is not None:
        raise ValueError("give attention_mask or prompt_lengths, not both")
    if not isinstance(input_ids, torch.Tensor) or input_ids.dim() != 2:
        raise ValueError("input_ids must be a (batch, prompt_len) integer tensor")
    mask = torch.as_tensor(attention_mask).cpu()
    if tuple(mask.shape) != tuple(input_ids.shape):
        raise ValueError(f"attention_mask has shape {tuple(mask.shape)}, input_ids {tuple(input_ids.shape)}: "
                         "they must match")
    if mask.dtype != torch.bool:
        if mask.is_floating_point() or mask.is_complex() or not ((mask == 0) | (mask == 1)).all():
            raise ValueError("attention_mask must hold only 0 and 1 (1 = a prompt token)")
        mask = mask.bool()
    if mask.shape[0] == 0:
        return input_ids, None  # the engine refuses an empty batch
    width = mask.shape[1]
    n = mask.sum(1)
    if width == 0 or int(n.min()) < 1:
        raise ValueError("every row of attention_mask needs at least one 1: an empty prompt cannot be generated from")
    pos = torch.arange(width)
    right = pos[None, :] < n[:, None]
    if torch.equal(mask, right):
        ids = input_ids
    elif torch.equal(mask, pos[None, :] >= (width - n)[:, None]):
        take = (pos[None, :] + (width - n)[:, None]) % width  # row b, column j <- column j + its pad count
        ids = torch.gather(input_ids, 1, take.to(input_ids.device))
    else:
        raise ValueError("attention_mask must be left- or right-padded (each row's ones in one run at one "
                         "end, the same side for every row); dak does not take masks with holes")
    return ids.masked_fill(~right.to(ids.device), 0), n  # pads are never read: any id will do there
