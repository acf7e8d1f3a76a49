"""dak.nn.fused_proj: sibling all-HBM projections multiplied as one matrix (CPU; torch matmul path)."""

import itertools

import pytest
import torch
from torch import nn

from dak.nn.fused_proj import ProjectionGroup, fuse_projections, why_not_fused
from dak.nn.split_linear import SplitLinear
from linear_oracle import DEV  # the split modules' device: the GPU's, or the CPU under the interpreter

TOL = {torch.bfloat16: 2e-2, torch.float16: 2e-3}


def _members(rows=(48, 16, 16), k=40, bias=True, dtype=torch.bfloat16, host_rows=0):
    ws = [torch.randn(r, k) * 0.1 for r in rows]
    bs = [torch.randn(r) * 0.1 if bias else None for r in rows]
    mods = [SplitLinear(w.to(dtype), None if b is None else b.to(dtype), host_rows=host_rows if i == 0 else 0,
                        row_tile=1, tune=False) for i, (w, b) in enumerate(zip(ws, bs))]
    return mods, ws, bs


def _ref(x, w, b, dtype):
    y = x.float().cpu() @ w.to(dtype).float().T
    return y if b is None else y + b.to(dtype).float()


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("bias", [True, False])
def test_every_call_order_gives_each_member_its_own_product(dtype, bias):
    mods, ws, bs = _members(bias=bias, dtype=dtype)
    ProjectionGroup(mods)
    for order in itertools.permutations(range(3)):
        x = torch.randn(3, 5, 40).to(dtype).to(DEV)  # fresh input: (batch, tokens, features)
        outs = {i: torch.full((3, 5, mods[i].out_features), float("nan"), device=DEV) for i in order}  # poisoned
        for i in order:
            outs[i] = mods[i](x)
        for i in order:
            want = _ref(x.reshape(-1, 40), ws[i], bs[i], dtype).reshape(3, 5, -1)
            assert outs[i].shape == want.shape and outs[i].dtype == dtype
            torch.testing.assert_close(outs[i].float().cpu(), want, atol=TOL[dtype], rtol=TOL[dtype])


def test_a_reused_input_object_is_recomputed_after_every_member_took_its_part():
    mods, ws, bs = _members()
    group = ProjectionGroup(mods)
    x = torch.randn(4, 40).to(torch.bfloat16).to(DEV)  # a static buffer, rewritten in place between steps
    for _ in range(3):
        x.copy_(torch.randn(4, 40))
        got = [m(x) for m in mods]
        assert group._y is None and group._x is None  # nothing held once all members were served
        for g, w, b in zip(got, ws, bs):
            torch.testing.assert_close(g.float().cpu(), _ref(x, w, b, torch.bfloat16), atol=2e-2, rtol=2e-2)
    q = mods[0](x)  # a member called twice with the same input recomputes, also from new contents
    x.copy_(torch.randn(4, 40))
    q2 = mods[0](x)
    torch.testing.assert_close(q2.float().cpu(), _ref(x, ws[0], bs[0], torch.bfloat16), atol=2e-2, rtol=2e-2)
    assert not torch.equal(q, q2)


def test_members_are_views_of_one_matrix_and_keep_their_weights():
    mods, ws, bs = _members()
    before = [m.w_hbm.clone() for m in mods]
    group = ProjectionGroup(mods)
    assert group.weight.shape == (80, 40) and group.bias.shape == (80,)
    for m, w0 in zip(mods, before):
        assert m.w_hbm.untyped_storage().data_ptr() == group.weight.untyped_storage().data_ptr()
        assert torch.equal(m.w_hbm, w0)
    mods[1].w_hbm.fill_(0)  # a loader writing into a member writes into the fused matrix
    assert not group.weight[48:64].any() and group.weight[:48].any()


def test_what_cannot_be_fused_is_refused_or_left_alone():
    mods, _, _ = _members(host_rows=8)  # q has host rows
    assert "all-HBM" in why_not_fused(mods)
    with pytest.raises(ValueError, match="all-HBM"):
        ProjectionGroup(mods)
    mixed, _, _ = _members(bias=True)
    mixed[2] = _members(rows=(16,), bias=False)[0][0]
    assert "bias presence" in why_not_fused(mixed)
    assert "at least two" in why_not_fused(mixed[:1])
    ok, _, _ = _members()
    ProjectionGroup(ok)
    assert "ungrouped" in why_not_fused(ok)  # already in a group

    class Attn(nn.Module):
        def __init__(self, q, k, v):
            super().__init__()
            self.q_proj, self.k_proj, self.v_proj = q, k, v

    split_q, _, _ = _members(host_rows=8)
    plain, _, _ = _members()
    model = nn.ModuleList([Attn(*split_q), Attn(*plain)])
    assert fuse_projections(model) == 1 and split_q[1]._group is None and plain[1]._group is not None
    assert fuse_projections(model) == 0  # idempotent
