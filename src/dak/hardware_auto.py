"""Which hardware preset describes the GPU in use: `hardware="auto"`, the default of `dak.offload`,
`dak generate`, `dak plan` and `dak bench e2e`.

A preset's numbers (HBM and host-link bandwidths, the GEMV rate, per-layer overheads, capacity)
were measured on one GPU; planning a different GPU with them misplaces operators and mispredicts
TPOT (thirty-second session: the H200 preset predicted an H100's all-HBM decode step at 0.72-0.73
of its measured time, the H100's own preset at 0.99-1.01). "auto" picks the preset of the GPU
torch sees, by its name; with no GPU (planning on a laptop, CI, Triton's interpreter) it takes
`FALLBACK`, the machine dak's results were measured on. A GPU no preset describes gets
`FALLBACK`'s numbers with a warning that says to calibrate. A preset named explicitly on another
known GPU gets a warning too (`mismatch`); a calibrated profile's own GPU is checked by
`HardwareProfile.device_mismatch`. Pure Python apart from `current_gpu`.
"""

from __future__ import annotations

import os

AUTO = "auto"
FALLBACK = "h200-pcie"
# (substring of torch.cuda.get_device_name, preset): the first match wins, so GH200 comes before H200.
# "H100 80GB HBM3" is the SXM part; the H100 PCIe card (HBM2e, 2 TB/s) and H100 NVL have no preset.
GPU_PRESETS = (("GH200", "gh200"), ("H200", "h200-pcie"), ("H100 80GB HBM3", "h100-sxm"),
               ("RTX PRO 6000", "rtx-pro-6000"))
# the GPU each preset describes (aliases and older values of a preset describe the same GPU)
PRESET_GPUS = {"h200-pcie": "H200", "h200-pcie-cublas": "H200", "h200-pcie-gemv": "H200",
               "h100-sxm": "H100 80GB HBM3", "h100-sxm-s32": "H100 80GB HBM3", "h100-sxm-s38": "H100 80GB HBM3",
               "gh200": "GH200", "rtx-pro-6000": "RTX PRO 6000"}


def preset_for_gpu(gpu: str | None) -> str | None:
    """The preset whose numbers were measured on (or written for) `gpu`, by name; None if none."""
    for marker, preset in GPU_PRESETS:
        if marker.lower() in (gpu or "").lower():
            return preset
    return None


def current_gpu() -> str | None:
    """torch's name for CUDA device 0, or None without a usable GPU (or in Triton's interpreter)."""
    if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
        return None
    import torch
    return torch.cuda.get_device_name(0) if torch.cuda.is_available() else None


def mismatch(name: str, gpu: str | None) -> str | None:
    """A warning when preset `name` describes another GPU than `gpu` (None when it matches, when
    `name` is not a preset with a known GPU, or without a GPU)."""
    theirs, own = PRESET_GPUS.get(name), preset_for_gpu(gpu)
    if not gpu or theirs is None or PRESET_GPUS.get(own) == theirs:
        return None
    fix = (f"pass --hardware auto (here: {own})" if own else
           "run `dak calibrate --out my-gpu.json` on it and pass --hardware my-gpu.json")
    return (f"hardware preset {name!r} was measured on an NVIDIA {theirs}, but this GPU is {gpu!r}: plans and "
            f"predicted TPOT use the other GPU's bandwidths; {fix}")


def resolve(name: str, gpu: str | None = None, detect: bool = True) -> tuple[str, str | None]:
    """(preset name or profile path to use, warning or None) for `name`; "auto" becomes the preset
    of `gpu` (detected when None and `detect`), else FALLBACK."""
    if gpu is None and detect:
        gpu = current_gpu()
    if name != AUTO:
        return name, mismatch(name, gpu)
    if gpu is None:
        return FALLBACK, None
    preset = preset_for_gpu(gpu)
    if preset is not None:
        return preset, None
    return FALLBACK, (f"no hardware preset describes {gpu!r}: planning with {FALLBACK!r}'s numbers (an NVIDIA "
                      f"H200 behind PCIe Gen5), which misplace operators on other GPUs; run `dak calibrate --out "
                      f"my-gpu.json` here and pass --hardware my-gpu.json")


def hardware_profile(hardware, warn=None):
    """The HardwareProfile for `hardware` (a profile, "auto", a preset name or a profile path),
    each warning about it (a GPU no preset describes, a preset or calibration of another GPU)
    passed to `warn` (default warnings.warn)."""
    from .hardware import HardwareProfile, get_profile
    if warn is None:
        import warnings

        def warn(msg):
            warnings.warn(msg, stacklevel=3)
    if not isinstance(hardware, (str, HardwareProfile)):
        raise ValueError(f"hardware must be 'auto', a preset name, a profile .json path or a HardwareProfile, "
                         f"got {type(hardware).__name__}")
    gpu = current_gpu()
    if isinstance(hardware, HardwareProfile):
        profile, note = hardware, mismatch(hardware.name, gpu)
    else:
        name, note = resolve(hardware, gpu, detect=False)
        profile = get_profile(name)
    note = note or (profile.device_mismatch(gpu) if gpu else None)
    if note:
        warn(note)
    return profile
