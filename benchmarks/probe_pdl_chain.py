"""Probe: can programmatic dependent launch (PDL) close the all-HBM decode step's gap to the bound?

On the H200 the 7-8B models' all-HBM decode step runs at 0.78-0.87 x the HBM bound (fifteenth
session, H4): cuBLAS GEMMs take 4.00 of Llama-3-8B's 4.82 ms and the small ones (qkv, o) read at
3.0-3.2 TB/s, the rest is ~400 small kernels and the gaps between them. Every kernel starts on
an idle HBM (launch, ramp-up) and ends with a tail. With PDL (Hopper) a kernel may launch while its
predecessor still runs: it waits (`griddepcontrol.wait`) only before reading what the predecessor
wrote, and a GEMV's weights are never written, so it can pull them toward L2 before waiting.

This replays a chain shaped like a Llama-3-8B decode step (N tokens; per layer: qkv, o, gate_up,
down, each after a small elementwise kernel like the norms/attention between them; then the LM
head) in one CUDA graph, in these variants:

    torch     cuBLAS GEMMs (torch.mm), Triton elementwise kernels          (dak's default today)
    triton    a Triton decode GEMV, the same elementwise kernels
    pdl       both launched with PDL: an elementwise kernel lets the next GEMV launch at its start, then
              waits; a GEMV waits, then lets the next kernel launch (so at most one GEMV runs ahead;
              letting every kernel trigger first cascaded the whole graph in, 0.82x torch's step)
    pdl-pf    pdl + each GEMV program prefetches its first `--prefetch-kib` KiB of weights a row
              into L2 (cp.async.bulk.prefetch) before it waits

For each: ms a step, weight GB/s, the ratio to torch's step (same call) and the final output's
error against torch's. The GEMV's tile config is picked per shape first, each config timed inside a CUDA
graph of back-to-back launches over distinct weights (no L2 hits), cuBLAS beside it.

    PYTHONPATH=src python3 benchmarks/probe_pdl_chain.py --out probe-pdl-chain.json

GPU only (Hopper or newer for PDL).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import torch
import triton
import triton.language as tl

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import metadata, write_json  # noqa: E402

SHAPES = {  # (rows M, inputs K) per layer, then the LM head
    "llama-3-8b": ([(6144, 4096), (4096, 4096), (28672, 4096), (4096, 14336)], (128256, 4096), 32),
    "llama-2-7b": ([(12288, 4096), (4096, 4096), (22016, 4096), (4096, 11008)], (32000, 4096), 32),
}
CONFIGS = [(bm, bk, st) for bm in (16, 32, 64) for bk in (128, 256) for st in (3, 4, 5)]


@triton.jit
def _gemv(x_ptr, w_ptr, y_ptr, N, M, K, PF_BYTES,
          BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
          PDL: tl.constexpr, PREFETCH: tl.constexpr):
    """y[N, M] = x[N, K] @ w[M, K]^T, one program per BLOCK_M rows, fp32 accumulation."""
    pid = tl.program_id(0)
    rm = pid * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    if PREFETCH:  # weights are never written by the chain: pull this program's rows toward L2 now
        rows = (w_ptr + rm.to(tl.int64) * K).to(tl.int64)  # global addresses for the "l" operand
        tl.inline_asm_elementwise("cp.async.bulk.prefetch.L2.global [$1], $2; // dummy $0", "=r,l,r",
                                  [rows, PF_BYTES + tl.zeros([BLOCK_M], tl.int32)], dtype=tl.int32,
                                  is_pure=False, pack=1)
    if PDL:  # wait first, then let the next kernel launch: at most one GEMV runs ahead of the chain
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
    acc = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
    w_rows = w_ptr + rm.to(tl.int64)[:, None] * K
    x_rows = x_ptr + rn[:, None] * K
    for k in range(0, K, BLOCK_K):
        w = tl.load(w_rows + (k + rk)[None, :])
        x = tl.load(x_rows + (k + rk)[None, :], mask=rn[:, None] < N, other=0.0)
        acc += tl.dot(x, tl.trans(w))
    tl.store(y_ptr + rn[:, None] * M + rm[None, :], acc.to(y_ptr.dtype.element_ty), mask=rn[:, None] < N)


@triton.jit
def _scale(x_ptr, y_ptr, n_cols, in_stride, PDL: tl.constexpr, BLOCK: tl.constexpr):
    """y[r, :n_cols] = x[r, :n_cols]: a stand-in for the norms/attention between GEMVs. With PDL it
    lets the next GEMV launch at once (that one prefetches its weights while this chain's previous
    GEMV still runs), then waits for its own input."""
    if PDL:
        tl.extra.cuda.gdc_launch_dependents()
        tl.extra.cuda.gdc_wait()
    r = tl.program_id(0)
    for c in range(0, n_cols, BLOCK):
        cols = c + tl.arange(0, BLOCK)
        v = tl.load(x_ptr + r * in_stride + cols, mask=cols < n_cols)
        tl.store(y_ptr + r * n_cols + cols, v, mask=cols < n_cols)


def gemv(x, w, y, cfg, pdl=False, pf_bytes=0):
    bm, bk, st = cfg
    n, k = x.shape
    _gemv[(w.shape[0] // bm,)](x, w, y, n, w.shape[0], k, pf_bytes, BLOCK_M=bm, BLOCK_N=16, BLOCK_K=bk,
                                PDL=pdl, PREFETCH=pf_bytes > 0, num_warps=4, num_stages=st, launch_pdl=pdl)


def scale(x, y, pdl=False):
    _scale[(x.shape[0],)](x, y, y.shape[1], x.shape[1], PDL=pdl, BLOCK=1024, num_warps=4, launch_pdl=pdl)


def median_ms(fn, reps):
    times = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e))
    return statistics.median(times[2:])


def graph_ms(launch, copies, reps):
    """ms of one `launch(i)` inside a CUDA graph of `copies` launches back to back (each over its own
    weights, so none hits L2): the in-graph time, without eager launch overhead."""
    for i in range(copies):
        launch(i)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for i in range(copies):
            launch(i)
    t = median_ms(graph.replay, reps) / copies
    del graph
    return t


def pick_config(n, m, k, reps=20):
    """The fastest (BLOCK_M, BLOCK_K, stages) for one shape timed in a graph, torch's time beside."""
    copies = max(4, -(-240_000_000 // (m * k * 2)))
    x = torch.randn(n, k, dtype=torch.bfloat16, device="cuda")
    ws = [torch.randn(m, k, dtype=torch.bfloat16, device="cuda") for _ in range(copies)]
    y = torch.empty(n, m, dtype=torch.bfloat16, device="cuda")
    best, sweep = None, []
    for cfg in CONFIGS:
        if m % cfg[0] or k % cfg[1]:
            continue
        t = graph_ms(lambda i, cfg=cfg: gemv(x, ws[i], y, cfg), copies, reps)
        sweep.append((cfg, t))
        best = min(best or (cfg, t), (cfg, t), key=lambda c: c[1])
    ref = x.float() @ ws[0].float().t()
    gemv(x, ws[0], y, best[0])
    err = ((y.float() - ref).norm() / ref.norm()).item()
    t_torch = graph_ms(lambda i: torch.mm(x, ws[i].t(), out=y), copies, reps)
    return {"M": m, "K": k, "config": best[0], "t_triton_ms": best[1], "t_torch_ms": t_torch, "rel_err": err,
            "gbps_triton": m * k * 2 / best[1] / 1e6, "gbps_torch": m * k * 2 / t_torch / 1e6,
            "sweep": [[list(c), t] for c, t in sweep]}


def build(model, n, layers):
    per_layer, head, n_layers = SHAPES[model]
    layers = layers or n_layers
    g = torch.Generator(device="cuda").manual_seed(0)
    ws = [[torch.randn(m, k, generator=g, device="cuda", dtype=torch.bfloat16) * k ** -0.5 for m, k in per_layer]
          for _ in range(layers)]
    head_w = torch.randn(*head, generator=g, device="cuda", dtype=torch.bfloat16) * head[1] ** -0.5
    bufs = {k: torch.empty(n, k, dtype=torch.bfloat16, device="cuda") for k in {k for _, k in per_layer + [head]}}
    outs = {m: torch.empty(n, m, dtype=torch.bfloat16, device="cuda") for m in {m for m, _ in per_layer + [head]}}
    return ws, head_w, bufs, outs


def step_fn(variant, ws, head_w, bufs, outs, x0, cfgs, pf_kib):
    """One chained step: scale into each GEMV's input, multiply; returns the LM head's output."""
    pdl = variant.startswith("pdl")

    def mm(x, w):
        y = outs[w.shape[0]]
        if variant == "torch":
            torch.mm(x, w.t(), out=y)
        else:
            pf = min(pf_kib * 1024, w.shape[1] * 2) if variant == "pdl-pf" else 0
            gemv(x, w, y, cfgs[tuple(w.shape)], pdl=pdl, pf_bytes=pf)
        return y

    def run():
        h = x0
        for layer in ws:
            for w in layer:
                x = bufs[w.shape[1]]
                scale(h, x, pdl=pdl)
                h = mm(x, w)
        x = bufs[head_w.shape[1]]
        scale(h, x, pdl=pdl)
        return mm(x, head_w)
    return run


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="llama-3-8b", choices=sorted(SHAPES))
    ap.add_argument("--tokens", type=int, default=8)
    ap.add_argument("--layers", type=int, default=0, help="0: the model's own count")
    ap.add_argument("--prefetch-kib", type=int, nargs="*", default=[4])
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("probe_pdl_chain.py needs a CUDA GPU (Hopper or newer for PDL)")
    if a.tokens < 1 or a.tokens > 16:
        sys.exit(f"--tokens must be 1..16 (the GEMV pads tokens to 16), got {a.tokens}")
    per_layer, head, _ = SHAPES[a.model]
    shapes = {}
    for m, k in per_layer + [head]:
        shapes[(m, k)] = pick_config(a.tokens, m, k)
        r = shapes[(m, k)]
        print(f"{m:6d} x {k:5d}: triton {r['t_triton_ms'] * 1e3:7.1f} us ({r['gbps_triton']:5.0f} GB/s, {r['config']}), "
              f"torch {r['t_torch_ms'] * 1e3:7.1f} us ({r['gbps_torch']:5.0f} GB/s), err {r['rel_err']:.1e}", flush=True)
    cfgs = {s: r["config"] for s, r in shapes.items()}
    ws, head_w, bufs, outs = build(a.model, a.tokens, a.layers)
    wbytes = sum(w.numel() * 2 for layer in ws for w in layer) + head_w.numel() * 2
    x0 = torch.randn(a.tokens, per_layer[0][1], dtype=torch.bfloat16, device="cuda")
    variants = ["torch", "triton", "pdl"] + [f"pdl-pf{kib}" for kib in a.prefetch_kib]
    rows, ref = [], None
    for v in variants:
        kib = int(v[6:]) if v.startswith("pdl-pf") else 0
        run = step_fn("pdl-pf" if kib else v, ws, head_w, bufs, outs, x0, cfgs, kib)
        try:
            run()
            torch.cuda.synchronize()
        except Exception as e:  # noqa: BLE001 - a variant that does not build is reported, the rest run
            print(f"{v:10s} failed: {type(e).__name__}: {str(e)[:300]}", flush=True)
            rows.append({"variant": v, "error": f"{type(e).__name__}: {str(e)[:300]}"})
            continue
        eager = median_ms(run, a.reps)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out = run()
        graph.replay()
        torch.cuda.synchronize()
        out = out.float().clone()
        ref = out if ref is None else ref
        t = median_ms(graph.replay, a.reps)
        err = ((out - ref).norm() / ref.norm()).item()
        rows.append({"variant": v, "graph_ms": t, "eager_ms": eager, "gbps": wbytes / t / 1e6, "err_vs_torch": err})
        print(f"{v:10s} graph {t:7.3f} ms ({wbytes / t / 1e6:5.0f} GB/s, x{rows[0]['graph_ms'] / t:.3f} vs torch) "
              f"eager {eager:7.3f} ms, err vs torch {err:.1e}", flush=True)
        del graph
    write_json(a.out, {"meta": dict(metadata(), command=" ".join(sys.argv)), "model": a.model, "tokens": a.tokens, "weight_bytes": wbytes,
                       "shapes": [dict(r, config=list(r["config"])) for r in shapes.values()], "rows": rows})


if __name__ == "__main__":
    main()
