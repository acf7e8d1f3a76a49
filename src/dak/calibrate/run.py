"""Run a calibration on the GPU: the steps of a `CalibrationPlan` behind a progress bar, then the
profile (a `dak.hardware.HardwareProfile` with meta, curves, windows and link samples).

A shape whose measurement fails is left out (the planner then uses the roofline for it) and
named in ``failures``; everything else is still written.
"""

from __future__ import annotations

import dataclasses
import os
import traceback

from ..hardware import HardwareProfile
from ..measured import Curve, LinkSample
from .plan import CalibrationPlan


def require_gpu() -> None:
    """ValueError saying what to do when no CUDA GPU can be measured."""
    import torch
    if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0") or not torch.cuda.is_available():
        raise ValueError("dak calibrate measures a GPU and none is visible here (torch.cuda.is_available() "
                         "is False or TRITON_INTERPRET is set); run it on the GPU machine, or pass --dry-run "
                         "to print what it would measure")


def _failure(what: str, exc: Exception) -> str:
    """One failures entry: what failed, the error, and where (the last frames of its traceback)."""
    where = "".join(traceback.format_tb(exc.__traceback__)[-4:])
    return f"{what}: {type(exc).__name__}: {exc}\n{where}"


def _steps(plan: CalibrationPlan) -> int:
    return 3 + 2 * len(plan.link_grid) + 1 + sum(len(s.points) for s in plan.shapes) + len(plan.fusion) + 1


def calibrate(plan: CalibrationPlan, spec, name: str, progress: bool = True, model: str | None = None):
    """(profile, details): details holds what the profile does not (HBM bandwidth alone, host
    bandwidth under load, failures) for the report. `model` (a built-in name or config path;
    default plan.model) is built at two depths to measure the per-layer small-kernel time."""
    require_gpu()
    import torch
    from tqdm import tqdm

    from .attention import time_attention
    from .fusion import fused_results, time_fused
    from .device import LinkProbe, copy_engine_bandwidth, device_numbers, hbm_bandwidth, matmul_flops, metadata
    from .linear import LinearShape, measure_curve
    from .overhead import measured_layer_slope, overhead_field, planned_layer_slope

    bar = tqdm(total=_steps(plan), desc="dak calibrate", unit="step", disable=not progress)
    meta = metadata()
    numbers = device_numbers()
    bar.set_postfix_str("HBM, copy engine, matmul")
    hbm = hbm_bandwidth()
    bar.update()
    ce = copy_engine_bandwidth()
    bar.update()
    flops = matmul_flops()
    bar.update()
    torch.cuda.empty_cache()

    bar.set_postfix_str("host link")
    probe = LinkProbe(host_mib=128 if plan.quick else 256)
    reads = {}
    for p, s in plan.link_grid:
        reads[(p, s)] = probe.host_read(p, s)
        bar.update()
    hbm_alone, _ = probe.hbm_under_load(None, 3)
    bar.update()
    link, host_loaded = [], {}
    for p, s in plan.link_grid:
        g, h = probe.hbm_under_load(p, s)
        link.append(LinkSample(p, s, reads[(p, s)], g))
        host_loaded[(p, s)] = h
        bar.update()
    del probe
    torch.cuda.empty_cache()

    failures = []
    bar.set_postfix_str("small kernels per layer")
    slope = None
    base = HardwareProfile(name=name, hbm_bandwidth=hbm, host_bandwidth_ce=ce,
                           host_bandwidth_sm=max(reads.values()), flops=flops, **numbers)
    try:  # measured first, on a clean GPU state; the operators' share is taken off at the end
        slope = measured_layer_slope(model or plan.model, plan.workload, base)
    except Exception as exc:  # noqa: BLE001 -- keep the rest of the profile
        failures.append(_failure("layer overhead", exc))
    bar.update()
    torch.cuda.empty_cache()

    curves, windows = [], []
    for job in plan.shapes:
        bar.set_postfix_str(f"{job.names} {job.m}x{job.k}" if job.kind == "linear" else "attention")
        try:
            if job.kind == "linear":
                shape = LinearShape(job.m, job.k, job.n, job.bias, plan.workload.dtype, plan.tile_rows, plan.tune)
                res = measure_curve(shape, job.points, plan.window_grid, bar.update)
                pts = tuple((r.host_rows / job.m, r.time_s) for r in res)
                windows += [r.window for r in res if r.window is not None]
                note = f"SplitLinear n={job.n}, {'tuned' if plan.tune else 'heuristic'} + window search"
                del shape
            else:
                pts = []
                for b_h in job.points:
                    pts.append((b_h / job.m, time_attention(spec, plan.workload, b_h, plan.tune)))
                    bar.update()
                note = f"split decode attention, {'tuned' if plan.tune else 'heuristic'}"
            curves.append(Curve(job.key, tuple(pts), note))
        except Exception as exc:  # noqa: BLE001 -- one failed shape must not lose the others
            failures.append(_failure(f"{job.names} ({job.key})", exc))
        torch.cuda.empty_cache()
    fused_times = []
    for fs in plan.fusion:
        bar.set_postfix_str(f"fused {'/'.join(fs.kinds)} {fs.m}x{fs.k}")
        try:
            fused_times.append(time_fused(fs, plan.workload.dtype, plan.tile_rows, plan.tune))
        except Exception as exc:  # noqa: BLE001 -- the members keep their own curves
            failures.append(_failure(f"fused {'/'.join(fs.kinds)} ({fs.m}x{fs.k})", exc))
            fused_times.append(None)
        bar.update()
        torch.cuda.empty_cache()
    fused_curves, unfused = fused_results(plan.fusion, fused_times, curves)
    curves += fused_curves
    bar.close()
    w = plan.workload
    meta.update(model=plan.model, workload=f"{w.phase} B={w.batch} L={w.prompt_len} G={w.gen_len} {w.dtype}",
                quick=plan.quick, tuned=plan.tune, tile_rows=plan.tile_rows)
    profile = dataclasses.replace(base, meta=meta, curves=tuple(curves), windows=tuple(windows), link=tuple(link),
                                  unfused_op_overhead_s=unfused or 0.0)
    details = {"hbm_alone": hbm_alone, "host_loaded": {f"{p}x{s}": v for (p, s), v in host_loaded.items()},
               "failures": failures}
    if slope is not None:  # beyond the operators as this profile times them (curves, else roofline)
        ops = planned_layer_slope(model or plan.model, plan.workload, profile)
        field = overhead_field(model or plan.model)
        profile = dataclasses.replace(profile, **{field: max(0.0, slope - ops)})
        details["layer_slope"] = (slope, ops)
        details["layer_field"] = field
    return profile, details
