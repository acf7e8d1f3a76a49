"""Placement planner: cost model, three-stage greedy and baseline policies (pure Python)."""

from .cost import effective_bandwidth, op_time, peak_ratio, roofline_time, segments
from .curves import above_envelope, lower_hull, op_key
from .greedy import round_to_units, solve_continuous
from .placement import OpPlacement, Placement
from .plan import COST_MODELS, POLICIES, plan, plan_all, ratio_budget

__all__ = ["effective_bandwidth", "op_time", "peak_ratio", "roofline_time", "segments", "above_envelope",
           "lower_hull", "op_key", "round_to_units", "solve_continuous", "OpPlacement", "Placement",
           "COST_MODELS", "POLICIES", "plan", "plan_all", "ratio_budget"]
