"""Streamed placements: host rows that cross the link on the copy-ahead chain, off the critical path.

The roofline prices each split operator alone, T_i = max(T_comp, (1-x)D/B_g, xD/B_h), so the
greedy spreads the host share over every operator at x* = B_h/(B_h+B_g) (~1.5% on a PCIe H200)
and reads it in place. Such a host part is read only while its own kernel runs: the link idles
through attention, norms and every other kernel of the step. Operators whose host share is
above `dak.shares.ce_min_share()` instead go through the copy engine, and the copy-ahead chain
(`dak.kernels.copy_ahead`) copies operator i+1's rows while operator i runs, so their link time
overlaps the whole step. For those operators a per-operator max is the wrong model; the step is

    T = (A^p + L^p)^(1/p)   (a max with a rounded corner, p = CONTENTION_NORM)
    A = sum of local times (copy-engine linears: max(T_comp, (1-x)D/B_g), or (1-x) x its measured
        all-HBM time where a calibrated curve has one; the rest: op_time)
        + the step's overheads (small kernels per layer, per-split-operator costs, unfused groups)
        + the step's first copy (the chain starts when its first operator is called, which
          then waits for its rows: nothing hides that copy; a wrapped chain (DAK_COPY_WRAP) refills
          it after its last copy, so A keeps only what the operators after the chain's last one
          do not hide, and L's extra term goes)
    L = link time of every host byte read per step (copy-engine rows at host_bandwidth_ce,
        in-place rows at the split host bandwidth, host KV) + copy_op_overhead_s per copy
        (the engine's start-up) + the first copy again (the link idles before it starts)

Every dak placement (greedy, consolidated, uniform, streamed) is predicted this way; without
copy-engine parts L is the in-place parts' own link time, already inside A, and adds little.

The streamed placement's search (which host shares such a plan holds) is dak.planner.spread.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..copy_shares import copy_slot_count, copy_wrap_enabled, copy_wrap_mode, many_decode_tokens
from ..shares import ONE_GEMV_LINK_SHARE, ONE_GEMV_SAVED_SHARE, ce_min_share, env_flag, gemv_enabled, one_gemv_mode
from .cost import GEMV_MAX_TOKENS, hbm_time, op_time, runs_gemv  # noqa: F401 -- GEMV_MAX_TOKENS re-exported
from .curves import curve_for
from .overhead import copied_ahead, fusion_overhead, split_overhead
from .slots import slot_stall

# The step's two sides combine as a p-norm rather than a hard max. Fitted with the profile's
# copy_op_overhead_s on the 35 dak runs of benchmarks/results/e2e-{streamed,opt-30b-streamed,
# fused}-s7-h200.json (H200, bs 8): p = 6 predicts 34 within 10% (worst 10.8%); a hard max 33
# (worst 17%: OPT-30B at 2%, in-place reads and copies sharing the link about equally). With
# the first copy on the compute side, the 24 dak rows of the later headline calls measured with
# the plans this planner makes (e2e-headline-s7, e2e-opt-30b-headline-s7, e2e-opt-headline-b-s7)
# are all within 10% (0.90-1.05; benchmarks/fit_chain_model.py).
CONTENTION_NORM = 6


@dataclass(frozen=True)
class ChainTime:
    """A decode step under the copy-ahead chain: local times per op, copy-engine flags, link time."""
    times: tuple[float, ...]      # per op: local time (copy-engine linears without their link part)
    copy_engine: tuple[bool, ...]
    link_s: float                 # L in the module doc
    first_s: float = 0.0          # the step's first copy, which the compute side waits for
    one_gemv: bool = False        # copy-engine linears run as one GEMV once staged (see `chained`)
    wrapped: bool = False         # the chain wraps around the step (see `wrapped`)
    copies: tuple[float, ...] = ()  # per op: its copy-ahead copy's link time with start-up (copy-engine linears)


def uses_copy_engine(op, host: int, many: bool = False) -> bool:
    """Whether the runtime's untuned config moves this linear's host rows by copy engine
    (dak.kernels.config.heuristic_config: host rows above ce_min_share() of the rows, or any
    host rows when `many` tokens, beyond MAX_DECODE_TOKENS, go through cuBLAS)."""
    return (bool(host) and op.bytes > 0 and not op.kind.startswith("embed") and op.kind != "attention"
            and (many or host > ce_min_share() * op.bytes))


def many_tokens(workload) -> bool:
    """More tokens per step than one decode program covers (batch decode beyond MAX_DECODE_TOKENS)."""
    return many_decode_tokens(decode_tokens(workload))


def decode_tokens(workload) -> int | None:
    """Tokens a decode step of `workload` runs (its batch), None for prefill (dak.shares' convention)."""
    return workload.batch if workload.phase == "decode" else None


def exact_search(workload) -> bool:
    """$DAK_CONSOLIDATE_EXACT: the consolidated plan places every kind set exactly and judges it by
    the chain model with its slot stalls priced (dak.planner.consolidate, slot_stall). Unset: on for
    decode steps of more than MAX_DECODE_TOKENS tokens (forty-third session, H100: Llama-2-7B at
    batch 512 1.06x faster at 5% and 1.09x at 20%, three runs each), off below (batch 8, H100,
    H139-H145: the 15 rows it re-plans 1.005x on geometric mean, OPT-6.7B at 10% 0.968x)."""
    return env_flag("DAK_CONSOLIDATE_EXACT", many_tokens(workload))


def chain_time(ops, host_bytes, profile, many: bool = False, kv_ahead: bool = False) -> ChainTime:
    """Local times, copy-engine flags and link time L of the placement `host_bytes` (decode;
    `many`: see many_tokens). `kv_ahead`: the engine copies each layer's host K/V into an HBM
    slot during the layer before (dak.runtime.kv_ahead), so an attention with a calibrated curve
    (timed reading its host K/V itself) is priced at its measured all-HBM time, its host K/V on
    the link side at the copy-engine rate with one copy start-up (and, as for the roofline's
    attention, the profile's attention_host_excess on the compute side: split_overhead); without
    a curve the roofline stays as it was fitted."""
    times, flags, copies, link, first = [], [], [], 0.0, None
    for op, h in zip(ops, host_bytes):
        x = h / op.bytes if op.bytes else 0.0
        ce = uses_copy_engine(op, h, many)
        flags.append(ce)
        chained_copy = 0.0
        if copied_ahead(op, h, profile, kv_ahead):
            times.append(op_time(op, 0.0, profile))
            link += x * op.copied / profile.host_bandwidth_ce + profile.copy_op_overhead_s  # up to the bucket
        elif ce:
            times.append(ce_local_time(op, x, profile))
            copy = x * op.traffic / profile.host_bandwidth_ce
            chained_copy = copy + profile.copy_op_overhead_s
            link += chained_copy
            first = copy if first is None else first
        else:
            times.append(op_time(op, x, profile))
            if h and not op.kind.startswith("embed"):
                link += x * op.traffic / profile.split_host_bandwidth
        copies.append(chained_copy)
    ct = ChainTime(tuple(times), tuple(flags), link + (first or 0.0), first or 0.0, copies=tuple(copies))
    return wrapped(ct) if copy_wrap_enabled() else ct


def wrapped(ct: ChainTime) -> ChainTime:
    """`ct` with its chain wrapped around the step (dak.kernels.copy_ahead): the first operator's
    rows are refilled after the chain's last copy (Step.close) instead of at the step's start, so
    the link no longer idles before it (L drops it), and the compute side waits only for what the
    operators after the chain's last one do not hide (a graphed step ends when its copies land):
    a chain that ends at the LM head hides nothing."""
    last = max((i for i, ce in enumerate(ct.copy_engine) if ce), default=None)
    tail = sum(ct.times[last + 1:]) if last is not None else 0.0
    return replace(ct, link_s=ct.link_s - ct.first_s, first_s=max(0.0, ct.first_s - tail), wrapped=last is not None)


def ce_local_time(op, x: float, profile) -> float:
    """A copy-engine linear's local time: its HBM rows, pro rata of its all-HBM time (a calibrated
    curve's, else the roofline's at hbm_bandwidth: cuBLAS multiplies them, not the GEMV)."""
    return max(op.flops / profile.flops, (1.0 - x) * hbm_time(op, profile, gemv=False))


STAGED_PARTS = 3  # two copy-ahead slots, and prefill stages the largest host part whole
                  # (dak.runtime.offload.staging_bytes_for with the default knobs)


def decode_slots(workload) -> int:
    """Copy-ahead slots of `workload`'s decode chain (more for many tokens: dak.copy_shares.copy_slot_count)."""
    return copy_slot_count(decode_tokens(workload))


def staged_parts(workload) -> int:
    """Host parts the copy engine stages at once: the decode chain's slots and prefill's largest part."""
    return decode_slots(workload) + 1


def chained(ops, host_bytes, workload, profile, fused: bool, kv_ahead: bool = False,
            base: float = 0.0) -> tuple[ChainTime, float]:
    """(chain_time, the compute side's time beyond the local times: split operators, unfused
    groups and the step's first copy). `base`: the step's small kernels, which count on the
    compute side when ct.one_gemv is decided: each copy-engine linear then runs its staged and
    HBM rows as one GEMV after its copies land (dak.kernels.staged_gemv), saving most of the
    copy_op_overhead_s its two launches and wait cost, where the link side is at most
    ONE_GEMV_LINK_SHARE of the compute side (where it is busier, the default path's HBM rows
    running during the copy win; $DAK_CE_ONE_GEMV=1/0 forces it on/off). With $DAK_COPY_WRAP=plan (the
    default) such a chain also wraps around the step, priced by `wrapped`."""
    many = many_tokens(workload)
    ct = chain_time(ops, host_bytes, profile, many, kv_ahead)
    extra = (split_overhead(ops, host_bytes, workload, profile, many, kv_ahead)
             + curve_copy_overhead(ops, host_bytes, profile, many)
             + fusion_overhead(ops, host_bytes, workload, profile, fused) + ct.first_s)
    saving = one_gemv_saving(ops, host_bytes, workload, profile)
    if saving:
        mode = one_gemv_mode()
        compute = sum(ct.times) + base + extra - saving
        if mode if mode is not None else ct.link_s <= ONE_GEMV_LINK_SHARE * compute:
            ct, extra = replace(ct, one_gemv=True), extra - saving
            if copy_wrap_mode() is None:  # $DAK_COPY_WRAP=plan: this chain wraps (copy_ahead.link_chain)
                w = wrapped(ct)
                ct, extra = w, extra - ct.first_s + w.first_s
    if not exact_search(workload):  # the exact search's model only (see slot_stall)
        return ct, extra
    compute = sum(ct.times) + base + extra - ct.first_s
    simulated = compute + slot_stall(ct, decode_slots(workload), compute)
    if simulated > combine(compute + ct.first_s, ct.link_s):  # the chain's slots, not the link's total, bind
        p = CONTENTION_NORM
        extra += (simulated ** p - ct.link_s ** p) ** (1.0 / p) - (compute + ct.first_s)
    return ct, extra


def one_gemv_saving(ops, host_bytes, workload, profile) -> float:
    """Compute-side time the copy-engine linears of a decode step stop paying as one GEMV each:
    ONE_GEMV_SAVED_SHARE of the copy_op_overhead_s that split_overhead or curve_copy_overhead
    prices each of them (see dak.shares), and where the profile states a gemv_bandwidth, what
    reading all its rows at that rate saves against ce_local_time. 0 where the GEMV serves no
    such step: prefill, more than GEMV_MAX_TOKENS tokens, or $DAK_HBM_GEMV=0."""
    if workload.phase != "decode" or workload.batch > GEMV_MAX_TOKENS or not gemv_enabled():
        return 0.0
    total = 0.0
    for op, h in zip(ops, host_bytes):
        if uses_copy_engine(op, h):
            total += ONE_GEMV_SAVED_SHARE * profile.copy_op_overhead_s
            if curve_for(op, profile) is None and runs_gemv(op, profile):
                total += max(0.0, ce_local_time(op, h / op.bytes, profile) - hbm_time(op, profile))
    return total


def curve_copy_overhead(ops, host_bytes, profile, many: bool = False) -> float:
    """copy_op_overhead_s for each copy-engine linear that has a calibrated curve. split_overhead
    leaves such operators out (their curve, timed alone, holds their excess), but chain_time does
    not price a copy-engine linear by its curve: its local time is (1 - x) x its all-HBM time, so
    the split kernel's start-up and its wait on the copy are priced here as for an operator
    without a curve. Before the twenty-fourth session they were left out: on Llama-2-7B's H17
    profile at 2% a streamed o_proj chain (32 copies) was predicted 4.18 ms and measured 4.37,
    and consolidated took it over an in-place plan measured 4.01 (H18)."""
    return sum(profile.copy_op_overhead_s for op, h in zip(ops, host_bytes)
               if uses_copy_engine(op, h, many) and curve_for(op, profile) is not None)


def combine(compute_s: float, link_s: float) -> float:
    """The step from its compute side A and link side L: (A^p + L^p)^(1/p), p = CONTENTION_NORM,
    a max that rounds its corner: when the two are close, copies and in-place reads queue behind
    each other and neither side runs flat out."""
    if link_s <= 0:
        return compute_s
    p = CONTENTION_NORM
    return (compute_s ** p + link_s ** p) ** (1.0 / p)


def chain_predict(ops, host_bytes, workload, profile, fused: bool, base: float, kv_ahead: bool = False) -> float:
    """Predicted decode step combine(local times + base + overheads, link time); `base`: the
    step's small kernels (dak.planner.overhead.step_overhead); `kv_ahead`: see chain_time."""
    ct, extra = chained(ops, host_bytes, workload, profile, fused, kv_ahead, base)
    return combine(sum(ct.times) + base + extra, ct.link_s)
