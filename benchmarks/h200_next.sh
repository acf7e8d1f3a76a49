#!/usr/bin/env bash
# H200 runs (benchmarks/H200_RUNBOOK.md says which come next), each one device call of < 10 min:
#   bash benchmarks/h200_next.sh H92|H93|H94|H95|H96|H97|H97b (calls already run: benchmarks/h200_past_calls.sh, same usage)
# Run from the repository root on the device machine; writes at most 8 files to $OUT.
# Pass DAK_GIT_SHA=<local short sha> (the device copy's .git is stale: without it JSONs record "<old sha>-dirty").
set -u
export PYTHONPATH=src DAK_CACHE_DIR="${OUT:?set OUT}/cache"
mkdir -p "$DAK_CACHE_DIR"
log="$OUT/run-$1.log"
step() {  # step SECONDS COMMAND...: run with a time limit, log the tail, never stop the batch
    local limit=$1; shift
    echo "### $(date +%T) $*" >>"$log"
    timeout "$limit" "$@" >"$OUT/.step.log" 2>&1
    echo "### rc=$?" >>"$log"
    grep -v "^Some parameters are on the meta device" "$OUT/.step.log" | tail -60 >>"$log"
    rm -f "$OUT/.step.log"
}
ab() {  # ab SECONDS VAR=VALUE NAME COMMAND...: COMMAND as it is, then under VAR=VALUE (JSONs NAME-default, NAME-<var>)
    local limit=$1 var=$2 name=$3; shift 3
    local tag; tag=$(echo "${var%%=*}" | tr 'A-Z_' 'a-z-'); tag=${tag#dak-}
    step "$limit" "$@" --out "$OUT/$name-default.json"
    step "$limit" env "$var" "$@" --out "$OUT/$name-$tag.json"
}
curves_ab() {  # curves_ab TAG: Llama-2-7B batch 8, greedy + consolidated, the H17 profile with and without its curves, twice
    local e2e="python3 -m dak bench e2e --models llama-2-7b --batch 8 --ratios 1,2,5,10 --systems dak-greedy,dak-consolidated"
    local prof=benchmarks/profiles/h200-llama-2-7b-h17-inherited run
    for run in 1 2; do
        step 100 $e2e --hardware $prof.json --out "$OUT/e2e-$1-measured-$run.json"
        step 100 $e2e --hardware $prof-roofline.json --out "$OUT/e2e-$1-roofline-$run.json"
    done
}
cache_vs_fresh() {  # cache_vs_fresh TAG SECONDS SECONDS: Llama-2-7B N = 8 at 1/2/5%, committed cache then fresh sweeps
    local lin="python3 -u benchmarks/bench_linear.py --shapes llama2-7b.qkvo,llama2-7b.up,llama2-7b.down --tokens 8 --ratios 1,2,5"
    tuning_cache
    step "$2" $lin --chained --out "$OUT/linear-$1-old-cache.json"
    rm -f "$DAK_CACHE_DIR/split_linear.json"
    step "$3" $lin --chained --out "$OUT/linear-$1-fresh.json"
    cp "$DAK_CACHE_DIR/split_linear.json" "$OUT/tuning-cache-$1.json" 2>/dev/null
}
tuning_cache() {  # the committed tuning cache (every decode case of bench_linear) into $DAK_CACHE_DIR: no sweeps
    cp benchmarks/results/tuning-cache-h200.json "$DAK_CACHE_DIR/split_linear.json"
}
case "$1" in
H92) # (twenty-eighth session) the OPT rows at 1% that one GEMV changed (H90 measured dak alone), now with every
    # system of the table in the same run, to merge into e2e-h200.json (vs-best and never-slower need it)
    step 300 python3 -m dak bench e2e --models opt-6.7b,opt-30b --batch 8 --ratios 1 \
        --systems dak-consolidated,dak-greedy,dak-uniform,prefetch,uva --out "$OUT/e2e-h92-opt-1pct.json"
    ;;
H93) # (twenty-eighth session) $DAK_COPY_WRAP=plan (CPU-tested only): a plan that runs one GEMV once staged wraps its
    # copy-ahead chain (H90/H91: 0.09-0.27 ms faster at OPT 1% with DAK_COPY_WRAP=1). Its GPU tests (the wrap cases),
    # then batch 8 consolidated at 1/2/5% default vs plan; if only the one-GEMV rows (1%) move, and faster, make
    # 'plan' the default (dak.shares.copy_wrap_mode) and re-measure those rows with their baselines (H92's command)
    step 200 python3 -u -m pytest -q -p no:cacheprovider tests/test_runtime_gpu.py -k wrap
    ab 200 DAK_COPY_WRAP=plan e2e-h93 python3 -m dak bench e2e --models opt-6.7b,opt-30b,llama-2-7b --batch 8 \
        --ratios 1,2,5 --systems dak-consolidated
    ;;
H94) # (twenty-ninth session, CPU) the h200-pcie-gemv preset (all-HBM decode linears at dak's GEMV rate, one layer
    # overhead; benchmarks/fit_gemv_rate.py: 28 of 28 batch-8 rows predicted within 10% on the plans they ran) plans
    # differently from h200-pcie in 5 rows: Llama-2-7B at 5/10%, OPT-6.7B at 5/10/20% (20%: a control). Both presets
    # in one call; if the gemv preset's rows are no slower and within 10% of its predictions, make it the default
    # (fold gemv_bandwidth and the layer overhead into h200-pcie) and merge these rows into e2e-h200.json
    # (dry run: 6 cases, about 0.5 min of GPU time each way), alternated twice against the calls' drift
    local_e2e="python3 -m dak bench e2e --models llama-2-7b,opt-6.7b --batch 8 --ratios 5,10,20 --systems dak-consolidated"
    for run in 1 2; do
        step 140 $local_e2e --hardware h200-pcie --out "$OUT/e2e-h94-preset-$run.json"
        step 140 $local_e2e --hardware h200-pcie-gemv --out "$OUT/e2e-h94-gemv-$run.json"
    done
    ;;
H95) # (thirtieth session) generate now takes eos/pad and sampling from the generation config (HF's default); the
    # runtime GPU tests pass eos_token_id=None where they need fixed lengths: rerun the files that call generate
    step 560 python3 -u -m pytest -q -p no:cacheprovider tests/test_runtime_gpu.py tests/test_prefill_graphs_gpu.py
    ;;
H96) # (thirtieth session, CPU) the decode graphs copy a staged request's K/V up to its step's cache-length bucket
    # (55.7 of 64 positions at prompt 32 + 32 with 4 buckets; the planner prices that now): more buckets copy fewer
    # rows (8: 51.6) for more graphs. The default plans with host K/V (OPT-30B at 5%: 672 MiB, OPT-6.7B at 10%:
    # 256 MiB) at 4, 8 and 16 buckets, alternated twice; if 8 or 16 is faster on both, raise DEFAULT_KV_BUCKETS
    local_e2e="python3 -m dak bench e2e --models opt-30b,opt-6.7b --batch 8 --ratios 5,10 --systems dak-consolidated"
    for run in 1 2; do
        for kb in 4 8 16; do
            step 90 $local_e2e --kv-buckets $kb --out "$OUT/e2e-h96-kv$kb-$run.json"
        done
    done
    ;;
H97) # (thirtieth session, CPU) with host K/V priced as the runtime copies it (bucket rows, parts under 4 MiB a layer
    # in place), $DAK_ROOFLINE_KV_AHEAD=1 changes 6 of the 24 batch-8 plans at 1-40%: Llama-2-7B and OPT-6.7B at 5%
    # (to host K/V: H47/H50 measured 3.4% faster / 1% slower), at 40% (away from it), OPT-30B at 5/10% (away from
    # it). Default vs the flag on exactly those rows (H97: the 7B models, H97b: OPT-30B); if the flag is faster
    # overall, make it the default
    for model_x in llama-2-7b:5,40 opt-6.7b:5,40; do
        ab 120 DAK_ROOFLINE_KV_AHEAD=1 "e2e-h97-${model_x%%:*}" python3 -m dak bench e2e --models "${model_x%%:*}" \
            --batch 8 --ratios "${model_x#*:}" --systems dak-consolidated
    done
    ;;
H97b) # the OPT-30B half of H97
    ab 250 DAK_ROOFLINE_KV_AHEAD=1 e2e-h97-opt-30b python3 -m dak bench e2e --models opt-30b --batch 8 --ratios 5,10 \
        --systems dak-consolidated
    ;;
*)  . "$(dirname "$0")/h200_past_calls.sh"  # calls already run, kept to rerun or read
    past_call "$1" || { echo "usage: bash benchmarks/h200_next.sh H92|H93|H94|H95|H96|H97|H97b (or a past call: see h200_past_calls.sh)" >&2; exit 2; } ;;
esac
tail -c 3000 "$log"
