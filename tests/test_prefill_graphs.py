"""dak.runtime.prefill_graphs off the GPU (capture=False): prompts right-padded to a bucket
give the unpadded logits and the same stored keys and values, keys are shared by nearby
lengths, and bad settings are refused. The captured replays are checked on the GPU
(tests/test_prefill_graphs_gpu.py)."""

import os

import pytest
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

import dak  # noqa: E402
from dak.runtime.engine import Engine  # noqa: E402
from dak.runtime.prefill_graphs import PrefillGraphs  # noqa: E402


@pytest.mark.parametrize("name", ["tiny-opt", "tiny-llama"])
def test_padded_prefill_matches_the_unpadded_one(name):
    model = dak.offload(name, batch=3, prompt_len=7, gen_len=4, policy="uniform", host_ratio=0.4, tune=False, graphs=False)
    eng, kv = model.dak_engine, model.dak_kv
    g = torch.Generator().manual_seed(5)
    ids = torch.randint(3, 900, (3, 7), generator=g).to(eng.device)  # where the engine's inputs live
    plen = torch.tensor([7, 2, 5], dtype=torch.int32, device=eng.device)
    want = eng.prefill_chunk(0, ids, plen)
    stored = [kv.where[layer][0].gather(kv.where[layer][1]) for layer in range(len(kv.where))]
    pg = PrefillGraphs(eng, bucket=4, capture=False)
    assert pg.padded_len(7) == 8 and pg.padded_len(4) == 4 and pg.padded_len(11) == 11  # 12 > max_len 11
    for _ in range(2):
        for cache, local in kv.where:  # poison the cache: the padded prefill must rewrite it
            for t in cache.parts(local):
                t.fill_(float("nan"))
        got = pg.run(0, ids, plen)
        assert torch.allclose(got, want, rtol=2e-2, atol=2e-2), (got - want).abs().max()
        assert torch.equal(got.argmax(-1), want.argmax(-1))
    for layer, (k_want, v_want) in enumerate(stored):
        cache, local = kv.where[layer]
        k_got, v_got = cache.gather(local)
        for b, n in enumerate(plen.tolist()):
            assert torch.allclose(k_got[b, :, :n].float(), k_want[b, :, :n].float(), atol=2e-2)
            assert torch.allclose(v_got[b, :, :n].float(), v_want[b, :, :n].float(), atol=2e-2)
    pg.run(0, ids[:, :6], plen.clamp(max=6))  # 6 tokens pad to 8 too: the same key
    assert list(pg.entries) == [(0, 3, 8)]
    model.dak_free()


def test_keys_beyond_the_cap_run_unkept_and_bad_settings_are_refused():
    model = dak.offload("tiny-opt", batch=2, prompt_len=6, gen_len=2, policy="uniform", host_ratio=0.0, tune=False, graphs=False)
    eng = model.dak_engine
    pg = PrefillGraphs(eng, bucket=1, max_graphs=2, capture=False)
    for n in (2, 3, 4):
        ids = torch.randint(3, 900, (2, n)).to(eng.device)
        out = pg.run(0, ids, torch.full((2,), n, dtype=torch.int32, device=eng.device))
        assert out.shape == (2, model.config.vocab_size) and torch.isfinite(out).all()
    assert len(pg.entries) == 2, "the third length ran without a kept entry"
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="prefill_bucket must be an integer >= 1"):
            PrefillGraphs(eng, bucket=bad, capture=False)
    if eng.device.type != "cuda":
        with pytest.raises(ValueError, match="captured prefill needs a GPU"):
            PrefillGraphs(eng)
    with pytest.raises(ValueError, match="prefill_bucket must be an integer >= 1"):
        Engine(model, model.dak_kv, graphs=False, prefill_bucket=0)
    with pytest.raises(ValueError, match="captured prefill needs graphs=True"):
        Engine(model, model.dak_kv, graphs=False, prefill_graphs=True)
    model.dak_free()


def test_engine_captures_only_a_prefill_of_every_request_in_one_forward():
    """Request chunks mean HBM is short of one forward's activations: the Engine then runs the
    chunks eagerly instead of through PrefillGraphs (a graph holding one chunk's activations
    left the next chunk's eager run without memory at real capacity, H37)."""
    model = dak.offload("tiny-llama", batch=3, prompt_len=5, gen_len=2, policy="uniform", host_ratio=0.3, tune=False, graphs=False)
    eng = model.dak_engine
    calls = []

    class Stub:
        def run(self, r0, ids, plen):
            calls.append((r0, ids.shape[0]))
            return eng.prefill_chunk(r0, ids, plen)

        def clear(self):
            pass

    eng._prefill = Stub()
    ids, plen, _ = eng._check(torch.randint(3, 900, (3, 5)), 2, None)
    whole = eng.prefill(ids, plen)
    assert calls == [(0, 3)]
    eng.prefill_tokens = 5  # one request per forward
    calls.clear()
    parts = eng.prefill(ids, plen)
    assert calls == [] and torch.allclose(parts, whole, rtol=2e-2, atol=2e-2)
    eng._prefill = None
    model.dak_free()
