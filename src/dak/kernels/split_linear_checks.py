"""Argument checks of the split-linear launchers, and how many bytes each host path pulls over
the host link (the read amplification the large-N paths remove)."""

from __future__ import annotations

import torch

from dak.kernels.config import KernelConfig, cdiv
from dak.runtime_env import KERNEL_DTYPES, interpreting


def tma_compatible(w: torch.Tensor) -> bool:
    """TMA needs a 16-byte aligned base, 16-byte aligned row stride and unit column stride."""
    es = w.element_size()
    return (w.numel() > 0 and w.stride(1) == 1 and w.data_ptr() % 16 == 0
            and (w.stride(0) * es) % 16 == 0 and w.shape[1] * es >= 16)


def check_split_args(x, w_host, w_hbm, bias, out):
    """Validate launcher inputs; return (N, K, M_H, M_G). Raises ValueError saying what to fix."""
    if x.dim() != 2:
        raise ValueError(f"x must be 2-D (tokens, in_features), got shape {tuple(x.shape)}")
    if x.dtype not in KERNEL_DTYPES:
        raise ValueError(f"x has dtype {x.dtype}; split kernels support torch.bfloat16 and torch.float16")
    if not x.is_contiguous():
        raise ValueError(f"x must be contiguous (strides {x.stride()}); call x.contiguous() first")
    n, k = x.shape
    for name, w in (("w_host", w_host), ("w_hbm", w_hbm)):
        if w.dim() != 2 or w.shape[1] != k:
            raise ValueError(f"{name} must be (rows, {k}) to match x's in_features, got {tuple(w.shape)}")
        if w.dtype != x.dtype:
            raise ValueError(f"{name} dtype {w.dtype} differs from x dtype {x.dtype}; cast one of them")
        if w.numel() and w.stride(1) != 1:
            raise ValueError(f"{name} rows must be contiguous, got strides {w.stride()}")
    if w_host.numel() and w_host.device.type != "cpu":
        raise ValueError(f"w_host must be in pinned host memory, got a tensor on {w_host.device}")
    if not interpreting():
        if x.device.type != "cuda":
            raise ValueError(f"x must be on the GPU, got {x.device}")
        if w_host.numel() and not w_host.is_pinned():
            raise ValueError("w_host is pageable; pin it with dak.host.PinnedBuffer.from_tensor")
        if w_hbm.numel() and w_hbm.device != x.device:
            raise ValueError(f"w_hbm is on {w_hbm.device} but x is on {x.device}")
    m = w_host.shape[0] + w_hbm.shape[0]
    if bias is not None and (bias.shape != (m,) or bias.dtype != x.dtype or bias.device != x.device):
        raise ValueError(f"bias must be ({m},) {x.dtype} on {x.device}, got {tuple(bias.shape)} "
                         f"{bias.dtype} on {bias.device}")
    if out is not None and (out.shape != (n, m) or out.dtype != x.dtype or out.device != x.device
                            or (n > 1 and m > 1 and out.stride(1) != 1)):
        raise ValueError(f"out must be a ({n}, {m}) {x.dtype} tensor on {x.device} with unit column "
                         "stride (contiguous, or a column slice of a contiguous tensor)")
    return n, k, w_host.shape[0], w_hbm.shape[0]


def host_link_bytes(n: int, m_host: int, k: int, elem: int, cfg: KernelConfig) -> int:
    """Bytes one launch pulls over the host link, counted from its grid.

    The plain Triton path reads each host row tile once per token block (ceil(N / block_n));
    "triton_once" once; "cuda_multicast" once per cluster span of mc_cluster * mc_block_n tokens.
    Rows moved by the copy engine (ce_share) cross the link once.
    """
    from dak.kernels.split_linear_ce import ce_rows
    n = max(n, 1)
    m_ce = ce_rows(cfg, m_host) if cfg.host_kernel != "cuda_multicast" else 0
    if cfg.host_kernel == "cuda_multicast":
        reads = cdiv(n, cfg.mc_cluster * cfg.mc_block_n)
    elif cfg.host_kernel == "triton_once" or n <= cfg.block_n:
        reads = 1
    else:
        reads = cdiv(n, cfg.block_n)
    return (m_ce + (m_host - m_ce) * reads) * k * elem
