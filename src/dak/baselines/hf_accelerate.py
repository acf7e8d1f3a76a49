"""HF accelerate offload baseline: ``device_map`` from ``max_memory``, eager HF generate.

The model is created on the meta device, accelerate's ``infer_auto_device_map`` assigns whole
modules (decoder layers are not split) to GPU 0 until ``max_memory[0]`` = weight bytes - R is
used (it also keeps room for the largest layer), the rest to the CPU. Every module is then
materialised on its device with the same seeded weights as dak's systems (``dak.runtime.build.fill_random``) and
``dispatch_model`` installs accelerate's hooks, which copy a CPU module's (pageable) weights to
the GPU at every forward, as ``from_pretrained(device_map="auto", max_memory=...)`` does. The
KV cache is HF's own, in HBM; attention is SDPA; no CUDA graphs.

accelerate is imported lazily; without it `AccelerateUnavailable` says how to install it.
"""

from __future__ import annotations

import statistics
import time

import torch
from torch import nn


class AccelerateUnavailable(RuntimeError):
    pass


def _accelerate():
    try:
        import accelerate
    except ImportError:
        raise AccelerateUnavailable("the accelerate baseline needs HF accelerate (pip install accelerate)") from None
    return accelerate


def device_map_for(model: nn.Module, host_bytes: int, dtype: torch.dtype, gpu=0) -> tuple[dict, int]:
    """(accelerate device_map, bytes it puts on the CPU) for at least `host_bytes` off the GPU."""
    accelerate = _accelerate()
    weights = sum(p.numel() * p.element_size() for p in model.parameters())
    if host_bytes <= 0:
        return {"": gpu}, 0
    dm = accelerate.infer_auto_device_map(model, max_memory={gpu: max(0, weights - host_bytes), "cpu": 1 << 50},
                                          no_split_module_classes=list(model._no_split_modules or []), dtype=dtype)
    on_cpu = sum(p.numel() * p.element_size() for n, p in model.named_parameters()
                 if _device_of(n, dm) == "cpu")
    return dm, on_cpu


def _device_of(name: str, device_map: dict):
    """The device_map entry that covers module or parameter `name` (longest prefix), else None."""
    hits = [k for k in device_map if k == "" or name == k or name.startswith(k + ".")]
    return device_map[max(hits, key=len)] if hits else None


def _materialise(model: nn.Module, device_map: dict, gpu: torch.device) -> None:
    """Allocate every meta tensor on its mapped device (dak's build: norms 1/0, fresh rotary tables)."""
    from dak.runtime.build import _materialise_rest, _set
    on_cpu = {k: model.get_submodule(k) for k, v in device_map.items() if v == "cpu" and k}
    for name, mod in list(on_cpu.items()):  # set aside while the rest goes to the GPU
        if type(mod).__name__.endswith("RotaryEmbedding"):  # _materialise_rest rebuilds these by name
            on_cpu[name] = type(mod)(config=mod.config)
        else:
            _materialise_rest(mod, torch.device("cpu"))
        _set(model, name, nn.Identity())
    _materialise_rest(model, torch.device("cpu") if device_map.get("") == "cpu" else gpu)
    for name, mod in on_cpu.items():
        _set(model, name, mod)


def build_accelerate(cfg: dict, host_bytes: int, dtype: torch.dtype, seed: int, device: torch.device):
    """(model dispatched by accelerate, its device_map, bytes it keeps on the CPU)."""
    accelerate = _accelerate()
    from transformers import AutoModelForCausalLM

    from dak.runtime.build import fill_random
    from dak.runtime.offload import hf_config
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(hf_config(cfg), dtype=dtype, attn_implementation="sdpa")
    # without a GPU (tests) everything stays on the CPU: the same math, no offload hooks
    dm, on_cpu = device_map_for(model, host_bytes, dtype) if device.type == "cuda" else ({"": "cpu"}, 0)
    _materialise(model, dm, device)
    model.tie_weights()
    fill_random(model, seed)
    model.eval()
    if device.type == "cuda":
        model = accelerate.dispatch_model(model, device_map=dm, main_device=device,
                                          skip_keys=getattr(model, "_skip_keys_device_placement", None))
    return model, dm, on_cpu


class StepClock:
    """A generate() streamer that timestamps the prompt and every new token (after a device sync)."""

    def __init__(self, device: torch.device):
        self.device, self.times = device, []

    def put(self, value) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        self.times.append(time.perf_counter())

    def end(self) -> None:
        pass


@torch.no_grad()
def timed_generate(model: nn.Module, ids: torch.Tensor, gen_len: int, device: torch.device):
    """(tokens (B, gen_len) on the CPU, TTFT s, mean TPOT s, median TPOT s) of HF greedy generate."""
    clock = StepClock(device)
    ids = ids.to(device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    t0 = time.perf_counter()
    out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=gen_len, min_new_tokens=gen_len,
                         do_sample=False, streamer=clock, pad_token_id=0, eos_token_id=None)
    t = clock.times  # t[0]: prompt put (before prefill), t[i]: token i
    steps = [b - a for a, b in zip(t[1:], t[2:])]
    mean = (t[-1] - t[1]) / len(steps) if steps else 0.0
    med = statistics.median(steps) if steps else 0.0
    return out[:, ids.shape[1]:].cpu(), t[1] - t0, mean, med
