"""Linear baselines, each built from the same split parts as dak's kernel.

- `TorchLinear` ("torch"): the whole weight in HBM, torch's own matmul (cuBLAS).
- `PrefetchLinear` ("prefetch"): double-buffered prefetch as FlexGen and vLLM's prefetcher do
  it per layer: the host rows are copied by the copy engine into an HBM staging buffer on a
  side stream while the HBM rows compute; then the staged rows compute. Host bytes cross the
  link once and HBM twice (written by the copy, read by the matmul).
- `UVALinear` ("uva"): the whole weight in pinned host memory, read in place by torch's matmul
  through a CUDA view of that memory (vLLM's --cpu-offload-gb does this per parameter).

All take x (N, K) and return (N, M) in x's dtype.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from dak.host import check_host_tensor


class _CudaArrayView:
    """Minimal __cuda_array_interface__ exporter for a pinned host tensor (UVA address)."""

    def __init__(self, t: torch.Tensor):
        es = t.element_size()
        self.__cuda_array_interface__ = {
            "shape": tuple(t.shape),
            "strides": tuple(s * es for s in t.stride()),
            "typestr": {1: "|i1", 2: "<i2", 4: "<i4", 8: "<i8"}[es],
            "data": (t.data_ptr(), False),
            "version": 3,
        }


def uva_view(t: torch.Tensor) -> torch.Tensor:
    """A CUDA tensor aliasing pinned host tensor `t` (unified virtual addressing); no copy."""
    check_host_tensor(t, "UVA source")
    int_dtype = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()]
    view = torch.as_tensor(_CudaArrayView(t.view(int_dtype)), device="cuda")
    return view.view(t.dtype)


class TorchLinear:
    """All weights in HBM; torch's matmul."""

    name = "torch"

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None):
        self.weight, self.bias = weight, bias

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.weight, self.bias)


class UVALinear:
    """The whole weight in pinned host memory, read in place by torch's matmul."""

    name = "uva"

    def __init__(self, w_pinned: torch.Tensor, bias: torch.Tensor | None):
        self._source = w_pinned  # keeps the pinned memory alive
        self.weight = uva_view(w_pinned)
        self.bias = bias

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.weight, self.bias)


class PrefetchLinear:
    """Host rows copied into an HBM staging buffer on a side stream, overlapped with the HBM rows."""

    name = "prefetch"

    def __init__(self, w_host: torch.Tensor, w_hbm: torch.Tensor, bias: torch.Tensor | None):
        if w_host.numel():
            check_host_tensor(w_host, "prefetch host rows")
        self.w_host, self.w_hbm = w_host, w_hbm
        self.m_h = w_host.shape[0]
        self.staging = torch.empty(w_host.shape, dtype=w_hbm.dtype, device=w_hbm.device)
        self.bias_h = None if bias is None else bias[: self.m_h]
        self.bias_g = None if bias is None else bias[self.m_h:]
        self.side = torch.cuda.Stream(device=w_hbm.device)
        self.copied = torch.cuda.Event()

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if self.m_h == 0:
            return F.linear(x, self.w_hbm, self.bias_g)
        main = torch.cuda.current_stream()
        self.side.wait_stream(main)
        with torch.cuda.stream(self.side):
            self.staging.copy_(self.w_host, non_blocking=True)
            self.copied.record(self.side)
        y_g = F.linear(x, self.w_hbm, self.bias_g) if self.w_hbm.shape[0] else None
        main.wait_event(self.copied)
        y_h = F.linear(x, self.staging, self.bias_h)
        return y_h if y_g is None else torch.cat([y_h, y_g], dim=1)


BASELINES = {"torch": TorchLinear, "prefetch": PrefetchLinear, "uva": UVALinear}
