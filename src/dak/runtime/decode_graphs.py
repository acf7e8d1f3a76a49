"""Capture of the engine's decode step: one CUDA graph per cache-length bucket, sharing a pool.

Before capture an eager warm-up step on a side stream tunes and compiles every kernel, fills
the cuBLAS workspaces and records which operators use the copy engine, in call order; the
copy-ahead chain is linked from that order (dak.kernels.copy_ahead) and a second warm-up step
runs with the copies chained. Then each bucket's step is captured with the attention's copy
rows capped at the bucket's length, and every graph is replayed once, so that its upload does
not land in the first generated tokens. The warm-up's cache writes sit at position 0, which the
prefill overwrites; the cache lengths are left at zero.
"""

from __future__ import annotations

import torch

from dak.kernels.copy_ahead import chains_of, link_chain, record_chain
from dak.kernels.streams import side_stream


def capture_decode(engine, s) -> list:
    """[(cache-length cap, graph)], caps ascending, of `engine`'s decode step for sampling `s`.
    The wrapped copy-ahead chains the graphs use join `engine._wrapped`."""
    kv, device = engine.kv, engine.device
    kv.lengths.zero_()
    main = torch.cuda.current_stream(device)
    side = side_stream(device, "warmup")  # one per device: cuBLAS keeps a workspace per stream
    side.wait_stream(main)
    with torch.cuda.stream(side):  # warm-up: tunes, compiles, fills workspaces
        with record_chain() as order:  # which operators use the copy engine, in call order
            engine._step(s)
        link_chain(order, engine.batch)
        engine._wrapped += chains_of(order)  # their slots live as long as the graphs
        kv.lengths.zero_()
        engine._step(s)  # now with the copies chained
    main.wait_stream(side)
    graphs, pool = [], None
    try:
        for cap in engine.kv_caps:
            kv.set_copy_rows(cap)
            kv.lengths.zero_()
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, pool=pool):
                engine._step(s)
            pool = g.pool() if pool is None else pool
            graphs.append((cap, g))
    finally:
        kv.set_copy_rows(None)
    for _, g in graphs:  # a graph's first launch uploads it: do that here, not in the first tokens
        kv.lengths.zero_()
        g.replay()
    torch.cuda.synchronize(device)
    kv.lengths.zero_()
    return graphs
