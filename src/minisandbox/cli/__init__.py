"""The `minisandbox` command line.

User commands sit at the top level (`fetch`, `run`, `shell`, `sandbox-exec`, `eval`,
`tasks`, `cache`, `push`/`pull`/`verify`, `plan`); the workflow's internal steps, which the
Snakemake rules call, are grouped under `minisandbox pipeline <step>`. Each command group
lives in its own module exposing `register(subparsers)`; add a command to COMMANDS (its
name -> the module registering it) to add it. Modules: `taskcmds` (fetch, tasks, cache),
`sandboxcmds` (run, shell, sandbox-exec), `helper` and `helperclient` (the node-local helper
that keeps `run` warm, and its client), `eval`, `storage` (push, pull, verify), `pipeline`
(plan, `pipeline <step>`), `completion`, `doctor`, `options` (shared argument types) and
`__main__` (`python -m minisandbox.cli`).

Start-up cost: agents call `minisandbox run` tens of thousands of times, so a call imports
only the module of its command (`main` finds the command word before building the parser;
`--help` and unknown words build the whole parser), and `--version` imports nothing but the
version. Command modules import what their commands need inside the command functions
(tests/test_import_structure.py keeps the import graph of `run` and `--version` fixed).

Errors: a `MinisandboxError` (bad input, a missing store, a failed build: something the
user can act on) prints one line naming what failed and what to do (`-v` adds its
traceback); anything else is a bug and prints its full traceback. A closed stdout (`| head`)
ends the command quietly with exit status 141, as SIGPIPE does for other tools.

Global options (before the command): `-q` (no progress, no notes on stderr), `-v` (more
detail: tracebacks behind errors, log messages), `--no-progress`.

The CLI may import anything in the package; nothing in the package imports the CLI.
"""

import os
import sys

from minisandbox import __version__
from minisandbox.errors import MinisandboxError

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (`--version` imports nothing else)
if TYPE_CHECKING:
    import argparse

#: Top-level command -> the module whose `register` adds it (in the order `--help` lists them).
COMMANDS = {
    "fetch": "minisandbox.cli.taskcmds",
    "tasks": "minisandbox.cli.taskcmds",
    "cache": "minisandbox.cli.taskcmds",
    "run": "minisandbox.cli.sandboxcmds",
    "shell": "minisandbox.cli.sandboxcmds",
    "sandbox-exec": "minisandbox.cli.sandboxcmds",
    "eval": "minisandbox.cli.eval",
    "push": "minisandbox.cli.storage",
    "pull": "minisandbox.cli.storage",
    "verify": "minisandbox.cli.storage",
    "doctor": "minisandbox.cli.doctor",
    "plan": "minisandbox.cli.pipeline",
    "pipeline": "minisandbox.cli.pipeline",  # plan, and the workflow steps
    "completion": "minisandbox.cli.completion",  # completion bash|zsh
    "helper": "minisandbox.cli.helper",  # the node-local helper: start|stop|status
}
COMMAND_MODULES = list(dict.fromkeys(COMMANDS.values()))
#: Top-level options that take a value (the word after them is not the command).
_VALUE_OPTIONS = ("--store-public-key",)

DESCRIPTION = """\
Container-free, pre-built environments and namespace sandboxes for SWE agents.

Typical use: `minisandbox fetch TASK_ID` (get a task's environment onto this node),
`minisandbox run TASK_ID -- CMD` or `minisandbox shell TASK_ID` (work in its sandbox),
`minisandbox eval --predictions FILE` (grade patches). Stores are built with `snakemake`
(see docs/pipeline.md) and copied with `push`/`pull`."""


#: Parsers kept by a long-lived process (the node-local helper sets it to {}; its workers then
#: reuse the parser built once): modules -> parser. None: build one per call.
PARSER_CACHE: "dict[tuple[str, ...] | None, argparse.ArgumentParser] | None" = None


def build_parser(modules: list[str] | None = None, command: str | None = None) -> "argparse.ArgumentParser":
    """The parser with the commands of `modules` (default: every command module); with
    `command`, of that command alone where its module registers each command on its own
    (a `REGISTER` dict: command -> function adding its parser)."""
    key = None if modules is None else (*modules, *([f"command={command}"] if command else []))
    if PARSER_CACHE is not None and key in PARSER_CACHE:
        return PARSER_CACHE[key]
    parser = _build_parser(modules, command)
    if PARSER_CACHE is not None:
        PARSER_CACHE[key] = parser
    return parser


def _build_parser(modules: list[str] | None, command: str | None = None) -> "argparse.ArgumentParser":
    import argparse
    import importlib

    parser = argparse.ArgumentParser(
        prog="minisandbox", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--version", action="version", version=f"minisandbox {__version__}")
    parser.add_argument(
        "--store-public-key",
        metavar="PEM",
        help="verify every store manifest and index shard against this ed25519 public key "
        "(default: $MINISANDBOX_STORE_PUBLIC_KEY; unset: unsigned stores are read as they are)",
    )
    parser.add_argument(
        "-q", "--quiet", action="store_true", help="no progress and no notes on stderr (errors and results only)"
    )
    parser.add_argument(
        "-v",
        "--verbose",
        dest="verbosity",
        action="count",
        default=0,
        help="more detail on stderr: the traceback behind an error, log messages (-vv: debug)",
    )
    parser.add_argument(
        "--no-progress",
        action="store_true",
        help="no progress bar or progress lines (same as MINISANDBOX_PROGRESS=off)",
    )
    parser.add_argument(
        "--accept-older-store",
        action="store_true",
        help="with --store-public-key: accept a store index older than one this node already "
        "accepted (a deliberate rollback; default: refused; $MINISANDBOX_ACCEPT_OLDER_STORE=1)",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMAND_MODULES if modules is None else modules:
        module = importlib.import_module(name)
        only = getattr(module, "REGISTER", {}).get(command)
        (only or module.register)(sub)
    return parser


def _parse_common(argv: list[str]):  # -> types.SimpleNamespace | None
    """What the argparse parser makes of `argv`, without argparse, where the command's module
    parses its common form itself (its `PARSE`: `run`, `minisandbox.cli.sandboxcmds.parse_run`)
    and the top-level options are spelled out; None for anything else (the caller builds the
    argparse parser: help, errors and every other command). Importing argparse and building
    the parser was about a sixth of a warm `run`'s CPU."""
    top = {"store_public_key": None, "quiet": False, "verbosity": 0, "no_progress": False, "accept_older_store": False}
    flags = {
        "-q": "quiet",
        "--quiet": "quiet",
        "--no-progress": "no_progress",
        "--accept-older-store": "accept_older_store",
    }
    i = 0
    while i < len(argv) and argv[i].startswith("-"):
        word = argv[i]
        if word in flags:
            top[flags[word]] = True
        elif word in ("-v", "--verbose"):
            top["verbosity"] += 1
        elif word.startswith("--store-public-key="):
            top["store_public_key"] = word.partition("=")[2]
        elif word == "--store-public-key" and i + 1 < len(argv) and not argv[i + 1].startswith("-"):
            i += 1
            top["store_public_key"] = argv[i]
        else:
            return None
        i += 1
    if i >= len(argv) or argv[i] not in COMMANDS:
        return None
    command = argv[i]
    module = __import__(COMMANDS[command], fromlist=["PARSE"])
    parse = getattr(module, "PARSE", {}).get(command)
    values = parse(argv[i + 1 :]) if parse is not None else None
    if values is None:
        return None
    from types import SimpleNamespace

    return SimpleNamespace(**top, command=command, **values)


def _command_word(argv: list[str]) -> str | None:
    """The first word of `argv` that is not a top-level option or its value."""
    skip = False
    for word in argv:
        if skip:
            skip = False
        elif word in _VALUE_OPTIONS:
            skip = True
        elif word == "--":
            return None
        elif not word.startswith("-"):
            return word
    return None


def _modules_for(argv: list[str]) -> list[str] | None:
    """The command modules `argv` needs: its command's, none for a bare `--version`, else all
    (help and argparse's errors list every command)."""
    word = _command_word(argv)
    if word in COMMANDS:
        return [COMMANDS[word]]
    if word is None and "--version" in argv and not {"-h", "--help"} & set(argv):
        return []
    return None


def main(argv: list[str] | None = None) -> int:
    """`minisandbox ARGV` (default: this process's arguments). Only the command itself
    (argv None: the `minisandbox` script, `python -m minisandbox.cli`) may hand a `run` to
    the node-local helper (minisandbox.cli.helper); calls with an argv (tests, the helper's
    own workers) run in this process."""
    try:
        return _main(argv, helper=argv is None)
    except BrokenPipeError:  # also from argparse printing --help into `| head`
        return _stdout_closed()


def _main(argv: list[str] | None, helper: bool = False) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv == ["--version"]:  # the common case without argparse (half of the start-up)
        print(f"minisandbox {__version__}")
        return 0
    if helper and _command_word(argv) == "run":  # before any heavy import (docs/sandbox.md)
        from minisandbox.cli import helperclient

        code = helperclient.try_run(argv)
        if code is not None:  # the helper's worker ran it: nothing left to do here
            return _end_process(code)
        _pause_gc()  # (after the client: through a helper this process imports nothing more)
        try:
            code = _in_process(argv)
        finally:
            resume_gc()  # (a call that failed before its sandbox was open)
            helperclient.start_pending()  # (`auto` found none: one for the next calls)
        return _end_process(code)
    return _in_process(argv)


def _end_process(code: int) -> int:
    """End the `minisandbox run` process now, as the interpreter would at exit but without
    its finalization: stdout and stderr flushed, the exit handlers run (the sandbox's
    crash-cleanup record), then `os._exit(code)`. Finalization takes every module apart,
    writing to nearly every page of the heap, and the sandbox fork server is a fork of this
    process (`rootfs.prestart(fork_self=True)`), so each of those pages was a copy-on-write
    fault: about 600 faults and 4 ms of CPU for nothing. The client of a node-local helper
    ends the same way once the helper's worker reported the status: its finalization (the
    interpreter's start-up modules) was about 1.5 ms of its CPU. Returns `code` instead (the
    normal exit) while a non-daemon thread runs, which the interpreter would wait for (none
    can without `threading`, which the helper's client does not import)."""
    threading = sys.modules.get("threading")  # (not imported: no thread was started through it)
    if threading is not None:
        main_thread = threading.main_thread()
        if any(t is not main_thread and not t.daemon and t.is_alive() for t in threading.enumerate()):
            return code
    if not run_exit_handlers():
        code = 128 + 13  # (`_stdout_closed`: as if killed by SIGPIPE)
    os._exit(code)


def run_exit_handlers() -> bool:
    """What the interpreter does at exit short of finalization: flush stdout and stderr, then
    run the exit handlers (the sandbox's crash-cleanup record is one). For the paths that end
    the process with `os._exit` or by a signal. Returns False when stdout's reader had gone
    (stdout is then pointed at /dev/null, `_stdout_closed`)."""
    import atexit

    stdout_open = True
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        _stdout_closed()
        stdout_open = False
    except (OSError, ValueError):
        pass
    try:
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    atexit._run_exitfuncs()
    return stdout_open


#: True while `_pause_gc` holds the cyclic garbage collector off (see `resume_gc`).
GC_PAUSED = False


def _pause_gc() -> None:
    """Hold the cyclic garbage collector off while a `run` process imports and sets up: the
    imports alone trigger about 40 collections (5-10 ms of CPU) and make no garbage cycles
    worth collecting. Only the `minisandbox` process itself does this (not a caller's
    process that calls `main` with an argv, nor the helper's workers)."""
    global GC_PAUSED
    import gc

    if gc.isenabled():
        gc.disable()
        GC_PAUSED = True


def resume_gc() -> None:
    """End `_pause_gc` (the sandbox is open): what exists now is frozen (never scanned again:
    the modules and the parser live as long as the process) and collection resumes for what
    the command's streaming allocates."""
    global GC_PAUSED
    if GC_PAUSED:
        import gc

        GC_PAUSED = False
        gc.freeze()
        gc.enable()


def _in_process(argv: list[str]) -> int:
    """`minisandbox ARGV` in this process."""
    args = _parse_common(argv)
    if args is None:
        modules = _modules_for(argv)
        parser = build_parser(modules, _command_word(argv) if modules else None)
        args = parser.parse_args(argv)
    _apply_global_options(args)
    try:
        if getattr(args, "store", "") is None and args.command in DEFAULT_STORE_COMMANDS:
            from minisandbox.paths import default_store_origin

            args.store, args.store_origin = default_store_origin()
        code = int(args.func(args) or 0)
        sys.stdout.flush()  # a closed pipe shows here, not at interpreter exit
        return code
    except KeyboardInterrupt:
        return 130
    except MinisandboxError as exc:  # something the user can act on: one line
        sys.stdout.flush()
        if args.verbosity:
            import traceback

            traceback.print_exc()
        print(f"minisandbox {args.command}: error: {exc}{_default_store_note(args, exc)}", file=sys.stderr)
        from minisandbox.cli.options import UsageError

        return 2 if isinstance(exc, UsageError) else 1
    # anything else is a bug: the traceback propagates (the interpreter prints it, exit 1)


#: Commands whose `--store` defaults to `minisandbox.paths.default_store()`.
DEFAULT_STORE_COMMANDS = frozenset({"fetch", "tasks", "run", "shell", "eval"})


def _apply_global_options(args: "argparse.Namespace") -> None:
    """-q/--no-progress turn progress off for this process and the ones it starts; -v
    shows log messages; --store-public-key and --accept-older-store hold for every store
    this process (and its children) opens."""
    if args.store_public_key:
        from minisandbox.node.signing import PUBLIC_KEY_ENV

        os.environ[PUBLIC_KEY_ENV] = os.path.abspath(args.store_public_key)
    if args.accept_older_store:  # minisandbox.node.freshness
        from minisandbox.node.freshness import ACCEPT_OLDER_ENV

        os.environ[ACCEPT_OLDER_ENV] = "1"
    if args.quiet or args.no_progress:
        os.environ["MINISANDBOX_PROGRESS"] = "off"
    if args.quiet:
        os.environ["MINISANDBOX_QUIET"] = "1"
    if args.verbosity:
        import logging

        logging.basicConfig(
            level=logging.DEBUG if args.verbosity > 1 else logging.INFO,
            format="minisandbox: %(name)s: %(message)s",
            stream=sys.stderr,
        )


def _default_store_note(args: "argparse.Namespace", exc: MinisandboxError) -> str:
    """When the store was not given and is not there, say which default was used: the
    default follows the current directory, so the same command fails elsewhere."""
    origin = getattr(args, "store_origin", None)
    if origin is None:
        return ""
    from minisandbox.node.store import NotInStore, StoreIndexMissing

    if not isinstance(exc, (StoreIndexMissing, NotInStore)):
        return ""
    return f" (no --store given: used {args.store}, {origin}; pass --store URL or set MINISANDBOX_STORE)"


def _stdout_closed() -> int:
    """The reader of our stdout went away (`minisandbox tasks | head -1`): stop quietly.
    stdout is pointed at /dev/null so the interpreter's final flush cannot fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # stdout is not a real file (tests): nothing to redirect
        pass
    return 128 + 13  # as if killed by SIGPIPE, what `head` expects of the writer


if __name__ == "__main__":
    sys.exit(main())
