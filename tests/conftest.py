"""Shared pytest set-up. Topic fixtures live in tests/fixtures/<topic>.py; register them here."""

import os
import sys

# The project's commands (snakemake, minisandbox, moto_server, ray) are looked up on PATH by
# the tests and by the workflow's rules. `.venv/bin/python -m pytest` (README, .ci/run) does
# not activate .venv: put this interpreter's scripts directory first, as activation would.
_BIN = os.path.dirname(sys.executable)
if _BIN not in os.environ.get("PATH", "").split(os.pathsep):
    os.environ["PATH"] = _BIN + os.pathsep + os.environ.get("PATH", "")

pytest_plugins: list[str] = [
    "tests.fixtures.pipeline",
    "tests.fixtures.sandbox",
    "tests.fixtures.runtime",
    "tests.fixtures.evaluation",
    "tests.fixtures.integrations",
    "tests.fixtures.s3",
    "tests.fixtures.slurm",
]
