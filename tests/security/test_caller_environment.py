"""What the caller of `minisandbox run` holds never reaches the sandbox's processes.

A `run` forks its sandboxes' fork server from its own process (no second interpreter), and
through the node-local helper a worker takes the caller's environment: in both cases the
sandbox's init and its helpers are forks of a process that held the caller's environment
(cloud credentials, tokens). The payload must not be able to read it back from any process
it can see: not from `/proc/<pid>/environ`, not from their memory.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile

import pytest

from tests.fixtures.runtime import build_local_store
from tests.fixtures.sandbox import SRC

pytestmark = pytest.mark.root

TASK = "secrets__task.0"
SECRET = "AKIA-caller-secret-7f3e9b"
#: Every other process the payload can see: its environment, command line and memory, as far
#: as the kernel lets it read them (a read refused is printed as such). The secret is joined at
#: run time, so the probe's own command line does not hold it; its own memory is only read,
#: to show that the probe reads memory where it may.
PROBE = r"""
import glob, os
secret = "HEAD" + "TAIL"
for p in sorted(glob.glob("/proc/[0-9]*")):
    own = p == "/proc/%d" % os.getpid()
    for name in ("environ", "cmdline"):
        try:
            with open(p + "/" + name, "rb") as f:
                text = f.read().replace(b"\0", b" ").decode("utf-8", "replace")
            print(p, name, "(own)" if own else text)
        except OSError as e:
            print(p, name, "refused", e.errno)
    try:
        with open(p + "/maps") as f:
            regions = [line.split()[0].split("-") for line in f if line.split()[1].startswith("r")]
        found = False
        with open(p + "/mem", "rb") as mem:
            for lo, hi in regions:
                try:
                    mem.seek(int(lo, 16))
                    found = found or secret.encode() in mem.read(int(hi, 16) - int(lo, 16))
                except OSError:
                    pass
        print(p, "mem read", "(own)" if own else ("holds the secret" if found else "clean"))
    except OSError as e:
        print(p, "mem refused", e.errno)
""".replace("HEAD", SECRET[:8]).replace("TAIL", SECRET[8:])


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> str:
    if os.geteuid() != 0:
        pytest.skip("needs root")
    return build_local_store(tmp_path_factory.mktemp("secrets-store"), TASK)


@pytest.mark.parametrize("helper", ["off", "auto"])
def test_the_callers_environment_is_not_readable_in_the_sandbox(store, tmp_path, helper):
    runtime = tempfile.mkdtemp(prefix="msbs-", dir="/tmp")  # a unix socket path is short
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "PYTHONPATH": SRC,
        "HOME": str(tmp_path),
        "MINISANDBOX_CACHE": str(tmp_path / "cache"),
        "MINISANDBOX_RUNTIME_DIR": runtime,
        "MINISANDBOX_HELPER": helper,
        "CALLER_TOKEN": SECRET,
    }

    # The caller's command line holds the secret too: the fork server of a `run` without a
    # helper is a fork of the CLI process, and a store URL may carry credentials.
    secret_store = tmp_path / ("store-" + SECRET)
    secret_store.symlink_to(store)

    def run() -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "minisandbox.cli", "run", "--store", str(secret_store), TASK, "--", "python3", "-c"]
            + [PROBE],
            env=env,
            cwd="/",
            capture_output=True,
            text=True,
            timeout=300,
        )

    try:
        outputs = [run()]
        if helper == "auto":  # the first call starts a helper; the second is served by it
            subprocess.run(
                [sys.executable, "-m", "minisandbox.cli", "helper", "start"], env=env, capture_output=True, timeout=60
            )
            env["MINISANDBOX_HELPER"] = "use"
            outputs.append(run())
    finally:
        subprocess.run([sys.executable, "-m", "minisandbox.cli", "helper", "stop"], env=env, capture_output=True)
        shutil.rmtree(runtime, ignore_errors=True)
    for res in outputs:
        assert res.returncode == 0, res.stderr
        pids = {line.split()[0] for line in res.stdout.splitlines() if line.startswith("/proc/")}
        assert len(pids) >= 2, res.stdout  # the payload and at least the sandbox's init
        lines = res.stdout.splitlines()
        assert any(re.fullmatch(r"/proc/\d+ mem read \(own\)", line) for line in lines), res.stdout
        assert SECRET not in res.stdout, res.stdout
        assert not [line for line in lines if re.fullmatch(r"/proc/\d+ mem read holds the secret", line)]


#: An in-process caller (an RL trainer, an integration) opens the sandbox itself, so the fork
#: server and every sandbox's init are forks of *its* process: its command line must not show.
IN_PROCESS = """
import sys
from minisandbox.task import open_task
task, store, cache, probe = sys.argv[1:5]
with open_task(task, store, cache=cache) as ts:
    res = ts.execute("python3 -c " + __import__("shlex").quote(probe))
print(res.output)
sys.exit(res.returncode)
"""


def test_an_in_process_callers_command_line_is_not_readable_in_the_sandbox(store, tmp_path):
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "PYTHONPATH": SRC,
        "HOME": str(tmp_path),
        "MINISANDBOX_HELPER": "off",
    }
    res = subprocess.run(
        [sys.executable, "-c", IN_PROCESS, TASK, store, str(tmp_path / "cache"), PROBE, "--token=" + SECRET],
        env=env,
        cwd="/",
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    cmdlines = [line for line in lines if re.fullmatch(r"/proc/\d+ cmdline .*", line)]
    assert len(cmdlines) >= 2, res.stdout  # the payload's own and at least the sandbox's init
    assert SECRET not in res.stdout, res.stdout
    assert not [line for line in lines if re.fullmatch(r"/proc/\d+ mem read holds the secret", line)]
