"""GPU checks of the split linear (run on the H200): many random cases, graph capture, baselines."""

import random

import pytest
import torch

from dak.baselines import PrefetchLinear, UVALinear
from dak.host import PinnedBuffer, device_matrix
from dak.kernels.config import KernelConfig, finalize
from dak.kernels.fork_gemv import FORK_LAUNCHES
from dak.kernels.split_linear import tma_compatible
from dak.kernels.split_linear_ce import split_linear_ce, staging_buffer
from dak.nn import SplitLinear

pytestmark = pytest.mark.gpu
TOL = {torch.bfloat16: 1e-2, torch.float16: 2e-3}
PRESETS = [  # few distinct compiles keep this test short
    dict(block_m=16, block_k=128, num_stages=3, host_tma=False, hbm_tma=False),
    dict(block_m=32, block_k=128, num_stages=4, host_tma=True, hbm_tma=False),
    dict(block_m=64, block_k=64, num_stages=2, host_tma=True, hbm_tma=True),
    dict(block_m=32, block_k=128, num_stages=3, host_tma=False, hbm_tma=True),
]
BENCH_SHAPES = [(4096, 4096), (11008, 4096), (4096, 11008), (7168, 7168), (28672, 7168),
                (7168, 28672), (8192, 8192), (28672, 8192), (8192, 28672)]


def _rel(y, ref):
    return ((y.float() - ref).norm() / ref.norm().clamp_min(1e-12)).item()


def _case(rng, m, k, n, m_h, dtype, bias, cfg_kw):
    w = torch.randn(m, k, device="cuda", dtype=torch.float32)
    x = torch.randn(n, k, device="cuda", dtype=torch.float32)
    b = torch.randn(m, device="cuda") if bias else None
    ref = x.to(dtype).float() @ w.to(dtype).float().T + (b.to(dtype).float() if bias else 0)
    wh = PinnedBuffer.from_tensor(w[:m_h].to(dtype))
    wg = device_matrix(m - m_h, k, dtype, torch.device("cuda"))
    wg.copy_(w[m_h:].to(dtype))
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    cfg = finalize(KernelConfig(**cfg_kw), m_h, m - m_h, sms)
    out = torch.full((n, m), float("nan"), device="cuda", dtype=dtype)
    stage = staging_buffer(torch.device("cuda"), dtype, m_h * wh.tensor.stride(0))
    stage.fill_(float("nan"))
    split_linear_ce(x.to(dtype), wh.tensor, wg, None if b is None else b.to(dtype), cfg, stage, sms, out=out)
    torch.cuda.synchronize()
    assert not out.isnan().any(), "unwritten outputs"
    err = _rel(out, ref)
    assert err < TOL[dtype], (m, k, n, m_h, dtype, cfg, err)


def test_random_cases_against_fp32_reference():
    rng = random.Random(1234)
    failures = []
    for i in range(220):
        if i < len(BENCH_SHAPES) * 2:
            m, k = BENCH_SHAPES[i % len(BENCH_SHAPES)]
            n = rng.choice([1, 8, 32, 128])
        else:
            m, k = rng.randint(1, 3000), rng.randint(1, 1200)
            n = rng.choice([1, 2, 3, 7, 16, 17, 33, 64, 65, 130, 300])
        m_h = rng.choice([0, m, rng.randint(0, m)])
        dtype = rng.choice([torch.bfloat16, torch.float16])
        cfg_kw = dict(rng.choice(PRESETS), host_programs=rng.choice([1, 8, 16, 32]),
                      hbm_programs=rng.choice([7, 132, 264]),
                      ce_share=rng.choice([0.0, 0.0, 0.3, 1.0]), ce_chunks=rng.choice([1, 2, 5]),
                      host_split_k=rng.choice([1, 1, 2, 4, 8]), hbm_fork=rng.random() < 0.25)
        cfg_kw["block_n"] = 64 if n > 16 else 16
        if cfg_kw["hbm_fork"]:
            cfg_kw["fork_gemv"] = rng.choice(["", *FORK_LAUNCHES])
        try:
            _case(rng, m, k, n, m_h, dtype, rng.random() < 0.5, cfg_kw)
        except AssertionError as e:
            failures.append(str(e))
    assert not failures, f"{len(failures)} failures, first: {failures[:3]}"


def test_tma_used_on_aligned_buffers():
    wh = PinnedBuffer((64, 4096), torch.bfloat16)
    assert wh.pinned and tma_compatible(wh.tensor)
    odd = PinnedBuffer((64, 4095), torch.bfloat16)
    assert odd.tensor.stride(0) * 2 % 16 == 0 and tma_compatible(odd.tensor)


@pytest.mark.parametrize("ratio", [0.0, 0.013, 0.5, 1.0])
def test_module_under_cuda_graph_matches_eager(ratio):
    lin = torch.nn.Linear(4096, 1000, bias=True, device="cuda", dtype=torch.bfloat16)
    mod = SplitLinear.from_linear(lin, host_ratio=ratio, tune=False)
    x_static = torch.randn(8, 4096, device="cuda", dtype=torch.bfloat16)
    eager = mod(x_static).clone()
    ref = x_static.float() @ lin.weight.float().T + lin.bias.float()
    assert _rel(eager, ref) < TOL[torch.bfloat16]
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        y_static = mod(x_static)
    for _ in range(3):
        x_static.copy_(torch.randn_like(x_static))
        g.replay()
        torch.cuda.synchronize()
        assert torch.equal(y_static, mod(x_static))


@pytest.mark.parametrize("fork", ["1", "0"])
def test_copy_engine_path_under_cuda_graph(fork, monkeypatch):
    """Chunked copies, the zero-copy kernel and the chunk GEMVs on three streams (two with
    $DAK_CE_FORK=0), captured."""
    monkeypatch.setenv("DAK_CE_FORK", fork)
    m, k, m_h, dtype = 3000, 1024, 2000, torch.float16
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    w = torch.randn(m, k, device="cuda", dtype=dtype)
    wh = PinnedBuffer.from_tensor(w[:m_h])
    wg = w[m_h:].contiguous()
    stage = staging_buffer(torch.device("cuda"), dtype, m_h * k)
    cfg = finalize(KernelConfig(block_m=32, block_k=128, ce_share=0.6, ce_chunks=4), m_h, m - m_h, sms)
    x = torch.randn(8, k, device="cuda", dtype=dtype)
    y = _replays_match_eager(lambda: split_linear_ce(x, wh.tensor, wg, None, cfg, stage, sms), x,
                             lambda: x.float() @ w.float().T, lambda y: stage.fill_(float("nan")), 5)
    assert y.shape == (8, m)


def _replays_match_eager(call, x, ref_of, poison, replays):
    """Run call() eagerly, capture it, then for fresh inputs in x: poison (poison(y)), replay, and
    compare with the fp32 reference ref_of() and, bit for bit, with an eager call. Returns y."""
    call()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        y_static = call()
    for _ in range(replays):
        x.copy_(torch.randn_like(x))
        poison(y_static)
        g.replay()
        torch.cuda.synchronize()
        assert _rel(y_static, ref_of()) < TOL[x.dtype]
        assert torch.equal(y_static, call())
    return y_static


@pytest.mark.parametrize("ce_share,n,launch", [(0.0, 8, ""), (0.0, 8, "64x128x3"), (0.0, 32, ""), (1.0, 1, "")])
def test_hbm_fork_under_cuda_graph(ce_share, n, launch):
    """hbm_fork: the HBM rows by dak's GEMV (cuBLAS at 32 tokens) beside a host-only kernel on a
    forked stream, captured; replays match eager launches and the fp32 reference on fresh inputs."""
    m, k, m_h, dtype = 4000, 1536, 96, torch.bfloat16
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    w = torch.randn(m, k, device="cuda", dtype=dtype)
    b = torch.randn(m, device="cuda", dtype=dtype)
    wh = PinnedBuffer.from_tensor(w[:m_h])
    wg = w[m_h:].contiguous()
    stage = staging_buffer(torch.device("cuda"), dtype, m_h * k)
    cfg = finalize(KernelConfig(block_m=16, block_n=16 if n <= 16 else 32, host_programs=8, host_split_k=4,
                                ce_share=ce_share, hbm_fork=True, fork_gemv=launch), m_h, m - m_h, sms)
    x = torch.randn(n, k, device="cuda", dtype=dtype)
    with torch.no_grad():  # as the runtime decodes: the GEMV takes the HBM rows up to 16 tokens
        _replays_match_eager(lambda: split_linear_ce(x, wh.tensor, wg, b, cfg, stage, sms), x,
                             lambda: x.float() @ w.float().T + b.float(), lambda y: y.fill_(float("nan")), 4)


def test_unprepared_bucket_inside_capture_is_an_error():
    lin = torch.nn.Linear(256, 512, bias=False, device="cuda", dtype=torch.float16)
    mod = SplitLinear.from_linear(lin, host_ratio=0.5, tune=False)
    x = torch.randn(3, 256, device="cuda", dtype=torch.float16)
    g = torch.cuda.CUDAGraph()
    with pytest.raises(RuntimeError, match="prepare"):
        with torch.cuda.graph(g):
            mod(x)


def test_baselines_match_reference():
    m, k, m_h = 1000, 512, 320
    w = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    x = torch.randn(5, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(m, device="cuda", dtype=torch.bfloat16)
    ref = x.float() @ w.float().T + b.float()
    pinned = PinnedBuffer.from_tensor(w)
    assert _rel(UVALinear(pinned.tensor, b)(x), ref) < 2e-2
    pre = PrefetchLinear(pinned.tensor[:m_h], w[m_h:], b)
    assert _rel(pre(x), ref) < 2e-2


def test_module_tunes_and_caches(tmp_path, monkeypatch):
    monkeypatch.setenv("DAK_CACHE_DIR", str(tmp_path))
    lin = torch.nn.Linear(2048, 4096, bias=False, device="cuda", dtype=torch.bfloat16)
    mod = SplitLinear.from_linear(lin, host_ratio=0.05, tune=True)
    x = torch.randn(8, 2048, device="cuda", dtype=torch.bfloat16)
    y = mod(x)
    assert _rel(y, x.float() @ lin.weight.float().T) < 2e-2
    assert (tmp_path / "split_linear.json").exists()
