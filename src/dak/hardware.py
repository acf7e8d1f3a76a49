"""Hardware profiles: the bandwidths and capacities the planner's cost model needs.

All bandwidths are in bytes/s, compute in FLOP/s, capacities in bytes.

* ``hbm_bandwidth`` (B_g): achievable HBM read bandwidth.
* ``host_bandwidth_ce``: host->device copy-engine bandwidth (cudaMemcpyAsync
  from pinned memory); used by the layer-prefetch baseline.
* ``host_bandwidth_sm`` (B_h): bandwidth of SM zero-copy loads from pinned host
  memory; this is what DAK kernels achieve when reading their host part.
* ``flops`` (F): dense bf16/fp16 tensor-core throughput.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from dataclasses import dataclass

from .jsonfile import load_json
from .units import GIB, KIB, MIB


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

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise ValueError("hardware profile field 'name' must be a non-empty string")
        for f in dataclasses.fields(self):
            if f.name == "name":
                continue
            v = getattr(self, f.name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
                raise ValueError(f"hardware profile field '{f.name}' must be a positive number, got {v!r}")
            if f.type in ("int", int) and not float(v).is_integer():
                raise ValueError(f"hardware profile field '{f.name}' must be an integer, got {v!r}")
            if f.type in ("int", int):
                object.__setattr__(self, f.name, int(v))
            else:
                object.__setattr__(self, f.name, float(v))

    # ---- JSON -------------------------------------------------------------
    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict, source: str = "profile") -> "HardwareProfile":
        if not isinstance(data, dict):
            raise ValueError(f"{source}: a hardware profile must be a JSON object with fields {_field_names()}")
        missing = [f for f in _field_names() if f not in data]
        if missing:
            raise ValueError(f"{source}: hardware profile is missing field(s) {', '.join(missing)}; "
                             f"required fields: {', '.join(_field_names())}")
        return cls(**{f: data[f] for f in _field_names()})

    def to_json(self, path: str) -> None:
        with open(path, "w") as fh:
            json.dump(self.to_dict(), fh, indent=2)
            fh.write("\n")

    @classmethod
    def from_json(cls, path: str) -> "HardwareProfile":
        return cls.from_dict(load_json(path, "hardware profile"), source=path)


def _field_names() -> list[str]:
    return [f.name for f in dataclasses.fields(HardwareProfile)]


PRESETS: dict[str, HardwareProfile] = {
    # Measured on our H200 SXM behind a PCIe Gen5 host link: H2D copy 55.0 GB/s
    # (1 GiB pinned), SM zero-copy reads 51.3 GB/s from cudaHostAlloc'd memory (43 GB/s from
    # cudaHostRegister'd; benchmarks/results/probe-host-read-h200.json), cuBLAS GEMV 3707 GB/s
    # (D2D copy 4056 GB/s read+write), 8192^3 bf16 matmul 788 TFLOP/s.
    # nvidia-smi reports 143771 MiB (~139 GiB usable).
    "h200-pcie": HardwareProfile(
        name="h200-pcie", hbm_bandwidth=3.7e12, host_bandwidth_ce=55.0e9,
        host_bandwidth_sm=51.3e9, flops=788e12, sm_count=132, smem_per_sm=228 * KIB,
        hbm_capacity=143771 * MIB, host_ram=128 * GIB),
    # GH200 datasheet: 96 GB HBM3 at 4.0 TB/s, 900 GB/s NVLink-C2C (both host paths).
    "gh200": HardwareProfile(
        name="gh200", hbm_bandwidth=4.0e12, host_bandwidth_ce=900e9,
        host_bandwidth_sm=900e9, flops=990e12, sm_count=132, smem_per_sm=228 * KIB,
        hbm_capacity=96 * 10**9, host_ram=480 * 10**9),
    # RTX PRO 6000 Blackwell: 96 GB GDDR7 at 1.8 TB/s, PCIe Gen5 x16 64 GB/s.
    # host_ram = 256 GiB is an assumption (typical workstation), not a spec.
    "rtx-pro-6000": HardwareProfile(
        name="rtx-pro-6000", hbm_bandwidth=1.8e12, host_bandwidth_ce=64e9,
        host_bandwidth_sm=64e9, flops=500e12, sm_count=188, smem_per_sm=100 * KIB,
        hbm_capacity=96 * 10**9, host_ram=256 * GIB),
}


def get_profile(name_or_path: str) -> HardwareProfile:
    """Return a preset by name, or load a profile JSON file by path."""
    if isinstance(name_or_path, HardwareProfile):
        return name_or_path
    if name_or_path in PRESETS:
        return PRESETS[name_or_path]
    if name_or_path.endswith(".json") or os.path.exists(name_or_path):
        return HardwareProfile.from_json(name_or_path)
    raise ValueError(f"unknown hardware {name_or_path!r}: pass a preset ({', '.join(PRESETS)}) "
                     f"or the path of a profile .json file")
