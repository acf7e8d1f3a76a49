"""Run metadata every benchmark result carries (GPU name, git sha, command, versions, date),
writing results, and merging the rows of several results (`merge_rows`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path


def git_sha() -> str:
    """HEAD's short sha, with "-dirty" when tracked files differ from it (a device copy of a
    newer tree under an old .git reads so too); $DAK_GIT_SHA where the caller knows better."""
    if os.environ.get("DAK_GIT_SHA"):
        return os.environ["DAK_GIT_SHA"]
    try:
        sha = subprocess.check_output(["git", "rev-parse", "--short", "HEAD"], text=True,
                                      stderr=subprocess.DEVNULL).strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    try:
        clean = subprocess.run(["git", "diff", "--quiet", "HEAD", "--"], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        clean = False
    return sha if clean else f"{sha}-dirty"


# set by the runbook for every call, not a knob of the measured code
_NOT_KNOBS = ("DAK_GIT_SHA", "DAK_CACHE_DIR")


def dak_env() -> dict:
    """The $DAK_* switches the run was made under (experiments are chosen by them, so the
    command alone does not say what ran), without the bookkeeping ones."""
    return {k: v for k, v in sorted(os.environ.items()) if k.startswith("DAK_") and v and k not in _NOT_KNOBS}


def metadata() -> dict:
    """GPU name (or 'cpu (Triton interpreter)' without one), git sha, command, the $DAK_*
    switches set, torch, date."""
    import torch
    gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu (Triton interpreter)"
    return {
        "gpu": gpu,
        "git_sha": git_sha(),
        "command": " ".join([Path(sys.executable).name] + sys.argv),
        "env": dak_env(),
        "torch": torch.__version__,
        "date": time.strftime("%Y-%m-%dT%H:%M:%S"),
    }


def write_json(path: str | Path, payload: dict) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=1))


def _row_key(r: dict) -> tuple:
    return (r["model"], r["batch"], r["prompt_len"], r["gen_len"], r["kind"], r["x_req"], r["system"])


def merge_rows(payloads: list[dict]) -> list[dict]:
    """Rows of several result JSONs, each tagged with its run (`run`: git sha, date); where two
    runs measured the same case (model, batch, lengths, kind, ratio, system) the later file wins.
    A run made with `DAK_*` switches set also carries them (`run["env"]`)."""
    rows: dict = {}
    for p in payloads:
        meta = p.get("meta", {})
        for r in p["rows"]:
            r = dict(r)
            run = {"git_sha": meta.get("git_sha"), "date": meta.get("date")}
            r.setdefault("run", dict(run, env=meta["env"]) if meta.get("env") else run)
            rows.pop(_row_key(r), None)
            rows[_row_key(r)] = r
    return list(rows.values())
