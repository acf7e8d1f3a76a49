"""Prefill under CUDA graphs: one graph per (first request, requests, padded prompt length).

At small batch a prefill is bound by the host, not the GPU: the HF forward launches a few
hundred kernels one by one, and every split operator adds its own launches, events and copies
(OPT-6.7B at batch 8, 32-token prompts, 5% on the host: 53-80 ms of wall time for 21-23 ms of
GPU work; all in HBM 28-45 ms for 7 ms; H32-H34). A captured prefill replays all of it in one
launch. Prompts are right-padded up to a multiple of `bucket` tokens (at most the cache's
max_len), so prompts of nearby lengths share a graph: padding sits after each prompt, causal
attention keeps it out of the real tokens, only the first prompt_lengths[b] keys and values are
stored, and the logits are read at each prompt's last token. The first prefill of a key runs
eagerly (it plans and compiles every kernel for that token count, and its result is the
answer), then the key is captured; later prefills replay it. In the captured prefill the
copy-engine operators are chained by copy-ahead (each one's host rows queued behind the
previous one's, dak.kernels.copy_ahead) in two staging slots of the graph's own: called one by
one, each would pay the copy engine's start-up (a 7168x7168 operator at 10% on the host: 1.13
x its bound alone, 1.03 chained; H33). At most `max_graphs` keys get a
graph (sharing one memory pool, so they hold about one prefill's activations); others run
eagerly, and so does a key whose capture ran out of HBM (with a warning). The Engine captures
only a prefill that takes every request in one forward: one split into request chunks is short
of HBM, and a graph holding one chunk's activations left the next chunk's eager run without
them (Llama-2-70B at real capacity ran out of memory, H37). Without a GPU the
same padded chunks run eagerly (`capture=False`).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import torch

from dak.kernels.copy_ahead import copy_ahead_step, link_chain, record_chain
from dak.shares import prefill_chain_enabled


def check_count(name: str, v) -> None:
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {v!r}")


@dataclass
class _Entry:
    graph: object  # torch.cuda.CUDAGraph, or None until captured
    ids: torch.Tensor  # (rows, padded length) int64, the graph's input
    plen: torch.Tensor  # (rows,) int32
    out: torch.Tensor | None = None  # (rows, V) fp32, the graph's output
    eager: bool = False  # capture ran out of memory: always eager
    chain: object = None  # the copy-ahead Chain the graph copies through (holds its slots)


class PrefillGraphs:
    """Graphed prefill chunks for `engine` (dak.runtime.engine.Engine): `run(r0, ids, plen)`."""

    def __init__(self, engine, bucket: int = 32, max_graphs: int = 8, capture: bool = True):
        check_count("prefill_bucket", bucket)
        check_count("max_prefill_graphs", max_graphs)
        if capture and engine.device.type != "cuda":
            raise ValueError("captured prefill needs a GPU; pass capture=False")
        self.engine, self.bucket, self.max_graphs, self.capture = engine, bucket, max_graphs, capture
        limit = getattr(engine.model.config, "max_position_embeddings", None) or engine.kv.max_len
        self.max_tokens = min(engine.kv.max_len, limit)
        self.entries: dict[tuple[int, int, int], _Entry] = {}
        self.pool = None

    def padded_len(self, n: int) -> int:
        """n rounded up to a multiple of `bucket`, or n itself where that would pass max_len."""
        up = -(-n // self.bucket) * self.bucket
        return up if up <= self.max_tokens else n

    def run(self, r0: int, ids: torch.Tensor, plen: torch.Tensor) -> torch.Tensor:
        """fp32 logits (rows, V) at each prompt's last token of requests [r0, r0 + rows): ids
        (rows, n) on the device, plen (rows,) int32 prompt lengths in [1, n]."""
        rows, n = ids.shape
        key = (r0, rows, self.padded_len(n))
        entry = self.entries.get(key)
        if entry is None:
            entry = _Entry(None, torch.zeros(rows, key[2], dtype=torch.long, device=ids.device),
                           torch.empty(rows, dtype=torch.int32, device=ids.device))
            if len(self.entries) < self.max_graphs:
                self.entries[key] = entry
        entry.ids[:, :n].copy_(ids)  # positions past n keep earlier (valid) ids: never read
        entry.plen.copy_(plen)
        if entry.graph is not None:
            entry.graph.replay()
            return entry.out.clone()
        with record_chain() as order:  # eager: plans, compiles, answers; notes the copy-engine operators
            logits = self.engine.prefill_chunk(r0, entry.ids, entry.plen)
        if self.capture and not entry.eager and self.entries.get(key) is entry:
            self._capture(r0, entry, order)
        return logits

    def _link(self, order: list, n_tokens: int):
        """Chain the prefill's copy-engine operators by copy-ahead in slots of their own (the
        Chain, which holds them, or None: off, nothing to chain, or two slots would take more
        than a quarter of the free HBM)."""
        if not (order and prefill_chain_enabled()):
            return None
        from dak.kernels.split_linear_ce import ce_rows
        from dak.kernels.tuning import token_bucket
        need = 0
        for mod in order:
            cfg = mod._configs.get(token_bucket(n_tokens))
            if cfg is not None:
                need = max(need, ce_rows(cfg, mod.host_rows) * mod.w_host.stride(0) * mod.w_host.element_size())
        if 2 * need > torch.cuda.mem_get_info(self.engine.device)[0] / 4:
            return None
        if not link_chain(order, n_tokens, own_slots=True):
            return None
        return next(mod._ahead.chain for mod in order if mod._ahead is not None)

    def _capture(self, r0: int, entry: _Entry, order: list) -> None:
        """Capture `entry`'s prefill, its copy-engine operators (`order`) chained by copy-ahead
        for the capture only (their decode chain is restored after). Out of memory (the graph
        keeps its own activations), the key stays eager (`entry.eager`) with a warning."""
        dev = self.engine.device
        torch.cuda.synchronize(dev)
        torch.cuda.empty_cache()  # the eager run's cached blocks can back the graph's pool
        graph = torch.cuda.CUDAGraph()
        saved = [(mod, mod._ahead) for mod in order]
        try:
            entry.chain = self._link(order, entry.ids.numel())
            with torch.cuda.graph(graph, pool=self.pool):  # records only: the cache sees no writes
                with copy_ahead_step(dev):
                    entry.out = self.engine.prefill_chunk(r0, entry.ids, entry.plen)
        except torch.OutOfMemoryError:
            del graph
            entry.out, entry.eager = None, True
            torch.cuda.empty_cache()
            entry.chain = None
            warnings.warn(f"dak: no HBM left to capture the prefill of {entry.ids.shape[0]} x {entry.ids.shape[1]} "
                          "tokens; it runs eagerly", RuntimeWarning, stacklevel=3)
            return
        finally:
            for mod, spec in saved:  # the decode steps' chain (captured graphs do not read it)
                mod._ahead = spec
        self.pool = graph.pool() if self.pool is None else self.pool
        graph.replay()  # a graph's first launch uploads it; this replay redoes the eager prefill's writes
        torch.cuda.synchronize(dev)
        entry.graph = graph

    def clear(self) -> None:
        self.entries.clear()
        self.pool = None
