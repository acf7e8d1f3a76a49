#!/usr/bin/env bash
# H200 runs (benchmarks/H200_RUNBOOK.md says which come next), each one device call of < 10 min:
#   bash benchmarks/h200_next.sh H86|H88|H89 (calls already run: benchmarks/h200_past_calls.sh, same usage)
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
H89) # (twenty-eighth session) the planner's one-GEMV choice (Placement.one_gemv: link side <= 0.85 x compute side,
    # priced as copy_op_overhead_s less per copy-engine linear) as the default, against $DAK_CE_ONE_GEMV=0 (the old
    # plans and path): batch 8 consolidated at 1/2% (Llama-2-7B at 2% now streams o_proj); then the GPU tests
    ab 200 DAK_CE_ONE_GEMV=0 e2e-h89 python3 -m dak bench e2e --models opt-6.7b,opt-30b,llama-2-7b --batch 8 \
        --ratios 1,2 --systems dak-consolidated
    step 200 python3 -u -m pytest -q -p no:cacheprovider tests/test_copy_ahead_gpu.py tests/test_runtime_gpu.py \
        -k "one_gemv or (graphed_greedy_matches and 1.0)"
    ;;
H88) # (twenty-eighth session) H87 again with the one-GEMV path open to hbm_cublas configs (the untuned default
    # for staged operators, which H87's run excluded): its GPU test, a profiled OPT-6.7B 1% step with it on (are
    # the staged operators' cuBLAS GEMMs gone?), then batch 8 consolidated default vs on
    step 120 python3 -u -m pytest -q -p no:cacheprovider tests/test_copy_ahead_gpu.py -k one_gemv
    step 120 env DAK_CE_ONE_GEMV=1 python3 -u benchmarks/profile_step.py --model opt-6.7b --ratios 0.01 --steps 2 \
        --out "$OUT/step-opt-6.7b-h88.json"
    ab 200 DAK_CE_ONE_GEMV=1 e2e-h88 python3 -m dak bench e2e --models opt-6.7b,opt-30b,llama-2-7b --batch 8 \
        --ratios 1,2,5 --systems dak-consolidated
    ;;
H86) # (twenty-seventh session) H79 found identical configs timed up to 14% apart in two bench runs of one call
    # (Llama-2-7B down_proj at 5%: 93.6 / 106.7 us): the committed cache's decode cases three times in one call
    tuning_cache
    for run in 1 2 3; do
        step 150 python3 -u benchmarks/bench_linear.py --shapes llama2-7b.qkvo,llama2-7b.up,llama2-7b.down --tokens 8 \
            --ratios 1,2,5 --chained --out "$OUT/linear-h86-run$run.json"
    done
    ;;
*)  . "$(dirname "$0")/h200_past_calls.sh"  # calls already run, kept to rerun or read
    past_call "$1" || { echo "usage: bash benchmarks/h200_next.sh H86|H88|H89 (or a past call: see h200_past_calls.sh)" >&2; exit 2; } ;;
esac
tail -c 3000 "$log"
