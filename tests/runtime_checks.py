"""Shared by the CPU end-to-end files (test_runtime.py, test_runtime_fused.py): tiny HF models of
every family, saved as safetensors checkpoints, and the token check against HF's greedy choice."""

import torch

from dak.models.spec import load_config
from dak.runtime.offload import hf_config

PROMPT, DTYPE = 6, torch.float16


def hf_model(family: str, layers: int = 2):
    from transformers import AutoModelForCausalLM
    _, cfg = load_config(family)
    cfg = dict(cfg, num_hidden_layers=layers)
    torch.manual_seed(len(family))
    model = AutoModelForCausalLM.from_config(hf_config(cfg), dtype=torch.float32, attn_implementation="eager")
    return model.to(DTYPE).eval()


def make_checkpoints(tmp_path_factory):
    out = {}
    for fam in ("tiny-llama", "tiny-opt", "tiny-qwen2", "tiny-mistral"):
        hf = hf_model(fam)
        path = tmp_path_factory.mktemp(fam)
        hf.save_pretrained(path)
        out[fam] = (hf, str(path))
    return out


def check_tokens(hf, seq, steps):
    """dak's token at every step is HF's greedy choice, or ties it within one fp16 step."""
    with torch.no_grad():
        logits = hf(seq).logits.float()
    exact = 0
    for t in range(steps):
        ref = logits[:, PROMPT + t - 1]
        got = seq[:, PROMPT + t]
        best = ref.max(-1).values
        gap = best - ref.gather(1, got[:, None])[:, 0]
        tol = best.abs() * 2.0 ** -10 + 1e-6
        assert (gap <= tol).all(), f"step {t}: dak chose a token {gap.max():.4g} below HF's best"
        exact += int((ref.argmax(-1) == got).sum())
    return exact
