"""Measured split decode-attention curve of a model and workload (CUDA GPU only).

Decode attention of B requests at the workload's average context L + (G+1)/2, with the KV of
requests [0, B_H) in pinned host memory (`dak.kv_cache.SplitKVCache`, with copy-engine staging
so the tuner may use it) and the rest in HBM, timed by CUDA-graph replay over enough layers
that replays miss L2. One point per host request count B_H.
"""

from __future__ import annotations

import math

import torch

from dak.kernels.timing import graph_time_ms

from .linear import DTYPES

MAX_LAYERS = 4


def time_attention(spec, workload, host_requests: int, tune: bool) -> float:
    """Seconds of one decode-attention call with `host_requests` of the batch's KV on the host."""
    from dak.kv_cache import SplitKVCache
    from dak.nn.split_attention import prepare_decode, split_decode_attention
    dtype = DTYPES[workload.dtype]
    b, max_len = workload.batch, workload.prompt_len + workload.gen_len
    ctx = min(max_len, int(round(workload.context)))
    per_layer = 2 * b * spec.num_kv_heads * max_len * spec.head_dim * dtype.itemsize
    l2 = getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 64 << 20) or (64 << 20)
    layers = max(1, min(MAX_LAYERS, math.ceil(3 * l2 / per_layer)))
    cache = SplitKVCache(layers, b, max_len, spec.num_kv_heads, spec.head_dim, dtype,
                         host_requests=host_requests, staging_requests=host_requests)
    cache.lengths.fill_(ctx)
    for layer in range(layers):
        for part in cache.parts(layer):
            if part.numel():
                part.fill_(0.01)  # values do not change the time
    q = torch.randn(b, spec.num_heads, spec.head_dim, device=cache.device).to(dtype)
    prepare_decode(cache, spec.num_heads, b, tune=tune)
    ms = graph_time_ms([lambda l=l: split_decode_attention(q, cache, l) for l in range(layers)])
    del cache
    torch.cuda.empty_cache()
    return ms * 1e-3
