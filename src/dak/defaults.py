"""Defaults shared by the API, the CLI and the benchmarks (no torch import: the planner's CLI reads them).

Both were chosen by H200 runs (benchmarks/results/e2e-consolidated-h200.json, e2e-kv-buckets-*-h200.json):
- the consolidated policy (the greedy over the operator kinds left on the host, with the set of
  kinds kept in HBM chosen to minimize the predicted step) was 1.00-1.16x faster than plain
  greedy on Llama-2-7B and OPT-6.7B at bs 8, x = 1-20%;
- four KV-length buckets made Llama-2-7B decode 3.8% faster at x = 5% and 2.4% at 10% than one
  (eight were 0-1% faster than four on OPT at 5/10% with host K/V priced in place, H96; priced as
  copied, the default since, eight re-plan three rows: kept at four until those run, H116);
- KV copy-ahead (each layer's host K/V copied during the layer before, dak.runtime.kv_ahead) made
  Llama-2-7B at x = 5% (the case with host KV) 11.23 -> 10.03 ms and changed nothing measurable
  where no KV lives on the host (e2e-kv-ahead-{off,on}-h200.json, same call);
- fused projections (q/k/v and gate/up as one GEMV where all members are in HBM) made the
  all-HBM step of Llama-2-7B 5.11 -> 4.66 ms, Llama-3-8B 5.45 -> 4.97, OPT-6.7B 5.09 -> 4.72 at
  bs 8, and dak faster at 10 of 12 offloaded cases (OPT-6.7B 2%: 7.32 -> 7.52;
  e2e-{unfused,fused}-s7-h200.json, same call).
"""

DEFAULT_POLICY = "consolidated"
DEFAULT_KV_BUCKETS = 4
DEFAULT_KV_AHEAD = True
DEFAULT_FUSE_PROJECTIONS = True
