"""SplitLinear as a drop-in for nn.Linear (CPU, Triton interpreter) and its bad-input errors."""

import pytest
import torch

from dak.nn import SplitLinear
from dak.nn.split_linear import host_rows_for
from linear_oracle import DEV  # the split module's device: the GPU's, or the CPU under the interpreter

TOL = {torch.bfloat16: 1e-2, torch.float16: 2e-3}


@pytest.mark.parametrize("ratio", [0.0, 0.3, 1.0])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_module_matches_linear(ratio, dtype):
    torch.manual_seed(int(ratio * 10) + (dtype == torch.float16))
    lin = torch.nn.Linear(40, 70, bias=ratio != 0.3).to(dtype)
    mod = SplitLinear.from_linear(lin, host_ratio=ratio, row_tile=16)
    assert mod.host_rows == host_rows_for(70, 16, host_ratio=ratio)
    x = torch.randn(2, 3, 40).to(dtype)
    ref = x.double() @ lin.weight.double().T + (0 if lin.bias is None else lin.bias.double())
    y = mod(x.to(DEV)).cpu()
    assert y.shape == (2, 3, 70) and y.dtype == dtype
    assert ((y.double() - ref).norm() / ref.norm()).item() < TOL[dtype]
    assert torch.equal(mod.full_weight().cpu(), lin.weight.detach())


def test_host_rows_round_up_to_row_tiles():
    assert host_rows_for(1000, 64, host_ratio=0.01) == 64
    assert host_rows_for(1000, 64, host_ratio=0.999) == 1000
    assert host_rows_for(1000, 64, host_rows=65) == 128
    assert host_rows_for(1000, 64, host_ratio=0.0) == 0


@pytest.mark.parametrize("kw", [{"host_ratio": 1.5}, {"host_ratio": -0.1}, {"host_ratio": float("nan")},
                                {"host_rows": 71}, {"host_rows": -1}, {}, {"host_ratio": 0.5, "host_rows": 3}])
def test_bad_split_requests(kw):
    with pytest.raises(ValueError, match="host_r"):
        SplitLinear(torch.randn(70, 40).bfloat16(), **kw)


def test_bad_weight_dtype():
    with pytest.raises(ValueError, match="bfloat16"):
        SplitLinear(torch.randn(70, 40), host_ratio=0.5)


def test_bad_forward_inputs():
    mod = SplitLinear(torch.randn(32, 16).bfloat16(), host_ratio=0.5, row_tile=16)
    with pytest.raises(ValueError, match="dtype"):
        mod(torch.randn(2, 16))
    with pytest.raises(ValueError, match="in_features|expected input"):
        mod(torch.randn(2, 17).bfloat16())
    with pytest.raises(ValueError, match="contiguous"):
        mod(torch.randn(16, 4).bfloat16().t())


def test_cpu_only_machine_asking_for_gpu_path(monkeypatch):
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    with pytest.raises(RuntimeError, match="CUDA GPU"):
        SplitLinear(torch.randn(32, 16).bfloat16(), host_ratio=0.5)


def test_pageable_or_misaligned_host_storage_is_rejected(monkeypatch):
    import dak.host as host
    monkeypatch.setattr(host, "interpreting", lambda: False)
    with pytest.raises(ValueError, match="pageable"):
        host.check_host_tensor(torch.randn(4, 8).bfloat16())
    monkeypatch.setattr(torch.Tensor, "is_pinned", lambda self: True)
    odd = torch.randn(4, 9).bfloat16()[:, :8]  # 18-byte row stride
    with pytest.raises(ValueError, match="16-byte"):
        host.check_host_tensor(odd)
    with pytest.raises(ValueError, match="host memory"):
        host.check_host_tensor(torch.randn(4, 8).bfloat16().to("meta"))
