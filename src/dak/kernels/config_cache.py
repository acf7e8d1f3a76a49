"""A per-kernel cache of tuned launch configs: in memory, and in one JSON file on disk.

The file is $DAK_CACHE_DIR (default ~/.cache/dak)/<name>.json, written atomically; a missing,
unreadable or stale entry only costs a re-tune.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Callable, Generic, TypeVar

from dak.kernels.timing import graph_time_ms

T = TypeVar("T")


class ConfigCache(Generic[T]):
    """Configs of type T keyed by string; `make(**dict)` rebuilds one from its JSON form."""

    def __init__(self, name: str, make: Callable[..., T], to_dict: Callable[[T], dict]):
        self.name, self.make, self.to_dict = name, make, to_dict
        self.memory: dict[str, T] = {}

    def path(self) -> Path:
        root = os.environ.get("DAK_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "dak")
        return Path(root) / f"{self.name}.json"

    def _read(self) -> dict:
        try:
            return json.loads(self.path().read_text())
        except (OSError, ValueError):
            return {}

    def get(self, key: str) -> T | None:
        if key not in self.memory:
            raw = self._read().get(key)
            try:
                if raw is not None:
                    self.memory[key] = self.make(**raw)
            except (TypeError, ValueError):
                return None
        return self.memory.get(key)

    def put(self, key: str, cfg: T, persist: bool) -> None:
        self.memory[key] = cfg
        if not persist:
            return
        path = self.path()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            data = self._read()
            data[key] = self.to_dict(cfg)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
            os.replace(tmp, path)
        except OSError:
            pass  # a read-only home only costs a re-tune next time


Runs = Callable[[T], object] | list[Callable[[T], object]]  # a tuner's launch(es) of one config


def as_runs(run) -> list:
    """A sweep's `run` as a list: one launch, or the same launch over rotated buffers."""
    runs = list(run) if isinstance(run, (list, tuple)) else [run]
    if not runs or not all(callable(r) for r in runs):
        raise ValueError("run must be a callable taking a config, or a non-empty list of them")
    return runs


def time_or_inf(*fns: Callable[[], object]) -> float:
    """Milliseconds of one call by short CUDA-graph replay (`fns`: equivalent calls over different
    buffers, rotated so that back-to-back calls do not hit L2); inf when a call raises the
    launchers' ValueError for a config this GPU cannot run (on-chip resources)."""
    try:
        return graph_time_ms(list(fns), target_ms=5.0, max_replays=5)
    except ValueError as exc:
        if "on-chip resources" not in str(exc):
            raise
        return float("inf")
