"""The $DAK_* switches as dak.shares reads them: os.environ, or a snapshot held for a block,
and env_flag / env_int, which parse an on/off switch and a bounded count.

The planner prices every candidate placement operator by operator and asks dak.shares per
operator which path the runtime takes ($DAK_CE_MIN_SHARE, $DAK_HBM_GEMV, ...): a million reads of
os.environ (each encodes its key) were a fifth of planning Llama-2-70B. Inside `fixed()` they read
a dict taken once; the switches cannot change halfway through a plan either.

A variable set to the empty string reads as unset (`DAK_X= dak ...` unsets it for one command),
as Python reads its own PYTHON* variables.
"""

from __future__ import annotations

import contextlib
import os

_snapshot: dict | None = None


def environ():
    """os.environ, or the snapshot of the innermost `fixed()` block in progress."""
    return os.environ if _snapshot is None else _snapshot


@contextlib.contextmanager
def fixed():
    """Hold the $DAK_* variables as they are now until the block ends (usable as a decorator)."""
    global _snapshot
    if _snapshot is not None:  # nested: the outer block's snapshot holds
        yield
        return
    _snapshot = {k: v for k, v in os.environ.items() if k.startswith("DAK_") and v != ""}
    try:
        yield
    finally:
        _snapshot = None


def get(name: str, default: str | None = None) -> str | None:
    """$name, or `default` when it is unset or empty."""
    raw = environ().get(name)
    return default if raw is None or raw == "" else raw


def env_flag(name: str, default: bool) -> bool:
    """$name as an on/off switch: '1' on, '0' off, unset (or empty) `default`; anything else is an error."""
    raw = get(name)
    if raw is None:
        return default
    if raw not in ("0", "1"):
        raise ValueError(f"{name} must be 0 or 1, got {raw!r}")
    return raw == "1"


def env_int(name: str, default: int, lo: int, hi: int) -> int:
    """$name as an integer in [lo, hi], or `default` when unset (or empty)."""
    raw = get(name)
    if raw is None:
        return default
    if not raw.isdigit() or not lo <= int(raw) <= hi:
        raise ValueError(f"{name} must be an integer in [{lo}, {hi}], got {raw!r}")
    return int(raw)
