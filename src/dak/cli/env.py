"""``dak env``: every $DAK_* switch, its default and the value this shell sets, and what is wrong."""

from __future__ import annotations

import os
import sys

from ..switches import SWITCHES, check_environment

GROUPS = (("default", "defaults (on unless set to 0)"), ("plan", "decided by the plan or the token count unless set"),
          ("experiment", "experiments (off, or a measured setting)"), ("setting", "settings"))


def add_parser(sub) -> None:
    p = sub.add_parser("env", help="list the $DAK_* switches, their defaults and the values set here")
    p.add_argument("--set", action="store_true", help="only the switches this environment sets")
    p.set_defaults(func=run, checks_env=False)


def run(args) -> int:
    width = max(len(s.name) for s in SWITCHES)
    for group, title in GROUPS:
        rows = [s for s in SWITCHES if s.group == group and (not args.set or os.environ.get(s.name))]
        if not rows:
            continue
        print(f"{title}:")
        for s in rows:
            now = f"set {os.environ[s.name]!r}" if os.environ.get(s.name) else "unset"
            print(f"  {s.name:<{width}}  {now:<12} default {s.default}: {s.what}")
    return 2 if report() else 0


def report() -> bool:
    """Print the environment's warnings and errors (dak.switches.check_environment) to stderr;
    whether there were errors. Every other command runs it first (dak.cli.main)."""
    warnings, errors = check_environment()
    for line in warnings:
        print(f"dak: warning: {line}", file=sys.stderr)
    for line in errors:
        print(f"dak: error: {line}", file=sys.stderr)
    return bool(errors)
