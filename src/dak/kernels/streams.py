"""Named side streams per device, created on first use (outside CUDA graph capture) and reused,
so captured graphs always fork to and join from the same streams."""

from __future__ import annotations

import torch

_STREAMS: dict[tuple[torch.device, str], torch.cuda.Stream] = {}


def side_stream(device: torch.device, name: str) -> torch.cuda.Stream:
    """The stream called `name` on `device` (e.g. "copy", "compute", "prefill")."""
    key = (torch.device(device), name)
    if key not in _STREAMS:
        _STREAMS[key] = torch.cuda.Stream(device=key[0])
    return _STREAMS[key]
