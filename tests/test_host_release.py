"""Pinned memory released during CUDA graph capture waits until the capture is over.

cudaFreeHost / cudaHostUnregister synchronize the device, which invalidates a capture in
progress ("operation failed due to a previous error during capture"). dak.host defers them.
"""

import gc

import pytest
import torch

import dak.host as host


def test_release_waits_for_the_capture(monkeypatch):
    calls = []
    capturing = [True]
    monkeypatch.setattr(host, "_capturing", lambda: capturing[0])
    monkeypatch.setattr(host, "_DEFERRED", [])
    host._release(calls.append, "a")
    host._release(calls.append, "b")
    assert calls == [] and host.release_deferred() == 0  # still capturing: nothing runs
    capturing[0] = False
    host._release(calls.append, "c")  # the first release after capture runs the waiting ones first
    assert calls == ["a", "b", "c"] and host._DEFERRED == []
    assert host.release_deferred() == 0


def test_pinned_bytes_counts_deferred_memory_until_released(monkeypatch):
    capturing = [True]
    monkeypatch.setattr(host, "_capturing", lambda: capturing[0])
    monkeypatch.setattr(host, "_DEFERRED", [])
    monkeypatch.setattr(host, "_LIVE", [1000])
    host._unregister(0, torch.empty(3), 1000)  # a finalizer firing inside capture
    assert host._LIVE[0] == 1000 and len(host._DEFERRED) == 1
    capturing[0] = False
    monkeypatch.setattr(host.torch.cuda, "cudart", lambda: type("rt", (), {"cudaHostUnregister": staticmethod(
        lambda p: 0)}))
    assert host.pinned_bytes() == 0 and host._DEFERRED == []


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (run on the device machine)")
@pytest.mark.parametrize("method", ["alloc", "register", "thp"])
def test_buffer_dropped_inside_capture_keeps_the_capture_valid(monkeypatch, method):
    monkeypatch.setattr(host, "PIN_METHOD", method)
    before = host.pinned_bytes()
    doomed = host.PinnedBuffer((64, 100), torch.bfloat16)
    assert doomed.pinned and host.pinned_bytes() > before
    x = torch.randn(256, device="cuda")
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        y = x * 2
        del doomed  # its release arrives mid-capture
        gc.collect()
        y += 1
    g.replay()
    torch.cuda.synchronize()
    assert torch.equal(y, x * 2 + 1)
    assert host.pinned_bytes() == before  # released once the capture ended


def test_unknown_pin_method_is_refused_when_pinning_not_at_import():
    import os
    import subprocess
    import sys
    env = dict(os.environ, DAK_PIN_METHOD="bogus")
    code = ("import dak, torch, dak.host as h\n"
            "try:\n    h.PinnedBuffer((2, 8), torch.float16)\nexcept ValueError as e:\n    print('refused:', e)")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr  # `import dak` works: `dak env` must be able to report the bad value
    assert "refused: DAK_PIN_METHOD must be one of alloc, alloc-wc, register" in r.stdout
    r = subprocess.run([sys.executable, "-m", "dak", "env"], env=env, capture_output=True, text=True)
    assert r.returncode == 2 and "DAK_PIN_METHOD='bogus'" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.parametrize("nbytes", [1, 4096 * 3 + 17, (2 << 20) + 5])
def test_thp_memory_is_huge_page_aligned_zeroed_and_kept_alive(nbytes):
    import gc
    t = host._thp_bytes(nbytes)
    assert t.numel() == nbytes and t.data_ptr() % (2 << 20) == 0 and not t.any()
    gc.collect()  # the mapping lives as long as the tensor
    t.fill_(7)
    assert int(t.sum()) == 7 * nbytes
