"""dak's one-launch norms and rotary embedding inside HF models (dak.kernels.fused_ops).

`install(model)` points each RMSNorm module's forward, and each nn.LayerNorm's with weight and
bias over one axis (OPT), at the fused kernels (parameters and their names stay as they are) and
wraps the modeling module's `apply_rotary_pos_emb`; the wrapper uses the fused kernel only inside
`fused()` (the engine's forward), so other HF models in the process keep HF's own code. Shapes the
kernels do not take fall back to HF's code.

It also points each Llama-family decoder layer's forward (RMSNorms, a SiLU gate/up/down MLP) at
one that fuses the residual add with the post-attention RMSNorm and the MLP's SiLU with its
multiply (dak.kernels.fused_layer): two launches fewer per layer, same rounding as HF. On by
default since the tenth session (H200, B=8: Llama-2-7B TPOT 4.60 -> 4.42 ms, Llama-3-8B 4.88 ->
4.65 ms, same call); `$DAK_FUSED_LAYER=0` turns it off. Inside the engine's forward the MLP's
residual add moves into the next layer's input add + RMSNorm launch (or the final norm's): one
launch fewer a layer, on by default since the fifteenth session (H200, B=8, x = 0/2%: Llama-2-7B
4.43/4.49 -> 4.40/4.45 ms, Llama-3-8B 4.70/4.71 -> 4.66/4.67 ms, same call), `$DAK_DEFER_RESIDUAL=0`
turns it off. `$DAK_RESIDUAL_ADDMM=1` (an experiment) folds that add into down_proj's cuBLAS call.
OPT's decoder layers are fused too (dak.runtime.fused_opt; `$DAK_FUSED_OPT=0` turns it off), and
the decode step rotates q and k inside the KV append's launch (`$DAK_ROTARY_KV=0` turns it off;
H200, B = 8, x = 0/1/2%, same call, sixteenth session: Llama-2-7B 4.38/4.39/4.45 ->
4.33/4.36/4.39 ms, Llama-3-8B 4.64/4.66/4.65 -> 4.59/4.61/4.61).
"""

from __future__ import annotations

import contextlib
import contextvars
import sys
import types

import torch
from torch import nn

from dak.kernels.fused_layer import add_rms_norm, silu_mul
from dak.kernels.fused_ops import layer_norm, rms_norm, rotary, rotary_ok
from dak.kernels.hbm_gemv import swiglu_linear
from dak.nn.fused_proj import group_of
from dak.nn.split_linear import SplitLinear
from dak.runtime.fused_opt import fusable_opt_layer, opt_layer_forward, opt_layers_enabled
from dak.runtime.kv import ROTARY_PENDING
from dak import shares
from dak.runtime_env import env_flag, fused_layer_enabled, interpreting

RMS_NORMS = ("LlamaRMSNorm", "MistralRMSNorm", "Qwen2RMSNorm", "Qwen3RMSNorm")
SILU = ("SiLU", "SiLUActivation")  # torch's and transformers' own (x * sigmoid(x) either way)
_ON = contextvars.ContextVar("dak_fused_rotary", default=False)
_DEFER_ROTARY = contextvars.ContextVar("dak_defer_rotary", default=False)
_QK_NORMS = contextvars.ContextVar("dak_qk_norms", default=None)  # {"q"|"k": (weight, eps)} left to the rotary


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
    pending = _pop_pending(hidden_states)
    role = getattr(self, "_dak_qk", None)
    if (role and pending is None and _ON.get() and _DEFER_ROTARY.get() and hidden_states.dim() == 4
            and hidden_states.shape[1] == 1 and _runs_here(hidden_states) and hidden_states.dtype == self.weight.dtype):
        # a decode step's q or k norm (Qwen3): left to the rotary + KV append launch (see _wrap_rotary)
        norms = _QK_NORMS.get()
        if norms is None:
            norms = {}
            _QK_NORMS.set(norms)
        norms[role] = (self.weight, self.variance_epsilon)
        return hidden_states
    if _runs_here(hidden_states) and hidden_states.dtype == self.weight.dtype:
        if pending is not None:  # a deferred residual add (see _layer_forward), fused here
            return add_rms_norm(hidden_states, pending, self.weight, self.variance_epsilon)[1]
        return rms_norm(hidden_states, self.weight, self.variance_epsilon)
    return type(self).forward(self, _settle(hidden_states, pending))


_PENDING = "_dak_pending_residual"


def defer_residual_enabled() -> bool:
    """On unless $DAK_DEFER_RESIDUAL=0 (fifteenth session: 0.6-0.9% lower TPOT on the H200): inside
    the engine's forward, a fused layer whose consumer is the next fused layer or the final RMSNorm returns
    down_proj's output with the residual attached, and the consumer adds it inside its own
    add + RMSNorm launch: one launch fewer per layer, the same rounding as HF."""
    return env_flag("DAK_DEFER_RESIDUAL", True)


def _pop_pending(x):
    """The residual a deferring layer attached to `x` (detached from it), or None."""
    return x.__dict__.pop(_PENDING, None) if isinstance(x, torch.Tensor) else None


def _settle(x, pending):
    """x with its deferred residual added (for consumers that cannot fuse the add)."""
    return x if pending is None else pending + x


def _layer_norm_forward(self, x):
    if _runs_here(x) and x.dtype == self.weight.dtype:
        return layer_norm(x, self.weight, self.bias, self.eps)
    return type(self).forward(self, x)


def _fusable_layer_norm(mod) -> bool:
    return (isinstance(mod, nn.LayerNorm) and len(mod.normalized_shape) == 1
            and mod.weight is not None and getattr(mod, "bias", None) is not None)


def rotary_kv_enabled() -> bool:
    """Unless $DAK_ROTARY_KV=0: in the engine's decode step the rotary embedding of q and k (and
    Qwen3's q/k norms) is left to the "dak" attention, which applies it and appends k and v to the
    cache in one launch (dak.kernels.rotary_append)."""
    return shares.rotary_kv_enabled()


@contextlib.contextmanager
def decode_step():
    """Marks the engine's decode step (where the "dak" attention consumes q and k; see
    rotary_kv_enabled)."""
    token = _DEFER_ROTARY.set(rotary_kv_enabled())
    try:
        yield
    finally:
        _DEFER_ROTARY.reset(token)


def _take_norms(q, k):
    """(q, k, deferred norms) after the q/k norms a decode step left to the rotary (_norm_forward):
    both deferred with one eps -> (q, k, (q weight, k weight, eps)) for the KV append's launch;
    otherwise any deferred norm is applied here and the third item is None."""
    norms = _QK_NORMS.get()
    if not norms:
        return q, k, None
    _QK_NORMS.set(None)
    if set(norms) == {"q", "k"} and norms["q"][1] == norms["k"][1]:
        return q, k, (norms["q"][0], norms["k"][0], norms["q"][1])
    if "q" in norms:
        q = rms_norm(q, *norms["q"])
    if "k" in norms:
        k = rms_norm(k, *norms["k"])
    return q, k, None


def _wrap_rotary(hf_rotary):
    def apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1):
        q, k, norms = _take_norms(q, k)
        fused_ok = (_ON.get() and unsqueeze_dim == 1 and _runs_here(q) and rotary_ok(q, cos) and rotary_ok(k, cos)
                    and sin.shape == cos.shape and sin.stride() == cos.stride())
        if fused_ok and _DEFER_ROTARY.get() and q.shape[2] == 1 and k.shape[2] == 1 and q.shape[0] == k.shape[0]:
            # rotated (and normed) with the KV append (dak.runtime.kv)
            q.__dict__[ROTARY_PENDING] = (cos, sin) if norms is None else (cos, sin, norms)
            return q, k
        if norms is not None:
            q, k = rms_norm(q, norms[0], norms[2]), rms_norm(k, norms[1], norms[2])
        return rotary(q, k, cos, sin) if fused_ok else hf_rotary(q, k, cos, sin, unsqueeze_dim)
    apply_rotary_pos_emb.dak_wraps = hf_rotary
    return apply_rotary_pos_emb


def residual_addmm_enabled() -> bool:
    """$DAK_RESIDUAL_ADDMM=1 (an experiment, off until measured on the GPU): fused layers add the
    residual to an all-HBM, bias-free down_proj inside its cuBLAS call (addmm, beta = 1): one
    launch fewer per layer; the sum is rounded once where HF rounds the product, then the sum."""
    return env_flag("DAK_RESIDUAL_ADDMM", False)


def _hbm_weight(lin) -> torch.Tensor | None:
    """The weight of a bias-free linear held whole in HBM (nn.Linear, or a SplitLinear with no
    host rows that is not part of a fused projection group), else None."""
    if isinstance(lin, SplitLinear):
        return lin.w_hbm if lin.host_rows == 0 and lin._group is None and lin.bias is None else None
    return lin.weight if type(lin) is nn.Linear and lin.bias is None else None


def _linear_add(lin, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
    """residual + lin(x): one addmm where `lin` qualifies (see _hbm_weight), else two steps."""
    w = _hbm_weight(lin) if residual_addmm_enabled() else None
    if (w is None or x.dtype != w.dtype or residual.dtype != w.dtype or x.device != w.device
            or residual.device != w.device or x.shape[-1] != w.shape[1] or residual.shape[-1] != w.shape[0]
            or x.shape[:-1] != residual.shape[:-1]):
        return residual + lin(x)
    out = torch.addmm(residual.reshape(-1, w.shape[0]), x.reshape(-1, w.shape[1]), w.t())
    return out.view(residual.shape)


def _fusable_layer(mod) -> bool:
    """A Llama-family decoder layer: RMSNorms before attention and MLP, a SiLU gate/up/down MLP."""
    mlp = getattr(mod, "mlp", None)
    norms = [getattr(mod, n, None) for n in ("input_layernorm", "post_attention_layernorm")]
    return (type(mod).__name__.endswith("DecoderLayer") and hasattr(mod, "self_attn")
            and all(type(n).__name__ in RMS_NORMS and hasattr(n, "variance_epsilon") for n in norms)
            and all(hasattr(mlp, p) for p in ("gate_proj", "up_proj", "down_proj"))
            and type(getattr(mlp, "act_fn", None)).__name__ in SILU)


def _layer_forward(self, hidden_states, *args, **kwargs):
    """HF's decoder layer with residual + post-attention RMSNorm and SiLU * up as one launch each.
    Positional extras, other devices or dtypes: HF's own forward."""
    post, first = self.post_attention_layernorm, self.input_layernorm
    pending = _pop_pending(hidden_states)
    if args or not _runs_here(hidden_states) or hidden_states.dtype != post.weight.dtype:
        return type(self).forward(self, _settle(hidden_states, pending), *args, **kwargs)
    if pending is None:
        residual, h = hidden_states, first(hidden_states)
    else:  # the previous layer's MLP residual add, fused with this layer's input norm
        residual, h = add_rms_norm(hidden_states, pending, first.weight, first.variance_epsilon)
    h, _ = self.self_attn(hidden_states=h, **kwargs)
    residual, h = add_rms_norm(h, residual, post.weight, post.variance_epsilon)
    mlp = self.mlp
    act = _swiglu(mlp, h)
    if act is None:
        act = silu_mul(mlp.gate_proj(h), mlp.up_proj(h))
    if not (getattr(self, "_dak_defer", False) and _ON.get() and defer_residual_enabled()):
        return _linear_add(mlp.down_proj, act, residual)
    out = mlp.down_proj(act)
    setattr(out, _PENDING, residual)
    return out


def _swiglu(mlp, h: torch.Tensor) -> torch.Tensor | None:
    """SiLU(gate_proj(h)) * up_proj(h) in one GEMV launch (dak.kernels.hbm_gemv.swiglu_linear)
    where gate and up are the two members, in that order, of one all-HBM ProjectionGroup (the
    fused matrix is then [gate rows; up rows]); else None."""
    group = group_of(mlp, ("gate_proj", "up_proj"))
    if group is None:
        return None
    w = group.weight
    if h.dtype != w.dtype or h.device != w.device or h.shape[-1] != w.shape[1] or not h.is_contiguous():
        return None
    y = swiglu_linear(h.reshape(-1, w.shape[1]), w, group.bias, group.tune)
    return None if y is None else y.view(*h.shape[:-1], w.shape[0] // 2)


def _mark_deferring(model: nn.Module) -> None:
    """Let a decoder stack's fused layers defer their MLP residual add (see defer_residual_enabled)
    where every consumer fuses it: all layers of the stack fused and its final norm an RMSNorm."""
    for mod in model.modules():
        stack, norm = getattr(mod, "layers", None), getattr(mod, "norm", None)
        if (isinstance(stack, nn.ModuleList) and len(stack)
                and all(getattr(m.forward, "__func__", None) is _layer_forward for m in stack)
                and getattr(getattr(norm, "forward", None), "__func__", None) is _norm_forward):
            for layer in stack:
                layer._dak_defer = True


def install(model: nn.Module, layers: bool | None = None) -> int:
    """Fuse `model`'s norms and rotary embedding (and with `layers`, default $DAK_FUSED_LAYER, its
    decoder layers' add + norm and SiLU * up); returns the number of norms and layers swapped."""
    layers = fused_layer_enabled() if layers is None else layers
    n = 0
    for mod in model.modules():
        if type(mod).__name__ in RMS_NORMS and hasattr(mod, "variance_epsilon"):
            mod.forward = types.MethodType(_norm_forward, mod)
            n += 1
        elif _fusable_layer_norm(mod):
            mod.forward = types.MethodType(_layer_norm_forward, mod)
            n += 1
        elif layers and _fusable_layer(mod):
            mod.forward = types.MethodType(_layer_forward, mod)
            n += 1
        elif layers and opt_layers_enabled() and fusable_opt_layer(mod):
            mod.forward = types.MethodType(opt_layer_forward, mod)
            n += 1
    if layers:
        _mark_deferring(model)
    module = sys.modules.get(type(model).__module__)
    hf_rotary = getattr(module, "apply_rotary_pos_emb", None)
    if hf_rotary is not None and not hasattr(hf_rotary, "dak_wraps"):
        module.apply_rotary_pos_emb = _wrap_rotary(hf_rotary)
    _mark_qk_norms(model)
    return n


def _mark_qk_norms(model: nn.Module) -> None:
    """Let a decode step leave Qwen3's per-head q and k norms to the rotary + KV append launch: the
    q_norm / k_norm RMSNorms of attention modules whose modeling module's apply_rotary_pos_emb dak
    wraps (which applies them, in that launch or eagerly)."""
    for mod in model.modules():
        qn, kn = getattr(mod, "q_norm", None), getattr(mod, "k_norm", None)
        rot = getattr(sys.modules.get(type(mod).__module__), "apply_rotary_pos_emb", None)
        if (hasattr(rot, "dak_wraps") and all(getattr(getattr(x, "forward", None), "__func__", None) is _norm_forward
                                              for x in (qn, kn))):
            qn._dak_qk, kn._dak_qk = "q", "k"
