"""Copy-ahead on the GPU: a chain of copy-engine SplitLinears inside one captured decode step
gives the unchained results, replay after replay with fresh inputs, and leaves the slots reusable."""

import pytest
import torch

from dak.kernels import copy_ahead
from dak.kernels.config import KernelConfig
from dak.kernels.tuning import token_bucket
from dak.nn import SplitLinear

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")]


@pytest.mark.parametrize("streams,slots,group", [("1", "2", "0"), ("2", "2", "0"), ("1", "4", "0"), ("2", "3", "0"),
                                                 ("1", "2", "64"), ("2", "3", "2")])
def test_chained_step_under_graph_capture_matches_unchained(streams, slots, group, monkeypatch):
    monkeypatch.setenv("DAK_COPY_STREAMS", streams)  # 2: alternate two copy streams
    monkeypatch.setenv("DAK_COPY_SLOTS", slots)
    monkeypatch.setenv("DAK_COPY_GROUP_MIB", group)  # > 0: consecutive operators copied by one memcpy
    torch.manual_seed(5)
    dtype, n, dims = torch.bfloat16, 8, [512, 1400, 700, 512, 2100, 512]  # odd sizes, layer-like chain
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

    x = torch.randn(n, dims[0], device="cuda").to(dtype)
    ref = run(x).float()  # unchained
    with copy_ahead.record_chain() as order:
        run(x)
    assert copy_ahead.link_chain(order, n) == len(mods)
    with copy_ahead.copy_ahead_step(torch.device("cuda")):
        eager = run(x)
    assert torch.equal(eager.float(), ref), "chained eager step differs from the unchained one"
    static_x = x.clone()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        with copy_ahead.copy_ahead_step(torch.device("cuda")):
            static_y = run(static_x)
    for trial in range(20):
        xi = torch.randn(n, dims[0], device="cuda").to(dtype)
        static_x.copy_(xi)
        static_y.fill_(float("nan"))
        g.replay()
        want = run(xi).float()  # unchained, outside the graph
        assert torch.equal(static_y.float(), want), f"replay {trial} differs"
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
