"""Every failure says why: a command that a limit, a signal or a timeout ended carries the
cause in one line (`ExecResult.cause`, the CLI's stderr, the grading report's `cause`).

The silent case that was found: as an unprivileged user, `minisandbox run --pids 64 --tmpfs
64M TASK -- '<fork to the limit, then fill /tmp>'` exited 254 with no message.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.fixtures.sandbox import ROOTLESS_PYTHON, SRC, TEST_USER
from tests.security.conftest import MODES

#: forks sleepers until the process limit refuses one, then fills /tmp (no more forks needed)
FORK_THEN_FILL = r"""
import os, sys, time
n = 0
try:
    while n < 1000:
        if os.fork() == 0:
            time.sleep(60)
            os._exit(0)
        n += 1
except OSError as exc:
    print("fork refused after", n, exc, file=sys.stderr)
try:
    with open("/tmp/fill", "wb") as fh:
        while True:
            fh.write(b"x" * (1 << 20))
except OSError as exc:
    print("write refused", exc, file=sys.stderr)
    sys.exit(3)
"""

BODY = """
    def run(limits, *argv, timeout=120):
        with Sandbox([Layer(P["repo"], "/testbed")], limits=Limits.default().with_settings(limits)) as sb:
            sb.write_file("/tmp/attack.py", P["attack"])
            res = sb.run(list(argv), timeout=timeout)
            return {"code": res.returncode, "cause": res.cause, "output": res.output[-600:],
                    "memory_mode": sb.limits_mode.get("memory", "")}

    out["both"] = run("pids=64,tmpfs=64M", "python3", "/tmp/attack.py")
    out["tmpfs"] = run("tmpfs=16M", "bash", "-c", "head -c 64M /dev/zero > /tmp/big")
    out["signal"] = run("", "bash", "-c", "kill -SEGV $$")
    out["timeout"] = run("", "bash", "-c", "exec sleep 100", timeout=1)
    out["memory"] = run("memory=128M", "python3", "-c", "x = bytearray(1 << 30); x[::4096] = b'1' * len(x[::4096])")
    out["ok"] = run("pids=64,tmpfs=64M", "true")
"""


@pytest.mark.parametrize("attack", MODES, indirect=True)
def test_limits_and_signals_are_named(attack) -> None:
    out = attack(BODY, attack=FORK_THEN_FILL)
    both = out["both"]
    assert both["code"] == 3, both
    assert "process limit (64" in both["cause"] and "tmpfs budget (64.0M) is full" in both["cause"], both
    assert "\n" not in both["cause"], both
    assert "minisandbox: tmpfs budget (64.0M) is full" in both["output"], both  # the agent sees it too
    assert out["tmpfs"]["code"] == 1 and out["tmpfs"]["cause"].startswith("tmpfs budget (16.0M) is full"), out
    assert out["signal"]["code"] == -11 and out["signal"]["cause"] == "killed by SIGSEGV", out
    assert out["timeout"]["cause"] == "timed out after 1 s: its processes were killed", out
    mem = out["memory"]
    if mem["memory_mode"].startswith("cgroup"):
        assert mem["code"] == -9 and mem["cause"].startswith("memory limit (128.0M) reached: the kernel killed"), mem
    else:  # RLIMIT_AS: the allocation itself fails (MemoryError), the program says so
        assert mem["code"] == 1 and "MemoryError" in mem["output"], mem
    assert out["ok"] == {"code": 0, "cause": "", "output": "", "memory_mode": out["ok"]["memory_mode"]}, out


@pytest.mark.parametrize(
    "user", [pytest.param("root", marks=pytest.mark.root), pytest.param("rootless", marks=pytest.mark.rootless)]
)
def test_cli_names_the_limits_of_a_silent_failure(user, request) -> None:
    """Attack 7 through the command line: one line on stderr names both limits."""
    from tests.fixtures.sandbox import make_layer_repo

    base, repo = make_layer_repo("msb-cause-")
    script = FORK_THEN_FILL.replace("'", "'\"'\"'")
    argv = [
        ROOTLESS_PYTHON if user == "rootless" else sys.executable,
        "-m",
        "minisandbox.cli",
        "sandbox-exec",
        "--layer",
        f"{repo}:/testbed",
        "--pids",
        "64",
        "--tmpfs",
        "64M",
        "--",
        f"python3 -c '{script}' 2>/dev/null",
    ]
    # a home of its own (the node's cache and state go there): with HOME=/tmp the root run left
    # /tmp/.cache/minisandbox/state owned by root, and the rootless run then failed on it
    home = base / "home"
    home.mkdir()
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "PYTHONPATH": SRC, "LANG": "C.UTF-8", "HOME": str(home)}
    if user == "rootless":
        request.getfixturevalue("rootless_user")
        subprocess.run(["chown", "-R", f"{TEST_USER}:{TEST_USER}", str(base)], check=True)
        argv = ["runuser", "-u", TEST_USER, "--", "env", "-i", *[f"{k}={v}" for k, v in env.items()], *argv]
    try:
        proc = subprocess.run(
            argv, capture_output=True, text=True, timeout=300, cwd="/tmp", env=None if user == "rootless" else env
        )
    finally:
        subprocess.run(["rm", "-rf", str(base)])
    assert proc.returncode == 3, (proc.returncode, proc.stderr)
    lines = [line for line in proc.stderr.splitlines() if line.startswith("minisandbox: the command ended")]
    assert len(lines) == 1, proc.stderr
    assert "process limit (64" in lines[0] and "tmpfs budget (64.0M) is full" in lines[0], proc.stderr


def test_grading_report_carries_the_cause(tmp_path) -> None:
    """The evaluation's report names what ended the run (the executor's ExecResult.cause)."""
    import contextlib

    from minisandbox.grading import evaluate as ev
    from minisandbox.sandbox.sandbox import ExecResult

    class Env:
        reference_dir = tmp_path

        def execute(self, script, timeout):
            return ExecResult(
                "no markers at all\n",
                -9,
                cause="memory limit (128.0M) reached: the kernel killed 1 process(es) (--memory)",
            )

    class Executor:
        prepares_task_state = True

        @contextlib.contextmanager
        def open(self, record):
            yield Env()

    from minisandbox.catalog import EnvSpec
    from minisandbox.records import normalize

    record = normalize(
        {
            "instance_id": "calc__calc.00000000.func_pm_op_change__abcd1234",
            "repo": "swesmith/calc__calc.00000000",
            "patch": "diff --git a/c.py b/c.py\n--- a/c.py\n+++ b/c.py\n@@ -1 +1 @@\n-a\n+b\n",
            "FAIL_TO_PASS": ["tests/test_calc.py::test_add"],
            "PASS_TO_PASS": [],
        }
    )
    spec = EnvSpec(
        name="calc.0000",
        kind="bundled",
        source=str(tmp_path),
        commit="0" * 40,
        python="3.11",
        test_cmd="pytest -rA",
        log_parser="pytest",
        timeout=20,
    )
    result = ev.evaluate(record, spec, "diff --git a/x b/x\n", Executor())
    rep = result.report[record.instance_id]
    assert rep["cause"].startswith("memory limit (128.0M)"), rep
    assert json.dumps(rep)
