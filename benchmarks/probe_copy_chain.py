"""Probe: does the copy-ahead chain keep the host link at its copy-engine rate?

A decode step of dak's copy-engine operators, without the rest of the model: `--layers` layers
of a model's linear shapes (default OPT-30B: four 7168x7168, 28672x7168, 7168x28672), every
one with `--host-ratio` of its rows in pinned memory and all of them moved by the copy engine
(ce_share 1), chained by copy-ahead and captured in one CUDA graph. For each setting (copy
streams 1/2, copy chunks per operator 1/4, staging slots 2/4/6, copy groups of up to 64 MiB) it prints the step time next to

    link bound = host bytes / B_ce   (B_ce: one 1 GiB copy, measured in the same run)
    HBM time   = the same step with every row in HBM

so link efficiency = link bound / step says how much of the step the link idles or runs slow.
The first setting's operators are also run the prefetch baseline's way (one copy per layer,
one layer ahead, `layer_prefetch_step`) in the same run.
On the H200 end to end, OPT-30B at x = 5% moved 3.03 GB in 60.6 ms (50 GB/s) while prefetch,
one copy per layer, moved 3.17 GB in 57.6 ms (55 GB/s): this separates the chain from the model.

    PYTHONPATH=src python3 benchmarks/probe_copy_chain.py --out probe-copy-chain.json

Without a GPU: a flow check on tiny shapes (no copy engine, no graph, no timing).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import h2d_bandwidth, metadata, write_json  # noqa: E402

from dak.kernels import copy_ahead  # noqa: E402
from dak.kernels.tuning import token_bucket  # noqa: E402
from dak.nn import SplitLinear  # noqa: E402

SHAPES = {"opt-30b": [(7168, 7168)] * 4 + [(28672, 7168), (7168, 28672)],
          "llama-2-7b": [(4096, 4096)] * 4 + [(11008, 4096)] * 2 + [(4096, 11008)],
          "tiny": [(96, 64)] * 2 + [(160, 64), (64, 160)]}


def build(shapes, layers: int, ratio: float, n: int, chunks: int, device):
    mods = []
    g = torch.Generator(device=device).manual_seed(0)
    for _ in range(layers):
        for out_f, in_f in shapes:
            w = (torch.randn(out_f, in_f, generator=g, device=device) / in_f ** 0.5).to(torch.bfloat16)
            mod = SplitLinear(w, host_ratio=ratio, row_tile=64, tune=False).to(device)
            cfg = mod.prepare(n)
            if cfg is not None:
                mod._configs[token_bucket(n)] = dataclasses.replace(cfg, ce_share=1.0, ce_chunks=chunks)
            mods.append(mod)
    return mods


def step_fn(mods, xs):
    def step():
        for mod in mods:
            mod(xs[mod.in_features])
    return step


def layer_prefetch_step(mods, per_layer: int, xs, device):
    """The same operators the way the prefetch baseline moves them: each layer's host rows in one
    pinned buffer, copied in one memcpy, one layer ahead, into two alternating HBM buffers."""
    import torch.nn.functional as F

    from dak.host import PinnedBuffer
    layers = [mods[i:i + per_layer] for i in range(0, len(mods), per_layer)]
    sizes = [sum(m.host_rows * m.in_features for m in layer) for layer in layers]
    host = []
    for layer, n in zip(layers, sizes):
        buf = PinnedBuffer((1, max(n, 1)), torch.bfloat16)
        off = 0
        for m in layer:
            rows = m.host_rows * m.in_features
            buf.tensor[0, off:off + rows].copy_(m.w_host[:, :m.in_features].reshape(-1))
            off += rows
        host.append(buf)
    stage = [torch.empty(max(sizes), dtype=torch.bfloat16, device=device) for _ in range(2)]
    cuda = device.type == "cuda"
    side = torch.cuda.Stream(device) if cuda else None
    ready = [torch.cuda.Event() if cuda else None for _ in layers]

    def copy(l):
        if not cuda:
            stage[l % 2][:sizes[l]].copy_(host[l].tensor[0, :sizes[l]])
            return
        side.wait_stream(torch.cuda.current_stream(device))  # the buffer's previous layer is done
        with torch.cuda.stream(side):
            stage[l % 2][:sizes[l]].copy_(host[l].tensor[0, :sizes[l]], non_blocking=True)
            ready[l].record(side)

    def step():
        """Returns each operator's output (staged rows, then HBM rows), in order."""
        outs = []
        copy(0)
        for l, layer in enumerate(layers):
            if l + 1 < len(layers) and cuda:
                copy(l + 1)
            if cuda:
                torch.cuda.current_stream(device).wait_event(ready[l])
            elif l:
                copy(l)
            off = 0
            for m in layer:
                rows = m.host_rows * m.in_features
                x = xs[m.in_features]
                outs.append((F.linear(x, stage[l % 2][off:off + rows].view(m.host_rows, m.in_features)),
                             F.linear(x, m.w_hbm)))
                off += rows
        if cuda:
            torch.cuda.current_stream(device).wait_stream(side)
        return outs
    return step, host


def check_prefetch_step(mods, pf_step, xs) -> float:
    """Largest |difference| between the emulated prefetch step's outputs and the SplitLinears'."""
    worst = 0.0
    for m, (yh, yg) in zip(mods, pf_step()):
        want = m(xs[m.in_features]).float()
        got = torch.cat([yh, yg], dim=-1).float()
        err = (got - want).abs().max().item() / max(want.abs().max().item(), 1e-6)
        worst = max(worst, err if err == err else float("inf"))  # NaN must fail the check, not pass it
    return worst


def time_graph(step, device, chained: bool, reps: int = 20) -> float:
    """Median ms of one replay of `step` captured (inside a copy-ahead step when chained)."""
    def body():
        if chained:
            with copy_ahead.copy_ahead_step(device):
                step()
        else:
            step()
    body()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        body()
    times = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        graph.replay()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e))
    del graph
    return statistics.median(times[2:])


def run(model: str, layers: int, ratio: float, n: int, settings, out: str) -> dict:
    gpu = torch.cuda.is_available()
    device = torch.device("cuda" if gpu else "cpu")
    shapes = SHAPES[model if gpu else "tiny"]
    xs = {k: torch.randn(n, k, dtype=torch.bfloat16, device=device) for k in {s[1] for s in shapes}}
    rows, b_ce = [], h2d_bandwidth() if gpu else None
    hbm = build(shapes, layers, 0.0, n, 1, device)
    hbm_ms = time_graph(step_fn(hbm, xs), device, chained=False) if gpu else None
    del hbm
    for streams, chunks, slots, group in settings:
        os.environ["DAK_COPY_STREAMS"], os.environ["DAK_COPY_SLOTS"] = str(streams), str(slots)
        os.environ["DAK_COPY_GROUP_MIB"] = str(group)
        mods = build(shapes, layers, ratio, n, chunks, device)
        step = step_fn(mods, xs)
        host_bytes = sum(m.host_rows * m.w_host.stride(0) * 2 for m in mods)
        with copy_ahead.record_chain() as order:
            step()
        chained = copy_ahead.link_chain(order, n)
        row = {"streams": streams, "chunks": chunks, "slots": slots, "group_mib": group, "ops": len(mods),
               "chained": chained, "host_bytes": host_bytes,
               "copies": len({id(m._ahead.group) if m._ahead.group else id(m) for m in mods if m._ahead})}
        if gpu:
            ms = time_graph(step, device, chained=True)
            bound = host_bytes / b_ce * 1e3
            row.update(step_ms=ms, link_bound_ms=bound, hbm_only_ms=hbm_ms, link_efficiency=bound / ms,
                       link_GBps=host_bytes / ms / 1e6)
            print(f"streams {streams} chunks {chunks} slots {slots} group {group} MiB ({row['copies']} copies): "
                  f"step {ms:.3f} ms, link bound {bound:.3f} ms "
                  f"({host_bytes / 1e9:.3f} GB at {b_ce / 1e9:.1f} GB/s), HBM-only {hbm_ms:.3f} ms, "
                  f"link efficiency {bound / ms:.3f}", flush=True)
        else:
            with copy_ahead.copy_ahead_step(device):
                step()
            print(f"streams {streams} chunks {chunks} slots {slots} group {group} MiB: {len(mods)} operators, "
                  f"{chained} chained, {row['copies']} copies (CPU flow check)")
        first = (streams, chunks, slots, group) == settings[0]  # also run the prefetch baseline's way
        if first:
            pf_step, pf_host = layer_prefetch_step(mods, len(shapes), xs, device)
            err = check_prefetch_step(mods, pf_step, xs)
            if err > 2e-2:
                raise RuntimeError(f"the emulated prefetch step differs from the SplitLinears (rel. {err:.3g})")
        if gpu and first:
            pf = time_graph(pf_step, device, chained=False)
            rows.append({"streams": "layer prefetch", "chunks": 1, "slots": 2, "ops": len(mods), "host_bytes": host_bytes,
                         "step_ms": pf, "link_bound_ms": bound, "hbm_only_ms": hbm_ms,
                         "link_efficiency": bound / pf, "link_GBps": host_bytes / pf / 1e6})
            print(f"layer prefetch (one copy per layer): step {pf:.3f} ms, link efficiency {bound / pf:.3f}", flush=True)
        if first:
            for b in pf_host:
                b.free()
        copy_ahead.unlink(mods)
        for m in mods:
            m._host.free()
        del mods
        rows.append(row)
    os.environ.pop("DAK_COPY_STREAMS", None)
    os.environ.pop("DAK_COPY_SLOTS", None)
    os.environ.pop("DAK_COPY_GROUP_MIB", None)
    payload = {"meta": metadata(), "model": model, "layers": layers, "host_ratio": ratio, "tokens": n,
               "b_ce": b_ce, "rows": rows}
    write_json(out, payload)
    print(f"wrote {out}")
    return payload


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="opt-30b", choices=[k for k in SHAPES if k != "tiny"])
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--host-ratio", type=float, default=0.05)
    ap.add_argument("--tokens", type=int, default=8)
    ap.add_argument("--settings", default="1x1x2,2x1x2,1x1x4,1x1x6,1x1x2x64,1x1x4x64,1x4x2",
                    help="copy streams x chunks per operator x slots [x group MiB], comma list")
    ap.add_argument("--out", default="probe-copy-chain.json")
    a = ap.parse_args(argv)
    settings = []
    for s in (s for s in a.settings.split(",") if s):
        parts = [int(v) for v in s.split("x") if v.isdigit()]
        if len(parts) not in (2, 3, 4) or len(parts) != len(s.split("x")):
            raise SystemExit(f"--settings takes streams x chunks [x slots [x group MiB]], e.g. 1x1x4x64; got {s!r}")
        settings.append(tuple(parts) + (2, 0)[len(parts) - 2:])
    run(a.model, a.layers, a.host_ratio, a.tokens, settings, a.out)


if __name__ == "__main__":
    main()
