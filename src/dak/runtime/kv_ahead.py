"""KV copy-ahead: stage the next layer's host keys and values while this layer runs.

Decode attention's copy-engine path (dak.kernels.split_attention_ce) copies a layer's host
requests' K/V into HBM when that layer's attention is called, and the layer waits for the copy:
the link then carries nothing else, and nothing else runs on the main stream. On the H200 that
made host KV cost about 1.5-1.9x its link time end to end. With copy-ahead, the attention of
layer l queues the copy of the next layer with staged host requests (l') into the other of two
HBM slots, so it runs during the rest of layer l and layer l' up to its attention, beside the
linears' own host reads and HBM work.

The copy of layer l' is queued before layer l' appends this step's token, so the slot lacks
that one position: layer l' writes its new key and value into the slot (at position length-1
of every staged request) after the copy lands and before it attends. A slot is rewritten only
after the attention that read it is done (an event on its compute stream). All ordering is by
CUDA events, so a decode step captures into one CUDA graph. Off the GPU the same steps run in
order (the copy happens at issue time, before the append), which the CPU tests check.

    n = link(kv, q_heads)            # after DakKV.prepare: which layers stage, their slots
    with kv_ahead_step(kv):          # every decode step (eager or captured)
        model(...)                   # dak_attention calls issue() and attention_args()
"""

from __future__ import annotations

import contextlib
import contextvars
from dataclasses import dataclass

import torch

from dak.kernels.buffers import shared_buffer
from dak.kernels.scoped import active
from dak.kernels.split_attention_ce import ce_requests, copy_kv_rows
from dak.kernels.streams import side_stream
from dak.copy_shares import kv_copy_stream_name, kv_pair_copy, kv_slot_count

_STEP: contextvars.ContextVar = contextvars.ContextVar("dak_kv_ahead_step", default=None)


@dataclass(frozen=True)
class Link:
    """One layer with staged host requests: how many, its slot, the next such layer."""
    requests: int
    slot: int
    next: int | None


def link(kv, q_heads: int) -> int:
    """Link the layers of `kv` (a DakKV whose attention is prepared for its batch and `q_heads`)
    whose decode attention stages host requests; size the slots (two, or $DAK_KV_SLOTS). Returns how many."""
    staged = []
    for layer, (cache, _) in enumerate(kv.where):
        cfg = cache.configs.get((kv.batch, q_heads))
        if cfg is None:
            raise ValueError(f"decode attention of layer {layer} is not prepared for batch {kv.batch} and "
                             f"{q_heads} query heads; call kv.prepare({q_heads}, tune) first")
        n = ce_requests(cfg, min(kv.batch, cache.host_requests))
        if n:
            staged.append((layer, n))
    slots = kv_slot_count()
    kv.ahead = {layer: Link(n, i % slots, staged[i + 1][0] if i + 1 < len(staged) else None)
                for i, (layer, n) in enumerate(staged)}
    if staged:
        cache = kv.where[staged[0][0]][0]
        numel = max(n for _, n in staged) * cache.kv_heads * cache.max_len * cache.head_dim
        for slot in range(slots):
            shared_buffer(f"kv-ahead slot {slot}", kv.device, cache.dtype, 2 * numel)
    return len(staged)


def _slot(kv, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The layer's K and V staging views, V right after K in its slot (one copy can fill both)."""
    cache, ln = kv.where[layer][0], kv.ahead[layer]
    shape = (ln.requests, cache.kv_heads, cache.max_len, cache.head_dim)
    numel = shape[0] * shape[1] * shape[2] * shape[3]
    buf = shared_buffer(f"kv-ahead slot {ln.slot}", kv.device, cache.dtype, 2 * numel)
    return buf[:numel].view(shape), buf[numel:2 * numel].view(shape)


class Step:
    """The copies queued so far in one decode step, and when each slot was last released."""

    def __init__(self, kv):
        self.kv = kv
        self.cuda = kv.device.type == "cuda"
        self.issued: dict[int, tuple] = {}
        self.freed: dict[int, torch.cuda.Event] = {}
        self.started = False
        self.stream_name = kv_copy_stream_name()
        self.paired = kv_pair_copy()

    def issue(self, layer: int) -> None:
        """Queue the copy of `layer`'s staged host K/V into its slot (once per step)."""
        if layer in self.issued:
            return
        cache, local = self.kv.where[layer]
        n = self.kv.ahead[layer].requests
        k_host, v_host = cache.parts(local)[:2]
        k_s, v_s = _slot(self.kv, layer)
        if not self.cuda:  # in order: the copy precedes the layer's append, as on the GPU
            copy_kv_rows(k_s, v_s, k_host[:n], v_host[:n], cache.copy_rows, non_blocking=False, paired=self.paired)
            self.issued[layer] = (None, k_s, v_s)
            return
        copy_s = side_stream(self.kv.device, self.stream_name)
        if not self.started:
            copy_s.wait_stream(torch.cuda.current_stream(self.kv.device))
            self.started = True
        slot = self.kv.ahead[layer].slot
        if slot in self.freed:
            copy_s.wait_event(self.freed[slot])
        with torch.cuda.stream(copy_s):
            copy_kv_rows(k_s, v_s, k_host[:n], v_host[:n], cache.copy_rows, non_blocking=True, paired=self.paired)
            landed = torch.cuda.Event()
            landed.record(copy_s)
        self.issued[layer] = (landed, k_s, v_s)

    def attention_args(self, layer: int, k_new: torch.Tensor, v_new: torch.Tensor):
        """`split_attention_ce`'s `ahead` argument for `layer` (its copy queued, and the next
        layer's); k_new, v_new (B, Hkv, D): this step's token, written into the slot."""
        self.issue(layer)
        nxt = self.kv.ahead[layer].next
        if nxt is not None:
            self.issue(nxt)
        landed, k_s, v_s = self.issued.pop(layer)
        return landed, k_s, v_s, k_new, v_new, lambda stream: self._release(layer, stream)

    def _release(self, layer: int, stream) -> None:
        if self.cuda:
            ev = torch.cuda.Event()
            ev.record(stream)
            self.freed[self.kv.ahead[layer].slot] = ev

    def close(self) -> None:
        if self.started:
            torch.cuda.current_stream(self.kv.device).wait_stream(side_stream(self.kv.device, self.stream_name))


def current(kv, layer: int) -> Step | None:
    """The active step if `layer` of `kv` stages its host requests ahead."""
    step = _STEP.get()
    if step is None or step.kv is not kv or layer not in (getattr(kv, "ahead", None) or {}):
        return None
    return step


@contextlib.contextmanager
def kv_ahead_step(kv):
    """Run one decode step with the linked layers' K/V copies queued ahead (no-op unless linked)."""
    if not getattr(kv, "ahead", None):
        yield None
        return
    with active(_STEP, Step(kv)) as step:
        yield step
