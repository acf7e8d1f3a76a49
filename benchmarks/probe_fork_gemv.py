"""Probe: which GEMV launch for an hbm_fork split linear's HBM rows, at decode batch sizes.

H75 (twenty-sixth session, untuned in-place configs, N 1 and 8): hbm_fork, the HBM rows by dak's
GEMV beside a host-only split kernel on a forked stream, was 1.0-1.28x faster than the one-launch
split kernel on Llama-2-7B and Llama-3-70B shapes but 3-11% slower on OPT-30B's 7168-row ones,
where the GEMV alone is fast (sweep_gemv.py: 7168 x 7168 at 27.2 us, 3.8 TB/s, 112 programs of
64 rows). This times, per shape, N and host share, in CUDA graphs over rotated weights: the
unforked split kernel (heuristic config), the host-only kernel alone, and for each GEMV config
in GRID the GEMV alone on the HBM rows and the forked pair (host kernel issued first on a side
stream, GEMV on the caller's stream: dak.kernels.split_linear_ce._hbm_beside_host with that launch).

    PYTHONPATH=src python3 benchmarks/probe_fork_gemv.py --out probe-fork-gemv.json

GPU only.
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import replace
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_linear import L2_BYTES, SHAPES, fork_variant  # noqa: E402
from common import metadata, write_json  # noqa: E402

from dak.host import PinnedBuffer, device_matrix  # noqa: E402
from dak.kernels.config import heuristic_config  # noqa: E402
from dak.kernels.hbm_gemv import GemvConfig, hbm_gemv, heuristic  # noqa: E402
from dak.kernels.split_linear import split_linear  # noqa: E402
from dak.kernels.split_linear_checks import tma_compatible  # noqa: E402
from dak.kernels.split_linear_ce import _hbm_beside_host  # noqa: E402
from dak.kernels.split_linear_route import run_split_linear  # noqa: E402
from dak.kernels.timing import graph_time_ms  # noqa: E402
from dak.nn.split_linear import host_rows_for  # noqa: E402

GRID = [GemvConfig(64, 256, 4), GemvConfig(64, 128, 4), GemvConfig(32, 256, 6), GemvConfig(32, 256, 4),
        GemvConfig(32, 256, 3), GemvConfig(16, 256, 6), GemvConfig(32, 256, 4, num_warps=8)]


def probe_shape(name, m, k, tokens, ratios, sms, rows):
    dtype = torch.bfloat16
    copies = max(1, math.ceil(3 * L2_BYTES / (m * k * 2)))
    ws = [device_matrix(m, k, dtype, torch.device("cuda")).normal_() for _ in range(copies)]
    pinned = PinnedBuffer.from_tensor(ws[0])
    for n in tokens:
        x = torch.randn(n, k, device="cuda").to(dtype)
        out = torch.empty(n, m, device="cuda", dtype=dtype)
        for r in ratios:
            m_h = host_rows_for(m, 16, host_ratio=r)
            wh, m_g = pinned.tensor[:m_h], m - m_h
            parts = [(wh, w[m_h:]) for w in ws]
            cfg = replace(heuristic_config(n, m_h, m_g, k, sms, tma_compatible(wh)), hbm_fork=False)
            fk = fork_variant(cfg, n, m_h, m_g, sms)
            if cfg.ce_share > 0 or fk is None:
                continue  # copy-engine configs: the fork's HBM side is not what H75 lost on
            t = {"split": graph_time_ms([lambda p=p: run_split_linear(x, *p, None, cfg, sms, None, out=out)
                                         for p in parts]),
                 "host_only": graph_time_ms([lambda: split_linear(x, wh, wh[:0], None, fk, out=out[:, :m_h])])}
            for g in [heuristic(m_g, k)] + [g for g in GRID if g != heuristic(m_g, k)]:
                tag = f"{g.block_m}x{g.block_k}x{g.num_stages}w{g.num_warps}"
                t[f"gemv {tag}"] = graph_time_ms([lambda p=p: hbm_gemv(x, p[1], None, g, out=out[:, m_h:])
                                                  for p in parts])
                t[f"fork {tag}"] = graph_time_ms([lambda p=p: _hbm_beside_host(x, *p, None, fk, out, g)
                                                  for p in parts])
            rows.append({"shape": name, "M": m, "K": k, "N": n, "x": m_h / m, "host_rows": m_h,
                         "host_cfg": fk.to_dict(), "t_ms": t})
            forks = {key.split()[1]: v for key, v in t.items() if key.startswith("fork")}
            best = min(forks, key=forks.get)
            print(f"{name:16s} N={n} x={100 * m_h / m:.2f}% split {t['split'] * 1e3:.1f} host-only "
                  f"{t['host_only'] * 1e3:.1f} | gemv alone/forked (us): "
                  + " ".join(f"{tag} {t['gemv ' + tag] * 1e3:.1f}/{v * 1e3:.1f}" for tag, v in forks.items())
                  + f" | best {best}", flush=True)
    pinned.free()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shapes", default="opt-30b.qkvo,opt-30b.fc2,llama2-7b.qkvo,llama3-70b.qo")
    ap.add_argument("--tokens", default="1,8")
    ap.add_argument("--ratios", default="0.5,1")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("probe_fork_gemv.py needs a CUDA GPU")
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    rows = []
    with torch.no_grad():
        for name in a.shapes.split(","):
            probe_shape(name, *SHAPES[name], [int(v) for v in a.tokens.split(",")],
                        [float(v) / 100 for v in a.ratios.split(",")], sms, rows)
    write_json(a.out, {"meta": dict(metadata(), command=" ".join(sys.argv)), "rows": rows})


if __name__ == "__main__":
    main()
