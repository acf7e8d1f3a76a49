"""Copy-ahead chaining (dak.kernels.copy_ahead): which operators are chained, in which slots.

CPU (Triton interpreter): recording and linking. The chained launches themselves need CUDA
streams; tests/test_copy_ahead_gpu.py runs them, under graph capture, against a reference.
"""

import os

import pytest
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

from dak.kernels import copy_ahead  # noqa: E402
from dak.kernels.config import KernelConfig  # noqa: E402
from dak.kernels.tuning import token_bucket  # noqa: E402
from dak.nn import SplitLinear  # noqa: E402
from linear_oracle import DEV  # noqa: E402  (the split modules' device: the GPU's, or the CPU under the interpreter)


def _mods(dtype=torch.bfloat16):
    torch.manual_seed(0)
    ratios = (0.5, 0.0, 0.25, 1.0, 0.5)  # the HBM-only one (0.0) is never chained
    return [SplitLinear(torch.randn(64, 32).to(dtype), host_ratio=r, row_tile=16, tune=False) for r in ratios]


def test_record_and_link_chain_in_call_order():
    mods = _mods()
    x = torch.randn(3, 32).to(torch.bfloat16).to(DEV)
    for m in mods:  # give every host-row operator a copy-engine config for 3 tokens
        if m.host_rows:
            m._configs[token_bucket(3)] = KernelConfig(block_m=16, block_n=16, block_k=32, ce_share=1.0,
                                                       ce_chunks=2, host_programs=2, hbm_programs=2)
    mods[4]._configs[token_bucket(3)] = KernelConfig(block_m=16, block_n=16, block_k=32, ce_share=0.0,
                                                     host_programs=2, hbm_programs=2)  # in place: not chained
    order = [3, 0, 2, 1, 4, 0]  # call order differs from construction order; repeats count once
    with copy_ahead.record_chain() as rec:
        for i in order:
            mods[i](x)
    assert rec == [mods[3], mods[0], mods[2]], "only copy-engine launches are recorded, first call order"
    assert copy_ahead.link_chain(rec + [mods[4]], 3) == 3
    a, b, c = mods[3]._ahead, mods[0]._ahead, mods[2]._ahead
    assert (a.slot, b.slot, c.slot) == (0, 1, 0), "neighbours use different slots"
    assert a.next is mods[0] and b.next is mods[2] and c.next is None
    assert mods[4]._ahead is None and mods[1]._ahead is None
    assert copy_ahead.current_step(mods[3], 3, a.cfg) is None, "no step is active outside copy_ahead_step"
    with copy_ahead.copy_ahead_step(torch.device("cpu")) as step:
        assert step is None, "off the GPU a step is a no-op"
    copy_ahead.unlink(mods)
    assert all(m._ahead is None for m in mods)


def test_more_slots_from_the_environment(monkeypatch):
    """$DAK_COPY_SLOTS=k: operator i of the chain uses slot i % k (copies run up to k - 1
    operators ahead); bad values are refused."""
    import pytest
    from dak.shares import copy_slot_count
    mods = [m for m in _mods() if m.host_rows]
    x = torch.randn(3, 32).to(torch.bfloat16).to(DEV)
    for m in mods:
        m._configs[token_bucket(3)] = KernelConfig(block_m=16, block_n=16, block_k=32, ce_share=1.0,
                                                   ce_chunks=1, host_programs=2, hbm_programs=2)
    with copy_ahead.record_chain() as rec:
        for m in mods:
            m(x)
    monkeypatch.setenv("DAK_COPY_SLOTS", "3")
    assert copy_ahead.link_chain(rec, 3) == 4
    assert [m._ahead.slot for m in rec] == [0, 1, 2, 0]
    copy_ahead.unlink(mods)
    for bad in ("1", "9", "two"):
        monkeypatch.setenv("DAK_COPY_SLOTS", bad)
        with pytest.raises(ValueError, match="DAK_COPY_SLOTS"):
            copy_slot_count()


def test_a_many_token_decode_chain_gets_four_slots_and_prefill_two(monkeypatch):
    """Default slots: two up to 64 tokens, four above (a batch-512 decode step: the copy of an
    operator no longer waits for a GEMM behind attention); a prefill's own chain keeps two;
    $DAK_COPY_SLOTS overrides both."""
    from dak.shares import MANY_TOKEN_COPY_SLOTS, copy_slot_count
    monkeypatch.delenv("DAK_COPY_SLOTS", raising=False)
    assert (copy_slot_count(), copy_slot_count(64), copy_slot_count(65), copy_slot_count(512)) == (2, 2, 4, 4)
    assert MANY_TOKEN_COPY_SLOTS == 4
    mods = [m for m in _mods() if m.host_rows]
    x = torch.randn(3, 32).to(torch.bfloat16).to(DEV)
    for m in mods:
        for n in (3, 65):
            m._configs[token_bucket(n)] = KernelConfig(block_m=16, block_n=16, block_k=32, ce_share=1.0,
                                                       ce_chunks=1, host_programs=2, hbm_programs=2)
    with copy_ahead.record_chain() as rec:
        for m in mods:
            m(x)
    for n, own, want in ((3, False, [0, 1, 0, 1]), (65, False, [0, 1, 2, 3]), (65, True, [0, 1, 0, 1])):
        assert copy_ahead.link_chain(rec, n, own_slots=own) == 4
        assert [m._ahead.slot for m in rec] == want, (n, own)
        copy_ahead.unlink(mods)
    monkeypatch.setenv("DAK_COPY_SLOTS", "2")
    assert copy_ahead.link_chain(rec, 65) == 4 and [m._ahead.slot for m in rec] == [0, 1, 0, 1]
    copy_ahead.unlink(mods)


def _ce_chain(mods, n=3):
    x = torch.randn(n, 32).to(torch.bfloat16).to(DEV)
    for m in mods:
        m._configs[token_bucket(n)] = KernelConfig(block_m=16, block_n=16, block_k=32, ce_share=1.0,
                                                   ce_chunks=1, host_programs=2, hbm_programs=2)
    with copy_ahead.record_chain() as rec:
        for m in mods:
            m(x)
    return rec, x


def test_copy_groups_rehome_host_rows_back_to_back_and_keep_results(monkeypatch):
    """$DAK_COPY_GROUP_MIB: consecutive chained operators share one pinned arena (in call order)
    and one slot; their values, outputs and slot alternation are kept; linking again moves
    nothing; the arena is freed with its last operator."""
    from dak.kernels.copy_groups import ArenaView
    mods = [m for m in _mods() if m.host_rows] + [m for m in _mods() if m.host_rows]  # 8 operators
    rec, x = _ce_chain(mods)
    before = [m(x).clone() for m in mods]
    hosts = [m.w_host.clone() for m in mods]
    one = mods[0].host_rows * mods[0].w_host.stride(0) * 2  # bytes of the first operator's host rows
    monkeypatch.setenv("DAK_COPY_GROUP_MIB", "1")
    assert copy_ahead.link_chain(rec, 3) == len(mods)
    groups = [m._ahead.group for m in rec]
    assert all(g is not None and g is groups[0] for g in groups), "8 small operators fit one 1 MiB group"
    assert [m._ahead.slot for m in rec] == [0] * len(rec)
    assert groups[0].numel * 2 >= one * 2 and isinstance(rec[0]._host, ArenaView)
    ptrs = [m.w_host.data_ptr() for m in rec]
    for a, b in zip(rec, rec[1:]):
        assert b.w_host.data_ptr() == a.w_host.data_ptr() + a.host_rows * a.w_host.stride(0) * 2
    assert all(torch.equal(m.w_host, h) for m, h in zip(mods, hosts))
    assert all(torch.equal(m(x), y) for m, y in zip(mods, before))
    assert copy_ahead.link_chain(rec, 3) == len(mods) and [m.w_host.data_ptr() for m in rec] == ptrs
    arena = rec[0]._host.arena
    for m in mods:
        m._host.free()
    assert arena.refs == 0 and arena.buf.tensor is None


def test_copy_groups_split_by_size_and_never_move_twice(monkeypatch):
    from dak.kernels.copy_groups import plan_groups
    mods = [m for m in _mods() if m.host_rows]  # host parts of 32, 16, 64 and 32 rows x 32 bf16
    rec, _ = _ce_chain(mods)
    from dak.kernels.split_linear_ce import ce_plan
    chain = [(m, m._configs[token_bucket(3)], ce_plan(m._configs[token_bucket(3)], m.host_rows,
                                                      m.out_features - m.host_rows, m._sms)) for m in rec]
    sizes = [m.host_rows * m.w_host.stride(0) * 2 for m in rec]
    assert plan_groups(chain, 0) == [[0], [1], [2], [3]]
    assert plan_groups(chain, sizes[0] + sizes[1]) == [[0, 1], [2], [3]]
    assert plan_groups(chain, 10 ** 9) == [[0, 1, 2, 3]]
    monkeypatch.setenv("DAK_COPY_GROUP_MIB", "1")
    copy_ahead.link_chain(rec[:2], 3)  # the first two re-homed together
    copy_ahead.link_chain([rec[1], rec[0], rec[2]], 3)  # re-homed, not adjacent in this order: not moved
    assert rec[1]._ahead.group is None and rec[0]._ahead.group is None
    assert [m._ahead.slot for m in (rec[1], rec[0], rec[2])] == [0, 1, 0]


class _Beside:
    """A host part that is a view of a buffer shared with its neighbour (what two small pinned
    allocations placed back to back look like): not an arena view."""

    def __init__(self, tensor):
        self.tensor, self.freed = tensor, False

    def free(self):
        self.freed = True


def test_operators_back_to_back_by_chance_are_still_re_homed(monkeypatch):
    """Two operators' host rows that sit back to back in separate buffers (the likely cause of
    H122's failure on an H100, where small pinned blocks may be placed so) are grouped like any
    others: re-homed into one arena, the old buffers freed, values and outputs kept."""
    from dak.kernels.copy_groups import ArenaView
    rec, x = _ce_chain([m for m in _mods() if m.host_rows][:2])
    before = [m(x).clone() for m in rec]
    sizes = [m.host_rows * m.w_host.stride(0) for m in rec]
    flat = torch.empty(sum(sizes), dtype=rec[0].dtype)
    off = 0
    for m, n in zip(rec, sizes):
        view = flat[off:off + n].view(m.host_rows, m.w_host.stride(0))[:, :m.in_features]
        view.copy_(m.w_host)
        m._host.free()
        m._host = _Beside(view)
        off += n
    assert rec[1].w_host.data_ptr() == rec[0].w_host.data_ptr() + sizes[0] * 2, "set up back to back"
    monkeypatch.setenv("DAK_COPY_GROUP_MIB", "1")
    old = [m._host for m in rec]
    copy_ahead.link_chain(rec, 3)
    assert all(o.freed for o in old) and all(isinstance(m._host, ArenaView) for m in rec)
    assert rec[0]._ahead.group is not None and rec[0]._ahead.group is rec[1]._ahead.group
    for m, b in zip(rec, before):
        torch.testing.assert_close(m(x), b, rtol=0, atol=0)


def test_wrapped_chain_keeps_its_own_slots_and_names_its_first_unit(monkeypatch):
    """$DAK_COPY_WRAP=1: every chained operator shares one Chain that owns its slots (sized at
    link time, not the process-wide shared ones) and knows its first unit (with copy groups,
    the whole first group); off, chains use the shared slots and have no first unit."""
    import pytest
    from dak.kernels.buffers import shared_buffer
    mods = [m for m in _mods() if m.host_rows]
    rec, _ = _ce_chain(mods)
    monkeypatch.delenv("DAK_COPY_WRAP", raising=False)
    copy_ahead.link_chain(rec, 3)
    chain = rec[0]._ahead.chain
    assert not chain.wrap and chain.head == () and chain.slots == {}
    monkeypatch.setenv("DAK_COPY_WRAP", "1")
    assert copy_ahead.link_chain(rec, 3) == len(rec)
    chain = rec[0]._ahead.chain
    assert chain.wrap and not chain.primed and chain.head == (rec[0],)
    assert all(m._ahead.chain is chain for m in rec)
    for i in (0, 1):
        need = max(m._ahead.plan.m_ce * m.w_host.stride(0) for m in rec if m._ahead.slot == i)
        assert chain.slots[i].numel() >= need and chain.slots[i].dtype == rec[0].dtype
        shared = shared_buffer(f"copy-ahead slot {i}", chain.slots[i].device, rec[0].dtype, 1)
        assert chain.slots[i].data_ptr() != shared.data_ptr(), "a wrapped chain's slots are its own"
    assert copy_ahead.chains_of(rec + rec) == [chain]
    copy_ahead.link_chain(rec, 3)
    assert rec[0]._ahead.chain is not chain, "linking again starts a fresh (unprimed) chain"
    monkeypatch.setenv("DAK_COPY_GROUP_MIB", "1")
    copy_ahead.link_chain(rec, 3)
    head = rec[0]._ahead.chain.head
    assert head == tuple(rec) and rec[0]._ahead.group is not None, "the first unit is the whole group"
    monkeypatch.setenv("DAK_COPY_WRAP", "yes")
    with pytest.raises(ValueError, match="DAK_COPY_WRAP must be 0, 1 or plan"):
        copy_ahead.link_chain(rec, 3)
    copy_ahead.unlink(mods)


def test_plan_wraps_a_chain_whose_operators_run_one_gemv(monkeypatch):
    """$DAK_COPY_WRAP=plan: a chain wraps when every chained operator carries the plan's one-GEMV
    flag (SplitLinear.one_gemv, from Placement.one_gemv), not when any lacks it; own-slot chains
    (a captured prefill) never wrap."""
    mods = [m for m in _mods() if m.host_rows]
    rec, _ = _ce_chain(mods)
    monkeypatch.setenv("DAK_COPY_WRAP", "plan")
    for flags, wrapped in (((True,) * len(rec), True), ((True,) * (len(rec) - 1) + (False,), False),
                           ((False,) * len(rec), False)):
        for m, f in zip(rec, flags):
            m.one_gemv = f
        assert copy_ahead.link_chain(rec, 3) == len(rec)
        chain = rec[0]._ahead.chain
        assert chain.wrap == wrapped and (chain.head == (rec[0],)) == wrapped
    for m in rec:
        m.one_gemv = True
    copy_ahead.link_chain(rec, 3, own_slots=True)
    assert not rec[0]._ahead.chain.wrap and rec[0]._ahead.chain.own
    copy_ahead.unlink(mods)


def test_an_aborted_step_unprimes_its_wrapped_chains():
    """A step that raises leaves the first slot of the chains it touched unknown: abort() marks
    them unprimed (the engine primes them again before replaying graphs)."""
    chain = copy_ahead.Chain(wrap=True, primed=True)
    step = copy_ahead.Step(torch.device("cpu"))
    step.wrapped.append(chain)
    try:
        with copy_ahead.active(copy_ahead._STEP, step):
            raise KeyboardInterrupt
    except KeyboardInterrupt:
        pass
    assert not chain.primed and step.wrapped == []
    assert copy_ahead.prime([copy_ahead.Chain(wrap=True, primed=True)]) == 0, "primed chains need nothing"


def test_freeing_a_model_unlinks_its_chain(monkeypatch):
    """dak_free drops every operator's chain entry, so a wrapped chain's own slots go at once."""
    import dak
    from dak.runtime.engine import Sampling
    monkeypatch.setenv("DAK_COPY_WRAP", "1")
    model = dak.offload("tiny-llama", batch=3, max_len=40, policy="uniform", host_ratio=0.3, dtype=torch.bfloat16, tune=False)
    engine = model.dak_engine
    engine.kv.lengths.zero_()
    with torch.no_grad(), copy_ahead.record_chain() as order:
        engine._step(Sampling())
    assert copy_ahead.link_chain(order, engine.batch) == len(order) > 0
    chain, = copy_ahead.chains_of(order)
    assert chain.slots and chain.head[0] is order[0]
    model.dak_free()
    assert all(getattr(m, "_ahead", None) is None for m in model.modules())


def test_shared_buffers_and_streams_key_cuda_by_its_index(monkeypatch):
    """A module's "cuda:0" and a caller's "cuda" must name the same staging slots: linked slots
    sized under one name and looked up under the other failed inside graph capture."""
    from dak.kernels.buffers import device_key
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    assert device_key("cuda") == device_key(torch.device("cuda:0")) == torch.device("cuda", 0)
    assert device_key("cuda:1") == torch.device("cuda", 1)
    assert device_key("cpu") == torch.device("cpu")


@pytest.mark.parametrize("flag,own", [("1", False), ("0", False), (None, False), ("1", True), (None, True)])
def test_chained_large_n_operators_copy_once_but_the_last(flag, own, monkeypatch):
    """$DAK_CHAIN_ONE_CHUNK (unset: on in decode chains of more than 64 tokens, off in a prefill's own
    chain): a chained large-N operator (hbm_cublas) is copied in one memcpy, the chain's last keeps its
    chunks; decode-size configs keep theirs; results equal."""
    if flag is None:
        monkeypatch.delenv("DAK_CHAIN_ONE_CHUNK", raising=False)
    else:
        monkeypatch.setenv("DAK_CHAIN_ONE_CHUNK", flag)
    mods = [m for m in _mods() if m.host_rows]
    n = 70  # a large-N token count
    x = torch.randn(n, 32).to(torch.bfloat16).to(DEV)
    kinds = [True, True, False, True]  # the third runs the decode-size path
    for m, many in zip(mods, kinds):
        m._configs[token_bucket(n)] = KernelConfig(block_m=16, block_n=16, block_k=32, ce_share=1.0, ce_chunks=4,
                                                   ce_taper=0.5 if many else 1.0, hbm_cublas=many,
                                                   host_programs=2, hbm_programs=2)
    ref = [m(x) for m in mods]  # the same configs, not chained yet
    with copy_ahead.record_chain() as rec:
        for m in mods:
            m(x)
    assert copy_ahead.link_chain(rec, n, own_slots=own) == 4
    chunks = [(len(m._ahead.plan.chunks), m._configs[token_bucket(n)] is m._ahead.cfg) for m in mods]
    # host rows 32, 16, 64, 32 in 16-row tiles: 4 chunks cap at 2, 1, 4, 2
    first = 1 if flag == "1" or (flag is None and not own) else 2
    assert chunks == [(first, True), (1, True), (4, True), (2, True)]
    for m, r in zip(mods, ref):
        if DEV.type == "cuda":  # one copy instead of chunks: cuBLAS may multiply other shapes, so not bit for bit
            torch.testing.assert_close(m(x).float(), r.float(), atol=1e-2, rtol=1e-2)
        else:
            assert torch.equal(m(x), r)
    copy_ahead.unlink(mods)


def test_chain_one_chunk_default_starts_above_the_decode_token_limit(monkeypatch):
    """Unset, one memcpy per chained operator only for decode chains beyond MAX_DECODE_TOKENS (where
    H144/H146 measured it); '1'/'0' force it for every chain, a prefill's own (None) included."""
    from dak.planner.curves import MAX_DECODE_TOKENS
    from dak.shares import chain_one_chunk
    monkeypatch.delenv("DAK_CHAIN_ONE_CHUNK", raising=False)
    assert [chain_one_chunk(n) for n in (None, 1, MAX_DECODE_TOKENS, MAX_DECODE_TOKENS + 1, 512)] == \
        [False, False, False, True, True]
    for flag in ("0", "1"):
        monkeypatch.setenv("DAK_CHAIN_ONE_CHUNK", flag)
        assert {chain_one_chunk(n) for n in (None, 8, 512)} == {flag == "1"}


def test_own_slot_chains_leave_the_shared_slots_alone():
    """link_chain(own_slots=True) (a captured prefill): the chain's slots are its own, sized at
    link time, so linking it cannot grow a shared slot that a captured decode graph holds."""
    from dak.kernels.buffers import _BUFFERS
    mods = [m for m in _mods() if m.host_rows]
    for m in mods:
        m._configs[token_bucket(3)] = KernelConfig(block_m=16, block_n=16, block_k=32, ce_share=1.0,
                                                   ce_chunks=1, host_programs=2, hbm_programs=2)
    shared = {k: v for k, v in _BUFFERS.items() if k[0].startswith("copy-ahead slot")}
    assert copy_ahead.link_chain(mods, 3, own_slots=True) == len(mods)
    chain = mods[0]._ahead.chain
    assert chain.own and not chain.wrap and all(m._ahead.chain is chain for m in mods)
    assert sorted(chain.slots) == [0, 1]
    assert chain.slots[0].numel() >= max(m.host_rows * m.w_host.stride(0) for m in mods[::2])
    after = {k: v for k, v in _BUFFERS.items() if k[0].startswith("copy-ahead slot")}
    assert after.keys() == shared.keys() and all(after[k] is shared[k] for k in shared)
    slot0 = copy_ahead._unit_slot(mods[0], torch.device("cpu"))
    assert slot0.data_ptr() == chain.slots[0].data_ptr()
    copy_ahead.unlink(mods)
