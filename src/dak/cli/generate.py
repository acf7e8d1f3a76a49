"""``dak generate``: offload a model, generate, and report TTFT, TPOT and effective bandwidth.

    dak generate --model llama-2-70b --hbm-budget 100GiB --batch 8 --prompt-len 32 --gen-len 32

Built-in names get seeded random weights (built straight into their placement); a local folder
with config.json + *.safetensors is loaded from disk (and `--prompt` text is tokenized with the
folder's tokenizer when it has one). Without a GPU it runs a tiny built-in model through the
same code path with Triton's CPU interpreter, and says so.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from ..defaults import DEFAULT_FUSE_PROJECTIONS, DEFAULT_KV_AHEAD, DEFAULT_KV_BUCKETS, DEFAULT_POLICY
from ..units import format_bandwidth, format_bytes, format_time, parse_ratio
from .decoding import add_arguments as add_decoding_arguments, applied, decoding_kwargs, describe
from .decoding import given_flags as given_decoding_flags
from .plan import _int
from .text import prompt_ids, streamer, tokenizer

CPU_MODEL = "tiny-llama"
SLOW_INTERPRETER_LEN = 128  # prompt + new tokens beyond which the CPU run is noted as slow


def add_parser(sub) -> None:
    p = sub.add_parser("generate", help="offload a model and generate; prints TTFT, TPOT, tokens/s, EB")
    p.add_argument("--model", required=True, help="built-in name (see `dak models`) or a local checkpoint folder")
    p.add_argument("--hbm-budget", default=None, help="HBM the plan may use, e.g. 40GiB (default: the profile's capacity)")
    p.add_argument("--host-ratio", default=None, help="instead of --hbm-budget: the share of operator bytes (weights "
                   "and KV cache) on the host, e.g. 0.05 or 5%%, placed by --policy (uniform: that share of every "
                   "operator), as `dak bench e2e`'s ratio x")
    p.add_argument("--batch", default="8", help="requests B (default 8)")
    p.add_argument("--prompt-len", default="32", help="prompt tokens L (default 32)")
    p.add_argument("--gen-len", default="32", help="new tokens G (default 32)")
    p.add_argument("--strict-budget", action="store_true", help="fit the copy-engine staging inside --hbm-budget "
                   "too (by default it comes on top; `dak plan` prints how much)")
    p.add_argument("--policy", default=None, help=f"consolidated | streamed | greedy | uniform (default {DEFAULT_POLICY})")
    p.add_argument("--hardware", default="auto", help="auto (the preset of the GPU in use; h200-pcie without a GPU), a preset name or a profile .json (default auto)")
    p.add_argument("--dtype", default="bf16", help="bf16 | fp16 (default bf16)")
    p.add_argument("--seed", default="0", help="seed of the random weights, prompts and sampling (default 0)")
    p.add_argument("--prompt", action="append", default=None,
                   help="prompt text; repeat for several prompts, up to --batch (needs a checkpoint folder with a tokenizer)")
    p.add_argument("--chat", action="store_true", help="give each --prompt as a user message in the checkpoint's chat "
                   "template (add --stop-at-eos to end each reply at its end-of-turn token)")
    p.add_argument("--stop", action="append", default=None, metavar="TEXT",
                   help="stop a request once its new text completes TEXT (HF's stop_strings; repeat for several; "
                        "needs --prompt); each output ends there")
    add_decoding_arguments(p)
    p.add_argument("--tune", action="store_true", help="sweep kernel configs per shape before first use (slow once, cached)")
    p.add_argument("--no-graphs", action="store_true", help="decode eagerly instead of replaying a CUDA graph")
    p.add_argument("--kv-buckets", default=str(DEFAULT_KV_BUCKETS), help="decode graphs, one per cache-length bucket, so "
                   f"host KV is copied only up to the bucket (default {DEFAULT_KV_BUCKETS}; 1: whole max_len)")
    p.add_argument("--kv-ahead", action=argparse.BooleanOptionalAction, default=DEFAULT_KV_AHEAD,
                   help="queue each layer's host K/V copy during the layer before (two extra HBM slots of one "
                        f"layer's staged K/V; default {'on' if DEFAULT_KV_AHEAD else 'off'})")
    p.add_argument("--fuse-projections", action=argparse.BooleanOptionalAction, default=DEFAULT_FUSE_PROJECTIONS,
                   help="multiply all-HBM q/k/v and gate/up sets as one matrix each (default "
                        f"{'on' if DEFAULT_FUSE_PROJECTIONS else 'off'})")
    p.add_argument("--stream", action="store_true", help="print the (one) --prompt's new text as it is generated "
                   "(a host sync per step, so TPOT includes it)")
    p.add_argument("--stop-at-eos", action="store_true", help="stop each request at the eos_token_id of the model's "
                   "generation config (and end once all have stopped; then fewer than --gen-len steps are timed)")
    p.add_argument("--json", action="store_true", help="print one JSON object (the figures below, the placement "
                   "summary, the outputs) instead of text; notes go to stderr")
    p.add_argument("--baseline", default=None, help="run a baseline instead of dak at the same --host-ratio: "
                                                    "all-hbm | prefetch | uva | accelerate (see `dak bench e2e`)")
    p.set_defaults(func=run)


def run(args) -> int:
    import torch
    gpu = torch.cuda.is_available()
    model_name = args.model
    if args.json and args.stream:
        raise ValueError("--stream prints text as it comes: drop --json or --stream")
    say = (lambda line: print(line, file=sys.stderr)) if args.json else print
    if not gpu:
        from ..models.spec import ModelSpec, load_config
        shown, cfg = load_config(model_name)  # an unknown name or a broken folder is an error here too
        requested = cfg, ModelSpec.from_config(cfg, name=shown)  # the stand-in below runs within its limits
        os.environ["TRITON_INTERPRET"] = "1"
        if not (os.path.isdir(model_name) or model_name.startswith("tiny-")):
            say(f"dak: no CUDA GPU here: running {CPU_MODEL} instead of {model_name} through the same "
                "code path, with Triton's CPU interpreter (slow; numbers are not performance)")
            model_name = CPU_MODEL
        else:
            say("dak: no CUDA GPU here: Triton kernels run in the CPU interpreter (slow)")
    if args.baseline is not None:
        if args.json:
            raise ValueError("--baseline prints `dak bench e2e`'s table; for JSON run `dak bench e2e --out FILE`")
        return run_baseline(args, model_name)
    import dak
    dtypes = {"bf16": torch.bfloat16, "fp16": torch.float16}
    if args.dtype not in dtypes:
        raise ValueError(f"--dtype must be bf16 or fp16, got {args.dtype!r}")
    batch, plen, glen = (_int(name, text, minimum=1) for name, text in
                         (("--batch", args.batch), ("--prompt-len", args.prompt_len), ("--gen-len", args.gen_len)))
    seed = _int("--seed", args.seed)
    if not 0 <= seed < 2**63:
        raise ValueError(f"--seed must be an integer in [0, 2**63), got {seed}")
    decoding = decoding_kwargs(args)
    if args.hbm_budget is not None and args.host_ratio is not None:
        raise ValueError("give --hbm-budget or --host-ratio, not both (a host ratio x sets the budget that leaves "
                         "x of the operator bytes on the host)")
    ratio = None if args.host_ratio is None else parse_ratio(args.host_ratio)
    if args.stream and (args.prompt is None or len(args.prompt) != 1):
        raise ValueError("--stream prints one prompt's text as it comes: give exactly one --prompt")
    k = decoding.get("num_return_sequences", 1)
    if k > 1 and (args.prompt is None or args.stream):
        raise ValueError("--num-return-sequences prints K outputs of each --prompt: give --prompt (a checkpoint "
                         "folder with a tokenizer), without --stream")
    if k * len(args.prompt or ()) > batch:
        raise ValueError(f"{len(args.prompt)} prompt(s) x --num-return-sequences {k} outputs but --batch {batch}: "
                         f"raise --batch to at least {k * len(args.prompt)}")
    if args.stop is not None and args.prompt is None:
        raise ValueError("--stop matches text, which needs --prompt (a checkpoint folder with a tokenizer)")
    if args.chat and args.prompt is None:
        raise ValueError("--chat applies a chat template to --prompt text: give --prompt (a checkpoint folder with a "
                         "tokenizer)")
    tok = None if args.prompt is None else tokenizer(model_name)  # read once: prompts, --stop, streamer, outputs
    ids, lengths = prompt_ids(args.prompt, model_name, batch, plen, seed, chat=args.chat, tok=tok)
    if k > 1:  # each prompt once: generate copies it K times
        ids = ids[:len(args.prompt)]
    stop_args = {}
    if args.stop is not None:
        from ..runtime.stop_strings import check_stop_strings
        stop_args = {"stop_strings": check_stop_strings(args.stop, tok), "tokenizer": tok}
    plen = ids.shape[1]
    if model_name != args.model:  # the CPU stand-in runs these lengths for the requested model: its limits hold
        from ..models.spec import check_positions
        note = check_positions(*requested, plen + glen)
        if note:
            say(f"warning: {note}")
    policy, kv_buckets = DEFAULT_POLICY if args.policy is None else args.policy, _int("--kv-buckets", args.kv_buckets)
    budget, strict = args.hbm_budget, args.strict_budget
    if model_name != args.model and budget is not None:  # the stand-in keeps the requested plan's host share
        from ..runtime.offload import workload_for
        w = workload_for(batch, None, plen, glen, dtypes[args.dtype], kv_buckets)
        ratio = stand_in_ratio(requested[1], w, policy, args)
        budget, strict = None, False
        say(f"dak: {args.model}'s {policy} plan at --hbm-budget {args.hbm_budget} keeps "
            f"{100 * ratio:.1f}% of its operator bytes on the host; {CPU_MODEL} runs with that share "
            f"(--host-ratio {100 * ratio:.1f}%)")
    if not gpu and plen + glen > SLOW_INTERPRETER_LEN:
        say(f"dak: note: {plen} + {glen} tokens run in the interpreter for minutes (prompt 512 + 8 new at batch 8 "
            f"took 6 minutes on 2 cores; the default 32 + 32 under one); lower --prompt-len/--gen-len for a quick check")
    stop = {"eos_token_id": None}  # a fixed number of steps, unless --stop-at-eos
    if args.stop_at_eos:  # generate then takes eos/pad from the model's generation config, checked here first
        from ..models.spec import load_config
        from ..runtime.generation_config import read_generation_config
        gen = read_generation_config(model_name) if os.path.isdir(model_name) else None
        eos = load_config(model_name)[1].get("eos_token_id") if gen is None else gen.eos_token_id
        if eos is None:
            raise ValueError(f"--stop-at-eos: {model_name}'s generation config has no eos_token_id; drop the flag")
        stop = {}
    model = dak.offload(model_name, hbm_budget=budget, hardware=args.hardware, batch=batch,
                        prompt_len=plen, gen_len=glen, policy=policy,
                        host_ratio=ratio,
                        dtype=dtypes[args.dtype], seed=seed, tune=args.tune and gpu,
                        graphs=False if args.no_graphs else None,
                        kv_buckets=kv_buckets, kv_ahead=args.kv_ahead,
                        fuse_projections=args.fuse_projections, strict_budget=strict)
    try:
        if args.sample:
            torch.manual_seed(seed)  # the same --seed samples the same tokens
        out = model.generate(ids, max_new_tokens=glen, **decoding, **stop, **stop_args,
                             prompt_lengths=lengths, streamer=streamer(tok) if args.stream else None)
        texts = []
        if args.prompt is not None:
            ended = model.dak_last.stopped or (None,) * (k * len(args.prompt))
            for b in range(k * len(args.prompt)):  # each prompt without its padding, then its new tokens
                n = plen if lengths is None else int(lengths[b // k])
                new = out[b, plen:].tolist() if ended[b] is None else out[b, plen:plen + ended[b] + 1].tolist()
                texts.append(tok.decode(out[b, :n].tolist() + new, skip_special_tokens=True))
        n = model.dak_engine.kv_ahead_layers if args.kv_ahead else None
        if args.json:
            d = figures(model.dak_placement, model.dak_last, batch, model.dak_engine.graphs)
            d.update(model=args.model, ran=model_name, cpu_interpreter=not gpu, batch=batch, prompt_len=plen,
                     gen_len=glen, kv_ahead_layers=n, fused_groups=model.dak_fused if args.fuse_projections else None,
                     outputs=texts if args.prompt is not None else None, decoding=applied(model.dak_last.sampling))
            from ..bench.meta import metadata
            d["meta"] = metadata()  # GPU, git sha, command, $DAK_* switches, date
            print(json.dumps(d, indent=2))
            return 0
        print(report(model.dak_placement, model.dak_last, batch, model.dak_engine.graphs))
        if args.kv_ahead:
            print(f"kv-ahead: {n} layer(s) stage host K/V ahead" if n else
                  "kv-ahead: no layer stages host K/V through the copy engine here, so nothing was copied ahead")
        if args.fuse_projections:
            print(f"fused projections: {model.dak_fused} q/k/v or gate/up set(s) multiply as one matrix")
        print(describe(model.dak_last.sampling))
        for b, text in enumerate(texts):
            label = f"output {b // k}.{b % k}:" if k > 1 else f"output {b}:" if len(texts) > 1 else "output:"
            print(label, text)
    finally:
        model.dak_free()
    return 0


def stand_in_ratio(spec, w, policy: str, args) -> float:
    """The share of operator bytes the requested model's plan (workload `w`) keeps on the host at
    --hbm-budget (the CPU stand-in runs that share, so a budget sized for a 7B model still splits
    its operators); an infeasible budget fails as it would on the GPU."""
    from ..hardware_auto import hardware_profile
    from ..runtime.offload import placement_for
    pl = placement_for(spec, w, hardware_profile(args.hardware), args.hbm_budget, policy, None,
                       args.fuse_projections, args.strict_budget, args.kv_ahead)
    if not pl.feasible:
        raise ValueError(f"no feasible placement for {args.model} at --hbm-budget {args.hbm_budget}: {pl.note}")
    return pl.offload_ratio


def run_baseline(args, model_name: str) -> int:
    """One case of `dak bench e2e`: the baseline system on this model, batch and host ratio."""
    import tempfile
    from dak.bench.e2e import run_e2e
    from dak.bench.e2e_cases import SYSTEMS, E2EConfig
    choices = [s for s in SYSTEMS if not s.startswith("dak-")]
    if args.baseline not in choices:
        raise ValueError(f"--baseline must be one of {', '.join(choices)}, got {args.baseline!r}")
    if args.hbm_budget is not None or args.prompt is not None:
        raise ValueError("--baseline takes --host-ratio (the share of operator bytes on the host), "
                         "not --hbm-budget or --prompt")
    given = given_decoding_flags(args) + [flag for flag, on in (("--stop-at-eos", args.stop_at_eos),
                                                                 ("--stream", args.stream),
                                                                 ("--stop", args.stop is not None),
                                                                 ("--chat", args.chat)) if on]
    if given:
        raise ValueError(f"--baseline times greedy decoding of --gen-len tokens: drop {', '.join(given)}")
    given = [flag for flag, on in (("--policy", args.policy is not None), ("--strict-budget", args.strict_budget),
                                   ("--no-graphs", args.no_graphs)) if on]
    if given:
        raise ValueError(f"--baseline runs its own placement, CUDA-graphed as in `dak bench e2e`: drop {', '.join(given)}")
    ratio = 0.0 if args.host_ratio is None else parse_ratio(args.host_ratio)
    if args.baseline == "all-hbm" and ratio > 0:
        raise ValueError("--baseline all-hbm keeps every weight in HBM: drop --host-ratio (or pick prefetch, uva "
                         "or accelerate, which offload that share)")
    with tempfile.TemporaryDirectory() as tmp:
        cfg = E2EConfig(models=(model_name,), batches=(_int("--batch", args.batch),),
                        prompt_len=_int("--prompt-len", args.prompt_len), gen_len=_int("--gen-len", args.gen_len),
                        ratios=(ratio,), systems=(args.baseline,), hardware=args.hardware, dtype=args.dtype,
                        seed=_int("--seed", args.seed), repeats=1, tune=args.tune,
                        fuse_projections=args.fuse_projections, out=f"{tmp}/baseline.json")
        payload = run_e2e(cfg, log=lambda line: None if line.startswith(f"wrote {tmp}") else print(line, flush=True))
    bad = [r for r in payload["rows"] if r["status"] != "ok"]
    if bad:  # skipped (infeasible), unavailable (a missing package) or failed: say so, exit non-zero
        print(f"dak: error: --baseline {args.baseline} did not run ({bad[0]['status']}): {bad[0].get('note') or ''}",
              file=sys.stderr)
        return 1
    return 0


def figures(pl, res, batch: int, graphs: bool) -> dict:
    """What `dak generate` reports (seconds, bytes, bytes/s), as `--json` prints it; the per-step
    figures are None when no decode step ran (one new token: the prefill makes it)."""
    weights = sum(o.traffic for o in pl.ops if o.kind != "attention")
    tpot = res.tpot_s if res.steps and res.tpot_s else None

    def per_step(value):
        return None if tpot is None else value / tpot
    return {"policy": pl.policy, "profile": pl.profile, "host_bytes": pl.host_bytes, "hbm_bytes": pl.hbm_bytes,
            "offload_ratio": pl.offload_ratio, "split_operators": sum(1 for o in pl.ops if o.host_bytes),
            "operators": len(pl.ops), "ttft_s": res.ttft_s, "tpot_s": tpot, "steps": res.steps, "graphs": graphs,
            "tokens_per_s": per_step(batch), "effective_bandwidth": per_step(weights),
            "effective_bandwidth_with_kv": per_step(pl.total_traffic),
            "predicted_tpot_s": pl.predicted_s, "predicted_operators_s": pl.step_time_s,
            "predicted_overhead_s": pl.overhead_s,
            "measured_over_predicted": tpot / pl.predicted_s if tpot is not None and pl.predicted_s else None}


def report(pl, res, batch: int, graphs: bool) -> str:
    f = figures(pl, res, batch, graphs)
    lines = [
        f"placement: {pl.policy} on {pl.profile}: host {format_bytes(pl.host_bytes)} "
        f"({100 * pl.offload_ratio:.1f}% of operator bytes), HBM {format_bytes(pl.hbm_bytes)}, "
        f"{f['split_operators']} of {f['operators']} operators split"]
    if f["tpot_s"] is None:
        lines.append(f"TTFT {format_time(res.ttft_s)}   TPOT n/a: no decode step ran (the prefill makes the one new "
                     f"token; use --gen-len 2 or more to time decoding)")
    else:
        lines += [
            f"TTFT {format_time(res.ttft_s)}   TPOT {format_time(f['tpot_s'])} "
            f"({'CUDA graph' if graphs else 'eager'}, {res.steps} steps)   {f['tokens_per_s']:.1f} tokens/s",
            f"effective bandwidth {format_bandwidth(f['effective_bandwidth'])} (weights / TPOT), "
            f"{format_bandwidth(f['effective_bandwidth_with_kv'])} with KV"]
    lines.append(f"predicted TPOT {format_time(pl.predicted_s)} (planner: operators {format_time(pl.step_time_s)} + "
                 f"small kernels and split-operator overheads {format_time(pl.overhead_s)})"
                 + ("" if f["measured_over_predicted"] is None else
                    f", measured/predicted {f['measured_over_predicted']:.2f}"))
    return "\n".join(lines)
