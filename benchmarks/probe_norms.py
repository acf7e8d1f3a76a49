"""Probe: what one decode-sized norm launch costs, dak's and torch's, by graph replay.

H58 (twenty-fourth session) profiled OPT-6.7B's all-HBM decode step: the layer's unfused
LayerNorm (`dak.kernels.fused_ops.layer_norm`) took about 4.4 us a launch, the fused add +
LayerNorm (`dak.kernels.fused_layer.add_layer_norm`), which reads twice the data, 2.5 us. This
times each norm on (tokens, hidden) bf16 rows, rotated over 8 input buffers, beside torch's
F.layer_norm (alone and after the residual add), in one process:

    PYTHONPATH=src python3 benchmarks/probe_norms.py --out probe-norms.json

GPU only.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import metadata, write_json  # noqa: E402

from dak.kernels.fused_layer import add_layer_norm, add_rms_norm  # noqa: E402
from dak.kernels.fused_ops import layer_norm, rms_norm  # noqa: E402
from dak.kernels.timing import graph_time_ms  # noqa: E402

COPIES = 8


def cases(n: int, h: int, dtype):
    xs = [torch.randn(n, h, device="cuda").to(dtype) for _ in range(COPIES)]
    rs = [torch.randn(n, h, device="cuda").to(dtype) for _ in range(COPIES)]
    w, b = torch.randn(h, device="cuda").to(dtype), torch.randn(h, device="cuda").to(dtype)
    return {
        "dak layer_norm": [lambda x=x: layer_norm(x, w, b, 1e-5) for x in xs],
        "dak add_layer_norm": [lambda x=x, r=r: add_layer_norm(x, r, w, b, 1e-5) for x, r in zip(xs, rs)],
        "dak rms_norm": [lambda x=x: rms_norm(x, w, 1e-5) for x in xs],
        "dak add_rms_norm": [lambda x=x, r=r: add_rms_norm(x, r, w, 1e-5) for x, r in zip(xs, rs)],
        "torch layer_norm": [lambda x=x: F.layer_norm(x, (h,), w, b, 1e-5) for x in xs],
        "torch add + layer_norm": [lambda x=x, r=r: F.layer_norm(x + r, (h,), w, b, 1e-5) for x, r in zip(xs, rs)],
    }


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shapes", default="8x4096,8x7168,1x4096,16x8192", help="tokens x hidden, comma list")
    ap.add_argument("--out", default="probe-norms.json")
    a = ap.parse_args(argv)
    if not torch.cuda.is_available():
        sys.exit("probe_norms.py needs a GPU")
    try:
        shapes = [tuple(int(v) for v in s.split("x")) for s in a.shapes.split(",")]
    except ValueError:
        sys.exit(f"--shapes takes tokens x hidden pairs like 8x4096, got {a.shapes!r}")
    rows = []
    for n, h in shapes:
        for name, calls in cases(n, h, torch.bfloat16).items():
            us = graph_time_ms(calls, target_ms=10.0) * 1e3
            rows.append({"tokens": n, "hidden": h, "op": name, "us": us})
            print(f"{n:3d} x {h:5d}  {name:24s} {us:6.2f} us", flush=True)
    write_json(a.out, {"meta": metadata(), "rows": rows})
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
