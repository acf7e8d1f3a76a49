"""``dak generate``'s text side: prompts tokenized with a checkpoint folder's tokenizer, and the
streamer that prints the first request's new text as it is generated."""

from __future__ import annotations

import os


class _FirstRow:
    """Hands the first request's ids to HF's TextStreamer (which takes one sequence)."""

    def __init__(self, streamer):
        self.streamer = streamer

    def put(self, ids):
        self.streamer.put(ids[:1])

    def end(self):
        self.streamer.end()


def streamer(tok):
    """HF's TextStreamer over `tok` (the checkpoint's tokenizer), fed the first request's ids."""
    from transformers import TextStreamer
    return _FirstRow(TextStreamer(tok, skip_prompt=True, skip_special_tokens=True))


def tokenizer(model_name: str):
    if not os.path.isdir(model_name):
        raise ValueError("--prompt needs a local checkpoint folder with a tokenizer; built-in names have none")
    names = ("tokenizer.json", "tokenizer.model", "tokenizer_config.json", "vocab.json", "tiktoken.model")
    if not any(os.path.exists(os.path.join(model_name, n)) for n in names):
        raise ValueError(f"--prompt needs a tokenizer, and {model_name} has no tokenizer files ({', '.join(names[:3])}, "
                         f"...): copy the checkpoint's tokenizer files into it, or drop --prompt for random ids")
    from transformers import AutoTokenizer
    try:
        return AutoTokenizer.from_pretrained(model_name, local_files_only=True)
    except (OSError, ValueError) as e:
        raise ValueError(f"no usable tokenizer in {model_name!r}: {e}") from None


def chat_texts(tok, prompts: list[str]) -> list[str]:
    """Each prompt as one user message in the tokenizer's chat template, ready for the reply."""
    if not getattr(tok, "chat_template", None):
        raise ValueError("--chat needs a tokenizer with a chat template (a chat or instruct checkpoint's "
                         "chat_template), and this folder's has none: drop --chat to give the prompt as plain text")
    return [tok.apply_chat_template([{"role": "user", "content": text}], tokenize=False, add_generation_prompt=True)
            for text in prompts]


def prompt_ids(prompts, model_name: str, batch: int, plen: int, seed: int, chat: bool = False, tok=None):
    """(ids, prompt lengths or None): one prompt fills the batch; several are right-padded rows
    (the engine pads the batch with copies of the first); none: seeded random ids. `chat`: each
    prompt goes through the tokenizer's chat template (which brings its own special tokens).
    `tok`: the folder's tokenizer when the caller has it loaded already."""
    import torch
    if prompts is not None:
        if len(prompts) > batch:
            raise ValueError(f"{len(prompts)} prompts but --batch {batch}: raise --batch to at least {len(prompts)}")
        tok = tokenizer(model_name) if tok is None else tok
        texts = chat_texts(tok, prompts) if chat else prompts
        rows = [tok(text, add_special_tokens=not chat).input_ids for text in texts]
        for i, row in enumerate(rows):
            if not row:
                raise ValueError(f"prompt {i} ({prompts[i]!r}) has no tokens; give some text")
        if len(rows) == 1:
            return torch.tensor(rows[0])[None].expand(batch, -1).contiguous(), None
        ids = torch.zeros(len(rows), max(map(len, rows)), dtype=torch.long)
        for i, row in enumerate(rows):
            ids[i, :len(row)] = torch.tensor(row)
        return ids, torch.tensor([len(row) for row in rows])
    from dak.models.spec import load_spec
    vocab = load_spec(model_name).vocab_size
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, vocab, (batch, plen), generator=g), None
