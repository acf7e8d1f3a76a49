"""KV copy-ahead on the CPU: the staged requests' slot is filled before the layer appends this
step's token, so the attention must write that token into the slot itself (dak.runtime.kv_ahead)."""

import os

import pytest
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

from attention_oracle import TOL, reference_attention, rel_err  # noqa: E402
from dak.kernels.attention_config import AttentionConfig, finalize, heuristic_config  # noqa: E402
from dak.kernels.split_attention_ce import split_attention_ce, write_token  # noqa: E402
from dak.runtime_env import kernel_device  # noqa: E402
from dak.shares import kv_ahead_fork_enabled  # noqa: E402

DEV = kernel_device()


@pytest.mark.parametrize("dtype,chunks", [(torch.bfloat16, 1), (torch.float16, 2)])
def test_staged_slot_gets_this_steps_token_before_attention(dtype, chunks):
    g = torch.Generator().manual_seed(11)
    batch, b_h, hq, hkv, s, d = 5, 3, 4, 2, 40, 16
    lengths = torch.tensor([40, 1, 17, 33, 9], dtype=torch.int32)
    k = torch.randn(batch, hkv, s, d, generator=g).to(dtype)
    v = torch.randn(batch, hkv, s, d, generator=g).to(dtype)
    q = torch.randn(batch, hq, d, generator=g).to(dtype)
    pos = (lengths - 1).long()
    k_new, v_new = k[torch.arange(batch), :, pos].clone(), v[torch.arange(batch), :, pos].clone()
    cfg = finalize(AttentionConfig(**{**heuristic_config(b_h, batch - b_h, hkv, hq // hkv, s, d, 4).to_dict(),
                                      "ce_share": 1.0, "ce_chunks": chunks}), b_h, batch - b_h, hkv, s, 4)
    # the slot as copy-ahead leaves it: the host K/V copied before this step's token was appended
    k_slot, v_slot = k[:b_h].clone().to(DEV), v[:b_h].clone().to(DEV)
    k_slot[torch.arange(b_h), :, pos[:b_h]] = 0.0
    v_slot[torch.arange(b_h), :, pos[:b_h]] = 0.0
    released = []
    out = torch.full((batch, hq, d), float("nan"), dtype=dtype, device=DEV)
    k_host, v_host = k[:b_h], v[:b_h]
    if DEV.type == "cuda":  # the GPU reads host K/V only from pinned memory
        k_host, v_host = k_host.pin_memory(), v_host.pin_memory()
    res = split_attention_ce(q.to(DEV), k_host, v_host, k[b_h:].to(DEV), v[b_h:].to(DEV), lengths.to(DEV), cfg, 4,
                             out=out, ahead=(None, k_slot, v_slot, k_new.to(DEV), v_new.to(DEV), released.append))
    assert res is out and not out.isnan().any()
    # released once: with None on the CPU; on a GPU with the stream that read the slot (the caller's
    # unless $DAK_KV_AHEAD_FORK=1 or $DAK_CE_FORK=1 forks the staged part onto a side stream)
    assert len(released) == 1 and (released[0] is None) == (DEV.type != "cuda")
    if released[0] is not None:
        assert (released[0] != torch.cuda.current_stream()) == kv_ahead_fork_enabled()
    assert rel_err(out.cpu(), reference_attention(q, k, v, lengths)) < TOL[dtype]
    with pytest.raises(ValueError, match="copy-ahead slot holds 2 requests"):
        split_attention_ce(q.to(DEV), k_host, v_host, k[b_h:].to(DEV), v[b_h:].to(DEV), lengths.to(DEV), cfg, 4,
                           ahead=(None, k_slot[:2], v_slot[:2], k_new.to(DEV), v_new.to(DEV), released.append))


@pytest.mark.parametrize("rows", [None, 3])
def test_copy_kv_rows_pairs_k_and_v_only_when_both_sides_are_adjacent(rows):
    """One copy for K and V where V follows K on both sides (all host requests staged), two where
    it cannot (a prefix of the requests); positions past `rows` are left as they were."""
    from dak.kernels.split_attention_ce import copy_kv_rows, pair_view
    g = torch.Generator().manual_seed(4)
    b_h, h, s, d = 3, 2, 7, 8
    host = torch.randn(2 * b_h, h, s, d, generator=g).to(torch.float16)  # one layer's [K | V]
    k_src, v_src = host[:b_h], host[b_h:]
    for n, want in ((b_h, 1), (2, 2)):
        slot = torch.full((2 * n * h * s * d,), float("nan"), dtype=torch.float16)
        k_dst, v_dst = slot[:n * h * s * d].view(n, h, s, d), slot[n * h * s * d:].view(n, h, s, d)
        assert copy_kv_rows(k_dst, v_dst, k_src[:n], v_src[:n], rows, non_blocking=False, paired=True) == want
        r = s if rows is None else rows
        assert torch.equal(k_dst[:, :, :r], k_src[:n, :, :r]) and torch.equal(v_dst[:, :, :r], v_src[:n, :, :r])
        assert k_dst[:, :, r:].isnan().all() and v_dst[:, :, r:].isnan().all()
    assert pair_view(k_src, v_src).shape == (2 * b_h, h, s, d)
    assert pair_view(v_src, k_src) is None and pair_view(k_src[:2], v_src[:2]) is None
    assert pair_view(k_src, v_src.clone()) is None  # another storage
    assert copy_kv_rows(k_dst, v_dst, k_src[:2], v_src[:2], rows, non_blocking=False) == 2  # not asked


def test_kv_pair_copy_switch(monkeypatch):
    from dak.shares import kv_pair_copy
    monkeypatch.delenv("DAK_KV_PAIR_COPY", raising=False)
    assert not kv_pair_copy()
    monkeypatch.setenv("DAK_KV_PAIR_COPY", "1")
    assert kv_pair_copy()
    monkeypatch.setenv("DAK_KV_PAIR_COPY", "yes")
    with pytest.raises(ValueError, match="DAK_KV_PAIR_COPY must be 0 or 1"):
        kv_pair_copy()


def test_write_token_puts_each_request_at_its_last_position():
    k_st, v_st = torch.zeros(3, 2, 6, 4), torch.zeros(3, 2, 6, 4)
    k_new, v_new = torch.randn(3, 2, 4), torch.randn(3, 2, 4)
    write_token(k_st, v_st, k_new, v_new, torch.tensor([6, 1, 3], dtype=torch.int32))
    for b, p in enumerate([5, 0, 2]):
        assert torch.equal(k_st[b, :, p], k_new[b]) and torch.equal(v_st[b, :, p], v_new[b])
        assert k_st[b].count_nonzero() == k_new[b].count_nonzero()  # nothing else written


def _staged(model, batch):
    """Force every layer's decode attention to stage its host requests (the GPU's CE path)."""
    import dataclasses
    kv = model.dak_kv
    heads = model.config.num_attention_heads
    for cache in kv.caches.values():
        cfg = cache.configs[(batch, heads)]
        cache.configs[(batch, heads)] = dataclasses.replace(cfg, ce_share=1.0, ce_chunks=1)


# without the token write (the broken first half) a layer may attend an unwritten slot row, whose
# contents (torch.empty) can hold NaN: numpy warns in the interpreter's dot, the check still holds
@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
def test_engine_with_kv_ahead_gives_the_in_place_tokens_and_needs_the_token_write(monkeypatch):
    import dak
    from dak.kernels import split_attention_ce as ce
    from dak.runtime.engine import Engine
    batch, prompt, new = 2, 5, 5
    kw = dict(batch=batch, prompt_len=prompt, gen_len=new, policy="uniform", host_ratio=1.0, dtype=torch.float16, tune=False,
              kv_buckets=1)
    plain = dak.offload("tiny-llama", **kw)
    ids = torch.randint(3, plain.config.vocab_size, (batch, prompt), generator=torch.Generator().manual_seed(2))
    want = plain.generate(ids, max_new_tokens=new, eos_token_id=None)
    want_logits = plain.dak_engine.logits.clone()
    plain.dak_free()

    model = dak.offload("tiny-llama", **kw)
    _staged(model, batch)
    engine = Engine(model, model.dak_kv, graphs=False, kv_buckets=1, kv_ahead=True)
    layers = model.config.num_hidden_layers
    assert engine.kv_ahead_layers == layers == 3
    assert [(a.slot, a.next) for a in (model.dak_kv.ahead[i] for i in range(layers))] == [(0, 1), (1, 2), (0, None)]
    with monkeypatch.context() as m:  # first, on a fresh cache: without the token write, layers
        m.setattr(ce, "write_token", lambda *a: None)  # 2 and 3 attend a zero key at the new position
        engine.generate(ids.to(engine.device), max_new_tokens=new)
        assert not torch.allclose(engine.logits.cpu(), want_logits.cpu(), atol=2e-2, rtol=2e-2)
    got = engine.generate(ids.to(engine.device), max_new_tokens=new)
    assert torch.equal(got.tokens.cpu(), want[:, prompt:].cpu())  # model.generate returns the prompt too
    assert torch.allclose(engine.logits.cpu(), want_logits.cpu(), atol=2e-2, rtol=2e-2)
    from dak.runtime import kv_ahead  # $DAK_KV_PAIR_COPY=1: each layer's K and V in one copy
    copies, real = [], kv_ahead.copy_kv_rows
    monkeypatch.setattr(kv_ahead, "copy_kv_rows", lambda *a, **kw: copies.append(real(*a, **kw)))
    for pair, per_layer in (("0", 2), ("1", 1)):
        monkeypatch.setenv("DAK_KV_PAIR_COPY", pair)
        copies.clear()
        got = engine.generate(ids.to(engine.device), max_new_tokens=new)
        assert copies and set(copies) == {per_layer}, f"DAK_KV_PAIR_COPY={pair}: copies per layer {set(copies)}"
        assert torch.equal(got.tokens.cpu(), want[:, prompt:].cpu())
    monkeypatch.setenv("DAK_KV_PAIR_COPY", "0")
    monkeypatch.setenv("DAK_KV_SLOTS", "3")  # a layer's slot is reused three staged layers later
    engine = Engine(model, model.dak_kv, graphs=False, kv_buckets=1, kv_ahead=True)
    assert [(a.slot, a.next) for a in (model.dak_kv.ahead[i] for i in range(layers))] == [(0, 1), (1, 2), (2, None)]
    got = engine.generate(ids.to(engine.device), max_new_tokens=new)
    assert torch.equal(got.tokens.cpu(), want[:, prompt:].cpu())
    monkeypatch.setenv("DAK_KV_SLOTS", "5")
    with pytest.raises(ValueError, match="DAK_KV_SLOTS"):
        Engine(model, model.dak_kv, graphs=False, kv_buckets=1, kv_ahead=True)
    monkeypatch.delenv("DAK_KV_SLOTS")
    Engine(model, model.dak_kv, graphs=False, kv_buckets=1, kv_ahead=False)  # unlinked
    assert model.dak_kv.ahead is None
    model.dak_free()


def test_kv_ahead_must_be_a_bool():
    import dak
    from dak.host import pinned_bytes
    before = pinned_bytes()
    with pytest.raises(ValueError, match="kv_ahead must be True or False"):
        dak.offload("tiny-llama", batch=1, prompt_len=2, gen_len=1, policy="uniform", host_ratio=0.5, tune=False, kv_ahead="yes")
    with pytest.raises(ValueError, match="fuse_projections must be True or False"):
        dak.offload("tiny-llama", batch=1, prompt_len=2, gen_len=1, policy="uniform", host_ratio=0.5, tune=False, fuse_projections=1)
    assert pinned_bytes() == before  # refused before anything was pinned


def test_kv_copy_stream_from_the_environment(monkeypatch):
    """KV copy-ahead copies on its own stream by default; $DAK_KV_COPY_STREAM=shared puts them on
    the linear chain's copy stream (an experiment); anything else is refused by name."""
    from dak.shares import kv_copy_stream_name
    monkeypatch.delenv("DAK_KV_COPY_STREAM", raising=False)
    assert kv_copy_stream_name() == "kv-ahead copy"
    monkeypatch.setenv("DAK_KV_COPY_STREAM", "shared")
    assert kv_copy_stream_name() == "copy"
    monkeypatch.setenv("DAK_KV_COPY_STREAM", "same")
    with pytest.raises(ValueError, match="DAK_KV_COPY_STREAM must be 'own' or 'shared'"):
        kv_copy_stream_name()


@pytest.mark.parametrize("env,standalone,ahead", [({}, True, False), ({"DAK_ATTENTION_CE_FORK": "0"}, False, False),
                                                  ({"DAK_KV_AHEAD_FORK": "1"}, True, True),
                                                  ({"DAK_ATTENTION_CE_FORK": "0", "DAK_CE_FORK": "1"}, True, True)])
def test_attention_fork_switches(env, standalone, ahead, monkeypatch):
    """Which copy-engine attention forks its staged part: the standalone one by default (H46),
    the copied-ahead decode one only when asked; $DAK_CE_FORK=1 forks both."""
    from dak.shares import attention_ce_fork_enabled
    for name in ("DAK_ATTENTION_CE_FORK", "DAK_KV_AHEAD_FORK", "DAK_CE_FORK"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert attention_ce_fork_enabled() == standalone and kv_ahead_fork_enabled() == ahead
