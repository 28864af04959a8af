"""Argument types shared by the command modules (one parser per kind of value)."""

from __future__ import annotations

from minisandbox.errors import MinisandboxError, SizeError
from minisandbox.fsutil import parse_size

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing it
if TYPE_CHECKING:
    import argparse  # (imported where an argparse type fails: `run` parses without it)


def size(text: str) -> int:
    """argparse type for sizes (`512M`, `2G`, a byte count): `fsutil.parse_size`, with its
    message shown by argparse."""
    try:
        return parse_size(text)
    except SizeError as exc:
        import argparse

        raise argparse.ArgumentTypeError(str(exc)) from None


class UsageError(MinisandboxError, ValueError):
    """The command line is incomplete or contradictory in a way argparse cannot see (e.g.
    `run TASK` without `-- CMD`): one line, exit status 2 as for argparse's own errors."""


def note(message: str) -> None:
    """An informational line on stderr (counts, hints); `-q` drops it."""
    import os
    import sys

    if not os.environ.get("MINISANDBOX_QUIET"):
        print(message, file=sys.stderr)


def add_selection_options(parser: argparse.ArgumentParser, what: str) -> None:
    """`--instance-ids` and `--repo`, the same on every command that works on a subset of
    tasks (`minisandbox.records.Selection`); `what` names what is filtered."""
    parser.add_argument(
        "--instance-ids",
        nargs="+",
        metavar="ID",
        help=f"only these {what}: instance ids, or @FILE for a file of ids (one per line or a JSON list)",
    )
    parser.add_argument(
        "--repo",
        nargs="+",
        metavar="OWNER/NAME",
        help=f"only {what} of these repositories (owner/name; SWE-smith's owner__name.sha8 too)",
    )


def selection(args: argparse.Namespace):  # -> minisandbox.records.Selection
    """The Selection `add_selection_options`' values make."""
    from minisandbox.records import Selection

    return Selection.parse(getattr(args, "instance_ids", None), getattr(args, "repo", None))
