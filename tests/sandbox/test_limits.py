"""minisandbox.sandbox.limits: where each command's CPU time is counted, in process, and how
processes join their cgroups.

The attack tests (tests/security/test_cpu_limit.py) run the default hierarchy choice in a
fresh process, root and rootless; here each branch is forced in turn: cgroup v1 `cpuacct`
(preferred where it is writable: a hybrid or v1 host) and a v2 cgroup of the sandbox's own
(where no v1 `cpuacct` is writable)."""

from __future__ import annotations

import os
import subprocess
import time

import pytest

from minisandbox.sandbox import limits as limits_mod
from minisandbox.sandbox import sandbox as sandbox_mod
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


@pytest.fixture
def v2_cpu(as_root, monkeypatch):
    """Hide cgroup v1 `cpuacct` from LimitGroup (as on a host without v1 hierarchies whose
    v2 cgroup this user can write)."""
    parents = limits_mod.cgroup_parents()
    if "v2" not in parents or not limits_mod.v2_writable(parents["v2"]):
        pytest.skip("no writable cgroup v2 here")
    monkeypatch.setattr(limits_mod, "cgroup_parents", lambda: {k: v for k, v in parents.items() if k != "cpuacct"})


@pytest.fixture(params=["v1", "v2"])
def cpu_hierarchy(request) -> str:
    request.getfixturevalue("v1_only" if request.param == "v1" else "v2_cpu")
    sandbox_mod._drop_spares(final=False)  # a spare LimitGroup made before the patch would be taken as is
    return request.param


def test_join_file_per_hierarchy():
    assert limits_mod.join_file("/sys/fs/cgroup/memory/x/sandbox", "v1") == "/sys/fs/cgroup/memory/x/sandbox/tasks"
    assert limits_mod.join_file("/sys/fs/cgroup/x/sandbox", "v2") == "/sys/fs/cgroup/x/sandbox/cgroup.procs"


def test_cpuacct_is_preferred_where_writable(as_root):
    """A hybrid (or v1) host: CPU is counted in v1 `cpuacct`, so every cgroup a sandbox
    joins is v1 and is joined through `tasks` (no RCU grace period per join)."""
    parents = limits_mod.cgroup_parents()
    if not os.access(parents.get("cpuacct", "/nonexistent"), os.W_OK):
        pytest.skip("no writable cgroup v1 cpuacct hierarchy here")
    group = LimitGroup(Limits.default().with_settings("cpu=60"))
    try:
        assert group.cpu_leaf is not None and group.cpu_leaf[1] == "v1"
        assert group.cpu_leaf[0].startswith(parents["cpuacct"].rstrip("/") + "/")
        v2 = parents.get("v2")
        for f in group.procs_files:
            v2_leaf = v2 is not None and f.startswith(v2.rstrip("/") + "/")
            assert os.path.basename(f) == ("cgroup.procs" if v2_leaf else "tasks"), f
        assert group.command_cgroup().open_procs() >= 0
    finally:
        group.close()


THREADS = (
    "import threading, time\n"
    "for _ in range(3):\n"
    "    threading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n"
    "time.sleep(60)\n"
)


def _threads_below(leaf: str) -> set[int]:
    """Every thread id in the cgroup `leaf` and below it."""
    out: set[int] = set()
    for dirpath, _dirs, files in os.walk(leaf):
        name = "tasks" if "tasks" in files else "cgroup.threads"
        try:
            with open(os.path.join(dirpath, name)) as fh:
                out.update(int(x) for x in fh.read().split())
        except OSError:  # a command's cgroup removed meanwhile
            pass
    return out


def test_every_thread_of_a_sandbox_is_in_each_of_its_leaves(cpu_hierarchy):
    """Joining through v1 `tasks` moves one thread: every process that joins is
    single-threaded at that moment, so each sandbox process, with all its threads, is
    in each of the sandbox's leaves (init, the command spawner, a command and the threads
    it starts afterwards), in both hierarchy choices."""
    with Sandbox([], limits=Limits.default().with_settings("cpu=60"), warm_next=False) as sb:
        assert sb.limits.cpu_leaf[1] == cpu_hierarchy
        sb.write_file("/tmp/threads.py", THREADS)
        assert sb.execute("python3 /tmp/threads.py > /dev/null 2>&1 &").returncode == 0
        leaves = [os.path.dirname(f) for f in sb.limits.procs_files]
        assert {os.path.dirname(sb.limits.cpu_leaf[0])} <= {os.path.dirname(x) for x in leaves}
        init = int(open(os.path.join(leaves[0], "cgroup.procs")).read().split()[0])
        ns = os.stat(f"/proc/{init}/ns/pid").st_ino
        deadline = time.monotonic() + 20
        while True:
            tids = set()
            for pid in (int(p) for p in os.listdir("/proc") if p.isdigit()):
                try:
                    if os.stat(f"/proc/{pid}/ns/pid").st_ino == ns:
                        tids.update(int(t) for t in os.listdir(f"/proc/{pid}/task"))
                except OSError:
                    pass
            if len(tids) >= 5 or time.monotonic() > deadline:  # init + the python process's 4 threads
                break
            time.sleep(0.05)
        assert len(tids) >= 5, tids
        for leaf in leaves:
            assert tids <= _threads_below(leaf), (leaf, tids - _threads_below(leaf))


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


def test_remove_cgroup_tree_walks_only_when_more_than_expected(as_root, monkeypatch):
    """A sandbox's cgroup in its usual shape (the cgroup and its leaf) is removed without
    listing its control files; one with a cgroup a payload made below the leaf is walked."""
    parent = limits_mod.cgroup_parents().get("pids")
    if parent is None or not os.access(parent, os.W_OK):
        pytest.skip("no writable cgroup v1 pids hierarchy here")
    walks = []
    real_walk = os.walk
    monkeypatch.setattr(limits_mod.os, "walk", lambda *a, **k: walks.append(a[0]) or real_walk(*a, **k))
    usual = os.path.join(parent, limits_mod.cgroup_name())
    os.makedirs(os.path.join(usual, limits_mod.LEAF))
    assert limits_mod.remove_cgroup_tree(usual, expect=(limits_mod.LEAF,))
    assert not os.path.exists(usual) and walks == []
    grown = os.path.join(parent, limits_mod.cgroup_name())
    os.makedirs(os.path.join(grown, limits_mod.LEAF, "escape", "deeper"))
    assert limits_mod.remove_cgroup_tree(grown, expect=(limits_mod.LEAF,))
    assert not os.path.exists(grown) and walks == [grown]
