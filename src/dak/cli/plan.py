"""``dak plan``: place a model's operators between HBM and host memory and predict step time."""

from __future__ import annotations

import json
import sys
from collections import OrderedDict

from ..defaults import DEFAULT_KV_BUCKETS, DEFAULT_POLICY
from ..hardware_auto import hardware_profile
from ..models import Workload
from ..models.spec import ModelSpec, check_positions, load_config
from ..models.ops import DEFAULT_RESERVE
from ..planner import COST_MODELS, POLICIES, plan_all, ratio_budget
from ..units import format_bandwidth, format_bytes, format_time, parse_ratio, parse_size


def add_parser(sub) -> None:
    p = sub.add_parser("plan", help="plan the HBM/host split of every operator and predict TPOT")
    p.add_argument("--model", required=True, help="built-in name (see `dak models`), config.json or folder")
    p.add_argument("--hbm-budget", default=None, help="HBM the plan may use, e.g. 40GiB (default: device capacity)")
    p.add_argument("--host-ratio", default=None, help="instead of --hbm-budget: the share of operator bytes (weights "
                   "and KV cache) on the host, e.g. 5%%, as `dak generate --host-ratio` and `dak bench e2e`")
    add_workload_args(p)
    p.add_argument("--hardware", default="auto", help="auto (the preset of the GPU in use; h200-pcie without a GPU), a preset name or a profile .json (default auto)")
    p.add_argument("--policy", default=DEFAULT_POLICY, help="consolidated | streamed | greedy | uniform | prefetch: the placement "
                                                         f"shown (default {DEFAULT_POLICY})")
    p.add_argument("--cost-model", default="auto", choices=COST_MODELS,
                   help="roofline | measured (a calibrated profile's curves) | auto: measured when the "
                        "profile has curves for this model and workload (default auto)")
    p.add_argument("--tile-rows", default="64", help="rows per linear-layer unit (default 64)")
    p.add_argument("--reserve", default=None, help="runtime HBM reserve (default 1GiB)")
    p.add_argument("--spare-link", action="store_true", help="greedy: use the host link even when the model fits")
    p.add_argument("--strict-budget", action="store_true", help="decode: fit the copy-engine staging inside "
                   "--hbm-budget too (by default it comes on top; the plan prints how much)")
    p.add_argument("--per-layer", action="store_true", help="also print one row per layer")
    p.add_argument("--json", action="store_true", help="print the placement as JSON")
    p.set_defaults(func=run)


def add_workload_args(p, dtypes: str = "bf16 | fp16 | fp32") -> None:
    """--batch, --prompt-len, --gen-len, --dtype, --phase, --kv-buckets (read back by `workload_from`)."""
    p.add_argument("--batch", default="8", help="batch size B (default 8)")
    p.add_argument("--prompt-len", default="512", help="prompt length L in tokens (default 512)")
    p.add_argument("--gen-len", default="128", help="generated tokens G (default 128)")
    p.add_argument("--dtype", default="bf16", help=f"{dtypes} (default bf16)")
    p.add_argument("--phase", default="decode", help="decode | prefill (default decode)")
    p.add_argument("--kv-buckets", default=str(DEFAULT_KV_BUCKETS), help="decode graphs per cache length, as the "
                   f"engine runs them: host K/V copied ahead are priced up to each step's bucket (default "
                   f"{DEFAULT_KV_BUCKETS})")


def workload_from(args) -> Workload:
    return Workload(phase=args.phase, batch=_int("--batch", args.batch),
                    prompt_len=_int("--prompt-len", args.prompt_len),
                    gen_len=_int("--gen-len", args.gen_len), dtype=args.dtype,
                    kv_buckets=_int("--kv-buckets", args.kv_buckets, 1))


def _int(name: str, text: str, minimum: int | None = None) -> int:
    try:
        value = int(str(text).strip())
    except ValueError:
        raise ValueError(f"{name} must be an integer, got {text!r}") from None
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value}")
    return value


def run(args) -> int:
    if args.policy not in POLICIES:
        raise ValueError(f"unknown policy {args.policy!r}: use one of {', '.join(POLICIES)}")
    workload = workload_from(args)
    if args.strict_budget and workload.phase != "decode":
        raise ValueError("--strict-budget fits decode's copy-engine staging inside the budget; a prefill plan "
                         "stages nothing beyond it: drop --strict-budget or use --phase decode")
    name, cfg = load_config(args.model)
    spec = ModelSpec.from_config(cfg, name=name)
    note = check_positions(cfg, spec, workload.prompt_len + workload.gen_len)  # as dak.offload checks them
    if note:
        print(f"warning: {note}", file=sys.stderr)
    profile = hardware_profile(args.hardware, warn=lambda msg: print(f"warning: {msg}", file=sys.stderr))
    reserve = DEFAULT_RESERVE if args.reserve is None else parse_size(args.reserve)
    budget = None if args.hbm_budget is None else parse_size(args.hbm_budget)
    if args.host_ratio is not None:
        if budget is not None or args.strict_budget:
            raise ValueError("--host-ratio fixes the host bytes: drop --hbm-budget and --strict-budget")
        budget = ratio_budget(spec, workload, parse_ratio(args.host_ratio), profile, reserve, strict=True)
    def plans_at(b):
        return plan_all(spec, workload, profile, b, tile_rows=_int("--tile-rows", args.tile_rows),
                        reserve=reserve, spare_link=args.spare_link, cost_model=args.cost_model)
    plans = plans_at(budget)
    chosen = plans[args.policy]
    if args.strict_budget and workload.phase == "decode":
        from ..runtime.memory import within_budget
        last = {}

        def replan(b):  # keeps every policy's plan at b: the comparison at the budget the plan got
            last["plans"] = plans_at(b)
            return last["plans"][args.policy]
        chosen = within_budget(chosen, spec, replan)
        plans = last.get("plans", plans)
    if args.json:
        d = chosen.to_dict()
        if workload.phase == "decode":
            from ..runtime.memory import staging_beyond
            d["staging_beyond_bytes"] = staging_beyond(chosen, spec)
        d["comparison"] = {k: {"step_time_s": v.to_dict()["step_time_s"], "predicted_s": v.predicted_s,
                               "effective_bandwidth": v.effective_bandwidth,
                               "host_bytes": v.host_bytes, "hbm_bytes": v.hbm_bytes, "feasible": v.feasible}
                           for k, v in plans.items()}
        print(json.dumps(d, indent=2))
        return 0
    print(render(chosen, plans, per_layer=args.per_layer, spec=spec))
    if args.strict_budget and budget is not None and chosen.hbm_budget < budget:
        print(f"--strict-budget: the plan got {format_bytes(chosen.hbm_budget)} of the {format_bytes(budget)} "
              "so that its copy-engine staging fits too")
    return 0


def _shape(shapes: set) -> str:
    if len(shapes) != 1:
        return "various"
    s = next(iter(shapes))
    return "-" if s is None else f"{s[0]}x{s[1]}"


def render(pl, plans: dict, per_layer: bool = False, spec=None) -> str:
    w = pl.workload
    step = "TPOT" if w.phase == "decode" else "prefill time"
    out = [f"dak plan: {pl.model} on {pl.profile}, {w.phase} B={w.batch} L={w.prompt_len} G={w.gen_len} "
           f"{w.dtype}, policy {pl.policy}",
           f"HBM budget {format_bytes(pl.hbm_budget)}; needs {format_bytes(pl.total_bytes)} "
           f"(operators {format_bytes(pl.total_bytes - pl.min_hbm_bytes)} + minimum HBM set "
           f"{format_bytes(pl.min_hbm_bytes)}); host {format_bytes(pl.host_bytes)} "
           f"({100 * pl.offload_ratio:.1f}% of operator bytes)",
           "cost model: " + (f"measured curves (convex envelope) for {pl.measured_ops} of {len(pl.ops)} "
                             f"operators, roofline for the rest" if pl.cost_model == "measured" else
                             "roofline max(T_comp, (1-x)C/B_g, xC/B_h)")]
    if pl.fits:
        out.append("NOTE: the model fits in the HBM budget: no offload needed" +
                   ("" if pl.host_bytes == 0 else " (spare host link used as extra bandwidth)"))
    if pl.note and not pl.fits:
        out.append("NOTE: " + pl.note)
    groups: OrderedDict = OrderedDict()
    for o in pl.ops:
        groups.setdefault(o.kind, []).append(o)
    hdr = f"{'kind':<16}{'count':>6}  {'shape':<13}{'total':>12}{'host':>12}{'mean ratio':>11}{'time':>12}"
    out += ["", hdr, "-" * len(hdr)]
    for kind, os_ in groups.items():
        out.append(f"{kind:<16}{len(os_):>6}  {_shape({o.shape for o in os_}):<13}"
                   f"{format_bytes(sum(o.bytes for o in os_)):>12}{format_bytes(sum(o.host_bytes for o in os_)):>12}"
                   f"{sum(o.ratio for o in os_) / len(os_):>11.3f}{format_time(sum(o.time_s for o in os_)):>12}")
    out.append("-" * len(hdr))
    out.append(f"{'operators':<24}{'':<13}{format_bytes(sum(o.bytes for o in pl.ops)):>12}"
               f"{format_bytes(pl.host_bytes):>12}{pl.offload_ratio:>11.3f}{format_time(pl.step_time_s):>12}")
    out.append(f"HBM used {format_bytes(pl.hbm_bytes)} (incl. minimum set"
               + (f" and staging {format_bytes(pl.staging_bytes)}" if pl.staging_bytes else "") + ")")
    if spec is not None and pl.workload.phase == "decode":
        from ..runtime.memory import staging_beyond
        extra = staging_beyond(pl, spec)
        if extra:
            out.append(f"copy-engine staging beyond that (dak.offload checks it against free HBM): "
                       f"{format_bytes(extra)}")
    if pl.overhead_s:
        out.append(f"predicted step {format_time(pl.predicted_s)}: operators {format_time(pl.step_time_s)} + "
                   f"{format_time(pl.overhead_s)} beyond them ({pl.profile}'s small kernels per layer and "
                   "per-split-operator overheads)")
    if pl.link_s:
        out.append(f"copy-ahead chain: link time {format_time(pl.link_s)} per step "
                   + ("(the step is link-bound)" if pl.link_s >= pl.step_time_s + pl.overhead_s
                      else "(hidden under the step)")
                   + ("; each copy-engine linear runs as one GEMV once its copies land" if pl.one_gemv else ""))
    if per_layer:
        out += ["", f"{'layer':<8}{'bytes':>12}{'host':>12}{'ratio':>8}{'time':>12}"]
        layers: OrderedDict = OrderedDict()
        for o in pl.ops:
            layers.setdefault("global" if o.layer is None else str(o.layer), []).append(o)
        for name, os_ in layers.items():
            b, h = sum(o.bytes for o in os_), sum(o.host_bytes for o in os_)
            out.append(f"{name:<8}{format_bytes(b):>12}{format_bytes(h):>12}{(h / b if b else 0):>8.3f}"
                       f"{format_time(sum(o.time_s for o in os_)):>12}")
    g = plans["greedy"].predicted_s
    out += ["", f"{'policy':<14}{'operators':>12}{step:>14}{'eff. bandwidth':>16}{'host':>12}{'TPOT vs greedy':>16}"]
    for name, p in plans.items():
        if not p.feasible:
            out.append(f"{name:<14}{'infeasible':>12}   {p.note}")
            continue
        sp = p.predicted_s / g if g > 0 else 1.0
        out.append(f"{name:<14}{format_time(p.step_time_s):>12}{format_time(p.predicted_s):>14}"
                   f"{format_bandwidth(p.effective_bandwidth):>16}{format_bytes(p.host_bytes):>12}{sp:>15.2f}x")
    return "\n".join(out)
