"""Launch configuration of the split decode-attention kernel, and the heuristic that plans one.

An `AttentionConfig` is a frozen value decided on the host before launch (never inside CUDA
graph capture). Work is cut into items (request, kv head, split): a split is one contiguous
range of one request's keys. Host requests' items go to at most `host_programs` persistent
programs (the in-flight cap on the host link; 8-32 readers saturate it); every HBM item gets
its own program, and `hbm_splits` is chosen so that those fill the SMs (flash-decoding).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from dak.shares import ATTENTION_CE_MIN_BYTES

HEAD_DIMS = (16, 32, 64, 128, 256)
CTAS_PER_SM = 2  # resident decode programs per SM at block_n=64, head_dim=128, 3 stages
MAX_SPLITS = 256
CE_MIN_BYTES = ATTENTION_CE_MIN_BYTES  # smaller host parts are read in place (a copy + sync costs more)
MIN_SPLIT_KEYS = 256  # an HBM split shorter than this costs more in its merge launch than it gains
SHORT_KEYS = 256  # all-HBM contexts of 129-256 keys with fewer items than SMs: 128-key tiles (H59, H60)


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def next_pow2(n: int) -> int:
    return 1 << max(0, (int(n) - 1).bit_length())


def group_rows(group: int) -> int:
    """Query rows one program holds for a GQA group: a power of two >= 16 (tl.dot's minimum)."""
    return max(16, next_pow2(group))


@dataclass(frozen=True)
class AttentionConfig:
    """Meta-parameters of one split decode-attention launch.

    block_n: keys per tile. num_warps / num_stages: warps per program, software-pipeline depth.
    host_programs: persistent programs that read only host KV (cap; clamped to the host items).
    host_splits / hbm_splits: splits per (request, kv head) on each side; the sequence of a
        request is cut into that many ranges of whole tiles, sized from its actual length.
    host_tma / hbm_tma: load that side's K/V tiles with TMA (TensorDescriptor) instead of plain loads.
    ce_share / ce_chunks: share of the host requests staged into HBM by the copy engine instead
        (needs staging buffers; see dak.kernels.split_attention_ce), in that many pipelined chunks.
    """

    block_n: int = 64
    num_warps: int = 4
    num_stages: int = 3
    host_programs: int = 16
    host_splits: int = 1
    hbm_splits: int = 1
    host_tma: bool = False
    hbm_tma: bool = False
    ce_share: float = 0.0
    ce_chunks: int = 1

    def __post_init__(self):
        if self.block_n < 16 or self.block_n > 256 or self.block_n & (self.block_n - 1):
            raise ValueError(f"block_n must be a power of two in [16, 256], got {self.block_n}")
        if self.num_stages < 1 or self.num_warps not in (1, 2, 4, 8, 16):
            raise ValueError(f"bad num_stages/num_warps: {self.num_stages}/{self.num_warps}")
        if self.host_programs < 1:
            raise ValueError(f"host_programs must be >= 1, got {self.host_programs}")
        if not 0.0 <= self.ce_share <= 1.0 or self.ce_chunks < 1:
            raise ValueError(f"ce_share must be in [0, 1] and ce_chunks >= 1, got {self.ce_share}/{self.ce_chunks}")
        for f in ("host_splits", "hbm_splits"):
            if not 1 <= getattr(self, f) <= MAX_SPLITS:
                raise ValueError(f"{f} must be in [1, {MAX_SPLITS}], got {getattr(self, f)}")

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def hbm_splits_for(items: int, max_len: int, block_n: int, sms: int) -> int:
    """Splits per HBM (request, kv head) so the programs fill the SMs in whole waves.

    FlashAttention's num_splits heuristic: with `items` = requests x kv heads, take the fewest
    splits whose wave efficiency (waves / ceil(waves)) is within 85% of the best one; each split
    keeps at least two key tiles and MIN_SPLIT_KEYS keys (H200, Llama-3-8B B = 8, S = 256, all in
    HBM, twenty-fourth session: two splits of 128 keys and their merge 7.7 us, one split 6.7 us,
    torch's cuDNN SDPA 6.9).
    """
    slots = max(1, sms * CTAS_PER_SM)
    if items <= 0 or items >= 0.8 * slots:
        return 1
    most = max(1, min(MAX_SPLITS, cdiv(max_len, max(2 * block_n, MIN_SPLIT_KEYS)), cdiv(4 * slots, items)))

    def eff(ns: int) -> float:
        waves = items * ns / slots
        return waves / cdiv(items * ns, slots)

    best = max(eff(ns) for ns in range(1, most + 1))
    return next(ns for ns in range(1, most + 1) if eff(ns) >= 0.85 * best)


def host_splits_for(items: int, max_len: int, block_n: int, programs: int) -> int:
    """Splits per host (request, kv head): the fewest that give every host program (nearly)
    the same number of equal items, so the link has `programs` readers until the end."""
    if items <= 0:
        return 1
    most = max(1, min(MAX_SPLITS, cdiv(max_len, block_n)))

    def eff(ns: int) -> float:
        n = items * ns
        return n / (cdiv(n, programs) * programs)

    for ns in range(1, most + 1):
        if eff(ns) >= 0.9:
            return ns
    return max(range(1, most + 1), key=eff)


def finalize(cfg: AttentionConfig, host_requests: int, hbm_requests: int, kv_heads: int,
             max_len: int, sms: int, keep_splits: bool = False) -> AttentionConfig:
    """Fill in the split counts for this cache shape (unless keep_splits) and clamp the host
    program cap to the host items that exist."""
    if not keep_splits:
        host_splits = host_splits_for(host_requests * kv_heads, max_len, cfg.block_n, cfg.host_programs)
        hbm_splits = hbm_splits_for(hbm_requests * kv_heads, max_len, cfg.block_n, sms)
        cfg = replace(cfg, host_splits=host_splits, hbm_splits=hbm_splits)
    host_items = host_requests * kv_heads * cfg.host_splits
    return replace(cfg, host_programs=max(1, min(cfg.host_programs, host_items or 1)))


def heuristic_config(host_requests: int, hbm_requests: int, kv_heads: int, group: int,
                     max_len: int, head_dim: int, sms: int, staging: bool = False) -> AttentionConfig:
    """A sensible untuned configuration (the starting point of the sweep).

    With `staging` (HBM staging buffers exist) host parts of at least CE_MIN_BYTES go through
    the copy engine in chunks of about 64 MiB: the link is then the bottleneck, and the copy
    engine moves 55 GB/s against 50 GB/s for SM loads. Key tiles: 128 keys for head_dim <= 64;
    otherwise 64, except all-HBM caches of 129-256 keys with fewer (request, kv head) items than
    SMs, whose one split per item reads best in 128-key tiles (H200, B = 8, tuned sweeps, twenty-
    fourth session, H59/H60: Llama-3-8B S = 256 (64 items) 6.7 us against 7.7 for two 64-key
    splits; with 256 items or more, Llama-2-7B and OPT-30B at B = 8 and every model at B >= 64,
    128-key tiles ran at 1.13-1.23x torch's time, 64-key tiles at 0.93-1.02x).
    """
    few = host_requests == 0 and hbm_requests * kv_heads < sms and SHORT_KEYS // 2 < max_len <= SHORT_KEYS
    block_n = 128 if head_dim <= 64 or (head_dim <= 128 and few) else 64
    block_n = min(block_n, max(16, next_pow2(max_len)))
    num_warps = 8 if group_rows(group) * head_dim >= 64 * 128 else 4
    host_bytes = 2 * host_requests * kv_heads * max_len * head_dim * 2
    ce = staging and host_bytes >= CE_MIN_BYTES
    cfg = AttentionConfig(block_n=block_n, num_warps=num_warps, num_stages=3, host_programs=16,
                          ce_share=1.0 if ce else 0.0,
                          ce_chunks=max(1, min(8, host_bytes // (64 << 20))) if ce else 1)
    return finalize(cfg, host_requests, hbm_requests, kv_heads, max_len, sms)
