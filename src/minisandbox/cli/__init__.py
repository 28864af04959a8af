"""`minisandbox` command line. Each command group lives in its own `cli_*` module that
exposes `register(subparsers)`; add a module to COMMAND_MODULES to add commands."""

from __future__ import annotations

import argparse
import importlib
import sys

COMMAND_MODULES = [
    "minisandbox.cli_pipeline",  # plan, mirror, snapshot, resolve, build, pack, checksum, publish, index
    "minisandbox.cli_runtime",  # fetch, cache ls|gc
    "minisandbox.cli_eval",  # eval, validate, validated-tasks
    "minisandbox.cli_sandbox",  # run, shell, sandbox-exec
    "minisandbox.cli_storage",  # push, pull, verify
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="minisandbox", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # one line for users; tracebacks with MINISANDBOX_DEBUG=1
        import os

        if os.environ.get("MINISANDBOX_DEBUG"):
            raise
        print(f"minisandbox {args.command}: error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
