#!/usr/bin/env bash
# H200 runs (benchmarks/H200_RUNBOOK.md says which come next), each one device call of < 10 min:
#   bash benchmarks/h200_next.sh H75|H64|H65|H30|H66 (calls already run: benchmarks/h200_past_calls.sh, same usage)
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
H75) # (twenty-fifth session) hbm_fork at 1-8 tokens with dak's GEMV for the HBM rows (H67/H69 ran autograd on: cuBLAS);
    # untuned configs unforked (DAK_HBM_FORK=0), each beside its forked variant, alone and chained
    step 280 env DAK_HBM_FORK=0 python3 -u benchmarks/bench_linear.py --no-tune --tokens 1,8 --ratios 0.5,1,2 --chained \
        --shapes llama2-7b.qkvo,llama2-7b.up,llama2-7b.down,opt-30b.qkvo,opt-30b.fc2 --out "$OUT/linear-h75-a.json"
    step 280 env DAK_HBM_FORK=0 python3 -u benchmarks/bench_linear.py --no-tune --tokens 1,8 --ratios 0.5,1,2 --chained \
        --shapes opt-30b.fc1,llama3-70b.qo,llama3-70b.up,llama3-70b.down --out "$OUT/linear-h75-b.json"
    ;;
H64) # (twenty-fourth session) the committed split-linear tuning cache was swept on the old timer over one L2-warm buffer:
    # Llama-2-7B's decode cases at N = 8, 1-5% with it (old configs), then fresh sweeps on the new timer and rotation,
    # same call (9 sweeps; widen to N 1/32 and 0.5/10% if they fit)
    lin="python3 -u benchmarks/bench_linear.py --shapes llama2-7b.qkvo,llama2-7b.up,llama2-7b.down --tokens 8 --ratios 1,2,5"
    tuning_cache
    step 200 $lin --chained --out "$OUT/linear-h64-old-cache.json"
    rm -f "$DAK_CACHE_DIR/split_linear.json"
    step 380 $lin --chained --out "$OUT/linear-h64-fresh.json"
    cp "$DAK_CACHE_DIR/split_linear.json" "$OUT/tuning-cache-h64.json" 2>/dev/null
    ;;
H65) # (twenty-fourth session; trimmed in the twenty-fifth, which ran the KV copy-ahead, copy-ahead and large-N GPU files:
    # 18 + 21 passed) the bench-e2e GPU file, not run on the new timer and tuner rotation; H58: OPT's unfused LayerNorm
    # 4.4 us a launch against add + LayerNorm's 2.5 (its w/b loads now issue before the reductions, 93ff13d+): every norm
    # alone, torch's beside
    step 300 python3 -u -m pytest -q -p no:cacheprovider tests/test_bench_e2e_gpu.py
    step 60 python3 -u benchmarks/probe_norms.py --out "$OUT/probe-norms-h65.json"
    ;;
H30) # (twenty-fourth session) the chain model now prices a calibrated copy-engine linear's copy start-up
    # (stream.curve_copy_overhead): on the H17 profile at 2% consolidated keeps greedy's in-place plan (predicted
    # 4.22 ms; greedy's measured 4.01 in H18) instead of the streamed o_proj chain (measured 4.37). H24's A/B on it
    curves_ab h30
    ;;
H66) # (twenty-fourth session) Llama-2-7B at 2% moved 3.96 -> 4.01 ms (EB/bound 0.91 -> 0.8998) on the in-place tiles
    # default (H55): its plan keeps 448 of lm_head's 32000 rows in place, a >= 7168-row matrix the tiles change.
    # A/B of DAK_INPLACE_TILES, twice, alternating
    for run in 1 2; do
        ab 100 DAK_INPLACE_TILES=0 "e2e-h66-$run" python3 -m dak bench e2e --batch 8 --models llama-2-7b --ratios 2 \
            --systems dak-consolidated
    done
    ;;
*)  . "$(dirname "$0")/h200_past_calls.sh"  # calls already run, kept to rerun or read
    past_call "$1" || { echo "usage: bash benchmarks/h200_next.sh H75|H64|H65|H30|H66 (or a past call: see h200_past_calls.sh)" >&2; exit 2; } ;;
esac
tail -c 3000 "$log"
