"""Build an HF causal LM directly in its planned placement.

The model skeleton is created on the meta device (no memory), then every planned linear becomes
a `SplitLinear` allocated straight in its homes (pinned host rows, HBM rows), planned embedding
tables become `SplitEmbedding`s, and what is left (norms, rotary tables, small biases) is
materialised in HBM. Weights come from a seeded generator (`fill_random`) or are streamed from
a local safetensors checkpoint (`dak.runtime.checkpoint`). A model larger than HBM never
exists whole anywhere: host rows are generated on the device in chunks and copied to their
pinned home.
"""

from __future__ import annotations

import zlib

import torch
from torch import nn

from dak.nn.split_linear import SplitLinear
from dak.planner.placement import Placement
from dak.runtime.embedding import SplitEmbedding
from dak.runtime.progress import Bytes, nbytes

CHUNK_BYTES = 64 << 20


def skeleton(hf_config, dtype: torch.dtype) -> nn.Module:
    """The HF causal LM for `hf_config` with every tensor on the meta device."""
    from transformers import AutoModelForCausalLM
    with torch.device("meta"):
        return AutoModelForCausalLM.from_config(hf_config, dtype=dtype)


def find_module(model: nn.Module, op_name: str) -> tuple[str, nn.Module]:
    """The module whose qualified name is `op_name` or ends with '.' + op_name (unique)."""
    hits = [(n, m) for n, m in model.named_modules() if n == op_name or n.endswith("." + op_name)]
    if len(hits) != 1:
        raise ValueError(f"planned operator {op_name!r} matches {len(hits)} modules of "
                         f"{type(model).__name__}; the model's layout is not the one the planner assumed")
    return hits[0]


def _set(model: nn.Module, name: str, module: nn.Module) -> None:
    parent, _, leaf = name.rpartition(".")
    setattr(model.get_submodule(parent) if parent else model, leaf, module)


class SplitPositions(SplitEmbedding):
    """OPT's learned positions (ids offset by 2) over a split table."""

    offset = 2

    def forward(self, attention_mask=None, past_len: int = 0, position_ids=None):
        if position_ids is None:
            raise ValueError("dak runs OPT with explicit position_ids")
        return super().forward(position_ids + self.offset)


def place(model: nn.Module, placement: Placement, device: torch.device, tune: bool, bar=None) -> list[int]:
    """Swap planned modules for split ones in `model` (meta or real). Returns per-layer host requests.

    Real (non-meta) weights are copied into their homes; meta ones are allocated uninitialised.
    bar: a dak.runtime.progress.Bytes told each placed operator's bytes (`op.bytes`).
    """
    tell = bar.update if bar is not None else (lambda n: None)
    host_requests: dict[int, int] = {}
    tied = None
    for op in placement.ops:
        if op.kind == "attention":
            host_requests[op.layer] = op.host_requests or 0
            continue
        if op.kind in ("embed_tokens", "embed_positions"):
            continue  # after the linears: a tied table is the lm_head's
        name, mod = find_module(model, op.name)
        if not isinstance(mod, nn.Linear):
            raise ValueError(f"planned linear {op.name!r} is a {type(mod).__name__}, not nn.Linear")
        w, b = mod.weight, mod.bias
        kw = dict(host_rows=op.host_rows, row_tile=1, tune=tune)
        split = (SplitLinear.empty(w.shape[0], w.shape[1], bias=b is not None, dtype=w.dtype, **kw)
                 if w.device.type == "meta" else SplitLinear(w.data, None if b is None else b.data, **kw))
        split.one_gemv = placement.one_gemv  # copy-engine rows staged ahead: one GEMV (dak.kernels.staged_gemv)
        _set(model, name, split)
        tell(op.bytes)
        if op.kind == "lm_head":
            tied = split
    for op in placement.ops:
        if op.kind not in ("embed_tokens", "embed_positions"):
            continue
        name, mod = find_module(model, op.name)
        table = _split_table(mod, op.host_rows or 0, device,
                             SplitPositions if op.kind == "embed_positions" else SplitEmbedding)
        _set(model, name, table)
        tell(op.bytes)
    if tied is not None and getattr(model.config, "tie_word_embeddings", False):
        emb_name = next(n for n, m in model.named_modules() if n.endswith("embed_tokens"))
        _set(model, emb_name, SplitEmbedding(tied.w_host, tied.w_hbm, owner=tied))
    _materialise_rest(model, device)
    return [host_requests.get(i, 0) for i in range(len(host_requests))]


def _split_table(mod: nn.Embedding, m_h: int, device: torch.device, cls) -> SplitEmbedding:
    from dak.host import PinnedBuffer, device_matrix
    rows, dim = mod.weight.shape
    host = PinnedBuffer((m_h, dim), mod.weight.dtype)
    hbm = device_matrix(rows - m_h, dim, mod.weight.dtype, device)
    if mod.weight.device.type != "meta":
        host.tensor.copy_(mod.weight.data[:m_h])
        hbm.copy_(mod.weight.data[m_h:])
    return cls(host.tensor, hbm, owner=host)


def _materialise_rest(model: nn.Module, device: torch.device) -> None:
    """Move every remaining tensor to `device`; meta ones are allocated and initialised."""
    for name, mod in list(model.named_modules()):
        if isinstance(mod, (SplitLinear, SplitEmbedding)):
            continue
        if type(mod).__name__.endswith("RotaryEmbedding"):
            _set(model, name, type(mod)(config=mod.config).to(device))
            continue
        own = list(mod.named_parameters(recurse=False)) + list(mod.named_buffers(recurse=False))
        if any(t.device.type == "meta" for _, t in own):
            mod.to_empty(device=device, recurse=False)
            _init_small(mod)
        elif own:
            mod._apply(lambda t: t.to(device), recurse=False)


def _init_small(mod: nn.Module) -> None:
    for pname, p in mod.named_parameters(recurse=False):
        if "norm" in type(mod).__name__.lower():
            p.data.fill_(1.0 if pname == "weight" else 0.0)
        elif pname == "bias":
            p.data.zero_()
        else:
            p.data.normal_(0.0, 0.02)


def _row_parts(mod: nn.Module, tied: set) -> list[torch.Tensor] | None:
    """The (rows, cols) parts that stack into `mod`'s weight, in row order; None if not a weight."""
    if isinstance(mod, SplitLinear):
        return [mod.w_host, mod.w_hbm]
    if isinstance(mod, SplitEmbedding):
        return None if isinstance(mod._owner, SplitLinear) else [mod._w_host, mod.w_hbm]
    if isinstance(mod, nn.Linear) or (isinstance(mod, nn.Embedding) and id(mod.weight) not in tied):
        return [mod.weight.data]
    return None


@torch.no_grad()
def fill_random(model: nn.Module, seed: int, std: float = 0.02, progress: bool | None = False) -> None:
    """Seeded normal(0, std) weights that depend only on (seed, module name), not on the split.

    Each full weight is generated on the device in fixed row chunks from a generator seeded by
    the module's name and scattered into its host and HBM parts, so every placement of a model
    (and every baseline) gets identical weights; biases are zeroed. A tied embedding table is
    filled as the lm_head. Norms keep their deterministic initial values. progress: see
    dak.runtime.progress.
    """
    tied = {id(m.weight) for m in model.modules() if isinstance(m, nn.Linear)}
    todo = [(name, mod, parts) for name, mod in model.named_modules()
            for parts in [_row_parts(mod, tied)] if parts is not None]
    dev = torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")
    with Bytes(sum(nbytes(*parts) for _, _, parts in todo), "dak: filling random weights", progress) as bar:
        for name, mod, parts in todo:
            _fill_module(name, mod, parts, seed, std, dev)
            bar.update(nbytes(*parts))


def _fill_module(name: str, mod: nn.Module, parts: list, seed: int, std: float, dev: torch.device) -> None:
    """One module's weight rows from its name-seeded generator (on `dev`), in fixed chunks; bias zeroed."""
    cols = parts[-1].shape[1]
    g = torch.Generator(device=dev).manual_seed(seed * 1_000_003 + zlib.crc32(name.encode()))
    step = max(1, CHUNK_BYTES // 4 // max(1, cols))
    bounds, row = [], 0
    for p in parts:
        bounds.append((row, row + p.shape[0], p))
        row += p.shape[0]
    for lo in range(0, row, step):
        hi = min(row, lo + step)
        block = torch.randn(hi - lo, cols, generator=g, device=dev) * std
        for a, b, p in bounds:
            s, e = max(a, lo), min(b, hi)
            if s < e:
                p[s - a:e - a].copy_(block[s - lo:e - lo].to(p.dtype))
    bias = getattr(mod, "bias", None)
    if isinstance(bias, torch.Tensor):
        bias.zero_()


def fill_rows(dst: torch.Tensor, make) -> None:
    """Fill a (rows, cols) host or device matrix chunk by chunk with make(rows, cols) tensors."""
    if dst.numel() == 0:
        return
    rows, cols = dst.shape
    step = max(1, CHUNK_BYTES // max(1, cols * dst.element_size()))
    for lo in range(0, rows, step):
        hi = min(rows, lo + step)
        dst[lo:hi].copy_(make(hi - lo, cols).to(dst.dtype))
