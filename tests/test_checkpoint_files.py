"""Which files of a checkpoint folder dak reads, and clear errors for broken ones, before anything
is pinned (CPU)."""

import json
import os

import pytest
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

import dak  # noqa: E402
from dak.host import pinned_bytes  # noqa: E402
from runtime_checks import hf_model  # noqa: E402

KW = dict(batch=1, max_len=8, policy="uniform", host_ratio=0.5, dtype=torch.float16, tune=False)
INDEX = "model.safetensors.index.json"


@pytest.fixture(scope="module")
def sharded(tmp_path_factory):
    """tiny-llama saved in several shards with an index, and its HF model."""
    hf = hf_model("tiny-llama")
    path = tmp_path_factory.mktemp("sharded")
    hf.save_pretrained(path, max_shard_size="100KB")
    assert os.path.exists(path / INDEX) and len(list(path.glob("*.safetensors"))) > 2
    return hf, path


def _copy(src, dst):
    dst.mkdir()
    for f in src.iterdir():
        (dst / f.name).write_bytes(f.read_bytes())
    return dst


def _logits(model, ids):
    """Logits of CPU ids (dak's scoring forward moves them to its device, as generate does)."""
    with torch.no_grad():
        return model(ids, use_cache=False).logits.float().cpu()


def test_the_index_names_the_shards_and_other_files_beside_them_are_not_read(sharded, tmp_path):
    """Mistral's HF folders hold consolidated.safetensors (another format, other tensor names)
    beside the indexed shards: HF reads the index's shards only, and so does dak."""
    from safetensors.torch import save_file
    hf, path = sharded
    folder = _copy(path, tmp_path / "with-extra")
    save_file({"layers.0.attention.wq.weight": torch.randn(4, 4)}, folder / "consolidated.safetensors")
    ids = torch.randint(0, hf.config.vocab_size, (1, 5), generator=torch.Generator().manual_seed(7))
    model = dak.offload(str(folder), **KW)
    try:
        got = _logits(model, ids)
    finally:
        model.dak_free()
    want = _logits(hf, ids)
    assert got.shape == want.shape and torch.isfinite(got).all()
    assert (got - want).abs().max() <= 0.05 * want.abs().max()
    os.remove(folder / INDEX)  # without an index every *.safetensors file is read: the foreign one is refused
    with pytest.raises(ValueError, match="tensors this model does not use"):
        dak.offload(str(folder), **KW)


@pytest.mark.parametrize("case,message", [
    ("missing shard", "names 1 shard\\(s\\) not in the folder"),
    ("truncated shard", "damaged or incomplete"),
    ("index without weight_map", "has no weight_map"),
    ("index not JSON", "is not valid JSON"),
])
def test_broken_folders_are_refused_before_anything_is_pinned(sharded, tmp_path, case, message):
    _, path = sharded
    folder = _copy(path, tmp_path / "broken")
    shards = sorted(folder.glob("*.safetensors"))
    if case == "missing shard":
        os.remove(shards[1])
    elif case == "truncated shard":
        data = shards[-1].read_bytes()
        shards[-1].write_bytes(data[: len(data) // 2])
    elif case == "index without weight_map":
        (folder / INDEX).write_text(json.dumps({"metadata": {}}))
    else:
        (folder / INDEX).write_text("{not json")
    before = pinned_bytes()
    with pytest.raises(ValueError, match=message):
        dak.offload(str(folder), **KW)
    assert pinned_bytes() == before
