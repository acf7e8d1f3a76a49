"""Copy-ahead on the GPU: a chain of copy-engine SplitLinears inside one captured decode step
gives the unchained results, replay after replay with fresh inputs, and leaves the slots reusable."""

from dataclasses import replace

import pytest
import torch

from dak.kernels import copy_ahead
from dak.kernels.config import KernelConfig
from dak.kernels.tuning import token_bucket
from dak.nn import SplitLinear

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")]


def _chain(seed, dtype=torch.bfloat16, n=8, dims=(512, 1400, 700, 512, 2100, 512)):
    torch.manual_seed(seed)
    mods = []
    for i, (k, m) in enumerate(zip(dims[:-1], dims[1:])):
        mod = SplitLinear(torch.randn(m, k, device="cuda").to(dtype) / k ** 0.5, host_ratio=(0.3, 0.05, 1.0, 0.6, 0.2)[i],
                          row_tile=16, tune=False).cuda()
        mod._configs[token_bucket(n)] = KernelConfig(block_m=16, block_n=16, block_k=128, ce_share=1.0,
                                                     ce_chunks=1 + i % 3, host_programs=4, hbm_programs=132)
        mods.append(mod)

    def run(x):
        for mod in mods:
            x = mod(x)
        return x
    return mods, run


@pytest.mark.parametrize("streams,slots,group,fork", [("1", "2", "0", "1"), ("2", "2", "0", "1"), ("1", "4", "0", "1"),
                                                      ("2", "3", "0", "1"), ("1", "2", "64", "1"), ("2", "3", "2", "1"),
                                                      ("1", "2", "0", "0"), ("2", "3", "64", "0")])
def test_chained_step_under_graph_capture_matches_unchained(streams, slots, group, fork, monkeypatch):
    monkeypatch.setenv("DAK_CE_FORK", fork)  # 0: staged GEMMs on the caller's stream, no fork
    monkeypatch.setenv("DAK_COPY_STREAMS", streams)  # 2: alternate two copy streams
    monkeypatch.setenv("DAK_COPY_SLOTS", slots)
    monkeypatch.setenv("DAK_COPY_GROUP_MIB", group)  # > 0: consecutive operators copied by one memcpy
    dtype, n, dims = torch.bfloat16, 8, [512, 1400, 700, 512, 2100, 512]  # odd sizes, layer-like chain
    mods, run = _chain(5)
    x = torch.randn(n, dims[0], device="cuda").to(dtype)
    ref = run(x).float()  # unchained
    with copy_ahead.record_chain() as order:
        run(x)
    assert copy_ahead.link_chain(order, n) == len(mods)
    with copy_ahead.copy_ahead_step(torch.device("cuda")):
        eager = run(x)
    assert torch.equal(eager.float(), ref), "chained eager step differs from the unchained one"
    _replay_against_unchained(run, x, 20, lambda y, want: torch.equal(y.float(), want))
    copy_ahead.unlink(mods)


def _replay_against_unchained(run, x, trials, same):
    """Capture one chained step of `run`, replay it on fresh inputs with its output poisoned, and
    check each against the unchained run outside the graph with same(y, want_fp32)."""
    static_x = x.clone()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        with copy_ahead.copy_ahead_step(torch.device("cuda")):
            static_y = run(static_x)
    for trial in range(trials):
        xi = torch.randn_like(x, dtype=torch.float32).to(x.dtype)
        static_x.copy_(xi)
        static_y.fill_(float("nan"))
        g.replay()
        assert same(static_y, run(xi).float()), f"replay {trial} differs"


@pytest.mark.parametrize("streams,slots", [("1", "2"), ("2", "3")])
def test_one_gemv_chain_under_graph_replay_matches_unchained(streams, slots, monkeypatch):
    """$DAK_CE_ONE_GEMV=1: each chained operator, its host rows all staged, runs staged and HBM rows as
    one GEMV launch after its copies land; eager and replayed (fresh inputs, poisoned outputs) within
    bf16 rounding of the unchained path (its own GEMMs: not bit-equal)."""
    import dak.kernels.split_linear_ce as ce
    monkeypatch.setenv("DAK_CE_ONE_GEMV", "1")
    monkeypatch.setenv("DAK_COPY_STREAMS", streams)
    monkeypatch.setenv("DAK_COPY_SLOTS", slots)
    calls = []
    real = ce.staged_gemv
    monkeypatch.setattr(ce, "staged_gemv", lambda *a, **kw: calls.append(1) or real(*a, **kw))
    dtype, n, dims = torch.bfloat16, 8, [512, 1400, 700, 512, 2100, 512]
    mods, run = _chain(9)
    for i, mod in enumerate(mods):  # HBM rows by cuBLAS (the untuned default) on every other operator
        cfg = mod._configs[token_bucket(n)]
        mod._configs[token_bucket(n)] = replace(cfg, hbm_cublas=i % 2 == 0)

    def close(y, want):
        return ((y.float() - want).norm() / want.norm()).item() < 2e-2

    x = torch.randn(n, dims[0], device="cuda").to(dtype)
    ref = run(x).float()
    assert not calls, "the unchained path must not take the one-GEMV path"
    with copy_ahead.record_chain() as order:
        run(x)
    assert copy_ahead.link_chain(order, n) == len(mods)
    with copy_ahead.copy_ahead_step(torch.device("cuda")):
        eager = run(x)
    assert len(calls) == len(mods) and close(eager, ref)
    _replay_against_unchained(run, x, 10, close)
    copy_ahead.unlink(mods)


@pytest.mark.parametrize("streams,slots,group", [("1", "2", "0"), ("2", "3", "0"), ("1", "2", "64")])
def test_operator_called_twice_in_a_step_copies_again(streams, slots, group, monkeypatch):
    """A chained operator called again later in the step (its slot since reused by the operator
    two places on) must not read another operator's rows."""
    monkeypatch.setenv("DAK_COPY_STREAMS", streams)
    monkeypatch.setenv("DAK_COPY_SLOTS", slots)
    monkeypatch.setenv("DAK_COPY_GROUP_MIB", group)
    torch.manual_seed(6)
    dtype, n = torch.bfloat16, 8
    mods = [SplitLinear(torch.randn(512, 512, device="cuda").to(dtype) / 23, host_ratio=0.5, row_tile=16,
                        tune=False).cuda() for _ in range(3)]
    for mod in mods:
        mod._configs[token_bucket(n)] = KernelConfig(block_m=16, block_n=16, block_k=128, ce_share=1.0,
                                                     ce_chunks=2, host_programs=4, hbm_programs=132)

    def run(x):
        for mod in mods + [mods[0]]:
            x = mod(x)
        return x

    x = torch.randn(n, 512, device="cuda").to(dtype)
    ref = run(x)
    with copy_ahead.record_chain() as order:
        run(x)
    assert copy_ahead.link_chain(order, n) == 3
    with copy_ahead.copy_ahead_step(torch.device("cuda")):
        got = run(x)
    assert torch.equal(got, ref)
    copy_ahead.unlink(mods)


@pytest.mark.parametrize("streams,slots,group", [("1", "2", "0"), ("2", "3", "0"), ("1", "2", "64"), ("1", "2", "2")])
def test_wrapped_chain_skips_the_first_copy_and_stays_exact(streams, slots, group, monkeypatch):
    """$DAK_COPY_WRAP=1: after one step the first unit's rows are already in its slot (no copy
    at the step's start), results equal the unchained ones step after step, eager and replayed,
    two wrapped chains interleaved do not overwrite each other's slots, and an aborted step is
    repaired by prime() (its slot is poisoned here to prove the refill)."""
    from dak.kernels import split_linear_ce
    monkeypatch.setenv("DAK_COPY_STREAMS", streams)
    monkeypatch.setenv("DAK_COPY_SLOTS", slots)
    monkeypatch.setenv("DAK_COPY_GROUP_MIB", group)
    monkeypatch.setenv("DAK_COPY_WRAP", "1")
    n, dev = 8, torch.device("cuda")
    chains = []
    for seed in (7, 8):  # two models of the same shapes: the shared slots would collide
        mods, run = _chain(seed)
        x = torch.randn(n, 512, device="cuda").to(torch.bfloat16)
        with copy_ahead.record_chain() as order:
            run(x)
        copy_ahead.link_chain(order, n)
        chain = mods[0]._ahead.chain
        assert chain.wrap and not chain.primed and chain.head[0] is mods[0]
        chains.append((mods, run, chain))
    copies = []
    real = split_linear_ce.issue_copies
    monkeypatch.setattr(split_linear_ce, "issue_copies", lambda w, *a: copies.append(w) or real(w, *a))
    graphs = []
    for mods, run, chain in chains:
        x = torch.randn(n, 512, device="cuda").to(torch.bfloat16)
        ref = run(x)  # unchained
        for step in range(3):  # eager: the first step copies the head, later ones find it there
            copies.clear()
            with copy_ahead.copy_ahead_step(dev):
                got = run(x)
            assert torch.equal(got, ref), f"eager wrapped step {step} differs"
            assert chain.primed
            if group == "0":
                head = sum(w.data_ptr() == mods[0].w_host.data_ptr() for w in copies)
                assert head == (2 if step == 0 else 1), "the head is copied once a step (the refill)"
        static_x = x.clone()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            with copy_ahead.copy_ahead_step(dev):
                static_y = run(static_x)
        graphs.append((g, static_x, static_y, run, chain))
    for trial in range(12):  # replays of the two chains interleaved
        for g, static_x, static_y, run, chain in graphs:
            xi = torch.randn(n, 512, device="cuda").to(torch.bfloat16)
            static_x.copy_(xi)
            static_y.fill_(float("nan"))
            g.replay()
            assert torch.equal(static_y, run(xi)), f"replay {trial} differs"
    g, static_x, static_y, run, chain = graphs[0]
    step = copy_ahead.Step(dev)
    step.wrapped.append(chain)
    step.abort()
    head = chain.head[0]._ahead
    chain.slots[head.slot].fill_(float("nan"))  # what an interrupted step may leave there
    assert copy_ahead.prime([c for *_, c in graphs]) == 1 and chain.primed
    xi = torch.randn(n, 512, device="cuda").to(torch.bfloat16)
    static_x.copy_(xi)
    g.replay()
    assert torch.equal(static_y, run(xi)), "replay after prime differs"
    for mods, _, _ in chains:
        copy_ahead.unlink(mods)


@pytest.mark.parametrize("chunks,taper", [(1, 1.0), (2, 1.0), (4, 0.5)])
def test_large_n_chain_under_graph_replay_matches_fp32_reference(chunks, taper):
    """Batch-512-like decode: every operator of the chain on the large-N path (all host rows
    staged, HBM rows by cuBLAS), as benchmarks/linear_chain.py times it; replays with fresh
    inputs match a float32 reference and the unchained result."""
    from dak.kernels.config import finalize
    torch.manual_seed(9)
    dtype, n, dims = torch.bfloat16, 300, [704, 1400, 700, 704]
    mods = []
    for i, (k, m) in enumerate(zip(dims[:-1], dims[1:])):
        mod = SplitLinear(torch.randn(m, k, device="cuda").to(dtype) / k ** 0.5, host_ratio=(0.1, 0.5, 0.3)[i],
                          row_tile=16, tune=False).cuda()
        mod._configs[token_bucket(n)] = finalize(
            KernelConfig(block_m=64, block_k=64, ce_share=1.0, ce_chunks=chunks, ce_taper=taper, hbm_cublas=True,
                         hbm_programs=264), mod.host_rows, m - mod.host_rows, 132)
        mods.append(mod)

    def run(x):
        for mod in mods:
            x = mod(x)
        return x

    def reference(x):
        y = x.float()
        for mod in mods:
            y = (y.to(dtype).float() @ mod.full_weight().float().t())
        return y

    x = torch.randn(n, dims[0], device="cuda").to(dtype)
    with copy_ahead.record_chain() as order:
        run(x)
    assert copy_ahead.link_chain(order, n) == len(mods)
    unchained = run(x)  # after linking: the same configs (the chain may copy all but its last in one memcpy)
    static_x = x.clone()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        with copy_ahead.copy_ahead_step(torch.device("cuda")):
            static_y = run(static_x)
    static_y.fill_(float("nan"))
    g.replay()
    assert torch.equal(static_y, unchained), "chained replay differs from the unchained step"
    for trial in range(5):
        xi = torch.randn(n, dims[0], device="cuda").to(dtype)
        static_x.copy_(xi)
        static_y.fill_(float("nan"))
        g.replay()
        ref = reference(xi)
        err = ((static_y.float() - ref).norm() / ref.norm()).item()
        assert err < 2e-2, f"replay {trial}: relative error {err:.2e}"
    copy_ahead.unlink(mods)
