"""The node-local helper: a per-user process that keeps `minisandbox run` warm between calls.

Why: most of a `minisandbox run TASK -- CMD` process is start-up (the interpreter, the
package's imports, the sandbox fork server, the scan for local interpreters), the same on
every call. The helper does it once; for each call it forks a worker (a copy of the warm
process, about a millisecond) that takes the caller's stdin/stdout/stderr, working
directory, umask and environment and runs the very same `minisandbox.cli.main(argv)` the
caller would have run in-process. The worker is an ordinary sandbox controller: the same
code creates the sandbox with the same limits, seccomp filter, non-dumpable init and
helpers, and records itself for crash cleanup (minisandbox.sandbox.leftovers) as any
controller does.

Security model (docs/sandbox.md "The node-local helper"):
* one helper per user *and context*: its socket lives in a directory only this user can
  enter (mode 0700, checked with lstat), is itself mode 0600, and its name carries a digest
  of the context (`helperclient.context`: credentials, capabilities, seccomp, cgroup,
  namespaces, rlimits, LSM label, executable, the code it runs);
* every connection is checked: the peer's uid (SO_PEERCRED) must be the helper's, and the
  peer's context, read by the helper from /proc/<peer pid>, must equal the helper's own; a
  refused caller runs in-process (it gets nothing it could not do itself);
* the helper is not dumpable (another process of the user cannot read its memory through
  ptrace or /proc/<pid>/mem), and runs nothing but its workers;
* it exits when idle ($MINISANDBOX_HELPER_IDLE seconds, default 60), when the code it runs
  changed on disk, and on SIGTERM; a killed helper leaves only its socket file (replaced by
  the next one); its workers are sandbox controllers like any other.

Started on demand by `minisandbox run` (`helperclient.start_helper`), or explicitly with
`minisandbox helper start`; `MINISANDBOX_HELPER=off` disables it.
"""

from __future__ import annotations

import argparse
import errno
import fcntl
import os
import signal
import socket
import struct
import sys
import time

from minisandbox.cli import helperclient

#: Seconds without a call after which the helper exits ($MINISANDBOX_HELPER_IDLE).
DEFAULT_IDLE = 60.0
PR_SET_DUMPABLE = 4
#: Environment variables whose values the warm interpreter scan depends on: a worker whose
#: caller has other values scans again.
_SCAN_ENV = ("HOME", "PATH", "PYENV_ROOT", "UV_PYTHON_INSTALL_DIR", "XDG_DATA_HOME")


def idle_seconds() -> float:
    try:
        return float(os.environ.get("MINISANDBOX_HELPER_IDLE", DEFAULT_IDLE))
    except ValueError:
        return DEFAULT_IDLE


_LIBC = []  # the C library's handle, loaded once in the helper (a worker inherits it)


def _set_dumpable(on: bool) -> None:
    if not _LIBC:
        import ctypes

        _LIBC.append(ctypes.CDLL(None, use_errno=True))
    _LIBC[0].prctl(PR_SET_DUMPABLE, 1 if on else 0, 0, 0, 0)


def _warm() -> dict[str, str]:
    """Import and start what every `run` needs; the scan's environment (see _SCAN_ENV)."""
    import minisandbox.cli as cli
    import minisandbox.cli.sandboxcmds  # noqa: F401
    import minisandbox.node.published  # noqa: F401
    import minisandbox.node.verified as verified
    import minisandbox.task  # noqa: F401
    from minisandbox.sandbox import interpreters, rootfs

    cli.PARSER_CACHE = {}
    cli.build_parser([cli.COMMANDS["run"]])  # (a spare's)
    cli.build_parser([cli.COMMANDS["run"]], "run")  # (a worker's `main`)
    verified._code_tag()
    _warm_caches()
    rootfs.prestart()
    try:
        interpreters._scan()
    except Exception:  # noqa: BLE001 - a worker scans again and reports it
        pass
    return {k: os.environ.get(k, "") for k in _SCAN_ENV}


def _warm_caches() -> None:
    """Fill the caches every worker would otherwise fill again after its fork (a fork
    copies each page it writes, so what a worker compiles costs it twice): the regular
    expressions of the store documents' checks and every module-level `LazyPattern` of the
    package."""
    from minisandbox import manifest
    from minisandbox.fsutil import LazyPattern

    manifest.plain_name("t")
    manifest.chunk_path("0" * 64)
    for name, mod in list(sys.modules.items()):
        if name.split(".")[0] == "minisandbox":
            for value in list(vars(mod).values()):
                if isinstance(value, LazyPattern):
                    value.fullmatch("")


def _code_files() -> dict[str, int]:
    """mtime of every loaded module of the package: changed code means a new helper."""
    out = {}
    for name, mod in list(sys.modules.items()):
        path = getattr(mod, "__file__", None)
        if name.split(".")[0] == "minisandbox" and path:
            try:
                out[path] = os.stat(path).st_mtime_ns
            except OSError:
                out[path] = -1
    return out


def _stale(files: dict[str, int]) -> bool:
    for path, mtime in files.items():
        try:
            if os.stat(path).st_mtime_ns != mtime:
                return True
        except OSError:
            return True
    return False


def _peer(conn: socket.socket) -> tuple[int, int, int]:
    pid, uid, gid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))
    return pid, uid, gid


#: getsockopt: a pidfd of the process that connected (Linux 6.5; Python 3.11 lacks the name).
SO_PEERPIDFD = getattr(socket, "SO_PEERPIDFD", 77)


def check_peer(conn: socket.socket, own_context: bytes) -> str | None:
    """Why the connected process may not use this helper (None: it may): another uid
    (SO_PEERCRED), or another context than the helper's (read from /proc/<pid>). The
    process that connected is held by a pidfd (SO_PEERPIDFD) while its /proc files are
    read, and must still run afterwards: a caller that exited cannot have its pid reused by
    a process of another context in between. (Kernels before 6.5 have no SO_PEERPIDFD: there
    the check reads /proc/<pid> of the connecting pid as it is.)"""
    pid, uid, _gid = _peer(conn)
    if uid != os.getuid():
        return f"uid {uid} is not the helper's ({os.getuid()})"
    try:
        pidfd: int | None = struct.unpack("i", conn.getsockopt(socket.SOL_SOCKET, SO_PEERPIDFD, 4))[0]
    except OSError:
        pidfd = None
    try:
        if pidfd is not None and _readable_fd(pidfd):
            return "the caller exited"
        if pid <= 0 or helperclient.context(str(pid)) != own_context:
            return "another context (credentials, capabilities, cgroup, namespaces or limits differ)"
        if pidfd is not None and _readable_fd(pidfd):
            return "the caller exited"
    finally:
        if pidfd is not None:
            os.close(pidfd)
    return None


def _readable_fd(fd: int) -> bool:
    """A pidfd is readable once its process has exited."""
    import select

    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(0))


def _parse_request(data: bytes) -> tuple[int, list[str], dict[bytes, bytes]]:
    parts = data.split(b"\0")
    if parts[0] != helperclient.PROTOCOL or len(parts) < 3:
        raise ValueError("not a request of this protocol")
    umask, argc = int(parts[1]), int(parts[2])
    argv = [os.fsdecode(p) for p in parts[3 : 3 + argc]]
    env = {}
    for item in parts[3 + argc :]:
        key, sep, value = item.partition(b"=")
        if sep:
            env[key] = value
    return umask, argv, env


def _recv_request(conn: socket.socket):
    data, anc, _flags, _ = conn.recvmsg(1 << 20, socket.CMSG_LEN(8 * 4), socket.MSG_CMSG_CLOEXEC)
    fds: list[int] = []
    for level, typ, cdata in anc:
        if level == socket.SOL_SOCKET and typ == socket.SCM_RIGHTS:
            fds += [int.from_bytes(cdata[i : i + 4], sys.byteorder) for i in range(0, len(cdata) - 3, 4)]
    return data, fds


def _become(umask: int, env: dict[bytes, bytes], cwd_fd: int, scan_env: dict[str, str], lock_path: str) -> None:
    """In a forked process: the caller's working directory, umask and environment; the
    helper's fork server shared; dumpable as the in-process command is (the helper is not)."""
    signal.set_wakeup_fd(-1)
    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGCHLD, signal.SIGPIPE):
        signal.signal(
            s,
            signal.default_int_handler
            if s == signal.SIGINT
            else signal.SIG_IGN
            if s == signal.SIGPIPE
            else signal.SIG_DFL,
        )
    os.fchdir(cwd_fd)
    os.umask(umask)
    _set_dumpable(True)
    for key in [k for k in os.environb if k not in env]:
        del os.environb[key]
    for key, value in env.items():  # (only what differs: each change is a putenv)
        if os.environb.get(key) != value:
            os.environb[key] = value
    if {k: os.environ.get(k, "") for k in _SCAN_ENV} != scan_env:
        from minisandbox.sandbox import interpreters

        interpreters._scan.cache_clear()
    from minisandbox.sandbox import rootfs

    rootfs.share_fork_server(lock_path)


def _take_stdio(fds: list[int]) -> None:
    """The caller's stdin, stdout and stderr become this process's (fds: those three first)."""
    for target, fd in enumerate(fds[:3]):
        os.dup2(fd, target)
    for fd in fds:
        if fd > 2:
            os.close(fd)
    sys.stdin = open(0, closefd=False)  # noqa: SIM115 - the caller's, for the worker's life
    sys.stdout = open(1, "w", buffering=1 if os.isatty(1) else -1, closefd=False)  # noqa: SIM115
    sys.stderr = open(2, "w", buffering=1, errors="backslashreplace", closefd=False)  # noqa: SIM115


class _Reply:
    """Sends `exit N` to the caller once: when the command's output is written (before the
    sandbox is closed: `sandboxcmds.ON_RESULT`), else when the worker ends."""

    def __init__(self, conn: socket.socket, busy: int | None = None) -> None:
        #: `busy`: the write end of a pipe the helper watches: closed once the caller has its
        #: answer (the call no longer runs, as far as the helper's spares are concerned)
        self.conn, self.sent, self.busy = conn, False, busy

    def __call__(self, code: int) -> None:
        if self.sent:
            return
        self.sent = True
        try:
            self.conn.send(b"exit %d" % code)
        except OSError:
            pass
        if self.busy is not None:
            os.close(self.busy)
            self.busy = None


def _call_main(argv: list[str]) -> int:
    from minisandbox.cli import main

    try:
        return int(main(argv) or 0)
    except SystemExit as exc:  # argparse: usage errors, --help
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    except KeyboardInterrupt:
        return 130
    except BaseException:  # a bug: its traceback, as the in-process command would print it
        import traceback

        traceback.print_exc()
        return 1


def _end_worker(reply: _Reply, code: int) -> None:
    """Flush, run exit handlers, answer the caller (if not yet) and leave, whatever happens:
    a worker never returns into the helper's loop."""
    try:
        try:
            sys.stdout.flush()
        except (BrokenPipeError, OSError):
            pass
        import atexit

        atexit._run_exitfuncs()
    except BaseException:  # noqa: BLE001
        pass
    finally:
        try:
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            reply(code)
        except BaseException:  # noqa: BLE001
            pass
        finally:
            os._exit(code & 0xFF)


def _worker(
    conn: socket.socket,
    scan_env: dict[str, str],
    lock_path: str,
    umask: int,
    argv: list[str],
    env: dict[bytes, bytes],
    fds: list[int],
    busy: int | None = None,
) -> None:
    """In the forked worker: become the caller (stdio, cwd, umask, environment), run
    `minisandbox ARGV` as the caller would have, send `exit N` (and close `busy`), and exit."""
    code = 1
    reply = _Reply(conn, busy)
    try:
        _become(umask, env, fds[3], scan_env, lock_path)
        _take_stdio(fds)
        _forward_signals(conn, reply)
        from minisandbox.cli import sandboxcmds

        sandboxcmds.ON_RESULT = reply
        code = _call_main(argv)
    except BaseException:  # noqa: BLE001 - reported as status 1
        pass
    finally:
        _end_worker(reply, code)


#: Seconds a spare sandbox waits for its call before it is closed.
SPARE_SECONDS = 30.0

#: Seconds a call waits for the spare of the last call of its kind to open its next
#: sandbox (it was answered: it is opening one) before it gets a worker of its own.
REOPEN_WAIT = 0.2


def spare_key(umask: int, argv: list[str], env: dict[bytes, bytes], cwd_fd: int) -> bytes | None:
    """What a call must share with an earlier one to be served by a sandbox opened for it in
    advance: everything but the command after `--` (umask, options, task, environment, the
    working directory's identity). None: not a `run ... -- CMD`."""
    if "run" not in argv or "--" not in argv[argv.index("run") :]:
        return None
    cut = argv.index("--", argv.index("run")) + 1
    st = os.fstat(cwd_fd)
    import hashlib

    h = hashlib.sha256(b"%d\0%d\0%d\0" % (umask, st.st_dev, st.st_ino))
    for item in argv[:cut]:
        h.update(os.fsencode(item) + b"\0")
    for k in sorted(env):
        h.update(k + b"=" + env[k] + b"\0")
    return h.digest()


def _spare(
    ctrl: socket.socket,
    scan_env: dict[str, str],
    lock_path: str,
    umask: int,
    argv: list[str],
    env: dict[bytes, bytes],
    cwd_fd: int,
    key: bytes,
) -> None:
    """A worker made before its call: it opens the sandbox a call with these argv (up to
    `--`), environment and directory would open, then waits on `ctrl` for that call. Used
    only for a matching call whose task the store still publishes unchanged; otherwise it
    closes the sandbox and serves the call as a plain worker. The helper closing `ctrl`
    (expiry, exit) closes the sandbox.

    After a call it answered normally the helper may keep it (`KEEP` on `ctrl`, see
    `_recycle`): it lets go of the caller's descriptors, opens the next sandbox, says
    `READY` and waits for the next call of the same kind, so a run of repeated calls costs
    one fork of the helper, not one per call (about 5 ms of CPU each: the fork, the pages
    the work copies, the exit)."""
    code = 1
    reply = None
    ts = None
    try:
        _become(umask, env, cwd_fd, scan_env, lock_path)
        os.close(cwd_fd)
        ts = _open_spare_sandbox(argv)
        while True:
            data, fds = _recv_request(ctrl)  # blocks until the call (or EOF: expired)
            if not data or len(fds) != 6:
                return
            conn = socket.socket(fileno=fds[0])
            reply = _Reply(conn, fds[5])
            c_umask, c_argv, c_env = _parse_request(data)
            from minisandbox.node.runtime import still_current

            if spare_key(c_umask, c_argv, c_env, fds[4]) != key or not still_current(ts.prepared, cache=ts.cache):
                ts.close()
                ts = None
                _worker(conn, scan_env, lock_path, c_umask, c_argv, c_env, fds[1:5], fds[5])  # never returns
            os.close(fds[4])
            _take_stdio(fds[1:4])
            pump = _forward_signals(conn, reply)
            code = _run_spare(ts, c_argv, reply)
            if not reply.sent or not _recycle(ctrl, conn, pump):
                return
            reply = None
            done, ts = ts, None
            try:
                ts = _open_spare_sandbox(argv)  # before closing the last one: the next call may come soon
                ctrl.send(READY)
            finally:
                done.close()  # (also when the helper is gone meanwhile: nothing of it left behind)
    except BaseException:  # noqa: BLE001 - a spare that fails only means the next call opens its own
        pass
    finally:
        if ts is not None:
            try:
                if reply is not None and not reply.sent:
                    sys.stdout.flush()
                    reply(code)
                ts.close()
            except BaseException:  # noqa: BLE001
                pass
        if reply is None:  # expired, or the helper is gone: the warm sandbox a kept spare
            _exit_quietly()  # prepared for its next call goes with it (exit handlers)
        _end_worker(reply, code)


def _exit_quietly() -> None:
    """Leave with status 0 after running the exit handlers (a warm sandbox and its spare
    cgroups are removed there), whatever they raise."""
    try:
        import atexit

        atexit._run_exitfuncs()
    except BaseException:  # noqa: BLE001
        pass
    finally:
        os._exit(0)


#: On a spare's control socket: from the helper after a call, keep serving calls of this
#: kind; from the spare, its next sandbox is open.
KEEP, READY = b"keep", b"ready"


def _open_spare_sandbox(argv: list[str]):  # -> minisandbox.task.TaskSandbox
    """The sandbox a `run` call with `argv` opens, with its command spawner started (a kept
    start state runs no command before the caller's)."""
    from minisandbox.cli import _apply_global_options

    args = _run_args(argv)
    _apply_global_options(args)
    if args.store is None:
        from minisandbox.paths import default_store_origin

        args.store, args.store_origin = default_store_origin()
    from minisandbox.cli.sandboxcmds import _options
    from minisandbox.task import open_task

    ts = open_task(args.task_id, args.store, cache=args.cache, diff=args.diff, **_options(args))
    ts.sandbox.prepare_commands()
    return ts


def _recycle(ctrl: socket.socket, conn: socket.socket, pump) -> bool:  # noqa: ANN001 - a Thread
    """After a call answered normally: whether the helper keeps this spare for the next call
    of its kind (it says so on `ctrl` right after handing the call over: `KEEP`, else it
    closes `ctrl`). If it does, the caller's descriptors are let go first (its stdout
    must see EOF when its command is done, as when a worker exits)."""
    try:
        if ctrl.recv(16) != KEEP:
            return False
    except OSError:
        return False
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (BrokenPipeError, OSError):
        return False
    null = os.open(os.devnull, os.O_RDWR)
    for target in (0, 1, 2):
        os.dup2(null, target)
    os.close(null)
    try:  # the call's signal thread ends on EOF before its socket's number can be reused
        conn.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    pump.join(1.0)
    conn.close()
    return not pump.is_alive()


def _run_args(argv: list[str]):  # -> argparse.Namespace or types.SimpleNamespace
    """A `run` call's arguments as `main` reads them: its own parser for the common form,
    argparse for anything else (whose errors exit, as in `main`)."""
    from minisandbox.cli import COMMANDS, _parse_common, build_parser

    args = _parse_common(argv)
    return args if args is not None else build_parser([COMMANDS["run"]]).parse_args(argv)


def _run_spare(ts, argv: list[str], reply: _Reply) -> int:  # noqa: ANN001 - a TaskSandbox
    """The call's command in the spare's open sandbox, with `main`'s error handling (a
    SIGTERM or SIGHUP the caller forwards closes the sandbox, then ends this process by
    it, as `run` in-process: `sandboxcmds.closing_on_termination`)."""
    from minisandbox.cli.sandboxcmds import Terminated, _argv, closing_then_ending, run_in
    from minisandbox.errors import MinisandboxError

    def call() -> int:
        try:
            args = _run_args(argv)
            return run_in(ts.sandbox, _argv(args.cmd), args)
        except Terminated:
            ts.close()  # before the process ends (the spare's own exit would, but never comes)
            raise

    try:
        code = closing_then_ending(call)
        sys.stdout.flush()
        reply(code)
        return code
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 141
    except MinisandboxError as exc:
        print(f"minisandbox run: error: {exc}", file=sys.stderr)
        return 1


def _forward_signals(conn: socket.socket, reply: _Reply):  # -> threading.Thread
    """A thread turning the caller's `signal N` messages into signals to this worker; the
    caller going away is an interrupt (the sandbox is closed, as Ctrl-C would)."""
    import threading

    def pump() -> None:
        while True:
            try:
                msg = conn.recv(64)
            except OSError:
                msg = b""
            if msg.startswith(b"signal "):
                try:
                    os.kill(os.getpid(), int(msg[7:]))
                except (ValueError, OSError):
                    pass
                continue
            if not reply.sent:
                os.kill(os.getpid(), signal.SIGINT)
            return

    thread = threading.Thread(target=pump, daemon=True, name="helper-signals")
    thread.start()
    return thread


def serve(path: str, idle: float | None = None) -> int:
    """Listen on `path` and serve calls until idle; 0 when it served and exited, 1 when it
    could not take the socket (another helper has it, or the directory is not private)."""
    idle = idle_seconds() if idle is None else idle
    directory = os.path.dirname(path)
    if not helperclient.private_dir(directory, create=True):
        print(f"minisandbox helper: {directory} is not a private directory of this user (mode 0700)", file=sys.stderr)
        return 1
    if helperclient.socket_path() != path:
        print("minisandbox helper: the socket does not match this process's context", file=sys.stderr)
        return 1
    lock_fd = os.open(path + ".lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(lock_fd)
        return 1  # another helper serves this socket
    _set_dumpable(False)
    scan_env = _warm()
    files = _code_files()
    import gc

    gc.freeze()  # the warm objects stay out of the collector: fewer pages copied in each worker
    fork_lock = path + ".fork"
    try:
        os.unlink(path)  # a socket left by a killed helper
    except FileNotFoundError:
        pass
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET | socket.SOCK_CLOEXEC)
    old_umask = os.umask(0o177)
    try:
        listener.bind(path)
    finally:
        os.umask(old_umask)
    listener.listen(128)
    with open(os.open(path + ".pid", os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600), "w") as fh:
        fh.write(f"{os.getpid()}\n")
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(True))
    signal.signal(signal.SIGINT, lambda *_: stop.append(True))
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    workers: set[int] = set()
    pool = _SparePool(spares_max())

    def open_spare(
        key: bytes, umask: int, argv: list[str], env: dict[bytes, bytes], cwd_fd: int, drop: tuple[int, ...] = ()
    ) -> None:
        """Fork a spare for calls of `key` (see `_spare`); `drop`: descriptors of the call
        being served that the spare must not hold (the caller's stdio)."""
        ctrl, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        pid = os.fork()
        if pid == 0:
            ctrl.close()
            cwd_fd = os.dup(cwd_fd)  # its own: `_in_child` closes the pool's
            for fd in drop:
                os.close(fd)
            _in_child(listener, lock_fd, pool)
            _spare(theirs, scan_env, fork_lock, umask, argv, env, cwd_fd, key)
        theirs.close()
        pool.add(key, pid, ctrl)

    last = time.monotonic()
    try:
        while not stop:
            _reap(workers)
            pool.expire(workers, SPARE_SECONDS)
            pool.fill(open_spare)
            if not workers and not pool.idle and time.monotonic() - last > idle:
                break
            try:
                ready = listener.accept() if pool.wait(listener, 0.5) else None
            except InterruptedError:
                continue
            if ready is None:
                continue
            conn, _ = ready
            last = time.monotonic()
            with conn:
                if _stale(files):
                    _refuse(conn, "stale code")
                    break
                why = check_peer(conn, helperclient.context())  # its own now: it may have been moved
                if why is not None:
                    _refuse(conn, why)
                    continue
                try:
                    conn.settimeout(5.0)  # a caller stopped between connect and request stalls nobody
                    data, fds = _recv_request(conn)
                    conn.settimeout(None)  # blocking again: the worker or spare waits on it
                    umask, argv, env = _parse_request(data)
                    if len(fds) != 4:
                        raise ValueError("expected stdin, stdout, stderr and the working directory")
                except (OSError, ValueError) as exc:
                    _refuse(conn, str(exc))
                    continue
                try:
                    if any(
                        env.get(os.fsencode(k), b"") != os.environb.get(os.fsencode(k), b"")
                        for k in helperclient.CODE_ENV
                    ):
                        _refuse(conn, "another import path")
                        continue
                    key = spare_key(umask, argv, env, fds[3]) if pool.cap else None
                    spare = pool.take(key) if key else None
                    if spare is None and key and pool.reopening(key) and not pool.running(key):
                        pool.collect(REOPEN_WAIT, key)  # the last call's spare opens its next sandbox
                        spare = pool.take(key)
                    busy, busy_w = os.pipe()  # (see `_Reply`: its end comes when the caller has its answer)
                    fds.append(busy_w)
                    spared = spare is not None and _hand_over(spare, conn, data, fds)
                    if spared:
                        pid = spare[0]
                    else:
                        if spare is not None:
                            spare[1].close()
                            workers.add(spare[0])
                        pid = os.fork()
                        if pid == 0:
                            os.close(busy)
                            _in_child(listener, lock_fd, pool)
                            _worker(conn, scan_env, fork_lock, umask, argv, env, fds[:4], busy_w)
                    workers.add(pid)
                    want = key is not None and pool.called(key, busy, (umask, argv, env, fds[3]), spared)
                    if key is None:
                        os.close(busy)
                    if spared:  # the spare that serves it becomes the next one, or ends with it
                        if not (want and pool.recycle(key, pid, spare[1])):
                            spare[1].close()
                    elif want:
                        conn.close()  # (not the spare's: it serves a later call)
                        open_spare(key, umask, argv, env, fds[3], drop=(*fds[:3], busy_w))
                finally:
                    for fd in fds:
                        os.close(fd)
            pool.expire(workers, SPARE_SECONDS)
    finally:
        pool.expire(workers, 0.0)
        pool.forget_all()
        for suffix in ("", ".pid"):
            try:
                os.unlink(path + suffix)
            except FileNotFoundError:
                pass
        listener.close()
        os.close(lock_fd)
    while workers:  # running calls finish (they are their callers' commands)
        try:
            pid, _ = os.wait()
        except ChildProcessError:
            break
        workers.discard(pid)
    return 0


def _in_child(listener: socket.socket, lock_fd: int, pool: _SparePool) -> None:
    """In a freshly forked worker or spare: drop what only the helper may hold (the
    listening socket, the serving lock, the spares' control sockets, the calls' directories
    kept for later spares)."""
    listener.close()
    os.close(lock_fd)
    for spares in pool.idle.values():
        for _pid, ctrl, _t in spares:
            ctrl.close()
    for ctrl in pool.kept:
        ctrl.close()
    for *_request, cwd_fd, _t in pool.template.values():
        os.close(cwd_fd)
    for busy in pool.serving:
        os.close(busy)


def spares_max() -> int:
    """How many spares the helper opens for bursts, all kinds of call together
    ($MINISANDBOX_HELPER_SPARES; 0: no spares at all)."""
    try:
        return max(0, int(os.environ.get("MINISANDBOX_HELPER_SPARES", DEFAULT_SPARES)))
    except ValueError:
        return DEFAULT_SPARES


#: Spares opened for bursts at most (a burst of that many identical calls finds all its
#: sandboxes open when it comes again); the one spare beside a lone repeated call is not
#: counted against it.
DEFAULT_SPARES = 64


class _SparePool:
    """The spare sandboxes of each kind of call (`spare_key`), and how many to keep.

    A call that repeats within SPARE_SECONDS (an agent's or a rollout's calls on one task;
    one-off calls, e.g. an evaluation over many tasks, open none) gets one spare opened
    beside it when it is the only call of its kind running: the next such call finds its
    sandbox open. Calls that overlap (a burst) take the spares there are and the rest get
    plain workers, so a burst never pays for sandboxes besides its own; once none of its
    calls runs any more, a burst that more than one call found no spare for has the pool
    filled up to its number of calls (at most `cap`), so the same burst finds its sandboxes
    open when it comes again within SPARE_SECONDS (while fewer than `cap` spares are open
    in all). Spares unused for SPARE_SECONDS are closed."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        #: key -> [(pid, control socket, when made)]: sandboxes opened ahead of their calls
        self.idle: dict[bytes, list[tuple[int, socket.socket, float]]] = {}
        #: a call being served (the read end of its `_Reply` pipe) -> its key
        self.serving: dict[int, bytes] = {}
        #: key -> [calls, calls that found no spare] since its calls last all ended (a burst)
        self.burst: dict[bytes, list[int]] = {}
        #: key -> when a call of it came last
        self.seen: dict[bytes, float] = {}
        #: key of a repeated call -> (umask, argv, environment, working directory fd, last
        #: call): what a later spare for it is opened with
        self.template: dict[bytes, tuple[int, list[str], dict[bytes, bytes], int, float]] = {}
        #: control socket of a spare kept after its call -> (key, pid): it sends READY once
        #: its next sandbox is open (see `_spare`), and is idle again from then on
        self.kept: dict[socket.socket, tuple[bytes, int]] = {}

    def recycle(self, key: bytes, pid: int, ctrl: socket.socket) -> bool:
        """Keep the spare `pid` that is serving a call of `key` as the next spare of `key`,
        instead of forking another (False: it is gone)."""
        try:
            ctrl.send(KEEP)
        except OSError:
            return False
        self.kept[ctrl] = (key, pid)
        return True

    def reopening(self, key: bytes) -> bool:
        return any(k == key for k, _pid in self.kept.values())

    def wait(self, listener: socket.socket, timeout: float) -> bool:
        """Wait up to `timeout` seconds for a call on `listener` (True) while taking in kept
        spares that say READY."""
        import select

        poller = select.poll()
        poller.register(listener, select.POLLIN)
        for ctrl in self.kept:
            poller.register(ctrl, select.POLLIN)
        called = False
        for fd, _event in poller.poll(timeout * 1000):
            if fd == listener.fileno():
                called = True
            else:
                self._take_in(next(c for c in self.kept if c.fileno() == fd))
        return called

    def collect(self, timeout: float, key: bytes) -> None:
        """Wait up to `timeout` seconds for a kept spare of `key` to say READY."""
        import select

        deadline = time.monotonic() + timeout
        while self.reopening(key) and key not in self.idle:
            left = deadline - time.monotonic()
            if left <= 0:
                return
            poller = select.poll()
            mine = {c.fileno(): c for c, (k, _pid) in self.kept.items() if k == key}
            for fd in mine:
                poller.register(fd, select.POLLIN)
            for fd, _event in poller.poll(left * 1000):
                self._take_in(mine[fd])

    def _take_in(self, ctrl: socket.socket) -> None:
        key, pid = self.kept.pop(ctrl)
        try:
            msg = ctrl.recv(16)
        except OSError:
            msg = b""
        if msg == READY:
            self.add(key, pid, ctrl)
        else:  # it ended (its reap is the helper's, as for any worker)
            ctrl.close()

    def take(self, key: bytes) -> tuple[int, socket.socket, float] | None:
        spares = self.idle.get(key)
        if not spares:
            return None
        spare = spares.pop(0)  # the oldest: the likeliest to be open already
        if not spares:
            del self.idle[key]
        return spare

    def add(self, key: bytes, pid: int, ctrl: socket.socket) -> None:
        self.idle.setdefault(key, []).append((pid, ctrl, time.monotonic()))

    def running(self, key: bytes) -> int:
        """The calls of `key` whose callers do not have their answer yet."""
        if self.serving:
            import select

            poller = select.poll()
            for busy in self.serving:
                poller.register(busy, 0)  # (POLLHUP is always reported: the worker closed its end)
            for busy, _event in poller.poll(0):
                del self.serving[busy]
                os.close(busy)
        return sum(1 for k in self.serving.values() if k == key)

    def called(
        self, key: bytes, busy: int, request: tuple[int, list[str], dict[bytes, bytes], int], spared: bool
    ) -> bool:
        """Note a call of `key` (`busy`: the read end of its `_Reply` pipe, now the pool's;
        `spared`: served by a spare); True when a spare is to be opened beside it now (it
        repeats an earlier call, runs alone and finds none open)."""
        now = time.monotonic()
        repeated = now - self.seen.get(key, -1e9) < SPARE_SECONDS
        self.seen[key] = now
        for k in [k for k, t in self.seen.items() if now - t > SPARE_SECONDS]:
            del self.seen[k]
        if repeated:
            previous = self.template.pop(key, None)
            if previous is not None:
                os.close(previous[3])
            umask, argv, env, cwd_fd = request
            self.template[key] = (umask, argv, env, os.dup(cwd_fd), now)
            if not self.running(key):  # the first of a burst (or a call on its own)
                self.burst[key] = [0, 0]
            burst = self.burst.setdefault(key, [0, 0])
            burst[0] += 1
            burst[1] += 0 if spared else 1
        self.serving[busy] = key
        return repeated and self.running(key) == 1 and key not in self.idle

    def fill(self, open_spare) -> None:  # noqa: ANN001 - serve's open_spare
        """For each repeated kind of call whose last burst has ended and found spares
        missing for more than one call: open spares up to that burst's calls, while fewer
        than `cap` spares are open in all."""
        now = time.monotonic()
        for key, (umask, argv, env, cwd_fd, when) in list(self.template.items()):
            if now - when > SPARE_SECONDS:
                del self.template[key]
                self.burst.pop(key, None)
                os.close(cwd_fd)
                continue
            calls, missed = self.burst.get(key, (0, 0))
            if missed < 2 or self.running(key):
                continue  # (one call at a time: the spare opened beside each is enough)
            del self.burst[key]
            room = self.cap - sum(len(spares) for spares in self.idle.values())  # (all kinds together)
            for _ in range(min(calls - len(self.idle.get(key, [])), room)):
                open_spare(key, umask, argv, env, cwd_fd)

    def expire(self, workers: set[int], age: float) -> None:
        """Close the spares older than `age` seconds (they close their sandboxes and exit);
        `age` 0 also closes the kept ones still opening their next sandbox."""
        now = time.monotonic()
        if age <= 0:
            for ctrl in list(self.kept):
                ctrl.close()
            self.kept.clear()
        for key, spares in list(self.idle.items()):
            for spare in [sp for sp in spares if now - sp[2] >= age]:
                spares.remove(spare)
                spare[1].close()
                workers.add(spare[0])
            if not spares:
                del self.idle[key]

    def forget_all(self) -> None:
        for *_request, cwd_fd, _t in self.template.values():
            os.close(cwd_fd)
        self.template.clear()
        for busy in self.serving:
            os.close(busy)
        self.serving.clear()


def _hand_over(spare: tuple[int, socket.socket, float], conn: socket.socket, data: bytes, fds: list[int]) -> bool:
    """Pass the call (its request, connection and descriptors) to a spare; False when the
    spare is gone (its control socket is closed then; else the caller closes it or keeps
    the spare, `_SparePool.recycle`)."""
    pid, ctrl, _t = spare
    try:
        if os.waitpid(pid, os.WNOHANG)[0]:
            return False
        ctrl.sendmsg(
            [data],
            [
                (
                    socket.SOL_SOCKET,
                    socket.SCM_RIGHTS,
                    b"".join(fd.to_bytes(4, sys.byteorder) for fd in [conn.fileno(), *fds]),
                )
            ],
        )
    except (OSError, ChildProcessError):
        ctrl.close()
        return False
    return True


def _reap(workers: set[int]) -> None:
    for pid in list(workers):
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            done = pid
        if done:
            workers.discard(pid)


def _refuse(conn: socket.socket, why: str) -> None:
    try:
        conn.send(b"refused " + why.encode()[:400])
    except OSError as exc:
        if exc.errno not in (errno.EPIPE, errno.ECONNRESET):
            raise


def _helper_pid(path: str) -> int | None:
    try:
        return int(open(path + ".pid").read().strip())  # noqa: SIM115
    except (OSError, ValueError):
        return None


def cmd_helper(args: argparse.Namespace) -> int:
    path = args.socket or helperclient.socket_path(create_dir=args.helper_command in ("start", "serve"))
    if path is None:
        if args.helper_command in ("status", "stop"):
            print("not running")
            return 3 if args.helper_command == "status" else 0
        print(
            f"minisandbox helper: {helperclient.runtime_dir()} is not a private directory of this user "
            "(mode 0700): no helper",
            file=sys.stderr,
        )
        return 1
    if args.helper_command == "serve":
        os.chdir("/")  # a long-lived process: it keeps no caller's directory busy
        return serve(path, args.idle)
    pid = _helper_pid(path)
    alive = pid is not None and _alive(path)
    if args.helper_command == "status":
        print(f"running (pid {pid}, socket {path})" if alive else f"not running (socket {path})")
        return 0 if alive else 3
    if args.helper_command == "stop":
        if alive and pid:
            os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + 10
            while _alive(path) and time.monotonic() < deadline:
                time.sleep(0.02)
        print("stopped" if alive else "not running")
        return 0
    # start
    if not alive:
        helperclient.start_helper(path)
        deadline = time.monotonic() + 30
        while not _alive(path) and time.monotonic() < deadline:
            time.sleep(0.02)
    print(f"running (pid {_helper_pid(path)}, socket {path})" if _alive(path) else "did not start")
    return 0 if _alive(path) else 1


def _alive(path: str) -> bool:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        s.connect(path)
        return True
    except OSError:
        return False
    finally:
        s.close()


def register(sub) -> None:
    p = sub.add_parser(
        "helper",
        help="Start, stop or query this user's node-local helper.",
        description="The node-local helper keeps `minisandbox run` warm between calls "
        '(docs/sandbox.md "The node-local helper"). `run` starts it on demand and '
        "it exits when idle ($MINISANDBOX_HELPER_IDLE seconds, default 60); "
        "MINISANDBOX_HELPER=off disables it.",
    )
    p.add_argument(
        "helper_command",
        choices=["start", "stop", "status", "serve"],
        help="start (in the background), stop, status, or serve (in the foreground)",
    )
    p.add_argument("--socket", help=argparse.SUPPRESS)
    p.add_argument("--idle", type=float, default=None, help="seconds without a call before it exits")
    p.set_defaults(func=cmd_helper)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(prog="minisandbox helper")
    sub = ap.add_subparsers(dest="command", required=True)
    register(sub)
    sys.exit(cmd_helper(ap.parse_args(["helper", *sys.argv[1:]])))
