"""Pick split-linear launch configs by a short timed sweep, cached in memory and on disk.

The sweep is coordinate descent from `heuristic_config`: one knob at a time (share of host
rows moved by the copy engine and its chunking; at decode, HBM rows by dak's GEMV beside a
host-only kernel, and up to 16 tokens that GEMV's launch; for N > 64 the chunks' taper and
stream, the token tile and the host kernel that reads each host tile once (Triton slot or CUDA
cluster multicast, with its cluster size and tiles); host programs = the in-flight cap on the link,
host split-K, row tile, host load path, reduction tile, pipeline depth, HBM programs, then a
finer copy-engine share), keeping whatever is fastest, each candidate timed by graph replay.
At decode it descends twice, from the heuristic and, with the share pinned, from the heuristic
on the other host path (in place if the heuristic stages the host rows by the copy engine, else
all staged), and keeps the faster end: from the staged start alone, an in-place config only
competed untuned, and lost where tuned it won (H200, Llama-2-7B, N = 8, 2-5% host rows,
twenty-sixth session, H64: fresh sweeps kept staged configs 1.07-1.46x slower alone than the
in-place ones of the older cache).
It runs before first use for a (GPU, dtype, token bucket, M_H, M_G, K, bias) key and never
inside CUDA graph capture.
The disk cache lives in $DAK_CACHE_DIR (default ~/.cache/dak)/split_linear.json.
"""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

import torch

from dak.kernels.config_cache import Runs, as_runs
from dak.kernels.timing import graph_time_ms
from dak.kernels.fork_gemv import FORK_LAUNCHES
from dak.kernels.hbm_gemv import MAX_TOKENS
from dak.kernels.config import KernelConfig, block_n_for, finalize, heuristic_config, next_pow2

_MEMORY: dict[str, KernelConfig] = {}


def cache_path() -> Path:
    root = os.environ.get("DAK_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "dak")
    return Path(root) / "split_linear.json"


def token_bucket(n: int) -> int:
    """Tokens are tuned per bucket: the decode token tile up to 64, then powers of two."""
    return block_n_for(n) if n <= 64 else next_pow2(n)


def tune_key(gpu: str, dtype: torch.dtype, n: int, m_h: int, m_g: int, k: int, bias: bool) -> str:
    return f"{gpu}|{str(dtype).removeprefix('torch.')}|n{token_bucket(n)}|mh{m_h}|mg{m_g}|k{k}|b{int(bias)}"


def _load_disk() -> dict:
    try:
        return json.loads(cache_path().read_text())
    except (OSError, ValueError):
        return {}


def _save_disk(key: str, cfg: KernelConfig) -> None:
    path = cache_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        data = _load_disk()
        data[key] = cfg.to_dict()
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
        os.replace(tmp, path)
    except OSError:
        pass  # a read-only home only costs a re-tune next time


def cached(key: str) -> KernelConfig | None:
    if key in _MEMORY:
        return _MEMORY[key]
    raw = _load_disk().get(key)
    if raw is not None:
        try:
            _MEMORY[key] = KernelConfig(**raw)
        except (TypeError, ValueError):
            return None
    return _MEMORY.get(key)


def _knobs(n: int, m_h: int, m_g: int, sms: int, tma_ok: bool):
    if n > 64:
        yield "hbm_cublas", [False, True]
    if m_h:
        yield "ce_share", [0.0, 0.5, 1.0]
        yield "ce_chunks", [1, 2, 4, 8]
    if m_h and m_g and n <= 64:  # HBM rows by dak's GEMV beside a host-only kernel
        yield "hbm_fork", [False, True]
    if m_h and m_g and n <= MAX_TOKENS:  # ... and that GEMV's launch, timed beside the host kernel
        yield "fork_gemv", ["", *FORK_LAUNCHES]
    if m_h and n > 64:  # staged chunks beside cuBLAS: shrinking chunks, GEMMs on a side stream
        yield "ce_taper", [1.0, 0.5, 0.3]
        yield "ce_fork", [False, True]
    if n > 64:
        yield "block_n", [64, 128]
    if m_h and n > 64:  # large N: host tiles read once (Triton slot, or CUDA cluster multicast)
        yield "host_kernel", ["triton", "triton_once", "cuda_multicast"]
        yield "mc_cluster", [2, 4, 8]
        yield "mc_block_n", [64, 128, 256]
        yield "mc_block_m", [64, 128]
    if m_h:
        yield "host_programs", [4, 8, 16, 32, 64, 132]
        yield "host_split_k", [1, 2, 4, 8]
    yield "block_m", [16, 32, 64]
    if m_h and tma_ok:
        yield "host_tma", [False, True]
    yield "block_k", [128, 256, 512]
    yield "num_stages", [3, 4, 6, 8]
    if m_g:
        yield "hbm_programs", [sms, 2 * sms, 4 * sms]
    if m_h:
        yield "ce_share", [0.25, 0.75, 0.9]


def sweep(run: Runs, n: int, m_h: int, m_g: int, k: int,
          sms: int, tma_ok: bool) -> tuple[KernelConfig, list[tuple[dict, float]]]:
    """Coordinate-descent sweep; `run(cfg)` launches the kernel once (or a list of such over
    different buffers, rotated so that the timing misses L2). Returns (best, trials).

    Candidates keep the requested program caps; `finalize` clamps and balances them against
    the tiles of each candidate's row tile before it is timed (CUDA-graph replay).
    """
    if torch.cuda.is_current_stream_capturing():
        raise RuntimeError("split-linear tuning cannot run inside CUDA graph capture; "
                           "call prepare() before capturing")
    seen: dict[KernelConfig, float] = {}
    runs = as_runs(run)

    def measure(cfg: KernelConfig) -> float:
        cfg = finalize(cfg, m_h, m_g, sms)
        if cfg not in seen:
            try:
                seen[cfg] = graph_time_ms([lambda r=r: r(cfg) for r in runs], target_ms=6.0, max_replays=5)
            except ValueError as exc:  # a config the GPU cannot run (shared memory)
                if "on-chip resources" not in str(exc) and cfg.host_kernel != "cuda_multicast":
                    raise
                seen[cfg] = float("inf")
            except RuntimeError:  # no nvcc, or the driver refused the cluster launch
                if cfg.host_kernel != "cuda_multicast":
                    raise
                seen[cfg] = float("inf")
        return seen[cfg]

    def descend(best: KernelConfig, pinned: tuple[str, ...] = ()) -> tuple[KernelConfig, float]:
        best_t = measure(best)
        for name, values in _knobs(n, m_h, m_g, sms, tma_ok):
            for v in values:
                if name in pinned or skip(best, name, v):
                    continue
                try:
                    cand = replace(best, **{name: v})
                except ValueError:  # e.g. a multicast tile the kernel does not build
                    continue
                t = measure(cand)
                if t < best_t * 0.99:
                    best, best_t = cand, t
        return best, best_t

    start = replace(heuristic_config(n, m_h, m_g, k, sms, tma_ok), host_programs=16, hbm_programs=2 * sms)
    ends = [descend(start)]
    if m_h and n <= 64:  # at decode the other host path's branch too (see the module docstring)
        other = replace(start, ce_share=0.0, hbm_cublas=False) if start.ce_share else replace(start, ce_share=1.0)
        ends.append(descend(other, pinned=("ce_share",)))
    best = min(ends, key=lambda e: e[1])[0]
    trials = [(c.to_dict(), t) for c, t in seen.items()]
    return finalize(best, m_h, m_g, sms), trials


def skip(best: KernelConfig, name: str, v) -> bool:
    """Whether the descent leaves knob `name` = v untried from `best` (the same value, or a knob
    that does not apply to best's path)."""
    if v == getattr(best, name) or (name.startswith("ce_") and name != "ce_share" and best.ce_share == 0):
        return True
    if best.hbm_cublas and name not in ("hbm_cublas", "ce_chunks", "ce_taper", "ce_fork"):
        return True  # cuBLAS for the HBM rows, copy engine for the host rows: nothing else applies
    if best.hbm_fork and name == "hbm_programs":
        return True  # the GEMV launches its own grid
    if name == "fork_gemv" and not best.hbm_fork:
        return True
    mc = best.host_kernel == "cuda_multicast"
    if name in ("host_programs", "host_split_k") and best.ce_share == 1 and not mc:
        return True  # no host rows are read in place
    return name.startswith("mc_") and not mc


def get_or_tune(key: str, run: Runs, n: int, m_h: int, m_g: int, k: int,
                sms: int, tma_ok: bool, tune: bool) -> KernelConfig:
    """The cached config for `key`, else a swept one (tune=True) or the heuristic."""
    hit = cached(key)
    if hit is not None:
        return hit
    if tune:
        cfg, _ = sweep(run, n, m_h, m_g, k, sms, tma_ok)
        _save_disk(key, cfg)
    else:
        cfg = heuristic_config(n, m_h, m_g, k, sms, tma_ok)
        win = measured_window(key)
        if win is not None and cfg.ce_share < 1:  # calibrated congestion window for in-place reads
            cfg = finalize(replace(cfg, host_programs=win.host_programs, num_stages=win.num_stages),
                           m_h, m_g, sms)
    _MEMORY[key] = cfg
    return cfg


def measured_window(key: str):
    """The congestion window `dak calibrate` measured for this key in $DAK_PROFILE, if any."""
    from dak.measured import active_profile, window_for
    gpu, _, shape = key.partition("|")
    return window_for(active_profile(), gpu, shape)


def store(key: str, cfg: KernelConfig) -> None:
    """Record `cfg` as the tuned config for `key` (memory and disk cache), e.g. from calibration."""
    _MEMORY[key] = cfg
    _save_disk(key, cfg)
