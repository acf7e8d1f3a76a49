"""What `dak bench e2e` runs: its settings, and one planned case per (model, batch, ratio, system).

Everything here is planning (pure Python, no GPU): the HBM budget of each case, the placement
each system will build, the bound, the prediction, why a case is skipped, and a rough time
estimate for the dry run.

Offload ratio x: the share of operator bytes (weights and KV cache) that must live on the
host, R = x * operator bytes, i.e. HBM budget = operator bytes + minimum HBM set - R (the
definition `dak.offload(host_ratio=x)` uses). Every system at that x holds R host bytes or a
little more (whole parameters, whole layers).

Bound: the greedy placement's roofline step time at the same budget, i.e. the sum over
operators of max(T_comp, (1-x_i) D_i / B_g, x_i D_i / B_h) with the best split x_i (the LP
optimum rounded to row tiles), from the hardware profile's numbers, measured curves ignored
(`roofline_bound`; B_h is the profile's split_host_bandwidth). No system can beat it by the
model; per-op launch gaps, norms and sampling are not in it.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from dataclasses import dataclass

from dak.baselines.e2e import budget_for, prefetch_placement, roofline_bound, uva_placement
from dak.defaults import DEFAULT_FUSE_PROJECTIONS, DEFAULT_KV_AHEAD, DEFAULT_KV_BUCKETS
from dak.hardware import get_profile
from dak.hardware_auto import resolve as resolve_hardware
from dak.models.ops import Workload, list_operators, minimum_hbm_set
from dak.models.spec import ModelSpec, load_config
from dak.planner import plan
from dak.planner.placement import Placement
from dak.units import GIB, format_bytes, format_time

SYSTEMS = ("dak-greedy", "dak-consolidated", "dak-streamed", "dak-uniform", "all-hbm", "prefetch", "uva", "accelerate")
DAK_POLICY_SYSTEMS = ("dak-greedy", "dak-consolidated", "dak-streamed", "dak-uniform")  # dak.offload with that policy
BASELINES = ("prefetch", "uva", "accelerate")
DTYPES = ("bf16", "fp16")
CONTEXT_BYTES = GIB // 2  # what the CUDA context takes before anything is allocated (dry-run guess)


@dataclass(frozen=True)
class E2EConfig:
    """Every default of `dak bench e2e` (the CLI flags map onto these fields)."""
    models: tuple[str, ...] = ("opt-6.7b", "llama-2-7b")
    batches: tuple[int, ...] = (8,)
    prompt_len: int = 32
    gen_len: int = 32
    ratios: tuple[float, ...] = (0.0, 0.01, 0.02, 0.05, 0.10, 0.20, 0.40)
    systems: tuple[str, ...] = SYSTEMS
    hardware: str = "auto"             # resolved on construction (dak.hardware_auto): runs record the preset
    dtype: str = "bf16"
    seed: int = 0
    repeats: int = 2
    tune: bool = False
    kv_buckets: int = DEFAULT_KV_BUCKETS  # dak systems: decode graphs per cache-length bucket (Engine)
    fuse_projections: bool = DEFAULT_FUSE_PROJECTIONS  # q/k/v, gate/up as one matmul (dak and prefetch/uva)
    kv_ahead: bool = DEFAULT_KV_AHEAD             # dak systems: next layer's host K/V copied ahead (Engine)
    real_capacity: str | None = None   # a model placed from the GPU's real free HBM
    rc_batch: int = 32
    rc_prompt_len: int = 1024
    rc_gen_len: int = 32
    rc_systems: tuple[str, ...] = ("dak-consolidated",)
    rc_margin: int = GIB               # HBM left free beyond 1.5 x the prefill workspace
    out: str = "benchmarks/results/e2e.json"
    plot: str | None = None
    append: bool = False               # add to the rows already in `out` (split a sweep over commands)
    fp32_reference: bool = False       # first-token logits also against HF in fp32 (dak.bench.e2e_reference)

    def __post_init__(self):
        hardware, note = resolve_hardware(self.hardware)
        if note:
            warnings.warn(note, stacklevel=3)
        object.__setattr__(self, "hardware", hardware)
        for s in self.systems + self.rc_systems:
            if s not in SYSTEMS:
                raise ValueError(f"unknown system {s!r}: choose from {', '.join(SYSTEMS)}")
        if self.dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, got {self.dtype!r}")
        for x in self.ratios:
            if not 0.0 <= x <= 1.0:
                raise ValueError(f"offload ratios must be in [0, 100]%, got {100 * x:g}%")
        if self.repeats < 1:
            raise ValueError(f"repeats must be >= 1, got {self.repeats}")
        if self.kv_buckets < 1:
            raise ValueError(f"kv_buckets must be >= 1, got {self.kv_buckets}")
        if not self.models and not self.real_capacity:
            raise ValueError("nothing to run: give --models and/or --real-capacity")


@dataclass(frozen=True)
class Case:
    model: str
    cfg: dict
    spec: ModelSpec
    workload: Workload
    system: str
    kind: str                   # 'ratio' | 'real-capacity'
    x_req: float | None         # requested offload ratio (None: real capacity)
    budget: int                 # HBM budget in bytes
    placement: Placement | None  # what the system builds (None: accelerate decides itself)
    bound_s: float
    skip: str = ""              # why the case does not run ('' = it runs)
    note: str = ""
    same_as: str = ""           # a system run just before on the same model, batch and x whose
                                # build is identical (nothing on the host): its row is reused

    @property
    def required_host_bytes(self) -> int:
        return max(0, sum(op.bytes for op in list_operators(self.spec, self.workload))
                   + minimum_hbm_set(self.spec, self.workload).total - self.budget)


def real_capacity_budget(spec: ModelSpec, w: Workload, free_hbm: int, margin: int) -> int:
    """HBM budget from the free HBM: less 1.5 x the prefill workspace (the eager prefill's
    transient activations, which the decode-time minimum set does not count) and a margin."""
    pre = Workload("prefill", w.batch, w.prompt_len, 0, w.dtype)
    return int(free_hbm - 1.5 * minimum_hbm_set(spec, pre).workspace - margin)


def _placement(system: str, spec, w, profile, budget, fused: bool, kv_ahead: bool) -> Placement | None:
    if system in DAK_POLICY_SYSTEMS:
        return plan(spec, w, profile, budget, system.removeprefix("dak-"), fused=fused, kv_ahead=kv_ahead)
    if system == "all-hbm":
        return plan(spec, w, profile, budget, "greedy", fused=fused, kv_ahead=kv_ahead)
    if system == "uva":
        return uva_placement(spec, w, profile, budget)
    if system == "prefetch":
        return prefetch_placement(spec, w, profile, budget)
    return None


def _case(model, cfg, spec, w, system, kind, x, budget, profile, fused: bool, kv_ahead: bool) -> Case:
    skip = ""
    try:
        pl = _placement(system, spec, w, profile, budget, fused, kv_ahead)
        bound = roofline_bound(spec, w, profile, budget)
    except ValueError as e:
        return Case(model, cfg, spec, w, system, kind, x, budget, None, math.inf, skip=str(e))
    if pl is not None and not pl.feasible:
        skip = pl.note or "infeasible"
    if system == "all-hbm" and pl is not None and pl.host_bytes:
        skip = f"does not fit in HBM ({format_bytes(pl.total_bytes)} > {format_bytes(profile.hbm_capacity)})"
    return Case(model, cfg, spec, w, system, kind, x, budget, pl, bound, skip)


def plan_cases(cfg: E2EConfig, free_hbm: int | None = None) -> list[Case]:
    """Every case in run order: model, batch, ratio, then system (so a cut-short run still
    compares all systems at the ratios it reached); then the real-capacity case."""
    profile = get_profile(cfg.hardware)
    cases = []
    for model in cfg.models:
        name, hf = load_config(model)
        spec = ModelSpec.from_config(hf, name=name)
        for batch in cfg.batches:
            w = Workload("decode", batch, cfg.prompt_len, cfg.gen_len, cfg.dtype, cfg.kv_buckets)
            for i, x in enumerate(cfg.ratios):
                first = None  # the first system that runs at this x (dak-greedy when asked for)
                for system in sorted(cfg.systems, key=SYSTEMS.index):
                    if system == "all-hbm" and i:
                        continue  # one run per model and batch, recorded at x = 0
                    x_run = 0.0 if system == "all-hbm" else x
                    b = profile.hbm_capacity if system == "all-hbm" else budget_for(spec, w, x_run, profile)
                    c = _case(name, hf, spec, w, system, "ratio", x_run, b, profile, cfg.fuse_projections,
                              cfg.kv_ahead)
                    if (x_run == 0 and first is not None and system != "accelerate" and not c.skip
                            and not c.placement.host_bytes and not first.placement.host_bytes):
                        c = dataclasses.replace(c, same_as=first.system)
                    elif first is None and not c.skip and c.placement is not None:
                        first = c
                    cases.append(c)
    return cases + (real_capacity_cases(cfg, free_hbm) if cfg.real_capacity else [])


def real_capacity_cases(cfg: E2EConfig, free_hbm: int | None = None) -> list[Case]:
    """The --real-capacity cases, budgeted from `free_hbm` (None: the profile's capacity less a
    CUDA context); the runner passes the GPU's free HBM measured just before they run."""
    profile = get_profile(cfg.hardware)
    cases = []
    if cfg.real_capacity:
        name, hf = load_config(cfg.real_capacity)
        spec = ModelSpec.from_config(hf, name=name)
        w = Workload("decode", cfg.rc_batch, cfg.rc_prompt_len, cfg.rc_gen_len, cfg.dtype, cfg.kv_buckets)
        free = profile.hbm_capacity - CONTEXT_BYTES if free_hbm is None else free_hbm
        b = min(real_capacity_budget(spec, w, free, cfg.rc_margin), profile.hbm_capacity)
        for system in cfg.rc_systems:
            c = _case(name, hf, spec, w, system, "real-capacity", None, b, profile, cfg.fuse_projections,
                      cfg.kv_ahead)
            if not c.required_host_bytes:
                c = dataclasses.replace(c, note="fits in HBM: not a real-capacity case (raise --rc-batch "
                                                "or --rc-prompt-len)")
            cases.append(c)
    return cases


def estimate_s(case: Case, repeats: int) -> float:
    """A rough wall time for one case on the GPU (build, warm-up and timed generations)."""
    if case.skip or case.same_as:
        return 0.0
    ops = list_operators(case.spec, case.workload)
    total = sum(op.bytes for op in ops)
    host = case.required_host_bytes if case.placement is None else case.placement.host_bytes
    tpot = case.placement.step_time_s if case.placement is not None else case.bound_s
    if case.system == "accelerate":  # eager HF, pageable copies of whole layers
        tpot = case.bound_s + host / 12e9 + 0.012
        repeats = 1
    w = case.workload
    prefill = 2 * (total / 2) * w.batch * w.prompt_len / 500e12 + 2 * tpot
    build = 3.0 + host / 1.5e9 + total / 30e9
    warm = 0.0 if case.kind == "real-capacity" else prefill + 2 * tpot
    runs = 1 if case.kind == "real-capacity" else repeats
    return build + warm + runs * (prefill + w.gen_len * tpot)


def _note(c: Case) -> str:
    if c.skip:
        return "SKIP: " + c.skip
    return f"same build as {c.same_as} (nothing on the host): its row is reused" if c.same_as else c.note


def describe(cases: list[Case], cfg: E2EConfig) -> str:
    """The dry-run table: one line per case."""
    hdr = (f"{'model':<12}{'B':>5}{'x':>7}  {'system':<16}{'host':>11}{'HBM':>11}{'predicted':>11}"
           f"{'bound':>11}{'est.':>8}  note")
    lines = [f"dak bench e2e: {len(cases)} cases on {cfg.hardware}, prompt {cfg.prompt_len}, "
             f"gen {cfg.gen_len}, {cfg.dtype}, repeats {cfg.repeats}, tune {cfg.tune}, kv buckets {cfg.kv_buckets}, "
             f"kv ahead {cfg.kv_ahead}, fused projections {cfg.fuse_projections}"
             + (", fp32 reference" if cfg.fp32_reference else ""), hdr, "-" * len(hdr)]
    total = 0.0
    for c in cases:
        est = estimate_s(c, cfg.repeats)
        total += est
        pl = c.placement
        host = format_bytes(pl.host_bytes) if pl else f">={format_bytes(c.required_host_bytes)}"
        x = "real" if c.x_req is None else f"{100 * c.x_req:g}%"
        pred = format_time(pl.predicted_s) if pl and pl.feasible else "-"
        lines.append(f"{c.model:<12}{c.workload.batch:>5}{x:>7}  {c.system:<16}{host:>11}"
                     f"{format_bytes(pl.hbm_bytes) if pl else '-':>11}{pred:>11}{format_time(c.bound_s):>11}"
                     f"{est:>7.0f}s  {_note(c)}")
    lines.append(f"rough total: {total / 60:.1f} min of GPU time (builds, warm-ups, {cfg.repeats} timed runs each)")
    return "\n".join(lines)
