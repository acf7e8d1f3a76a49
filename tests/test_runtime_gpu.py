"""GPU end to end (H200): dak.offload with CUDA graphs against HF eager, long decodes, memory."""

import gc

import pytest
import torch

import dak
from dak.runtime.embedding import SplitEmbedding
from dak.host import pinned_bytes
from dak.runtime.engine import Engine, Sampling
from runtime_checks import PROMPT, check_tokens as _check_tokens, hf_model as _hf_model
from test_state_dict import _perturbed

pytestmark = pytest.mark.gpu
FAMILIES = ["tiny-llama", "tiny-opt", "tiny-qwen2", "tiny-mistral", "tiny-qwen3"]


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    out = {}
    for fam in FAMILIES:
        hf = _hf_model(fam)
        path = tmp_path_factory.mktemp(fam)
        hf.save_pretrained(path)
        out[fam] = (hf.cuda(), str(path))
    return out


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("ratio", [0.0, 0.3, 1.0])
def test_graphed_greedy_matches_hf_eager(checkpoints, family, ratio):
    hf, path = checkpoints[family]
    steps = 32
    model = dak.offload(path, batch=2, max_len=PROMPT + steps, policy="uniform", host_ratio=ratio, dtype=torch.float16, tune=False)
    assert model.dak_engine.graphs
    ids = torch.randint(3, hf.config.vocab_size, (2, PROMPT), device="cuda")
    seq = model.generate(ids, max_new_tokens=steps, eos_token_id=None)
    exact = _check_tokens(hf, seq, steps)
    assert exact >= 2 * steps - 1
    model.dak_free()


@pytest.mark.parametrize("family", ["tiny-llama", "tiny-opt"])
def test_one_gemv_staging_under_graphs_matches_hf_eager(checkpoints, family, monkeypatch):
    """$DAK_CE_ONE_GEMV=1 (dak.kernels.staged_gemv): every host row staged by the copy-ahead chain
    (ratio 1), each linear one GEMV once its copies land, captured and replayed: HF's tokens."""
    import dak.kernels.split_linear_ce as ce
    calls, real = [], ce.staged_gemv
    monkeypatch.setattr(ce, "staged_gemv", lambda *a, **kw: calls.append(1) or real(*a, **kw))
    monkeypatch.setenv("DAK_CE_ONE_GEMV", "1")
    hf, path = checkpoints[family]
    steps = 32
    model = dak.offload(path, batch=2, max_len=PROMPT + steps, policy="uniform", host_ratio=1.0, dtype=torch.float16, tune=False)
    assert model.dak_engine.graphs
    ids = torch.randint(3, hf.config.vocab_size, (2, PROMPT), device="cuda")
    seq = model.generate(ids, max_new_tokens=steps, eos_token_id=None)
    assert calls, "no linear took the one-GEMV path"
    assert _check_tokens(hf, seq, steps) >= 2 * steps - 1
    model.dak_free()


@pytest.mark.parametrize("family", ["tiny-llama", "tiny-opt"])
def test_graphed_greedy_at_20_tokens_a_step_with_hbm_fork(checkpoints, family, monkeypatch):
    """A decode batch of 20 (hbm_fork's default range, 17-64 tokens) with every host row read in
    place ($DAK_CE_MIN_SHARE=1): the captured steps run the host-only kernels on the forked stream
    beside the HBM rows' GEMMs, and pick HF's greedy tokens."""
    from dak.nn import SplitLinear
    monkeypatch.setenv("DAK_CE_MIN_SHARE", "1")
    hf, path = checkpoints[family]
    steps, batch = 16, 20
    model = dak.offload(path, batch=batch, max_len=PROMPT + steps, policy="uniform", host_ratio=0.3, dtype=torch.float16, tune=False)
    assert model.dak_engine.graphs
    ids = torch.randint(3, hf.config.vocab_size, (batch, PROMPT), device="cuda")
    seq = model.generate(ids, max_new_tokens=steps, eos_token_id=None)
    forked = [cfg.hbm_fork and cfg.ce_share == 0 for mod in model.modules() if isinstance(mod, SplitLinear)
              for cfg in mod._configs.values()]
    assert any(forked), "no split linear took the forked in-place path"
    assert _check_tokens(hf, seq, steps) >= batch * steps - 6  # ties in <= 2% (4 of 320 on the H200, s31)
    model.dak_free()


def test_2000_graph_steps_equal_eager(checkpoints):
    _, path = checkpoints["tiny-llama"]
    model = dak.offload(path, batch=3, max_len=2010, policy="uniform", host_ratio=0.4, dtype=torch.bfloat16, tune=False)
    ids = torch.randint(3, model.config.vocab_size, (3, 5), device="cuda")
    graphed = model.dak_engine.generate(ids, 2000).tokens.clone()
    eager = Engine(model, model.dak_kv, graphs=False).generate(ids, 2000).tokens
    assert torch.equal(graphed, eager), f"first difference at {(graphed != eager).nonzero()[:1].tolist()}"
    sampled = model.dak_engine.generate(ids, 50, sampling=Sampling(True, 0.8, 20, 0.95)).tokens
    assert sampled.shape == (3, 50) and int(sampled.max()) < model.config.vocab_size
    model.dak_free()


def test_offload_free_cycles_return_memory():
    def cycle():
        model = dak.offload("tiny-qwen2", batch=4, max_len=40, policy="uniform", host_ratio=0.5, dtype=torch.bfloat16, tune=False)
        model.generate(torch.randint(0, 900, (4, 8), device="cuda"), max_new_tokens=8, eos_token_id=None)
        model.dak_free()
        del model
        gc.collect()
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        return pinned_bytes(), torch.cuda.memory_allocated()

    first = cycle()  # warms shared staging/workspaces
    for _ in range(3):
        assert cycle() == first


def test_random_weights_are_seeded():
    outs = []
    for seed in (1, 1, 2):
        model = dak.offload("tiny-llama", batch=2, max_len=20, policy="uniform", host_ratio=0.3, seed=seed, tune=False)
        ids = torch.arange(10, device="cuda").view(2, 5)
        outs.append(model.generate(ids, max_new_tokens=8, eos_token_id=None).cpu())
        model.dak_free()
    assert torch.equal(outs[0], outs[1]) and not torch.equal(outs[0], outs[2])


def test_kv_bucket_graphs_equal_one_graph(checkpoints, tmp_path, monkeypatch):
    """One decode graph per cache-length bucket, with the host KV staged by the copy engine
    (forced: tiny caches are below its size threshold) and copied only up to each bucket:
    the same tokens as one full-length graph over 200 steps."""
    import dak.kernels.attention_config as ac
    monkeypatch.setattr(ac, "CE_MIN_BYTES", 0)
    monkeypatch.setenv("DAK_CACHE_DIR", str(tmp_path))
    _, path = checkpoints["tiny-llama"]
    ids = torch.randint(3, 900, (3, 5), device="cuda")
    outs = []
    for buckets in (1, 4):
        model = dak.offload(path, batch=3, max_len=205, policy="uniform", host_ratio=1.0, dtype=torch.bfloat16, tune=False,
                            kv_buckets=buckets)
        outs.append(model.generate(ids, max_new_tokens=200, eos_token_id=None).clone())
        assert len(model.dak_engine._bucket_graphs[Sampling()]) == buckets
        assert all(cfg.ce_share > 0 for c in model.dak_kv.caches.values() for cfg in c.configs.values())
        model.dak_free()
    assert torch.equal(outs[0], outs[1]), f"first difference at {(outs[0] != outs[1]).nonzero()[:1].tolist()}"


@pytest.mark.parametrize("stream", ["own", "shared"])
def test_kv_ahead_graphs_equal_plain_graphs(checkpoints, tmp_path, monkeypatch, stream):
    """Each layer's host KV copied during the layer before (dak.runtime.kv_ahead), captured with
    4 length buckets, on its own copy stream or the linear chain's: the same tokens over 200
    steps as the plain copy-engine path."""
    import dak.kernels.attention_config as ac
    monkeypatch.setenv("DAK_KV_COPY_STREAM", stream)
    monkeypatch.setattr(ac, "CE_MIN_BYTES", 0)
    monkeypatch.setenv("DAK_CACHE_DIR", str(tmp_path))
    _, path = checkpoints["tiny-llama"]
    ids = torch.randint(3, 900, (3, 5), device="cuda")
    outs = []
    for ahead in (False, True):
        model = dak.offload(path, batch=3, max_len=205, policy="uniform", host_ratio=1.0, dtype=torch.bfloat16, tune=False,
                            kv_buckets=4, kv_ahead=ahead)
        assert model.dak_engine.kv_ahead_layers == (model.config.num_hidden_layers if ahead else 0)
        outs.append(model.generate(ids, max_new_tokens=200, eos_token_id=None).clone())
        model.dak_free()
    assert torch.equal(outs[0], outs[1]), f"first difference at {(outs[0] != outs[1]).nonzero()[:1].tolist()}"


@pytest.mark.parametrize("env", [{"DAK_CE_FORK": "1"}, {"DAK_GRAPHS": "0"}, {"DAK_DEFER_RESIDUAL": "0"},
                                 {"DAK_ROTARY_KV": "0"}])
def test_forked_or_eager_steps_give_the_same_tokens(checkpoints, tmp_path, monkeypatch, env):
    """$DAK_CE_FORK=1 (copy-engine operators' staged parts on a forked side stream, chained by
    copy-ahead and KV copy-ahead), $DAK_GRAPHS=0 (eager decode), $DAK_DEFER_RESIDUAL=0 (the MLP
    residual add in its own layer, not the next layer's norm launch) and $DAK_ROTARY_KV=0 (rotary
    in its own launch, not the KV append's; same rounding): the default's tokens over 100 steps, with every host row
    and host request staged by the copy engine."""
    import dak.kernels.attention_config as ac
    monkeypatch.setattr(ac, "CE_MIN_BYTES", 0)
    monkeypatch.setenv("DAK_CACHE_DIR", str(tmp_path))
    _, path = checkpoints["tiny-llama"]
    ids = torch.randint(3, 900, (3, 5), device="cuda")
    outs = []
    for variant in ({}, env):
        for k, v in variant.items():
            monkeypatch.setenv(k, v)
        model = dak.offload(path, batch=3, max_len=105, policy="uniform", host_ratio=1.0, dtype=torch.bfloat16, tune=False,
                            kv_buckets=2, kv_ahead=True)
        assert model.dak_engine.graphs == (variant.get("DAK_GRAPHS") != "0")
        outs.append(model.generate(ids, max_new_tokens=100, eos_token_id=None).clone())
        model.dak_free()
    assert torch.equal(outs[0], outs[1]), f"first difference at {(outs[0] != outs[1]).nonzero()[:1].tolist()}"


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("gemv", ["0", "1", "silu", "opt", "qscale"])
def test_fused_projection_graphs_match_hf_eager(checkpoints, family, gemv, monkeypatch):
    """All-HBM q/k/v and gate/up multiplied as one matrix (dak.nn.fused_proj) inside the decode
    graphs: HF's greedy tokens (or its ties), as without fusion; also with every all-HBM linear
    on dak's GEMV kernel ($DAK_HBM_GEMV=1), with SiLU * up in the gate/up GEMV's epilogue ($DAK_GEMV_SILU=1),
    and with OPT's layers fused ($DAK_FUSED_OPT=1: add + LayerNorm, ReLU and residual epilogues;
    "qscale": with q's scaling in the q/k/v GEMV's epilogue too, $DAK_OPT_QSCALE=1)."""
    if gemv in ("opt", "qscale") and family != "tiny-opt":
        pytest.skip("$DAK_FUSED_OPT and $DAK_OPT_QSCALE change OPT layers only")
    monkeypatch.setenv("DAK_OPT_QSCALE", "1" if gemv == "qscale" else "0")
    monkeypatch.setenv("DAK_HBM_GEMV", "0" if gemv == "0" else "1")
    monkeypatch.setenv("DAK_GEMV_SILU", "1" if gemv == "silu" else "0")
    monkeypatch.setenv("DAK_FUSED_OPT", "1" if gemv in ("opt", "qscale") else "0")
    hf, path = checkpoints[family]
    steps = 32
    model = dak.offload(path, batch=2, max_len=PROMPT + steps, policy="uniform", host_ratio=0.0, dtype=torch.float16, tune=False,
                        fuse_projections=True)
    assert model.dak_engine.graphs and model.dak_fused == (2 if family == "tiny-opt" else 4)
    ids = torch.randint(3, hf.config.vocab_size, (2, PROMPT), device="cuda")
    seq = model.generate(ids, max_new_tokens=steps, eos_token_id=None)
    assert _check_tokens(hf, seq, steps) >= 2 * steps - 1
    model.dak_free()


def test_eos_stopping_with_graphs_equals_eager(checkpoints):
    """EOS bookkeeping around the replayed decode graph (dak.runtime.stopping) gives the eager tokens."""
    _, path = checkpoints["tiny-llama"]
    model = dak.offload(path, batch=3, max_len=70, policy="uniform", host_ratio=0.3, dtype=torch.bfloat16, tune=False)
    ids = torch.randint(3, model.config.vocab_size, (3, 5), device="cuda")
    free = model.dak_engine.generate(ids, 64).tokens
    eos = [int(free[r, 10 + 3 * r]) for r in range(3)]
    graphed = model.dak_engine.generate(ids, 64, eos_token_id=eos, pad_token_id=0).tokens.clone()
    eager = Engine(model, model.dak_kv, graphs=False).generate(ids, 64, eos_token_id=eos, pad_token_id=0).tokens
    assert graphed.shape[1] <= 17 and torch.equal(graphed, eager)
    model.dak_free()


def test_min_new_tokens_with_graphs_equals_eager(checkpoints):
    """EOS held back inside the replayed decode graphs (every length bucket) until each request's
    minimum, as in eager steps: with every id but five an EOS, the first 6 new tokens are those five."""
    _, path = checkpoints["tiny-llama"]
    model = dak.offload(path, batch=3, max_len=70, policy="uniform", host_ratio=0.3, dtype=torch.bfloat16, tune=False)
    ids = torch.randint(3, model.config.vocab_size, (3, 5), device="cuda")
    keep = torch.arange(3, 8, device="cuda")
    every = [i for i in range(model.config.vocab_size) if not 3 <= i < 8]
    kw = dict(eos_token_id=every, pad_token_id=0, min_new_tokens=6)
    graphed = model.dak_engine.generate(ids, 40, **kw).tokens.clone()
    eager = Engine(model, model.dak_kv, graphs=False).generate(ids, 40, **kw).tokens
    assert torch.equal(graphed, eager) and torch.isin(graphed[:, :6], keep).all()
    model.dak_free()


def test_repetition_penalty_with_graphs_equals_eager(checkpoints):
    """The mask of tokens seen is updated inside the replayed decode graphs (every length bucket):
    greedy tokens equal eager steps', sampled ones leave exactly their tokens marked; and the
    penalty changes the tokens."""
    _, path = checkpoints["tiny-llama"]
    model = dak.offload(path, batch=3, max_len=70, policy="uniform", host_ratio=0.3, dtype=torch.bfloat16, tune=False)
    ids = torch.randint(3, 40, (3, 5), device="cuda")
    eng, v = model.dak_engine, model.config.vocab_size
    greedy = Sampling(repetition_penalty=3.0)
    graphed = eng.generate(ids, 64, sampling=greedy).tokens.clone()
    assert torch.equal(graphed, Engine(model, model.dak_kv, graphs=False).generate(ids, 64, sampling=greedy).tokens)
    assert not torch.equal(graphed, eng.generate(ids, 64).tokens)
    for s in (greedy, Sampling(do_sample=True, top_k=20, repetition_penalty=1.3)):
        toks = eng.generate(ids, 64, sampling=s).tokens
        for b in range(3):
            want = torch.zeros(v, dtype=torch.bool, device="cuda")
            want[torch.cat([ids[b], toks[b]])] = True
            assert torch.equal(eng.seen[b, :v], want), (s, b)
    model.dak_free()


def test_every_hf_warper_runs_inside_the_decode_graphs(checkpoints):
    """Temperature, top-p, min-p, typical-p, the epsilon and eta cutoffs (HF's own warpers) in the
    decode graphs of every length bucket: capture succeeds and every token is in the vocabulary
    (tests/test_sampling.py checks the captured warpers' tokens on fixed logits)."""
    _, path = checkpoints["tiny-llama"]
    model = dak.offload(path, batch=3, max_len=70, policy="uniform", host_ratio=0.3, dtype=torch.bfloat16, tune=False)
    ids = torch.randint(3, 40, (3, 5), device="cuda")
    s = Sampling(do_sample=True, temperature=0.7, top_k=0, top_p=0.9, min_p=0.05, typical_p=0.95, epsilon_cutoff=1e-4,
                 eta_cutoff=1e-3, top_h=0.95)
    toks = model.dak_engine.generate(ids, 64, sampling=s).tokens
    assert model.dak_engine._bucket_graphs.get(s)  # it ran graphed
    assert toks.shape == (3, 64) and ((toks >= 0) & (toks < model.config.vocab_size)).all()
    model.dak_free()


def test_wrapped_copy_chain_gives_the_same_tokens(checkpoints, tmp_path, monkeypatch):
    """$DAK_COPY_WRAP=1 (the chain's first copy queued at the previous step's end), 4 length
    buckets: the same tokens over 150 steps as the plain chain, again on a second call, and
    after its first slot is emptied as an interrupted step leaves it (generate primes it)."""
    monkeypatch.setenv("DAK_CACHE_DIR", str(tmp_path))
    _, path = checkpoints["tiny-llama"]
    ids = torch.randint(3, 900, (3, 5), device="cuda")
    outs = []
    for wrap in ("0", "1"):
        monkeypatch.setenv("DAK_COPY_WRAP", wrap)
        model = dak.offload(path, batch=3, max_len=160, policy="uniform", host_ratio=0.3, dtype=torch.bfloat16, tune=False,
                            kv_buckets=4)
        outs.append(model.generate(ids, max_new_tokens=150, eos_token_id=None).clone())
        chains = model.dak_engine._wrapped
        assert (len(chains) == 1 and chains[0].primed) if wrap == "1" else not chains
        if wrap == "1":
            assert torch.equal(model.generate(ids, max_new_tokens=150, eos_token_id=None), outs[0])
            chain = chains[0]
            chain.primed = False
            chain.slots[chain.head[0]._ahead.slot].fill_(float("nan"))
            outs.append(model.generate(ids, max_new_tokens=150, eos_token_id=None).clone())
        model.dak_free()
    for got in outs[1:]:
        assert torch.equal(outs[0], got), f"first difference at {(outs[0] != got).nonzero()[:1].tolist()}"


def test_copy_wrap_by_plan_follows_one_gemv(checkpoints, tmp_path, monkeypatch):
    """$DAK_COPY_WRAP=plan: a plan that runs one GEMV once staged ($DAK_CE_ONE_GEMV=1, every host row
    staged) wraps its chain, with the unwrapped chain's tokens over 100 steps; a plan without one
    GEMV ($DAK_CE_ONE_GEMV=0) does not wrap."""
    monkeypatch.setenv("DAK_CACHE_DIR", str(tmp_path))
    _, path = checkpoints["tiny-llama"]
    ids = torch.randint(3, 900, (3, 5), device="cuda")
    outs = []
    for one, wrap in (("1", "0"), ("1", "plan"), ("0", "plan")):
        monkeypatch.setenv("DAK_CE_ONE_GEMV", one)
        monkeypatch.setenv("DAK_COPY_WRAP", wrap)
        model = dak.offload(path, batch=3, max_len=110, policy="uniform", host_ratio=1.0, dtype=torch.bfloat16, tune=False,
                            kv_buckets=2)
        assert model.dak_placement.one_gemv == (one == "1")
        out = model.generate(ids, max_new_tokens=100 if one == "1" else 4, eos_token_id=None).clone()
        chains = model.dak_engine._wrapped
        if one == "1":
            outs.append(out)
        assert (len(chains) == 1 and chains[0].primed) if (one, wrap) == ("1", "plan") else not chains
        model.dak_free()
    assert torch.equal(outs[0], outs[1]), f"first difference at {(outs[0] != outs[1]).nonzero()[:1].tolist()}"


@pytest.mark.parametrize("wrap", ["0", "1"])
def test_load_state_dict_after_capture_changes_the_replayed_model(checkpoints, tmp_path, monkeypatch, wrap):
    """Weights loaded into an offloaded model whose decode graphs are captured: its next tokens
    equal those of a fresh offload of the loaded weights (also with a wrapped copy chain, whose
    first slot held the old rows); its state_dict gives back the loaded weights."""
    monkeypatch.setenv("DAK_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("DAK_COPY_WRAP", wrap)
    _, path = checkpoints["tiny-llama"]
    other = _perturbed(_hf_model("tiny-llama"), 17)
    other.save_pretrained(tmp_path / "other")
    ids = torch.randint(3, 900, (3, 5), device="cuda")
    kw = dict(batch=3, max_len=60, policy="uniform", host_ratio=0.3, dtype=torch.bfloat16, tune=False)
    fresh = dak.offload(str(tmp_path / "other"), **kw)
    want = fresh.generate(ids, max_new_tokens=50, eos_token_id=None).clone()
    fresh.dak_free()
    model = dak.offload(path, **kw)
    before = model.generate(ids, max_new_tokens=50, eos_token_id=None).clone()
    model.load_state_dict(other.state_dict())
    got = model.generate(ids, max_new_tokens=50, eos_token_id=None)
    assert not torch.equal(before, want), "the perturbed weights should change the tokens"
    assert torch.equal(got, want), f"first difference at {(got != want).nonzero()[:1].tolist()}"
    sd = model.state_dict()
    assert all(torch.equal(sd[k].cpu(), v.to(torch.bfloat16).cpu()) for k, v in other.state_dict().items())
    model.dak_free()


def test_streamer_and_left_padding_with_graphs(checkpoints):
    """Graphed decode with a left-padded attention_mask and a streamer: the streamed pieces make the
    returned sequence, and the new tokens equal the right-padded prompt_lengths run's."""
    _, path = checkpoints["tiny-llama"]
    model = dak.offload(path, batch=3, max_len=30, policy="uniform", host_ratio=0.3, dtype=torch.bfloat16, tune=False)
    lens = torch.tensor([8, 5, 3])
    ids = torch.randint(3, 900, (3, 8), device="cuda")
    mask = (torch.arange(8)[None, :] >= (8 - lens)[:, None]).long()
    puts = []

    class Collect:
        def put(self, x):
            puts.append(x.clone())

        def end(self):
            puts.append(None)

    seq = model.generate(ids, max_new_tokens=20, attention_mask=mask, streamer=Collect(), eos_token_id=None)
    assert puts[-1] is None and len(puts) == 22
    assert torch.equal(torch.cat([puts[0]] + [p[:, None] for p in puts[1:-1]], dim=1), seq.cpu())
    right = torch.zeros_like(ids)
    for b, n in enumerate(lens.tolist()):
        right[b, :n] = ids[b, 8 - n:]
    ref = model.generate(right, max_new_tokens=20, prompt_lengths=lens, eos_token_id=None)
    assert torch.equal(seq[:, 8:], ref[:, 8:])
    model.dak_free()


def test_forward_scores_like_hf_on_the_gpu(checkpoints):
    """model(ids): full-sequence logits through the split linears (copy-engine prefill path) and SDPA."""
    hf, path = checkpoints["tiny-qwen2"]
    model = dak.offload(path, batch=2, max_len=40, policy="uniform", host_ratio=0.5, dtype=torch.float16, tune=False)
    ids = torch.randint(3, 900, (2, 33), device="cuda")
    mask = torch.ones(2, 33, dtype=torch.long, device="cuda")
    mask[0, :10] = 0
    with torch.no_grad():
        got, want = model(ids, attention_mask=mask, use_cache=False).logits.float(), hf(ids, attention_mask=mask).logits.float()
    keep = mask.bool()
    assert ((got[keep] - want[keep]).norm() / want[keep].norm()).item() < 1e-2
    assert any(m.m_h for m in model.modules() if isinstance(m, SplitEmbedding))  # host rows of the table
    with torch.no_grad():  # CPU ids and mask (the README's example) are moved to the GPU, as generate moves them
        cpu = model(ids.cpu(), attention_mask=mask.cpu(), use_cache=False).logits.float()
    assert cpu.device == got.device and torch.equal(cpu, got)
    model.dak_free()
