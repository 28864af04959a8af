"""Sandbox commands: `minisandbox run`, `minisandbox shell` (a task from a published store)
and `minisandbox sandbox-exec` (any restored layer directories, no store needed).

`run` is parsed without argparse in the common case (`parse_run`: its import, with `gettext`,
`locale` and `shutil`, and building the parser were about a sixth of a warm `run`'s CPU);
anything it does not know exactly (help, abbreviations, bad values, options after the task
id) goes to the argparse parser, which gives the usual help and errors."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator

from minisandbox.cli.options import UsageError
from minisandbox.sandbox.limits import DEFAULT_LIMITS, Limits, LimitsError, parse_limit

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing it
if TYPE_CHECKING:
    import argparse


def _read_limit(name: str):
    """The reader of one limit option's value (`parse_limit`: a size or count, or `none`
    for no limit); raises LimitsError."""

    def read(text: str) -> int | None:
        return parse_limit(name, text, where=f"--{name.removesuffix('_bytes').replace('_', '-')}")

    return read


def _limit(name: str):
    """argparse type for one limit (`_read_limit`, its error shown by argparse)."""
    read = _read_limit(name)

    def parse(text: str) -> int | None:
        try:
            return read(text)
        except LimitsError as exc:
            import argparse

            raise argparse.ArgumentTypeError(str(exc)) from None

    return parse


#: CLI option -> Limits field. Unset options keep the default (`Limits.default()`).
_LIMIT_OPTIONS = {
    "memory": "memory_bytes",
    "pids": "pids",
    "cpu_seconds": "cpu_seconds",
    "sandbox_cpu_seconds": "sandbox_cpu_seconds",
    "file_size": "file_size_bytes",
    "tmpfs": "tmpfs_bytes",
    "max_output": "output_bytes",
}


def _add_sandbox_options(p: argparse.ArgumentParser) -> None:
    import argparse

    p.add_argument(
        "--network",
        choices=["none", "host"],
        default="none",
        help="none (default): loopback only, downloads fail fast; host: share the host network",
    )
    p.add_argument(
        "--rootless",
        action="store_true",
        default=None,
        help="use a user namespace even as root (default: rootless when not root)",
    )
    d = DEFAULT_LIMITS.describe()  # the built-in defaults; $MINISANDBOX_LIMITS may change them
    p.add_argument(
        "--memory",
        type=_limit("memory_bytes"),
        default=argparse.SUPPRESS,
        help=f"memory limit of the whole sandbox (cgroup, else RLIMIT_AS per process); "
        f"'none' lifts it (default {d['memory_bytes']})",
    )
    p.add_argument(
        "--pids",
        type=_limit("pids"),
        default=argparse.SUPPRESS,
        help=f"process limit (cgroup, else RLIMIT_NPROC) (default {d['pids']})",
    )
    p.add_argument(
        "--cpu-seconds",
        type=_limit("cpu_seconds"),
        default=argparse.SUPPRESS,
        help=f"CPU time of all processes of one command, in total where a cgroup counts it, "
        f"else per process (RLIMIT_CPU; see `minisandbox doctor`) (default {d['cpu_seconds']})",
    )
    p.add_argument(
        "--sandbox-cpu-seconds",
        type=_limit("sandbox_cpu_seconds"),
        default=argparse.SUPPRESS,
        help=f"CPU time of everything the sandbox runs, background processes included; past it every "
        f"process is killed (cgroup only; see `minisandbox doctor`) "
        f"(default {d['sandbox_cpu_seconds']})",
    )
    p.add_argument(
        "--file-size",
        type=_limit("file_size_bytes"),
        default=argparse.SUPPRESS,
        help=f"largest file a process may write (RLIMIT_FSIZE) (default {d['file_size_bytes']})",
    )
    p.add_argument(
        "--tmpfs",
        type=_limit("tmpfs_bytes"),
        default=argparse.SUPPRESS,
        help=f"one budget for /tmp, /root, /dev/shm and the writable layers' changes (default {d['tmpfs_bytes']})",
    )
    p.add_argument(
        "--max-output",
        type=_limit("output_bytes"),
        default=argparse.SUPPRESS,
        help=f"output shown per command; the rest is dropped (default {d['output_bytes']})",
    )
    p.add_argument(
        "--no-seccomp",
        action="store_true",
        help="debugging only: no seccomp filter (nested namespaces, keyrings, bpf become reachable)",
    )
    p.add_argument(
        "--allow-ptrace",
        action="store_true",
        help="let commands ptrace the sandbox's other processes (gdb -p, strace -p); off by default",
    )
    p.add_argument("--scratch", help="directory for on-disk upper layers (default: tmpfs inside the sandbox)")
    p.add_argument("--copy-layers", action="store_true", help="copy layers instead of overlaying them")
    p.add_argument("--timeout", type=float, help="kill the command's process tree after this many seconds")


def _options(args: argparse.Namespace) -> dict:
    """SandboxConfig fields from the options: the default limits ($MINISANDBOX_LIMITS), with
    each limit option given on the command line replacing its field."""
    changes = {field: getattr(args, opt) for opt, field in _LIMIT_OPTIONS.items() if hasattr(args, opt)}
    return {
        "network": args.network,
        "rootless": args.rootless,
        "scratch_dir": args.scratch,
        "copy_layers": args.copy_layers,
        "limits": Limits.default()._replace(**changes),
        "seccomp": not args.no_seccomp,
        "ptrace": args.allow_ptrace,
    }


@contextlib.contextmanager
def _task_sandbox(args: argparse.Namespace, diff: bool = True) -> Iterator:
    """The task's sandbox in its start state (minisandbox.task); `diff=False`: no diff will
    be taken (no start-state snapshot). The sandbox fork server is started first, as a fork
    of this process (`rootfs.prestart`: no second interpreter to start, ready at once), while
    this process imports the task machinery and reads the task's documents (a worker of the
    node-local helper uses its helper's server instead)."""
    from minisandbox.sandbox.rootfs import prestart

    prestart(fork_self=True)
    from minisandbox.task import open_task

    ts = open_task(args.task_id, args.store, cache=args.cache, diff=diff, **_options(args))
    try:
        yield ts.sandbox
    finally:
        ts.close()


def _parse_layer(text: str):
    import argparse

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
            raise UsageError(f"--python {text}: cannot tell the interpreter version; pass VERSION:PREFIX")
        return version, text
    interp = interpreters.find_interpreter(text)
    return interp.version, interp.prefix


def _argv(cmd: list[str]) -> list[str]:
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd:
        raise UsageError("no command given: add `-- CMD ...` after the task id (or use `minisandbox shell TASK_ID`)")
    return ["bash", "-c", cmd[0]] if len(cmd) == 1 else cmd


#: Seconds a `run` command runs before `on_long` is called (`_run_streaming`).
LONG_COMMAND = 0.2


def _run_streaming(
    sb,  # noqa: ANN001 - a Sandbox
    argv: list[str],
    timeout: float | None,
    on_long: Callable[[], None] | None = None,
) -> int:
    """Run with the sandbox's stdout/stderr passed on to ours as they come, at most
    `sb.max_output` bytes in all (the rest is read and dropped, with one note on stderr:
    a command printing without end cannot flood the terminal or a log). One-shot: what
    the command leaves running is killed when it returns; a failure caused by a limit or a
    signal gets one line saying so on stderr (`Sandbox.explain`). `on_long`: called once if
    the command is still running after `LONG_COMMAND` seconds."""
    from minisandbox.sandbox.rootfs import DEVNULL, wait_readable

    sys.stdout.flush()
    sys.stderr.flush()
    pipes = [os.pipe2(os.O_CLOEXEC) for _ in range(2)]
    try:
        cid = sb.spawn(argv, stdin=DEVNULL, stdout=pipes[0][1], stderr=pipes[1][1])
    finally:
        for _r, w in pipes:
            os.close(w)
    dest = {pipes[0][0]: sys.stdout.fileno(), pipes[1][0]: sys.stderr.fileno()}
    budget, seen = sb.max_output, 0
    cpu = sb.cpu_watch(cid)  # the per-command CPU total, where a cgroup counts it
    started = time.monotonic()
    deadline = None if timeout is None else started + timeout
    code: int | None = None
    drain_end = 0.0
    told = False  # a line on stderr already says why it ended
    try:
        while dest:
            _check_terminated()
            now = time.monotonic()
            if code is None:
                code = sb.poll(cid)
                if code is not None:
                    drain_end = now + 0.02  # a background process may keep the pipes open
                    if code != 0 and cpu is not None and cpu.exceeded(force=True):  # the watcher got there first
                        print(cpu.message().strip(), file=sys.stderr)
                        told = True
            elif now >= drain_end:
                break
            if code is None and cpu is not None and cpu.exceeded():
                cpu.stop()
                code = sb.wait(cid, 30)
                cpu.exceeded(force=True)
                print(cpu.message().strip(), file=sys.stderr)
                told = True
                drain_end = time.monotonic() + 0.02
                continue
            if code is None and on_long is not None and now - started >= LONG_COMMAND:
                on_long()
                on_long = None
            if code is None and deadline is not None and now >= deadline:
                sb.kill(cid)
                sb.kill_leftovers()
                print(f"minisandbox: command timed out after {timeout} s; killed its process tree", file=sys.stderr)
                return 124
            wait = 0.2 if deadline is None else max(0.0, min(0.2, deadline - now))
            if on_long is not None:
                wait = max(0.0, min(wait, started + LONG_COMMAND - now))
            for fd in wait_readable(list(dest), wait if code is None else max(0.0, drain_end - now)):
                data = os.read(fd, 1 << 16)
                if not data:
                    del dest[fd]
                    continue
                keep = data[: max(0, budget - seen)]
                seen += len(data)
                view = memoryview(keep)
                while view:
                    view = view[os.write(dest[fd], view) :]
        if code is None:  # both pipes closed first: the CPU watcher's kill also closes them
            over = cpu is not None and cpu.exceeded(force=True)  # read before `wait` removes the cgroup
            code = sb.wait(cid)
            if code != 0 and over:
                print(cpu.message().strip(), file=sys.stderr)
                told = True
    except KeyboardInterrupt:
        sb.kill(cid)
        return 130
    finally:
        for r, _w in pipes:
            os.close(r)
    if seen > budget:
        print(
            f"minisandbox: output truncated: {seen} bytes written, the first {budget} shown "
            f"(--max-output / MINISANDBOX_LIMITS output=)",
            file=sys.stderr,
        )
    if cpu is None and code == -signal.SIGXCPU:
        from minisandbox.sandbox.sandbox import rlimit_cpu_message

        print(rlimit_cpu_message(sb.limits.limits.cpu_seconds if sb.limits else None).strip(), file=sys.stderr)
        told = True
    if code != 0 and not told:
        cause = sb.explain(code)
        if cause:
            print(f"minisandbox: the command ended with status {code}: {cause}", file=sys.stderr)
    sb.kill_leftovers()  # one-shot: nothing it started outlives it (nor changes the diff)
    return 128 - code if code < 0 else code


#: Called with the exit status once the command's output is all written, before the sandbox
#: is closed (the node-local helper's worker answers its caller then: teardown is off the
#: caller's clock). None: nothing to tell.
ON_RESULT = None


class Terminated(BaseException):
    """SIGTERM or SIGHUP arrived while a command held a sandbox open (`closing_on_termination`):
    raised in the main thread, so the block holding the sandbox closes it on the way out."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


#: The signals that end a `run` (or `sandbox-exec`) after its sandbox is closed.
TERMINATING = (signal.SIGTERM, signal.SIGHUP)


#: The terminating signal received, if any: set once by `_raise_terminated` and checked
#: again by `_run_streaming`'s loop and `closing_then_ending`, so the process still ends by
#: it when code on the way swallowed the exception.
_RECEIVED: list[int] = []


def _raise_terminated(signum: int, _frame: object) -> None:
    if _RECEIVED:  # closing already: a second one does not interrupt the close
        return
    _RECEIVED.append(signum)
    raise Terminated(signum)


def _check_terminated() -> None:
    """Raise `Terminated` if a terminating signal came (its exception may have been lost)."""
    if _RECEIVED:
        raise Terminated(_RECEIVED[0])


def closing_on_termination() -> dict[int, object] | None:
    """Make SIGTERM and SIGHUP raise `Terminated` instead of ending the process on the spot.

    Why: `timeout`, Slurm, Ray and most harnesses stop a command with SIGTERM; ended on
    the spot, a `run` left its sandbox's cgroups, scratch directory and crash record for
    the next start on the node to reap (and none on a node that starts no more). Raised,
    the sandbox is closed as on any error, then `end_by_signal` ends the process by the
    same signal (its exit status is what it was). Only signals whose action is the default
    are taken (a program that calls `main` with handlers of its own keeps them); None
    outside the main thread. Give the result to `restore_signals`."""
    if threading.current_thread() is not threading.main_thread():
        return None
    return {s: signal.signal(s, _raise_terminated) for s in TERMINATING if signal.getsignal(s) == signal.SIG_DFL}


def restore_signals(old: dict[int, object] | None) -> None:
    """Undo `closing_on_termination`."""
    for s, handler in (old or {}).items():
        signal.signal(s, handler)


def end_by_signal(signum: int) -> None:
    """End this process by `signum`'s default action, after flushing stdout and stderr and
    running the exit handlers (the crash-cleanup record goes there): a caller sees the
    status it would have seen without `closing_on_termination`. Never returns."""
    try:
        from minisandbox.cli import run_exit_handlers

        run_exit_handlers()
    finally:
        signal.signal(signum, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [signum])
        os.kill(os.getpid(), signum)
        os._exit(128 + signum)  # (not reached: the default action of both is to terminate)


def closing_then_ending(body: Callable[[], int]) -> int:
    """`body()` (a command that holds a sandbox in a `with`) under `closing_on_termination`:
    a SIGTERM or SIGHUP closes the sandbox, then ends the process by that signal."""
    old = closing_on_termination()
    try:
        code = body()
        _check_terminated()  # (the exception was swallowed on the way: the signal still ends it)
        return code
    except Terminated as exc:  # the sandbox is closed by now
        end_by_signal(exc.signum)
        raise  # (not reached)
    finally:
        restore_signals(old)


def cmd_run(args: argparse.Namespace) -> int:
    return closing_then_ending(lambda: _run_task(args))


def _run_task(args: argparse.Namespace) -> int:
    argv = _argv(args.cmd)
    with _task_sandbox(args, diff=args.diff) as sb:
        from minisandbox.cli import resume_gc
        from minisandbox.cli.helperclient import start_pending

        resume_gc()
        # a helper `auto` found missing starts beside a command that runs long, else when
        # this process ends (`cli.main`): its start-up (about 95 ms of CPU, an interpreter
        # importing the package) would otherwise compete with a short call on a small node
        return run_in(sb, argv, args, on_long=start_pending)


def run_in(
    sb,  # noqa: ANN001 - a Sandbox
    argv: list[str],
    args: argparse.Namespace,
    on_long: Callable[[], None] | None = None,
) -> int:
    """`run`'s command in the open sandbox `sb`: streamed output, the diff with --diff;
    `on_long` as in `_run_streaming`."""
    code = _run_streaming(sb, argv, args.timeout, on_long)
    if args.diff:
        sys.stdout.write(sb.diff())
    if ON_RESULT is not None:
        sys.stdout.flush()
        ON_RESULT(code)
    return code


def cmd_exec(args: argparse.Namespace) -> int:
    return closing_then_ending(lambda: _exec_layers(args))


def _exec_layers(args: argparse.Namespace) -> int:
    from minisandbox.sandbox.sandbox import Sandbox

    argv = _argv(args.cmd) if [c for c in args.cmd if c != "--"] else None
    with Sandbox(
        args.layer or [], interpreter=_interpreter(args.python), **_options(args), env=_venv_env(args.layer or [])
    ) as sb:
        if argv is None:  # no command: a persistent shell session on stdin
            return _interactive(sb)
        code = _run_streaming(sb, argv, args.timeout)
        if args.diff:
            sys.stdout.write(sb.diff())
        return code


def _venv_env(layers: list) -> dict[str, str]:
    """A layer at the canonical venv path is the task's environment: activate it as `run`
    does (its bin/ first on PATH), so `sandbox-exec ... -- python -m pytest` finds the
    venv's python and tools."""
    from minisandbox.paths import VENV_PATH
    from minisandbox.sandbox.sandbox import DEFAULT_ENV

    if not any(layer.mount_path == VENV_PATH for layer in layers):
        return {}
    return {"PATH": f"{VENV_PATH}/bin:{DEFAULT_ENV['PATH']}", "VIRTUAL_ENV": VENV_PATH}


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
            print(f"[exit {r.returncode}{': ' + r.cause if r.cause else ''}]", file=sys.stderr)


def cmd_shell(args: argparse.Namespace) -> int:
    return closing_then_ending(lambda: _shell_task(args))


def _shell_task(args: argparse.Namespace) -> int:
    with _task_sandbox(args) as sb:
        return _interactive(sb)


STORE_HELP = (
    "published store URL (default: $MINISANDBOX_STORE, else the store: of ./config/config.yaml, "
    "else ./results/store; all relative to the current directory)"
)


def register(sub: argparse._SubParsersAction) -> None:
    for add in REGISTER.values():
        add(sub)


def _register_run(sub: argparse._SubParsersAction) -> None:
    import argparse

    p = sub.add_parser(
        "run",
        help="Run a command in a task's sandbox (start state, network off).",
        description="Run CMD in a fresh sandbox of TASK_ID (its layers fetched from the store into "
        "the node cache first); exits with the command's exit code.",
    )
    p.add_argument("--store", help=STORE_HELP)
    p.add_argument("--cache", help="node cache dir (default: $MINISANDBOX_CACHE or ~/.cache/minisandbox)")
    p.add_argument("--diff", action="store_true", help="print the repo's diff since the start state afterwards")
    _add_sandbox_options(p)
    p.add_argument("task_id", metavar="TASK_ID", help="instance id of a task in the store")
    p.add_argument("cmd", nargs=argparse.REMAINDER, help="-- CMD ... (one argument: run with bash -c)")
    p.set_defaults(func=cmd_run)


def _register_shell(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "shell",
        help="Open an interactive bash session in a task's sandbox.",
        description="A persistent bash session in a fresh sandbox of TASK_ID; Ctrl-C interrupts "
        "the running command, EOF (Ctrl-D) ends the session.",
    )
    p.add_argument("--store", help=STORE_HELP)
    p.add_argument("--cache", help="node cache dir (default: $MINISANDBOX_CACHE or ~/.cache/minisandbox)")
    _add_sandbox_options(p)
    p.add_argument("task_id", metavar="TASK_ID", help="instance id of a task in the store")
    p.set_defaults(func=cmd_shell)


def _register_exec(sub: argparse._SubParsersAction) -> None:
    import argparse

    p = sub.add_parser(
        "sandbox-exec",
        help="Run a command in a sandbox over layer directories (no store).",
        description="A sandbox over restored layer directories given with --layer; no store or "
        "cache is involved. Without CMD, runs a shell session reading stdin.",
    )
    p.add_argument(
        "--layer",
        action="append",
        type=_parse_layer,
        metavar="DIR:MOUNTPATH[:ro|rw]",
        help="a restored tree and where it appears (writable overlay unless :ro); repeatable",
    )
    p.add_argument(
        "--python",
        metavar="VERSION:PREFIX|PREFIX|VERSION",
        help="base interpreter to bind read-only at PREFIX (the venv's pyvenv.cfg home)",
    )
    p.add_argument("--diff", action="store_true", help="print the diff of /testbed since start afterwards")
    _add_sandbox_options(p)
    p.add_argument(
        "cmd",
        nargs=argparse.REMAINDER,
        help="-- CMD ... (one argument: run with bash -c; none: a shell session reading stdin)",
    )
    p.set_defaults(func=cmd_exec)


#: Command -> the function adding its parser (`minisandbox.cli.build_parser` builds only the
#: one a call names: two thirds of the parser's arguments are the other commands').
REGISTER = {"run": _register_run, "shell": _register_shell, "sandbox-exec": _register_exec}


#: `run`'s options as `parse_run` reads them: option -> (attribute, how its value is read;
#: None: a flag, True when given). tests/cli/test_parse_run.py holds it to `_register_run`'s.
_RUN_OPTIONS = {
    "--store": ("store", str),
    "--cache": ("cache", str),
    "--diff": ("diff", None),
    "--network": ("network", lambda text: _choice(text, ("none", "host"))),
    "--rootless": ("rootless", None),
    **{f"--{opt.replace('_', '-')}": (opt, _read_limit(field)) for opt, field in _LIMIT_OPTIONS.items()},
    "--no-seccomp": ("no_seccomp", None),
    "--allow-ptrace": ("allow_ptrace", None),
    "--scratch": ("scratch", str),
    "--copy-layers": ("copy_layers", None),
    "--timeout": ("timeout", float),
}
#: What argparse leaves in the namespace of a `run` for each option not given (the limit
#: options are left out: `_options` keeps the default limits for those).
_RUN_DEFAULTS = {
    "store": None,
    "cache": None,
    "diff": False,
    "network": "none",
    "rootless": None,
    "no_seccomp": False,
    "allow_ptrace": False,
    "scratch": None,
    "copy_layers": False,
    "timeout": None,
}


def _choice(text: str, choices: tuple[str, ...]) -> str:
    if text not in choices:
        raise ValueError(f"{text!r} is not one of {choices}")
    return text


def parse_run(argv: list[str]) -> dict | None:
    """The attributes argparse would give `run ARGV` (ARGV: the words after `run`), for the
    common form `[OPTION ...] TASK_ID [--] CMD ...` with options spelled out; None for
    anything else (help, abbreviations, a value argparse would refuse or read differently,
    options after the task id): the caller then parses with argparse, for its help and its
    errors."""
    values: dict = dict(_RUN_DEFAULTS)
    i = 0
    while i < len(argv) and argv[i].startswith("-"):
        word = argv[i]
        name, eq, text = word.partition("=")
        option = _RUN_OPTIONS.get(name)
        if option is None:
            return None
        dest, read = option
        if read is None:
            if eq:
                return None
            values[dest] = True
            i += 1
            continue
        if not eq:
            if i + 1 >= len(argv) or argv[i + 1].startswith("-"):
                return None
            text = argv[i + 1]
            i += 1
        try:
            values[dest] = read(text)
        except (ValueError, LimitsError):  # argparse says what is wrong with it
            return None
        i += 1
    if i >= len(argv):
        return None  # no task id: argparse's error
    cmd = argv[i + 1 :]
    if cmd[:1] == ["--"]:
        cmd = cmd[1:]  # (as argparse drops it; `_argv` drops one more, as before)
    elif any(word.startswith("-") for word in cmd):
        return None  # options after the task id: what argparse makes of them is its business
    return {**values, "task_id": argv[i], "cmd": cmd, "func": cmd_run}


#: Command -> its parser without argparse for the common case (`minisandbox.cli` falls back to
#: the argparse parser when it returns None).
PARSE = {"run": parse_run}
