"""Attack: get around the CPU time limit by spreading the work over many processes.

Per-process RLIMIT_CPU lets a command that forks N workers use N times the limit. The
limit is a total per command wherever a cgroup can count it (root; rootless in a
delegated cgroup v2): each command runs in a cgroup of its own and the controller kills
all of it once its total passes the limit. The bounds are on CPU consumed (read from the
cgroups), never on wall time, which varies with the load of the machine.
Rootless without a cgroup, the documented fallback is RLIMIT_CPU per process.
"""

from __future__ import annotations

import pytest

from minisandbox.sandbox.limits import CPU_RLIMIT_MODE
from tests.security.conftest import MODES

LIMIT = 3  # CPU seconds per command in these tests
#: each worker stays under the per-process limit; four of them are over the total
WORKERS = r"""
import os, sys, time
n, each = int(sys.argv[1]), float(sys.argv[2])
for _ in range(n):
    if os.fork() == 0:
        t = time.process_time()
        while time.process_time() - t < each:
            pass
        os._exit(0)
for _ in range(n):
    os.wait()
print("all workers done")
"""

FORK_BOMB_OF_WORK = (
    """
    from minisandbox.sandbox.shell import session
    with Sandbox([Layer(P["repo"], "/testbed")], limits=Limits.default().with_settings("cpu=%d")) as sb:
        sb.write_file("/tmp/workers.py", P["workers"])
        leaf = sb.limits.cpu_leaf

        def sandbox_total():
            # the whole sandbox's CPU (every command's cgroup is below this leaf)
            if leaf is None:
                return None
            name = "cpu.stat" if leaf[1] == "v2" else "cpuacct.usage"
            text = open(os.path.join(leaf[0], name)).read()
            return int(text.split("usage_usec")[1].split()[0]) / 1e6 if leaf[1] == "v2" else int(text) / 1e9

        before = sandbox_total()
        over = sb.run(["python3", "/tmp/workers.py", "4", "2.5"])
        after = sandbox_total()
        under = sb.run(["python3", "/tmp/workers.py", "4", "0.2"])
        s = session(sb, "agent")
        s.run("cd /tmp && export KEEP=1")
        sess_over = s.run("python3 /tmp/workers.py 4 2.5")
        sess_next = s.run("echo $PWD $KEEP")
        out = {"mode": sb.limits_mode["cpu_seconds"],
               "over": [over.returncode, over.limit_hit, over.cpu_seconds, over.output],
               "sandbox_cpu": None if before is None else after - before,
               "under": [under.returncode, under.limit_hit, under.cpu_seconds, under.output],
               "sess_over": [sess_over.limit_hit, sess_over.cpu_seconds, sess_over.restarted, sess_over.output],
               "sess_next": [sess_next.returncode, sess_next.output]}
"""  # noqa: UP031 (the template holds braces: %-formatting, not str.format)
    % LIMIT
)


def check_total_enforced(out: dict) -> None:
    assert out["mode"].startswith("cgroup"), out["mode"]
    code, hit, used, text = out["over"]
    assert hit == "cpu" and code == -9, out["over"]
    assert "all workers done" not in text and "CPU time limit" in text and f"limit of {LIMIT} s" in text
    # stopped near the total: unlimited, the four workers would have used 10 s
    assert LIMIT < used <= LIMIT + 2.0, used
    assert out["sandbox_cpu"] <= LIMIT + 2.0, out["sandbox_cpu"]  # measured independently, whole sandbox
    code, hit, used, text = out["under"]  # the same program under the limit is untouched
    assert (code, hit) == (0, "") and "all workers done" in text, out["under"]
    assert 0.8 <= used < LIMIT, used
    hit, used, restarted, text = out["sess_over"]  # in a session: stopped, the session keeps its state
    assert hit == "cpu" and LIMIT < used <= LIMIT + 2.0 and not restarted, out["sess_over"]
    assert "all workers done" not in text
    assert out["sess_next"] == [0, "/tmp 1\n"], out["sess_next"]


@pytest.mark.slow
@pytest.mark.root
@pytest.mark.parametrize("attack", ["root"], indirect=True)
def test_many_workers_are_stopped_at_the_per_command_total(attack):
    check_total_enforced(attack(FORK_BOMB_OF_WORK, workers=WORKERS))


@pytest.mark.slow
@pytest.mark.rootless
@pytest.mark.parametrize("attack", ["rootless"], indirect=True)
def test_many_workers_are_stopped_rootless_in_a_delegated_cgroup(attack, delegated_cgroup):
    check_total_enforced(attack(FORK_BOMB_OF_WORK, workers=WORKERS, cgroup=delegated_cgroup))


@pytest.mark.slow
@pytest.mark.rootless
@pytest.mark.parametrize("attack", ["rootless"], indirect=True)
def test_rootless_without_a_cgroup_falls_back_to_rlimit_cpu(attack):
    """The documented fallback: RLIMIT_CPU per process; a process over it is killed and
    the result says it was the CPU limit."""
    out = attack(
        """
        with Sandbox([Layer(P["repo"], "/testbed")], limits=Limits.default().with_settings("cpu=%d")) as sb:
            r = sb.run(["python3", "-c", "while True: pass"])
            out = {"mode": sb.limits_mode["cpu_seconds"], "leaf": sb.limits.cpu_leaf,
                   "r": [r.returncode, r.limit_hit, r.output]}
    """  # noqa: UP031 (as above)
        % LIMIT
    )
    if out["leaf"] is not None:
        pytest.skip(f"the test user has a writable cgroup here ({out['mode']}): no fallback to test")
    assert out["mode"] == CPU_RLIMIT_MODE
    code, hit, text = out["r"]
    assert code == -24 and hit == "cpu" and "RLIMIT_CPU" in text, out["r"]


@pytest.mark.slow
@pytest.mark.parametrize("attack", MODES, indirect=True)
def test_default_cpu_limit_is_a_per_command_total_where_a_cgroup_counts(attack):
    """Every sandbox gets the default CPU limit; `run` reports each command's CPU total."""
    out = attack("""
        with Sandbox([Layer(P["repo"], "/testbed")]) as sb:
            r = sb.run(["python3", "-c", "import time; t = time.process_time()\\nwhile time.process_time() - t < 0.3: pass"])
            out = {"mode": sb.limits_mode["cpu_seconds"], "limit": sb.limits.limits.cpu_seconds,
                   "used": r.cpu_seconds, "rc": r.returncode}
    """)
    from minisandbox.sandbox.limits import DEFAULT_LIMITS

    assert out["limit"] == DEFAULT_LIMITS.cpu_seconds and out["rc"] == 0
    if attack.mode == "root" or out["used"] is not None:
        assert out["mode"].startswith("cgroup") and 0.3 <= out["used"] < 5, out
    else:  # rootless without a writable cgroup (as on the development machine)
        assert out["mode"] == CPU_RLIMIT_MODE, out


@pytest.mark.slow
@pytest.mark.root
def test_cli_stops_the_workers_at_the_total(as_root, tmp_path):
    """`minisandbox sandbox-exec` streams output itself: it enforces the same total."""
    import subprocess
    import sys

    from tests.fixtures.sandbox import SRC

    (tmp_path / "workers.py").write_text(WORKERS)
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "minisandbox.cli",
            "sandbox-exec",
            "--layer",
            f"{tmp_path}:/work:ro",
            "--cpu-seconds",
            str(LIMIT),
            "--",
            "python3",
            "/work/workers.py",
            "4",
            "2.5",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": SRC},
    )
    assert res.returncode == 128 + 9, (res.returncode, res.stderr)
    assert "all workers done" not in res.stdout
    used = float(res.stderr.split("used ")[1].split(" s of CPU")[0])
    # over the limit when killed; the message rounds to 0.01 s (a prompt kill reads "LIMIT.00")
    assert LIMIT <= used <= LIMIT + 2.0, res.stderr
