"""Shared set-up of the attack tests: a payload runner as root and as the unprivileged
test user (`msbtest`, see tests/fixtures/sandbox.py), each attack in a fresh Python process
that builds a real sandbox and prints one JSON document."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from tests.fixtures.sandbox import SRC, TEST_USER, make_layer_repo, run_as_user

MODES = [pytest.param("root", marks=pytest.mark.root), pytest.param("rootless", marks=pytest.mark.rootless)]

PRELUDE = """
import json, os, sys
from minisandbox.sandbox.sandbox import Sandbox, Layer
from minisandbox.sandbox.limits import Limits
P = json.loads(sys.argv[1])
out = {}
"""


@pytest.fixture
def attack(request):
    """`attack(body, **params) -> dict`: run `body` (Python; fills `out`) as root or as the
    test user, with a small git repo layer at P["repo"] owned by whoever runs it."""
    mode = getattr(request, "param", "root")
    if os.geteuid() != 0:
        pytest.skip("the attack tests start as root (rootless mode switches to the test user)")
    if mode == "rootless":
        request.getfixturevalue("rootless_user")
    base, repo = make_layer_repo("msb-sec-")
    if mode == "rootless":
        subprocess.run(["chown", "-R", f"{TEST_USER}:{TEST_USER}", str(base)], check=True)

    def run(
        body: str, timeout: float = 300, extra_env: dict | None = None, cgroup: str | None = None, **params
    ) -> dict:
        """`cgroup`: rootless only, the delegated v2 cgroup to run in (tests.fixtures.sandbox)."""
        params = {"repo": str(repo), "base": str(base), **params}
        code = PRELUDE + textwrap.dedent(body) + "\nprint(json.dumps(out))\n"
        if mode == "root":
            proc = subprocess.run(
                [sys.executable, "-c", code, json.dumps(params)],
                capture_output=True,
                text=True,
                timeout=timeout,
                cwd="/tmp",
                env={**os.environ, "PYTHONPATH": SRC, **(extra_env or {})},
            )
        else:
            if extra_env:
                code = f"import os; os.environ.update({extra_env!r})\n" + code
            proc = run_as_user(code, timeout=timeout, args=[json.dumps(params)], cgroup=cgroup)
        assert proc.returncode == 0, f"attack runner failed ({mode}): {proc.stderr[-3000:]}"
        return json.loads(proc.stdout.strip().splitlines()[-1])

    run.mode = mode
    run.base = base
    run.repo = repo
    yield run
    subprocess.run(["rm", "-rf", str(base)])
