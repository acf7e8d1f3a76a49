"""The link floor of one benchmark case: its own host bytes moved the fastest way measured.

The issues' bound, max((1-x) C / B_g, x C / B_h), takes B_h from a 1 GiB copy. A decode case's
host part is often far smaller (0.5-10 MB), and a lone transfer that small cannot reach that rate
(../shared/HARDWARE.md: 1 MiB copies move 33.5 GB/s, 8 MiB 48, 1 GiB 55): the bound's link term
is then below anything the link can do for that case alone. The floor keeps the bound's HBM term
and replaces its link term by the fastest of these, timed in the same run on the case's own
pinned bytes (CUDA-graph replay, like dak's time):
  copy  one copy-engine copy of exactly the host bytes into HBM (`copy_ms`);
  sm    where the benchmark has one, a kernel that reads those bytes in place with SM loads
        (for the linear: dak's split kernel on the host rows alone).
floor = max((1-x) C / B_g, min(link times)). An operator alone cannot beat it; chained in a
decode step the link streams on from one operator to the next, so chained times are held to the
bound itself. `dak_over_floor` <= 1.05 with `floor_over_bound` > 1.05 marks a case where dak
does what the link allows but the issue's target, held to the bound, is out of reach alone.
"""

from __future__ import annotations

import math


def copy_ms(pairs: list) -> float:
    """Median ms of copying each (pinned source, HBM destination) pair once, in one graph replay."""
    from dak.kernels.timing import graph_time_ms  # torch only where something is timed
    if not pairs:
        raise ValueError("copy_ms needs at least one (source, destination) pair")
    for src, dst in pairs:
        if src.shape != dst.shape or src.dtype != dst.dtype:
            raise ValueError(f"copy pair mismatch: {tuple(src.shape)} {src.dtype} -> {tuple(dst.shape)} {dst.dtype}")

    def move():
        for src, dst in pairs:
            dst.copy_(src, non_blocking=True)
    return graph_time_ms([move], target_ms=10.0, max_replays=9)


def floor_fields(t_dak_ms: float, t_hbm_ms: float, link_ms: dict, bound_ms: float) -> dict:
    """Row fields: the link times, floor_ms = max(t_hbm_ms, fastest link time), dak_over_floor
    and floor_over_bound. Link times that are None (a path that did not run) are left out."""
    times = [t for t in link_ms.values() if t is not None and math.isfinite(t)]
    if not times:
        raise ValueError(f"floor_fields needs at least one measured link time, got {link_ms}")
    if min(times) <= 0 or t_hbm_ms < 0 or bound_ms <= 0 or t_dak_ms <= 0:
        raise ValueError(f"times must be positive: dak {t_dak_ms}, hbm {t_hbm_ms}, link {link_ms}, bound {bound_ms}")
    floor = max(t_hbm_ms, min(times))
    return {"t_link_ms": dict(link_ms), "floor_ms": floor, "dak_over_floor": t_dak_ms / floor,
            "floor_over_bound": floor / bound_ms}


def floor_counts(rows: list[dict], limit: float = 1.05) -> dict:
    """Over rows with a floor: how many are within `limit` x bound, within `limit` x floor, and
    how many have a floor itself above `limit` x bound (out of reach alone)."""
    fl = [r for r in rows if "floor_ms" in r]
    return {"rows": len(fl),
            "within_bound": sum(r["dak_over_bound"] <= limit for r in fl),
            "within_floor": sum(r["dak_over_floor"] <= limit for r in fl),
            "floor_above_bound": sum(r["floor_over_bound"] > limit for r in fl),
            "missed_reachable": sum(r["dak_over_floor"] > limit for r in fl)}
