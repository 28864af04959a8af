"""A mini-swe-agent environment backed by a minisandbox sandbox.

Why: mini-swe-agent (and RL frameworks built on it, e.g. SkyRL) create their execution
environment from a config dict whose `environment_class` may be a dotted path, so a
task from a published store can replace a Docker container without forking the agent:

    environment:
      environment_class: minisandbox.integrations.minisweagent.MinisandboxEnvironment
      task_id: jpvanhal__inflection.09fb3146.func_pm_op_change__a021d67c
      store: results/store          # default: $MINISANDBOX_STORE or the checkout's store

`minisweagent.environments.get_environment(config["environment"])` then returns one.

Protocol: the current release (2.x) calls `execute(action: dict, cwd="", *, timeout=None)`
with `action["command"]`, and expects `{"output", "returncode", "exception_info"}`; the
environment raises `minisweagent.exceptions.Submitted` when the output's first line is
`COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT` (exit code 0). The 1.x form that SkyRL calls,
`execute(command: str, cwd="", timeout=None) -> {"output", "returncode"}`, is served by
the same method: a string command gets the 1.x behaviour (no `Submitted`; a timeout raises
`subprocess.TimeoutExpired` carrying the partial output, which 1.x agents turn into an
observation).

Every command is a fresh `bash -c` in the task's sandbox (mini-swe-agent's contract: no
state carries over except the file system), run in `cwd` (default /testbed) with the
task's venv active, no network by default, and killed with its whole process tree on
timeout.
"""

from __future__ import annotations

import logging
import platform
import subprocess
from typing import Any

from pydantic import BaseModel

from minisandbox.paths import REPO_PATH
from minisandbox.task import TaskSandbox, grade, open_task

__all__ = ["MinisandboxEnvironment", "MinisandboxEnvironmentConfig"]

SUBMIT_MARKER = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"


class MinisandboxEnvironmentConfig(BaseModel):
    task_id: str
    """Instance id of a task in the published store."""
    store: str | None = None
    """Store URL (local dir, s3://...); default $MINISANDBOX_STORE or the checkout's store."""
    cache: str | None = None
    """Node cache directory; default $MINISANDBOX_CACHE or ~/.cache/minisandbox."""
    io_slots: int | None = None
    """Concurrent unpacks on this node; default $MINISANDBOX_IO_SLOTS; 0 when Ray's
    `minisandbox_io` resource bounds them."""
    cwd: str = REPO_PATH
    """Working directory of commands."""
    env: dict[str, str] = {}
    """Environment variables added to every command."""
    timeout: int = 30
    """Seconds before a command is killed."""
    network: str = "none"
    """"none" (loopback only) or "host"."""
    catalog: list[str] = []
    """Environment catalogs used by `grade()`; default: those config/config.yaml names."""


class MinisandboxEnvironment:
    def __init__(
        self, *, config_class: type = MinisandboxEnvironmentConfig, logger: logging.Logger | None = None, **kwargs: Any
    ) -> None:
        """Open the task's sandbox in its start state. See `MinisandboxEnvironmentConfig`."""
        self.logger = logger or logging.getLogger("minisandbox.minisweagent")
        self.config = config_class(**kwargs)
        self.task: TaskSandbox | None = open_task(
            self.config.task_id,
            self.config.store,
            cache=self.config.cache,
            io_slots=self.config.io_slots,
            network=self.config.network,
        )
        self.logger.info("sandbox for %s ready in %.2f s", self.config.task_id, self.task.setup_seconds)

    # -- the mini-swe-agent protocol ------------------------------------------------------
    def execute(self, action: dict | str, cwd: str = "", timeout: int | None = None) -> dict[str, Any]:
        """Run one command; `action` is a dict with "command" (2.x) or the command (1.x)."""
        legacy = isinstance(action, str)
        command = action if legacy else action.get("command", "")
        limit = timeout or self.config.timeout
        try:
            res = self._task().execute(command, cwd=cwd or self.config.cwd, timeout=limit, env=self.config.env)
        except Exception as exc:  # a broken sandbox is reported to the agent, like a failed docker exec
            if legacy:
                raise
            return {
                "output": "",
                "returncode": -1,
                "exception_info": f"An error occurred while executing the command: {exc}",
                "extra": {"exception_type": type(exc).__name__, "exception": str(exc)},
            }
        if res.timed_out:
            if legacy:
                raise subprocess.TimeoutExpired(command, limit, output=res.output)
            return {
                "output": res.output,
                "returncode": -1,
                "exception_info": f"An error occurred while executing the command: "
                f"Command '{command}' timed out after {limit} seconds",
                "extra": {"exception_type": "TimeoutExpired", "exception": f"timed out after {limit} seconds"},
            }
        output = {"output": res.output, "returncode": res.returncode}
        if legacy:
            return output
        output["exception_info"] = ""
        self._check_finished(output)
        return output

    def _check_finished(self, output: dict[str, Any]) -> None:
        from minisweagent.exceptions import Submitted

        lines = output.get("output", "").lstrip().splitlines(keepends=True)
        if lines and lines[0].strip() == SUBMIT_MARKER and output["returncode"] == 0:
            submission = "".join(lines[1:])
            raise Submitted(
                {"role": "exit", "content": submission, "extra": {"exit_status": "Submitted", "submission": submission}}
            )

    def get_template_vars(self, **kwargs: Any) -> dict[str, Any]:
        task = {"task_id": self.config.task_id}
        if self.task is not None:
            task["problem_statement"] = self.task.record.problem_statement
        # 1.x has no recursive_merge; the values here are flat, so a plain merge matches it
        return {**self.config.model_dump(), **platform.uname()._asdict(), **task, **kwargs}

    def serialize(self) -> dict[str, Any]:
        return {
            "info": {
                "config": {
                    "environment": self.config.model_dump(mode="json"),
                    "environment_type": f"{self.__class__.__module__}.{self.__class__.__name__}",
                }
            }
        }

    # -- beyond the protocol --------------------------------------------------------------
    def _task(self) -> TaskSandbox:
        if self.task is None:
            raise RuntimeError(f"environment of {self.config.task_id} is closed; create a new one")
        return self.task

    def patch(self) -> str:
        """The changes in the repo since the task's start state (what to grade)."""
        return self._task().patch()

    def grade(self, patch: str | None = None):
        """Grade `patch` (default: the current changes) in a fresh sandbox; returns a
        `minisandbox.grading.evaluate.Evaluation` (`.resolved`, `.reason`, `.report`)."""
        if patch is None:
            patch = self.patch()
        task = self._task()
        return grade(
            self.config.task_id,
            patch,
            self.config.store,
            catalog=self.config.catalog or None,
            cache=task.cache,
            record=task.record,
        )

    def close(self) -> None:
        task, self.task = self.task, None
        if task is not None:
            task.close()

    def cleanup(self) -> None:  # the name mini-swe-agent's own environments use
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass
