"""`dak generate`'s decoding flags: --sample with --temperature, --top-k, --top-p and --min-p, and
--repetition-penalty and --no-repeat-ngram-size. Each value is checked as dak.runtime.sampling.Sampling checks it, before
anything is built. A flag left out is not passed, so generate takes it from the model's
generation config, else HF's default, as HF's generate does. --temperature, --top-k, --top-p and
--min-p need --sample: HF's greedy decoding ignores them, so accepting them there would hide a mistake."""

from __future__ import annotations

SAMPLING_FLAGS = (("--temperature", "temperature", float), ("--top-k", "top_k", int), ("--top-p", "top_p", float),
                  ("--min-p", "min_p", float))


def add_arguments(p) -> None:
    p.add_argument("--sample", action="store_true",
                   help="sample instead of greedy decoding (without it: greedy, whatever the model's generation config "
                        "says), seeded by --seed; temperature, top-k, top-p and min-p come from "
                        "the flags below, else the model's generation config, else HF's defaults (1.0, 50, 1.0, off)")
    p.add_argument("--temperature", default=None, help="sampling temperature, > 0 (needs --sample)")
    p.add_argument("--top-k", default=None, help="sample among the K likeliest tokens; 0 = off (needs --sample)")
    p.add_argument("--top-p", default=None, help="sample among the fewest likeliest tokens whose probabilities reach "
                                                 "P, in (0, 1]; 1 = off (needs --sample)")
    p.add_argument("--min-p", default=None, help="drop tokens less likely than P x the likeliest one (HF's min_p), in "
                                                 "[0, 1]; 0 = off (needs --sample)")
    p.add_argument("--repetition-penalty", default=None, help="HF's repetition penalty (1 = off; default: the model's "
                   "generation config, as in HF)")
    p.add_argument("--num-return-sequences", default=None, metavar="K", help="sample K outputs of each --prompt "
                   "(needs --sample; prompts x K must fit --batch)")
    p.add_argument("--no-repeat-ngram-size", default=None, metavar="N", help="never repeat an n-gram of N tokens "
                   "(prompt included, HF's no_repeat_ngram_size; 0 = off; default: the model's generation config)")


def given_flags(args) -> list[str]:
    """The decoding flags on the command line (for the commands that take none of them)."""
    named = [flag for flag, name, _ in SAMPLING_FLAGS if getattr(args, name) is not None]
    return (["--sample"] if args.sample else []) + named + (
        ["--repetition-penalty"] if args.repetition_penalty is not None else []) + (
        ["--no-repeat-ngram-size"] if args.no_repeat_ngram_size is not None else []) + (
        ["--num-return-sequences"] if args.num_return_sequences is not None else [])


def _number(flag: str, text: str, kind):
    if kind is int:
        from .plan import _int
        return _int(flag, text)
    try:
        return float(str(text).strip())
    except ValueError:
        raise ValueError(f"{flag} must be a number, got {text!r}") from None


def decoding_kwargs(args) -> dict:
    """generate()'s keyword arguments for the decoding flags given; a bad value or a sampling flag
    without --sample is a ValueError naming the flag."""
    from ..runtime.sampling import Sampling
    out = {"do_sample": bool(args.sample)}  # greedy without --sample, whatever the generation config says
    for flag, name, kind in SAMPLING_FLAGS:
        text = getattr(args, name)
        if text is None:
            continue
        if not args.sample:
            raise ValueError(f"{flag} applies to sampling: add --sample (greedy decoding ignores it, as HF's does)")
        out[name] = _number(flag, text, kind)
    if args.repetition_penalty is not None:
        out["repetition_penalty"] = _number("--repetition-penalty", args.repetition_penalty, float)
    try:
        Sampling(**out)
    except ValueError as e:  # "top_k must be ..." -> "--top-k must be ..."
        name, rest = str(e).split(" ", 1)
        raise ValueError(f"--{name.replace('_', '-')} {rest}") from None
    if args.no_repeat_ngram_size is not None:  # a token rule (dak.runtime.processors), beside the Sampling
        from .plan import _int
        n = _int("--no-repeat-ngram-size", args.no_repeat_ngram_size)
        if n < 0:
            raise ValueError(f"--no-repeat-ngram-size must be an integer >= 0 (0 = off), got {n}")
        out["no_repeat_ngram_size"] = n
    if args.num_return_sequences is not None:
        from .plan import _int
        if not args.sample:
            raise ValueError("--num-return-sequences samples several outputs a prompt: add --sample (greedy decoding "
                             "gives one, as HF's does)")
        out["num_return_sequences"] = _int("--num-return-sequences", args.num_return_sequences, minimum=1)
    return out


def applied(sampling) -> dict:
    """The decoding settings a generate call applied (a Sampling), as `--json` reports them."""
    from ..runtime.generation_config import GREEDY_KEEPS, HF_DEFAULTS
    keys = tuple(HF_DEFAULTS) if sampling.do_sample else ("do_sample",) + GREEDY_KEEPS
    rules = {} if sampling.rules is None else sampling.rules.report()
    return {**{k: getattr(sampling, k) for k in keys}, **rules}


def describe(sampling) -> str:
    """One line for the text report: "decoding: greedy" or the sampling settings applied."""
    d = applied(sampling)
    text = ("sampling, temperature {temperature:g}, top-k {top_k}, top-p {top_p:g}".format(**d)
            if d["do_sample"] else "greedy")
    from ..runtime.generation_config import HF_DEFAULTS
    shown = ("do_sample", "temperature", "top_k", "top_p", "repetition_penalty")  # the rest only when on
    text += "".join(f", {k.replace('_', '-')} {d[k]:g}" for k, off in HF_DEFAULTS.items()
                    if k not in shown and d.get(k, off) != off)
    penalty = d["repetition_penalty"]
    rules = "" if sampling.rules is None else "".join(
        f", {k.replace('_', '-')} {v}" for k, v in sampling.rules.report().items())
    return f"decoding: {text}" + (f", repetition penalty {penalty:g}" if penalty != 1 else "") + rules
