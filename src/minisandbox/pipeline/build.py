"""Build an environment: a uv venv at the canonical path, inside a private mount namespace.

The venv is created at `paths.VENV_PATH` and the repo copy at `paths.REPO_PATH` by binding
per-build host directories there, so shebangs, `pyvenv.cfg` and editable `.pth` files
hold canonical paths and sandboxes bind the restored layers at the same places: nothing
is ever relocated. Two builds of one key use different work dirs and never collide.

Fidelity with the reference images (docs/design.md "Environment fidelity"):
* HOME is `paths.HOME_PATH` (/root) in the build and in every sandbox; what the build
  leaves there is packed with the environment (`<venv>/.minisandbox/home`).
* After the install commands, the build warms the test collection up with network
  (`EnvSpec.warmup_commands`), so files a suite downloads when collected are present
  offline.
* /testbed after the install is what the tasks start from: its difference to the clean
  snapshot (generated version files, egg-info, in-tree extensions, fetched data) is packed
  with the environment (`<venv>/.minisandbox/testbed`, see `minisandbox.pipeline.residue`).
* With an as-of date, uv gets `--exclude-newer` (the venv's setuptools and wheel
  included; pip, the installer, is today's below 25.1: `seed_lines`) and pip (the spec's own commands, its isolated builds included) a
  loopback index showing the upstream as of the date (`minisandbox.pipeline.asof_index`).
* Debian packages the spec declares are checked first (`minisandbox.syspkgs`).
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import subprocess
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from minisandbox.catalog import EnvSpec
from minisandbox.errors import MinisandboxError
from minisandbox.fsutil import FileLock, LazyPattern
from minisandbox.paths import CONDA_ROOT, HOME_PATH, REPO_PATH, TEST_PYCS_DIR, VENV_PATH
from minisandbox.pipeline import bytecode, testpycs
from minisandbox.pipeline.asof_index import AsOfIndex
from minisandbox.pipeline.failures import one_line
from minisandbox.pipeline.git import recorded_describe, tag_release
from minisandbox.pipeline.residue import HOME_DIR, RESIDUE_DIR, collect_residue, pack_home
from minisandbox.pipeline.resolve import Lock
from minisandbox.sandbox import rootfs
from minisandbox.sandbox.conda_shim import write_shim
from minisandbox.sandbox.hostlibs import add_packages, ldd_host_libs, shared_objects
from minisandbox.sandbox.interpreters import SYSTEM, Interpreter, build_files, describe, find_interpreter
from minisandbox.syspkgs import require as require_system_packages
from minisandbox.tools import uv_bin

BUILD_DIR = "/opt/minisandbox/build"  # lock + script, read-only inside the build

#: Build requirements a package's source distribution needs but does not declare, added to
#: its isolated build by uv (`extra-build-dependencies`, `uv_config`). Why: a few packages
#: of the catalog come as conda-forge binaries in the official images (SWE-smith's exports),
#: where nothing is built; here the lock installs them from PyPI, whose sdist is built.
#: fasttext 0.9.2's setup.py imports pybind11 (stanfordnlp/string2string).
EXTRA_BUILD_DEPENDENCIES: dict[str, tuple[str, ...]] = {"fasttext": ("pybind11",)}
TOOLS_DIR = "/opt/minisandbox/bin"  # uv, read-only inside the build

#: The lock's build constraints (`resolve.build_constraints`), a file of BUILD_DIR.
BUILD_CONSTRAINTS = "build-constraints.txt"

#: The uv.toml of a build (`uv_config`), given to the build's own uv commands with
#: `--config-file` only: a spec's install commands may run a uv of their own (pydantic's
#: `pipx install uv` got 0.6.3), which refuses settings it does not know, so it must not find
#: this file in `UV_CONFIG_FILE`.
UV_CONFIG = f"{BUILD_DIR}/uv.toml"
OWN_UV = f"uv --config-file {UV_CONFIG}"

#: Host variables a build never inherits, whatever `PASSTHROUGH_PREFIXES` says: a host
#: uv.toml would replace the build's (`--config-file`) and name a path the build cannot see.
PASSTHROUGH_NEVER = {"UV_CONFIG_FILE"}


class BuildError(MinisandboxError, RuntimeError):
    pass


@dataclass(frozen=True)
class BuildResult:
    venv: Path
    interpreter: dict[str, str]
    raw_bytes: int
    testbed: dict[str, Any] | None = None  # install residue of /testbed (manifest `testbed`)
    home: dict[str, Any] | None = None  # what the build left in HOME (manifest `home`)
    host_libs: list[dict[str, str]] | None = None  # sandbox.hostlibs.ldd_host_libs of interpreter + venv


def _uv_cache() -> Path:
    env = os.environ.get("UV_CACHE_DIR")
    return Path(env) if env else Path(os.path.expanduser("~/.cache/uv"))


def _pip_cache() -> Path:
    env = os.environ.get("PIP_CACHE_DIR")
    return Path(env) if env else Path(os.path.expanduser("~/.cache/pip"))


#: Seconds the tolerated collection warm-up may take before it is stopped.
WARMUP_TIMEOUT = 600


#: The venv's pip: the newest for its Python, but before 25.1. pip 25.1 dropped the legacy
#: editable install (`setup.py develop`) it fell back to when a project's build backend has
#: no PEP 660 hook, and setuptools before 64 has none: astroid 2.12-2.14 pin
#: `setuptools~=62.6`, and their `pip install -e .` failed with "missing the
#: 'build_editable' hook" (docs/fidelity.md). The images the catalog reproduces were built
#: with pips before 25.1 (SWE-bench's from mid-2024, SWE-smith's from early 2025).
PIP_SEED = "pip<25.1"


def seed_lines(python_exe: str, venv: str, lock: Lock, uv: str = OWN_UV) -> list[str]:
    """Bash lines that create the venv with pip, and setuptools and wheel as of the lock's date.

    setuptools and wheel are what test suites import (`pkg_resources`): resolved as of the
    date unless the lock pins them (SWE-smith's conda exports do, and their lock installs
    over them); without it a SWE-bench build got today's setuptools, which no longer has
    `pkg_resources` (pytest 8.3, astroid 2.15; docs/fidelity.md). pip is the installer and
    is not dated (the newest for the venv's Python below 25.1, `PIP_SEED`): a pip as of an
    old date cannot make the editable installs a pyproject-only project needs (PEP 660 came
    with pip 21.3), so a build as of 2021 failed where today's pip builds it with the
    backend of that date. `uv` is the command that runs uv (the build's own, `OWN_UV`)."""
    date = " ".join(shlex.quote(a) for a in lock.uv_date_args())
    date = f" {date}" if date else ""
    as_of = f" (setuptools and wheel as of {lock.exclude_newer})" if lock.exclude_newer else ""
    return [
        f"echo '+ uv venv {venv} ({python_exe}), pip{as_of}'",
        f"{uv} venv --python {shlex.quote(python_exe)} {venv}",
        f"source {venv}/bin/activate",
        f"{uv} pip install --quiet {shlex.quote(PIP_SEED)}",
        f"{uv} pip install --quiet{date} setuptools wheel",
    ]


def uv_config(extra: dict[str, tuple[str, ...]] | None = None) -> str:
    """The uv.toml the build's own uv commands read (`UV_CONFIG`): the undeclared build
    requirements of `EXTRA_BUILD_DEPENDENCIES` (or `extra`). Their other settings come from
    the command line and environment; no user or project file is read (`--config-file`)."""
    table = EXTRA_BUILD_DEPENDENCIES if extra is None else extra
    lines = ["[extra-build-dependencies]"]
    lines += [f"{name} = {json.dumps(list(reqs))}" for name, reqs in sorted(table.items())]
    return "\n".join(lines) + "\n"


def build_script(spec: EnvSpec, lock: Lock, python_exe: str) -> str:
    """The bash run inside the build namespace. Commands from the spec run verbatim."""
    date = " ".join(shlex.quote(a) for a in lock.uv_date_args())
    date = f" {date}" if date else ""
    lines = [
        "set -euo pipefail",
        'mkdir -p "$HOME"',
        *seed_lines(python_exe, VENV_PATH, lock),
        f"cd {REPO_PATH}",
    ]
    if lock.exclude_newer:
        lines.append(f"echo '+ as of {lock.exclude_newer}: uv --exclude-newer, pip index '\"$PIP_INDEX_URL\"")
    for cmd in spec.pre_install:
        lines += [f"echo {shlex.quote('+ ' + cmd)}", cmd]
    if lock.text.strip():
        flag = "--no-deps " if lock.no_deps else ""
        built = f" --build-constraints {BUILD_DIR}/{BUILD_CONSTRAINTS}" if lock.build_constraints else ""
        lines += [
            f"echo '+ uv pip install {flag}-r lock.txt{date}{built and ' --build-constraints ' + BUILD_CONSTRAINTS}'",
            f"{OWN_UV} pip install {flag}-r {BUILD_DIR}/lock.txt{date}{built}",
        ]
    for cmd in spec.install:
        lines += [f"echo {shlex.quote('+ ' + cmd)}", f"cd {REPO_PATH}", cmd]
    own = set(spec.warmup)
    for cmd in spec.warmup_commands():
        lines += [f"echo {shlex.quote('+ warm-up: ' + cmd)}", f"cd {REPO_PATH}"]
        if cmd in own:
            lines.append(cmd)
        else:  # the collection warm-up may fail (the log says so); the tests will tell
            lines.append(
                f"timeout -k 10 {WARMUP_TIMEOUT} bash -c {shlex.quote(cmd)} </dev/null "
                '|| echo "+ warm-up exited $? (tolerated)"'
            )
    lines += [
        "echo '+ byte-compile (deterministic: PYTHONHASHSEED=0, see minisandbox.pipeline.bytecode)'",
        f"{bytecode.command(BUILD_DIR, [VENV_PATH])} "
        f"|| python -m compileall -q -j 0 {VENV_PATH} >/dev/null 2>&1 || true",
        "echo '+ build done'",
    ]
    return "\n".join(lines) + "\n"


#: Host settings a build needs to reach the package index: proxies, CA bundles, index URLs;
#: and git's configuration (`GIT_CONFIG_GLOBAL`, `GIT_CONFIG_COUNT`/`_KEY_n`/`_VALUE_n`): a
#: site's mirror rules (`url.<mirror>.insteadOf https://github.com/...`) for the
#: dependencies an install command takes from a git URL (MONAI's requirements-dev.txt:
#: `git+https://github.com/facebookresearch/segment-anything.git@<commit>`); the build's own
#: HOME has no `.gitconfig`.
PASSTHROUGH_PREFIXES = ("PIP_", "UV_", "SSL_CERT_", "GIT_CONFIG")
PASSTHROUGH_NAMES = {
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
    "ALL_PROXY",
    "all_proxy",
}


def _interpreter(spec: EnvSpec):
    """The reference's exact interpreter when this machine has it, else the newest of the
    spec's minor version (the manifest records which one was used)."""
    if spec.python_full:
        try:
            return find_interpreter(spec.python_full)
        except (LookupError, ValueError, MinisandboxError):
            pass
    return find_interpreter(spec.python)


_SCM_TAG = LazyPattern(r"^(?:[\w-]+-)?[vV]?(?P<version>\d+(?:\.\d+)*)(?P<rest>[^+]*)$")


def scm_version(testbed: Path) -> str | None:
    """The version setuptools_scm derives in a clone with tags (its default scheme) from the
    snapshot's recorded `git describe` (`minisandbox.pipeline.git.DESCRIBE_FILE`): the tag's
    version at a tagged commit (`v8.4.2-0-g..` -> 8.4.2), else the next patch version as a
    dev release (`v8.4.2-5-gabc1234` -> 8.4.3.dev5+gabc1234). None without a record."""
    described = recorded_describe(testbed)
    if described is None:
        return None
    tag, _, node = described.rpartition("-g")
    tag, _, distance = tag.rpartition("-")
    m = _SCM_TAG.match(tag)
    if m is None or not distance.isdigit():
        return None
    version, suffix = m.group("version"), m.group("rest").lstrip("-_.")
    if int(distance) == 0:
        return f"{version}{suffix}"
    if suffix:  # a pre-release tag: the next dev release of it
        return f"{version}{suffix}.dev{distance}+g{node}"
    parts = version.split(".")
    parts[-1] = str(int(parts[-1]) + 1)
    return f"{'.'.join(parts)}.dev{distance}+g{node}"


def host_libs(interp: Interpreter, venv: Path) -> list[dict[str, str]]:
    """Host libraries the interpreter (executable, libpython, its extension modules) and
    the venv's extension modules load from outside the layers a node gets."""
    files = [Path(f) for f in build_files(interp)]
    dynload = Path(interp.prefix) / "lib" / f"python{interp.minor}" / "lib-dynload"
    if dynload.is_dir():
        files += shared_objects(dynload)
    files += shared_objects(venv)
    own = [venv] if interp.kind == SYSTEM else [venv, Path(interp.prefix)]
    return add_packages(ldd_host_libs(files, own))


def passthrough_env(host: os._Environ | dict[str, str], fixed: dict[str, str]) -> dict[str, str]:
    """Index/proxy/certificate settings from the host; our own build settings win."""
    return {
        k: v
        for k, v in host.items()
        if k not in fixed
        and k not in PASSTHROUGH_NEVER
        and (k in PASSTHROUGH_NAMES or k.startswith(PASSTHROUGH_PREFIXES))
    }


def git_mirror_binds(environ: dict[str, str] | os._Environ) -> list[rootfs.Bind]:
    """The site's git configuration file (`GIT_CONFIG_GLOBAL`) and the local mirrors its
    `url.<dir>.insteadOf` rules name, read-only at their own paths: the build's private root
    shows the host system only, so without them a rule that `passthrough_env` lets through
    names a file and directories the build's git cannot see."""
    path = environ.get("GIT_CONFIG_GLOBAL", "")
    if not path.startswith("/") or not os.path.isfile(path):
        return []
    binds = [rootfs.Bind(path, path, readonly=True)]
    found = subprocess.run(
        ["git", "config", "--file", path, "--get-regexp", r"^url\..*\.insteadof$"],
        capture_output=True,
        text=True,
        check=False,
    )
    for line in found.stdout.splitlines():
        base = line.split(" ", 1)[0][len("url.") : -len(".insteadof")]
        base = base.removeprefix("file://")
        if base.startswith("/") and os.path.isdir(base) and all(b.target != base for b in binds):
            binds.append(rootfs.Bind(base, base, readonly=True))
    return binds


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
    spec: EnvSpec,
    lock: Lock,
    repo_snapshot: Path,
    out_dir: Path,
    log: Path,
    *,
    timeout: float = 1800,
    interpreter: dict | None = None,
) -> BuildResult:
    """Build the venv for `spec` into `out_dir` (replaced atomically on success).
    `interpreter`: the plan's choice (`pipeline.interplayer.plan_interpreter`); this machine
    must have that very build. The interpreter appears at its canonical prefix inside the
    build, so the venv records the path its layer is mounted at on nodes."""
    from minisandbox.pipeline.interplayer import local_interpreter

    require_system_packages(spec.system_packages, f"environment {spec.name}")
    interp = local_interpreter(interpreter) if interpreter else _interpreter(spec)
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
        (build / BUILD_CONSTRAINTS).write_text("".join(f"{c}\n" for c in lock.build_constraints))
        (build / Path(UV_CONFIG).name).write_text(uv_config())
        (build / "build.sh").write_text(build_script(spec, lock, interp.canonical_executable))
        (build / bytecode.SCRIPT_NAME).write_text(bytecode.SCRIPT)
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
            rootfs.Bind(interp.prefix, interp.canonical_prefix, readonly=True),
            rootfs.Bind(str(uv_cache), str(uv_cache), readonly=False),
            rootfs.Bind(str(pip_cache), str(pip_cache), readonly=False),
            rootfs.Bind(str(home), HOME_PATH, readonly=False),
            *git_mirror_binds(os.environ),
        ]
        env = {
            "PATH": f"{TOOLS_DIR}:/usr/local/bin:/usr/bin:/bin",
            "HOME": HOME_PATH,
            "LANG": "C.UTF-8",
            "UV_CACHE_DIR": str(uv_cache),
            "PIP_CACHE_DIR": str(pip_cache),
            "UV_LINK_MODE": "copy",  # never share inodes with the uv cache
            "UV_PYTHON_DOWNLOADS": "never",
            "UV_NO_PROGRESS": "1",
            "PIP_DISABLE_PIP_VERSION_CHECK": "1",
            "PIP_NO_INPUT": "1",
        }
        with contextlib.ExitStack() as stack:
            if lock.exclude_newer:
                # pip and its isolated builds see the upstream index as of the date, and
                # nothing else (no extra index or find-links that could bypass it)
                upstream = os.environ.get("PIP_INDEX_URL", "")
                index = stack.enter_context(AsOfIndex(upstream, lock.exclude_newer, dict(lock.exempt)))
                env.update(
                    {
                        "PIP_INDEX_URL": index.url,
                        "PIP_EXTRA_INDEX_URL": "",
                        "PIP_FIND_LINKS": "",
                    }
                )
            env.update(passthrough_env(os.environ, env))
            if spec.kind == "swebench":
                # SWE-bench installs in a clone that has the release tags up to the commit;
                # the snapshot has none, so setuptools_scm would say 0.1.dev1 (pytest then
                # refuses its own `minversion`) and versioneer 0+untagged
                if version := scm_version(testbed):
                    env["SETUPTOOLS_SCM_PRETEND_VERSION"] = version
                tag_release(testbed)
            with log.open("a") as fh:
                fh.write(
                    f"# build {spec.name} with {interp.executable} ({interp.version}, {interp.kind}, "
                    f"at {interp.canonical_prefix})\n"
                )
                if interp.kind == SYSTEM:
                    fh.write(f"# warning: {describe(interp)['warning']}\n")
                fh.flush()
                try:
                    rc = rootfs.run(
                        binds,
                        ["/bin/bash", f"{BUILD_DIR}/build.sh"],
                        env=env,
                        cwd=REPO_PATH,
                        network="host",
                        stdout=fh,
                        stderr=fh,
                        timeout=timeout,
                    )
                except subprocess.TimeoutExpired:
                    raise BuildError(f"build of {spec.name} timed out after {timeout:.0f} s") from None
        if rc != 0:
            raise BuildError(f"build of {spec.name} failed (exit {rc}): {one_line(log.read_text())}")
        libs = host_libs(interp, venv)
        # /testbed after the install and HOME travel with the venv (see the module docstring)
        residue = collect_residue(Path(repo_snapshot), testbed, venv / RESIDUE_DIR)
        # the warm-up's assertion-rewritten test modules, for the eval script (testpycs)
        testpycs.harvest(testbed, venv / TEST_PYCS_DIR, spec.test_cmd)
        home_info = pack_home(home, venv / HOME_DIR, [b.target for b in binds])
        # Two builds of one key may finish together: the move into place is serialised.
        with FileLock(str(out_dir) + ".lock"):
            if out_dir.exists():
                shutil.rmtree(out_dir)
            os.replace(venv, out_dir)
        return BuildResult(
            venv=out_dir,
            interpreter=describe(interp),
            raw_bytes=tree_bytes(out_dir),
            host_libs=libs,
            testbed=residue.to_dict() if residue.files else None,
            home=home_info,
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)
