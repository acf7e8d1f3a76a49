"""state_dict / load_state_dict of split modules and of offloaded models (CPU, Triton interpreter; a GPU too):
the keys and values of the modules they replace, loading in place, and torch's errors."""

import os

import pytest
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

import dak  # noqa: E402
from dak.nn import SplitLinear  # noqa: E402
from dak.nn.fused_proj import ProjectionGroup  # noqa: E402
from dak.runtime.embedding import SplitEmbedding  # noqa: E402
from dak.runtime_env import kernel_device  # noqa: E402
from runtime_checks import hf_model as _hf_model  # noqa: E402

TOL = {torch.bfloat16: 1e-2, torch.float16: 2e-3}
DEV = kernel_device()  # where split modules keep their HBM rows (the CPU in the interpreter)


def _rel(y, ref):
    return ((y.double() - ref).norm() / ref.norm()).item()


@pytest.mark.parametrize("ratio,bias,dtype", [(0.0, True, torch.float16), (0.4, False, torch.bfloat16),
                                              (0.4, True, torch.float16), (1.0, True, torch.bfloat16)])
def test_split_linear_saves_and_loads_as_a_linear(ratio, bias, dtype):
    torch.manual_seed(int(ratio * 10) + bias)
    old, new = (torch.nn.Linear(37, 70, bias=bias).to(dtype) for _ in range(2))
    mod = SplitLinear.from_linear(old, host_ratio=ratio, row_tile=16)
    sd = mod.state_dict()
    assert list(sd) == list(old.state_dict())
    for k, v in old.state_dict().items():
        assert sd[k].device.type == "cpu" and torch.equal(sd[k], v), k
    sd["weight"].fill_(0)  # a copy: the module keeps its rows
    assert torch.equal(mod.full_weight().cpu(), old.weight.detach())
    mod.load_state_dict(new.state_dict())
    assert torch.equal(mod.full_weight().cpu(), new.weight.detach())
    x = torch.randn(3, 37).to(dtype)
    ref = x.double() @ new.weight.double().T + (new.bias.double() if bias else 0)
    y = torch.full((3, 70), float("nan"), dtype=dtype)
    y.copy_(mod(x.to(DEV)))  # the module's rows are on the kernel device (a GPU where there is one)
    assert _rel(y, ref) < TOL[dtype]


def test_load_errors_name_the_key():
    mod = SplitLinear(torch.randn(32, 16).bfloat16(), torch.randn(32).bfloat16(), host_ratio=0.5, row_tile=16)
    before = mod.full_weight().cpu()
    with pytest.raises(RuntimeError, match="size mismatch for weight"):
        mod.load_state_dict({"weight": torch.randn(33, 16), "bias": torch.randn(32)})
    assert torch.equal(mod.full_weight().cpu(), before)  # a rejected weight touches no row
    with pytest.raises(RuntimeError, match="Missing key.*bias"):  # as torch: the present keys still load
        mod.load_state_dict({"weight": torch.randn(32, 16)})
    last = torch.randn(32, 16)
    with pytest.raises(RuntimeError, match="Unexpected key.*extra"):
        mod.load_state_dict({"weight": last, "bias": torch.randn(32), "extra": torch.ones(1)})
    assert torch.equal(mod.full_weight().cpu(), last.bfloat16())
    with pytest.raises(RuntimeError, match="dtype mismatch for weight"):
        mod.load_state_dict({"weight": torch.ones(32, 16, dtype=torch.int64), "bias": torch.randn(32)})
    assert torch.equal(mod.full_weight().cpu(), last.bfloat16())
    w = torch.randn(32, 16)
    res = mod.load_state_dict({"weight": w, "extra": torch.ones(1), "sub.weight": w}, strict=False)
    assert res.missing_keys == ["bias"] and res.unexpected_keys == ["extra", "sub.weight"]
    assert torch.equal(mod.full_weight().cpu(), w.bfloat16())
    mod.load_state_dict({"weight": -w, "bias": torch.ones(32)}, assign=True)  # homes fixed: copied
    assert torch.equal(mod.full_weight().cpu(), -w.bfloat16()) and mod.w_host.is_pinned() == mod._host.pinned


def test_fused_members_load_into_the_fused_matrix():
    torch.manual_seed(3)
    mods = [SplitLinear(torch.randn(n, 24).half(), torch.randn(n).half(), host_ratio=0.0) for n in (16, 8, 8)]
    group = ProjectionGroup(mods)
    new = [torch.nn.Linear(24, n).half() for n in (16, 8, 8)]
    for m, lin in zip(mods, new):
        m.load_state_dict(lin.state_dict())
    assert torch.equal(group.weight.cpu(), torch.cat([lin.weight.detach() for lin in new]))
    x = torch.randn(2, 24).half()
    for m, lin in zip(mods, new):
        assert _rel(m(x.to(DEV)).cpu(), x.double() @ lin.weight.double().T + lin.bias.double()) < TOL[torch.float16]


def test_split_embedding_saves_and_loads_its_rows():
    w = torch.randn(11, 8).half()
    emb = SplitEmbedding(w[:4].clone(), w[4:].clone())
    assert list(emb.state_dict()) == ["weight"] and torch.equal(emb.state_dict()["weight"], w)
    w2 = torch.randn(11, 8).half()
    emb.load_state_dict({"weight": w2})
    ids = torch.tensor([[0, 3, 4, 10]])
    assert torch.equal(emb(ids), torch.nn.functional.embedding(ids, w2))
    with pytest.raises(ValueError, match="token ids are on meta"):  # (on a GPU: CPU ids, which would fault)
        emb(ids.to("meta"))


def _perturbed(model, seed):
    torch.manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    return model


@pytest.mark.parametrize("family", ["tiny-llama", "tiny-opt"])
def test_offloaded_model_round_trips_hf_state_dicts(family, tmp_path):
    """An offloaded model's state_dict has HF's keys and values (so save_pretrained writes a
    checkpoint plain HF loads); loading another model's state dict makes it that model."""
    from transformers import AutoModelForCausalLM
    a, b = _hf_model(family), _perturbed(_hf_model(family), 2)
    model = dak.offload(_hf_model(family), batch=2, max_len=12, policy="uniform", host_ratio=0.3, dtype=torch.float16, tune=False)
    assert any(isinstance(m, SplitLinear) and 0 < m.host_rows < m.out_features for m in model.modules())
    want = a.state_dict()
    got = model.state_dict()
    assert sorted(got) == sorted(want)
    bad = [k for k, v in want.items() if not torch.equal(got[k].cpu(), v)]
    assert not bad, bad[:4]
    model.save_pretrained(tmp_path)
    saved = AutoModelForCausalLM.from_pretrained(tmp_path, dtype=torch.float16).state_dict()
    assert sorted(saved) == sorted(want) and all(torch.equal(saved[k], v) for k, v in want.items())
    ids = torch.randint(3, a.config.vocab_size, (2, 5), generator=torch.Generator().manual_seed(0))
    eng = model.dak_engine
    for ref in (b, a):
        model.load_state_dict(ref.state_dict())
        ids_d, plen, _ = eng._check(ids, 1, None)
        logits = eng.prefill(ids_d, plen).cpu()
        with torch.no_grad():
            want_logits = ref(ids).logits[:, -1].double()
        assert _rel(logits, want_logits) < 1e-2, ref is a
    model.dak_free()
    with pytest.raises(RuntimeError, match="released"):
        model.state_dict()


def test_split_modules_refuse_to_change_dtype_or_device():
    mod = SplitLinear(torch.randn(32, 16).half(), torch.randn(32).half(), host_ratio=0.5, row_tile=16)
    emb = SplitEmbedding(torch.randn(3, 8).half(), torch.randn(5, 8).half())
    for m in (mod, emb):
        for move in (lambda m: m.float(), lambda m: m.bfloat16(), lambda m: m.to("meta")):
            with pytest.raises(RuntimeError, match="keeps its rows where the placement put them"):
                move(m)
        assert m.to(m.w_hbm.device) is m and m.half() is m and m.w_hbm.dtype == torch.float16
