"""benchmarks/fidelity.py on the CPU: which operators it measures as a fused projection set."""

import dataclasses
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from fidelity import fused_members  # noqa: E402

from dak.baselines.e2e import budget_for  # noqa: E402
from dak.hardware import get_profile  # noqa: E402
from dak.models import Workload, list_operators, load_spec  # noqa: E402
from dak.planner import plan  # noqa: E402

H200 = get_profile("h200-pcie")
W = Workload("decode", 8, 32, 32)


def test_whole_hbm_sets_are_fused_and_split_sets_are_not():
    for model, groups in (("llama-2-7b", ({"q_proj", "k_proj", "v_proj"}, {"gate_proj", "up_proj"})),
                          ("opt-6.7b", ({"q_proj", "k_proj", "v_proj"},))):
        spec = load_spec(model)
        ops = {o.name: o for o in list_operators(spec, W)}
        pl = plan(spec, W, H200, budget_for(spec, W, 0.05, H200), "uniform")  # every linear split
        assert fused_members(pl, ops) == set()
        pl0 = plan(spec, W, H200, None, "greedy")  # fits: nothing on the host
        fused = fused_members(pl0, ops)
        want = {p.name for p in pl0.ops if any(p.kind in g for g in groups)}
        assert fused == want and want, model
        # one member with host rows un-fuses its own set only
        split_q = next(p for p in pl.ops if p.kind == "q_proj")
        assert split_q.ratio > 0
        layer = ops[split_q.name].layer
        mixed = tuple(split_q if p.name == split_q.name else p for p in pl0.ops)
        got = fused_members(dataclasses.replace(pl0, ops=mixed), ops)
        lost = {n for n in want if ops[n].layer == layer and ops[n].kind in ("q_proj", "k_proj", "v_proj")}
        assert len(lost) == 3 and got == want - lost, model
