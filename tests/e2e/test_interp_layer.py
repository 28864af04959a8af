"""The interpreter layer end to end: a task built with one pyenv interpreter runs its tests
on a "node" that does not have that interpreter (its directory hidden under a tmpfs in a
private mount namespace) and starts with an empty cache: fetch -> interpreter layer ->
tests pass. A node missing a host library the environment recorded fails with one line."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from minisandbox.node.sync import verify
from minisandbox.sandbox import interpreters
from tests.fixtures.pipeline import BUG_PATCH, TESTS, make_workspace, spec, task

pytestmark = [pytest.mark.slow, pytest.mark.root]

ROOT = Path(__file__).resolve().parents[2]
ACTIVATE = "source /opt/miniconda3/bin/activate; conda activate testbed"


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


# The start state (SWE-smith form) has the bug and lacks the F2P test file: put the test file
# back, run the suite (the bug fails test_sub), apply the gold fix (the bug patch reversed), run again.
# No .pyc is written: the fix changes no byte count and lands in the same second as the start
# state and the first run, and CPython's timestamp check (whole seconds + size) would then
# take the first run's bytecode of the buggy module for current (the same in any container).
TEST_CMD = (
    f"set -e; export PYTHONDONTWRITEBYTECODE=1; cd /testbed; mkdir -p tests; "
    f"echo {_b64(TESTS)} | base64 -d > tests/test_calc.py; {ACTIVATE}; "
    f"pytest -q -p no:cacheprovider tests || true; echo {_b64(BUG_PATCH)} | base64 -d | git apply -R; "
    f"pytest -q -p no:cacheprovider tests; python -c 'import sys; print(sys.base_prefix)'"
)


def _other_pyenv() -> interpreters.Interpreter:
    """A pyenv interpreter that is not the one running these tests (that one cannot be
    hidden) and that the bundled pytest pins support."""
    here = os.path.realpath(sys.base_prefix)
    for i in sorted(interpreters.available(), key=lambda i: tuple(map(int, i.version.split("."))), reverse=True):
        if (
            i.kind == interpreters.PYENV
            and os.path.realpath(i.prefix) != here
            and (3, 8) <= tuple(map(int, i.version.split(".")[:2])) <= (3, 12)
        ):
            return i
    pytest.skip("needs a pyenv interpreter 3.8-3.12 other than the one running the tests")


def _node(prefix: str, argv: list[str], cache: Path, env_extra: dict | None = None) -> subprocess.CompletedProcess:
    """Run `argv` as on a node without `prefix`: a private mount namespace with an empty
    tmpfs over the interpreter's directory, and an empty cache."""
    script = (
        f"mount -t tmpfs -o size=1m minisandbox-hidden {prefix} && "
        f'test -z "$(ls -A {prefix})" && echo hidden: {prefix} >&2 && exec "$@"'
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "MINISANDBOX_CACHE": str(cache), **(env_extra or {})}
    return subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "--", "bash", "-c", script, "node", *argv],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )


@pytest.fixture(scope="module")
def py_store(tmp_path_factory):
    """The tiny project built with another pyenv interpreter, published to a local store
    (once for the module: the tests only read it, or a copy)."""
    if os.geteuid() != 0 or not shutil.which("unshare"):
        pytest.skip("needs root and unshare for the node's private mount namespace")
    interp = _other_pyenv()
    ws = make_workspace(tmp_path_factory.mktemp("py-store"))
    ws.specs = [spec("tiny__calc.py", ws.specs[0]["source"], ws.commit, python=interp.minor)]
    ws.write_catalog()
    ws.tasks.write_text(json.dumps(task("tiny__calc.py.sub__cccc0001", "tiny__calc.py")) + "\n")
    proc = ws.snakemake()
    assert "rule interp:" in proc.stdout + proc.stderr
    return ws, interp


def test_task_runs_on_a_node_without_its_interpreter(py_store, tmp_path: Path) -> None:
    ws, interp = py_store
    store = str(ws.store)
    assert verify(store).ok
    # the env manifest names the interpreter layer; the layer is its own artifact
    (env_m_path,) = [p for p in (ws.store / "artifacts" / "env").glob("*.manifest.json")]
    env_m = json.loads(env_m_path.read_text())
    ikey = env_m["interpreter"]["key"]
    assert env_m["interpreter"] | {} == {
        "version": interp.version,
        "prefix": interp.prefix,
        "kind": "pyenv",
        "key": ikey,
    }
    interp_m = json.loads((ws.store / "artifacts" / "interp" / f"{ikey}.manifest.json").read_text())
    assert interp_m["kind"] == "interp" and interp_m["mount_path"] == interp.prefix
    assert {lib["name"] for lib in env_m["host_libs"]} >= {"libc.so.6"}
    assert not any(lib["path"].startswith(interp.prefix) for lib in env_m["host_libs"])

    cache = tmp_path / "empty-cache"
    iid = "tiny__calc.py.sub__cccc0001"
    proc = _node(
        interp.prefix,
        [sys.executable, "-m", "minisandbox.cli", "run", "--store", store, iid, "--", "bash", "-c", TEST_CMD],
        cache,
    )
    out = proc.stdout + proc.stderr
    assert f"hidden: {interp.prefix}" in proc.stderr, out
    assert proc.returncode == 0, out
    # with the bug test_sub fails, with the gold fix all pass -- run by the shipped interpreter
    assert "1 failed, 3 passed" in proc.stdout and "\n4 passed" in proc.stdout, out
    assert proc.stdout.strip().splitlines()[-1] == interp.prefix, out
    # the node's cache started empty and now holds the interpreter layer (by its digest)
    cached = {str(p.relative_to(cache)) for p in cache.rglob("*")}
    assert any(interp_m["sha256"] in c for c in cached), (sorted(cached)[:20], out)


def test_missing_host_library_is_one_line(py_store, tmp_path: Path) -> None:
    ws, interp = py_store
    copy = tmp_path / "store-copy"
    shutil.copytree(ws.store, copy)
    (env_m_path,) = [p for p in (copy / "artifacts" / "env").glob("*.manifest.json")]
    env_m = json.loads(env_m_path.read_text())
    env_m["host_libs"].append(
        {
            "name": "libminisandbox-absent.so.3",
            "used_by": "_absent.so",
            "path": "/usr/lib/x86_64-linux-gnu/libminisandbox-absent.so.3",
        }
    )
    env_m_path.write_text(json.dumps(env_m))
    proc = _node(
        interp.prefix,
        [
            sys.executable,
            "-m",
            "minisandbox.cli",
            "run",
            "--store",
            str(copy),
            "tiny__calc.py.sub__cccc0001",
            "--",
            "true",
        ],
        tmp_path / "cache",
    )
    assert proc.returncode != 0
    errors = [line for line in proc.stderr.splitlines() if not line.startswith("hidden:")]
    assert len(errors) == 1, proc.stderr
    assert "libminisandbox-absent.so.3" in errors[0] and env_m["key"] in errors[0], errors
