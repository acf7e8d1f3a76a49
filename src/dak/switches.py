"""Every $DAK_* environment variable dak reads: its default, what it accepts and what it does.

The defaults were chosen by same-call A/Bs on the H200 (docs/HISTORY.md); the variables turn
them off, force a plan's choice, or run an experiment. Each reader lives where the value is used
(mostly dak.shares); this table is what `dak env` prints and what `check_environment` checks a
process's environment against, so a misspelt name (which dak would silently ignore) or a bad value
(which would raise only when first read, perhaps mid-run) is caught up front. Torch-free.
"""

from __future__ import annotations

import difflib
import os
from contextlib import contextmanager
from dataclasses import dataclass

ONOFF = ("0", "1")


@dataclass(frozen=True)
class Switch:
    name: str
    default: str          # what unset means
    accepts: object       # a tuple of the accepted strings, (lo, hi) for a number, or None (any text)
    group: str            # 'default' (on unless 0), 'plan' (unset: the planner or token count decides),
                          # 'experiment' (off or a measured setting; for A/Bs), 'setting' (paths, bookkeeping)
    what: str


SWITCHES: tuple[Switch, ...] = (
    Switch("DAK_HBM_GEMV", "1", ONOFF, "default",
           "dak's Triton GEMV for decode linears wholly in HBM (1-16 tokens); 0: cuBLAS"),
    Switch("DAK_GEMV_SILU", "as DAK_HBM_GEMV", ONOFF, "default",
           "SiLU(gate) * up in the fused gate/up GEMV's epilogue"),
    Switch("DAK_FUSED_LAYER", "1", ONOFF, "default", "Llama-family layers fused: add + RMSNorm, SiLU * up"),
    Switch("DAK_DEFER_RESIDUAL", "1", ONOFF, "default",
           "a fused layer's MLP residual add rides the next add + RMSNorm"),
    Switch("DAK_ROTARY_KV", "1", ONOFF, "default", "q/k rotary inside the KV append's launch"),
    Switch("DAK_ROTARY_ONE_LAUNCH", "1", ONOFF, "default", "q and k rotated by one launch"),
    Switch("DAK_FUSED_OPT", "1", ONOFF, "default",
           "OPT layers: add + LayerNorm in one launch, ReLU and residual in the fc1/fc2 GEMVs"),
    Switch("DAK_OPT_QSCALE", "1", ONOFF, "default", "OPT's q scaling in the fused q/k/v GEMV's epilogue"),
    Switch("DAK_INPLACE_TILES", "1", ONOFF, "default",
           "32-row tiles for thin in-place host shares at 1-16 tokens (matrices >= 7168 rows)"),
    Switch("DAK_CE_HBM_CUBLAS", "1", ONOFF, "default",
           "a copy-engine operator's HBM rows by cuBLAS (0: the split kernel)"),
    Switch("DAK_ATTENTION_CE_FORK", "1", ONOFF, "default",
           "the standalone copy-engine attention forks its staged part"),
    Switch("DAK_PREFILL_GRAPHS", "1", ONOFF, "default", "prefill captured per prompt-length bucket (0: eager)"),
    Switch("DAK_PREFILL_CHAIN", "1", ONOFF, "default", "a captured prefill chains its copy-engine operators' copies"),
    Switch("DAK_GRAPHS", "1", ONOFF, "default", "decode steps replay a CUDA graph (0: eager, for diagnosis)"),
    Switch("DAK_ROOFLINE_KV_AHEAD", "1", ONOFF, "default",
           "the planner prices uncalibrated host K/V as copied ahead, as the engine runs it (0: read in place)"),
    Switch("DAK_CE_ONE_GEMV", "the plan (Placement.one_gemv)", ONOFF, "plan",
           "1/0 force a chained copy-engine linear's staged and HBM rows into one GEMV once its copies land"),
    Switch("DAK_HBM_FORK", "on at 17-64 tokens", ONOFF, "plan",
           "1/0 force the HBM rows of untuned split configs onto dak's GEMV beside the host kernel"),
    Switch("DAK_CONSOLIDATE_EXACT", "on above 64 tokens", ONOFF, "plan",
           "the consolidated plan judges every kind set's exact placement by the chain model, its slot "
           "stalls priced (1-3 s a plan)"),
    Switch("DAK_CHAIN_ONE_CHUNK", "on in decode chains above 64 tokens", ONOFF, "plan",
           "1/0 force a chained large-N operator's copies into one memcpy (the chain's last keeps its chunks)"),
    Switch("DAK_COPY_WRAP", "plan", ("0", "1", "plan"), "plan",
           "the copy-ahead chain's last copy refills its first slot for the next step "
           "(1: every chain; plan: one-GEMV plans)"),
    Switch("DAK_CE_GEMV", "0", ONOFF, "experiment", "a copy-engine operator's decode GEMMs on dak's GEMV"),
    Switch("DAK_SPLIT_GEMV_TILES", "0", ONOFF, "experiment", "the GEMV's tiles for in-place split configs' HBM rows"),
    Switch("DAK_CE_FORK", "0", ONOFF, "experiment", "copy-engine operators fork their staged part onto a side stream"),
    Switch("DAK_KV_AHEAD_FORK", "0", ONOFF, "experiment", "the copied-ahead attention forks its staged part"),
    Switch("DAK_KV_PAIR_COPY", "0", ONOFF, "experiment", "a layer's host K and V copied as one pair"),
    Switch("DAK_RESIDUAL_ADDMM", "0", ONOFF, "experiment",
           "a fused layer adds the residual inside an all-HBM down_proj's cuBLAS call (addmm)"),
    Switch("DAK_CE_MIN_SHARE", "0.02", (0.0, 1.0), "experiment",
           "host share above which untuned decode configs use the copy engine"),
    Switch("DAK_CE_CHUNKS", "1", (1, 64), "experiment", "copy-engine chunks per operator in untuned decode configs"),
    Switch("DAK_COPY_STREAMS", "1", (1, 2), "experiment", "copy streams of the copy-ahead chain"),
    Switch("DAK_COPY_SLOTS", "2", (2, 8), "experiment",
           "staging slots of the copy-ahead chain (unset: 2, and 4 in a decode step of more than 64 tokens)"),
    Switch("DAK_COPY_GROUP_MIB", "0", (0, 4096), "experiment",
           "copy-ahead copies grouped up to this many MiB (0: off)"),
    Switch("DAK_KV_SLOTS", "2", (2, 4), "experiment", "HBM slots of KV copy-ahead"),
    Switch("DAK_KV_COPY_STREAM", "own", ("own", "shared"), "experiment",
           "host K/V copies on their own stream or the linears' copy stream"),
    Switch("DAK_PIN_METHOD", "alloc", ("alloc", "alloc-wc", "register", "thp"), "experiment",
           "how pinned host memory is made (cudaHostAlloc, write-combined, cudaHostRegister, huge pages)"),
    Switch("DAK_CACHE_DIR", "~/.cache/dak", None, "setting", "where tuning caches and built helpers are kept"),
    Switch("DAK_PROFILE", "unset", None, "setting",
           "a calibrated profile .json whose congestion windows the tuner starts from"),
    Switch("DAK_NVCC", "nvcc on PATH", None, "setting", "nvcc for the CUDA multicast host kernel"),
    Switch("DAK_GIT_SHA", "git rev-parse", None, "setting",
           "the sha benchmark JSONs record (a copied tree's .git may be stale)"),
)

BY_NAME = {s.name: s for s in SWITCHES}

# Settings that make another one moot: (the values each variable must have, None = unset; why). A
# rule applies when every variable it names holds one of its values; `check_environment` warns.
# Each mirrors the code that reads the switch (named in the message), so an A/B is not run for nothing.
MOOT: tuple[tuple[dict, str], ...] = (
    ({"DAK_COPY_WRAP": ("plan",), "DAK_CE_ONE_GEMV": ("0",)},
     "DAK_COPY_WRAP=plan wraps only the chains of plans that run one GEMV once staged, which DAK_CE_ONE_GEMV=0 "
     "turns off: nothing wraps"),
    ({"DAK_COPY_WRAP": ("1", "plan"), "DAK_GRAPHS": ("0",)},
     "DAK_COPY_WRAP wraps the decode graphs' copy-ahead chain; DAK_GRAPHS=0 runs eager steps without one "
     "(dak.runtime.engine): it has no effect"),
    ({"DAK_CE_FORK": ("1",), "DAK_KV_AHEAD_FORK": ("0",)},
     "DAK_CE_FORK=1 forks the copied-ahead attention too (dak.shares.kv_ahead_fork_enabled): DAK_KV_AHEAD_FORK=0 "
     "has no effect"),
    ({"DAK_CE_FORK": ("1",), "DAK_ATTENTION_CE_FORK": ("0",)},
     "DAK_CE_FORK=1 forks the standalone copy-engine attention too (dak.shares.attention_ce_fork_enabled): "
     "DAK_ATTENTION_CE_FORK=0 has no effect"),
    ({"DAK_PREFILL_CHAIN": ("1",), "DAK_PREFILL_GRAPHS": ("0",)},
     "DAK_PREFILL_CHAIN chains only captured prefills, which DAK_PREFILL_GRAPHS=0 turns off: it has no effect"),
    ({"DAK_DEFER_RESIDUAL": ("1",), "DAK_FUSED_LAYER": ("0",)},
     "DAK_DEFER_RESIDUAL acts inside fused Llama-family layers, which DAK_FUSED_LAYER=0 turns off: it has no effect"),
    ({"DAK_RESIDUAL_ADDMM": ("1",), "DAK_FUSED_LAYER": ("0",)},
     "DAK_RESIDUAL_ADDMM acts inside fused Llama-family layers, which DAK_FUSED_LAYER=0 turns off: it has no effect"),
    ({"DAK_GEMV_SILU": ("1",), "DAK_FUSED_LAYER": ("0",)},
     "DAK_GEMV_SILU's epilogue runs inside fused Llama-family layers, which DAK_FUSED_LAYER=0 turns off: it has "
     "no effect"),
    ({"DAK_RESIDUAL_ADDMM": ("1",), "DAK_DEFER_RESIDUAL": (None, "1"), "DAK_FUSED_LAYER": (None, "1")},
     "DAK_RESIDUAL_ADDMM=1: inside dak's engine every fused layer (DAK_FUSED_LAYER) defers its residual add to "
     "the next launch (DAK_DEFER_RESIDUAL), so no addmm runs there; set DAK_DEFER_RESIDUAL=0 to measure it"),
    ({"DAK_OPT_QSCALE": ("1",), "DAK_FUSED_OPT": ("0",)},
     "DAK_OPT_QSCALE's epilogue runs inside the fused OPT layer, which DAK_FUSED_OPT=0 turns off: it has no effect"),
    ({"DAK_OPT_QSCALE": ("1",), "DAK_HBM_GEMV": ("0",)},
     "DAK_OPT_QSCALE's epilogue is dak's GEMV's, which DAK_HBM_GEMV=0 turns off: it has no effect"),
    ({"DAK_CE_ONE_GEMV": ("1",), "DAK_HBM_GEMV": ("0",)},
     "DAK_CE_ONE_GEMV=1 runs staged rows by dak's GEMV, which DAK_HBM_GEMV=0 turns off: it has no effect"),
)


def moot(environ) -> list[str]:
    """Why each MOOT rule that `environ` meets makes a switch it sets do nothing."""
    return [why for need, why in MOOT if all(environ.get(name) in values for name, values in need.items())]


def bad_value(switch: Switch, raw: str) -> str | None:
    """Why `raw` is not a value `switch` accepts, or None."""
    acc = switch.accepts
    if acc is None:
        return None
    if isinstance(acc[0], str):
        return None if raw in acc else f"must be one of {', '.join(acc)}"
    lo, hi = acc
    try:  # as the readers parse them (dak.shares: float() for a share, digits only for a count)
        v = float(raw) if isinstance(lo, float) else int(raw) if raw.isdigit() else None
    except ValueError:
        v = None
    if v is None or not lo <= v <= hi:
        kind = "a number" if isinstance(lo, float) else "an integer"
        return f"must be {kind} in [{lo}, {hi}]"
    return None


def check_environment(environ=None) -> tuple[list[str], list[str]]:
    """(warnings, errors) for the $DAK_* variables set: a name dak does not read (with the
    nearest known one), or a switch another one makes moot (MOOT), is a warning; a value its
    switch does not accept, or switches that contradict each other, an error."""
    real = environ is None or environ is os.environ
    environ = {k: v for k, v in (os.environ if environ is None else environ).items()
               if not (k.startswith("DAK_") and v == "")}  # an empty value reads as unset
    warnings, errors = [], []
    for name in sorted(k for k in environ if k.startswith("DAK_")):
        switch = BY_NAME.get(name)
        if switch is None:
            near = difflib.get_close_matches(name, BY_NAME, n=1)
            hint = f" (did you mean {near[0]}?)" if near else ""
            warnings.append(f"{name} is not a dak switch{hint}; it has no effect (`dak env` lists them)")
            continue
        why = bad_value(switch, environ[name])
        if why:
            errors.append(f"{name}={environ[name]!r}: {why} ({switch.what}; unset: {switch.default})")
    if environ.get("DAK_PROFILE"):  # read lazily by the tuner (after pinning): check it before anything is built
        from .measured import read_profile
        try:
            read_profile(environ["DAK_PROFILE"])
        except ValueError as e:
            errors.append(str(e))
    if environ.get("DAK_GEMV_SILU") == "1" and environ.get("DAK_HBM_GEMV") == "0":  # as shares.gemv_silu_enabled
        errors.append("DAK_GEMV_SILU=1 fuses SiLU * up into dak's GEMV, which DAK_HBM_GEMV=0 turns off: "
                      "unset one of them")
    if real:  # the interpreter is checked where kernels run (kernel_device); warn up front
        from .runtime_env import interpreter_problem, interpreting
        problem = interpreting() and interpreter_problem()
        if problem:
            warnings.append(problem + " (planning still works; running kernels is refused)")
    return warnings + moot(environ), errors


# Defaults that changed, as (switch, its value before, since: ISO UTC): a recorded run made before
# `since` ran and planned with the old value unless it set the switch itself. Thirty-fourth
# session: host K/V priced as copied ahead (H97/H97b), one-GEMV chains wrapped (H93b).
# Forty-first: two copy-ahead slots were the default at every token count. Forty-third: the exact
# consolidated search was off at every token count. Forty-fourth: chained large-N copies kept their chunks.
CHANGED: tuple[tuple[str, str, str], ...] = (
    ("DAK_ROOFLINE_KV_AHEAD", "0", "2026-12-05T20:30"),
    ("DAK_COPY_WRAP", "0", "2026-12-05T20:30"),
    ("DAK_COPY_SLOTS", "2", "2026-12-06T11:30"),  # forty-first: four slots above 64 tokens (H131/H132)
    ("DAK_CONSOLIDATE_EXACT", "0", "2026-12-06T19:50"),  # forty-third: on above 64 tokens (H139-H141)
    ("DAK_CHAIN_ONE_CHUNK", "0", "2026-12-06T22:00"),  # forty-fourth: on in decode chains (H144, H146)
)


def run_environ(env: dict | None, date: str | None) -> dict:
    """The $DAK_* switches a recorded run (a bench JSON's meta, or a merged row's `run`: env,
    date) ran with where they may differ from today's defaults: those it set, and the old value of
    each default changed since it ran (CHANGED); a run without a date counts as old."""
    out = dict(env or {})
    for name, old, since in CHANGED:
        if (date or "") < since:
            out.setdefault(name, old)
    return out


@contextmanager
def environment(env: dict):
    """Set the $DAK_* variables of `env` (e.g. run_environ's) for the block, then restore them."""
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
