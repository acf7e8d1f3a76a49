"""`SplitLinear`: a drop-in for `nn.Linear` whose weight rows live partly in pinned host memory.

Rows [0, m_h) of the (out_features, in_features) weight are kept in an exact-size pinned host
buffer, rows [m_h, out_features) in HBM; m_h is a multiple of `row_tile` (or all rows). One
Triton launch computes the whole output (see dak.kernels.split_linear). With m_h = 0 the
module calls dak's GEMV kernel at decode batch sizes (dak.kernels.hbm_gemv: 4-8% lower TPOT
than cuBLAS end to end on the H200's 7-8B models; $DAK_HBM_GEMV=0 turns it off) and torch's
own matmul otherwise.

Launch configs are chosen per token bucket by a short sweep (`tune=True`) or a heuristic,
before first use; `prepare(n_tokens)` does it explicitly. Inside CUDA graph capture the module
only launches: an unprepared token bucket there is an error, never a silent tune.
"""

from __future__ import annotations

import math
import numbers

import torch
from torch import nn

from dak.host import PinnedBuffer, device_matrix
from dak.kernels.config import KernelConfig, heuristic_config
from dak.kernels.hbm_gemv import MAX_TOKENS, hbm_linear
from dak.nn.split_state import gather, load_rows, refuse_moves, unexpected
from dak.runtime_env import KERNEL_DTYPES, gpu_name, kernel_device, sm_count
from dak.shares import one_gemv_mode


def host_rows_for(out_features: int, row_tile: int, host_ratio: float | None = None,
                  host_rows: int | None = None) -> int:
    """Host row count: the request rounded up to whole `row_tile`s, capped at out_features."""
    if (host_ratio is None) == (host_rows is None):
        raise ValueError("give exactly one of host_ratio (a fraction in [0, 1]) or host_rows")
    if isinstance(row_tile, bool) or not isinstance(row_tile, numbers.Integral) or row_tile < 1:
        raise ValueError(f"row_tile must be an integer >= 1, got {row_tile!r}")
    if host_ratio is not None:
        if isinstance(host_ratio, bool) or not isinstance(host_ratio, numbers.Real) \
                or not 0.0 <= float(host_ratio) <= 1.0 \
                or math.isnan(float(host_ratio)):
            raise ValueError(f"host_ratio must be a fraction in [0, 1], got {host_ratio!r}")
        want = float(host_ratio) * out_features
    else:
        if isinstance(host_rows, bool) or not isinstance(host_rows, int) or not 0 <= host_rows <= out_features:
            raise ValueError(f"host_rows must be an integer in [0, {out_features}], got {host_rows!r}")
        want = host_rows
    rows = math.ceil(want / row_tile - 1e-9) * row_tile
    return min(out_features, max(0, rows))


def whole_hbm_weight(lin, x: torch.Tensor) -> torch.Tensor | None:
    """The HBM weight of `lin` if it is a SplitLinear held whole in HBM outside any fused
    projection group and `x` (..., in_features) matches its dtype and device; else None. Fused
    paths that compute such a linear's product themselves (dak.runtime.fused) ask this first."""
    if (isinstance(lin, SplitLinear) and lin.host_rows == 0 and lin._group is None and x.dtype == lin.dtype
            and x.device == lin.w_hbm.device and x.shape[-1] == lin.in_features):
        return lin.w_hbm
    return None


class SplitLinear(nn.Module):
    """y = x @ W^T + b with W split by rows between pinned host memory and HBM.

    x: (..., in_features), bf16 or fp16, contiguous, on the GPU; returns (..., out_features) in
    x's dtype, accumulated in fp32. Inference only: the output carries no autograd history,
    also when x requires grad (call it under torch.no_grad() or inference_mode() to say so).
    """

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None = None, *,
                 host_ratio: float | None = None, host_rows: int | None = None,
                 row_tile: int = 64, tune: bool = True):
        super().__init__()
        if weight.dim() != 2:
            raise ValueError(f"weight must be 2-D (out_features, in_features), got {tuple(weight.shape)}")
        if weight.dtype not in KERNEL_DTYPES:
            raise ValueError(f"weight dtype {weight.dtype} is not supported: use torch.bfloat16 or "
                             "torch.float16 (e.g. weight.to(torch.bfloat16))")
        if bias is not None and (bias.shape != (weight.shape[0],)):
            raise ValueError(f"bias must have shape ({weight.shape[0]},), got {tuple(bias.shape)}")
        device = kernel_device()
        self.out_features, self.in_features = weight.shape
        self.dtype = weight.dtype
        self.host_rows = host_rows_for(self.out_features, row_tile, host_ratio, host_rows)
        self.row_tile = row_tile
        self.tune = tune
        m_h = self.host_rows
        data = weight.device.type != "meta"  # a meta weight (see `empty`) allocates without copying
        self._host = PinnedBuffer.from_tensor(weight[:m_h]) if data else PinnedBuffer((m_h, self.in_features),
                                                                                      self.dtype)
        w_hbm = device_matrix(self.out_features - m_h, self.in_features, self.dtype, device)
        if data:
            w_hbm.copy_(weight[m_h:].detach())
        self.register_buffer("w_hbm", w_hbm, persistent=False)
        b = None if bias is None else (torch.empty(self.out_features, dtype=self.dtype, device=device)
                                       if bias.device.type == "meta"
                                       else bias.detach().to(device=device, dtype=self.dtype).contiguous())
        self.register_buffer("bias", b, persistent=False)
        self._configs: dict[int, KernelConfig] = {}
        self._staging: torch.Tensor | None = None  # shared copy-engine staging (see split_linear_ce)
        self._ahead = None  # copy-ahead chain entry for decode steps (dak.kernels.copy_ahead)
        # chained and all host rows staged: one GEMV after the copies land (Placement.one_gemv)
        self.one_gemv = False
        self._group = None  # (ProjectionGroup, index) when fused with its siblings (dak.nn.fused_proj)
        self._gpu = gpu_name(device)
        self._sms = sm_count(device)

    @classmethod
    def from_linear(cls, linear: nn.Linear, **kw) -> "SplitLinear":
        """Split an existing nn.Linear (its weight is copied; the Linear can then be freed)."""
        return cls(linear.weight.data, None if linear.bias is None else linear.bias.data, **kw)

    @classmethod
    def empty(cls, out_features: int, in_features: int, *, bias: bool, dtype: torch.dtype,
              **kw) -> "SplitLinear":
        """Uninitialised parts, allocated straight in their homes (no full-weight copy anywhere);
        fill `w_host`, `w_hbm` and `bias` in place, e.g. from a checkpoint or a seeded generator."""
        meta = torch.empty((out_features, in_features), dtype=dtype, device="meta")
        return cls(meta, torch.empty(out_features, dtype=dtype, device="meta") if bias else None, **kw)

    @property
    def w_host(self) -> torch.Tensor:
        """The pinned (host_rows, in_features) part of the weight."""
        return self._host.tensor

    @property
    def host_ratio(self) -> float:
        return self.host_rows / self.out_features if self.out_features else 0.0

    def full_weight(self) -> torch.Tensor:
        """The whole weight gathered on the HBM device (a copy; for checks, not the hot path)."""
        return torch.cat([self.w_host.to(self.w_hbm.device), self.w_hbm], dim=0)

    def _apply(self, fn, recurse=True):
        refuse_moves(self, fn, (self.w_hbm, self.bias))
        return self

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        """As nn.Linear's keys: `weight` (gathered into a CPU copy, see dak.nn.split_state), `bias`."""
        destination[prefix + "weight"] = gather(self.w_host, self.w_hbm, repr(self))
        if self.bias is not None:
            destination[prefix + "bias"] = self.bias.detach().cpu().clone()

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                              unexpected_keys, error_msgs):
        """Copy `weight` rows into their pinned and HBM homes, and `bias`, in place."""
        copied = load_rows(state_dict, prefix + "weight", (self.w_host, self.w_hbm), repr(self), missing_keys,
                           error_msgs)
        if self.bias is not None:
            load_rows(state_dict, prefix + "bias", (self.bias,), repr(self), missing_keys, error_msgs)
        if strict:
            unexpected(state_dict, prefix, ("weight", "bias") if self.bias is not None else ("weight",),
                       unexpected_keys)
        ahead = self._ahead
        if copied and ahead is not None and ahead.chain.wrap:
            ahead.chain.primed = False  # a wrapped chain's first slot may hold the old rows

    def _launch(self, x2: torch.Tensor, cfg: KernelConfig, out: torch.Tensor | None = None,
                w_hbm: torch.Tensor | None = None):
        from dak.kernels import copy_ahead
        from dak.kernels.split_linear_ce import ce_rows, split_linear_ce, staging_buffer
        from dak.kernels.split_linear_route import run_split_linear
        need = ce_rows(cfg, self.host_rows) * self.w_host.stride(0) if cfg.host_kernel != "cuda_multicast" else 0
        if need:
            step = copy_ahead.current_step(self, x2.shape[0], cfg)
            if step is not None:  # chained: this copy (and the next operator's) queued early
                step.issue(self)
                if self._ahead.next is not None:
                    step.issue(self._ahead.next)
                return split_linear_ce(x2, self.w_host, self.w_hbm, self.bias, cfg, None, self._sms, out=out,
                                       ahead=(step, self))
            copy_ahead.recording(self)
        if need and (self._staging is None or self._staging.numel() < need):
            self._staging = staging_buffer(self.w_hbm.device, self.dtype, need)
        w_hbm = self.w_hbm if w_hbm is None else w_hbm  # the tuner's L2-rotation copies
        return run_split_linear(x2, self.w_host, w_hbm, self.bias, cfg, self._sms, self._staging, out=out)

    def prepare(self, n_tokens: int) -> KernelConfig | None:
        """Choose (and cache) the launch config for `n_tokens`, compiling the kernel. Not in capture."""
        from dak.kernels.split_linear import tma_compatible
        from dak.kernels.timing import l2_copies
        from dak.kernels.tuning import cached, get_or_tune, token_bucket, tune_key
        if self.host_rows == 0:
            return None
        bucket = token_bucket(n_tokens)
        if bucket in self._configs:
            return self._configs[bucket]
        if torch.cuda.is_available() and torch.cuda.is_current_stream_capturing():
            raise RuntimeError(
                f"SplitLinear({self.in_features}->{self.out_features}) was not prepared for "
                f"{n_tokens} tokens before CUDA graph capture; call .prepare({n_tokens}) or run "
                "one forward with that many tokens outside capture first")
        x = torch.randn(n_tokens, self.in_features, device=self.w_hbm.device).to(self.dtype)
        out = torch.empty(n_tokens, self.out_features, device=x.device, dtype=self.dtype)
        tma_ok = tma_compatible(self.w_host) and (self.w_hbm.numel() == 0 or tma_compatible(self.w_hbm))
        key = tune_key(self._gpu, self.dtype, n_tokens, self.host_rows,
                       self.out_features - self.host_rows, self.in_features, self.bias is not None)
        m_h, m_g, k = self.host_rows, self.out_features - self.host_rows, self.in_features
        cfg = None
        if self.one_gemv and n_tokens <= MAX_TOKENS and one_gemv_mode() is not False:
            # the plan runs its copy-engine operators as one GEMV once staged: the untuned config it
            # priced (every host row staged), no cached or swept one; in-place operators as usual
            cfg = heuristic_config(n_tokens, m_h, m_g, k, self._sms, tma_ok)
            cfg = cfg if cfg.ce_share >= 1 else None
        if cfg is None:
            tune = self.tune and x.device.type == "cuda"
            runs = lambda c: self._launch(x, c, out)  # noqa: E731
            if tune and cached(key) is None:  # the sweep rotates HBM copies so that its timings miss L2
                runs = [lambda c, w=w: self._launch(x, c, out, w) for (w,) in l2_copies((self.w_hbm,))]
            cfg = get_or_tune(key, runs, n_tokens, m_h, m_g, k, self._sms, tma_ok, tune)
            del runs
        self._launch(x, cfg, out)  # compile now, outside any capture
        self._configs[bucket] = cfg
        return cfg

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[-1] != self.in_features:
            raise ValueError(f"expected input (..., {self.in_features}), got {tuple(x.shape)}")
        if x.dtype != self.dtype:
            raise ValueError(f"input dtype {x.dtype} differs from the weight dtype {self.dtype}; "
                             f"cast the input with x.to({self.dtype})")
        if not x.is_contiguous():
            raise ValueError(f"input must be contiguous (strides {x.stride()}); call x.contiguous()")
        if x.device != self.w_hbm.device:
            raise ValueError(f"input is on {x.device}, the module on {self.w_hbm.device}")
        from dak.kernels.tuning import token_bucket
        lead = x.shape[:-1]
        x2 = x.reshape(-1, self.in_features)
        if self.host_rows == 0:
            y = (hbm_linear(x2, self.w_hbm, self.bias, self.tune) if self._group is None
                 else self._group[0].output(self._group[1], x, x2))
        else:
            cfg = self._configs.get(token_bucket(x2.shape[0]))
            if cfg is None:
                cfg = self.prepare(x2.shape[0])
            with torch.no_grad():  # inference only: the launchers write into preallocated outputs
                y = self._launch(x2, cfg)
        return y.reshape(*lead, self.out_features)

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}, host_rows={self.host_rows} "
                f"({100 * self.host_ratio:.1f}%), dtype={self.dtype}")
