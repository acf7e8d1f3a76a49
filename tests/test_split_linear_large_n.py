"""Large N without read amplification, on the CPU: the Triton host-once path under
TRITON_INTERPRET=1 against a float64 reference, link-byte counting, config checks, the tuner's
knobs, and an nvcc compile check of the CUDA cluster-multicast kernel for sm_90a."""

import os

import pytest
import torch

if not torch.cuda.is_available():  # conftest does this too; kept for running the file alone
    os.environ.setdefault("TRITON_INTERPRET", "1")

from dak.host import PinnedBuffer, device_matrix  # noqa: E402
from dak.kernels import host_multicast  # noqa: E402
from dak.kernels.config import KernelConfig, finalize, heuristic_config  # noqa: E402
from dak.kernels.split_linear_checks import host_link_bytes  # noqa: E402
from dak.kernels.split_linear_route import run_split_linear  # noqa: E402
from dak.kernels.tuning import _knobs  # noqa: E402
from dak.runtime_env import kernel_device  # noqa: E402

TOL = {torch.bfloat16: 1e-2, torch.float16: 2e-3}
DEV = kernel_device()


def _once_case(m, k, n, m_h, dtype, bias, host_tma, block_m=16, block_n=16, block_k=32, seed=0, ce=0.0):
    g = torch.Generator().manual_seed(seed)
    w, x = torch.randn(m, k, generator=g), torch.randn(n, k, generator=g)
    b = torch.randn(m, generator=g) if bias else None
    ref = x.to(dtype).double() @ w.to(dtype).double().T + (b.to(dtype).double() if bias else 0)
    wh = PinnedBuffer.from_tensor(w[:m_h].to(dtype))
    wg = device_matrix(m - m_h, k, dtype, DEV)
    wg.copy_(w[m_h:].to(dtype))
    cfg = finalize(KernelConfig(block_m=block_m, block_n=block_n, block_k=block_k, host_programs=3,
                                hbm_programs=2, host_tma=host_tma, host_kernel="triton_once", ce_share=ce,
                                ce_chunks=2), m_h, m - m_h, sms=4)
    out = torch.full((n, m), float("nan"), dtype=dtype, device=DEV)  # poisoned
    res = run_split_linear(x.to(dtype).to(DEV), wh.tensor, wg, None if b is None else b.to(dtype).to(DEV),
                           cfg, sms=4, out=out)
    assert res is out
    assert not out.isnan().any(), "some outputs were never written"
    err = ((out.double().cpu() - ref).norm() / ref.norm()).item()
    assert err < TOL[dtype], f"rel err {err} for m={m} k={k} n={n} m_h={m_h} {dtype}"


@pytest.mark.parametrize("n,m,k,m_h", [(33, 77, 72, 40), (50, 45, 40, 45), (17, 40, 56, 33), (70, 50, 24, 16)])
def test_triton_once_matches_reference(n, m, k, m_h):
    """N over several token blocks (not a multiple of block_n), odd M and K, partial/all host rows."""
    for i, dtype in enumerate((torch.bfloat16, torch.float16)):
        _once_case(m, k, n, m_h, dtype, bias=(n + i) % 2 == 0, host_tma=(i == 1), seed=n + 7 * i)


def test_triton_once_bigger_tiles_and_copy_engine_share():
    _once_case(100, 100, 70, 64, torch.float16, bias=True, host_tma=False, block_m=32, block_n=32, block_k=64)
    _once_case(80, 48, 40, 64, torch.bfloat16, bias=False, host_tma=False, ce=0.5, seed=3)


def test_triton_once_shared_slots_across_shapes():
    """Back-to-back launches of different K and tile counts reuse (and grow) one slot workspace."""
    for seed, (m, k, n, m_h) in enumerate([(48, 32, 40, 48), (64, 96, 20, 48), (48, 32, 40, 48)]):
        _once_case(m, k, n, m_h, torch.bfloat16, bias=True, host_tma=False, seed=seed)


def test_host_link_bytes_counts_each_path():
    base = KernelConfig(block_n=64)
    m_h, k = 1024, 4096
    once_bytes = m_h * k * 2
    for n in (256, 512, 1024, 2048, 4096, 8192):
        assert host_link_bytes(n, m_h, k, 2, base) == once_bytes * (n // 64)
        assert host_link_bytes(n, m_h, k, 2, KernelConfig(block_n=64, host_kernel="triton_once")) == once_bytes
        mc = KernelConfig(host_kernel="cuda_multicast", mc_cluster=4, mc_block_n=128)
        assert host_link_bytes(n, m_h, k, 2, mc) == once_bytes * -(-n // 512)
    assert host_link_bytes(8, m_h, k, 2, base) == once_bytes  # decode: one token tile
    assert host_link_bytes(4096, m_h, k, 2, KernelConfig(block_m=16, ce_share=1.0)) == once_bytes


def test_config_checks_and_defaults():
    with pytest.raises(ValueError, match="host_kernel"):
        KernelConfig(host_kernel="cuda")
    for bad in (dict(mc_cluster=3), dict(mc_block_m=32), dict(mc_block_m=128, mc_block_n=256),
                dict(mc_block_n=512), dict(mc_cluster=8, mc_block_m=32)):
        with pytest.raises(ValueError, match="multicast"):
            KernelConfig(**bad)
    assert heuristic_config(512, 1024, 4096, 4096, 132, True).host_kernel == "triton_once"
    assert heuristic_config(8, 1024, 4096, 4096, 132, True).host_kernel == "triton"
    mc = finalize(KernelConfig(host_kernel="cuda_multicast", host_programs=132), 64, 64, sms=132)
    assert mc.host_programs == 132  # CTAs of the CUDA kernel, not clamped to Triton row tiles


def test_tuner_offers_host_once_kernels_only_for_large_n():
    names = dict(_knobs(512, 1024, 1024, 132, True))
    assert names["host_kernel"] == ["triton", "triton_once", "cuda_multicast"]
    assert {"mc_cluster", "mc_block_n", "mc_block_m"} <= set(names)
    assert "host_kernel" not in dict(_knobs(64, 1024, 1024, 132, True))
    assert "host_kernel" not in dict(_knobs(512, 0, 1024, 132, True))


def test_multicast_path_refuses_cpu_tensors_clearly():
    from dak.kernels.split_linear_mc import split_linear_mc
    if DEV.type == "cuda":
        pytest.skip("the refusal off the GPU; tests/test_split_linear_large_n_gpu.py runs the multicast path")
    x = torch.randn(4, 64).to(torch.bfloat16).to(DEV)
    wh = PinnedBuffer.from_tensor(torch.randn(64, 64).to(torch.bfloat16))
    wg = device_matrix(0, 64, torch.bfloat16, DEV)
    with pytest.raises(ValueError, match="cannot run here: needs a CUDA GPU"):
        split_linear_mc(x, wh.tensor, wg, None, KernelConfig(host_kernel="cuda_multicast"), sms=4)


@pytest.mark.parametrize("variant", [(64, 128, 4, torch.bfloat16), (64, 64, 2, torch.float16),
                                     (128, 128, 8, torch.bfloat16)])
def test_cuda_source_compiles_for_sm90a(variant, tmp_path, monkeypatch):
    nvcc = host_multicast.nvcc_path()
    if nvcc is None:
        pytest.skip("nvcc not found (PATH, $DAK_NVCC, $CUDA_HOME/bin, /usr/local/cuda/bin): "
                    "cannot compile-check the CUDA multicast kernel on this machine")
    monkeypatch.setenv("DAK_CACHE_DIR", str(tmp_path))
    bm, bn, cl, dtype = variant
    cubin = host_multicast.compile_cubin(bm, bn, cl, dtype, nvcc=nvcc)
    assert b"dak_host_multicast" in cubin
    assert list((tmp_path / "cuda").glob("*.cubin")), "the cubin was not cached"
    assert host_multicast.compile_cubin(bm, bn, cl, dtype, nvcc=nvcc) == cubin  # from the cache
