"""The node-local helper (minisandbox.cli.helper): `minisandbox run` through a warm helper
gives the same sandbox as in-process, only to callers of the same user and context; it is
never required (absent, disabled or refused: in-process), exits when idle, and a crash of it
or of its worker leaves nothing a crash of an in-process controller would not.

Timing is measured in bench/bench_cli.py, not here.
"""

from __future__ import annotations

import contextlib
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from minisandbox.cli import helper, helperclient
from tests.fixtures.rootless_node import user_site  # noqa: F401  (fixture)
from tests.fixtures.runtime import build_local_store
from tests.fixtures.sandbox import SRC, TEST_USER
from tests.fixtures.signals import default_signals

TASK = "helper__task.0"
PROBE = (
    "grep -E '^(Uid|CapEff|CapBnd|NoNewPrivs|Seccomp):' /proc/self/status; cat /proc/self/limits; "
    "python3 -c 'import ctypes; c = ctypes.CDLL(None, use_errno=True); "
    'print("attach init", c.ptrace(16, 1, 0, 0), ctypes.get_errno())\'; '
    "echo cwd=$PWD umask=$(umask); echo out; echo err >&2; exit 3"
)


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> str:
    if os.geteuid() != 0:
        pytest.skip("needs root (the rootless case is its own test)")
    return build_local_store(tmp_path_factory.mktemp("helper-store"), TASK)


@pytest.fixture
def runtime() -> str:
    """A short runtime directory (a unix socket path has at most 107 bytes)."""
    d = tempfile.mkdtemp(prefix="msbh-", dir="/tmp")
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def env(tmp_path, runtime, store) -> dict[str, str]:
    e = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "PYTHONPATH": SRC,
        "HOME": str(tmp_path),
        "MINISANDBOX_CACHE": str(tmp_path / "cache"),
        "MINISANDBOX_RUNTIME_DIR": runtime,
        "MINISANDBOX_HELPER": "use",
        "MINISANDBOX_HELPER_IDLE": "120",
    }
    subprocess.run(
        [sys.executable, "-m", "minisandbox.cli", "fetch", "--store", store, TASK],
        env=e,
        check=True,
        capture_output=True,
        timeout=300,
    )
    yield e
    cli(e, "helper", "stop")


def cli(env: dict[str, str], *args: str, cwd: str = "/", timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "minisandbox.cli", *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def helper_pid(env: dict[str, str]) -> int | None:
    out = cli(env, "helper", "status")
    return int(out.stdout.split("pid ")[1].split(",")[0]) if out.returncode == 0 else None


def workers_of(pid: int) -> list[int]:
    kids = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        kids += [int(k) for k in (task / "children").read_text().split()]
    return kids


@pytest.mark.root
def test_run_through_the_helper_is_the_same_sandbox_as_in_process(as_root, env, store, tmp_path) -> None:
    assert cli(env, "helper", "start").returncode == 0
    pid = helper_pid(env)
    assert pid is not None
    work = tmp_path / "cwd"
    work.mkdir()
    args = ["run", "--store", store, "--pids", "77", TASK, "--", PROBE]
    through = cli(env, *args, cwd=str(work))
    inproc = cli({**env, "MINISANDBOX_HELPER": "off"}, *args, cwd=str(work))
    assert through.returncode == inproc.returncode == 3, (through.stderr, inproc.stderr)
    assert through.stdout == inproc.stdout
    assert "Seccomp:\t2" in through.stdout and "NoNewPrivs:\t1" in through.stdout
    assert "attach init -1 " in through.stdout  # no ptrace of the sandbox's init (seccomp, non-dumpable)
    assert through.stderr == inproc.stderr == "err\n"
    assert helper_pid(env) == pid  # the same helper served it and is still there
    # an error of the command line is the caller's, printed to its stderr
    bad = cli(env, "run", "--store", store, "--memory", "lots", TASK, "--", "true")
    assert bad.returncode == 2 and "--memory" in bad.stderr


@pytest.mark.root
def test_no_helper_means_in_process_and_auto_starts_one(as_root, env, store, runtime) -> None:
    args = ["run", "--store", store, TASK, "--", "echo hi"]
    used = cli(env, *args)  # `use`: none is running, none is started
    assert (used.returncode, used.stdout) == (0, "hi\n")
    assert not any(n.endswith(".sock") for n in os.listdir(runtime))
    off = cli({**env, "MINISANDBOX_HELPER": "off"}, *args)
    assert (off.returncode, off.stdout) == (0, "hi\n") and not any(n.endswith(".sock") for n in os.listdir(runtime))
    auto = {**env, "MINISANDBOX_HELPER": "auto"}
    r, w = os.pipe()  # a descriptor the caller passes on: the helper it starts must not keep it
    try:
        first = subprocess.run(
            [sys.executable, "-m", "minisandbox.cli", *args],
            env=auto,
            cwd=tempfile.gettempdir(),
            pass_fds=(w,),
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        os.close(w)
    assert (first.returncode, first.stdout) == (0, "hi\n"), first.stderr
    deadline = time.monotonic() + 60
    while helper_pid(auto) is None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert helper_pid(auto) is not None, "the first `run` did not start a helper"
    started = helper_pid(auto)
    os.set_blocking(r, False)
    try:
        assert os.read(r, 1) == b""  # EOF: nobody (the helper included) holds the write end
    finally:
        os.close(r)
    assert os.readlink(f"/proc/{started}/cwd") == "/"  # detached: no caller's directory kept busy
    assert os.getsid(started) == started
    assert [os.readlink(f"/proc/{started}/fd/{i}") for i in range(3)] == ["/dev/null"] * 3
    assert oct(os.stat(runtime).st_mode & 0o777) == "0o700"
    sock = next(Path(runtime).glob("*.sock"))
    assert oct(sock.stat().st_mode & 0o777) == "0o600"
    assert cli(auto, *args).stdout == "hi\n"


@pytest.mark.root
def test_auto_starts_the_helper_beside_the_command_and_after_a_failed_call(as_root, env, store, runtime) -> None:
    """`auto` with none running starts the helper once its own sandbox is ready (not while it
    starts one: both would compete for the CPU), so a long command has it started while it
    runs; a call that fails before any sandbox still starts it when it returns."""
    auto = {**env, "MINISANDBOX_HELPER": "auto"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "minisandbox.cli", "run", "--store", store, TASK, "--", "sleep 20"],
        env=auto,
        cwd="/",
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while helper_pid(auto) is None and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert proc.poll() is None, f"the call ended first: {proc.stderr.read()[-500:]}"
        assert helper_pid(auto) is not None, "no helper was started while the command ran"
    finally:
        proc.terminate()  # (its sandbox closed before it ends: nothing left behind)
        proc.wait(30)
    assert cli(auto, "helper", "stop").returncode == 0
    assert helper_pid(auto) is None
    failed = cli(auto, "run", "--store", store, "no__such.task", "--", "true")
    assert failed.returncode == 1 and "no__such.task" in failed.stderr
    deadline = time.monotonic() + 60
    while helper_pid(auto) is None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert helper_pid(auto) is not None, "a failed call did not start a helper"


@pytest.mark.root
def test_helper_exits_when_idle_and_removes_its_socket(as_root, env) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "minisandbox.cli", "helper", "serve", "--idle", "1"],
        env=env,
        cwd="/",
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while helper_pid(env) is None and time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    assert helper_pid(env) == proc.pid
    assert proc.wait(timeout=60) == 0
    assert helper_pid(env) is None
    assert not list(Path(env["MINISANDBOX_RUNTIME_DIR"]).glob("*.sock"))


def _connect_as(path: str, uid: int | None, nofile: int | None) -> int:
    """A child process that connects to `path` (as `uid`, with RLIMIT_NOFILE `nofile`) and waits."""
    pid = os.fork()
    if pid == 0:
        try:
            if nofile is not None:
                resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))
            if uid is not None:
                os.setgroups([])
                os.setgid(uid)
                os.setuid(uid)
            s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            s.connect(path)
            s.recv(10)
        finally:
            os._exit(0)
    return pid


@pytest.mark.root
def test_peer_of_another_user_or_context_is_refused(as_root, rootless_user, tmp_path) -> None:
    d = tempfile.mkdtemp(prefix="msbh-open-", dir="/tmp")
    try:
        os.chmod(d, 0o777)  # reachable by the test user: the peer check itself must refuse
        path = os.path.join(d, "s.sock")
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        listener.bind(path)
        os.chmod(path, 0o777)
        listener.listen(4)
        own = helperclient.context()
        verdicts = []
        for uid, nofile in ((None, None), (rootless_user.pw_uid, None), (None, 99)):
            child = _connect_as(path, uid, nofile)
            conn, _ = listener.accept()
            verdicts.append(helper.check_peer(conn, own))
            conn.close()
            os.waitpid(child, 0)
        # a caller that connects, hands its connection to a child and exits
        r, w = os.pipe()
        child = os.fork()
        if child == 0:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            s.connect(path)
            if os.fork() == 0:  # the holder keeps the connection open until the test closes `w`
                os.close(w)
                os.read(r, 1)
                os._exit(0)
            os._exit(0)
        os.close(r)
        os.waitpid(child, 0)
        conn, _ = listener.accept()
        verdicts.append(helper.check_peer(conn, own))
        conn.close()
        os.close(w)
        listener.close()
    finally:
        shutil.rmtree(d, ignore_errors=True)
    assert verdicts[0] is None  # same user, same context (a forked copy of this process)
    assert verdicts[3] == "the caller exited"  # its pid could be another process's by now
    assert verdicts[1] == f"uid {rootless_user.pw_uid} is not the helper's (0)"
    assert verdicts[2] is not None and "context" in verdicts[2]  # other rlimits: not served


@pytest.mark.root
def test_runtime_dir_must_be_private(as_root, rootless_user, tmp_path) -> None:
    mine = tmp_path / "mine"
    assert helperclient.private_dir(str(mine), create=True) and oct(mine.stat().st_mode & 0o777) == "0o700"
    wide = tmp_path / "wide"
    wide.mkdir(mode=0o755)
    wide.chmod(0o755)
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o700)
    os.chown(theirs, rootless_user.pw_uid, rootless_user.pw_gid)
    link = tmp_path / "link"
    link.symlink_to(mine)
    assert [helperclient.private_dir(str(p), create=True) for p in (wide, theirs, link)] == [False, False, False]


@pytest.mark.root
@pytest.mark.slow
def test_killed_helper_and_worker_leave_nothing(as_root, env, store, tmp_path) -> None:
    """The helper and then its worker (the sandbox's controller) are SIGKILLed mid-command:
    the client says so and fails, the payload dies with its sandbox, and what the dead
    controller left (cgroups, mounts) is removed by the next start, as for an in-process one."""
    assert cli(env, "helper", "start").returncode == 0
    pid = helper_pid(env)
    client = subprocess.Popen(
        [sys.executable, "-m", "minisandbox.cli", "run", "--store", store, TASK, "--", "sleep 987654"],
        env=env,
        cwd="/",
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _kill_helper_and_worker(env, store, client, pid)
    finally:
        client.kill()
        client.wait()


def _kill_helper_and_worker(env: dict[str, str], store: str, client: subprocess.Popen, pid: int) -> None:
    deadline = time.monotonic() + 60
    while (
        not subprocess.run(["pgrep", "-f", "^sleep 987654$"], capture_output=True).stdout
        and time.monotonic() < deadline
    ):
        time.sleep(0.05)
    workers = workers_of(pid)
    worker = next(w for w in workers if "minisandbox.cli.helper" in Path(f"/proc/{w}/cmdline").read_text())
    from minisandbox.sandbox.limits import CGROUP_PREFIX, cgroup_parents

    def cgroups() -> list[str]:
        return [str(p) for parent in cgroup_parents().values() for p in Path(parent).glob(f"{CGROUP_PREFIX}{worker}-*")]

    made = cgroups()  # the worker's sandbox cgroups (none where no cgroup is writable)
    os.kill(pid, signal.SIGKILL)
    os.kill(worker, signal.SIGKILL)
    out, err = client.communicate(timeout=60)
    assert client.returncode == 1 and "without an exit status" in err
    deadline = time.monotonic() + 30
    while subprocess.run(["pgrep", "-f", "^sleep 987654$"], capture_output=True).stdout and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not subprocess.run(["pgrep", "-f", "^sleep 987654$"], capture_output=True).stdout, "payload outlived"
    # the next start (in-process here) cleans up after the dead controller
    assert cli({**env, "MINISANDBOX_HELPER": "off"}, "run", "--store", store, TASK, "--", "true").returncode == 0
    assert made == [] or cgroups() == [], made
    assert f"-{worker}-" not in Path("/proc/self/mountinfo").read_text()
    # nothing of the dead helper's tree is left: its spare (opened for the next such call)
    # saw its control socket close and closed its sandbox
    sock = cli(env, "helper", "status").stdout.split("socket ")[1].rstrip(")\n")
    deadline = time.monotonic() + 30
    while (
        subprocess.run(["pgrep", "-f", f"helper serve --socket {sock}"], capture_output=True).stdout
        and time.monotonic() < deadline
    ):
        time.sleep(0.1)
    assert not subprocess.run(["pgrep", "-f", f"helper serve --socket {sock}"], capture_output=True).stdout
    # a new helper replaces the dead one's socket
    assert cli(env, "helper", "start").returncode == 0 and helper_pid(env) not in (None, pid)


@pytest.mark.slow
def test_rootless_run_through_the_helper(shared_tmp, user_site) -> None:
    """As an unprivileged user: the first `run` starts the user's own helper, the next ones
    go through it, with the same output."""
    import pwd

    user = pwd.getpwnam(TEST_USER)
    store = build_local_store(shared_tmp / "work", TASK)
    subprocess.run(["chown", "-R", f"{user.pw_uid}:{user.pw_gid}", str(shared_tmp)], check=True)
    code = f"""
import json, os, subprocess, sys, time
env = {{**os.environ, "MINISANDBOX_CACHE": "{shared_tmp}/cache", "MINISANDBOX_RUNTIME_DIR": "{shared_tmp}/rt",
        "MINISANDBOX_HELPER": "auto"}}
def cli(*a):
    p = subprocess.run([sys.executable, "-m", "minisandbox.cli", *a], env=env, capture_output=True, text=True,
                       cwd="/tmp", timeout=300)
    return [p.returncode, p.stdout, p.stderr[-500:]]
out = {{"first": cli("run", "--store", "{store}", "{TASK}", "--", "id -u; echo hi")}}
deadline = time.time() + 60
while cli("helper", "status")[0] != 0 and time.time() < deadline:
    time.sleep(0.1)
out["status"] = cli("helper", "status")
out["second"] = cli("run", "--store", "{store}", "{TASK}", "--", "id -u; echo hi")
out["stop"] = cli("helper", "stop")
print(json.dumps(out))
"""
    from tests.fixtures.rootless_node import run_node_as_user  # noqa: F811

    out = run_node_as_user(code, user_site, timeout=600)
    assert out["first"][0] == 0, out
    assert out["status"][0] == 0 and "running" in out["status"][1], out
    assert out["second"][:2] == out["first"][:2], out
    assert out["stop"][1].strip() == "stopped", out


NEW_FILE_PATCH = """diff --git a/NEW.txt b/NEW.txt
new file mode 100644
--- /dev/null
+++ b/NEW.txt
@@ -0,0 +1 @@
+fresh
"""


@pytest.mark.root
def test_a_spare_sandbox_serves_the_next_call_only_while_the_store_is_unchanged(as_root, env, tmp_path) -> None:
    """After a call, the helper opens the sandbox the same call would need next (a spare);
    the next identical call (but its command) runs in it; a task re-published meanwhile is
    not served from the spare's old start state."""
    import json

    from minisandbox.node.store import Store
    from tests.fixtures.runtime import shard_of, write_index

    store = build_local_store(tmp_path / "own", TASK)  # this test changes its index
    assert cli(env, "fetch", "--store", store, TASK).returncode == 0
    assert cli(env, "helper", "start").returncode == 0
    probe = "cat NEW.txt 2>/dev/null || echo none; awk '{print $22}' /proc/1/stat"
    args = ["run", "--store", store, TASK, "--", probe]
    hz = os.sysconf("SC_CLK_TCK")

    calls = 0

    def call() -> tuple[str, bool]:
        """(NEW.txt or none, whether the sandbox's init started before the call was made)."""
        nonlocal calls
        if calls:  # (the first call has no previous one, so no spare to wait for)
            time.sleep(1.0)  # the spare of the previous call is open by now (or the test below fails)
        calls += 1
        uptime = float(Path("/proc/uptime").read_text().split()[0])
        out = cli(env, *args)
        assert out.returncode == 0, out.stderr
        new, init_start = out.stdout.split()
        return new, int(init_start) / hz < uptime - 0.3

    deadline = time.monotonic() + 60
    first = call()
    second = call()
    while not second[1] and time.monotonic() < deadline:  # a loaded machine: the spare took longer
        second = call()
    assert first[0] == second[0] == "none"
    assert second[1], "the second call did not run in a sandbox opened before it"
    # re-publish the task with a patch: the open spare is stale and must not serve
    shard = (Path(store) / f"index/tasks/{shard_of(TASK)}.jsonl").read_text()
    entry = json.loads(shard.splitlines()[0])
    entry["record"]["patch"] = NEW_FILE_PATCH
    write_index(Store(store), [entry])
    third = call()
    assert third[0] == "fresh", third


@pytest.mark.root
def test_repeated_calls_are_served_by_one_kept_spare(as_root, env, store) -> None:
    """A run of repeated calls is served by one spare the helper keeps (it opens its next
    sandbox after each call) rather than a new fork of the helper per call: each call still
    gets a fresh sandbox, the caller's stdout ends with its command (a kept spare lets go
    of it), a call beside a long one is not queued behind it, and stopping the helper
    leaves none of the kept spare's cgroups."""
    from minisandbox.sandbox.limits import CGROUP_PREFIX, cgroup_parents

    assert cli(env, "helper", "start").returncode == 0
    pid = helper_pid(env)
    argv = [sys.executable, "-m", "minisandbox.cli", "run", "--store", store, TASK, "--"]
    seen_workers: set[int] = set()
    seen: list[str] = []
    for i in range(6):
        time.sleep(0.3)  # (the kept spare's next sandbox is open by then)
        seen_workers.update(k for k in workers_of(pid) if Path(f"/proc/{k}/cmdline").read_bytes().count(b"helper"))
        # stdout as a pipe whose end the caller waits for: a spare holding it would hang here
        proc = subprocess.Popen(
            [*argv, f"cat /testbed/mark 2>/dev/null || echo clean; echo call{i} > /testbed/mark"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        seen.append(out.strip())
    assert seen == ["clean"] * 6  # each call in a fresh sandbox: nothing of the last call's
    assert len(seen_workers) <= 2, seen_workers  # the first call's spare, kept for the rest
    time.sleep(0.3)
    kept = [k for k in workers_of(pid) if Path(f"/proc/{k}/cmdline").read_bytes().count(b"helper")]
    assert len(kept) == 1, kept
    long = subprocess.Popen([*argv, "sleep 5"], env=env, stdout=subprocess.DEVNULL)
    time.sleep(0.5)
    t0 = time.monotonic()
    beside = cli(env, "run", "--store", store, TASK, "--", "true")
    assert beside.returncode == 0 and time.monotonic() - t0 < 4.0  # not queued behind `sleep 5`
    assert long.wait(60) == 0
    kept = [k for k in workers_of(pid) if Path(f"/proc/{k}/cmdline").read_bytes().count(b"helper")]
    assert cli(env, "helper", "stop").returncode == 0
    deadline = time.monotonic() + 20
    left = ["?"]
    while left and time.monotonic() < deadline:
        left = [
            d
            for parent in cgroup_parents().values()
            for k in kept
            for d in (os.listdir(parent) if os.path.isdir(parent) else [])
            if d.startswith(f"{CGROUP_PREFIX}{k}-")
        ]
        time.sleep(0.2)
    assert not left, left


@pytest.mark.root
def test_a_burst_of_identical_calls_finds_its_sandboxes_open_when_it_comes_again(as_root, env, store) -> None:
    """Overlapping identical calls get plain workers beside the one spare; once they have
    all ended, the helper opens as many spares as the burst had calls (at most
    $MINISANDBOX_HELPER_SPARES), and the same burst again runs in sandboxes opened before
    it; spares unused for SPARE_SECONDS would be closed (not waited for here)."""
    env = {**env, "MINISANDBOX_HELPER_SPARES": "3"}
    assert cli(env, "helper", "start").returncode == 0
    pid = helper_pid(env)
    probe = "sleep 1; awk '{print $22}' /proc/1/stat"
    argv = [sys.executable, "-m", "minisandbox.cli", "run", "--store", store, TASK, "--", probe]
    hz = os.sysconf("SC_CLK_TCK")

    def burst(n: int) -> list[bool]:
        """Whether each of `n` calls started at once ran in a sandbox opened before them."""
        uptime = float(Path("/proc/uptime").read_text().split()[0])
        procs = [subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, text=True) for _ in range(n)]
        outs = [p.communicate(timeout=120)[0] for p in procs]
        assert all(p.returncode == 0 for p in procs), outs
        return [int(out.split()[-1]) / hz < uptime - 0.3 for out in outs]

    assert cli(env, "run", "--store", store, TASK, "--", "true").returncode == 0  # (now it repeats)
    first = burst(4)
    assert first.count(True) <= 1  # at most the one spare opened beside the earlier call
    deadline = time.monotonic() + 90
    while len(workers_of(pid)) != 1 + 3 and time.monotonic() < deadline:  # fork server + 3 spares
        time.sleep(0.2)  # (and the burst's own workers gone)
    assert len(workers_of(pid)) == 1 + 3, "the spares of a burst of 4 (at most 3) were not opened"

    def ticks() -> int:
        out = 0
        for kid in workers_of(pid):
            with contextlib.suppress(OSError):
                out += sum(int(x) for x in Path(f"/proc/{kid}/stat").read_text().rsplit(")", 1)[1].split()[11:13])
        return out

    before = -1
    while ticks() != before and time.monotonic() < deadline:  # until the spares wait, their sandboxes open
        before = ticks()
        time.sleep(1.0)
    again = burst(3)
    assert all(again), again


def popen_run(env: dict[str, str], store: str, command: str) -> subprocess.Popen:
    """`minisandbox run --store STORE TASK -- COMMAND` started in the background, its output
    piped, the signals the tests send at their default action (`default_signals`)."""
    return subprocess.Popen(
        [sys.executable, "-m", "minisandbox.cli", "run", "--store", store, TASK, "--", command],
        env=env,
        cwd="/",
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=default_signals,
    )


def dead_sandbox_cgroups() -> set[str]:
    """Sandbox cgroups (every hierarchy this process creates them in) whose controller has
    ended (gone, or a zombie its parent has not waited for yet)."""
    from minisandbox.sandbox.limits import CGROUP_PREFIX, cgroup_owner, cgroup_parents

    def ended(pid: int | None) -> bool:
        try:
            return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] in "ZX"
        except (OSError, IndexError):
            return True

    return {
        str(p)
        for parent in cgroup_parents().values()
        for p in Path(parent).glob(f"{CGROUP_PREFIX}*")
        if ended(cgroup_owner(p.name))
    }


@pytest.mark.root
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_a_terminated_run_closes_its_sandbox_and_ends_by_the_signal(as_root, env, store, sig) -> None:
    """SIGTERM (`timeout`, Slurm, Ray) or SIGHUP of an in-process `run` closes its sandbox
    (payload killed, cgroups removed: nothing left for a next start to reap) and the
    process still ends by that signal."""
    before = dead_sandbox_cgroups()
    proc = popen_run({**env, "MINISANDBOX_HELPER": "off"}, store, "echo started; sleep 765432")
    try:
        assert proc.stdout.readline() == "started\n"
        from minisandbox.sandbox.limits import CGROUP_PREFIX, cgroup_parents

        made = [p for parent in cgroup_parents().values() for p in Path(parent).glob(f"{CGROUP_PREFIX}{proc.pid}-*")]
        proc.send_signal(sig)
        assert proc.wait(timeout=60) == -sig, proc.stderr.read()
    finally:
        proc.kill()
        proc.wait()
    assert not subprocess.run(["pgrep", "-f", "^sleep 765432$"], capture_output=True).stdout, "payload outlived"
    assert made == [] or not any(p.exists() for p in made), made
    assert dead_sandbox_cgroups() - before == set()


@pytest.mark.root
def test_signals_reach_the_command_through_the_helper(as_root, env, store) -> None:
    """Ctrl-C (SIGINT) of the caller interrupts the command (status 130, as in-process);
    SIGTERM ends the caller by SIGTERM, as it ends an in-process `run`, and the worker
    closes the sandbox before it ends (no cgroup of a dead process is left)."""
    assert cli(env, "helper", "start").returncode == 0
    before = dead_sandbox_cgroups()
    for sig, want in ((signal.SIGINT, 130), (signal.SIGTERM, -signal.SIGTERM)):
        client = popen_run(env, store, "echo started; sleep 876543")
        try:
            assert client.stdout.readline() == "started\n"
            client.send_signal(sig)
            assert client.wait(timeout=60) == want
        finally:
            client.kill()
            client.wait()
        deadline = time.monotonic() + 30
        while (
            subprocess.run(["pgrep", "-f", "^sleep 876543$"], capture_output=True).stdout
            and time.monotonic() < deadline
        ):
            time.sleep(0.05)
        assert not subprocess.run(["pgrep", "-f", "^sleep 876543$"], capture_output=True).stdout
    assert dead_sandbox_cgroups() - before == set()


@pytest.mark.root
def test_a_caller_that_sends_nothing_does_not_stall_the_helper(as_root, env, store) -> None:
    assert cli(env, "helper", "start").returncode == 0
    sock_path = cli(env, "helper", "status").stdout.split("socket ")[1].rstrip(")\n")
    idle = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    idle.connect(sock_path)  # connected, never sends its request
    try:
        out = cli(env, "run", "--store", store, TASK, "--", "echo served", timeout=60)
        assert (out.returncode, out.stdout) == (0, "served\n"), out.stderr
        assert idle.recv(100).startswith(b"refused ")
    finally:
        idle.close()
