"""The `minisandbox` command line.

User commands sit at the top level (`fetch`, `run`, `shell`, `sandbox-exec`, `eval`,
`tasks`, `cache`, `push`/`pull`/`verify`, `plan`); the workflow's internal steps, which the
Snakemake rules call, are grouped under `minisandbox pipeline <step>`. Each command group
lives in its own module exposing `register(subparsers)`; add a module to COMMAND_MODULES to
add commands.

Errors: a `MinisandboxError` (bad input, a missing store, a failed build: something the
user can act on) prints one line naming what failed; anything else is a bug and prints its
full traceback.

The CLI may import anything in the package; nothing in the package imports the CLI.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from minisandbox import __version__
from minisandbox.errors import MinisandboxError

COMMAND_MODULES = [
    "minisandbox.cli.runtime",  # fetch, tasks, cache ls|gc
    "minisandbox.cli.sandbox",  # run, shell, sandbox-exec
    "minisandbox.cli.eval",  # eval
    "minisandbox.cli.storage",  # push, pull, verify
    "minisandbox.cli.doctor",  # doctor
    "minisandbox.cli.pipeline",  # plan, and the `pipeline` group of workflow steps
]

DESCRIPTION = """\
Container-free, pre-built environments and namespace sandboxes for SWE agents.

Typical use: `minisandbox fetch TASK_ID` (get a task's environment onto this node),
`minisandbox run TASK_ID -- CMD` or `minisandbox shell TASK_ID` (work in its sandbox),
`minisandbox eval --predictions FILE` (grade patches). Stores are built with `snakemake`
(see docs/pipeline.md) and copied with `push`/`pull`."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="minisandbox", description=DESCRIPTION,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"minisandbox {__version__}")
    parser.add_argument("--store-public-key", metavar="PEM",
                        help="verify every store manifest and index shard against this ed25519 public key "
                             "(default: $MINISANDBOX_STORE_PUBLIC_KEY; unset: unsigned stores are read as they are)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.store_public_key:  # every store this process (and its children) opens verifies
        from minisandbox.node.signing import PUBLIC_KEY_ENV

        os.environ[PUBLIC_KEY_ENV] = os.path.abspath(args.store_public_key)
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        return 130
    except MinisandboxError as exc:  # something the user can act on: one line
        print(f"minisandbox {args.command}: error: {exc}", file=sys.stderr)
        return 1
    # anything else is a bug: the traceback propagates (the interpreter prints it, exit 1)


if __name__ == "__main__":
    sys.exit(main())
