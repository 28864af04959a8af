"""Build an environment: a uv venv at the canonical path, inside a private mount namespace.

The venv is created at `paths.VENV_PATH` and the repo copy at `paths.REPO_PATH` by binding
per-build host directories there, so shebangs, `pyvenv.cfg` and editable `.pth` files
hold canonical paths and sandboxes bind the restored layers at the same places: nothing
is ever relocated. Two builds of one key use different work dirs and never collide.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock

from minisandbox.sandbox import rootfs
from minisandbox.catalog import EnvSpec
from minisandbox.sandbox.conda_shim import write_shim
from minisandbox.sandbox.interpreters import find_interpreter
from minisandbox.paths import CONDA_ROOT, REPO_PATH, VENV_PATH
from minisandbox.pipeline.resolve import Lock
from minisandbox.tools import uv_bin
from minisandbox.pipeline.stage import one_line
from minisandbox.errors import MinisandboxError

BUILD_DIR = "/opt/minisandbox/build"  # lock + script, read-only inside the build
TOOLS_DIR = "/opt/minisandbox/bin"  # uv, read-only inside the build


class BuildError(MinisandboxError, RuntimeError):
    pass


@dataclass(frozen=True)
class BuildResult:
    venv: Path
    interpreter: dict[str, str]
    raw_bytes: int


def _uv_cache() -> Path:
    env = os.environ.get("UV_CACHE_DIR")
    return Path(env) if env else Path(os.path.expanduser("~/.cache/uv"))


def _pip_cache() -> Path:
    env = os.environ.get("PIP_CACHE_DIR")
    return Path(env) if env else Path(os.path.expanduser("~/.cache/pip"))


def build_script(spec: EnvSpec, lock: Lock, python_exe: str) -> str:
    """The bash run inside the build namespace. Commands from the spec run verbatim."""
    lines = [
        "set -euo pipefail",
        "mkdir -p \"$HOME\"",
        f"echo '+ uv venv --seed {VENV_PATH} ({python_exe})'",
        f"uv venv --seed --python {shlex.quote(python_exe)} {VENV_PATH}",
        f"source {VENV_PATH}/bin/activate",
        # pip/setuptools/wheel as in the reference images (uv seeds only pip on 3.12+).
        "python -c 'import setuptools, wheel' 2>/dev/null || uv pip install --quiet setuptools wheel",
        f"cd {REPO_PATH}",
    ]
    for cmd in spec.pre_install:
        lines += [f"echo {shlex.quote('+ ' + cmd)}", cmd]
    if lock.text.strip():
        flag = "--no-deps " if lock.no_deps else ""
        lines += [f"echo '+ uv pip install {flag}-r lock.txt'", f"uv pip install {flag}-r {BUILD_DIR}/lock.txt"]
    for cmd in spec.install:
        lines += [f"echo {shlex.quote('+ ' + cmd)}", f"cd {REPO_PATH}", cmd]
    lines += [
        "echo '+ byte-compile'",
        f"python -m compileall -q -j 0 {VENV_PATH} >/dev/null 2>&1 || true",
        "echo '+ build done'",
    ]
    return "\n".join(lines) + "\n"


#: Host settings a build needs to reach the package index: proxies, CA bundles, index URLs.
PASSTHROUGH_PREFIXES = ("PIP_", "UV_", "SSL_CERT_")
PASSTHROUGH_NAMES = {"REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY",
                     "http_proxy", "https_proxy", "no_proxy", "ALL_PROXY", "all_proxy"}


def passthrough_env(host: os._Environ | dict[str, str], fixed: dict[str, str]) -> dict[str, str]:
    """Index/proxy/certificate settings from the host; our own build settings win."""
    return {
        k: v for k, v in host.items()
        if k not in fixed and (k in PASSTHROUGH_NAMES or k.startswith(PASSTHROUGH_PREFIXES))
    }


def tree_bytes(root: Path) -> int:
    total = 0
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_size
            except OSError:
                pass
    return total


def build_env(
    spec: EnvSpec, lock: Lock, repo_snapshot: Path, out_dir: Path, log: Path, *, timeout: float = 1800
) -> BuildResult:
    """Build the venv for `spec` into `out_dir` (replaced atomically on success)."""
    interp = find_interpreter(spec.python)
    out_dir = Path(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(dir=out_dir.parent, prefix=f".{out_dir.name}.{uuid.uuid4().hex[:8]}."))
    try:
        venv, testbed, build, tools, conda_bin, home = (
            work / n for n in ("venv", "testbed", "build", "bin", "conda-bin", "home")
        )
        for d in (venv, build, tools, home):
            d.mkdir()
        # A private, writable copy of the snapshot: build residue never reaches the artifact.
        shutil.copytree(repo_snapshot, testbed, symlinks=True)
        (build / "lock.txt").write_text(lock.text)
        (build / "build.sh").write_text(build_script(spec, lock, interp.executable))
        shutil.copy2(uv_bin(), tools / "uv")  # a copy: its host directory also holds a python
        write_shim(conda_bin)
        uv_cache, pip_cache = _uv_cache(), _pip_cache()
        uv_cache.mkdir(parents=True, exist_ok=True)
        pip_cache.mkdir(parents=True, exist_ok=True)
        binds = [
            rootfs.Bind(str(testbed), REPO_PATH, readonly=False),
            rootfs.Bind(str(venv), VENV_PATH, readonly=False),
            rootfs.Bind(str(build), BUILD_DIR, readonly=True),
            rootfs.Bind(str(tools), TOOLS_DIR, readonly=True),
            rootfs.Bind(str(conda_bin), f"{CONDA_ROOT}/bin", readonly=True),
            rootfs.Bind(interp.prefix, interp.prefix, readonly=True),
            rootfs.Bind(str(uv_cache), str(uv_cache), readonly=False),
            rootfs.Bind(str(pip_cache), str(pip_cache), readonly=False),
            rootfs.Bind(str(home), "/tmp/home", readonly=False),
        ]
        env = {
            "PATH": f"{TOOLS_DIR}:/usr/local/bin:/usr/bin:/bin",
            "HOME": "/tmp/home",
            "LANG": "C.UTF-8",
            "UV_CACHE_DIR": str(uv_cache),
            "PIP_CACHE_DIR": str(pip_cache),
            "UV_LINK_MODE": "copy",  # never share inodes with the uv cache
            "UV_PYTHON_DOWNLOADS": "never",
            "UV_NO_PROGRESS": "1",
            "PIP_DISABLE_PIP_VERSION_CHECK": "1",
            "PIP_NO_INPUT": "1",
        }
        env.update(passthrough_env(os.environ, env))
        with log.open("a") as fh:
            fh.write(f"# build {spec.name} with {interp.executable} ({interp.version})\n")
            fh.flush()
            try:
                rc = rootfs.run(
                    binds, ["/bin/bash", f"{BUILD_DIR}/build.sh"], env=env, cwd=REPO_PATH,
                    network="host", stdout=fh, stderr=fh, timeout=timeout,
                )
            except subprocess.TimeoutExpired:
                raise BuildError(f"build of {spec.name} timed out after {timeout:.0f} s") from None
        if rc != 0:
            raise BuildError(f"build of {spec.name} failed (exit {rc}): {one_line(log.read_text())}")
        # Two builds of one key may finish together: the move into place is serialised.
        with FileLock(str(out_dir) + ".lock"):
            if out_dir.exists():
                shutil.rmtree(out_dir)
            os.replace(venv, out_dir)
        return BuildResult(
            venv=out_dir,
            interpreter={"version": interp.version, "prefix": interp.prefix},
            raw_bytes=tree_bytes(out_dir),
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)
