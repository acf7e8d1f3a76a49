"""host_ratio / --host-ratio: the budget that leaves that share of the operator bytes on the host, placed by the
policy, as `dak bench e2e`'s x; `dak generate --json` reports what `dak plan` places (CPU)."""

import os

import pytest
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

from dak.cli.main import main  # noqa: E402
from dak.hardware import get_profile  # noqa: E402


def test_generate_json_is_one_object_and_plans_as_dak_plan(capsys):
    """dak generate --json prints one JSON object on stdout (the CPU notice goes to stderr), and
    --host-ratio places what dak plan --host-ratio places on the same workload."""
    import json
    wl = ["--model", "tiny-llama", "--host-ratio", "20%", "--batch", "2", "--prompt-len", "3", "--gen-len", "2"]
    assert main(["generate"] + wl + ["--json"]) == 0
    cap = capsys.readouterr()
    got = json.loads(cap.out)
    assert "no CUDA GPU here" in cap.err or torch.cuda.is_available()
    assert got["ran"] == "tiny-llama" and got["steps"] == 1 and got["tpot_s"] > 0 and got["ttft_s"] > 0
    assert {"gpu", "git_sha", "command", "date"} <= set(got["meta"])
    assert got["tokens_per_s"] == pytest.approx(2 / got["tpot_s"])
    assert got["measured_over_predicted"] == pytest.approx(got["tpot_s"] / got["predicted_tpot_s"])
    assert main(["plan"] + wl + ["--json"]) == 0
    planned = json.loads(capsys.readouterr().out)
    assert (got["policy"], got["host_bytes"]) == (planned["policy"], planned["host_bytes"]) and got["host_bytes"] > 0
    assert got["offload_ratio"] >= 0.2
    for extra, msg in ((["--stream", "--prompt", "hi"], "drop --json or --stream"),
                       (["--baseline", "uva"], "dak bench e2e --out")):
        assert main(["generate"] + wl + ["--json"] + extra) == 2
        assert msg in capsys.readouterr().err


def test_host_ratio_sets_the_budget_and_the_policy_places_it():
    """host_ratio x is `dak bench e2e`'s offload ratio: the HBM budget that leaves x of the operator
    bytes on the host, placed by the policy (consolidated by default, as the README's table rows);
    only `uniform` moves that share of every operator. A share the GPU cannot hold is an error."""
    from dak.baselines.e2e import budget_for
    from dak.models import load_spec
    from dak.planner import plan
    from dak.runtime.offload import placement_for, workload_for
    prof = get_profile("h200-pcie")
    spec, w = load_spec("llama-2-7b"), workload_for(8, None, 32, 32, torch.bfloat16)
    op_bytes = sum(o.bytes for o in plan(spec, w, prof, None, "uniform").ops)
    for x in (0.0, 0.02, 0.05, 0.3):
        for policy in ("consolidated", "greedy", "uniform"):
            pl = placement_for(spec, w, prof, None, policy, x)
            assert pl == plan(spec, w, prof, budget_for(spec, w, x, prof), policy)
            assert pl.policy == policy and pl.host_bytes >= x * op_bytes * (1 - 1e-9)
    assert placement_for(spec, w, prof, None, "uniform", "5%") == placement_for(spec, w, prof, None, "uniform", 0.05)
    uniform, default = (placement_for(spec, w, prof, None, p, 0.05) for p in ("uniform", "consolidated"))
    assert all(o.host_bytes for o in uniform.ops if o.kind != "attention")
    assert sum(1 for o in default.ops if o.host_bytes) < sum(1 for o in uniform.ops if o.host_bytes)
    assert default.predicted_s < uniform.predicted_s
    with pytest.raises(ValueError, match="give hbm_budget or host_ratio, not both"):
        placement_for(spec, w, prof, "10GiB", "consolidated", 0.05)
    for bad in (1.5, -0.01, float("nan"), True, [0.1]):
        with pytest.raises(ValueError, match="host_ratio must be a number in \\[0, 1\\]"):
            placement_for(spec, w, prof, None, "consolidated", bad)
    big, wide = load_spec("llama-2-70b"), workload_for(64, None, 2048, 2048, torch.bfloat16)
    with pytest.raises(ValueError, match="more than h200-pcie's capacity") as e:
        placement_for(big, wide, prof, None, "consolidated", 0.0)
    least = float(str(e.value).split("at least ")[1].split(",")[0])
    assert placement_for(big, wide, prof, None, "consolidated", least).hbm_budget <= prof.hbm_capacity
    with pytest.raises(ValueError, match="capacity"):
        placement_for(big, wide, prof, None, "consolidated", least - 1e-3)
