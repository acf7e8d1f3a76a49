"""SplitKVCache writes, the SDPA-shaped entry points and the HF adapter (CPU, Triton interpreter)."""

import os
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F

if os.environ.get("TRITON_INTERPRET", "0") != "1" and not torch.cuda.is_available():  # conftest sets it
    pytest.skip("needs TRITON_INTERPRET=1 or a GPU", allow_module_level=True)

from attention_oracle import TOL, reference_attention, rel_err  # noqa: E402
from dak.kernels.attention_config import AttentionConfig  # noqa: E402
from dak.kv_cache import SplitKVCache  # noqa: E402
from dak.nn.split_attention import (hf_attention_forward, prefill_attention, prepare_decode,  # noqa: E402
                                    split_decode_attention)
from dak.runtime_env import kernel_device  # noqa: E402

DEV = kernel_device()  # the cache's device: the GPU's, or the CPU under the interpreter

BF, FP = torch.bfloat16, torch.float16


def _cache(batch=3, b_h=1, hkv=2, s=40, d=64, dtype=BF, layers=2):
    return SplitKVCache(layers, batch, s, hkv, d, dtype, host_requests=b_h)


def _same(cache, layer, ref_k, ref_v, lengths):
    k, v = cache.gather(layer)
    for b, n in enumerate(lengths.tolist()):
        assert torch.equal(k[b, :, :n].cpu(), ref_k[b, :, :n]), f"K of request {b} differs"
        assert torch.equal(v[b, :, :n].cpu(), ref_v[b, :, :n]), f"V of request {b} differs"


@pytest.mark.parametrize("b_h,ce", [(0, False), (2, False), (5, False), (3, True)])
def test_prompt_then_appends_match_reference_cache(b_h, ce):
    torch.manual_seed(b_h)
    batch, hkv, hq, s, d, dtype = 5, 2, 8, 40, 64, FP
    cache = SplitKVCache(2, batch, s, hkv, d, dtype, host_requests=b_h, staging_requests=b_h if ce else 0)
    assert cache.k_host(1).shape == (b_h, hkv, s, d) and cache.k_hbm(1).shape == (batch - b_h, hkv, s, d)
    ref_k = torch.zeros(batch, hkv, s, d, dtype=dtype)
    ref_v = torch.zeros_like(ref_k)
    prompt = torch.tensor([7, 1, 12, 3, 12], dtype=torch.int32, device=DEV)
    k = torch.randn(batch, hkv, 12, d).to(dtype).to(DEV)
    v = torch.randn(batch, hkv, 12, d).to(dtype).to(DEV)
    q = torch.randn(batch, hq, 12, d).to(dtype).to(DEV)
    y = prefill_attention(q, k, v, cache, 1, prompt_lengths=prompt)
    assert torch.equal(y, F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True))
    for b, n in enumerate(prompt.tolist()):
        ref_k[b, :, :n], ref_v[b, :, :n] = k[b, :, :n], v[b, :, :n]
    cache.lengths.copy_(prompt)
    _same(cache, 1, ref_k, ref_v, prompt)
    cfg = prepare_decode(cache, hq, config=AttentionConfig(ce_share=1.0, ce_chunks=2) if ce else None)
    assert cfg.ce_share == (1.0 if ce else 0.0)
    for step in range(3):
        cache.lengths += 1
        k1 = torch.randn(batch, hkv, d).to(dtype).to(DEV)
        v1 = torch.randn(batch, hkv, d).to(dtype).to(DEV)
        cache.append(1, k1, v1)
        for b, n in enumerate(cache.lengths.tolist()):
            ref_k[b, :, n - 1], ref_v[b, :, n - 1] = k1[b], v1[b]
        q1 = torch.randn(batch, hq, 1, d).to(dtype).to(DEV)
        out = torch.full_like(q1, float("nan"))
        y = split_decode_attention(q1, cache, 1, out=out)
        assert y.shape == q1.shape and not out.isnan().any()
        err = rel_err(out[:, :, 0], reference_attention(q1[:, :, 0], ref_k, ref_v, cache.lengths))
        assert err < TOL[dtype], f"step {step}: rel err {err}"
    _same(cache, 1, ref_k, ref_v, cache.lengths)


def test_write_with_start_and_strided_source():
    cache = _cache(batch=3, b_h=2, s=20)
    src = torch.randn(3, 6, 2, 64).to(BF).to(DEV).transpose(1, 2)  # (B, Hkv, L, D) non-contiguous, like HF
    start = torch.tensor([0, 14, 5], dtype=torch.int32, device=DEV)
    count = torch.tensor([6, 6, 2], dtype=torch.int32, device=DEV)
    cache.write(0, src, src, start, count)
    k, _ = cache.gather(0)
    for b in range(3):
        s0, n = int(start[b]), int(count[b])
        assert torch.equal(k[b, :, s0:s0 + n], src[b, :, :n])


@pytest.mark.parametrize("b_h", [0, 2, 5])
def test_prompt_writes_in_request_chunks_match_one_write(b_h):
    """Requests [first, first + Bs) land where one whole-batch write puts them, host/HBM boundary
    crossed or not; requests outside the chunk are untouched."""
    src = torch.randn(5, 2, 7, 64).to(BF).to(DEV)
    plen = torch.tensor([7, 3, 5, 1, 6], dtype=torch.int32, device=DEV)
    whole, chunked = _cache(batch=5, b_h=b_h, s=9), _cache(batch=5, b_h=b_h, s=9)
    whole.write_prompt(1, src, src, plen)
    for part in chunked.parts(1):
        part.fill_(float("nan"))
    for r0, r1 in ((0, 1), (1, 3), (3, 5)):
        chunked.write_prompt(1, src[r0:r1], src[r0:r1], plen[r0:r1], first=r0)
        k, _ = chunked.gather(1)
        for b in range(r1, 5):
            assert k[b].isnan().all(), f"request {b} written before its chunk"
    _same(chunked, 1, src.cpu(), src.cpu(), plen)
    _same(whole, 1, src.cpu(), src.cpu(), plen)
    with pytest.raises(ValueError, match="do not fit the cache's batch 5"):
        chunked.write_prompt(1, src[:2], src[:2], plen[:2], first=4)


def test_hf_adapter_prefill_then_decode():
    torch.manual_seed(0)
    cache = _cache(batch=2, b_h=1, hkv=2, s=16, d=64, dtype=BF)
    mod = SimpleNamespace(layer_idx=1)
    q, k, v = (torch.randn(2, h, 5, 64).to(BF).to(DEV) for h in (4, 2, 2))
    cache.lengths.fill_(5)
    y, w = hf_attention_forward(mod, q, k, v, None, dak_cache=cache)
    assert w is None and y.shape == (2, 5, 4, 64)
    cache.lengths += 1
    q1, k1, v1 = (torch.randn(2, h, 1, 64).to(BF).to(DEV) for h in (4, 2, 2))
    y1, _ = hf_attention_forward(mod, q1, k1, v1, None, dak_cache=cache)
    kk, vv = torch.cat([k, k1], 2), torch.cat([v, v1], 2)
    ref = reference_attention(q1[:, :, 0], kk, vv, cache.lengths)
    assert y1.shape == (2, 1, 4, 64) and rel_err(y1[:, 0], ref) < TOL[BF]
    with pytest.raises(ValueError, match="dak_cache"):
        hf_attention_forward(mod, q1, k1, v1, None)


@pytest.mark.parametrize("kw,match", [
    (dict(host_requests=4), "cannot exceed"), (dict(staging_requests=2), "staging_requests"), (dict(head_dim=96), "head_dim"),
    (dict(dtype=torch.float32), "dtype"), (dict(max_len=0), "max_len"), (dict(batch=2.0), "batch"),
])
def test_cache_constructor_rejects(kw, match):
    args = dict(layers=1, batch=3, max_len=8, kv_heads=2, head_dim=64, dtype=BF, host_requests=1)
    with pytest.raises(ValueError, match=match):
        SplitKVCache(**{**args, **kw})


def test_cache_writes_reject_bad_input():
    cache = _cache(batch=3, b_h=1, s=8)
    k = torch.randn(3, 2, 64).to(BF).to(DEV)
    cache.lengths.fill_(1)
    with pytest.raises(ValueError, match="kv_heads"):
        cache.append(0, torch.randn(3, 4, 64).to(BF).to(DEV), k)
    with pytest.raises(ValueError, match="holds 3"):
        cache.append(0, torch.randn(4, 2, 64).to(BF).to(DEV), torch.randn(4, 2, 64).to(BF).to(DEV))
    with pytest.raises(ValueError, match="dtype"):
        cache.append(0, k.half(), k.half())
    with pytest.raises(ValueError, match="device"):
        cache.append(0, k.to("meta"), k.to("meta"))
    with pytest.raises(ValueError, match="layer"):
        cache.append(2, k, k)
    cache.lengths.zero_()
    with pytest.raises(ValueError, match=">= 1"):
        cache.append(0, k, k)
    cache.lengths.fill_(9)
    with pytest.raises(ValueError, match=r"\[0, 8\]"):
        cache.append(0, k, k)
    with pytest.raises(ValueError, match="max_len 8"):
        cache.write_prompt(0, *(torch.randn(3, 2, 9, 64).to(BF).to(DEV) for _ in range(2)))
    with pytest.raises(ValueError, match="max_len 8"):
        cache.write(0, torch.randn(3, 2, 2, 64).to(BF).to(DEV), torch.randn(3, 2, 2, 64).to(BF).to(DEV),
                    start=torch.tensor([0, 7, 0], dtype=torch.int32, device=DEV))


def test_entry_points_reject_bad_input():
    cache = _cache(batch=3, b_h=1, hkv=2, s=8)
    with pytest.raises(ValueError, match="multiple"):
        prepare_decode(cache, 3)
    with pytest.raises(ValueError, match="batch"):
        prepare_decode(cache, 4, batch=4)
    with pytest.raises(ValueError, match="one query token"):
        split_decode_attention(torch.randn(3, 4, 2, 64).to(BF), cache, 0)
    with pytest.raises(ValueError, match="multiple of kv heads"):
        prefill_attention(torch.randn(1, 3, 2, 64), torch.randn(1, 2, 2, 64), torch.randn(1, 2, 2, 64), cache, 0)


@pytest.mark.parametrize("b_h,batch,dtype", [(0, 3, BF), (2, 3, FP), (3, 3, BF), (1, 4, FP)])
def test_append_rotated_equals_rotary_then_append(b_h, batch, dtype):
    """One launch (dak.kernels.rotary_append, $DAK_ROTARY_KV=1) gives the rotated q and k of
    dak.kernels.fused_ops.rotary and the cache contents of append(rotated k, v), bit for bit, with
    host and HBM requests, strided q/k/v (views of one projection output), a request at length 0
    (nothing stored) and one at max_len."""
    from dak.kernels import rotary_append
    from dak.kernels.fused_ops import rotary
    torch.manual_seed(b_h + batch)
    hq, hkv, d, s = 4, 2, 64, 12
    dev = _cache().device
    qkv = torch.randn(batch, 1, (hq + 2 * hkv) * d).to(dtype).to(dev)   # one fused projection's output
    q, k, v = (t.view(batch, 1, -1, d).transpose(1, 2) for t in qkv.split([hq * d, hkv * d, hkv * d], -1))
    cos, sin = torch.randn(batch, 1, d).to(dtype).to(dev), torch.randn(batch, 1, d).to(dtype).to(dev)
    lengths = torch.tensor([5, 0, s, 3][:batch], dtype=torch.int32, device=dev)
    got_cache, ref_cache = (SplitKVCache(2, batch, s, hkv, d, dtype, host_requests=b_h) for _ in range(2))
    ones = torch.ones(batch, hkv, s, d, dtype=dtype, device=dev)
    ref_cache.write(1, ones, ones)
    q_ref, k_ref = rotary(q, k, cos, sin)
    ref_cache.append(1, k_ref[:, :, 0], v[:, :, 0].contiguous(), lengths=lengths, validate=False)
    for rows in (None, 1, 4):  # the default (the interpreter's 64), a GPU's 1, blocks with a partial last one
        got_cache.write(1, ones, ones)  # the same prior contents
        with pytest.MonkeyPatch.context() as mp:
            if rows is not None:
                mp.setattr(rotary_append, "rotary_rows", lambda: rows)
            qo, ko = got_cache.append_rotated(1, q, k, v, cos, sin, lengths=lengths)
        assert torch.equal(qo, q_ref) and torch.equal(ko, k_ref), rows
        for got, want in zip(got_cache.gather(1), ref_cache.gather(1)):
            assert torch.equal(got, want), rows
    with pytest.raises(ValueError, match=r"\(B, H, 1, D\)"):
        got_cache.append_rotated(1, qkv.view(batch, 1, -1, d)[:, :, :hq].transpose(1, 2).repeat(1, 1, 2, 1),
                                 k, v, cos, sin, lengths=lengths)
    for c in (got_cache, ref_cache):
        c.free()


@pytest.mark.parametrize("b_h,batch,dtype", [(0, 3, BF), (2, 3, FP)])
def test_append_rotated_norms_q_and_k_first(b_h, batch, dtype):
    """With Qwen3's per-head q and k norms (norms=(q weight, k weight, eps)) the one launch gives HF's
    RMSNorm then rotary: within one step of the dtype of dak's separate launches (the variance sums in
    another order), stored k included; a wrong weight, order or eps misses by far more."""
    from dak.kernels.fused_ops import rms_norm, rotary
    torch.manual_seed(7 + b_h)
    hq, hkv, d, s = 4, 2, 64, 12
    dev = _cache().device
    qkv = torch.randn(batch, 1, (hq + 2 * hkv) * d).to(dtype).to(dev) * 3
    q, k, v = (t.view(batch, 1, -1, d).transpose(1, 2) for t in qkv.split([hq * d, hkv * d, hkv * d], -1))
    cos, sin = torch.randn(batch, 1, d).to(dtype).to(dev), torch.randn(batch, 1, d).to(dtype).to(dev)
    qw, kw = (torch.rand(d).add(0.5).to(dtype).to(dev) for _ in range(2))
    eps = 1e-6
    lengths = torch.tensor([5, 1, s][:batch], dtype=torch.int32, device=dev)
    cache = SplitKVCache(1, batch, s, hkv, d, dtype, host_requests=b_h)
    for rows in (None, 1, 4):
        with pytest.MonkeyPatch.context() as mp:
            if rows is not None:
                from dak.kernels import rotary_append
                mp.setattr(rotary_append, "rotary_rows", lambda: rows)
            qo, ko = cache.append_rotated(0, q, k, v, cos, sin, (qw, kw, eps), lengths=lengths)
        q_ref, k_ref = rotary(rms_norm(q, qw, eps), rms_norm(k, kw, eps), cos, sin)
        step = 2.0 ** -7 if dtype == BF else 2.0 ** -10
        for got, want in ((qo, q_ref), (ko, k_ref)):
            assert ((got.float() - want.float()).abs() <= 2 * step * want.float().abs().clamp_min(1)).all(), rows
        stored = cache.gather(0)[0][torch.arange(batch), :, (lengths - 1).long().cpu()]
        assert torch.equal(stored.to(ko.device), ko[:, :, 0])
        wrong = cache.append_rotated(0, q, k, v, cos, sin, (kw, qw, eps), lengths=lengths)[0]
        assert (wrong.float() - q_ref.float()).abs().max() > 0.1
    with pytest.raises(ValueError, match="norm weights must be"):
        cache.append_rotated(0, q, k, v, cos, sin, (qw[:8], kw, eps), lengths=lengths)
    cache.free()
