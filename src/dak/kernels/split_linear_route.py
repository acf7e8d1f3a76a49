"""One entry point for every split-linear path, chosen by the launch config.

    cfg.host_kernel == "cuda_multicast"  -> dak.kernels.split_linear_mc (host rows by CUDA clusters)
    cfg.ce_share > 0 or cfg.hbm_cublas    -> dak.kernels.split_linear_ce (part of the host rows by copy
      or cfg.hbm_fork                        engine; with hbm_cublas all of them, HBM rows by cuBLAS; with
                                             hbm_fork HBM rows by dak's GEMV beside a host-only kernel)
    otherwise                             -> dak.kernels.split_linear (one Triton launch; host rows
                                             re-read per token block, or once with "triton_once")
"""

from __future__ import annotations

import torch

from dak.kernels.config import KernelConfig


def run_split_linear(x: torch.Tensor, w_host: torch.Tensor, w_hbm: torch.Tensor, bias: torch.Tensor | None,
                     cfg: KernelConfig, sms: int, staging: torch.Tensor | None = None,
                     out: torch.Tensor | None = None) -> torch.Tensor:
    """Y = x @ cat(w_host, w_hbm)^T + bias by the path `cfg` names. Returns `out` (allocated if None).

    `staging` is the copy-engine staging buffer (dak.kernels.split_linear_ce.staging_buffer); when
    None and cfg.ce_share > 0 the shared one is sized here (never inside CUDA graph capture).
    """
    if cfg.host_kernel == "cuda_multicast":
        from dak.kernels.split_linear_mc import split_linear_mc
        return split_linear_mc(x, w_host, w_hbm, bias, cfg, sms, out=out)
    if cfg.ce_share > 0 or cfg.hbm_cublas or cfg.hbm_fork:
        from dak.kernels.split_linear_ce import ce_rows, split_linear_ce, staging_buffer
        if staging is None:
            need = ce_rows(cfg, w_host.shape[0]) * w_host.stride(0)
            staging = staging_buffer(x.device, x.dtype, need)
        return split_linear_ce(x, w_host, w_hbm, bias, cfg, staging, sms, out=out)
    from dak.kernels.split_linear import split_linear
    return split_linear(x, w_host, w_hbm, bias, cfg, out=out)
