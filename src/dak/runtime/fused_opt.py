"""OPT's decoder layer with fewer launches (on by default; `$DAK_FUSED_OPT=0` turns it off).

HF's OPT layer at decode runs, besides its linears and attention, a residual add, the final
LayerNorm, the ReLU after fc1 and a second residual add: four small launches a layer that the
Llama layers of dak.runtime.fused do not pay. Here the first add and the LayerNorm are one launch
(dak.kernels.fused_layer.add_layer_norm), and where fc1 and fc2 run dak's all-HBM GEMV
(dak.kernels.hbm_gemv, the default) the ReLU and the second add are its epilogues: from four
launches to one. Each rounds where the eager code rounds. Outside those cases the layer runs
HF's own ops in HF's order. Measured (H200, OPT-6.7B, B = 8, GEMV on, same call, sixteenth
session): TPOT at x = 0/1/2% 4.66/5.23/5.61 -> 4.43/5.12/5.57 ms.

q's scaling (on by default; `$DAK_OPT_QSCALE=0` turns it off): HF's OPT attention multiplies q by
its scaling in a launch of its own; where q/k/v are one all-HBM ProjectionGroup and the "dak"
attention runs, the layer computes the fused product with q's scaling as the GEMV's epilogue
(rounded as HF rounds) and calls the attention itself, which reads q where it lies in the product:
one launch fewer a layer. Measured (H200, batch 8, same call, twenty-seventh session, H82): OPT-6.7B
TPOT at x = 0/1% 4.116/4.854 -> 4.034/4.758 ms, OPT-30B 15.34/17.05 -> 15.22/16.88, equal at 2 and
5%. (In H16 it gained nothing: q was then copied out of the product by a launch of its own.)
"""

from __future__ import annotations

import torch
from torch import nn

from dak.kernels.fused_layer import add_layer_norm
from dak.kernels.hbm_gemv import config_for, gemv_applies, hbm_gemv
from dak.nn.fused_proj import group_of
from dak.nn.split_linear import whole_hbm_weight
from dak.runtime.kv import ATTN_NAME, dak_attention
from dak.runtime_env import env_flag, interpreting


def opt_layers_enabled() -> bool:
    """The fused OPT layer is installed unless $DAK_FUSED_OPT=0."""
    return env_flag("DAK_FUSED_OPT", True)


def fusable_opt_layer(mod) -> bool:
    """An OPT decoder layer with its LayerNorms before attention and MLP and a ReLU MLP."""
    norms = [getattr(mod, n, None) for n in ("self_attn_layer_norm", "final_layer_norm")]
    return (type(mod).__name__ == "OPTDecoderLayer" and getattr(mod, "do_layer_norm_before", False)
            and all(isinstance(n, nn.LayerNorm) and n.weight is not None and n.bias is not None for n in norms)
            and isinstance(getattr(mod, "activation_fn", None), nn.ReLU)
            and all(hasattr(mod, p) for p in ("fc1", "fc2", "self_attn")))


def _gemv_weight(lin, x2: torch.Tensor) -> torch.Tensor | None:
    """The HBM weight of an all-HBM SplitLinear whose input goes to dak's GEMV, else None."""
    w = whole_hbm_weight(lin, x2)
    return w if w is not None and gemv_applies(x2) else None


def _fc_relu(self, x2: torch.Tensor) -> torch.Tensor:
    w = _gemv_weight(self.fc1, x2)
    if w is None:
        return self.activation_fn(self.fc1(x2))
    return hbm_gemv(x2, w, self.fc1.bias, config_for(x2, w, self.fc1.bias, self.fc1.tune), relu=True)


def _fc_residual(self, x2: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
    w = _gemv_weight(self.fc2, x2)
    if w is None or residual.stride(1) != 1:
        return residual + self.fc2(x2)
    return hbm_gemv(x2, w, self.fc2.bias, config_for(x2, w, self.fc2.bias, self.fc2.tune), residual=residual)


def opt_layer_forward(self, hidden_states, attention_mask=None, use_cache=False, **kwargs):
    """HF's OPTDecoderLayer.forward (eval, LayerNorm before attention) with the fusions of the
    module doc. Positional extras, training, other devices or dtypes: HF's own forward."""
    ln1, ln2 = self.self_attn_layer_norm, self.final_layer_norm
    if self.training or not (hidden_states.is_cuda or interpreting()) or hidden_states.dtype != ln2.weight.dtype:
        return type(self).forward(self, hidden_states, attention_mask=attention_mask, use_cache=use_cache, **kwargs)
    h = _attention(self.self_attn, ln1(hidden_states), attention_mask, kwargs)
    residual, h = add_layer_norm(h, hidden_states, ln2.weight, ln2.bias, ln2.eps)
    shape = residual.shape
    r2, h2 = residual.reshape(-1, shape[-1]), h.reshape(-1, shape[-1])
    return _fc_residual(self, _fc_relu(self, h2), r2).view(shape)


def opt_qscale_enabled() -> bool:
    """q's scaling as the fused q/k/v GEMV's epilogue unless $DAK_OPT_QSCALE=0 (see the module doc)."""
    return env_flag("DAK_OPT_QSCALE", True)


def _attention(attn, h: torch.Tensor, attention_mask, kwargs: dict) -> torch.Tensor:
    """HF's OPTAttention output for `h`, with q's scaling in the q/k/v GEMV's epilogue where
    opt_qscale_enabled() and it applies (decode, the "dak" attention, no HF cache); else HF's."""
    group = group_of(attn, ("q_proj", "k_proj", "v_proj")) if opt_qscale_enabled() else None
    h2 = h.reshape(-1, h.shape[-1])
    if (group is None or getattr(attn.config, "_attn_implementation", None) != ATTN_NAME or h.dim() != 3
            or kwargs.get("cache") is not None or kwargs.get("past_key_values") is not None
            or not gemv_applies(h2) or h2.dtype != group.weight.dtype or h2.shape[1] != group.weight.shape[1]):
        return attn(hidden_states=h, attention_mask=attention_mask, **kwargs)[0]
    b, t, _ = h.shape
    rows_q = group.bounds[0][1]
    y = hbm_gemv(h2, group.weight, group.bias, config_for(h2, group.weight, group.bias, group.tune),
                 scale_rows=(rows_q, attn.scaling))
    q, k, v = (y[:, lo:hi].reshape(b, t, -1, attn.head_dim).transpose(1, 2) for lo, hi in group.bounds)
    extra = {n: a for n, a in kwargs.items() if n not in ("cache", "past_key_values", "output_attentions")}
    out, _ = dak_attention(attn, q, k, v, attention_mask, scaling=1.0, dropout=0.0, **extra)
    return attn.out_proj(out.reshape(b, t, -1).contiguous())
