"""benchmarks/strip_curves.py: a calibrated profile's roofline twin for the cost-model A/B (CPU)."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from strip_curves import main  # noqa: E402

from dak.baselines.e2e import budget_for  # noqa: E402
from dak.hardware import get_profile  # noqa: E402
from dak.models import Workload, load_spec  # noqa: E402
from dak.planner import plan  # noqa: E402

PROFILE = Path(__file__).resolve().parents[1] / "benchmarks" / "profiles" / "h200-llama-2-7b-h17-inherited.json"


def test_twin_keeps_every_rate_and_drops_the_curves(tmp_path):
    out = tmp_path / "roof.json"
    main([str(PROFILE), str(out)])
    src, twin = get_profile(str(PROFILE)), get_profile(str(out))
    assert src.curves and not twin.curves and twin.windows == src.windows
    for f in ("hbm_bandwidth", "host_bandwidth_ce", "host_bandwidth_sm", "flops", "copy_op_overhead_s",
              "attention_host_excess", "unfused_op_overhead_s"):
        assert getattr(twin, f) == getattr(src, f), f
    spec, w = load_spec("llama-2-7b"), Workload("decode", 8, 32, 32)
    b = budget_for(spec, w, 0.02, src)
    assert plan(spec, w, src, b, "greedy").cost_model == "measured"
    roof = plan(spec, w, twin, b, "greedy")
    assert roof.cost_model == "roofline"
    assert [o.host_bytes for o in roof.ops] == [o.host_bytes for o in plan(spec, w, src, b, "greedy",
                                                                            cost_model="roofline").ops]
    with pytest.raises(SystemExit, match="no measured curves"):
        main([str(out), str(tmp_path / "again.json")])
