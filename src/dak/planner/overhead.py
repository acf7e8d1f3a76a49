"""Decode-step time the roofline leaves out, as a profile states it (added to predictions).

* ``step_overhead``: the small kernels between operators, layers x ``layer_overhead_s``
  (measured with q/k/v and gate/up fused; ``fused_layer_overhead_s`` for the Llama-family layers
  dak fuses, see ``layer_overhead``; Qwen3's q and k norms two launches a layer where they do not
  ride in the KV append's, ``qk_norm_launches``), plus ``unfused_op_overhead_s`` per extra launch where a
  fusion is lost (``fusion_overhead``): a projection group that is not fused (fusion off, or a
  member holds host rows; dak.nn.fused_proj fuses a group only when every member is all-HBM),
  and a GEMV epilogue whose operator is split (SiLU * up, OPT's ReLU and residual add).
* ``split_overhead``: dak's split operators beyond their roofline: per split linear read in place
  (``inplace_op_overhead_s``) or through the copy engine (``copy_op_overhead_s``, host share
  above ``dak.shares.ce_min_share()``), and ``attention_host_excess`` x the host-KV link time
  of split attention. Operators with a measured curve carry their own excess and add nothing,
  except an attention whose host K/V the engine copies a layer ahead (``kv_ahead``): its curve
  then prices only its HBM reads (dak.planner.stream.chain_time), so the excess applies.
  A copy-engine linear's copy also pays ``copy_op_overhead_s`` of start-up on the link side of
  the copy-ahead chain model (``dak.planner.stream``).
"""

from __future__ import annotations

from ..hardware import HardwareProfile
from ..models.ops import Workload
from ..models.spec import ModelSpec
from ..shares import (ATTENTION_CE_MIN_BYTES, ce_min_share, env_flag, fused_layer_enabled, gemv_enabled,
                      gemv_silu_enabled, rotary_kv_enabled)
from .curves import PROJECTION_GROUPS, curve_for  # noqa: F401 -- PROJECTION_GROUPS re-exported


def fuses_layers(spec: ModelSpec) -> bool:
    """Whether dak runs `spec`'s decoder layers fused: gated-MLP (Llama-family) layers while
    $DAK_FUSED_LAYER is on (dak.runtime.fused)."""
    return spec.gated_mlp and fused_layer_enabled()


def layer_overhead(spec: ModelSpec, profile: HardwareProfile) -> float:
    """Seconds per decoder layer outside the planned operators: the profile's
    fused_layer_overhead_s for layers dak fuses (`fuses_layers`), where the profile states it;
    else layer_overhead_s."""
    if profile.fused_layer_overhead_s and fuses_layers(spec):
        return profile.fused_layer_overhead_s
    return profile.layer_overhead_s


def step_overhead(spec: ModelSpec, workload: Workload, profile: HardwareProfile) -> float:
    """Decode-step time outside the planned operators: layers x layer_overhead(spec, profile), and
    for a model that norms every head's q and k (Qwen3, `spec.qk_norm`) `qk_norm_launches` more a layer."""
    if workload.phase != "decode":
        return 0.0
    return spec.num_layers * (layer_overhead(spec, profile) + qk_norm_launches(spec) * profile.unfused_op_overhead_s)


def qk_norm_launches(spec: ModelSpec) -> int:
    """Launches a decode layer spends on Qwen3's q and k norms beyond the other families' layers, each
    priced at unfused_op_overhead_s: none where they ride in the rotary + KV append launch
    ($DAK_ROTARY_KV, the default), else two."""
    return 2 if spec.qk_norm and not rotary_kv_enabled() else 0


# the member set an all-HBM GEMV epilogue needs whole in HBM -> a kind its layer must have (its family), if any:
# SiLU * up; OPT's ReLU; OPT's residual add; OPT's q scaling (OPT layers: those with an fc1)
EPILOGUES = {("gate_proj", "up_proj"): None, ("fc1",): None, ("fc2",): None, ("q_proj", "k_proj", "v_proj"): "fc1"}


def epilogues_on() -> dict:
    """Which all-HBM GEMV epilogues the runtime uses (dak.kernels.hbm_gemv, dak.runtime.fused_opt),
    by the member set that must be whole in HBM for it (the keys of EPILOGUES); torch-free."""
    gemv = gemv_enabled()
    opt = gemv and env_flag("DAK_FUSED_OPT", True)
    silu, relu, res, qscale = EPILOGUES
    silu_on = gemv_silu_enabled() and fused_layer_enabled()  # the epilogue runs in the fused layer's forward
    return {silu: silu_on, relu: opt, res: opt, qscale: opt and env_flag("DAK_OPT_QSCALE", True)}


def layer_kinds(ops) -> dict:
    """{layer: {kind: index into ops}}: each layer's operators by kind (layer None: the rest)."""
    by_layer: dict = {}
    for i, op in enumerate(ops):
        by_layer.setdefault(op.layer, {})[op.kind] = i
    return by_layer


def fused_projection_ops(ops, host_bytes) -> set:
    """Indices of the operators the runtime multiplies as one fused product: every member of a
    layer's q/k/v or gate/up set (two or more present) when none of them holds host rows
    (dak.nn.fused_proj, the default)."""
    out = set()
    for idx in layer_kinds(ops).values():
        for group in PROJECTION_GROUPS:
            members = [idx[k] for k in group if k in idx]
            if len(members) >= 2 and not any(host_bytes[i] for i in members):
                out.update(members)
    return out


def roofline_kv_ahead() -> bool:
    """$DAK_ROOFLINE_KV_AHEAD (on by default since the thirty-fourth session; 0 turns it off): an
    attention without a calibrated curve whose host K/V the engine copies a layer ahead is priced
    as copied too (its host K/V on the link side, its HBM read of the staged K/V on the compute
    side), not as read in place (the roofline's host part on the compute side; the preset's
    attention_host_excess was fitted that way, before KV copy-ahead existed). H97/H97b (H200,
    batch 8, one A/B each) on the plans it changes: Llama-2-7B at 5% 8.83 -> 8.48 ms, OPT-6.7B at 5%
    12.57 -> 12.69 and at 20% 51.15 -> 49.67, OPT-30B at 5% 55.64 -> 55.23 and at 10% 111.16 -> 110.16."""
    return env_flag("DAK_ROOFLINE_KV_AHEAD", True)


def copied_ahead(op, host: int, profile: HardwareProfile, kv_ahead: bool) -> bool:
    """Whether `op` is an attention whose host K/V the engine copies a layer ahead (`kv_ahead`)
    and is priced so: a calibrated one (its curve timed the kernel reading host K/V in place,
    which then does not happen), or any under roofline_kv_ahead(); dak.planner.stream.chain_time
    prices it, split_overhead adds the profile's excess. Host K/V under ATTENTION_CE_MIN_BYTES a
    layer are read in place by the runtime's untuned config, and priced so."""
    return (kv_ahead and host >= ATTENTION_CE_MIN_BYTES and op.kind == "attention"
            and (curve_for(op, profile) is not None or roofline_kv_ahead()))


def fusion_overhead(ops, host_bytes, workload: Workload, profile: HardwareProfile, fused: bool) -> float:
    """Extra launches, each unfused_op_overhead_s, where a fusion of the all-HBM step is lost:
    (members - 1) per projection group of a layer that runs unfused (`fused` off or a member has
    host rows), and one per GEMV epilogue whose operator is split (SiLU * up when gate/up are not
    one all-HBM product; OPT's ReLU after a split fc1 and residual add after a split fc2 run as
    launches of their own: seventeenth session, OPT-6.7B at 1%, 141 elementwise launches a step
    against the fused layer's few; OPT's q scaling where its q/k/v are not one all-HBM product)."""
    if workload.phase != "decode" or not profile.unfused_op_overhead_s:
        return 0.0
    on = epilogues_on()
    extra = 0
    for idx in layer_kinds(ops).values():
        kinds = {kind: host_bytes[i] for kind, i in idx.items()}
        for group in PROJECTION_GROUPS:
            members = [kinds[k] for k in group if k in kinds]
            if len(members) >= 2 and (not fused or any(members)):
                extra += len(members) - 1
        for need, used in on.items():
            members = [kinds[k] for k in need if k in kinds]
            family = EPILOGUES[need] is None or EPILOGUES[need] in kinds
            if used and family and len(members) == len(need) and (any(members) or (len(need) > 1 and not fused)):
                extra += 1
    return extra * profile.unfused_op_overhead_s


def split_overhead(ops, host_bytes, workload: Workload, profile: HardwareProfile, many: bool = False,
                   kv_ahead: bool = False) -> float:
    """Decode-step time of the split operators beyond their roofline; `host_bytes[i]` is the
    host part of `ops[i]`; `many`: more tokens than a decode program covers, so every split
    linear goes through the copy engine."""
    if workload.phase != "decode":
        return 0.0
    share, total = ce_min_share(), 0.0
    for op, host in zip(ops, host_bytes):
        if not host or op.kind.startswith("embed"):
            continue
        if curve_for(op, profile) is not None and not copied_ahead(op, host, profile, kv_ahead):
            continue
        ratio = host / op.bytes
        if op.kind == "attention":
            total += profile.attention_host_excess * op.traffic * ratio / profile.split_host_bandwidth
        elif many or ratio > share:
            total += profile.copy_op_overhead_s
        else:
            total += profile.inplace_op_overhead_s
    return total
