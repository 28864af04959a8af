"""Issue 13 item 5, written as the attack: `kill -9` of a controller that holds sandboxes.

Two real controllers (separate Python processes) each hold a sandbox with cgroup limits
and an on-disk `--scratch` upper layer, with a payload running. One is SIGKILLed. Its
cgroups and scratch directory stay behind (the attack works) until the next minisandbox
start on the node - a new process opening a sandbox - or `minisandbox cache gc` removes
them; no host mount of it is left; the other, live controller's cgroups, scratch and
sandbox are untouched and keep working. Root (cgroups v1/v2 as available) and rootless
(scratch only: an unprivileged user has no writable cgroup here).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.fixtures.sandbox import run_as_user

pytestmark = pytest.mark.slow

CONTROLLER = r"""
import json, os, sys
from minisandbox.sandbox.limits import Limits
from minisandbox.sandbox.sandbox import Layer, Sandbox
repo, scratch = sys.argv[1], sys.argv[2]
limits = Limits(memory_bytes=512 << 20, pids=256)
sb = Sandbox([Layer(repo, "/testbed")], scratch_dir=scratch, limits=limits)
sb.spawn(["sleep", "1000"])
assert sb.execute("echo hi > /testbed/written && cat /testbed/written").output == "hi\n"
print(json.dumps({"cgroups": list(sb.limits.dirs) if sb.limits else [], "init": sb._root.proc.pid,
                  "scratch": sorted(os.listdir(scratch))}), flush=True)
for line in sys.stdin:  # each line: run one command, print its output as JSON
    res = sb.execute(line.strip())
    print(json.dumps({"output": res.output, "rc": res.returncode}), flush=True)
sb.close()
"""


def _env(state: Path) -> dict[str, str]:
    return {
        **os.environ,
        "MINISANDBOX_CACHE": str(state.parent / "cache"),
        "MINISANDBOX_STATE": str(state),
        "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src"),
    }


def _start(repo: Path, scratch: Path, env: dict[str, str]) -> tuple[subprocess.Popen, dict]:
    proc = subprocess.Popen(
        [sys.executable, "-c", CONTROLLER, str(repo), str(scratch)],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    line = proc.stdout.readline()
    assert line, f"controller failed to start (exit {proc.wait()})"
    return proc, json.loads(line)


def _gone(pid: int, timeout: float = 20) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not os.path.exists(f"/proc/{pid}"):
            return True
        time.sleep(0.05)
    return False


def _host_mounts() -> str:
    return Path("/proc/self/mountinfo").read_text()


def _own_mounts(mountinfo: str, tmp: Path) -> set[tuple[str, str]]:
    """(mount point, source) of the host mounts of this test's own dirs (its state,
    cache and scratch all live in `tmp`): what its controllers could leave behind. Other
    processes mount and unmount on the host at the same time, so the whole table is not
    compared."""
    own = set()
    for line in mountinfo.splitlines():
        fields = line.split()
        point = fields[4].encode().decode("unicode_escape")
        source = fields[fields.index("-") + 2].encode().decode("unicode_escape")
        if any(p == str(tmp) or p.startswith(str(tmp) + "/") for p in (point, source)):
            own.add((point, source))
    return own


@pytest.fixture
def repo(tmp_path):
    r = tmp_path / "repo"
    (r / "pkg").mkdir(parents=True)
    (r / "pkg" / "mod.py").write_text("X = 1\n")
    subprocess.run(["git", "init", "-q", str(r)], check=True)
    return r


@pytest.mark.root
@pytest.mark.parametrize("cleaner", ["next-start", "cache-gc"])
def test_sigkilled_controller_leftovers_are_removed_and_a_live_one_is_untouched(as_root, repo, tmp_path, cleaner):
    state = tmp_path / "state"
    env = _env(state)
    scratch_dead, scratch_live = tmp_path / "scratch-dead", tmp_path / "scratch-live"
    scratch_dead.mkdir()
    scratch_live.mkdir()
    dead, dead_info = _start(repo, scratch_dead, env)
    live, live_info = _start(repo, scratch_live, env)
    try:
        assert dead_info["cgroups"] and live_info["cgroups"], "no cgroup limits on this host"
        mounts_before = _host_mounts()
        dead.send_signal(signal.SIGKILL)
        dead.wait()
        assert _gone(dead_info["init"]), "the dead controller's sandbox init outlived its control socket"
        # the attack: without cleanup everything stays
        assert all(os.path.isdir(d) for d in dead_info["cgroups"])
        assert dead_info["scratch"] and all((scratch_dead / s).exists() for s in dead_info["scratch"])

        if cleaner == "cache-gc":
            res = subprocess.run(
                [sys.executable, "-m", "minisandbox.cli", "cache", "gc"],
                env=env,
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert res.returncode == 0, res.stderr
            assert "cleaned up after 1 dead controller(s)" in res.stdout, res.stdout
        else:
            res = subprocess.run(
                [sys.executable, "-c", CONTROLLER, str(repo), str(tmp_path / "scratch-dead")],
                env=env,
                input="",
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert res.returncode == 0, res.stderr

        assert not any(os.path.exists(d) for d in dead_info["cgroups"])
        assert not any((scratch_dead / s).exists() for s in dead_info["scratch"])
        records = {p.name for p in (state / "controllers").glob("*.json")}
        assert f"{live.pid}-{_start_time(live.pid)}.json" in records
        assert not any(r.startswith(f"{dead.pid}-") for r in records)
        for s in dead_info["scratch"]:
            assert s not in _host_mounts()
        assert _own_mounts(_host_mounts(), tmp_path) <= _own_mounts(mounts_before, tmp_path)
        # the live controller: untouched and working
        assert all(os.path.isdir(d) for d in live_info["cgroups"])
        assert all((scratch_live / s).exists() for s in live_info["scratch"])
        live.stdin.write("cat /testbed/written\n")
        live.stdin.flush()
        assert json.loads(live.stdout.readline()) == {"output": "hi\n", "rc": 0}
    finally:
        for p in (dead, live):
            if p.poll() is None:
                p.stdin.close()
                p.wait(timeout=60)
    assert not any(os.path.exists(d) for d in live_info["cgroups"])  # closed normally


@pytest.mark.root
def test_a_controller_that_closed_its_sandboxes_removes_its_record_and_one_that_did_not_keeps_it(
    as_root, repo, tmp_path
):
    """A clean exit after `close()` leaves no record for the next start to read; an exit with
    a sandbox still open at the exit handlers keeps its record (its cgroups were there), and
    the next start's reap removes it with whatever is left."""
    state = tmp_path / "state"
    env = _env(state)
    scratch = tmp_path / "scratch"
    scratch.mkdir()

    def controller(program: str = CONTROLLER) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-c", program, str(repo), str(scratch)],
            env=env,
            input="",
            capture_output=True,
            text=True,
            timeout=120,
        )

    closed = controller()
    assert closed.returncode == 0, closed.stderr
    assert sorted(p.name for p in (state / "controllers").glob("*.json")) == []
    left_open = controller(CONTROLLER.replace("sb.close()\n", "sys.exit(0)\n"))
    assert left_open.returncode == 0, left_open.stderr
    info = json.loads(left_open.stdout.splitlines()[0])
    (record,) = (state / "controllers").glob("*.json")
    assert json.loads(record.read_text())["cgroup_parents"]
    assert info["cgroups"] and _gone(info["init"])
    nxt = controller()
    assert nxt.returncode == 0, nxt.stderr
    assert not any(os.path.exists(d) for d in info["cgroups"])
    assert sorted(p.name for p in (state / "controllers").glob("*.json")) == []


def _start_time(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[19].decode()


ROOTLESS = r"""
import json, os, subprocess, sys
root, controller = sys.argv[1], sys.argv[2]
repo, scratch, state = root + "/repo", root + "/scratch", root + "/state"
os.makedirs(repo + "/pkg"); os.makedirs(scratch)
open(repo + "/pkg/mod.py", "w").write("X = 1\n")
subprocess.run(["git", "init", "-q", repo], check=True)
env = dict(os.environ, MINISANDBOX_STATE=state)
p = subprocess.Popen([sys.executable, "-c", controller, repo, scratch], env=env, stdin=subprocess.PIPE,
                     stdout=subprocess.PIPE, text=True)
info = json.loads(p.stdout.readline())
p.kill(); p.wait()
left = sorted(os.listdir(scratch))
# the next start: a new controller opens (and closes) a sandbox
nxt = subprocess.run([sys.executable, "-c", controller, repo, scratch], env=env, input="", capture_output=True, text=True)
print(json.dumps({"info": info, "left_after_kill": left, "after_next_start": sorted(os.listdir(scratch)),
                  "next": nxt.returncode, "err": nxt.stderr[-2000:]}))
"""


@pytest.mark.rootless
def test_rootless_sigkilled_controller_scratch_is_removed(shared_tmp):
    res = run_as_user(ROOTLESS, args=[str(shared_tmp), CONTROLLER], timeout=180)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert out["next"] == 0, out["err"]
    assert out["left_after_kill"] == out["info"]["scratch"] != []
    assert out["after_next_start"] == []


def test_an_older_leftover_of_the_same_pid_does_not_keep_a_clean_controllers_record(tmp_path) -> None:
    """pids are reused (pid_max 32768 here): a cgroup or scratch directory named for this pid
    but left by an earlier, dead process (whose record, if any, is its own) is not this
    process's, and must not keep it from removing its record at a clean exit; one made
    since its record was written does."""
    import time

    from minisandbox.sandbox.leftovers import CGROUP_PREFIX, SCRATCH_PREFIX, Tracker

    parents = {"cg": tmp_path / "cgroups", "scratch": tmp_path / "scratch"}
    for p in parents.values():
        p.mkdir()
    old = [
        parents["cg"] / f"{CGROUP_PREFIX}{os.getpid()}-0ld0ld00",
        parents["scratch"] / f"{SCRATCH_PREFIX}{os.getpid()}-0ld",
    ]
    for d in old:
        d.mkdir()
        os.utime(d, (time.time() - 3600, time.time() - 3600))
    tracker = Tracker(tmp_path / "state")
    tracker.add(cgroup_parents=[str(parents["cg"])], scratch_parents=[str(parents["scratch"])])
    assert tracker.path.exists()
    assert tracker.release() and not tracker.path.exists()  # the old ones are not its own
    for fresh in (
        parents["cg"] / f"{CGROUP_PREFIX}{os.getpid()}-feedf00d",
        parents["scratch"] / f"{SCRATCH_PREFIX}{os.getpid()}-1",
    ):
        tracker = Tracker(tmp_path / "state2")
        tracker.add(cgroup_parents=[str(parents["cg"])], scratch_parents=[str(parents["scratch"])])
        fresh.mkdir()
        assert not tracker.release() and tracker.path.exists()  # its own: kept for reap
        fresh.rmdir()
