"""`minisandbox run | shell | sandbox-exec` through the real command line (as root)."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from minisandbox.sandbox import interpreters
from tests.fixtures.runtime import build_local_store, build_store, publish_tree, write_index
from tests.fixtures.sandbox import SRC
from tests.fixtures.signals import default_signals
from tests.sandbox.test_sandbox import make_repo

pytestmark = pytest.mark.root


def cli(*args: str, input: str | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "minisandbox.cli", *args],
        capture_output=True,
        text=True,
        input=input,
        timeout=timeout,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": SRC},
        cwd="/",
    )


def test_sandbox_exec_layer_diff_and_exit_code(as_root, tmp_path):
    repo = make_repo(tmp_path / "repo")
    res = cli("sandbox-exec", "--layer", f"{repo}:/testbed", "--diff", "--", "pwd; echo extra >> pkg/mod.py; exit 5")
    assert res.returncode == 5, res.stderr
    assert res.stdout.startswith("/testbed\n")
    assert "+extra" in res.stdout and "diff --git a/pkg/mod.py" in res.stdout
    assert "extra" not in (repo / "pkg" / "mod.py").read_text()


def test_sandbox_exec_timeout_and_argv(as_root):
    res = cli("sandbox-exec", "--timeout", "0.5", "--", "sleep", "30")
    assert res.returncode == 124 and "timed out" in res.stderr
    res = cli("sandbox-exec", "--", "printf", "%s|", "a b", "c")
    assert res.stdout == "a b|c|"


def test_sandbox_exec_read_only_layer_and_bad_layer(as_root, tmp_path):
    repo = make_repo(tmp_path / "repo")
    res = cli("sandbox-exec", "--layer", f"{repo}:/data:ro", "--", "touch /data/x")
    assert res.returncode == 1 and "Read-only file system" in res.stderr
    res = cli("sandbox-exec", "--layer", "nocolon", "--", "true")
    assert res.returncode == 2 and "DIR:MOUNTPATH" in res.stderr


def test_session_on_stdin_keeps_state(as_root, tmp_path):
    repo = make_repo(tmp_path / "repo")
    res = cli("sandbox-exec", "--layer", f"{repo}:/testbed", input="cd pkg\nexport A=7\npwd; echo $A\nexit 3\n")
    assert res.stdout == "/testbed/pkg\n7\n"
    assert res.returncode == 3


def test_run_and_shell_for_a_task_in_a_store(as_root, tmp_path):
    info = build_store(tmp_path / "store", tmp_path / "work", n_envs=1, n_tasks=1)
    # the fixture's env names an interpreter this machine lacks: record the local system one
    local = next((i for i in interpreters.available() if i.prefix == "/usr"), None)
    if local is None:
        pytest.skip("no system python under /usr")
    mpath = tmp_path / "store" / "artifacts" / "env" / f"{info['envs'][0]['key']}.manifest.json"
    manifest = json.loads(mpath.read_text())
    manifest["interpreter"] = {"version": local.version, "prefix": "/usr"}
    mpath.write_text(json.dumps(manifest))
    bug = (
        "diff --git a/src/mod.py b/src/mod.py\n--- a/src/mod.py\n+++ b/src/mod.py\n"
        "@@ -1,2 +1,2 @@\n def f():\n-    return 1\n+    return 2\n"
    )
    for t in info["tasks"]:
        t["record"].update({"patch": bug, "fail_to_pass": [], "pass_to_pass": []})
        if t["status"] == "ready":  # snapshots are git repositories: republish the fixture's tree as one
            tree = tmp_path / "work" / t["repo_key"]
            subprocess.run(
                "git init -q && git add -A && git -c user.name=t -c user.email=t@t commit -qm snap",
                shell=True,
                cwd=tree,
                check=True,
            )
            (tmp_path / "repub").mkdir(exist_ok=True)
            publish_tree(
                info["store"],
                "repo",
                t["repo_key"],
                tree,
                tmp_path / "repub",
                "tar.zst",
                {"commit": "0" * 40, "source": "local"},
            )
    write_index(info["store"], info["tasks"])
    tid = info["tasks"][0]["instance_id"]
    common = ["--store", str(tmp_path / "store"), "--cache", str(tmp_path / "cache")]
    res = cli(
        "run",
        *common,
        "--diff",
        tid,
        "--",
        "ls /testbed /opt/miniconda3/envs/testbed; cat /testbed/src/mod.py; echo new > /testbed/new.txt",
    )
    assert res.returncode == 0, res.stderr
    assert "README.md" in res.stdout and "pyvenv.cfg" in res.stdout
    assert "return 2" in res.stdout  # the task's start state: its bug patch applied ...
    assert "diff --git a/new.txt b/new.txt" in res.stdout
    assert "src/mod.py" not in res.stdout.split("diff --git")[1]  # ... and not part of the agent's diff
    res = cli("shell", *common, tid, input="cd src\npwd\nexit 0\n")
    assert res.returncode == 0 and res.stdout == "/testbed/src\n", res.stderr
    res = cli("run", *common, "demo__proj.broken", "--", "true")
    assert res.returncode == 1 and "demo__proj.broken" in res.stderr and len(res.stderr.splitlines()) == 1
    assert not list(Path(tmp_path / "work").glob("**/new.txt"))


def test_sandbox_exec_activates_a_layer_at_the_venv_path(as_root, tmp_path):
    """docs/sandbox.md's `sandbox-exec --layer ENV:/opt/miniconda3/envs/testbed -- python ...`
    finds the venv's python, as `run` does (no `python: command not found`)."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").write_text('#!/bin/sh\necho venv-python "$@"\n')
    (venv / "bin" / "python").chmod(0o755)
    res = cli("sandbox-exec", "--layer", f"{venv}:/opt/miniconda3/envs/testbed", "--", "python -V; echo $VIRTUAL_ENV")
    assert res.returncode == 0, res.stderr
    assert res.stdout == "venv-python -V\n/opt/miniconda3/envs/testbed\n"
    plain = cli("sandbox-exec", "--", "echo ${VIRTUAL_ENV:-none}")  # no venv layer: nothing activated
    assert plain.stdout == "none\n"


@pytest.mark.parametrize(("sig", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, -signal.SIGTERM)])
def test_ctrl_c_while_a_layer_is_restored_stops_promptly_and_leaves_nothing(as_root, tmp_path, sig, status):
    """Ctrl-C (SIGINT to the process group, as a terminal sends it) during a cold `run` that
    waits for the node's I/O slot to restore its layers: exit 130 at once, and nothing of
    the interrupted restore is left (no queue entry, lease, partial file or mount); the next
    `run` restores and runs normally. SIGTERM (`timeout`, a batch system) alike, the
    process ending by it."""
    store = build_local_store(tmp_path / "work", "local__task.0")
    cache = tmp_path / "cache"
    (cache / "budget").mkdir(parents=True)
    env = {
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": SRC,
        "MINISANDBOX_CACHE": str(cache),
        "MINISANDBOX_HELPER": "off",
        "MINISANDBOX_IO_SLOTS": "1",
    }
    argv = [sys.executable, "-m", "minisandbox.cli", "run", "--store", store, "local__task.0", "--", "echo ran"]
    slot = os.open(cache / "budget" / "slot-0.lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(slot, fcntl.LOCK_EX)  # another restore holds the node's only I/O slot
    try:
        proc = subprocess.Popen(
            argv,
            env=env,
            cwd="/",
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
            preexec_fn=default_signals,
        )
        queue = cache / "budget" / "queue"
        deadline = time.monotonic() + 60
        while not (queue.is_dir() and any(p.name.endswith(".wait") for p in queue.iterdir())):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the run never queued for the I/O slot"
            time.sleep(0.02)
        sent = time.monotonic()
        os.killpg(proc.pid, sig)
        out, err = proc.communicate(timeout=30)
        assert proc.returncode == status, err
        assert time.monotonic() - sent < 5, "the signal was not acted on promptly"
        assert "ran" not in out
    finally:
        os.close(slot)
    assert [p.name for p in queue.iterdir()] == []
    assert [p for p in (cache / "leases").rglob("*") if p.is_file()] == []
    assert list((cache / "tmp").iterdir()) == []
    assert [p.name for p in (cache / "layers").iterdir() if p.name.startswith((".tmp-", ".trash-"))] == []
    with open("/proc/self/mounts") as fh:
        assert [ln for ln in fh if f" {cache}/" in ln] == []
    again = subprocess.run(argv, env=env, cwd="/", capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr
    assert again.stdout == "ran\n"
    subprocess.run(
        [sys.executable, "-m", "minisandbox.cli", "cache", "clear"], env=env, cwd="/", capture_output=True, timeout=120
    )


def test_run_process_ends_with_its_output_status_and_exit_handlers(as_root, tmp_path):
    """A `minisandbox run` process leaves without the interpreter's finalization
    (`minisandbox.cli._end_process`): everything the command printed still arrives through
    a pipe (more than a pipe and stdout's buffer hold), its exit status is the process's,
    and the exit handlers ran: the controller's crash-cleanup record is gone."""
    store = build_local_store(tmp_path / "work", "local__task.0")
    state = tmp_path / "state"
    env = {
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": SRC,
        "MINISANDBOX_CACHE": str(tmp_path / "cache"),
        "MINISANDBOX_STATE": str(state),
        "MINISANDBOX_HELPER": "off",
    }
    script = "head -c 300000 /dev/zero | tr '\\0' x; echo; echo to-stderr >&2; exit 7"
    res = subprocess.run(
        [sys.executable, "-m", "minisandbox.cli", "run", "--store", store, "local__task.0", "--", script],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd="/",
    )
    assert res.returncode == 7, res.stderr
    assert res.stdout == "x" * 300000 + "\n"
    assert "to-stderr" in res.stderr
    records = state / "controllers"  # (minisandbox.sandbox.leftovers: made before the sandbox)
    assert records.is_dir() and list(records.iterdir()) == []
