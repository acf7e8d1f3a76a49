"""GPU checks of the large-N host paths (run on the H200): the CUDA cluster-multicast kernel and
the Triton host-once kernel against a float32 reference, graph capture, and the tuned module."""

import random

import pytest
import torch

from dak.host import PinnedBuffer, device_matrix
from dak.kernels.config import KernelConfig, finalize
from dak.kernels.split_linear_route import run_split_linear
from dak.nn import SplitLinear

pytestmark = pytest.mark.gpu
TOL = {torch.bfloat16: 1e-2, torch.float16: 2e-3}
MC_VARIANTS = [  # (cluster, block_m, block_n): few distinct compiles keep this test short
    (2, 64, 128), (4, 64, 128), (4, 64, 64), (2, 128, 128), (4, 128, 64), (8, 64, 256),
]


def _sms():
    return torch.cuda.get_device_properties(0).multi_processor_count


def _case(m, k, n, m_h, dtype, bias, cfg_kw, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    w = torch.randn(m, k, device="cuda", generator=g)
    x = torch.randn(n, k, device="cuda", generator=g)
    b = torch.randn(m, device="cuda", generator=g) if bias else None
    ref = x.to(dtype).float() @ w.to(dtype).float().T + (b.to(dtype).float() if bias else 0)
    wh = PinnedBuffer.from_tensor(w[:m_h].to(dtype))
    wg = device_matrix(m - m_h, k, dtype, torch.device("cuda"))
    wg.copy_(w[m_h:].to(dtype))
    cfg = finalize(KernelConfig(**cfg_kw), m_h, m - m_h, _sms())
    out = torch.full((n, m), float("nan"), device="cuda", dtype=dtype)
    run_split_linear(x.to(dtype), wh.tensor, wg, None if b is None else b.to(dtype), cfg, _sms(), out=out)
    torch.cuda.synchronize()
    bad = out.isnan().sum().item()
    err = ((out.float() - ref).norm() / ref.norm().clamp_min(1e-12)).item()
    return (m, k, n, m_h, str(dtype), cfg_kw, f"unwritten={bad}", f"err={err:.2e}") \
        if bad or err >= TOL[dtype] else None


def test_cuda_multicast_random_cases_against_fp32_reference():
    """>= 100 random cases over clusters 2/4/8, with N not a multiple of the cluster span."""
    rng = random.Random(2024)
    failures = []
    for i in range(120):
        cl, bm, bn = MC_VARIANTS[i % len(MC_VARIANTS)]
        span = cl * bn
        n = rng.choice([65, 100, 300, 513, 777, 1100, 2049, 4100])
        if n % span == 0:
            n += 1
        m = rng.randint(1, 2500)
        k = 8 * rng.randint(1, 160)  # TMA: 16-byte rows
        m_h = m if i % 5 == 0 else rng.randint(1, m)
        dtype = (torch.bfloat16, torch.float16)[i % 2]
        kw = dict(host_kernel="cuda_multicast", mc_cluster=cl, mc_block_m=bm, mc_block_n=bn,
                  host_programs=rng.choice([cl, 16, 64, 132]), block_m=32, block_n=64, block_k=128, num_stages=3)
        bad = _case(m, k, n, m_h, dtype, bias=i % 3 == 0, cfg_kw=kw, seed=i)
        if bad:
            failures.append(bad)
    assert not failures, f"{len(failures)} failing cases, first: {failures[:5]}"


def test_cuda_multicast_tiny_host_parts_skip_empty_slices():
    """Fewer host rows than one multicast slice: slices wholly past M_H are never fetched."""
    failures = [bad for i, (m_h, cl) in enumerate([(1, 8), (5, 4), (9, 8), (17, 2), (64, 8), (65, 4)])
                if (bad := _case(200, 64, 600, m_h, torch.bfloat16, True,
                                 dict(host_kernel="cuda_multicast", mc_cluster=cl, host_programs=16), seed=i))]
    assert not failures, failures


def test_triton_once_random_cases_against_fp32_reference():
    rng = random.Random(77)
    failures = []
    for i in range(60):
        n, m, k = rng.choice([65, 130, 300, 1000, 2100]), rng.randint(1, 2500), rng.randint(1, 1200)
        m_h = m if i % 4 == 0 else rng.randint(0, m)
        dtype = (torch.bfloat16, torch.float16)[i % 2]
        kw = dict(host_kernel="triton_once", block_m=rng.choice([32, 64]), block_n=rng.choice([64, 128]),
                  block_k=128, num_stages=2, host_programs=rng.choice([8, 32, 132]),
                  host_tma=(i % 3 == 0 and k % 8 == 0))
        bad = _case(m, k, n, m_h, dtype, bias=i % 2 == 0, cfg_kw=kw, seed=1000 + i)
        if bad:
            failures.append(bad)
    assert not failures, f"{len(failures)} failing cases, first: {failures[:5]}"


def test_staged_chunks_tapered_or_forked_random_cases_against_fp32_reference():
    """Every host row staged by the copy engine, HBM rows by cuBLAS: equal or shrinking chunks,
    their GEMMs after the HBM GEMM or on the forked stream beside it; odd shapes, 0-all host rows."""
    rng = random.Random(4242)
    failures = []
    for i in range(60):
        n, m, k = rng.choice([65, 257, 513, 1025, 2049]), rng.randint(1, 3000), rng.randint(1, 1500)
        m_h = m if i % 6 == 0 else rng.randint(0, m)
        kw = dict(ce_share=1.0, hbm_cublas=True, block_m=64, ce_chunks=rng.choice([1, 2, 4, 8]),
                  ce_taper=rng.choice([1.0, 0.5, 0.3]), ce_fork=i % 2 == 0)
        bad = _case(m, k, n, m_h, (torch.bfloat16, torch.float16)[i // 2 % 2],
                    bias=i % 3 == 0, cfg_kw=kw, seed=3000 + i)
        if bad:
            failures.append(bad)
    assert not failures, f"{len(failures)} failing cases, first: {failures[:5]}"


@pytest.mark.parametrize("host_kernel", ["cuda_multicast", "triton_once", "ce_fork"])
def test_graph_replay_with_new_inputs(host_kernel):
    m, k, n, m_h, dtype = 1500, 1024, 700, 600, torch.bfloat16
    w = torch.randn(m, k, device="cuda").to(dtype)
    wh = PinnedBuffer.from_tensor(w[:m_h])
    wg = w[m_h:].contiguous()
    kw = (dict(ce_share=1.0, hbm_cublas=True, ce_chunks=4, ce_taper=0.5, ce_fork=True) if host_kernel == "ce_fork"
          else dict(host_kernel=host_kernel))
    cfg = finalize(KernelConfig(block_n=64, block_k=128, host_programs=32, **kw), m_h, m - m_h, _sms())
    x = torch.randn(n, k, device="cuda").to(dtype)
    out = torch.empty(n, m, device="cuda", dtype=dtype)
    run_split_linear(x, wh.tensor, wg, None, cfg, _sms(), out=out)  # compile/load outside capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        run_split_linear(x, wh.tensor, wg, None, cfg, _sms(), out=out)
    for _ in range(3):
        x.copy_(torch.randn(n, k, device="cuda").to(dtype))
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        ref = x.float() @ w.float().T
        assert not out.isnan().any()
        assert ((out.float() - ref).norm() / ref.norm()).item() < TOL[dtype]


def test_split_linear_module_large_n_default_reads_host_once(tmp_path, monkeypatch):
    """Untuned (the sweep is exercised by bench_linear.py --large-n --tune-large): a small host
    share at N > 64 defaults to staging every host row once with the copy engine and cuBLAS
    GEMMs (heuristic_config's `many`), through SplitLinear's router; the result is exact."""
    monkeypatch.setenv("DAK_CACHE_DIR", str(tmp_path))
    lin = torch.nn.Linear(1024, 8192, bias=True, device="cuda", dtype=torch.bfloat16)
    split = SplitLinear.from_linear(lin, host_ratio=0.0078, tune=False)
    cfg = split.prepare(600)
    assert cfg.ce_share == 1.0 and cfg.hbm_cublas, cfg
    x = torch.randn(600, 1024, device="cuda", dtype=torch.bfloat16)
    y = split(x)
    ref = x.float() @ lin.weight.float().T + lin.bias.float()
    assert ((y.float() - ref).norm() / ref.norm()).item() < TOL[torch.bfloat16], cfg
