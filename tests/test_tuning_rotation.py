"""Tuning sweeps time every candidate over rotated buffers (so HBM reads miss L2), and the
helpers that build those buffers (CPU: the timers are faked, the sweeps' logic is real)."""

import pytest
import torch

import dak.kernels.attention_tuning as at
import dak.kernels.tuning as tu
from dak.kernels.config_cache import as_runs
from dak.kernels.timing import l2_copies
from dak.kv_cache import SplitKVCache
from dak.nn.split_attention import _rotated_parts


@pytest.fixture(autouse=True)
def _not_capturing(monkeypatch):  # CPU torch has no capture state to ask
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: False)


def _same(a, b):
    return a.data_ptr() == b.data_ptr() and a.shape == b.shape


def _fake_runs(count, seen):
    """`count` launches over different buffers: each records (buffer index, config) when run."""
    return [lambda cfg, i=i: seen.append((i, cfg)) for i in range(count)]


def test_attention_sweep_times_each_candidate_over_every_rotated_buffer(monkeypatch):
    seen = []

    def fake_time(*fns):
        start = len(seen)
        for fn in fns:
            fn()
        cfgs = {cfg for _, cfg in seen[start:]}
        assert len(cfgs) == 1, "one timing covers one config"
        assert sorted(i for i, _ in seen[start:]) == list(range(5)), "every buffer is run"
        (cfg,) = cfgs
        return 1.0 if cfg.num_warps == 8 else 3.0 + 0.01 * len(seen)
    monkeypatch.setattr(at, "time_or_inf", fake_time)
    best, trials = at.sweep(_fake_runs(5, seen), 0, 8, 8, 4, 256, 128, 132, tma_ok=False)
    assert best.num_warps == 8
    assert len(trials) >= 4 and len(seen) == 5 * len(trials)


def test_split_linear_sweep_times_each_candidate_over_every_rotated_buffer(monkeypatch):
    seen = []

    def fake_graph_time(calls, **kw):
        start = len(seen)
        for fn in calls:
            fn()
        assert sorted(i for i, _ in seen[start:]) == list(range(3))
        (cfg,) = {c for _, c in seen[start:]}
        return 1.0 if cfg.ce_chunks == 4 else 2.0
    monkeypatch.setattr(tu, "graph_time_ms", fake_graph_time)
    best, trials = tu.sweep(_fake_runs(3, seen), 8, 256, 3840, 4096, 132, tma_ok=False)
    assert best.ce_chunks == 4
    assert len(seen) == 3 * len(trials)


def test_a_single_run_is_still_accepted_and_bad_runs_are_an_error():
    f = lambda cfg: None  # noqa: E731
    assert as_runs(f) == [f]
    with pytest.raises(ValueError, match="non-empty list"):
        as_runs([])
    with pytest.raises(ValueError, match="callable taking a config"):
        as_runs([f, 3])


def test_timing_nothing_is_a_clear_error():
    from dak.kernels.timing import graph_time_ms
    with pytest.raises(ValueError, match="at least one call"):
        graph_time_ms([])


def test_l2_copies_clone_until_enough_bytes_and_share_empty_tensors():
    a, empty = torch.randn(1000, 25), torch.empty(0, 25)  # 100 kB
    sets = l2_copies((a, empty), min_bytes=350_000)
    assert len(sets) == 4
    assert all(s[1] is empty for s in sets)
    assert sets[0][0] is a and all(torch.equal(s[0], a) for s in sets)
    assert len({s[0].data_ptr() for s in sets}) == 4, "each set its own buffer"
    assert len(l2_copies((a,), min_bytes=10**9, max_copies=3)) == 3
    assert len(l2_copies((a,), min_bytes=1)) == 1


@pytest.mark.parametrize("layers,want_layers", [(2, 2), (12, 8)])
def test_attention_tuning_rotates_layers_first_then_clones(layers, want_layers):
    cache = SplitKVCache(layers, 4, 32, 2, 16, torch.bfloat16, host_requests=1)
    for layer in range(layers):
        for t in cache.parts(layer)[2:]:
            t.normal_()
    sets = _rotated_parts(cache)
    assert len(sets) == 8  # a tiny cache: as many sets as allowed
    kh, vh, kg, vg = cache.parts(0)
    for i, s in enumerate(sets[:want_layers]):
        assert all(_same(x, y) for x, y in zip(s, cache.parts(i)))
    for s in sets[want_layers:]:
        assert _same(s[0], kh) and _same(s[1], vh), "host parts are shared"
        assert torch.equal(s[2], kg) and torch.equal(s[3], vg)
        assert s[2].data_ptr() != kg.data_ptr()
    assert len({s[2].data_ptr() for s in sets}) == 8


def test_decode_sweep_also_descends_the_other_host_path(monkeypatch):
    """The heuristic stages a 25% host share by the copy engine; here the in-place path wins only
    once its pipeline depth is tuned, so one descent from the heuristic would keep the staged one."""
    def fake_graph_time(calls, **kw):
        for fn in calls:
            fn()
        cfg = trials_cfg[-1]
        if cfg.ce_share == 1:
            return 2.0
        return 1.0 if cfg.ce_share == 0 and cfg.num_stages == 6 else 3.0
    trials_cfg = []
    monkeypatch.setattr(tu, "graph_time_ms", fake_graph_time)
    start = tu.heuristic_config(8, 1024, 3072, 4096, 132, False)
    assert start.ce_share == 1, "the case needs a staged heuristic"
    best, trials = tu.sweep([lambda cfg: trials_cfg.append(cfg)], 8, 1024, 3072, 4096, 132, tma_ok=False)
    assert best.ce_share == 0 and best.num_stages == 6 and not best.hbm_cublas
    assert any(t[0]["ce_share"] == 1 for t in trials), "the staged branch was descended too"
    trials_cfg.clear()
    best, _ = tu.sweep([lambda cfg: trials_cfg.append(cfg)], 256, 1024, 3072, 4096, 132, tma_ok=False)
    assert best.ce_share == 1, "prefill sweeps keep one descent"
