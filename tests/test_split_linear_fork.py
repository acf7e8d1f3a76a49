"""hbm_fork: a split linear's HBM rows by dak's GEMV beside a host-only split kernel.

Against the float64 oracle on odd shapes, fresh inputs and poisoned outputs, through the route
every caller takes (run_split_linear); on the CPU the two launches run in order under
TRITON_INTERPRET=1, tests/test_split_linear_gpu.py runs them forked and captured.
"""

import os

import pytest
import torch

if not torch.cuda.is_available():  # conftest does this too; kept for running the file alone
    os.environ.setdefault("TRITON_INTERPRET", "1")

import dak.kernels.split_linear_ce as ce  # noqa: E402
from dak.kernels import tuning  # noqa: E402
from dak.kernels.config import KernelConfig, block_n_for, finalize, heuristic_config  # noqa: E402
from dak.kernels.fork_gemv import FORK_LAUNCHES, fork_config, parse_launch  # noqa: E402
from dak.kernels.hbm_gemv import GemvConfig, heuristic  # noqa: E402
from dak.kernels.split_linear_route import run_split_linear  # noqa: E402
from linear_oracle import check, poisoned, split_inputs  # noqa: E402


def _run(m, k, n, m_h, dtype, bias, seed, **kw):
    x, wh, wg, b, ref = split_inputs(m, k, n, m_h, dtype, bias, seed)
    cfg = finalize(KernelConfig(block_m=16, block_n=block_n_for(n), block_k=32, host_programs=2, hbm_programs=3,
                                hbm_fork=True, **kw), m_h, m - m_h, 4)
    out = poisoned(n, m, dtype)
    with torch.no_grad():
        res = run_split_linear(x, wh.tensor, wg, b, cfg, sms=4, out=out)
    assert res is out
    check(out, ref, dtype, f"hbm_fork m={m} k={k} n={n} m_h={m_h} bias={bias} {kw}")


@pytest.mark.parametrize("m,k,m_h,n", [(83, 40, 17, 1), (83, 40, 50, 3), (45, 13, 9, 17), (61, 70, 1, 64),
                                       (77, 33, 20, 130)])
def test_hbm_fork_matches_reference(m, k, m_h, n, monkeypatch):
    """Partial host shares, odd M and K, 1 to 130 tokens, bias on and off, bf16 and fp16; the GEMV
    takes the HBM rows up to 16 tokens and cuBLAS above (counted)."""
    calls = []
    real = ce.hbm_gemv
    monkeypatch.setattr(ce, "hbm_gemv", lambda *a, **kw: calls.append((a[1].shape[0], a[3])) or real(*a, **kw))
    for i, dtype in enumerate((torch.bfloat16, torch.float16)):
        _run(m, k, n, m_h, dtype, bias=(n + i) % 2 == 0, seed=m + n + i, host_split_k=1 + (n == 1))
    assert calls == ([(m - m_h, fork_config(m - m_h, k))] * 2 if n <= 16 else []), calls


def test_fork_gemv_launch_by_rows():
    """Beside the host kernel: 32 x 256 tiles, 4 stages up to 8192 HBM rows (H76/H77), the
    all-HBM heuristic above."""
    assert fork_config(7120, 7168) == fork_config(8192, 8192) == GemvConfig(32, 256, 4)
    assert fork_config(4064, 11008) == GemvConfig(32, 256, 4) != heuristic(4064, 11008)
    assert fork_config(8193, 4096) == heuristic(8193, 4096) and fork_config(28500, 8192) == heuristic(28500, 8192)


@pytest.mark.parametrize("m_h", [0, 45])
def test_hbm_fork_with_no_host_rows_or_no_hbm_rows(m_h):
    """Host fraction 0 (GEMV only) and 1 (host-only kernel only)."""
    _run(45, 24, 5, m_h, torch.bfloat16, bias=True, seed=m_h)
    _run(45, 24, 2, m_h, torch.float16, bias=False, seed=m_h + 1)


def test_hbm_fork_beside_copy_engine_rows():
    """Half the host rows staged by the copy engine, the rest in place, HBM rows by the GEMV."""
    _run(83, 40, 8, 50, torch.bfloat16, bias=True, seed=5, ce_share=0.5, ce_chunks=2)


def test_hbm_fork_excludes_hbm_cublas():
    with pytest.raises(ValueError, match="hbm_fork and hbm_cublas"):
        KernelConfig(ce_share=1.0, hbm_cublas=True, hbm_fork=True)


def test_untuned_decode_configs_fork_at_17_to_64_tokens(monkeypatch):
    """By default untuned decode configs of 17-64 tokens with host and HBM rows take hbm_fork
    (thin in-place shares; staged shares whose HBM rows would go to cuBLAS keep hbm_cublas);
    1-16 tokens, prefill, all-host and all-HBM configs do not. $DAK_HBM_FORK=1 extends it to
    every decode token count, 0 turns it off; other values are an error."""
    monkeypatch.delenv("DAK_HBM_FORK", raising=False)
    thin = lambda n: heuristic_config(n, 64, 11008 - 64, 4096, 132, True)  # noqa: E731
    assert thin(32).hbm_fork and thin(17).hbm_fork and thin(64).hbm_fork and thin(32).ce_share == 0
    assert not thin(16).hbm_fork and not thin(8).hbm_fork and not thin(65).hbm_fork
    staged = heuristic_config(32, 2048, 11008 - 2048, 4096, 132, True)
    assert staged.ce_share == 1 and staged.hbm_cublas and not staged.hbm_fork
    assert not heuristic_config(32, 11008, 0, 4096, 132, True).hbm_fork
    assert not heuristic_config(32, 0, 11008, 4096, 132, True).hbm_fork
    monkeypatch.setenv("DAK_HBM_FORK", "1")
    assert thin(8).hbm_fork and thin(1).hbm_fork and not thin(65).hbm_fork
    monkeypatch.setenv("DAK_HBM_FORK", "0")
    assert not thin(32).hbm_fork
    monkeypatch.setenv("DAK_HBM_FORK", "yes")
    with pytest.raises(ValueError, match="DAK_HBM_FORK must be 0 or 1"):
        thin(32)


def test_tuner_tries_hbm_fork_at_decode_only():
    knobs = lambda n, m_h, m_g: dict(tuning._knobs(n, m_h, m_g, 132, True))  # noqa: E731
    assert knobs(8, 64, 4000)["hbm_fork"] == [False, True]
    assert "hbm_fork" not in knobs(256, 64, 4000)
    assert "hbm_fork" not in knobs(8, 0, 4000) and "hbm_fork" not in knobs(8, 64, 0)
    assert knobs(16, 64, 4000)["fork_gemv"] == ["", *FORK_LAUNCHES]
    assert "fork_gemv" not in knobs(17, 64, 4000) and "fork_gemv" not in knobs(8, 0, 4000)
    assert tuning.skip(KernelConfig(), "fork_gemv", "32x256x4")  # unforked: no GEMV launch to pick
    assert not tuning.skip(KernelConfig(hbm_fork=True), "fork_gemv", "32x256x4")


@pytest.mark.parametrize("launch", ["64x128x3", "16x256x6"])
def test_named_fork_launch_is_the_one_run(launch, monkeypatch):
    """KernelConfig.fork_gemv names the forked GEMV's launch; the result still matches the oracle."""
    calls = []
    real = ce.hbm_gemv
    monkeypatch.setattr(ce, "hbm_gemv", lambda *a, **kw: calls.append(a[3]) or real(*a, **kw))
    _run(90, 40, 5, 21, torch.bfloat16, bias=True, seed=len(launch), fork_gemv=launch)
    assert calls == [parse_launch(launch)]


def test_fork_launch_names_are_checked():
    assert parse_launch("32x256x4") == GemvConfig(32, 256, 4) and all(parse_launch(n) for n in FORK_LAUNCHES)
    for bad in ("32x256", "32x256x4x1", "48x256x4", "32x512x4", "32x256x0", "axbxc", ""):
        with pytest.raises(ValueError, match="BLOCK_M"):
            parse_launch(bad)
    with pytest.raises(ValueError, match="set hbm_fork=True too"):
        KernelConfig(fork_gemv="32x256x4")
    with pytest.raises(ValueError, match="BLOCK_MxBLOCK_KxSTAGES"):
        KernelConfig(hbm_fork=True, fork_gemv="fast")


def test_sweep_picks_the_fastest_forked_launch(monkeypatch):
    """With timings where only the forked 64x128x3 launch is fast, the sweep keeps it."""
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: False)
    last = []

    def fake_time(calls, **kw):
        for fn in calls:
            fn()
        cfg = last[-1]
        return 1.0 if cfg.hbm_fork and cfg.fork_gemv == "64x128x3" else 2.0 if cfg.hbm_fork else 3.0
    monkeypatch.setattr(tuning, "graph_time_ms", fake_time)
    best, _ = tuning.sweep([lambda cfg: last.append(cfg)], 8, 32, 4064, 4096, 132, tma_ok=False)
    assert best.hbm_fork and best.fork_gemv == "64x128x3"
    best, _ = tuning.sweep([lambda cfg: last.append(cfg)], 32, 32, 4064, 4096, 132, tma_ok=False)
    assert best.hbm_fork and best.fork_gemv == "", "above 16 tokens the forked HBM rows go to cuBLAS"
