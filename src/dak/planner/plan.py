"""Placement policies: DAK greedy, uniform split, and double-buffered layer prefetch.

Capacity: M = sum_i C_i + S_min (operator bytes plus the minimum HBM-resident
set); with HBM budget H the host must hold R = max(0, M - H) bytes.

* ``greedy``  -- the optimal continuous split (``greedy.solve_continuous``)
  rounded to whole units; step time = sum_i T_i(x_i) (operators run in turn).
* ``consolidated`` -- greedy, then whole operator kinds (all q_proj, all attention, ...) are
  taken off the host while that lowers the predicted step time including the profile's
  per-split-operator overheads (``dak.planner.consolidate``): fewer, larger host parts.
* ``streamed`` -- the host share spread evenly over one set of linear kinds above the
  copy-engine threshold, so every host byte rides the copy-ahead chain and overlaps the whole
  step (``dak.planner.stream``).

Decode predictions of dak's policies use the copy-ahead chain model of ``dak.planner.stream``:
the step's compute side (local operator times and overheads) and link side combined.
* ``uniform`` -- the same x = R / sum_i C_i on every op, rounded up to units.
* ``prefetch`` -- FlexGen/vLLM-style offload: a share s of every layer's
  bytes lives on host and the copy engine streams it into an HBM staging
  buffer holding two layers' host parts while the previous layer computes.
  The staging buffer costs HBM, so s solves
        M - s*S_L + 2*s*max_l S_l = H   =>   s = R / (S_L - 2*max_l S_l)
  (S_l: bytes of layer l, S_L: all layers; globals stay in HBM).  Per-layer
  time = max(sum_i max(T_comp_i, D_i/B_g), s*D_layer/B_ce); infeasible if s > 1.

Cost models (``cost_model``): ``roofline`` uses the formula in ``cost``; ``measured`` uses the
calibrated curves a profile carries (``dak.planner.curves``; ops without one keep the
roofline) and refuses a profile without any for these ops; ``auto`` (default) is ``measured``
when the profile has a curve for at least one op, else ``roofline``.
"""

from __future__ import annotations

import dataclasses
import math
import numbers

from ..hardware import HardwareProfile
from ..models.ops import DEFAULT_RESERVE, Workload, list_operators, minimum_hbm_set
from ..models.spec import ModelSpec
from ..defaults import DEFAULT_FUSE_PROJECTIONS, DEFAULT_KV_AHEAD
from ..env_snapshot import fixed
from ..units import MIB, format_bytes
from .cost import op_time
from .consolidate import consolidate
from .curves import coverage
from .greedy import round_to_units, solve_continuous
from .overhead import fusion_overhead, step_overhead
from .placement import OpPlacement, Placement
from .spread import staging_for, streamed
from .stream import chain_predict, chained, staged_parts

POLICIES = ("greedy", "consolidated", "streamed", "uniform", "prefetch")
COST_MODELS = ("auto", "roofline", "measured")


def resolve_cost_model(ops, profile: HardwareProfile, cost_model: str = "auto"):
    """(profile to plan with, 'roofline' | 'measured', ops timed by a measured curve)."""
    if cost_model not in COST_MODELS:
        raise ValueError(f"unknown cost model {cost_model!r}: use one of {', '.join(COST_MODELS)}")
    measured, measurable = coverage(ops, profile)
    if cost_model == "roofline" or (cost_model == "auto" and measured == 0):
        return profile.roofline_only(), "roofline", 0
    if measured == 0:
        raise ValueError(f"hardware profile {profile.name!r} has no measured curve for any of these "
                         f"{measurable} operator shapes; run `dak calibrate` with this model and workload, "
                         f"or use --cost-model roofline")
    return profile, "measured", measured


def ratio_budget(spec: ModelSpec, workload: Workload, x, profile: HardwareProfile,
                 reserve: int = DEFAULT_RESERVE, strict: bool = False) -> int:
    """The HBM budget that leaves share ``x`` of the operator bytes (weights and KV cache) on the
    host: operator bytes + minimum HBM set - x * operator bytes (`dak bench e2e`'s offload ratio,
    `dak.offload(host_ratio=x)`); the policy then decides which bytes. Capped at the profile's
    capacity; ``strict``: a share too small for that capacity is an error naming the least one."""
    if isinstance(x, bool) or not isinstance(x, numbers.Real) or not 0.0 <= float(x) <= 1.0:
        raise ValueError(f"host_ratio must be a number in [0, 1] (the share of operator bytes on the host), "
                         f"got {x!r}")
    op_bytes = sum(op.bytes for op in list_operators(spec, workload))
    total = op_bytes + minimum_hbm_set(spec, workload, reserve).total
    budget = int(total - float(x) * op_bytes)
    if strict and total - profile.hbm_capacity > profile.host_ram:
        raise ValueError(f"no host_ratio fits: {_fit_advice(total, profile)}")
    if strict and budget > profile.hbm_capacity:
        least = math.ceil(1e4 * (total - profile.hbm_capacity) / op_bytes) / 1e4
        raise ValueError(f"host_ratio {float(x):g} leaves {format_bytes(budget)} in HBM, more than "
                         f"{profile.name}'s capacity {format_bytes(profile.hbm_capacity)}: raise host_ratio to at "
                         f"least {least:g}, or give an HBM budget instead")
    return max(1, min(profile.hbm_capacity, budget))


def _fit_advice(total: int, profile: HardwareProfile) -> str:
    """What to change when the host must hold more than host_ram."""
    if total > profile.hbm_capacity + profile.host_ram:
        return (f"the workload needs {format_bytes(total)} (operators and KV cache plus the minimum HBM set), more "
                f"than HBM ({format_bytes(profile.hbm_capacity)}) and host_ram together: reduce the batch or the "
                f"prompt/generation lengths")
    return "raise the HBM budget (--hbm-budget / hbm_budget), or lower --host-ratio / host_ratio"


def _op_placement(op, k: int, time_s: float) -> OpPlacement:
    host = op.host_bytes_for(k)
    attn = op.kind == "attention"
    return OpPlacement(name=op.name, kind=op.kind, layer=op.layer, shape=op.shape,
                       ratio=host / op.bytes if op.bytes else 0.0, host_units=k, units=op.units,
                       host_rows=None if attn else op.host_rows_for(k),
                       host_requests=op.host_rows_for(k) if attn else None,
                       bytes=op.bytes, hbm_bytes=op.bytes - host, host_bytes=host,
                       traffic=op.traffic, time_s=time_s)


def _units_covering(op, x: float) -> int:
    """Smallest k with host_bytes_for(k) >= x * bytes."""
    target = x * op.bytes * (1 - 1e-12)
    k = min(op.units, math.ceil(target / op.unit_bytes)) if op.unit_bytes else 0
    while k < op.units and op.host_bytes_for(k) < target:
        k += 1
    return k


def _descend(op, k: int, profile: HardwareProfile) -> int:
    """Add host units while T strictly decreases (convexity: stops at the unit nearest the peak)."""
    def t(j):
        return op_time(op, op.host_bytes_for(j) / op.bytes, profile)
    while k < op.units and t(k + 1) < t(k) * (1 - 1e-12):
        k += 1
    return k


@fixed()
def plan(spec: ModelSpec, workload: Workload, profile: HardwareProfile, hbm_budget: int | None = None,
         policy: str = "greedy", tile_rows: int = 64, reserve: int = DEFAULT_RESERVE,
         spare_link: bool = False, ops=None, cost_model: str = "auto",
         fused: bool = DEFAULT_FUSE_PROJECTIONS, kv_ahead: bool = DEFAULT_KV_AHEAD) -> Placement:
    """Place every operator of ``spec`` for ``workload`` on ``profile`` under ``hbm_budget`` bytes.
    ``fused``: the runtime fuses all-HBM q/k/v and gate/up; ``kv_ahead``: it copies host K/V a
    layer ahead (dak.planner.stream.chain_time; predictions only)."""
    if policy not in POLICIES:
        raise ValueError(f"unknown policy {policy!r}: use one of {', '.join(POLICIES)}")
    budget = profile.hbm_capacity if hbm_budget is None else hbm_budget
    if isinstance(budget, float) and budget.is_integer():
        budget = int(budget)
    if isinstance(budget, bool) or not isinstance(budget, int) or budget <= 0:
        raise ValueError(f"HBM budget must be a positive number of bytes, got {budget!r}")
    if budget > profile.hbm_capacity:
        raise ValueError(f"HBM budget {format_bytes(budget)} exceeds {profile.name}'s HBM capacity "
                         f"{format_bytes(profile.hbm_capacity)}; lower --hbm-budget")
    ops = list_operators(spec, workload, tile_rows) if ops is None else list(ops)
    profile, model_used, measured = resolve_cost_model(ops, profile, cost_model)
    if workload.phase != "decode" and profile.gemv_bandwidth:  # the GEMV serves decode steps (cost.runs_gemv)
        profile = dataclasses.replace(profile, gemv_bandwidth=0.0)
    if not fused and policy != "prefetch":  # members then run alone: their own shapes' curves
        profile = profile.without_fused_curves()
    mins = minimum_hbm_set(spec, workload, reserve)
    if mins.total > profile.hbm_capacity:  # no budget can help: say what does
        raise ValueError(
            f"the minimum HBM-resident set {format_bytes(mins.total)} (norms {format_bytes(mins.small_params)}, "
            f"activation workspace {format_bytes(mins.workspace)}, runtime reserve {format_bytes(mins.reserve)}) "
            f"exceeds {profile.name}'s HBM capacity {format_bytes(profile.hbm_capacity)}: reduce the batch or "
            f"the prompt/generation lengths" + (", or the reserve" if mins.reserve > mins.total / 2 else ""))
    if budget < mins.total:
        raise ValueError(
            f"HBM budget {format_bytes(budget)} is below the minimum HBM-resident set "
            f"{format_bytes(mins.total)} (norms {format_bytes(mins.small_params)}, activation workspace "
            f"{format_bytes(mins.workspace)}, runtime reserve {format_bytes(mins.reserve)}); "
            f"raise --hbm-budget to at least {math.ceil(mins.total / MIB)}MiB")
    op_bytes = sum(op.bytes for op in ops)
    total = op_bytes + mins.total
    R = max(0, total - budget)
    if R > profile.host_ram:
        raise ValueError(f"the plan needs {format_bytes(R)} of pinned host memory but {profile.name} has "
                         f"host_ram {format_bytes(profile.host_ram)}; " + _fit_advice(total, profile))
    common = dict(model=spec.name, profile=profile.name, workload=workload, hbm_budget=budget,
                  min_hbm_bytes=mins.total, required_host_bytes=R, total_bytes=total,
                  total_traffic=float(sum(op.traffic for op in ops)), fits=R == 0,
                  cost_model=model_used, measured_ops=measured, overhead_s=step_overhead(spec, workload, profile))
    staging, feasible, note, link, one_gemv = 0, True, "", 0.0, False
    base = common["overhead_s"]
    reserved = False  # the placement holds its copy-engine staging inside the budget (streamed)

    if policy == "prefetch":
        ks, times, staging, feasible, note = _prefetch(ops, R, profile)
    else:
        decode = workload.phase == "decode"

        def judge(host):  # predicted decode step of a placement given as host bytes per op
            return chain_predict(ops, host, workload, profile, fused, base, kv_ahead)

        def predict(units):
            return judge([op.host_bytes_for(k) for op, k in zip(ops, units)])

        def or_roofline(ks, spare: bool = False):  # measured points are not convex (`_roofline_units`)
            if model_used != "measured" or not decode:
                return ks
            alt = _roofline_units(ops, R, profile, policy, workload, spare)
            return alt if predict(alt) < predict(ks) else ks
        best = (streamed(ops, R, profile, judge, staged_parts(workload))
                if decode and policy in ("streamed", "consolidated") else None)
        if policy == "streamed":
            ks, reserved = (best[1], True) if best else ([0] * len(ops), False)
            if best is None:
                feasible = False
                note = ("streamed infeasible: no set of linear kinds holds the host share above the "
                        "copy-engine threshold; use the consolidated or greedy policy")
        elif policy == "greedy":
            xs, _ = solve_continuous(ops, R, profile, spare_link=spare_link)
            ks = round_to_units(ops, xs, R, profile)
            if spare_link:  # then add units wherever that still lowers the op's time
                ks = [_descend(op, k, profile) for op, k in zip(ops, ks)]
            ks = or_roofline(ks, spare_link)
        elif policy == "consolidated":  # its kind-set search, the uniform split or the best streamed one
            ks = consolidate(ops, R, profile, workload, predict=judge if decode else None)
            if decode:
                flat = [_units_covering(op, R / op_bytes) for op in ops]
                if predict(flat) < predict(ks):
                    ks = flat
            ks = or_roofline(ks)
            if best is not None and best[0] < predict(ks):
                ks, reserved = best[1], True
        else:
            x = R / op_bytes if op_bytes else 0.0
            ks = [_units_covering(op, x) for op in ops]
    host_parts = [op.host_bytes_for(k) for op, k in zip(ops, ks)]
    if policy == "prefetch":  # the baseline stages whole layers and fuses its groups either way
        common["overhead_s"] += fusion_overhead(ops, [0] * len(ops), workload, profile, fused)
    elif not feasible:
        times = [math.inf] * len(ops)
    elif workload.phase == "decode":  # the copy-ahead chain model (dak.planner.stream)
        ct, extra = chained(ops, host_parts, workload, profile, fused, kv_ahead, base)
        times, link, one_gemv = list(ct.times), ct.link_s, ct.one_gemv
        staging = staging_for(ops, host_parts, staged_parts(workload)) if reserved else 0
        common["overhead_s"] += extra
    else:
        times = [op_time(op, h / op.bytes if op.bytes else 0.0, profile) for op, h in zip(ops, host_parts)]
    placed = tuple(_op_placement(op, k, t) for op, k, t in zip(ops, ks, times))
    host = sum(p.host_bytes for p in placed)
    if host > profile.host_ram:
        raise ValueError(f"the {policy} plan needs {format_bytes(host)} of pinned host memory but "
                         f"{profile.name} has host_ram {format_bytes(profile.host_ram)}; raise --hbm-budget")
    if R == 0 and host == 0:
        note = "the model fits in the HBM budget: no offload needed"
    return Placement(policy=policy, ops=placed, staging_bytes=staging, host_bytes=host,
                     hbm_bytes=total - host + staging, step_time_s=sum(times) if feasible else math.inf,
                     feasible=feasible, note=note, link_s=link, one_gemv=one_gemv, **common)


def _roofline_units(ops, R: int, profile: HardwareProfile, policy: str, workload, spare_link: bool):
    """The units the roofline (the profile without its curves) gives `policy`, to price against the
    measured plan: the greedy orders host bytes by each measured curve's convex envelope, but one
    operator between two envelope vertices runs at its measured points, which can lie well above."""
    roof = profile.roofline_only()
    if policy == "consolidated":
        return consolidate(ops, R, roof, workload)
    xs, _ = solve_continuous(ops, R, roof, spare_link=spare_link)
    return round_to_units(ops, xs, R, roof)


def _prefetch(ops, R: int, profile: HardwareProfile):
    """Units, per-op times, staging bytes, feasibility and note for the prefetch policy."""
    layers = sorted({op.layer for op in ops if op.layer is not None})
    per_layer = {l: sum(op.bytes for op in ops if op.layer == l) for l in layers}
    s_all, s_max = sum(per_layer.values()), max(per_layer.values(), default=0)
    ks = [0] * len(ops)
    if R > 0:
        denom = s_all - 2 * s_max
        if denom <= 0 or R > denom:
            note = "prefetch infeasible: two layers of staging buffers do not fit next to the resident part"
            return ks, [math.inf] * len(ops), 0, False, note
        s = R / denom
        ks = [_units_covering(op, s) if op.layer is not None else 0 for op in ops]
    hbm_t = [op_time(op, 0.0, profile) for op in ops]  # all in HBM (roofline or measured)
    times = list(hbm_t)
    staging_layer = {l: 0 for l in layers}
    for l in layers:
        idx = [i for i, op in enumerate(ops) if op.layer == l]
        host = sum(ops[i].host_bytes_for(ks[i]) for i in idx)
        staging_layer[l] = host
        copied = sum(ops[i].traffic * ops[i].host_bytes_for(ks[i]) / ops[i].bytes for i in idx if ops[i].bytes)
        t_hbm = sum(hbm_t[i] for i in idx)
        t_layer = max(t_hbm, copied / profile.host_bandwidth_ce)
        for i in idx:  # spread the layer's time over its ops in proportion to their HBM time
            times[i] = t_layer * hbm_t[i] / t_hbm if t_hbm > 0 else t_layer / len(idx)
    staging = 2 * max(staging_layer.values(), default=0) if R > 0 else 0
    return ks, times, staging, True, ""


@fixed()
def plan_all(spec: ModelSpec, workload: Workload, profile: HardwareProfile, hbm_budget: int | None = None,
             tile_rows: int = 64, reserve: int = DEFAULT_RESERVE, spare_link: bool = False,
             cost_model: str = "auto", fused: bool = DEFAULT_FUSE_PROJECTIONS) -> dict:
    """{policy: Placement} for every policy on the same inputs."""
    ops = list_operators(spec, workload, tile_rows)
    return {p: plan(spec, workload, profile, hbm_budget, p, tile_rows, reserve,
                    spare_link=spare_link and p == "greedy", ops=ops, cost_model=cost_model, fused=fused)
            for p in POLICIES}
