"""Event timing of GPU work by CUDA-graph replay: neither Python launch overhead nor the graph
launch itself stays in the numbers."""

from __future__ import annotations

import math
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


BUSY_CYCLES = 1_000_000  # ~0.5 ms of GPU spin: longer than the host takes to submit any timed graph
MIN_GRAPH_MS = 0.2  # calls per graph: enough that a replay's own start-up is noise


def busy_replay_ms(g: torch.cuda.CUDAGraph) -> float:
    """Milliseconds of one replay of `g`, the GPU kept busy while the host submits it.

    Recording the start event on an idle GPU would charge the graph launch (~5 us on the H200,
    `benchmarks/probe_timing.py`) to the timed work; a spin kernel queued first keeps the GPU
    busy until the graph and the end event are queued behind it."""
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda._sleep(BUSY_CYCLES)
    s.record()
    g.replay()
    e.record()
    e.synchronize()
    return s.elapsed_time(e)


def _capture(calls: list[Callable[[], object]], count: int) -> torch.cuda.CUDAGraph:
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for i in range(count):
            calls[i % len(calls)]()
    g.replay()  # the first launch uploads the graph
    torch.cuda.synchronize()
    return g


def graph_time_ms(calls: list[Callable[[], object]], target_ms: float = 30.0,
                  max_replays: int = 25, max_per_graph: int = 256) -> float:
    """Median milliseconds of one call, from replays of a CUDA graph holding several calls.

    `calls` are equivalent launches over different buffers, rotated so that back-to-back calls
    do not hit L2. Each runs once eagerly first, so compilation stays outside the graph. A graph
    of one round of `calls` gives a first estimate; the timed graph then holds whole rounds
    making >= MIN_GRAPH_MS (at most `max_per_graph` calls), each replay timed with the GPU
    busy while the host submits it (busy_replay_ms): neither the graph launch nor an idle
    GPU's start-up is charged to the calls.
    """
    if not calls:
        raise ValueError("graph_time_ms needs at least one call to time")
    for fn in calls:
        fn()
    torch.cuda.synchronize()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for fn in calls:
            fn()
    torch.cuda.current_stream().wait_stream(side)
    n = len(calls)
    g = _capture(calls, n)
    one = max(busy_replay_ms(g) / n, 1e-4)
    rounds = max(1, min(max(1, max_per_graph // n), math.ceil(MIN_GRAPH_MS / (one * n))))
    if rounds > 1:
        del g
        g = _capture(calls, rounds * n)
    per_graph = rounds * n
    replays = int(min(max_replays, max(3, target_ms / (one * per_graph))))
    times = [busy_replay_ms(g) / per_graph for _ in range(replays)]
    del g
    return statistics.median(times)


L2_MISS_BYTES = 128_000_000  # rotated buffers of at least this much in all: back-to-back calls miss L2


def l2_copies(tensors: tuple[torch.Tensor, ...], min_bytes: int = L2_MISS_BYTES,
              max_copies: int = 8) -> list[tuple[torch.Tensor, ...]]:
    """`tensors` and as many clones of them as make >= `min_bytes` together (at most
    `max_copies` sets in all), for timing calls that would otherwise re-read one buffer from L2.
    Empty tensors are shared, not cloned; a full GPU gives fewer sets (some L2 hits)."""
    size = sum(t.numel() * t.element_size() for t in tensors)
    sets = [tensors]
    want = min(max_copies, max(1, -(-min_bytes // max(1, size))))
    while len(sets) < want:
        try:
            sets.append(tuple(t.clone() if t.numel() else t for t in tensors))
        except torch.cuda.OutOfMemoryError:
            break
    return sets
