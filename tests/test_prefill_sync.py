"""A prefill launches its layers without waiting on the device: no tensor-to-Python read
(aten._local_scalar_dense, a device sync on the GPU) per layer. The KV cache's position check
(one such read per layer) cost OPT-6.7B's prefill 32 syncs; the Engine checks the prompts once."""

import os

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

import dak  # noqa: E402


class ScalarReads(TorchDispatchMode):
    """Counts aten._local_scalar_dense calls (.item(), int(t), bool(t) on a tensor) in its block."""

    def __init__(self):
        super().__init__()
        self.n = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func is torch.ops.aten._local_scalar_dense.default:
            self.n += 1
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("name,ratio", [("tiny-opt", 0.0), ("tiny-opt", 0.4), ("tiny-llama", 0.4)])
def test_prefill_reads_no_device_scalar(name, ratio):
    model = dak.offload(name, batch=2, prompt_len=5, gen_len=2, policy="uniform", host_ratio=ratio, tune=False)
    eng = model.dak_engine
    ids, plen, _ = eng._check(torch.randint(3, 900, (2, 5)), 2, torch.tensor([5, 3]))
    eng.prefill(ids, plen)  # configs and compiles outside the count
    with ScalarReads() as reads:
        eng.prefill(ids, plen)
    assert reads.n == 0, f"{reads.n} device scalar reads in one prefill of {name}"
    with ScalarReads() as reads:  # the counter itself sees a read
        int(plen.max())
    assert reads.n == 1
    model.dak_free()
