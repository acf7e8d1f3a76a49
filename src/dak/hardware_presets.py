"""Hardware presets: the measured GPUs (H200, H100 behind PCIe Gen5) and datasheet ones, each with
the measurements behind its numbers; `CHANGED` says which runs planned with a preset's old values
(dak.hardware.run_profile). `dak.hardware.PRESETS` is this dict."""

from __future__ import annotations

import dataclasses

from .hardware import HardwareProfile
from .units import GIB, KIB, MIB


PRESETS: dict[str, HardwareProfile] = {
    # Measured on our H200 SXM behind a PCIe Gen5 host link: H2D copy 55.0 GB/s
    # (1 GiB pinned), SM zero-copy reads 51.3 GB/s from cudaHostAlloc'd memory (43 GB/s from
    # cudaHostRegister'd; benchmarks/results/probe-host-read-h200.json), cuBLAS GEMV 3707 GB/s
    # (D2D copy 4056 GB/s read+write), 8192^3 bf16 matmul 788 TFLOP/s.
    # nvidia-smi reports 143771 MiB (~139 GiB usable).
    # layer_overhead_s: (TPOT - operator bound) / layers of dak's all-HBM decode step, batch 8,
    # q/k/v and gate/up fused: Llama-2-7B (4.66 - 3.63) ms, Llama-3-8B (4.97 - 4.07) and OPT-6.7B
    # (4.72 - 3.65), / 32 layers, mean 31.2 us; unfused_op_overhead_s: the same steps unfused,
    # (unfused - fused) / 32 layers / extra launches per layer (3, 3, 2), mean 5.2 us
    # (benchmarks/results/e2e-{fused,unfused}-s7-h200.json, one call, 2026-12-01). Before fusion
    # it was 49 us (e2e-h200.json, 2026-11-29).
    # fused_layer_overhead_s: the same for Llama-family layers with dak's fused layers and
    # one-launch rotary (the defaults since 2026-12-02): Llama-2-7B (4.43, 4.38 - 3.63) ms and
    # Llama-3-8B (4.70, 4.78 - 4.07), two calls each (e2e-trims-rotary-s11-h200.json,
    # e2e-llama-f1-s11-h200.json), / 32 layers, mean 22.6 us. OPT-6.7B still matches 31.2 us.
    # Split operators beyond the roofline: least squares of (measured - predicted) TPOT over the
    # 36 dak-greedy/dak-uniform runs at x > 0 of Llama-2-7B, OPT-6.7B and Llama-3-8B (batch 8,
    # untuned configs, benchmarks/results/e2e-h200.json): 5.3 us per split linear read in place,
    # 23.4 us per split linear through the copy engine, and 0.9 x the host-KV link time of split
    # attention. Fitted leaving one model out, they predict the held-out model's greedy runs
    # within 10% in 18 of 18 (uniform: 12 of 18, worst 15%).
    # Session 5 (2026-12-01) made copies one chunk per operator and KV-length buckets the
    # default; refitted (benchmarks/fit_split_overheads.py) on the 8 dak-consolidated runs with
    # that code (e2e-bs8-chunks1-h200.json, e2e-opt-30b-chunks1-h200.json): 5.5 us in place
    # (kept 5.3), 13.9 us per copy-engine linear, 0.53 x the host-KV link time. On those runs
    # predicted/measured went from 1.00-1.20 to 0.98-1.16; the consolidated plans at batch 8 of
    # the four e2e models are the same with either set except OPT-30B at 40%.
    # Sixteenth session (2026-12-02): dak's Triton GEMV for all-HBM decode linears, SiLU * up in
    # the gate/up GEMV's epilogue, rotary with the KV append and fused OPT layers (the defaults
    # since) cut the all-HBM step: refitted the same way from one call each (e2e-h10-gemv-silu-
    # s16-h200.json, e2e-h10-x0-s16-h200.json): fused_layer_overhead_s Llama-2-7B (3.92 - 3.63)
    # and Llama-3-8B (4.35 - 4.07) ms / 32, mean 8.9 us (was 22.6); layer_overhead_s OPT-6.7B
    # (4.19 - 3.65) / 32 = 16.9 us (was 31.2). The consolidated plans of the e2e table (4 models,
    # batch 8 and 512) stay the same in 54 of 56 cases; OPT-6.7B at 2 and 5% (batch 8) change.
    # Thirty-first session: the default is this preset with dak's all-HBM decode GEMV priced at its
    # own rate, below (H94, alternated twice in one call: its 5 differing batch-8 plans ran as fast
    # as this one's within the call's drift, predicted within 10% in 12 of 12 runs). This one, the
    # default before, stays for reproducing the predictions of the runs made with it.
    "h200-pcie-cublas": HardwareProfile(
        name="h200-pcie-cublas", hbm_bandwidth=3.7e12, host_bandwidth_ce=55.0e9,
        host_bandwidth_sm=51.3e9, flops=788e12, sm_count=132, smem_per_sm=228 * KIB,
        hbm_capacity=143771 * MIB, host_ram=128 * GIB, layer_overhead_s=16.9e-6, fused_layer_overhead_s=8.9e-6,
        unfused_op_overhead_s=5.2e-6, inplace_op_overhead_s=5.3e-6, copy_op_overhead_s=13.9e-6,
        attention_host_excess=0.53),
    # The default (thirty-first session): the same machine with dak's all-HBM decode GEMV priced at
    # its own rate. gemv_bandwidth: the affine fit of the sixteenth
    # session's GEMV sweep (sweep-gemv-{llama,opt}-s16-h200.json, heuristic launch, 19 matrices):
    # 4.19 TB/s + 4.2 us a launch, within 0.87-1.05x of each; the launch cost goes to the layer
    # overhead, one for every layer: the mean of (measured - operators) / layers of the four
    # all-HBM batch-8 rows of e2e-h200.json (Llama-2-7B 22.2, Llama-3-8B 23.5, OPT-6.7B 25.2,
    # OPT-30B 16.2 us) = 21.8 us. The 24 rows at x > 0, not fitted on, priced with the plans
    # they ran: predicted within 10% 24 of 24, as are the 4 fitted (h200-pcie-cublas: 26 of 28,
    # OPT-30B at 0/1% 1.13/1.10); each model priced with the overhead fitted on the other three: 7 of 7
    # within 10% for every model (0.96-1.06). benchmarks/fit_gemv_rate.py --leave-one-out prints it all.
    # It plans 5 of the 28 rows differently (Llama-2-7B at 5/10%, OPT-6.7B at 5/10/20%); H94
    # (e2e-h94-{preset,gemv}-{1,2}-s31-h200.json) ran both presets there twice, alternated: per row
    # (sum of its two runs) 1.02-1.04x h200-pcie-cublas's time, with the control (Llama-2-7B at 20%,
    # the same plan) at 1.03x (drift between runs), predicted/measured 0.90-1.02.
    "h200-pcie": HardwareProfile(
        name="h200-pcie", hbm_bandwidth=3.7e12, host_bandwidth_ce=55.0e9,
        host_bandwidth_sm=51.3e9, flops=788e12, sm_count=132, smem_per_sm=228 * KIB,
        hbm_capacity=143771 * MIB, host_ram=128 * GIB, layer_overhead_s=21.8e-6,
        unfused_op_overhead_s=5.2e-6, inplace_op_overhead_s=5.3e-6, copy_op_overhead_s=13.9e-6,
        attention_host_excess=0.53, gemv_bandwidth=4.19e12),
    # H100 SXM (nvidia-smi "NVIDIA H100 80GB HBM3", 81559 MiB; torch total_memory 79.2 GiB, the
    # capacity here) behind a PCIe Gen5 x16 host link,
    # thirty-second session (benchmarks/results/h105-s32-h100.log, `dak calibrate --model
    # llama-2-7b --no-tune`, benchmarks/profiles/h100-llama-2-7b-h105.json): cuBLAS GEMV 2.84 TB/s
    # (8 tokens, 8192 x 28672), copy engine H2D 48.7 GB/s (256 MiB pinned), SM zero-copy reads
    # 51.1 GB/s (best window), 8192^3 bf16 matmul 803 TFLOP/s; unfused_op_overhead_s 3.5 us
    # (calibrate's fused products). gemv_bandwidth 2.96 TB/s + 3.4 us a launch: the affine fit of
    # dak's GEMV heuristic on this GPU (sweep-gemv-h106-s32-h100.json: 15 matrices of Llama-2-7B,
    # Llama-3-8B, OPT-6.7B at 8 tokens, fit / measured 0.92-1.03; the heuristic read off the H200
    # is within 3% of the best of 48 configs and 0.98-1.15x cuBLAS there); layer_overhead_s the
    # mean of the three all-HBM batch-8 steps' (measured - operators) / layers (e2e-h105-x0-s32-h100.json:
    # 27.9, 25.6, 23.8 us) = 25.8 us (benchmarks/fit_gemv_rate.py). The split-operator excesses (in place, copy engine, host KV)
    # are the H200 preset's: they are link-side costs of the same PCIe Gen5 link, not refitted here.
    # host_bandwidth_ce 52 GB/s (thirty-third session; 48.7 before, saved as
    # preset h100-sxm-s32 and benchmarks/profiles/h100-sxm-s32.json), an effective rate: the decode
    # step's chained copies keep up with calibrate's one 256 MiB copy even counting the step's gaps
    # (Llama-3-8B at 10% stages about 0.55 GB a step, K/V up to the bucket, in 11.36 ms: 48.8 GB/s).
    # benchmarks/fit_ce_rate.py on H107's 15 batch-8 rows at x > 0 (e2e-h107-s33-h100.json): at 48.7
    # every plan as it ran, 13 within 10% (Llama-2-7B and Llama-3-8B at 10%: 1.12, 1.13); at 52, 8
    # plans kept, all within 10% (median 0.99), and 7 re-planned: OPT-6.7B at 5% (40% of its host
    # bytes on other operators) and 10% (2.9%), measured in H112 (e2e-h112-{new,old}-{1,2}-s33-h100.json,
    # alternated twice in one call: 12.91/12.88 and 25.38/25.29 ms against the old plans'
    # 12.89/12.86 and 25.51/25.44, predicted/measured 1.07-1.08 and 1.02, the old preset's 1.12 and
    # 1.07); the other 5 (0.2-6.1% moved, Llama 10/20%, OPT-6.7B at 20%) in H114 (thirty-fifth session, on the
    # thirty-fourth's defaults; e2e-h114-*-s35-h100.json, alternated twice): as fast as on h100-sxm-s32 within
    # 1-2%, predicted within 10% in 10 of 10 runs (h100-sxm-s32: 3 of 10).
    # copy_op_overhead_s 7 us (thirty-ninth session; 13.9 before, the H200's fit, saved as h100-sxm-s38):
    # at 13.9 the link-bound plans were priced 2-9% over what they ran (benchmarks/fit_ce_rate.py
    # --copy-overheads on H114/H121's rows); 7 us re-plans 13 of the 24 batch-8 rows of Llama-2-7B,
    # Llama-3-8B, OPT-6.7B and OPT-30B at 1-40%, all 13 measured against the old plans on H100s in one
    # session (H123, H124 alternated twice, H125; e2e-h12{3,4,5}*-s39-h100.json, means of 1-3 runs a side):
    # faster on 8 (Llama-2-7B at 5% by 7.1%, Llama-3-8B at 10% by 3.1%, the rest 0.7-2.0%), within 0.4% on
    # 2, slower on 3 (Llama-2-7B at 10/20%, Llama-3-8B at 20%: 0.8-1.5%), geometric mean 0.989x;
    # predicted/measured 0.96-1.08 on all 13 (at 13.9 us Llama-3-8B at 10% was 1.11), closer on 9.
    "h100-sxm": HardwareProfile(
        name="h100-sxm", hbm_bandwidth=2.84e12, host_bandwidth_ce=52.0e9,
        host_bandwidth_sm=51.1e9, flops=803e12, sm_count=132, smem_per_sm=228 * KIB,
        hbm_capacity=85_017_493_504, host_ram=128 * GIB,
        unfused_op_overhead_s=3.5e-6, inplace_op_overhead_s=5.3e-6, copy_op_overhead_s=7e-6,
        attention_host_excess=0.53, gemv_bandwidth=2.963e12, layer_overhead_s=25.8e-6),
    # GH200 datasheet: 96 GB HBM3 at 4.0 TB/s, 900 GB/s NVLink-C2C (both host paths).
    "gh200": HardwareProfile(
        name="gh200", hbm_bandwidth=4.0e12, host_bandwidth_ce=900e9,
        host_bandwidth_sm=900e9, flops=990e12, sm_count=132, smem_per_sm=228 * KIB,
        hbm_capacity=96 * 10**9, host_ram=480 * 10**9),
    # RTX PRO 6000 Blackwell: 96 GB GDDR7 at 1.8 TB/s, PCIe Gen5 x16 64 GB/s.
    # host_ram = 256 GiB is an assumption (typical workstation), not a spec.
    "rtx-pro-6000": HardwareProfile(
        name="rtx-pro-6000", hbm_bandwidth=1.8e12, host_bandwidth_ce=64e9,
        host_bandwidth_sm=64e9, flops=500e12, sm_count=188, smem_per_sm=100 * KIB,
        hbm_capacity=96 * 10**9, host_ram=256 * GIB),
}


# the default's name until the thirty-first session made it the default (runs and commands name it)
PRESETS["h200-pcie-gemv"] = dataclasses.replace(PRESETS["h200-pcie"], name="h200-pcie-gemv")
# h100-sxm until the thirty-ninth session (the H200's 13.9 us of start-up per copy; H112-H125 ran on it)
PRESETS["h100-sxm-s38"] = dataclasses.replace(PRESETS["h100-sxm"], name="h100-sxm-s38", copy_op_overhead_s=13.9e-6)
# h100-sxm as the thirty-second session made it (copy engine at calibrate's 48.7 GB/s; H107 ran on it)
PRESETS["h100-sxm-s32"] = dataclasses.replace(PRESETS["h100-sxm-s38"], name="h100-sxm-s32", host_bandwidth_ce=48.7e9)
# presets whose values changed: (name, runs dated before this, the preset holding their old values),
# the older change of a preset first
CHANGED = (("h200-pcie", "2026-12-05T05:30", "h200-pcie-cublas"),  # H94 ended 05:19, H98 began 05:38
           ("h100-sxm", "2026-12-05T18:00", "h100-sxm-s32"),  # H107 began 17:32, H112 18:29
           ("h100-sxm", "2026-12-06T08:30", "h100-sxm-s38"))  # H125's last run 07:57
