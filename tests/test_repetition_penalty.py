"""HF's repetition penalty in dak's generate (dak.runtime.sampling.penalize, the engine's mask of
tokens seen), CPU: against HF's own RepetitionPenaltyLogitsProcessor."""

import os

import pytest
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

import dak  # noqa: E402
from dak.runtime.generation_config import sampling_for  # noqa: E402
from dak.runtime.sampling import Sampling, sample  # noqa: E402
from runtime_checks import DTYPE, PROMPT, saved_model, tie_tolerance  # noqa: E402


def hf_penalized(logits: torch.Tensor, rows: list[torch.Tensor], penalty: float) -> torch.Tensor:
    """HF's processor on each request's own tokens (no padding: version-independent)."""
    from transformers.generation.logits_process import RepetitionPenaltyLogitsProcessor
    proc = RepetitionPenaltyLogitsProcessor(float(penalty))
    return torch.cat([proc(r[None], logits[b:b + 1].clone()) for b, r in enumerate(rows)])


@pytest.mark.parametrize("penalty", [1.7, 0.6])
def test_penalized_logits_are_hfs(penalty):
    g = torch.Generator().manual_seed(int(penalty * 10))
    b, v = 3, 301
    logits = torch.randn(b, v, generator=g) * 4
    rows = [torch.randint(0, v, (n,), generator=g) for n in (1, 9, 40)]
    seen = torch.zeros(b, v + 1, dtype=torch.bool)
    for i, r in enumerate(rows):
        seen[i, r] = True
    ref = hf_penalized(logits, rows, penalty)
    from dak.runtime.sampling import penalize
    got = penalize(logits, seen, penalty)
    assert torch.equal(got, ref)
    assert not torch.equal(got, logits)  # the penalty moved something: the check can fail
    assert torch.equal(sample(logits, Sampling(repetition_penalty=penalty), seen), ref.argmax(-1))


@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), float("inf"), True, "1.1"])
def test_bad_penalties_are_refused(bad):
    with pytest.raises(ValueError, match="repetition_penalty must be a positive number"):
        Sampling(repetition_penalty=bad)
    with pytest.raises(ValueError, match="needs the mask"):
        sample(torch.zeros(1, 4), Sampling(repetition_penalty=1.5))


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return saved_model(tmp_path_factory)


def test_generate_applies_hfs_penalty_to_prompt_and_new_tokens(tiny):
    """Every new token is the argmax of HF's logits (teacher-forced on dak's tokens) after HF's
    penalty over that request's prompt and earlier new tokens (padding left out, as HF does for
    left padding), within two fp16 steps; and the penalty changes the tokens."""
    hf, path = tiny
    steps, penalty, lens = 12, 4.0, [PROMPT, 3]
    model = dak.offload(path, batch=2, max_len=PROMPT + steps, policy="uniform", host_ratio=0.3, dtype=DTYPE, tune=False)
    try:
        g = torch.Generator().manual_seed(11)
        prompts = [torch.randint(3, 60, (n,), generator=g) for n in lens]  # few ids: repeats likely
        left, mask = torch.zeros(2, PROMPT, dtype=torch.long), torch.zeros(2, PROMPT, dtype=torch.long)
        for b, p in enumerate(prompts):
            left[b, PROMPT - len(p):], mask[b, PROMPT - len(p):] = p, 1
        left[1, :PROMPT - lens[1]] = 2  # a pad id outside the prompts: never marked
        plain = model.generate(left, attention_mask=mask, max_new_tokens=steps, eos_token_id=None).cpu()
        got = model.generate(left, attention_mask=mask, max_new_tokens=steps, eos_token_id=None,
                             repetition_penalty=penalty).cpu()
        assert not torch.equal(plain, got), "a penalty of 4 changed no token: the check could not fail"
        seen = model.dak_engine.seen[:2, :hf.config.vocab_size].cpu()
        for b, p in enumerate(prompts):  # the mask holds exactly each request's tokens so far
            want = torch.zeros(hf.config.vocab_size, dtype=torch.bool)
            want[torch.cat([p, got[b, PROMPT:]])] = True
            assert torch.equal(seen[b], want), b
        changed = 0
        for b, p in enumerate(prompts):
            seq = torch.cat([p, got[b, PROMPT:]])
            with torch.no_grad():
                logits = hf(seq[None]).logits[0].float()
            for t in range(steps):
                n = len(p) + t
                ref = hf_penalized(logits[n - 1:n], [seq[:n]], penalty)[0]
                tok = seq[n]
                assert ref.max() - ref[tok] <= tie_tolerance(ref.max()), (b, t)
                changed += int(logits[n - 1].argmax() != tok)
        assert changed, "no step chose differently from the unpenalized argmax"
        # greedy decoding keeps the config's penalty (HF's processors run for greedy too)
        model.generation_config.repetition_penalty = penalty
        assert sampling_for(model) == Sampling(repetition_penalty=penalty)
        again = model.generate(left, attention_mask=mask, max_new_tokens=steps, eos_token_id=None).cpu()
        assert torch.equal(again, got)
        model.generation_config.repetition_penalty = -2.0
        with pytest.raises(ValueError, match="generation_config set repetition_penalty"):
            model.generate(left, attention_mask=mask, max_new_tokens=2, eos_token_id=None)
        model.generation_config.repetition_penalty = None  # HF's "unset": no penalty
        assert torch.equal(model.generate(left, attention_mask=mask, max_new_tokens=steps, eos_token_id=None).cpu(), plain)
    finally:
        model.dak_free()
