"""Hardware profiles: the bandwidths and capacities the planner's cost model needs.

All bandwidths are in bytes/s, compute in FLOP/s, capacities in bytes.

* ``hbm_bandwidth`` (B_g): achievable HBM read bandwidth.
* ``host_bandwidth_ce``: host->device copy-engine bandwidth (cudaMemcpyAsync
  from pinned memory); used by the layer-prefetch baseline.
* ``host_bandwidth_sm`` (B_h): bandwidth of SM zero-copy loads from pinned host
  memory; this is what DAK kernels achieve when reading their host part.
* ``flops`` (F): dense bf16/fp16 tensor-core throughput.
* ``layer_overhead_s`` (optional, default 0): decode-step time per decoder layer outside the
  planned operators (norms, residual adds, activations, KV append, kernel launches). It is
  added to the predicted TPOT, never to the bound. Measured with q/k/v and gate/up fused;
  ``unfused_op_overhead_s`` (optional, default 0) is the time of each extra launch where a
  fusion is lost: a projection group that runs unfused, or a split operator's GEMV epilogue
  (dak.planner.overhead.fusion_overhead); `dak calibrate` measures it from the fused products.
  ``fused_layer_overhead_s`` (optional, default 0 = use ``layer_overhead_s``) takes its place for
  the decoder layers dak fuses (gated-MLP models, $DAK_FUSED_LAYER on: dak.runtime.fused).
* ``inplace_op_overhead_s``, ``copy_op_overhead_s`` (optional, default 0): decode-step time
  beyond the roofline per split linear whose host rows are read in place, and per split linear
  whose host rows go through the copy engine; ``attention_host_excess`` (optional, default 0,
  dimensionless): extra decode-step time per second of host-KV link time of split attention.
  Added to predictions of dak's own placements for operators without a measured curve (a
  curve already holds its operator's excess), never to the bound or the decisions.
* ``gemv_bandwidth`` (optional, default 0 = ``hbm_bandwidth``): the HBM rate of dak's all-HBM
  decode GEMV (dak.kernels.hbm_gemv), at which the planner prices decode linears held wholly in
  HBM (dak.planner.cost.hbm_time); split operators and the bound keep ``hbm_bandwidth``.

A profile written by ``dak calibrate`` (schema 2) also carries ``meta`` (GPU name, driver,
library versions, date), measured per-shape time ``curves`` that the planner uses instead of
the roofline, the congestion ``windows`` chosen per split-linear launch shape, and ``link``
samples (host-read and concurrent HBM bandwidth per host programs x pipeline depth); see
``dak.measured``. Presets and hand-written profiles carry none of these. The presets, with the
measurements behind them, are in ``dak.hardware_presets`` (``PRESETS`` here too).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import warnings
from dataclasses import dataclass, field
from functools import cached_property

from .jsonfile import load_json
from .measured import SECTIONS, Curve, LinkSample, Window, parse_section, section_to_json


@dataclass(frozen=True)
class HardwareProfile:
    name: str
    hbm_bandwidth: float
    host_bandwidth_ce: float
    host_bandwidth_sm: float
    flops: float
    sm_count: int
    smem_per_sm: int
    hbm_capacity: int
    host_ram: int
    layer_overhead_s: float = 0.0
    fused_layer_overhead_s: float = 0.0
    unfused_op_overhead_s: float = 0.0
    inplace_op_overhead_s: float = 0.0
    copy_op_overhead_s: float = 0.0
    attention_host_excess: float = 0.0
    gemv_bandwidth: float = 0.0
    meta: dict = field(default_factory=dict, hash=False)
    curves: tuple[Curve, ...] = ()
    windows: tuple[Window, ...] = ()
    link: tuple[LinkSample, ...] = ()

    @property
    def split_host_bandwidth(self) -> float:
        """B_h of a split operator's host rows: dak moves them with whichever reader is faster
        for link-bound shares (SM loads in place, or the copy engine into pipelined chunks)."""
        return max(self.host_bandwidth_sm, self.host_bandwidth_ce)

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise ValueError("hardware profile field 'name' must be a non-empty string")
        if not isinstance(self.meta, dict):
            raise ValueError("hardware profile field 'meta' must be an object")
        for name in SECTIONS:
            object.__setattr__(self, name, tuple(getattr(self, name)))
        for f in dataclasses.fields(self):
            if f.name == "name" or f.name in _MEASURED:
                continue
            v = getattr(self, f.name)
            low_ok = f.name in OPTIONAL and isinstance(v, (int, float)) and v == 0
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or (v <= 0 and not low_ok):
                kind = "a non-negative" if f.name in OPTIONAL else "a positive"
                raise ValueError(f"hardware profile field '{f.name}' must be {kind} number, got {v!r}")
            if f.type in ("int", int) and not float(v).is_integer():
                raise ValueError(f"hardware profile field '{f.name}' must be an integer, got {v!r}")
            if f.type in ("int", int):
                object.__setattr__(self, f.name, int(v))
            else:
                object.__setattr__(self, f.name, float(v))

    @cached_property
    def curve_table(self) -> dict[str, Curve]:
        """Measured curves by operator key."""
        return {c.key: c for c in self.curves}

    def roofline_only(self) -> "HardwareProfile":
        """The same profile without measured curves (the planner then uses the roofline)."""
        return dataclasses.replace(self, curves=()) if self.curves else self

    def without_fused_curves(self) -> "HardwareProfile":
        """The same profile without its fused projection-set curves (dak.planner.curves.fused_key)."""
        from .planner.curves import FUSED_SUFFIX
        kept = tuple(c for c in self.curves if not c.key.endswith(FUSED_SUFFIX))
        return dataclasses.replace(self, curves=kept) if len(kept) != len(self.curves) else self

    def device_mismatch(self, gpu: str) -> str | None:
        """A warning when this profile was calibrated on another GPU than ``gpu``, else None."""
        from .measured import same_gpu
        theirs = self.meta.get("gpu")
        if theirs and not same_gpu(theirs, gpu):
            return (f"hardware profile {self.name!r} was measured on {theirs!r} but this is {gpu!r}; "
                    f"its numbers may not hold here: run `dak calibrate` on this machine")
        return None

    # ---- JSON -------------------------------------------------------------
    def to_dict(self) -> dict:
        d = {f: getattr(self, f) for f in _field_names()}
        d.update({f: getattr(self, f) for f in OPTIONAL if getattr(self, f) != OPTIONAL[f]})
        if self.meta or self.curves or self.windows or self.link:
            d["schema"] = SCHEMA
            d["meta"] = dict(self.meta)
            d.update({name: section_to_json(getattr(self, name)) for name in SECTIONS})
        return d

    @classmethod
    def from_dict(cls, data: dict, source: str = "profile") -> "HardwareProfile":
        if not isinstance(data, dict):
            raise ValueError(f"{source}: a hardware profile must be a JSON object with fields {_field_names()}")
        missing = [f for f in _field_names() if f not in data]
        if missing:
            raise ValueError(f"{source}: hardware profile is missing field(s) {', '.join(missing)}; "
                             f"required fields: {', '.join(_field_names())}")
        schema = data.get("schema", 1)
        if isinstance(schema, bool) or not isinstance(schema, int) or not 1 <= schema <= SCHEMA:
            raise ValueError(f"{source}: hardware profile schema {schema!r} is not supported (this dak reads "
                             f"schemas 1 to {SCHEMA}); re-run `dak calibrate` or upgrade dak")
        known = set(_field_names()) | set(OPTIONAL) | {"schema", "meta"} | set(SECTIONS)
        unknown = sorted(k for k in data if k not in known)
        if unknown:
            warnings.warn(f"{source}: ignoring unknown hardware profile field(s) {', '.join(unknown)}",
                          stacklevel=2)
        extra = {name: parse_section(name, data[name], source) for name in SECTIONS if name in data}
        meta = data.get("meta", {})
        if not isinstance(meta, dict):
            raise ValueError(f"{source}: hardware profile field 'meta' must be an object")
        optional = {f: data[f] for f in OPTIONAL if f in data}
        return cls(**{f: data[f] for f in _field_names()}, **optional, meta=meta, **extra)

    def to_json(self, path: str) -> None:
        with open(path, "w") as fh:
            json.dump(self.to_dict(), fh, indent=2)
            fh.write("\n")

    @classmethod
    def from_json(cls, path: str) -> "HardwareProfile":
        return cls.from_dict(load_json(path, "hardware profile"), source=path)


SCHEMA = 2
_MEASURED = ("meta",) + tuple(SECTIONS)
OPTIONAL = {"layer_overhead_s": 0.0, "fused_layer_overhead_s": 0.0, "unfused_op_overhead_s": 0.0, "inplace_op_overhead_s": 0.0,
            "copy_op_overhead_s": 0.0,
            "attention_host_excess": 0.0, "gemv_bandwidth": 0.0}  # scalar fields a profile may leave out (their defaults)


def _field_names() -> list[str]:
    """The required (scalar) fields: everything but the optional ones, meta and the measured sections."""
    return [f.name for f in dataclasses.fields(HardwareProfile) if f.name not in _MEASURED and f.name not in OPTIONAL]


def __getattr__(name: str):
    """PRESETS and CHANGED live in dak.hardware_presets (which imports HardwareProfile from here)."""
    if name in ("PRESETS", "CHANGED"):
        from . import hardware_presets
        return getattr(hardware_presets, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def run_profile(name: str, date: str | None) -> HardwareProfile:
    """The profile a recorded run (bench JSON: its config's hardware, its meta date, ISO UTC)
    planned with: a preset's old values for runs made before they changed (CHANGED); a run
    without a date counts as old."""
    from .hardware_presets import CHANGED, PRESETS
    for preset, since, old in CHANGED:
        if name == preset and (date or "") < since:
            return PRESETS[old]
    return get_profile(name)


def get_profile(name_or_path: str) -> HardwareProfile:
    """Return a preset by name ("auto": the preset of the GPU in use, dak.hardware_auto), or load a
    profile JSON file by path."""
    if isinstance(name_or_path, HardwareProfile):
        return name_or_path
    if name_or_path == "auto":
        from .hardware_auto import resolve
        name_or_path = resolve(name_or_path)[0]
    from .hardware_presets import PRESETS
    if name_or_path in PRESETS:
        return PRESETS[name_or_path]
    if name_or_path.endswith(".json") or os.path.exists(name_or_path):
        return HardwareProfile.from_json(name_or_path)
    raise ValueError(f"unknown hardware {name_or_path!r}: pass auto, a preset ({', '.join(PRESETS)}) "
                     f"or the path of a profile .json file")
