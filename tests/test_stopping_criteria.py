"""HF's `stopping_criteria` and `max_time` in dak's generate (dak.runtime.stopping), CPU: the ids a
criterion sees are HF's (prompts left-padded, then the new tokens), a request it flags stops there,
and bad criteria get a clear error."""

import os

import pytest
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

import dak  # noqa: E402
from dak.runtime import stopping  # noqa: E402


class LastTokenIs:
    """Stop a request whose last id is in `ids`; keeps every input_ids it was called with."""

    def __init__(self, ids):
        self.ids, self.seen = torch.tensor(ids), []

    def __call__(self, input_ids, scores, **kwargs):
        assert scores is None  # HF passes scores only with output_scores
        self.seen.append(input_ids.clone())
        return torch.isin(input_ids[:, -1], self.ids.to(input_ids.device))


def first_in(row, ids):
    return next((k for k in range(len(row)) if row[k] in ids), None)


@pytest.fixture(scope="module")
def model():
    m = dak.offload("tiny-llama", batch=3, max_len=24, policy="uniform", host_ratio=0.3, dtype=torch.float16,
                    tune=False)
    yield m
    m.dak_free()


def test_a_criterion_sees_hfs_ids_and_stops_the_requests_it_flags(model):
    from transformers.generation.stopping_criteria import StoppingCriteriaList
    ids = torch.randint(3, 900, (3, 5), generator=torch.Generator().manual_seed(2))
    lengths = torch.tensor([5, 2, 4])  # right-padded prompts
    n = 11
    free = model.generate(ids, max_new_tokens=n, prompt_lengths=lengths, eos_token_id=None).cpu()[:, 5:]
    # stop on request 0's step-2 token and request 1's step-4 token (wherever a row first has one of them)
    crit = LastTokenIs([int(free[0, 2]), int(free[1, 4])])
    firsts = [first_in(free[r], crit.ids) for r in range(3)]
    assert firsts[0] is not None and firsts[1] is not None

    eos = next(i for i in range(3, 900) if i not in free.flatten().tolist())
    got = model.generate(ids, max_new_tokens=n, prompt_lengths=lengths, eos_token_id=eos, pad_token_id=0,
                         stopping_criteria=StoppingCriteriaList([crit])).cpu()[:, 5:]
    for r, f in enumerate(firsts):  # the tokens up to each flagged step, pads after (EOS ids are set)
        end = n if f is None else f + 1
        assert torch.equal(got[r, :end], free[r, :end]) and not got[r, end:].any()
    assert model.dak_last.stopped[:2] == tuple(firsts[:2])
    # what the criterion saw at step t: each prompt at the end of 5 columns, left-padded with the pad id
    first = crit.seen[0]
    assert first.shape == (3, 6)
    for r, n_r in enumerate(lengths.tolist()):
        assert first[r, :5 - n_r].eq(0).all() and torch.equal(first[r, 5 - n_r:5].cpu(), ids[r, :n_r])
    assert torch.equal(crit.seen[2][:, 5:].cpu(), got[:, :3])

    # without EOS ids nothing is padded: generation ends once every request has stopped
    crit2 = LastTokenIs([int(free[0, 2]), int(free[1, 4]), int(free[2, 1])])
    ends = [first_in(free[r], crit2.ids) for r in range(3)]
    short = model.generate(ids, max_new_tokens=n, prompt_lengths=lengths, eos_token_id=None,
                           stopping_criteria=[crit2]).cpu()[:, 5:]
    assert short.shape[1] == max(ends) + 1 < n and torch.equal(short, free[:, :short.shape[1]])


def test_max_time_ends_generation_as_hfs_max_time_criteria(model):
    ids = torch.randint(3, 900, (3, 4), generator=torch.Generator().manual_seed(3))
    n = 9
    out = model.generate(ids, max_new_tokens=n, eos_token_id=None, max_time=1e-9)
    assert out.shape[1] == 4 + 1 and model.dak_last.steps == 0  # over at the first token: no decode step
    assert model.generate(ids, max_new_tokens=n, eos_token_id=None, max_time=3600).shape[1] == 4 + n
    model.generation_config.max_time = 1e-9  # as HF: the config's, when not given
    try:
        assert model.generate(ids, max_new_tokens=n, eos_token_id=None).shape[1] == 4 + 1
        assert model.generate(ids, max_new_tokens=n, eos_token_id=None, max_time=None).shape[1] == 4 + n
    finally:
        model.generation_config.max_time = None


@pytest.mark.parametrize("kwargs,message", [
    (dict(stopping_criteria=lambda i, s: True), "stopping_criteria must be a list of callables"),
    (dict(stopping_criteria=[3]), "stopping_criteria must be a list of callables"),
    (dict(stopping_criteria=[lambda i, s: True]), r"returned True; HF's StoppingCriteria return a \(batch,\) bool"),
    (dict(stopping_criteria=[lambda i, s: torch.zeros(7, dtype=torch.bool)]), r"here \(3,\)"),
    (dict(max_time=0), "max_time must be a positive number"),
    (dict(max_time="1"), "max_time must be a positive number"),
])
def test_bad_criteria_are_refused(model, kwargs, message):
    with pytest.raises(ValueError, match=message):
        model.generate(torch.ones(3, 4, dtype=torch.long), max_new_tokens=3, eos_token_id=None, **kwargs)
