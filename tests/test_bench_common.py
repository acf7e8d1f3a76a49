"""benchmarks/common.py off the GPU: split_kernel_call reads every host row in place, also for a
weight wholly on the host (where the untuned config stages rows by the copy engine and multiplies
the HBM rows by cuBLAS: the in-place override must drop both)."""

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import common  # noqa: E402
from dak.host import PinnedBuffer  # noqa: E402
from linear_oracle import DEV  # noqa: E402


def test_split_kernel_call_reads_a_whole_host_weight_in_place():
    torch.manual_seed(5)
    n, m, k = 3, 80, 64
    w = (torch.randn(m, k) / k ** 0.5).to(torch.bfloat16)
    x = torch.randn(n, k).to(torch.bfloat16)
    for m_h in (m, 48):
        host = PinnedBuffer.from_tensor(w[:m_h])  # host rows as dak keeps them: pinned (on a GPU), aligned
        call = common.split_kernel_call(x.to(DEV), host.tensor, w[m_h:].to(DEV))
        y = call().cpu()
        ref = x.float() @ w.float().t()
        assert (y.float() - ref).abs().max() <= 2e-2 * ref.abs().max()
        host.free()
