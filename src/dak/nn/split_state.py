"""state_dict support for row-split tensors (SplitLinear, SplitEmbedding).

A split module saves and loads under the names of the module it replaces (`weight`, `bias`), so
an offloaded HF model's `state_dict()` has the keys of the original and `load_state_dict` takes
an ordinary checkpoint. There is no single tensor to hand out: `state_dict()` gathers each split
weight into a fresh CPU copy (host rows, then HBM rows), which costs host memory of the
model's size while it is held. Loading copies the rows into their homes in place (a
`load_state_dict(..., assign=True)` copies as well: the homes are fixed by the placement).
"""

from __future__ import annotations

import torch


def _freed(owner: str) -> RuntimeError:
    return RuntimeError(f"{owner}'s memory was released (dak_free); offload the model again to use it")


def gather(host: torch.Tensor | None, hbm: torch.Tensor | None, owner: str) -> torch.Tensor:
    """cat(host, hbm) as a new CPU tensor."""
    if host is None or hbm is None:
        raise _freed(owner)
    out = torch.empty((host.shape[0] + hbm.shape[0], *hbm.shape[1:]), dtype=hbm.dtype)
    out[:host.shape[0]].copy_(host)
    out[host.shape[0]:].copy_(hbm)
    return out


def load_rows(state_dict: dict, key: str, parts: tuple, owner: str, missing: list, errors: list) -> bool:
    """Copy state_dict[key] into `parts` (tensors that hold consecutive row ranges of it).
    Returns whether anything was copied; a missing key or a bad shape is noted, as torch does."""
    if key not in state_dict:
        missing.append(key)
        return False
    if any(p is None for p in parts):
        raise _freed(owner)
    src = state_dict[key]
    want = (sum(p.shape[0] for p in parts), *parts[-1].shape[1:])
    if not isinstance(src, torch.Tensor) or tuple(src.shape) != want:
        got = tuple(src.shape) if isinstance(src, torch.Tensor) else type(src).__name__
        errors.append(f"size mismatch for {key}: copying a tensor of shape {got}, the split module "
                      f"holds {want}")
        return False
    if src.is_floating_point() != parts[-1].is_floating_point():
        errors.append(f"dtype mismatch for {key}: got {src.dtype}, the split module holds {parts[-1].dtype}")
        return False
    lo = 0
    with torch.no_grad():
        for p in parts:
            p.copy_(src[lo:lo + p.shape[0]])
            lo += p.shape[0]
    return True


def unexpected(state_dict: dict, prefix: str, known: tuple, out: list) -> None:
    """Keys under `prefix` that the module does not hold (torch's strict check; split modules
    have no submodules, so a dotted key under the prefix is unexpected too)."""
    for key in state_dict:
        if key.startswith(prefix) and key[len(prefix):] not in known:
            out.append(key)


def refuse_moves(module, fn, tensors) -> None:
    """For `_apply` (`.to`, `.half()`, `.cpu()`, ...): raise if `fn` would change the dtype or device
    of any of `tensors` (tried on empty stand-ins, so nothing is converted or allocated); the split
    parts stay where the placement put them and host rows would not follow anyway."""
    for t in tensors:
        if t is None:
            continue
        probe = fn(torch.empty(0, dtype=t.dtype, device=t.device))
        if probe.dtype != t.dtype or probe.device != t.device:
            raise RuntimeError(f"{type(module).__name__} keeps its rows where the placement put them ({t.dtype} "
                               f"on {t.device}); it cannot move to {probe.dtype} on {probe.device}: offload "
                               "the model again with the dtype you want")
