"""benchmarks/attention_chain.py off the GPU: the layers' decode attentions, in place or staged
by KV copy-ahead, give SDPA's result, and the check that guards each timed variant catches a
wrong host value."""

import os
import sys
from pathlib import Path

import pytest
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import attention_chain as ac  # noqa: E402

from dak.baselines.attention import sdpa_decode  # noqa: E402
from dak.runtime_env import kernel_device  # noqa: E402


@pytest.mark.parametrize("b,b_h,hq,hkv", [(3, 1, 4, 2), (4, 4, 2, 2)])
def test_chained_layers_match_sdpa_in_place_and_staged(b, b_h, hq, hkv):
    torch.manual_seed(8)
    dev, s, d, layers = kernel_device(), 24, 16, 3
    kv = ac.build_kv(b, s, b_h, hkv, d, torch.bfloat16, dev, layers=layers, seed=3)
    for cache in kv.caches.values():  # off the GPU DakKV builds no staging; the CE config's warm-up needs it
        if cache.staging is None:
            cache.staging = tuple(torch.empty(b_h, hkv, s, d, dtype=torch.bfloat16, device=dev) for _ in range(2))
    q = torch.randn(b, hq, d, device=dev).to(torch.bfloat16)
    refs = [sdpa_decode(q, *ac.full_kv(kv, layer)) for layer in range(layers)]
    new = [tuple(t[:, :, s - 1].contiguous() for t in ac.full_kv(kv, layer)) for layer in range(layers)]
    for name, kw in ac.VARIANTS.items():
        linked = ac.configure(kv, hq, 4, kw)
        assert linked == (layers if kw["ce_share"] else 0), name
        step = ac.chain_step(kv, q, new)
        ac.check(step, refs, 2e-2, name)
    cache, local = kv.where[1]
    cache.parts(local)[1][0] += 1.0  # the middle layer's first host request: every value up by 1
    with pytest.raises(RuntimeError, match="at layer 1"):
        ac.check(ac.chain_step(kv, q, new), refs, 2e-2, "ce")
    kv.free()
