"""Split decode attention with part of the host requests staged by the copy engine.

Measured on the H200 over PCIe Gen5 (benchmarks/results/probe-link-mix-h200.json): the copy
engine moves 55 GB/s, SM zero-copy loads 50 GB/s, and both at once share the same ~55 GB/s.
So once the link sets the time (any host fraction above ~1.3%), staging host requests with the
copy engine, pipelined so attention never waits for the whole copy, beats reading them in place:

    main stream:     [ split kernel: zero-copy host requests [n_ce, b_h) + HBM requests ]----+
    copy stream:     [copy chunk 0][copy chunk 1] ... [copy chunk C-1]                        |
    compute stream:            [attend chunk 0] [attend chunk 1] ... [attend chunk C-1] -> join

Host requests [0, n_ce) (n_ce = round(ce_share * b_h)) are copied chunk by chunk (whole
max_len rows, or the first `rows` positions when the caller knows no length exceeds them: the
copy cannot see device-side lengths; one 2-D memcpy per chunk) into HBM staging tensors and attended
with the all-HBM kernel as each chunk lands. Every host byte crosses the link once. Ordering
uses CUDA events, so it captures into a CUDA graph. Under the interpreter the same steps run in
order on the CPU. With ce_share = 0 this is exactly `split_attention`.
"""

from __future__ import annotations

from dataclasses import replace

import torch

from dak.kernels.attention_checks import check_attention_args
from dak.kernels.attention_config import AttentionConfig, cdiv, finalize, heuristic_config
from dak.kernels.split_attention import split_attention
from dak.kernels.streams import fork, join, side_stream
from dak.shares import attention_ce_fork_enabled, kv_ahead_fork_enabled


def ce_requests(cfg: AttentionConfig, b_h: int) -> int:
    """Host requests routed through the copy engine: round(ce_share * b_h), at most b_h."""
    return 0 if cfg.ce_share <= 0 or b_h == 0 else min(b_h, max(1, round(cfg.ce_share * b_h)))


def ce_chunks(n_ce: int, chunks: int) -> tuple[tuple[int, int], ...]:
    """Request ranges copied and attended one at a time (`chunks` of them, at most n_ce)."""
    if n_ce == 0:
        return ()
    per = cdiv(n_ce, max(1, min(chunks, n_ce)))
    return tuple((lo, min(lo + per, n_ce)) for lo in range(0, n_ce, per))


def _rows_2d(dst: torch.Tensor, src: torch.Tensor, rows: int) -> bool:
    """Queue a copy of positions [0, rows) of every (request, head) of src (n, H, S, D) into dst
    (same shape and strides) as one 2-D memcpy on the current stream; False if it cannot."""
    try:
        from cuda.bindings import runtime as rt
    except ImportError:
        return False
    n, h, s, d = src.shape
    if n * h == 0:
        return True  # nothing to copy
    if any(t.stride() != (h * s * d, s * d, d, 1) for t in (src, dst)):
        return False
    es = src.element_size()
    stream = torch.cuda.current_stream(dst.device).cuda_stream
    (err,) = rt.cudaMemcpy2DAsync(dst.data_ptr(), s * d * es, src.data_ptr(), s * d * es, rows * d * es, n * h,
                                  rt.cudaMemcpyKind.cudaMemcpyHostToDevice, stream)
    if int(err) != 0:
        raise RuntimeError(f"cudaMemcpy2DAsync of host KV failed with CUDA error {int(err)}")
    return True


def pair_view(k: torch.Tensor, v: torch.Tensor) -> torch.Tensor | None:
    """K and V (n, H, S, D), contiguous with v starting where k ends in one storage, as one
    (2n, H, S, D) view; else None."""
    if (k.shape != v.shape or k.dtype != v.dtype or k.device != v.device or not k.is_contiguous()
            or not v.is_contiguous() or k.untyped_storage().data_ptr() != v.untyped_storage().data_ptr()
            or v.storage_offset() != k.storage_offset() + k.numel()):
        return None
    return torch.as_strided(k, (2 * k.shape[0], *k.shape[1:]), k.stride(), k.storage_offset())


def _copy_rows(dst: torch.Tensor, src: torch.Tensor, rows: int | None, non_blocking: bool) -> None:
    if rows is None:
        dst.copy_(src, non_blocking=non_blocking)
    elif not non_blocking:  # interpreter: plain slices
        dst[:, :, :rows].copy_(src[:, :, :rows])
    elif not _rows_2d(dst, src, rows):  # no cuda-bindings: whole rows
        dst.copy_(src, non_blocking=True)


def copy_kv_rows(k_dst: torch.Tensor, v_dst: torch.Tensor, k_src: torch.Tensor, v_src: torch.Tensor,
                 rows: int | None, non_blocking: bool, paired: bool = False) -> int:
    """Copy positions [0, rows) (all when None) of every request of (k_src, v_src) (n, H, S, D)
    into (k_dst, v_dst) on the current stream: one 2-D memcpy each on a GPU with cuda-bindings,
    or with `paired`, one for both where K and V are adjacent on both sides (see pair_view).
    Returns the number of copies queued."""
    if paired and k_src.numel():
        src, dst = pair_view(k_src, v_src), pair_view(k_dst, v_dst)
        if src is not None and dst is not None:
            _copy_rows(dst, src, rows, non_blocking)
            return 1
    for st, host in ((k_dst, k_src), (v_dst, v_src)):
        _copy_rows(st, host, rows, non_blocking)
    return 2


def write_token(k_st: torch.Tensor, v_st: torch.Tensor, k_new: torch.Tensor, v_new: torch.Tensor,
                lengths: torch.Tensor) -> None:
    """Store each request's new key and value (n, H, D) at position lengths[b] - 1 of the staged
    (n, H, S, D) tensors (capturable: no host reads)."""
    n = k_st.shape[0]
    idx = torch.arange(n, device=k_st.device)
    pos = (lengths[:n] - 1).long()
    k_st[idx, :, pos] = k_new[:n].to(k_st.dtype)
    v_st[idx, :, pos] = v_new[:n].to(v_st.dtype)


def split_attention_ce(q: torch.Tensor, k_host: torch.Tensor, v_host: torch.Tensor, k_hbm: torch.Tensor,
                       v_hbm: torch.Tensor, lengths: torch.Tensor, cfg: AttentionConfig, sms: int,
                       staging: tuple[torch.Tensor, torch.Tensor] | None = None, scale: float | None = None,
                       out: torch.Tensor | None = None, validate: bool = True, rows: int | None = None,
                       ahead=None, window: int | None = None) -> torch.Tensor:
    """`split_attention` with host requests [0, n_ce) staged by the copy engine (see module doc).

    staging: HBM (k, v) tensors of shape (>= n_ce, Hkv, S, D) in the cache's dtype (e.g. a
    `SplitKVCache` built with staging_requests); required when cfg.ce_share > 0.
    rows: copy only positions [0, rows) of each staged request (default: all S); every length
    must then be <= rows (checked when validating; the caller's promise inside graph capture).
    ahead: (landed event or None, k_slot, v_slot, k_new, v_new, release) from
    dak.runtime.kv_ahead: the staged requests' copy was queued earlier into (k_slot, v_slot)
    (n_ce, Hkv, S, D), before this step's token (k_new, v_new) was appended; that token is
    written into the slot once the copy lands, then the requests are attended and
    `release(stream)` is called with the stream that read the slot. `staging` is then ignored.
    window: a sliding window (see `split_attention`); the copies still move positions [0, rows).
    """
    if validate and torch.cuda.is_available() and torch.cuda.is_current_stream_capturing():
        validate = False
    bq, hq, d, b_h, hkv, s = check_attention_args(q, k_host, v_host, k_hbm, v_hbm, lengths, out, validate)
    if rows is not None:
        if isinstance(rows, bool) or not isinstance(rows, int) or not 1 <= rows <= s:
            raise ValueError(f"rows must be an integer in [1, {s}] (the cache's max_len), got {rows!r}")
        if validate and bq and int(lengths[:bq].max()) > rows:
            raise ValueError(f"a length ({int(lengths[:bq].max())}) exceeds rows={rows}: the copy would "
                             "miss cached keys; pass rows >= every length (or None)")
        rows = None if rows == s else rows
    n_ce = ce_requests(cfg, min(bq, b_h))
    if ahead is not None:
        if ahead[1].shape[0] != n_ce:
            raise ValueError(f"the copy-ahead slot holds {ahead[1].shape[0]} requests but this config stages "
                             f"{n_ce}; link the KV copy-ahead again after changing attention configs")
        staging = ahead[1:3]
    if n_ce == 0:
        return split_attention(q, k_host, v_host, k_hbm, v_hbm, lengths, cfg, scale, out, validate=False,
                               window=window)
    if staging is None or any(t.dim() != 4 or t.shape[0] < n_ce or tuple(t.shape[1:]) != (hkv, s, d)
                              or t.dtype != q.dtype or t.device != q.device for t in staging):
        raise ValueError(f"ce_share={cfg.ce_share} needs HBM staging (k, v) of shape (>= {n_ce}, {hkv}, {s}, {d}) "
                         f"{q.dtype} on {q.device}; build the cache with staging_requests or use ce_share=0")
    if out is None:
        out = torch.empty((bq, hq, d), dtype=q.dtype, device=q.device)
    b_g = max(0, bq - b_h)
    rest_cfg = replace(finalize(replace(cfg, ce_share=0.0, ce_chunks=1), min(bq, b_h) - n_ce, b_g, hkv, s, sms),
                       hbm_splits=cfg.hbm_splits)
    chunks = ce_chunks(n_ce, cfg.ce_chunks)
    chunk_cfg = replace(heuristic_config(0, chunks[0][1], hkv, hq // hkv, s, d, sms), block_n=cfg.block_n,
                        num_warps=cfg.num_warps, num_stages=cfg.num_stages, hbm_tma=cfg.hbm_tma)
    chunk_cfg = finalize(chunk_cfg, 0, chunks[0][1], hkv, s, sms)
    none = torch.empty((0, hkv, s, d), dtype=q.dtype)
    k_st, v_st = staging

    def copy(lo, hi, non_blocking):
        copy_kv_rows(k_st[lo:hi], v_st[lo:hi], k_host[lo:hi], v_host[lo:hi], rows, non_blocking)

    def attend(lo, hi):
        split_attention(q[lo:hi], none, none, k_st[lo:hi], v_st[lo:hi], lengths[lo:hi], chunk_cfg, scale,
                        out[lo:hi], validate=False, window=window)

    def attend_rest():
        if bq > n_ce:
            split_attention(q[n_ce:], k_host[n_ce:], v_host[n_ce:], k_hbm, v_hbm, lengths[n_ce:], rest_cfg,
                            scale, out[n_ce:], validate=False, window=window)

    if ahead is not None:
        return _attend_ahead(ahead, chunks, attend, attend_rest, lengths, q.device, out)
    if q.device.type != "cuda":  # interpreter: same steps, in order
        for lo, hi in chunks:
            copy(lo, hi, False)
            attend(lo, hi)
        attend_rest()
        return out
    main = torch.cuda.current_stream(q.device)
    copy_s = side_stream(q.device, "attention-copy")
    comp_s = fork(q.device, "attention-compute", main, attention_ce_fork_enabled())
    copy_s.wait_stream(main)
    landed = []
    with torch.cuda.stream(copy_s):
        for lo, hi in chunks:
            copy(lo, hi, True)
            ev = torch.cuda.Event()
            ev.record(copy_s)
            landed.append(ev)
    attend_rest()
    with torch.cuda.stream(comp_s):
        for (lo, hi), ev in zip(chunks, landed):
            comp_s.wait_event(ev)
            attend(lo, hi)
    main.wait_stream(copy_s)
    join(main, comp_s)
    return out


def _attend_ahead(ahead, chunks, attend, attend_rest, lengths, device, out):
    """The staged requests with the copy already queued: wait for it, add this step's token,
    attend them on the compute stream while the rest run on the main stream."""
    landed, k_st, v_st, k_new, v_new, release = ahead
    if device.type != "cuda":
        write_token(k_st, v_st, k_new, v_new, lengths)
        for lo, hi in chunks:
            attend(lo, hi)
        attend_rest()
        release(None)
        return out
    main = torch.cuda.current_stream(device)
    comp_s = fork(device, "attention-compute", main, kv_ahead_fork_enabled())  # q, k_new, v_new, lengths ready
    attend_rest()
    with torch.cuda.stream(comp_s):
        if landed is not None:
            comp_s.wait_event(landed)
        write_token(k_st, v_st, k_new, v_new, lengths)
        for lo, hi in chunks:
            attend(lo, hi)
        release(comp_s)
    join(main, comp_s)
    return out
