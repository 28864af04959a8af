"""A real project's pytest suite gives the same results inside a sandbox as outside.

The project is `inflection` 0.5.1 from its PyPI sdist (which ships its test suite). Its
environment is built the way the pipeline builds one: inside `rootfs.run` at the canonical
paths (/testbed, /opt/miniconda3/envs/testbed), offline, from wheels downloaded once from
PyPI, with `pip install -e /testbed`. The sandbox then runs the SWE-smith test command
verbatim. Outside, the same interpreter, wheels and sources are installed into a plain
host venv. Root and rootless (the unprivileged `msbtest` user builds and runs its own
layers with Debian's python3.11, since /root is not readable to it)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import pytest

from minisandbox.paths import VENV_PATH
from minisandbox.sandbox.interpreters import available, find_interpreter, interpreter_binds
from tests.fixtures.sandbox import run_as_user

pytestmark = pytest.mark.slow

PROJECT = "inflection==0.5.1"
TEST_CMD = "source /opt/miniconda3/bin/activate; conda activate testbed; pytest -rA -p no:cacheprovider --color=no"
OUTCOME = re.compile(r"^(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS) (\S+)", re.M)
GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}


@pytest.fixture(scope="module")
def wheels():
    """pytest (+deps), pip, setuptools wheels for 3.10 and 3.11, and the project sdist."""
    if os.geteuid() != 0:
        pytest.skip("needs root")
    d = Path(tempfile.mkdtemp(prefix="msb-wheels-", dir="/tmp"))
    os.chmod(d, 0o755)
    for pyver in ("3.10", "3.11"):
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "-q",
                "--dest",
                str(d),
                "--only-binary=:all:",
                "--python-version",
                pyver,
                "pytest==8.3.3",
                "pip",
                "setuptools",
                "exceptiongroup",
                "tomli",
            ],
            check=True,
        )
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "-q", "--dest", str(d), "--no-binary", ":all:", "--no-deps", PROJECT],
        check=True,
    )
    for f in d.iterdir():
        f.chmod(0o644)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def _extract_project(wheels: Path, dest: Path) -> None:
    sdist = next(wheels.glob("inflection-*.tar.gz"))
    with tarfile.open(sdist) as tf:
        if hasattr(tarfile, "data_filter"):
            tf.extractall(dest.parent, filter="data")
        else:  # Debian 12's Python 3.11.2 predates filters: as root, files keep the sdist's owner
            tf.extractall(dest.parent)
            subprocess.run(["chown", "-R", f"{os.getuid()}:{os.getgid()}", str(dest.parent)], check=True)
    (dest.parent / sdist.name[: -len(".tar.gz")]).rename(dest)
    for junk in dest.rglob("__pycache__"):
        shutil.rmtree(junk)
    env = {**os.environ, **GIT_ENV}
    subprocess.run("git init -q && git add -A && git commit -qm sdist", shell=True, cwd=dest, check=True, env=env)


def _pip_install(python: str, wheels: str, project: str, host_wheels: Path) -> str:
    """pip run from its own wheel (no pip in the venv), offline from the wheels dir."""
    pip = sorted(host_wheels.glob("pip-*.whl"))[-1].name
    return (
        f"{python} {wheels}/{pip}/pip install -q --no-index --find-links {wheels} "
        f"--disable-pip-version-check pytest==8.3.3 -e {project}"
    )


def _outcomes(output: str) -> dict[str, str]:
    return {name: status for status, name in OUTCOME.findall(output)}


BUILD_AND_RUN = """
import json, os, sys
from minisandbox.sandbox import rootfs
from minisandbox.sandbox.sandbox import Sandbox, Layer
from minisandbox.paths import VENV_PATH
P = json.loads(sys.argv[1])
binds = [rootfs.Bind(P["repo"], "/testbed", False), rootfs.Bind(P["venv"], VENV_PATH, False),
         rootfs.Bind(P["wheels"], "/wheels", True)] + [rootfs.Bind(*b) for b in P["interp_binds"]]
with open(P["log"], "w") as log:
    rc = rootfs.run(binds, ["bash", "-c", P["build"]], env={"PATH": "/usr/bin:/bin", "HOME": "/tmp"},
                    cwd="/testbed", network="none", stdout=log, stderr=log, timeout=600)
out = {"build_rc": rc, "build_log": open(P["log"]).read()[-3000:]}

def listing():
    return sorted((os.path.relpath(os.path.join(r, n), P["repo"]), os.lstat(os.path.join(r, n)).st_mtime_ns)
                  for top in (P["repo"], P["venv"]) for r, ds, fs in os.walk(top) for n in ds + fs)

if rc == 0:
    before = listing()
    with Sandbox([Layer(P["repo"], "/testbed"), Layer(P["venv"], VENV_PATH)],
                 interpreter=(P["version"], P["prefix"])) as sb:
        r = sb.execute(P["test_cmd"], timeout=600)
        out.update(rc=r.returncode, output=r.output, diff=sb.diff(),
                   pyver=sb.execute("source /opt/miniconda3/bin/activate; conda activate testbed; "
                                    "python -c 'import sys, inflection; print(sys.version.split()[0], inflection.__file__)'").output)
    out["layers_unchanged"] = listing() == before
print(json.dumps(out))
"""


@pytest.mark.parametrize(
    "mode", [pytest.param("root", marks=pytest.mark.root), pytest.param("rootless", marks=pytest.mark.rootless)]
)
def test_real_pytest_suite_same_inside_and_outside(mode, wheels, request):
    if mode == "rootless":
        user = request.getfixturevalue("rootless_user")
        interp = next((i for i in available() if i.prefix == "/usr"), None)
        if interp is None:
            pytest.skip("no system python under /usr for the rootless user")
    else:
        interp = find_interpreter("3.10")
    base = Path(tempfile.mkdtemp(prefix="msb-pytest-", dir="/tmp"))
    try:
        # -- inside: layers built at the canonical paths, then a sandbox over them
        repo, venv = base / "repo", base / "venv"
        _extract_project(wheels, repo)
        venv.mkdir()
        if mode == "rootless":
            subprocess.run(["chown", "-R", f"{user.pw_uid}:{user.pw_gid}", str(base)], check=True)
        build = f"{interp.executable} -m venv --without-pip {VENV_PATH} && " + _pip_install(
            f"{VENV_PATH}/bin/python", "/wheels", "/testbed", wheels
        )
        params = {
            "repo": str(repo),
            "venv": str(venv),
            "wheels": str(wheels),
            "log": str(base / "build.log"),
            "build": build,
            "test_cmd": TEST_CMD,
            "version": interp.version,
            "prefix": interp.prefix,
            "interp_binds": [
                [b.source, b.target, b.readonly] for b in interpreter_binds(interp.version, interp.prefix)
            ],
        }
        if mode == "root":
            proc = subprocess.run(
                [sys.executable, "-c", BUILD_AND_RUN, json.dumps(params)], capture_output=True, text=True, timeout=1200
            )
        else:
            proc = run_as_user(BUILD_AND_RUN, timeout=1200, args=[json.dumps(params)])
        assert proc.returncode == 0, proc.stderr[-3000:]
        inside = json.loads(proc.stdout.strip().splitlines()[-1])
        assert inside["build_rc"] == 0, inside["build_log"]
        assert inside["pyver"].split() == [interp.version, "/testbed/inflection/__init__.py"]

        # -- outside: the same sources, interpreter and wheels in a plain host venv
        host_repo, host_venv = base / "host-repo", base / "host-venv"
        _extract_project(wheels, host_repo)
        subprocess.run([interp.executable, "-m", "venv", "--without-pip", str(host_venv)], check=True)
        subprocess.run(
            _pip_install(f"{host_venv}/bin/python", str(wheels), str(host_repo), wheels), shell=True, check=True
        )
        outside = subprocess.run(
            f"{host_venv}/bin/python -m pytest -rA -p no:cacheprovider --color=no",
            shell=True,
            cwd=host_repo,
            capture_output=True,
            text=True,
            timeout=600,
        )

        got, want = _outcomes(inside["output"]), _outcomes(outside.stdout)
        assert len(want) > 100, outside.stdout[-2000:]
        assert got == want
        assert inside["rc"] == outside.returncode
        summary = lambda text: re.findall(r"=+ (\d+ passed.*?) in ", text)  # noqa: E731
        assert summary(inside["output"]) == summary(outside.stdout)
        # running the suite changed nothing the agent would be blamed for
        assert inside["diff"] == ""
        # and the shared layers are untouched by the run (no .pytest_cache, no new pyc)
        assert inside["layers_unchanged"] and not (repo / ".pytest_cache").exists()
    finally:
        shutil.rmtree(base, ignore_errors=True)
