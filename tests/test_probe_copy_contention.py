"""benchmarks/probe_copy_contention.py: the CPU flow check multiplies what was copied, and notices when it was not."""

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import probe_copy_contention as pcc  # noqa: E402
from dak.runtime_env import kernel_device  # noqa: E402


def test_flow_check_every_beside_kind_forked_and_not():
    rows = pcc.run(3, 1, 64, 96, pcc.BESIDE, kernel_device(), forks=(False, True))  # a GPU's: timed too
    assert [(r["beside"], r["fork"]) for r in rows] == [(b, f) for b in pcc.BESIDE for f in (False, True)]
    assert all(r["max_rel_err"] < 2e-2 and r["copies"] == 3 for r in rows)


def test_a_step_that_skips_its_copies_is_caught():
    hosts = [torch.randn(40, 64).to(torch.bfloat16) for _ in range(3)]
    slots = [torch.full((40, 64), float("nan"), dtype=torch.bfloat16) for _ in range(2)]  # poisoned
    x = torch.randn(8, 64).to(torch.bfloat16)
    assert pcc.check(pcc.make_step(hosts, slots, x, None), hosts, x) < 2e-2
    for s in slots:
        s.fill_(float("nan"))
    bad = pcc.check(pcc.make_step(hosts, slots, x, None, with_copies=False), hosts, x)
    assert bad == float("inf")  # the poisoned slots were multiplied


def test_bad_arguments():
    with pytest.raises(SystemExit, match="unknown --beside"):
        pcc.main(["--beside", "none,cudnn"])
    with pytest.raises(SystemExit, match="must be >= 1"):
        pcc.main(["--copies", "0"])


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only message")
def test_triton_beside_work_without_the_interpreter_is_refused_on_cpu(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    with pytest.raises(SystemExit, match="needs TRITON_INTERPRET=1"):
        pcc.main(["--beside", "triton"])
