#!/usr/bin/env bash
# H200 runs (benchmarks/H200_RUNBOOK.md says which come next), each one device call of < 10 min:
#   bash benchmarks/h200_next.sh H86|H90 (calls already run: benchmarks/h200_past_calls.sh, same usage)
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
H90) # (twenty-eighth session) the rows the one-GEMV default changes (its saving priced at 0.75 of the start-ups):
    # OPT-6.7B/OPT-30B consolidated and Llama-3-8B uniform at 1%, to merge into e2e-h200.json; the OPT rows again
    # under $DAK_COPY_WRAP=1 (the first copy rides the previous step's tail: with the copies hidden, is it the rest
    # of the gap to the all-HBM step?); then one H86 run (bench_linear's between-run spread)
    ab 200 DAK_COPY_WRAP=1 e2e-h90 python3 -m dak bench e2e --models opt-6.7b,opt-30b --batch 8 --ratios 1 \
        --systems dak-consolidated
    step 120 python3 -m dak bench e2e --models llama-3-8b --batch 8 --ratios 1 --systems dak-uniform \
        --out "$OUT/e2e-h90-uniform.json"
    tuning_cache
    step 150 python3 -u benchmarks/bench_linear.py --shapes llama2-7b.qkvo,llama2-7b.up,llama2-7b.down --tokens 8 \
        --ratios 1,2,5 --chained --out "$OUT/linear-h86-run1.json"
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
    past_call "$1" || { echo "usage: bash benchmarks/h200_next.sh H86|H90 (or a past call: see h200_past_calls.sh)" >&2; exit 2; } ;;
esac
tail -c 3000 "$log"
