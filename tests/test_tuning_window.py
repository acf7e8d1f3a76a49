"""The untuned split-linear config takes a calibrated congestion window from $DAK_PROFILE."""

import json

import pytest

from dak.hardware import get_profile
from dak.kernels import tuning
from dak.kernels.config import heuristic_config


def _profile_with_window(tmp_path, gpu: str, key: str, hp: int, st: int):
    prof = get_profile("h200-pcie").to_dict()
    prof.update(schema=2, meta={"gpu": gpu},
                windows=[{"key": key, "host_programs": hp, "num_stages": st, "time_s": 1e-4,
                          "uncapped_time_s": 1.1e-4, "default_time_s": 1.05e-4}])
    path = tmp_path / "prof.json"
    path.write_text(json.dumps(prof))
    return str(path)


def test_window_overrides_heuristic_in_place_reads(tmp_path, monkeypatch):
    import torch
    key = tuning.tune_key("NVIDIA H200", torch.bfloat16, 8, 64, 8000, 4096, False)
    shape = key.partition("|")[2]
    monkeypatch.setenv("DAK_PROFILE", _profile_with_window(tmp_path, "NVIDIA H200", shape, 6, 7))
    monkeypatch.setenv("DAK_CACHE_DIR", str(tmp_path / "cache"))
    cfg = tuning.get_or_tune(key, None, 8, 64, 8000, 4096, 132, True, tune=False)
    base = heuristic_config(8, 64, 8000, 4096, 132, True)
    assert base.ce_share < 1 and (cfg.num_stages, cfg.host_programs) == (7, min(6, cfg.host_programs))
    assert cfg.num_stages != base.num_stages


def test_foreign_gpu_window_is_ignored_with_a_warning(tmp_path, monkeypatch):
    import torch
    key = tuning.tune_key("NVIDIA H100", torch.bfloat16, 8, 64, 8000, 4096, False)
    monkeypatch.setenv("DAK_PROFILE", _profile_with_window(tmp_path, "NVIDIA H200", key.partition("|")[2], 6, 7))
    with pytest.warns(UserWarning, match="calibrated on"):
        cfg = tuning.get_or_tune(key, None, 8, 64, 8000, 4096, 132, True, tune=False)
    assert cfg == heuristic_config(8, 64, 8000, 4096, 132, True)
