"""One GEMV once staged (dak.kernels.staged_gemv) and the chain's wrap, as the planner prices and
chooses them (dak.planner.stream.chained), on the CPU."""

import pytest

from dak.baselines.e2e import budget_for
from dak.hardware import get_profile
from dak.models import Workload, list_operators, load_spec
from dak.planner import plan
from dak.planner.overhead import step_overhead
from dak.planner.stream import uses_copy_engine
from dak.shares import ONE_GEMV_SAVED_SHARE

H200 = get_profile("h200-pcie-cublas")  # one HBM rate for every operator, as these tests assume
W = Workload("decode", 8, 32, 32)


@pytest.mark.parametrize("mode", [None, "0"])
@pytest.mark.parametrize("calibrated", [True, False])
def test_consolidated_keeps_llama_2_7b_in_place_plan_at_2_percent(monkeypatch, mode, calibrated):
    """H18 (twenty-third session): on Llama-2-7B's calibrated H17 profile at 2% consolidated took
    a streamed o_proj chain (32 copies; predicted 4.18 ms, measured 4.37) over the in-place plan
    greedy makes (down_proj in place, measured 4.01), the copies' start-up unpriced. H89
    (twenty-eighth session, the preset profile): that chain as one GEMV each measured 4.03 ms
    against the in-place plan's 3.96, once all its start-ups were priced off. One-GEMV chains wrap
    by default since the thirty-fourth session: a chain of the LM head alone would refill its slot
    at the step's end, which waits for it, so the wrap must not make it look free (it did, priced
    as hidden, before the chain's tail was priced)."""
    if mode is None:
        monkeypatch.delenv("DAK_CE_ONE_GEMV", raising=False)
    else:
        monkeypatch.setenv("DAK_CE_ONE_GEMV", mode)
    from pathlib import Path
    path = Path(__file__).resolve().parents[1] / "benchmarks/profiles/h200-llama-2-7b-h17-inherited.json"
    prof = get_profile(str(path)) if calibrated else H200
    spec = load_spec("llama-2-7b")
    budget = budget_for(spec, W, 0.02, prof)
    cons, greedy = (plan(spec, W, prof, budget, p, kv_ahead=True) for p in ("consolidated", "greedy"))
    ce = [o for o, op in zip(cons.ops, list_operators(spec, W)) if o.host_bytes and uses_copy_engine(op, o.host_bytes)]
    assert not ce, [o.name for o in ce][:4]
    assert cons.predicted_s <= greedy.predicted_s * 1.0001


def _one_o_proj_chain(share):
    """Llama-2-7B's ops and host bytes with every o_proj's host share `share` (copy engine)."""
    ops = list_operators(load_spec("llama-2-7b"), W)
    host = [op.host_bytes_for(max(1, round(op.units * share))) if op.kind == "o_proj" else 0 for op in ops]
    assert all(uses_copy_engine(op, h) for op, h in zip(ops, host) if h)
    return ops, host


@pytest.mark.parametrize("mode", [None, "0", "1"])
def test_one_gemv_where_the_copies_hide_behind_compute(mode, monkeypatch):
    """The one-GEMV path (dak.kernels.staged_gemv) drops copy_op_overhead_s per copy-engine linear
    from the compute side where the link side is at most ONE_GEMV_LINK_SHARE of it (unset), always
    ($DAK_CE_ONE_GEMV=1) or never (0); never beyond the GEMV's 16 tokens or at prefill."""
    from dak.planner.stream import chained, one_gemv_saving
    from dak.shares import ONE_GEMV_LINK_SHARE
    monkeypatch.setenv("DAK_COPY_WRAP", "0")  # one GEMV alone (the wrap: the test below)
    if mode is not None:
        monkeypatch.setenv("DAK_CE_ONE_GEMV", mode)
    else:
        monkeypatch.delenv("DAK_CE_ONE_GEMV", raising=False)
    base = step_overhead(load_spec("llama-2-7b"), W, H200)
    for share, hidden in ((0.05, True), (0.6, False)):  # 32 o_proj copies: ~1.4 ms / ~16 ms of link
        ops, host = _one_o_proj_chain(share)
        monkeypatch.setenv("DAK_CE_ONE_GEMV", "0")
        ct0, extra0 = chained(ops, host, W, H200, True, base=base)
        if mode is None:
            monkeypatch.delenv("DAK_CE_ONE_GEMV")
        else:
            monkeypatch.setenv("DAK_CE_ONE_GEMV", mode)
        ct, extra = chained(ops, host, W, H200, True, base=base)
        saving = one_gemv_saving(ops, host, W, H200)
        assert saving == pytest.approx(32 * ONE_GEMV_SAVED_SHARE * H200.copy_op_overhead_s)
        compute = sum(ct0.times) + base + extra0 - saving
        assert (ct0.link_s <= ONE_GEMV_LINK_SHARE * compute) == hidden
        on = {None: hidden, "0": False, "1": True}[mode]
        assert not ct0.one_gemv and ct.one_gemv == on
        assert extra == pytest.approx(extra0 - saving if on else extra0) and ct.link_s == ct0.link_s
    for w in (Workload("decode", 17, 32, 32), Workload("prefill", 8, 32, 32)):
        assert one_gemv_saving(ops, host, w, H200) == 0.0
    monkeypatch.setenv("DAK_HBM_GEMV", "0")
    assert one_gemv_saving(ops, host, W, H200) == 0.0


def test_plan_records_one_gemv_and_prices_it(monkeypatch):
    """Placement.one_gemv follows the chain model's choice; the predicted step drops by the saved
    start-ups (OPT-6.7B at 1%: out_proj's 32 copies, link side ~2.9 ms of ~4.7)."""
    monkeypatch.delenv("DAK_CE_ONE_GEMV", raising=False)
    monkeypatch.setenv("DAK_COPY_WRAP", "0")  # one GEMV alone (the wrap: the test below)
    spec = load_spec("opt-6.7b")
    budget = budget_for(spec, W, 0.01, H200)
    pl = plan(spec, W, H200, budget, "consolidated")
    assert pl.one_gemv and pl.link_s > 0
    n_ce = sum(1 for o, op in zip(pl.ops, list_operators(spec, W)) if o.host_bytes and uses_copy_engine(op, o.host_bytes))
    assert n_ce >= 32
    monkeypatch.setenv("DAK_CE_ONE_GEMV", "0")
    off = plan(spec, W, H200, budget, "consolidated")
    assert not off.one_gemv
    if [o.host_bytes for o in off.ops] == [o.host_bytes for o in pl.ops]:  # the same plan: only the start-ups
        assert off.overhead_s - pl.overhead_s == pytest.approx(n_ce * ONE_GEMV_SAVED_SHARE * H200.copy_op_overhead_s)
    assert pl.predicted_s < off.predicted_s


def test_copy_wrap_plan_takes_the_first_copy_off_one_gemv_plans_only(monkeypatch):
    """$DAK_COPY_WRAP=plan (the default since the thirty-fourth session): a plan that runs one GEMV
    once staged (OPT-6.7B at 1%) wraps its chain, so its first copy leaves both sides (predicted
    lower by about it); a link-bound plan (5%, no one GEMV) is priced as with =0."""
    from dak.planner.stream import chained
    monkeypatch.delenv("DAK_CE_ONE_GEMV", raising=False)
    spec = load_spec("opt-6.7b")
    ops = list_operators(spec, W)
    base = step_overhead(spec, W, H200)
    for x, one in ((0.01, True), (0.05, False)):
        monkeypatch.setenv("DAK_COPY_WRAP", "0")
        pl = plan(spec, W, H200, budget_for(spec, W, x, H200), "consolidated")
        host = [o.host_bytes for o in pl.ops]
        ct0, extra0 = chained(ops, host, W, H200, True, base=base)
        monkeypatch.setenv("DAK_COPY_WRAP", "plan")
        ct, extra = chained(ops, host, W, H200, True, base=base)
        monkeypatch.delenv("DAK_COPY_WRAP")  # unset: the same as plan
        assert chained(ops, host, W, H200, True, base=base) == (ct, extra)
        assert ct0.one_gemv == ct.one_gemv == one
        if one:
            assert ct0.first_s > 0 and ct.first_s == 0.0
            assert ct.link_s == pytest.approx(ct0.link_s - ct0.first_s) and extra == pytest.approx(extra0 - ct0.first_s)
            assert plan(spec, W, H200, pl.hbm_budget, "consolidated").predicted_s < pl.predicted_s
        else:
            assert (ct.link_s, ct.first_s, extra) == (ct0.link_s, ct0.first_s, extra0)
    monkeypatch.setenv("DAK_COPY_WRAP", "sometimes")
    with pytest.raises(ValueError, match="DAK_COPY_WRAP must be 0, 1 or plan"):
        chained(ops, host, W, H200, True, base=base)
