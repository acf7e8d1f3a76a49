"""Probe: how much of a graph-replay timing is the graph launch itself, per call?

Until the twenty-fourth session `dak.kernels.timing.graph_time_ms` recorded a start event on an
idle GPU, replayed a graph of P calls and recorded an end event: the time the host takes to
submit the graph (cudaGraphLaunch) landed inside the window, each call charged launch / P. P
came from the eager time of one call (which holds Python launch overhead: P = 1 for dak's
launchers), so two implementations of one operator were charged differently. This times a few
decode-sized operators five ways in one process:

    old          that timer (P from the eager time, idle GPU)
    auto-busy    the same P, but the GPU busy (torch.cuda._sleep) while the host submits
    p64-busy     64 calls a graph, GPU busy while the host submits
    p64-idle     64 calls a graph, GPU idle
    new          graph_time_ms as it is now (P from a first busy replay, GPU busy)

each over one buffer (L2 may hit) and over copies that make >= 180 MB (no L2 hits).

    PYTHONPATH=src python3 benchmarks/probe_timing.py --out probe-timing.json

GPU only.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import metadata, write_json  # noqa: E402

from dak.baselines.attention import sdpa_decode  # noqa: E402
from dak.kernels.attention_config import heuristic_config  # noqa: E402
from dak.kernels.hbm_gemv import hbm_gemv, heuristic  # noqa: E402
from dak.kernels.split_attention_ce import split_attention_ce  # noqa: E402
from dak.kernels.timing import _capture, busy_replay_ms, event_ms, graph_time_ms  # noqa: E402

L2_BYTES = 60 << 20


def graph_ms(calls, per_graph: int, busy: bool, replays: int = 10) -> float:
    """Median ms a call over `replays` replays of a graph of `per_graph` calls (rotated)."""
    for fn in calls:
        fn()
    torch.cuda.synchronize()
    g = _capture(calls, per_graph)
    times = [(busy_replay_ms(g) if busy else event_ms(g.replay)) / per_graph for _ in range(replays)]
    return statistics.median(times)


def auto_per_graph(calls) -> int:
    one = max(event_ms(calls[0]), 1e-3)
    p = max(len(calls), min(40, int(0.3 / one) + 1))
    return -(-p // len(calls)) * len(calls)


def cases(dtype):
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    out = []
    for (b, hq, hkv, s) in ((8, 32, 8, 256), (8, 32, 32, 64), (8, 32, 8, 2048)):
        c = 2 * b * hkv * s * 128 * 2
        n = min(8, max(1, math.ceil(3 * L2_BYTES / c)))
        kv = [tuple(torch.randn(b, hkv, s, 128, device="cuda").to(dtype) for _ in range(2)) for _ in range(n)]
        q = torch.randn(b, hq, 128, device="cuda").to(dtype)
        lengths = torch.full((b,), s, dtype=torch.int32, device="cuda")
        e = torch.empty(0, hkv, s, 128, device="cuda", dtype=dtype)
        cfg = heuristic_config(0, b, hkv, hq // hkv, s, 128, sms)
        dak = [lambda k=k, v=v, q=q, e=e, n=lengths, c=cfg: split_attention_ce(q, e, e, k, v, n, c, sms, None,
                                                                                     validate=False)
               for k, v in kv]
        torch_ = [lambda k=k, v=v, q=q: sdpa_decode(q, k, v, None, "cudnn") for k, v in kv]
        out.append((f"attn B{b} Hq{hq} Hkv{hkv} S{s} dak", dak, c))
        out.append((f"attn B{b} Hq{hq} Hkv{hkv} S{s} torch-cudnn", torch_, c))
    for (m, k) in ((4096, 4096), (11008, 4096), (28672, 8192)):
        c = m * k * 2
        n = max(1, math.ceil(3 * L2_BYTES / c))
        ws = [torch.randn(m, k, device="cuda").to(dtype) for _ in range(n)]
        x = torch.randn(8, k, device="cuda").to(dtype)
        y = torch.empty(8, m, device="cuda", dtype=dtype)
        cfg = heuristic(m, k)
        out.append((f"gemv {m}x{k} N8 dak", [lambda w=w, x=x, y=y, c=cfg: hbm_gemv(x, w, None, c, y)
                                                  for w in ws], c))
        out.append((f"gemv {m}x{k} N8 torch", [lambda w=w, x=x: torch.nn.functional.linear(x, w)
                                                   for w in ws], c))
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="probe-timing.json")
    a = ap.parse_args(argv)
    if not torch.cuda.is_available():
        sys.exit("probe_timing.py needs a GPU")
    rows = []
    for name, calls, c in cases(torch.bfloat16):
        row = {"case": name, "bytes": c, "copies": len(calls)}
        for tag, cs in (("one", calls[:1]), ("rot", calls)):
            p = auto_per_graph(cs)
            row[f"{tag}_per_graph_auto"] = p
            row[f"{tag}_old"] = graph_ms(cs, p, False)
            row[f"{tag}_new"] = graph_time_ms(cs, target_ms=20.0, max_replays=10)
            row[f"{tag}_p-auto-busy"] = graph_ms(cs, p, True)
            row[f"{tag}_p64-busy"] = graph_ms(cs, 64, True)
            row[f"{tag}_p64-idle"] = graph_ms(cs, 64, False)
        rows.append(row)
        print(f"{name:34s} " + "  ".join(
            f"{tag}: P={row[f'{tag}_per_graph_auto']:2d} old {row[f'{tag}_old'] * 1e3:6.1f} "
            f"new {row[f'{tag}_new'] * 1e3:6.1f} "
            f"auto-busy {row[f'{tag}_p-auto-busy'] * 1e3:6.1f} p64-busy {row[f'{tag}_p64-busy'] * 1e3:6.1f} "
            f"p64-idle {row[f'{tag}_p64-idle'] * 1e3:6.1f} us" for tag in ("one", "rot")), flush=True)
    write_json(a.out, {"meta": metadata(), "rows": rows})
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
