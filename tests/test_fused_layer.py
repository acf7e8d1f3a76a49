"""Fused residual add + RMSNorm and SiLU * up against HF's eager code (CPU: Triton interpreter),
and HF decoder layers with them installed ($DAK_FUSED_LAYER=1) against the same layers unfused.

fp16 must match exactly (the kernels round where HF rounds); bf16 within the interpreter's
truncation (it rounds fp32 -> bf16 toward zero; the GPU rounds to nearest). Poisoned outputs,
odd sizes and strided (fused-projection) inputs included.
"""

import os

import pytest
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

from dak.kernels.fused_layer import add_rms_norm, silu_mul  # noqa: E402
from dak.runtime import fused as fz  # noqa: E402
from runtime_checks import tie_tolerance  # noqa: E402

DEV = "cuda" if torch.cuda.is_available() else "cpu"
ULP = {torch.bfloat16: 2.0 ** -7, torch.float16: 2.0 ** -10}
LOOSE = os.environ.get("TRITON_INTERPRET") == "1"


def _close(got, ref, dtype, what, ulps=1):
    """Within `ulps` of the dtype (silu's fp32 value may differ in its last bit between libraries,
    so its rounded result, times up, may be one step off), and almost all exact."""
    assert got.shape == ref.shape and got.dtype == ref.dtype, what
    assert not got.isnan().any(), f"{what}: unwritten outputs"
    diff = (got.float() - ref.float()).abs()
    if dtype == torch.float16 or not LOOSE:
        assert (diff <= ulps * ULP[dtype] * ref.float().abs() + 1e-6).all(), f"{what}: max diff {diff.max():.3g}"
        assert (diff == 0).float().mean() > 0.97, f"{what}: only {(diff == 0).float().mean():.3f} exact"
    else:
        assert (diff <= (ulps + 2) * ULP[dtype] * ref.float().abs() + 1e-6).all(), f"{what}: max diff {diff.max():.3g}"


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("shape", [(3, 1, 96), (2, 5, 130), (1, 1, 4096)])
def test_add_rms_norm_matches_hf(dtype, shape):
    from transformers.models.llama.modeling_llama import LlamaRMSNorm
    g = torch.Generator().manual_seed(sum(shape))
    norm = LlamaRMSNorm(shape[-1], eps=1e-6)
    norm.weight.data = torch.randn(shape[-1], generator=g)
    norm = norm.to(DEV, dtype)
    x, r = ((2 * torch.randn(shape, generator=g)).to(DEV, dtype) for _ in range(2))
    s, y = add_rms_norm(x, r, norm.weight, norm.variance_epsilon)
    _close(s, r + x, dtype, f"sum {shape}")
    _close(y, norm(r + x), dtype, f"norm {shape}")
    with pytest.raises(ValueError, match="shapes"):
        add_rms_norm(x, r[..., :-1], norm.weight, 1e-6)
    with pytest.raises(ValueError, match="does not match"):
        add_rms_norm(x, r, norm.weight[:-1], 1e-6)
    with pytest.raises(ValueError, match="bf16 or two fp16"):
        add_rms_norm(x.float(), r.float(), norm.weight.float(), 1e-6)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("rows,cols", [(1, 7), (5, 300), (8, 2500)])
def test_silu_mul_matches_torch_on_fused_projection_slices(dtype, rows, cols):
    g = torch.Generator().manual_seed(rows * cols)
    both = (3 * torch.randn(rows, 2 * cols, generator=g)).to(DEV, dtype)  # one fused gate/up output
    gate, up = both[:, :cols], both[:, cols:]
    _close(silu_mul(gate, up), torch.nn.functional.silu(gate) * up, dtype, f"silu_mul {rows}x{cols}", ulps=2)
    with pytest.raises(ValueError, match="shapes"):
        silu_mul(gate, up[:, 1:])
    with pytest.raises(ValueError, match="two bf16 or two fp16"):
        silu_mul(gate, up.float())


def test_without_a_gpu_or_the_interpreter_the_kernels_say_so(monkeypatch):
    import dak.kernels.fused_layer as fl
    from dak.kernels.fused_ops import rotary
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    x = torch.randn(2, 8).to(torch.float16)
    with pytest.raises(ValueError, match="needs a CUDA GPU"):
        fl.silu_mul(x, x)
    with pytest.raises(ValueError, match="needs a CUDA GPU"):
        fl.add_rms_norm(x, x, torch.ones(8, dtype=torch.float16), 1e-6)
    q, cos = torch.randn(1, 2, 1, 16).to(torch.float16), torch.randn(1, 1, 16).to(torch.float16)
    with pytest.raises(ValueError, match="rotary: tensors on cpu; the kernel needs a CUDA GPU"):
        rotary(q, q, cos, cos)
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    with pytest.raises(ValueError, match="rotary: tensors on cpu and meta; move one of them"):
        rotary(q, q.to("meta"), cos, cos)


def test_knob_and_which_layers_are_fused(monkeypatch):
    monkeypatch.setenv("DAK_FUSED_LAYER", "yes")
    with pytest.raises(ValueError, match="DAK_FUSED_LAYER must be 0 or 1"):
        fz.fused_layer_enabled()
    monkeypatch.setenv("DAK_FUSED_LAYER", "0")
    assert not fz.fused_layer_enabled()
    monkeypatch.setenv("DAK_FUSED_LAYER", "1")
    assert fz.fused_layer_enabled()
    monkeypatch.delenv("DAK_FUSED_LAYER")
    assert fz.fused_layer_enabled()  # on by default


def test_knob_off_leaves_layers_as_hf(monkeypatch):
    from transformers import AutoModelForCausalLM
    from dak.models.spec import load_config
    from dak.runtime.offload import hf_config
    _, cfg = load_config("tiny-llama")
    model = AutoModelForCausalLM.from_config(hf_config(dict(cfg, num_hidden_layers=2)))
    monkeypatch.setenv("DAK_FUSED_LAYER", "0")
    fz.install(model)
    assert not any(getattr(m.forward, "__func__", None) is fz._layer_forward for m in model.modules())
    monkeypatch.delenv("DAK_FUSED_LAYER")
    fz.install(model)
    assert sum(getattr(m.forward, "__func__", None) is fz._layer_forward for m in model.modules()) == 2


@pytest.mark.parametrize("family,addmm,defer", [("tiny-llama", "0", "0"), ("tiny-llama", "1", "0"),
                                                ("tiny-qwen2", "0", "0"), ("tiny-mistral", "1", "0"),
                                                ("tiny-llama", "0", "1"), ("tiny-qwen2", "1", "1"),
                                                ("tiny-qwen3", "1", "1")])
def test_installed_layers_match_hf(family, addmm, defer, monkeypatch):
    """Fused layers give HF's logits; with $DAK_RESIDUAL_ADDMM=1 the MLP's residual add runs inside
    down_proj's GEMM (its module is not called); with $DAK_DEFER_RESIDUAL=1 (inside fused()) it
    runs in the next layer's input norm or the final norm instead, and outside fused() not at all."""
    from transformers import AutoModelForCausalLM

    from dak.models.spec import load_config
    from dak.runtime.offload import hf_config
    _, cfg = load_config(family)
    torch.manual_seed(5)
    model = AutoModelForCausalLM.from_config(hf_config(dict(cfg, num_hidden_layers=2)), dtype=torch.float32,
                                             attn_implementation="eager").to(DEV, torch.float16).eval()
    ids = torch.randint(3, model.config.vocab_size, (2, 7), device=DEV)
    with torch.no_grad():
        ref = model(ids).logits
        layers = [m for m in model.modules() if fz._fusable_layer(m)]
        assert len(layers) == 2
        n = fz.install(model, layers=True)
        norms = 4 if family == "tiny-qwen3" else 2  # Qwen3's q and k norms besides the layer's two
        assert n == 2 + 2 * norms + 1  # the layers, their own norms (swapped too), the final norm
        calls = []
        for name in ("add_rms_norm", "silu_mul"):
            real = getattr(fz, name)
            monkeypatch.setattr(fz, name, lambda *a, real=real, name=name: calls.append(name) or real(*a))
        downs = []
        for layer in layers:
            layer.mlp.down_proj.register_forward_hook(lambda *a: downs.append(1))
        monkeypatch.setenv("DAK_RESIDUAL_ADDMM", addmm)
        monkeypatch.setenv("DAK_DEFER_RESIDUAL", defer)
        assert all(layer._dak_defer for layer in layers), "every consumer of the stack fuses the add"
        if defer == "1":
            outside = model(ids).logits  # no deferral outside the engine's forward
            assert calls == ["add_rms_norm", "silu_mul"] * 2
            torch.testing.assert_close(outside, ref, atol=2e-3, rtol=2e-3)
            calls.clear()
            downs.clear()
        with fz.fused():
            got = model(ids).logits
    if defer == "1":
        assert calls == ["add_rms_norm", "silu_mul", "add_rms_norm", "add_rms_norm", "silu_mul", "add_rms_norm"]
        assert len(downs) == 2
    else:
        assert calls == ["add_rms_norm", "silu_mul"] * 2, "the fused layer forward ran, not HF's"
        assert len(downs) == (0 if addmm == "1" else 2), "addmm replaces the down_proj call exactly when on"
    assert not got.isnan().any()
    torch.testing.assert_close(got, ref, atol=2e-3, rtol=2e-3)


def test_no_deferral_unless_every_consumer_fuses(monkeypatch):
    """A stack with one layer left as HF's (or an unfused final norm) never defers its residual."""
    from transformers import AutoModelForCausalLM

    from dak.models.spec import load_config
    from dak.runtime.offload import hf_config
    _, cfg = load_config("tiny-llama")
    model = AutoModelForCausalLM.from_config(hf_config(dict(cfg, num_hidden_layers=2)))
    model.model.layers[1].mlp.act_fn = torch.nn.GELU()  # not fusable: HF's forward stays
    fz.install(model, layers=True)
    assert not any(getattr(m, "_dak_defer", False) for m in model.modules())
    pending = torch.ones(3)
    x = torch.zeros(3)
    setattr(x, fz._PENDING, pending)
    assert fz._pop_pending(x) is pending and fz._pop_pending(x) is None  # taken once
    assert torch.equal(fz._settle(x, pending), pending) and fz._settle(x, None) is x


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_linear_add_takes_addmm_only_for_whole_hbm_bias_free_linears(dtype, monkeypatch):
    from dak.nn import SplitLinear
    torch.manual_seed(3)
    w = (torch.randn(70, 48) * 0.1).to(dtype)
    x = torch.randn(2, 5, 48).to(dtype).to(DEV)
    res = torch.randn(2, 5, 70).to(dtype).to(DEV)
    ref = (x.float().cpu() @ w.float().t() + res.float().cpu()).to(DEV)
    whole = SplitLinear(w, None, host_rows=0, tune=False)
    split = SplitLinear(w, None, host_rows=16, row_tile=16, tune=False)
    biased = SplitLinear(w, torch.zeros(70, dtype=dtype), host_rows=0, tune=False)
    plain = torch.nn.Linear(48, 70, bias=False).to(DEV, dtype)
    plain.weight.data.copy_(w)
    assert fz._hbm_weight(whole) is whole.w_hbm and fz._hbm_weight(plain) is plain.weight
    assert fz._hbm_weight(split) is None and fz._hbm_weight(biased) is None
    addmms = []
    real = torch.addmm
    monkeypatch.setattr(torch, "addmm", lambda *a: addmms.append(1) or real(*a))
    for env, mods, n in (("1", (whole, plain), 1), ("1", (split, biased), 0), ("0", (whole, plain), 0)):
        monkeypatch.setenv("DAK_RESIDUAL_ADDMM", env)
        for mod in mods:
            addmms.clear()
            got = fz._linear_add(mod, x, res)
            assert len(addmms) == n, f"{env} {type(mod).__name__}"
            assert got.shape == res.shape and got.dtype == dtype and not got.isnan().any()
            torch.testing.assert_close(got.float(), ref, atol=4 * ULP[dtype], rtol=4 * ULP[dtype])
    monkeypatch.setenv("DAK_RESIDUAL_ADDMM", "1")
    with pytest.raises(ValueError, match="DAK_RESIDUAL_ADDMM must be 0 or 1"):
        monkeypatch.setenv("DAK_RESIDUAL_ADDMM", "on")
        fz._linear_add(whole, x, res)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("shape", [(3, 1, 96), (2, 5, 130)])
def test_add_layer_norm_matches_torch(dtype, shape):
    from dak.kernels.fused_layer import add_layer_norm
    g = torch.Generator().manual_seed(sum(shape) + 1)
    w, b = (torch.randn(shape[-1], generator=g).to(DEV, dtype) for _ in range(2))
    x, r = ((2 * torch.randn(shape, generator=g)).to(DEV, dtype) for _ in range(2))
    from dak.kernels.fused_ops import layer_norm
    s, y = add_layer_norm(x, r, w, b, 1e-5)
    _close(s, r + x, dtype, f"sum {shape}")
    assert torch.equal(y, layer_norm(s, w, b, 1e-5))  # the same arithmetic as the one-launch LayerNorm
    exact = torch.nn.functional.layer_norm(s.float(), (shape[-1],), w.float(), b.float(), 1e-5)
    loose = 3 if LOOSE and dtype == torch.bfloat16 else 1
    assert (y.float() - exact).abs().max() <= loose * ULP[dtype] * exact.abs().max() / 2 + 1e-6
    with pytest.raises(ValueError, match="does not match"):
        add_layer_norm(x, r, w, b[:-1], 1e-5)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_fused_opt_layers_match_hf(dtype, monkeypatch):
    """By default ($DAK_FUSED_OPT unset) OPT's layers run the residual add + LayerNorm as one launch (HF modules,
    so fc1/fc2 stay nn.Linear: the GEMV epilogues are the runtime test's); HF's logits."""
    from transformers import AutoModelForCausalLM

    from dak.models.spec import load_config
    from dak.runtime import fused_opt
    from dak.runtime.offload import hf_config
    _, cfg = load_config("tiny-opt")
    torch.manual_seed(4)
    model = AutoModelForCausalLM.from_config(hf_config(dict(cfg, num_hidden_layers=2)), dtype=torch.float32,
                                             attn_implementation="eager").to(DEV, dtype).eval()
    ids = torch.randint(3, model.config.vocab_size, (2, 7), device=DEV)
    calls = []
    real = fused_opt.add_layer_norm
    monkeypatch.setattr(fused_opt, "add_layer_norm", lambda *a: calls.append(1) or real(*a))
    with torch.no_grad():
        ref = model(ids).logits.float()
        monkeypatch.setenv("DAK_FUSED_OPT", "0")
        fz.install(model, layers=True)
        assert not any(getattr(m.forward, "__func__", None) is fused_opt.opt_layer_forward for m in model.modules())
        monkeypatch.delenv("DAK_FUSED_OPT", raising=False)
        fz.install(model, layers=True)
        assert sum(getattr(m.forward, "__func__", None) is fused_opt.opt_layer_forward for m in model.modules()) == 2
        got = model(ids).logits.float()
    assert len(calls) == 2
    tol = 2e-2 if dtype == torch.bfloat16 else 2e-3
    assert ((got - ref).abs().max() / ref.abs().max()).item() < tol


def test_opt_layers_are_left_alone():
    from transformers import AutoModelForCausalLM

    from dak.models.spec import load_config
    from dak.runtime.offload import hf_config
    _, cfg = load_config("tiny-opt")
    model = AutoModelForCausalLM.from_config(hf_config(dict(cfg, num_hidden_layers=1)))
    assert not any(fz._fusable_layer(m) for m in model.modules())


@pytest.mark.parametrize("defer", ["0", "1"])
def test_offloaded_model_with_fused_layers_gives_hf_tokens(monkeypatch, tmp_path, defer):
    """dak.offload with fused layers (the default; host share 0.3, CUDA graphs on a GPU): HF's greedy
    tokens, also with the MLP residual add deferred to the next layer's norm ($DAK_DEFER_RESIDUAL)."""
    import dak
    from transformers import AutoModelForCausalLM

    from dak.models.spec import load_config
    from dak.runtime.offload import hf_config
    _, cfg = load_config("tiny-llama")
    torch.manual_seed(9)
    hf = AutoModelForCausalLM.from_config(hf_config(dict(cfg, num_hidden_layers=2)), dtype=torch.float32,
                                          attn_implementation="eager").to(torch.float16).eval()
    hf.save_pretrained(tmp_path)
    monkeypatch.delenv("DAK_FUSED_LAYER", raising=False)
    monkeypatch.setenv("DAK_DEFER_RESIDUAL", defer)
    steps, prompt = 12, 6
    model = dak.offload(str(tmp_path), batch=2, max_len=prompt + steps, policy="uniform", host_ratio=0.3, dtype=torch.float16,
                        tune=False)
    fused_layers = [m for m in model.modules() if getattr(m.forward, "__func__", None) is fz._layer_forward]
    assert len(fused_layers) == 2 and all(m._dak_defer for m in fused_layers)
    ids = torch.randint(3, hf.config.vocab_size, (2, prompt), generator=torch.Generator().manual_seed(1))
    seq = model.generate(ids, max_new_tokens=steps, eos_token_id=None).cpu()
    model.dak_free()
    with torch.no_grad():
        logits = hf(seq).logits.float()
    for t in range(steps):  # dak's token is HF's best, or ties it within two fp16 steps
        ref = logits[:, prompt + t - 1]
        best = ref.max(-1).values
        gap = best - ref.gather(1, seq[:, prompt + t, None])[:, 0]
        assert (gap <= tie_tolerance(best)).all(), f"step {t}: a token {gap.max():.3g} below HF's best"
