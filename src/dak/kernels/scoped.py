"""A step object made current for a block: the copy-ahead step (dak.kernels.copy_ahead) and
the K/V-ahead step (dak.runtime.kv_ahead) are each held in a context variable while one decode
step runs, and closed (aborted first, on an error) when it ends."""

from __future__ import annotations

import contextlib
import contextvars


@contextlib.contextmanager
def active(var: contextvars.ContextVar, step):
    """Make `step` (anything with close()) the one `var` holds for the block; close it after
    (calling its abort() first, where it has one, when the block raises)."""
    token = var.set(step)
    try:
        yield step
    except BaseException:
        if hasattr(step, "abort"):
            step.abort()
        raise
    finally:
        var.reset(token)
        step.close()
