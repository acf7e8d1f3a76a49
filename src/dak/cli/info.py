"""``dak models`` (list built-in models) and ``dak hardware`` (print or save a profile)."""

from __future__ import annotations

import json

from ..hardware import OPTIONAL, PRESETS, get_profile
from ..models import builtin_config, builtin_names, load_spec
from ..units import format_bandwidth, format_bytes


def add_parser(sub) -> None:
    p = sub.add_parser("models", help="list the built-in model configs")
    p.set_defaults(func=run_models)
    p = sub.add_parser("hardware", help="print a hardware profile (or list presets), optionally save it as JSON")
    p.add_argument("name", nargs="?", help=f"auto (the GPU in use), a preset ({', '.join(PRESETS)}) or profile .json")
    p.add_argument("--save", metavar="PATH", help="write the profile as JSON to PATH")
    p.add_argument("--json", action="store_true", help="print the profile as JSON")
    p.set_defaults(func=run_hardware)


def run_models(args) -> int:
    print(f"{'name':<14} {'type':<8} {'layers':>6} {'hidden':>6} {'heads':>5} {'kv':>3} {'vocab':>7} {'weights(bf16)':>14}")
    for name in builtin_names():
        s = load_spec(name)
        params = _param_count(s)
        print(f"{name:<14} {builtin_config(name)['model_type']:<8} {s.num_layers:>6} {s.hidden_size:>6} "
              f"{s.num_heads:>5} {s.num_kv_heads:>3} {s.vocab_size:>7} {format_bytes(2 * params):>14}")
    return 0


def _param_count(s) -> int:
    H, I = s.hidden_size, s.intermediate_size
    attn = 2 * H * s.q_dim + 2 * H * s.kv_dim + (s.q_dim + 2 * s.kv_dim if s.qkv_bias else 0) + (H if s.o_bias else 0)
    mlp = (3 if s.gated_mlp else 2) * H * I + ((2 * I + H if s.gated_mlp else I + H) if s.mlp_bias else 0)
    emb = s.vocab_size * H * (1 if s.tie_word_embeddings else 2) + s.learned_positions * H
    return s.num_layers * (attn + mlp + s.norm_params_per_layer) + emb + s.final_norm_params


def run_hardware(args) -> int:
    if args.name is None and args.save is None:
        for name, p in PRESETS.items():
            gemv = f", decode GEMV at {format_bandwidth(p.gemv_bandwidth)}" if p.gemv_bandwidth else ""
            print(f"{name:<16} HBM {format_bytes(p.hbm_capacity):>11} at {format_bandwidth(p.hbm_bandwidth):>10}, "
                  f"host link {format_bandwidth(p.host_bandwidth_sm)} (SM) / {format_bandwidth(p.host_bandwidth_ce)} (CE), "
                  f"{p.flops / 1e12:.0f} TFLOP/s{gemv}")
        from ..hardware_auto import current_gpu, resolve
        gpu = current_gpu()
        name, note = resolve("auto", gpu, detect=False)
        print(f"auto (the default) here: {name} ({gpu or 'no GPU visible'}{'; ' + note if note else ''})")
        return 0
    prof = get_profile(args.name or "auto")
    if args.save:
        prof.to_json(args.save)
        print(f"saved {prof.name} to {args.save}")
    elif args.json:
        print(json.dumps(prof.to_dict(), indent=2))
    else:
        rows = [("name", prof.name), ("hbm_bandwidth (B_g)", format_bandwidth(prof.hbm_bandwidth)),
                ("host_bandwidth_ce", format_bandwidth(prof.host_bandwidth_ce)),
                ("host_bandwidth_sm (B_h)", format_bandwidth(prof.host_bandwidth_sm)),
                ("flops", f"{prof.flops / 1e12:.1f} TFLOP/s"), ("sm_count", str(prof.sm_count)),
                ("smem_per_sm", format_bytes(prof.smem_per_sm)), ("hbm_capacity", format_bytes(prof.hbm_capacity)),
                ("host_ram", format_bytes(prof.host_ram))]
        for f in OPTIONAL:  # the fitted costs and rates a profile states
            v = getattr(prof, f)
            if v:
                rows.append((f, format_bandwidth(v) if f.endswith("bandwidth") else
                             f"{v * 1e6:.1f} us" if f.endswith("_s") else f"{v:g}"))
        for k, v in rows:
            print(f"{k:<24} {v}")
    return 0
