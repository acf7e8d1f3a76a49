"""benchmarks/probe_pin_layout.py: its layout reader on CPU memory, and what it refuses."""

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import probe_pin_layout  # noqa: E402

import dak.host as host  # noqa: E402


def test_layout_of_touched_huge_page_memory():
    t = host._thp_bytes(4 << 20)
    got = probe_pin_layout.layout(t.data_ptr(), t.numel())
    assert got["numa_nodes"] is None or all(n >= 0 for n in got["numa_nodes"])
    # pagemap gives frame numbers to root only; a run is between one page and the whole buffer
    assert got["run_kib"] is None or 4 <= got["run_kib"] <= 4 << 10


def test_topology_names_what_it_could_not_read():
    topo = probe_pin_layout.topology()
    assert set(topo) >= {"numa_nodes_online", "gpu_numa_node", "thp_enabled", "euid"}


def test_bad_arguments_are_refused():
    with pytest.raises(SystemExit, match="--methods takes alloc, register, thp"):
        probe_pin_layout.main(["--methods", "alloc,pageable"])
    with pytest.raises(SystemExit, match="must be >= 1"):
        probe_pin_layout.main(["--mib", "0"])


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only message")
def test_needs_a_gpu():
    with pytest.raises(SystemExit, match="needs a CUDA GPU"):
        probe_pin_layout.main([])
