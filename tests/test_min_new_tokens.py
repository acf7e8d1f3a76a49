"""min_new_tokens / min_length in dak's generate (dak.runtime.sampling.hold_eos, the engine's
per-request cache length from which EOS may come), CPU: against HF's own processor."""

import os

import pytest
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

import dak  # noqa: E402
from dak.runtime.sampling import hold_eos  # noqa: E402
from runtime_checks import DTYPE, hf_model, tie_tolerance  # noqa: E402


def test_held_logits_are_hfs():
    from transformers.generation.logits_process import MinNewTokensLengthLogitsProcessor
    g = torch.Generator().manual_seed(4)
    logits = torch.randn(2, 50, generator=g)
    eos = [7, 31]
    mask = torch.zeros(51, dtype=torch.bool)
    mask[eos] = True
    proc = MinNewTokensLengthLogitsProcessor(prompt_length_to_skip=3, min_new_tokens=2, eos_token_id=eos)
    for new in range(4):  # HF counts the new tokens from the input's width
        ref = proc(torch.zeros(2, 3 + new, dtype=torch.long), logits.clone())
        got = hold_eos(logits, mask, torch.full((2,), new < 2))
        assert torch.equal(got, ref), new
    assert torch.isinf(hold_eos(logits, mask, torch.tensor([True, False]))[0, eos]).all()


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    hf = hf_model("tiny-llama", layers=1)
    path = tmp_path_factory.mktemp("tiny-llama-min-new")
    hf.save_pretrained(path)
    model = dak.offload(str(path), batch=2, max_len=20, policy="uniform", host_ratio=0.3, dtype=DTYPE, tune=False)
    yield hf, model
    model.dak_free()


def test_no_eos_before_min_new_tokens_then_hfs_tokens(tiny):
    """With a request's EOS at step 1, min_new_tokens=5 holds it back: steps 0-4 are HF's argmax
    among the other tokens (teacher-forced), and the request may stop from step 5 on."""
    hf, model = tiny
    ids = torch.randint(3, 900, (2, 4), generator=torch.Generator().manual_seed(9))
    free = model.generate(ids, max_new_tokens=12, eos_token_id=None).cpu()[:, 4:]
    eos = [int(free[0, 1])]
    stopped = model.generate(ids, max_new_tokens=12, eos_token_id=eos, pad_token_id=0).cpu()[:, 4:]
    assert stopped[0, 1] == eos[0] and not stopped[0, 2:].any()  # without a minimum: ends at step 1
    got = model.generate(ids, max_new_tokens=12, eos_token_id=eos, pad_token_id=0, min_new_tokens=5).cpu()
    assert not torch.isin(got[:, 4:9], torch.tensor(eos)).any(), "an EOS before the fifth new token"
    assert got[0, 5] != free[0, 1]  # the held-back EOS was replaced by the next best token
    for b in range(2):
        seq = got[b]
        with torch.no_grad():
            logits = hf(seq[None]).logits[0].float()
        for t in range(5):  # HF's choice with its EOS at -inf (ties within two fp16 steps)
            ref = logits[3 + t].clone()
            ref[eos] = -float("inf")
            assert ref.max() - ref[seq[4 + t]] <= tie_tolerance(ref.max()), (b, t)
    # the boundary: with every id but five an EOS, steps 0-4 must come from those five, and step 5
    # is the unheld argmax again (an EOS but for a near-tie)
    keep = torch.arange(3, 8)
    every = [i for i in range(model.config.vocab_size) if i not in keep.tolist()]
    held = model.generate(ids, max_new_tokens=12, eos_token_id=every, pad_token_id=0, min_new_tokens=5).cpu()
    assert torch.isin(held[:, 4:9], keep).all()
    with torch.no_grad():
        logits = hf(held[:, :10]).logits[:, 8].float()
    best = logits.max(-1).values
    assert (best - logits.gather(1, held[:, 9:10])[:, 0] <= tie_tolerance(best)).all()
    # min_length counts the prompt (its padded width), as in HF: 4 + 5 is the same minimum
    assert torch.equal(model.generate(ids, max_new_tokens=12, eos_token_id=eos, pad_token_id=0, min_length=9).cpu(), got)
    gc = model.generation_config  # not given: the generation config's, as in HF
    gc.min_new_tokens = 5
    try:
        assert torch.equal(model.generate(ids, max_new_tokens=12, eos_token_id=eos, pad_token_id=0).cpu(), got)
        assert torch.equal(model.generate(ids, max_new_tokens=12, eos_token_id=eos, pad_token_id=0,
                                          min_new_tokens=0).cpu()[:, 4:], stopped)
        gc.min_new_tokens = -1
        with pytest.raises(ValueError, match=r"min_new_tokens \(the model's generation_config\) must be"):
            model.generate(ids, max_new_tokens=2, eos_token_id=eos)
    finally:
        gc.min_new_tokens = None
    for bad in (-1, True, 2.5):
        with pytest.raises(ValueError, match="min_new_tokens must be an integer >= 0"):
            model.generate(ids, max_new_tokens=2, eos_token_id=eos, min_new_tokens=bad)
    # without an EOS there is nothing to hold back (HF ignores the minimum then too)
    assert torch.equal(model.generate(ids, max_new_tokens=12, eos_token_id=None, min_new_tokens=5).cpu()[:, 4:], free)
