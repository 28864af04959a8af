"""The thin client of the node-local helper (`minisandbox.cli.helper`): what `minisandbox run`
does before importing anything heavy.

Why: a `minisandbox run` process spends most of its time importing the package and starting
the sandbox machinery (a fork server, the task's documents); a helper process that already
did that answers in a fraction of the time. The client sends its argv, environment, umask
and its stdin/stdout/stderr and working directory (as file descriptors, SCM_RIGHTS) over a
per-user unix socket, forwards the signals it gets, and exits with the status the helper's
worker reports. When no helper answers (none running, disabled, refused) the caller runs
the command in-process, so the helper is never required.

This module imports only built-in modules (`_socket`, `_signal`, `_sha256`): it runs on
every `minisandbox run`, before the package's heavy parts (tests/test_import_structure.py).

Which helper: the socket's name carries a digest of everything that must be equal for a
helper's worker to act exactly as this process would (`context`): the interpreter and the
package it runs, the user and groups, the capabilities and seccomp state, the cgroup, the
namespaces, the resource limits and the security label. A client in another context finds
another socket (or none); the helper checks the same digest of its peer itself
(SO_PEERCRED + /proc), so a process cannot get a helper of another context to act for it.
"""

import os
import sys

#: $MINISANDBOX_HELPER: `auto` (default: use a running helper, start one when none answers),
#: `off` (never: every call runs in-process), `use` (use a running one, never start one).
HELPER_ENV = "MINISANDBOX_HELPER"
OFF_VALUES = ("0", "off", "no", "never", "false")
#: Request and reply framing version (a helper of another version refuses: the client runs in-process).
PROTOCOL = b"MSBH1"
#: The /proc/<pid>/status fields that decide what a process may do.
STATUS_FIELDS = (
    b"Uid:",
    b"Gid:",
    b"Groups:",
    b"CapInh:",
    b"CapPrm:",
    b"CapEff:",
    b"CapBnd:",
    b"CapAmb:",
    b"NoNewPrivs:",
    b"Seccomp:",
    b"Seccomp_filters:",
)
NAMESPACES = ("cgroup", "ipc", "mnt", "net", "pid", "pid_for_children", "time", "user", "uts")
#: Environment variables that decide which code the interpreter runs (must equal the helper's).
CODE_ENV = ("PYTHONPATH", "PYTHONHOME", "PYTHONSAFEPATH", "PYTHONNOUSERSITE", "PYTHONUSERBASE")


def mode() -> str:
    """`off`, `use` or `auto` from $MINISANDBOX_HELPER."""
    value = os.environ.get(HELPER_ENV, "auto").strip().lower()
    if value in OFF_VALUES:
        return "off"
    return "use" if value == "use" else "auto"


def _read(path: str) -> bytes:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return b"?"
    try:
        return os.read(fd, 1 << 16)
    except OSError:
        return b"?"
    finally:
        os.close(fd)


def context(pid: str = "self") -> bytes:
    """What a process of `pid` may do and where it lives, as bytes (two processes with equal
    contexts get the same sandbox from the same code): credentials, capabilities, seccomp,
    cgroup, namespaces, rlimits, LSM label, root directory and executable."""
    base = f"/proc/{pid}/"
    status = [line for line in _read(base + "status").splitlines() if line.startswith(STATUS_FIELDS)]
    parts = [b"\n".join(status), _read(base + "cgroup"), _read(base + "limits"), _read(base + "attr/current")]
    for name in NAMESPACES:
        try:
            parts.append(os.fsencode(os.readlink(base + "ns/" + name)))
        except OSError:
            parts.append(b"-")
    for link in ("root", "exe"):
        try:
            parts.append(os.fsencode(os.readlink(base + link)))
        except OSError:
            parts.append(b"?")
    return b"\0".join(parts)


def code_identity() -> bytes:
    """Which code answers: the interpreter, the package directory and the variables that
    change the import path."""
    import minisandbox

    env = [os.fsencode(f"{k}={os.environ.get(k, '')}") for k in CODE_ENV]
    return b"\0".join(
        [
            os.fsencode(sys.executable),
            os.fsencode(os.path.dirname(minisandbox.__file__)),
            minisandbox.__version__.encode(),
            sys.version.encode(),
            *env,
        ]
    )


def runtime_dir() -> str:
    """Where this user's helper sockets live: $MINISANDBOX_RUNTIME_DIR, else
    $XDG_RUNTIME_DIR/minisandbox, else /tmp/minisandbox-<uid> (created 0700)."""
    explicit = os.environ.get("MINISANDBOX_RUNTIME_DIR")
    if explicit:
        return explicit
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    if xdg and os.path.isabs(xdg):
        return os.path.join(xdg, "minisandbox")
    return f"/tmp/minisandbox-{os.getuid()}"


def private_dir(path: str, create: bool) -> bool:
    """Is `path` a real directory owned by this user that nobody else can enter (mode 0700)?
    With `create`, make it so first when it is missing. Anything else (a symlink, another
    owner, wider modes) means no helper: never a socket in a directory another user controls."""
    if create:
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            pass
        except OSError:
            return False
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return (st.st_mode & 0o170000) == 0o040000 and st.st_uid == os.getuid() and (st.st_mode & 0o777) == 0o700


def socket_path(create_dir: bool = False) -> str | None:
    """This process's helper socket (None: no private runtime directory)."""
    import _sha256

    d = runtime_dir()
    if not private_dir(d, create_dir):
        return None
    tag = _sha256.sha256(PROTOCOL + b"\0" + code_identity() + b"\0" + context()).hexdigest()[:24]
    return os.path.join(d, f"helper-{tag}.sock")


def _stdio_fds() -> list[int]:
    """This process's stdin, stdout, stderr (a closed one: /dev/null) and working directory."""
    fds = []
    for fd, flags in ((0, os.O_RDONLY), (1, os.O_WRONLY), (2, os.O_WRONLY)):
        try:
            os.fstat(fd)
            fds.append(fd)
        except OSError:
            fds.append(os.open(os.devnull, flags | os.O_CLOEXEC))
    fds.append(os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC))
    return fds


def request(argv: list[str]) -> bytes:
    """The request: protocol, umask, argv (count, items), environment (NUL-separated)."""
    umask = os.umask(0o022)
    os.umask(umask)
    args = [os.fsencode(a) for a in argv]
    env = [k + b"=" + v for k, v in os.environb.items()]
    return b"\0".join([PROTOCOL, b"%d" % umask, b"%d" % len(args), *args, *env])


def try_run(argv: list[str]) -> int | None:
    """Run `minisandbox ARGV` through this user's helper; its exit status, or None when no
    helper took it (the caller runs it in-process; in `auto` mode a helper is started for
    the next calls)."""
    how = mode()
    if how == "off":
        return None
    import _socket

    path = socket_path(create_dir=how == "auto")
    if path is None:
        return None
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_SEQPACKET | _socket.SOCK_CLOEXEC)
    try:
        try:
            sock.connect(path)
        except OSError:
            if how == "auto":  # started by `start_pending`, once this call no longer needs the CPU
                global _PENDING
                _PENDING = path
            return None
        try:
            fds = _stdio_fds()
            data = b"".join(fd.to_bytes(4, sys.byteorder) for fd in fds)
            sock.sendmsg([request(argv)], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, data)])
        except OSError:  # too large an environment, or the helper just went away: run in-process
            return None
        return _wait_reply(sock)
    finally:
        sock.close()


def _wait_reply(sock) -> int | None:  # noqa: ANN001 - a _socket.socket
    """Forward SIGINT/SIGTERM/SIGHUP to the worker while waiting for `exit N`."""
    import _signal

    forwarded = []

    def forward(signum: int, _frame: object) -> None:
        forwarded.append(signum)
        try:
            sock.send(b"signal %d" % signum)
        except OSError:
            pass

    old = {s: _signal.signal(s, forward) for s in (_signal.SIGINT, _signal.SIGTERM, _signal.SIGHUP)}
    try:
        reply = sock.recv(4096)
    except OSError:
        reply = b""
    finally:
        for s, handler in old.items():
            _signal.signal(s, handler)
    if reply.startswith(b"refused "):
        return None  # another context or stale code: nothing ran; in-process it is
    if reply.startswith(b"exit "):
        return int(reply[5:])
    if forwarded and forwarded[-1] != _signal.SIGINT:  # the worker died of it: so does this process,
        _signal.signal(forwarded[-1], _signal.SIG_DFL)  # as the in-process command would have
        os.kill(os.getpid(), forwarded[-1])
    os.write(
        2,
        b"minisandbox: the node-local helper's worker ended without an exit status (killed?); "
        b"run again, or set MINISANDBOX_HELPER=off to run in-process\n",
    )
    return 1


#: The socket of a helper this process is to start (`auto`, none answered): set by `try_run`.
_PENDING: str | None = None


def start_pending() -> None:
    """Start the helper `try_run` found missing, if any (once). The in-process `run` calls
    this when its command has run for a while (`sandboxcmds.LONG_COMMAND`), and `cli.main`
    when the call is done, its sandbox closed (whatever happened), so the helper's start-up
    (an interpreter importing the whole package: about twice this call's CPU) competes
    with none of this call's own work on a small machine; a long command still has its
    helper started while it runs."""
    global _PENDING
    path, _PENDING = _PENDING, None
    if path is not None:
        start_helper(path)


def start_helper(path: str) -> None:
    """Start a helper for `path` in the background (detached: its own session, no terminal,
    stdio on /dev/null, no descriptor of this process; it goes to / itself, see
    `helper.cmd_helper`); it serves the next calls and exits when idle. Spawned with
    `os.posix_spawn`: `subprocess` (with `locale`) would be the only reason this call
    imports them, about 4 ms of its CPU (measured at load 3)."""
    argv = [sys.executable, "-P", "-m", "minisandbox.cli.helper", "serve", "--socket", path]
    try:
        null = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
    except OSError:
        return
    try:
        actions = [(os.POSIX_SPAWN_DUP2, null, target) for target in (0, 1, 2)]
        for name in os.listdir("/proc/self/fd"):  # descriptors this process was given to pass on
            fd = int(name)
            if fd > 2 and fd != null and _inheritable(fd):
                actions.append((os.POSIX_SPAWN_CLOSE, fd))
        os.posix_spawn(sys.executable, argv, os.environ, file_actions=actions, setsid=True)
    except OSError:
        pass
    finally:
        os.close(null)


def _inheritable(fd: int) -> bool:
    try:
        return os.get_inheritable(fd)
    except OSError:  # (the listing's own descriptor, closed by now)
        return False
