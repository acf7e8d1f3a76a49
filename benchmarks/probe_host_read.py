"""Probe: host-link read bandwidth of the split kernel (all rows on host) per pinning method,
load path and in-flight cap, next to the copy engine and cuBLAS through a UVA view.

    PYTHONPATH=src python benchmarks/probe_host_read.py --out probe.json
"""

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import metadata, write_json  # noqa: E402

import dak.host as host  # noqa: E402
from dak.baselines import UVALinear  # noqa: E402
from dak.kernels.config import KernelConfig, finalize  # noqa: E402
from dak.kernels.split_linear import split_linear  # noqa: E402
from dak.kernels.timing import event_ms, graph_time_ms  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="probe_host_read.json")
    a = ap.parse_args()
    m, k = 16384, 8192  # 256 MiB bf16
    rows = []
    for method in ("alloc", "register"):
        host.PIN_METHOD = method
        buf = host.PinnedBuffer((m, k), torch.bfloat16)
        buf.tensor.normal_()
        c = buf.nbytes
        dst = torch.empty((m, k), dtype=torch.bfloat16, device="cuda")
        ce = min(event_ms(lambda: dst.copy_(buf.tensor, non_blocking=True)) for _ in range(5))
        x = torch.randn(8, k, device="cuda", dtype=torch.bfloat16)
        uva = UVALinear(buf.tensor, None)
        t_uva = graph_time_ms([lambda: uva(x)])
        rec = {"method": buf.method, "copy_engine_GBps": c / ce / 1e6, "uva_cublas_GBps": c / t_uva / 1e6}
        print(rec, flush=True)
        empty = dst[:0]
        out = torch.empty(8, m, device="cuda", dtype=torch.bfloat16)
        for tma in (False, True):
            for bm in (16, 32, 64):
                for hp in (8, 16, 32, 64):
                    for st in (3, 5):
                        cfg = finalize(KernelConfig(block_m=bm, block_k=256 if bm < 64 else 128,
                                                    num_stages=st, host_programs=hp, host_tma=tma), m, 0, 132)
                        try:
                            t = graph_time_ms([lambda: split_linear(x, buf.tensor, empty, None, cfg, out=out)],
                                              target_ms=20, max_replays=5)
                        except Exception as e:  # noqa: BLE001
                            print("fail", cfg, type(e).__name__)
                            continue
                        r = dict(rec, tma=tma, block_m=bm, host_programs=hp, stages=st, GBps=c / t / 1e6)
                        rows.append(r)
        best = sorted([r for r in rows if r["method"] == buf.method], key=lambda r: -r["GBps"])[:6]
        for r in best:
            print(f"  {r['method']:16s} tma={r['tma']!s:5s} bm={r['block_m']:2d} hp={r['host_programs']:2d} "
                  f"st={r['stages']} {r['GBps']:.1f} GB/s", flush=True)
        del buf, uva, dst
        torch.cuda.empty_cache()
    write_json(a.out, {"meta": metadata(), "rows": rows})


if __name__ == "__main__":
    main()
