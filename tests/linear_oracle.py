"""The one float64 oracle of the split linear, shared by its CPU test files."""

import torch

from dak.host import PinnedBuffer, device_matrix
from dak.runtime_env import kernel_device

TOL = {torch.bfloat16: 1e-2, torch.float16: 2e-3}
DEV = kernel_device()


def split_inputs(m, k, n, m_h, dtype, bias, seed):
    """Fresh (x, pinned host rows, HBM rows, bias, float64 reference) for Y = x W^T + b."""
    g = torch.Generator().manual_seed(seed)
    w, x = torch.randn(m, k, generator=g), torch.randn(n, k, generator=g)
    b = torch.randn(m, generator=g) if bias else None
    ref = x.to(dtype).double() @ w.to(dtype).double().T
    if bias:
        ref = ref + b.to(dtype).double()
    wh = PinnedBuffer.from_tensor(w[:m_h].to(dtype))
    wg = device_matrix(m - m_h, k, dtype, DEV)
    wg.copy_(w[m_h:].to(dtype))
    return x.to(dtype).to(DEV), wh, wg, None if b is None else b.to(dtype).to(DEV), ref


def poisoned(n, m, dtype):
    return torch.full((n, m), float("nan"), dtype=dtype, device=DEV)


def check(out, ref, dtype, what: str):
    assert not out.isnan().any(), "some outputs were never written"
    err = ((out.double().cpu() - ref).norm() / ref.norm()).item()
    assert err < TOL[dtype], f"rel err {err} for {what}"
