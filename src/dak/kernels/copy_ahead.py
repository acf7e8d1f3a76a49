"""Copy-ahead: keep the host link busy across operators of a decode step.

On a PCIe host link most offloaded operators are link-bound, so a decode step can be no faster
than (host bytes per step) / B_h, and only if the link never idles. When each operator starts
its copy-engine copy only when it is itself called, the link idles while attention, norms and
the HBM-only operators run, and every copy pays the copy engine's start-up. Copy-ahead chains
the copy-engine operators of one decode step in call order: when operator i runs, the copy of
operator i+1's host rows is already queued behind its own on the copy stream, into the other
of two staging slots. A slot is rewritten only after the GEMMs that read it are done (an event
recorded on the compute stream), so two slots are enough and HBM holds at most two operators'
host rows. Every host byte still crosses the link once, and all ordering is by CUDA events, so
the step captures into one CUDA graph. Experiments: $DAK_COPY_STREAMS=2 alternates two copy
streams, so the next operator's copy starts while this one's is in flight; $DAK_COPY_SLOTS=k
(default 2) uses k slots, so operator i's copy waits only for operator i - k's GEMMs (the
prefetch baseline, one layer ahead in two layer-sized buffers, has a whole layer of slack).

    with record_chain() as order:   # an eager warm-up step: which operators use the copy engine
        step()
    link_chain(order, n_tokens)     # each operator learns its successor and slot; slots sized
    with copy_ahead_step(device):   # every captured or eager decode step
        step()
"""

from __future__ import annotations

import contextlib
import contextvars
from dataclasses import dataclass

import torch

from dak.kernels.buffers import shared_buffer
from dak.kernels.streams import side_stream
from dak.kernels.copy_groups import make_group, plan_groups
from dak.shares import copy_group_bytes, copy_slot_count, copy_stream_count

_STEP: contextvars.ContextVar = contextvars.ContextVar("dak_copy_ahead_step", default=None)
_RECORD: contextvars.ContextVar = contextvars.ContextVar("dak_copy_ahead_record", default=None)


@dataclass
class AheadSpec:
    """One chained operator: its launch config and CE plan for `n_tokens`, its slot, its successor."""
    n_tokens: int
    cfg: object
    plan: object
    slot: int
    next: object = None  # the SplitLinear after it in the step, or None
    group: object = None  # dak.kernels.copy_groups.Group copied with it in one memcpy, or None


def recording(module) -> None:
    """Called by SplitLinear for each copy-engine launch; notes the call order while recording."""
    order = _RECORD.get()
    if order is not None and all(m is not module for m in order):
        order.append(module)


@contextlib.contextmanager
def record_chain():
    order: list = []
    token = _RECORD.set(order)
    try:
        yield order
    finally:
        _RECORD.reset(token)


def copy_streams(device: torch.device) -> list:
    """The streams the chain copies on: one ("copy"), or with $DAK_COPY_STREAMS=2 one per slot,
    so that two operators' copies are in flight at once and one copy's start-up overlaps the
    other's transfer (every copy pays ~20 us of it: HARDWARE.md, 8 MiB at 48 GB/s vs 55)."""
    return [side_stream(device, "copy")] + ([side_stream(device, "copy-b")] if copy_stream_count() == 2 else [])


def copy_stream(device: torch.device, slot_index: int) -> torch.cuda.Stream:
    streams = copy_streams(device)
    return streams[slot_index % len(streams)]


def slot(device: torch.device, dtype: torch.dtype, index: int, numel: int) -> torch.Tensor:
    return shared_buffer(f"copy-ahead slot {index}", device, dtype, numel)


def link_chain(order: list, n_tokens: int) -> int:
    """Chain `order` (SplitLinears, in call order) for decode steps of `n_tokens` tokens and size
    the staging slots (two, or $DAK_COPY_SLOTS). Operators not in `order` are unchained.
    Returns the chain length."""
    from dak.kernels.split_linear_ce import ce_plan
    from dak.kernels.tuning import token_bucket
    chain, slots = [], copy_slot_count()
    for mod in order:
        mod._ahead = None
        cfg = mod._configs.get(token_bucket(n_tokens))
        if cfg is None or cfg.host_kernel == "cuda_multicast":
            continue
        plan = ce_plan(cfg, mod.host_rows, mod.out_features - mod.host_rows, mod._sms)
        if plan.m_ce:
            chain.append((mod, cfg, plan))
    # copy units (a group, or one operator) take slots in turn: neighbouring units never share one
    units = []
    for idx in plan_groups(chain, copy_group_bytes()):
        group = make_group([chain[i][0] for i in idx])
        units += [(idx, group)] if group is not None else [([i], None) for i in idx]
    for u, (idx, group) in enumerate(units):
        for i in idx:
            mod, cfg, plan = chain[i]
            mod._ahead = AheadSpec(n_tokens, cfg, plan, u % slots, chain[i + 1][0] if i + 1 < len(chain) else None,
                                   group)
            slot(mod.w_hbm.device, mod.dtype, u % slots, group.numel if group else plan.m_ce * mod.w_host.stride(0))
    return len(chain)


def unlink(modules) -> None:
    for mod in modules:
        if getattr(mod, "_ahead", None) is not None:
            mod._ahead = None


class Step:
    """The copies issued so far in one decode step, and when each slot was last released."""

    def __init__(self, device: torch.device):
        self.device = device
        self.issued: dict[int, tuple[list, torch.Tensor]] = {}
        self.freed: dict[int, torch.cuda.Event] = {}
        self.started = False

    def issue(self, mod) -> None:
        """Queue the copy of `mod`'s copy-engine rows into its slot (once per step)."""
        from dak.kernels.split_linear_ce import issue_copies, staging_rows_view
        if id(mod) in self.issued:
            return
        spec = mod._ahead
        if not self.started:
            for cs in copy_streams(self.device):
                cs.wait_stream(torch.cuda.current_stream(self.device))
            self.started = True
        copy_s = copy_stream(self.device, spec.slot)
        if spec.slot in self.freed:
            copy_s.wait_event(self.freed[spec.slot])
        if spec.group is not None:
            self._issue_group(spec, copy_s)
            return
        buf = slot(self.device, mod.dtype, spec.slot, spec.plan.m_ce * mod.w_host.stride(0))
        stage = staging_rows_view(buf, spec.plan.m_ce, mod.w_host)
        self.issued[id(mod)] = (issue_copies(mod.w_host, spec.plan, stage, copy_s), stage)

    def _issue_group(self, spec, copy_s) -> None:
        """One memcpy of the whole group into its slot; every member gets its rows' view."""
        from dak.kernels.split_linear_ce import staging_rows_view
        group = spec.group
        buf = slot(self.device, group.src.dtype, spec.slot, group.numel)
        with torch.cuda.stream(copy_s):
            buf[:group.numel].copy_(group.src, non_blocking=True)
            landed = torch.cuda.Event()
            landed.record(copy_s)
        for m, off in zip(group.members, group.offsets):
            stage = staging_rows_view(buf[off:], m.host_rows, m.w_host)
            self.issued[id(m)] = ([landed] * len(m._ahead.plan.chunks), stage)

    def release(self, mod, stream: torch.cuda.Stream) -> None:
        """`mod`'s GEMMs on `stream` are the last readers of its slot so far in this step. A second
        call of `mod` in the same step copies again (its slot may hold another operator's rows)."""
        ev = torch.cuda.Event()
        ev.record(stream)
        self.freed[mod._ahead.slot] = ev
        self.issued.pop(id(mod), None)

    def close(self) -> None:
        if self.started:
            for cs in copy_streams(self.device):
                torch.cuda.current_stream(self.device).wait_stream(cs)


def current_step(mod, n_tokens: int, cfg) -> Step | None:
    """The active step if `mod` is chained for this launch (same token count and config)."""
    step = _STEP.get()
    spec = getattr(mod, "_ahead", None)
    if step is None or spec is None or spec.n_tokens != n_tokens or spec.cfg is not cfg:
        return None
    return step


@contextlib.contextmanager
def active(var: contextvars.ContextVar, step):
    """Make `step` (anything with close()) the one `var` holds for the block; close it after."""
    token = var.set(step)
    try:
        yield step
    finally:
        var.reset(token)
        step.close()


@contextlib.contextmanager
def copy_ahead_step(device: torch.device):
    """Run one decode step with chained copies (a no-op off the GPU)."""
    if device.type != "cuda":
        yield None
        return
    with active(_STEP, Step(device)) as step:
        yield step
