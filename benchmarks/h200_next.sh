#!/usr/bin/env bash
# The next H200 session's runs (benchmarks/H200_RUNBOOK.md), in four device calls of < 10 min:
#   bash benchmarks/h200_next.sh A|B|C|D
# Run from the repository root on the device machine; writes at most 8 files to $OUT.
# Pass DAK_GIT_SHA=<local short sha> (the device copy has no .git).
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
case "$1" in
A)  # where the decode step's time goes; the copy engine for every host share
    step 90 python3 -m pytest -q -m gpu tests/test_copy_ahead_gpu.py
    step 150 python3 benchmarks/profile_step.py --model opt-6.7b --ratios 0,0.02,0.05 --out "$OUT/step-opt-6.7b.json"
    step 110 python3 benchmarks/profile_step.py --model llama-2-7b --ratios 0,0.05 --out "$OUT/step-llama-2-7b.json"
    step 200 env DAK_CE_MIN_SHARE=0 python3 -m dak bench e2e --models opt-6.7b,llama-2-7b --batch 8 \
        --ratios 1,2,5,10 --systems dak-greedy,prefetch --out "$OUT/e2e-ce-every-share.json"
    ;;
D)  # issue 5: a third model; predictions with layer_overhead_s on a model it was not fitted on
    step 420 python3 -m dak bench e2e --models llama-3-8b --batch 8 \
        --systems dak-greedy,dak-uniform,all-hbm,prefetch,uva --out "$OUT/e2e-llama-3-8b.json"
    ;;
B)  # issue 6: full calibration, fidelity, measured curves vs roofline end to end
    step 300 python3 -m dak calibrate --model llama-2-7b --no-progress --out "$OUT/profile-llama-2-7b.json"
    step 120 python3 benchmarks/fidelity.py --profile "$OUT/profile-llama-2-7b.json" --model llama-2-7b \
        --out "$OUT/fidelity-llama-2-7b.json"
    step 120 python3 -m dak bench e2e --models llama-2-7b --batch 8 --systems dak-greedy \
        --hardware "$OUT/profile-llama-2-7b.json" --out "$OUT/e2e-measured-curves.json"
    ;;
C)  # issue 5 at batch 512; issue 4's full attention sweep
    step 260 python3 -m dak bench e2e --models llama-2-7b --batch 512 --ratios 0,5,20,40 \
        --systems dak-greedy,dak-uniform,prefetch --out "$OUT/e2e-bs512.json"
    step 280 python3 benchmarks/bench_attention.py --out "$OUT/attention-h200.json"
    ;;
*)  echo "usage: bash benchmarks/h200_next.sh A|B|C|D" >&2; exit 2 ;;
esac
tail -c 3000 "$log"
