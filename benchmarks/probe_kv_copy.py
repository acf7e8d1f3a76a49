"""Probe: how fast does the copy engine move host K/V positions [0, rows) of a (n, H, S, D) cache?

KV copy-ahead (dak.runtime.kv_ahead) copies each layer's host K and V with one 2-D memcpy each
(`copy_kv_rows`): n * H segments of rows * D elements, one per (request, head). This times, for
a model's KV shape, `--layers` layers' K and V copied back to back (as a decode step queues
them) three ways, each against the same bytes' 1-D copy in the same run:

    2d      the 2-D memcpy dak issues (segments of rows * D * 2 bytes)
    whole   every position, S (one contiguous copy per tensor; what --kv-buckets 1 does)
    1d      one contiguous copy of exactly the 2-D copy's bytes from the same pinned buffers (the
            link's rate for that size); and the same from a second pinned buffer

On the H200, OPT-30B at 5% (all 8 requests' KV on the host) moved 51 GB/s over the link where
the prefetch baseline moved 55 (call Z6): this checks whether the 2-D KV copies are the slow part.

    PYTHONPATH=src python3 benchmarks/probe_kv_copy.py --out probe-kv-copy.json

Without a GPU: a flow check of the copy (no timing).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import event_ms, metadata, write_json  # noqa: E402

from dak.host import PinnedBuffer  # noqa: E402
from dak.kernels.split_attention_ce import copy_kv_rows  # noqa: E402

SHAPES = {"opt-30b": (8, 56, 64, 128), "llama-2-7b": (8, 32, 64, 128), "tiny": (2, 3, 8, 16)}


def make(shape, device):
    """Host K, V (pinned, exact size) and HBM staging K, V of `shape`."""
    n, h, s, d = shape
    host = [PinnedBuffer((n * h * s, d), torch.bfloat16) for _ in range(2)]
    for i, b in enumerate(host):
        b.kv = b.tensor.view(shape)
        b.kv.copy_(torch.arange(b.tensor.numel(), dtype=torch.float32).view(shape).add_(i) % 251)
    dev = [torch.empty(shape, dtype=torch.bfloat16, device=device) for _ in range(2)]
    return host, dev


def check(host, dev, rows):
    """The copied positions equal the host's (the probe times a correct copy)."""
    for h, d in zip(host, dev):
        if not torch.equal(d[:, :, :rows].cpu(), h.kv[:, :, :rows]):
            raise AssertionError(f"2-D KV copy of {rows} rows differs from the host tensor")


def history(host, dev, one_d, nbytes, scratch_gib: float = 2.0) -> dict:
    """GB/s of the same-buffer 1-D copy after three histories of the host K/V: written by the GPU
    (as prefill and decode appends write host KV), written by the CPU, and written by the CPU and
    then pushed out of its caches (the CPU writes `scratch_gib` GiB elsewhere)."""
    def rate():
        return nbytes / sorted(event_ms(one_d) for _ in range(5))[2] / 1e6
    out = {}
    for h, d in zip(host, dev):
        h.kv.copy_(d)  # device to host: the GPU writes the host buffer
    torch.cuda.synchronize()
    out["gpu_written_gbs"] = rate()
    for h in host:
        h.tensor.add_(1)  # the CPU reads and writes every line
    out["cpu_written_gbs"] = rate()
    scratch = torch.empty(int(scratch_gib * 2**30) // 4, dtype=torch.float32)
    scratch.fill_(1.0)
    del scratch
    out["cpu_written_then_evicted_gbs"] = rate()
    print("    same buffer, 1-D, after: " + ", ".join(f"{k[:-4].replace('_', ' ')} {v:.1f} GB/s" for k, v in out.items()))
    return out


def run(shape, layers: int, rows_list, device) -> list[dict]:
    host, dev = make(shape, device)
    n, h, s, d = shape
    other = PinnedBuffer((2, n * h * s * d), torch.bfloat16)  # a second pinned buffer: is it the buffer?
    flat_dst = torch.empty((2, n * h * s * d), dtype=torch.bfloat16, device=device)
    out = []
    for rows in rows_list:
        numel = n * h * rows * d

        def two_d(rows=rows):
            for _ in range(layers):
                copy_kv_rows(dev[0], dev[1], host[0].kv, host[1].kv, rows, non_blocking=True)

        def whole():
            for _ in range(layers):
                copy_kv_rows(dev[0], dev[1], host[0].kv, host[1].kv, None, non_blocking=True)

        def one_d(srcs=(host[0].tensor.view(-1), host[1].tensor.view(-1)), numel=numel):
            for _ in range(layers):
                for i, src in enumerate(srcs):
                    flat_dst[i, :numel].copy_(src[:numel], non_blocking=True)

        def one_d_other(numel=numel):
            one_d((other.tensor[0], other.tensor[1]), numel)

        if device.type != "cuda":  # flow check: the interpreter path copies plain slices
            copy_kv_rows(dev[0], dev[1], host[0].kv, host[1].kv, rows, non_blocking=False)
            check(host, dev, rows)
            out.append({"shape": list(shape), "rows": rows})
            continue
        for d_ in dev:
            d_.zero_()
        two_d()
        torch.cuda.synchronize()
        check(host, dev, rows)
        nbytes = 2 * layers * numel * 2
        row = {"shape": list(shape), "rows": rows, "layers": layers, "bytes": nbytes}
        ways = (("2d", two_d, nbytes), ("1d", one_d, nbytes), ("1d_other_buffer", one_d_other, nbytes),
                ("whole", whole, 2 * layers * n * h * s * d * 2))
        times = {name: [] for name, _, _ in ways}
        for _ in range(9):  # interleaved, so drift in the link's rate hits every way alike
            for name, fn, _ in ways:
                times[name].append(event_ms(fn))
        for name, _, b in ways:
            ms = sorted(times[name])[4]
            row[f"{name}_ms"], row[f"{name}_gbs"] = ms, b / ms / 1e6
        if rows == rows_list[-1]:
            row["after"] = history(host, dev, one_d, nbytes)
        out.append(row)
        print(f"{shape} rows {rows:4d}: 2-D {row['2d_gbs']:5.1f} GB/s ({rows * d * 2} B segments), "
              f"1-D same bytes {row['1d_gbs']:5.1f} (other buffer {row['1d_other_buffer_gbs']:5.1f}), "
              f"whole {row['whole_gbs']:5.1f} (2-D time / 1-D time {row['2d_ms'] / row['1d_ms']:.3f})")
    for b in host + [other]:
        b.free()
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default="opt-30b,llama-2-7b", help=f"comma list of {', '.join(SHAPES)}")
    ap.add_argument("--layers", type=int, default=48)
    ap.add_argument("--rows", default="16,32,48,64")
    ap.add_argument("--out", default="probe-kv-copy.json")
    a = ap.parse_args(argv)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    models = [m for m in a.models.split(",") if m]
    bad = [m for m in models if m not in SHAPES]
    if bad:
        raise SystemExit(f"unknown model(s) {bad}: use {', '.join(SHAPES)}")
    if a.layers < 1:
        raise SystemExit("--layers must be >= 1")
    if device.type != "cuda":
        print("no GPU: a flow check of the 2-D KV copy on tiny shapes (no timing)")
        models, a.layers, a.rows = ["tiny"], 1, "3,8"
    rows = [int(r) for r in a.rows.split(",") if r]
    results = []
    for m in models:
        shape = SHAPES[m]
        if any(not 0 < r <= shape[2] for r in rows):
            raise SystemExit(f"--rows must be in [1, {shape[2]}] for {m}")
        results += [dict(r, model=m) for r in run(shape, a.layers, rows, device)]
    write_json(a.out, {"meta": metadata(), "rows": results})
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
