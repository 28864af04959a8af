"""Private roots, controller side: starts the sandbox's init program and talks to it.

A private root is a fresh tmpfs root with the host system read-only, plus binds and
writable layers, in new namespaces. The processes that build and hold it (the fork server,
each sandbox's init, its command spawner and file-open helpers) run the stdlib-only init
program `minisandbox.sandbox.init_program`; this module starts that fork server once per
process (`_Zygote`), asks it for sandboxes (`PrivateRoot`, one control socket each; a warm
sandbox when one fits, see `start_warm`) and spawns, waits for, kills and opens files
through them. `run` is the one-shot form.
"""

from __future__ import annotations

import _socket  # not `socket`: its constants made enums, and `selectors` (2-3 ms of a warm run's CPU)
import array
import fcntl
import os
import select
import signal
import sys
import threading
import time
from collections import namedtuple

from minisandbox.sandbox import init_program
from minisandbox.sandbox.init_program import (  # noqa: F401  (SandboxError, open_in_root: this module's API too)
    OPEN_HELPER_TIMEOUT,
    SandboxError,
    _pick_base,
    _recv,
    _send,
    open_in_root,
    wait_readable,
)

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a warm `run` does not)
if TYPE_CHECKING:
    import subprocess

#: `subprocess.DEVNULL` (stdin/stdout/stderr of a spawned command: /dev/null), without
#: importing `subprocess` with `locale`, `selectors` and `warnings`: a warm `run` starts no
#: host process, and the sandbox's init and command spawner use `os.posix_spawn`.
DEVNULL = -3


class Bind(
    namedtuple(
        "Bind",
        [
            "source",  # host path (file or dir)
            "target",  # absolute path inside the private root
            "readonly",  # bool, default True
        ],
        defaults=[True],
    )
):
    """A host path bound into the private root (a named tuple: no `typing` on a warm
    `run`'s path, docs/design.md "Record types")."""

    __slots__ = ()


def _fd_of(stream, default: int) -> tuple[int, bool]:
    """(fd, opened_here) for a stdio argument: None inherits, DEVNULL, int or file."""
    if stream is None:
        return default, False
    if stream == DEVNULL:
        return os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC), True
    if isinstance(stream, int):
        return stream, False
    return stream.fileno(), False


class _NoAnswer(TimeoutError):
    """No reply within the request's time."""


class _SpawnerGone(OSError):
    """The command spawner exited while a request to it was pending."""


class PrivateRoot:
    """A running init process holding the namespaces; spawn payloads into it.

    Thread-safe: one lock guards the control socket; replies and exit events are routed
    by sequence number and command id.
    """

    def __init__(self, spec: dict, *, ready_timeout: float = 60.0, cgroup_home: str | None = None) -> None:
        """`cgroup_home`: the join file (`limits.join_file`) of the sandbox's own leaf in the hierarchy where
        commands get cgroups of their own (`spawn`'s `cgroup_fd`); the command spawner
        returns there after starting each command. Without it such commands are forked by
        init. A warm sandbox (`start_warm`) that fits `spec` is taken instead of starting
        one."""
        spec = dict(spec)
        if spec.get("rootless") is None:
            spec["rootless"] = os.geteuid() != 0
        spec["userns_base"] = userns_base(spec)
        self.spec = spec
        self._lock = threading.Lock()
        self._seq = 0
        self._next_id = 0
        self._replies: dict[int, tuple[dict, list[int]]] = {}
        self._exits: dict[int, int] = {}
        #: command id -> its pid in the sandbox's pid namespace
        self.pids: dict[int, int] = {}
        self._closed = False
        self.proc: _InitProcess | None = None
        #: False when `close` saw init outlive its SIGKILL (nothing of the sandbox may be kept)
        self.exited = True
        self._cgroup_home = cgroup_home
        #: the command spawner's request socket (see `_spawner_main`), its rlimits, and the
        #: commands it started that have not exited yet
        self._spawner: _socket.socket | None = None
        self._spawner_rlimits: dict | None = None
        self._spawner_off = not spec.get("spawner", True)
        self._spawned: set[int] = set()
        self._discard: set[int] = set()  # seqs of requests whose replies nobody waits for
        #: commands whose spawner died while starting them: reported killed (exit -9), never
        #: started twice; what they may have started is in their cgroup (`Sandbox` kills it)
        self.lost: set[int] = set()
        msg = self._start_warm(spec, ready_timeout)
        if msg is None:
            parent, child = _socket.socketpair(_socket.AF_UNIX, _socket.SOCK_SEQPACKET)
            self._sock = parent
            try:
                _Zygote.get().fork(child.fileno(), spec)
            except BaseException:
                parent.close()
                self._sock = None
                self._closed = True
                raise
            finally:
                child.close()
            msg = self._wait_event(ready_timeout)
        if msg.get("ev") != "ready":
            self.close(timeout=2.0)
            raise SandboxError(f"private root set-up failed: {msg.get('error', msg)}")
        self.info = msg

    # -- plumbing
    def _start_warm(self, spec: dict, ready_timeout: float) -> dict | None:
        """Hand `spec` to this process's warm sandbox (see `_Zygote.take_warm`); its "ready"
        event, or None (no warm sandbox fits, or it failed: the caller starts one cold,
        which reports any error in the spec)."""
        zygote = _Zygote._instance
        sock = zygote.take_warm(spec) if zygote is not None and zygote.owner == os.getpid() else None
        if sock is None:
            return None
        self._sock = sock
        try:
            _send(sock, {"spec": spec})
            msg = self._wait_event(ready_timeout)
        except OSError:
            msg = {"ev": "error"}
        if msg.get("ev") == "ready":
            return msg
        sock.close()
        self._sock = None
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(5.0)
            self.proc.release()
            self.proc = None
        return None

    def _wait_event(self, timeout: float) -> dict:
        """The first of "ready"/"error" (recording init's host pid on the way)."""
        deadline = time.monotonic() + timeout
        while True:
            ready = wait_readable([self._sock], max(0.0, deadline - time.monotonic()))
            if not ready:
                return {"ev": "error", "error": f"private root did not start within {timeout:.0f} s"}
            msg, fds = _recv(self._sock)
            for fd in fds:
                os.close(fd)
            if msg is None:
                return {"ev": "error", "error": "sandbox helper exited before it was ready"}
            if msg.get("ev") == "pid":
                self.proc = _InitProcess(msg["pid"])
                continue
            if msg.get("ev") == "warm":  # a warm sandbox's base was ready before its spec came
                continue
            return msg

    def _pump(self, timeout: float | None) -> bool:
        """Receive one message (caller holds the lock). False on timeout."""
        spawner = self._spawner
        ready = wait_readable([self._sock] if spawner is None else [self._sock, spawner], timeout)
        if not ready:
            return False
        if self._sock not in ready:  # only the spawner's socket: it has exited
            self._spawner_gone()
            return True
        msg, fds = _recv(self._sock)
        if msg is None:
            self._closed = True
            raise SandboxError("sandbox init process is gone (killed or out of memory)")
        self._route(msg, fds)
        return True

    def _route(self, msg: dict, fds: list[int]) -> None:
        if "re" in msg:
            if msg["re"] in self._discard:
                self._discard.discard(msg["re"])
                for fd in fds:
                    os.close(fd)
            else:
                self._replies[msg["re"]] = (msg, fds)
        elif msg.get("ev") == "pid" and self.proc is None:
            self.proc = _InitProcess(msg["pid"])
        elif msg.get("ev") == "exit":
            self._exits[msg["id"]] = msg["status"]
            self._spawned.discard(msg["id"])

    def _spawner_gone(self) -> None:
        """The spawner exited (a payload killed it, or `kill_all`): what it had sent is read
        first; its commands still running count as killed, and init kills their process
        trees (orphans of the spawner, nobody would report them). The next ordinary
        command starts another spawner. Caller holds the lock."""
        spawner, self._spawner = self._spawner, None
        if spawner is not None:
            spawner.close()
        while wait_readable([self._sock], 0):
            msg, fds = _recv(self._sock)
            if msg is None:
                self._closed = True
                raise SandboxError("sandbox init process is gone (killed or out of memory)")
            self._route(msg, fds)
        for cid in sorted(self._spawned):
            self._seq += 1
            self._discard.add(self._seq)
            try:
                _send(
                    self._sock,
                    {"op": "kill", "id": cid, "pid": self.pids.get(cid), "sig": int(signal.SIGKILL), "seq": self._seq},
                )
            except OSError:
                pass
            self._exits[cid] = int(signal.SIGKILL)  # a wait status: killed by SIGKILL
        self._spawned.clear()

    def _request(self, msg: dict, fds: list[int] | None = None, timeout: float = 30.0) -> tuple[dict, list[int]]:
        with self._lock:
            try:
                reply, rfds = self._exchange(self._sock, msg, fds, timeout)
            except _NoAnswer:
                raise SandboxError(f"sandbox init did not answer {msg.get('op')} within {timeout:.0f} s") from None
        if not reply.get("ok"):
            for fd in rfds:
                os.close(fd)
            raise OSError(reply.get("error", "request failed"))
        return reply, rfds

    def _exchange(
        self, via: _socket.socket, msg: dict, fds: list[int] | None, timeout: float
    ) -> tuple[dict, list[int]]:
        """Send `msg` on `via` (init's control socket or the spawner's) and wait for its reply,
        which always comes on the control socket (caller holds the lock)."""
        if self._closed:
            raise SandboxError("sandbox is closed")
        self._seq += 1
        seq = msg["seq"] = self._seq
        _send(via, msg, fds)
        deadline = time.monotonic() + timeout
        while seq not in self._replies:
            left = deadline - time.monotonic()
            if left <= 0 or not self._pump(left):
                raise _NoAnswer(msg.get("op"))
            if via is not self._sock and via is not self._spawner and seq not in self._replies:
                raise _SpawnerGone("the command spawner exited")
        return self._replies.pop(seq)

    def start_spawner(self, rlimits: dict) -> None:
        """Start the command spawner for commands with `rlimits` now, not with the first
        one (a sandbox opened ahead of its call: the node-local helper's spares)."""
        with self._lock:
            if self._spawner is None and not self._spawner_off and not self._closed:
                self._start_spawner(rlimits)

    def _start_spawner(self, rlimits: dict) -> bool:
        """Have init fork the command spawner (caller holds the lock); False when init's
        fork path is to start commands from now on."""
        home = None
        try:
            if self._cgroup_home is not None:
                home = os.open(self._cgroup_home, os.O_WRONLY | os.O_CLOEXEC)
            reply, rfds = self._exchange(
                self._sock,
                {"op": "spawner", "rlimits": rlimits, "leaf": home is not None},
                [home] if home is not None else [],
                10.0,
            )
        except OSError:
            self._spawner_off = True
            return False
        finally:
            if home is not None:
                os.close(home)
        if not reply.get("ok") or not rfds:
            self._spawner_off = True
            return False
        self._spawner = _socket.socket(fileno=rfds[0])
        self._spawner_rlimits = rlimits
        return True

    def _spawn_fast(self, msg: dict, fds: list[int], rlimits: dict) -> int | None:
        """Start an ordinary command through the spawner (started on first use); its pid, or
        None when init's fork path is to start it (caller holds the lock)."""
        if self._spawner is None:
            if self._spawner_rlimits is not None and self._spawner_rlimits != rlimits:
                return None
            if not self._start_spawner(rlimits):
                return None
        elif self._spawner_rlimits != rlimits:
            return None
        spawner = self._spawner
        try:
            reply, _ = self._exchange(spawner, msg, fds, OPEN_HELPER_TIMEOUT)
        except _SpawnerGone:
            # it died (killed by a payload, often the very command it was starting) after
            # the request was sent: whether the command started is unknown, so it is never
            # started again; it counts as killed, and the caller kills its cgroup (`lost`).
            # (`kill_all` forgets the spawner it kills, so its next command is not lost.)
            self._exits[msg["id"]] = int(signal.SIGKILL)
            self.lost.add(msg["id"])
            return -1
        except _NoAnswer:
            # stopped (by a payload): kill it and whatever it may have started for this
            # request, so the command never runs twice, then let init start it
            self._exchange(self._sock, {"op": "drop_spawner"}, None, 30.0)
            self._spawner_gone()
            return None
        except OSError:  # sending failed: the socket is gone with the spawner
            self._spawner_gone()
            return None
        if reply.get("retire") and self._spawner is spawner:
            spawner.close()
            self._spawner = None
        if not reply.get("ok"):
            return None
        cid = msg["id"]
        if "status" in reply:  # it exited within the spawner's hold (`EXIT_HOLD`): no exit event follows
            self._exits[cid] = int(reply["status"])
        elif self._spawner is not spawner and not reply.get("retire"):
            # it died right after starting the command: nobody will report its exit
            self._spawned.add(cid)
            self.pids[cid] = int(reply["pid"])
            self._spawner = spawner
            self._spawner_gone()
        else:
            self._spawned.add(cid)
        return int(reply["pid"])

    # -- API
    def spawn(
        self,
        argv: list[str],
        *,
        env: dict[str, str],
        cwd: str = "/",
        stdin=None,
        stdout=None,
        stderr=None,
        rlimits: dict | None = None,
        drop: bool = True,
        pass_fds: dict[int, int] | None = None,
        pidns: bool = False,
        cgroup_fd: int | None = None,
        direct: bool = False,
        hold: bool = False,
    ) -> int:
        """Start `argv` inside (new session, privileges dropped); returns a command id.
        `pass_fds`: {fd number inside: caller fd} passed on besides stdio (at most 5).
        `pidns`: run it in a pid namespace of its own (it sees no other process).
        `cgroup_fd`: a write fd of a cgroup's join file the command joins before anything else
        (`minisandbox.sandbox.limits.CommandCgroup`); not passed on to the payload.
        `direct`: `argv` is ``["bash", "-c", COMMAND]`` and the command spawner may exec a
        COMMAND of plain words without bash (`init_program._plain_words`).
        `hold`: the caller only reads the command's output until it exits (nothing to feed
        it): the command spawner may hold the start reply until the exit, for at most
        `init_program.EXIT_HOLD`, and send both in one message."""
        opened = []
        fds = []
        for stream, default in ((stdin, 0), (stdout, 1), (stderr, 2)):
            fd, mine = _fd_of(stream, default)
            fds.append(fd)
            if mine:
                opened.append(fd)
        extra = dict(pass_fds or {})
        if len(extra) > 5 or any(t < 3 for t in extra):
            raise ValueError("pass_fds: at most 5 descriptors, numbered 3 or more (0-2 are stdin/out/err)")
        fds += list(extra.values())
        if cgroup_fd is not None:
            fds.append(cgroup_fd)
        try:
            msg = {
                "op": "spawn",
                "argv": list(argv),
                "env": dict(env),
                "cwd": cwd,
                "rlimits": rlimits or {},
                "drop": drop,
                "fd_targets": list(extra),
                "pidns": pidns,
                "cgroup": cgroup_fd is not None,
            }
            with self._lock:
                self._next_id += 1
                cid = msg["id"] = self._next_id
                pid = None
                if drop and not pidns and not self._spawner_off and (cgroup_fd is None or self._cgroup_home):
                    fast = dict(msg)
                    if direct:
                        fast["direct"] = True
                    if hold:
                        fast["hold"] = True
                    pid = self._spawn_fast(fast, fds, msg["rlimits"])
                if pid is not None and pid > 0:
                    self.pids[cid] = pid
            if pid is None:
                reply, _ = self._request(msg, fds)
                self.pids[cid] = int(reply["pid"])
        finally:
            for fd in opened:
                os.close(fd)
        return cid

    def fileno(self) -> int:
        """The control socket, for select(): readable when init has news (an exit)."""
        return self._sock.fileno()

    def poll(self, cid: int) -> int | None:
        with self._lock:
            while cid not in self._exits and not self._closed and self._pump(0):
                pass
            status = self._exits.get(cid)
        return None if status is None else os.waitstatus_to_exitcode(status)

    def forget(self, cid: int) -> None:
        """Drop what is kept of command `cid`, which has exited and been collected (its exit
        status, read by `poll`, which keeps it; its pid): an open sandbox runs tens of
        thousands of commands."""
        with self._lock:
            self._exits.pop(cid, None)
            self.pids.pop(cid, None)

    def wait(self, cid: int, timeout: float | None = None) -> int:
        """Exit code of command `cid` (negative signal number if killed); raises
        TimeoutError after `timeout` seconds (the command keeps running)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            with self._lock:
                if cid in self._exits:
                    self.pids.pop(cid, None)
                    return os.waitstatus_to_exitcode(self._exits.pop(cid))
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise TimeoutError(f"command {cid} still running after {timeout} s")
                self._pump(min(left, 0.5) if left is not None else 0.5)

    def kill(self, cid: int, sig: int = signal.SIGKILL, *, children_only: bool = False) -> bool:
        """Signal a command's whole process tree (or only its descendants)."""
        reply, _ = self._request(
            {
                "op": "kill",
                "id": cid,
                "sig": int(sig),
                "children_only": children_only,
                "pid": self.pids.get(cid) if cid in self._spawned else None,
            }
        )
        return bool(reply.get("found"))

    def open(
        self,
        path: str,
        flags: int = os.O_RDONLY,
        mode: int = 0o644,
        *,
        makedirs: bool = False,
        rlimits: dict | None = None,
    ) -> int:
        """Open a path inside the root with the payload's privileges (and `rlimits`);
        returns an fd of a regular file or directory (`open_in_root`: symlinks stay inside
        the root, a FIFO, socket or device is refused at once)."""
        _, fds = self._request(
            {"op": "open", "path": path, "flags": flags, "mode": mode, "makedirs": makedirs, "rlimits": rlimits or {}},
            timeout=OPEN_HELPER_TIMEOUT + 5,
        )
        if flags & (os.O_WRONLY | os.O_RDWR):
            # init closes its copy of the fd right after forwarding it; a file written through
            # ours and executed before that close fails with ETXTBSY (commands go through the
            # spawner, which init does not order). init answers in order, so once it has
            # answered a ping its copy is closed.
            try:
                self._request({"op": "ping"}, timeout=10)
            except BaseException:
                os.close(fds[0])
                raise
        return fds[0]

    def kill_all(self) -> None:
        """SIGKILL every process in the sandbox but init (a one-shot command's leftovers, a
        sandbox past its CPU budget)."""
        self._request({"op": "killall"}, timeout=10)
        with self._lock:
            if self._spawner is not None:  # killed too: its commands count as killed
                self._spawner_gone()

    def stat(self) -> dict:
        """{"procs": processes alive but init, "tmpfs": [free bytes, size] or None}."""
        reply, _ = self._request({"op": "stat"}, timeout=10)
        return reply

    def close(self, timeout: float = 10.0) -> None:
        """Kill every process inside and wait until init has exited (the kernel then drops
        the namespaces and every mount in them)."""
        sock = getattr(self, "_sock", None)
        if sock is None:
            return
        self._closed = True
        spawner, self._spawner = getattr(self, "_spawner", None), None
        if spawner is not None:
            spawner.close()
        try:
            try:
                sock.shutdown(_socket.SHUT_WR)  # EOF for init: it kills everything and exits
            except OSError:
                pass
            deadline = time.monotonic() + timeout
            while True:  # init's end closes only when init itself exits
                ready = wait_readable([sock], max(0.0, deadline - time.monotonic()))
                if not ready:
                    break
                try:
                    msg, fds = _recv(sock)
                except OSError:
                    break
                for fd in fds:
                    os.close(fd)
                if msg is None:
                    break
        finally:
            sock.close()
            self._sock = None
            if self.proc is not None:
                if self.proc.wait(timeout) is None:
                    self.proc.kill()
                    self.exited = self.proc.wait(timeout) is not None
                self.proc.release()

    def __enter__(self) -> PrivateRoot:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            if not self._closed:
                self.close()
        except Exception:
            pass


class _InitProcess:
    """A sandbox's init seen from the host (not our child: the zygote reaps it), tracked
    through a pidfd so that a recycled pid can never be mistaken for it."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        try:
            self._fd: int | None = os.pidfd_open(pid)
        except OSError:  # already gone
            self._fd = None

    def poll(self) -> int | None:
        """None while running, 0 once it has exited."""
        return self.wait(0)

    def wait(self, timeout: float | None = None) -> int | None:
        if self._fd is None:
            return 0
        ready = wait_readable([self._fd], timeout)
        return 0 if ready else None

    def kill(self) -> None:
        if self._fd is not None:
            try:
                signal.pidfd_send_signal(self._fd, signal.SIGKILL)
            except OSError:
                pass

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


#: How the fork server is started: init_program.py loaded as a module, not run as a script,
#: so its cached bytecode is used (a script is compiled from source on every start: about
#: 20 ms of CPU per fork server), then `_zygote_main(FD)`. argv: [-c, init_program.py, FD].
_ZYGOTE_BOOT = (
    "import sys\n"
    "from importlib._bootstrap import module_from_spec, spec_from_loader\n"
    "from importlib.machinery import SourceFileLoader\n"
    "loader = SourceFileLoader('_minisandbox_init_program', sys.argv[1])\n"
    "module = module_from_spec(spec_from_loader(loader.name, loader))\n"
    "sys.modules[loader.name] = module\n"
    "loader.exec_module(module)\n"
    "module._zygote_main(int(sys.argv[2]))\n"
)


class _Zygote:
    """This process's fork server (started on first use; one per caller pid, so a forked
    caller gets its own)."""

    _lock = threading.Lock()
    _instance: _Zygote | None = None

    def __init__(self, fork_self: bool = False) -> None:
        """`fork_self`: the server is a fork of this (single-threaded) process rather than a
        new interpreter (see `prestart`)."""
        self.owner = os.getpid()
        self._fork_lock = threading.Lock()
        #: a sandbox started up to the point where it needs its spec (control socket, key)
        self._warm: tuple[_socket.socket, dict] | None = None
        parent, child = _socket.socketpair(_socket.AF_UNIX, _socket.SOCK_SEQPACKET)
        self.sock = parent
        try:
            if fork_self:
                self.proc: subprocess.Popen | _InitProcess = _fork_zygote(child.fileno())
            else:
                import subprocess

                self.proc = subprocess.Popen(
                    [sys.executable, "-I", "-S", "-B", "-c", _ZYGOTE_BOOT, os.path.abspath(init_program.__file__)]
                    + [str(child.fileno())],
                    pass_fds=[child.fileno()],
                    stdin=subprocess.DEVNULL,
                    env={},
                    cwd="/",
                    start_new_session=True,
                )
        finally:
            child.close()

    @classmethod
    def get(cls, fork_self: bool = False) -> _Zygote:
        with cls._lock:
            z = cls._instance
            if z is None or z.owner != os.getpid() or z.proc.poll() is not None:
                cls._instance = z = cls(fork_self and threading.active_count() == 1)
            return z

    def fork(self, sock_fd: int, spec: dict) -> int:
        """Have the zygote fork a sandbox for this control socket; returns the pid of the
        process it forked (init, or a rootless sandbox's starter).

        Every request carries its own socket for the answer and takes no lock (threads of
        this process, and processes that share the zygote: a helper's workers,
        `share_fork_server`): the zygote serves queued requests back to back, rather than one
        per wake-up of the thread or process holding a lock (in a burst of 128 threads on 2
        busy cores, each such wake-up, and the lock's hand-over to the next thread, waits
        for a core)."""
        mine, theirs = _socket.socketpair(_socket.AF_UNIX, _socket.SOCK_SEQPACKET)
        try:
            _send(self.sock, {"spec": spec, "reply": True}, [sock_fd, theirs.fileno()])
            theirs.close()  # (the zygote's copy is the only one: its exit is our EOF)
            msg, _ = _recv(mine)
        except OSError:
            msg = None
        finally:
            theirs.close()
            mine.close()
        if msg is None:
            code = self.proc.poll()
            with _Zygote._lock:
                if _Zygote._instance is self:
                    _Zygote._instance = None
            raise SandboxError(f"sandbox fork server exited (status {code}); the next sandbox starts a new one")
        if not msg.get("ok"):
            raise SandboxError(f"sandbox fork server: {msg.get('error')}")
        return msg["pid"]

    def take_warm(self, spec: dict) -> _socket.socket | None:
        """The control socket of the warm sandbox (see `start_warm`) if it can become
        `spec` (same kind, started in `spec`'s cgroups), else None; a warm sandbox that
        does not fit is let go."""
        key = _warm_key(spec)
        if key is None:
            return None
        want = {**key, "cgroup_procs": list(spec.get("cgroup_procs", [])), "mounts": _host_mounts()}
        with self._fork_lock:
            warm, self._warm = self._warm, None
        if warm is not None and warm[1] != want:
            warm[0].close()
            warm = None
        return warm[0] if warm is not None else None

    def start_warm(self, spec: dict) -> None:
        """Start a sandbox of `spec`'s kind, in `spec`'s cgroups, up to the point where it
        needs the rest of its spec, unless one is there already. So creation is one round
        trip to an init that already has its namespaces, /proc, /dev and the host system
        mounted, and is already in its cgroups (the first move of a process into a cgroup
        waits for an RCU grace period: milliseconds, more on a loaded machine)."""
        key = _warm_key(spec)
        if key is None:
            return
        key["cgroup_procs"] = list(spec.get("cgroup_procs", []))
        # The warm init copies the host's mount table when it unshares: a layer mounted
        # after that (an image mounted for the next task) would be an empty directory in
        # it. The table is read before the request is sent; a different one at `take_warm`
        # means a cold start.
        mounts = _host_mounts()
        with self._fork_lock:
            if self._warm is not None:
                if self._warm[1] == {**key, "mounts": mounts}:
                    return
                self._warm[0].close()
                self._warm = None
            parent, child = _socket.socketpair(_socket.AF_UNIX, _socket.SOCK_SEQPACKET)
            try:
                # (the zygote does not answer a warm request; not sent while its queue is full
                # of fork requests, a burst that needs no warm sandbox: the lock would be held
                # until the zygote got through them, and every creation's take_warm waits on it)
                _send(self.sock, {"spec": key}, [child.fileno()], _socket.MSG_DONTWAIT)
                self._warm = (parent, {**key, "mounts": mounts})
            except OSError:  # the zygote is gone (the next cold start replaces it), or busy
                parent.close()
            finally:
                child.close()

    def drop_warm(self) -> None:
        """Close the warm sandbox (its init exits), e.g. before its cgroups are removed."""
        with self._fork_lock:
            warm, self._warm = self._warm, None
        if warm is not None:
            warm[0].close()


# a forked controller must not inherit a lock another thread held at the fork
os.register_at_fork(after_in_child=lambda: setattr(_Zygote, "_lock", threading.Lock()))


#: (pid, an open /proc/self/mountinfo, the table read through it) for `_host_mounts`
_MOUNTS: tuple[int, int, bytes] | None = None
_MOUNTS_LOCK = threading.Lock()


def _host_mounts() -> bytes:
    """This process's mount table (see `_Zygote.start_warm`), compared whole: a few KB, and
    no hashlib (its OpenSSL import was ~4 ms of a `run`'s CPU). Read again only when it
    changed: the kernel flags an open mountinfo (POLLPRI) at every mount or unmount in its
    namespace since the last poll of that descriptor; the text itself took 0.09 ms of every
    creation. One descriptor per process (a fork's poll would consume its parent's flag);
    the lock keeps a thread from using the old table after another thread's poll consumed
    the flag."""
    global _MOUNTS
    with _MOUNTS_LOCK:
        pid = os.getpid()
        if _MOUNTS is not None and _MOUNTS[0] == pid and not _mounts_changed(_MOUNTS[1]):
            return _MOUNTS[2]
        if _MOUNTS is not None and _MOUNTS[0] == pid:
            fd = _MOUNTS[1]
        else:
            fd = os.open("/proc/self/mountinfo", os.O_RDONLY | os.O_CLOEXEC)  # (a fork's inherited one stays)
        os.lseek(fd, 0, os.SEEK_SET)
        chunks = []
        while chunk := os.read(fd, 1 << 16):
            chunks.append(chunk)
        _MOUNTS = (pid, fd, b"".join(chunks))
        return _MOUNTS[2]


def _mounts_changed(fd: int) -> bool:
    """True when `fd` (an open /proc mount table) reports a mount or unmount since its last
    poll (POLLPRI or POLLERR; a new descriptor reports none)."""
    poller = select.poll()
    poller.register(fd, select.POLLPRI | select.POLLERR)
    return bool(poller.poll(0))


def _warm_key(spec: dict) -> dict | None:
    """What a warm sandbox for `spec` is started with (None: `spec` needs a cold start:
    another mount holder's namespaces, no ipc/uts namespace, other system dirs, or a bind
    source under the directory a warm sandbox mounts its tmpfs on)."""
    if spec.get("join_ns") or not spec.get("ipc", True) or not spec.get("uts", True) or "system_dirs" in spec:
        return None
    key = {
        "warm": True,
        "rootless": bool(spec.get("rootless")),
        "userns_base": userns_base(spec),
        "network": spec.get("network", "host"),
        "tmpfs_size": spec.get("tmpfs_size"),
    }
    try:
        if _pick_base(spec) != _pick_base(key):
            return None
    except SandboxError:
        return None
    return key


#: Root sandboxes' user namespaces are owned by uid USERNS_BASE + their starter's pid
#: (`init_program._enter_owned_userns`): uids of no account, since a host process running
#: as one would hold every capability over a sandbox's namespaces. The range is as long as
#: the largest pid_max (2**22). `MINISANDBOX_USERNS_BASE=<uid>` moves it; `off` keeps root
#: sandboxes in the host's user namespace, where payloads draw on host root's per-user
#: counters (inotify instances, queued signals, message queues): for debugging only.
USERNS_BASE = 0x7F000000
USERNS_SPAN = 1 << 22

_base_checked: dict[int, bool] = {}


def userns_base(spec: dict) -> int | None:
    """The first uid of the range that owns root sandboxes' user namespaces, for `spec`:
    None for a rootless sandbox (it makes its own, mapped to the caller), one that joins a
    mount holder's namespaces, a caller that is not root of the host's user namespace (it
    may not map uid 0), or with MINISANDBOX_USERNS_BASE=off. Raises SandboxError when an
    account has a uid of the range."""
    rootless = spec.get("rootless")
    if rootless is None:
        rootless = os.geteuid() != 0
    if rootless or spec.get("join_ns") or os.geteuid() != 0:
        return None
    raw = os.environ.get("MINISANDBOX_USERNS_BASE", "").strip()
    if raw.lower() == "off":
        return None
    try:
        base = int(raw) if raw else USERNS_BASE
    except ValueError:
        raise SandboxError(
            f"MINISANDBOX_USERNS_BASE={raw!r} is not a uid: set it to the first of {USERNS_SPAN} unused uids, or 'off'"
        ) from None
    if base not in _base_checked:
        _base_checked[base] = _usable_base(base)
    return base if _base_checked[base] else None


def _usable_base(base: int) -> bool:
    """Whether uids `base`.. `base + USERNS_SPAN` can own root sandboxes' user namespaces:
    this process is root of the host's user namespace (its uid map is the identity; only
    then may it map uid 0), and no account has one of them."""
    import pwd

    try:
        with open("/proc/self/uid_map") as fh:
            if fh.read().split() != init_program.IDENTITY_MAP.split():
                return False
    except OSError:
        return False
    if not 0 < base <= 2**32 - 2 - USERNS_SPAN:
        raise SandboxError(
            f"MINISANDBOX_USERNS_BASE={base} does not start {USERNS_SPAN} unprivileged uids: pick another"
        )
    taken = sorted(f"{p.pw_name} ({p.pw_uid})" for p in pwd.getpwall() if base <= p.pw_uid < base + USERNS_SPAN)
    if taken:
        raise SandboxError(
            f"uids {base}..{base + USERNS_SPAN - 1} own root sandboxes' user namespaces, but accounts have some of "
            f"them ({', '.join(taken)}): they would hold every capability over a sandbox; set "
            "MINISANDBOX_USERNS_BASE to the first of a range of no account"
        )
    return True


def start_warm(spec: dict) -> None:
    """Have this process's zygote prepare a sandbox for a spec like `spec` (same kind and
    cgroups; see `_Zygote.start_warm`): the next `PrivateRoot` of such a spec takes it."""
    _Zygote.get().start_warm(spec)


def drop_warm() -> None:
    """Let this process's warm sandbox go, if it has one (at exit, before its cgroups are
    removed)."""
    z = _Zygote._instance
    if z is not None and z.owner == os.getpid():
        z.drop_warm()


def prestart(fork_self: bool = False) -> None:
    """Start this process's sandbox fork server now (else the first sandbox pays for it).

    `fork_self`: as a fork of this process (while it has a single thread) instead of a new
    interpreter (`python -I -S` loading init_program: about 25 ms of CPU, on the critical
    path of a one-shot `minisandbox run` as soon as the other core is busy). For a process
    that opens one sandbox and exits (the `run` command in-process); a long-lived process
    (the node-local helper) keeps the small fresh interpreter, whose forks are cheaper."""
    _Zygote.get(fork_self)


def _blank_caller_command_line() -> None:
    """Overwrite, in a fork server forked from the caller, the memory the kernel shows as
    `/proc/PID/cmdline` and `/proc/PID/environ`. Every sandbox's init and helpers are forks
    of it, so the payload would otherwise read the caller's argv there (an RL trainer's
    flags, a store URL with its credentials); the environment area is unreadable anyway
    (init is not dumpable) and is cleared for the same reason. Once per fork server: one
    read of /proc/self/stat and two writes to /proc/self/mem, which a process may always
    make to itself (a kernel booted with `proc_mem.force_override=never` refuses it: the
    caller's argv then stays visible, as it was before, and sandboxes still start).
    `os.environ.clear()` ran first, so libc keeps no pointer into the environment area."""
    try:
        with open("/proc/self/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        # proc(5): arg_start, arg_end, env_start, env_end are fields 48-51; fields[0] is field 3
        arg_start, arg_end, env_start, env_end = (int(x) for x in fields[45:49])
        with open("/proc/self/mem", "r+b", buffering=0) as mem:
            for start, end in ((arg_start, arg_end), (env_start, env_end)):
                if 0 < start < end:
                    mem.seek(start)
                    mem.write(bytes(end - start))
    except OSError:
        pass


def _fork_zygote(sock_fd: int) -> _InitProcess:
    """Fork this process into the fork server, set up as `_Zygote` starts the interpreter
    one: its own session, working directory /, stdin /dev/null, stdout and stderr kept,
    every other descriptor closed but `sock_fd`, an empty environment (nothing of the
    caller's environment reaches a sandbox's init), the cyclic collector on (a `run`
    pauses it while it sets up); it never returns into the caller's code."""
    import gc

    sys.stdout.flush()  # (else the child would write the parent's buffered output again)
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        try:
            os.setsid()
            os.chdir("/")
            null = os.open(os.devnull, os.O_RDWR)
            os.dup2(null, 0)
            os.closerange(3, sock_fd)
            os.closerange(sock_fd + 1, os.sysconf("SC_OPEN_MAX"))
            os.environ.clear()
            _blank_caller_command_line()
            gc.enable()
            init_program._zygote_main(sock_fd)
        finally:
            os._exit(0)
    return _InitProcess(pid)


class _SharedForkLock:
    """Marks a fork server shared by processes forked from its owner and serialises, by an
    flock on `path`, what they send it without an answer of its own (a warm sandbox's
    request); their fork requests carry their own reply socket and take no lock
    (`_Zygote.fork`). Anything left queued on the shared socket is drained first."""

    def __init__(self, path: str, sock: _socket.socket) -> None:
        self.path, self.sock, self.fd = path, sock, -1

    def __enter__(self) -> _SharedForkLock:
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        while True:  # nobody else waits while we hold the lock: anything queued is stale
            try:
                _data, anc, _flags, _ = self.sock.recvmsg(1 << 16, _socket.CMSG_LEN(16 * 4), _socket.MSG_DONTWAIT)
            except (BlockingIOError, InterruptedError):
                break
            for level, typ, cdata in anc:
                if level == _socket.SOL_SOCKET and typ == _socket.SCM_RIGHTS:
                    for fd in array.array("i", cdata[: len(cdata) - len(cdata) % 4]):
                        os.close(fd)
            if not _data:
                break
        return self

    def __exit__(self, *exc: object) -> None:
        os.close(self.fd)  # releases the flock
        self.fd = -1


def share_fork_server(lock_path: str) -> bool:
    """In a process forked from one whose fork server runs (the node-local helper's workers,
    minisandbox.cli.helper): use that server instead of starting one (about 100 ms), its
    requests serialised across the forked processes by a lock on `lock_path`. False when
    the parent has none (the next sandbox starts its own)."""
    with _Zygote._lock:
        z = _Zygote._instance
        if z is None or z.owner == os.getpid():
            return z is not None
        z.owner = os.getpid()
        z.proc = _InitProcess(z.proc.pid)  # not our child: watched through a pidfd
        if z.proc.poll() is not None:
            _Zygote._instance = None
            return False
        z._fork_lock = _SharedForkLock(lock_path, z.sock)
        if z._warm is not None:  # the parent's warm sandbox stays the parent's
            z._warm[0].close()
            z._warm = None
        return True


def build_spec(
    binds: list[Bind],
    *,
    network: str = "host",
    rootless: bool | None = None,
    overlays: list[tuple[str, str, str | None]] | None = None,
    files: list[tuple[str, str, int]] | None = None,
    **extra,
) -> dict:
    """The JSON spec the helper understands (see _setup_root)."""
    if network not in ("host", "none"):
        raise ValueError(f"network must be 'host' or 'none', not {network!r}")
    for b in binds:
        if not b.target.startswith("/"):
            raise ValueError(f"bind target {b.target!r} must be absolute")
    spec = {
        "binds": [[os.path.abspath(b.source), b.target, bool(b.readonly)] for b in binds],
        "overlays": [list(o) for o in (overlays or [])],
        "files": [list(f) for f in (files or [])],
        "network": network,
        "rootless": rootless,
        "seccomp": True,
    }
    spec.update(extra)
    return spec


def run(
    binds: list[Bind],
    argv: list[str],
    *,
    env: dict[str, str],
    cwd: str = "/",
    network: str = "host",
    rootless: bool | None = None,
    stdout=None,
    stderr=None,
    timeout: float | None = None,
) -> int:
    """Run `argv` in a private root (host system read-only + `binds`); return its exit
    code (negative signal number if killed). On `timeout` the whole namespace is killed
    and subprocess.TimeoutExpired is raised. stdin is /dev/null."""
    with PrivateRoot(build_spec(binds, network=network, rootless=rootless)) as root:
        cid = root.spawn(argv, env=env, cwd=cwd, stdin=DEVNULL, stdout=stdout, stderr=stderr)
        try:
            return root.wait(cid, timeout)
        except TimeoutError:
            root.kill(cid)
            import subprocess

            raise subprocess.TimeoutExpired(argv, timeout) from None
