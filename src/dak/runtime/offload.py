"""`dak.offload`: plan an HF causal LM for one GPU and return it ready to generate.

    model = dak.offload("llama-2-7b", hbm_budget="40GiB", batch=8, max_len=64)   # random weights
    model = dak.offload("/models/llama-2-7b-hf", hbm_budget="40GiB", batch=8, max_len=64)
    out = model.generate(input_ids, max_new_tokens=32)

The planner (policy, `consolidated` by default) decides every operator's host share from the hardware profile;
planned linears become `SplitLinear`, embeddings `SplitEmbedding`, the KV cache a per-layer
`SplitKVCache`, and attention runs through the "dak" attention function. Decode steps replay a
CUDA graph (`dak.runtime.engine`). The returned model carries `dak_placement`, `dak_kv`,
`dak_engine` and `dak_free()`.
"""

from __future__ import annotations

import numbers
import os
import types
import warnings

import torch
from torch import nn

from dak.hardware import HardwareProfile
from dak.hardware_auto import hardware_profile
from dak.models.ops import Workload
from dak.models.spec import ModelSpec, check_positions, load_config
from dak.planner import plan, ratio_budget
from dak.defaults import DEFAULT_FUSE_PROJECTIONS, DEFAULT_KV_AHEAD, DEFAULT_KV_BUCKETS, DEFAULT_POLICY
from dak.runtime.engine import Engine, kv_bucket_caps
from dak.runtime.kv import ATTN_NAME, DakKV, register
from dak.runtime.memory import (check_memory, kv_host_bytes_for, kv_staging_bytes_for,  # noqa: F401
                                staging_beyond, staging_bytes_for, within_budget)
from dak.runtime_env import kernel_device
from dak.runtime.generate import generate as _generate
from dak.runtime.prompts import check_ids
from dak.runtime.generation_config import read_generation_config, warn_ignored
from dak.switches import check_environment
from dak.units import parse_ratio, parse_size

DTYPES = {torch.bfloat16: "bf16", torch.float16: "fp16"}


def hf_config(cfg: dict):
    from transformers import AutoConfig
    cfg = {k: v for k, v in cfg.items() if k not in ("architectures", "transformers_version")}
    return AutoConfig.for_model(cfg.pop("model_type"), **cfg)


def workload_for(batch: int, max_len: int | None, prompt_len: int | None, gen_len: int | None,
                 dtype: torch.dtype, kv_buckets: int = DEFAULT_KV_BUCKETS) -> Workload:
    for name, v in (("max_len", max_len), ("prompt_len", prompt_len), ("gen_len", gen_len)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
            raise ValueError(f"{name} must be an integer >= 1, got {v!r}")
    if max_len is None:
        if prompt_len is None or gen_len is None:
            raise ValueError("give max_len, or both prompt_len and gen_len")
        max_len = prompt_len + gen_len
    prompt_len = prompt_len if prompt_len is not None else max(1, max_len // 2)
    gen_len = gen_len if gen_len is not None else max_len - prompt_len
    if prompt_len + gen_len > max_len or gen_len < 1:
        raise ValueError(f"prompt_len {prompt_len} + gen_len {gen_len} must fit max_len {max_len} with gen_len >= 1")
    return Workload("decode", batch, prompt_len, max_len - prompt_len, DTYPES[dtype], kv_buckets)


def placement_for(spec: ModelSpec, w: Workload, profile: HardwareProfile, hbm_budget, policy: str,
                  host_ratio: float | None, fused: bool = DEFAULT_FUSE_PROJECTIONS, strict_budget: bool = False,
                  kv_ahead: bool = DEFAULT_KV_AHEAD):
    """The planner's placement under `hbm_budget`, or under the budget that leaves share `host_ratio`
    of the operator bytes on the host (`dak.planner.ratio_budget`, as `dak bench e2e`'s ratio x):
    `policy` places it either way (uniform: that share of every operator).
    fused: whether the model will fuse its all-HBM projection groups (the prediction's overheads).
    strict_budget: the copy-engine staging (see staging_beyond) fits inside the budget too."""
    if policy == "prefetch":
        raise ValueError("policy 'prefetch' is a baseline (dak bench e2e runs it); use 'consolidated', "
                         "'streamed', 'greedy' or 'uniform'")
    if host_ratio is not None:
        if hbm_budget is not None:
            raise ValueError("give hbm_budget or host_ratio, not both: host_ratio x sets the budget that leaves "
                             "x of the operator bytes on the host")
        if strict_budget:
            raise ValueError("strict_budget fits a plan's staging inside hbm_budget; it does not apply to "
                             "host_ratio, which fixes the host bytes")
        ratio = parse_ratio(host_ratio) if isinstance(host_ratio, str) else host_ratio  # "5%" as the CLI
        budget = ratio_budget(spec, w, ratio, profile, strict=True)
    else:
        budget = None if hbm_budget is None else parse_size(hbm_budget)
    pl = plan(spec, w, profile, budget, policy, fused=fused, kv_ahead=kv_ahead)
    if not strict_budget:
        return pl
    return within_budget(pl, spec, lambda b: plan(spec, w, profile, b, policy, fused=fused, kv_ahead=kv_ahead),
                         kv_ahead)


def offload(model: str | nn.Module, *, hbm_budget=None, hardware: str | HardwareProfile = "auto",
            batch: int = 1, max_len: int | None = None, prompt_len: int | None = None,
            gen_len: int | None = None, policy: str = DEFAULT_POLICY, host_ratio: float | None = None,
            dtype: torch.dtype = torch.bfloat16, seed: int = 0, tune: bool = True,
            graphs: bool | None = None, kv_buckets: int = DEFAULT_KV_BUCKETS, kv_ahead: bool = DEFAULT_KV_AHEAD,
            fuse_projections: bool = DEFAULT_FUSE_PROJECTIONS, progress: bool | None = None,
            strict_budget: bool = False) -> nn.Module:
    """Offload `model` (built-in name, local checkpoint folder, or an HF model) for one GPU.
    An HF model passed in is converted in place and returned: its planned linears and embeddings
    become split modules (their old tensors are freed once copied), so keep a copy if you need it.
    hbm_budget (bytes or "40GiB"; default the profile's capacity) or host_ratio (the share of
    operator bytes, weights and KV cache, to keep on the host): `policy` places it
    ("uniform" moves that share of every operator). progress: byte progress bars for placing and filling/loading the weights (None: only when
    stderr is a terminal). strict_budget: hbm_budget also covers the copy-engine staging, which
    otherwise comes on top of it (`dak plan` shows how much)."""
    if progress not in (None, True, False):
        raise ValueError(f"progress must be True, False or None (on a terminal only), got {progress!r}")
    env_warnings, env_errors = check_environment()  # before anything is built (dak.switches)
    if env_errors:
        raise ValueError("; ".join(env_errors))
    for line in env_warnings:
        warnings.warn(line, stacklevel=2)
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be torch.bfloat16 or torch.float16, got {dtype}")
    profile = hardware_profile(hardware)
    if isinstance(model, nn.Module):
        if not hasattr(getattr(model, "config", None), "to_dict"):
            raise ValueError(f"an nn.Module passed to dak.offload must be an HF causal LM with a .config, "
                             f"got {type(model).__name__}; wrap single layers in dak.nn.SplitLinear instead")
        meta = [n for n, p in model.named_parameters() if p.device.type == "meta"]
        if meta:
            raise ValueError(f"{len(meta)} weights of the {type(model).__name__} passed in have no data (meta "
                             f"device, e.g. {meta[0]!r}: built empty); pass its checkpoint folder instead, or a "
                             "built-in name for seeded random weights")
        name, cfg, folder = type(model).__name__, model.config.to_dict(), None
    elif isinstance(model, str):
        name, cfg = load_config(model)
        folder = model if os.path.isdir(model) else None
    else:
        raise ValueError(f"model must be a built-in name, a local folder or an HF model, got {type(model).__name__}")
    gen_config = None if folder is None else read_generation_config(folder)
    spec = ModelSpec.from_config(cfg, name=name)
    if folder is not None:
        from dak.runtime.checkpoint import check_shards
        check_shards(folder)  # a missing or damaged shard fails here, before anything is pinned
    kv_bucket_caps(1, kv_buckets)  # a bad value fails with its own message, before anything is allocated
    w = workload_for(batch, max_len, prompt_len, gen_len, dtype, kv_buckets)
    for flag, value in (("kv_ahead", kv_ahead), ("fuse_projections", fuse_projections),
                        ("strict_budget", strict_budget), ("tune", tune)):
        if not isinstance(value, bool):
            raise ValueError(f"{flag} must be True or False, got {value!r}")
    if graphs not in (None, True, False):
        raise ValueError(f"graphs must be True, False or None (on when a GPU is there), got {graphs!r}")
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or not 0 <= seed < 2**63:
        raise ValueError(f"seed must be an integer in [0, 2**63), got {seed!r}")
    check_head_dim(spec)
    note = check_positions(cfg, spec, w.prompt_len + w.gen_len)
    if note:
        warnings.warn(note, stacklevel=2)
    placement = placement_for(spec, w, profile, hbm_budget, policy, host_ratio, fuse_projections, strict_budget,
                              kv_ahead)
    model, kv = build_model(cfg, placement, dtype=dtype, seed=seed, tune=tune, folder=folder,
                            module=model if isinstance(model, nn.Module) else None, name=name, kv_ahead=kv_ahead,
                            fuse_projections=fuse_projections, progress=progress)
    if gen_config is not None:
        model.generation_config = gen_config
    warn_ignored(model)
    engine = Engine(model, kv, graphs, kv_buckets=kv_buckets, kv_ahead=kv_ahead)
    model.dak_placement, model.dak_kv, model.dak_engine = placement, kv, engine
    model._apply = _checked_apply(model)
    model.forward = types.MethodType(_scoring_forward(model.forward), model)
    model.generate = types.MethodType(_generate, model)
    model.dak_free = types.MethodType(_free, model)
    model.train = types.MethodType(_eval_only(model.train), model)
    return model


def check_head_dim(spec: ModelSpec) -> None:
    from dak.kernels.attention_config import HEAD_DIMS
    if spec.head_dim not in HEAD_DIMS:
        raise ValueError(f"{spec.name}: head_dim {spec.head_dim} is not supported by dak's split attention "
                         f"(supported: {HEAD_DIMS})")


def build_model(cfg: dict, placement, *, dtype: torch.dtype, seed: int = 0, tune: bool = True,
                folder: str | None = None, module: nn.Module | None = None, name: str = "custom",
                kv_ahead: bool = DEFAULT_KV_AHEAD, fuse_projections: bool = DEFAULT_FUSE_PROJECTIONS,
                progress: bool | None = False):
    """(model, DakKV): the HF model of `cfg` built into `placement`'s homes.

    Weights come from `folder` (safetensors), from `module` (an HF model, copied into the
    homes), or a seeded fill that does not depend on the placement. Memory is checked first.
    fuse_projections: all-HBM q/k/v and gate/up sets multiply as one matrix (dak.nn.fused_proj);
    `model.dak_fused` says how many sets were fused.
    """
    from dak.nn.fused_proj import fuse_projections as fuse
    from dak.runtime.build import fill_random, place, skeleton
    from dak.runtime.checkpoint import load_checkpoint
    from dak.runtime.progress import Bytes
    from dak.runtime.fused import install as install_fused
    spec = ModelSpec.from_config(cfg, name=name)
    check_head_dim(spec)
    if not placement.feasible:
        raise ValueError(f"no feasible placement: {placement.note}")
    w = placement.workload
    max_len = w.prompt_len + w.gen_len
    device = kernel_device()
    kv_staging = kv_staging_bytes_for(placement, spec, kv_ahead)
    kv_host = kv_host_bytes_for(placement, spec)
    check_memory(placement, kv_host, device, kv_staging if device.type == "cuda" else 0)
    model = module.to(dtype) if module is not None else skeleton(hf_config(cfg), dtype)
    weights = sum(op.bytes for op in placement.ops if op.kind != "attention")
    with Bytes(weights, "dak: placing (pinning host rows, allocating HBM)", progress) as bar:
        host_requests = place(model, placement, device, tune, bar)
    model.dak_fused = fuse(model) if fuse_projections else 0  # before filling: loaders write into the views
    if folder is not None:
        load_checkpoint(model, folder, progress)
    elif module is None:
        fill_random(model, seed, progress=progress)
    model.eval()
    install_fused(model)
    register()
    model.config._attn_implementation = ATTN_NAME
    with Bytes(kv_host, "dak: pinning host KV cache", progress if kv_host else False) as bar:
        kv = DakKV(host_requests, w.batch, max_len, spec.num_kv_heads, spec.head_dim, dtype, device,
                   on_pinned=bar.update)
    kv.prepare(spec.num_heads, tune and device.type == "cuda")
    return model, kv


def _checked_apply(model: nn.Module):
    """model._apply (`.to`, `.half()`, ...) that first asks every split module whether it may move,
    so a refused conversion leaves no tensor of the model converted."""
    from dak.nn.split_linear import SplitLinear
    from dak.runtime.embedding import SplitEmbedding
    split = [m for m in model.modules() if isinstance(m, (SplitLinear, SplitEmbedding))]
    hf_apply = model._apply

    def _apply(fn, recurse=True):
        for mod in split:
            mod._apply(fn)  # raises for a change of dtype or device; converts nothing
        return hf_apply(fn, recurse)
    return _apply


def _scoring_forward(hf_forward):
    """The model's own forward (full-sequence logits, e.g. for perplexity; padding masks as in HF)
    with attention through torch SDPA: dak's split attention serves only its engine's cache.
    Tensor arguments on another device (CPU ids) are moved to the model's, as generate does."""
    def forward(self, *args, **kwargs):
        if getattr(self.dak_kv, "freed", False):
            raise RuntimeError("this model's memory was released by dak_free(); offload it again to use it")
        dev = self.dak_kv.device  # CPU ids (as generate takes them) go to the model's device, as generate moves them
        args = tuple(a.to(dev) if isinstance(a, torch.Tensor) else a for a in args)
        kwargs = {k: v.to(dev) if isinstance(v, torch.Tensor) else v for k, v in kwargs.items()}
        ids = args[0] if args else kwargs.get("input_ids")
        if ids is not None:
            check_ids(ids, self.config.vocab_size)
        impl = self.config._attn_implementation
        self.config._attn_implementation = "sdpa"
        try:
            return hf_forward(*args, **kwargs)
        finally:
            self.config._attn_implementation = impl
    return forward


def _eval_only(hf_train):
    """model.train: eval mode (train(False), what eval() calls) as before; train mode is refused,
    since the split kernels have no backward pass (offloaded weights never require grad)."""
    def train(self, mode: bool = True):
        if mode:
            raise RuntimeError("dak.offload gives an inference-only model: its split kernels have no backward "
                               "pass, so it cannot train; fine-tune the model before offloading it, then offload "
                               "the result (model.eval() and train(False) are fine)")
        return hf_train(False)
    return train


def _free(self) -> None:
    """Release the pinned host memory and HBM this model holds (it is unusable afterwards).

    Pinned memory is returned once the buffers' last views are gone; HBM once the caller drops
    the model (shared staging and split-K workspaces stay for the next model)."""
    from dak.kernels.copy_ahead import unlink
    from dak.runtime.embedding import SplitEmbedding
    self.dak_engine.release_graphs()
    unlink(self.modules())  # a wrapped copy-ahead chain's own slots go with it
    self.dak_kv.free()
    for mod in self.modules():
        host = getattr(mod, "_host", None)
        if host is not None and hasattr(host, "free"):
            host.free()
        if isinstance(mod, SplitEmbedding):
            mod.release()
