"""End to end on the CPU (Triton interpreter): dak.offload of tiny HF models against HF eager.

Every family (Llama, OPT, Qwen2, Mistral, Qwen3; 2 layers) is saved as a safetensors checkpoint,
offloaded at host shares 0, ~0.3 and 1, and its greedy tokens compared with HF's eager
generate. fp16 keeps exact ties rare; a remaining mismatch is accepted only where HF's own
logits tie to within two fp16 steps (checked by teacher forcing HF on dak's tokens).
"""

import os

import pytest
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

import dak  # noqa: E402
from dak.nn import SplitLinear  # noqa: E402
from runtime_checks import DTYPE, PROMPT, check_tokens as _check_tokens, make_checkpoints, tie_tolerance  # noqa: E402


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    return make_checkpoints(tmp_path_factory)


@pytest.mark.parametrize("family", ["tiny-llama", "tiny-opt", "tiny-qwen2", "tiny-mistral", "tiny-qwen3"])
@pytest.mark.parametrize("ratio", [0.0, 0.3, 1.0])
def test_greedy_tokens_match_hf_eager(checkpoints, family, ratio):
    hf, path = checkpoints[family]
    steps = 32
    model = dak.offload(path, batch=2, max_len=PROMPT + steps, policy="uniform", host_ratio=ratio, dtype=DTYPE, tune=False)
    got_ratio = model.dak_placement.offload_ratio
    assert (got_ratio == 0) == (ratio == 0) and (got_ratio == 1) == (ratio == 1), got_ratio
    g = torch.Generator().manual_seed(7)
    ids = torch.randint(3, hf.config.vocab_size, (2, PROMPT), generator=g)
    seq = model.generate(ids, max_new_tokens=steps, eos_token_id=None).cpu()  # on the model's device
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
    model = dak.offload(path, batch=3, max_len=16, policy="uniform", host_ratio=0.5, dtype=DTYPE, tune=False)
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
    model = dak.offload(path, batch=3, max_len=PROMPT + 4, policy="uniform", host_ratio=0.3, dtype=DTYPE, tune=False)
    ids = torch.randint(3, hf.config.vocab_size, (3, PROMPT), generator=torch.Generator().manual_seed(3))
    plen = torch.tensor([PROMPT, 2, 4])
    engine = model.dak_engine
    whole = model.generate(ids, max_new_tokens=4, prompt_lengths=plen, eos_token_id=None)
    for tokens in (PROMPT, 2 * PROMPT):  # 1 and 2 requests per forward
        engine.prefill_tokens = tokens
        assert engine.prefill_rows(3, PROMPT) == tokens // PROMPT
        assert torch.equal(model.generate(ids, max_new_tokens=4, prompt_lengths=plen, eos_token_id=None), whole)
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
    plain = dak.offload(path, batch=2, max_len=PROMPT + 6, policy="uniform", host_ratio=1.0, dtype=DTYPE, tune=False,
                        graphs=False)  # eager on a GPU too: graphs set the copy rows per bucket at capture
    want = plain.generate(ids, max_new_tokens=6, eos_token_id=None)
    plain.dak_free()
    seen = []
    real = DakKV.set_copy_rows
    monkeypatch.setattr(DakKV, "set_copy_rows", lambda self, rows: (seen.append(rows), real(self, rows)))
    model = dak.offload(path, batch=2, max_len=PROMPT + 6, policy="uniform", host_ratio=1.0, dtype=DTYPE, tune=False,
                        kv_buckets=3, graphs=False)
    assert model.dak_engine.kv_caps == (-(-(PROMPT + 6) // 3), -(-2 * (PROMPT + 6) // 3), PROMPT + 6)
    assert torch.equal(model.generate(ids, max_new_tokens=6, eos_token_id=None), want)
    assert seen == [PROMPT + t for t in range(1, 6)] + [None]
    assert all(c.copy_rows is None for c in model.dak_kv.caches.values())
    model.dak_free()
    before = pinned_bytes()
    with pytest.raises(ValueError, match="kv_buckets"):
        dak.offload(path, batch=2, max_len=PROMPT + 6, policy="uniform", host_ratio=1.0, dtype=DTYPE, tune=False, kv_buckets=0)
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
    seq = model.generate(ids, max_new_tokens=steps, eos_token_id=None)
    assert _check_tokens(hf, seq, steps) >= 2 * steps - 1
    model.dak_free()


def test_progress_bars_count_every_byte(checkpoints, capsys):
    """progress=True: placing, then loading (or filling), then pinning the host K/V each reach 100%;
    False: silent."""
    _, path = checkpoints["tiny-opt"]
    capsys.readouterr()
    model = dak.offload(path, batch=1, max_len=8, policy="uniform", host_ratio=0.3, dtype=DTYPE, tune=False, progress=True)
    err = capsys.readouterr().err
    assert any(o.host_requests for o in model.dak_placement.ops if o.kind == "attention")  # host K/V: a bar too
    for what in ("dak: placing", "dak: loading checkpoint", "dak: pinning host KV cache"):
        line = [seg for seg in err.replace("\r", "\n").split("\n") if what in seg][-1]
        assert "100%" in line, line
    model.dak_free()
    model = dak.offload("tiny-opt", batch=1, max_len=8, policy="uniform", host_ratio=0.3, dtype=DTYPE, tune=False, progress=True)
    err = capsys.readouterr().err
    assert "100%" in [seg for seg in err.replace("\r", "\n").split("\n") if "filling random weights" in seg][-1]
    model.dak_free()
    model = dak.offload("tiny-opt", batch=1, max_len=8, policy="uniform", host_ratio=0.3, dtype=DTYPE, tune=False, progress=False)
    assert "dak: " not in capsys.readouterr().err
    model.dak_free()
    with pytest.raises(ValueError, match="progress must be True, False or None"):
        dak.offload("tiny-opt", batch=1, max_len=8, progress="yes")


def test_attention_mask_left_or_right_padding_continues_each_prompt(checkpoints):
    """A padded batch as a tokenizer returns it (left or right padding, pads any id): the same new
    tokens as prompt_lengths, each continuing its own prompt (HF teacher-forced on it unpadded)."""
    hf, path = checkpoints["tiny-qwen2"]
    steps, lens = 8, [PROMPT, 2, 4]
    model = dak.offload(path, batch=3, max_len=PROMPT + steps, policy="uniform", host_ratio=0.3, dtype=DTYPE, tune=False)
    g = torch.Generator().manual_seed(4)
    prompts = [torch.randint(3, hf.config.vocab_size, (n,), generator=g) for n in lens]
    pad = hf.config.vocab_size + 7  # not a token: never read
    right, left = torch.full((3, PROMPT), pad), torch.full((3, PROMPT), pad)
    right_mask, left_mask = torch.zeros(3, PROMPT, dtype=torch.long), torch.zeros(3, PROMPT, dtype=torch.long)
    for b, p in enumerate(prompts):
        right[b, :len(p)], right_mask[b, :len(p)] = p, 1
        left[b, PROMPT - len(p):], left_mask[b, PROMPT - len(p):] = p, 1
    by_len = model.generate(right.masked_fill(right_mask == 0, 0), max_new_tokens=steps, prompt_lengths=lens,
                            eos_token_id=None).cpu()
    got_right = model.generate(right, max_new_tokens=steps, attention_mask=right_mask, eos_token_id=None).cpu()
    got_left = model.generate(left, max_new_tokens=steps, attention_mask=left_mask.bool(), eos_token_id=None).cpu()
    assert torch.equal(got_right[:, :PROMPT], right) and torch.equal(got_left[:, :PROMPT], left)
    assert torch.equal(got_right[:, PROMPT:], by_len[:, PROMPT:])
    assert torch.equal(got_left[:, PROMPT:], by_len[:, PROMPT:])
    for b, p in enumerate(prompts):
        seq = torch.cat([p, got_left[b, PROMPT:]])[None]
        with torch.no_grad():
            logits = hf(seq).logits[0].float()
        for t in range(steps):
            ref, tok = logits[len(p) + t - 1], seq[0, len(p) + t]
            assert ref.max() - ref[tok] <= tie_tolerance(ref.max()), (b, t)
    for mask, msg in ((torch.tensor([[1, 0, 1, 1, 1, 1]] * 3), "left- or right-padded"),
                      (torch.cat([left_mask[:2], right_mask[2:]]), "left- or right-padded"),
                      (torch.zeros(3, PROMPT, dtype=torch.long), "at least one 1"),
                      (2 * right_mask, "only 0 and 1"), (right_mask[:, :3], "must match")):
        with pytest.raises(ValueError, match=msg):
            model.generate(right, max_new_tokens=1, attention_mask=mask, eos_token_id=None)
    with pytest.raises(ValueError, match="not both"):
        model.generate(right, max_new_tokens=1, attention_mask=right_mask, prompt_lengths=lens, eos_token_id=None)
    model.dak_free()


@pytest.mark.parametrize("family", ["tiny-llama", "tiny-opt", "tiny-qwen3"])
def test_forward_gives_hf_logits_with_and_without_padding(checkpoints, family):
    """model(ids) scores whole sequences (e.g. perplexity) as HF does, padding masks included,
    through the split linears; generate afterwards still runs dak's own attention."""
    hf, path = checkpoints[family]
    model = dak.offload(path, batch=2, max_len=PROMPT + 4, policy="uniform", host_ratio=0.3, dtype=DTYPE, tune=False)
    ids = torch.randint(3, hf.config.vocab_size, (2, 7), generator=torch.Generator().manual_seed(8))
    mask = torch.ones(2, 7, dtype=torch.long)
    mask[1, :3] = 0  # left padding
    for kw, keep in (({}, torch.ones(2, 7, dtype=torch.bool)), ({"attention_mask": mask}, mask.bool())):
        with torch.no_grad():
            got, want = model(ids, **kw).logits.float().cpu(), hf(ids, **kw).logits.float()
        assert not got.isnan().any()
        assert ((got[keep] - want[keep]).norm() / want[keep].norm()).item() < 1e-2, kw
    assert model.config._attn_implementation == "dak"
    seq = model.generate(ids[:, :PROMPT], max_new_tokens=4, eos_token_id=None)
    assert _check_tokens(hf, seq, 4) >= 2 * 4 - 1
    model.dak_free()
