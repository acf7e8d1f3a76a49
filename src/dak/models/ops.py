"""Workloads and the per-operator inventory the planner places.

Units: bytes, FLOPs.  ``d`` is the element size of the workload dtype
(bf16/fp16: 2, fp32: 4).  For one forward step (a decode step, or the whole
prefill of the batch):

* linear (out M, in K, optional bias): bytes = M*(K+bias)*d, traffic = bytes
  (every weight is read once per step), flops = 2*N*K*M with N = B (decode)
  or B*L (prefill).  The lm_head in prefill only computes the last position's
  logits (N = B).  Unit = a tile of ``tile_rows`` output rows, so
  units = ceil(M/tile_rows); the last tile may be partial and is always the
  last one moved to host (``host_bytes_for`` accounts for it exactly).
* attention: bytes = KV-cache capacity 2*kv_heads*head_dim*d*B*(L+G).
  Decode traffic = the KV of B requests at the *average* context over the
  generation, ctx = L + (G+1)/2 (step t in 1..G attends to L+t tokens);
  flops = 4*B*heads*head_dim*ctx.  Prefill traffic = the B*L tokens of KV
  written; flops = 4*B*heads*head_dim*L*(L+1)/2 (causal).  Unit = one request.
  Decode copy_traffic: the KV of B requests at the rows a staged request's
  copy moves, averaged over the decode steps: each step's graph copies up to
  its cache-length bucket (kv_bucket_caps), not just the rows in use.
* embeddings: bytes = rows*H*d, traffic = the gathered rows only (B for
  decode, B*L for prefill), flops = 0.  Unit = one row.  With tied word
  embeddings (OPT) the shared table is the single ``lm_head`` operator and its
  traffic also includes the gathered rows.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, replace

from ..defaults import DEFAULT_KV_BUCKETS
from ..units import GIB
from .spec import ModelSpec, check_learned_positions

DTYPE_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4}
LINEAR_KINDS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj",
                "fc1", "fc2", "out_proj", "lm_head")
DEFAULT_RESERVE = 1 * GIB


@dataclass(frozen=True)
class Workload:
    phase: str          # 'prefill' | 'decode'
    batch: int          # B requests
    prompt_len: int     # L tokens
    gen_len: int        # G generated tokens
    dtype: str = "bf16"
    kv_buckets: int = DEFAULT_KV_BUCKETS  # decode graphs per cache length (dak.runtime.engine): host K/V copies

    def __post_init__(self):
        if self.phase not in ("prefill", "decode"):
            raise ValueError(f"unsupported phase {self.phase!r}: use 'prefill' or 'decode'")
        if self.dtype not in DTYPE_BYTES:
            raise ValueError(f"unsupported dtype {self.dtype!r}: use one of {', '.join(DTYPE_BYTES)}")
        for field, lo in (("batch", 1), ("prompt_len", 1), ("gen_len", 1 if self.phase == "decode" else 0),
                          ("kv_buckets", 1)):
            v = getattr(self, field)
            if isinstance(v, bool) or not isinstance(v, int) or v < lo:
                raise ValueError(f"{field} must be an integer >= {lo} for {self.phase}, got {v!r}")

    @property
    def dtype_bytes(self) -> int:
        return DTYPE_BYTES[self.dtype]

    @property
    def tokens(self) -> int:
        """Tokens processed per step: B (decode) or B*L (prefill)."""
        return self.batch if self.phase == "decode" else self.batch * self.prompt_len

    @property
    def context(self) -> float:
        """Average attended context per request: L + (G+1)/2 (decode), L (prefill)."""
        return self.prompt_len + (self.gen_len + 1) / 2 if self.phase == "decode" else float(self.prompt_len)


def kv_bucket_caps(max_len: int, buckets: int) -> tuple[int, ...]:
    """The cache lengths decode graphs are captured for (dak.runtime.engine): `buckets` even steps
    up to max_len; a step runs the graph of the smallest cap >= its keys."""
    if isinstance(buckets, bool) or not isinstance(buckets, int) or buckets < 1:
        raise ValueError(f"kv_buckets must be an integer >= 1, got {buckets!r}")
    return tuple(sorted({max(1, -(-max_len * (i + 1) // buckets)) for i in range(buckets)}))


@functools.lru_cache(maxsize=256)  # per layer of every list_operators call; O(G) and Workload is frozen
def copied_rows(w: "Workload") -> float:
    """Positions a staged request's K/V copy moves per decode step, averaged over the steps: step
    t in 1..G-1 (the first token comes from prefill) holds L + t keys and runs the graph of the
    smallest of the w.kv_buckets caps >= that, which copies that many positions (dak.runtime.engine)."""
    caps = kv_bucket_caps(w.prompt_len + w.gen_len, w.kv_buckets)
    needs = [w.prompt_len + t for t in range(1, w.gen_len)] or [w.prompt_len + 1]
    return sum(next(c for c in caps if c >= n) for n in needs) / len(needs)


@dataclass(frozen=True)
class Operator:
    name: str
    kind: str
    layer: int | None
    shape: tuple[int, int] | None   # (out_features, in_features) for linears
    bytes: int                      # resident bytes
    traffic: float                  # bytes read per step
    flops: float                    # FLOPs per step
    unit_bytes: int                 # bytes of one full unit
    units: int                      # number of units (last may be partial)
    unit_name: str                  # 'rows' (linear tiles), 'requests', 'rows' (embeddings)
    unit_rows: int = 1              # rows per unit (tile_rows for linears)
    copy_traffic: float | None = None  # bytes a whole-operator host copy moves per step, where not traffic

    @property
    def copied(self) -> float:
        """Bytes per step the copy engine moves if all of this operator is staged from the host."""
        return self.traffic if self.copy_traffic is None else self.copy_traffic

    def host_bytes_for(self, k: int) -> int:
        """Exact bytes of k units (the partial unit is moved last)."""
        return min(k * self.unit_bytes, self.bytes)

    def host_rows_for(self, k: int) -> int:
        """Rows (linears/embeddings) or requests (attention) covered by k units."""
        total = self.shape[0] if self.shape else self.units
        return min(k * self.unit_rows, total)


def _linear(name, kind, layer, out_f, in_f, bias, w: Workload, tile_rows, tokens=None) -> Operator:
    d = w.dtype_bytes
    row = (in_f + (1 if bias else 0)) * d
    n = w.tokens if tokens is None else tokens
    return Operator(name=name, kind=kind, layer=layer, shape=(out_f, in_f), bytes=out_f * row,
                    traffic=float(out_f * row), flops=2.0 * n * in_f * out_f,
                    unit_bytes=tile_rows * row, units=math.ceil(out_f / tile_rows),
                    unit_name="rows", unit_rows=tile_rows)


def _embedding(name, kind, rows, hidden, w: Workload) -> Operator:
    d = w.dtype_bytes
    return Operator(name=name, kind=kind, layer=None, shape=(rows, hidden), bytes=rows * hidden * d,
                    traffic=float(min(w.tokens, rows) * hidden * d), flops=0.0,
                    unit_bytes=hidden * d, units=rows, unit_name="rows", unit_rows=1)


def _attention(spec: ModelSpec, layer: int, w: Workload) -> Operator:
    d = w.dtype_bytes
    per_token = spec.kv_elements_per_token() * d
    B, L, G = w.batch, w.prompt_len, w.gen_len
    copied = None
    if w.phase == "decode":
        window = spec.window_at(layer)  # a sliding layer reads at most its window's keys
        keys = sum(min(L + t, window) for t in range(1, G + 1)) / G if window else w.context
        traffic = per_token * B * keys
        flops = 4.0 * B * spec.num_heads * spec.head_dim * keys
        copied = per_token * B * copied_rows(w)
    else:
        traffic = float(per_token * B * L)
        flops = 4.0 * B * spec.num_heads * spec.head_dim * L * (L + 1) / 2
    unit = per_token * (L + G)
    return Operator(name=f"layers.{layer}.self_attn.attention", kind="attention", layer=layer,
                    shape=None, bytes=unit * B, traffic=traffic, flops=flops,
                    unit_bytes=unit, units=B, unit_name="requests", copy_traffic=copied)


def list_operators(spec: ModelSpec, w: Workload, tile_rows: int = 64) -> list[Operator]:
    """Every offloadable operator of the model for workload ``w``, in execution order."""
    if isinstance(tile_rows, bool) or not isinstance(tile_rows, int) or tile_rows < 1:
        raise ValueError(f"tile_rows must be a positive integer, got {tile_rows!r}")
    check_learned_positions(spec, w.prompt_len + w.gen_len)
    H, I = spec.hidden_size, spec.intermediate_size
    ops: list[Operator] = []
    if not spec.tie_word_embeddings:
        ops.append(_embedding("embed_tokens", "embed_tokens", spec.vocab_size, H, w))
    if spec.learned_positions:
        ops.append(_embedding("embed_positions", "embed_positions", spec.learned_positions, H, w))
    for i in range(spec.num_layers):
        a, m = f"layers.{i}.self_attn", f"layers.{i}.mlp"
        ops.append(_linear(f"{a}.q_proj", "q_proj", i, spec.q_dim, H, spec.qkv_bias, w, tile_rows))
        ops.append(_linear(f"{a}.k_proj", "k_proj", i, spec.kv_dim, H, spec.qkv_bias, w, tile_rows))
        ops.append(_linear(f"{a}.v_proj", "v_proj", i, spec.kv_dim, H, spec.qkv_bias, w, tile_rows))
        ops.append(_attention(spec, i, w))
        if spec.gated_mlp:
            ops.append(_linear(f"{a}.o_proj", "o_proj", i, H, spec.q_dim, spec.o_bias, w, tile_rows))
            ops.append(_linear(f"{m}.gate_proj", "gate_proj", i, I, H, spec.mlp_bias, w, tile_rows))
            ops.append(_linear(f"{m}.up_proj", "up_proj", i, I, H, spec.mlp_bias, w, tile_rows))
            ops.append(_linear(f"{m}.down_proj", "down_proj", i, H, I, spec.mlp_bias, w, tile_rows))
        else:
            ops.append(_linear(f"{a}.out_proj", "out_proj", i, H, spec.q_dim, spec.o_bias, w, tile_rows))
            ops.append(_linear(f"layers.{i}.fc1", "fc1", i, I, H, spec.mlp_bias, w, tile_rows))
            ops.append(_linear(f"layers.{i}.fc2", "fc2", i, H, I, spec.mlp_bias, w, tile_rows))
    lm = _linear("lm_head", "lm_head", None, spec.vocab_size, H, False, w, tile_rows, tokens=w.batch)
    if spec.tie_word_embeddings:  # shared table: add the embedding gather to its traffic
        lm = replace(lm, traffic=lm.traffic + min(w.tokens, spec.vocab_size) * H * w.dtype_bytes)
    ops.append(lm)
    return ops


@dataclass(frozen=True)
class MinimumHbmSet:
    """Bytes that must stay in HBM: small parameters + activation workspace + runtime reserve."""
    small_params: int
    workspace: int
    reserve: int

    @property
    def total(self) -> int:
        return self.small_params + self.workspace + self.reserve


def minimum_hbm_set(spec: ModelSpec, w: Workload, reserve: int = DEFAULT_RESERVE) -> MinimumHbmSet:
    """Non-offloadable bytes.

    small_params = (norm elements per layer * layers + final norm) * d.
    workspace (d = dtype bytes, N = tokens per step, W = max(I, q_dim + 2*kv_dim)):
      decode:  B*(8*max(H, q_dim) + 3*I)*d  +  B*V*4 (fp32 logits)
      prefill: N*(4*H + 2*W)*d              +  B*V*4 (last-position fp32 logits)
    """
    d = w.dtype_bytes
    if isinstance(reserve, bool) or not isinstance(reserve, int) or reserve < 0:
        raise ValueError(f"runtime reserve must be a non-negative number of bytes, got {reserve!r}")
    small = (spec.norm_params_per_layer * spec.num_layers + spec.final_norm_params) * d
    H, I, V = spec.hidden_size, spec.intermediate_size, spec.vocab_size
    logits = w.batch * V * 4
    if w.phase == "decode":
        ws = w.batch * (8 * max(H, spec.q_dim) + 3 * I) * d + logits
    else:
        wide = max(I, spec.q_dim + 2 * spec.kv_dim)
        ws = w.tokens * (4 * H + 2 * wide) * d + logits
    return MinimumHbmSet(small_params=small, workspace=ws, reserve=reserve)
