"""The split decode-attention kernel under TRITON_INTERPRET=1 against the float32 oracle (CPU)."""

import os

import pytest
import torch

if os.environ.get("TRITON_INTERPRET", "0") != "1" and not torch.cuda.is_available():  # conftest sets it
    pytest.skip("needs TRITON_INTERPRET=1 or a GPU", allow_module_level=True)

from attention_oracle import TOL, reference_attention, rel_err  # noqa: E402
from dak.host import PinnedBuffer  # noqa: E402
from dak.kernels.attention_config import (AttentionConfig, finalize, heuristic_config,  # noqa: E402
                                          hbm_splits_for, host_splits_for)
from dak.kernels.split_attention import split_attention  # noqa: E402
from dak.kernels.split_attention_ce import ce_chunks, split_attention_ce  # noqa: E402
from dak.runtime_env import kernel_device  # noqa: E402

DEV = kernel_device()
BF, FP = torch.bfloat16, torch.float16


def _pinned(t):
    """t (n, Hkv, S, D) copied into exact-size host storage (pinned on a GPU machine)."""
    buf = PinnedBuffer.from_tensor(t.reshape(-1, t.shape[-1]))
    return buf.tensor.view(t.shape), buf


def _case(batch, b_h, hq, hkv, s, d, dtype, lengths, tma=False, cfg_kw=None, bq=None, seed=0,
          scale=None, staging=0, rows=None, q_slice=False, window=None):
    g = torch.Generator().manual_seed(seed)
    bq = batch if bq is None else bq
    k = torch.randn(batch, hkv, s, d, generator=g).to(dtype)
    v = torch.randn(batch, hkv, s, d, generator=g).to(dtype)
    q = torch.randn(bq, hq, d, generator=g).to(dtype)
    qd = q.to(DEV)
    if q_slice:  # q as a slice of a fused q/k/v product: batch stride 3 * hq * d, not copied
        wide = torch.randn(bq, 3, hq, d, generator=g).to(dtype)
        wide[:, 1] = q
        qd = wide.to(DEV)[:, 1]
        assert not qd.is_contiguous()
    lengths = torch.tensor(lengths, dtype=torch.int32)
    past = torch.arange(s)[None, :] >= lengths.long()[:, None]  # cache rows past each length: NaN
    if window:  # keys before each request's window: NaN too (a kernel that reads them unmasked fails)
        past |= torch.arange(s)[None, :] < lengths.long()[:, None] - window
    k[past[:, None, :, None].expand_as(k)] = float("nan")
    v[past[:, None, :, None].expand_as(v)] = float("nan")
    (kh, bk), (vh, bv) = _pinned(k[:b_h]), _pinned(v[:b_h])
    if rows is not None and rows < s:  # finite host data past `rows`: a copy of it would show
        kh[:, :, rows:], vh[:, :, rows:] = 7.0, 7.0
    kg, vg = k[b_h:].to(DEV), v[b_h:].to(DEV)
    cfg = heuristic_config(b_h, batch - b_h, hkv, hq // hkv, s, d, sms=4)
    cfg = AttentionConfig(**{**cfg.to_dict(), "host_tma": tma, "hbm_tma": tma, **(cfg_kw or {})})
    cfg = finalize(cfg, b_h, batch - b_h, hkv, s, 4, keep_splits=bool(cfg_kw and "hbm_splits" in cfg_kw))
    out = torch.full((bq, hq, d), float("nan"), dtype=dtype, device=DEV)  # poisoned
    if staging:  # copy-engine path; staging poisoned too
        st = tuple(torch.full((staging, hkv, s, d), float("nan"), dtype=dtype, device=DEV) for _ in range(2))
        res = split_attention_ce(qd, kh, vh, kg, vg, lengths.to(DEV), cfg, 4, st, scale=scale, out=out,
                                 rows=rows, window=window)
        if rows is not None and rows < s:  # only positions [0, rows) crossed the link
            n_ce = max(1, round(cfg.ce_share * min(bq, b_h)))
            assert all(t[:n_ce, :, rows:].isnan().all() and not t[:n_ce, :, :1].isnan().any() for t in st)
    else:
        res = split_attention(qd, kh, vh, kg, vg, lengths.to(DEV), cfg, scale=scale, out=out, window=window)
    assert res is out
    assert not out.isnan().any(), "some outputs were never written"
    ref = reference_attention(q, k, v, lengths, scale, window)
    err = rel_err(out.cpu(), ref)
    assert err < TOL[dtype], f"rel err {err} for {batch=} {b_h=} {hq=} {hkv=} {s=} {d=} {dtype} {cfg}"
    return out


CASES = [  # batch, host requests, q heads, kv heads, max_len, head_dim, dtype, lengths, tma
    (1, 0, 2, 2, 17, 64, BF, [17], False),
    (1, 1, 8, 1, 1000, 128, FP, [1000], True),
    (3, 1, 4, 1, 255, 64, BF, [1, 255, 17], False),
    (3, 3, 2, 2, 1000, 128, BF, [1000, 17, 1], True),
    (9, 4, 8, 2, 255, 64, FP, [255, 1, 17, 100, 3, 64, 65, 254, 128], False),
    (9, 4, 8, 2, 255, 64, BF, [17, 1, 255, 100, 3, 64, 65, 254, 128], True),
    (9, 0, 8, 1, 17, 128, BF, [1, 2, 3, 5, 8, 13, 16, 17, 9], False),
    (9, 9, 4, 4, 255, 64, FP, [200, 1, 17, 255, 31, 32, 33, 63, 64], True),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"b{c[0]}h{c[1]}g{c[2] // c[3]}s{c[4]}d{c[5]}{'tma' if c[8] else ''}")
def test_matches_reference(case):
    _case(*case, seed=sum(case[7]))


@pytest.mark.parametrize("tma", [False, True])
def test_many_splits_merge(tma):
    """Forced splits on both sides (partials + merge kernel), GQA 8, one request shorter than a split."""
    _case(3, 2, 8, 1, 1000, 64, FP, [1000, 1, 255], tma=tma,
          cfg_kw=dict(block_n=32, host_programs=2, host_splits=3, hbm_splits=5), seed=3)


@pytest.mark.parametrize("tma", [False, True])
@pytest.mark.parametrize("window", [1, 7, 32, 100])
def test_sliding_window(window, tma):
    """Each request attends its last `window` keys only (the earlier ones are NaN here): windows shorter than a
    tile (1, 7), one tile (32), past some lengths (100); split on both sides, then through the copy engine."""
    lengths = [1000, 1, 255, 33, 7, 100]
    _case(6, 3, 8, 2, 1000, 64, BF, lengths, tma=tma, window=window, seed=window,
          cfg_kw=dict(block_n=32, host_programs=2, host_splits=3, hbm_splits=2))
    _case(6, 3, 4, 4, 1000, 64, FP, lengths, tma=tma, window=window, seed=window + 1,
          cfg_kw=dict(block_n=32, ce_share=1.0, ce_chunks=2), staging=3)


@pytest.mark.parametrize("share,chunks", [(1.0, 1), (1.0, 3), (0.5, 2)])
def test_copy_engine_path(share, chunks):
    """Host requests [0, n_ce) staged into HBM in chunks, the rest read in place, GQA 4."""
    _case(6, 4, 8, 2, 100, 64, BF, [100, 1, 17, 99, 50, 3], cfg_kw=dict(ce_share=share, ce_chunks=chunks),
          staging=4, seed=11)
    _case(6, 4, 8, 2, 100, 64, FP, [100, 1, 17, 99, 50, 3], cfg_kw=dict(ce_share=share, ce_chunks=chunks),
          staging=4, bq=3, seed=12)


@pytest.mark.parametrize("share,chunks", [(1.0, 2), (0.5, 1)])
def test_copy_engine_path_copies_only_the_rows_asked_for(share, chunks):
    """rows < max_len: each staged request's first `rows` positions are copied, no more."""
    lengths = [60, 1, 17, 59, 50, 3]
    _case(6, 4, 8, 2, 100, 64, BF, lengths, cfg_kw=dict(ce_share=share, ce_chunks=chunks), staging=4,
          seed=13, rows=60)
    _case(6, 4, 4, 4, 100, 64, FP, lengths, cfg_kw=dict(ce_share=share, ce_chunks=chunks), staging=4,
          seed=14, rows=100)
    for bad, match in ((59, "exceeds rows=59"), (101, r"rows must be an integer in \[1, 100\]"),
                       (0, "rows must be"), (True, "rows must be")):
        with pytest.raises(ValueError, match=match):
            _case(6, 4, 8, 2, 100, 64, BF, lengths, cfg_kw=dict(ce_share=share, ce_chunks=chunks), staging=4,
                  rows=bad)


def test_copy_engine_path_needs_staging():
    args = _inputs()
    cfg = AttentionConfig(ce_share=1.0)
    with pytest.raises(ValueError, match="staging"):
        split_attention_ce(*args, cfg, 4)
    with pytest.raises(ValueError, match="staging"):
        split_attention_ce(*args, cfg, 4, staging=(args[3][:1], args[3][:1].half()))
    assert ce_chunks(5, 2) == ((0, 3), (3, 5)) and ce_chunks(2, 8) == ((0, 1), (1, 2)) and ce_chunks(0, 3) == ()
    with pytest.raises(ValueError):
        AttentionConfig(ce_share=1.5)


def test_query_batch_smaller_than_cache_and_custom_scale():
    _case(5, 2, 4, 2, 40, 64, BF, [40, 3, 7, 1, 9], bq=3, scale=0.3, seed=5)
    _case(5, 4, 4, 2, 40, 64, BF, [40, 3, 7, 1, 9], bq=2, seed=6)  # only host requests


@pytest.mark.parametrize("staging", [0, 3])
def test_query_read_at_its_strides(staging):
    """A query whose batch stride is not Hq * D (q sliced out of a fused q/k/v product, as dak.runtime.kv
    passes it) is read where it lies, in place and on the copy-engine path."""
    _case(5, 3, 4, 2, 40, 64, BF, [40, 3, 7, 1, 9], seed=15, q_slice=True, staging=staging,
          cfg_kw=dict(ce_share=1.0) if staging else None)


def test_length_zero_gives_zeros():
    out = _case(2, 1, 2, 1, 16, 64, BF, [0, 5], seed=7)
    assert torch.equal(out[0].float().cpu(), torch.zeros(2, 64))


def test_fresh_inputs_change_outputs():
    a = _case(2, 1, 2, 2, 16, 64, FP, [16, 16], seed=8)
    b = _case(2, 1, 2, 2, 16, 64, FP, [16, 16], seed=9)
    assert not torch.equal(a, b)


def test_sdpa_baseline_matches_oracle():
    from dak.baselines.attention import sdpa_decode
    k, v = torch.randn(3, 2, 40, 64), torch.randn(3, 2, 40, 64)
    q = torch.randn(3, 8, 64)
    lengths = torch.tensor([40, 1, 17], dtype=torch.int32)
    assert rel_err(sdpa_decode(q, k, v, lengths), reference_attention(q, k, v, lengths)) < 1e-5
    full = torch.full((3,), 40, dtype=torch.int32)
    assert rel_err(sdpa_decode(q, k, v, None, "math"), reference_attention(q, k, v, full)) < 1e-5


def test_split_heuristics():
    assert hbm_splits_for(512 * 32, 4096, 64, 132) == 1  # enough programs already
    ns = hbm_splits_for(8 * 8, 32768, 64, 132)
    assert 4 <= ns <= 32 and 64 * ns >= 0.8 * 264
    assert hbm_splits_for(8, 64, 64, 132) == 1  # never below two tiles per split
    assert hbm_splits_for(8 * 8, 256, 64, 132) == 1  # nor below 256 keys (the merge costs more)
    assert hbm_splits_for(8 * 8, 512, 64, 132) == 2
    short = heuristic_config(0, 8, 8, 4, 256, 128, 132)  # Llama-3-8B, B = 8, S = 256: H59's sweep winner
    assert (short.block_n, short.hbm_splits) == (128, 1)
    long = heuristic_config(0, 8, 8, 4, 2048, 128, 132)
    assert (long.block_n, long.hbm_splits) == (64, 4)
    assert heuristic_config(0, 8, 8, 4, 256, 256, 132).block_n == 64  # 128-key tiles of d = 256: too much smem
    ns = host_splits_for(1 * 8, 32768, 64, 16)
    assert (8 * ns) % 16 == 0
    cfg = heuristic_config(1, 0, 8, 4, 256, 128, 132)
    assert cfg.host_programs <= 8 * cfg.host_splits and cfg.ce_share == 0
    cfg = heuristic_config(8, 56, 8, 4, 8192, 128, 132, staging=True)  # 256 MiB on the host
    assert cfg.ce_share == 1.0 and cfg.ce_chunks == 4


def _inputs(dtype=BF, batch=3, b_h=1, hq=4, hkv=2, s=32, d=64):
    k = torch.randn(batch, hkv, s, d).to(dtype)
    kh, vh = _pinned(k[:b_h])[0], _pinned(k[:b_h])[0]
    kg = k[b_h:].to(DEV)
    q = torch.randn(batch, hq, d).to(dtype).to(DEV)
    lengths = torch.full((batch,), s, dtype=torch.int32, device=DEV)
    return [q, kh, vh, kg, kg.clone(), lengths]


@pytest.mark.parametrize("mutate,match", [
    (lambda a: a.__setitem__(5, a[5] + 1), r"\[0, 32\]"),                      # lengths beyond S
    (lambda a: a.__setitem__(5, a[5] - 40), r"\[0, 32\]"),                     # negative lengths
    (lambda a: a.__setitem__(0, torch.randn(4, 4, 64).to(BF).to(a[0].device)), "exceeds"),    # batch beyond B
    (lambda a: a.__setitem__(0, torch.randn(3, 3, 64).to(BF).to(a[0].device)), "multiple"),   # heads do not divide
    (lambda a: a.__setitem__(0, a[0].float()), "dtype"),
    (lambda a: a.__setitem__(0, a[0].half()), "cast"),
    (lambda a: a.__setitem__(0, a[0][..., :32].contiguous()), "head_dim"),
    (lambda a: a.__setitem__(0, a[0].transpose(1, 2).contiguous().transpose(1, 2)), "contiguous"),
    (lambda a: a.__setitem__(5, a[5].long()), "int32"),
    (lambda a: a.__setitem__(5, a[5][:2]), "at least 3"),
    (lambda a: a.__setitem__(5, a[5].to("meta")), "move it"),
    (lambda a: a.__setitem__(1, a[1].to("meta")), "pinned host memory"),
    (lambda a: a.__setitem__(3, a[3].to("meta")), "query's device"),
    (lambda a: a.__setitem__(3, a[3][:, :, :16]), "max_len|requests"),
])
def test_rejects_bad_input(mutate, match):
    args = _inputs()
    mutate(args)
    cfg = heuristic_config(1, 2, 2, 2, 32, 64, 4)
    with pytest.raises(ValueError, match=match):
        split_attention(*args, cfg)


def test_rejects_bad_out_and_config():
    args = _inputs()
    cfg = heuristic_config(1, 2, 2, 2, 32, 64, 4)
    with pytest.raises(ValueError, match="out must be"):
        split_attention(*args, cfg, out=torch.empty(3, 4, 64, dtype=FP, device=DEV))
    for kw in ({"block_n": 24}, {"block_n": 8}, {"num_stages": 0}, {"host_programs": 0},
               {"hbm_splits": 0}, {"host_splits": 1000}):
        with pytest.raises(ValueError):
            AttentionConfig(**kw)
    for window in (-1, True, 2.5, "8"):
        with pytest.raises(ValueError, match="window must be a positive number of keys"):
            split_attention(*args, cfg, window=window)


def test_the_planner_copies_ahead_exactly_the_host_parts_the_untuned_config_stages(monkeypatch):
    """Host K/V under ATTENTION_CE_MIN_BYTES a layer are read in place by the untuned config and
    priced so; from it on they are staged by the copy engine and priced as copied ahead."""
    from dak.hardware import get_profile
    from dak.models import Workload, list_operators, load_spec
    from dak.planner.overhead import copied_ahead
    monkeypatch.setenv("DAK_ROOFLINE_KV_AHEAD", "1")
    w = Workload("decode", 8, 32, 32)
    op = next(o for o in list_operators(load_spec("llama-2-7b"), w) if o.kind == "attention")
    spec = load_spec("llama-2-7b")
    for b_h in range(0, 9):
        cfg = heuristic_config(b_h, 8 - b_h, spec.num_kv_heads, 1, 64, spec.head_dim, 132, staging=True)
        staged = cfg.ce_share > 0
        assert staged == copied_ahead(op, op.host_bytes_for(b_h), get_profile("h200-pcie"), True), b_h
        assert staged == (b_h >= 4)  # 1 MiB of K/V a request: 4 MiB from 4 requests on
