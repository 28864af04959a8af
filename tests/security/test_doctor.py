"""`minisandbox doctor` reports how limits are enforced for the user who runs it: root gets
whole-sandbox cgroups here; a rootless user without cgroup v2 delegation gets the weaker
per-process RLIMIT_AS, reported as a warning with what to do."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from minisandbox.sandbox.limits import LimitGroup, Limits
from tests.fixtures.sandbox import SRC, run_as_user

pytestmark = pytest.mark.slow


def _checks(out: str) -> dict[str, dict]:
    return {c["name"]: c for c in json.loads(out)["checks"]}


@pytest.mark.root
def test_doctor_as_root(as_root):
    res = subprocess.run(
        [sys.executable, "-m", "minisandbox.cli", "doctor", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": SRC},
    )
    checks = _checks(res.stdout)
    assert checks["seccomp filter"]["status"] == "ok"
    group = LimitGroup(Limits.default())  # what a sandbox made by this user gets
    try:
        memory = group.mode["memory"]
    finally:
        group.close()
    assert (checks["memory limit"]["status"] == "ok") == memory.startswith("cgroup")
    cpu = checks["cpu time limit"]  # a cgroup counts each command's total here (root)
    assert cpu["status"] == "ok" and cpu["detail"].startswith("a total per command: cgroup"), cpu
    counters = checks["per-user counters"]  # payloads do not draw on host root's
    assert counters["status"] == "ok" and "not host root's" in counters["detail"], counters
    assert res.returncode == 0, res.stderr


@pytest.mark.root
def test_doctor_warns_when_root_payloads_share_host_roots_counters(as_root):
    res = subprocess.run(
        [sys.executable, "-m", "minisandbox.cli", "doctor", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": SRC, "MINISANDBOX_USERNS_BASE": "off"},
    )
    counters = _checks(res.stdout)["per-user counters"]
    assert counters["status"] == "warn" and "MINISANDBOX_USERNS_BASE=off" in counters["detail"], counters


@pytest.mark.rootless
def test_doctor_rootless_reports_the_rlimit_fallback(rootless_user):
    res = run_as_user("import sys; from minisandbox.cli import main; sys.exit(main(['doctor', '--json']))")
    checks = _checks(res.stdout)
    assert checks["seccomp filter"]["status"] == "ok"
    assert checks["user namespaces"]["status"] == "ok"
    mem = checks["memory limit"]
    delegated = "cgroup" in mem["detail"] and mem["status"] == "ok"
    if not delegated:
        assert mem["status"] == "warn" and "RLIMIT_AS" in mem["detail"] and "Delegate" in mem["detail"]
    cpu = checks["cpu time limit"]
    if cpu["status"] != "ok":  # no writable cgroup for the test user: the per-process fallback, said so
        assert cpu["status"] == "warn" and "RLIMIT_CPU per process" in cpu["detail"] and "N times" in cpu["detail"]
    assert checks["per-user counters"]["status"] == "ok" and "1/8" in checks["per-user counters"]["detail"]
    assert res.returncode == 0, res.stderr
