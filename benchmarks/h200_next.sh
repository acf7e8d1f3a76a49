#!/usr/bin/env bash
# H200 runs (benchmarks/H200_RUNBOOK.md says which come next), each one device call of < 10 min:
#   bash benchmarks/h200_next.sh H39|H40|H41|H42|H38|H29|H18|H21|H19|H20 (calls already run: benchmarks/h200_past_calls.sh, same usage)
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
H39) # (twentieth session) split linear decode alone and chained by copy-ahead (8 operators in a row, as a decode step
    # runs them) against the prefetch baseline chained one operator ahead: Llama-2-7B and OPT-30B shapes
    tuning_cache
    step 560 python3 -u benchmarks/bench_linear.py --tokens 1,8,32 --chained \
        --shapes llama2-7b.qkvo,llama2-7b.up,llama2-7b.down,opt-30b.qkvo,opt-30b.fc1,opt-30b.fc2 \
        --out "$OUT/linear-decode-chained-s20-h200.json"
    ;;
H40) # (twentieth session) H39: chained 1.01-1.04 x bound on large operators at 2-10%, small ones (4096 wide)
    # 1.15-1.55 at 2%, the prefetch chain the same. Llama-3-70B's shapes chained (with the tuned config as a chain
    # variant); Llama-2-7B's shapes with one copy stream (default) and two ($DAK_COPY_STREAMS=2: a copy need not wait
    # for the one before it to finish); then H38
    tuning_cache
    step 240 python3 -u benchmarks/bench_linear.py --tokens 1,8,32 --chained \
        --shapes llama3-70b.qo,llama3-70b.up,llama3-70b.down --out "$OUT/linear-decode-chained-70b-s20-h200.json"
    ab 100 DAK_COPY_STREAMS=2 linear-decode-chained-7b-s20 python3 -u benchmarks/bench_linear.py --tokens 1,8,32 \
        --chained --ratios 0.5,1,2,5,10 --shapes llama2-7b.qkvo,llama2-7b.up,llama2-7b.down
    step 150 python3 -m dak bench e2e --real-capacity llama-2-70b --out "$OUT/e2e-h38-70b-rc-s19-h200.json"
    step 60 python3 -u -m pytest -q -p no:cacheprovider tests/test_prefill_graphs_gpu.py
    ;;
H41) # (twentieth session) OPT-30B's shapes chained again, with the tuned config as a chain variant. H40: Llama-2-7B's
    # shapes stay 1.07-1.20 x bound chained at 5% (0.8-1.6 MB copies run at 30-47 GB/s; two copy streams no help):
    # consecutive operators' host rows in one memcpy ($DAK_COPY_GROUP_MIB, re-homed into one pinned arena), 4 and 16 MiB
    tuning_cache
    step 200 python3 -u benchmarks/bench_linear.py --tokens 1,8,32 --chained \
        --shapes opt-30b.qkvo,opt-30b.fc1,opt-30b.fc2 --out "$OUT/linear-decode-chained-opt-s20-h200.json"
    for g in 4 16; do
        step 100 env DAK_COPY_GROUP_MIB=$g python3 -u benchmarks/bench_linear.py --tokens 1,8,32 --chained \
            --ratios 1,2,5,10 --shapes llama2-7b.qkvo,llama2-7b.up,llama2-7b.down \
            --out "$OUT/linear-decode-chained-7b-s20-group$g.json"
    done
    ;;
H42) # (twentieth session) H21 (OPT rows whose consolidated plans changed in 76b8fee, prefetch beside), then OPT-6.7B
    # at 1/2% with tuned split-kernel configs: H40 had untuned in-place configs at 0.5-1% host rows 1.24-1.87 x bound
    # chained where tuned ones were 0.94-1.12
    step 120 python3 -m dak bench e2e --models opt-6.7b --batch 8 --ratios 1,2,5 --systems dak-consolidated,prefetch \
        --out "$OUT/e2e-h21-opt-6.7b.json"
    step 150 python3 -m dak bench e2e --models opt-30b --batch 8 --ratios 2 --systems dak-consolidated,prefetch \
        --out "$OUT/e2e-h21-opt-30b.json"
    step 150 python3 -m dak bench e2e --models opt-6.7b --batch 8 --ratios 1,2 --systems dak-consolidated --tune \
        --out "$OUT/e2e-h42-opt-6.7b-tuned.json"
    ;;
H38) # (nineteenth session) H37: at real capacity the captured prefill (request chunks) ran out of HBM; the Engine now
    # captures only one-forward prefills: the prefill-graph GPU tests and the 70B case again
    step 150 python3 -m dak bench e2e --real-capacity llama-2-70b --out "$OUT/e2e-h38-70b-rc-s19-h200.json"
    step 60 python3 -u -m pytest -q -p no:cacheprovider tests/test_prefill_graphs_gpu.py
    ;;
H29) # (eighteenth session) the new large-N chunking at batch 512 (every operator there runs the large-N path)
    step 170 python3 -m dak bench e2e --models llama-2-7b --batch 512 --ratios 5 --systems dak-consolidated,dak-uniform \
        --out "$OUT/e2e-h29-bs512-s18-h200.json"
    ;;
H18) # (not run yet; seventeenth session) 69d37af, CPU-tested only: calibrated profiles inherit the preset's fitted
    # copy-engine start-up, in-place and host-KV excess (dak calibrate --base/--rebase), and the chain model prices
    # copy-engine linears' HBM rows on the measured all-HBM time. H17's consolidated plans on the calibrated profile
    # were 0.79-0.98x the preset's at 2-10%: both profiles side by side again
    e2e="python3 -m dak bench e2e --models llama-2-7b --batch 8 --ratios 1,2,5,10 --systems dak-greedy,dak-consolidated"
    step 90 $e2e --out "$OUT/e2e-h18-preset.json"
    step 90 $e2e --hardware benchmarks/profiles/h200-llama-2-7b-h17-inherited.json --out "$OUT/e2e-h18-calibrated.json"
    ;;
H21) # (not run yet; seventeenth session) 76b8fee: a split operator's lost GEMV epilogue costs a launch in the planner,
    # which changes the consolidated plans of OPT-6.7B at 1/2/5% and OPT-30B at 2%: those rows with prefetch beside
    step 120 python3 -m dak bench e2e --models opt-6.7b --batch 8 --ratios 1,2,5 --systems dak-consolidated,prefetch \
        --out "$OUT/e2e-h21-opt-6.7b.json"
    step 150 python3 -m dak bench e2e --models opt-30b --batch 8 --ratios 2 --systems dak-consolidated,prefetch \
        --out "$OUT/e2e-h21-opt-30b.json"
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
    past_call "$1" || { echo "usage: bash benchmarks/h200_next.sh H39|H40|H41|H42|H38|H29|H18|H21|H19|H20 (or a past call: see h200_past_calls.sh)" >&2; exit 2; } ;;
esac
tail -c 3000 "$log"
