"""``dak bench e2e``: dak greedy/uniform against all-HBM, layer prefetch, UVA and accelerate offload.

    dak bench e2e --models opt-6.7b,llama-2-7b --batch 8 --ratios 0,1,2,5,10,20,40 \\
        --out benchmarks/results/e2e-h200.json --plot benchmarks/results/e2e-h200.png
    dak bench e2e --real-capacity llama-2-70b --out benchmarks/results/e2e-70b-h200.json
    dak bench e2e --dry-run ...      # the run plan, predictions and a time estimate; no GPU needed
    dak bench e2e --replot a.json,b.json --out e2e.json --plot e2e.png   # merge, summarize, plot
"""

from __future__ import annotations

import argparse
import os

from ..bench.meta import merge_rows  # noqa: F401 -- also `dak.cli.bench.merge_rows`
from ..units import parse_size
from .plan import _int


def add_parser(sub) -> None:
    from ..bench.e2e_cases import SYSTEMS, E2EConfig
    d = E2EConfig()
    p = sub.add_parser("bench", help="end-to-end benchmarks (dak bench e2e)")
    bsub = p.add_subparsers(dest="bench", metavar="BENCH")
    e = bsub.add_parser("e2e", help="dak vs offload baselines per model and offload ratio; JSON + PNG")
    e.add_argument("--models", default=None, help=f"comma list of built-in models (default {','.join(d.models)}; "
                   "none with --real-capacity)")
    e.add_argument("--batch", default=",".join(map(str, d.batches)), help="batch size(s), comma list (default 8)")
    e.add_argument("--prompt-len", default=str(d.prompt_len), help=f"prompt tokens (default {d.prompt_len})")
    e.add_argument("--gen-len", default=str(d.gen_len), help=f"new tokens (default {d.gen_len})")
    e.add_argument("--ratios", default=",".join(f"{100 * x:g}" for x in d.ratios),
                   help="offload ratios in percent of operator bytes (default 0,1,2,5,10,20,40; below 1%% write the %%: 0.5%%)")
    e.add_argument("--systems", default=",".join(d.systems), help=f"comma list of {', '.join(SYSTEMS)} (default all)")
    e.add_argument("--hardware", default=d.hardware, help="preset or profile .json for plans, predictions, bounds")
    e.add_argument("--dtype", default=d.dtype, help="bf16 | fp16 (default bf16)")
    e.add_argument("--seed", default=str(d.seed), help="seed of weights and prompts (default 0)")
    e.add_argument("--repeats", default=str(d.repeats), help=f"timed generations per case (default {d.repeats})")
    e.add_argument("--tune", action="store_true", help="sweep split-kernel configs per shape (slow; default: "
                   "heuristic configs, or ones already in the tuning cache)")
    e.add_argument("--kv-buckets", default=str(d.kv_buckets), help="dak systems: decode graphs, one per cache-length "
                   f"bucket, so host KV is copied only up to the bucket (default {d.kv_buckets}; 1: whole max_len)")
    e.add_argument("--kv-ahead", action=argparse.BooleanOptionalAction, default=d.kv_ahead,
                   help="dak systems: queue each layer's host K/V copy during the layer before "
                        f"(default {'on' if d.kv_ahead else 'off'})")
    e.add_argument("--fuse-projections", action=argparse.BooleanOptionalAction, default=d.fuse_projections,
                   help="all systems: q/k/v and gate/up sets multiplied as one matrix where the plan keeps "
                        f"them in HBM (prefetch fuses its staged and HBM rows alike; default "
                        f"{'on' if d.fuse_projections else 'off'})")
    e.add_argument("--real-capacity", default=None, metavar="MODEL",
                   help="also place MODEL from the GPU's real free HBM (e.g. llama-2-70b)")
    e.add_argument("--rc-batch", default=str(d.rc_batch), help=f"real-capacity batch (default {d.rc_batch})")
    e.add_argument("--rc-prompt-len", default=str(d.rc_prompt_len), help=f"(default {d.rc_prompt_len})")
    e.add_argument("--rc-gen-len", default=str(d.rc_gen_len), help=f"(default {d.rc_gen_len})")
    e.add_argument("--rc-systems", default=",".join(d.rc_systems), help="systems for the real-capacity case "
                   f"(default {','.join(d.rc_systems)})")
    e.add_argument("--rc-margin", default="1GiB", help="HBM kept free beyond 1.5x the prefill workspace")
    e.add_argument("--out", default=None, help=f"result JSON (default {d.out})")
    e.add_argument("--plot", default=None, help="PNG of EB vs offload ratio per model (needs matplotlib)")
    e.add_argument("--fp32-reference", action="store_true", help="also compare every system's first-token "
                   "logits with HF's model in float32 over the same weights (on the GPU, or the CPU, where it fits)")
    e.add_argument("--append", action="store_true", help="keep the rows already in --out and add these "
                   "(split a sweep over several commands; the summary and plot cover all rows)")
    e.add_argument("--replot", default=None, metavar="JSON[,JSON...]", help="run nothing: summarize earlier "
                   "result JSONs (rows of several are merged; --out writes the merged file, --plot its PNG)")
    e.add_argument("--dry-run", action="store_true", help="print the run plan and a time estimate, run nothing")
    e.set_defaults(func=run_e2e)


def _list(text: str) -> tuple[str, ...]:
    return tuple(s.strip() for s in str(text).split(",") if s.strip())


def _percent(text: str) -> float:
    try:  # "5" and "5%" are both 5%
        value = float(text.removesuffix("%"))
    except ValueError:
        raise ValueError(f"--ratios takes percentages such as 0,1,2.5,40; got {text!r}") from None
    if 0 < value < 1 and not text.endswith("%"):  # a fraction (as --host-ratio takes) would run 100x too little
        raise ValueError(f"--ratios takes percentages: {text} would be {text}%, not {100 * value:g}%; write "
                         f"{100 * value:g} for {100 * value:g}%, or {text}% to run {text}%")
    return value / 100.0


def config_from(args):
    from ..bench.e2e_cases import E2EConfig
    models = _list(args.models) if args.models is not None else (() if args.real_capacity else E2EConfig.models)
    return E2EConfig(
        models=models, batches=tuple(_int("--batch", b) for b in _list(args.batch)),
        prompt_len=_int("--prompt-len", args.prompt_len), gen_len=_int("--gen-len", args.gen_len),
        ratios=tuple(_percent(r) for r in _list(args.ratios)), systems=_list(args.systems),
        hardware=args.hardware, dtype=args.dtype, seed=_int("--seed", args.seed),
        repeats=_int("--repeats", args.repeats), tune=args.tune, kv_buckets=_int("--kv-buckets", args.kv_buckets),
        kv_ahead=args.kv_ahead, fuse_projections=args.fuse_projections,
        real_capacity=args.real_capacity,
        rc_batch=_int("--rc-batch", args.rc_batch), rc_prompt_len=_int("--rc-prompt-len", args.rc_prompt_len),
        rc_gen_len=_int("--rc-gen-len", args.rc_gen_len), rc_systems=_list(args.rc_systems),
        rc_margin=parse_size(args.rc_margin), out=args.out or E2EConfig.out, plot=args.plot, append=args.append,
        fp32_reference=args.fp32_reference)


def replot(paths: str, out: str | None, png: str | None) -> int:
    from ..bench.e2e_report import render_summary, summarize
    from ..bench.meta import write_json
    payloads = [read_result(path) for path in _list(paths)]
    payload = dict(payloads[0], rows=merge_rows(payloads))
    if len(payloads) > 1:
        payload["merged_from"] = [m for p in payloads for m in p.get("merged_from", [p["meta"]])]  # a merged input keeps its runs
    payload["summary"] = summarize(payload["rows"])
    print(render_summary(payload["summary"]))
    if out:
        write_json(out, payload)
        print(f"wrote {out}")
    if png:
        from ..bench.e2e_plot import plot
        print(plot(payload, png))
    return 0


def read_result(path: str) -> dict:
    """A `dak bench e2e` result JSON, or a ValueError saying why `path` is not one."""
    import json
    try:
        with open(path) as fh:
            payload = json.load(fh)
    except (OSError, ValueError) as e:
        raise ValueError(f"cannot read result JSON {path!r}: {e}") from None
    if (not isinstance(payload, dict) or not isinstance(payload.get("rows"), list)
            or not isinstance(payload.get("meta"), dict)):
        raise ValueError(f"{path} is not a `dak bench e2e` result (it needs a 'rows' list and a 'meta' object): "
                         f"pass the JSON that `dak bench e2e --out` wrote")
    return payload


def run_e2e(args) -> int:
    from ..bench.e2e_cases import describe, plan_cases
    if args.replot:
        return replot(args.replot, args.out, args.plot)
    cfg = config_from(args)
    if cfg.append and os.path.exists(cfg.out):
        read_result(cfg.out)  # before any case runs
    print(describe(plan_cases(cfg), cfg), flush=True)
    if args.dry_run:
        return 0
    import torch
    if not torch.cuda.is_available():
        big = [m for m in cfg.models + ((cfg.real_capacity,) if cfg.real_capacity else ()) if not m.startswith("tiny-")]
        if big:
            raise ValueError(f"no CUDA GPU here: only tiny-* models run (in the Triton interpreter); got {big}. "
                             "Use --dry-run to see the plan")
        os.environ["TRITON_INTERPRET"] = "1"
        print("dak: no CUDA GPU here: Triton kernels run in the CPU interpreter (numbers are not performance)")
    from ..bench.e2e import run_e2e as run
    payload = run(cfg, log=lambda s: print(s, flush=True))
    return 0 if payload["rows"] else 1
