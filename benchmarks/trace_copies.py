"""Host-to-device copies in a Chrome trace: how many, how big, how fast, how many at once.

Reads the trace `profile_step.py --trace` writes (plain or .gz) and prints, per (stream, copy
size), the copies per step, their median duration and rate, then how long 0, 1, 2, ... copies
were in flight per step. This is how the README's OPT-30B figures were read from
`trace-opt-30b-*-s9-h200.json.gz` (prefetch: 48 copies of 66 MB a step at 55.4 GB/s; dak: 336 of
3.7-17 MB at 45-49 GB/s, one in flight at a time).

    python3 benchmarks/trace_copies.py benchmarks/results/trace-opt-30b-prefetch-5-s9-h200.json.gz --steps 2
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
from collections import Counter, defaultdict


def load(path: str) -> dict:
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        return json.load(f)


def h2d_copies(trace: dict) -> list[dict]:
    """The trace's host-to-device memcpy events (complete events), in time order."""
    evs = [e for e in trace.get("traceEvents", [])
           if e.get("ph") == "X" and e.get("cat") == "gpu_memcpy" and "HtoD" in e.get("name", "")]
    return sorted(evs, key=lambda e: e["ts"])


def device_streams(trace: dict) -> int:
    """Distinct streams that ran a kernel or a copy: in a graph replay, the graph-internal streams
    its nodes were spread over (OPT-30B's dak decode graph at 5%: 289; prefetch's: 2)."""
    return len({e.get("args", {}).get("stream") for e in trace.get("traceEvents", [])
                if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")})


def summarize(copies: list[dict], steps: int) -> dict:
    """Per (stream, bytes): copies per step, median us and GB/s; us per step with k copies in flight."""
    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    groups = defaultdict(list)
    for c in copies:
        groups[(c["args"].get("stream"), c["args"].get("bytes", 0))].append(c["dur"])
    rows = []
    for (stream, nbytes), durs in sorted(groups.items(), key=lambda kv: (str(kv[0][0]), kv[0][1])):
        med = statistics.median(durs)
        rows.append({"stream": stream, "bytes": nbytes, "per_step": len(durs) / steps, "median_us": med,
                     "gbs": nbytes / med / 1e3 if med > 0 else 0.0})
    edges = sorted([(c["ts"], 1) for c in copies] + [(c["ts"] + c["dur"], -1) for c in copies])
    in_flight, level, last = Counter(), 0, edges[0][0] if edges else 0.0
    for t, d in edges:
        in_flight[level] += t - last
        level, last = level + d, t
    busy = sum(c["dur"] for c in copies)
    return {"groups": rows, "bytes_per_step": sum(c["args"].get("bytes", 0) for c in copies) / steps,
            "gbs_overall": sum(c["args"].get("bytes", 0) for c in copies) / busy / 1e3 if busy > 0 else 0.0,
            "in_flight_us_per_step": {k: v / steps for k, v in sorted(in_flight.items())}}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("trace", help="Chrome trace (.json or .json.gz)")
    ap.add_argument("--steps", type=int, default=2, help="decode steps the trace holds (profile_step --steps)")
    a = ap.parse_args(argv)
    trace = load(a.trace)
    copies = h2d_copies(trace)
    if not copies:
        raise SystemExit(f"{a.trace} holds no host-to-device copies (was it traced on a GPU with host rows?)")
    rep = summarize(copies, a.steps)
    for r in rep["groups"]:
        print(f"stream {r['stream']}: {r['bytes'] / 1e6:8.2f} MB x {r['per_step']:6.1f}/step, median "
              f"{r['median_us']:8.1f} us, {r['gbs']:5.1f} GB/s")
    print(f"{rep['bytes_per_step'] / 1e9:.3f} GB a step at {rep['gbs_overall']:.1f} GB/s over the copies' own time; "
          "ms a step with k copies in flight: "
          + ", ".join(f"{k}: {v / 1e3:.2f}" for k, v in rep["in_flight_us_per_step"].items()))
    print(f"{device_streams(trace)} device streams ran kernels or copies")


if __name__ == "__main__":
    main()
