"""HF's `logits_processor` and `prefix_allowed_tokens_fn` (dak.runtime.host_processors), and the forced
BOS/EOS, invalid-value and EOS length-penalty rules (dak.runtime.processors) in an offloaded model's
generate. CPU; the graph test on a GPU."""

import os

import pytest
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

import dak  # noqa: E402

def offload(batch, **kw):
    kw = dict(dict(graphs=False), **kw)
    return dak.offload("tiny-llama", batch=batch, max_len=16, policy="uniform", host_ratio=0.3,
                       dtype=torch.float16, tune=False, **kw)


@pytest.fixture(scope="module")
def model():
    m = offload(3)
    yield m
    m.dak_free()


class Forcing:
    """Forces token (seed + 7 t) at new token t in every row, and keeps the ids and scores it sees."""

    def __init__(self, width, seed=11):
        self.width, self.seed, self.ids, self.scores = width, seed, [], []

    def token(self, t):
        return self.seed + 7 * t  # < 100 over 10 steps: inside tiny-llama's vocabulary

    def __call__(self, input_ids, scores):
        self.ids.append(input_ids.clone())
        self.scores.append(scores.clone())
        out = torch.full_like(scores, -float("inf"))
        out[:, self.token(input_ids.shape[1] - self.width)] = 0.0
        return out


def test_custom_processors_see_hfs_ids_after_dak_processors_and_pick_the_tokens(model):
    """A left-padded batch: each call gets HF's ids (prompts left-padded with the pad id, then the new
    tokens as returned), and the scores after dak's own processors (a suppressed token is -inf there);
    its output decides the tokens, greedy and sampled alike; with EOS a finished row's ids are padded."""
    g = torch.Generator().manual_seed(3)
    ids = torch.randint(3, 900, (2, 5), generator=g)
    mask = torch.ones_like(ids)
    mask[1, :2] = 0  # the second prompt is 3 tokens, left-padded
    ids[1, :2] = 0
    plain = model.generate(ids, attention_mask=mask, max_new_tokens=6, eos_token_id=None).cpu()
    banned = int(plain[0, 6])
    for sample in (False, True):
        proc = Forcing(5)
        got = model.generate(ids, attention_mask=mask, max_new_tokens=6, eos_token_id=None, pad_token_id=9,
                             suppress_tokens=[banned], logits_processor=[proc], do_sample=sample).cpu()
        assert got[:, 5:].tolist() == [[proc.token(t) for t in range(6)]] * 2
        assert len(proc.ids) == 6
        for t, seen in enumerate(proc.ids):
            want = torch.cat([ids, got[:, 5:5 + t]], 1)
            want[1, :2] = 9  # HF's layout: padding with the pad id
            assert torch.equal(seen.cpu(), want), t
            assert torch.isinf(proc.scores[t][:, banned]).all()  # dak's suppress_tokens ran first
    # an EOS ends the first row at new token 1: its later ids are the pad id, as in HF
    proc = Forcing(5)
    got = model.generate(ids, attention_mask=mask, max_new_tokens=4, eos_token_id=proc.token(1), pad_token_id=9,
                         logits_processor=[proc, lambda i, s: s]).cpu()
    assert got.shape == (2, 5 + 2)  # every row ended at new token 1 (a GPU may run one step past it)
    assert proc.ids[1][:, -1].tolist() == [proc.token(0)] * 2 and len(proc.ids) in (2, 3)
    if len(proc.ids) == 3:
        assert proc.ids[2][:, -1].tolist() == [9, 9]


def test_prefix_allowed_tokens_fn_constrains_each_prompt(model):
    """HF's prefix_allowed_tokens_fn(batch_id, ids): batch_id is the prompt's index, also with
    num_return_sequences copies; every new token is one the function allowed."""
    allowed = {0: [101, 202, 303], 1: [404, 505]}
    calls = []

    def fn(batch_id, sent):
        calls.append((batch_id, sent.shape[0]))
        return allowed[batch_id]
    two = torch.randint(3, 900, (2, 4), generator=torch.Generator().manual_seed(6))
    got = model.generate(two, max_new_tokens=3, eos_token_id=None, prefix_allowed_tokens_fn=fn).cpu()
    assert set(got[0, 4:].tolist()) <= set(allowed[0]) and set(got[1, 4:].tolist()) <= set(allowed[1])
    assert {b for b, _ in calls} == {0, 1} and {n for _, n in calls} == {4, 5, 6}
    calls.clear()  # two samples of one prompt: both are its batch_id 0
    got = model.generate(two[1:], max_new_tokens=3, eos_token_id=None, do_sample=True, num_return_sequences=2,
                         prefix_allowed_tokens_fn=fn).cpu()
    assert got.shape == (2, 7) and set(got[:, 4:].flatten().tolist()) <= set(allowed[0])
    assert {b for b, _ in calls} == {0}


def test_forced_eos_forced_bos_and_the_eos_length_penalty(model):
    ids = torch.randint(3, 900, (2, 4), generator=torch.Generator().manual_seed(8))
    plain = model.generate(ids, max_new_tokens=5, eos_token_id=None).cpu()
    forced = model.generate(ids, max_new_tokens=5, eos_token_id=None, forced_eos_token_id=[77, 78]).cpu()
    assert torch.equal(forced[:, :-1], plain[:, :-1]) and set(forced[:, -1].tolist()) <= {77, 78}
    one = ids[:, :1]  # a 1-token input: HF forces BOS at the first new token, then begin_suppress
    bos = model.generate(one, max_new_tokens=3, eos_token_id=None, forced_bos_token_id=5).cpu()
    got = model.generate(one, max_new_tokens=3, eos_token_id=None, forced_bos_token_id=5,
                         begin_suppress_tokens=[int(bos[0, 2])]).cpu()
    assert bos[:, 1].tolist() == [5, 5] and got[:, 1].tolist() == [5, 5] and int(got[0, 2]) != int(bos[0, 2])
    assert torch.equal(model.generate(ids, max_new_tokens=3, eos_token_id=None, forced_bos_token_id=5).cpu(),
                       plain[:, :7])  # a longer input: HF never forces it
    # the EOS length penalty (start 1, factor 1e4) lifts EOS above every token at new token 2
    eos = next(t for t in range(100, 200) if t not in plain[:, 4:7])  # one the model does not pick early
    got = model.generate(ids, max_new_tokens=5, eos_token_id=eos, exponential_decay_length_penalty=(1, 1e4)).cpu()
    assert got.shape == (2, 4 + 3) and got[:, 6].tolist() == [eos, eos]
    assert torch.equal(got[:, :6], plain[:, :6])
    cfg = model.generation_config  # from the generation config too; renormalize_logits changes no token
    cfg.forced_eos_token_id, cfg.renormalize_logits = 77, True
    try:
        want = forced.clone()
        want[:, -1] = 77
        assert torch.equal(model.generate(ids, max_new_tokens=5, eos_token_id=None).cpu(), want)
    finally:
        cfg.forced_eos_token_id, cfg.renormalize_logits = None, False


def test_return_dict_keeps_hfs_scores_and_logits(model):
    """return_dict_in_generate with output_scores / output_logits: a (requests, V) fp32 tensor a step. The
    logits are the model's (a prefill of the prompt and the tokens before gives them again), the scores HF's
    processors over them (greedy's tokens their argmax) and, sampling, HF's warpers after; a call that
    ends early keeps as many steps as it returns."""
    from transformers.generation import logits_process as lp
    ids = torch.randint(3, 900, (2, 5), generator=torch.Generator().manual_seed(12))
    plain = model.generate(ids, max_new_tokens=4, eos_token_id=None)
    assert isinstance(plain, torch.Tensor)
    out = model.generate(ids, max_new_tokens=4, eos_token_id=None, return_dict_in_generate=True, output_scores=True,
                         output_logits=True, repetition_penalty=1.3, suppress_tokens=[7])
    seq = out.sequences.cpu()
    assert seq.shape == (2, 9) and len(out.scores) == len(out.logits) == 4
    dev = out.scores[0].device  # HF's processors run where the scores are: a GPU divides by a scalar through its
    # reciprocal (1 ulp from the CPU's quotient), on HF's side as on dak's
    procs = [lp.RepetitionPenaltyLogitsProcessor(1.3), lp.SuppressTokensLogitsProcessor([7], device=dev)]
    for t, (scores, logits) in enumerate(zip(out.scores, out.logits)):
        assert scores.shape == logits.shape == (2, model.config.vocab_size) and scores.dtype == torch.float32
        want = logits
        for p in procs:
            want = p(seq[:, :5 + t].to(dev), want)
        torch.testing.assert_close(scores, want, rtol=0, atol=0)
        assert torch.equal(scores.cpu().argmax(-1), seq[:, 5 + t])
        if t == 2:  # the decode step's logits against a prefill of the same tokens
            again = model.generate(seq[:, :5 + t], max_new_tokens=1, eos_token_id=None, return_dict_in_generate=True,
                                   output_logits=True)
            assert again.scores is None
            torch.testing.assert_close(again.logits[0], logits, rtol=2e-2, atol=2e-2)
    torch.manual_seed(0)
    out = model.generate(ids, max_new_tokens=3, eos_token_id=None, do_sample=True, top_k=5,
                         return_dict_in_generate=True, output_scores=True)
    for t, scores in enumerate(out.scores):  # top-k 5 leaves 5 finite scores a row (no ties here), the token's one
        assert (torch.isfinite(scores).sum(-1) == 5).all()
        assert torch.isfinite(scores.gather(1, out.sequences[:, 5 + t, None].to(scores.device))).all()
    again = model.generate(ids, max_new_tokens=3, eos_token_id=None, do_sample=True, top_k=5, renormalize_logits=True,
                           return_dict_in_generate=True, output_scores=True)  # HF: a log-softmax after the warpers
    for s in again.scores:
        torch.testing.assert_close(s.exp().sum(-1), torch.ones(2, device=s.device))
        assert (torch.isfinite(s).sum(-1) == 5).all()
    eos = int(plain[0, 6])  # the first request ends at new token 1; the batch when both have ended
    out = model.generate(ids, max_new_tokens=4, eos_token_id=eos, return_dict_in_generate=True, output_scores=True)
    assert len(out.scores) == out.sequences.shape[1] - 5


@pytest.mark.parametrize("kw, message", [
    (dict(logits_processor=lambda i, s: s), r"logits_processor must be a list of callables"),
    (dict(logits_processor=[3]), r"logits_processor must be a list of callables"),
    (dict(logits_processor=[lambda i, s: s[:1]]), r"returned a torch.float32 tensor of shape \(1, \d+\)"),
    (dict(logits_processor=[lambda i, s: None]), r"returned None; HF's LogitsProcessors return the \(batch, vocab\)"),
    (dict(repetition_penalty=1.2, logits_processor="rep"), r"RepetitionPenaltyLogitsProcessor, and this call's "
                                                            r"repetition_penalty builds one too"),
    (dict(exponential_decay_length_penalty=(1, 2.0), logits_processor="decay"),
     r"ExponentialDecayLengthPenalty, and this call's exponential_decay_length_penalty builds one too"),
    (dict(prefix_allowed_tokens_fn=[1, 2]), r"prefix_allowed_tokens_fn must be a callable"),
    (dict(prefix_allowed_tokens_fn=lambda b, s: [1], forced_eos_token_id=3), r"not supported: HF applies the prefix"),
    (dict(exponential_decay_length_penalty=(1, 2.0), eos_token_id=None), r"this call has no eos_token_id"),
    (dict(return_dict_in_generate=True, output_attentions=True), r"does not return attentions or hidden states"),
    (dict(output_scores="yes"), r"output_scores must be True or False"),
])
def test_bad_processors_are_refused(model, kw, message):
    from transformers.generation import logits_process as lp
    if kw.get("logits_processor") == "rep":
        kw["logits_processor"] = [lp.RepetitionPenaltyLogitsProcessor(1.5)]
    if kw.get("logits_processor") == "decay":
        kw["logits_processor"] = [lp.ExponentialDecayLengthPenalty((1, 2.0), [2], 4)]
    ids = torch.randint(3, 900, (2, 4), generator=torch.Generator().manual_seed(1))
    with pytest.raises(ValueError, match=message):
        model.generate(ids, max_new_tokens=2, **dict(dict(eos_token_id=[2]), **kw))
    assert model.generate(ids, max_new_tokens=2, eos_token_id=None).shape == (2, 6)  # still works after


@pytest.mark.gpu
def test_host_processors_and_step_rules_under_graphs():
    """Graphed decoding with the caller's processors (the graph stops at the logits) and the forced EOS
    and length-penalty rules (inside it) gives what eager decoding gives."""
    runs = []
    for graphs in (True, False):
        m = offload(3, graphs=graphs)
        try:
            ids = torch.randint(3, 900, (3, 4), generator=torch.Generator().manual_seed(4))
            kw = dict(max_new_tokens=10, eos_token_id=[2], forced_eos_token_id=7,
                      exponential_decay_length_penalty=(3, 1.3), remove_invalid_values=True)
            out = [m.generate(ids, **kw).cpu(), m.generate(ids, logits_processor=[Forcing(4)], **kw).cpu()]
            kept = m.generate(ids, return_dict_in_generate=True, output_scores=True, output_logits=True, **kw)
            out += [kept.sequences.cpu(), torch.stack(kept.scores).cpu(), torch.stack(kept.logits).cpu()]
            assert m.dak_engine.graphs == graphs
            runs.append(out)
        finally:
            m.dak_free()
    assert torch.equal(runs[0][0], runs[1][0]) and torch.equal(runs[0][1], runs[1][1])
    assert torch.equal(runs[0][2], runs[0][0]) and torch.equal(runs[1][2], runs[1][0])  # keeping changes no token
    for i in (3, 4):  # the kept scores and logits: graphed as eager
        torch.testing.assert_close(runs[0][i], runs[1][i], rtol=1e-3, atol=1e-3)
    # the caller's processors come after the forced EOS, as in HF: theirs is the last token too
    assert runs[0][1][:, 4:].tolist() == [[Forcing(4).token(t) for t in range(10)]] * 3
