"""GPU checks of split decode attention (run on the H200): random cases, graph capture and
replay, 1000 appends inside a replayed graph, prefill, tuning, and the baselines."""

import random
import time

import pytest
import torch
import torch.nn.functional as F

from attention_oracle import TOL, reference_attention, rel_err
from dak.baselines.attention import (PrefetchAttention, SDPAAttention, UVAAttention, sdpa_backends,
                                     sdpa_decode)
from dak.host import PinnedBuffer
from dak.kernels.attention_config import AttentionConfig, finalize
from dak.kernels.split_attention import split_attention, tma_view
from dak.kernels.split_attention_ce import split_attention_ce
from dak.kv_cache import SplitKVCache
from dak.nn.split_attention import prefill_attention, prepare_decode, split_decode_attention

pytestmark = pytest.mark.gpu
PRESETS = [  # few distinct compiles keep this test short
    dict(block_n=64, num_warps=4, num_stages=3, host_tma=False, hbm_tma=False),
    dict(block_n=64, num_warps=4, num_stages=4, host_tma=True, hbm_tma=False),
    dict(block_n=128, num_warps=8, num_stages=2, host_tma=True, hbm_tma=True),
    dict(block_n=32, num_warps=4, num_stages=3, host_tma=False, hbm_tma=True),
]

def _sms():
    return torch.cuda.get_device_properties(0).multi_processor_count


def _pinned(t):
    buf = PinnedBuffer.from_tensor(t.reshape(-1, t.shape[-1]))
    assert buf.pinned or t.numel() == 0
    return buf.tensor.view(t.shape), buf


def _case(batch, b_h, hq, hkv, s, d, dtype, lengths, cfg_kw, keep_splits, ce=False):
    k = torch.randn(batch, hkv, s, d, device="cuda").to(dtype)
    v = torch.randn(batch, hkv, s, d, device="cuda").to(dtype)
    q = torch.randn(batch, hq, d, device="cuda").to(dtype)
    past = (torch.arange(s, device="cuda")[None, :] >= lengths.long()[:, None])[:, None, :, None]
    k, v = k.masked_fill(past, float("nan")), v.masked_fill(past, float("nan"))  # never read
    (kh, bk), (vh, bv) = _pinned(k[:b_h]), _pinned(v[:b_h])
    cfg = finalize(AttentionConfig(**cfg_kw), b_h, batch - b_h, hkv, s, _sms(), keep_splits=keep_splits)
    out = torch.full((batch, hq, d), float("nan"), device="cuda", dtype=dtype)
    if ce:  # copy-engine path, poisoned staging
        st = tuple(torch.full((b_h, hkv, s, d), float("nan"), device="cuda", dtype=dtype) for _ in range(2))
        split_attention_ce(q, kh, vh, k[b_h:], v[b_h:], lengths, cfg, _sms(), st, out=out)
    else:
        split_attention(q, kh, vh, k[b_h:], v[b_h:], lengths, cfg, out=out)
    torch.cuda.synchronize()
    assert not out.isnan().any(), ("unwritten outputs", batch, b_h, hq, hkv, s, d, cfg)
    err = rel_err(out, reference_attention(q, k, v, lengths))
    assert err < TOL[dtype], (batch, b_h, hq, hkv, s, d, dtype, cfg, err)


def _random_cases(n=220, seed=1234):
    """The random cases' parameters, drawn once (lengths as lists: no CUDA at collection)."""
    rng = random.Random(seed)
    cases = []
    for _ in range(n):
        hkv = rng.choice([1, 2, 4, 8])
        hq = hkv * rng.choice([1, 1, 4, 8, 7, 32 if hkv == 1 else 2])
        batch = rng.choice([1, 2, 3, 8, 9, 33])
        b_h = rng.choice([0, batch, rng.randint(0, batch)])
        s = rng.choice([1, 17, 64, 255, 1000, 4097, rng.randint(1, 3000)])
        lengths = [rng.choice([s, rng.randint(0, s), rng.randint(1, max(1, s // 8))]) for _ in range(batch)]
        d = rng.choice([64, 128])
        dtype = rng.choice([torch.bfloat16, torch.float16])
        cfg_kw = dict(rng.choice(PRESETS), host_programs=rng.choice([1, 8, 16, 32]))
        keep = rng.random() < 0.3
        if keep:
            cfg_kw.update(host_splits=rng.randint(1, 9), hbm_splits=rng.randint(1, 40))
        ce = b_h > 0 and rng.random() < 0.25
        if ce:
            cfg_kw.update(ce_share=rng.choice([0.5, 1.0]), ce_chunks=rng.choice([1, 3]))
        cases.append((batch, b_h, hq, hkv, s, d, dtype, lengths, cfg_kw, keep, ce))
    return cases


CASES, CHUNK = _random_cases(), 55


@pytest.mark.parametrize("first", range(0, len(CASES), CHUNK), ids=lambda f: f"cases{f}-{f + CHUNK - 1}")
def test_random_cases_against_fp32_reference(first):
    """220 cases in chunks of 55 (each chunk its own test: a run stopped at a time limit still
    reports the chunks it finished; `-k cases0-54` picks one)."""
    failures = []
    start = time.perf_counter()
    for i in range(first, min(first + CHUNK, len(CASES))):
        if i % 20 == 0:  # progress, for logs of runs stopped at a time limit (pytest -s)
            print(f"case {i}: {time.perf_counter() - start:.1f} s", flush=True)
        batch, b_h, hq, hkv, s, d, dtype, lengths, cfg_kw, keep, ce = CASES[i]
        lengths = torch.tensor(lengths, dtype=torch.int32, device="cuda")
        t0 = time.perf_counter()
        try:
            _case(batch, b_h, hq, hkv, s, d, dtype, lengths, dict(cfg_kw), keep, ce)
        except AssertionError as e:
            failures.append(f"case {i}: {e}")
        if time.perf_counter() - t0 > 5:
            print(f"case {i} took {time.perf_counter() - t0:.1f} s:", batch, b_h, hq, hkv, s, d, cfg_kw, flush=True)
    assert not failures, f"{len(failures)} failures, first: {failures[:3]}"


def test_pinned_cache_is_tma_addressable():
    cache = SplitKVCache(1, 4, 1000, 8, 128, torch.bfloat16, host_requests=2)
    assert cache.pinned and cache.k_host(0).is_pinned()
    assert all(tma_view(t) is not None for t in cache.parts(0))


@pytest.mark.parametrize("b_h,ce,fork", [(0, False, "1"), (3, False, "1"), (8, False, "1"), (3, True, "1"),
                                         (8, True, "1"), (3, True, "0"), (8, True, "0")])
def test_graph_replay_equals_eager(b_h, ce, fork, monkeypatch):
    monkeypatch.setenv("DAK_CE_FORK", fork)  # 0 (with the next): staged requests attended on the caller's stream
    monkeypatch.setenv("DAK_ATTENTION_CE_FORK", fork)
    cache = SplitKVCache(1, 8, 2048, 8, 128, torch.bfloat16, host_requests=b_h, staging_requests=b_h if ce else 0)
    for t in cache.parts(0):
        t.copy_(torch.randn(t.shape, device="cuda").to(t.dtype))
    cache.lengths.copy_(torch.randint(1, 2049, (8,), device="cuda", dtype=torch.int32))
    cfg = prepare_decode(cache, 32)
    assert cfg.ce_share == (1.0 if ce else 0.0)  # the heuristic stages >= 4 MiB host parts
    q = torch.randn(8, 32, 128, device="cuda", dtype=torch.bfloat16)
    out = torch.empty_like(q)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        split_decode_attention(q, cache, 0, out=out)
    for _ in range(3):
        q.copy_(torch.randn_like(q))
        g.replay()
        torch.cuda.synchronize()
        assert torch.equal(out, split_decode_attention(q, cache, 0))
    k, v = cache.gather(0)
    assert rel_err(out, reference_attention(q, k, v, cache.lengths)) < TOL[torch.bfloat16]


@pytest.mark.parametrize("b_h", [3, 8])
def test_copy_rows_inside_a_replayed_graph(b_h):
    """cache.copy_rows < max_len: the graph's 2-D memcpy stages only those positions; replays
    with any lengths <= copy_rows equal eager attention over the whole cache and the oracle."""
    cache = SplitKVCache(1, 8, 2048, 8, 128, torch.bfloat16, host_requests=b_h, staging_requests=b_h)
    for t in cache.parts(0):
        t.copy_(torch.randn(t.shape, device="cuda").to(t.dtype))
    cache.lengths.fill_(1)
    cfg = prepare_decode(cache, 32)
    assert cfg.ce_share == 1.0
    cache.staging[0].fill_(float("nan"))
    cache.staging[1].fill_(float("nan"))
    q = torch.randn(8, 32, 128, device="cuda", dtype=torch.bfloat16)
    out = torch.empty_like(q)
    cache.copy_rows = 700
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        split_decode_attention(q, cache, 0, out=out)
    cache.copy_rows = None
    for _ in range(3):
        q.copy_(torch.randn_like(q))
        cache.lengths.copy_(torch.randint(1, 701, (8,), device="cuda", dtype=torch.int32))
        g.replay()
        torch.cuda.synchronize()
        n_ce = b_h
        assert cache.staging[0][:n_ce, :, 700:].isnan().all()  # nothing past copy_rows crossed the link
        full = split_decode_attention(q, cache, 0)  # whole max_len copied
        assert torch.equal(out, full)
        k, v = cache.gather(0)
        assert rel_err(out, reference_attention(q, k, v, cache.lengths)) < TOL[torch.bfloat16]
        cache.staging[0].fill_(float("nan"))


def test_unprepared_shape_inside_capture_is_an_error():
    cache = SplitKVCache(1, 4, 64, 2, 64, torch.float16, host_requests=1)
    q = torch.randn(4, 4, 64, device="cuda", dtype=torch.float16)
    g = torch.cuda.CUDAGraph()
    with pytest.raises(RuntimeError, match="prepare"):
        with torch.cuda.graph(g):
            split_decode_attention(q, cache, 0)


@pytest.mark.parametrize("ce", [False, True])
def test_1000_appends_inside_replayed_graph_match_reference_cache(ce):
    torch.manual_seed(0)
    layers, batch, b_h, hkv, hq, d, s, dtype = 2, 6, 2, 2, 8, 128, 1100, torch.float16
    cache = SplitKVCache(layers, batch, s, hkv, d, dtype, host_requests=b_h, staging_requests=b_h if ce else 0)
    ref_k = torch.zeros(layers, batch, hkv, s, d, device="cuda", dtype=dtype)
    ref_v = torch.zeros_like(ref_k)
    prompt = torch.tensor([1, 64, 17, 3, 40, 64], dtype=torch.int32, device="cuda")
    for layer in range(layers):
        k, v = (torch.randn(batch, hkv, 64, d, device="cuda").to(dtype) for _ in range(2))
        cache.write_prompt(layer, k, v, prompt)
        for b, n in enumerate(prompt.tolist()):
            ref_k[layer, b, :, :n], ref_v[layer, b, :, :n] = k[b, :, :n], v[b, :, :n]
    cache.lengths.copy_(prompt)
    prepare_decode(cache, hq, config=AttentionConfig(ce_share=1.0, ce_chunks=2) if ce else None)
    k_new = torch.zeros(layers, batch, hkv, d, device="cuda", dtype=dtype)
    v_new, q = torch.zeros_like(k_new), torch.zeros(layers, batch, hq, d, device="cuda", dtype=dtype)
    out = torch.zeros_like(q)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        cache.lengths.add_(1)
        for layer in range(layers):
            cache.append(layer, k_new[layer], v_new[layer])
            split_decode_attention(q[layer], cache, layer, out=out[layer])
    lengths = prompt.long().clone()
    for step in range(1000):
        for t in (k_new, v_new, q):
            t.copy_(torch.randn(t.shape, device="cuda").to(dtype))
        g.replay()
        lengths += 1
        for b, n in enumerate(lengths.tolist()):
            ref_k[:, b, :, n - 1], ref_v[:, b, :, n - 1] = k_new[:, b], v_new[:, b]
        if step % 97 == 0 or step == 999:
            for layer in range(layers):
                ref = reference_attention(q[layer], ref_k[layer], ref_v[layer], lengths)
                assert rel_err(out[layer], ref) < TOL[dtype], (step, layer)
    torch.cuda.synchronize()
    assert torch.equal(cache.lengths.long(), lengths)
    for layer in range(layers):
        k, v = cache.gather(layer)
        for b, n in enumerate(lengths.tolist()):
            assert torch.equal(k[b, :, :n], ref_k[layer, b, :, :n]), (layer, b)
            assert torch.equal(v[b, :, :n], ref_v[layer, b, :, :n]), (layer, b)


def test_prefill_overlaps_host_writes_and_matches():
    cache = SplitKVCache(1, 4, 512, 8, 128, torch.bfloat16, host_requests=2)
    q = torch.randn(4, 32, 300, 128, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(4, 8, 300, 128, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    prompt = torch.tensor([300, 5, 299, 1], dtype=torch.int32, device="cuda")
    y = prefill_attention(q, k, v, cache, 0, prompt)
    assert torch.equal(y, F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True))
    kc, vc = cache.gather(0)
    for b, n in enumerate(prompt.tolist()):
        assert torch.equal(kc[b, :, :n], k[b, :, :n]) and torch.equal(vc[b, :, :n], v[b, :, :n])


def test_tuned_config_is_cached_and_correct(tmp_path, monkeypatch):
    monkeypatch.setenv("DAK_CACHE_DIR", str(tmp_path))
    cache = SplitKVCache(1, 8, 4096, 8, 128, torch.bfloat16, host_requests=1)
    for t in cache.parts(0):
        t.copy_(torch.randn(t.shape, device="cuda").to(t.dtype))
    cache.lengths.fill_(4096)
    prepare_decode(cache, 32, tune=True)
    assert (tmp_path / "split_attention.json").exists()
    q = torch.randn(8, 32, 128, device="cuda", dtype=torch.bfloat16)
    k, v = cache.gather(0)
    assert rel_err(split_decode_attention(q, cache, 0), reference_attention(q, k, v, cache.lengths)) < 2e-2


@pytest.mark.parametrize("hq,hkv", [(32, 32), (32, 8)])
def test_baselines_match_reference(hq, hkv):
    batch, b_h, s, d, dtype = 6, 2, 1024, 128, torch.bfloat16
    k, v = (torch.randn(batch, hkv, s, d, device="cuda").to(dtype) for _ in range(2))
    q = torch.randn(batch, hq, d, device="cuda").to(dtype)
    full = torch.full((batch,), s, dtype=torch.int32, device="cuda")
    lengths = torch.randint(1, s + 1, (batch,), dtype=torch.int32, device="cuda")
    ref_full, ref = reference_attention(q, k, v, full), reference_attention(q, k, v, lengths)
    worked = []
    for name in sdpa_backends():
        try:
            y = SDPAAttention(k, v, backend=name)(q)
        except RuntimeError:
            continue  # this backend does not take the shape (e.g. no GQA)
        assert rel_err(y, ref_full) < 2e-2, name
        worked.append(name)
    assert "flash" in worked or "cudnn" in worked, worked
    assert rel_err(sdpa_decode(q, k, v, lengths), ref) < 2e-2
    (kh, _), (vh, _) = _pinned(k[:b_h]), _pinned(v[:b_h])
    for use_sdpa in (False, True):
        pre = PrefetchAttention(kh, vh, k[b_h:], v[b_h:], hq, use_sdpa=use_sdpa)
        assert rel_err(pre(q, lengths), ref) < 2e-2
    (ka, _), (va, _) = _pinned(k), _pinned(v)
    assert rel_err(UVAAttention(ka, va)(q, lengths), ref) < 2e-2
    assert rel_err(UVAAttention(ka, va)(q), ref_full) < 2e-2
