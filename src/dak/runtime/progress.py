"""Progress bars (in bytes) for building an offloaded model: placing (pinning host rows and
allocating HBM), then filling (seeded random) or loading (safetensors) the weights.

`enabled`: True shows them on stderr, False hides them, None shows them only when stderr is a
terminal (tqdm's rule), so library calls in scripts and logs stay quiet by default.
"""

from __future__ import annotations

import sys


class Bytes:
    """A byte-counting bar; `update(n)` adds n bytes. Use as a context manager."""

    def __init__(self, total: int, desc: str, enabled: bool | None):
        if enabled not in (None, True, False):
            raise ValueError(f"progress must be True, False or None (on a terminal only), got {enabled!r}")
        from tqdm import tqdm
        self._bar = tqdm(total=max(int(total), 0), desc=desc, unit="B", unit_scale=True, unit_divisor=1024,
                         disable=None if enabled is None else not enabled, file=sys.stderr, dynamic_ncols=True,
                         mininterval=0.5)

    def update(self, nbytes: int) -> None:
        if nbytes:
            self._bar.update(int(nbytes))

    def close(self) -> None:
        self._bar.close()

    def __enter__(self) -> "Bytes":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def nbytes(*tensors) -> int:
    return sum(t.numel() * t.element_size() for t in tensors if t is not None)
