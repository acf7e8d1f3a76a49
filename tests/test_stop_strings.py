"""Stop strings in generate (dak.runtime.stop_strings), CPU: the device-side check against HF's
StopStringCriteria on whole sequences, the bookkeeping around the static decode step, and generate
end to end."""

import os
import random

import pytest
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

import dak  # noqa: E402
from dak.runtime import stopping  # noqa: E402
from dak.runtime.stop_strings import StopStrings, check_stop_strings  # noqa: E402
from dak.runtime.stopping import EosStop  # noqa: E402

LATE = stopping.AHEAD if torch.cuda.is_available() else 0  # steps an end may be seen late (none on a CPU)

ALPHABET = "abcdefghijkl"


def word_tokenizer(words):
    """An HF fast tokenizer whose token i is words[i] and whose decoding concatenates tokens (the
    single letters HF's criterion tokenizes its probe text with are added after the words)."""
    import tokenizers
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast
    words = list(words) + [c for c in ALPHABET if c not in words]
    tk = Tokenizer(models.WordLevel({s: i for i, s in enumerate(words)}, unk_token=words[0]))
    tk.decoder = decoders.Fuse()
    tk.pre_tokenizer = pre_tokenizers.Split(tokenizers.Regex("."), behavior="isolated")
    return PreTrainedTokenizerFast(tokenizer_object=tk)


def hf_tokenizer(vocab: int, seed: int = 0):
    """word_tokenizer over `vocab` random tokens of 1-3 letters (at most 12 + 144 + 1728), and the words."""
    rng = random.Random(seed)
    strings, seen = list(ALPHABET), set(ALPHABET)
    while len(strings) < vocab:
        s = "".join(rng.choice(ALPHABET) for _ in range(rng.randint(2, 3)))
        if s not in seen:
            seen.add(s)
            strings.append(s)
    return word_tokenizer(strings), strings


def hf_first_stop(tok, strings, prompt, new):
    """The step at which HF's StopStringCriteria, given the whole sequence, stops `new` after `prompt`, or None."""
    from transformers.generation.stopping_criteria import StopStringCriteria
    crit = StopStringCriteria(tokenizer=tok, stop_strings=strings)
    for t in range(len(new)):
        if bool(crit(torch.tensor([prompt + new[:t + 1]]), None)[0]):
            return t
    return None


def first_stops(stops, prompts, news, batch=None):
    """Each request's first step whose token stops it, stepping `stops` as generate does."""
    batch = batch or len(prompts)
    stops.start(prompts, batch, "cpu")
    first = [None] * len(prompts)
    for t in range(max(map(len, news))):
        tok = torch.tensor([n[t] if t < len(n) else 0 for n in news] + [0] * (batch - len(news)))
        hit = stops.step(tok)
        assert hit.shape == (batch,) and hit.dtype == torch.bool
        for i in range(len(prompts)):
            if first[i] is None and t < len(news[i]) and bool(hit[i]):
                first[i] = t
    return first


@pytest.mark.parametrize("prompt,new,step", [
    (["x"], ["st", "op"], 1),
    (["x"], ["stop"], 0),
    (["x"], ["st", "opera"], 1),            # the token runs past the string's end
    (["x"], ["las", "topper"], 1),          # ... and starts before it
    (["x"], ["s", "to", "pped"], 2),
    (["stop"], ["x", "x"], None),           # wholly in the prompt: not a stop
    (["x", "st"], ["op", "x"], 0),          # starts in the prompt, completed by the first new token
    (["s", "t", "o"], ["p"], 0),            # the window reaches back into a prompt of one-letter tokens
    (["t", "o"], ["p"], None),              # a short prompt: nothing before it
    (["x"], ["stop", "at"], 0),
    (["x"], ["x", "at", "x"], None),
])
def test_a_stop_overlaps_the_token_that_completes_it(prompt, new, step):
    words = ["st", "op", "opera", "stop", "at", "x", "s", "to", "pped", "las", "topper", "t", "o", "p"]
    ids = {w: i for i, w in enumerate(words)}
    tok = word_tokenizer(words)
    p, n = [ids[w] for w in prompt], [ids[w] for w in new]
    assert hf_first_stop(tok, ["stop"], p, n) == step  # the cases say what HF does
    assert first_stops(StopStrings(["stop"], tok), [p], [n], batch=3) == [step]


def test_the_window_agrees_with_hfs_criterion_on_whole_sequences():
    """Random batches: the device-side window finds each request's first stop where HF's criterion,
    given the whole sequence at every step, finds it."""
    tok, words = hf_tokenizer(300, seed=1)
    rng = random.Random(7)
    stopped = 0
    for case in range(12):
        prompts = [[rng.randrange(300) for _ in range(rng.randint(1, 6))] for _ in range(5)]
        news = [[rng.randrange(300) for _ in range(10)] for _ in range(5)]
        wanted = []
        for p, n in zip(prompts[:3], news[:3]):
            text = "".join(words[i] for i in p + n)
            start = rng.randrange(max(1, len(text) - 3))
            wanted.append(text[start:start + rng.randint(2, 6)])
        wanted += ["lkj"] if case % 3 == 0 else []
        expected = [hf_first_stop(tok, wanted, p, n) for p, n in zip(prompts, news)]
        assert first_stops(StopStrings(wanted, tok), prompts, news, batch=6) == expected, (prompts, news, wanted)
        stopped += sum(e is not None for e in expected)
    assert stopped >= 25  # most requests stop: the comparison is not vacuous


def test_eos_stop_pads_after_a_stop_string():
    tok = word_tokenizer(["a", "b", "c", "z", "q"])  # 3 = "z" is EOS below
    strings = StopStrings(["bc"], tok)
    strings.start([[0], [0]], 3, "cpu")
    stop = EosStop([3], 4, vocab=5, batch=3, real=2, device="cpu", strings=strings)
    out = torch.full((3, 10), -1)
    steps = [[0, 0, 0], [1, 3, 0], [2, 1, 0], [0, 2, 0], [0, 0, 0], [1, 0, 0], [2, 0, 0], [0, 0, 0]]
    for t, toks in enumerate(steps):
        stop.record(out, t, torch.tensor(toks))
        assert stop.finished(t) == (t >= 2)  # on a CPU the end is read at its step
    # row 0 completes "bc" at step 2: later tokens become pad; row 1 hit its EOS at step 1, before its "bc"
    assert out[0, :8].tolist() == [0, 1, 2, 4, 4, 4, 4, 4]
    assert out[1, :8].tolist() == [0, 3, 4, 4, 4, 4, 4, 4]
    assert stop.length(8) == 3 and stop.stopped_steps() == (2, 1)


def test_without_eos_ids_a_stop_string_ends_generation_but_pads_nothing():
    """HF pads finished requests only when EOS ids are set; the early end applies either way."""
    strings = StopStrings(["ab", "cc"], word_tokenizer(["a", "b", "c"]))
    strings.start([[2], [2]], 2, "cpu")
    stop = EosStop(None, None, vocab=3, batch=2, real=2, device="cpu", strings=strings)
    out = torch.full((2, 8), -1)
    for t, toks in enumerate([[0, 2], [1, 0], [1, 0], [0, 0]]):
        stop.record(out, t, torch.tensor(toks))
    assert out[:, :4].tolist() == [[0, 1, 1, 0], [2, 0, 0, 0]]  # row 1: "c" + "c" across the prompt
    assert stop.length(4) == 2 and not stop.pads  # row 0 stopped at step 1, row 1 at step 0


@pytest.mark.parametrize("graphs", [False, pytest.param(True, marks=pytest.mark.gpu)])
def test_generate_stops_at_stop_strings_as_hfs_criterion_says(graphs):
    """Eager decoding, and on a GPU the captured decode graphs too."""
    model = dak.offload("tiny-llama", batch=2, max_len=24, policy="uniform", host_ratio=0.3,
                        dtype=torch.float16, tune=False, graphs=graphs)
    try:
        tok, strings = hf_tokenizer(model.config.vocab_size)
        ids = torch.randint(3, 900, (2, 4), generator=torch.Generator().manual_seed(5))
        n = 12
        free = model.generate(ids, max_new_tokens=n, eos_token_id=None).cpu()[:, 4:]
        text = ["".join(strings[i] for i in row) for row in free.tolist()]
        # a string across the boundary of steps 2/3 of request 0 and one across steps 4/5 of request 1
        spans = [sum(len(strings[i]) for i in free[r, :k].tolist()) for r, k in ((0, 3), (1, 5))]
        wanted = [text[0][spans[0] - 1:spans[0] + 2], text[1][spans[1] - 1:spans[1] + 2]]
        firsts = [hf_first_stop(tok, wanted, ids[r].tolist(), free[r].tolist()) for r in range(2)]
        assert firsts[0] is not None and firsts[1] is not None and max(firsts) <= 5 and firsts[0] != firsts[1]
        cols = max(firsts) + 1

        got = model.generate(ids, max_new_tokens=n, eos_token_id=None, stop_strings=wanted, tokenizer=tok).cpu()
        assert torch.equal(got[:, :4], ids) and torch.equal(got[:, 4:], free[:, :cols])  # no EOS: no pad
        assert max(firsts) <= model.dak_last.steps <= max(firsts) + LATE  # ended at the last stop, not n - 1

        eos = next(i for i in range(3, 900) if i not in free.tolist()[0] + free.tolist()[1])
        padded = model.generate(ids, max_new_tokens=n, eos_token_id=eos, pad_token_id=0, stop_strings=wanted,
                                tokenizer=tok).cpu()[:, 4:]
        assert padded.shape == (2, cols)
        for r, f in enumerate(firsts):
            assert torch.equal(padded[r, :f + 1], free[r, :f + 1]) and not padded[r, f + 1:].any()

        seen = []

        class Streamer:
            def put(self, x):
                seen.append(x.clone())

            def end(self):
                seen.append(None)
        streamed = model.generate(ids, max_new_tokens=n, eos_token_id=eos, pad_token_id=0, stop_strings=wanted,
                                  tokenizer=tok, streamer=Streamer()).cpu()[:, 4:]
        assert torch.equal(streamed, padded) and seen[-1] is None
        assert torch.equal(torch.stack(seen[1:-1], 1), padded)  # the streamer saw the pads, not later tokens

        model.generation_config.stop_strings = wanted  # as HF: the config's, when not given
        assert torch.equal(model.generate(ids, max_new_tokens=n, eos_token_id=None, tokenizer=tok).cpu()[:, 4:],
                           free[:, :cols])
        with pytest.raises(ValueError, match="stop_strings need the model's tokenizer"):
            model.generate(ids, max_new_tokens=n, eos_token_id=None)
    finally:
        model.dak_free()


@pytest.mark.parametrize("strings,tokenizer,message", [
    (["x"], None, "need the model's tokenizer: pass tokenizer="),
    ([""], "hf", "non-empty string"),
    (5, "hf", "non-empty string"),
    ([], "hf", "non-empty string"),
    ("x", object(), "tokenizer must be an HF tokenizer"),
])
def test_bad_stop_strings_are_refused(strings, tokenizer, message):
    tok = word_tokenizer(["a", "b"])
    with pytest.raises(ValueError, match=message):
        check_stop_strings(strings, tok if tokenizer == "hf" else tokenizer)
    assert check_stop_strings(None, None) is None and check_stop_strings("ab", tok) == ["ab"]
    with pytest.raises(ValueError, match=r"HF's StopStringCriteria refused stop strings \['##'\]"):
        StopStrings(["##"], tok)  # no token's text holds "#": HF refuses it
