"""Probe: does the physical layout of pinned host memory set the copy engine's rate?

Graph-replay traces of OPT-30B at 5% on the H200 (twelfth session, call F6): dak's 120-130 MB
group copies ran at 49.4-54.6 GB/s with no kernel beside them, while the prefetch baseline's
66 MB layer copies ran at 55.4 beside its GEMMs, and dak's 17 MB copies at 49-54. Fresh buffers
alone (`probe_pinned_buffers.py`) reach 54.6. Pinned memory that is physically scattered in
4 KiB pages may cost the copy engine address translations that 2 MiB runs do not. For each
pinning method, in a fresh process and again after fragmenting host memory, this allocates
`--buffers` buffers of `--mib` MiB, times one H2D copy of each (median of 3), and reads each
buffer's layout: mean physically contiguous run (from /proc/self/pagemap; needs root) and its
NUMA nodes (move_pages). Methods (each a `dak.host.PinnedBuffer` built with that PIN_METHOD):

    alloc     cudaHostAlloc (dak's default, `dak.host.PinnedBuffer`)
    register  cudaHostRegister of an ordinary CPU tensor (4 KiB pages)
    thp       cudaHostRegister of 2 MiB-aligned anonymous memory advised MADV_HUGEPAGE

    PYTHONPATH=src python3 benchmarks/probe_pin_layout.py --out probe-pin-layout.json
"""

from __future__ import annotations

import argparse
import ctypes
import glob
import os
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import event_ms, metadata, write_json  # noqa: E402

import dak.host as host  # noqa: E402

PAGE = 4096
METHODS = ("alloc", "register", "thp")


def read(path: str) -> str:
    try:
        return Path(path).read_text().strip()
    except OSError as e:
        return f"<{e.strerror}>"


def topology() -> dict:
    gpus = {}
    for dev in glob.glob("/sys/bus/pci/devices/*"):
        if read(f"{dev}/vendor") == "0x10de" and read(f"{dev}/class").startswith("0x03"):
            gpus[os.path.basename(dev)] = read(f"{dev}/numa_node")
    return {"numa_nodes_online": read("/sys/devices/system/node/online"), "gpu_numa_node": gpus,
            "cpus_allowed": read("/proc/self/status").split("Cpus_allowed_list:")[-1].split("\n")[0].strip(),
            "thp_enabled": read("/sys/kernel/mm/transparent_hugepage/enabled"),
            "thp_defrag": read("/sys/kernel/mm/transparent_hugepage/defrag"),
            "iommu_groups": len(glob.glob("/sys/kernel/iommu_groups/*")), "euid": os.geteuid()}


def layout(ptr: int, nbytes: int) -> dict:
    """Mean physically contiguous run (KiB; None without root) and NUMA nodes of [ptr, ptr + nbytes)."""
    pages = nbytes // PAGE
    run_kib = None
    try:
        with open("/proc/self/pagemap", "rb") as f:
            f.seek(ptr // PAGE * 8)
            raw = f.read(pages * 8)
        pfns = [int.from_bytes(raw[i:i + 8], "little") & ((1 << 55) - 1) for i in range(0, len(raw), 8)]
        if any(pfns):
            runs = 1 + sum(1 for a, b in zip(pfns, pfns[1:]) if b != a + 1)
            run_kib = pages * 4 / runs
    except OSError:
        pass
    step = max(1, pages // 64)
    addrs = (ctypes.c_void_p * len(range(0, pages, step)))(*[ptr + i * PAGE for i in range(0, pages, step)])
    status = (ctypes.c_int * len(addrs))()
    libc = ctypes.CDLL(None, use_errno=True)
    nodes = None
    if libc.syscall(279, 0, len(addrs), addrs, None, status, 0) == 0:  # move_pages (x86-64), query only
        nodes = sorted({s for s in status})
    return {"run_kib": run_kib, "numa_nodes": nodes}


def make(method: str, nbytes: int):
    """(uint8 tensor, release) for one `dak.host.PinnedBuffer` of `method`."""
    host.PIN_METHOD = method
    b = host.PinnedBuffer((1, nbytes), torch.uint8)
    return b.tensor[0], b.free


def probe(method: str, buffers: int, mib: int, state: str) -> dict:
    nbytes = mib << 20
    bufs = [make(method, nbytes) for _ in range(buffers)]
    dst = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    rows = []
    for t, _ in bufs:
        t.random_(0, 255)
        ms = sorted(event_ms(lambda t=t: dst.copy_(t, non_blocking=True)) for _ in range(3))[1]
        rows.append({"gbs": nbytes / ms / 1e6, **layout(t.data_ptr(), nbytes)})
    rates = [r["gbs"] for r in rows]
    runs = [r["run_kib"] for r in rows if r["run_kib"] is not None]
    rec = {"method": method, "state": state, "buffers": buffers, "mib": mib, "each": rows,
           "min_gbs": min(rates), "median_gbs": statistics.median(rates), "max_gbs": max(rates),
           "median_run_kib": statistics.median(runs) if runs else None}
    if len(runs) > 2 and len(set(runs)) > 1 and len(set(rates)) > 1:
        rec["corr_rate_run"] = statistics.correlation(rates, runs)
    print(f"{state:10s} {method:8s} {buffers} x {mib} MiB: {rec['min_gbs']:.1f} / {rec['median_gbs']:.1f} / "
          f"{rec['max_gbs']:.1f} GB/s (min/median/max), median contiguous run {rec['median_run_kib']} KiB, "
          f"nodes {sorted({n for r in rows for n in (r['numa_nodes'] or [])})}, "
          f"corr(rate, run) {rec.get('corr_rate_run')}", flush=True)
    for _, release in bufs:
        release()
    del dst
    torch.cuda.empty_cache()
    return rec


def fragment(gib: int) -> list:
    """Touch `gib` GiB of 1 MiB CPU tensors and drop every other one: free memory in 1 MiB holes."""
    chunks = [torch.ones(1 << 20, dtype=torch.uint8) for _ in range(gib << 10)]
    return chunks[::2]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--buffers", type=int, default=12)
    ap.add_argument("--mib", type=int, default=64)
    ap.add_argument("--fragment-gib", type=int, default=32, help="then again after fragmenting this much (0: skip)")
    ap.add_argument("--out", default="probe-pin-layout.json")
    a = ap.parse_args(argv)
    methods = [m for m in a.methods.split(",") if m]
    if any(m not in METHODS for m in methods):
        raise SystemExit(f"--methods takes {', '.join(METHODS)}, got {a.methods!r}")
    if min(a.buffers, a.mib) < 1 or a.fragment_gib < 0:
        raise SystemExit("--buffers and --mib must be >= 1, --fragment-gib >= 0")
    if not torch.cuda.is_available():
        raise SystemExit("probe_pin_layout needs a CUDA GPU: it times the copy engine reading pinned memory")
    topo = topology()
    print(topo, flush=True)
    rows = [probe(m, a.buffers, a.mib, "fresh") for m in methods]
    if a.fragment_gib:
        keep = fragment(a.fragment_gib)
        rows += [probe(m, a.buffers, a.mib, "fragmented") for m in methods]
        del keep
    write_json(a.out, {"meta": metadata(), "topology": topo, "rows": rows})
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
