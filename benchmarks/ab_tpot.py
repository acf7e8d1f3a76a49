"""A/B of two source trees: TPOT of greedy `generate` on Llama-2-7B all in HBM (batch 8 and 512, prompt 32,
64 new tokens, decode graphs; best of 3 after a first call whose tokens every later call must repeat),
for whichever dak is on PYTHONPATH; prints one JSON line tagged with argv[1]. $AB_MODEL names another
built-in model. Alternate the trees in one call, e.g. (the fifty-fourth session's rotary change against
the kernels before it):

    mkdir -p /tmp/old && cp -r src/dak /tmp/old/ && git show e65fb88:src/dak/kernels/fused_ops.py \
        > /tmp/old/dak/kernels/fused_ops.py   # (and rotary_append.py)
    for r in 1 2; do PYTHONPATH=/tmp/old python3 benchmarks/ab_tpot.py old; \
        PYTHONPATH=src python3 benchmarks/ab_tpot.py new; done
"""
import json
import os
import sys

import torch

import dak

name = os.environ.get("AB_MODEL", "llama-2-7b")
out = {"model": name}
for batch in (8, 512):
    m = dak.offload(name, batch=batch, max_len=128, prompt_len=32, gen_len=64, policy="uniform",
                    host_ratio=0.0, dtype=torch.bfloat16, tune=False)
    ids = torch.randint(0, m.config.vocab_size, (batch, 32), generator=torch.Generator().manual_seed(1))
    first = m.generate(ids, max_new_tokens=64, eos_token_id=None)
    best = 1e9
    for _ in range(3):
        got = m.generate(ids, max_new_tokens=64, eos_token_id=None)
        assert torch.equal(got, first)
        best = min(best, m.dak_last.tpot_s)
    out[batch] = best
    out[f"tokens{batch}"] = first[:2, 32:40].tolist()
    m.dak_free()
print(json.dumps({"tag": sys.argv[1], **{str(k): v for k, v in out.items()}}))
