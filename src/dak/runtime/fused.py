"""dak's one-launch norms and rotary embedding inside HF models (dak.kernels.fused_ops).

`install(model)` points each RMSNorm module's forward, and each nn.LayerNorm's with weight and
bias over one axis (OPT), at the fused kernels (parameters and their names stay as they are) and wraps the modeling module's `apply_rotary_pos_emb`; the wrapper
uses the fused kernel only inside `fused()` (the engine's forward), so other HF models in the
process keep HF's own code. Shapes the kernels do not take fall back to HF's code.
"""

from __future__ import annotations

import contextlib
import contextvars
import sys
import types

from torch import nn

from dak.kernels.fused_ops import layer_norm, rms_norm, rotary, rotary_ok
from dak.runtime_env import interpreting

RMS_NORMS = ("LlamaRMSNorm", "MistralRMSNorm", "Qwen2RMSNorm")
_ON = contextvars.ContextVar("dak_fused_rotary", default=False)


@contextlib.contextmanager
def fused():
    """Use the fused rotary embedding in wrapped HF modules for the duration."""
    token = _ON.set(True)
    try:
        yield
    finally:
        _ON.reset(token)


def _runs_here(x) -> bool:
    return x.is_cuda or interpreting()


def _norm_forward(self, hidden_states):
    if _runs_here(hidden_states) and hidden_states.dtype == self.weight.dtype:
        return rms_norm(hidden_states, self.weight, self.variance_epsilon)
    return type(self).forward(self, hidden_states)


def _layer_norm_forward(self, x):
    if _runs_here(x) and x.dtype == self.weight.dtype:
        return layer_norm(x, self.weight, self.bias, self.eps)
    return type(self).forward(self, x)


def _fusable_layer_norm(mod) -> bool:
    return (isinstance(mod, nn.LayerNorm) and len(mod.normalized_shape) == 1
            and mod.weight is not None and getattr(mod, "bias", None) is not None)


def _wrap_rotary(hf_rotary):
    def apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1):
        if (_ON.get() and unsqueeze_dim == 1 and _runs_here(q) and rotary_ok(q, cos) and rotary_ok(k, cos)
                and sin.shape == cos.shape and sin.stride() == cos.stride()):
            return rotary(q, k, cos, sin)
        return hf_rotary(q, k, cos, sin, unsqueeze_dim)
    apply_rotary_pos_emb.dak_wraps = hf_rotary
    return apply_rotary_pos_emb


def install(model: nn.Module) -> int:
    """Fuse `model`'s norms and rotary embedding; returns the number of norms swapped."""
    n = 0
    for mod in model.modules():
        if type(mod).__name__ in RMS_NORMS and hasattr(mod, "variance_epsilon"):
            mod.forward = types.MethodType(_norm_forward, mod)
            n += 1
        elif _fusable_layer_norm(mod):
            mod.forward = types.MethodType(_layer_norm_forward, mod)
            n += 1
    module = sys.modules.get(type(model).__module__)
    hf_rotary = getattr(module, "apply_rotary_pos_emb", None)
    if hf_rotary is not None and not hasattr(hf_rotary, "dak_wraps"):
        module.apply_rotary_pos_emb = _wrap_rotary(hf_rotary)
    return n
