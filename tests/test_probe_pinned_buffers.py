"""benchmarks/probe_pinned_buffers.py refuses what it cannot measure, with a message that says why."""

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import probe_pinned_buffers  # noqa: E402


def test_unknown_pinning_method_and_empty_sizes_are_refused():
    with pytest.raises(SystemExit, match=r"unknown pinning method\(s\) \['pageable'\]"):
        probe_pinned_buffers.main(["--methods", "alloc,pageable"])
    with pytest.raises(SystemExit, match="must be >= 1"):
        probe_pinned_buffers.main(["--mib", "0"])


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only message")
def test_needs_a_gpu():
    with pytest.raises(SystemExit, match="needs a CUDA GPU"):
        probe_pinned_buffers.main([])
