"""The copy-ahead chains' knobs: how many copy streams and staging slots the linear chain uses, whether
it wraps around a step, copies a chained operator in one memcpy or groups operators into one memcpy,
and how KV copy-ahead stages a layer's host K/V (dak.kernels.copy_ahead, dak.runtime.kv_ahead; the
planner prices them in dak.planner.stream). Torch-free, like dak.shares, which re-exports them; each
has a measured default and an environment variable for experiments on the GPU.
"""

from __future__ import annotations

from .env_snapshot import env_flag, env_int
from .env_snapshot import get as env_get


def copy_stream_count() -> int:
    """Copy streams of the copy-ahead chain: 1, or $DAK_COPY_STREAMS (1 or 2) for experiments."""
    return env_int("DAK_COPY_STREAMS", 1, 1, 2)


MANY_TOKEN_COPY_SLOTS = 4  # copy-ahead slots of a decode step of more than 64 tokens (below)


def copy_slot_count(n_tokens: int | None = None) -> int:
    """Staging slots of the copy-ahead chain, or $DAK_COPY_SLOTS (2 to 8) for experiments.
    Operator i's copy waits for operator i - slots to release its slot, so more slots let the
    copies run further ahead of the compute stream (HBM: one slot per operator's host part).
    Two, except MANY_TOKEN_COPY_SLOTS for a decode step of `n_tokens` > 64 (dak.kernels.config.
    MAX_DECODE_TOKENS): there, with two, down_proj's copy waited for gate_proj's GEMM, which runs
    after attention (6 ms a step at batch 512), and the link idled through it. H100, Llama-2-7B,
    batch 512 at 5% (H131/H132, forty-first session): 2 / 3 / 4 slots 30.4-30.7 / 28.1 / 26.0-26.2 ms,
    the link idle 7.3 -> 2.3 ms a step; at 20% 108.6 -> 103.5 ms; batch 8 unchanged (also H113, H200)."""
    return env_int("DAK_COPY_SLOTS", MANY_TOKEN_COPY_SLOTS if many_decode_tokens(n_tokens) else 2, 2, 8)


def many_decode_tokens(n_tokens: int | None) -> bool:
    """Whether a decode chain of `n_tokens` (None: a captured prefill's own chain) runs more tokens
    than one decode program covers (dak.planner.curves.MAX_DECODE_TOKENS)."""
    from dak.planner.curves import MAX_DECODE_TOKENS  # torch-free; here, not at import: the planner imports this module
    return n_tokens is not None and n_tokens > MAX_DECODE_TOKENS


def kv_slot_count() -> int:
    """HBM slots of KV copy-ahead: 2, or $DAK_KV_SLOTS (2 to 4) for experiments. A layer's copy
    waits for the attention `slots` staged layers back, so more slots let it start during the
    attention before it (batch 512: the link idled through attention with two)."""
    return env_int("DAK_KV_SLOTS", 2, 2, 4)


def copy_wrap_mode() -> bool | None:
    """$DAK_COPY_WRAP: '1' wraps every copy-ahead chain: its last copy of a step refills its first
    operator's slot for the next step (dak.kernels.copy_ahead; priced by dak.planner.stream.wrapped);
    'plan' (the default since the thirty-fourth session; None here) wraps a plan's chain where it
    runs one GEMV once staged (H93b, H200: OPT-6.7B / OPT-30B at 1% 2.0% / 1.7% faster, twice); '0'
    never. '1' everywhere: docs/LIMITATIONS.md (faster on OPT-6.7B, slower on Llama-2-7B, OPT-30B)."""
    raw = env_get("DAK_COPY_WRAP", "plan")
    if raw == "plan":
        return None
    if raw not in ("0", "1"):
        raise ValueError(f"DAK_COPY_WRAP must be 0, 1 or plan, got {raw!r}")
    return raw == "1"


def copy_wrap_enabled() -> bool:
    """$DAK_COPY_WRAP=1: every copy-ahead chain wraps (see copy_wrap_mode)."""
    return copy_wrap_mode() is True


def chain_one_chunk(n_tokens: int | None = None) -> bool:
    """$DAK_CHAIN_ONE_CHUNK: copy-ahead copies a chained large-N operator's host rows in one memcpy,
    all but the chain's last (which keeps its chunks): queued an operator ahead, the rows land before
    it runs, so chunks only add copies. Unset: on where many_decode_tokens(n_tokens) (four slots),
    off elsewhere; '1'/'0' force it. H100, Llama-2-7B batch 512: about 1.03x, 9 of 11 pairs faster
    (H138, H144, H146); on two slots it was 1.6% slower (H32, H200; docs/RESULTS.md)."""
    return env_flag("DAK_CHAIN_ONE_CHUNK", many_decode_tokens(n_tokens))


def copy_group_bytes() -> int:
    """Bytes of consecutive chained operators copied by one memcpy (dak.kernels.copy_groups):
    0 (off), or $DAK_COPY_GROUP_MIB MiB (0 to 4096) for experiments."""
    return env_int("DAK_COPY_GROUP_MIB", 0, 0, 4096) << 20


def kv_pair_copy() -> bool:
    """Whether KV copy-ahead copies a layer's host K and V by one 2-D memcpy where both sides
    are adjacent in memory (every host request staged): off, or $DAK_KV_PAIR_COPY=1 for
    experiments (OPT-30B at 5%: 96 of its 336 copies a step are K and V, 7.3 MB each). H200,
    eleventh session: 58.01 vs 58.77 ms on OPT-30B at 5% (one call, within the calls' ~1%
    noise); with 128 MiB copy groups 5% slower on Llama-2-7B at 5%: not a default."""
    return env_flag("DAK_KV_PAIR_COPY", False)


def kv_copy_stream_name() -> str:
    """The stream KV copy-ahead copies on: its own ("kv-ahead copy", beside the linear chain's
    copies), or with $DAK_KV_COPY_STREAM=shared the linear chain's "copy" stream, so one copy is
    in flight at a time (an experiment: OPT-30B at 5% moved 51 GB/s over the link with both,
    the layer-prefetch baseline's one copy per layer 55)."""
    raw = env_get("DAK_KV_COPY_STREAM", "own")
    if raw not in ("own", "shared"):
        raise ValueError(f"DAK_KV_COPY_STREAM must be 'own' or 'shared', got {raw!r}")
    return "kv-ahead copy" if raw == "own" else "copy"
