"""Stream a local safetensors checkpoint into a placed model, tensor by tensor.

Each split weight is read row range by row range straight from the memory-mapped shard into
its pinned host rows or its HBM rows (bounded temporaries of CHUNK_BYTES), so host RSS stays
near the pinned bytes. Every tensor of the model must be covered; unknown or missing names
are errors that list a few examples. No network: only files in the given folder are read.
"""

from __future__ import annotations

import glob
import os

import torch
from torch import nn

from dak.jsonfile import load_json
from dak.nn.split_linear import SplitLinear
from dak.runtime.build import CHUNK_BYTES
from dak.runtime.embedding import SplitEmbedding
from dak.runtime.progress import Bytes


FLOAT_DTYPES = ("F64", "F32", "F16", "BF16")  # safetensors' names


INDEX = "model.safetensors.index.json"


def shard_files(folder: str) -> list[str]:
    """The shards to read: those the folder's index names (as HF loads them, so other
    *.safetensors files beside them, e.g. Mistral's consolidated.safetensors, are not read), else
    every *.safetensors file."""
    index = os.path.join(folder, INDEX)
    if os.path.exists(index):
        data = load_json(index, "checkpoint index")
        weight_map = data.get("weight_map") if isinstance(data, dict) else None
        if not isinstance(weight_map, dict) or not weight_map or not all(isinstance(v, str) for v in weight_map.values()):
            raise ValueError(f"checkpoint index {index!r} has no weight_map of tensor names to shard files; "
                             f"repair it, or delete it to read every *.safetensors file in the folder")
        names = sorted(set(weight_map.values()))
        missing = [n for n in names if not os.path.isfile(os.path.join(folder, n))]
        if missing:
            raise ValueError(f"checkpoint index {index!r} names {len(missing)} shard(s) not in the folder, e.g. "
                             f"{missing[:3]}; copy them there (the download may be incomplete)")
        return [os.path.join(folder, n) for n in names]
    files = sorted(glob.glob(os.path.join(folder, "*.safetensors")))
    if not files:
        raise ValueError(f"no *.safetensors files in {folder!r}; dak loads local safetensors checkpoints "
                         "(convert .bin checkpoints with transformers' save_pretrained(safe_serialization=True))")
    return files


def _targets(model: nn.Module) -> dict[str, tuple]:
    """Checkpoint name -> (kind, object) for every tensor the model needs."""
    out: dict[str, tuple] = {}
    for name, mod in model.named_modules():
        pre = f"{name}." if name else ""
        if isinstance(mod, SplitLinear):
            out[pre + "weight"] = ("split", (mod.w_host, mod.w_hbm))
            if mod.bias is not None:
                out[pre + "bias"] = ("dense", mod.bias)
        elif isinstance(mod, SplitEmbedding):
            if not isinstance(mod._owner, SplitLinear):  # a tied table is loaded as the lm_head
                out[pre + "weight"] = ("split", (mod._w_host, mod.w_hbm))
        else:
            for pname, p in mod.named_parameters(recurse=False):
                out[pre + pname] = ("dense", p.data)
    return out


def _resolve(key: str, targets: dict) -> str | None:
    for cand in (key, "model." + key, key.removeprefix("model.")):
        if cand in targets:
            return cand
    return None


def _copy_rows(sl, dst: torch.Tensor, row0: int) -> None:
    rows, cols = dst.shape
    step = max(1, CHUNK_BYTES // max(1, cols * dst.element_size()))
    for lo in range(0, rows, step):
        hi = min(rows, lo + step)
        dst[lo:hi].copy_(sl[row0 + lo:row0 + hi])


def check_shards(folder: str) -> list[str]:
    """The shards, each header readable (run before anything is pinned): a damaged or partly
    downloaded file is an error that names it."""
    from safetensors import SafetensorError, safe_open
    files = shard_files(folder)
    for path in files:
        try:
            with safe_open(path, framework="pt", device="cpu") as f:
                f.keys()
        except (SafetensorError, OSError) as e:
            raise ValueError(f"cannot read checkpoint shard {path!r} ({e}); the file is damaged or incomplete: "
                             "copy or download it again") from None
    return files


@torch.no_grad()
def load_checkpoint(model: nn.Module, folder: str, progress: bool | None = False) -> int:
    """Fill `model` from folder/*.safetensors. Returns the bytes read. progress: see dak.runtime.progress."""
    targets = _targets(model)
    with Bytes(sum(_nbytes(dst) for _, dst in targets.values()), "dak: loading checkpoint", progress) as bar:
        return _load(model, folder, targets, bar)


def _load(model: nn.Module, folder: str, targets: dict, bar: Bytes) -> int:
    from safetensors import safe_open
    tied = "lm_head.weight" in targets and getattr(model.config, "tie_word_embeddings", False)
    done, unknown, nbytes = set(), [], 0
    for path in shard_files(folder):  # dak.offload ran check_shards before pinning
        with safe_open(path, framework="pt", device="cpu") as f:
            for key in f.keys():
                name = _resolve(key, targets)
                if name is None and tied and key.endswith("embed_tokens.weight"):
                    name = "lm_head.weight"
                if name is None:
                    unknown.append(key)
                    continue
                kind, dst = targets[name]
                sl = f.get_slice(key)
                shape = tuple(sl.get_shape())
                if sl.get_dtype() not in FLOAT_DTYPES:
                    raise ValueError(f"checkpoint tensor {key!r} is {sl.get_dtype()}, not a float: quantized "
                                     "checkpoints are not supported; use a bf16/fp16/fp32 checkpoint")
                if kind == "split":
                    host, hbm = dst
                    want = (host.shape[0] + hbm.shape[0], hbm.shape[1])
                    if shape != want:
                        raise ValueError(f"checkpoint tensor {key!r} has shape {shape}, the model expects {want}")
                    _copy_rows(sl, host, 0)
                    _copy_rows(sl, hbm, host.shape[0])
                else:
                    if shape != tuple(dst.shape):
                        raise ValueError(f"checkpoint tensor {key!r} has shape {shape}, the model expects "
                                         f"{tuple(dst.shape)}")
                    dst.copy_(sl[:] if shape else f.get_tensor(key))
                done.add(name)
                nbytes += _nbytes(dst)
                bar.update(_nbytes(dst))
    missing = [n for n in targets if n not in done]
    if missing:
        raise ValueError(f"checkpoint {folder!r} lacks {len(missing)} tensors the model needs, e.g. "
                         f"{missing[:4]}; is it the checkpoint of this config?")
    if unknown:
        extra = [k for k in unknown if not k.endswith(("rotary_emb.inv_freq", "masked_bias", ".attn.bias"))]
        if extra:
            raise ValueError(f"checkpoint {folder!r} has {len(extra)} tensors this model does not use, "
                             f"e.g. {extra[:4]}")
    return nbytes


def _nbytes(dst) -> int:
    parts = dst if isinstance(dst, tuple) else (dst,)
    return sum(t.numel() * t.element_size() for t in parts)

