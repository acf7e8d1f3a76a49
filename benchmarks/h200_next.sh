#!/usr/bin/env bash
# H200 runs (benchmarks/H200_RUNBOOK.md says which come next), each one device call of < 10 min:
#   bash benchmarks/h200_next.sh H82 (calls already run: benchmarks/h200_past_calls.sh, same usage)
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
H78) # (twenty-sixth session) hbm_fork's GEMV launch by rows (fork_config: 32x256x4 up to 8192 rows, the heuristic
    # above) is pieced from H77 (<= 8192 rows) and H75 (taller): both sides in one run, untuned configs unforked
    # beside their forked variants at 1 and 8 tokens, alone and chained; then batch 8 end to end with hbm_fork at
    # every decode batch (DAK_HBM_FORK=1) against the default (fork at 17-64 tokens only), the planner's predictions
    # beside. If forked wins everywhere, make 1-16 tokens the default (dak.shares.hbm_fork_for)
    step 150 env DAK_HBM_FORK=0 python3 -u benchmarks/bench_linear.py --no-tune --tokens 1,8 --ratios 0.5,1,2 \
        --chained --out "$OUT/linear-h78.json"
    e2e="python3 -m dak bench e2e --models llama-2-7b,llama-3-8b,opt-6.7b --batch 8 --ratios 1,2,5"
    ab 140 DAK_HBM_FORK=1 e2e-h78 $e2e --systems dak-greedy,dak-consolidated
    ;;
H79) # (twenty-sixth session) decode sweeps now descend from both host paths (tuning.sweep): H64 again, the
    # committed cache (old configs) against fresh sweeps, Llama-2-7B N = 8 at 1-5%; if fresh wins, refresh the
    # committed cache (tuning-cache-h200.json) in later calls
    cache_vs_fresh h79 150 420
    ;;
H80) # (twenty-sixth session) GPU tests of the code after fa06a79 (fork_config, the two-path tuning sweep)
    step 400 python3 -u -m pytest -q -p no:cacheprovider tests/test_split_linear_gpu.py tests/test_split_linear_fork.py \
        tests/test_timing_gpu.py
    ;;
H81) # (twenty-sixth session) OPT-6.7B all in HBM at batch 8 was 0.87 x bound (H58: 4.2 ms a step, its unfused
    # LayerNorm 4.5 us a launch in the graph); dak's LayerNorm now takes 1.9 us alone (H65): the step again, end to end
    # and profiled, Llama-2-7B beside
    step 120 python3 -m dak bench e2e --models opt-6.7b,llama-2-7b --batch 8 --ratios 0 --systems dak-consolidated \
        --out "$OUT/e2e-h81-x0.json"
    step 200 python3 -u benchmarks/profile_step.py --model opt-6.7b --ratios 0 --out "$OUT/step-opt-6.7b-h81.json"
    ;;
H82) # (twenty-seventh session) $DAK_OPT_QSCALE=1 (q's scaling as the fused q/k/v GEMV's epilogue) was 1.00x in
    # H16: the q it sliced out of the product was copied by a launch of its own (query.contiguous() in
    # dak.runtime.kv); decode attention now reads it at its strides. OPT batch 8, default vs qscale, profiled
    # at 0%, then the GPU tests of both changes
    ab 200 DAK_OPT_QSCALE=1 e2e-h82 python3 -m dak bench e2e --models opt-6.7b,opt-30b --batch 8 --ratios 0,1,2,5 \
        --systems dak-consolidated
    step 200 env DAK_OPT_QSCALE=1 python3 -u benchmarks/profile_step.py --model opt-6.7b --ratios 0 \
        --out "$OUT/step-opt-6.7b-h82-qscale.json"
    step 300 python3 -u -m pytest -q -p no:cacheprovider tests/test_split_attention_gpu.py \
        "tests/test_runtime_gpu.py::test_fused_projection_graphs_match_hf_eager"
    ;;
*)  . "$(dirname "$0")/h200_past_calls.sh"  # calls already run, kept to rerun or read
    past_call "$1" || { echo "usage: bash benchmarks/h200_next.sh H82 (or a past call: see h200_past_calls.sh)" >&2; exit 2; } ;;
esac
tail -c 3000 "$log"
