"""What does stopping cost a decode step? TPOT of `generate` without any stop, with EOS ids that
never match (the end-of-batch flag read through DoneFlags: a small copy a step, no stall), with a
streamer that reads nothing (a host sync a step, as any streamer causes), and with stop strings; same
model, same run, alternated; the EOS runs at each look-back of --aheads (dak.runtime.stopping.AHEAD).
Then how many steps a batch runs past its end: a criterion ends every request at step --gen-len // 2,
and the steps run are counted (AHEAD at most), at each look-back.

The model has seeded random weights; its tokenizer is built here (no download): every id is a
random word of 3-6 letters, decoded by concatenation, so HF's StopStringCriteria reads plain
token strings. The stop strings are 12-letter runs that random tokens almost never spell (HF refuses
strings no token can be part of), and the EOS id is one greedy decoding never produced, so no request
stops and every run times the same --gen-len steps: a difference is the stopping work a step.

    PYTHONPATH=src python3 benchmarks/stop_strings_cost.py --model llama-2-7b --batches 8,512 --out cost.json

Without a GPU it runs tiny-llama under the Triton interpreter (a flow check; the times mean nothing).
"""

import argparse
import os
import random
import sys
import time
from pathlib import Path

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import metadata, write_json  # noqa: E402

import dak  # noqa: E402
from dak.runtime import stopping  # noqa: E402

STOPS = ["zqzqzqzqzqzq", "qjxqjxqjxqjx"]  # one 12-letter window in 26^12 spells one


def random_tokenizer(vocab: int, seed: int = 0):
    """An HF fast tokenizer over `vocab` distinct random lower-case words (plus "abcdef", which
    HF's criterion tokenizes to read token strings), decoded by concatenation."""
    import tokenizers
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast
    rng = random.Random(seed)
    words, seen = list("abcdefghijklmnopqrstuvwxyz"), set("abcdefghijklmnopqrstuvwxyz")
    while len(words) < vocab:
        w = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(3, 6)))
        if w not in seen:
            seen.add(w)
            words.append(w)
    tk = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="a"))
    tk.decoder = decoders.Fuse()
    tk.pre_tokenizer = pre_tokenizers.Split(tokenizers.Regex("."), behavior="isolated")
    return PreTrainedTokenizerFast(tokenizer_object=tk)


class NullStreamer:
    """HF's streamer protocol, reading nothing (generate still copies each step's tokens to the host)."""

    def put(self, value):
        pass

    def end(self):
        pass


class EndAt:
    """A stopping criterion that ends every request once the ids reach `width` columns (read from
    their shape: no device read)."""

    def __init__(self, width: int):
        self.width = width

    def __call__(self, input_ids, scores):
        return torch.full((input_ids.shape[0],), input_ids.shape[1] >= self.width, dtype=torch.bool,
                          device=input_ids.device)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="llama-2-7b")
    ap.add_argument("--batches", default="8,512")
    ap.add_argument("--host-ratio", type=float, default=0.0, help="share of operator bytes on the host (fraction)")
    ap.add_argument("--prompt-len", type=int, default=32)
    ap.add_argument("--gen-len", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=2, help="alternated rounds (without, eos at each --aheads, streamer, with)")
    ap.add_argument("--aheads", default=str(stopping.AHEAD),
                    help="DoneFlags' look-back (dak.runtime.stopping.AHEAD) values to time the EOS runs at")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    aheads = [int(a) for a in args.aheads.split(",")]
    default_ahead = stopping.AHEAD
    gpu = torch.cuda.is_available()
    model_name = args.model if gpu else "tiny-llama"
    batches = [int(b) for b in args.batches.split(",")] if gpu else [2]
    plen, glen = (args.prompt_len, args.gen_len) if gpu else (4, 9)
    rows = []
    for batch in batches:
        model = dak.offload(model_name, batch=batch, prompt_len=plen, gen_len=glen, policy="uniform",
                            host_ratio=args.host_ratio, dtype=torch.bfloat16 if gpu else torch.float16, tune=False)
        try:
            vocab = model.config.vocab_size
            t0 = time.perf_counter()
            tok = random_tokenizer(vocab)
            from transformers.generation.stopping_criteria import StopStringCriteria
            StopStringCriteria(tokenizer=tok, stop_strings=STOPS)  # HF caches its tables: built once here
            tables_s = time.perf_counter() - t0
            ids = torch.randint(0, vocab, (batch, plen), generator=torch.Generator().manual_seed(batch))
            free = model.generate(ids, max_new_tokens=glen, eos_token_id=None)  # warm: capture, compile
            eos = next(i for i in range(vocab) if not (free[:, plen:] == i).any())
            kinds = {"without": ({}, None), **{f"eos_ahead{a}": ({"eos_token_id": eos}, a) for a in aheads},
                     "streamer": ({"streamer": NullStreamer()}, None),
                     "with": ({"stop_strings": STOPS, "tokenizer": tok}, None)}
            times = {k: [] for k in kinds}
            model.generate(ids, max_new_tokens=glen, eos_token_id=None, stop_strings=STOPS, tokenizer=tok)
            for _ in range(args.repeats):
                for kind, (extra, ahead) in kinds.items():
                    stopping.AHEAD = default_ahead if ahead is None else ahead
                    out = model.generate(ids, max_new_tokens=glen, **{"eos_token_id": None, **extra})
                    assert out.shape[1] == plen + glen, "a request stopped: nothing may match"
                    times[kind].append(model.dak_last.tpot_s)
            end, late = glen // 2, {}
            for a in aheads:
                stopping.AHEAD = a
                model.generate(ids, max_new_tokens=glen, eos_token_id=None, stopping_criteria=[EndAt(plen + end + 1)])
                late[a] = model.dak_last.steps - end
            stopping.AHEAD = default_ahead
            best = {k: min(v) for k, v in times.items()}
            row = {"model": model_name, "batch": batch, "prompt_len": plen, "gen_len": glen,
                   "host_ratio": args.host_ratio, **{f"tpot_{k}_s": v for k, v in times.items()},
                   **{f"{k}_over_without": best[k] / best["without"] for k in kinds if k != "without"},
                   **{f"{k}_extra_per_step_us": 1e6 * (best[k] - best["without"]) for k in kinds if k != "without"},
                   "with_over_without": best["with"] / best["without"],
                   "eos_over_without": best[f"eos_ahead{default_ahead}"] / best["without"],
                   "extra_per_step_us": 1e6 * (best["with"] - best["without"]), "tokenizer_tables_s": tables_s,
                   "ended_at_step": end, "steps_past_the_end": late, "default_ahead": default_ahead,
                   "graphs": model.dak_engine.graphs}
            rows.append(row)
            print(f"{model_name} batch {batch}: TPOT without {1e3 * best['without']:.3f} ms; "
                  + "; ".join(f"{k} {1e3 * best[k]:.3f} ms ({row[k + '_over_without']:.4f}x, "
                              f"{row[k + '_extra_per_step_us']:+.1f} us a step)" for k in kinds if k != "without")
                  + f"; ended at step {end}, steps past it by AHEAD {late}; tables {tables_s:.2f} s", flush=True)
        finally:
            model.dak_free()
    if args.out:
        write_json(args.out, {"meta": metadata(), "stop_strings": STOPS, "rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
