import math

import pytest

from dak.models import Workload, list_operators, load_spec, minimum_hbm_set


def test_llama2_7b_decode_linears():
    ops = list_operators(load_spec("llama-2-7b"), Workload("decode", 8, 512, 128))
    for layer in range(32):
        lin = {o.kind: o.shape for o in ops if o.layer == layer and o.shape is not None}
        assert lin == {"q_proj": (4096, 4096), "k_proj": (4096, 4096), "v_proj": (4096, 4096),
                       "o_proj": (4096, 4096), "gate_proj": (11008, 4096), "up_proj": (11008, 4096),
                       "down_proj": (4096, 11008)}
    g = next(o for o in ops if o.name == "layers.3.mlp.gate_proj")
    assert g.bytes == g.traffic == 11008 * 4096 * 2
    assert g.flops == 2 * 8 * 4096 * 11008
    assert g.units == 172 and g.unit_bytes == 64 * 4096 * 2
    assert [o.kind for o in ops if o.layer is None] == ["embed_tokens", "lm_head"]


def test_kv_bytes_llama3_70b():
    ops = list_operators(load_spec("llama-3-70b"), Workload("decode", 16, 4000, 96))
    kv = sum(o.bytes for o in ops if o.kind == "attention")
    assert kv == 2 * 80 * 8 * 128 * 2 * 16 * 4096
    a = next(o for o in ops if o.kind == "attention")
    assert a.units == 16 and a.unit_bytes == 2 * 8 * 128 * 2 * 4096
    # decode traffic: B x average context L + (G+1)/2 tokens of K and V
    assert a.traffic == pytest.approx(2 * 8 * 128 * 2 * 16 * (4000 + 97 / 2))
    assert a.flops == pytest.approx(4 * 16 * 64 * 128 * (4000 + 97 / 2))


def test_prefill_counts():
    w = Workload("prefill", 2, 100, 0, "fp16")
    ops = list_operators(load_spec("llama-2-7b"), w)
    q = next(o for o in ops if o.kind == "q_proj")
    assert q.flops == 2 * 200 * 4096 * 4096
    a = next(o for o in ops if o.kind == "attention")
    assert a.flops == pytest.approx(4 * 2 * 32 * 128 * 100 * 101 / 2)
    assert a.bytes == a.traffic == 2 * 4096 * 2 * 2 * 100
    e = next(o for o in ops if o.kind == "embed_tokens")
    assert e.traffic == 200 * 4096 * 2 and e.bytes == 32000 * 4096 * 2 and e.units == 32000
    lm = next(o for o in ops if o.kind == "lm_head")
    assert lm.flops == 2 * 2 * 4096 * 32000  # only the last position's logits


def test_partial_tiles_and_bias():
    ops = list_operators(load_spec("qwen2.5-7b"), Workload("decode", 1, 8, 1), tile_rows=100)
    k = next(o for o in ops if o.kind == "k_proj")
    assert k.shape == (512, 3584) and k.bytes == 512 * 3585 * 2
    assert k.units == 6 and k.unit_bytes == 100 * 3585 * 2
    assert k.host_bytes_for(5) == 500 * 3585 * 2 and k.host_bytes_for(6) == k.bytes
    assert k.host_rows_for(6) == 512
    o = next(o for o in ops if o.kind == "o_proj")
    assert o.bytes == 3584 * 3584 * 2  # no bias on o_proj


def test_opt_ops():
    ops = list_operators(load_spec("opt-6.7b"), Workload("decode", 4, 100, 10))
    kinds = [o.kind for o in ops if o.layer == 0]
    assert kinds == ["q_proj", "k_proj", "v_proj", "attention", "out_proj", "fc1", "fc2"]
    pos = next(o for o in ops if o.kind == "embed_positions")
    assert pos.units == 2050 and pos.bytes == 2050 * 4096 * 2
    assert "embed_tokens" not in {o.kind for o in ops}  # tied: the table is the lm_head operator
    lm = next(o for o in ops if o.kind == "lm_head")
    assert lm.bytes == 50272 * 4096 * 2 and lm.traffic == lm.bytes + 4 * 4096 * 2
    fc1 = next(o for o in ops if o.kind == "fc1")
    assert fc1.bytes == 16384 * 4097 * 2
    with pytest.raises(ValueError, match="max_position_embeddings"):
        list_operators(load_spec("opt-6.7b"), Workload("decode", 1, 2000, 100))


def test_minimum_set():
    s = load_spec("llama-2-7b")
    m = minimum_hbm_set(s, Workload("decode", 8, 512, 128))
    assert m.small_params == (65 * 4096) * 2
    assert m.reserve == 2**30
    assert m.workspace >= 8 * 32000 * 4  # fp32 logits
    p = minimum_hbm_set(s, Workload("prefill", 8, 512, 0), reserve=0)
    assert p.workspace >= 8 * 512 * 11008 * 2 and p.reserve == 0


@pytest.mark.parametrize("kwargs,match", [
    (dict(phase="decode", batch=0, prompt_len=1, gen_len=1), "batch"),
    (dict(phase="decode", batch=1, prompt_len=0, gen_len=1), "prompt_len"),
    (dict(phase="decode", batch=1, prompt_len=1, gen_len=0), "gen_len"),
    (dict(phase="prefill", batch=1, prompt_len=1, gen_len=-1), "gen_len"),
    (dict(phase="decode", batch=1, prompt_len=1, gen_len=1, dtype="int8"), "unsupported dtype 'int8'"),
    (dict(phase="train", batch=1, prompt_len=1, gen_len=1), "phase"),
    (dict(phase="decode", batch=1, prompt_len=1, gen_len=1, kv_buckets=0), "kv_buckets"),
])
def test_workload_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        Workload(**kwargs)


def test_prefill_allows_zero_gen():
    assert Workload("prefill", 1, 1, 0).tokens == 1
    assert math.isclose(Workload("decode", 2, 10, 3).context, 12.0)
