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


def saved_model(tmp_path_factory, family: str = "tiny-llama"):
    """(HF model, its safetensors checkpoint folder) of hf_model(family)."""
    hf = hf_model(family)
    path = tmp_path_factory.mktemp(family)
    hf.save_pretrained(path)
    return hf, str(path)


def make_checkpoints(tmp_path_factory):
    out = {}
    for fam in ("tiny-llama", "tiny-opt", "tiny-qwen2", "tiny-mistral", "tiny-qwen3"):
        hf = hf_model(fam)
        path = tmp_path_factory.mktemp(fam)
        hf.save_pretrained(path)
        out[fam] = (hf, str(path))
    return out


def tie_tolerance(best: torch.Tensor) -> torch.Tensor:
    """How far below HF's best logit dak's token may be and still count as a tie: two fp16 steps
    at the best logit's scale. dak and HF round different intermediates (fp32 accumulation, fused
    epilogues) and the tiny random models' logits nearly tie (the thirty-first session's H200 run
    met a 2^-10 gap at a best logit below 1); a wrong token from a bug sits far further below."""
    ulp = 2.0 ** (torch.floor(torch.log2(best.abs().clamp_min(2.0 ** -14))) - 10)
    return 2 * ulp + 1e-6


def check_tokens(hf, seq, steps):
    """dak's token at every step is HF's greedy choice, or ties it within two fp16 steps (`hf` on the
    CPU or the GPU, `seq` on either: HF runs where its weights are, the check runs on the CPU)."""
    with torch.no_grad():
        logits = hf(seq.to(next(hf.parameters()).device)).logits.float().cpu()
    seq = seq.cpu()
    exact = 0
    for t in range(steps):
        ref = logits[:, PROMPT + t - 1]
        got = seq[:, PROMPT + t]
        best = ref.max(-1).values
        gap = best - ref.gather(1, got[:, None])[:, 0]
        tol = tie_tolerance(best)
        assert (gap <= tol).all(), f"step {t}: dak chose a token {gap.max():.4g} below HF's best"
        exact += int((ref.argmax(-1) == got).sum())
    return exact
