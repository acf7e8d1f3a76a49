"""Per-operator costs a calibration does not measure, taken from the preset of the same GPU.

`dak calibrate` measures bandwidths, operator curves and the per-layer small-kernel time, but
not the end-to-end costs the presets fit on whole decode steps: a copy-engine linear's start-up
on the link side of the copy-ahead chain (``copy_op_overhead_s``), the excess of a split linear
read in place without a curve (``inplace_op_overhead_s``) and the host-KV excess of split
attention (``attention_host_excess``). Left at 0 they make copy-engine placements look free
of start-up: seventeenth session (H200, Llama-2-7B, batch 8, same call), the calibrated profile's
consolidated plan at 2% chose copy-engine operators predicted at 3.80 ms that ran 4.86 ms (the
preset's in-place plan: 4.02). A calibrated profile takes them from its GPU's preset (recorded
in meta["inherited"]); pure Python.
"""

from __future__ import annotations

import dataclasses

INHERITED = ("copy_op_overhead_s", "inplace_op_overhead_s", "attention_host_excess")


def base_preset_for(gpu: str) -> str | None:
    """The preset whose fitted costs a calibration on `gpu` inherits: its GPU's preset
    (dak.hardware_auto.preset_for_gpu) where that one fits any (None: none fits)."""
    from ..hardware import PRESETS
    from ..hardware_auto import preset_for_gpu
    preset = preset_for_gpu(gpu)
    return preset if preset and any(getattr(PRESETS[preset], f) for f in INHERITED) else None


def inherit_unmeasured(profile, base):
    """`profile` with each INHERITED field it leaves at 0 taken from `base` (a HardwareProfile)."""
    take = {f: getattr(base, f) for f in INHERITED if not getattr(profile, f) and getattr(base, f)}
    if not take:
        return profile
    meta = dict(profile.meta, inherited={f: base.name for f in take})
    return dataclasses.replace(profile, meta=meta, **take)
