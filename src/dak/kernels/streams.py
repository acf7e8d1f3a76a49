"""Named side streams per device, created on first use (outside CUDA graph capture) and reused,
so captured graphs always fork to and join from the same streams."""

from __future__ import annotations

import torch

from dak.kernels.buffers import device_key

_STREAMS: dict[tuple[torch.device, str], torch.cuda.Stream] = {}


def side_stream(device: torch.device, name: str) -> torch.cuda.Stream:
    """The stream called `name` on `device` (e.g. "copy", "compute", "prefill")."""
    key = (device_key(device), name)
    if key not in _STREAMS:
        _STREAMS[key] = torch.cuda.Stream(device=key[0])
    return _STREAMS[key]


def fork(device: torch.device, name: str, main: torch.cuda.Stream, enabled: bool = True) -> torch.cuda.Stream:
    """Side stream `name` ordered after `main`'s work so far, or `main` itself when not `enabled`
    (then nothing forks: a captured graph gets no branch for it). Pair with `join`."""
    if not enabled:
        return main
    side = side_stream(device, name)
    side.wait_stream(main)
    return side


def join(main: torch.cuda.Stream, side: torch.cuda.Stream) -> None:
    """Order `main` after `side`'s work (nothing to do when `side` is `main`)."""
    if side is not main:
        main.wait_stream(side)
