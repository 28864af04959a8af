"""minisandbox.sandbox.limits: where each command's CPU time is counted, in process.

The attack tests (tests/security/test_cpu_limit.py) run the default hierarchy choice in a
fresh process, root and rootless; here the other branch is forced: cgroup v1 `cpuacct`,
used where the caller's cgroup v2 is not writable."""

from __future__ import annotations

import os
import subprocess
import time

import pytest

from minisandbox.sandbox import limits as limits_mod
from minisandbox.sandbox.limits import CommandCgroup, LimitGroup, Limits
from minisandbox.sandbox.sandbox import Sandbox

WORKERS = (
    "import os, time\nfor _ in range(4):\n    if os.fork() == 0:\n        t = time.process_time()\n"
    "        while time.process_time() - t < 1.5: pass\n        os._exit(0)\nfor _ in range(4): os.wait()\n"
    "print('all workers done')\n"
)


@pytest.fixture
def v1_only(as_root, monkeypatch):
    """Hide the cgroup v2 hierarchy from LimitGroup (as on a host whose v2 cgroup this
    user cannot write)."""
    parents = limits_mod.cgroup_parents()
    if not os.access(parents.get("cpuacct", "/nonexistent"), os.W_OK):
        pytest.skip("no writable cgroup v1 cpuacct hierarchy here")
    monkeypatch.setattr(limits_mod, "cgroup_parents", lambda: {k: v for k, v in parents.items() if k != "v2"})


def test_cpuacct_counts_the_total_per_command(v1_only):
    with Sandbox([], limits=Limits.default().with_settings("cpu=2")) as sb:
        assert sb.limits.cpu_leaf[1] == "v1" and "cpuacct.usage" in sb.limits_mode["cpu_seconds"]
        over = sb.run(["python3", "-c", WORKERS])
        under = sb.run(["python3", "-c", WORKERS.replace("1.5", "0.1")])
        leaf = sb.limits.cpu_leaf[0]
        assert [d for d in os.listdir(leaf) if d.startswith("cmd-")] == []  # removed once done
    assert over.limit_hit == "cpu" and over.returncode == -9 and "all workers done" not in over.output
    assert 2 < over.cpu_seconds <= 4.0, over.cpu_seconds
    assert under.limit_hit == "" and under.returncode == 0 and 0.4 <= under.cpu_seconds < 2


def test_command_cgroup_kill_spares_the_leader(v1_only):
    """What a session's CPU stop uses: everything in the cgroup dies but the spared pid."""
    group = LimitGroup(Limits.default().with_settings("cpu=60"))
    try:
        cmd = group.command_cgroup()
        procs = []
        for _ in range(3):
            fd = cmd.open_procs()
            procs.append(subprocess.Popen(["sleep", "60"], pass_fds=(fd,), preexec_fn=lambda fd=fd: os.write(fd, b"0")))
            os.close(fd)
        deadline = time.monotonic() + 10
        while len(cmd.pids()) < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert sorted(cmd.pids()) == sorted(p.pid for p in procs)
        assert cmd.kill(spare=procs[0].pid)
        assert [p.wait(10) for p in procs[1:]] == [-9, -9] and procs[0].poll() is None
        assert cmd.pids() == [procs[0].pid] and cmd.remove() is False  # busy: kept for close()
        assert cmd.kill() and procs[0].wait(10) == -9
        assert cmd.remove() and not os.path.exists(cmd.path)
        assert isinstance(cmd, CommandCgroup) and cmd.usage() is None  # gone
    finally:
        group.close()
