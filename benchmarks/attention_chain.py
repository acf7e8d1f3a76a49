"""Split decode attention timed the way a decode step runs it: `bench_attention.py --chained`.

`bench_attention.py` times one layer's attention alone: where the copy engine stages the host
requests, every call pays the copy's start-up and waits for the whole copy before the staged
requests are attended. In a decode step (dak.runtime.engine, KV copy-ahead on by default) the
attention of layer l queues the copy of the next staged layer's host K/V into the other of two
HBM slots (dak.runtime.kv_ahead), so the copy runs while the rest of the step does. Here LAYERS
layers of one shape live in a `DakKV` (each layer its own pinned host K/V and HBM K/V, every
request at full length) and their decode attentions run one after another in one CUDA graph,
linked by KV copy-ahead; the time per layer is the replay's time / LAYERS, the chain's first
copy and last attention included. Variants: the host requests read in place (plain loads;
nothing chained) and staged by the copy engine (chained). Every variant's outputs are checked
against torch SDPA on the full K/V before it is timed. The baseline beside it is the prefetch
baseline chained one layer ahead (`prefetch_chain`): layer l+1's host K/V copied into that
layer's own HBM staging rows while layer l is attended by torch SDPA over its whole batch.
"""

from __future__ import annotations

from dataclasses import replace

import torch

from dak.baselines.attention import sdpa_decode
from dak.kernels.attention_config import heuristic_config
from dak.kernels.timing import graph_time_ms
from dak.nn.split_attention import prepare_decode, split_decode_attention
from dak.runtime import kv_ahead
from dak.runtime.kv import DakKV

LAYERS = 8
VARIANTS = {"plain": dict(ce_share=0.0, ce_chunks=1, host_tma=False), "ce": dict(ce_share=1.0, ce_chunks=1)}


def build_kv(b: int, s: int, b_h: int, hkv: int, d: int, dtype, device, layers: int = LAYERS, seed: int = 0):
    """A DakKV of `layers` layers with b_h host requests each, filled at full length s."""
    kv = DakKV([b_h] * layers, b, s, hkv, d, dtype, device)
    g = torch.Generator(device=device).manual_seed(seed)
    for cache, local in kv.where:
        for part in cache.parts(local):
            if part.numel():
                part.copy_(torch.randn(part.shape, generator=g, device=device).to(dtype))
    kv.lengths.fill_(s)
    return kv


def full_kv(kv, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Layer `layer`'s whole K and V (B, Hkv, S, D) on the device: host requests first."""
    k_h, v_h, k_g, v_g = kv.where[layer][0].parts(kv.where[layer][1])
    dev = kv.device
    return torch.cat([k_h.to(dev), k_g]), torch.cat([v_h.to(dev), v_g])


def chain_step(kv, q: torch.Tensor, new: list):
    """step() running every layer's decode attention in order inside one KV copy-ahead step;
    `new[l]` = layer l's (k_new, v_new), this step's token (already in the cache)."""
    def step():
        with kv_ahead.kv_ahead_step(kv):
            outs = []
            for layer, (cache, local) in enumerate(kv.where):
                st = kv_ahead.current(kv, layer)
                ahead = None if st is None else st.attention_args(layer, *new[layer])
                outs.append(split_decode_attention(q, cache, local, lengths=kv.lengths, ahead=ahead))
            return outs
    return step


def configure(kv, q_heads: int, sms: int, kw: dict) -> int:
    """Pin every cache's decode config to the heuristic with `kw` over it; link KV copy-ahead.
    Returns the number of linked layers."""
    kv.ahead = None
    for cache in kv.caches.values():
        base = heuristic_config(cache.host_requests, kv.batch - cache.host_requests, cache.kv_heads,
                                q_heads // cache.kv_heads, cache.max_len, cache.head_dim, sms)
        prepare_decode(cache, q_heads, kv.batch, config=replace(base, **kw))  # finalizes and stores it
    return kv_ahead.link(kv, q_heads)


def prefetch_chain(kv, q: torch.Tensor, backend: str | None):
    """step() of the prefetch baseline over copies of kv's layers: each layer's whole K/V in
    HBM with its first b_h requests as staging rows, refilled from the layer's pinned host K/V
    one layer ahead on a side stream; every layer attended by torch SDPA."""
    layers = [full_kv(kv, layer) for layer in range(len(kv.where))]
    hosts = [kv.where[layer][0].parts(kv.where[layer][1])[:2] for layer in range(len(kv.where))]
    b_h = hosts[0][0].shape[0]
    side = torch.cuda.Stream(kv.device)

    def step():
        main = torch.cuda.current_stream(kv.device)
        side.wait_stream(main)
        copied = []

        def issue(i):
            with torch.cuda.stream(side):
                for dst, src in zip(layers[i], hosts[i]):
                    dst[:b_h].copy_(src, non_blocking=True)
                copied.append(torch.cuda.Event())
                copied[-1].record(side)
        issue(0)
        outs = []
        for i, (k, v) in enumerate(layers):
            if i + 1 < len(layers):
                issue(i + 1)
            main.wait_event(copied[i])
            outs.append(sdpa_decode(q, k, v, None, backend))
        main.wait_stream(side)
        return outs
    return step


def check(step, refs, tol: float, what: str) -> None:
    for layer, (y, ref) in enumerate(zip(step(), refs)):
        err = ((y.float() - ref.float()).norm() / ref.float().norm()).item()
        if not err <= tol:
            raise RuntimeError(f"chained {what} differs from SDPA at layer {layer} (rel. {err:.3g})")


def chained_times(kv, q: torch.Tensor, sms: int, backend: str | None, tol: float = 2e-2) -> dict:
    """Per-layer ms of each variant chained (and 'prefetch_chain'), outputs checked first."""
    q_heads = q.shape[1]
    s, refs, new = kv.max_len, [], []
    for layer in range(len(kv.where)):
        k, v = full_kv(kv, layer)
        refs.append(sdpa_decode(q, k, v, None, backend))
        new.append((k[:, :, s - 1].contiguous(), v[:, :, s - 1].contiguous()))
    times = {}
    for name, kw in VARIANTS.items():
        linked = configure(kv, q_heads, sms, kw)
        if (linked > 0) != (kw["ce_share"] > 0):
            raise RuntimeError(f"{name}: {linked} layers linked for KV copy-ahead")
        step = chain_step(kv, q, new)
        check(step, refs, tol, f"split attention ({name})")
        times[name] = graph_time_ms([step], target_ms=10.0, max_replays=7) / len(kv.where)
    kv.ahead = None
    pre = prefetch_chain(kv, q, backend)
    check(pre, refs, tol, "prefetch")
    times["prefetch_chain"] = graph_time_ms([pre], target_ms=10.0, max_replays=7) / len(kv.where)
    return times


def add_chain(row: dict, b: int, s: int, b_h: int, hkv: int, d: int, dtype, q: torch.Tensor, sms: int,
              backend: str | None) -> None:
    """Add the chained times of one bench_attention case to its row (and print them)."""
    kv = build_kv(b, s, b_h, hkv, d, dtype, q.device)
    try:
        times = chained_times(kv, q, sms, backend)
    finally:
        kv.free()
    best = min(VARIANTS, key=times.get)
    row.update(chain_layers=LAYERS, t_chain_ms=times[best], chain_variant=best, chain_variants_ms=times,
               t_prefetch_chain_ms=times["prefetch_chain"], chain_over_bound=times[best] / row["bound_ms"],
               chain_speedup_vs_prefetch_chain=times["prefetch_chain"] / times[best])
    print(f"    chained ({LAYERS} layers): best {best} {times[best] * 1e3:.1f}us r={row['chain_over_bound']:.2f} "
          + " ".join(f"{k} {v * 1e3:.1f}us" for k, v in times.items())
          + f" (vs prefetch chained {row['chain_speedup_vs_prefetch_chain']:.2f}x)", flush=True)
