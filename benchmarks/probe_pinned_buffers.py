"""Probe: does the copy engine read every pinned buffer at the same rate, and does write-combined
pinned memory read faster?

On the H200, dak's copy-ahead chain on OPT-30B at 5% copied 31-62 MB host parts at 51 GB/s
(Chrome trace of call B2) where the prefetch baseline's 66 MB copies ran at 55, and
probe_kv_copy.py saw two pinned buffers of one shape read at 35-48 and 50-54 GB/s in the same
run. For each pinning method (`dak.host.PIN_METHOD`: 'alloc' = cudaHostAlloc, 'alloc-wc' =
write-combined cudaHostAlloc), this allocates `--buffers` PinnedBuffers of `--mib` MiB, fills
them on the CPU (as random init and checkpoint loading do), then times

    each   one 1-D copy per buffer into HBM (median of 3): the spread of per-buffer rates
    chain  every buffer copied back to back on one stream (what a decode step does)
    sm     the split kernel reading one buffer in place (all rows on the host, default config)

    PYTHONPATH=src python3 benchmarks/probe_pinned_buffers.py --out probe-pinned-buffers.json

Needs a GPU (pinning and the copy engine are what it measures).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import event_ms, graph_time_ms, metadata, split_kernel_call, write_json  # noqa: E402

import dak.host as host  # noqa: E402


def sm_read_gbs(buf) -> float:
    """The split kernel (heuristic config, every row on the host) reading `buf` in place at N = 8."""
    k = buf.tensor.shape[1]
    x = torch.randn(8, k, device="cuda", dtype=buf.tensor.dtype)
    empty = torch.empty((0, k), device="cuda", dtype=buf.tensor.dtype)
    t = graph_time_ms([split_kernel_call(x, buf.tensor, empty)], target_ms=20, max_replays=5)
    return buf.nbytes / t / 1e6


def probe(method: str, buffers: int, mib: int, k: int) -> dict:
    host.PIN_METHOD = method
    rows = (mib << 20) // (2 * k)
    bufs = [host.PinnedBuffer((rows, k), torch.bfloat16) for _ in range(buffers)]
    for b in bufs:
        b.tensor.normal_()
    dst = torch.empty((rows, k), dtype=torch.bfloat16, device="cuda")
    each = []
    for b in bufs:
        ms = sorted(event_ms(lambda b=b: dst.copy_(b.tensor, non_blocking=True)) for _ in range(3))[1]
        each.append(b.nbytes / ms / 1e6)

    def chain():
        for b in bufs:
            dst.copy_(b.tensor, non_blocking=True)
    chain_ms = sorted(event_ms(chain) for _ in range(3))[1]
    rec = {"method": bufs[0].method, "buffers": buffers, "buffer_bytes": bufs[0].nbytes,
           "each_gbs": each, "each_min_gbs": min(each), "each_median_gbs": statistics.median(each),
           "each_max_gbs": max(each), "chain_gbs": sum(b.nbytes for b in bufs) / chain_ms / 1e6,
           "sm_read_gbs": sm_read_gbs(bufs[0])}
    print(f"{rec['method']:28s} {buffers} x {mib} MiB: each {rec['each_min_gbs']:.1f} / {rec['each_median_gbs']:.1f} / "
          f"{rec['each_max_gbs']:.1f} GB/s (min/median/max), chain {rec['chain_gbs']:.1f} GB/s, "
          f"split kernel in place {rec['sm_read_gbs']:.1f} GB/s", flush=True)
    for b in bufs:
        b.free()
    del dst
    torch.cuda.empty_cache()
    return rec


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--methods", default="alloc,alloc-wc,alloc")
    ap.add_argument("--buffers", type=int, default=32)
    ap.add_argument("--mib", type=int, default=32)
    ap.add_argument("--k", type=int, default=7168, help="row length (elements)")
    ap.add_argument("--out", default="probe-pinned-buffers.json")
    a = ap.parse_args(argv)
    methods = [m for m in a.methods.split(",") if m]
    bad = [m for m in methods if m not in host.PIN_METHODS]
    if bad:
        raise SystemExit(f"unknown pinning method(s) {bad}: use {', '.join(host.PIN_METHODS)}")
    if min(a.buffers, a.mib, a.k) < 1:
        raise SystemExit("--buffers, --mib and --k must be >= 1")
    if not torch.cuda.is_available():
        raise SystemExit("probe_pinned_buffers needs a CUDA GPU: it times the copy engine reading pinned memory")
    rows = [probe(m, a.buffers, a.mib, a.k) for m in methods]
    write_json(a.out, {"meta": metadata(), "rows": rows})
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
