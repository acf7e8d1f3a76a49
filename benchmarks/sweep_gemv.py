"""Sweep dak's all-HBM decode GEMV (dak.kernels.hbm_gemv) over a wide config grid, cuBLAS beside.

The fifteenth session's probe (`probe_pdl_chain.py`) swept 18 configs on Llama shapes only; the
untuned heuristic (`hbm_gemv.heuristic`) was read off it. This times, inside CUDA graphs of
back-to-back launches over distinct weights (so nothing hits L2), every all-HBM decode linear of
the named models as dak runs them (q/k/v and gate/up fused, the LM head) at N tokens, for a grid
of (BLOCK_M, BLOCK_K, stages, warps), and reports per shape: cuBLAS, the heuristic's config, the
best config, and the best config's ratio to both. With `--silu`, Llama's fused gate/up is also
timed with SiLU(gate) * up in its epilogue (hbm_gemv's swiglu mode; its "cuBLAS" is F.linear then
dak's silu_mul launch, the two steps it replaces).

    PYTHONPATH=src python3 benchmarks/sweep_gemv.py --models llama-2-7b,llama-3-8b --silu --out sweep-gemv.json

Each distinct (config, bias, even M/K, swiglu) compiles once: about 50-100 compiles a model family.

GPU only.
"""

from __future__ import annotations

import argparse
import itertools
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import metadata, write_json  # noqa: E402

from dak.kernels.hbm_gemv import GemvConfig, hbm_gemv, heuristic, swiglu_config, weight_copies  # noqa: E402
from dak.kernels.timing import graph_time_ms  # noqa: E402
from dak.models.spec import load_config  # noqa: E402

GRID = [GemvConfig(bm, bk, st, "triton", nw) for bm, bk, st, nw in
        itertools.product((16, 32, 64), (128, 256), (3, 4, 5, 6), (4, 8))]  # 48: compiles dominate


def linear_shapes(model: str) -> list[tuple[str, int, int, bool]]:
    """(name, rows M, inputs K, bias) of each all-HBM decode linear as dak runs it."""
    _, c = load_config(model)
    h, v = c["hidden_size"], c["vocab_size"]
    if c["model_type"] == "opt":
        f = c["ffn_dim"]
        return [("qkv", 3 * h, h, True), ("out", h, h, True), ("fc1", f, h, True), ("fc2", h, f, True),
                ("head", v, h, False)]
    heads = c["num_attention_heads"]
    kv, hd = c.get("num_key_value_heads") or heads, c.get("head_dim") or h // heads
    f = c["intermediate_size"]
    return [("qkv", (heads + 2 * kv) * hd, h, False), ("o", h, h, False), ("gate_up", 2 * f, h, False),
            ("down", h, f, False), ("head", v, h, False)]


def time_cfg(x, ws, bias, cfg, swiglu=False) -> float:
    out = torch.empty(x.shape[0], ws[0].shape[0] // (2 if swiglu else 1), dtype=x.dtype, device=x.device)
    try:
        return graph_time_ms([lambda w=w: hbm_gemv(x, w, bias, cfg, out, swiglu=swiglu) for w in ws],
                             target_ms=5.0, max_replays=7)
    except Exception as exc:  # noqa: BLE001 - a config this GPU cannot run (resources) is skipped
        print(f"    {cfg}: {type(exc).__name__}: {str(exc)[:120]}", flush=True)
        return float("inf")


def sweep_shape(n: int, m: int, k: int, bias: bool, gated: bool) -> dict:
    g = torch.Generator(device="cuda").manual_seed(m * 7 + k)
    x = torch.randn(n, k, generator=g, device="cuda").to(torch.bfloat16)
    ws = weight_copies((torch.randn(m, k, generator=g, device="cuda") * k ** -0.5).to(torch.bfloat16))
    b = torch.randn(m, generator=g, device="cuda").to(torch.bfloat16) if bias else None
    cublas = time_cfg(x, ws, b, GemvConfig(backend="cublas"), gated)
    heur = swiglu_config(heuristic(m, k)) if gated else heuristic(m, k)
    times = {cfg: time_cfg(x, ws, b, cfg, gated) for cfg in GRID if cfg.block_k <= k}
    best = min(times, key=times.get)
    t_h = times.get(heur, time_cfg(x, ws, b, heur, gated))
    return {"M": m, "K": k, "bias": bias, "gated": gated, "t_cublas_ms": cublas, "t_heuristic_ms": t_h,
            "heuristic": heur.to_dict(), "t_best_ms": times[best], "best": best.to_dict(),
            "best_over_cublas": cublas / times[best], "heuristic_over_cublas": cublas / t_h,
            "gbps_best": m * k * 2 / times[best] / 1e6,
            "sweep": [[c.to_dict(), t] for c, t in sorted(times.items(), key=lambda r: r[1])[:12]]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default="llama-2-7b,llama-3-8b")
    ap.add_argument("--tokens", type=int, default=8)
    ap.add_argument("--silu", action="store_true", help="also time Llama's gate/up with SiLU * up in its epilogue")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("sweep_gemv.py needs a CUDA GPU")
    if not 1 <= a.tokens <= 16:
        sys.exit(f"--tokens must be 1..16 (the GEMV's token tile), got {a.tokens}")
    rows, seen = [], set()
    for model in a.models.split(","):
        for name, m, k, bias in linear_shapes(model):
            for gated in ([False, True] if a.silu and name == "gate_up" else [False]):
                if (m, k, bias, gated) in seen:
                    continue
                seen.add((m, k, bias, gated))
                r = dict(sweep_shape(a.tokens, m, k, bias, gated), model=model, op=name)
                rows.append(r)
                print(f"{model:11s} {name:8s}{'+silu' if gated else '':5s} {m:6d} x {k:5d}: cuBLAS "
                      f"{r['t_cublas_ms'] * 1e3:7.1f} us, heuristic {r['t_heuristic_ms'] * 1e3:7.1f} "
                      f"(x{r['heuristic_over_cublas']:.3f}), best {r['t_best_ms'] * 1e3:7.1f} "
                      f"(x{r['best_over_cublas']:.3f}, {r['gbps_best']:5.0f} GB/s) {tuple(r['best'].values())}",
                      flush=True)
    write_json(a.out, {"meta": dict(metadata(), command=" ".join(sys.argv)), "tokens": a.tokens, "rows": rows})


if __name__ == "__main__":
    main()
