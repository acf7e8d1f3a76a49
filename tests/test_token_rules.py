"""HF's token-rule processors in dak's generate (dak.runtime.processors): no_repeat_ngram_size,
bad_words_ids, sequence_bias, suppress_tokens, begin_suppress_tokens, forced_bos_token_id,
forced_eos_token_id, remove_invalid_values, exponential_decay_length_penalty, against HF's own
processors. CPU (the graph capture test on a GPU)."""

import os
import random

import pytest
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

import dak  # noqa: E402
from dak.runtime.processors import RuleState, token_rules  # noqa: E402
from runtime_checks import DTYPE, PROMPT, saved_model, tie_tolerance  # noqa: E402


def hf_processed(ids: torch.Tensor, logits: torch.Tensor, eos=None, **kw) -> torch.Tensor:
    """HF's processors for `kw` over one request's own ids (1, n), in HF's order."""
    from transformers.generation import logits_process as lp
    procs = []
    if kw.get("sequence_bias"):
        procs.append(lp.SequenceBiasLogitsProcessor(kw["sequence_bias"]))
    if kw.get("no_repeat_ngram_size"):
        procs.append(lp.NoRepeatNGramLogitsProcessor(kw["no_repeat_ngram_size"]))
    if kw.get("bad_words_ids"):
        procs.append(lp.NoBadWordsLogitsProcessor(kw["bad_words_ids"], eos_token_id=eos))
    if kw.get("suppress_tokens"):
        procs.append(lp.SuppressTokensLogitsProcessor(kw["suppress_tokens"], device="cpu"))
    for p in procs:
        logits = p(ids, logits)
    return logits


def random_rules(g: torch.Generator, tokens: int) -> dict:
    def seq(lo, hi):
        # ids from 1: HF 5.17 refuses id 0 in sequence_bias
        return [int(t) for t in torch.randint(1, tokens, (int(torch.randint(lo, hi + 1, (), generator=g)),),
                                              generator=g)]
    return dict(no_repeat_ngram_size=int(torch.randint(1, 5, (), generator=g)),
                bad_words_ids=[seq(1, 3) for _ in range(4)],
                sequence_bias=[[seq(1, 3), float(torch.randn((), generator=g))] for _ in range(3)],
                suppress_tokens=[int(torch.randint(0, 40, (), generator=g))])


def test_rules_keep_what_hfs_processors_keep_on_random_histories():
    """Rows of few distinct ids (repeats likely), each row's own length: dak's logits after its rules
    are HF's after its processors over that row, for 300 rows with fresh random rules."""
    seed = random.randrange(2**31)
    g = torch.Generator().manual_seed(seed)
    v, b, s = 40, 6, 16
    moved = 0
    for trial in range(50):
        kw = random_rules(g, 6)
        hist = torch.randint(0, 6, (b, s), generator=g)
        # at least 3 tokens: HF 5.17's SequenceBias skips a sequence as long as the whole row, later ones match
        # its prefix against it (dak does); at 3+ tokens both agree for these 1-3 token sequences
        lengths = torch.randint(3, s + 1, (b,), generator=g)
        logits = 3 * torch.randn(b, v, generator=g)
        got = RuleState(token_rules(v, eos_token_id=[2], **kw), v, "cpu").apply(logits.clone(), hist, lengths,
                                                                                lengths - 2)
        for r in range(b):
            want = hf_processed(hist[r:r + 1, :lengths[r]], logits[r:r + 1].clone(), eos=[2], **kw)[0]
            assert torch.equal(torch.isinf(got[r]), torch.isinf(want)), (seed, trial, r, kw)
            fin = ~torch.isinf(want)
            torch.testing.assert_close(got[r][fin], want[fin], rtol=1e-6, atol=1e-6)
            moved += int(not torch.equal(want, logits[r]))
    assert moved > 250  # the rules changed most rows: the comparison is not vacuous


def hf_late(logits: torch.Tensor, t: int, width: int, final: int, eos, **kw) -> torch.Tensor:
    """HF's processors that come after its repetition penalty, in HF's order and on its conditions,
    for one request (1, V) whose input was `width` tokens, at new token t of final + 1."""
    from transformers.generation import logits_process as lp
    ids = torch.zeros(1, width + t, dtype=torch.long)  # HF reads only cur_len of them
    procs = []
    if kw.get("forced_bos_token_id") is not None:
        procs.append(lp.ForcedBOSTokenLogitsProcessor(kw["forced_bos_token_id"]))
    if kw.get("forced_eos_token_id") is not None:
        procs.append(lp.ForcedEOSTokenLogitsProcessor(width + final + 1, kw["forced_eos_token_id"]))
    if kw.get("remove_invalid_values"):
        procs.append(lp.InfNanRemoveLogitsProcessor())
    if kw.get("exponential_decay_length_penalty"):
        procs.append(lp.ExponentialDecayLengthPenalty(kw["exponential_decay_length_penalty"], eos, width))
    if kw.get("suppress_tokens"):
        procs.append(lp.SuppressTokensLogitsProcessor(kw["suppress_tokens"], device="cpu"))
    if kw.get("begin_suppress_tokens"):
        begin = width + int(width == 1 and kw.get("forced_bos_token_id") is not None)
        procs.append(lp.SuppressTokensAtBeginLogitsProcessor(kw["begin_suppress_tokens"], begin, device="cpu"))
    for p in procs:
        before = logits
        logits = p(ids, logits)
        if isinstance(p, lp.ExponentialDecayLengthPenalty):  # transformers 5.17 adds inf * 0 or -inf + inf
            far = ~torch.isfinite(before[:, p.eos_token_id])  # (nan) at a non-finite EOS logit; later ones
            logits[:, p.eos_token_id] = torch.where(far, before[:, p.eos_token_id], logits[:, p.eos_token_id])
    return logits  # leave it as it was, and so does dak


def test_step_rules_are_hfs_on_random_settings():
    """forced BOS / EOS, invalid values, the EOS length penalty and the two suppressions at random new-token
    counts, on logits holding nan and +-inf: dak's `late` gives HF's processors' logits, row by row."""
    seed = random.randrange(2**31)
    g = torch.Generator().manual_seed(seed)
    v, b, final = 30, 12, 6
    moved = 0
    for trial in range(30):
        def pick(p, value):
            return value if float(torch.rand((), generator=g)) < p else None
        eos = [int(x) for x in torch.randint(0, v, (int(torch.randint(1, 3, (), generator=g)),), generator=g)]
        width = int(torch.randint(1, 4, (), generator=g))
        kw = dict(forced_bos_token_id=pick(0.5, int(torch.randint(0, v, (), generator=g))),
                  forced_eos_token_id=pick(0.5, [int(torch.randint(0, v, (), generator=g))]),
                  remove_invalid_values=pick(0.5, True),
                  exponential_decay_length_penalty=pick(0.7, (int(torch.randint(0, 4, (), generator=g)),
                                                              float(torch.rand((), generator=g)) * 3 + 0.1)),
                  suppress_tokens=pick(0.5, [int(torch.randint(0, v, (), generator=g))]),
                  begin_suppress_tokens=pick(0.5, [int(x) for x in torch.randint(0, v, (2,), generator=g)]))
        rules = token_rules(v, eos_token_id=eos, width=width, **kw)
        if rules is None:
            continue
        state = RuleState(rules, v, "cpu")
        state.final.fill_(final)
        logits = 4 * torch.randn(b, v, generator=g)
        logits[torch.rand(b, v, generator=g) < 0.08] = float("nan")
        logits[torch.rand(b, v, generator=g) < 0.08] = float("inf")
        logits[torch.rand(b, v, generator=g) < 0.15] = -float("inf")
        t = torch.randint(0, final + 1, (b,), generator=g)
        got = state.late(logits.clone(), t)
        for r in range(b):
            want = hf_late(logits[r:r + 1].clone(), int(t[r]), width, final, eos, **kw)[0]
            torch.testing.assert_close(got[r], want, rtol=1e-6, atol=1e-6, equal_nan=True,
                                       msg=lambda m: f"{m} (seed {seed}, trial {trial}, row {r}, t {int(t[r])}, {kw})")
            moved += int(not torch.equal(want.nan_to_num(7.0), logits[r].nan_to_num(7.0)))
    assert moved > 150  # most rows changed: the comparison is not vacuous


def test_begin_suppress_and_forced_bos_apply_at_their_new_token_only():
    rules = token_rules(10, begin_suppress_tokens=[3, 4, 12])  # 12: outside the vocabulary, ignored as in HF
    state = RuleState(rules, 10, "cpu")
    logits, n = torch.randn(2, 10), torch.tensor([3, 5])
    first = state.apply(logits.clone(), None, n, torch.tensor([0, 0]))
    assert torch.isinf(first[:, [3, 4]]).all() and torch.equal(first[:, :3], logits[:, :3])
    assert torch.equal(state.apply(logits.clone(), None, n, torch.tensor([1, 1])), logits)
    assert token_rules(10, forced_bos_token_id=5, width=4) is None  # HF forces BOS after a 1-token input only
    rules = token_rules(10, forced_bos_token_id=5, begin_suppress_tokens=[3], width=1)
    assert (rules.forced_bos, rules.begin_at) == (5, 1)  # HF moves begin_suppress past the forced BOS
    out = RuleState(rules, 10, "cpu").late(logits.clone(), torch.tensor([0, 1]))
    assert int(out[0].argmax()) == 5 and torch.isinf(out[0]).sum() == 9 and torch.isinf(out[1, 3])


@pytest.mark.parametrize("kw, message", [
    (dict(no_repeat_ngram_size=-1), r"no_repeat_ngram_size must be an integer >= 0 \(0 = off\), got -1"),
    (dict(no_repeat_ngram_size=1.5), r"no_repeat_ngram_size must be an integer >= 0"),
    (dict(bad_words_ids=[5, 6]), r"`bad_words_ids` has to be a list of lists"),
    (dict(bad_words_ids=[[5], [-1]]), r"Each list in `bad_words_ids` has to be a list of positive integers"),
    (dict(bad_words_ids=[[5, 900]]), r"token ids \[900\] beyond the model's vocabulary \(100 ids\)"),
    (dict(sequence_bias=[[[5], 1]]), r"`sequence_bias`"),
    (dict(suppress_tokens=7), r"suppress_tokens must be a list of token ids"),
    (dict(begin_suppress_tokens=[1, -2]), r"begin_suppress_tokens must be a list of token ids"),
    (dict(forced_bos_token_id=[1, 2]), r"forced_bos_token_id must be one token id"),
    (dict(forced_bos_token_id=100), r"forced_bos_token_id 100 is outside the vocabulary \[0, 100\)"),
    (dict(forced_eos_token_id="2"), r"forced_eos_token_id must be a token id or a non-empty list"),
    (dict(remove_invalid_values="yes"), r"remove_invalid_values must be True or False"),
    (dict(exponential_decay_length_penalty=(2, -1.0)), r"\(start_index, decay_factor\): an integer >= 0"),
    (dict(exponential_decay_length_penalty=1.5), r"exponential_decay_length_penalty must be"),
    (dict(exponential_decay_length_penalty=(2, 1.5), eos_token_id=None), r"this call has no eos_token_id"),
])
def test_bad_rules_are_refused(kw, message):
    kw = dict(dict(eos_token_id=[2]), **kw)
    with pytest.raises(ValueError, match=message):
        token_rules(100, **kw)


def test_bad_words_leave_eos_alone_and_no_rule_is_none():
    assert token_rules(100, eos_token_id=[7], bad_words_ids=[[7]]) is None  # HF drops EOS from the bad words
    assert token_rules(100, no_repeat_ngram_size=0, bad_words_ids=None) is None


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return saved_model(tmp_path_factory)


def test_generate_applies_hfs_rules_at_every_step(tiny):
    """Every new token is the argmax of HF's logits (teacher-forced on dak's tokens) after HF's
    processors over the request's own prompt and earlier new tokens, within two fp16 steps; the
    rules change the tokens; a right-padded batch; rules taken from the generation config too."""
    hf, path = tiny
    steps, lens = 10, [PROMPT, 3]
    model = dak.offload(path, batch=2, max_len=PROMPT + steps, policy="uniform", host_ratio=0.3, dtype=DTYPE, tune=False)
    try:
        g = torch.Generator().manual_seed(5)
        ids = torch.randint(3, 40, (2, PROMPT), generator=g)  # few ids: repeated n-grams likely
        plain = model.generate(ids, prompt_lengths=lens, max_new_tokens=steps, eos_token_id=None).cpu()
        kw = dict(no_repeat_ngram_size=2, bad_words_ids=[[int(plain[0, PROMPT + 1])],
                                                         [int(plain[1, 3]), int(plain[1, 4])]],
                  sequence_bias=[[[int(plain[0, PROMPT + 3])], 2.0]], suppress_tokens=[int(plain[1, 6])])
        got = model.generate(ids, prompt_lengths=lens, max_new_tokens=steps, eos_token_id=None, **kw).cpu()
        assert not torch.equal(plain, got), "the rules changed no token: the check could not fail"
        for b, n0 in enumerate(lens):
            seq = torch.cat([got[b, :n0], got[b, PROMPT:]])
            with torch.no_grad():
                logits = hf(seq[None]).logits[0].float()
            for t in range(steps):
                n = n0 + t
                ref = hf_processed(seq[None, :n], logits[n - 1:n].clone(), **kw)[0]
                assert ref.max() - ref[seq[n]] <= tie_tolerance(ref.max()), (b, t)
        gc = model.generation_config
        gc.no_repeat_ngram_size, gc.bad_words_ids = kw["no_repeat_ngram_size"], kw["bad_words_ids"]
        gc.sequence_bias, gc.suppress_tokens = kw["sequence_bias"], kw["suppress_tokens"]
        try:
            assert torch.equal(model.generate(ids, prompt_lengths=lens, max_new_tokens=steps,
                                              eos_token_id=None).cpu(), got)
            gc.no_repeat_ngram_size = -3
            with pytest.raises(ValueError, match=r"got -3 \(the model's generation_config set no_repeat_ngram_size"):
                model.generate(ids, max_new_tokens=1)
        finally:
            gc.no_repeat_ngram_size = gc.bad_words_ids = gc.sequence_bias = gc.suppress_tokens = None
    finally:
        model.dak_free()


@pytest.mark.gpu
def test_rules_run_inside_the_decode_graphs(tiny):
    """The rules captured in the decode graphs give what eager decoding gives, sampled and greedy."""
    _, path = tiny
    kw = dict(no_repeat_ngram_size=3, bad_words_ids=[[5, 6], [9]], sequence_bias=[[[11], -1.5]],
              suppress_tokens=[13], begin_suppress_tokens=[14])
    runs = []
    for graphs in (True, False):
        model = dak.offload(path, batch=3, max_len=48, policy="uniform", host_ratio=0.3, dtype=DTYPE, tune=False,
                            graphs=graphs)
        try:
            ids = torch.randint(3, 40, (3, 8), generator=torch.Generator().manual_seed(2))
            out = [model.generate(ids, max_new_tokens=40, eos_token_id=None, **kw).cpu()]
            torch.manual_seed(4)
            out.append(model.generate(ids, max_new_tokens=40, eos_token_id=None, do_sample=True, top_k=3, **kw).cpu())
            assert model.dak_engine.graphs == graphs
            runs.append(out)
        finally:
            model.dak_free()
    for got in runs[0] + runs[1]:  # no new token completes a 3-gram seen before, nor a bad word
        for row in got.tolist():
            for i in range(8 - 2, len(row) - 2):
                assert tuple(row[i:i + 3]) not in {tuple(row[j:j + 3]) for j in range(i)}
            new = row[8:]
            assert 9 not in new and 13 not in new and new[0] != 14
            assert (5, 6) not in set(zip(row[7:], row[8:]))
    assert torch.equal(runs[0][0], runs[1][0])  # greedy: the graphs replay what eager decoding does
