"""Decode-step time the roofline leaves out, as a profile states it (added to predictions).

* ``step_overhead``: the small kernels between operators, layers x ``layer_overhead_s``.
* ``split_overhead``: dak's split operators beyond their roofline: per split linear read in place
  (``inplace_op_overhead_s``) or through the copy engine (``copy_op_overhead_s``, host share at
  or above ``dak.shares.ce_min_share()``), and ``attention_host_excess`` x the host-KV link time
  of split attention. Operators with a measured curve carry their own excess and add nothing.
"""

from __future__ import annotations

from ..hardware import HardwareProfile
from ..models.ops import Workload
from ..models.spec import ModelSpec
from ..shares import ce_min_share
from .curves import curve_for


def step_overhead(spec: ModelSpec, workload: Workload, profile: HardwareProfile) -> float:
    """Decode-step time outside the planned operators: layers x profile.layer_overhead_s."""
    return spec.num_layers * profile.layer_overhead_s if workload.phase == "decode" else 0.0


def split_overhead(ops, host_bytes, workload: Workload, profile: HardwareProfile) -> float:
    """Decode-step time of the split operators beyond their roofline; `host_bytes[i]` is the
    host part of `ops[i]`."""
    if workload.phase != "decode":
        return 0.0
    share, total = ce_min_share(), 0.0
    for op, host in zip(ops, host_bytes):
        if not host or op.kind.startswith("embed") or curve_for(op, profile) is not None:
            continue
        ratio = host / op.bytes
        if op.kind == "attention":
            total += profile.attention_host_excess * op.traffic * ratio / profile.split_host_bandwidth
        else:
            total += profile.copy_op_overhead_s if ratio >= share else profile.inplace_op_overhead_s
    return total
