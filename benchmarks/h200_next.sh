#!/usr/bin/env bash
# H200 runs (benchmarks/H200_RUNBOOK.md says which come next), each one device call of < 10 min:
#   bash benchmarks/h200_next.sh H54 (calls already run: benchmarks/h200_past_calls.sh, same usage)
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
H54) # (twenty-third session) the in-place tiles on by default at 1-16 tokens (H52, H53): the split-linear GPU file on
    # the new default (H53's step ran past 150 s), then dak-greedy at 1% where H53 moved most
    step 270 python3 -u -m pytest -q -p no:cacheprovider tests/test_split_linear_gpu.py
    step 90 python3 -m dak bench e2e --batch 8 --models llama-3-8b,opt-30b --ratios 1 --systems dak-greedy \
        --out "$OUT/e2e-h54.json"
    ;;
H53) # (twenty-third session) H52: $DAK_INPLACE_TILES=1 took the chained heuristic from 1.25-1.35 to 0.93-1.15 x bound
    # on OPT-30B and Llama-2-7B up_proj at N 1/8 and 0.5-1%; dak-greedy's plans keep such shares (plan_shares.py
    # --system dak-greedy: Llama-2-7B gate/up, OPT-6.7B fc1, Llama-3-8B gate/up, OPT-30B every linear at 1-2%; the
    # consolidated plans keep none, so they are left out). e2e A/B of dak-greedy
    ab 200 DAK_INPLACE_TILES=1 e2e-h53 python3 -m dak bench e2e --batch 8 --models llama-2-7b,opt-6.7b,llama-3-8b,opt-30b \
        --ratios 1,2 --systems dak-greedy
    step 150 env DAK_INPLACE_TILES=1 python3 -u -m pytest -q -p no:cacheprovider tests/test_split_linear_gpu.py
    ;;
*)  . "$(dirname "$0")/h200_past_calls.sh"  # calls already run, kept to rerun or read
    past_call "$1" || { echo "usage: bash benchmarks/h200_next.sh H54 (or a past call: see h200_past_calls.sh)" >&2; exit 2; } ;;
esac
tail -c 3000 "$log"
