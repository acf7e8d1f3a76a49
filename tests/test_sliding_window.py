"""Sliding-window attention end to end (CPU interpreter, or natively on a GPU): Mistral attends every
layer through its window, Qwen2 with use_sliding_window only the layers from max_window_layers on. dak
runs past the window and gives HF eager's greedy tokens (or its ties) and HF's prefill logits."""

import os

import pytest
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

import dak  # noqa: E402
from dak.models.spec import load_config, load_spec  # noqa: E402
from dak.runtime.offload import hf_config  # noqa: E402
from runtime_checks import DTYPE, PROMPT, check_tokens  # noqa: E402

WINDOWED = {  # family -> config changes: a window of 4 keys, shorter than the 6-token prompt
    "tiny-mistral": dict(sliding_window=4),
    "tiny-qwen2": dict(sliding_window=4, use_sliding_window=True, max_window_layers=1),
}


@pytest.fixture(scope="module")
def windowed(tmp_path_factory):
    from transformers import AutoModelForCausalLM
    out = {}
    for family, change in WINDOWED.items():
        _, cfg = load_config(family)
        cfg = dict(cfg, num_hidden_layers=2, **change)
        torch.manual_seed(3)
        hf = AutoModelForCausalLM.from_config(hf_config(cfg), dtype=torch.float32, attn_implementation="eager")
        hf = hf.to(DTYPE).eval()
        path = tmp_path_factory.mktemp(family)
        hf.save_pretrained(path)
        out[family] = (hf, str(path))
    return out


@pytest.mark.parametrize("family,ratio", [("tiny-mistral", 0.0), ("tiny-qwen2", 1.0)])  # all in HBM; all on the host
def test_generation_past_the_window_is_hfs(windowed, family, ratio):
    hf, path = windowed[family]
    spec = load_spec(path)
    assert spec.sliding_window == 4 and spec.sliding_layers == ((0, 1) if family == "tiny-mistral" else (1,))
    steps = 10
    model = dak.offload(path, batch=2, max_len=PROMPT + steps, policy="uniform", host_ratio=ratio, dtype=DTYPE,
                        tune=False)
    ids = torch.randint(3, hf.config.vocab_size, (2, PROMPT), generator=torch.Generator().manual_seed(5))
    seq = model.generate(ids, max_new_tokens=steps, eos_token_id=None).cpu()
    assert check_tokens(hf, seq, steps) >= 2 * steps - 1
    with torch.no_grad():  # full attention would differ from HF's windowed logits here
        full = dict(hf.config.to_dict(), sliding_window=None, use_sliding_window=False)
        full.pop("layer_types", None)
        unwindowed = type(hf)(hf_config(full)).to(DTYPE).eval()
        unwindowed.load_state_dict(hf.state_dict())
        assert (unwindowed(seq).logits - hf(seq).logits).abs().max() > 1e-2
    lens = torch.tensor([PROMPT, 3], dtype=torch.int32)
    eng = model.dak_engine
    ids_d, plen, _ = eng._check(ids, 1, lens)
    logits = eng.prefill(ids_d, plen).float().cpu()  # the prompt longer than the window: SDPA under a window mask
    for b, n in enumerate(lens.tolist()):
        with torch.no_grad():
            ref = hf(ids[b:b + 1, :n]).logits[0, -1].float()
        assert (logits[b] - ref).abs().max() / ref.abs().max() < 1e-2, (b, n)
    model.dak_free()
