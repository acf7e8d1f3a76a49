"""``dak calibrate``: measure this GPU and write a hardware profile JSON the planner reads.

Runs on the GPU machine (a few minutes; ``--quick`` for a smoke run), refuses clearly without
a GPU; ``--dry-run`` prints what it would measure anywhere. ``--compare A B`` checks that two
profiles agree (repeatability).
"""

from __future__ import annotations

import json

from ..hardware import get_profile
from ..models import load_spec
from .plan import add_workload_args, workload_from


def add_parser(sub) -> None:
    p = sub.add_parser("calibrate", help="measure this GPU and write a hardware profile with measured curves")
    p.add_argument("--model", default="llama-2-7b", help="model whose operator shapes are timed (default llama-2-7b)")
    add_workload_args(p, dtypes="bf16 | fp16")
    p.add_argument("--tile-rows", type=int, default=64, help="rows per linear unit, as in dak plan (default 64)")
    p.add_argument("--out", default="dak-profile.json", help="profile JSON to write (default dak-profile.json)")
    p.add_argument("--name", default=None, help="profile name (default: <gpu>-calibrated)")
    p.add_argument("--quick", action="store_true", help="fewer ratios and link settings (smoke run)")
    p.add_argument("--no-tune", action="store_true", help="time the kernels' heuristic configs, no tuning sweep")
    p.add_argument("--no-attention", action="store_true", help="skip the attention curve")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--dry-run", action="store_true", help="print what would be measured and exit (no GPU needed)")
    p.add_argument("--base", default="auto",
                   help="preset whose fitted per-operator costs (copy-engine start-up, in-place and host-KV "
                        "excess) the profile takes, as calibrate does not measure them: auto (by GPU name), "
                        "a preset name, or none")
    p.add_argument("--rebase", metavar="PROFILE", help="apply --base to an existing profile, write --out and exit "
                                                       "(no GPU needed)")
    p.add_argument("--compare", nargs=2, metavar=("A", "B"), help="compare two profiles (repeatability) and exit")
    p.set_defaults(func=run)


def run(args) -> int:
    from ..calibrate import describe, make_plan
    if args.compare:
        from ..calibrate.report import compare
        text, worst = compare(get_profile(args.compare[0]), get_profile(args.compare[1]))
        print(text)
        return 0 if worst < 0.05 else 1
    if args.rebase:
        check_writable(args.out)
        prof = get_profile(args.rebase)
        prof = _with_base(prof, args.base, prof.meta.get("gpu", ""))
        prof.to_json(args.out)
        print(f"wrote {args.out}: {args.rebase} with {prof.meta.get('inherited') or 'nothing inherited'}")
        return 0
    check_writable(args.out)  # before minutes of measuring: a bad --out or --base would throw them away
    if args.base not in ("auto", "none"):
        get_profile(args.base)
    workload = workload_from(args)
    spec = load_spec(args.model)
    plan = make_plan(spec, workload, quick=args.quick, tune=not args.no_tune, tile_rows=args.tile_rows,
                     attention=not args.no_attention)
    print(describe(plan), flush=True)
    if args.dry_run:
        return 0
    from ..calibrate.report import summary
    from ..calibrate.run import calibrate, require_gpu
    require_gpu()
    import torch
    name = args.name or torch.cuda.get_device_name(0).lower().replace("nvidia ", "").replace(" ", "-") + "-calibrated"
    profile, details = calibrate(plan, spec, name, progress=not args.no_progress, model=args.model)
    profile = _with_base(profile, args.base, torch.cuda.get_device_name(0))
    profile.to_json(args.out)
    if details["failures"]:
        with open(args.out + ".failures.json", "w") as fh:
            json.dump(details["failures"], fh, indent=1)
    print(summary(profile, details))
    print(f"wrote {args.out}: plan with `dak plan --hardware {args.out} --model {args.model} ...`")
    return 1 if details["failures"] else 0


def check_writable(path: str) -> None:
    """A ValueError unless a file can be written at `path` (its folder exists and is writable)."""
    import os
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise ValueError(f"--out {path} is a directory: give a file name, e.g. {os.path.join(path, 'profile.json')}")
    if not os.path.isdir(folder):
        raise ValueError(f"cannot write --out {path}: folder {folder} does not exist (create it first)")
    if not os.access(folder, os.W_OK):
        raise ValueError(f"cannot write --out {path}: folder {folder} is not writable")


def _with_base(profile, base: str, gpu: str):
    """`profile` with the unmeasured costs of `base` ('auto': the preset of `gpu`; 'none': as is)."""
    from ..calibrate.inherit import base_preset_for, inherit_unmeasured
    name = base_preset_for(gpu) if base == "auto" else (None if base == "none" else base)
    return profile if name is None else inherit_unmeasured(profile, get_profile(name))
