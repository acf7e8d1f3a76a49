import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dak.hardware import get_profile
from dak.models import Workload, list_operators, load_spec, minimum_hbm_set
from dak.planner import plan, plan_all, solve_continuous
from dak.planner.cost import op_time
from dak.planner.overhead import fusion_overhead
from dak.planner.stream import chain_time, uses_copy_engine

H200 = get_profile("h200-pcie-cublas")  # one HBM rate for every operator, as these tests assume
GIB = 2**30


@st.composite
def cases(draw):
    name = draw(st.sampled_from(["tiny-llama", "tiny-opt", "tiny-qwen2", "tiny-mistral", "llama-2-7b"]))
    phase = draw(st.sampled_from(["decode", "prefill"]))
    w = Workload(phase, draw(st.integers(1, 9)), draw(st.integers(1, 200)),
                 draw(st.integers(1 if phase == "decode" else 0, 50)), draw(st.sampled_from(["bf16", "fp32"])))
    tile = draw(st.sampled_from([1, 16, 64, 100]))
    reserve = draw(st.sampled_from([0, 4096, 2**20]))
    spec = load_spec(name)
    need = sum(o.bytes for o in list_operators(spec, w, tile)) + minimum_hbm_set(spec, w, reserve).total
    lo = minimum_hbm_set(spec, w, reserve).total
    budget = lo + int(draw(st.floats(0, 1.05)) * (need - lo))
    return spec, w, tile, reserve, max(budget, lo), draw(st.sampled_from(["greedy", "uniform"]))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_rounded_placement_properties(case):
    spec, w, tile, reserve, budget, policy = case
    pl = plan(spec, w, H200, budget, policy, tile_rows=tile, reserve=reserve)
    ops = {o.name: o for o in list_operators(spec, w, tile)}
    d = w.dtype_bytes
    need = sum(o.bytes for o in ops.values()) + pl.min_hbm_bytes
    R = max(0, need - budget)
    assert pl.required_host_bytes == R and pl.total_bytes == need
    assert pl.hbm_bytes <= budget
    assert pl.host_bytes >= R
    assert pl.hbm_bytes + pl.host_bytes == need
    for p in pl.ops:
        assert 0.0 <= p.ratio <= 1.0
        assert p.hbm_bytes + p.host_bytes == p.bytes == ops[p.name].bytes
        if p.kind == "attention":
            assert p.host_rows is None and 0 <= p.host_requests <= w.batch
            per_request = 2 * spec.num_kv_heads * spec.head_dim * d * (w.prompt_len + w.gen_len)
            assert p.host_bytes == p.host_requests * per_request
        else:
            rows = p.shape[0]
            unit = 1 if p.kind.startswith("embed") else tile
            assert p.host_rows == rows or p.host_rows % unit == 0
            assert p.host_bytes * rows == p.host_rows * p.bytes  # whole rows, exact bytes
    if R == 0:
        assert pl.fits and pl.host_bytes == 0


def test_fits_time_is_hbm_roofline():
    """Llama-2-7B decode fits: TPOT = (weights + gathered rows + average KV) / B_g, all memory-bound."""
    spec, w = load_spec("llama-2-7b"), Workload("decode", 8, 512, 128)
    pl = plan(spec, w, H200)
    assert pl.fits and pl.host_bytes == 0 and "no offload" in pl.note
    weights = 2 * (6_738_415_616 - 32000 * 4096 - 65 * 4096)   # all params but embeddings and norms
    kv = 32 * 2 * 4096 * 2 * 8 * (512 + 129 / 2)
    emb = 8 * 4096 * 2
    assert pl.step_time_s == pytest.approx((weights + kv + emb) / 3.7e12, rel=1e-9)
    assert pl.effective_bandwidth == pytest.approx(3.7e12)
    # the prediction adds the small kernels between operators (not the bound); prefill does not
    assert pl.overhead_s == pytest.approx(32 * H200.fused_layer_overhead_s) and pl.overhead_s > 0
    assert pl.predicted_s == pytest.approx(pl.step_time_s + pl.overhead_s)
    assert plan(spec, Workload("prefill", 8, 512, 0), H200).overhead_s == 0.0


@pytest.mark.parametrize("model,switch,fused", [("llama-2-7b", None, True), ("llama-2-7b", "0", False),
                                                ("llama-3-8b", "1", True), ("opt-6.7b", None, False)])
def test_fused_llama_layers_predict_their_own_overhead(model, switch, fused, monkeypatch):
    """Gated-MLP layers that dak fuses ($DAK_FUSED_LAYER, on by default) add the profile's
    fused_layer_overhead_s per layer, other layers (OPT, or the switch off) layer_overhead_s, and
    a profile without the fused figure layer_overhead_s for all; the decisions and bound stay."""
    import dataclasses

    from dak.planner.overhead import layer_overhead
    if switch is None:
        monkeypatch.delenv("DAK_FUSED_LAYER", raising=False)
    else:
        monkeypatch.setenv("DAK_FUSED_LAYER", switch)
    spec, w = load_spec(model), Workload("decode", 8, 32, 32)
    assert H200.fused_layer_overhead_s and H200.fused_layer_overhead_s != H200.layer_overhead_s
    want = H200.fused_layer_overhead_s if fused else H200.layer_overhead_s
    assert layer_overhead(spec, H200) == want
    old = dataclasses.replace(H200, fused_layer_overhead_s=0.0)  # profiles written before the field
    assert layer_overhead(spec, old) == H200.layer_overhead_s
    budget = int(sum(op.bytes for op in list_operators(spec, w)) * 0.97)
    a, b = plan(spec, w, H200, budget), plan(spec, w, old, budget)
    assert [o.host_units for o in a.ops] == [o.host_units for o in b.ops] and a.step_time_s == b.step_time_s
    assert b.overhead_s - a.overhead_s == pytest.approx(spec.num_layers * (H200.layer_overhead_s - want))
    monkeypatch.setenv("DAK_FUSED_LAYER", "on")
    if spec.gated_mlp:  # the switch is read only for layers it could fuse
        with pytest.raises(ValueError, match="DAK_FUSED_LAYER must be 0 or 1"):
            layer_overhead(spec, H200)


def test_heavy_offload_is_host_link_bound():
    """When every op is past its peak, greedy's roofline TPOT = host traffic / B_h (plus nothing
    on the HBM side), with B_h the faster host reader (here the copy engine, 55 GB/s); the chain
    model's link time adds each copy's start-up and the step's first copy; host K/V is copied a
    layer ahead (the default since the thirty-fourth session): its rows up to the cache bucket, one
    start-up per layer."""
    from dak.planner.cost import roofline_time
    spec, w = load_spec("llama-2-70b"), Workload("decode", 8, 512, 128)
    pl = plan(spec, w, H200, 40 * GIB)
    ops = list_operators(spec, w)
    host_traffic = sum(p.traffic * p.ratio for p in pl.ops)
    assert all(p.ratio >= 55 / (55 + 3700) - 1e-9 for p in pl.ops if p.kind != "embed_tokens")
    assert sum(roofline_time(op, p.ratio, H200) for op, p in zip(ops, pl.ops)) == pytest.approx(host_traffic / 55e9, rel=1e-3)
    ce = [p for op, p in zip(ops, pl.ops) if uses_copy_engine(op, p.host_bytes)]
    att = [(op, p) for op, p in zip(ops, pl.ops) if p.kind == "attention"]
    kv = sum(op.copy_traffic * p.ratio for op, p in att)
    assert kv > sum(p.traffic * p.ratio for _, p in att)  # bucket rows: more than the attended context
    want = (sum(p.traffic * p.ratio for p in ce) + kv) / 55e9 + (len(ce) + len(att)) * H200.copy_op_overhead_s \
        + ce[0].traffic * ce[0].ratio / 55e9
    assert pl.link_s == pytest.approx(want, rel=1e-3) and pl.predicted_s >= pl.link_s
    # attention (traffic/bytes < 1) and the embedding (gather only) are moved first
    assert all(p.ratio == 1.0 for p in pl.ops if p.kind in ("attention", "embed_tokens"))


def test_greedy_beats_uniform_and_matches_continuous():
    spec, w = load_spec("llama-3-8b"), Workload("decode", 16, 1024, 256)
    ops = list_operators(spec, w)
    for budget in (6 * GIB, 10 * GIB, 14 * GIB):
        plans = plan_all(spec, w, H200, budget)
        g, u = plans["greedy"], plans["uniform"]
        _, cont = solve_continuous(ops, g.required_host_bytes, H200)
        rg, ru = (sum(op_time(op, p.ratio, H200) for op, p in zip(ops, pl.ops)) for pl in (g, u))
        assert rg <= ru * (1 + 1e-9)
        assert rg == pytest.approx(cont, rel=2e-3)  # rounding costs little


def test_prefetch_model():
    spec, w = load_spec("llama-2-70b"), Workload("decode", 8, 512, 128)
    pf = plan(spec, w, H200, 40 * GIB, "prefetch")
    layer_bytes = sum(p.bytes for p in pf.ops if p.layer == 0)
    layers_total = sum(p.bytes for p in pf.ops if p.layer is not None)
    s = pf.required_host_bytes / (layers_total - 2 * layer_bytes)
    assert s * layers_total <= pf.host_bytes <= s * layers_total * 1.01
    assert pf.staging_bytes == 2 * sum(p.host_bytes for p in pf.ops if p.layer == 0)
    assert pf.hbm_bytes <= 40 * GIB
    assert all(p.host_bytes == 0 for p in pf.ops if p.layer is None)
    copied = sum(p.traffic * p.ratio for p in pf.ops)
    assert pf.step_time_s >= copied / 55e9 * (1 - 1e-9)
    assert pf.step_time_s == pytest.approx(max(copied / 55e9, pf.total_traffic / 3.7e12), rel=1e-3)
    tight = plan(load_spec("tiny-opt"), Workload("decode", 1, 8, 1), H200, 2**20 + 100_000, "prefetch", reserve=2**20)
    assert not tight.feasible and math.isinf(tight.step_time_s)


def test_spare_link_uses_host_when_fitting():
    """With 1-row tiles every weight op reaches ~x* = B_h/(B_h+B_g): T = T0 * B_g/(B_g+B_h).

    Attention cannot improve (whole requests: 1/8 of the KV is past x* = 1.35%).
    """
    spec, w = load_spec("llama-2-7b"), Workload("decode", 8, 512, 128)
    base = plan(spec, w, H200, tile_rows=1)
    sp = plan(spec, w, H200, tile_rows=1, spare_link=True)
    assert sp.fits and sp.host_bytes > 0 and sp.step_time_s < base.step_time_s
    attn = sum(p.time_s for p in base.ops if p.kind == "attention")
    expected = (base.step_time_s - attn) * 3.7 / (3.7 + 0.0505) + attn
    assert sp.step_time_s == pytest.approx(expected, rel=1e-3)
    assert all(p.host_bytes == 0 for p in sp.ops if p.kind == "attention")


def test_budget_errors():
    spec, w = load_spec("llama-2-7b"), Workload("decode", 8, 512, 128)
    with pytest.raises(ValueError, match=r"below the minimum HBM-resident set .*raise --hbm-budget to at least \d+MiB"):
        plan(spec, w, H200, 512 * 2**20)
    with pytest.raises(ValueError, match="exceeds .*HBM capacity"):
        plan(spec, w, H200, 200 * GIB)
    with pytest.raises(ValueError, match="pinned host memory.*host_ram"):
        plan(load_spec("llama-3-70b"), Workload("decode", 64, 4096, 4096), H200, 20 * GIB)
    with pytest.raises(ValueError, match="unknown policy"):
        plan(spec, w, H200, policy="random")
    with pytest.raises(ValueError, match="tile_rows"):
        plan(spec, w, H200, tile_rows=0)


def test_prediction_adds_each_split_operators_overhead():
    """dak's own placements predict the small kernels per layer plus a per-operator excess of
    its split linears (in place or by copy engine) and host-KV attention; prefetch, prefill,
    and operators timed by a measured curve get none of it, but for a copy-engine linear's copy
    start-up. The bound never changes."""
    import dataclasses

    from dak.measured import Curve
    from dak.planner.curves import op_key
    from dak.shares import ce_min_share
    spec, w = load_spec("llama-2-7b"), Workload("decode", 8, 32, 32)
    prof = dataclasses.replace(H200, inplace_op_overhead_s=3e-6, copy_op_overhead_s=20e-6,
                               attention_host_excess=0.5)
    bare = dataclasses.replace(prof, inplace_op_overhead_s=0.0, copy_op_overhead_s=0.0, attention_host_excess=0.0)
    total = sum(op.bytes for op in list_operators(spec, w))
    for x, policy in [(0.01, "greedy"), (0.05, "greedy"), (0.10, "greedy"), (0.02, "uniform"), (0.3, "uniform")]:
        budget = int(total * (1 - x))
        pl, ref = plan(spec, w, prof, budget, policy), plan(spec, w, bare, budget, policy)
        assert [o.host_units for o in pl.ops] == [o.host_units for o in ref.ops]  # decisions unchanged
        host = [o.host_bytes for o in ref.ops]
        unfused = fusion_overhead(list_operators(spec, w), host, w, prof, True)
        first = chain_time(list_operators(spec, w), host, prof).first_s  # the step's first copy waits
        assert pl.step_time_s == ref.step_time_s
        assert ref.overhead_s == pytest.approx(32 * H200.fused_layer_overhead_s + unfused + first)
        lin = [o for o in pl.ops if o.host_bytes and o.kind != "attention" and not o.kind.startswith("embed")]
        n_ce = sum(o.ratio > ce_min_share() for o in lin)
        att = sum(o.traffic * o.ratio for o in pl.ops if o.kind == "attention") / prof.split_host_bandwidth
        want = 3e-6 * (len(lin) - n_ce) + 20e-6 * n_ce + 0.5 * att
        assert want > 0, (x, policy)
        assert pl.overhead_s - ref.overhead_s == pytest.approx(want, rel=1e-9), (x, policy)
    budget = int(total * 0.95)
    assert plan(spec, w, prof, budget, "prefetch").overhead_s == pytest.approx(32 * H200.fused_layer_overhead_s)
    assert plan(spec, Workload("prefill", 8, 32, 0), prof, budget).overhead_s == 0.0
    # operators with a measured curve carry their own excess: a profile measuring every linear
    pl = plan(spec, w, prof, budget)
    ops = list_operators(spec, w)
    curved = dataclasses.replace(prof, curves=tuple(
        Curve(k, ((0.0, 1e-5), (1.0, 1e-3))) for k in sorted({op_key(o) for o in ops if op_key(o)})))
    pc = plan(spec, w, curved, budget)
    unfused = fusion_overhead(ops, [o.host_bytes for o in pc.ops], w, curved, True)
    first = chain_time(ops, [o.host_bytes for o in pc.ops], curved).first_s
    # ... except a copy-engine linear's copy start-up: its chain time is not its curve (stream.curve_copy_overhead)
    n_ce = sum(uses_copy_engine(op, o.host_bytes) for op, o in zip(ops, pc.ops))
    assert n_ce > 0
    assert pc.cost_model == "measured" and pc.overhead_s == pytest.approx(
        32 * H200.fused_layer_overhead_s + unfused + first + n_ce * curved.copy_op_overhead_s)
    assert pl.overhead_s > pc.overhead_s


def _round_one_unit_at_a_time(ops, xs, host_bytes, profile):
    """round_to_units as first written (one host_bytes_for and op_time call per unit, no tables):
    the reference its list-based rewrite must reproduce unit for unit, ties included."""
    import heapq

    from dak.planner.greedy import floor_units
    ks = floor_units(ops, xs)
    deficit = host_bytes - sum(op.host_bytes_for(k) for op, k in zip(ops, ks))

    def marginal(i):
        op, k = ops[i], ks[i]
        b0, b1 = op.host_bytes_for(k), op.host_bytes_for(k + 1)
        return (op_time(op, b1 / op.bytes, profile) - op_time(op, b0 / op.bytes, profile)) / (b1 - b0)

    heap = [(marginal(i), i) for i, op in enumerate(ops) if ks[i] < op.units]
    heapq.heapify(heap)
    while deficit > 0 and heap:
        _, i = heapq.heappop(heap)
        while True:
            deficit -= ops[i].host_bytes_for(ks[i] + 1) - ops[i].host_bytes_for(ks[i])
            ks[i] += 1
            if deficit <= 0 or ks[i] >= ops[i].units:
                break
            m = marginal(i)
            if heap and m > heap[0][0]:
                heapq.heappush(heap, (m, i))
                break
    return ks


@pytest.mark.parametrize("seed", range(12))
def test_round_to_units_matches_adding_one_unit_at_a_time(seed):
    """Random operator subsets, tile sizes (partial last units included) and host shares, with
    and without a memo shared across calls: the same unit counts as the reference."""
    import random

    from dak.planner.greedy import round_to_units
    rng = random.Random(seed)
    spec = load_spec(rng.choice(["llama-2-7b", "opt-6.7b", "tiny-qwen2"]))
    w = Workload("decode", rng.choice([1, 8, 37, 512]), rng.randint(16, 300), 1, "bf16")
    all_ops = list_operators(spec, w, rng.choice([16, 64, 100, 128]))
    memo: dict = {}
    for _ in range(12):
        ops = rng.sample(all_ops, rng.randint(1, min(40, len(all_ops))))
        total = sum(o.bytes for o in ops)
        R = rng.randint(0, total)
        xs, _ = solve_continuous(ops, R, H200)
        want = _round_one_unit_at_a_time(ops, xs, R, H200)
        assert sum(o.host_bytes_for(k) for o, k in zip(ops, want)) >= R
        assert round_to_units(ops, xs, R, H200) == want
        assert round_to_units(ops, xs, R, H200, memo) == want


@pytest.mark.parametrize("rotary_kv", ["1", "0"])
def test_qk_norms_are_priced_where_they_launch(rotary_kv, monkeypatch):
    """Qwen3 norms every head's q and k: in the default decode step that rides in the rotary + KV append launch
    (no launch more than the same shapes without them); with $DAK_ROTARY_KV=0 they are two launches a layer, and
    a layer slope calibrated on Qwen3 stores the other families' figure (the launches are not counted twice)."""
    import dataclasses

    from dak.calibrate.overhead import planned_layer_slope
    from dak.planner.overhead import step_overhead
    monkeypatch.setenv("DAK_ROTARY_KV", rotary_kv)
    launches = 2 if rotary_kv == "0" else 0
    spec, w = load_spec("qwen3-8b"), Workload("decode", 8, 32, 32)
    plain = dataclasses.replace(spec, qk_norm=False)
    extra = step_overhead(spec, w, H200) - step_overhead(plain, w, H200)
    assert H200.unfused_op_overhead_s > 0
    assert extra == pytest.approx(spec.num_layers * launches * H200.unfused_op_overhead_s)
    assert step_overhead(spec, Workload("prefill", 8, 32, 0), H200) == 0.0
    budget = int(sum(op.bytes for op in list_operators(spec, w)) * 0.97)
    a, b = plan(spec, w, H200, budget), plan(plain, w, H200, budget)
    assert [o.host_units for o in a.ops] == [o.host_units for o in b.ops] and a.step_time_s == b.step_time_s
    assert a.overhead_s - b.overhead_s == pytest.approx(extra)
    tiny = Workload("decode", 4, 16, 8)
    q3 = planned_layer_slope("tiny-qwen3", tiny, H200)
    ops_only = planned_layer_slope("tiny-qwen3", tiny, dataclasses.replace(H200, unfused_op_overhead_s=0.0))
    assert q3 - ops_only == pytest.approx(launches * H200.unfused_op_overhead_s)
