"""Grow-only HBM buffers shared by name per (device, dtype): copy-engine staging, host-once slots.

Operators that run one after another on a stream can share one. A buffer is only ever
replaced by a larger one, and never inside CUDA graph capture (size it in prepare()).
"""

from __future__ import annotations

import torch

_BUFFERS: dict = {}
_OUTGROWN: list = []


def device_key(device) -> torch.device:
    """`device` with its index filled in ("cuda" -> "cuda:<current>"), so that a module's
    "cuda:0" and a caller's "cuda" name the same shared buffers and streams."""
    dev = torch.device(device)
    if dev.type == "cuda" and dev.index is None:
        return torch.device("cuda", torch.cuda.current_device())
    return dev


def shared_buffer(name: str, device: torch.device, dtype: torch.dtype, numel: int,
                  keep_outgrown: bool = False) -> torch.Tensor:
    """A flat buffer called `name` of at least `numel` elements on (device, dtype).

    keep_outgrown: keep a replaced buffer alive (for CUDA graphs captured with it); otherwise
    only its earlier holders keep it.
    """
    key = (name, device_key(device), dtype)
    buf = _BUFFERS.get(key)
    if buf is None or buf.numel() < numel:
        if key[1].type == "cuda" and torch.cuda.is_current_stream_capturing():
            raise RuntimeError(f"the shared '{name}' buffer must be sized before CUDA graph capture; "
                               "call prepare() on every SplitLinear (or run each launch once) first")
        if buf is not None and keep_outgrown:
            _OUTGROWN.append(buf)
        buf = torch.empty(max(numel, 1), dtype=dtype, device=key[1])
        _BUFFERS[key] = buf
    return buf
