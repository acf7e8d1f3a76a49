"""`dak generate --prompt` with a local checkpoint folder and its tokenizer (CPU, interpreter):
one prompt or several (a padded batch), decoded outputs, and bad prompts."""

import os

import pytest
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

from dak.cli.main import main  # noqa: E402
from runtime_checks import hf_model as _hf_model  # noqa: E402


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """tiny-llama with a word-level tokenizer: id i is the word w<i>, the last id [UNK], the one
    before it "abcdef" (the text HF's StopStringCriteria probes a tokenizer with)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast
    hf = _hf_model("tiny-llama")
    vocab = {f"w{i}": i for i in range(hf.config.vocab_size - 2)}
    vocab["abcdef"] = hf.config.vocab_size - 2
    vocab["[UNK]"] = hf.config.vocab_size - 1
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    path = tmp_path_factory.mktemp("tiny-llama-tok")
    hf.save_pretrained(path)
    PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]").save_pretrained(path)
    return str(path)


def _outputs(text: str) -> dict[str, list[str]]:
    return {line.split(":")[0]: line.split(":", 1)[1].split() for line in text.splitlines()
            if line.startswith("output")}


def test_one_or_several_prompts_are_decoded_after_their_own_text(folder, capsys):
    base = ["generate", "--model", folder, "--gen-len", "3", "--host-ratio", "30%", "--dtype", "fp16"]
    assert main(base + ["--batch", "2", "--prompt", "w5 w6 w7"]) == 0
    out = _outputs(capsys.readouterr().out)
    assert list(out) == ["output"] and out["output"][:3] == ["w5", "w6", "w7"] and len(out["output"]) <= 6
    assert main(base + ["--batch", "3", "--prompt", "w5 w6 w7", "--prompt", "w9"]) == 0
    out = _outputs(capsys.readouterr().out)
    assert list(out) == ["output 0", "output 1"]
    assert out["output 0"][:3] == ["w5", "w6", "w7"] and len(out["output 0"]) <= 6
    assert out["output 1"][0] == "w9" and len(out["output 1"]) <= 4  # no padding decoded in between


@pytest.mark.parametrize("argv,msg", [(["--batch", "1", "--prompt", "w1", "--prompt", "w2"], "raise --batch"),
                                      (["--prompt", "w1", "--prompt", ""], "prompt 1 ('') has no tokens"),
                                      (["--batch", "3", "--prompt", "w1", "--prompt", "w2", "--sample",
                                        "--num-return-sequences", "2"], "raise --batch to at least 4"),
                                      (["--prompt", "w1", "--stream", "--sample", "--num-return-sequences", "2"],
                                       "without --stream")])
def test_bad_prompts(folder, capsys, argv, msg):
    assert main(["generate", "--model", folder, "--gen-len", "1"] + argv) == 2
    assert msg in capsys.readouterr().err


def test_hf_text_streamer_prints_the_new_words(folder, capsys):
    import dak
    from transformers import AutoTokenizer, TextStreamer
    tok = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    model = dak.offload(folder, batch=1, max_len=8, policy="uniform", host_ratio=0.3, dtype=torch.float16, tune=False)
    ids = tok("w5 w6", return_tensors="pt").input_ids
    capsys.readouterr()
    seq = model.generate(ids, max_new_tokens=4, streamer=TextStreamer(tok, skip_prompt=True), eos_token_id=None)
    model.dak_free()
    printed = capsys.readouterr().out.split()
    assert printed and printed == tok.decode(seq[0, ids.shape[1]:], skip_special_tokens=True).split()


def test_cli_stream_prints_the_new_words_then_the_report(folder, capsys):
    assert main(["generate", "--model", folder, "--gen-len", "3", "--batch", "2", "--dtype", "fp16", "--prompt",
                 "w5 w6", "--stream"]) == 0
    lines = capsys.readouterr().out.splitlines()
    out = _outputs("\n".join(lines))["output"]
    streamed = lines[next(i for i, line in enumerate(lines) if line.startswith("placement")) - 1].split()
    assert out[:2] == ["w5", "w6"] and streamed == out[2:] and streamed  # the new words, before the report
    assert main(["generate", "--model", folder, "--gen-len", "1", "--stream"]) == 2
    assert "exactly one --prompt" in capsys.readouterr().err


def test_cli_stop_ends_each_output_at_its_stop_string(folder, capsys):
    base = ["generate", "--model", folder, "--gen-len", "6", "--batch", "2", "--dtype", "fp16", "--prompt", "w5 w6"]
    assert main(base) == 0
    free = _outputs(capsys.readouterr().out)["output"][2:]
    assert len(free) == 6
    stop = free[2]
    j = next(i for i, word in enumerate(free) if stop in word)  # the first new word that completes it
    assert main(base + ["--stop", stop, "--stop", "no such text"]) == 0
    assert _outputs(capsys.readouterr().out)["output"][2:] == free[:j + 1]
    assert main(["generate", "--model", folder, "--gen-len", "2", "--stop", "w1"]) == 2
    assert "--stop matches text, which needs --prompt" in capsys.readouterr().err
    assert main(base + ["--stop", ""]) == 2
    assert "stop_strings must be a non-empty string" in capsys.readouterr().err


def test_cli_sampling_flags_reach_the_sampler_and_the_seed_repeats_it(folder, capsys):
    import json
    base = ["generate", "--model", folder, "--gen-len", "5", "--batch", "2", "--dtype", "fp16", "--prompt", "w5 w6",
            "--json"]

    def run(*argv):
        assert main(base + list(argv)) == 0
        d = json.loads(capsys.readouterr().out)
        return d["outputs"][0].split()[2:], d["decoding"]

    greedy, how = run()
    assert len(greedy) == 5 and how == {"do_sample": False, "repetition_penalty": 1.0}
    first, how = run("--sample", "--seed", "3")
    assert how == {"do_sample": True, "temperature": 1.0, "top_k": 50, "top_p": 1.0, "min_p": 0.0, "typical_p": 1.0,
                   "epsilon_cutoff": 0.0, "eta_cutoff": 0.0, "top_h": None, "repetition_penalty": 1.0}
    assert run("--sample", "--seed", "3")[0] == first  # the same seed samples the same tokens
    other = run("--sample", "--seed", "4")[0]
    assert other != first and first != greedy  # it does sample (about 1 in 50^5 to fail by chance)
    # min-p 1 keeps only the likeliest token: greedy's tokens
    assert run("--sample", "--seed", "5", "--min-p", "1")[0] == greedy
    # a single candidate token leaves sampling no choice: greedy's tokens, whatever the seed
    ones, how = run("--sample", "--seed", "4", "--top-k", "1", "--temperature", "0.5")
    assert ones == greedy and how["top_k"] == 1 and how["temperature"] == 0.5
    tiny_p, how = run("--sample", "--seed", "5", "--top-p", "1e-6", "--top-k", "0", "--repetition-penalty", "1.0")
    assert tiny_p == greedy and how["top_p"] == 1e-6 and how["top_k"] == 0
    assert main(base[:-1] + ["--sample", "--top-k", "7", "--repetition-penalty", "1.3"]) == 0
    assert "decoding: sampling, temperature 1, top-k 7, top-p 1, repetition penalty 1.3" in capsys.readouterr().out
    assert main(base[:-1] + ["--sample", "--min-p", "0.05"]) == 0
    assert "decoding: sampling, temperature 1, top-k 50, top-p 1, min-p 0.05\n" in capsys.readouterr().out
    # n-grams of 1 token: no new token repeats one before it (prompt included)
    words, how = run("--no-repeat-ngram-size", "1")
    assert how["no_repeat_ngram_size"] == 1 and len(set(words + ["w5", "w6"])) == len(words) + 2, words
    # two samples of the prompt, each continuing it, sampled apart (alike over 5 tokens: about 1 in 50^5)
    assert main(base[:-1] + ["--sample", "--num-return-sequences", "2", "--no-repeat-ngram-size", "2"]) == 0
    printed = capsys.readouterr().out
    outs = [line.split()[2:] for line in printed.splitlines() if line.startswith("output 0.")]
    assert [line.split()[1] for line in printed.splitlines() if line.startswith("output")] == ["0.0:", "0.1:"]
    assert all(o[:2] == ["w5", "w6"] and len(o) == 7 for o in outs) and outs[0] != outs[1]
    assert ", no-repeat-ngram-size 2\n" in printed


def test_cli_chat_wraps_each_prompt_in_the_chat_template(folder, tmp_path, capsys):
    import shutil
    from transformers import AutoTokenizer
    base = ["--gen-len", "3", "--batch", "2", "--dtype", "fp16"]
    assert main(["generate", "--model", folder, "--chat", "--prompt", "w5"] + base) == 2
    assert "--chat needs a tokenizer with a chat template" in capsys.readouterr().err
    chat = str(tmp_path / "chat")
    shutil.copytree(folder, chat)
    tok = AutoTokenizer.from_pretrained(chat, local_files_only=True)
    tok.chat_template = ("{% for m in messages %}w1 {{ m['content'] }} w2 {% endfor %}"
                         "{% if add_generation_prompt %}w3{% endif %}")
    tok.save_pretrained(chat)
    assert main(["generate", "--model", chat, "--chat", "--prompt", "w5 w6", "--prompt", "w7"] + base) == 0
    got = _outputs(capsys.readouterr().out)
    # the same ids given as plain text: the same greedy reply
    assert main(["generate", "--model", chat, "--prompt", "w1 w5 w6 w2 w3", "--prompt", "w1 w7 w2 w3"] + base) == 0
    want = _outputs(capsys.readouterr().out)
    assert got == want and got["output 0"][:5] == ["w1", "w5", "w6", "w2", "w3"] and len(got["output 0"]) == 8
    assert main(["generate", "--model", chat, "--chat", "--gen-len", "1"]) == 2
    assert "--chat applies a chat template to --prompt text: give --prompt" in capsys.readouterr().err
