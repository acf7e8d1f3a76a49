"""How host rows cross the link: the knobs the kernels, the copy-ahead chain, the runtime's
memory check and the planner share (this module stays free of torch and triton).

- ce_min_share: the host share above which an untuned decode config uses the copy engine
  (also the planner's per-operator overhead class);
- ce_chunks_default: copy-engine chunks per operator in an untuned decode config;
- ce_hbm_cublas: whether such a config multiplies its HBM rows by cuBLAS (on by default);
- the copy-ahead chains' copy streams, staging slots, copy groups and wrap-around live in
  dak.copy_shares (re-exported here);
- fused_layer_enabled: whether Llama-family decoder layers run fused (dak.runtime.fused; the
  planner's per-layer overhead follows it); dak.env_snapshot.env_flag reads any such 0/1 switch.
Each has a measured default and an environment variable for experiments on the GPU.
"""

from __future__ import annotations

from .copy_shares import (MANY_TOKEN_COPY_SLOTS, chain_one_chunk, copy_group_bytes, copy_slot_count,  # noqa: F401
                          copy_stream_count, copy_wrap_enabled, copy_wrap_mode, kv_copy_stream_name, kv_pair_copy,
                          kv_slot_count, many_decode_tokens)
from .env_snapshot import env_flag, env_int, environ  # noqa: F401 -- env_flag re-exported (dak.runtime_env)
from .env_snapshot import get as env_get

# Above this host share a memory-bound operator is link-bound on a PCIe Gen5 GPU (x* = B_h /
# (B_h + B_g) ~ 1.5% on the H200); the untuned config then moves host rows by copy engine.
LINK_BOUND_SHARE = 0.02
# A decode attention's host K/V (per layer, at the cache's capacity) below this are read in place by
# the untuned config; from it on the copy engine stages them (dak.kernels.attention_config, and the
# planner's copied_ahead): a copy and its wait cost more than a few MiB of SM loads.
ATTENTION_CE_MIN_BYTES = 4 << 20


def fused_layer_enabled() -> bool:
    """$DAK_FUSED_LAYER: '1' or unset fuses Llama-family decoder layers' add + norm and SiLU * up
    (dak.runtime.fused), '0' not; the planner's overhead follows it (dak.planner.overhead)."""
    return env_flag("DAK_FUSED_LAYER", True)


def rotary_kv_enabled() -> bool:
    """$DAK_ROTARY_KV (default on): the decode step's rotary (and Qwen3's q/k norms) ride in the KV append's
    launch (dak.runtime.fused)."""
    return env_flag("DAK_ROTARY_KV", True)


def ce_min_share() -> float:
    """Host share above which untuned decode configs use the copy engine: LINK_BOUND_SHARE, or
    $DAK_CE_MIN_SHARE (a fraction in [0, 1]; 0 = every host share) for experiments."""
    raw = env_get("DAK_CE_MIN_SHARE")
    if raw is None:
        return LINK_BOUND_SHARE
    try:
        v = float(raw)
    except ValueError:
        v = -1.0
    if not 0.0 <= v <= 1.0:
        raise ValueError(f"DAK_CE_MIN_SHARE must be a fraction in [0, 1], got {raw!r}")
    return v


# Copy-engine chunks per operator in an untuned decode config (large N takes 2 or 4:
# dak.kernels.config.large_n_chunking). More chunks pipeline copy and GEMM
# inside one operator, but every copy pays the engine's start-up (HARDWARE.md: 1 MiB copies run
# at 33.5 GB/s, 8 MiB at 48, 1 GiB at 55), and in a decode step copy-ahead already overlaps one
# operator's copy with the previous one's GEMMs. H200, bs 8, x = 5%, consolidated: 1 chunk
# instead of 4 made OPT-30B 64.24 -> 60.54 ms and OPT-6.7B 14.53 -> 13.47 ms per token (2 chunks:
# 62.33 / 13.90; benchmarks/results/e2e-ce-chunks-*-h200.json).
CE_CHUNKS = 1


def ce_chunks_default() -> int:
    """CE_CHUNKS, or $DAK_CE_CHUNKS (1 to 64) for experiments."""
    return env_int("DAK_CE_CHUNKS", CE_CHUNKS, 1, 64)


def ce_hbm_cublas() -> bool:
    """Whether untuned decode configs that stage every host row by copy engine multiply their
    HBM rows with cuBLAS (as the prefetch baseline does) instead of the split kernel: on, or
    $DAK_CE_HBM_CUBLAS=0 for the split kernel. Measured on the H200 (tenth session, call D2, B=8,
    one call): faster in all 8 link-bound cases tried, by 0.1-2.2% (OPT-30B at 5%: 58.20 vs
    59.21 ms; OPT-6.7B at 20%: 51.66 vs 52.80 ms)."""
    return env_flag("DAK_CE_HBM_CUBLAS", True)


def gemv_enabled() -> bool:
    """All-HBM decode linears run dak's GEMV (dak.kernels.hbm_gemv) unless $DAK_HBM_GEMV=0 (torch's
    cuBLAS then); the planner's epilogue and one-GEMV pricing follow it."""
    return env_flag("DAK_HBM_GEMV", True)


def gemv_silu_enabled() -> bool:
    """A fused Llama-family layer whose gate and up projections are one all-HBM ProjectionGroup
    computes SiLU(gate) * up in that GEMV's epilogue (dak.kernels.hbm_gemv.swiglu_linear), so the
    SiLU * up launch goes away (dak.runtime.fused); the same rounding as that launch. On with the
    GEMV ($DAK_HBM_GEMV) unless $DAK_GEMV_SILU=0; the planner's epilogue pricing follows it."""
    on = env_flag("DAK_GEMV_SILU", gemv_enabled())
    if on and not gemv_enabled():
        raise ValueError("DAK_GEMV_SILU=1 fuses SiLU * up into dak's GEMV, which DAK_HBM_GEMV=0 turns off: "
                         "unset DAK_HBM_GEMV, or unset DAK_GEMV_SILU")
    return on


def ce_gemv_enabled() -> bool:
    """$DAK_CE_GEMV=1 (an experiment, off until measured on the GPU): a copy-engine operator's
    decode-batch GEMMs (its HBM rows and each staged chunk) run dak's all-HBM GEMV
    (dak.kernels.hbm_gemv) instead of cuBLAS, as the all-HBM linears do by default."""
    return env_flag("DAK_CE_GEMV", False)


# The one-GEMV staging path (dak.kernels.staged_gemv) waits for an operator's whole copy before its
# one launch; where the link is the busier side the default path's HBM rows, run during the copy,
# win. The planner turns it on where the link side L is at most this share of the compute side A
# (dak.planner.stream.chained). Bracketed on the H200 (twenty-eighth session, H88, batch 8, one
# call, consolidated plans): faster at L/A 0.62-0.67 (OPT-6.7B 1% 4.80 -> 4.37 ms, OPT-30B 1%
# 16.94 -> 16.46), slower at 1.17 and above (OPT-6.7B 2% 5.81 -> 6.78, OPT-30B 2% 24.55 ->
# 28.06, Llama-2-7B 5% 9.15 -> 10.61).
ONE_GEMV_LINK_SHARE = 0.85
# Of each such linear's copy_op_overhead_s (13.9 us on the H200 profile) the planner takes this
# share off the compute side. H89 (same session): OPT-6.7B at 1% (out_proj chain x32) measured
# 4.26 ms against 4.31 predicted with all of it off; Llama-2-7B at 2%, where pricing all of it off
# made consolidated stream o_proj x32 (predicted 3.92 ms) over its in-place plan (3.96), measured
# 4.03 against that plan's 3.96: 3.5 us an operator left, the fit below.
ONE_GEMV_SAVED_SHARE = 0.75


def one_gemv_mode() -> bool | None:
    """$DAK_CE_ONE_GEMV: '1' runs every chained decode copy-engine linear whose host rows are all
    staged as one GEMV after its copies land (dak.kernels.staged_gemv), '0' never, unset as the
    plan says (dak.planner.placement.Placement.one_gemv; None here)."""
    return None if env_get("DAK_CE_ONE_GEMV") is None else env_flag("DAK_CE_ONE_GEMV", False)


def split_gemv_tiles_enabled() -> bool:
    """$DAK_SPLIT_GEMV_TILES=1 (an experiment, off until measured on the GPU): untuned decode
    configs of the in-place split kernel (1-16 tokens, no copy engine) take the all-HBM GEMV's
    tiles for their HBM rows' shape (dak.kernels.hbm_gemv.heuristic: 32-64 rows x 128-256 columns,
    3-6 stages; the split kernel's own heuristic uses 16-32 x 256 x 3) and one HBM program per row
    tile, as that GEMV launches, instead of a persistent grid of 2 x SMs."""
    return env_flag("DAK_SPLIT_GEMV_TILES", False)


HBM_FORK_MIN_TOKENS = 17  # untuned decode configs of 17-64 tokens take hbm_fork by default


def hbm_fork_for(n_tokens: int) -> bool:
    """Whether an untuned decode config of `n_tokens` tokens (<= 64) multiplies its HBM rows with
    dak's GEMV (cuBLAS above 16 tokens) beside a host-only split kernel on a forked stream
    (KernelConfig.hbm_fork) instead of the split kernel's persistent HBM programs, whose decode
    tiles ran 1.2x (N = 1) to 1.6x (N = 32) cuBLAS's time on Llama-2-7B's up_proj (H39).
    Default: at 17-64 tokens. Measured on the H200 (twenty-fifth session, H67/H69, 9 shapes,
    chained 8 in a row, untuned config against it with hbm_fork, `linear-h6[79]-*-s25-h200.json`):
    at 32 tokens and 0.5-2% host rows 1.21x faster (median of 27; 20 faster by > 1%, 3 slower, the
    worst 0.94x), 2-100% within 1% but for one case 0.93x; at 1 and 8 tokens and <= 2% mixed
    (median 1.01-1.02x; Llama shapes up to 1.26x faster, OPT-30B's 7168-row q/k/v/o and fc2 up to
    11% slower), so off there. Those 1-8-token runs multiplied the HBM rows with cuBLAS (autograd
    on); with dak's GEMV, as the runtime runs it, and its launch by rows (fork_gemv.fork_config;
    twenty-sixth session, H75/H77) forked was 1.022x median alone at 1-8 tokens, and batch 8 end to
    end (H76, an older launch) gained at 1-2% but lost 2-7% at 5%: still off. $DAK_HBM_FORK=1
    takes it at every decode token count, 0 at none."""
    raw = env_get("DAK_HBM_FORK")
    if raw is not None and raw not in ("0", "1"):
        raise ValueError(f"DAK_HBM_FORK must be 0 or 1, got {raw!r}")
    lo = {None: HBM_FORK_MIN_TOKENS, "1": 1, "0": None}[raw]
    return lo is not None and lo <= n_tokens <= 64


INPLACE_TILE_ROWS = 7168  # matrices this tall or taller: see inplace_tiles_enabled


def inplace_tiles_enabled() -> bool:
    """Untuned decode configs of the in-place split kernel (host rows read by SM loads, no copy
    engine) at 1-16 tokens on matrices of at least INPLACE_TILE_ROWS rows take 32-row tiles, the
    tuner's choice for such thin host shares, where the heuristic otherwise takes 16 below ~17k
    rows. On by default since the twenty-third session; $DAK_INPLACE_TILES=0 turns it off.
    Measured on the H200 (chained as a decode step runs them, heuristic variant, H52): at 1-8
    tokens and 0.5-1.1% host rows 1.25-1.35 -> 0.93-1.03 x bound on OPT-30B q/k/v/o and fc2,
    1.30-1.33 -> 1.09-1.25 on Llama-2-7B up_proj, 1.27-1.32 -> 1.18-1.22 on Llama-3-70B at 0.6%,
    but 1.30-1.36 -> 1.38-1.40 on Llama-3-70B at 1.2%. At 17-32 tokens 64-row tiles were mixed
    (OPT-30B 1.31-1.40 -> 1.12-1.23, Llama-2-7B up_proj 1.34 -> 1.53): not taken. End to end
    (H53, batch 8, dak-greedy, whose plans keep such shares): OPT-30B at 1% 20.89 -> 17.48 ms,
    Llama-3-8B at 1/2% 5.38 -> 5.00, OPT-6.7B 1/2% 5.12 / 7.00 -> 5.17 / 6.84, Llama-2-7B 1/2%
    4.68 / 4.72 -> 4.57 / 5.00 (the same linears split at both ratios)."""
    return env_flag("DAK_INPLACE_TILES", True)


def ce_fork_enabled() -> bool:
    """Whether a copy-engine operator multiplies its staged rows on a side stream forked from the
    caller's ($DAK_CE_FORK=1) or, by default, on the caller's stream after its other rows. One
    fork and join per operator spread OPT-30B's decode graph at 5% over 289 internal streams
    (prefetch's: 2) and its host copies ran at 49.7 GB/s in replays; unforked, 3 streams and
    52.1 GB/s, and TPOT 0-7% lower on four models at 1-20% (H200, thirteenth session, F10/F11)."""
    return env_flag("DAK_CE_FORK", False)


def attention_ce_fork_enabled() -> bool:
    """Whether a split attention that stages its own host requests (dak.kernels.split_attention_ce
    without KV copy-ahead: the SplitKVCache entry point, `--no-kv-ahead`) attends the staged
    chunks on a side stream forked from the caller's as each lands, concurrently with the other
    requests: the default, unless $DAK_ATTENTION_CE_FORK=0 (then as ce_fork_enabled() says).
    H200, twenty-first session (H46, `bench_attention.py --batches 8 --host-paths ce`, same call):
    forked 0.998-1.84 x bound against 1.004-1.94 unforked, faster in 26 of 36 cases (median 0.996x
    the time). The decode step's attention copies ahead (dak.runtime.kv_ahead) and follows
    kv_ahead_fork_enabled()."""
    return env_flag("DAK_ATTENTION_CE_FORK", True) or ce_fork_enabled()


def kv_ahead_fork_enabled() -> bool:
    """$DAK_KV_AHEAD_FORK=1 (an experiment, off): the decode step's attention, whose host K/V were
    copied a layer ahead (dak.runtime.kv_ahead), attends the staged requests on a forked side
    stream beside the others, as the standalone path does (attention_ce_fork_enabled); by default
    on the caller's stream after them, unless ce_fork_enabled(). H51 (H200, twenty-third session,
    e2e batch 8 at 10%, twice): forked 3% slower on OPT-6.7B (25.98 vs 25.18-25.23 ms) and 1-2% on
    OPT-30B (113.5-114.1 vs 111.7-112.1 ms), so it stays off."""
    return env_flag("DAK_KV_AHEAD_FORK", False) or ce_fork_enabled()


def prefill_graphs_default() -> bool:
    """Whether an Engine with decode graphs also captures its prefill per prompt-length bucket
    (dak.runtime.prefill_graphs): yes, or $DAK_PREFILL_GRAPHS=0 (eager prefill, as before)."""
    return env_flag("DAK_PREFILL_GRAPHS", True)


def prefill_chain_enabled() -> bool:
    """Whether a captured prefill chains its copy-engine operators by copy-ahead (slots of its
    own): yes, or $DAK_PREFILL_CHAIN=0 (each operator copies when called)."""
    return env_flag("DAK_PREFILL_CHAIN", True)


def graphs_default() -> bool:
    """Whether an Engine built without `graphs=` captures CUDA graphs on a GPU: yes, or
    $DAK_GRAPHS=0 for diagnosis (eager decode steps; the host link's rate with and without graphs)."""
    return env_flag("DAK_GRAPHS", True)

