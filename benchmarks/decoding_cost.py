"""What do HF's token rules and sampling cost a decode step? TPOT of greedy `generate` without any,
with no_repeat_ngram_size 3 (a pass over every request's whole static token history, max_len ids),
with bad_words_ids (--bad-words sequences of 1-3 tokens), with every rule at once, and sampled (top-k
50, top-p 0.9) with and without the rules; and the same sampling with its warpers run over the whole
vocabulary (`sampled_vocab`: dak.runtime.sampling.top_width forced to 0, as before the fifty-third
session) against the draw among the top-k candidates. Same model, same run, alternated. All of it runs
inside the captured decode graphs (dak.runtime.processors), so a difference is the GPU work a step;
except `host_noop`, a caller's logits_processor that returns its scores: the graph stops at the logits
and the draw runs eagerly after a host sync (dak.runtime.host_processors), the cost of that path.
`step_rules`: forced_eos_token_id and remove_invalid_values (fifty-fourth session).

    PYTHONPATH=src python3 benchmarks/decoding_cost.py --model llama-2-7b --batches 8,512 --max-lens 2048,128 \
        --out cost.json

Without a GPU it runs tiny-llama under the Triton interpreter (a flow check; the times mean nothing).
"""

import argparse
import os
import sys
from pathlib import Path

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import metadata, write_json  # noqa: E402

import dak  # noqa: E402
from dak.runtime import sampling  # noqa: E402

top_width = sampling.top_width


def vocab_marker(vocab: int) -> dict:
    """A token rule that does nothing (a suppressed id past the vocabulary, ignored as in HF) but
    gives the sampling a decode graph of its own: the one that samples over the whole vocabulary."""
    return dict(suppress_tokens=[vocab + 5])


def kinds(vocab: int, count: int, seed: int) -> dict:
    g = torch.Generator().manual_seed(seed)
    bad = [torch.randint(0, vocab, (1 + i % 3,), generator=g).tolist() for i in range(count)]
    rules = dict(no_repeat_ngram_size=3, bad_words_ids=bad, sequence_bias=[[bad[0][:1], -0.5]],
                 suppress_tokens=bad[1][:1], begin_suppress_tokens=bad[2][:1])
    sampled = dict(do_sample=True, top_k=50, top_p=0.9)
    return {"without": {}, "ngram3": dict(no_repeat_ngram_size=3), "bad_words": dict(bad_words_ids=bad),
            "all_rules": rules, "step_rules": dict(forced_eos_token_id=bad[3][0], remove_invalid_values=True),
            "host_noop": dict(logits_processor=[lambda ids, scores: scores]),
            "sampled": sampled, "sampled_vocab": {**sampled, **vocab_marker(vocab)},
            "sampled_all_rules": {**sampled, **rules}}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="llama-2-7b")
    ap.add_argument("--batches", default="8,512")
    ap.add_argument("--prompt-len", type=int, default=32)
    ap.add_argument("--gen-len", type=int, default=64)
    ap.add_argument("--max-lens", default="2048,128", help="the static cache and token history length, one for all "
                    "batches or one a batch (Llama-2-7B's K/V at batch 512 x 2048 would not fit)")
    ap.add_argument("--bad-words", type=int, default=64, help="bad_words_ids sequences")
    ap.add_argument("--repeats", type=int, default=2, help="alternated rounds")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    gpu = torch.cuda.is_available()
    model_name = args.model if gpu else "tiny-llama"
    batches = [int(b) for b in args.batches.split(",")] if gpu else [2]
    plen, glen = (args.prompt_len, args.gen_len) if gpu else (4, 5)
    lens = [int(n) for n in args.max_lens.split(",")] if gpu else [16]
    lens = lens * len(batches) if len(lens) == 1 else lens
    if len(lens) != len(batches):
        ap.error("--max-lens: one value, or one a batch")
    rows = []
    for batch, max_len in zip(batches, lens):
        model = dak.offload(model_name, batch=batch, max_len=max_len, prompt_len=plen, gen_len=glen, policy="uniform",
                            host_ratio=0.0, dtype=torch.bfloat16 if gpu else torch.float16, tune=False)
        try:
            vocab = model.config.vocab_size
            ids = torch.randint(0, vocab, (batch, plen), generator=torch.Generator().manual_seed(batch))
            runs = kinds(vocab, args.bad_words, batch)
            marker = tuple(vocab_marker(vocab)["suppress_tokens"])
            sampling.top_width = lambda s, v: 0 if s.rules is not None and s.rules.suppress == marker else top_width(s, v)
            times = {k: [] for k in runs}
            for kw in runs.values():  # warm: capture each setting's graphs
                model.generate(ids, max_new_tokens=glen, eos_token_id=None, **kw)
            for _ in range(args.repeats):
                for kind, kw in runs.items():
                    out = model.generate(ids, max_new_tokens=glen, eos_token_id=None, **kw)
                    assert out.shape[1] == plen + glen
                    times[kind].append(model.dak_last.tpot_s)
            best = {k: min(v) for k, v in times.items()}
            base = {k: best["sampled" if k.startswith("sampled_") else "without"] for k in runs}
            row = {"model": model_name, "batch": batch, "prompt_len": plen, "gen_len": glen, "max_len": max_len,
                   "bad_words": args.bad_words, "graphs": model.dak_engine.graphs,
                   **{f"tpot_{k}_s": v for k, v in times.items()},
                   **{f"{k}_over_base": best[k] / base[k] for k in runs if k != "without"},
                   **{f"{k}_extra_per_step_us": 1e6 * (best[k] - base[k]) for k in runs if k != "without"}}
            rows.append(row)
            print(f"{model_name} batch {batch} (max_len {max_len}): TPOT without {1e3 * best['without']:.3f} ms; "
                  + "; ".join(f"{k} {1e3 * best[k]:.3f} ms ({row[k + '_over_base']:.4f}x, "
                              f"{row[k + '_extra_per_step_us']:+.1f} us a step)" for k in runs if k != "without"),
                  flush=True)
        finally:
            model.dak_free()
    if args.out:
        write_json(args.out, {"meta": metadata(), "rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
