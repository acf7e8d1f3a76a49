import dataclasses
import json
from pathlib import Path

import pytest

from dak.hardware import PRESETS, HardwareProfile, get_profile


def test_h200_preset_measurements():
    p = get_profile("h200-pcie")
    assert p.sm_count == 132 and p.smem_per_sm == 228 * 1024
    assert p.hbm_capacity == 143771 * 2**20
    assert p.host_ram == 128 * 2**30
    assert p.host_bandwidth_ce == 55.0e9 and p.host_bandwidth_sm == 51.3e9
    assert p.hbm_bandwidth == 3.7e12 and p.flops == 788e12


def test_other_presets():
    g = get_profile("gh200")
    assert g.hbm_capacity == 96 * 10**9 and g.hbm_bandwidth == 4.0e12
    assert g.host_bandwidth_sm == g.host_bandwidth_ce == 900e9
    r = get_profile("rtx-pro-6000")
    assert r.sm_count == 188 and r.smem_per_sm == 100 * 1024 and r.host_bandwidth_sm == 64e9


def test_json_roundtrip(tmp_path):
    path = tmp_path / "p.json"
    PRESETS["gh200"].to_json(str(path))
    assert HardwareProfile.from_json(str(path)) == PRESETS["gh200"]
    assert get_profile(str(path)) == PRESETS["gh200"]


def test_layer_overhead_is_optional_and_round_trips(tmp_path):
    h = PRESETS["h200-pcie"]
    assert h.layer_overhead_s > 0 and PRESETS["gh200"].layer_overhead_s == 0.0
    path = tmp_path / "h.json"
    h.to_json(str(path))
    assert json.loads(path.read_text())["layer_overhead_s"] == h.layer_overhead_s
    assert HardwareProfile.from_json(str(path)) == h
    d = h.to_dict()
    del d["layer_overhead_s"]  # profiles written before the field existed
    assert HardwareProfile.from_dict(d).layer_overhead_s == 0.0
    for bad in (-1e-6, float("nan"), True):
        with pytest.raises(ValueError, match="layer_overhead_s.*non-negative"):
            HardwareProfile(**{**h.to_dict(), "layer_overhead_s": bad})


@pytest.mark.parametrize("name", ["inplace_op_overhead_s", "copy_op_overhead_s", "attention_host_excess",
                                  "fused_layer_overhead_s"])
def test_split_operator_overheads_are_optional_and_round_trip(tmp_path, name):
    h = PRESETS["h200-pcie-cublas"]  # the one preset that sets every one of them
    assert getattr(h, name) > 0 and getattr(PRESETS["gh200"], name) == 0.0
    path = tmp_path / "h.json"
    h.to_json(str(path))
    assert json.loads(path.read_text())[name] == getattr(h, name)
    assert HardwareProfile.from_json(str(path)) == h
    d = h.to_dict()
    del d[name]
    assert getattr(HardwareProfile.from_dict(d), name) == 0.0
    with pytest.raises(ValueError, match=f"{name}.*non-negative"):
        HardwareProfile(**{**h.to_dict(), name: -1.0})


def test_validation():
    d = PRESETS["h200-pcie"].to_dict()
    for field in ("hbm_bandwidth", "flops", "sm_count", "host_ram"):
        with pytest.raises(ValueError, match=field):
            HardwareProfile(**{**d, field: 0})
    with pytest.raises(ValueError, match="sm_count"):
        HardwareProfile(**{**d, "sm_count": 1.5})


def test_errors(tmp_path):
    with pytest.raises(ValueError, match="unknown hardware 'a100'.*h200-pcie"):
        get_profile("a100")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        get_profile(str(bad))
    d = PRESETS["h200-pcie"].to_dict()
    del d["flops"]
    missing = tmp_path / "missing.json"
    missing.write_text(json.dumps(d))
    with pytest.raises(ValueError, match="missing field.*flops"):
        get_profile(str(missing))
    with pytest.raises(ValueError, match="cannot read"):
        HardwareProfile.from_json(str(tmp_path / "nope.json"))


def test_a_recorded_run_is_priced_with_the_preset_values_it_planned_with():
    from dak.hardware import run_profile
    old, new = PRESETS["h200-pcie-cublas"], PRESETS["h200-pcie"]
    assert old != new and old.gemv_bandwidth == 0 < new.gemv_bandwidth
    assert run_profile("h200-pcie", "2026-12-05T05:19:05") == old  # H93, the last run on the old values
    assert run_profile("h200-pcie", "2026-12-05T05:38:51") == new  # H98, the first on the new ones
    assert run_profile("h200-pcie", None) == old  # undated: older than the change
    assert run_profile("h200-pcie-gemv", "2026-12-05T05:14:56") == PRESETS["h200-pcie-gemv"]


def test_h100_runs_before_the_copy_engine_refit_are_priced_at_the_old_rate():
    from dak.hardware import run_profile
    old, s38, new = PRESETS["h100-sxm-s32"], PRESETS["h100-sxm-s38"], PRESETS["h100-sxm"]
    assert old.host_bandwidth_ce == 48.7e9 and s38.host_bandwidth_ce == new.host_bandwidth_ce == 52.0e9
    assert s38.copy_op_overhead_s == 13.9e-6 and new.copy_op_overhead_s == 7e-6
    assert dataclasses.replace(old, name=s38.name, host_bandwidth_ce=s38.host_bandwidth_ce) == s38
    assert dataclasses.replace(s38, name=new.name, copy_op_overhead_s=new.copy_op_overhead_s) == new
    assert run_profile("h100-sxm", "2026-12-05T17:32:12") == old  # H107
    assert run_profile("h100-sxm", "2026-12-05T18:29:32") == s38  # H112's new preset
    assert run_profile("h100-sxm", "2026-12-06T07:57:34") == s38  # H125's last run on it
    assert run_profile("h100-sxm", "2026-12-06T09:00:00") == new
    saved = get_profile(str(Path(__file__).resolve().parents[1] / "benchmarks/profiles/h100-sxm-s32.json"))  # what H112's old runs named
    assert dataclasses.replace(saved, name=old.name) == old
