"""A task's sandbox in its start state, as an agent sees it.

SWE-smith: the profile snapshot with the bug patch applied and the FAIL_TO_PASS test files
removed (as in the official task branches). SWE-bench: the base-commit snapshot as is.

The start state is committed as the repository's only commit (no parent, no reflog, the
clean snapshot's now-unreachable objects pruned), so neither `git diff`, `git log`,
`git reflog` nor `git fsck --lost-found` shows the bug or the fix. Grading never uses
this session: it starts a fresh sandbox (minisandbox.evaluate).
"""

from __future__ import annotations

import base64
import contextlib
import shlex
from dataclasses import dataclass, field
from typing import Any

from .evalscript import test_files_of
from .paths import REPO_PATH
from .records import TaskRecord

#: Fixed identity/date: the start commit of a task is the same on every node.
START_ENV = (
    "GIT_AUTHOR_NAME=minisandbox GIT_AUTHOR_EMAIL=task@minisandbox.invalid "
    "GIT_COMMITTER_NAME=minisandbox GIT_COMMITTER_EMAIL=task@minisandbox.invalid "
    "GIT_AUTHOR_DATE=2000-01-01T00:00:00+0000 GIT_COMMITTER_DATE=2000-01-01T00:00:00+0000 "
    "GIT_CONFIG_NOSYSTEM=1"
)


class TaskStartError(RuntimeError):
    pass


def start_script(record: TaskRecord, repo: str = REPO_PATH) -> str:
    """Bash that turns a clean snapshot into the task's start state (run inside the sandbox)."""
    q = shlex.quote
    lines = ["set -euo pipefail", f"cd {q(repo)}", "git config --global --add safe.directory '*' 2>/dev/null || true"]
    if record.format == "swesmith":
        bug = base64.b64encode(record.patch.encode()).decode()
        lines += [
            f"echo {bug} | base64 -d > /tmp/.msb-bug.patch",
            "git apply /tmp/.msb-bug.patch || { echo 'minisandbox: the task patch does not apply to its snapshot' >&2; exit 3; }",
            "rm -f /tmp/.msb-bug.patch",
        ]
        for path in test_files_of(list(record.fail_to_pass)):
            lines.append(f"rm -rf -- {q(path)}")
        lines += [
            # One parentless commit for the start state; nothing left that reaches the old tree.
            "git add -A -f",
            f"c=$(env {START_ENV} git commit-tree \"$(git write-tree)\" -m 'task start state')",
            "git -c core.logAllRefUpdates=false update-ref HEAD \"$c\"",
            "rm -rf .git/logs",
            "git -c gc.auto=0 prune --expire=now",
        ]
    return "\n".join(lines) + "\n"


@dataclass
class TaskSession:
    """An open task: its record, index entry and sandbox. Close it (or use `with`)."""

    task_id: str
    record: TaskRecord
    entry: dict[str, Any]
    sandbox: Any
    _stack: contextlib.ExitStack = field(repr=False, default_factory=contextlib.ExitStack)

    def close(self) -> None:
        self._stack.close()

    def __enter__(self) -> "TaskSession":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_task(task_id: str, store: Any = None, *, cache: Any = None, **sandbox_options: Any) -> TaskSession:
    """Fetch (node cache, I/O budget), open a sandbox and put it in the task's start state."""
    from .cache import Cache
    from .runtime import prepare
    from .sandbox import Layer, Sandbox

    if isinstance(cache, str):
        from pathlib import Path

        cache = Cache(Path(cache))
    stack = contextlib.ExitStack()
    try:
        pt = stack.enter_context(prepare(task_id, store, cache=cache))
        interp = pt.interpreter
        sb = stack.enter_context(
            Sandbox([Layer(str(p), m) for m, p in pt.layers.items()],
                    interpreter=(interp["version"], interp["prefix"]) if interp else None, **sandbox_options)
        )
        record = TaskRecord.from_dict(pt.record)
        res = sb.run(["bash", "-c", start_script(record)], cwd="/", timeout=300, _mark=False)
        if res.returncode != 0:
            raise TaskStartError(f"task {task_id}: start state failed (exit {res.returncode}): {res.output.strip()[-300:]}")
        sb.mark_start()
        return TaskSession(task_id, record, pt.task, sb, stack)
    except BaseException:
        stack.close()
        raise
