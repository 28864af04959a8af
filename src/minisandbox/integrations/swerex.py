"""SWE-ReX deployment and runtime backed by a minisandbox sandbox.

Why: SWE-agent (and anything else built on SWE-ReX) talks to its environment only through
`swerex.deployment.abstract.AbstractDeployment` and its `AbstractRuntime`. Implementing
those two with SWE-ReX's own request/response models lets such a tool run a task from a
published store instead of a Docker container, without forking it: pass a
`MinisandboxDeployment` wherever an `AbstractDeployment` instance is accepted (SWE-agent's
`SWEEnv(deployment=...)`). SWE-ReX's `DeploymentConfig` union is closed, so this is used
programmatically, not from a SWE-ReX config file.

Semantics follow `swerex.runtime.local.LocalRuntime`:

* `run_in_session(BashAction)`: the command runs in a persistent bash session of the
  sandbox (cwd, variables and functions carry over). `check="raise"` raises
  `NonZeroExitCodeError`, `"silent"` returns the code, `"ignore"` returns `exit_code=None`.
  A syntax error raises `BashIncorrectSyntaxError` before anything runs.
* timeouts raise `CommandTimeoutError` like LocalRuntime; unlike it, the command has
  already been stopped (SIGINT, then SIGKILL to its process tree), so the session stays
  usable and a following `BashInterruptAction` (what SWE-agent sends) is a no-op.
* `BashInterruptAction` interrupts the running command of that session (Ctrl-C to its
  processes, repeated up to `n_retry` times until the command returns). The session's
  bash itself is not signalled, so after an interrupted element of a command list the
  next elements still run (an interactive terminal would drop them).
* `execute(Command)`: a separate process, stdout and stderr apart unless
  `merge_output_streams`; `env` is added to the sandbox's environment (the sandbox has no
  host environment to replace). A string command without `shell=True` is split with shlex.
* `read_file` / `write_file` / `upload` act on the sandbox's file system; `upload` of a
  directory creates `target_path` with the directory's content (like `shutil.copytree`).
* Interactive commands (`is_interactive_command` / `is_interactive_quit`) are not
  supported: they raise `NotImplementedError`.

All blocking sandbox calls run in worker threads, so the caller's event loop keeps going.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shlex
import subprocess
import threading
from typing import Any

from swerex.deployment.abstract import AbstractDeployment
from swerex.deployment.hooks.abstract import CombinedDeploymentHook, DeploymentHook
from swerex.exceptions import (
    BashIncorrectSyntaxError,
    CommandTimeoutError,
    DeploymentNotStartedError,
    NonZeroExitCodeError,
    SessionDoesNotExistError,
    SessionExistsError,
)
from swerex.runtime.abstract import (
    AbstractRuntime,
    Action,
    BashInterruptAction,
    BashObservation,
    CloseBashSessionResponse,
    CloseResponse,
    CloseSessionRequest,
    CloseSessionResponse,
    Command,
    CommandResponse,
    CreateBashSessionRequest,
    CreateBashSessionResponse,
    CreateSessionRequest,
    CreateSessionResponse,
    IsAliveResponse,
    Observation,
    ReadFileRequest,
    ReadFileResponse,
    UploadRequest,
    UploadResponse,
    WriteFileRequest,
    WriteFileResponse,
)

from minisandbox.task import Cache, Sandbox, TaskSandbox, open_task, shell_session

__all__ = ["MinisandboxDeployment", "MinisandboxRuntime"]


def check_bash_syntax(command: str) -> None:
    """Raise `BashIncorrectSyntaxError` if `bash -n` rejects `command` (as LocalRuntime does)."""
    proc = subprocess.run(["bash", "-n"], input=command.encode(), capture_output=True)
    if proc.returncode != 0:
        out = proc.stdout.decode(errors="backslashreplace")
        err = proc.stderr.decode(errors="backslashreplace")
        raise BashIncorrectSyntaxError(
            f"Error (exit code {proc.returncode}) while checking bash command \n{command!r}\n"
            f"---- Stderr ----\n{err}\n---- Stdout ----\n{out}",
            extra_info={"bash_stdout": out, "bash_stderr": err},
        )


class MinisandboxRuntime(AbstractRuntime):
    """An `AbstractRuntime` over one open `Sandbox`. `on_close` runs after the sandbox is
    closed (the deployment releases the task's lease there)."""

    def __init__(self, sandbox: Sandbox, *, logger: logging.Logger | None = None, on_close=None) -> None:
        self.sandbox = sandbox
        self.logger = logger or logging.getLogger("minisandbox.swerex")
        self._sessions: set[str] = set()
        self._idle: dict[str, threading.Event] = {}  # set while no command runs in that session
        self._on_close = on_close
        self._closed = False

    @property
    def sessions(self) -> list[str]:
        return sorted(self._sessions)

    async def is_alive(self, *, timeout: float | None = None) -> IsAliveResponse:
        if self._closed:
            return IsAliveResponse(is_alive=False, message="runtime closed")
        if not self.sandbox.alive:
            return IsAliveResponse(is_alive=False, message=f"sandbox {self.sandbox.id} is not running")
        return IsAliveResponse(is_alive=True)

    # -- sessions -------------------------------------------------------------------------
    async def create_session(self, request: CreateSessionRequest) -> CreateSessionResponse:
        if not isinstance(request, CreateBashSessionRequest):
            raise ValueError(f"unknown session type: {request!r}")
        if request.session in self._sessions:
            raise SessionExistsError(f"session {request.session} already exists")
        session = await asyncio.to_thread(shell_session, self.sandbox, request.session)
        self._sessions.add(request.session)
        output = ""
        for path in request.startup_source:
            res = await asyncio.to_thread(
                session.run, f"source {shlex.quote(path)}", max(request.startup_timeout, 10.0)
            )
            output += res.output
        return CreateBashSessionResponse(output=output)

    async def run_in_session(self, action: Action) -> Observation:
        if action.session not in self._sessions:
            raise SessionDoesNotExistError(f"session {action.session!r} does not exist")
        session = shell_session(self.sandbox, action.session)
        if isinstance(action, BashInterruptAction):
            return await self._interrupt(action)
        if action.is_interactive_command or action.is_interactive_quit:
            raise NotImplementedError(
                "interactive commands are not supported by the minisandbox runtime; run the program non-interactively"
            )
        check_bash_syntax(action.command)
        idle = self._idle.setdefault(action.session, threading.Event())
        idle.clear()
        try:
            res = await asyncio.to_thread(session.run, action.command, action.timeout)
        finally:
            idle.set()
        if res.timed_out:
            raise CommandTimeoutError(
                f"timeout after {action.timeout} seconds while running command "
                f"{action.command!r} (stopped; the session is still usable)"
            )
        output = res.output
        if action.check == "ignore":
            return BashObservation(output=output, exit_code=None)
        failure = "the session's shell was restarted (state lost)" if getattr(res, "restarted", False) else ""
        if action.check == "raise" and res.returncode != 0:
            msg = f"Command {action.command!r} failed with exit code {res.returncode}. Here is the output:\n{output!r}"
            raise NonZeroExitCodeError(f"{action.error_msg}: {msg}" if action.error_msg else msg)
        return BashObservation(output=output, exit_code=res.returncode, failure_reason=failure)

    async def _interrupt(self, action: BashInterruptAction) -> BashObservation:
        """Ctrl-C until the running command returns (a list like `sleep 9; sleep 9` needs
        one per element): `n_retry` rounds of SIGINT, each waiting `timeout` seconds."""
        idle = self._idle.get(action.session)
        if idle is None or idle.is_set():
            return BashObservation(output="", exit_code=0, expect_string="")
        session = shell_session(self.sandbox, action.session)
        for _ in range(max(1, action.n_retry)):
            session.interrupt()
            if await asyncio.to_thread(idle.wait, max(action.timeout, 0.05)):
                return BashObservation(output="", exit_code=0, expect_string="")
        raise CommandTimeoutError(f"failed to interrupt session {action.session!r} after {action.n_retry} tries")

    async def close_session(self, request: CloseSessionRequest) -> CloseSessionResponse:
        if request.session not in self._sessions:
            raise SessionDoesNotExistError(f"session {request.session!r} does not exist")
        self._sessions.discard(request.session)
        await asyncio.to_thread(self.sandbox.close_session, request.session)
        return CloseBashSessionResponse()

    # -- one-shot commands and files ------------------------------------------------------
    async def execute(self, command: Command) -> CommandResponse:
        if command.shell:
            argv = [
                "/bin/sh",
                "-c",
                command.command if isinstance(command.command, str) else shlex.join(command.command),
            ]
        else:
            argv = shlex.split(command.command) if isinstance(command.command, str) else list(command.command)
        stdout, stderr, code, timed_out = await asyncio.to_thread(
            _run_split, self.sandbox, argv, command.cwd, command.env, command.timeout, command.merge_output_streams
        )
        if timed_out:
            raise CommandTimeoutError(f"Timeout ({command.timeout}s) exceeded while running command")
        r = CommandResponse(stdout=stdout, stderr=stderr, exit_code=code)
        if command.check and code != 0:
            msg = f"Command {command.command!r} failed with exit code {code}. Stdout:\n{stdout!r}\nStderr:\n{stderr!r}"
            raise NonZeroExitCodeError(f"{command.error_msg}: {msg}" if command.error_msg else msg)
        return r

    async def read_file(self, request: ReadFileRequest) -> ReadFileResponse:
        try:
            data = await asyncio.to_thread(self.sandbox.read_file, request.path)
        except FileNotFoundError:
            raise
        except OSError as exc:  # the sandbox reports errno only as text
            if "No such file" in str(exc):
                raise FileNotFoundError(f"{request.path} does not exist in the sandbox") from None
            raise
        return ReadFileResponse(content=data.decode(request.encoding or "utf-8", request.errors or "strict"))

    async def write_file(self, request: WriteFileRequest) -> WriteFileResponse:
        await asyncio.to_thread(self.sandbox.write_file, request.path, request.content)
        return WriteFileResponse()

    async def upload(self, request: UploadRequest) -> UploadResponse:
        if not os.path.exists(request.source_path):
            raise FileNotFoundError(f"upload: {request.source_path} does not exist on the host")
        await asyncio.to_thread(self.sandbox.upload, request.source_path, request.target_path)
        return UploadResponse()

    async def close(self) -> CloseResponse:
        if not self._closed:
            self._closed = True
            self._sessions.clear()
            try:
                await asyncio.to_thread(self.sandbox.close)
            finally:
                if self._on_close is not None:
                    self._on_close()
        return CloseResponse()


def _run_split(
    sandbox: Sandbox, argv: list[str], cwd: str | None, env: dict[str, str] | None, timeout: float | None, merge: bool
) -> tuple[str, str, int, bool]:
    """Run argv in the sandbox with stdout and stderr on separate pipes (or merged);
    returns (stdout, stderr, exit code, timed out). The sandbox's own collection
    (`Sandbox.collect`): on timeout the process tree is killed, and after the exit only
    already-buffered output is read, so a background child holding a pipe open cannot block."""
    out_r, out_w = os.pipe2(os.O_CLOEXEC)
    err_r, err_w = (out_r, out_w) if merge else os.pipe2(os.O_CLOEXEC)
    try:
        cid = sandbox.spawn(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=out_w, stderr=err_w)
    except BaseException:
        for fd in {out_r, out_w, err_r, err_w}:
            os.close(fd)
        raise
    for fd in {out_w, err_w}:
        os.close(fd)
    fds = [out_r] if merge else [out_r, err_r]
    try:
        outs, code, timed_out = sandbox.collect(cid, fds, timeout)
    finally:
        for fd in fds:
            os.close(fd)
    out = outs[0].decode(errors="backslashreplace")
    err = "" if merge else outs[1].decode(errors="backslashreplace")
    return out, err, code, timed_out


class MinisandboxDeployment(AbstractDeployment):
    """A SWE-ReX deployment that starts a minisandbox sandbox for one task of a published
    store, in the task's start state (repo at /testbed, its venv active).

        deployment = MinisandboxDeployment("owner__repo.abc123.func_pm__x", store="results/store")
        await deployment.start()
        runtime = deployment.runtime        # an AbstractRuntime
        ...
        patch = await deployment.patch()    # the agent's changes since the start state
        await deployment.stop()

    `cache`: a Cache or directory (default $MINISANDBOX_CACHE); `io_slots`: the node's
    I/O budget (0 when Ray's `minisandbox_io` bounds it); `sandbox_options`: SandboxConfig
    fields (network="none" by default, limits=..., scratch_dir=...)."""

    def __init__(
        self,
        task_id: str,
        *,
        store: str | os.PathLike[str] | None = None,
        cache: Cache | str | os.PathLike[str] | None = None,
        io_slots: int | None = None,
        logger: logging.Logger | None = None,
        **sandbox_options: Any,
    ) -> None:
        self.task_id = task_id
        self.store = store
        self.cache = cache
        self.io_slots = io_slots
        self.sandbox_options = sandbox_options
        self.logger = logger or logging.getLogger("minisandbox.swerex")
        self._hooks = CombinedDeploymentHook()
        self._task: TaskSandbox | None = None
        self._runtime: MinisandboxRuntime | None = None

    def add_hook(self, hook: DeploymentHook) -> None:
        self._hooks.add_hook(hook)

    async def is_alive(self, *, timeout: float | None = None) -> IsAliveResponse:
        if self._runtime is None:
            return IsAliveResponse(is_alive=False, message="deployment not started")
        return await self._runtime.is_alive(timeout=timeout)

    async def start(self) -> None:
        if self._runtime is not None:
            return
        self._hooks.on_custom_step(f"Preparing the sandbox of {self.task_id}")
        task = await asyncio.to_thread(
            open_task, self.task_id, self.store, cache=self.cache, io_slots=self.io_slots, **self.sandbox_options
        )
        self._task = task
        self.logger.info(
            "sandbox %s for %s ready in %.2f s (downloaded: %s)",
            task.sandbox.id,
            self.task_id,
            task.setup_seconds,
            task.info.get("downloaded"),
        )
        self._runtime = MinisandboxRuntime(task.sandbox, logger=self.logger, on_close=task.prepared.release)

    async def stop(self) -> None:
        runtime, self._runtime = self._runtime, None
        task, self._task = self._task, None
        if runtime is not None:
            await runtime.close()
        elif task is not None:
            task.close()

    @property
    def runtime(self) -> MinisandboxRuntime:
        if self._runtime is None:
            raise DeploymentNotStartedError()
        return self._runtime

    @property
    def task(self) -> TaskSandbox:
        """The open task (record, sandbox, lease)."""
        if self._task is None:
            raise DeploymentNotStartedError()
        return self._task

    async def patch(self) -> str:
        """The changes in /testbed since the task's start state (a git patch)."""
        return await asyncio.to_thread(self.task.patch)

    def __del__(self) -> None:
        # AbstractDeployment.__del__ drives an event loop; closing synchronously is enough here
        task, self._task, self._runtime = getattr(self, "_task", None), None, None
        if task is not None:
            try:
                task.close()
            except Exception:
                pass
