"""Event timing of GPU work by CUDA-graph replay (launch overhead stays out of the numbers)."""

from __future__ import annotations

import statistics
from typing import Callable

import torch


def event_ms(fn: Callable[[], object]) -> float:
    """Milliseconds of one eager `fn()` on the current stream, by CUDA events."""
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    fn()
    e.record()
    e.synchronize()
    return s.elapsed_time(e)


def graph_time_ms(calls: list[Callable[[], object]], target_ms: float = 30.0,
                  max_replays: int = 25) -> float:
    """Median milliseconds of one call, from replays of a CUDA graph holding several calls.

    `calls` are equivalent launches over different buffers, rotated so that back-to-back calls
    do not hit L2. Each runs once eagerly first, so compilation stays outside the graph.
    """
    for fn in calls:
        fn()
    torch.cuda.synchronize()
    one = max(event_ms(calls[0]), 1e-3)
    per_graph = max(len(calls), min(40, int(0.3 / one) + 1))
    per_graph = -(-per_graph // len(calls)) * len(calls)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for fn in calls:
            fn()
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for i in range(per_graph):
            calls[i % len(calls)]()
    g.replay()
    torch.cuda.synchronize()
    replays = int(min(max_replays, max(3, target_ms / (one * per_graph))))
    times = [event_ms(g.replay) / per_graph for _ in range(replays)]
    del g
    return statistics.median(times)
