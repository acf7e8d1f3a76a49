#!/usr/bin/env bash
# H200 runs (benchmarks/H200_RUNBOOK.md says which come next), each one device call of < 10 min:
#   bash benchmarks/h200_next.sh H53 (calls already run: benchmarks/h200_past_calls.sh, same usage)
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
H53) # (twenty-third session) H52: $DAK_INPLACE_TILES=1 took the chained heuristic from 1.25-1.35 to 0.93-1.15 x bound
    # on OPT-30B and Llama-2-7B up_proj at N 1/8 and 0.5-1%; dak-greedy's plans keep such shares (plan_shares.py
    # --system dak-greedy: Llama-2-7B gate/up, OPT-6.7B fc1, Llama-3-8B gate/up, OPT-30B every linear at 1-2%). e2e A/B
    ab 280 DAK_INPLACE_TILES=1 e2e-h53 python3 -m dak bench e2e --batch 8 --models llama-2-7b,opt-6.7b,llama-3-8b,opt-30b \
        --ratios 1,2,5 --systems dak-greedy,dak-consolidated
    ;;
H52) # (twenty-first session) $DAK_INPLACE_TILES=1: untuned in-place decode configs of matrices >= 7168 rows take the
    # tuner's 32/64-row tiles (H40/H41: tuned 0.92-1.11 x bound chained, heuristic 1.24-1.87 at 0.5-1%). The chained
    # bench's heuristic variant with and without it (outputs checked before timing), then the module graph test with it
    tuning_cache
    ab 200 DAK_INPLACE_TILES=1 linear-h52 python3 -u benchmarks/bench_linear.py --tokens 1,8,32 --chained \
        --ratios 0.5,1,2 --shapes opt-30b.qkvo,opt-30b.fc2,llama3-70b.qo,llama3-70b.down,llama2-7b.up
    step 120 env DAK_INPLACE_TILES=1 python3 -u -m pytest -q -p no:cacheprovider tests/test_split_linear_gpu.py \
        -k "module_under_cuda_graph or copy_engine_path"
    ;;
H51) # (twenty-first session) the standalone copy-engine attention forks again (H46/H48); does the decode step's attention,
    # copied a layer ahead, gain from forking its staged part too ($DAK_KV_AHEAD_FORK=1)? Plans with host K/V, A/B twice;
    # then the KV copy-ahead GPU tests with it on
    for run in 1 2; do
        ab 150 DAK_KV_AHEAD_FORK=1 "e2e-h51-$run" python3 -m dak bench e2e --batch 8 --models opt-6.7b,opt-30b --ratios 10 \
            --systems dak-consolidated
    done
    step 100 env DAK_KV_AHEAD_FORK=1 python3 -u -m pytest -q -p no:cacheprovider tests/test_kv_ahead.py
    ;;
H18) # (not run yet; seventeenth session) 69d37af, CPU-tested only: calibrated profiles inherit the preset's fitted
    # copy-engine start-up, in-place and host-KV excess (dak calibrate --base/--rebase), and the chain model prices
    # copy-engine linears' HBM rows on the measured all-HBM time. H17's consolidated plans on the calibrated profile
    # were 0.79-0.98x the preset's at 2-10%: both profiles side by side again
    e2e="python3 -m dak bench e2e --models llama-2-7b --batch 8 --ratios 1,2,5,10 --systems dak-greedy,dak-consolidated"
    step 90 $e2e --out "$OUT/e2e-h18-preset.json"
    step 90 $e2e --hardware benchmarks/profiles/h200-llama-2-7b-h17-inherited.json --out "$OUT/e2e-h18-calibrated.json"
    ;;
H19) # (not run yet; seventeenth session) the CE_GEMV / SPLIT_GEMV_TILES GPU tests, which ran past H14's 110 s step
    step 300 env DAK_CE_GEMV=1 DAK_SPLIT_GEMV_TILES=1 python3 -u -m pytest -q -p no:cacheprovider \
        tests/test_split_linear_gpu.py tests/test_copy_ahead_gpu.py
    ;;
H20) # (not run yet; seventeenth session) OPT's shapes have no curves in a Llama profile: calibrate OPT-6.7B, then its
    # e2e rows on the calibrated profile and on the preset, same call
    step 120 python3 -m dak calibrate --model opt-6.7b --no-tune --prompt-len 32 --gen-len 32 --no-progress \
        --out "$OUT/profile-opt-6.7b-h20.json"
    e2e="python3 -m dak bench e2e --models opt-6.7b --batch 8 --ratios 0,1,2,5 --systems dak-greedy,dak-consolidated"
    step 80 $e2e --out "$OUT/e2e-h20-preset.json"
    step 80 $e2e --hardware "$OUT/profile-opt-6.7b-h20.json" --out "$OUT/e2e-h20-calibrated.json"
    ;;
*)  . "$(dirname "$0")/h200_past_calls.sh"  # calls already run, kept to rerun or read
    past_call "$1" || { echo "usage: bash benchmarks/h200_next.sh H53 (or a past call: see h200_past_calls.sh)" >&2; exit 2; } ;;
esac
tail -c 3000 "$log"
