"""Captured prefill on the GPU (dak.runtime.prefill_graphs): replays with fresh prompts of
several lengths (shared buckets, right padding, request chunks) give the eager prefill's
logits and stored keys and values, and generate() gives the eager engine's tokens."""

import pytest
import torch

import dak
from dak.runtime.engine import Engine

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")]


def _stored(kv, plen):
    out = []
    for cache, local in kv.where:
        k, v = cache.gather(local)
        out.append([(k[b, :, :n].float().clone(), v[b, :, :n].float().clone()) for b, n in enumerate(plen.tolist())])
    return out


@pytest.mark.parametrize("name,ratio", [("tiny-llama", 0.3), ("tiny-opt", 0.5), ("tiny-qwen2", 0.0), ("tiny-mistral", 1.0)])
def test_replayed_prefills_match_eager(name, ratio):
    model = dak.offload(name, batch=3, max_len=40, policy="uniform", host_ratio=ratio, tune=False)
    graphed, kv = model.dak_engine, model.dak_kv
    assert graphed._prefill is not None, "an engine with decode graphs captures its prefill"
    eager = Engine(model, kv, graphs=False)
    g = torch.Generator().manual_seed(1)
    for trial, (n, lens) in enumerate([(9, [9, 4, 1]), (12, [12, 12, 7]), (10, [3, 10, 8]), (9, [9, 9, 9]),
                                       (20, [20, 1, 17])]):
        ids = torch.randint(3, 900, (3, n), generator=g).cuda()
        plen = torch.tensor(lens, dtype=torch.int32, device="cuda")
        want = eager.prefill(ids, plen)
        kv_want = _stored(kv, plen)
        for cache, local in kv.where:  # poison: the replay must write every stored position again
            for t in cache.parts(local):
                t.fill_(float("nan"))
        got = graphed.prefill(ids, plen)
        torch.cuda.synchronize()
        assert torch.isfinite(got).all()
        err = ((got - want).abs().max() / want.abs().max()).item()
        assert err < 2e-2, f"{name} trial {trial} (n={n}): logits differ by {err:.3g}"
        for layer, (want_l, got_l) in enumerate(zip(kv_want, _stored(kv, plen))):
            for b, ((kw, vw), (kg, vg)) in enumerate(zip(want_l, got_l)):
                assert torch.allclose(kg, kw, atol=3e-2) and torch.allclose(vg, vw, atol=3e-2), \
                    f"{name} trial {trial}: layer {layer} request {b} stored K/V differ"
    assert sorted(graphed._prefill.entries) == [(0, 3, 32)], "9-20 tokens all pad to one 32-token bucket"
    assert all(e.graph is not None for e in graphed._prefill.entries.values())
    chained = [e.chain is not None for e in graphed._prefill.entries.values()]
    assert chained == [ratio > 0], "host rows: the captured prefill copies them by copy-ahead"
    model.dak_free()


def test_generate_with_captured_prefill_gives_the_eager_prefills_tokens():
    model = dak.offload("tiny-llama", batch=2, max_len=16, policy="uniform", host_ratio=0.4, tune=False)  # 32 > 16: exact lengths
    ids = torch.randint(3, 900, (2, 10), generator=torch.Generator().manual_seed(2))
    plen = torch.tensor([10, 6])
    first = model.generate(ids, max_new_tokens=6, prompt_lengths=plen, eos_token_id=None)  # eager prefill, then capture
    again = model.generate(ids, max_new_tokens=6, prompt_lengths=plen, eos_token_id=None)  # replayed prefill
    assert torch.equal(first, again)
    eng = model.dak_engine
    ids_d, plen_d, _ = eng._check(ids, 6, plen)
    whole = eng.prefill(ids_d, plen_d)
    eng.prefill_tokens = 10  # one request per forward (HBM short): eager, no graph holds activations
    for _ in range(2):
        parts = eng.prefill(ids_d, plen_d)
        assert ((parts - whole).abs().max() / whole.abs().max()).item() < 2e-2
    assert set(eng._prefill.entries) == {(0, 2, 10)}
    model.dak_free()
