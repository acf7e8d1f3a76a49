"""Copy-engine-assisted split linear (dak.kernels.split_linear_ce) against a float32 reference.

On the CPU the chunk copies and launches run in order under TRITON_INTERPRET=1; the GPU test
file runs the streamed version.
"""

import os

import pytest
import torch

if not torch.cuda.is_available():  # conftest does this too; kept for running the file alone
    os.environ.setdefault("TRITON_INTERPRET", "1")

from dak.host import PinnedBuffer, device_matrix  # noqa: E402
from dak.kernels.config import KernelConfig, block_n_for  # noqa: E402
from dak.kernels.split_linear_ce import chunk_bounds, ce_plan, ce_rows, split_linear_ce, staging_buffer  # noqa: E402
from linear_oracle import DEV, check, poisoned, split_inputs  # noqa: E402


def _case(m, k, n, m_h, share, chunks, dtype, bias, seed, cublas=False, **extra):
    x, wh, wg, b, ref = split_inputs(m, k, n, m_h, dtype, bias, seed)
    cfg = KernelConfig(block_m=16, block_n=block_n_for(n), block_k=32, host_programs=2, hbm_programs=3,
                       ce_share=share, ce_chunks=chunks, hbm_cublas=cublas, **extra)
    stage = staging_buffer(DEV, dtype, max(1, m_h * wh.tensor.stride(0)))
    stage.fill_(float("nan"))  # stale staging must never leak into results
    out = poisoned(n, m, dtype)
    res = split_linear_ce(x, wh.tensor, wg, b, cfg, stage, sms=4, out=out)
    assert res is out
    check(out, ref, dtype, f"m={m} k={k} n={n} m_h={m_h} share={share} chunks={chunks} cublas={cublas} {extra}")


@pytest.mark.parametrize("share,chunks", [(1.0, 1), (1.0, 3), (0.5, 2), (0.25, 8)])
@pytest.mark.parametrize("n", [1, 17, 70])
def test_ce_split_matches_reference(share, chunks, n):
    for i, dtype in enumerate((torch.bfloat16, torch.float16)):
        _case(83, 40, n, 50, share, chunks, dtype, bias=(n + i) % 2 == 1, seed=n + chunks + i)


def test_ce_all_rows_on_host_and_odd_k():
    _case(45, 13, 3, 45, 1.0, 2, torch.bfloat16, bias=True, seed=1)  # 13 columns: padded host rows
    _case(45, 13, 3, 45, 0.5, 4, torch.float16, bias=False, seed=2)


@pytest.mark.parametrize("m,m_h,n", [(83, 50, 130), (45, 45, 70), (61, 0, 90), (77, 3, 1)])
def test_hbm_rows_by_cublas_with_all_host_rows_staged(m, m_h, n):
    """hbm_cublas: host rows staged in chunks, HBM rows by torch's GEMM, written into the output's
    column slices (no temporaries); all-host, no-host and odd shapes."""
    for i, dtype in enumerate((torch.bfloat16, torch.float16)):
        _case(m, 40 + i, n, m_h, 1.0, 3, dtype, bias=i == 0, seed=m + n + i, cublas=True)


@pytest.mark.parametrize("m,m_h,n", [(83, 50, 5), (45, 45, 1), (61, 0, 16), (77, 3, 17)])
def test_ce_gemms_by_the_gemv(m, m_h, n, monkeypatch):
    """$DAK_CE_GEMV=1: at 1-16 tokens the staged chunks and the HBM rows run dak's GEMV, written
    into the output's column slices; 17 tokens keep cuBLAS. Both against the fp32 reference."""
    import dak.kernels.split_linear_ce as ce
    calls = []
    real = ce.hbm_gemv
    monkeypatch.setattr(ce, "hbm_gemv", lambda *a, **kw: calls.append(a[1].shape[0]) or real(*a, **kw))
    monkeypatch.setenv("DAK_CE_GEMV", "1")
    with torch.no_grad():
        for i, dtype in enumerate((torch.bfloat16, torch.float16)):
            _case(m, 40 + i, n, m_h, 1.0, 3, dtype, bias=i == 0, seed=m + n + i, cublas=True)
    chunk_rows = sum(hi - lo for lo, hi in ce_plan(KernelConfig(block_m=16, ce_share=1.0, ce_chunks=3,
                                                               hbm_cublas=True), m_h, m - m_h, 4).chunks)
    assert sum(calls) == (0 if n > 16 else 2 * (chunk_rows + (m - m_h))), calls


@pytest.mark.parametrize("m,m_h,n,share,used,cublas", [
    (83, 48, 5, 1.0, True, False), (83, 48, 5, 1.0, True, True), (48, 48, 1, 1.0, True, True),
    (99, 32, 16, 1.0, True, False), (83, 50, 5, 1.0, False, True), (83, 48, 5, 0.5, False, False),
    (83, 48, 17, 1.0, False, True)])
def test_ce_one_gemv_for_staged_and_hbm_rows(m, m_h, n, share, used, cublas, monkeypatch):
    """$DAK_CE_ONE_GEMV=1: with every host row staged at 1-16 tokens, the staged rows and the HBM rows
    are one staged_gemv launch after the copies (stale staging poisoned with NaN, bias on and off);
    where the staged rows are no multiple of 16, part of them stay in place, or 17 tokens, the usual
    path. hbm_cublas (the untuned decode default for staged operators) takes it too. All against the
    fp32 reference."""
    import dak.kernels.split_linear_ce as ce
    calls = []
    real = ce.staged_gemv
    monkeypatch.setattr(ce, "staged_gemv", lambda *a, **kw: calls.append(a[1].shape[0]) or real(*a, **kw))
    for flag in ("0", "1"):
        monkeypatch.setenv("DAK_CE_ONE_GEMV", flag)
        with torch.no_grad():
            for i, dtype in enumerate((torch.bfloat16, torch.float16)):
                _case(m, 40 + 3 * i, n, m_h, share, 2, dtype, bias=i == 0, seed=m + n + i, cublas=cublas)
        taken = used and flag == "1" and DEV.type != "cuda"  # a GPU takes it only inside a copy-ahead chain
        assert calls == ([m_h, m_h] if taken else []), calls  # (tests/test_copy_ahead_gpu.py runs that)


@pytest.mark.parametrize("env,owner,want", [(None, True, True), (None, False, False), ("0", True, False),
                                            ("1", False, True)])
def test_one_gemv_follows_the_plan_unless_the_env_says(env, owner, want, monkeypatch):
    """Unset $DAK_CE_ONE_GEMV: the chained operator's own flag (SplitLinear.one_gemv, from
    Placement.one_gemv) decides; '0'/'1' override it. Never for rows left in place or 17 tokens."""
    from types import SimpleNamespace
    from dak.kernels.split_linear_ce import _one_gemv
    if env is None:
        monkeypatch.delenv("DAK_CE_ONE_GEMV", raising=False)
    else:
        monkeypatch.setenv("DAK_CE_ONE_GEMV", env)
    ahead = (None, SimpleNamespace(one_gemv=owner))
    cfg = KernelConfig(block_m=16, ce_share=1.0, hbm_cublas=True)
    x = torch.zeros(8, 64, dtype=torch.bfloat16, device=DEV)
    with torch.no_grad():
        assert (_one_gemv(x, 48, 48, 30, 64, cfg, ahead) is not None) == want
        assert _one_gemv(x, 32, 48, 30, 64, cfg, ahead) is None
        assert _one_gemv(torch.zeros(17, 64, dtype=torch.bfloat16, device=DEV), 48, 48, 30, 64, cfg, ahead) is None


def test_one_gemv_operator_takes_the_untuned_staged_config(tmp_path, monkeypatch):
    """A SplitLinear the plan runs as one GEMV once staged (one_gemv) takes the untuned config the
    planner priced (every host row staged) at 1-16 tokens, not a cached one that reads some rows
    in place; beyond 16 tokens, without the flag, with $DAK_CE_ONE_GEMV=0, or where the untuned
    config reads its rows in place, the cache wins as before."""
    from dataclasses import replace
    from dak.kernels import tuning
    from dak.kernels.config import heuristic_config
    from dak.nn import SplitLinear
    monkeypatch.setenv("DAK_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(tuning, "_MEMORY", {})
    monkeypatch.delenv("DAK_CE_ONE_GEMV", raising=False)
    torch.manual_seed(4)

    def cached_in_place(key):  # a tuned config that reads every host row in place
        n, m_h = int(key.split("|")[2].split(",")[0]), 100
        return replace(heuristic_config(n, m_h, 60, 48, 4, False), ce_share=0.0, hbm_cublas=False)
    monkeypatch.setattr(tuning, "cached", cached_in_place)
    monkeypatch.setattr(tuning, "tune_key", lambda gpu, dtype, n, *rest: f"gpu|bf16|{n},rest")
    for one, env, n, staged in ((True, None, 8, True), (True, None, 17, False), (False, None, 8, False),
                                (True, "0", 8, False)):
        if env is None:
            monkeypatch.delenv("DAK_CE_ONE_GEMV", raising=False)
        else:
            monkeypatch.setenv("DAK_CE_ONE_GEMV", env)
        mod = SplitLinear(torch.randn(160, 48).to(torch.bfloat16), host_rows=100, row_tile=16, tune=False).to(DEV)
        mod.one_gemv = one
        assert heuristic_config(n, 100, 60, 48, 4, False).ce_share == 1.0  # 62% on the host: copy engine
        with torch.no_grad():
            cfg = mod.prepare(n)
        assert (cfg.ce_share == 1.0) == staged, (one, env, n, cfg)
    thin = SplitLinear(torch.randn(400, 48).to(torch.bfloat16), host_rows=4, row_tile=1, tune=False).to(DEV)
    thin.one_gemv = True  # a thin in-place share inside a one-GEMV plan: the cache's config as before
    with torch.no_grad():
        assert thin.prepare(8).ce_share == 0.0


def test_staged_gemv_rejects_what_it_cannot_take():
    from dak.kernels.hbm_gemv import GemvConfig
    from dak.kernels.staged_gemv import staged_config, staged_gemv
    x, top, rest = (torch.zeros(r, 64, dtype=torch.bfloat16, device=DEV) for r in (2, 40, 30))
    assert staged_config(40, 70, 64) is None and staged_config(48, 78, 64).block_m == 16
    for kw, match in ((dict(top=top), "pad the top part"), (dict(cfg=GemvConfig(backend="cublas")), "Triton launch"),
                      (dict(bias=torch.zeros(3, dtype=torch.bfloat16, device=DEV)), "bias must be"),
                      (dict(out=torch.zeros(2, 3, dtype=torch.bfloat16, device=DEV)), "out must be"),
                      (dict(rest=rest.half()), "one dtype")):
        args = {**dict(x=x, top=top[:32], rest=rest), **kw}
        with pytest.raises(ValueError, match=match):
            staged_gemv(**args)


def test_hbm_cublas_needs_every_host_row_staged():
    with pytest.raises(ValueError, match="hbm_cublas needs ce_share=1"):
        KernelConfig(ce_share=0.5, hbm_cublas=True)


def test_ce_plan_covers_host_rows_once():
    cfg = KernelConfig(block_m=16, ce_share=0.6, ce_chunks=3)
    plan = ce_plan(cfg, 200, 50, 132)
    assert plan.m_ce == ce_rows(cfg, 200) == 128  # 0.6 * 200 rounded to row tiles
    covered = [r for lo, hi in plan.chunks for r in range(lo, hi)]
    assert covered == list(range(plan.m_ce)), "chunks must tile [0, m_ce) exactly once"
    assert ce_rows(KernelConfig(ce_share=0.0), 200) == 0 and ce_rows(KernelConfig(ce_share=1.0), 7) == 7


@pytest.mark.parametrize("rows,tile,chunks,taper", [
    (720, 64, 4, 0.5), (720, 64, 8, 0.3), (50, 16, 3, 0.5), (17, 16, 4, 0.3), (1000, 16, 8, 1.0),
    (64, 64, 4, 0.5), (130, 16, 2, 0.9), (5, 16, 1, 0.3)])
def test_chunk_bounds_tile_the_rows_once_and_shrink(rows, tile, chunks, taper):
    """Chunks cover [0, rows) exactly once in whole tiles (the last may end mid-tile), none empty,
    at most `chunks` of them; with taper < 1 no chunk is larger than the one before it, to within
    the tile rounding."""
    b = chunk_bounds(rows, tile, chunks, taper)
    assert [r for lo, hi in b for r in range(lo, hi)] == list(range(rows))
    assert 1 <= len(b) <= chunks and all(lo % tile == 0 and hi > lo for lo, hi in b)
    sizes = [hi - lo for lo, hi in b]
    if taper < 1 and len(b) > 1:
        assert all(s2 <= s1 + tile for s1, s2 in zip(sizes, sizes[1:])), sizes
        assert sizes[-1] < sizes[0] + tile, sizes
    assert chunk_bounds(0, tile, chunks, taper) == ()


def test_tapered_chunks_split_720_rows_as_the_large_n_bench_does():
    """OPT-30B's 7168x7168 at x = 10% has 720 host rows in 64-row tiles (11.25 tiles): halving
    chunks leave the last GEMM 80 rows, equal chunks 144."""
    assert chunk_bounds(720, 64, 4, 1.0) == ((0, 192), (192, 384), (384, 576), (576, 720))
    assert chunk_bounds(720, 64, 4, 0.5) == ((0, 384), (384, 576), (576, 640), (640, 720))


@pytest.mark.parametrize("taper,fork", [(0.5, False), (0.3, True), (1.0, True)])
@pytest.mark.parametrize("m,m_h,n", [(83, 50, 130), (77, 45, 70)])
def test_tapered_or_forked_chunks_match_reference(m, m_h, n, taper, fork):
    """Shrinking chunks and GEMMs on the forked stream (run in order on the CPU) give the same
    products as the reference, with and without bias."""
    for i, dtype in enumerate((torch.bfloat16, torch.float16)):
        _case(m, 40 + i, n, m_h, 1.0, 4, dtype, bias=i == 1, seed=m + n + i, cublas=True,
              ce_taper=taper, ce_fork=fork)


def test_ce_rejects_small_staging():
    dtype = torch.bfloat16
    wh = PinnedBuffer.from_tensor(torch.randn(32, 16).to(dtype))
    wg = device_matrix(16, 16, dtype, DEV)
    cfg = KernelConfig(block_m=16, block_k=16, ce_share=1.0)
    with pytest.raises(ValueError, match="staging"):
        split_linear_ce(torch.randn(2, 16).to(dtype).to(DEV), wh.tensor, wg, None, cfg,
                        torch.empty(10, dtype=dtype, device=DEV), sms=4)


def test_bad_ce_config():
    with pytest.raises(ValueError, match="ce_share"):
        KernelConfig(ce_share=1.5)
    with pytest.raises(ValueError, match="ce_chunks"):
        KernelConfig(ce_chunks=0)
    for bad in (0.0, -0.5, 1.5):
        with pytest.raises(ValueError, match="ce_taper must be in"):
            KernelConfig(ce_taper=bad)


def test_module_in_grad_mode_with_an_input_that_requires_grad():
    """OPT under plain model(ids) (grad mode on, embeddings require grad): the staged rows'
    torch GEMM writes into the output and must not trip autograd; results stay exact."""
    from dak.kernels.tuning import token_bucket
    from dak.nn import SplitLinear
    torch.manual_seed(11)
    w = (torch.randn(70, 48) * 0.1).to(torch.bfloat16)
    b = torch.randn(70).to(torch.bfloat16)
    mod = SplitLinear(w, b, host_rows=32, row_tile=16, tune=False)
    mod._configs[token_bucket(5)] = KernelConfig(block_m=16, block_n=16, block_k=32, host_programs=2,
                                                 hbm_programs=3, ce_share=1.0, ce_chunks=2)
    x = torch.randn(5, 48).to(torch.bfloat16).to(DEV).requires_grad_(True)
    assert torch.is_grad_enabled()
    y = mod(x)
    assert not y.requires_grad  # inference only: no autograd history through the split path
    ref = x.detach().float().cpu() @ w.float().t() + b.float()
    check(y, ref, torch.bfloat16, "grad mode")


@pytest.mark.parametrize("env,want", [("0", False), ("1", True), (None, True)])
def test_ce_hbm_cublas_in_untuned_decode_configs(monkeypatch, tmp_path, env, want):
    """By default (or $DAK_CE_HBM_CUBLAS=1) an untuned decode config that stages every host row by
    copy engine multiplies its HBM rows with cuBLAS; =0 keeps the split kernel; in-place shares
    and all-HBM operators keep the split kernel; the module's results stay exact either way."""
    from dak.kernels.config import heuristic_config
    from dak.nn import SplitLinear
    from dak.kernels import tuning
    if env is None:
        monkeypatch.delenv("DAK_CE_HBM_CUBLAS", raising=False)
    else:
        monkeypatch.setenv("DAK_CE_HBM_CUBLAS", env)
    monkeypatch.setenv("DAK_CACHE_DIR", str(tmp_path))  # configs are cached per process and on disk:
    monkeypatch.setattr(tuning, "_MEMORY", {})  # the knob applies to configs made after it is set
    staged = heuristic_config(8, 512, 6656, 7168, 132, True)
    assert staged.ce_share == 1.0 and staged.hbm_cublas == want
    for m_h in (16, 0):  # a thin share read in place; nothing on the host
        cfg = heuristic_config(8, m_h, 7168 - m_h, 7168, 132, True)
        assert cfg.ce_share == 0.0 and not cfg.hbm_cublas
    torch.manual_seed(5)
    w = (torch.randn(150, 72) * 0.1).to(torch.bfloat16)
    b = torch.randn(150).to(torch.bfloat16)
    mod = SplitLinear(w, b, host_ratio=0.3, row_tile=16, tune=False).to(DEV)
    assert mod.prepare(3).hbm_cublas == want
    x = torch.randn(3, 72).to(torch.bfloat16).to(DEV)
    check(mod(x), x.float().cpu() @ w.float().t() + b.float(), torch.bfloat16, f"DAK_CE_HBM_CUBLAS={env}")
    monkeypatch.setenv("DAK_CE_HBM_CUBLAS", "2")
    with pytest.raises(ValueError, match="DAK_CE_HBM_CUBLAS must be 0 or 1"):
        heuristic_config(8, 512, 6656, 7168, 132, True)
