"""End to end on the CPU (Triton interpreter): the fused decode paths of dak.offload against HF eager:
dak's all-HBM GEMV with its epilogues (SiLU * up, OPT's ReLU, residual add and q scaling), rotary in
the KV append, fused q/k/v and gate/up products. Tokens are HF's greedy choice or tie it within one
fp16 step (runtime_checks.check_tokens)."""

import os

import pytest
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

import dak  # noqa: E402
from runtime_checks import DTYPE, PROMPT, check_tokens as _check_tokens, make_checkpoints  # noqa: E402


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    return make_checkpoints(tmp_path_factory)


def _fusable_groups(placement):
    """q/k/v and gate/up sets of the placement that it keeps wholly in HBM."""
    kinds = {}
    for op in placement.ops:
        kinds.setdefault(op.layer, {})[op.kind] = op.host_bytes
    sets = (("q_proj", "k_proj", "v_proj"), ("gate_proj", "up_proj"))
    return sum(1 for ks in kinds.values() for names in sets
               if all(n in ks for n in names) and not any(ks[n] for n in names))


@pytest.mark.parametrize("family,extra", [("tiny-llama", ""), ("tiny-llama", "silu"), ("tiny-opt", ""),
                                          ("tiny-opt", "opt")])
def test_hbm_gemv_decode_matches_hf(checkpoints, family, extra, monkeypatch):
    """$DAK_HBM_GEMV=1: the all-HBM linears (fused q/k/v and gate/up, the LM head) run dak's GEMV
    kernel at decode batch sizes, and the greedy tokens are HF's (or its ties); with
    $DAK_GEMV_SILU=1 too, Llama's fused gate/up GEMV applies SiLU * up itself (no silu_mul launch); with
    $DAK_FUSED_OPT=1, OPT's fc1 applies the ReLU and fc2 adds the residual in their epilogues."""
    import dak.kernels.hbm_gemv as hg
    import dak.runtime.fused as fz
    import dak.runtime.fused_opt as fo
    monkeypatch.setenv("DAK_HBM_GEMV", "1")
    monkeypatch.setenv("DAK_GEMV_SILU", "1" if extra == "silu" else "0")
    monkeypatch.setenv("DAK_FUSED_OPT", "1" if extra == "opt" else "0")
    silu = "1" if extra == "silu" else "0"
    shapes, gated, epilogues = set(), [], set()
    real = hg.hbm_gemv

    def spy(*a, **kw):
        shapes.add(tuple(a[1].shape))
        gated.append(bool(kw.get("swiglu")))
        epilogues.update(k for k in ("relu", "residual") if kw.get(k) is not None and kw.get(k) is not False)
        return real(*a, **kw)
    monkeypatch.setattr(hg, "hbm_gemv", spy)
    monkeypatch.setattr(fo, "hbm_gemv", spy)
    silu_calls = []
    real_silu = fz.silu_mul
    monkeypatch.setattr(fz, "silu_mul", lambda *a: silu_calls.append(1) or real_silu(*a))
    hf, path = checkpoints[family]
    steps = 16
    model = dak.offload(path, batch=2, max_len=PROMPT + steps, policy="uniform", host_ratio=0.0, dtype=DTYPE, tune=False)
    ids = torch.randint(3, hf.config.vocab_size, (2, PROMPT), generator=torch.Generator().manual_seed(5))
    seq = model.generate(ids, max_new_tokens=steps, eos_token_id=None)
    assert (hf.config.vocab_size, hf.config.hidden_size) in shapes and len(shapes) >= 4, shapes
    assert any(gated) == (silu == "1") and (not silu_calls) == (silu == "1" or family == "tiny-opt")
    assert epilogues == ({"relu", "residual"} if extra == "opt" else set())
    assert _check_tokens(hf, seq, steps) >= 2 * steps - 1
    model.dak_free()


@pytest.mark.parametrize("ratio", [0.0, 0.3])
def test_opt_q_scaling_in_the_qkv_gemv_matches_hf(checkpoints, ratio, monkeypatch):
    """By default ($DAK_OPT_QSCALE unset) OPT layers whose q/k/v are one all-HBM group compute q's
    scaling in that GEMV's epilogue and call the attention themselves (prefill of <= 16 tokens and
    decode), which reads q where it lies in the product (not copied); at 0.3 layers with host rows in
    q/k/v keep HF's attention. HF's greedy tokens (or its ties)."""
    import dak.kernels.hbm_gemv as hg
    import dak.nn.split_attention as sa
    import dak.runtime.fused_opt as fo
    monkeypatch.delenv("DAK_OPT_QSCALE", raising=False)
    scaled, strided = [], []
    real, attend = hg.hbm_gemv, sa.split_decode_attention
    monkeypatch.setattr(fo, "hbm_gemv", lambda *a, **kw: scaled.append(kw.get("scale_rows")) or real(*a, **kw))
    monkeypatch.setattr(sa, "split_decode_attention",
                        lambda q, *a, **kw: strided.append(not q.is_contiguous()) or attend(q, *a, **kw))
    hf, path = checkpoints["tiny-opt"]
    steps = 10
    model = dak.offload(path, batch=2, max_len=PROMPT + steps, policy="uniform", host_ratio=ratio, dtype=DTYPE, tune=False)
    ids = torch.randint(3, hf.config.vocab_size, (2, PROMPT), generator=torch.Generator().manual_seed(8))
    seq = model.generate(ids, max_new_tokens=steps, eos_token_id=None)
    heads = hf.config.num_attention_heads
    want = (hf.config.hidden_size, (hf.config.hidden_size // heads) ** -0.5)
    assert any(r == want for r in scaled) if ratio == 0.0 else True, scaled[:3]
    assert all(r is None or r == want for r in scaled)
    assert any(strided) == (ratio == 0.0)  # q sliced out of the fused product reached the kernel as it lies
    assert _check_tokens(hf, seq, steps) >= 2 * steps - 1
    model.dak_free()


@pytest.mark.parametrize("family,ratio", [("tiny-llama", 0.0), ("tiny-qwen2", 0.3), ("tiny-mistral", 1.0),
                                          ("tiny-qwen3", 0.3)])
def test_rotary_with_the_kv_append_matches_hf(checkpoints, family, ratio, monkeypatch):
    """By default ($DAK_ROTARY_KV unset) each decode step rotates q and k inside the KV append's launch (host
    requests and KV copy-ahead included at 0.3 and 1; Qwen3's q and k norms too); HF's greedy tokens (or its
    ties)."""
    import dak.kernels.rotary_append as ra
    monkeypatch.delenv("DAK_ROTARY_KV", raising=False)
    calls = []
    real = ra.rotary_append
    monkeypatch.setattr(ra, "rotary_append", lambda *a: calls.append(a[10] is not None) or real(*a))
    hf, path = checkpoints[family]
    steps = 12
    model = dak.offload(path, batch=2, max_len=PROMPT + steps, policy="uniform", host_ratio=ratio, dtype=DTYPE, tune=False)
    ids = torch.randint(3, hf.config.vocab_size, (2, PROMPT), generator=torch.Generator().manual_seed(6))
    seq = model.generate(ids, max_new_tokens=steps, eos_token_id=None)
    layers = hf.config.num_hidden_layers
    if model.dak_engine.graphs:  # a GPU: each decode graph's capture calls it once per layer, its replays not
        assert calls and len(calls) % layers == 0 and len(calls) <= (steps - 1) * layers, len(calls)
    else:
        assert len(calls) == (steps - 1) * layers  # eager: every decode step, every layer
    assert all(calls) if family == "tiny-qwen3" else not any(calls)  # Qwen3's q/k norms ride in that launch
    assert _check_tokens(hf, seq, steps) >= 2 * steps - 1
    model.dak_free()


@pytest.mark.parametrize("family", ["tiny-llama", "tiny-opt", "tiny-qwen2"])
@pytest.mark.parametrize("ratio", [0.0, 0.3])
def test_fused_projections_match_hf_and_the_unfused_model(checkpoints, family, ratio):
    """At 0.3 the consolidated plan (an HBM budget, as bench e2e gives) keeps some sets in HBM."""
    from dak.baselines.e2e import budget_for
    from dak.hardware import get_profile
    from dak.models import Workload
    from dak.models.spec import ModelSpec
    hf, path = checkpoints[family]
    steps = 8
    spec = ModelSpec.from_config(hf.config.to_dict())
    budget = budget_for(spec, Workload("decode", 2, PROMPT, steps, "fp16"), ratio, get_profile("h200-pcie"))
    g = torch.Generator().manual_seed(11)
    ids = torch.randint(3, hf.config.vocab_size, (2, PROMPT), generator=g)
    runs = {}
    for fuse in (False, True):
        model = dak.offload(path, batch=2, prompt_len=PROMPT, gen_len=steps, hbm_budget=budget, dtype=DTYPE,
                            tune=False, fuse_projections=fuse)
        want = _fusable_groups(model.dak_placement) if fuse else 0
        assert model.dak_fused == want and (ratio > 0 or not fuse or want == (2 if family == "tiny-opt" else 4))
        if ratio > 0:
            assert 0 < model.dak_placement.offload_ratio < 1
        runs[fuse] = (model.generate(ids, max_new_tokens=steps, eos_token_id=None), model.dak_engine.logits.clone())
        model.dak_free()
    seq, logits = runs[True]
    assert _check_tokens(hf, seq, steps) >= 2 * steps - 1
    if torch.equal(seq, runs[False][0]):
        torch.testing.assert_close(logits, runs[False][1], atol=2e-2, rtol=2e-2)
