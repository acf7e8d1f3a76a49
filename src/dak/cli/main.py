"""``dak`` entry point: argparse with one module per subcommand.

Each subcommand module provides ``add_parser(subparsers)`` (which sets
``func=run`` on its parser) and ``run(args) -> int``.  Any ``ValueError``
raised from bad input (or ``OSError`` from a path it cannot read or write, or
``dak.runtime_env.EnvironmentProblem`` from a machine that cannot run the kernels) becomes ``dak: error: ...`` on
stderr with exit code 2, and so does a $DAK_*
switch set to a value it does not accept (dak.switches; a name dak does not read is a warning).
"""

from __future__ import annotations

import argparse
import sys

from ..runtime_env import EnvironmentProblem
from . import bench, calibrate, env, generate, info, plan

SUBCOMMANDS = (plan, generate, calibrate, bench, info, env)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="dak", description="Split-operator LLM inference across HBM and host memory.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in SUBCOMMANDS:
        module.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # argparse usage errors (exit 2) and --help (exit 0)
        return e.code if isinstance(e.code, int) else 2
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return 2
    if getattr(args, "checks_env", True) and env.report():  # `dak env` reports after its table
        return 2
    try:
        return int(args.func(args) or 0)
    except (ValueError, EnvironmentProblem) as e:
        print(f"dak: error: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # e.g. `dak plan ... | head`
        import os
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as e:  # a file to read or write: a missing folder, a directory given as a file, ...
        print(f"dak: error: {e} (check the path)", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
