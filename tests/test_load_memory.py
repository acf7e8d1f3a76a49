"""Loading a safetensors checkpoint streams it into the weights' homes: the process's anonymous
memory grows by the weights' bytes and not by a second copy (issue 5: peak host RSS stays near
the pinned bytes). On the CPU every home is host memory, so the bound is the whole model; on a
GPU the HBM rows leave host memory altogether.

A child process offloads the checkpoint while this process polls its RssAnon from /proc: pages
of the memory-mapped shards are file-backed (page cache), so what it counts is the copies
dak makes. A loader that kept a cloned state dict, as a full CPU model would, fails here.
CPU only: on a GPU, whether cudaHostAlloc's pages show as RssAnon is the driver's business."""

import json
import os
import select
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

pytestmark = pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs Linux /proc")

CHILD = textwrap.dedent("""
    import json, os, sys
    os.environ.setdefault("TRITON_INTERPRET", "1")
    import torch, dak
    dak.offload("tiny-llama", batch=1, max_len=8, policy="uniform", host_ratio=0.5, dtype=torch.float16, tune=False).dak_free()
    print("READY", flush=True)
    sys.stdin.readline()
    model = dak.offload(sys.argv[1], batch=1, max_len=16, policy="uniform", host_ratio=0.5, dtype=torch.float16, tune=False)
    print("LOADED", flush=True)
    sys.stdin.readline()
    """)


def _anon(pid: int) -> int | None:
    """RssAnon of `pid` in bytes, None once it has exited."""
    try:
        with open(f"/proc/{pid}/status") as f:
            return next((int(line.split()[1]) * 1024 for line in f if line.startswith("RssAnon:")), None)
    except FileNotFoundError:
        return None


def _peak_growth(folder: str, log: Path) -> int:
    env = dict(os.environ, TRITON_INTERPRET="1", CUDA_VISIBLE_DEVICES="",  # the CPU case, on a GPU machine too
               PYTHONPATH=os.pathsep.join(sys.path))
    with open(log, "w") as err:
        child = subprocess.Popen([sys.executable, "-c", CHILD, folder], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, stderr=err, text=True, env=env)
    try:
        def expect(word):
            line = child.stdout.readline().strip()
            assert line == word, f"the child process did not reach {word}: {log.read_text()[-2000:]}"

        expect("READY")
        base = peak = _anon(child.pid)
        child.stdin.write("\n")
        child.stdin.flush()
        while True:
            ready, _, _ = select.select([child.stdout], [], [], 0.0005)
            now = _anon(child.pid)
            peak = max(peak, now or 0)
            if ready or now is None:
                expect("LOADED")
                break
        child.stdin.write("\n")
        child.stdin.flush()
        child.wait(timeout=60)
        return peak - base
    finally:
        if child.poll() is None:
            child.kill()


def test_checkpoint_load_holds_one_copy_of_the_weights(tmp_path):
    from dak.runtime_env import interpreter_problem
    if interpreter_problem():  # e.g. a GPU machine's numpy >= 2.4: dak refuses the interpreter there
        pytest.skip(f"the child runs Triton's interpreter, which cannot run here: {interpreter_problem()}")
    from transformers import LlamaConfig, LlamaForCausalLM
    cfg = LlamaConfig(hidden_size=1024, intermediate_size=2816, num_hidden_layers=2, num_attention_heads=8,
                      num_key_value_heads=8, vocab_size=16000, max_position_embeddings=64, tie_word_embeddings=False)
    torch.manual_seed(0)
    hf = LlamaForCausalLM(cfg).half()
    weights = sum(p.numel() * p.element_size() for p in hf.parameters())
    hf.save_pretrained(tmp_path / "model")
    del hf
    growth = _peak_growth(str(tmp_path / "model"), tmp_path / "child.log")
    mib = 2 ** 20
    assert growth > 0.9 * weights, f"grew {growth / mib:.0f} MiB for {weights / mib:.0f} MiB of weights: not measured?"
    assert growth < weights + 40 * mib, f"peak grew {growth / mib:.0f} MiB for {weights / mib:.0f} MiB of weights"
