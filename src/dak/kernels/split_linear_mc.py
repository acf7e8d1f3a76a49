"""Split linear with the host rows done by the CUDA cluster-multicast kernel.

    side stream:  [ host rows [0, M_H): dak_host_multicast, clusters of mc_cluster CTAs ]---+
    main stream:  [ HBM rows [M_H, M): the Triton split kernel (no host rows) ]-> join ------+

Each host row tile crosses the link once per cluster span (mc_cluster * mc_block_n tokens)
instead of once per token block (see dak.kernels.host_multicast and cuda/host_multicast.cu).
The two launches run concurrently; the fork and join use stream waits, so the whole call
captures into a CUDA graph (the kernel must have been loaded once before capture).
"""

from __future__ import annotations

from dataclasses import replace

import torch

from dak.kernels.config import KernelConfig, finalize
from dak.kernels.split_linear import split_linear
from dak.kernels.split_linear_checks import check_split_args, tma_compatible
from dak.kernels.streams import side_stream


def multicast_unsupported(x: torch.Tensor, w_host: torch.Tensor) -> str | None:
    """Why the multicast kernel cannot take these operands (None when it can)."""
    if x.device.type != "cuda":
        return "needs a CUDA GPU (the kernel is CUDA C++ for sm_90a; no interpreter path)"
    if torch.cuda.get_device_capability(x.device) != (9, 0):
        return f"needs an sm_90 GPU (Hopper), got sm_{''.join(map(str, torch.cuda.get_device_capability(x.device)))}"
    if w_host.numel() and not tma_compatible(w_host):
        return "w_host must have a 16-byte aligned base and row stride (use dak.host.PinnedBuffer)"
    if (x.stride(0) * x.element_size()) % 16 or x.data_ptr() % 16:
        return f"x's rows must be 16-byte aligned for TMA (in_features {x.shape[1]} is not a multiple of 8)"
    return None


def split_linear_mc(x: torch.Tensor, w_host: torch.Tensor, w_hbm: torch.Tensor, bias: torch.Tensor | None,
                    cfg: KernelConfig, sms: int, out: torch.Tensor | None = None) -> torch.Tensor:
    """Y = x @ cat(w_host, w_hbm)^T + bias; host rows by cluster multicast, HBM rows by Triton.

    Shapes and dtypes as `dak.kernels.split_linear.split_linear`. cfg.mc_cluster,
    cfg.mc_block_m, cfg.mc_block_n choose the variant; cfg.host_programs caps the CTAs on host
    rows; the other fields configure the HBM rows' Triton launch. Returns `out`.
    """
    from dak.kernels.host_multicast import launch_host_multicast
    n, k, m_h, m_g = check_split_args(x, w_host, w_hbm, bias, out)
    if out is None:
        out = torch.empty((n, m_h + m_g), dtype=x.dtype, device=x.device)
    if n == 0 or m_h == 0:
        return split_linear(x, w_host, w_hbm, bias, finalize(cfg, m_h, m_g, sms), out=out)
    why = multicast_unsupported(x, w_host)
    if why:
        raise ValueError(f"host_kernel='cuda_multicast' cannot run here: {why}")
    hbm_cfg = finalize(replace(cfg, host_kernel="triton", ce_share=0.0), 0, m_g, sms)
    host_bias = None if bias is None else bias[:m_h]
    main = torch.cuda.current_stream(x.device)
    side = side_stream(x.device, "host-multicast")
    side.wait_stream(main)
    with torch.cuda.stream(side):
        launch_host_multicast(x, w_host, host_bias, out, block_m=cfg.mc_block_m, block_n=cfg.mc_block_n,
                              cluster=cfg.mc_cluster, programs=max(cfg.host_programs, cfg.mc_cluster))
    if m_g:
        split_linear(x, w_host[:0], w_hbm, None if bias is None else bias[m_h:], hbm_cfg, out=out[:, m_h:])
    main.wait_stream(side)
    return out
