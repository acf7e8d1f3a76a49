"""Frozen results of planning: per-operator placements and the whole-model ``Placement``.

Bytes are bytes, times seconds, bandwidths bytes/s.  ``ratio`` is the host
fraction of an operator's resident bytes (host_bytes / bytes).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from ..models.ops import Workload


@dataclass(frozen=True)
class OpPlacement:
    name: str
    kind: str
    layer: int | None
    shape: tuple[int, int] | None
    ratio: float                 # host_bytes / bytes, in [0, 1]
    host_units: int              # whole units on host (row tiles, requests or embedding rows)
    units: int
    host_rows: int | None        # rows on host (linears and embeddings), else None
    host_requests: int | None    # requests whose KV is on host (attention), else None
    bytes: int
    hbm_bytes: int
    host_bytes: int
    traffic: float
    time_s: float


@dataclass(frozen=True)
class Placement:
    policy: str                  # one of dak.planner.plan.POLICIES
    model: str
    profile: str
    workload: Workload
    hbm_budget: int              # bytes of HBM the plan may use
    min_hbm_bytes: int           # norms + activation workspace + runtime reserve
    required_host_bytes: int     # R = max(0, total_bytes - hbm_budget)
    staging_bytes: int           # HBM staging the plan holds inside its budget (prefetch; streamed)
    ops: tuple[OpPlacement, ...]
    total_bytes: int             # sum of operator bytes + min_hbm_bytes
    hbm_bytes: int               # min set + HBM parts of the ops + staging
    host_bytes: int              # host parts of the ops
    total_traffic: float         # bytes read per step
    step_time_s: float           # TPOT (decode) or prefill time; inf when infeasible
    fits: bool                   # everything fits in the budget, no offload needed
    feasible: bool = True
    note: str = ""
    cost_model: str = "roofline"  # 'roofline' | 'measured' (convex envelope of calibrated curves)
    measured_ops: int = 0         # operators timed by a measured curve (the rest: roofline)
    overhead_s: float = 0.0       # decode: layers x the profile's layer_overhead_s (not in step_time_s)
    link_s: float = 0.0           # decode, dak's policies: the host link's busy time L (dak.planner.stream)
    one_gemv: bool = False        # decode: copy-engine linears run as one GEMV once staged (stream.chained)

    @property
    def predicted_s(self) -> float:
        """Predicted step time: the operators' local time plus the small kernels between them
        (A), combined with the host link's busy time L (dak.planner.stream.combine)."""
        from .stream import combine
        return combine(self.step_time_s + self.overhead_s, self.link_s)

    @property
    def effective_bandwidth(self) -> float:
        """Total traffic / the operators' time (their local time with the link's) in bytes/s
        (0 when infeasible)."""
        from .stream import combine
        if not self.feasible or self.step_time_s <= 0 or math.isinf(self.step_time_s):
            return 0.0
        return self.total_traffic / combine(self.step_time_s, self.link_s)

    @property
    def offload_ratio(self) -> float:
        op_bytes = sum(o.bytes for o in self.ops)
        return self.host_bytes / op_bytes if op_bytes else 0.0

    def to_dict(self) -> dict:
        """JSON-ready dict (an infeasible step time becomes null)."""
        d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "ops"}
        d["workload"] = dataclasses.asdict(self.workload)
        if math.isinf(self.step_time_s):
            d["step_time_s"] = None
        d["effective_bandwidth"] = self.effective_bandwidth
        d["offload_ratio"] = self.offload_ratio
        d["ops"] = [dataclasses.asdict(o) for o in self.ops]
        for o in d["ops"]:
            if o["shape"] is not None:
                o["shape"] = list(o["shape"])
            if math.isinf(o["time_s"]):
                o["time_s"] = None
        return d
