"""Placement planner: cost model, three-stage greedy and baseline policies (pure Python)."""

from .cost import effective_bandwidth, op_time, peak_ratio, segments
from .greedy import round_to_units, solve_continuous
from .placement import OpPlacement, Placement
from .plan import POLICIES, plan, plan_all

__all__ = ["effective_bandwidth", "op_time", "peak_ratio", "segments", "round_to_units",
           "solve_continuous", "OpPlacement", "Placement", "POLICIES", "plan", "plan_all"]
