"""Launch configuration of the split-linear kernel, and the heuristics that pick one.

A `KernelConfig` is a frozen value decided on the host before launch (and before any CUDA
graph capture). Wave alignment: the persistent grid gives each program the same number of
row tiles (to within one), so no program runs a final, mostly idle round.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from dak.kernels.fork_gemv import parse_launch
from dak.kernels.hbm_gemv import heuristic as gemv_heuristic
from dak.runtime_env import interpreting
from dak.shares import LINK_BOUND_SHARE, ce_chunks_default, ce_hbm_cublas, ce_min_share  # noqa: F401 -- re-exported for the launchers
from dak.shares import INPLACE_TILE_ROWS, hbm_fork_for, inplace_tiles_enabled, split_gemv_tiles_enabled

MAX_DECODE_TOKENS = 64  # up to this many tokens, one program covers all of them: no re-reads
SPLIT_GEMV_STAGES = 3  # pipeline depth cap when in-place split configs take the GEMV's tiles
MAX_SPLIT_ITEMS = 256  # host split-K only pays when host row tiles are few; caps its workspace
HOST_KERNELS = ("triton", "triton_once", "cuda_multicast")  # host row readers for N > block_n


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def next_pow2(n: int) -> int:
    return 1 << max(0, (int(n) - 1).bit_length())


@dataclass(frozen=True)
class KernelConfig:
    """Meta-parameters of one split-linear launch.

    block_m/block_n/block_k: tile of weight rows, tokens and reduction columns.
    host_programs: programs that read only host (pinned) rows; the in-flight cap on the link.
    hbm_programs: programs that read only HBM rows.
    num_stages: software-pipeline depth (loads in flight per program).
    host_tma / hbm_tma: load that side's tiles with TMA (TensorDescriptor) instead of plain loads.
    ce_share: fraction of the host rows moved by the copy engine (in `ce_chunks` pipelined
        chunks into an HBM staging buffer) instead of read in place; on a PCIe host link the
        copy engine moves more bytes per second than SM loads (see dak.kernels.split_linear_ce).
    host_split_k: decode only: split each host row tile's reduction over this many work items,
        so a few host row tiles still keep many host programs reading (partials summed in order).
    host_kernel: how host rows are read when N > block_n (several token blocks):
        "triton": each host tile is re-read over the link once per token block (amplification);
        "triton_once": the first token block's pass copies the tile into an HBM slot, the other
        token blocks read the slot (dak.kernels.split_linear_once);
        "cuda_multicast": a CUDA kernel fetches each host tile once per thread-block cluster of
        `mc_cluster` CTAs by TMA multicast, each CTA covering `mc_block_n` tokens of
        `mc_block_m`-row tiles (dak.kernels.split_linear_mc).
    hbm_cublas: HBM rows by torch's GEMM (cuBLAS) instead of the split kernel's HBM programs;
        needs ce_share=1 (every host row staged by the copy engine and multiplied by cuBLAS as
        it lands). For many tokens (prefill, large batches) the GEMMs run near the tensor-core
        peak, which the split kernel's decode-shaped tiles do not.
    ce_taper: chunk i of the copy-engine rows holds a share proportional to ce_taper ** i (1.0:
        equal chunks). Below 1 the last chunk is small, so the GEMM left after the last byte
        lands is short (the link-bound tail of a large-N operator).
    ce_fork: multiply the staged chunks on a side stream forked from the caller's, beside the
        HBM rows' GEMM, instead of after it on the caller's stream ($DAK_CE_FORK=1 forces it
        everywhere). Forking fills the HBM GEMM's last, partial wave with the chunks' tiles; a
        decode step's graph keeps it off (hundreds of branches slowed its copies).
    hbm_fork: the HBM rows are multiplied by dak's all-HBM GEMV (dak.kernels.hbm_gemv; cuBLAS
        above its 16 tokens) on the caller's stream, beside a host-only split kernel (the in-place
        host rows, host programs only) launched first on a forked stream, instead of by the split
        kernel's persistent HBM programs. Meant for decode batches (any N is computed right). Each
        launch still reads one memory only; see dak.kernels.split_linear_ce.
    fork_gemv: with hbm_fork, the GEMV's launch as "BLOCK_MxBLOCK_KxSTAGES" (a tuner knob at 1-16
        tokens); "" takes dak.kernels.fork_gemv.fork_config's rule by rows.
    """

    block_m: int = 32
    block_n: int = 16
    block_k: int = 256
    num_warps: int = 4
    num_stages: int = 3
    host_programs: int = 16
    hbm_programs: int = 264
    host_tma: bool = False
    hbm_tma: bool = False
    ce_share: float = 0.0
    ce_chunks: int = 1
    host_split_k: int = 1
    host_kernel: str = "triton"
    mc_cluster: int = 4
    mc_block_m: int = 64
    mc_block_n: int = 128
    hbm_cublas: bool = False
    ce_taper: float = 1.0
    ce_fork: bool = False
    hbm_fork: bool = False
    fork_gemv: str = ""

    def __post_init__(self):
        for f in ("block_m", "block_n", "block_k"):
            v = getattr(self, f)
            if v < 16 or v & (v - 1):
                raise ValueError(f"{f} must be a power of two >= 16, got {v}")
        if self.host_programs < 0 or self.hbm_programs < 0:
            raise ValueError("program counts must be non-negative")
        if self.num_stages < 1 or self.num_warps not in (1, 2, 4, 8, 16):
            raise ValueError(f"bad num_stages/num_warps: {self.num_stages}/{self.num_warps}")
        if self.host_split_k < 1 or self.host_split_k & (self.host_split_k - 1):
            raise ValueError(f"host_split_k must be a power of two >= 1, got {self.host_split_k}")
        if not 0.0 <= self.ce_share <= 1.0 or self.ce_chunks < 1:
            raise ValueError(f"ce_share must be in [0, 1] and ce_chunks >= 1, got "
                             f"{self.ce_share}/{self.ce_chunks}")
        if not 0.0 < self.ce_taper <= 1.0:
            raise ValueError(f"ce_taper must be in (0, 1] (1 = equal chunks), got {self.ce_taper}")
        if self.hbm_cublas and self.ce_share < 1:
            raise ValueError(f"hbm_cublas needs ce_share=1 (every host row staged by the copy engine), "
                             f"got ce_share={self.ce_share}")
        if self.hbm_fork and self.hbm_cublas:
            raise ValueError("hbm_fork and hbm_cublas both name the HBM rows' multiplier: set one of them")
        if self.fork_gemv:
            parse_launch(self.fork_gemv)
            if not self.hbm_fork:
                raise ValueError(f"fork_gemv ({self.fork_gemv!r}) names the GEMV launch of hbm_fork's HBM rows: "
                                 "set hbm_fork=True too, or leave fork_gemv empty")
        if self.host_kernel not in HOST_KERNELS:
            raise ValueError(f"host_kernel must be one of {HOST_KERNELS}, got {self.host_kernel!r}")
        if (self.mc_cluster not in (1, 2, 4, 8) or self.mc_block_m not in (64, 128)
                or self.mc_block_n not in (64, 128, 256) or self.mc_block_m * self.mc_block_n > 16384
                or self.mc_block_m // self.mc_cluster < 8):
            raise ValueError(f"bad multicast tiles: cluster {self.mc_cluster} (1/2/4/8), block_m "
                             f"{self.mc_block_m} (64/128, >= 8 rows per CTA), block_n {self.mc_block_n} "
                             "(64/128/256, block_m * block_n <= 16384)")

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def balanced_programs(tiles: int, max_programs: int) -> int:
    """Fewest programs that keep `tiles` in the same number of rounds as `max_programs` would.

    With w = ceil(tiles / max_programs) rounds, ceil(tiles / w) programs each get w or w-1
    tiles: the last round is as full as it can be (wave/tail alignment).
    """
    if tiles <= 0:
        return 0
    max_programs = max(1, max_programs)
    rounds = cdiv(tiles, max_programs)
    return cdiv(tiles, rounds)


def block_n_for(n_tokens: int) -> int:
    """Token tile: all tokens at once up to MAX_DECODE_TOKENS (tl.dot needs at least 16)."""
    return max(16, min(next_pow2(max(n_tokens, 1)), MAX_DECODE_TOKENS))


def pick_block_k(k: int) -> int:
    return max(16, min(256, next_pow2(k)))


def finalize(cfg: KernelConfig, m_host: int, m_hbm: int, sms: int, hbm_occupancy: int = 2) -> KernelConfig:
    """Clamp program counts to the tiles that exist and balance them (wave alignment)."""
    host_tiles = cdiv(m_host, cfg.block_m)
    hbm_tiles = cdiv(m_hbm, cfg.block_m)
    split = cfg.host_split_k if 1 < host_tiles * cfg.host_split_k <= MAX_SPLIT_ITEMS else 1
    host = balanced_programs(host_tiles * split, cfg.host_programs or 1)
    if cfg.host_kernel == "cuda_multicast" and host_tiles:
        host = max(cfg.host_programs, cfg.mc_cluster)  # CTAs; its launcher clamps to work items
    hbm_cap = cfg.hbm_programs or sms * hbm_occupancy
    hbm = balanced_programs(hbm_tiles, hbm_cap)
    # triton_once at 2 pipeline stages gave wrong sums on the H200 (Triton 3.6: ~0.1% of the
    # outputs of the slot-read token blocks, varying run to run); 3+ stages were exact.
    stages = max(cfg.num_stages, 3) if cfg.host_kernel == "triton_once" else cfg.num_stages
    return replace(cfg, host_programs=host, hbm_programs=hbm, host_split_k=split, num_stages=stages)


# Large N (prefill, large batch): staged chunks let cuBLAS multiply one chunk while the next is
# copied. H200, OPT-30B 7168x7168, N 256-8192 (linear-large-n-s18-h200.json, 16 chunkings each):
# a small host share wants 2 equal chunks (x = 10%: within 1.5% of the best chunking at every N;
# the old 4 equal chunks were up to 11% slower), a large one 4 shrinking chunks (x = 50%: within
# 0.6%, 4 equal up to 4% slower); GEMMs on a forked stream won nowhere by more than 1.3%.
LARGE_N_CE_CHUNKS = (2, 4)  # host share of the rows up to / above LARGE_N_SPLIT_SHARE
LARGE_N_CE_TAPER = (1.0, 0.5)
LARGE_N_SPLIT_SHARE = 0.25


def large_n_chunking(m_host: int, m_total: int) -> tuple[int, float]:
    """(ce_chunks, ce_taper) of an untuned large-N config with m_host of m_total rows on the host."""
    i = int(m_host > LARGE_N_SPLIT_SHARE * m_total)
    return LARGE_N_CE_CHUNKS[i], LARGE_N_CE_TAPER[i]


def heuristic_config(n_tokens: int, m_host: int, m_hbm: int, k: int, sms: int, tma_ok: bool) -> KernelConfig:
    """A sensible untuned configuration (the starting point of the sweep)."""
    block_n = block_n_for(n_tokens)
    m_total = m_host + m_hbm
    # Small matrices want small row tiles so that every SM gets work.
    block_m = 32 if cdiv(m_total, 64) >= 2 * sms else 16
    if block_n >= 64:
        block_m = max(block_m, 32)
    many = n_tokens > MAX_DECODE_TOKENS  # prefill / large batch: cuBLAS GEMMs, host rows staged
    ce = many or m_host > ce_min_share() * m_total  # every host row staged by the copy engine
    if m_host and not ce and block_n == 16 and m_total >= INPLACE_TILE_ROWS and inplace_tiles_enabled():
        block_m = 32  # thin in-place shares at 1-16 tokens: the tuner's tiles (H52, H53)
    if interpreting():  # the CPU interpreter pays per tile iteration: fewer, larger tiles
        block_m = 64
    block_k, stages, hbm_programs = pick_block_k(k), 3 if block_n <= 32 else 2, 2 * sms
    chunks, taper = large_n_chunking(m_host, m_total) if many else (ce_chunks_default(), 1.0)
    if block_n == 16 and not ce and m_hbm and split_gemv_tiles_enabled():
        g = gemv_heuristic(m_hbm, k)
        # the split kernel stages x and w tiles for each of its paths: the GEMV's 6 stages (rows
        # <= 4096) ran out of shared memory on the H200 (OutOfResources, H14), 3 fit
        block_m, block_k, stages = g.block_m, min(g.block_k, block_k), min(g.num_stages, SPLIT_GEMV_STAGES)
        hbm_programs = cdiv(m_hbm, block_m)  # one row tile each, as the GEMV launches
    split, host_tiles, k_iters = 1, cdiv(m_host, block_m), cdiv(k, block_k)
    while host_tiles and host_tiles * split < 16 and 2 * split <= min(8, k_iters // 2):
        split *= 2  # few host row tiles: split their reduction so more programs read the link
    cublas = many or (ce and m_host > 0 and ce_hbm_cublas())
    cfg = KernelConfig(
        host_split_k=split,
        block_m=block_m,
        block_n=block_n,
        block_k=block_k,
        num_warps=4,
        num_stages=stages,
        host_programs=16,
        hbm_programs=hbm_programs,
        host_tma=False,
        hbm_tma=False,
        ce_share=1.0 if ce else 0.0,
        ce_chunks=chunks,
        ce_taper=taper,
        hbm_cublas=cublas,
        host_kernel="triton_once" if n_tokens > block_n else "triton",
        hbm_fork=bool(m_host and m_hbm and not cublas and hbm_fork_for(n_tokens)),
    )
    return finalize(cfg, m_host, m_hbm, sms)
