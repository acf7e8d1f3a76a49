"""The GEMV launch for a split linear's HBM rows when they run beside its host-only kernel.

With `KernelConfig.hbm_fork` (dak.kernels.split_linear_ce) the HBM rows of a decode batch are
multiplied by dak's all-HBM GEMV (dak.kernels.hbm_gemv) on the caller's stream while a host-only
split kernel reads the host rows on a forked stream. The fastest GEMV launch there is not the
fastest alone (the host kernel's programs hold some SMs): `fork_config` is the untuned rule,
`KernelConfig.fork_gemv` names a launch (`parse_launch`), and the split linear's tuner tries
`FORK_LAUNCHES` at 1-16 tokens.
"""

from __future__ import annotations

from functools import lru_cache

from dak.kernels.hbm_gemv import GemvConfig, heuristic


def fork_config(m: int, k: int) -> GemvConfig:
    """The launch for a split linear's M HBM rows beside its host-only kernel (hbm_fork). H200,
    bf16, N 1 and 8, 0.5-1.2% host rows, untuned host kernel, CUDA graphs over rotated weights
    (twenty-sixth session): up to 8192 rows 32 x 256 tiles, 4 stages, the fastest forked pair of 7
    launches in 10 of 16 cases and within 3% in all (probe_fork_gemv.py, 4 shapes), where
    heuristic(M, K), the fastest alone, was up to 9% slower forked (on 7168 rows its 64-row tiles
    make 112 programs, fewer than the SMs); taller matrices keep heuristic(M, K), 32-row tiles there
    being up to 1.45x slower forked (11008 and 28672 rows, bench_linear.py, linear-h77-s26-h200.json)."""
    return GemvConfig(32, 256, 4) if m <= 8192 else heuristic(m, k)


# The forked launches the split linear's tuner tries (KernelConfig.fork_gemv): the best of the
# probe's 7 beside the host kernel, and the heuristic's launches for taller matrices.
FORK_LAUNCHES = ("32x256x4", "64x256x4", "64x128x4", "64x128x3")


@lru_cache(maxsize=None)  # a config's launch is parsed once, not per call on the decode path
def parse_launch(name: str) -> GemvConfig:
    """The GemvConfig a 'BLOCK_MxBLOCK_KxSTAGES' name (e.g. '32x256x4') gives; ValueError else."""
    parts = name.split("x")
    if len(parts) != 3 or not all(p.isdigit() for p in parts):
        raise ValueError(f"a GEMV launch is named BLOCK_MxBLOCK_KxSTAGES, e.g. '32x256x4'; got {name!r}")
    bm, bk, st = (int(p) for p in parts)
    if bm not in (16, 32, 64) or bk not in (128, 256) or not 1 <= st <= 8:
        raise ValueError(f"GEMV launch {name!r}: BLOCK_M must be 16, 32 or 64, BLOCK_K 128 or 256, "
                         "stages 1-8")
    return GemvConfig(bm, bk, st)
