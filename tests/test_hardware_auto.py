"""`hardware="auto"`: the preset of the GPU in use, warnings for another GPU's preset or none."""

import warnings

import pytest
import torch

from dak.bench.e2e_cases import E2EConfig
from dak.calibrate.inherit import base_preset_for
from dak.hardware import PRESETS, HardwareProfile, get_profile
from dak.hardware_auto import (FALLBACK, PRESET_GPUS, current_gpu, hardware_profile, mismatch, preset_for_gpu,
                               resolve)

H100, H200 = "NVIDIA H100 80GB HBM3", "NVIDIA H200"


@pytest.mark.parametrize("gpu, preset", [(H200, "h200-pcie"), ("NVIDIA H200 NVL", "h200-pcie"), (H100, "h100-sxm"),
                                         ("NVIDIA GH200 480GB", "gh200"), ("NVIDIA RTX PRO 6000 Blackwell Server "
                                                                           "Edition", "rtx-pro-6000"),
                                         ("NVIDIA H100 PCIe", None), ("NVIDIA A100-SXM4-80GB", None), ("", None)])
def test_preset_for_gpu(gpu, preset):
    assert preset_for_gpu(gpu) == preset


def test_every_named_preset_describes_a_gpu_that_maps_back_to_it():
    for name in PRESETS:
        assert name in PRESET_GPUS, f"preset {name} names no GPU"
        assert PRESET_GPUS[preset_for_gpu("NVIDIA " + PRESET_GPUS[name])] == PRESET_GPUS[name]


def test_auto_takes_the_gpus_preset_and_the_fallback_without_one():
    assert resolve("auto", H100, detect=False) == ("h100-sxm", None)
    assert resolve("auto", H200, detect=False) == ("h200-pcie", None)
    assert resolve("auto", None, detect=False) == (FALLBACK, None)
    name, note = resolve("auto", "NVIDIA A100-SXM4-80GB", detect=False)
    assert name == FALLBACK and "A100" in note and "dak calibrate" in note


def test_a_preset_of_another_gpu_is_named_with_the_fix():
    note = mismatch("h200-pcie", H100)
    assert "H200" in note and H100 in note and "--hardware auto (here: h100-sxm)" in note
    assert "dak calibrate" in mismatch("h100-sxm", "NVIDIA A100-SXM4-80GB")
    for same in ("h200-pcie", "h200-pcie-cublas", "h200-pcie-gemv"):
        assert mismatch(same, H200) is None
    assert mismatch("h100-sxm", H100) is None and mismatch("h200-pcie", None) is None
    assert mismatch("my-profile.json", H100) is None  # a calibrated profile is checked by its meta
    assert resolve("h200-pcie", H100, detect=False)[1] == mismatch("h200-pcie", H100)


def test_hardware_profile_warns_through_the_given_callback(monkeypatch):
    monkeypatch.setattr("dak.hardware_auto.current_gpu", lambda: H100)
    notes = []
    assert hardware_profile("auto", notes.append) is PRESETS["h100-sxm"] and notes == []
    assert hardware_profile("h200-pcie", notes.append) is PRESETS["h200-pcie"] and "H200" in notes[-1]
    calibrated = HardwareProfile(**{**{f: getattr(PRESETS["h200-pcie"], f) for f in
                                      ("hbm_bandwidth", "host_bandwidth_ce", "host_bandwidth_sm", "flops", "sm_count",
                                       "smem_per_sm", "hbm_capacity", "host_ram")},
                                    "name": "mine", "meta": {"gpu": H200}})
    assert hardware_profile(calibrated, notes.append) is calibrated and "dak calibrate" in notes[-1]
    with pytest.warns(UserWarning, match="H200"):
        hardware_profile("h200-pcie")
    with pytest.raises(ValueError, match="hardware must be 'auto', a preset name"):
        hardware_profile(5)


def test_bench_config_records_the_resolved_preset(monkeypatch):
    monkeypatch.setattr("dak.hardware_auto.current_gpu", lambda: H100)
    assert E2EConfig(models=("tiny-llama",)).hardware == "h100-sxm"
    monkeypatch.setattr("dak.hardware_auto.current_gpu", lambda: "NVIDIA A100-SXM4-80GB")
    with pytest.warns(UserWarning, match="no hardware preset describes"):
        assert E2EConfig(models=("tiny-llama",)).hardware == FALLBACK
    monkeypatch.setattr("dak.hardware_auto.current_gpu", lambda: None)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert E2EConfig(models=("tiny-llama",), hardware="h100-sxm").hardware == "h100-sxm"


def test_get_profile_auto_without_a_gpu_is_the_fallback(monkeypatch):
    monkeypatch.setattr("dak.hardware_auto.current_gpu", lambda: None)
    assert get_profile("auto") is PRESETS[FALLBACK]
    with pytest.raises(ValueError, match="pass auto, a preset"):
        get_profile("h300")


def test_a_calibration_inherits_its_gpus_fitted_costs():
    assert base_preset_for(H100) == "h100-sxm" and base_preset_for(H200) == "h200-pcie"
    assert base_preset_for("NVIDIA GH200 480GB") is None  # its preset fits nothing


@pytest.mark.gpu
def test_auto_names_this_gpus_preset():
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    gpu = current_gpu()
    name, note = resolve("auto")
    assert name == (preset_for_gpu(gpu) or FALLBACK)
    assert (note is None) == (preset_for_gpu(gpu) is not None)
    if preset_for_gpu(gpu):
        p = get_profile("auto")
        assert p.sm_count == torch.cuda.get_device_properties(0).multi_processor_count
        assert abs(p.hbm_capacity - torch.cuda.get_device_properties(0).total_memory) < 0.03 * p.hbm_capacity
