"""Stopping at EOS around the static decode step (dak.runtime.stopping), CPU."""

import os

import pytest
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

import dak  # noqa: E402
from dak.runtime import stopping  # noqa: E402
from dak.runtime.stopping import EosStop  # noqa: E402


LATE = stopping.AHEAD if torch.cuda.is_available() else 0  # steps an end may be seen late (none on a CPU)


def test_tokens_after_eos_are_pad_and_the_end_is_read_as_it_lands():
    stop = EosStop([7, 9], 0, vocab=20, batch=3, real=2, device="cpu")
    out = torch.full((3, 6), -1)
    steps = [[1, 7, 3], [7, 2, 9], [5, 4, 4], [9, 9, 9]]  # per step: tokens of the 3 static rows
    ends = []
    for t, toks in enumerate(steps):
        stop.record(out, t, torch.tensor(toks))
        ends.append(stop.finished(t))
    assert out[:, :4].tolist() == [[1, 7, 0, 0], [7, 0, 0, 0], [0, 0, 0, 0]]  # row 2 is batch padding
    assert ends == [False, True, True, True]  # on a CPU the copy lands at once: seen at step 1
    assert stop.length(6) == 2  # both real requests had stopped by step 1
    running = EosStop(7, None, vocab=20, batch=2, real=2, device="cpu")
    running.record(torch.zeros(2, 3, dtype=torch.long), 0, torch.tensor([7, 1]))
    assert running.length(3) == 3 and not running.finished(0) and not running.finished(1, wait=True)
    assert running.pad.item() == 7  # pad defaults to the first EOS id, as in HF


class FakeEvent:
    """An event on a fake GPU whose progress the test sets: it lands once the GPU reaches it, or
    when synchronized (the wait is logged)."""
    gpu = [-1]
    waits = []
    pushed = [0]

    def record(self):
        self.at = FakeEvent.pushed[0]
        FakeEvent.pushed[0] += 1

    def query(self):
        return self.at <= FakeEvent.gpu[0]

    def synchronize(self):
        FakeEvent.waits.append(self.at)
        FakeEvent.gpu[0] = max(FakeEvent.gpu[0], self.at)


@pytest.mark.parametrize("keeps_up", [False, True])
def test_done_flags_read_the_newest_landed_copy_and_wait_only_ahead_steps_back(keeps_up):
    FakeEvent.gpu[0], FakeEvent.pushed[0] = -1, 0
    FakeEvent.waits.clear()
    flags = stopping.DoneFlags(batch=3, real=2, device="cpu", ahead=2, event=FakeEvent)
    done = torch.tensor([False, False, True])  # row 2 is batch padding, done from the start
    end, seen = 5, []
    for t in range(9):
        if t >= 3:
            done[0] = True
        if t >= end:
            done[1] = True
        flags.push(t, done)
        done.fill_(False)  # the device mask changes after the copy: the slot keeps what was copied
        done[2] = True
        if keeps_up:
            FakeEvent.gpu[0] = t
        seen.append(flags.read(t))
    if keeps_up:  # every copy has landed when read: the end is seen at its step, nothing waited for
        assert seen == [t >= end for t in range(9)] and FakeEvent.waits == []
    else:  # the GPU never gets ahead on its own: each read waits for the copy 2 steps back, no other
        assert seen == [t >= end + 2 for t in range(9)] and FakeEvent.waits == list(range(7))
    assert flags.read(8, wait=True)


@pytest.mark.parametrize("bad,message", [
    (dict(eos_token_id=-1), "outside the vocabulary"),
    (dict(eos_token_id=[]), "non-empty list"),
    (dict(eos_token_id=True), "token id"),
    (dict(eos_token_id=3, pad_token_id=10**6), "pad_token_id"),
])
def test_bad_ids_are_refused(bad, message):
    with pytest.raises(ValueError, match=message):
        EosStop(bad["eos_token_id"], bad.get("pad_token_id"), vocab=100, batch=2, real=2, device="cpu")


def test_generate_stops_where_hf_would():
    model = dak.offload("tiny-llama", batch=3, max_len=24, policy="uniform", host_ratio=0.3, dtype=torch.float16, tune=False,
                        graphs=False)
    try:
        ids = torch.randint(3, 900, (2, 4), generator=torch.Generator().manual_seed(5))
        n = 12
        free = model.generate(ids, max_new_tokens=n, eos_token_id=None).cpu()[:, 4:]  # no EOS: the full length
        assert free.shape == (2, n)
        eos = [int(free[0, 3]), int(free[1, 5])]  # both requests reach an EOS by step 5
        got = model.generate(ids, max_new_tokens=n, eos_token_id=eos, pad_token_id=0).cpu()[:, 4:]
        first = [int(torch.isin(row, torch.tensor(eos)).nonzero()[0]) for row in free]
        assert max(first) <= 5 and got.shape[1] == max(first) + 1  # trimmed at the last request's EOS
        for r, f in enumerate(first):
            assert torch.equal(got[r, :f + 1], free[r, :f + 1]) and not got[r, f + 1:].any()
        # decoding ended at the last EOS (on a GPU up to AHEAD steps later), not at n - 1
        assert max(first) <= model.dak_last.steps <= max(first) + LATE
    finally:
        model.dak_free()


def test_generate_takes_eos_and_pad_from_the_generation_config_as_hf_does():
    """Not given, eos/pad come from model.generation_config (HF's generate: explicit None never stops)."""
    model = dak.offload("tiny-llama", batch=2, max_len=24, policy="uniform", host_ratio=0.3, dtype=torch.float16, tune=False,
                        graphs=False)
    try:
        ids = torch.randint(3, 900, (2, 4), generator=torch.Generator().manual_seed(11))
        n = 12
        free = model.generate(ids, max_new_tokens=n, eos_token_id=None).cpu()[:, 4:]
        assert free.shape == (2, n)
        eos = [int(free[0, 2]), int(free[1, 4])]
        explicit = model.generate(ids, max_new_tokens=n, eos_token_id=eos, pad_token_id=5).cpu()
        model.generation_config.eos_token_id, model.generation_config.pad_token_id = eos, 5
        by_default = model.generate(ids, max_new_tokens=n).cpu()
        assert torch.equal(by_default, explicit) and by_default.shape[1] < 4 + n
        assert (by_default[:, 4:] == 5).any()  # the config's pad after a stopped request's EOS
        assert torch.equal(model.generate(ids, max_new_tokens=n, eos_token_id=None).cpu()[:, 4:], free)
        model.generation_config.eos_token_id = 10**6
        with pytest.raises(ValueError, match=r"generation_config.eos_token_id.*pass eos_token_id=None"):
            model.generate(ids, max_new_tokens=2)
        assert model.generate(ids, max_new_tokens=2, eos_token_id=None).shape == (2, 6)
    finally:
        model.dak_free()


def test_a_checkpoints_generation_config_json_is_loaded(tmp_path):
    import json

    from runtime_checks import hf_model
    hf = hf_model("tiny-llama", layers=1)
    hf.generation_config.eos_token_id, hf.generation_config.pad_token_id = [5, 7], 3
    hf.save_pretrained(tmp_path)
    assert json.loads((tmp_path / "generation_config.json").read_text())["eos_token_id"] == [5, 7]
    assert json.loads((tmp_path / "config.json").read_text())["eos_token_id"] == 2
    model = dak.offload(str(tmp_path), batch=1, max_len=8, policy="uniform", host_ratio=0.5, dtype=torch.float16, tune=False,
                        graphs=False)
    try:
        assert model.generation_config.eos_token_id == [5, 7] and model.generation_config.pad_token_id == 3
    finally:
        model.dak_free()
    # settings dak's generate does not apply are named once, when the model is offloaded
    cfg = json.loads((tmp_path / "generation_config.json").read_text())
    cfg.update(max_length=4096, num_beams=3, no_repeat_ngram_size=3, repetition_penalty=1.1, top_p=0.9)
    (tmp_path / "generation_config.json").write_text(json.dumps(cfg))
    with pytest.warns(UserWarning, match=r"sets max_length, num_beams, which dak's generate does not"):
        model = dak.offload(str(tmp_path), batch=1, max_len=8, policy="uniform", host_ratio=0.5, dtype=torch.float16, tune=False,
                            graphs=False)
    model.dak_free()
    (tmp_path / "generation_config.json").write_text("{not json")
    with pytest.raises(ValueError, match="generation_config.json.*fix the file or remove it"):
        dak.offload(str(tmp_path), batch=1, max_len=8, policy="uniform", host_ratio=0.5, dtype=torch.float16, tune=False, graphs=False)


def test_sampling_settings_not_given_come_from_the_generation_config():
    """As HF: the config's do_sample/temperature/top_k/top_p, else HF's defaults (top_k 50); greedy
    calls all share one Sampling (one decode graph), whatever the other settings say."""
    from dak.runtime.engine import Sampling
    model = dak.offload("tiny-llama", batch=2, max_len=12, policy="uniform", host_ratio=0.3, dtype=torch.float16, tune=False,
                        graphs=False)
    seen, engine_generate = [], model.dak_engine.generate
    model.dak_engine.generate = lambda *a, **k: seen.append(a[3]) or engine_generate(*a, **k)
    try:
        ids = torch.randint(3, 900, (2, 4), generator=torch.Generator().manual_seed(3))
        greedy = model.generate(ids, max_new_tokens=4, eos_token_id=None).cpu()
        gc = model.generation_config
        gc.temperature, gc.top_p = 0.6, 0.9  # ignored while greedy
        assert torch.equal(model.generate(ids, max_new_tokens=4, eos_token_id=None).cpu(), greedy)
        gc.do_sample, gc.top_k = True, 1  # sampling from the one best token is greedy
        assert torch.equal(model.generate(ids, max_new_tokens=4, eos_token_id=None).cpu(), greedy)
        model.generate(ids, max_new_tokens=1, eos_token_id=None, top_k=7, temperature=2.0)
        gc.do_sample, gc.top_k, gc.temperature, gc.top_p = None, None, None, None
        model.generate(ids, max_new_tokens=1, eos_token_id=None, do_sample=True)
        assert seen == [Sampling(), Sampling(), Sampling(True, 0.6, 1, 0.9), Sampling(True, 2.0, 7, 0.9),
                        Sampling(True, 1.0, 50, 1.0)]
        with pytest.raises(ValueError, match="temperature must be a positive number"):
            model.generate(ids, max_new_tokens=1, do_sample=True, temperature=0.0)
        gc.do_sample, gc.temperature = True, 0.0  # a config that HF would refuse too: said where it came from
        with pytest.raises(ValueError, match="generation_config set do_sample, temperature"):
            model.generate(ids, max_new_tokens=1)
    finally:
        model.dak_free()
