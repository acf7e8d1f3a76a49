"""Probe: do the kernels that run beside a chain of host copies slow the copy engine down?

On the H200, OPT-30B at 5% (graph-replay traces, `trace_copies.py`): the prefetch baseline's 66 MB
copies ran at 55.4 GB/s beside cuBLAS GEMVs, while dak's chain copies of 29-62 MB ran at ~51 beside
its Triton split kernels, and pinned buffers copied back to back with nothing else running reach
55.0. This replays a chain shaped like dak's step, in one CUDA graph, with different work beside it:

    for i in range(copies):
        copy stream:  wait until slot i % 2 is free; copy host buffer i into it
        main stream:  `--beside` work (HBM only, independent of the copy); wait for copy i;
                      multiply the staged rows (torch's GEMM); slot i % 2 is free again

`--beside`: none | cublas (torch's GEMV over a 28672 x 7168 weight in HBM, as prefetch's layers
run) | triton (dak's split kernel over the same weight, all rows in HBM, its heuristic config).
For each it reports the step time, the copies' rate (host bytes / step) and the beside-work's own
time (the same graph without copies), so the step is link-bound whenever that is well below it.

    PYTHONPATH=src python3 benchmarks/probe_copy_contention.py --out probe-copy-contention.json

Without a GPU: a flow check on tiny shapes (the staged products against a float32 reference).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import metadata, split_kernel_call, write_json  # noqa: E402
from probe_copy_chain import time_graph  # noqa: E402

from dak.host import PinnedBuffer  # noqa: E402

BESIDE = ("none", "cublas", "triton")


def beside_fn(kind: str, x: torch.Tensor, w: torch.Tensor):
    """The HBM-only work run on the main stream before each staged GEMM, or None."""
    if kind == "none":
        return None
    if kind == "cublas":
        return lambda: F.linear(x, w)
    if kind == "triton":
        return split_kernel_call(x, w[:0], w)
    raise ValueError(f"--beside must be one of {', '.join(BESIDE)}, got {kind!r}")


def make_step(hosts, slots, x, extra, with_copies: bool = True, fork: bool = False):
    """One step of the chain (see the module doc); returns the staged products. `fork`: each
    staged GEMM runs on a side stream forked from the main one and joined back (as dak's
    copy-engine operators do by default), so a captured step has one branch per copy."""
    dev = x.device
    cuda = dev.type == "cuda"
    copy_s = torch.cuda.Stream(dev) if cuda else None
    comp_s = torch.cuda.Stream(dev) if cuda and fork else None

    def step():
        outs, freed = [], [None, None]
        if cuda:
            copy_s.wait_stream(torch.cuda.current_stream(dev))
        for i, h in enumerate(hosts):
            slot = slots[i % 2][:h.shape[0]]
            landed = None
            if with_copies and cuda:
                if freed[i % 2] is not None:
                    copy_s.wait_event(freed[i % 2])
                with torch.cuda.stream(copy_s):
                    slot.copy_(h, non_blocking=True)
                    landed = torch.cuda.Event()
                    landed.record(copy_s)
            elif with_copies:
                slot.copy_(h)
            if extra is not None:
                extra()
            main = torch.cuda.current_stream(dev) if cuda else None
            gemm_s = comp_s or main
            if comp_s is not None:
                comp_s.wait_stream(main)
            with torch.cuda.stream(gemm_s) if cuda else contextlib.nullcontext():
                if landed is not None:
                    gemm_s.wait_event(landed)
                outs.append(F.linear(x, slot))
                if cuda:
                    freed[i % 2] = torch.cuda.Event()
                    freed[i % 2].record(gemm_s)
            if comp_s is not None:
                main.wait_stream(comp_s)
        if cuda:
            torch.cuda.current_stream(dev).wait_stream(copy_s)
        return outs
    return step


def check(step, hosts, x) -> float:
    """Largest relative error of the staged products against float32 x @ host^T."""
    worst = 0.0
    for y, h in zip(step(), hosts):
        want = x.float().cpu() @ h.float().t()
        err = ((y.float().cpu() - want).abs().max() / want.abs().max().clamp_min(1e-6)).item()
        worst = max(worst, err if err == err else float("inf"))  # NaN (a slot never written) is the worst
    return worst


def run(copies: int, mib: int, k: int, m_beside: int, kinds, device, forks=(False,)) -> list[dict]:
    rows_per = max(1, (mib << 20) // (2 * k))
    g = torch.Generator().manual_seed(0)
    bufs = [PinnedBuffer((rows_per, k), torch.bfloat16) for _ in range(copies)]
    for b in bufs:
        b.tensor.copy_(torch.randn(rows_per, k, generator=g) / k ** 0.5)
    hosts = [b.tensor for b in bufs]
    slots = [torch.empty(rows_per, k, dtype=torch.bfloat16, device=device) for _ in range(2)]
    x = torch.randn(8, k, dtype=torch.bfloat16, device=device)
    w = (torch.randn(m_beside, k, device=device) / k ** 0.5).to(torch.bfloat16)
    host_bytes = sum(b.nbytes for b in bufs)
    out = []
    for kind, fork in ((kd, f) for kd in kinds for f in forks):
        extra = beside_fn(kind, x, w)
        step = make_step(hosts, slots, x, extra, fork=fork)
        err = check(step, hosts, x)
        if err > 2e-2:
            raise RuntimeError(f"staged products differ from the float32 reference (rel. {err:.3g}) with {kind}")
        row = {"beside": kind, "fork": fork, "copies": copies, "host_bytes": host_bytes, "max_rel_err": err}
        if device.type == "cuda":
            ms = time_graph(step, device, chained=False)
            alone = time_graph(make_step(hosts, slots, x, extra, with_copies=False, fork=fork), device, chained=False)
            row.update(step_ms=ms, beside_only_ms=alone, copy_GBps=host_bytes / ms / 1e6)
            print(f"beside {kind:7s} fork {fork!s:5}: step {ms:8.3f} ms, {host_bytes / 1e9:.3f} GB at "
                  f"{row['copy_GBps']:5.1f} GB/s; without the copies {alone:7.3f} ms", flush=True)
        else:
            print(f"beside {kind} fork {fork}: flow check, {copies} copies, max rel. error {err:.2e}")
        out.append(row)
    for b in bufs:
        b.free()
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--copies", type=int, default=48)
    ap.add_argument("--mib", type=int, default=32, help="MiB per copy")
    ap.add_argument("--k", type=int, default=7168, help="row length (elements)")
    ap.add_argument("--m-beside", type=int, default=28672, help="rows of the HBM weight the beside-work reads")
    ap.add_argument("--beside", default=",".join(BESIDE), help=f"comma list of {', '.join(BESIDE)}")
    ap.add_argument("--fork", choices=("no", "yes", "both"), default="no",
                    help="staged GEMMs on a forked side stream, one branch per copy (dak's default CE operators)")
    ap.add_argument("--out", default="probe-copy-contention.json")
    a = ap.parse_args(argv)
    forks = {"no": (False,), "yes": (True,), "both": (False, True)}[a.fork]
    kinds = [s for s in a.beside.split(",") if s]
    bad = [s for s in kinds if s not in BESIDE]
    if bad:
        raise SystemExit(f"unknown --beside {bad}: use {', '.join(BESIDE)}")
    if min(a.copies, a.mib, a.k, a.m_beside) < 1:
        raise SystemExit("--copies, --mib, --k and --m-beside must be >= 1")
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.type != "cuda":
        from dak.runtime_env import interpreting
        if "triton" in kinds and not interpreting():
            raise SystemExit("no GPU: --beside triton runs dak's split kernel, which needs TRITON_INTERPRET=1 "
                             "on the CPU (or leave triton out of --beside)")
        print("no GPU: a flow check on tiny shapes (no copy engine, no timing)")
        a.copies, a.k, a.m_beside = 3, 64, 96
        a.mib = 1
    rows = run(a.copies, a.mib, a.k, a.m_beside, kinds, device, forks)
    write_json(a.out, {"meta": metadata(), "rows": rows})
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
