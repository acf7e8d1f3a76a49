"""HBM and host memory an offloaded model needs beyond its plan, and the checks before building.

The plan counts operator bytes and its minimum HBM set; the copy-engine paths also stage host
rows (linears) and host K/V (attention) in HBM. `check_memory` refuses, before anything is
pinned or allocated, a plan this machine cannot hold; `within_budget` re-plans so that the
staging fits inside the budget too (`dak.offload(strict_budget=True)`).
"""

from __future__ import annotations

import torch

from dak.defaults import DEFAULT_KV_AHEAD
from dak.models.spec import ModelSpec
from dak.units import format_bytes


def staging_beyond(pl, spec: ModelSpec, kv_ahead: bool = DEFAULT_KV_AHEAD) -> int:
    """HBM that dak.offload stages for copy-engine linears and attention beyond the plan's bytes."""
    return _linear_staging_beyond(pl) + kv_staging_bytes_for(pl, spec, kv_ahead)


def _linear_staging_beyond(pl) -> int:
    """The linears' staging the plan does not hold already (a streamed plan holds it in hbm_bytes)."""
    return max(staging_bytes_for(pl) - pl.staging_bytes, 0)


def within_budget(pl, spec: ModelSpec, replan, kv_ahead: bool = DEFAULT_KV_AHEAD, rounds: int = 6):
    """Re-plan (`replan(budget) -> Placement`) with the budget lowered by the staging until plan +
    staging fit the original budget (more on the host can grow the staging: a few rounds)."""
    cap = pl.hbm_budget
    for _ in range(rounds):
        extra = staging_beyond(pl, spec, kv_ahead)
        if not pl.feasible or pl.hbm_bytes + extra <= cap:
            return pl
        pl = replan(cap - extra)
    raise ValueError(f"the plan and its copy-engine staging did not fit the HBM budget {format_bytes(cap)} in "
                     f"{rounds} rounds; lower the budget a little or drop strict_budget")


def host_available() -> int | None:
    """MemAvailable of /proc/meminfo in bytes (None where there is none)."""
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def _kv_per_layer(placement, spec: ModelSpec) -> tuple[int, list[int]]:
    """(bytes of one request's K/V in one layer at max_len, host requests per layer)."""
    w = placement.workload
    per_request = spec.kv_elements_per_token() * (w.prompt_len + w.gen_len) * w.dtype_bytes
    return per_request, [op.host_requests or 0 for op in placement.ops if op.kind == "attention"]


def kv_host_bytes_for(placement, spec: ModelSpec) -> int:
    """Pinned host memory of the K/V the plan puts on the host (not in its host_bytes)."""
    per_request, host_req = _kv_per_layer(placement, spec)
    return per_request * sum(host_req)


def kv_staging_bytes_for(placement, spec: ModelSpec, kv_ahead: bool = DEFAULT_KV_AHEAD) -> int:
    """HBM the attention's copy-engine path stages, which the plan does not count: one layer's
    host K/V for each distinct host-request count (DakKV), and with kv_ahead two more slots of
    the largest (or $DAK_KV_SLOTS)."""
    from dak.copy_shares import kv_slot_count
    per_request, host_req = _kv_per_layer(placement, spec)
    return per_request * (sum(set(host_req)) + (kv_slot_count() * max(host_req, default=0) if kv_ahead else 0))


def staging_bytes_for(placement) -> int:
    """HBM the copy-engine paths of `placement`'s linears will stage, which the plan does not
    count: the copy-ahead slots (dak.copy_shares.copy_slot_count) of the largest host part that decode
    copies (untuned configs use the copy engine above `ce_min_share()`; with $DAK_COPY_GROUP_MIB
    a slot holds up to that much), plus the largest host part, which prefill (many tokens)
    stages whole."""
    from dak.planner.stream import decode_slots
    from dak.copy_shares import copy_group_bytes
    from dak.shares import ce_min_share
    parts = [op for op in placement.ops if op.kind not in ("attention", "embed_tokens", "embed_positions")
             and op.host_bytes]
    share = ce_min_share()
    decode = max((op.host_bytes for op in parts if op.ratio > share), default=0)
    decode = max(decode, min(copy_group_bytes(), sum(op.host_bytes for op in parts if op.ratio > share)))
    return decode_slots(placement.workload) * decode + max((op.host_bytes for op in parts), default=0)


def check_memory(placement, kv_host_bytes: int, device: torch.device, kv_staging_bytes: int = 0) -> None:
    """Refuse, before anything is pinned or allocated, a plan this machine cannot hold.
    kv_staging_bytes: HBM the attention's copy-engine path stages (not in the plan either)."""
    need_host = placement.host_bytes + kv_host_bytes
    avail = host_available()
    if avail is not None and need_host > avail:
        raise ValueError(f"the plan pins {format_bytes(need_host)} of host memory but only "
                         f"{format_bytes(avail)} is available; raise hbm_budget or lower batch/max_len")
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        staging = _linear_staging_beyond(placement) + kv_staging_bytes
        if placement.hbm_bytes + staging > free:
            raise ValueError(f"the plan keeps {format_bytes(placement.hbm_bytes)} in HBM, and copy-engine "
                             f"staging needs {format_bytes(staging)} more, but only {format_bytes(free)} is "
                             f"free on {torch.cuda.get_device_name(device)}; lower hbm_budget")
