"""The split-linear kernel under TRITON_INTERPRET=1 against a float32 reference (CPU)."""

import os

import pytest
import torch

if not torch.cuda.is_available():  # conftest does this too; kept for running the file alone
    os.environ.setdefault("TRITON_INTERPRET", "1")

from dak.host import PinnedBuffer, device_matrix  # noqa: E402
from dak.kernels.config import KernelConfig, block_n_for, finalize  # noqa: E402
from dak.kernels.split_linear import split_linear  # noqa: E402
from linear_oracle import DEV, check, poisoned, split_inputs  # noqa: E402


def _split_case(m, k, n, m_h, dtype, bias, host_tma, hbm_tma, block_m=16, block_k=32, seed=0, split=1):
    x, wh, wg, b, ref = split_inputs(m, k, n, m_h, dtype, bias, seed)
    cfg = finalize(KernelConfig(block_m=block_m, block_n=block_n_for(n), block_k=block_k,
                                host_programs=2, hbm_programs=3, host_tma=host_tma, hbm_tma=hbm_tma,
                                host_split_k=split),
                   m_h, m - m_h, sms=4)
    out = poisoned(n, m, dtype)
    res = split_linear(x, wh.tensor, wg, b, cfg, out=out)
    assert res is out
    check(out, ref, dtype, f"m={m} k={k} n={n} m_h={m_h} {dtype}")


@pytest.mark.parametrize("n", [1, 3, 17, 64, 130])
@pytest.mark.parametrize("frac", [0.0, 0.4, 1.0])
def test_split_linear_matches_reference(n, frac):
    m, k = 77, 72  # neither a multiple of the row tile nor of the reduction tile
    m_h = round(frac * m)
    for i, dtype in enumerate((torch.bfloat16, torch.float16)):
        _split_case(m, k, n, m_h, dtype, bias=(n + i) % 2 == 0, host_tma=False, hbm_tma=False,
                    seed=n * 10 + i)


@pytest.mark.parametrize("n,m,k,m_h", [(1, 50, 40, 20), (17, 33, 56, 33), (130, 45, 24, 0), (3, 64, 64, 32)])
def test_tma_path_matches_reference(n, m, k, m_h):
    for dtype in (torch.bfloat16, torch.float16):
        _split_case(m, k, n, m_h, dtype, bias=True, host_tma=True, hbm_tma=True, seed=m + n)


@pytest.mark.parametrize("split", [2, 4, 8])
@pytest.mark.parametrize("n,m,k,m_h", [(1, 40, 200, 40), (5, 70, 130, 33), (64, 50, 96, 17), (3, 30, 40, 30)])
def test_host_split_k_matches_reference(split, n, m, k, m_h):
    """Split-K over host tiles, including splits with no reduction columns left (k=40)."""
    for i, dtype in enumerate((torch.bfloat16, torch.float16)):
        _split_case(m, k, n, m_h, dtype, bias=(i + split) % 2 == 0, host_tma=(i == 1), hbm_tma=False,
                    seed=split * 100 + n + i, split=split)


def test_host_split_k_back_to_back_launches_reset_counters():
    """The shared counters must return to zero, or the next launch would finalize early."""
    for seed in range(3):
        _split_case(48, 160, 2, 48, torch.float16, bias=True, host_tma=False, hbm_tma=False,
                    seed=seed, split=4)
    from dak.kernels.split_linear import _WORKSPACES
    assert int(_WORKSPACES[DEV][1].abs().sum()) == 0


def test_odd_k_and_block_sizes():
    _split_case(37, 13, 5, 16, torch.bfloat16, bias=False, host_tma=True, hbm_tma=True, block_m=32, block_k=16)
    _split_case(100, 100, 2, 64, torch.float16, bias=True, host_tma=False, hbm_tma=True, block_m=64, block_k=64)


def test_fresh_inputs_change_outputs():
    """Guards against a kernel that ignores its inputs (e.g. a cached or constant result)."""
    dtype = torch.float16
    wh = PinnedBuffer.from_tensor(torch.randn(16, 32).to(dtype))
    wg = device_matrix(16, 32, dtype, DEV)
    wg.copy_(torch.randn(16, 32))
    cfg = finalize(KernelConfig(block_m=16, block_k=32), 16, 16, sms=4)
    y1 = split_linear(torch.randn(2, 32).to(dtype).to(DEV), wh.tensor, wg, None, cfg)
    y2 = split_linear(torch.randn(2, 32).to(dtype).to(DEV), wh.tensor, wg, None, cfg)
    assert not torch.equal(y1, y2)


def _parts(dtype=torch.bfloat16):
    wh = PinnedBuffer.from_tensor(torch.randn(16, 32).to(dtype)).tensor
    wg = device_matrix(16, 32, dtype, DEV)
    return wh, wg


@pytest.mark.parametrize("mutate,match", [
    (lambda x, wh, wg, b: (x.float(), wh, wg, b), "dtype"),
    (lambda x, wh, wg, b: (x.half(), wh, wg, b), "dtype"),
    (lambda x, wh, wg, b: (x.t().contiguous().t(), wh, wg, b), "contiguous"),
    (lambda x, wh, wg, b: (x[:, :31].contiguous(), wh, wg, b), "in_features"),
    (lambda x, wh, wg, b: (x, wh, wg, b[:5]), "bias"),
    (lambda x, wh, wg, b: (x[None], wh, wg, b), "2-D"),
])
def test_launcher_rejects_bad_input(mutate, match):
    wh, wg = _parts()
    x = torch.randn(4, 32).to(torch.bfloat16).to(DEV)
    b = torch.randn(32).to(torch.bfloat16).to(DEV)
    cfg = finalize(KernelConfig(block_m=16, block_k=32), 16, 16, sms=4)
    args = mutate(x, wh, wg, b)
    with pytest.raises(ValueError, match=match):
        split_linear(*args, cfg)


def test_bad_config_values():
    for kw in ({"block_m": 24}, {"block_k": 8}, {"num_stages": 0}, {"host_programs": -1}):
        with pytest.raises(ValueError):
            KernelConfig(**kw)


def test_triton_once_configs_run_at_three_stages_or_more():
    """2 stages gave wrong sums on the H200 (triton-once-stages-diag-h200.log): finalize raises them."""
    once = finalize(KernelConfig(host_kernel="triton_once", num_stages=2), 300, 500, 132)
    assert once.num_stages == 3
    assert finalize(KernelConfig(host_kernel="triton_once", num_stages=6), 300, 500, 132).num_stages == 6
    assert finalize(KernelConfig(host_kernel="triton", num_stages=2), 300, 500, 132).num_stages == 2


def test_copy_engine_share_threshold_from_the_environment(monkeypatch):
    from dak.kernels.config import heuristic_config
    assert heuristic_config(8, 64, 4032, 512, 132, False).ce_share == 0.0  # 1.6% < 2%: in place
    monkeypatch.setenv("DAK_CE_MIN_SHARE", "0")
    assert heuristic_config(8, 64, 4032, 512, 132, False).ce_share == 1.0
    monkeypatch.setenv("DAK_CE_MIN_SHARE", "two")
    with pytest.raises(ValueError, match="DAK_CE_MIN_SHARE"):
        heuristic_config(8, 64, 4032, 512, 132, False)


def test_copy_engine_chunks_and_copy_streams_from_the_environment(monkeypatch):
    """One copy-engine chunk per operator by default (H200: fewer copies, less start-up);
    $DAK_CE_CHUNKS and $DAK_COPY_STREAMS override it for experiments and reject bad values."""
    from dak.kernels.config import heuristic_config
    from dak.shares import copy_stream_count
    cfg = heuristic_config(8, 640, 3456, 512, 132, False)
    assert cfg.ce_share == 1.0 and cfg.ce_chunks == 1
    monkeypatch.setenv("DAK_CE_CHUNKS", "3")
    assert heuristic_config(8, 640, 3456, 512, 132, False).ce_chunks == 3
    for bad in ("0", "-2", "x"):
        monkeypatch.setenv("DAK_CE_CHUNKS", bad)
        with pytest.raises(ValueError, match="DAK_CE_CHUNKS"):
            heuristic_config(8, 640, 3456, 512, 132, False)
    assert copy_stream_count() == 1
    monkeypatch.setenv("DAK_COPY_STREAMS", "2")
    assert copy_stream_count() == 2
    monkeypatch.setenv("DAK_COPY_STREAMS", "3")
    with pytest.raises(ValueError, match="DAK_COPY_STREAMS"):
        copy_stream_count()


def test_large_n_keeps_pipelined_chunks():
    """One chunk per operator is for decode (copy-ahead overlaps operators); large N stages its
    host rows in chunks so cuBLAS multiplies one while the next is copied."""
    from dak.kernels.config import heuristic_config
    big = heuristic_config(512, 640, 3456, 512, 132, False)  # 16% of the rows on the host
    assert big.ce_share == 1.0 and big.hbm_cublas and (big.ce_chunks, big.ce_taper) == (2, 1.0)
    half = heuristic_config(2048, 2048, 2048, 512, 132, False)  # half: 4 shrinking chunks
    assert half.hbm_cublas and (half.ce_chunks, half.ce_taper) == (4, 0.5)
    small = heuristic_config(8, 640, 3456, 512, 132, False)
    assert small.ce_chunks == 1 and small.ce_taper == 1.0


def test_gemv_tiles_for_in_place_decode_configs(monkeypatch):
    """$DAK_SPLIT_GEMV_TILES=1: an in-place decode config (<= 16 tokens, host share under the
    copy-engine threshold) takes the all-HBM GEMV's tiles for its HBM rows and one HBM program per
    row tile; copy-engine, wider-token and prefill configs keep theirs. The kernel on such a config
    (odd K, split-K host side) matches the reference."""
    from dak.kernels.config import heuristic_config
    from dak.kernels.hbm_gemv import heuristic
    monkeypatch.delenv("DAK_SPLIT_GEMV_TILES", raising=False)
    off = heuristic_config(8, 64, 16320, 4096, 132, False)
    assert off.ce_share == 0.0 and off.hbm_programs <= 2 * 132
    monkeypatch.setenv("DAK_SPLIT_GEMV_TILES", "1")
    on = heuristic_config(8, 64, 16320, 4096, 132, False)
    g = heuristic(16320, 4096)
    assert (on.block_m, on.block_k, on.num_stages) == (g.block_m, g.block_k, min(g.num_stages, 3)) != (
        off.block_m, off.block_k, off.num_stages)
    assert on.hbm_programs == -(-16320 // g.block_m) and on.host_split_k > 1
    small = heuristic_config(8, 64, 4032, 4096, 132, False)  # the GEMV's 6-stage rows: capped at 3
    assert heuristic(4032, 4096).num_stages == 6 and small.num_stages == 3
    for args in ((8, 640, 3456, 512), (17, 64, 16320, 4096), (512, 64, 16320, 4096)):  # CE, 17 tokens, prefill
        with_flag = heuristic_config(*args, 132, False)
        monkeypatch.delenv("DAK_SPLIT_GEMV_TILES")
        assert with_flag == heuristic_config(*args, 132, False), args
        monkeypatch.setenv("DAK_SPLIT_GEMV_TILES", "1")
    n, m, k, m_h = 5, 300, 200, 3
    cfg = heuristic_config(n, m_h, m - m_h, k, 4, False)
    assert cfg.ce_share == 0.0 and cfg.block_k == 256
    for i, dtype in enumerate((torch.bfloat16, torch.float16)):
        x, wh, wg, b, ref = split_inputs(m, k, n, m_h, dtype, i == 0, 40 + i)
        out = poisoned(n, m, dtype)
        split_linear(x, wh.tensor, wg, b, cfg, out=out)
        check(out, ref, dtype, f"gemv tiles {cfg} {dtype}")


def test_inplace_tiles_take_the_tuners_row_tiles(monkeypatch):
    """By default untuned in-place decode configs of matrices with >= 7168 rows take 32-row tiles
    at 1-16 tokens ($DAK_INPLACE_TILES=0: 16); 17-32 tokens, copy-engine configs, large N and
    shorter matrices keep the heuristic's tiles."""
    import dak.kernels.config as config
    monkeypatch.setattr(config, "interpreting", lambda: False)  # the interpreter forces 64-row tiles
    cases = [(1, 48, 7120, 7168), (8, 96, 8096, 8192), (16, 128, 10880, 4096)]
    monkeypatch.setenv("DAK_INPLACE_TILES", "0")
    off = [config.heuristic_config(n, mh, mg, k, 132, True) for n, mh, mg, k in cases]
    assert [c.block_m for c in off] == [16, 16, 16] and all(c.ce_share == 0 for c in off)
    monkeypatch.delenv("DAK_INPLACE_TILES", raising=False)
    on = [config.heuristic_config(n, mh, mg, k, 132, True) for n, mh, mg, k in cases]
    assert [c.block_m for c in on] == [32, 32, 32] and all(c.ce_share == 0 for c in on)
    assert all(c.host_programs >= 1 and c.host_split_k >= 1 for c in on)
    assert config.heuristic_config(32, 48, 7120, 28672, 132, True).block_m == 16  # 17-32 tokens
    assert config.heuristic_config(8, 48, 4048, 4096, 132, True).block_m == 16  # shorter matrix
    staged = config.heuristic_config(8, 512, 6656, 7168, 132, True)  # 7%: copy engine
    assert staged.ce_share == 1.0 and staged.block_m == 16
