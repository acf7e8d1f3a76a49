"""The fp32 reference of `dak bench e2e --fp32-reference`: the logits the first generated token
is chosen from, computed by HF's own model in float32 over the same seeded weights.

Every system of a run is a bf16 (or fp16) computation; comparing them with one another tells a
flipped near-tie from a wrong result, but not which of two is closer to the exact math. This
builds the HF model of the case's config in fp32 (`dak.runtime.build.skeleton`, every tensor
materialised as dak's own build does: norms at their initial values, weights from
`fill_random` with the run's seed, a tied embedding filled as the lm_head), runs one forward on
the run's prompts and frees it. It goes to the GPU when 4 bytes a parameter fit in 85% of its
free memory, else to the CPU when they fit in half the available RAM, else it is skipped with
the reason (a 30B model needs 120 GB).
"""

from __future__ import annotations

import gc

import torch

GPU_SHARE, RAM_SHARE = 0.85, 0.5


def reference_device(need: int, free_gpu: int | None, free_ram: int | None) -> tuple[torch.device | None, str]:
    """(where an fp32 model of `need` bytes runs, why not when None)."""
    if free_gpu is not None and need <= GPU_SHARE * free_gpu:
        return torch.device("cuda"), ""
    if free_ram is not None and need <= RAM_SHARE * free_ram:
        return torch.device("cpu"), ""
    gpu = "no GPU" if free_gpu is None else f"{free_gpu / 2**30:.1f} GiB free HBM"
    ram = "unknown RAM" if free_ram is None else f"{free_ram / 2**30:.1f} GiB available RAM"
    return None, f"fp32 reference skipped: it needs {need / 2**30:.1f} GiB ({gpu}, {ram})"


@torch.no_grad()
def fp32_first_logits(cfg: dict, ids: torch.Tensor, seed: int) -> tuple[torch.Tensor | None, str]:
    """(fp32 logits (B, V) at the last prompt token on the CPU, or None; a note: where it ran or why not)."""
    from dak.runtime.build import _materialise_rest, fill_random, skeleton
    from dak.runtime.memory import host_available
    from dak.runtime.offload import hf_config
    model = skeleton(hf_config(cfg), torch.float32)
    need = 4 * sum(p.numel() for p in model.parameters())
    free_gpu = torch.cuda.mem_get_info()[0] if torch.cuda.is_available() else None
    device, why = reference_device(need, free_gpu, host_available())
    if device is None:
        return None, why
    try:
        _materialise_rest(model, device)
        if getattr(model.config, "tie_word_embeddings", False):
            model.tie_weights()  # materialised one module at a time: tie them again, as dak's tables are
        fill_random(model, seed)
        model.eval()
        ids = ids.to(device, torch.long)
        try:  # the last position's logits only (batch 512 x 32 tokens x 32000 in fp32 would be 2 GiB)
            out = model(ids, logits_to_keep=1)
        except TypeError:  # an HF version without it
            out = model(ids)
        logits = out.logits[:, -1].float().cpu()
    finally:
        del model
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    return logits, f"fp32 reference on the {'GPU' if device.type == 'cuda' else device.type.upper()}"
