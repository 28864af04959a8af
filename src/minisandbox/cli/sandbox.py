"""Sandbox commands: `minisandbox run`, `minisandbox shell` (a task from a published store)
and `minisandbox sandbox-exec` (any restored layer directories, no store needed)."""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import threading
from typing import Iterator

from minisandbox.cli.options import size
from minisandbox.sandbox.limits import Limits


def _add_sandbox_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--network", choices=["none", "host"], default="none",
                   help="none (default): loopback only, downloads fail fast; host: share the host network")
    p.add_argument("--rootless", action="store_true", default=None,
                   help="use a user namespace even as root (default: rootless when not root)")
    p.add_argument("--memory", type=size, help="memory limit, e.g. 2G (cgroup, else RLIMIT_AS per process)")
    p.add_argument("--pids", type=int, help="process limit (cgroup, else RLIMIT_NPROC)")
    p.add_argument("--cpu-seconds", type=int, help="CPU time per process (RLIMIT_CPU)")
    p.add_argument("--file-size", type=size, help="largest file a process may write (RLIMIT_FSIZE)")
    p.add_argument("--scratch", help="directory for on-disk upper layers (default: tmpfs inside the sandbox)")
    p.add_argument("--copy-layers", action="store_true", help="copy layers instead of overlaying them")
    p.add_argument("--timeout", type=float, help="kill the command's process tree after this many seconds")


def _options(args: argparse.Namespace) -> dict:
    limits = Limits(memory_bytes=args.memory, pids=args.pids, cpu_seconds=args.cpu_seconds,
                    file_size_bytes=args.file_size)
    opts = {"network": args.network, "rootless": args.rootless, "scratch_dir": args.scratch,
            "copy_layers": args.copy_layers}
    if any(v is not None for v in (args.memory, args.pids, args.cpu_seconds, args.file_size)):
        opts["limits"] = limits
    return opts


@contextlib.contextmanager
def _task_sandbox(args: argparse.Namespace) -> Iterator:
    """The task's sandbox in its start state (minisandbox.task)."""
    from minisandbox.task import open_task

    ts = open_task(args.task_id, args.store, cache=args.cache, **_options(args))
    try:
        yield ts.sandbox
    finally:
        ts.close()


def _parse_layer(text: str):
    from minisandbox.sandbox.sandbox import Layer

    parts = text.split(":")
    if len(parts) not in (2, 3) or not parts[1].startswith("/") or (len(parts) == 3 and parts[2] not in ("ro", "rw")):
        raise argparse.ArgumentTypeError(f"--layer {text!r}: expected DIR:MOUNTPATH[:ro|rw]")
    return Layer(os.path.abspath(parts[0]), parts[1], len(parts) == 2 or parts[2] == "rw")


def _interpreter(text: str | None) -> tuple[str, str] | None:
    """--python VERSION:PREFIX, PREFIX (version read from the prefix) or VERSION."""
    if not text:
        return None
    from minisandbox.sandbox import interpreters

    if ":" in text:
        version, prefix = text.split(":", 1)
        return version, prefix
    if text.startswith("/"):
        version = interpreters._prefix_version(text)
        if version is None:
            raise ValueError(f"--python {text}: cannot tell the interpreter version; pass VERSION:PREFIX")
        return version, text
    interp = interpreters.find_interpreter(text)
    return interp.version, interp.prefix


def _argv(cmd: list[str]) -> list[str]:
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd:
        raise ValueError("no command given: add `-- CMD ...`")
    return ["bash", "-c", cmd[0]] if len(cmd) == 1 else cmd


def _run_streaming(sb, argv: list[str], timeout: float | None) -> int:
    """Run with the sandbox's stdout/stderr going straight to ours."""
    sys.stdout.flush()
    sys.stderr.flush()
    cid = sb.spawn(argv, stdin=subprocess.DEVNULL, stdout=1, stderr=2)
    try:
        code = sb.wait(cid, timeout)
    except TimeoutError:
        sb.kill(cid)
        print(f"minisandbox: command timed out after {timeout} s; killed its process tree", file=sys.stderr)
        return 124
    except KeyboardInterrupt:
        sb.kill(cid)
        return 130
    return 128 - code if code < 0 else code


def cmd_run(args: argparse.Namespace) -> int:
    argv = _argv(args.cmd)
    with _task_sandbox(args) as sb:
        code = _run_streaming(sb, argv, args.timeout)
        if args.diff:
            sys.stdout.write(sb.diff())
        return code


def cmd_exec(args: argparse.Namespace) -> int:
    from minisandbox.sandbox.sandbox import Sandbox

    argv = _argv(args.cmd) if [c for c in args.cmd if c != "--"] else None
    with Sandbox(args.layer or [], interpreter=_interpreter(args.python), **_options(args)) as sb:
        if argv is None:  # no command: a persistent shell session on stdin
            return _interactive(sb)
        code = _run_streaming(sb, argv, args.timeout)
        if args.diff:
            sys.stdout.write(sb.diff())
        return code


def _interactive(sb) -> int:
    """A line-by-line shell over a persistent session; Ctrl-C interrupts the command."""
    from minisandbox.sandbox.shell import session as shell_session

    session = shell_session(sb, "cli")
    tty = sys.stdin.isatty()
    while True:
        try:
            line = input("(sandbox) $ " if tty else "")
        except EOFError:
            return 0
        except KeyboardInterrupt:
            print()
            continue
        if not line.strip():
            continue
        result: dict = {}

        def work(result: dict = result, line: str = line) -> None:
            try:
                result["r"] = session.run(line)
            except Exception as exc:  # reported below
                result["e"] = exc

        t = threading.Thread(target=work, daemon=True)
        t.start()
        while t.is_alive():
            try:
                t.join(0.2)
            except KeyboardInterrupt:
                session.interrupt()
        if "e" in result:
            print(f"minisandbox shell: {result['e']}", file=sys.stderr)
            return 1
        r = result["r"]
        sys.stdout.write(r.output)
        sys.stdout.flush()
        if not session.alive:
            return r.returncode
        if r.returncode != 0 and tty:
            print(f"[exit {r.returncode}]", file=sys.stderr)


def cmd_shell(args: argparse.Namespace) -> int:
    with _task_sandbox(args) as sb:
        return _interactive(sb)


def register(sub: argparse._SubParsersAction) -> None:
    from minisandbox.paths import default_store

    p = sub.add_parser("run", help="Run a command in a task's sandbox (start state, network off).",
                       description="Run CMD in a fresh sandbox of TASK_ID (its layers fetched from the store into "
                                   "the node cache first); exits with the command's exit code.")
    p.add_argument("--store", default=default_store(), help="published store URL (default: %(default)s)")
    p.add_argument("--cache", help="node cache dir (default: $MINISANDBOX_CACHE or ~/.cache/minisandbox)")
    p.add_argument("--diff", action="store_true", help="print the repo's diff since the start state afterwards")
    _add_sandbox_options(p)
    p.add_argument("task_id", metavar="TASK_ID", help="instance id of a task in the store")
    p.add_argument("cmd", nargs=argparse.REMAINDER, help="-- CMD ... (one argument: run with bash -c)")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("shell", help="Open an interactive bash session in a task's sandbox.",
                       description="A persistent bash session in a fresh sandbox of TASK_ID; Ctrl-C interrupts "
                                   "the running command, EOF (Ctrl-D) ends the session.")
    p.add_argument("--store", default=default_store(), help="published store URL (default: %(default)s)")
    p.add_argument("--cache", help="node cache dir (default: $MINISANDBOX_CACHE or ~/.cache/minisandbox)")
    _add_sandbox_options(p)
    p.add_argument("task_id", metavar="TASK_ID", help="instance id of a task in the store")
    p.set_defaults(func=cmd_shell)

    p = sub.add_parser("sandbox-exec", help="Run a command in a sandbox over layer directories (no store).",
                       description="A sandbox over restored layer directories given with --layer; no store or "
                                   "cache is involved. Without CMD, runs a shell session reading stdin.")
    p.add_argument("--layer", action="append", type=_parse_layer, metavar="DIR:MOUNTPATH[:ro|rw]",
                   help="a restored tree and where it appears (writable overlay unless :ro); repeatable")
    p.add_argument("--python", metavar="VERSION:PREFIX|PREFIX|VERSION",
                   help="base interpreter to bind read-only at PREFIX (the venv's pyvenv.cfg home)")
    p.add_argument("--diff", action="store_true", help="print the diff of /testbed since start afterwards")
    _add_sandbox_options(p)
    p.add_argument("cmd", nargs=argparse.REMAINDER,
                   help="-- CMD ... (one argument: run with bash -c; none: a shell session reading stdin)")
    p.set_defaults(func=cmd_exec)
