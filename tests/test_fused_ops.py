"""Fused RMSNorm and rotary embedding against HF's eager code (CPU: Triton interpreter).

The kernels round where HF rounds, so outputs must match HF's to within one ulp of the dtype
(fp32 sums may differ in order); poisoned outputs and odd sizes included.
"""

import os

import pytest
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

from dak.kernels import fused_ops  # noqa: E402
from dak.kernels.fused_ops import layer_norm, rms_norm, rotary  # noqa: E402
from dak.runtime.fused import fused, install  # noqa: E402

DEV = "cuda" if torch.cuda.is_available() else "cpu"
ULP = {torch.bfloat16: 2.0 ** -7, torch.float16: 2.0 ** -10}


# The interpreter truncates fp32 -> bf16 (the GPU rounds to nearest): allow that, there only.
TRUNCATES = os.environ.get("TRITON_INTERPRET") == "1"


def _close(got, ref, dtype, what, scale=None):
    assert got.shape == ref.shape and got.dtype == ref.dtype, what
    assert not got.isnan().any(), f"{what}: unwritten outputs"
    diff = (got.float() - ref.float()).abs()
    loose = TRUNCATES and dtype == torch.bfloat16
    mag = ref.float().abs() if scale is None else ref.float().abs() + scale  # scale: summed terms' size
    tol = (3 if loose else 1) * ULP[dtype] * mag + 1e-6
    assert (diff <= tol).all(), f"{what}: max diff {diff.max():.3g}"
    if not loose:
        assert (diff == 0).float().mean() > 0.97, f"{what}: only {(diff == 0).float().mean():.3f} exact"


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("shape", [(3, 1, 96), (2, 5, 130), (7, 4096)])
def test_rms_norm_matches_hf(dtype, shape):
    from transformers.models.llama.modeling_llama import LlamaRMSNorm
    g = torch.Generator().manual_seed(sum(shape))
    norm = LlamaRMSNorm(shape[-1], eps=1e-5)
    norm.weight.data = torch.randn(shape[-1], generator=g)
    norm = norm.to(DEV, dtype)
    x = (3 * torch.randn(shape, generator=g)).to(DEV, dtype)
    ref = norm(x)
    _close(rms_norm(x, norm.weight, norm.variance_epsilon), ref, dtype, f"rms_norm {shape}")
    install(norm)  # a bare norm module: its forward is swapped
    _close(norm(x), ref, dtype, "installed forward")
    with pytest.raises(ValueError, match="does not match"):
        rms_norm(x, norm.weight[:-1], 1e-5)
    with pytest.raises(ValueError, match="weight is"):
        rms_norm(x.float(), norm.weight, 1e-5)
    with pytest.raises(ValueError, match="on meta"):
        rms_norm(x, norm.weight.to("meta"), 1e-5)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("shape", [(3, 1, 96), (2, 5, 130), (7, 4096)])
def test_layer_norm_matches_torch(dtype, shape):
    """One rounding of an fp32 result, as F.layer_norm: within one ulp of torch's (its fp32
    sums run in another order), on odd widths, a mean far from zero, poisoned outputs."""
    g = torch.Generator().manual_seed(sum(shape) + 1)
    norm = torch.nn.LayerNorm(shape[-1], eps=1e-5)
    norm.weight.data = torch.randn(shape[-1], generator=g)
    norm.bias.data = torch.randn(shape[-1], generator=g)
    norm = norm.to(DEV, dtype)
    x = (3 * torch.randn(shape, generator=g) + 5).to(DEV, dtype)
    with torch.no_grad():
        ref = norm(x)
        exact = torch.nn.functional.layer_norm(x.float(), shape[-1:], norm.weight.float(), norm.bias.float(), 1e-5)
    got = layer_norm(x, norm.weight, norm.bias, norm.eps)
    loose = 3 if TRUNCATES and dtype == torch.bfloat16 else 1
    assert (got.float() - exact).abs().max() <= loose * ULP[dtype] * exact.abs().max() / 2 + 1e-6
    _close_ulp = (got.float() - ref.float()).abs() <= loose * ULP[dtype] * ref.float().abs() + 1e-3 * ULP[dtype]
    assert _close_ulp.all(), f"layer_norm {shape}: {(got.float() - ref.float()).abs().max():.3g}"
    install(norm)
    with torch.no_grad():
        assert torch.equal(norm(x), got)  # the installed forward is the fused kernel
    with pytest.raises(ValueError, match="bias .* does not match"):
        layer_norm(x, norm.weight, norm.bias[:-1], 1e-5)
    with pytest.raises(ValueError, match="bias is"):
        layer_norm(x, norm.weight, norm.bias.float(), 1e-5)
    plain = torch.nn.LayerNorm(shape[-1], elementwise_affine=False).to(DEV, dtype)
    install(plain)  # no weight: not swapped, torch's own forward
    assert "forward" not in vars(plain)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("b,hq,hk,l,d,shared", [(2, 4, 2, 1, 64, False), (3, 2, 1, 5, 16, True),
                                                (1, 3, 3, 7, 128, False)])
@pytest.mark.parametrize("one_launch", ["0", "1"])
def test_rotary_matches_hf(dtype, b, hq, hk, l, d, shared, one_launch, monkeypatch):
    """One launch (default) or two ($DAK_ROTARY_ONE_LAUNCH=0): HF's values, bit for bit alike."""
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb
    g = torch.Generator().manual_seed(b * 100 + l)
    q = torch.randn(b, l, hq, d, generator=g).to(DEV, dtype).transpose(1, 2)  # HF's strided view
    k = torch.randn(b, l, hk, d, generator=g).to(DEV, dtype).transpose(1, 2)
    ang = torch.randn(1 if shared else b, l, d, generator=g) * 3
    cos, sin = ang.cos().to(DEV, dtype), ang.sin().to(DEV, dtype)
    ref_q, ref_k = apply_rotary_pos_emb(q, k, cos, sin)
    monkeypatch.setenv("DAK_ROTARY_ONE_LAUNCH", "1" if one_launch == "0" else "0")
    other = rotary(q, k, cos, sin)
    monkeypatch.setenv("DAK_ROTARY_ONE_LAUNCH", one_launch)
    got_q, got_k = rotary(q, k, cos, sin)
    assert got_q.is_contiguous() and got_k.is_contiguous()
    assert torch.equal(got_q, other[0]) and torch.equal(got_k, other[1]), "one launch must equal two"
    for rows in (1, 8):  # a GPU's one head vector a program, and blocks of 8 with a partial last one
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(fused_ops, "rotary_rows", lambda: rows)
            again = rotary(q, k, cos, sin)
        assert torch.equal(again[0], got_q) and torch.equal(again[1], got_k), rows
    def terms(x):  # |x * cos| + |rotate_half(x) * sin|: the size of the two rounded products
        c, s_ = cos.float().unsqueeze(1), sin.float().unsqueeze(1)
        x = x.float()
        return (x * c).abs() + (torch.cat((-x[..., d // 2:], x[..., :d // 2]), -1) * s_).abs()
    _close(got_q, ref_q.contiguous(), dtype, "q", terms(q))
    _close(got_k, ref_k.contiguous(), dtype, "k", terms(k))
    with pytest.raises(ValueError, match="power-of-two"):
        rotary(q[..., :12], k[..., :12], cos[..., :12], sin[..., :12])
    launches = []  # unset: one launch, so the per-tensor kernel is not called
    monkeypatch.setattr(fused_ops, "_rotate", lambda *a: launches.append(a) or a[0])
    monkeypatch.delenv("DAK_ROTARY_ONE_LAUNCH")
    assert torch.equal(rotary(q, k, cos, sin)[0], got_q) and not launches
    monkeypatch.setenv("DAK_ROTARY_ONE_LAUNCH", "0")
    rotary(q, k, cos, sin)
    assert len(launches) == 2
    monkeypatch.setenv("DAK_ROTARY_ONE_LAUNCH", "2")
    with pytest.raises(ValueError, match="DAK_ROTARY_ONE_LAUNCH must be 0 or 1"):
        rotary(q, k, cos, sin)


def test_installed_rotary_is_used_only_inside_fused():
    import transformers.models.llama.modeling_llama as hf
    from transformers import LlamaConfig, LlamaForCausalLM
    cfg = LlamaConfig(hidden_size=64, intermediate_size=96, num_hidden_layers=1, num_attention_heads=2,
                      num_key_value_heads=1, vocab_size=50)
    model = LlamaForCausalLM(cfg)
    assert install(model) == 4  # two norms per layer, the final norm, and the layer (fused add + norm, SiLU * up)
    wrapped = hf.apply_rotary_pos_emb
    assert install(model) == 4 and hf.apply_rotary_pos_emb is wrapped, "installing twice must not re-wrap"
    q = torch.randn(1, 2, 3, 16).to(DEV, torch.float16)
    k = torch.randn(1, 1, 3, 16).to(DEV, torch.float16)
    cos = torch.randn(1, 3, 16).to(DEV, torch.float16)
    calls = []
    orig = wrapped.dak_wraps
    import dak.runtime.fused as fz
    real = fz.rotary
    fz.rotary = lambda *a: calls.append(1) or real(*a)
    try:
        outside = wrapped(q, k, cos, cos)
        with fused():
            inside = wrapped(q, k, cos, cos)
    finally:
        fz.rotary = real
    assert calls == [1], "the fused kernel runs inside fused() only"
    for a, b_ in zip(outside, orig(q, k, cos, cos)):
        assert torch.equal(a, b_)
    _close(inside[0], outside[0].contiguous(), torch.float16, "inside vs outside")
