"""The systems `dak bench e2e` compares, by name: each builds one planned `Case` into a `Built`.

- dak-greedy / dak-consolidated / dak-streamed / dak-uniform / all-hbm: `dak.offload` (that policy at the case's HBM
  budget; all-hbm is host ratio 0), the dak Engine (eager prefill, CUDA-graphed decode).
- prefetch / uva: the same model built into the baseline's placement with dak's helpers, the
  modules swapped (`dak.baselines.e2e`), KV cache in HBM, the same Engine and CUDA graph.
- accelerate: HF + accelerate's device_map offload, eager HF generate (`dak.baselines.hf_accelerate`).

All of them get the same seeded weights (`dak.runtime.build.fill_random`), so their tokens can be compared,
and their logits at the prompt's last token (`Built.first_logits`: the first generated token is chosen from them).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import torch

from dak.bench.e2e_cases import Case, E2EConfig

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


@dataclass
class Built:
    """A ready system: run(ids, gen_len) -> (tokens (B, G) CPU, TTFT s, TPOT s, median step s or None)."""
    run: Callable
    free: Callable[[], None]
    placement: object = None       # the Placement it was built from (None: accelerate)
    host_bytes: int = 0            # bytes of weights and KV it keeps on the host
    graphs: bool = False
    extra: dict = field(default_factory=dict)
    engine: object = None          # the dak Engine it decodes with (None: accelerate)
    first_logits: Callable | None = None  # ids (B, L) -> fp32 logits (B, V) at the last prompt token, CPU


def _engine_logits(engine):
    """The engine's prefill logits for full-length prompts (its own prefill path: graphed or chunked)."""
    def first_logits(ids):
        b, n = ids.shape
        plen = torch.full((b,), n, dtype=torch.int32, device=engine.device)
        with torch.no_grad():
            return engine.prefill(ids.to(engine.device, torch.long), plen).float().cpu()
    return first_logits


def _engine_run(engine):
    def run(ids, gen_len):
        r = engine.generate(ids, gen_len)
        return r.tokens.cpu(), r.ttft_s, r.tpot_s, None
    return run


def _free_model(model, kv=None, extra=None):
    def free():
        if extra is not None:
            extra()
        if kv is not None:
            kv.free()
        for mod in model.modules():
            host = getattr(mod, "_host", None)
            if host is not None and hasattr(host, "free"):
                host.free()
    return free


def build_dak(case: Case, cfg: E2EConfig) -> Built:
    import dak
    w = case.workload
    kw = dict(hardware=cfg.hardware, batch=w.batch, prompt_len=w.prompt_len, gen_len=w.gen_len,
              dtype=DTYPES[cfg.dtype], seed=cfg.seed, tune=cfg.tune and torch.cuda.is_available(),
              kv_buckets=cfg.kv_buckets, kv_ahead=cfg.kv_ahead, fuse_projections=cfg.fuse_projections)
    if case.system == "all-hbm":
        model = dak.offload(case.model, host_ratio=0.0, policy="greedy", **kw)  # as its case plans it
    else:
        model = dak.offload(case.model, hbm_budget=case.budget, policy=case.system.removeprefix("dak-"), **kw)
    pl = model.dak_placement
    return Built(_engine_run(model.dak_engine), model.dak_free, pl, pl.host_bytes, model.dak_engine.graphs,
                 {"fused_groups": model.dak_fused}, model.dak_engine, _engine_logits(model.dak_engine))


def build_swapped(case: Case, cfg: E2EConfig) -> Built:
    from dak.baselines.e2e import build_placed, install_prefetch, swap_uva
    from dak.runtime.engine import Engine
    w, dtype = case.workload, DTYPES[cfg.dtype]
    fuse = cfg.fuse_projections
    model, kv = build_placed(case.cfg, case.placement, batch=w.batch, max_len=w.prompt_len + w.gen_len,
                             dtype=dtype, seed=cfg.seed, tune=cfg.tune and torch.cuda.is_available(),
                             fuse_projections=fuse and case.system == "uva")  # prefetch fuses its own
    extra, info = None, {}
    if case.system == "uva":
        info["uva_modules"], info["fused_groups"] = swap_uva(model), model.dak_fused
    else:
        pre = install_prefetch(model, case.placement, dtype, fuse)
        extra, info["staging_bytes"], info["fused_groups"] = pre.free, pre.staging_bytes, pre.fused
    engine = Engine(model, kv)
    return Built(_engine_run(engine), _free_model(model, kv, extra), case.placement,
                 case.placement.host_bytes, engine.graphs, info, engine, _engine_logits(engine))


def build_accelerate(case: Case, cfg: E2EConfig) -> Built:
    from dak.baselines.hf_accelerate import build_accelerate as build, timed_generate
    from dak.runtime_env import kernel_device
    device = kernel_device()
    model, device_map, on_cpu = build(case.cfg, case.required_host_bytes, DTYPES[cfg.dtype], cfg.seed, device)

    def run(ids, gen_len):
        return timed_generate(model, ids, gen_len, device)

    def first_logits(ids):
        with torch.no_grad():
            return model(ids.to(device)).logits[:, -1].float().cpu()

    cpu_modules = sum(1 for v in device_map.values() if v == "cpu")
    return Built(run, lambda: None, None, on_cpu, False, {"device_map_cpu_entries": cpu_modules}, None, first_logits)


REGISTRY: dict[str, Callable[[Case, E2EConfig], Built]] = {
    "dak-greedy": build_dak, "dak-consolidated": build_dak, "dak-streamed": build_dak, "dak-uniform": build_dak, "all-hbm": build_dak,
    "prefetch": build_swapped, "uva": build_swapped, "accelerate": build_accelerate,
}
