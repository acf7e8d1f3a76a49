"""Copy-ahead: keep the host link busy across operators of a decode step.

On a PCIe host link most offloaded operators are link-bound, so a decode step can be no faster
than (host bytes per step) / B_h, and only if the link never idles. When each operator starts
its copy-engine copy only when it is itself called, the link idles while attention, norms and
the HBM-only operators run, and every copy pays the copy engine's start-up. Copy-ahead chains
the copy-engine operators of one decode step in call order: when operator i runs, the copy of
operator i+1's host rows is already queued behind its own on the copy stream, into the other
of two staging slots. A slot is rewritten only after the GEMMs that read it are done (an event
recorded on the compute stream). Two slots, so HBM holds two operators' host rows; four above
64 tokens, where a GEMM behind attention held the third copy back (dak.copy_shares.copy_slot_count).
Every host byte still crosses the link once, and all ordering is by CUDA events, so the step
captures into one CUDA graph. Experiments: $DAK_COPY_STREAMS=2 alternates two copy
streams, so the next operator's copy starts while this one's is in flight; $DAK_COPY_SLOTS=k
uses k slots, so operator i's copy waits only for operator i - k's GEMMs (the
prefetch baseline, one layer ahead in two layer-sized buffers, has a whole layer of slack).
$DAK_COPY_WRAP=plan (the default: where the plan runs one GEMV once staged) or =1 wraps the chain around the
step: the step's last copy refills the first operator's slot for the next step, so that copy
overlaps this step's tail (the last operators, the LM head) instead of stalling the next step's
start; the chain then keeps its own slots (no other chain may overwrite the first one between
steps) and `prime` refills it after anything that broke the cycle (an interrupted step).

    with record_chain() as order:   # an eager warm-up step: which operators use the copy engine
        step()
    link_chain(order, n_tokens)     # each operator learns its successor and slot; slots sized
    with copy_ahead_step(device):   # every captured or eager decode step
        step()
"""

from __future__ import annotations

import contextlib
import contextvars
from dataclasses import dataclass, field, replace

import torch

from dak.kernels.buffers import shared_buffer
from dak.kernels.scoped import active
from dak.kernels.streams import side_stream
from dak.kernels.copy_groups import make_group, plan_groups
from dak.copy_shares import chain_one_chunk, copy_group_bytes, copy_slot_count, copy_stream_count, copy_wrap_mode

_STEP: contextvars.ContextVar = contextvars.ContextVar("dak_copy_ahead_step", default=None)
_RECORD: contextvars.ContextVar = contextvars.ContextVar("dak_copy_ahead_record", default=None)


@dataclass(eq=False)
class Chain:
    """One linked chain. With `wrap` or `own`: its own slots (index -> flat buffer); with `wrap`
    its first unit's members (`head`) and whether the first unit's slot holds their rows (`primed`)."""
    wrap: bool
    slots: dict = field(default_factory=dict)
    own: bool = False
    head: tuple = ()
    primed: bool = False


@dataclass
class AheadSpec:
    """One chained operator: its launch config and CE plan for `n_tokens`, its slot, its successor."""
    n_tokens: int
    cfg: object
    plan: object
    slot: int
    next: object = None  # the SplitLinear after it in the step, or None
    group: object = None  # dak.kernels.copy_groups.Group copied with it in one memcpy, or None
    chain: Chain = None


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


def slot(device: torch.device, dtype: torch.dtype, index: int, numel: int, chain: Chain | None = None) -> torch.Tensor:
    """Staging slot `index`: shared by every chain, or with `chain.wrap` / `chain.own` that
    chain's own (sized by link_chain, outside capture)."""
    if chain is None or not (chain.wrap or chain.own):
        return shared_buffer(f"copy-ahead slot {index}", device, dtype, numel)
    buf = chain.slots.get(index)
    if buf is None or buf.numel() < numel:
        if device.type == "cuda" and torch.cuda.is_current_stream_capturing():
            raise RuntimeError("a wrapped or own-slot copy-ahead chain's slots must be sized before capture")
        buf = chain.slots[index] = torch.empty(max(numel, 1), dtype=dtype, device=device)
    return buf


def link_chain(order: list, n_tokens: int, own_slots: bool = False) -> int:
    """Chain `order` (SplitLinears, in call order) for decode steps of `n_tokens` tokens and size
    the staging slots (dak.copy_shares.copy_slot_count). Operators not in `order` are unchained.
    own_slots: the chain gets slots of its own (never wrapped), so that linking it cannot grow
    the shared slots that captured graphs hold (a captured prefill). Wrapped ($DAK_COPY_WRAP=1, or
    'plan', the default, where every chained operator runs one GEMV once staged: SplitLinear.one_gemv, the
    plan's flag). Returns the chain length."""
    from dak.kernels.split_linear_ce import ce_plan
    from dak.kernels.tuning import token_bucket
    decode_tokens = None if own_slots else n_tokens  # None: a prefill's own chain (two slots, chunks kept)
    chain, slots = [], copy_slot_count(decode_tokens)
    for mod in order:
        mod._ahead = None
        cfg = mod._configs.get(token_bucket(n_tokens))
        if cfg is None or cfg.host_kernel == "cuda_multicast":
            continue
        plan = ce_plan(cfg, mod.host_rows, mod.out_features - mod.host_rows, mod._sms)
        if plan.m_ce:
            chain.append((mod, cfg, plan))
    if chain_one_chunk(decode_tokens):  # large N: one copy per operator but the last
        for i, (mod, cfg, plan) in enumerate(chain[:-1]):
            if cfg.hbm_cublas and cfg.ce_chunks > 1:
                cfg = mod._configs[token_bucket(n_tokens)] = replace(cfg, ce_chunks=1, ce_taper=1.0)
                chain[i] = (mod, cfg, ce_plan(cfg, mod.host_rows, mod.out_features - mod.host_rows, mod._sms))
    wrap = copy_wrap_mode()
    if wrap is None:
        wrap = bool(chain) and all(mod.one_gemv for mod, _, _ in chain)
    links = Chain(wrap and not own_slots, own=own_slots)
    # copy units (a group, or one operator) take slots in turn: neighbouring units never share one
    units = []
    for idx in plan_groups(chain, copy_group_bytes()):
        group = make_group([chain[i][0] for i in idx])
        units += [(idx, group)] if group is not None else [([i], None) for i in idx]
    for u, (idx, group) in enumerate(units):
        for i in idx:
            mod, cfg, plan = chain[i]
            mod._ahead = AheadSpec(n_tokens, cfg, plan, u % slots, chain[i + 1][0] if i + 1 < len(chain) else None,
                                   group, links)
            slot(mod.w_hbm.device, mod.dtype, u % slots, group.numel if group else plan.m_ce * mod.w_host.stride(0),
                 links)
    links.head = tuple(chain[i][0] for i in units[0][0]) if units and links.wrap else ()
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
        self.wrapped: list[Chain] = []  # wrapped chains whose first unit ran in this step

    def issue(self, mod) -> None:
        """Queue the copy of `mod`'s copy-engine rows into its slot (once per step); a wrapped
        chain's first unit finds its rows already there (queued at the previous step's end)."""
        if id(mod) in self.issued:
            return
        spec = mod._ahead
        if not self.started:
            for cs in copy_streams(self.device):
                cs.wait_stream(torch.cuda.current_stream(self.device))
            self.started = True
        chain = spec.chain
        if chain.wrap and mod in chain.head and chain not in self.wrapped:
            self.wrapped.append(chain)
            if chain.primed:
                ready = torch.cuda.Event()
                ready.record(torch.cuda.current_stream(self.device))
                for m, stage in _stages(mod, self.device):
                    self.issued[id(m)] = ([ready] * len(m._ahead.plan.chunks), stage)
                return
        self.issued.update(self._copy(mod, copy_stream(self.device, spec.slot)))

    def _copy(self, mod, copy_s) -> dict:
        """One memcpy of `mod`'s unit (its group, or its own chunks) into its slot once the
        slot's last readers are done; returns {id(member): (landed events, its rows' view)}."""
        from dak.kernels.split_linear_ce import issue_copies
        spec = mod._ahead
        if spec.slot in self.freed:
            copy_s.wait_event(self.freed[spec.slot])
        stages = _stages(mod, self.device)
        if spec.group is None:
            (m, stage), = stages
            return {id(m): (issue_copies(m.w_host, spec.plan, stage, copy_s), stage)}
        group = spec.group
        with torch.cuda.stream(copy_s):
            _unit_slot(mod, self.device)[:group.numel].copy_(group.src, non_blocking=True)
            landed = torch.cuda.Event()
            landed.record(copy_s)
        return {id(m): ([landed] * len(m._ahead.plan.chunks), stage) for m, stage in stages}

    def release(self, mod, stream: torch.cuda.Stream) -> None:
        """`mod`'s GEMMs on `stream` are the last readers of its slot so far in this step. A second
        call of `mod` in the same step copies again (its slot may hold another operator's rows)."""
        ev = torch.cuda.Event()
        ev.record(stream)
        self.freed[mod._ahead.slot] = ev
        self.issued.pop(id(mod), None)

    def abort(self) -> None:
        """The step did not finish: its wrapped chains' first slots hold no known rows."""
        for chain in self.wrapped:
            chain.primed = False
        self.wrapped = []

    def close(self) -> None:
        if not self.started:
            return
        for chain in self.wrapped:  # refill the first unit's slot for the next step
            self._copy(chain.head[0], copy_stream(self.device, chain.head[0]._ahead.slot))
            chain.primed = True
        for cs in copy_streams(self.device):
            torch.cuda.current_stream(self.device).wait_stream(cs)


def _unit_slot(mod, device) -> torch.Tensor:
    """The slot buffer of `mod`'s unit (its group's, or its own rows')."""
    spec = mod._ahead
    if spec.group is not None:
        return slot(device, spec.group.src.dtype, spec.slot, spec.group.numel, spec.chain)
    return slot(device, mod.dtype, spec.slot, spec.plan.m_ce * mod.w_host.stride(0), spec.chain)


def _stages(mod, device) -> list:
    """(member, its staged rows' view in the slot) for each member of `mod`'s unit."""
    from dak.kernels.split_linear_ce import staging_rows_view
    spec, buf = mod._ahead, _unit_slot(mod, device)
    if spec.group is None:
        return [(mod, staging_rows_view(buf, spec.plan.m_ce, mod.w_host))]
    return [(m, staging_rows_view(buf[off:], m.host_rows, m.w_host))
            for m, off in zip(spec.group.members, spec.group.offsets)]


def chains_of(modules) -> list:
    """The wrapped chains `modules` are linked into (each once)."""
    out = []
    for mod in modules:
        spec = getattr(mod, "_ahead", None)
        if spec is not None and spec.chain.wrap and all(c is not spec.chain for c in out):
            out.append(spec.chain)
    return out


def prime(chains) -> int:
    """Fill the first unit's slot of each wrapped chain that is not primed (eager, queued on the
    current stream; not inside capture). Returns the number of chains filled."""
    n = 0
    for chain in chains:
        if chain.primed:
            continue
        head = chain.head[0]
        step = Step(head.w_hbm.device)
        step._copy(head, torch.cuda.current_stream(step.device))
        chain.primed = True
        n += 1
    return n


def current_step(mod, n_tokens: int, cfg) -> Step | None:
    """The active step if `mod` is chained for this launch (same token count and config)."""
    step = _STEP.get()
    spec = getattr(mod, "_ahead", None)
    if step is None or spec is None or spec.n_tokens != n_tokens or spec.cfg is not cfg:
        return None
    return step


@contextlib.contextmanager
def copy_ahead_step(device: torch.device):
    """Run one decode step with chained copies (a no-op off the GPU)."""
    if device.type != "cuda":
        yield None
        return
    with active(_STEP, Step(device)) as step:
        yield step
