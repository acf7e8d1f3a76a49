#!/usr/bin/env bash
# H200 runs (benchmarks/H200_RUNBOOK.md says which come next), each one device call of < 10 min:
#   bash benchmarks/h200_next.sh H55|H57|H58 (calls already run: benchmarks/h200_past_calls.sh, same usage)
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
tuning_cache() {  # the committed tuning cache (every decode case of bench_linear) into $DAK_CACHE_DIR: no sweeps
    cp benchmarks/results/tuning-cache-h200.json "$DAK_CACHE_DIR/split_linear.json"
}
case "$1" in
H55) # (twenty-third session) the e2e table's rows whose consolidated lm_head keeps a thin in-place share, on the
    # 32-row in-place default (b905a6e): Llama-2-7B at 2% (448 of 32000 rows), OPT-30B at 5% (768 of 50272); prefetch beside
    e2e="python3 -m dak bench e2e --batch 8 --append --systems dak-consolidated,prefetch --out $OUT/e2e-h55.json"
    step 90 $e2e --models llama-2-7b --ratios 2
    step 100 $e2e --models opt-30b --ratios 5
    ;;
H57) # (twenty-third session) issue 4's one all-HBM miss: Llama-3-8B batch 8 context 256 at 0.896x torch (H48), whose
    # heuristic splits the sequence in two (a merge launch); the tuner's sweep there and at 2048, heuristic beside
    step 120 python3 -u benchmarks/bench_attention.py --models llama3-8b --batches 8 --contexts 256,2048 --fractions 0 \
        --host-paths plain --out "$OUT/attention-h57-heuristic.json"
    step 240 python3 -u benchmarks/bench_attention.py --models llama3-8b --batches 8 --contexts 256,2048 --fractions 0 \
        --host-paths plain --tune --out "$OUT/attention-h57-tuned.json"
    ;;
H58) # (twenty-third session) OPT-6.7B's all-HBM step is 0.87 x bound (4.21 ms; its GEMVs alone sum to ~3.66), Llama-2-7B's
    # 0.93: where the 17 vs 11 us a layer outside the GEMVs go, per kernel inside the captured graph, both at x = 0
    for m in opt-6.7b llama-2-7b; do
        step 120 python3 -u benchmarks/profile_step.py --model $m --ratios 0 --out "$OUT/step-$m-h58.json"
    done
    ;;
*)  . "$(dirname "$0")/h200_past_calls.sh"  # calls already run, kept to rerun or read
    past_call "$1" || { echo "usage: bash benchmarks/h200_next.sh H55|H57|H58 (or a past call: see h200_past_calls.sh)" >&2; exit 2; } ;;
esac
tail -c 3000 "$log"
