"""tests/interp_patch.py (the suite's faster Triton interpreter) computes what Triton's own does."""

import os

import pytest
import torch

pytestmark = pytest.mark.skipif(os.environ.get("TRITON_INTERPRET", "0") in ("", "0"),
                                reason="patches Triton's CPU interpreter only")

import triton  # noqa: E402
import triton.language as tl  # noqa: E402


@triton.jit
def _row_stats(x_ptr, row, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * n + offs, mask=offs < n, other=float("-inf"))
    acc = tl.zeros((BLOCK,), dtype=tl.float32) + tl.where(offs < n, x, 0.0)  # tl.zeros: Triton's own @jit
    return tl.max(x, axis=0), tl.sum(acc, axis=0), tl.cdiv(n, 3)


@triton.jit
def _stats_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    mx, total, third = _row_stats(x_ptr, row, n, BLOCK)
    tl.store(out_ptr + row * 3, mx)
    tl.store(out_ptr + row * 3 + 1, total)
    tl.store(out_ptr + row * 3 + 2, third.to(tl.float32))


def _run(x):
    out = torch.full((x.shape[0], 3), float("nan"))
    _stats_kernel[(x.shape[0],)](x, out, x.shape[1], BLOCK=triton.next_power_of_2(x.shape[1]))
    return out


@pytest.mark.parametrize("n", [1, 5, 17])
def test_patched_interpreter_matches_triton_and_torch(n, monkeypatch):
    """A kernel whose helper calls Triton's own @jit functions (tl.zeros, the reductions, tl.cdiv) gives
    torch's result under Triton's interpreter and under the patch, which patches fewer times."""
    from triton.runtime import interpreter as ti

    from interp_patch import install
    assert install()  # conftest installed it already: a second install changes nothing
    patched = ti._patch_lang
    real = patched.dak_real
    x = torch.randn(7, n)
    want = torch.stack([x.max(1).values, x.sum(1), torch.full((7,), float(-(-n // 3)))], 1)
    calls = []

    def counting(fn):
        calls.append(fn.__name__)
        return real(fn)
    monkeypatch.setattr(ti, "_patch_lang", counting)  # Triton's own: every @jit call patches
    slow = _run(x)
    torch.testing.assert_close(slow, want)
    slow_calls, calls[:] = len(calls), []
    monkeypatch.setattr(ti, "_patch_lang", patched)
    monkeypatch.setattr(patched, "dak_real", counting)
    fast = _run(x)
    assert torch.equal(fast, slow)
    assert calls[0] == "_stats_kernel" and len(calls) < slow_calls / 3, (len(calls), slow_calls)
    assert tl.core.is_builtin(tl.program_id)  # the launch's patch was restored after it
    before = len(calls)
    fast_again = _run(x)  # device calls into modules a device call left patched: none patches again
    assert torch.equal(fast_again, slow) and calls[before:] == ["_stats_kernel"]
