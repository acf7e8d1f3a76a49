"""Sampling (dak.runtime.sampling) against HF's generate: the logits HF's own logits processor list
keeps for a sampling setting, and the distribution dak's Gumbel-max draws from them. CPU."""

import math
import random
from dataclasses import replace

import pytest
import torch

from dak.runtime.sampling import Sampling, sample, warp


@pytest.fixture(scope="module")
def hf():
    from runtime_checks import hf_model
    return hf_model("tiny-llama", layers=1)


def hf_kept(hf, s: Sampling, logits: torch.Tensor) -> torch.Tensor:
    """The logits after the processors HF's generate builds for `s` (its own choice and order)."""
    from transformers import GenerationConfig
    gc = GenerationConfig(do_sample=True, temperature=s.temperature, top_k=s.top_k, top_p=s.top_p,
                          min_p=s.min_p or None, typical_p=s.typical_p, epsilon_cutoff=s.epsilon_cutoff,
                          eta_cutoff=s.eta_cutoff, top_h=s.top_h)
    procs = hf._get_logits_processor(gc, input_ids_seq_length=1, device="cpu")
    return procs(torch.zeros(logits.shape[0], 1, dtype=torch.long), logits.clone())


SETTINGS = [dict(temperature=0.7), dict(top_k=5), dict(top_k=0, top_p=0.8), dict(top_k=0, min_p=0.1),
            dict(top_k=0, typical_p=0.7), dict(top_k=0, epsilon_cutoff=0.02), dict(top_k=0, eta_cutoff=0.02),
            dict(temperature=1.3, top_k=20, top_p=0.9, min_p=0.05),
            dict(temperature=0.5, top_k=0, top_p=0.95, typical_p=0.9, epsilon_cutoff=3e-4),
            dict(top_k=30, eta_cutoff=0.1), dict(top_k=0, top_h=0.4), dict(temperature=0.8, top_h=0.9, top_p=0.9)]


@pytest.mark.parametrize("kw", SETTINGS, ids=lambda kw: ",".join(f"{k}={v}" for k, v in kw.items()))
def test_warping_keeps_what_hfs_generate_keeps(hf, kw):
    s = Sampling(do_sample=True, **kw)
    seed = random.randrange(2**31)
    logits = 3 * torch.randn(7, 301, generator=torch.Generator().manual_seed(seed))  # odd vocab, fresh rows
    want = hf_kept(hf, s, logits)
    got = warp(logits.clone(), s)
    assert torch.equal(torch.isinf(got), torch.isinf(want)), (kw, seed)
    assert (~torch.isinf(got)).sum(-1).min() >= 1
    if any(k != "temperature" for k in kw):
        assert torch.isinf(got).any(), (kw, seed)  # each filter drops something here: the check is not vacuous
    fin = ~torch.isinf(want)
    torch.testing.assert_close(got[fin], want[fin], rtol=1e-6, atol=1e-6)


def test_gumbel_max_draws_from_the_warped_distribution():
    s = Sampling(do_sample=True, temperature=0.8, top_k=0, top_p=0.9, min_p=0.05)
    row = torch.randn(1, 40, generator=torch.Generator().manual_seed(random.randrange(2**31))) * 0.5  # not peaked
    probs = warp(row.clone(), s).softmax(-1)[0]
    n = 40000
    torch.manual_seed(random.randrange(2**31))
    counts = torch.bincount(sample(row.expand(n, -1).contiguous(), s), minlength=40).double()
    assert counts[probs == 0].sum() == 0  # never a dropped token
    live = probs > 0
    assert live.sum() >= 3
    # each kept token's frequency within 5 standard deviations of its probability
    sd = (probs[live] * (1 - probs[live]) / n).sqrt().double()
    assert ((counts[live] / n - probs[live].double()).abs() <= 5 * sd + 1e-4).all()


@pytest.mark.parametrize("kw", [dict(top_k=5), dict(top_k=20, top_p=0.9, min_p=0.05),
                                dict(temperature=0.7, top_k=50, typical_p=0.8),
                                dict(top_k=30, eta_cutoff=0.1, epsilon_cutoff=1e-3), dict(top_h=0.8, top_k=40, top_p=0.95)],
                         ids=lambda kw: ",".join(f"{k}={v}" for k, v in kw.items()))
def test_top_candidates_hold_what_warp_keeps(kw):
    """sample()'s draw among the top-k candidates: scattered back into the vocabulary they are
    warp()'s logits, ties at the k-th logit included (up to top_k of them)."""
    from dak.runtime.sampling import top_width, warp_top
    s = Sampling(do_sample=True, **kw)
    seed = random.randrange(2**31)
    g = torch.Generator().manual_seed(seed)
    logits = 3 * torch.randn(6, 4001, generator=g)
    ranked = s.top_p < 1 or s.typical_p < 1  # which tied tokens these keep is the sort's order: tie-free rows
    for r in () if ranked else (0, 3):  # rows where tokens past the k-th tie it (HF keeps every one)
        kth = logits[r].topk(s.top_k).values[-1]
        below = (logits[r] < kth).nonzero()[:, 0]
        logits[r, below[torch.randperm(len(below), generator=g)[:s.top_k // 2 + 1]]] = kth
    width = top_width(s, 4001)
    assert width == 2 * s.top_k
    vals, idx = warp_top(logits.clone(), s, width)
    got = torch.full_like(logits, -math.inf).scatter(1, idx, vals)
    want = warp(logits.clone(), s)
    assert torch.equal(torch.isinf(got), torch.isinf(want)), (kw, seed)
    fin = ~torch.isinf(want)
    torch.testing.assert_close(got[fin], want[fin], rtol=1e-6, atol=1e-6)
    if not ranked and not s.eta_cutoff:
        assert (fin.sum(-1)[[0, 3]] > s.top_k).all()  # the ties are in: the check is not vacuous
    assert top_width(Sampling(do_sample=True, top_k=300), 4001) == 0  # over 1/8 of the vocabulary: not compacted


def test_gumbel_max_over_the_top_candidates_draws_from_the_warped_distribution():
    s = Sampling(do_sample=True, temperature=0.9, top_k=12, top_p=0.9)
    row = torch.randn(1, 400, generator=torch.Generator().manual_seed(random.randrange(2**31))) * 0.3
    probs = warp(row.clone(), s).softmax(-1)[0]
    n = 40000
    torch.manual_seed(random.randrange(2**31))
    counts = torch.bincount(sample(row.expand(n, -1).contiguous(), s), minlength=400).double()
    assert counts[probs == 0].sum() == 0 and (probs > 0).sum() >= 3
    live = probs > 0
    sd = (probs[live] * (1 - probs[live]) / n).sqrt().double()
    assert ((counts[live] / n - probs[live].double()).abs() <= 5 * sd + 1e-4).all()


ALL = Sampling(do_sample=True, temperature=0.7, top_k=0, top_p=0.9, min_p=0.02, typical_p=0.95,
               epsilon_cutoff=1e-4, eta_cutoff=1e-3, top_h=0.95)


@pytest.mark.gpu
def test_every_warper_is_captured_in_a_cuda_graph():
    """sample() with every warper captured in a CUDA graph: replayed on fresh fp32 logits, with min_p
    1 it gives their argmax, and with ALL (and with top-k: the draw among the top candidates) only
    tokens warp() keeps."""
    logits = torch.empty(5, 1000, device="cuda")
    for s in (replace(ALL, min_p=1.0), ALL, replace(ALL, top_k=20)):
        logits.normal_()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            sample(logits, s)  # warm-up outside capture
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out = sample(logits, s)
        for _ in range(20):
            logits.copy_(torch.randn(5, 1000, device="cuda") * 3)
            graph.replay()
            if s.min_p == 1.0:
                assert torch.equal(out, logits.argmax(-1))
            else:
                assert torch.isfinite(warp(logits.clone(), s).gather(1, out[:, None])).all()


@pytest.mark.parametrize("bad,message", [
    (dict(min_p=1.5), r"min_p must be in \[0, 1\]"), (dict(min_p=-0.1), "min_p"),
    (dict(typical_p=0), r"typical_p must be in \(0, 1\]"), (dict(epsilon_cutoff=1.0), r"epsilon_cutoff .*\[0, 1\)"),
    (dict(eta_cutoff=-0.5), r"eta_cutoff must be in \[0, 1\)"),
    (dict(top_p=0), r"top_p must be in \(0, 1\]"), (dict(min_p="0.1"), "min_p"), (dict(typical_p=math.nan), "typical_p"),
    (dict(top_h=0.0), r"top_h must be in \(0, 1\] \(or None: off\), got 0.0"), (dict(top_h=1.5), "top_h"),
])
def test_bad_settings_are_refused(bad, message):
    with pytest.raises(ValueError, match=message):
        Sampling(do_sample=True, **bad)


def test_the_generation_config_gives_min_p_and_friends_as_in_hf():
    from types import SimpleNamespace

    from transformers import GenerationConfig

    from dak.runtime.generation_config import ignored_settings, sampling_for
    gc = GenerationConfig(do_sample=True, min_p=0.1, typical_p=0.9, epsilon_cutoff=1e-3, eta_cutoff=2e-3,
                          num_beams=2)
    model = SimpleNamespace(generation_config=gc)
    s = sampling_for(model)
    assert (s.min_p, s.typical_p, s.epsilon_cutoff, s.eta_cutoff) == (0.1, 0.9, 1e-3, 2e-3)
    assert sampling_for(model, min_p=0.2).min_p == 0.2
    assert ignored_settings(gc) == ["num_beams"]  # applied ones are not warned about
    greedy = sampling_for(SimpleNamespace(generation_config=GenerationConfig(min_p=0.1)))
    assert not greedy.do_sample and greedy.min_p == 0.0  # HF's greedy decoding ignores the warpers
    gc.min_p = 3.0
    with pytest.raises(ValueError, match="min_p must be in.*generation_config set.*min_p"):
        sampling_for(model)
