"""Placements and builders for the end-to-end baselines, over the same weights as dak's systems.

Every system of `dak bench e2e` holds the same required host bytes R = M - H (model bytes plus
the minimum HBM set, minus the HBM budget); what differs is which bytes and how they are read:

- ``uva_placement``: whole decoder-layer linears in execution order (layer 0's q, k, v, o,
  MLP, then layer 1's, ...) go to the host while fewer than R bytes are there, as vLLM's
  --cpu-offload-gb does per parameter of the decoder layers (`make_layers` wraps each layer in
  `maybe_offload_to_cpu`; the last one may overshoot). Embeddings, lm_head and the KV cache stay
  in HBM.
- ``prefetch_placement``: the planner's ``prefetch`` policy over the linears only (the KV cache
  stays in HBM, as in vLLM's and SGLang's prefetch offloaders): a share s of every layer's
  weight rows on the host, with s solving R = s * (layer bytes - 2 * largest layer's), since
  the two staging buffers cost HBM too.

``build_placed`` builds a model into any placement with dak's own helpers (meta skeleton,
``place``, split KV cache, "dak" attention), and ``fill_random`` gives every system the same
seeded weights whatever its split, so their greedy tokens can be compared.
"""

from __future__ import annotations

import dataclasses
import math

import torch
from torch import nn

from dak.hardware import HardwareProfile
from dak.models.ops import Workload, list_operators, minimum_hbm_set
from dak.models.spec import ModelSpec
from dak.planner import plan, ratio_budget
from dak.planner.plan import step_overhead
from dak.planner.cost import op_time, roofline_time
from dak.planner.placement import Placement
from dak.planner.plan import _op_placement


def budget_for(spec: ModelSpec, w: Workload, x: float, profile: HardwareProfile) -> int:
    """The HBM budget that leaves x of the operator bytes on the host (as dak.offload's host_ratio)."""
    return ratio_budget(spec, w, x, profile)


def _assemble(spec, w, profile, budget: int, policy: str, ops, ks, times, staging: int = 0,
              feasible: bool = True, note: str = "") -> Placement:
    placed = tuple(_op_placement(op, k, t) for op, k, t in zip(ops, ks, times))
    mins = minimum_hbm_set(spec, w).total
    total = sum(op.bytes for op in ops) + mins
    host = sum(p.host_bytes for p in placed)
    return Placement(policy=policy, model=spec.name, profile=profile.name, workload=w, hbm_budget=budget,
                     min_hbm_bytes=mins, required_host_bytes=max(0, total - budget), staging_bytes=staging,
                     ops=placed, total_bytes=total, hbm_bytes=total - host + staging, host_bytes=host,
                     total_traffic=float(sum(op.traffic for op in ops)), step_time_s=sum(times),
                     fits=total <= budget, feasible=feasible, note=note,
                     overhead_s=step_overhead(spec, w, profile))


def uva_placement(spec: ModelSpec, w: Workload, profile: HardwareProfile, budget: int) -> Placement:
    """Whole layer linears on the host in execution order until R bytes are there (see the module doc)."""
    ops = list_operators(spec, w)
    need = max(0, sum(op.bytes for op in ops) + minimum_hbm_set(spec, w).total - budget)
    ks, host = [], 0
    for op in ops:
        k = op.units if op.kind != "attention" and op.layer is not None and host < need else 0
        host += op.host_bytes_for(k)
        ks.append(k)
    times = [op_time(op, op.host_bytes_for(k) / op.bytes if op.bytes else 0.0, profile) for op, k in zip(ops, ks)]
    note = "" if host >= need else "the layer weights are smaller than the host bytes required"
    return _assemble(spec, w, profile, budget, "uva", ops, ks, times, feasible=host >= need, note=note)


def prefetch_placement(spec: ModelSpec, w: Workload, profile: HardwareProfile, budget: int) -> Placement:
    """The planner's prefetch policy over the linears, the KV cache in HBM (see the module doc)."""
    ops = list_operators(spec, w)
    weights = [op for op in ops if op.kind != "attention"]
    kv = sum(op.bytes for op in ops if op.kind == "attention")
    try:
        pw = plan(spec, w, profile, budget - kv, "prefetch", ops=weights)
    except ValueError as e:  # e.g. the KV cache alone leaves less than the minimum HBM set
        inf = [float("inf")] * len(ops)
        return _assemble(spec, w, profile, budget, "prefetch", ops, [0] * len(ops), inf, feasible=False,
                         note=f"prefetch infeasible: {e}")
    by_name = {p.name: p for p in pw.ops}
    ks = [by_name[op.name].host_units if op.name in by_name else 0 for op in ops]
    times = [by_name[op.name].time_s if op.name in by_name else op_time(op, 0.0, profile) for op in ops]
    if not pw.feasible:
        times = [float("inf")] * len(ops)
    return _assemble(spec, w, profile, budget, "prefetch", ops, ks, times, staging=pw.staging_bytes,
                     feasible=pw.feasible, note=pw.note)


def roofline_bound(spec: ModelSpec, w: Workload, profile: HardwareProfile, budget: int) -> float:
    """Best step time for this HBM budget: the greedy placement's sum of per-op roofline times
    (at hbm_bandwidth: a profile's gemv_bandwidth prices dak's plans, not the bound)."""
    pl = plan(spec, w, dataclasses.replace(profile.roofline_only(), gemv_bandwidth=0.0), budget, "greedy")
    ops = list_operators(spec, w)
    return sum(roofline_time(op, p.ratio, profile) for op, p in zip(ops, pl.ops))


def build_placed(cfg: dict, placement: Placement, *, batch: int, max_len: int, dtype: torch.dtype,
                 seed: int, tune: bool, fuse_projections: bool = False):
    """(model, DakKV): the HF model of `cfg` built into `placement`'s homes (dak.runtime.offload.build_model)."""
    from dak.runtime.offload import build_model
    w = placement.workload
    if (w.batch, w.prompt_len + w.gen_len) != (batch, max_len):
        raise ValueError(f"placement is for batch {w.batch}, max_len {w.prompt_len + w.gen_len}; "
                         f"asked for {batch}, {max_len}")
    return build_model(cfg, placement, dtype=dtype, seed=seed, tune=tune, name=placement.model,
                       fuse_projections=fuse_projections)


def swap_uva(model: nn.Module) -> int:
    """Replace every all-host SplitLinear by a UVASplit; returns how many were swapped."""
    from dak.baselines.e2e_modules import UVASplit
    from dak.nn.split_linear import SplitLinear
    from dak.runtime.build import _set
    whole = [(n, m) for n, m in model.named_modules()
             if isinstance(m, SplitLinear) and m.host_rows == m.out_features and m.out_features]
    for name, mod in whole:
        _set(model, name, UVASplit(mod))
    return len(whole)


def install_prefetch(model: nn.Module, placement: Placement, dtype: torch.dtype, fuse: bool = False):
    """Swap every layer's split linears for prefetched ones (with `fuse`, sibling projections as
    one matmul each side, e2e_modules.PrefetchGroup); returns the LayerPrefetcher (`.fused` groups)."""
    from dak.baselines.e2e_modules import LayerPrefetcher
    from dak.runtime.build import find_module
    n_layers = 1 + max(op.layer for op in placement.ops if op.layer is not None)
    layers: list[list] = [[] for _ in range(n_layers)]
    for op in placement.ops:
        if op.layer is not None and op.kind != "attention":
            layers[op.layer].append(find_module(model, op.name))
    device = next(m for _, m in layers[0]).w_hbm.device
    pre = LayerPrefetcher(layers, device, dtype)
    pre.fused = pre.install(model, model.base_model.layers if hasattr(model.base_model, "layers")
                            else model.base_model.decoder.layers, fuse)
    return pre


def placement_summary(pl: Placement) -> dict:
    """The fields of a placement that a benchmark row records."""
    keep = ("policy", "hbm_budget", "required_host_bytes", "host_bytes", "hbm_bytes", "staging_bytes",
            "step_time_s", "overhead_s", "link_s", "one_gemv", "feasible", "note", "cost_model")
    d = {k: getattr(pl, k) for k in keep}
    if not math.isfinite(d["step_time_s"]):
        d["step_time_s"] = None
    d["offload_ratio"] = pl.offload_ratio
    d["ops_split"] = sum(1 for o in pl.ops if o.host_bytes)
    d["workload"] = dataclasses.asdict(pl.workload)
    return d
