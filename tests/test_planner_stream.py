"""Streamed placements and the copy-ahead chain model (dak.planner.stream), on the CPU."""

import dataclasses
import random

import pytest

from dak.baselines.e2e import budget_for
from dak.hardware import get_profile
from dak.models import Workload, list_operators, load_spec
from dak.planner import plan
from dak.planner.cost import op_time
from dak.planner.overhead import fusion_overhead, split_overhead, step_overhead
from dak.planner.stream import (CONTENTION_NORM, STAGED_PARTS, chain_predict, chain_time, combine, staged_parts,
                                uses_copy_engine)
from dak.shares import ce_min_share

H200 = get_profile("h200-pcie-cublas")  # one HBM rate for every operator, as these tests assume
W = Workload("decode", 8, 32, 32)


def test_combine_is_a_rounded_max():
    for a, l in [(1.0, 0.0), (2.0, 1.0), (1.0, 1.0), (0.3, 5.0)]:
        got = combine(a, l)
        assert max(a, l) <= got <= max(a, l) * 2 ** (1 / CONTENTION_NORM) + 1e-12
        assert got == pytest.approx((a ** CONTENTION_NORM + l ** CONTENTION_NORM) ** (1 / CONTENTION_NORM))
    assert combine(3.0, 0.0) == 3.0


def test_chain_time_by_hand():
    """Copy-engine linears: local time is their HBM part; their copies (with start-up) and the
    in-place parts' link time add to L, plus the step's first copy again."""
    spec = load_spec("llama-2-7b")
    ops = list_operators(spec, W)
    rng = random.Random(3)
    host = [0] * len(ops)
    for i, op in enumerate(ops):
        if op.kind in ("q_proj", "down_proj", "attention") and rng.random() < 0.5:
            host[i] = op.host_bytes_for(rng.randint(1, op.units))
    ct = chain_time(ops, host, H200)
    link, first = 0.0, None
    for i, (op, h) in enumerate(zip(ops, host)):
        x = h / op.bytes
        if op.kind != "attention" and h > ce_min_share() * op.bytes:
            assert ct.copy_engine[i]
            assert ct.times[i] == pytest.approx(max(op.flops / H200.flops, (1 - x) * op.traffic / H200.hbm_bandwidth))
            copy = x * op.traffic / H200.host_bandwidth_ce
            link += copy + H200.copy_op_overhead_s
            first = copy if first is None else first
        else:
            assert not ct.copy_engine[i] and ct.times[i] == pytest.approx(op_time(op, x, H200))
            link += x * op.traffic / H200.split_host_bandwidth if h else 0.0
    assert first is not None and ct.link_s == pytest.approx(link + first) and ct.first_s == pytest.approx(first)
    base = step_overhead(spec, W, H200)
    a = sum(ct.times) + base + split_overhead(ops, host, W, H200) + fusion_overhead(ops, host, W, H200, True) + first
    assert chain_predict(ops, host, W, H200, True, base) == pytest.approx(combine(a, ct.link_s))


def test_wrapped_chain_takes_the_first_copy_off_both_sides(monkeypatch):
    """$DAK_COPY_WRAP=1: the first copy is refilled after the chain's last one, so the link side
    drops it, and the compute side waits only for what the operators after the chain's last one
    (here the final norm and the LM head) do not hide; the prediction drops by about that."""
    spec = load_spec("opt-6.7b")
    ops = list_operators(spec, W)
    host = [op.host_bytes_for(op.units // 10) if op.kind in ("fc1", "fc2") else 0 for op in ops]
    monkeypatch.setenv("DAK_COPY_WRAP", "0")
    off = chain_time(ops, host, H200)
    base = step_overhead(spec, W, H200)
    p_off = chain_predict(ops, host, W, H200, True, base)
    monkeypatch.setenv("DAK_COPY_WRAP", "1")
    on = chain_time(ops, host, H200)
    last = max(i for i, h in enumerate(host) if h)
    tail = sum(off.times[last + 1:])
    assert 0 < tail < off.first_s and ops[-1].kind == "lm_head"  # the LM head hides part of fc1's copy
    assert on.first_s == pytest.approx(off.first_s - tail)
    assert on.link_s == pytest.approx(off.link_s - off.first_s) and on.times == off.times
    p_on = chain_predict(ops, host, W, H200, True, base)
    q = CONTENTION_NORM  # A drops by the tail, L by the whole copy: the norm drops by at most ||(tail, copy)||
    assert p_off - (tail ** q + off.first_s ** q) ** (1 / q) - 1e-9 <= p_on < p_off


def test_a_wrapped_chain_that_ends_at_the_lm_head_hides_nothing():
    """A chain whose last copy-engine operator is the LM head refills its first slot at the very
    end of the step, which then waits for it (Step.close): the compute side keeps the whole copy;
    a chain ending a layer earlier hides it behind the layers after it."""
    from dak.planner.stream import ChainTime, wrapped
    times, first = (1e-4, 2e-4, 3e-4, 4e-4), 5e-4
    end = wrapped(ChainTime(times, (False, True, False, True), 2e-3, first))
    assert end.first_s == first and end.link_s == pytest.approx(2e-3 - first)
    mid = wrapped(ChainTime(times, (True, True, False, False), 2e-3, first))
    assert mid.first_s == 0.0 and mid.link_s == pytest.approx(2e-3 - first)  # 0.7 ms after it hide 0.5
    part = wrapped(ChainTime(times, (False, True, True, False), 2e-3, first))
    assert part.first_s == pytest.approx(first - 4e-4)
    assert wrapped(ChainTime(times, (False,) * 4, 0.0, 0.0)) == ChainTime(times, (False,) * 4, 0.0, 0.0)


def test_fusion_overhead_counts_the_extra_launches():
    spec = load_spec("llama-2-7b")
    ops = list_operators(spec, W)
    prof = dataclasses.replace(H200, unfused_op_overhead_s=1.0)
    none = [0] * len(ops)
    assert fusion_overhead(ops, none, W, prof, True) == 0.0
    # q/k/v and gate/up per layer, and the SiLU * up epilogue of the fused gate/up GEMV
    assert fusion_overhead(ops, none, W, prof, False) == 32 * (2 + 1 + 1)
    one = list(none)
    one[next(i for i, op in enumerate(ops) if op.kind == "k_proj")] = 1
    assert fusion_overhead(ops, one, W, prof, True) == 2
    up = list(none)
    up[next(i for i, op in enumerate(ops) if op.kind == "up_proj")] = 1
    assert fusion_overhead(ops, up, W, prof, True) == 2  # gate/up apart, and silu_mul on its own
    assert fusion_overhead(ops, none, Workload("prefill", 8, 32, 0), prof, False) == 0.0


@pytest.mark.parametrize("switch, silu, opt_on, qscale", [
    (None, True, True, True), ("DAK_GEMV_SILU=0", False, True, True), ("DAK_HBM_GEMV=0", False, False, False),
    ("DAK_FUSED_OPT=0", True, False, False), ("DAK_OPT_QSCALE=0", True, True, False)])
def test_fusion_overhead_counts_lost_gemv_epilogues(monkeypatch, switch, silu, opt_on, qscale):
    """A split operator loses its all-HBM GEMV epilogue: SiLU * up (Llama), ReLU after fc1, the
    residual add after fc2 and q's scaling after q/k/v (OPT's fused layer), one launch each, while the
    runtime uses them; a split Llama q/k/v loses only its fusion."""
    if switch:
        monkeypatch.setenv(*switch.split("="))
    prof = dataclasses.replace(H200, unfused_op_overhead_s=1.0)
    llama = list_operators(load_spec("llama-2-7b"), W)
    host = [0] * len(llama)
    host[next(i for i, op in enumerate(llama) if op.kind == "gate_proj")] = 1
    assert fusion_overhead(llama, host, W, prof, True) == 1 + silu
    opt = list_operators(load_spec("opt-6.7b"), W)
    host = [0] * len(opt)
    for kind in ("fc1", "fc2"):
        host[next(i for i, op in enumerate(opt) if op.kind == kind and op.layer == 3)] = 1
    assert fusion_overhead(opt, host, W, prof, True) == 2 * opt_on
    assert fusion_overhead(opt, [0] * len(opt), W, prof, True) == 0.0
    for model, epilogue in (("opt-6.7b", qscale), ("llama-2-7b", False)):
        ops = list_operators(load_spec(model), W)
        host = [0] * len(ops)
        host[next(i for i, op in enumerate(ops) if op.kind == "v_proj" and op.layer == 5)] = 1
        assert fusion_overhead(ops, host, W, prof, True) == 2 + epilogue  # q/k/v apart (2 launches more)
    assert fusion_overhead(opt, [0] * len(opt), W, prof, False) == 32 * (2 + qscale)


@pytest.mark.parametrize("model", ["llama-2-7b", "opt-6.7b", "llama-3-8b", "opt-30b"])
@pytest.mark.parametrize("x", [0.01, 0.02, 0.05, 0.2])
def test_streamed_holds_the_host_share_and_its_staging_on_one_kind_set(model, x):
    spec = load_spec(model)
    ops = list_operators(spec, W)
    b = budget_for(spec, W, x, H200)
    s = plan(spec, W, H200, b, "streamed")
    assert s.feasible and s.host_bytes >= s.required_host_bytes > 0
    assert s.hbm_bytes <= b and s.hbm_bytes == s.total_bytes - s.host_bytes + s.staging_bytes
    lin = [(op, p) for op, p in zip(ops, s.ops) if p.host_bytes and not op.kind.startswith("embed")]
    for op, p in lin:
        assert op.kind != "attention" and uses_copy_engine(op, p.host_bytes), p.name
    if lin:  # even shares within a kind set: every op of a chosen kind holds host rows, within a unit
        kinds = {op.kind for op, _ in lin}
        assert all(p.host_bytes for op, p in zip(ops, s.ops) if op.kind in kinds)
        assert s.staging_bytes == STAGED_PARTS * max(p.host_bytes for _, p in lin)
        shares = [p.ratio for _, p in lin]
        units = max(op.unit_bytes / op.bytes for op, _ in lin)
        assert max(shares) - min(shares) <= 2 * units + 1e-12


def test_a_many_token_streamed_plan_reserves_four_slots_and_prefills_part(monkeypatch):
    """Above 64 tokens the decode chain copies into four slots (dak.shares.copy_slot_count), so a
    streamed plan at batch 512 keeps five of its largest host part in HBM, not three."""
    monkeypatch.delenv("DAK_COPY_SLOTS", raising=False)
    wide = Workload("decode", 512, 32, 32)
    assert (staged_parts(W), staged_parts(wide), staged_parts(Workload("prefill", 512, 32, 0))) == (3, 5, 3)
    spec = load_spec("llama-2-7b")
    b = budget_for(spec, wide, 0.2, H200)
    s = plan(spec, wide, H200, b, "streamed")
    assert s.feasible and s.hbm_bytes <= b and s.host_bytes >= s.required_host_bytes > 0
    parts = [p.host_bytes for op, p in zip(list_operators(spec, wide), s.ops)
             if p.host_bytes and not op.kind.startswith("embed") and op.kind != "attention"]
    assert parts and s.staging_bytes == 5 * max(parts)
    monkeypatch.setenv("DAK_COPY_SLOTS", "2")
    assert staged_parts(wide) == 3


@pytest.mark.parametrize("model", ["llama-2-7b", "opt-6.7b", "llama-3-8b"])
@pytest.mark.parametrize("x", [0.01, 0.02, 0.05, 0.1, 0.4])
def test_consolidated_is_never_predicted_slower_than_greedy_or_streamed(model, x):
    spec = load_spec(model)
    b = budget_for(spec, W, x, H200)
    c, g, s = (plan(spec, W, H200, b, p) for p in ("consolidated", "greedy", "streamed"))
    assert c.feasible and c.host_bytes >= c.required_host_bytes and c.hbm_bytes <= b
    assert c.predicted_s <= min(g.predicted_s, s.predicted_s) * (1 + 1e-9)


def test_streamed_wins_where_in_place_parts_would_leave_the_link_idle():
    """OPT-6.7B at 2% (measured on the H200: streamed 6.11 ms, consolidated in place 7.27 ms,
    e2e-streamed-s7-h200.json): thin in-place shares everywhere lose to one kind streamed."""
    spec = load_spec("opt-6.7b")
    b = budget_for(spec, W, 0.02, H200)
    c, g = plan(spec, W, H200, b, "consolidated"), plan(spec, W, H200, b, "greedy")
    kinds = {p.kind for p in c.ops if p.host_bytes and not p.kind.startswith("embed")}
    assert len(kinds) == 1 and c.link_s > 0 and c.predicted_s < 0.9 * g.predicted_s


def test_streamed_infeasible_and_prefill():
    spec = load_spec("llama-2-7b")
    tiny_budget = budget_for(spec, W, 0.99, H200)  # no kind set can hold 99% plus its staging
    s = plan(spec, W, H200, tiny_budget, "streamed")
    assert not s.feasible and "streamed infeasible" in s.note
    fits = plan(spec, W, H200, None, "streamed")
    assert fits.feasible and fits.host_bytes == 0 and fits.link_s == 0
    pre = Workload("prefill", 8, 512, 0)
    b = budget_for(spec, pre, 0.1, H200)
    c, g = plan(spec, pre, H200, b, "consolidated"), plan(spec, pre, H200, b, "greedy")
    assert c.link_s == g.link_s == 0.0 and c.overhead_s == 0.0


def test_kv_ahead_prices_a_calibrated_attention_at_its_all_hbm_time(monkeypatch):
    """A calibrated attention curve times the kernel reading its host K/V itself; with KV
    copy-ahead the engine copies them into an HBM slot a layer early, so the chain model takes the
    curve's x = 0 point locally and puts the host K/V on the link side at the copy-engine rate,
    with one copy start-up. Without a curve (the roofline and its fitted excess), and with
    kv_ahead off, nothing changes."""
    from dak.measured import Curve
    from dak.planner.curves import op_key
    ops = list_operators(load_spec("llama-2-7b"), W)
    i = next(j for j, op in enumerate(ops) if op.kind == "attention")
    op = ops[i]
    host = [0] * len(ops)
    host[i] = op.host_bytes_for(max(1, op.units * 3 // 4))
    x = host[i] / op.bytes
    t0 = 2 * op.traffic / H200.hbm_bandwidth
    prof = dataclasses.replace(H200, curves=(Curve(op_key(op), ((0.0, t0), (1.0, 40 * t0))),))
    on, off = chain_time(ops, host, prof, kv_ahead=True), chain_time(ops, host, prof)
    assert off.times[i] == pytest.approx(op_time(op, x, prof)) and off.times[i] > 20 * t0
    assert on.times[i] == pytest.approx(t0) and not on.copy_engine[i]
    # the copy moves each staged request's rows up to its step's bucket cap (16/32/48/64 at
    # L = G = 32): 16 steps copy 48 rows, 15 copy 64, against 48.5 attended on average
    kv_link = x * op.bytes * (16 * 48 + 15 * 64) / 31 / 64 / H200.host_bandwidth_ce + H200.copy_op_overhead_s
    assert on.link_s == pytest.approx(off.link_s - x * op.traffic / H200.split_host_bandwidth + kv_link)
    monkeypatch.setenv("DAK_ROOFLINE_KV_AHEAD", "0")  # no curve, the roofline's pricing: as fitted
    assert chain_time(ops, host, H200, kv_ahead=True) == chain_time(ops, host, H200)
    excess = H200.attention_host_excess * x * op.traffic / H200.split_host_bandwidth
    assert excess > 0 and split_overhead(ops, host, W, prof) == 0.0  # the curve carries its own excess
    assert split_overhead(ops, host, W, prof, kv_ahead=True) == pytest.approx(excess)  # copied ahead: it does not


def test_plan_prices_kv_ahead_only_when_asked():
    """plan(kv_ahead=...) reaches the chain model: on a calibrated profile whose attention curve
    is steep, host K/V is cheap with copy-ahead, so the greedy plan keeps more of it on the host."""
    from dak.measured import Curve
    from dak.planner.curves import op_key
    spec = load_spec("llama-2-7b")
    ops = list_operators(spec, W)
    att = next(op for op in ops if op.kind == "attention")
    t0 = 2 * att.traffic / H200.hbm_bandwidth
    prof = dataclasses.replace(H200, curves=(Curve(op_key(att), ((0.0, t0), (0.5, 30 * t0), (1.0, 60 * t0))),))
    budget = budget_for(spec, W, 0.05, H200)
    a = plan(spec, W, prof, budget, "greedy", kv_ahead=True)
    b = plan(spec, W, prof, budget, "greedy", kv_ahead=False)
    assert a.feasible and b.feasible and a.cost_model == b.cost_model == "measured"
    kv = lambda pl: sum(o.host_bytes for o, op in zip(pl.ops, ops) if op.kind == "attention")
    assert kv(a) > kv(b)  # priced as copied ahead, host K/V no longer looks 30-60x the HBM time


def test_roofline_kv_ahead_flag_moves_uncalibrated_host_kv_to_the_link_side(monkeypatch):
    """$DAK_ROOFLINE_KV_AHEAD (on by default since the thirty-fourth session): an attention without
    a curve is priced as copied a layer ahead too: its local time is the all-HBM roofline, its host
    K/V cross the link at the copy-engine rate with one start-up, and split_overhead still adds the
    profile's excess. Off (=0), the roofline reads them in place as fitted."""
    ops = list_operators(load_spec("llama-2-7b"), W)
    i = next(j for j, op in enumerate(ops) if op.kind == "attention")
    op = ops[i]
    host = [0] * len(ops)
    host[i] = op.host_bytes_for(max(1, op.units // 2))
    x = host[i] / op.bytes
    monkeypatch.setenv("DAK_ROOFLINE_KV_AHEAD", "0")
    off = chain_time(ops, host, H200, kv_ahead=True)
    assert off.times[i] == pytest.approx(op_time(op, x, H200)) and off.times[i] > op_time(op, 0.0, H200)
    monkeypatch.delenv("DAK_ROOFLINE_KV_AHEAD")  # the default
    on = chain_time(ops, host, H200, kv_ahead=True)
    monkeypatch.setenv("DAK_ROOFLINE_KV_AHEAD", "1")
    assert chain_time(ops, host, H200, kv_ahead=True) == on
    assert on.times[i] == pytest.approx(op_time(op, 0.0, H200))
    # the copy moves each staged request's rows up to its step's bucket cap (16/32/48/64 at
    # L = G = 32): 16 steps copy 48 rows, 15 copy 64, against 48.5 attended on average
    kv_link = x * op.bytes * (16 * 48 + 15 * 64) / 31 / 64 / H200.host_bandwidth_ce + H200.copy_op_overhead_s
    assert on.link_s == pytest.approx(off.link_s - x * op.traffic / H200.split_host_bandwidth + kv_link)
    excess = H200.attention_host_excess * x * op.traffic / H200.split_host_bandwidth
    assert split_overhead(ops, host, W, H200, kv_ahead=True) == pytest.approx(excess)
    assert chain_time(ops, host, H200, kv_ahead=False).times[i] == off.times[i]  # no copy-ahead: in place
    from dak.shares import ATTENTION_CE_MIN_BYTES
    assert host[i] >= ATTENTION_CE_MIN_BYTES
    thin = [0] * len(ops)  # one request: 1 MiB, under the size the untuned config copies (read in place)
    thin[i] = op.host_bytes_for(1)
    assert thin[i] < ATTENTION_CE_MIN_BYTES
    assert chain_time(ops, thin, H200, kv_ahead=True).times[i] == pytest.approx(op_time(op, thin[i] / op.bytes, H200))



@pytest.mark.parametrize("L,G,buckets,rows", [
    (32, 32, 4, (16 * 48 + 15 * 64) / 31), (32, 32, 1, 64), (5, 1, 4, 6), (100, 7, 2, 107),
    (10, 20, 3, (10 * 20 + 9 * 30) / 19),
])
def test_copied_rows_follow_the_engines_buckets(L, G, buckets, rows):
    """Decode step t (1..G-1) holds L + t keys and replays the graph of the smallest bucket cap
    >= that, whose K/V copy moves that many positions (dak.runtime.engine)."""
    from dak.models.ops import copied_rows, kv_bucket_caps
    from dak.runtime.engine import kv_bucket_caps as engine_caps
    assert engine_caps is kv_bucket_caps
    w = Workload("decode", 3, L, G, kv_buckets=buckets)
    assert copied_rows(w) == pytest.approx(rows)
    op = next(op for op in list_operators(load_spec("llama-2-7b"), w) if op.kind == "attention")
    assert op.copied == pytest.approx(op.bytes * rows / (L + G)) and op.copied >= op.traffic
    pre = next(o for o in list_operators(load_spec("llama-2-7b"), Workload("prefill", 3, L, G))
               if o.kind == "attention")
    assert pre.copied == pre.traffic == pre.bytes * L / (L + G)  # prefill: the prompt's K/V, no buckets


def test_a_calibrated_copy_engine_linear_still_pays_its_copy_start_up():
    """chain_time prices a copy-engine linear by (1 - x) x its all-HBM time, not by its curve, so
    the split kernel's start-up and its wait on the copy (copy_op_overhead_s, which split_overhead
    adds for an operator without a curve) must be added for a calibrated one too."""
    from dak.measured import Curve
    from dak.planner.curves import op_key
    from dak.planner.stream import chained, curve_copy_overhead
    ops = list_operators(load_spec("llama-2-7b"), W)
    i = next(j for j, op in enumerate(ops) if op.kind == "o_proj")
    op = ops[i]
    host = [0] * len(ops)
    host[i] = op.host_bytes_for(max(1, op.units // 16))
    assert uses_copy_engine(op, host[i])
    t0 = op.traffic / H200.hbm_bandwidth
    prof = dataclasses.replace(H200, curves=(Curve(op_key(op), ((0.0, t0), (1.0, 30 * t0))),))
    assert split_overhead(ops, host, W, prof) == 0.0  # the curve is taken to hold the excess ...
    assert curve_copy_overhead(ops, host, prof) == pytest.approx(prof.copy_op_overhead_s)  # ... but prices none
    assert curve_copy_overhead(ops, host, H200) == 0.0  # no curve: split_overhead has it
    _, with_curve = chained(ops, host, W, prof, fused=True)
    _, without = chained(ops, host, W, H200, fused=True)
    assert with_curve == pytest.approx(without)  # the same compute-side extra either way
    thin = [0] * len(ops)
    thin[i] = op.host_bytes_for(1)  # read in place: its curve prices it, nothing added
    assert not uses_copy_engine(op, thin[i]) and curve_copy_overhead(ops, thin, prof) == 0.0


def test_slot_stall_sees_one_large_copy_behind_little_compute():
    """Two slots: a 10 ms copy whose slot frees 2 ms before its operator would start leaves an 8 ms wait;
    the same bytes as small copies each hidden by the operator before them leave only the first
    copy's wait. Each ChainTime carries its copies' link times (ct.copies)."""
    from dak.planner.slots import slot_stall
    from dak.planner.stream import ChainTime
    ms = 1e-3
    lumpy = ChainTime((1 * ms, 1 * ms, 1 * ms, 1 * ms), (True, True, False, True), 0.0,
                      copies=(1 * ms, 1 * ms, 0.0, 10 * ms))
    stall = slot_stall(lumpy, 2, 4 * ms)
    # op 0 waits 1 ms for its copy (runs 1-2 ms), op 1's copy lands at 2 ms (runs 2-3), op 2 runs
    # 3-4; op 3's copy starts when op 0 has freed its slot and the link is free (2 ms) and lands at
    # 12 ms: the step ends at 13 ms against 4 ms of compute
    assert stall == pytest.approx(9 * ms)
    even = ChainTime((5 * ms,) * 4, (True,) * 4, 0.0, copies=(1 * ms,) * 4)
    assert slot_stall(even, 2, 20 * ms) == pytest.approx(1 * ms)  # the first copy
    assert slot_stall(ChainTime((ms,) * 4, (False,) * 4, 0.0, copies=(0.0,) * 4), 2, 4 * ms) == 0.0


def test_exact_switch_keeps_a_large_lm_head_copy_off_the_end_of_the_chain(monkeypatch):
    """Forty-third session, H100: the exact search put 37% of Llama-3-8B's LM head on the host at
    10% (h100-sxm, batch 8), predicted 11.0 ms and measured 15.1: its one 375 MiB copy can start
    only a layer before the head. With the slot stall priced the plan moves off it, and every
    dak plan's prediction stays at or above the step the slots allow."""
    from dak.bench.e2e_cases import E2EConfig, plan_cases
    monkeypatch.setenv("DAK_CONSOLIDATE_EXACT", "1")
    cfg = E2EConfig(models=("llama-3-8b",), batches=(8,), ratios=(0.10,), systems=("dak-consolidated",),
                    hardware="h100-sxm")
    (case,) = plan_cases(cfg)
    head = [o for o in case.placement.ops if o.kind == "lm_head"][0]
    assert head.host_bytes < 0.2 * head.bytes
    assert case.placement.predicted_s < 11.6e-3  # still faster than the default plan's 11.59 ms
