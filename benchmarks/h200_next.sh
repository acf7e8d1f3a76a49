#!/usr/bin/env bash
# H200 runs (benchmarks/H200_RUNBOOK.md says which come next), each one device call of < 10 min:
#   bash benchmarks/h200_next.sh H115|H139b|H128|H116|H117|H119|H120|H114|H112|H111|H110|H109|H107|H106|H105|H104 (calls already run: `bash benchmarks/h200_past_calls.sh NAME` or this script with NAME)
# Run from the repository root on the device machine; writes at most 8 files to $OUT.
# Pass DAK_GIT_SHA=<local short sha> (the device copy's .git is stale: without it JSONs record "<old sha>-dirty").
set -u
export PYTHONPATH=src DAK_CACHE_DIR="${OUT:?set OUT}/cache"
mkdir -p "$DAK_CACHE_DIR" "$HOME/.cache/dak/cuda"
# nvcc's cubins go to dak's default cache, which device_cache.sh carries from machine to machine
[ -e "$DAK_CACHE_DIR/cuda" ] || ln -s "$HOME/.cache/dak/cuda" "$DAK_CACHE_DIR/cuda"
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
H115) # (thirty-fourth session, an H200) the batch-8 rows whose plans or runs the new defaults change
    # (DAK_ROOFLINE_KV_AHEAD=1: host K/V priced as copied ahead; DAK_COPY_WRAP=plan: one-GEMV chains wrapped), with
    # prefetch beside, to merge into e2e-h200.json: Llama-2-7B at 5/40%, OPT-6.7B at 1/5/20/40%, OPT-30B at 1/5/10%
    # (all but the 40% rows measured alone in H93b/H97/H97b at e955fdc)
    e2e="python3 -m dak bench e2e --batch 8 --systems dak-consolidated,prefetch"
    step 120 $e2e --models llama-2-7b --ratios 5,40 --out "$OUT/e2e-h115-llama-2-7b.json"
    step 200 $e2e --models opt-6.7b --ratios 1,5,20,40 --out "$OUT/e2e-h115-opt-6.7b.json"
    step 200 $e2e --models opt-30b --ratios 1,5,10 --out "$OUT/e2e-h115-opt-30b.json"
    ;;
H139b) # (forty-second session, an H200, after H139) the H200 rows where the exact search predicts most: OPT-30B at
    # 2% (h200-pcie: 23.18 against 24.44 ms) and 5% (2.5%), Llama-3-8B at 10% (10.54 against 11.31)
    e2e="python3 -m dak bench e2e --systems dak-consolidated --batch 8"
    ab 150 DAK_CONSOLIDATE_EXACT=1 e2e-h139b-opt-30b-bs8 $e2e --models opt-30b --ratios 2,5
    ab 90 DAK_CONSOLIDATE_EXACT=1 e2e-h139b-llama-3-8b-bs8 $e2e --models llama-3-8b --ratios 10
    ;;
H128) # (fortieth session, an H200) batch 512: on today's `h200-pcie` the planner predicts prefetch faster than every
    # dak policy for OPT-30B at 5% (91.9 against consolidated 96.5 ms; both link-bound at about 91 ms of link, priced
    # by different models), where the thirteenth session measured dak 1.07x faster on old code; Llama-2-7B at 5%
    # beside it (predicted 24.9 against 28.1). If prefetch wins, its placement or schedule is what dak lacks there
    e2e="python3 -m dak bench e2e --batch 512 --systems dak-consolidated,prefetch"
    step 260 $e2e --models opt-30b --ratios 5 --out "$OUT/e2e-h128-opt-30b-bs512.json"
    step 200 $e2e --models llama-2-7b --ratios 5 --out "$OUT/e2e-h128-llama-2-7b-bs512.json"
    ;;
H116) # (thirty-fourth session, an H200) H96 found 8 KV-length buckets 0-1% faster than 4 with host K/V priced in
    # place; priced as copied (the new default) the bucket count moves plans too: 8 re-plans OPT-30B at 5/10% and
    # OPT-6.7B at 20% (back to the in-place-priced plans). 4 against 8 on those rows, alternated twice; if 8 is
    # faster on both models, raise DEFAULT_KV_BUCKETS
    e2e="python3 -m dak bench e2e --batch 8 --systems dak-consolidated"
    for run in 1 2; do
        for kb in 4 8; do
            step 70 $e2e --models opt-30b --ratios 5,10 --kv-buckets $kb --out "$OUT/e2e-h116-opt-30b-kv$kb-$run.json"
            step 45 $e2e --models opt-6.7b --ratios 20 --kv-buckets $kb --out "$OUT/e2e-h116-opt-6.7b-kv$kb-$run.json"
        done
    done
    ;;
H117) # (thirty-fifth session, no device lent) its changes on a GPU: checkpoint folders read by their index, broken
    # ones refused before pinning (real pinned memory here), host_ratio's errors; then `dak generate --host-ratio 5%`
    # (now the consolidated plan at the table's x, was uniform) and its prefetch baseline on Llama-2-7B: TPOT near
    # the table's 5% row on today's defaults (8.48 ms in H97b)? prefetch's beside it
    step 120 python3 -u -m pytest -q -p no:cacheprovider tests/test_checkpoint_files.py tests/test_runtime_errors.py
    g="python3 -m dak generate --model llama-2-7b --host-ratio 5% --batch 8 --prompt-len 32 --gen-len 32"
    step 90 bash -c "$g --json > $OUT/generate-h117-llama-2-7b-5pct.json"
    step 90 $g --baseline prefetch
    ;;
H119) # (thirty-fifth session, after H117 on an H100: `dak generate --host-ratio 5%` on Llama-2-7B ran 11.38 ms,
    # predicted 9.37, where H107's plan (before DAK_ROOFLINE_KV_AHEAD=1) ran 9.80) the K/V pricing A/B on this GPU:
    # Llama-2-7B at 5% with the old pricing (=0) and the default (=1), alternated twice, prefetch once; then the
    # scoring-forward fix (CPU ids) and the checkpoint tests
    e2e="python3 -m dak bench e2e --models llama-2-7b --batch 8 --ratios 5"
    for run in 1 2; do
        step 60 env DAK_ROOFLINE_KV_AHEAD=0 $e2e --systems dak-consolidated --out "$OUT/e2e-h119-kv0-$run.json"
        step 60 $e2e --systems dak-consolidated --out "$OUT/e2e-h119-kv1-$run.json"
    done
    step 60 $e2e --systems prefetch --out "$OUT/e2e-h119-prefetch.json"
    step 150 python3 -u -m pytest -q -p no:cacheprovider tests/test_checkpoint_files.py tests/test_state_dict.py \
        "tests/test_runtime_gpu.py::test_forward_scores_like_hf_on_the_gpu"
    ;;
H120) # (thirty-fifth session, after H119) on an H100: where the default-priced plan of Llama-2-7B at 5% loses its
    # 1.8 ms (10.9 against 9.1 ms): it keeps 6 of 8 requests' K/V on the host in 13 layers (partial layers, priced
    # too low before too) and splits q/v/gate/up/down thinly in place (the H100 preset's in-place excess is the
    # H200's). Step profiles (time per kernel category, link idle) of both plans; rule: if the attention of the
    # partial layers holds the difference, the planner should not place partial host K/V layers at batch 8 (batch
    # 512 plans keep partial layers: that needs its own A/B); if the thin in-place splits do, refit the H100's
    # inplace_op_overhead_s from these profiles
    prof="python3 -u benchmarks/profile_step.py --model llama-2-7b --batch 8 --prompt-len 32 --gen-len 32 --ratios 0.05"
    step 150 $prof --out "$OUT/step-h120-kv1.json"
    step 150 env DAK_ROOFLINE_KV_AHEAD=0 $prof --out "$OUT/step-h120-kv0.json"
    ;;
H104) # (thirty-first session, after the last call) min_new_tokens holds EOS back inside the decode graphs (a
    # per-request minimum on the device): its graphed-vs-eager test, with the repetition-penalty one beside
    step 120 python3 -u -m pytest -q -p no:cacheprovider tests/test_runtime_gpu.py -k "min_new or repetition_penalty"
    ;;
H105) # (thirty-second session; the session's machine is an H100 80GB HBM3, not the H200) H104's tests, then the
    # numbers of an H100 preset: the GPU's identity and link, a calibration at the e2e workload, and each model's
    # all-HBM step (its per-layer small-kernel time) with prefetch beside, on the H200 preset (x = 0 plans alike)
    step 120 python3 -u -m pytest -q -p no:cacheprovider tests/test_runtime_gpu.py -k "min_new or repetition_penalty"
    nvidia-smi --query-gpu=name,memory.total,driver_version,pcie.link.gen.max,pcie.link.width.max --format=csv >>"$log"
    step 220 python3 -m dak calibrate --model llama-2-7b --no-tune --prompt-len 32 --gen-len 32 --no-progress \
        --out "$OUT/profile-h105.json"
    step 180 python3 -m dak bench e2e --models llama-2-7b,opt-6.7b,llama-3-8b --batch 8 --ratios 0 \
        --systems dak-consolidated,prefetch --hardware h200-pcie --out "$OUT/e2e-h105-x0.json"
    ;;
H106) # (thirty-second session, H100 80GB HBM3) dak's GEMV heuristic was read off an H200 sweep: at x = 0 the H100's
    # decode step runs its linears at ~2.5 TB/s against cuBLAS's 2.84 (H105's calibration). Sweep it on this GPU with
    # cuBLAS beside, the all-HBM steps with cuBLAS (DAK_HBM_GEMV=0), and Llama-2-7B at 1-10% with its baselines on
    # H105's calibrated profile
    step 260 python3 -u benchmarks/sweep_gemv.py --models llama-2-7b,llama-3-8b,opt-6.7b --tokens 8 --silu \
        --out "$OUT/sweep-gemv-h106.json"
    step 90 env DAK_HBM_GEMV=0 python3 -m dak bench e2e --models llama-2-7b,opt-6.7b,llama-3-8b --batch 8 --ratios 0 \
        --systems dak-consolidated --hardware h200-pcie --out "$OUT/e2e-h106-x0-cublas.json"
    step 150 python3 -m dak bench e2e --models llama-2-7b --batch 8 --ratios 1,2,5,10 \
        --systems dak-consolidated,prefetch,uva --hardware benchmarks/profiles/h100-llama-2-7b-h105.json \
        --out "$OUT/e2e-h106-llama-2-7b-calibrated.json"
    ;;
H114) # (thirty-third session, written after the device time ran out; an H100) the 5 batch-8 plans h100-sxm's 52 GB/s
    # copy-engine rate changes that H112 did not measure (0.2-6.1% of host bytes on other operators than with the
    # old rate, h100-sxm-s32): new preset against old, alternated twice; predicted within 10%? never slower? (9 files:
    # tar $OUT before it comes back)
    for run in 1 2; do
        for hw in h100-sxm h100-sxm-s32; do
            step 70 python3 -m dak bench e2e --models llama-2-7b,llama-3-8b --batch 8 --ratios 10,20 \
                --systems dak-consolidated --hardware $hw --out "$OUT/e2e-h114-llama-$hw-$run.json"
            step 40 python3 -m dak bench e2e --models opt-6.7b --batch 8 --ratios 20 \
                --systems dak-consolidated --hardware $hw --out "$OUT/e2e-h114-opt-$hw-$run.json"
        done
    done
    ;;
H112) # (thirty-third session, an H100) h100-sxm's copy-engine rate 48.7 -> 52 GB/s (fitted on H107's rows) re-plans
    # OPT-6.7B at 5% and 10%: the new preset against the old one (benchmarks/profiles/h100-sxm-s32.json), alternated twice
    e2e="python3 -m dak bench e2e --models opt-6.7b --batch 8 --ratios 5,10 --systems dak-consolidated"
    for run in 1 2; do
        step 60 $e2e --hardware h100-sxm --out "$OUT/e2e-h112-new-$run.json"
        step 60 $e2e --hardware benchmarks/profiles/h100-sxm-s32.json --out "$OUT/e2e-h112-old-$run.json"
    done
    ;;
H110) # (thirty-third session, on whichever GPU comes: the H100 80GB HBM3 by default) the GPU test suite, first half:
    # split linear (module, large N, GEMV, copy-ahead, KV ahead), timing, host release, calibration, auto
    for f in split_linear_gpu split_linear_large_n_gpu hbm_gemv_gpu copy_ahead_gpu kv_ahead timing_gpu host_release \
             calibrate_gpu hardware_auto; do
        step 240 python3 -u -m pytest -q -p no:cacheprovider "tests/test_$f.py"
    done
    ;;
H111) # (thirty-third session) the GPU test suite, second half: split attention, runtime, prefill graphs, bench e2e
    for f in split_attention_gpu runtime_gpu prefill_graphs_gpu bench_e2e_gpu; do
        step 330 python3 -u -m pytest -q -p no:cacheprovider "tests/test_$f.py"
    done
    ;;
H107) # (thirty-second session, H100 80GB HBM3) the h100-sxm preset (H105/H106's numbers) chosen by --hardware auto:
    # its GPU test, then the batch-8 table of three models on it with prefetch beside (predicted within 10%? dak vs prefetch)
    step 60 python3 -u -m pytest -q -p no:cacheprovider tests/test_hardware_auto.py
    step 30 python3 -m dak hardware
    step 330 python3 -m dak bench e2e --models llama-2-7b,llama-3-8b,opt-6.7b --batch 8 --ratios 0,1,2,5,10,20 \
        --systems dak-consolidated,prefetch --out "$OUT/e2e-h107-h100.json"
    ;;
H109) # (thirty-second session, little device time left) the short form of H107 (H100) or H108 (H200): auto's GPU
    # test, then on an H100 two models at 1/2/5% on h100-sxm with prefetch beside, on an H200 H93b
    step 60 python3 -u -m pytest -q -p no:cacheprovider tests/test_hardware_auto.py
    if nvidia-smi -L | grep -q H100; then
        step 150 python3 -m dak bench e2e --models llama-2-7b,opt-6.7b --batch 8 --ratios 1,2,5 \
            --systems dak-consolidated,prefetch --out "$OUT/e2e-h109-h100.json"
    else
        bash "$0" H93b >/dev/null; cat "$OUT/run-H93b.log" >>"$log"; rm -f "$OUT/run-H93b.log"
    fi
    ;;
*)  . "$(dirname "$0")/h200_past_calls.sh"  # calls already run, kept to rerun or read
    past_call "$1" || { echo "usage: bash benchmarks/h200_next.sh H115|H139b|H128|H116|H117|H119|H120|H114|H112|H111|H110|H109|H107|H106|H105|H104 (or a past call: see h200_past_calls.sh)" >&2; exit 2; } ;;
esac
tail -c 3000 "$log"
