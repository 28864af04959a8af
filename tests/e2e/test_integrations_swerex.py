"""The SWE-ReX deployment/runtime against the real `swe-rex` package, on a task of the
bundled store built by the real workflow: lifecycle, sessions, exit codes, timeouts,
interrupts, one-shot commands, files, and a fix graded in a fresh sandbox."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from minisandbox.node.runtime import task_layer_names

pytest.importorskip("swerex")

from swerex.deployment.abstract import AbstractDeployment  # noqa: E402
from swerex.deployment.hooks.abstract import DeploymentHook  # noqa: E402
from swerex.exceptions import (  # noqa: E402
    BashIncorrectSyntaxError,
    CommandTimeoutError,
    DeploymentNotStartedError,
    NonZeroExitCodeError,
    SessionDoesNotExistError,
    SessionExistsError,
)
from swerex.runtime.abstract import (  # noqa: E402
    AbstractRuntime,
    BashAction,
    BashInterruptAction,
    CloseBashSessionRequest,
    Command,
    CreateBashSessionRequest,
    ReadFileRequest,
    UploadRequest,
    WriteFileRequest,
)

from minisandbox.integrations import grade  # noqa: E402
from minisandbox.integrations.swerex import MinisandboxDeployment  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.root]

TASK = "jpvanhal__inflection.09fb3146.func_pm_op_change__a021d67c"


def run(coro):
    return asyncio.run(coro)


class Steps(DeploymentHook):
    def __init__(self) -> None:
        self.messages: list[str] = []

    def on_custom_step(self, message: str) -> None:
        self.messages.append(message)


@pytest.fixture(scope="module")
def deployment(bundled_store, tmp_path_factory):
    assert TASK in bundled_store.task_ids
    d = MinisandboxDeployment(TASK, store=bundled_store.url, cache=tmp_path_factory.mktemp("cache"))
    run(d.start())
    yield d
    run(d.stop())


def test_lifecycle_hooks_and_lease(bundled_store, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    d = MinisandboxDeployment(TASK, store=bundled_store.url, cache=cache)
    assert isinstance(d, AbstractDeployment)
    hook = Steps()
    d.add_hook(hook)
    assert not run(d.is_alive())
    with pytest.raises(DeploymentNotStartedError):
        d.runtime
    run(d.start())
    try:
        assert isinstance(d.runtime, AbstractRuntime)
        assert run(d.is_alive()).is_alive
        assert run(d.runtime.is_alive())
        assert hook.messages and TASK in hook.messages[0]
        leases = list((cache / "leases").rglob("*.json"))
        # every layer (repo, env, interpreter) is leased while the sandbox runs, and the
        # start-state layer kept for the task on this node (docs/sandbox.md)
        assert len(task_layer_names(TASK, bundled_store.url)) == 3
        assert len(leases) == 3 + 1
    finally:
        run(d.stop())
    assert not run(d.is_alive())
    assert list((cache / "leases").rglob("*.json")) == []
    run(d.stop())  # idempotent


def test_start_state_is_the_task(deployment) -> None:
    rt = deployment.runtime
    out = run(
        rt.execute(
            Command(
                command="git log --oneline | wc -l; git status --porcelain; ls; which python; "
                "grep -n 'number % 10 in' inflection/__init__.py",
                shell=True,
                cwd="/testbed",
            )
        )
    )
    lines = out.stdout.splitlines()
    assert lines[0].strip() == "1"  # one root commit: no history with the fix
    assert "test_inflection.py" not in lines  # FAIL_TO_PASS test file removed
    assert "/opt/miniconda3/envs/testbed/bin/python" in lines
    assert any("number % 10 in (11, 12, 13)" in line for line in lines)  # the bug is in


def test_sessions_exit_codes_and_checks(deployment) -> None:
    rt = deployment.runtime
    run(rt.write_file(WriteFileRequest(path="/root/.bashrc", content="export FROM_RC=yes\n")))
    run(rt.create_session(CreateBashSessionRequest(session="s1", startup_source=["/root/.bashrc"])))
    with pytest.raises(SessionExistsError):
        run(rt.create_session(CreateBashSessionRequest(session="s1")))
    obs = run(rt.run_in_session(BashAction(session="s1", command="cd /testbed/inflection && export A=1")))
    assert obs.exit_code == 0
    obs = run(rt.run_in_session(BashAction(session="s1", command="echo $FROM_RC $A; pwd\nls -d ../docs")))
    assert obs.output.split() == ["yes", "1", "/testbed/inflection", "../docs"]
    obs = run(rt.run_in_session(BashAction(session="s1", command="(exit 7)", check="silent")))
    assert obs.exit_code == 7
    obs = run(rt.run_in_session(BashAction(session="s1", command="(exit 7)", check="ignore")))
    assert obs.exit_code is None
    with pytest.raises(NonZeroExitCodeError, match="exit code 3"):
        run(
            rt.run_in_session(
                BashAction(
                    session="s1", command="echo boom; exit_three() { return 3; }; exit_three", error_msg="my step"
                )
            )
        )
    with pytest.raises(BashIncorrectSyntaxError):
        run(rt.run_in_session(BashAction(session="s1", command="if then fi")))
    # a second session is independent
    run(rt.create_session(CreateBashSessionRequest(session="s2")))
    obs = run(rt.run_in_session(BashAction(session="s2", command="echo ${A:-unset}; pwd")))
    assert obs.output.split() == ["unset", "/testbed"]
    run(rt.close_session(CloseBashSessionRequest(session="s2")))
    with pytest.raises(SessionDoesNotExistError):
        run(rt.run_in_session(BashAction(session="s2", command="true")))
    with pytest.raises(SessionDoesNotExistError):
        run(rt.close_session(CloseBashSessionRequest(session="nope")))


def test_timeout_keeps_the_session(deployment) -> None:
    rt = deployment.runtime
    run(rt.create_session(CreateBashSessionRequest(session="t")))
    run(rt.run_in_session(BashAction(session="t", command="export KEEP=kept; cd /tmp")))
    t0 = time.monotonic()
    with pytest.raises(CommandTimeoutError):
        run(rt.run_in_session(BashAction(session="t", command="sleep 60", timeout=1)))
    assert time.monotonic() - t0 < 10
    # what SWE-agent does after a timeout: interrupt, then go on in the same session
    assert run(rt.run_in_session(BashInterruptAction(session="t"))).exit_code == 0
    obs = run(rt.run_in_session(BashAction(session="t", command="echo $KEEP; pwd; pgrep -x sleep || echo none")))
    assert obs.output.split() == ["kept", "/tmp", "none"]


def test_interrupt_a_running_command(deployment) -> None:
    rt = deployment.runtime
    run(rt.create_session(CreateBashSessionRequest(session="i")))

    async def scenario():
        running = asyncio.create_task(
            rt.run_in_session(BashAction(session="i", command="echo started; sleep 60; sleep 60", check="silent"))
        )
        await asyncio.sleep(1.0)
        t0 = time.monotonic()
        await rt.run_in_session(BashInterruptAction(session="i", timeout=0.5))
        obs = await asyncio.wait_for(running, 10)
        return obs, time.monotonic() - t0

    obs, seconds = run(scenario())
    assert "started" in obs.output
    assert obs.exit_code != 0  # the last sleep died of SIGINT
    assert seconds < 5
    assert run(rt.run_in_session(BashAction(session="i", command="echo alive"))).output.strip() == "alive"


def test_execute(deployment) -> None:
    rt = deployment.runtime
    r = run(rt.execute(Command(command="echo out; echo err >&2; exit 3", shell=True)))
    assert (r.stdout, r.stderr, r.exit_code) == ("out\n", "err\n", 3)
    r = run(rt.execute(Command(command="echo out; echo err >&2", shell=True, merge_output_streams=True)))
    assert sorted(r.stdout.split()) == ["err", "out"] and r.stderr == ""
    r = run(
        rt.execute(
            Command(
                command=["python", "-c", "import os, sys; print(sys.prefix, os.getcwd(), os.environ['X'])"],
                cwd="/tmp",
                env={"X": "x1"},
            )
        )
    )
    assert r.stdout.split() == ["/opt/miniconda3/envs/testbed", "/tmp", "x1"]
    with pytest.raises(NonZeroExitCodeError, match="exit code 1"):
        run(rt.execute(Command(command="false", shell=True, check=True)))
    t0 = time.monotonic()
    with pytest.raises(CommandTimeoutError):
        run(rt.execute(Command(command=["sleep", "60"], timeout=1)))
    assert time.monotonic() - t0 < 10
    # a background child holding stdout open does not block the call
    t0 = time.monotonic()
    r = run(rt.execute(Command(command="sleep 30 & echo fg", shell=True, timeout=20)))
    assert r.stdout == "fg\n" and time.monotonic() - t0 < 5


def test_files_and_upload(deployment, tmp_path: Path) -> None:
    rt = deployment.runtime
    run(rt.write_file(WriteFileRequest(path="/root/tools/a/b.txt", content="héllo\n")))
    assert run(rt.read_file(ReadFileRequest(path="/root/tools/a/b.txt"))).content == "héllo\n"
    src = tmp_path / "bundle"
    (src / "bin").mkdir(parents=True)
    (src / "bin" / "tool").write_text("#!/bin/sh\necho tool-ran\n")
    (src / "bin" / "tool").chmod(0o755)
    (src / "config.yaml").write_text("k: v\n")
    run(rt.upload(UploadRequest(source_path=str(src), target_path="/root/tools/bundle")))
    run(rt.upload(UploadRequest(source_path=str(src / "config.yaml"), target_path="/root/single.yaml")))
    r = run(
        rt.execute(
            Command(
                command="/root/tools/bundle/bin/tool; cat /root/tools/bundle/config.yaml /root/single.yaml", shell=True
            )
        )
    )
    assert r.stdout.split() == ["tool-ran", "k:", "v", "k:", "v"]
    with pytest.raises(FileNotFoundError):
        run(rt.read_file(ReadFileRequest(path="/root/does-not-exist")))
    with pytest.raises(FileNotFoundError):
        run(rt.upload(UploadRequest(source_path=str(tmp_path / "missing"), target_path="/root/x")))
    # nothing outside the repo shows up in the agent's patch
    assert "tools" not in run(deployment.patch())


def test_fix_through_the_runtime_then_grade(bundled_store, tmp_path: Path) -> None:
    d = MinisandboxDeployment(TASK, store=bundled_store.url, cache=tmp_path / "cache")
    run(d.start())
    try:
        rt = d.runtime
        run(rt.create_session(CreateBashSessionRequest()))
        assert run(d.patch()) == ""
        run(
            rt.run_in_session(
                BashAction(
                    command="sed -i 's/number % 10 in (11, 12, 13)/number % 100 in (11, 12, 13)/' "
                    "inflection/__init__.py"
                )
            )
        )
        obs = run(
            rt.run_in_session(
                BashAction(
                    command="python -c 'import inflection; print(inflection.ordinal(111), inflection.ordinal(11))'"
                )
            )
        )
        assert obs.output.split() == ["th", "th"]
        patch = run(d.patch())
    finally:
        run(d.stop())
    assert "+    if number % 100 in (11, 12, 13):" in patch
    ev = grade(TASK, patch, bundled_store.url, catalog=bundled_store.catalog, cache=tmp_path / "cache")
    assert ev.resolved, ev.report
    # the untouched start state does not resolve the task
    assert not grade(TASK, "", bundled_store.url, catalog=bundled_store.catalog, cache=tmp_path / "cache").resolved
