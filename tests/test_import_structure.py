"""The start-up structure of the hot commands: what `minisandbox --version` and a warm
`minisandbox run TASK -- true` import, and that their modules neither compile regular
expressions nor build pydantic models while being imported.

Agents call `minisandbox run` tens of thousands of times, so its start-up is a cost; the
time itself is measured in bench/bench_cli.py (a timed unit test would only be flaky).
What is guarded here is the structure that keeps it low: the import graph of each command
(a fixed list of project modules and third-party packages, from a real process), and no
import-time work in the project's modules on those paths. A new import on the path makes
this fail: either make it lazy (import where it is used) or, if the command really needs
it, add it to the list here and measure it in the bench.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.fixtures.runtime import build_local_store
from tests.fixtures.sandbox import SRC

#: Runs the `minisandbox` entry point with `re`'s compiler watched, then writes the
#: modules the process imported and every pattern compiled by a project module's top-level
#: code (the innermost module being imported was a `minisandbox` one) to $PROBE_OUT.
PROBE = r"""
import atexit, json, os, re, sys
compiled = []
_compile = re._compile
def watched(pattern, flags):
    f = sys._getframe(1)
    while f is not None and f.f_code.co_name != "<module>":
        f = f.f_back
    if f is not None and str(f.f_globals.get("__name__", "")).startswith("minisandbox"):
        compiled.append(f"{f.f_globals['__name__']}: {pattern!r}")
    return _compile(pattern, flags)
re._compile = watched
def dump():
    with open(os.environ["PROBE_OUT"], "w") as fh:
        json.dump({"modules": sorted(sys.modules), "compiled": compiled}, fh)
atexit.register(dump)
from minisandbox.cli import main
sys.argv = ["minisandbox", *sys.argv[1:]]
sys.exit(main())  # as the `minisandbox` script calls it (a `run` may go through the node-local helper)
"""

#: What `--version` may import besides the interpreter's own start-up. Not `__future__`:
#: these modules (and `minisandbox.cli.helperclient`) do without `from __future__ import
#: annotations`, which imports that module (their few annotations that name what is not
#: imported at run time are quoted).
VERSION_MODULES = {"minisandbox", "minisandbox.cli", "minisandbox.errors"}

#: What the client of a running node-local helper imports for `run` (minisandbox.cli.helperclient:
#: built-in modules only); the helper's worker does the rest.
HELPER_CLIENT_MODULES = VERSION_MODULES | {"minisandbox.cli.helperclient", "_socket", "_sha256"}

#: The project modules of a warm `run TASK -- true` (task already on the node), in-process, as
#: root (a rootless node also imports `minisandbox.node.fusemount`: its images are mounted by
#: squashfuse in the mount holder's namespace).
RUN_MODULES = {
    "minisandbox",
    "minisandbox.cli",
    "minisandbox.cli.helperclient",
    "minisandbox.cli.options",
    "minisandbox.cli.sandboxcmds",
    "minisandbox.errors",
    "minisandbox.fsutil",
    "minisandbox.index",
    "minisandbox.manifest",
    "minisandbox.paths",
    "minisandbox.records",
    "minisandbox.syspkgs",
    "minisandbox.task",
    "minisandbox.node",
    "minisandbox.node.cache",
    "minisandbox.node.chunks",
    "minisandbox.node.iobudget",
    "minisandbox.node.published",
    "minisandbox.node.restore",
    "minisandbox.node.runtime",
    "minisandbox.node.signing",
    "minisandbox.node.store",
    "minisandbox.node.verified",
    "minisandbox.sandbox",
    "minisandbox.sandbox.conda_shim",
    "minisandbox.sandbox.hostlibs",
    "minisandbox.sandbox.init_program",
    "minisandbox.sandbox.interpreters",
    "minisandbox.sandbox.leftovers",
    "minisandbox.sandbox.limits",
    "minisandbox.sandbox.rootfs",
    "minisandbox.sandbox.sandbox",
    "minisandbox.sandbox.seccomp",
}
#: Third-party packages a warm `run` may import.
RUN_THIRD_PARTY: set[str] = set()
#: Never on the warm `run` path: schema models (the node validated its documents when they
#: entered its cache), fsspec/s3fs (a local store is read with os), retries (tenacity, only
#: after a failure), archives (zstandard: nothing is unpacked), config (yaml), the grader,
#: filelock (fsutil.FileLock), the stdlib modules these used to bring in, stdlib modules
#: the path does without (dataclasses, with inspect, ast, dis and copy: the path's record
#: types are NamedTuples or plain classes; uuid and platform: temp names come from
#: os.urandom, the machine from os.uname; random: only a download's slot wait; datetime:
#: timestamps come from time; argparse, with gettext and shutil: `run`'s common form is parsed
#: without it, `minisandbox.cli.sandboxcmds.parse_run`; hashlib, which loads OpenSSL: the few
#: small documents a run hashes go through `fsutil.sha256`; ctypes: the controller makes no
#: syscall through the init program's libc on this path; base64, zlib and the progress meter:
#: only signing keys, gzip archives and downloads need them; typing: the path's records are
#: `collections.namedtuple`s and its annotations are never evaluated, docs/design.md "Record
#: types"; subprocess, with locale: a warm run starts no host process, the sandbox's init and
#: spawner use os.posix_spawn, and `minisandbox.sandbox.rootfs.DEVNULL` stands for
#: subprocess.DEVNULL; socket, with selectors: the fork server's sockets are `_socket`'s)
#: and (the test runs as root: images are kernel mounts) the rootless mount holder's client.
RUN_FORBIDDEN = {
    "typing",
    "subprocess",
    "locale",
    "socket",
    "selectors",
    "argparse",
    "gettext",
    "shutil",
    "hashlib",
    "_hashlib",
    "ctypes",
    "base64",
    "zlib",
    "dataclasses",
    "inspect",
    "ast",
    "dis",
    "copy",
    "uuid",
    "platform",
    "random",
    "datetime",
    "pydantic",
    "pydantic_core",
    "fsspec",
    "s3fs",
    "tenacity",
    "zstandard",
    "yaml",
    "asyncio",
    "filelock",
    "logging",
    "decimal",
    "ssl",
    "email",
    "minisandbox.grading",
    "minisandbox.catalog",
    "minisandbox.node.fusemount",
    "minisandbox.progress",
}
#: Modules the machine's interpreter may add to any process (site customisation).
AMBIENT = {"__main__", "sitecustomize", "usercustomize"}


def probe(args: list[str], tmp_path: Path, env: dict[str, str] | None = None) -> dict:
    """Run `minisandbox ARGS` in a fresh interpreter; its imports and import-time compiles."""
    out = tmp_path / "probe.json"
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd="/",
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": SRC, "PROBE_OUT": str(out), **(env or {})},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return {**json.loads(out.read_text()), "stdout": proc.stdout}


def interpreter_modules() -> set[str]:
    """What a bare interpreter with the probe's own imports (json, re, atexit) has loaded."""
    code = "import atexit, json, os, re, sys; print(json.dumps(sorted(sys.modules)))"
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd="/", env={"PATH": "/usr/bin:/bin"}
    )
    return set(json.loads(proc.stdout))


def third_party(modules: set[str]) -> set[str]:
    tops = {m.split(".")[0] for m in modules}
    return {t for t in tops if t not in sys.stdlib_module_names and t != "minisandbox" and t not in AMBIENT}


def forbidden_in(modules: set[str]) -> set[str]:
    return {m for m in modules for f in RUN_FORBIDDEN if m == f or m.startswith(f + ".")}


def test_version_imports_nothing_but_the_version(tmp_path: Path) -> None:
    got = probe(["--version"], tmp_path)
    assert got["stdout"].startswith("minisandbox ")
    new = set(got["modules"]) - interpreter_modules() - AMBIENT
    assert new == VERSION_MODULES, f"--version imports more than it needs: {sorted(new - VERSION_MODULES)}"
    assert got["compiled"] == []


@pytest.mark.root
@pytest.mark.slow
def test_warm_run_imports_stay_within_the_list(as_root, tmp_path: Path) -> None:
    store = build_local_store(tmp_path / "work", "local__task.0")
    env = {"MINISANDBOX_CACHE": str(tmp_path / "cache"), "MINISANDBOX_HELPER": "off"}
    args = ["run", "--store", store, "local__task.0", "--", "true"]
    cold = probe(args, tmp_path, env)  # fetches the layers and validates the documents (the schema's models)
    assert "pydantic" in cold["modules"], "the first run must validate the store's documents"
    warm = probe(args, tmp_path, env)
    modules = set(warm["modules"])
    project = {m for m in modules if m.split(".")[0] == "minisandbox"}
    assert forbidden_in(modules) == set()
    assert project - RUN_MODULES == set(), "new project modules on the `run` path (lazy-import them or list them)"
    assert third_party(modules) - RUN_THIRD_PARTY == set(), "new third-party packages on the `run` path"
    assert warm["compiled"] == [], "project modules compile regular expressions at import (use fsutil.LazyPattern)"


def test_the_probe_sees_an_import_time_compile_and_a_forbidden_import(tmp_path: Path) -> None:
    """The checks above can fail: a project module compiling a pattern at import is reported,
    and a forbidden package is found among the modules."""
    pkg = tmp_path / "minisandbox_probe_check"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("import re\nPATTERN = re.compile(r'[a-z]+-probe')\n")
    code = PROBE.replace("from minisandbox.cli import main", "import minisandbox_probe_check\nmain = lambda: 0")
    out = tmp_path / "probe.json"
    subprocess.run(
        [sys.executable, "-c", code],
        check=True,
        cwd="/",
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": f"{tmp_path}{os.pathsep}{SRC}", "PROBE_OUT": str(out)},
    )
    got = json.loads(out.read_text())
    assert got["compiled"] == ["minisandbox_probe_check: '[a-z]+-probe'"]
    assert forbidden_in({"pydantic._internal", "fsspec", "minisandbox.grading.grading", "json"}) == {
        "pydantic._internal",
        "fsspec",
        "minisandbox.grading.grading",
    }
    assert third_party({"yaml.loader", "os", "minisandbox.task", "sitecustomize"}) == {"yaml"}


@pytest.mark.root
@pytest.mark.slow
def test_run_through_a_running_helper_imports_only_the_client(as_root, tmp_path: Path) -> None:
    """With a node-local helper running, the `run` process imports the thin client and
    nothing of the package's heavy parts (no argparse, no sandbox, no node cache)."""
    store = build_local_store(tmp_path / "work", "local__task.0")
    runtime = tempfile.mkdtemp(prefix="msbh-", dir="/tmp")
    env = {
        "MINISANDBOX_CACHE": str(tmp_path / "cache"),
        "MINISANDBOX_RUNTIME_DIR": runtime,
        "MINISANDBOX_HELPER": "use",
    }
    base = {"PATH": "/usr/bin:/bin", "PYTHONPATH": SRC, **env}
    try:
        subprocess.run(
            [sys.executable, "-m", "minisandbox.cli", "helper", "start"],
            env=base,
            cwd="/",
            check=True,
            capture_output=True,
            timeout=120,
        )
        got = probe(["run", "--store", store, "local__task.0", "--", "echo through"], tmp_path, env)
    finally:
        subprocess.run(
            [sys.executable, "-m", "minisandbox.cli", "helper", "stop"],
            env=base,
            cwd="/",
            capture_output=True,
            timeout=120,
        )
        shutil.rmtree(runtime, ignore_errors=True)
    assert got["stdout"] == "through\n"
    new = set(got["modules"]) - interpreter_modules() - AMBIENT
    assert new == HELPER_CLIENT_MODULES, f"the helper's client imports more: {sorted(new - HELPER_CLIENT_MODULES)}"
    assert got["compiled"] == []
