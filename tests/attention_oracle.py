"""The one float32 oracle for decode attention (shared by the CPU and GPU attention tests)."""

import torch

TOL = {torch.bfloat16: 1.5e-2, torch.float16: 3e-3}  # relative Frobenius error vs the oracle


def reference_attention(q, k, v, lengths, scale=None, window=None):
    """float32 math attention: q (B, Hq, D) over k/v (>= B, Hkv, S, D), keys < lengths[b] (and with
    `window`, keys >= lengths[b] - window only: HF's sliding window).

    A request of length 0 gets zeros (dak's convention). Runs on q's device.
    """
    b, hq, d = q.shape
    q, k, v = q.float(), k[:b].to(q.device).float(), v[:b].to(q.device).float()
    g = hq // k.shape[1]
    k, v = k.repeat_interleave(g, 1), v.repeat_interleave(g, 1)
    s = torch.einsum("bhd,bhsd->bhs", q, k) * (d ** -0.5 if scale is None else scale)
    pos, n = torch.arange(k.shape[2], device=q.device)[None, :], lengths[:b].to(q.device).long()[:, None]
    keep = (pos < n) & (pos >= n - window) if window else pos < n
    s = s.masked_fill(~keep[:, None, :], float("-inf"))
    p = torch.nan_to_num(torch.softmax(s, dim=-1), nan=0.0)
    v = torch.where(keep[:, None, :, None], v, 0.0)  # cache rows past a length may hold anything
    return torch.einsum("bhs,bhsd->bhd", p, v)


def rel_err(y, ref):
    return ((y.float() - ref).norm() / ref.norm().clamp_min(1e-12)).item()
