"""End to end on the CPU (Triton interpreter): dak.offload of tiny HF models against HF eager.

Every family (Llama, OPT, Qwen2, Mistral; 2 layers) is saved as a safetensors checkpoint,
offloaded at host shares 0, ~0.3 and 1, and its greedy tokens compared with HF's eager
generate. fp16 keeps exact ties rare; a remaining mismatch is accepted only where HF's own
logits tie to within one fp16 step (checked by teacher forcing HF on dak's tokens).
"""

import os

import pytest
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

import dak  # noqa: E402
from dak.models.spec import load_config  # noqa: E402
from dak.nn import SplitLinear  # noqa: E402
from dak.runtime.offload import hf_config  # noqa: E402

PROMPT, DTYPE = 6, torch.float16


def _hf_model(family: str, layers: int = 2):
    from transformers import AutoModelForCausalLM
    _, cfg = load_config(family)
    cfg = dict(cfg, num_hidden_layers=layers)
    torch.manual_seed(len(family))
    model = AutoModelForCausalLM.from_config(hf_config(cfg), dtype=torch.float32, attn_implementation="eager")
    return model.to(DTYPE).eval()


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    out = {}
    for fam in ("tiny-llama", "tiny-opt", "tiny-qwen2", "tiny-mistral"):
        hf = _hf_model(fam)
        path = tmp_path_factory.mktemp(fam)
        hf.save_pretrained(path)
        out[fam] = (hf, str(path))
    return out


def _check_tokens(hf, seq, steps):
    """dak's token at every step is HF's greedy choice, or ties it within one fp16 step."""
    with torch.no_grad():
        logits = hf(seq).logits.float()
    exact = 0
    for t in range(steps):
        ref = logits[:, PROMPT + t - 1]
        got = seq[:, PROMPT + t]
        best = ref.max(-1).values
        gap = best - ref.gather(1, got[:, None])[:, 0]
        tol = best.abs() * 2.0 ** -10 + 1e-6
        assert (gap <= tol).all(), f"step {t}: dak chose a token {gap.max():.4g} below HF's best"
        exact += int((ref.argmax(-1) == got).sum())
    return exact


@pytest.mark.parametrize("family", ["tiny-llama", "tiny-opt", "tiny-qwen2", "tiny-mistral"])
@pytest.mark.parametrize("ratio", [0.0, 0.3, 1.0])
def test_greedy_tokens_match_hf_eager(checkpoints, family, ratio):
    hf, path = checkpoints[family]
    steps = 32
    model = dak.offload(path, batch=2, max_len=PROMPT + steps, host_ratio=ratio, dtype=DTYPE, tune=False)
    got_ratio = model.dak_placement.offload_ratio
    assert (got_ratio == 0) == (ratio == 0) and (got_ratio == 1) == (ratio == 1), got_ratio
    g = torch.Generator().manual_seed(7)
    ids = torch.randint(3, hf.config.vocab_size, (2, PROMPT), generator=g)
    seq = model.generate(ids, max_new_tokens=steps)
    assert seq.shape == (2, PROMPT + steps) and torch.equal(seq[:, :PROMPT], ids)
    ref = hf.generate(ids, max_new_tokens=steps, min_new_tokens=steps, do_sample=False,
                      eos_token_id=None, pad_token_id=0)
    exact = _check_tokens(hf, seq, steps)
    assert exact >= 2 * steps - 1, f"{2 * steps - exact} of {2 * steps} tokens were only ties"
    if exact == 2 * steps:
        assert torch.equal(seq, ref), "every step agreed with HF's argmax, so the sequences must match"
    model.dak_free()


def test_prefill_logits_match_hf(checkpoints):
    hf, path = checkpoints["tiny-qwen2"]
    model = dak.offload(path, batch=3, max_len=16, host_ratio=0.5, dtype=DTYPE, tune=False)
    ids = torch.randint(3, hf.config.vocab_size, (3, 9))
    lens = torch.tensor([9, 4, 1], dtype=torch.int32)
    eng = model.dak_engine
    ids_d, plen, _ = eng._check(ids, 1, lens)
    logits = eng.prefill(ids_d, plen)
    for b, n in enumerate(lens.tolist()):
        with torch.no_grad():
            ref = hf(ids[b:b + 1, :n]).logits[0, -1].float()
        err = (logits[b].cpu() - ref).abs().max() / ref.abs().max()
        assert err < 1e-2, f"request {b} (prompt {n}): rel err {err}"


def test_prefill_in_request_chunks_gives_the_same_tokens(checkpoints):
    """Prefill split into request chunks (so activations fit the free HBM) changes nothing."""
    hf, path = checkpoints["tiny-llama"]
    model = dak.offload(path, batch=3, max_len=PROMPT + 4, host_ratio=0.3, dtype=DTYPE, tune=False)
    ids = torch.randint(3, hf.config.vocab_size, (3, PROMPT), generator=torch.Generator().manual_seed(3))
    plen = torch.tensor([PROMPT, 2, 4])
    engine = model.dak_engine
    whole = model.generate(ids, max_new_tokens=4, prompt_lengths=plen)
    for tokens in (PROMPT, 2 * PROMPT):  # 1 and 2 requests per forward
        engine.prefill_tokens = tokens
        assert engine.prefill_rows(3, PROMPT) == tokens // PROMPT
        assert torch.equal(model.generate(ids, max_new_tokens=4, prompt_lengths=plen), whole)
    engine.prefill_tokens = None  # sized from free HBM: one request's activations, then all
    from dak.models.ops import Workload, minimum_hbm_set
    from dak.models.spec import ModelSpec
    one = 2.5 * minimum_hbm_set(ModelSpec.from_config(model.config.to_dict()),
                                Workload("prefill", 1, PROMPT, 0)).workspace
    assert engine.prefill_rows(3, PROMPT, free_bytes=int(one / 0.8) + 1) == 1
    assert engine.prefill_rows(3, PROMPT, free_bytes=int(2 * one / 0.8) + 1) == 2
    assert engine.prefill_rows(3, PROMPT, free_bytes=0) == 1, "at least one request per forward"
    assert engine.prefill_rows(3, PROMPT, free_bytes=10 ** 12) == 3
    with pytest.raises(ValueError, match="prefill_tokens"):
        type(engine)(model, model.dak_kv, graphs=False, prefill_tokens=0)
    model.dak_free()


def test_kv_bucket_caps():
    from dak.runtime.engine import kv_bucket_caps
    assert kv_bucket_caps(64, 1) == (64,) and kv_bucket_caps(64, 4) == (16, 32, 48, 64)
    assert kv_bucket_caps(10, 4) == (3, 5, 8, 10) and kv_bucket_caps(3, 8) == (1, 2, 3)
    for bad in (0, -1, 2.5, True):
        with pytest.raises(ValueError, match="kv_buckets must be an integer >= 1"):
            kv_bucket_caps(64, bad)


def test_kv_buckets_change_no_tokens_and_reset_the_copy_rows(checkpoints, monkeypatch):
    """Eager decoding with length buckets sets the attention's copy rows to exactly the rows in
    use each step (the longest request's keys), never fewer, and clears them afterwards."""
    from dak.host import pinned_bytes
    from dak.runtime.kv import DakKV
    hf, path = checkpoints["tiny-llama"]
    ids = torch.randint(3, hf.config.vocab_size, (2, PROMPT), generator=torch.Generator().manual_seed(5))
    plain = dak.offload(path, batch=2, max_len=PROMPT + 6, host_ratio=1.0, dtype=DTYPE, tune=False)
    want = plain.generate(ids, max_new_tokens=6)
    plain.dak_free()
    seen = []
    real = DakKV.set_copy_rows
    monkeypatch.setattr(DakKV, "set_copy_rows", lambda self, rows: (seen.append(rows), real(self, rows)))
    model = dak.offload(path, batch=2, max_len=PROMPT + 6, host_ratio=1.0, dtype=DTYPE, tune=False, kv_buckets=3)
    assert model.dak_engine.kv_caps == (-(-(PROMPT + 6) // 3), -(-2 * (PROMPT + 6) // 3), PROMPT + 6)
    assert torch.equal(model.generate(ids, max_new_tokens=6), want)
    assert seen == [PROMPT + t for t in range(1, 6)] + [None]
    assert all(c.copy_rows is None for c in model.dak_kv.caches.values())
    model.dak_free()
    before = pinned_bytes()
    with pytest.raises(ValueError, match="kv_buckets"):
        dak.offload(path, batch=2, max_len=PROMPT + 6, host_ratio=1.0, dtype=DTYPE, tune=False, kv_buckets=0)
    assert pinned_bytes() == before


@pytest.mark.parametrize("policy", ["consolidated", "streamed"])
@pytest.mark.parametrize("family", ["tiny-llama", "tiny-opt"])
def test_consolidated_policy_runs_and_matches_hf(checkpoints, family, policy):
    """The consolidated placement (fewer, larger host parts) and the streamed one (every host
    row through the copy engine) go through the same runtime."""
    from dak.baselines.e2e import budget_for
    from dak.hardware import get_profile
    from dak.models.ops import Workload
    from dak.models.spec import ModelSpec
    from dak.planner import plan
    hf, path = checkpoints[family]
    steps = 8
    spec = ModelSpec.from_config(hf.config.to_dict())
    w = Workload("decode", 2, PROMPT, steps, "fp16")
    budget = budget_for(spec, w, 0.3, get_profile("h200-pcie"))
    model = dak.offload(path, batch=2, prompt_len=PROMPT, gen_len=steps, hbm_budget=budget,
                        policy=policy, dtype=DTYPE, tune=False)
    pl = model.dak_placement
    assert pl.policy == policy and pl.host_bytes >= pl.required_host_bytes > 0
    splits = [m for m in model.modules() if isinstance(m, SplitLinear)]
    assert splits and all(m.one_gemv == pl.one_gemv for m in splits)  # the plan's one-GEMV choice reaches them
    if policy == "consolidated":
        assert pl.predicted_s <= plan(spec, w, get_profile("h200-pcie"), budget, "greedy").predicted_s * (1 + 1e-9)
    ids = torch.randint(3, hf.config.vocab_size, (2, PROMPT), generator=torch.Generator().manual_seed(9))
    seq = model.generate(ids, max_new_tokens=steps)
    assert _check_tokens(hf, seq, steps) >= 2 * steps - 1
    model.dak_free()


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
    model = dak.offload(path, batch=2, max_len=PROMPT + steps, host_ratio=0.0, dtype=DTYPE, tune=False)
    ids = torch.randint(3, hf.config.vocab_size, (2, PROMPT), generator=torch.Generator().manual_seed(5))
    seq = model.generate(ids, max_new_tokens=steps)
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
    model = dak.offload(path, batch=2, max_len=PROMPT + steps, host_ratio=ratio, dtype=DTYPE, tune=False)
    ids = torch.randint(3, hf.config.vocab_size, (2, PROMPT), generator=torch.Generator().manual_seed(8))
    seq = model.generate(ids, max_new_tokens=steps)
    heads = hf.config.num_attention_heads
    want = (hf.config.hidden_size, (hf.config.hidden_size // heads) ** -0.5)
    assert any(r == want for r in scaled) if ratio == 0.0 else True, scaled[:3]
    assert all(r is None or r == want for r in scaled)
    assert any(strided) == (ratio == 0.0)  # q sliced out of the fused product reached the kernel as it lies
    assert _check_tokens(hf, seq, steps) >= 2 * steps - 1
    model.dak_free()


@pytest.mark.parametrize("family,ratio", [("tiny-llama", 0.0), ("tiny-qwen2", 0.3), ("tiny-mistral", 1.0)])
def test_rotary_with_the_kv_append_matches_hf(checkpoints, family, ratio, monkeypatch):
    """By default ($DAK_ROTARY_KV unset) each decode step rotates q and k inside the KV append's launch (host
    requests and KV copy-ahead included at 0.3 and 1); HF's greedy tokens (or its ties)."""
    import dak.kernels.rotary_append as ra
    monkeypatch.delenv("DAK_ROTARY_KV", raising=False)
    calls = []
    real = ra.rotary_append
    monkeypatch.setattr(ra, "rotary_append", lambda *a: calls.append(1) or real(*a))
    hf, path = checkpoints[family]
    steps = 12
    model = dak.offload(path, batch=2, max_len=PROMPT + steps, host_ratio=ratio, dtype=DTYPE, tune=False)
    ids = torch.randint(3, hf.config.vocab_size, (2, PROMPT), generator=torch.Generator().manual_seed(6))
    seq = model.generate(ids, max_new_tokens=steps)
    assert len(calls) == (steps - 1) * hf.config.num_hidden_layers  # every decode step, every layer
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
        runs[fuse] = (model.generate(ids, max_new_tokens=steps), model.dak_engine.logits.clone())
        model.dak_free()
    seq, logits = runs[True]
    assert _check_tokens(hf, seq, steps) >= 2 * steps - 1
    if torch.equal(seq, runs[False][0]):
        torch.testing.assert_close(logits, runs[False][1], atol=2e-2, rtol=2e-2)


def test_progress_bars_count_every_byte(checkpoints, capsys):
    """progress=True: placing and then loading (or filling) each reach 100%; False: silent."""
    _, path = checkpoints["tiny-opt"]
    capsys.readouterr()
    model = dak.offload(path, batch=1, max_len=8, host_ratio=0.3, dtype=DTYPE, tune=False, progress=True)
    err = capsys.readouterr().err
    for what in ("dak: placing", "dak: loading checkpoint"):
        line = [seg for seg in err.replace("\r", "\n").split("\n") if what in seg][-1]
        assert "100%" in line, line
    model.dak_free()
    model = dak.offload("tiny-opt", batch=1, max_len=8, host_ratio=0.3, dtype=DTYPE, tune=False, progress=True)
    err = capsys.readouterr().err
    assert "100%" in [seg for seg in err.replace("\r", "\n").split("\n") if "filling random weights" in seg][-1]
    model.dak_free()
    model = dak.offload("tiny-opt", batch=1, max_len=8, host_ratio=0.3, dtype=DTYPE, tune=False, progress=False)
    assert "dak: " not in capsys.readouterr().err
    model.dak_free()
    with pytest.raises(ValueError, match="progress must be True, False or None"):
        dak.offload("tiny-opt", batch=1, max_len=8, progress="yes")


def test_attention_mask_left_or_right_padding_continues_each_prompt(checkpoints):
    """A padded batch as a tokenizer returns it (left or right padding, pads any id): the same new
    tokens as prompt_lengths, each continuing its own prompt (HF teacher-forced on it unpadded)."""
    hf, path = checkpoints["tiny-qwen2"]
    steps, lens = 8, [PROMPT, 2, 4]
    model = dak.offload(path, batch=3, max_len=PROMPT + steps, host_ratio=0.3, dtype=DTYPE, tune=False)
    g = torch.Generator().manual_seed(4)
    prompts = [torch.randint(3, hf.config.vocab_size, (n,), generator=g) for n in lens]
    pad = hf.config.vocab_size + 7  # not a token: never read
    right, left = torch.full((3, PROMPT), pad), torch.full((3, PROMPT), pad)
    right_mask, left_mask = torch.zeros(3, PROMPT, dtype=torch.long), torch.zeros(3, PROMPT, dtype=torch.long)
    for b, p in enumerate(prompts):
        right[b, :len(p)], right_mask[b, :len(p)] = p, 1
        left[b, PROMPT - len(p):], left_mask[b, PROMPT - len(p):] = p, 1
    by_len = model.generate(right.masked_fill(right_mask == 0, 0), max_new_tokens=steps, prompt_lengths=lens)
    got_right = model.generate(right, max_new_tokens=steps, attention_mask=right_mask)
    got_left = model.generate(left, max_new_tokens=steps, attention_mask=left_mask.bool())
    assert torch.equal(got_right[:, :PROMPT], right) and torch.equal(got_left[:, :PROMPT], left)
    assert torch.equal(got_right[:, PROMPT:], by_len[:, PROMPT:])
    assert torch.equal(got_left[:, PROMPT:], by_len[:, PROMPT:])
    for b, p in enumerate(prompts):
        seq = torch.cat([p, got_left[b, PROMPT:]])[None]
        with torch.no_grad():
            logits = hf(seq).logits[0].float()
        for t in range(steps):
            ref, tok = logits[len(p) + t - 1], seq[0, len(p) + t]
            assert ref.max() - ref[tok] <= ref.max().abs() * 2.0 ** -10 + 1e-6, (b, t)
    for mask, msg in ((torch.tensor([[1, 0, 1, 1, 1, 1]] * 3), "left- or right-padded"),
                      (torch.cat([left_mask[:2], right_mask[2:]]), "left- or right-padded"),
                      (torch.zeros(3, PROMPT, dtype=torch.long), "at least one 1"),
                      (2 * right_mask, "only 0 and 1"), (right_mask[:, :3], "must match")):
        with pytest.raises(ValueError, match=msg):
            model.generate(right, max_new_tokens=1, attention_mask=mask)
    with pytest.raises(ValueError, match="not both"):
        model.generate(right, max_new_tokens=1, attention_mask=right_mask, prompt_lengths=lens)
    model.dak_free()


@pytest.mark.parametrize("family", ["tiny-llama", "tiny-opt"])
def test_forward_gives_hf_logits_with_and_without_padding(checkpoints, family):
    """model(ids) scores whole sequences (e.g. perplexity) as HF does, padding masks included,
    through the split linears; generate afterwards still runs dak's own attention."""
    hf, path = checkpoints[family]
    model = dak.offload(path, batch=2, max_len=PROMPT + 4, host_ratio=0.3, dtype=DTYPE, tune=False)
    ids = torch.randint(3, hf.config.vocab_size, (2, 7), generator=torch.Generator().manual_seed(8))
    mask = torch.ones(2, 7, dtype=torch.long)
    mask[1, :3] = 0  # left padding
    for kw, keep in (({}, torch.ones(2, 7, dtype=torch.bool)), ({"attention_mask": mask}, mask.bool())):
        with torch.no_grad():
            got, want = model(ids, **kw).logits.float().cpu(), hf(ids, **kw).logits.float()
        assert not got.isnan().any()
        assert ((got[keep] - want[keep]).norm() / want[keep].norm()).item() < 1e-2, kw
    assert model.config._attn_implementation == "dak"
    seq = model.generate(ids[:, :PROMPT], max_new_tokens=4)
    assert _check_tokens(hf, seq, 4) >= 2 * 4 - 1
    model.dak_free()
