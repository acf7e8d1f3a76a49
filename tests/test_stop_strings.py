"""Stop strings in generate (dak.runtime.stop_strings), CPU: the scan against HF's StopStringCriteria,
the bookkeeping around the static decode step, and generate end to end."""

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

ALPHABET = "abcdefghijkl"


class Table:
    """A tokenizer whose decode concatenates its tokens' strings."""

    def __init__(self, strings):
        self.strings = strings

    def decode(self, ids):
        return "".join(self.strings[i] for i in ids)


def hf_tokenizer(vocab: int, seed: int = 0):
    """An HF fast tokenizer (built offline) over `vocab` tokens of 1-3 letters whose decoding
    concatenates them, as HF's StopStringCriteria reads token strings."""
    import tokenizers
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast
    rng = random.Random(seed)
    strings, seen = list(ALPHABET), set(ALPHABET)
    while len(strings) < vocab:
        s = "".join(rng.choice(ALPHABET) for _ in range(rng.randint(2, 3)))
        if s not in seen:
            seen.add(s)
            strings.append(s)
    tk = Tokenizer(models.WordLevel({s: i for i, s in enumerate(strings)}, unk_token="a"))
    tk.decoder = decoders.Fuse()
    tk.pre_tokenizer = pre_tokenizers.Split(tokenizers.Regex("."), behavior="isolated")
    return PreTrainedTokenizerFast(tokenizer_object=tk), strings


def hf_first_stop(tok, strings, prompt, new):
    """The step at which HF's StopStringCriteria stops `new` after `prompt`, or None."""
    from transformers.generation.stopping_criteria import StopStringCriteria
    crit = StopStringCriteria(tokenizer=tok, stop_strings=strings)
    for t in range(len(new)):
        if bool(crit(torch.tensor([prompt + new[:t + 1]]), None)[0]):
            return t
    return None


@pytest.mark.parametrize("prompt,new,step", [
    (["x"], ["st", "op"], 1),
    (["x"], ["stop"], 0),
    (["x"], ["st", "opera"], 1),            # the token runs past the string's end
    (["x"], ["las", "topper"], 1),          # ... and starts before it
    (["x"], ["s", "to", "pped"], 2),
    (["stop"], ["x", "x"], None),           # wholly in the prompt: not a stop
    (["x", "st"], ["op", "x"], 0),          # starts in the prompt, completed by the first new token
    (["x"], ["stop", "at"], 0),
    (["x"], ["x", "at", "x"], None),
])
def test_a_stop_overlaps_the_token_that_completes_it(prompt, new, step):
    words = ["st", "op", "opera", "stop", "at", "x", "s", "to", "pped", "las", "topper"]
    ids = {w: i for i, w in enumerate(words)}
    stops = StopStrings(["stop"], Table(words))
    stops.start([[ids[w] for w in prompt]])
    toks = [ids[w] for w in new]
    found = {}
    for end in range(1, len(toks) + 1):  # scanned one new token at a time
        found.update(stops.scan([toks[:end]]))
    assert found == ({} if step is None else {0: step})
    at_once = StopStrings(["stop"], Table(words))  # all new tokens in one scan
    at_once.start([[ids[w] for w in prompt]])
    assert at_once.scan([toks]) == found


def test_the_scan_agrees_with_hfs_stop_string_criteria_on_random_cases():
    tok, strings = hf_tokenizer(300, seed=1)
    rng = random.Random(7)
    stopped = 0
    for case in range(30):
        prompt = [rng.randrange(300) for _ in range(rng.randint(1, 4))]
        new = [rng.randrange(300) for _ in range(10)]
        text = "".join(strings[i] for i in prompt + new)
        start = rng.randrange(max(1, len(text) - 3))
        wanted = [text[start:start + rng.randint(2, 5)]] + (["lkj"] if case % 3 == 0 else [])
        expected = hf_first_stop(tok, wanted, prompt, new)
        stops = StopStrings(wanted, tok)
        stops.start([prompt])
        found = {}
        for end in (3, 7, 10):
            found.update(stops.scan([new[:end]]))
        assert found.get(0) == expected, (prompt, new, wanted)
        one_by_one = StopStrings(wanted, tok)  # each step scanned as it comes
        one_by_one.start([prompt])
        assert next((t for t in range(10) if one_by_one.scan([new[:t + 1]])), None) == expected
        stopped += expected is not None
    assert stopped >= 10  # most cases stop: the comparison is not vacuous


def test_eos_stop_pads_after_a_stop_string_found_steps_later():
    table = Table(["a", "b", "c", "z", "q"])  # 3 = "z" is EOS below
    stop = EosStop([3], 4, vocab=5, batch=3, real=2, device="cpu", strings=StopStrings(["bc"], table))
    stop.strings.start([[0], [0]])
    out = torch.full((3, 10), -1)
    steps = [[0, 0, 0], [1, 3, 0], [2, 1, 0], [0, 2, 0], [0, 0, 0], [1, 0, 0], [2, 0, 0], [0, 0, 0]]
    for t, toks in enumerate(steps):
        stop.record(out, t, torch.tensor(toks))
        assert not stop.finished(t) or t == stopping.CHECK_EVERY - 1
    # row 0 completes "bc" at step 2 (found at the check, step 7): later tokens become pad;
    # row 1 hit its EOS at step 1, before its "bc" at steps 2-3
    assert stop.finished(stopping.CHECK_EVERY - 1)
    assert out[0, :8].tolist() == [0, 1, 2, 4, 4, 4, 4, 4]
    assert out[1, :8].tolist() == [0, 3, 4, 4, 4, 4, 4, 4]
    assert stop.length(8) == 3


def test_without_eos_ids_a_stop_string_ends_generation_but_pads_nothing():
    """HF pads finished requests only when EOS ids are set; the early end applies either way."""
    table = Table(["a", "b", "c"])
    stop = EosStop(None, None, vocab=3, batch=2, real=2, device="cpu", strings=StopStrings(["ab", "cc"], table))
    stop.strings.start([[2], [2]])
    out = torch.full((2, 8), -1)
    for t, toks in enumerate([[0, 2], [1, 0], [1, 0], [0, 0]]):
        stop.record(out, t, torch.tensor(toks))
    assert out[:, :4].tolist() == [[0, 1, 1, 0], [2, 0, 0, 0]]  # row 1: "c" + "c" across the prompt
    assert stop.length(4) == 2 and not stop.pads  # row 0 stopped at step 1, row 1 at step 0


def test_every_step_marks_the_stop_before_a_streamer_reads_the_step():
    table = Table(["a", "b", "z"])
    stop = EosStop([2], 0, vocab=3, batch=1, real=1, device="cpu", strings=StopStrings(["bb"], table),
                   every_step=True)
    stop.strings.start([[0]])
    out = torch.full((1, 5), -1)
    for t, tok in enumerate([1, 1, 1, 1]):
        stop.record(out, t, torch.tensor([tok]))
    assert out[0, :4].tolist() == [1, 1, 0, 0] and stop.length(4) == 2


@pytest.mark.parametrize("graphs", [False, pytest.param(True, marks=pytest.mark.gpu)])
def test_generate_stops_at_stop_strings_as_hfs_criterion_says(graphs):
    """Eager decoding, and on a GPU the captured decode graphs too."""
    model = dak.offload("tiny-llama", batch=2, max_len=24, policy="uniform", host_ratio=0.3,
                        dtype=torch.float16, tune=False, graphs=graphs)
    try:
        tok, strings = hf_tokenizer(model.config.vocab_size)
        ids = torch.randint(3, 900, (2, 4), generator=torch.Generator().manual_seed(5))
        n = stopping.CHECK_EVERY + 4
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
        assert model.dak_last.steps == stopping.CHECK_EVERY - 1  # ended at the first check, not at n - 1

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
    ([""], Table(["a"]), "non-empty string"),
    (5, Table(["a"]), "non-empty string"),
    ([], Table(["a"]), "non-empty string"),
    ("x", object(), "tokenizer must have decode"),
])
def test_bad_stop_strings_are_refused(strings, tokenizer, message):
    with pytest.raises(ValueError, match=message):
        check_stop_strings(strings, tokenizer)
    assert check_stop_strings(None, None) is None and check_stop_strings("ab", Table(["a"])) == ["ab"]


def test_a_token_that_rewrites_the_text_before_it_is_matched_from_where_the_texts_part():
    """A decoder whose output for the earlier tokens changes once the last one comes (a partial
    character completed, spaces cleaned up): the prompt's own "stop" still does not count."""
    class Merging(Table):
        def decode(self, ids):
            return super().decode(ids).replace("?!", "!")  # "?" followed by "!" decodes as "!"

    words = ["stop", "?", "!", "x", "sto", "p!"]
    stops = StopStrings(["stop", "p!"], Merging(words))
    stops.start([[0, 3, 1]])                  # "stopx?"
    assert stops.scan([[2]]) == {}            # "stopx!": the string in the prompt is not this token's
    assert stops.scan([[2, 4, 5]]) == {0: 2}  # "...sto" + "p!" completes both strings


def test_a_scan_decodes_once_a_token_and_agrees_however_the_steps_are_chunked():
    """Each unscanned token costs one decode (its text against the one before); scanning 8 or 16
    steps at once finds the stops that scanning each step finds, with a decoder that rewrites
    earlier text."""
    class Counting(Table):
        calls = 0

        def decode(self, ids):
            Counting.calls += 1
            return super().decode(ids).replace("?!", "!")

    rng = random.Random(11)
    words = [rng.choice(["?", "!"]) if rng.random() < 0.2 else "".join(rng.choice("abc") for _ in range(rng.randint(1, 2)))
             for _ in range(40)]
    strings = ["ab!", "cab", "ba?"]
    prompts = [[rng.randrange(40) for _ in range(rng.randint(1, 5))] for _ in range(64)]
    news = [[rng.randrange(40) for _ in range(16)] for _ in range(64)]
    chunked, single = StopStrings(strings, Counting(words)), StopStrings(strings, Counting(words))
    chunked.start(prompts)
    single.start(prompts)
    got, want = {}, {}
    for end in (8, 16):
        got.update(chunked.scan([n[:end] for n in news]))
    for end in range(1, 17):
        want.update(single.scan([n[:end] for n in news]))
    assert got == want and 10 <= len(want) <= 54  # some requests stop, some do not

    quiet = StopStrings(["zzz"], Counting(words))  # no string can occur
    quiet.start(prompts)
    Counting.calls = 0
    assert quiet.scan([n[:8] for n in news]) == {} and Counting.calls == 9 * len(news)
    assert quiet.scan(news) == {} and Counting.calls == 18 * len(news)
