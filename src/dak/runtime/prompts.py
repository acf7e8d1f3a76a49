"""Prompt inputs of dak's generate: their checks, and HF-style `attention_mask` (padded batches
as a tokenizer returns them).

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


def check_ids(ids, vocab: int, length: str = "length") -> None:
    """A ValueError unless `ids` is a (batch, length >= 1) integer tensor of ids in [0, vocab) (generate
    and the scoring forward: HF's own errors, an index assert on the GPU, do not say what is wrong)."""
    if not isinstance(ids, torch.Tensor) or ids.dim() != 2 or ids.dtype not in (torch.long, torch.int) \
            or ids.shape[1] == 0:
        got = f"{tuple(ids.shape)} {ids.dtype}" if isinstance(ids, torch.Tensor) else type(ids).__name__
        raise ValueError(f"input_ids must be a (batch, {length}) tensor of integer token ids with {length} >= 1, "
                         f"got {got}; one sequence: ids[None]")
    if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= vocab):
        raise ValueError(f"token ids must be in [0, {vocab}) (the model's vocab_size)")


def check_prompts(ids, max_new_tokens, prompt_lengths, batch: int, max_len: int, vocab: int):
    """Check (B, L) prompt ids against the offloaded batch, cache and vocabulary; returns (ids,
    int32 prompt lengths, B), both padded to `batch` rows with copies of the first prompt."""
    check_ids(ids, vocab, "prompt_len")
    b, n = ids.shape
    if not 0 < b <= batch:
        raise ValueError(f"got {b} prompts; this model was offloaded for batch {batch} "
                         "(pass batch= to dak.offload to change it)")
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be an integer >= 1, got {max_new_tokens!r}")
    if n + max_new_tokens > max_len:
        raise ValueError(f"prompt_len {n} + max_new_tokens {max_new_tokens} exceeds the cache's max_len "
                         f"{max_len}; pass a larger max_len to dak.offload")
    plen = torch.full((b,), n, dtype=torch.int32) if prompt_lengths is None else \
        torch.as_tensor(prompt_lengths, dtype=torch.int32).flatten().cpu()
    if plen.shape != (b,) or int(plen.min()) < 1 or int(plen.max()) > n:
        raise ValueError(f"prompt_lengths must be {b} values in [1, {n}]")
    if b < batch:  # pad the static batch with copies of the first prompt
        ids = torch.cat([ids, ids[:1].expand(batch - b, n)])
        plen = torch.cat([plen, plen[:1].expand(batch - b)])
    return ids, plen, b


def resolve_lengths(input_ids, inputs, max_new_tokens, max_length, default_new: int = 32):
    """HF's aliases: `inputs` for input_ids, `max_length` (prompt + new) for max_new_tokens."""
    if (input_ids is None) == (inputs is None):
        raise ValueError("give the prompt ids once: input_ids (or HF's `inputs`)")
    ids = input_ids if input_ids is not None else inputs
    if max_length is None:
        return ids, default_new if max_new_tokens is None else max_new_tokens
    if max_new_tokens is not None:
        raise ValueError("give max_new_tokens or max_length, not both")
    width = ids.shape[-1] if isinstance(ids, torch.Tensor) else 0
    if isinstance(max_length, bool) or not isinstance(max_length, int) or max_length <= width:
        raise ValueError(f"max_length ({max_length!r}) counts the prompt ({width} tokens) and the new tokens: "
                         f"it must be an integer > {width}")
    return ids, max_length - width
