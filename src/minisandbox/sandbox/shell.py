"""Persistent bash sessions inside a sandbox: cwd and environment carry over.

How: one long-lived `bash` per session reads commands from a pipe. Each command is sent
as a quoted here-document and run with `eval` (so a syntax error fails that command, not
the session) with stdin from /dev/null (so a command that reads stdin cannot swallow the
next ones), followed by a `printf` of a per-session random marker and the exit code. The
reader returns everything before the marker.

Interrupt and timeout: SIGINT to the running command's processes (bash's descendants, not
bash), then SIGKILL after a grace period; bash survives, so the session keeps its state. A
command that loops inside bash itself (a shell `while true` without children) cannot be
interrupted that way: the session is then restarted (`restarted` is set in the result).

CPU time limit: the session's bash runs in a cgroup of its own (`Sandbox.cpu_watch`), so
each command's CPU total is the growth of that cgroup while it runs; past the limit every
process in it but bash is killed (background jobs and daemons the command left included)
and the result says `limit_hit="cpu"`. When bash itself is what burns the CPU, the
session is restarted as for a timeout.
"""

from __future__ import annotations

import os
import secrets
import signal
import threading
import time
from typing import Any

from minisandbox.errors import MinisandboxError
from minisandbox.sandbox.rootfs import wait_readable
from minisandbox.sandbox.sandbox import ExecResult, Sandbox


class SessionError(MinisandboxError, RuntimeError):
    """The session's shell is gone."""


class SessionResult(ExecResult):
    """An `ExecResult` of a shell session's command."""

    def __init__(self, *args: Any, restarted: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.restarted = restarted  # the shell had to be replaced (state lost)


class ShellSession:
    def __init__(
        self,
        sandbox: Sandbox,
        name: str,
        *,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        startup: str | None = None,
    ) -> None:
        self.sandbox = sandbox
        self.name = name
        self._cwd, self._env, self._startup = cwd, env, startup
        self._lock = threading.Lock()
        self._busy = threading.Event()
        self._start()

    def _start(self) -> None:
        self._marker = f"__MINISANDBOX_{secrets.token_hex(8)}__"
        in_r, self._in = os.pipe2(os.O_CLOEXEC)
        self._out, out_w = os.pipe2(os.O_CLOEXEC)
        try:
            self._cid = self.sandbox.spawn(
                ["bash", "--norc", "--noprofile"],
                cwd=self._cwd,
                env=self._env,
                stdin=in_r,
                stdout=out_w,
                stderr=out_w,
                long_lived=True,
            )
        finally:
            os.close(in_r)
            os.close(out_w)
        self._buf = b""
        self._dead = False
        self._exit_code: int | None = None
        if self._startup:
            res = self._run(self._startup, 60)
            if res.returncode != 0:
                raise SessionError(
                    f"session {self.name}: start-up command failed ({res.returncode}): {res.output.strip()[-300:]}"
                )

    @property
    def alive(self) -> bool:
        return not self._dead and self.sandbox.alive

    def run(self, command: str, timeout: float | None = None) -> SessionResult:
        """Run `command` in this session; output is stdout+stderr interleaved."""
        with self._lock:
            if self._dead:
                raise SessionError(f"session {self.name} has exited (code {self._exit_code}); create it again")
            res = self._run(command, timeout)
            return self.sandbox._with_cause(res, timeout)  # type: ignore[return-value]  (same object)

    def _run(self, command: str, timeout: float | None) -> SessionResult:
        eof_tag = f"__MINISANDBOX_EOF_{secrets.token_hex(8)}__"
        script = (
            f"eval \"$(cat <<'{eof_tag}'\n{command}\n{eof_tag}\n)\" < /dev/null\n"
            f"printf '\\n{self._marker}%d\\n' \"$?\"\n"
        )
        self._busy.set()
        self._cpu = self.sandbox.cpu_watch(self._cid)
        try:
            view = memoryview(script.encode())
            while view:
                view = view[os.write(self._in, view) :]
        except BrokenPipeError:
            self._dead = True
            raise SessionError(f"session {self.name} has exited; create it again") from None
        try:
            return self._read_result(timeout)
        finally:
            self._busy.clear()

    def _read_result(self, timeout: float | None) -> SessionResult:
        deadline = None if timeout is None else time.monotonic() + timeout
        timed_out = restarted = False
        marker = ("\n" + self._marker).encode()
        max_out = self.sandbox.max_output
        kept = bytearray()
        truncated = False
        cpu = self._cpu
        limit_hit = ""

        def note(text: str) -> str:
            return text + cpu.message() if limit_hit and cpu is not None else text

        def used() -> float | None:
            return None if cpu is None else round(cpu.used, 3)

        while True:
            idx = self._buf.find(marker)
            if idx >= 0:
                end = self._buf.find(b"\n", idx + len(marker))
                if end >= 0:
                    out = self._buf[:idx]
                    code = int(self._buf[idx + len(marker) : end])
                    self._buf = self._buf[end + 1 :]
                    kept += out[: max(0, max_out - len(kept))]
                    truncated = truncated or len(out) > max_out
                    if cpu is not None and not limit_hit and code != 0 and cpu.exceeded(force=True):
                        limit_hit = cpu.hit  # the RLIMIT_CPU backstop got there first
                    return SessionResult(
                        note(kept.decode("utf-8", "replace")),
                        code,
                        timed_out,
                        truncated,
                        restarted=restarted,
                        limit_hit=limit_hit,
                        cpu_seconds=used(),
                    )
            # keep only what might be the start of a marker in the buffer
            if len(self._buf) > len(marker) + 32:
                cut = len(self._buf) - len(marker) - 32
                if len(kept) < max_out:
                    kept += self._buf[:cut][: max_out - len(kept)]
                else:
                    truncated = True
                self._buf = self._buf[cut:]
            now = time.monotonic()
            over = not limit_hit and cpu is not None and cpu.exceeded()
            if (over or (deadline is not None and now >= deadline)) and not timed_out:
                if over:
                    limit_hit = cpu.hit or "cpu"
                    stopped = self._stop_command(kill=lambda: self.sandbox.kill_cgroup(self._cid, spare_leader=True))
                    cpu.exceeded(force=True)
                else:
                    timed_out = True
                    stopped = self._stop_command()
                if not stopped:
                    restarted = True
                    out = (bytes(kept) + self._buf).decode("utf-8", "replace")
                    self._restart()
                    return SessionResult(
                        note(out),
                        -signal.SIGKILL,
                        timed_out,
                        truncated,
                        restarted=True,
                        limit_hit=limit_hit,
                        cpu_seconds=used(),
                    )
                deadline = None
                continue
            wait = 0.5 if deadline is None else max(0.0, min(0.5, deadline - now))
            ready = wait_readable([self._out], wait)
            if ready:
                data = os.read(self._out, 1 << 16)
                if not data:
                    self._dead = True
                    self._exit_code = self.sandbox.wait(self._cid, 10)
                    out = (bytes(kept) + self._buf).decode("utf-8", "replace")
                    return SessionResult(
                        note(out),
                        self._exit_code,
                        timed_out,
                        truncated,
                        restarted=False,
                        limit_hit=limit_hit,
                        cpu_seconds=used(),
                    )
                self._buf += data
            else:
                code = self.sandbox.poll(self._cid)
                if code is not None:  # bash exited (`exit`), a background job holds the pipe
                    self._dead = True
                    self._exit_code = code
                    out = (bytes(kept) + self._buf).decode("utf-8", "replace")
                    return SessionResult(
                        note(out), code, timed_out, truncated, restarted=False, limit_hit=limit_hit, cpu_seconds=used()
                    )

    def _stop_command(self, grace: float = 1.0, kill=None) -> bool:
        """SIGINT then SIGKILL the running command (bash's descendants), or call `kill`
        once; True when the marker came back, i.e. bash is alive and idle again."""
        for sig in (signal.SIGINT, signal.SIGKILL) if kill is None else (None,):
            if kill is None:
                self.sandbox.kill(self._cid, sig, children_only=True)
            else:
                kill()
            end = time.monotonic() + grace
            while time.monotonic() < end:
                if ("\n" + self._marker).encode() in self._buf:
                    return True
                ready = wait_readable([self._out], 0.05)
                if ready:
                    data = os.read(self._out, 1 << 16)
                    if not data:
                        return False
                    self._buf += data
        return ("\n" + self._marker).encode() in self._buf

    def interrupt(self) -> None:
        """Interrupt the running command (like Ctrl-C); the session stays usable. Safe to
        call from another thread while run() is blocked."""
        if self._busy.is_set():
            self.sandbox.kill(self._cid, signal.SIGINT, children_only=True)

    def _restart(self) -> None:
        self._kill()
        self._start()

    def _kill(self) -> None:
        try:
            self.sandbox.kill(self._cid, signal.SIGKILL)
            self.sandbox.wait(self._cid, 10)
        except Exception:
            pass
        self.detach()

    def detach(self) -> None:
        """Close our pipe ends (the sandbox is closing and kills the shell)."""
        for fd in (getattr(self, "_in", None), getattr(self, "_out", None)):
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self._in = self._out = None
        self._dead = True

    def close(self) -> None:
        """End the session (kills its shell and everything it started)."""
        with self._lock:
            if not self._dead:
                self._kill()


def session(sandbox: Sandbox, name: str = "default", **kw) -> ShellSession:
    """The persistent bash session `name` of `sandbox`, created on first use (and again when
    its shell has exited). `kw`: `ShellSession` options (cwd, env, startup)."""
    return sandbox.session_for(name, lambda: ShellSession(sandbox, name, **kw))
