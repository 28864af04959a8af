"""Shared pytest set-up. Topic fixtures live in tests/fixtures/<topic>.py; register them here."""

import os
import sys
from pathlib import Path

import pytest

# The project's commands (snakemake, minisandbox, moto_server, ray) are looked up on PATH by
# the tests and by the workflow's rules. `.venv/bin/python -m pytest` (README, .ci/run) does
# not activate .venv: put this interpreter's scripts directory first, as activation would.
_BIN = os.path.dirname(sys.executable)
if _BIN not in os.environ.get("PATH", "").split(os.pathsep):
    os.environ["PATH"] = _BIN + os.pathsep + os.environ.get("PATH", "")

# `minisandbox run` may hand its call to a node-local helper it starts (docs/sandbox.md); the
# suite's CLI calls run in-process unless a test asks for the helper (tests/cli/test_helper.py):
# no helper processes outlive the tests, and each test sees its own process do the work.
os.environ.setdefault("MINISANDBOX_HELPER", "off")

pytest_plugins: list[str] = [
    "tests.fixtures.pipeline",
    "tests.fixtures.sandbox",
    "tests.fixtures.runtime",
    "tests.fixtures.evaluation",
    "tests.fixtures.integrations",
    "tests.fixtures.s3",
    "tests.fixtures.slurm",
]


def _mountpoints_under(base: str) -> list[str]:
    """Mount points below `base` in this mount namespace, deepest first (mountinfo field 5,
    octal escapes undone)."""
    found = []
    with open("/proc/self/mountinfo", encoding="utf-8") as f:
        for line in f:
            point = line.split()[4].encode().decode("unicode_escape")
            if point.startswith(base.rstrip("/") + "/"):
                found.append(point)
    return sorted(found, key=len, reverse=True)


@pytest.fixture(scope="session", autouse=True)
def _unmount_test_caches(tmp_path_factory: pytest.TempPathFactory):
    """Node caches keep their images mounted for reuse (docs/runtime.md); a test's cache in
    pytest's tmp is never gc'ed, so unmount what is left there at the end of the session, or
    every run leaks loop devices."""
    yield
    if os.geteuid() != 0:
        return
    from minisandbox.node.restore import unmount

    for point in _mountpoints_under(str(tmp_path_factory.getbasetemp())):
        unmount(Path(point))


#: Written when the session ends normally: `.ci/run` checks for it, since a test that ends the
#: pytest process with `os._exit(0)` (the CLI's own end of a `run`, called in-process) would
#: otherwise leave CI green with most tests never run.
SESSION_FINISHED = os.environ.get("MINISANDBOX_PYTEST_FINISHED")


def pytest_sessionfinish(session, exitstatus) -> None:
    if SESSION_FINISHED and not hasattr(session.config, "workerinput"):
        with open(SESSION_FINISHED, "w") as f:
            f.write(f"{int(exitstatus)} {session.testscollected}\n")
