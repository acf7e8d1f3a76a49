"""HF's `generate(generation_config=...)` and `num_return_sequences` on an offloaded model
(dak.runtime.generation_config.call_config / return_sequences), CPU."""

import os

import pytest
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

import dak  # noqa: E402
from dak.runtime.sampling import Sampling  # noqa: E402


def offload(batch):
    m = dak.offload("tiny-llama", batch=batch, max_len=16, policy="uniform", host_ratio=0.3, dtype=torch.float16,
                    tune=False, graphs=False)
    yield m
    m.dak_free()


@pytest.fixture(scope="module")
def model():
    yield from offload(2)


@pytest.fixture(scope="module")
def model4():  # room for two copies of two prompts
    yield from offload(4)


def prompts(seed, b=2, n=4):
    return torch.randint(3, 900, (b, n), generator=torch.Generator().manual_seed(seed))


def settings_seen(model):
    """The Sampling of each engine call made from here on (a list that fills)."""
    seen, run = [], model.dak_engine.generate
    model.dak_engine.generate = lambda *a, **k: seen.append(a[3]) or run(*a, **k)
    return seen


def test_a_given_config_stands_in_for_the_models_as_in_hf(model):
    from transformers import GenerationConfig
    ids = prompts(7)
    free = model.generate(ids, max_new_tokens=4, eos_token_id=None).cpu()
    assert free.shape == (2, 8)
    # its max_new_tokens applies; an argument wins over it; its max_length counts the prompt
    gc = GenerationConfig(max_new_tokens=3)
    assert torch.equal(model.generate(ids, generation_config=gc, eos_token_id=None).cpu(), free[:, :7])
    assert model.generate(ids, generation_config=gc, max_new_tokens=1, eos_token_id=None).shape == (2, 5)
    assert model.generate(ids, generation_config=GenerationConfig(max_length=6), eos_token_id=None).shape == (2, 6)
    # what it leaves unset comes from the model's generation config (here its EOS and pad ids)
    eos = [int(free[0, 4 + 1]), int(free[1, 4 + 2])]
    before = model.generation_config.to_dict()
    model.generation_config.eos_token_id, model.generation_config.pad_token_id = eos, 5
    try:
        got = model.generate(ids, generation_config=GenerationConfig(max_new_tokens=4)).cpu()
        assert torch.equal(got, model.generate(ids, max_new_tokens=4, eos_token_id=eos, pad_token_id=5).cpu())
        assert got.shape[1] < 8 and (got[:, 4:] == 5).any()
        # its own settings win over the model's (None is HF's "unset" there: given as an argument instead)
        mine = model.generate(ids, generation_config=GenerationConfig(max_new_tokens=4, pad_token_id=7)).cpu()
        diff = mine != got  # only the pads differ
        assert diff.any() and (got[diff] == 5).all() and (mine[diff] == 7).all()
    finally:
        model.generation_config.eos_token_id = before["eos_token_id"]
        model.generation_config.pad_token_id = before["pad_token_id"]
    assert model.generation_config.to_dict() == before  # the given config was not merged into the model's


def test_a_given_configs_sampling_settings_apply_and_arguments_win(model):
    from transformers import GenerationConfig
    ids = prompts(3)
    seen = settings_seen(model)
    try:
        greedy = model.generate(ids, max_new_tokens=4, eos_token_id=None).cpu()
        gc = GenerationConfig(do_sample=True, top_k=1, temperature=0.5, min_p=0.1, eos_token_id=None)
        assert torch.equal(model.generate(ids, max_new_tokens=4, generation_config=gc).cpu(), greedy)
        model.generate(ids, max_new_tokens=1, generation_config=gc, top_k=9)
        model.generation_config.top_p = 0.8  # the model's, under a given config that leaves top_p unset
        model.generate(ids, max_new_tokens=1, generation_config=gc)
        assert seen == [Sampling(), Sampling(True, 0.5, 1, 1.0, 0.1), Sampling(True, 0.5, 9, 1.0, 0.1),
                        Sampling(True, 0.5, 1, 0.8, 0.1)]
    finally:
        model.generation_config.top_p = None
        del model.dak_engine.generate


@pytest.mark.parametrize("bad, message", [
    (dict(num_beams=4), r"the given generation_config sets num_beams, which dak's generate does not apply"),
    (dict(guidance_scale=2.0, max_new_tokens=4), r"sets guidance_scale, which"),
    (dict(no_repeat_ngram_size=-2), r"no_repeat_ngram_size must be an integer >= 0 \(0 = off\), got -2 \(the given "
                                    r"generation_config set no_repeat_ngram_size\)"),
    ("dict", r"generation_config must be a transformers GenerationConfig, got dict"),
    (dict(do_sample=True, temperature=-1.0), r"temperature must be a positive number.*the given generation_config "
                                             r"set do_sample, temperature: pass them to generate"),
    (dict(min_new_tokens=-2), r"min_new_tokens \(the given generation_config\) must be an integer >= 0"),
    (dict(num_return_sequences=2), r"num_return_sequences \(the given generation_config\) is 2, but greedy"),
])
def test_bad_given_configs_are_refused(model, bad, message):
    from transformers import GenerationConfig
    if bad == "dict":
        gc = {"max_new_tokens": 3}
    else:
        gc = GenerationConfig()
        for k, v in bad.items():  # set after construction: HF's own checks would refuse some first
            setattr(gc, k, v)
    with pytest.raises(ValueError, match=message):
        model.generate(prompts(1), generation_config=gc)


def test_num_return_sequences_samples_each_prompt_k_times_in_hfs_order(model4):
    """Copies of a prompt in a row, as HF's: the engine gets each prompt (with its length, from a mask
    or prompt_lengths) k times in a row, the result holds each copy's input then its new tokens, and
    the copies of one prompt are sampled apart. (Sampling from the best token only would tie: fp16
    logits often hold two equal best tokens, which greedy decoding breaks by index and sampling not.)"""
    ids = prompts(11)
    calls, run = [], model4.dak_engine.generate
    model4.dak_engine.generate = lambda *a, **k: calls.append((a[0][:4].cpu(), a[2])) or run(*a, **k)
    try:
        # a flat distribution: the copies of one prompt differ (equal over 3 tokens: ~1e-9)
        torch.manual_seed(int(torch.randint(0, 2**31, ())))
        hot = model4.generate(ids, max_new_tokens=3, eos_token_id=None, do_sample=True, top_k=0, temperature=50.0,
                              num_return_sequences=2).cpu()
        assert hot.shape == (4, 7) and torch.equal(hot[:, :4], ids.repeat_interleave(2, 0))
        assert not torch.equal(hot[0, 4:], hot[1, 4:]) and not torch.equal(hot[2, 4:], hot[3, 4:])
        assert torch.equal(calls[-1][0], ids.repeat_interleave(2, 0)) and calls[-1][1] is None
        # from the model's generation config; padded prompts (a left-padded mask, prompt lengths) are copied too
        model4.generation_config.num_return_sequences = 2
        mask = torch.tensor([[0, 1, 1, 1], [1, 1, 1, 1]])
        got = model4.generate(ids, attention_mask=mask, max_new_tokens=2, eos_token_id=None, do_sample=True).cpu()
        assert torch.equal(got[:, :4], ids.repeat_interleave(2, 0)) and got.shape == (4, 6)
        right = torch.cat([torch.cat([ids[:1, 1:], torch.zeros(1, 1, dtype=ids.dtype)], 1), ids[1:]])
        assert torch.equal(calls[-1][0], right.repeat_interleave(2, 0))  # the mask's prompts moved to the front
        assert torch.equal(torch.as_tensor(calls[-1][1]), torch.tensor([3, 3, 4, 4]))
        model4.generate(ids, prompt_lengths=[2, 4], max_new_tokens=2, eos_token_id=None, do_sample=True)
        assert torch.equal(torch.as_tensor(calls[-1][1]), torch.tensor([2, 2, 4, 4]))
        with pytest.raises(ValueError, match=r"\(the model's generation_config\) is 2, but greedy"):
            model4.generate(ids, max_new_tokens=1)  # as HF refuses it
    finally:
        model4.generation_config.num_return_sequences = None
        del model4.dak_engine.generate


@pytest.mark.parametrize("kw, message", [
    (dict(num_return_sequences=2), r"num_return_sequences is 2, but greedy decoding gives one sequence a prompt"),
    (dict(num_return_sequences=3, do_sample=True), r"num_return_sequences 3 x 2 prompts = 6 sequences; this model "
                                                   r"was offloaded for batch 4"),
    (dict(num_return_sequences=0, do_sample=True), r"num_return_sequences must be an integer >= 1, got 0"),
    (dict(num_return_sequences=2.0, do_sample=True), r"num_return_sequences must be an integer >= 1, got 2.0"),
    (dict(num_return_sequences=2, do_sample=True, prompt_lengths=[1, 2, 3]), r"prompt_lengths must be 2 values"),
])
def test_bad_num_return_sequences_are_refused(model4, kw, message):
    with pytest.raises(ValueError, match=message):
        model4.generate(prompts(2), max_new_tokens=2, **kw)
