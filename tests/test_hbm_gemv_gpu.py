"""dak.kernels.hbm_gemv on the GPU: model-sized shapes against a float32 reference, tuned configs,
and launches inside a replayed CUDA graph."""

import pytest
import torch

import dak.kernels.hbm_gemv as hg
from dak.kernels.hbm_gemv import GemvConfig, hbm_gemv, hbm_linear, heuristic

pytestmark = pytest.mark.gpu
TOL = {torch.bfloat16: 1.2e-2, torch.float16: 2e-3}


def _rel(y, ref):
    return ((y.float() - ref).norm() / ref.norm()).item()


def _case(n, m, k, dtype, bias, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    x = torch.randn(n, k, generator=g, device="cuda").to(dtype)
    w = (torch.randn(m, k, generator=g, device="cuda") * k ** -0.5).to(dtype)
    b = (torch.randn(m, generator=g, device="cuda") * 0.5).to(dtype) if bias else None
    ref = x.float() @ w.float().T + (b.float() if bias else 0)
    return x, w, b, ref


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("n,m,k,bias", [(8, 4096, 4096, False), (1, 12288, 4096, False), (16, 28672, 4096, True),
                                        (8, 4096, 14336, False), (5, 32000, 4096, False), (3, 7168, 7168, True),
                                        (8, 1000, 1000, True)])
def test_model_shapes_match_fp32_every_config_family(dtype, n, m, k, bias):
    x, w, b, ref = _case(n, m, k, dtype, bias, m + k + n)
    for cfg in {heuristic(m, k), GemvConfig(16, 128, 3), GemvConfig(64, 256, 5)}:
        out = torch.full((n, m), float("nan"), dtype=dtype, device="cuda")
        hbm_gemv(x, w, b, cfg, out=out)
        assert not out.isnan().any(), cfg
        assert _rel(out, ref) < TOL[dtype], cfg


def test_tuned_config_is_cached_and_correct(tmp_path, monkeypatch):
    monkeypatch.setenv("DAK_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(hg.CACHE, "memory", {})
    x, w, _, ref = _case(8, 6144, 4096, torch.bfloat16, False, 1)
    cfg = hg.config_for(x, w, None, tune=True)
    assert (tmp_path / "hbm_gemv.json").exists() and cfg in hg.CANDIDATES + [GemvConfig(backend="cublas")]
    assert _rel(hbm_gemv(x, w, None, cfg), ref) < TOL[torch.bfloat16]


def test_graph_replay_uses_the_new_inputs(monkeypatch):
    monkeypatch.setenv("DAK_HBM_GEMV", "1")
    x, w, b, _ = _case(8, 11008, 4096, torch.bfloat16, True, 2)
    with torch.no_grad():
        hbm_linear(x, w, b)  # compile outside capture
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            y = hbm_linear(x, w, b)
        for seed in (3, 4):
            x.copy_(torch.randn(x.shape, generator=torch.Generator(device="cuda").manual_seed(seed), device="cuda"))
            y.fill_(float("nan"))
            g.replay()
            torch.cuda.synchronize()
            assert _rel(y, x.float() @ w.float().T + b.float()) < TOL[torch.bfloat16]


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_swiglu_gate_up_equals_gemv_then_silu_mul(dtype):
    """Llama-3-8B's fused gate/up (28672 x 4096) at N = 8 with SiLU * up in the epilogue: bit for
    bit silu_mul on the plain GEMV's output with the same config (the SwiGLU heuristic and a
    tuned-style one), and near the fp32 math."""
    from dak.kernels.fused_layer import silu_mul
    g = torch.Generator(device="cuda").manual_seed(9)
    x = torch.randn(8, 4096, generator=g, device="cuda").to(dtype)
    w = (torch.randn(28672, 4096, generator=g, device="cuda") * 4096 ** -0.5 * 2).to(dtype)
    for cfg in (hg.swiglu_config(heuristic(28672, 4096)), GemvConfig(16, 256, 6)):
        out = torch.full((8, 14336), float("nan"), dtype=dtype, device="cuda")
        got = hbm_gemv(x, w, None, cfg, out=out, swiglu=True)
        y = hbm_gemv(x, w, None, cfg)
        assert torch.equal(got, silu_mul(y[:, :14336], y[:, 14336:])), cfg
    ref = x.float() @ w.float().T
    ref = torch.nn.functional.silu(ref[:, :14336]) * ref[:, 14336:]
    assert _rel(got, ref) < 2 * TOL[dtype]


def test_opt_epilogues_are_bit_equal_to_the_eager_ops():
    """OPT-6.7B's fc1 with ReLU and fc2 with the residual add in the GEMV's epilogue (bias on):
    bit for bit the eager ops on the plain GEMV's output (the GPU rounds to nearest, as torch)."""
    x, w1, b1, _ = _case(8, 16384, 4096, torch.bfloat16, True, 5)
    h, w2, b2, _ = _case(8, 4096, 16384, torch.bfloat16, True, 6)
    res = torch.randn(8, 4096, device="cuda").to(torch.bfloat16)
    for cfg in (heuristic(16384, 4096), GemvConfig(32, 128, 4)):
        assert torch.equal(hbm_gemv(x, w1, b1, cfg, relu=True), torch.relu(hbm_gemv(x, w1, b1, cfg)))
        assert torch.equal(hbm_gemv(h, w2, b2, cfg, residual=res), res + hbm_gemv(h, w2, b2, cfg))
