"""When does the host link idle inside a decode step, and what runs on the GPU meanwhile?

Input: the device kernels and copies of a few profiled decode steps (name, start, end in us).
The link is busy while a copy-engine H2D copy runs (in-place host reads inside split kernels
cannot be told apart from their HBM reads, so a split kernel counts as "not the link"). At the
ratios where a step is link-bound, every microsecond the link idles is a microsecond above the
bound; `link_report` says how many there are per step and which kernel categories ran in them
("nothing" = no kernel at all: launch gaps, waits).

Pure Python, so the analysis is tested on the CPU (tests/test_step_timeline.py);
benchmarks/profile_step.py feeds it the CUDA-graph replays it profiles on the GPU.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class Span:
    name: str
    start: float  # us
    end: float    # us


def union(intervals) -> list[tuple[float, float]]:
    """Sorted, merged (start, end) intervals."""
    out: list[list[float]] = []
    for s, e in sorted(intervals):
        if e <= s:
            continue
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return [(s, e) for s, e in out]


def gaps(busy: list[tuple[float, float]], lo: float, hi: float) -> list[tuple[float, float]]:
    """The parts of [lo, hi) that merged intervals `busy` leave free."""
    out, t = [], lo
    for s, e in busy:
        if s > t:
            out.append((t, min(s, hi)))
        t = max(t, e)
    if t < hi:
        out.append((t, hi))
    return [(s, e) for s, e in out if e > s]


def overlap(a: list[tuple[float, float]], b: list[tuple[float, float]]) -> float:
    """Total length of the intersection of two merged interval lists (two-pointer sweep)."""
    i = j = 0
    total = 0.0
    while i < len(a) and j < len(b):
        s, e = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if e > s:
            total += e - s
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


def link_report(spans: list[Span], steps: int, is_link: Callable[[str], bool],
                category: Callable[[str], str], top: int = 8) -> dict:
    """Per-step link busy/idle time and what ran while the link idled (see the module doc)."""
    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    if not spans:
        raise ValueError("no device spans: was the profiler given CUDA activity on a GPU?")
    lo, hi = min(s.start for s in spans), max(s.end for s in spans)
    link = union((s.start, s.end) for s in spans if is_link(s.name))
    work = [s for s in spans if not is_link(s.name)]
    idle = gaps(link, lo, hi)
    by_cat: dict[str, list[tuple[float, float]]] = {}
    for s in work:
        by_cat.setdefault(category(s.name), []).append((s.start, s.end))
    cats = {c: union(iv) for c, iv in by_cat.items()}
    anything = union((s.start, s.end) for s in work)
    during = {c: overlap(idle, iv) / steps for c, iv in cats.items()}
    during["nothing"] = overlap(idle, gaps(anything, lo, hi)) / steps
    longest = sorted(idle, key=lambda g: g[0] - g[1])[:top]
    copies = sorted(s.end - s.start for s in spans if is_link(s.name))
    return {
        "copies_per_step": len(copies) / steps,
        "copy_us_summed_per_step": sum(copies) / steps,  # over the busy time: copies in flight together
        "copy_us_median": copies[len(copies) // 2] if copies else 0.0,
        "window_us_per_step": (hi - lo) / steps,
        "link_busy_us_per_step": sum(e - s for s, e in link) / steps,
        "link_idle_us_per_step": sum(e - s for s, e in idle) / steps,
        "gpu_busy_us_per_step": sum(e - s for s, e in union((s.start, s.end) for s in spans)) / steps,
        "link_idle_during_us_per_step": dict(sorted(during.items(), key=lambda kv: -kv[1])),
        "longest_link_gaps": [{"us": e - s, "at_us": s - lo,
                               "during": {c: round(overlap([(s, e)], iv), 2) for c, iv in cats.items()
                                          if overlap([(s, e)], iv) > 0}} for s, e in longest],
    }


def describe(rep: dict) -> list[str]:
    """A few printable lines of `link_report`'s result."""
    w = rep["window_us_per_step"]
    out = [f"graph replay: {w / 1e3:.2f} ms/step; link busy {rep['link_busy_us_per_step'] / 1e3:.2f} ms, "
           f"idle {rep['link_idle_us_per_step'] / 1e3:.2f} ms; GPU busy {rep['gpu_busy_us_per_step'] / 1e3:.2f} ms"]
    if rep.get("copies_per_step"):
        out.append(f"    copies: {rep['copies_per_step']:.0f}/step, median {rep['copy_us_median']:.1f} us, summed "
                   f"{rep['copy_us_summed_per_step'] / 1e3:.2f} ms/step (above busy: copies in flight together)")
    top = [f"{c} {us / 1e3:.2f}" for c, us in rep["link_idle_during_us_per_step"].items() if us > 0][:6]
    if top:
        out.append("    while the link idles (ms/step): " + ", ".join(top))
    return out
