"""The decode-step time per decoder layer that the planner's operators do not account for.

Between the planned operators a decode step runs small kernels: norms, residual adds, the
activation, the KV append, sampling, and a launch each. `layer_overhead` builds the model cut to
two depths (all in HBM, seeded random weights), times its CUDA-graphed decode step at each,
and returns (slope of the measured step over layers) - (slope of the planner's operator time
under the same profile's cost model), which a profile stores as ``layer_overhead_s`` (or
``fused_layer_overhead_s`` for a model whose layers dak fuses: `overhead_field`) and
predictions add per layer. `dak calibrate` measures the slope first and subtracts the operator
slope of its finished profile (measured curves), so the two are never counted twice.
"""

from __future__ import annotations

import torch

from ..models.ops import Workload
from ..models.spec import ModelSpec, load_config


def step_time(cfg: dict, name: str, workload: Workload, profile, gen_len: int = 16) -> tuple[float, float]:
    """(measured TPOT, planner's operator time) of `cfg`'s model placed all in HBM."""
    from ..planner import plan
    from ..runtime.offload import build_model
    from ..runtime.engine import Engine
    spec = ModelSpec.from_config(cfg, name=name)
    w = Workload("decode", workload.batch, workload.prompt_len, gen_len, workload.dtype)
    pl = plan(spec, w, profile)
    dtype = torch.bfloat16 if w.dtype == "bf16" else torch.float16
    model, kv = build_model(cfg, pl, dtype=dtype, tune=False, name=name)
    engine = None
    try:
        engine = Engine(model, kv)
        ids = torch.randint(3, spec.vocab_size, (w.batch, w.prompt_len), generator=torch.Generator().manual_seed(0))
        engine.generate(ids, gen_len)  # warm-up and graph capture
        tpot = min(engine.generate(ids, gen_len).tpot_s for _ in range(2))
    finally:
        if engine is not None:
            engine.release_graphs()
        kv.free()
        del model
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    return tpot, pl.step_time_s


def _cut_configs(model: str, depths: tuple[int, int]):
    lo, hi = depths
    if not 0 < lo < hi:
        raise ValueError(f"depths must be two layer counts 0 < a < b, got {depths}")
    name, cfg = load_config(model)
    key = "num_hidden_layers"
    if key not in cfg:
        raise ValueError(f"{model}: its config has no {key}; cannot cut it to {depths} layers")
    return name, [dict(cfg, **{key: d}) for d in depths]


def overhead_field(model: str) -> str:
    """The profile field a layer slope measured on `model` sets: fused_layer_overhead_s when dak
    fuses its decoder layers (dak.planner.overhead.fuses_layers), else layer_overhead_s."""
    from ..planner.overhead import fuses_layers
    name, cfg = load_config(model)
    return "fused_layer_overhead_s" if fuses_layers(ModelSpec.from_config(cfg, name=name)) else "layer_overhead_s"


def measured_layer_slope(model: str, workload: Workload, profile, depths: tuple[int, int] = (1, 3),
                         gen_len: int = 16) -> float:
    """GPU: seconds per decoder layer of the measured graphed decode step (all in HBM)."""
    name, cfgs = _cut_configs(model, depths)
    (t_lo, _), (t_hi, _) = (step_time(c, name, workload, profile, gen_len) for c in cfgs)
    return (t_hi - t_lo) / (depths[1] - depths[0])


def planned_layer_slope(model: str, workload: Workload, profile, depths: tuple[int, int] = (1, 3)) -> float:
    """CPU: seconds per decoder layer of the planner's operator time under `profile` (its curves
    where it has them, else the roofline), all in HBM; for a model that norms every head's q and k
    (Qwen3) also the launches a layer the planner adds for them (dak.planner.overhead.qk_norm_launches),
    so that a slope measured on it is stored as the other families' is, without them."""
    from ..planner import plan
    from ..planner.overhead import qk_norm_launches
    name, cfgs = _cut_configs(model, depths)
    w = Workload("decode", workload.batch, workload.prompt_len, workload.gen_len, workload.dtype)
    specs = [ModelSpec.from_config(c, name=name) for c in cfgs]
    lo, hi = (plan(s, w, profile).step_time_s for s in specs)
    qk = qk_norm_launches(specs[0]) * profile.unfused_op_overhead_s
    return (hi - lo) / (depths[1] - depths[0]) + qk


def layer_overhead(model: str, workload: Workload, profile, depths: tuple[int, int] = (1, 3),
                   gen_len: int = 16) -> float:
    """Seconds per decoder layer outside the planned operators (>= 0), from two depths of `model`.

    Relative to `profile`'s own operator times: a profile with measured curves needs the
    difference against those (`planned_layer_slope`), not against the roofline."""
    slope = measured_layer_slope(model, workload, profile, depths, gen_len)
    return max(0.0, slope - planned_layer_slope(model, workload, profile, depths))
