"""Probe: can the copy engine and SM zero-copy reads share the host link for more than either alone?

Measures, on 512 MiB of pinned bf16 rows: SM zero-copy reads alone (the split kernel, all rows
on host), one copy-engine H2D copy, back-to-back chunked copies, two copies on two streams, and
a copy of a share s of the rows on a side stream while the kernel reads the rest in place.

    PYTHONPATH=src python benchmarks/probe_link_mix.py --out probe_link_mix.json
"""

import argparse
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import metadata, write_json  # noqa: E402

from dak.host import PinnedBuffer  # noqa: E402
from dak.kernels.config import KernelConfig, finalize  # noqa: E402
from dak.kernels.split_linear import split_linear  # noqa: E402


def timed(fn, reps=5):
    out = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        s.record()
        fn()
        e.record()
        e.synchronize()
        out.append(s.elapsed_time(e))
    return statistics.median(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="probe_link_mix.json")
    ap.add_argument("--mib", type=int, default=512)
    a = ap.parse_args()
    k = 8192
    m = a.mib * (1 << 20) // (2 * k)
    buf = PinnedBuffer((m, k), torch.bfloat16)
    buf.tensor.normal_()
    w = buf.tensor
    c = buf.nbytes
    dst = torch.empty((m, k), dtype=torch.bfloat16, device="cuda")
    x = torch.randn(8, k, device="cuda", dtype=torch.bfloat16)
    out = torch.empty(8, m, device="cuda", dtype=torch.bfloat16)
    empty = dst[:0]
    side, side2 = torch.cuda.Stream(), torch.cuda.Stream()
    main_s = torch.cuda.current_stream()
    rows = []

    def rec(name, ms, nbytes=c, **kw):
        r = dict(name=name, ms=ms, GBps=nbytes / ms / 1e6, **kw)
        rows.append(r)
        print(r, flush=True)

    def sm_read(lo, hi, hp=16):
        cfg = finalize(KernelConfig(block_m=16, block_k=256, num_stages=4, host_programs=hp), hi - lo, 0, 132)
        o = out if (lo, hi) == (0, m) else torch.empty(8, hi - lo, device="cuda", dtype=torch.bfloat16)
        return lambda: split_linear(x, w[lo:hi], empty, None, cfg, out=o)

    for hp in (8, 16, 32):
        rec("sm_zero_copy", timed(sm_read(0, m, hp)), host_programs=hp)
    rec("ce_one_copy", timed(lambda: dst.copy_(w, non_blocking=True)))
    for chunk_mib in (4, 16, 64):
        rows_per = chunk_mib * (1 << 20) // (2 * k)

        def chunked():
            for lo in range(0, m, rows_per):
                dst[lo:lo + rows_per].copy_(w[lo:lo + rows_per], non_blocking=True)
        rec("ce_chunked", timed(chunked), chunk_mib=chunk_mib)

    def two_streams():
        h = m // 2
        for st, lo, hi in ((side, 0, h), (side2, h, m)):
            st.wait_stream(main_s)
            with torch.cuda.stream(st):
                dst[lo:hi].copy_(w[lo:hi], non_blocking=True)
        main_s.wait_stream(side)
        main_s.wait_stream(side2)
    rec("ce_two_streams", timed(two_streams))

    for share in (0.1, 0.25, 0.4, 0.5, 0.6, 0.75, 0.9):
        cut = int(m * share) // 16 * 16
        read = sm_read(cut, m)
        ev_ce, ev_sm = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        ev0 = torch.cuda.Event(enable_timing=True)

        def mixed():
            ev0.record()
            side.wait_stream(main_s)
            with torch.cuda.stream(side):
                dst[:cut].copy_(w[:cut], non_blocking=True)
                ev_ce.record()
            read()
            ev_sm.record()
            main_s.wait_stream(side)
        t = timed(mixed)
        rec("ce_plus_sm", t, ce_share=cut / m, ce_ms=ev0.elapsed_time(ev_ce), sm_ms=ev0.elapsed_time(ev_sm))
    write_json(a.out, {"meta": metadata(), "rows": rows})


if __name__ == "__main__":
    main()
