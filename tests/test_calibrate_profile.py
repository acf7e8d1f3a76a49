"""Calibrated hardware profiles: JSON round trip, schema validation, foreign-GPU warnings."""

import dataclasses
import json
import warnings

import pytest

import dak.measured as measured
from dak.hardware import PRESETS, HardwareProfile, get_profile
from dak.measured import Curve, LinkSample, Window, window_for

KEY = "bfloat16|n16|mh64|mg4032|k4096|b0"


def _calibrated() -> HardwareProfile:
    return dataclasses.replace(
        PRESETS["h200-pcie"], name="h200-cal",
        meta={"gpu": "NVIDIA H200", "driver": "580.1", "torch": "2.11.0", "triton": "3.6.0",
              "date": "2026-12-01T10:00:00"},
        curves=(Curve("linear|m4096|k4096|row8192|n16", ((0.0, 1e-5), (0.5, 3e-4), (1.0, 6.5e-4)), "tuned"),
                Curve("attention|B8|req1|t2", ((0.0, 2e-5), (1.0, 1e-3)))),
        windows=(Window(KEY, 8, 4, 2.0e-5, 2.4e-5, 2.1e-5),),
        link=(LinkSample(8, 3, 50.2e9, 3.3e12), LinkSample(32, 4, 51.0e9)))


def test_roundtrip(tmp_path):
    prof = _calibrated()
    path = tmp_path / "cal.json"
    prof.to_json(str(path))
    raw = json.loads(path.read_text())
    assert raw["schema"] == 2 and raw["meta"]["gpu"] == "NVIDIA H200"
    assert raw["curves"][0]["points"][1] == [0.5, 3e-4]
    back = get_profile(str(path))
    assert back == prof and back.curve_table["attention|B8|req1|t2"].points[-1] == (1.0, 1e-3)
    assert back.windows[0].gain == pytest.approx(1.2)
    assert back.roofline_only().curves == () and back.roofline_only().windows == prof.windows
    # a preset stays a plain schema-1 file
    assert "schema" not in PRESETS["gh200"].to_dict()


@pytest.mark.parametrize("edit,message", [
    (lambda d: d["curves"][0].update(points=[[0.0, 1e-5], [0.5, 2e-5]]), r"curves\[0\].*x = 0 and x = 1"),
    (lambda d: d["curves"][0].update(points=[[0.0, 1e-5], [1.0, -1]]), r"curves\[0\].*time at x=1.0"),
    (lambda d: d["curves"][0].update(points=[[0.0, 1e-5], [1.5, 1e-4], [1.0, 1]]), r"x must lie in \[0, 1\]"),
    (lambda d: d["curves"][1].pop("key"), r"curves\[1\] is missing key"),
    (lambda d: d["windows"][0].update(colour="red"), r"windows\[0\] has unknown field\(s\) colour"),
    (lambda d: d["windows"][0].update(host_programs=0), r"windows\[0\].*host_programs must be an integer >= 1"),
    (lambda d: d["link"][0].update(num_stages=2.5), r"link\[0\].*num_stages must be an integer"),
    (lambda d: d.update(curves={"a": 1}), "field 'curves' must be a list"),
    (lambda d: d.update(meta=[1]), "field 'meta' must be an object"),
    (lambda d: d.update(schema=3), "schema 3 is not supported"),
    (lambda d: d.pop("hbm_bandwidth"), r"missing field\(s\) hbm_bandwidth"),
])
def test_malformed_profiles(tmp_path, edit, message):
    d = _calibrated().to_dict()
    edit(d)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(d))
    with pytest.raises(ValueError, match=message) as e:
        get_profile(str(path))
    assert str(path) in str(e.value)


def test_unknown_fields_warn(tmp_path):
    d = PRESETS["h200-pcie"].to_dict()
    d["vendor_notes"] = "x"
    path = tmp_path / "p.json"
    path.write_text(json.dumps(d))
    with pytest.warns(UserWarning, match="ignoring unknown hardware profile field.*vendor_notes"):
        assert get_profile(str(path)) == PRESETS["h200-pcie"]


def test_foreign_gpu():
    prof = _calibrated()
    assert prof.device_mismatch("NVIDIA  h200") is None
    msg = prof.device_mismatch("NVIDIA A100-SXM4-80GB")
    assert "measured on 'NVIDIA H200'" in msg and "dak calibrate" in msg
    assert PRESETS["h200-pcie"].device_mismatch("anything") is None  # presets carry no GPU name
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert window_for(prof, "NVIDIA H200", KEY).host_programs == 8
        assert window_for(prof, "NVIDIA H200", "other") is None
        assert window_for(None, "NVIDIA H200", KEY) is None
    with pytest.warns(UserWarning, match="calibrated on 'NVIDIA H200'.*ignored"):
        assert window_for(prof, "NVIDIA GH200 480GB", KEY) is None


def test_active_profile_from_env(tmp_path, monkeypatch):
    path = tmp_path / "cal.json"
    _calibrated().to_json(str(path))
    monkeypatch.setattr(measured, "_ACTIVE", {})
    monkeypatch.delenv("DAK_PROFILE", raising=False)
    assert measured.active_profile() is None
    monkeypatch.setenv("DAK_PROFILE", str(path))
    assert measured.active_profile().name == "h200-cal"
    assert measured.active_profile() is measured.active_profile()
