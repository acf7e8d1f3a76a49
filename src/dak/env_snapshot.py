"""The $DAK_* switches as dak.shares reads them: os.environ, or a snapshot held for a block.

The planner prices every candidate placement operator by operator and asks dak.shares per
operator which path the runtime takes ($DAK_CE_MIN_SHARE, $DAK_HBM_GEMV, ...): a million reads of
os.environ (each encodes its key) were a fifth of planning Llama-2-70B. Inside `fixed()` they read
a dict taken once; the switches cannot change halfway through a plan either.
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
    _snapshot = {k: v for k, v in os.environ.items() if k.startswith("DAK_")}
    try:
        yield
    finally:
        _snapshot = None
