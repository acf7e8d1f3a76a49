"""Measurements a calibrated hardware profile carries next to its bandwidths (pure Python).

Written by ``dak calibrate``, read by the planner and (through ``window_for``) by the kernels.
Times are seconds, bandwidths bytes/s, x the host fraction of an operator's resident bytes.

* ``Curve``: an operator shape's measured time at a grid of host fractions, always including
  x = 0 and x = 1 (``key`` is ``dak.planner.curves.op_key`` of the operator).
* ``Window``: the congestion window chosen for one split-linear launch shape: host programs
  (readers on the host link) x pipeline depth (loads in flight per reader), with the time it
  gave, the time of the un-capped setting (one host program per host work item) and of the
  config the kernel would otherwise pick. ``key`` is ``dak.kernels.tuning.tune_key`` without
  its leading GPU name: ``dtype|n<bucket>|mh<M_H>|mg<M_G>|k<K>|b<bias>``.
* ``LinkSample``: host-read bandwidth of ``host_programs`` x ``num_stages`` readers, and the
  bandwidth concurrent HBM readers got meanwhile (0 where not measured).
"""

from __future__ import annotations

import math
import os
import warnings
from dataclasses import MISSING, dataclass, fields


def _num(v, what: str, lo: float = 0.0, integer: bool = False, strict: bool = False):
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) \
            or v < lo or (strict and v == lo):
        kind = "an integer" if integer else "a number"
        raise ValueError(f"{what} must be {kind} {'>' if strict else '>='} {lo:g}, got {v!r}")
    if integer and not float(v).is_integer():
        raise ValueError(f"{what} must be an integer, got {v!r}")
    return int(v) if integer else float(v)


@dataclass(frozen=True)
class Curve:
    key: str
    points: tuple[tuple[float, float], ...]   # (x, seconds), x ascending, from 0 to 1
    note: str = ""                            # how it was measured (kernel path, tuned or not)

    def __post_init__(self):
        if not isinstance(self.key, str) or not self.key:
            raise ValueError("curve 'key' must be a non-empty string")
        pts = []
        for p in self.points:
            if not isinstance(p, (list, tuple)) or len(p) != 2:
                raise ValueError(f"curve {self.key!r}: each point must be [x, seconds], got {p!r}")
            x = _num(p[0], f"curve {self.key!r}: x")
            t = _num(p[1], f"curve {self.key!r}: time at x={p[0]}", strict=True)
            if x > 1:
                raise ValueError(f"curve {self.key!r}: x must lie in [0, 1], got {x}")
            pts.append((x, t))
        pts.sort()
        if len(pts) < 2 or pts[0][0] != 0.0 or pts[-1][0] != 1.0:
            raise ValueError(f"curve {self.key!r} must have points at x = 0 and x = 1 "
                             f"(got x = {[p[0] for p in pts]})")
        object.__setattr__(self, "points", tuple(pts))


@dataclass(frozen=True)
class Window:
    key: str
    host_programs: int
    num_stages: int
    time_s: float
    uncapped_time_s: float
    default_time_s: float

    def __post_init__(self):
        if not isinstance(self.key, str) or not self.key:
            raise ValueError("window 'key' must be a non-empty string")
        for f in ("host_programs", "num_stages"):
            object.__setattr__(self, f, _num(getattr(self, f), f"window {self.key!r}: {f}", 1, True))
        for f in ("time_s", "uncapped_time_s", "default_time_s"):
            object.__setattr__(self, f, _num(getattr(self, f), f"window {self.key!r}: {f}", strict=True))

    @property
    def gain(self) -> float:
        """Speed-up of the chosen window over the un-capped setting."""
        return self.uncapped_time_s / self.time_s


@dataclass(frozen=True)
class LinkSample:
    host_programs: int
    num_stages: int
    host_bandwidth: float
    hbm_bandwidth: float = 0.0

    def __post_init__(self):
        for f in ("host_programs", "num_stages"):
            object.__setattr__(self, f, _num(getattr(self, f), f"link sample {f}", 1, True))
        for f in ("host_bandwidth", "hbm_bandwidth"):
            object.__setattr__(self, f, _num(getattr(self, f), f"link sample {f}"))


SECTIONS = {"curves": Curve, "windows": Window, "link": LinkSample}


def parse_section(name: str, raw, source: str) -> tuple:
    """Tuple of ``SECTIONS[name]`` items from a JSON list; ValueError naming the file and entry."""
    cls = SECTIONS[name]
    if not isinstance(raw, list):
        raise ValueError(f"{source}: profile field '{name}' must be a list")
    want = [f.name for f in fields(cls)]
    required = [f.name for f in fields(cls) if f.default is MISSING]
    out = []
    for i, item in enumerate(raw):
        if not isinstance(item, dict):
            raise ValueError(f"{source}: {name}[{i}] must be an object with fields {', '.join(want)}")
        missing = [f for f in required if f not in item]
        extra = [f for f in item if f not in want]
        if missing or extra:
            raise ValueError(f"{source}: {name}[{i}] " + (f"is missing {', '.join(missing)}" if missing
                             else f"has unknown field(s) {', '.join(extra)}") + f"; fields: {', '.join(want)}")
        try:
            out.append(cls(**{k: (tuple(map(tuple, v)) if k == "points" else v) for k, v in item.items()}))
        except (TypeError, ValueError) as e:
            raise ValueError(f"{source}: {name}[{i}]: {e}") from None
    return tuple(out)


def section_to_json(items: tuple) -> list:
    out = []
    for it in items:
        d = {f.name: getattr(it, f.name) for f in fields(it)}
        if "points" in d:
            d["points"] = [list(p) for p in d["points"]]
        out.append(d)
    return out


def same_gpu(a: str, b: str) -> bool:
    return " ".join(a.lower().split()) == " ".join(b.lower().split())


def window_for(profile, gpu: str, key: str) -> Window | None:
    """The measured window for ``key`` (tune_key without the GPU) when ``profile`` was calibrated
    on ``gpu``; None otherwise, with a warning when the profile comes from another GPU."""
    if profile is None or not profile.windows:
        return None
    theirs = profile.meta.get("gpu")
    if theirs and not same_gpu(theirs, gpu):
        warnings.warn(f"hardware profile {profile.name!r} was calibrated on {theirs!r}, not on "
                      f"{gpu!r}: its congestion windows are ignored; run `dak calibrate` here", stacklevel=2)
        return None
    return next((w for w in profile.windows if w.key == key), None)


_ACTIVE: dict = {}


def active_profile():
    """The profile named by $DAK_PROFILE (a .json path), loaded once; None when unset."""
    path = os.environ.get("DAK_PROFILE")
    if not path:
        return None
    return read_profile(path)


def read_profile(path: str):
    """The profile $DAK_PROFILE names (loaded once per path: dak.switches checks it before anything
    is built, the tuner reads it later), or a ValueError that names the variable."""
    from .hardware import HardwareProfile
    if path in _ACTIVE:
        return _ACTIVE[path]
    try:
        _ACTIVE[path] = HardwareProfile.from_json(path)
        return _ACTIVE[path]
    except (OSError, ValueError, TypeError, KeyError) as e:
        raise ValueError(f"DAK_PROFILE={path!r}: {e} (it must name a profile .json that `dak calibrate` or "
                         f"`dak hardware NAME --save` wrote; unset it to start from the heuristic)") from None
