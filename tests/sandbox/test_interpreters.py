"""Interpreter discovery and the interpreter layer's identity: uv-managed first, pyenv,
system; content keys; allowed prefixes; the not-found message says how to provide it."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import pytest

from minisandbox.sandbox import interpreters
from minisandbox.sandbox.interpreters import (
    KEY_PATTERN,
    PYENV,
    SYSTEM,
    UV_MANAGED,
    UV_PREFIX_ROOT,
    InterpreterNotFound,
    check_prefix,
    describe,
    find_interpreter,
    interpreter_key,
)


@pytest.fixture
def rescan():
    interpreters.rescan()
    yield
    interpreters.rescan()


def _system_python() -> interpreters.Interpreter:
    system = [i for i in interpreters.available() if i.kind == SYSTEM]
    if not system:
        pytest.skip("no system python3.X in /usr/bin")
    return system[0]


@pytest.fixture
def uv_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rescan) -> tuple[Path, interpreters.Interpreter]:
    """A uv python directory holding one 'uv-managed' CPython: the layout uv creates
    (cpython-X.Y.Z-linux-<arch>-gnu/bin/pythonX.Y plus a minor-version link), with the
    real system interpreter as its executable (a standalone build cannot be downloaded here)."""
    system = _system_python()
    root = tmp_path / "uv-python"
    name = f"cpython-{system.version}-linux-x86_64-gnu"
    (root / name / "bin").mkdir(parents=True)
    os.symlink(system.executable, root / name / "bin" / f"python{system.minor}")
    os.symlink(name, root / f"cpython-{system.minor}-linux-x86_64-gnu")  # uv's minor link: not a second one
    monkeypatch.setenv("UV_PYTHON_INSTALL_DIR", str(root))
    interpreters.rescan()
    return root / name, system


def test_uv_managed_is_preferred_and_appears_at_the_canonical_prefix(uv_dir) -> None:
    prefix, system = uv_dir
    found = [i for i in interpreters.available() if i.kind == UV_MANAGED]
    assert [i.prefix for i in found] == [str(prefix)]
    best = find_interpreter(system.minor)
    assert best.kind == UV_MANAGED and best.version == system.version
    assert best.canonical_prefix == f"{UV_PREFIX_ROOT}/{prefix.name}"
    assert best.canonical_executable == f"{UV_PREFIX_ROOT}/{prefix.name}/bin/python{system.minor}"
    d = describe(best)
    assert d["kind"] == UV_MANAGED and d["prefix"] == best.canonical_prefix and "warning" not in d
    assert re.fullmatch(rf"cpython-{re.escape(system.version)}-uv-[0-9a-f]{{16}}", d["key"])
    assert check_prefix(d["prefix"], UV_MANAGED) == d["prefix"]


def test_key_is_the_build_not_the_path(uv_dir, tmp_path: Path) -> None:
    """Same bytes, same canonical prefix -> same key; another build of the same version -> another key."""
    prefix, system = uv_dir
    first = interpreter_key(find_interpreter(system.version))
    assert first == interpreter_key(find_interpreter(system.version))  # stable (cached digests)
    other = tmp_path / "other" / prefix.name / "bin"
    other.mkdir(parents=True)
    exe = other / f"python{system.minor}"
    exe.write_bytes(Path(system.executable).read_bytes() + b"\0rebuilt")
    exe.chmod(0o755)
    rebuilt = interpreters.Interpreter(system.version, str(other.parent), str(exe), UV_MANAGED)
    assert rebuilt.canonical_prefix == find_interpreter(system.version).canonical_prefix
    assert interpreter_key(rebuilt) != first


def test_pyenv_interpreter_is_a_layer_at_its_own_prefix(rescan) -> None:
    pyenv = [i for i in interpreters.available() if i.kind == PYENV]
    if not pyenv:
        pytest.skip("no pyenv interpreter on this machine")
    interp = pyenv[0]
    d = describe(interp)
    assert d["prefix"] == interp.prefix  # absolute RUNPATH: it only runs where it was built
    assert KEY_PATTERN.fullmatch(d["key"]) and d["key"].startswith(f"cpython-{interp.version}-pyenv-")
    assert check_prefix(interp.prefix, PYENV) == interp.prefix


def test_system_interpreter_is_no_layer_and_says_so(rescan) -> None:
    system = _system_python()
    d = describe(system)
    assert d["kind"] == SYSTEM and "key" not in d and d["prefix"] == "/usr"
    assert "not shipped as a layer" in d["warning"] and system.version in d["warning"]
    assert interpreter_key(system) is None


@pytest.mark.parametrize(
    "prefix,kind",
    [
        ("/usr", PYENV),
        ("/usr/lib/versions/3.10.13", PYENV),
        ("/root/.pyenv/versions/../3.10.13", PYENV),
        ("relative/versions/3.10.13", PYENV),
        ("/opt/miniconda3/envs/testbed", UV_MANAGED),
        ("/opt/minisandbox/python/../../etc", UV_MANAGED),
        ("/root/.pyenv/versions/3.10.13", UV_MANAGED),
        ("/opt/minisandbox/python/cpython-3.10.13-linux-x86_64-gnu", SYSTEM),
    ],
)
def test_check_prefix_refuses_anything_else(prefix: str, kind: str) -> None:
    with pytest.raises(ValueError, match="interpreter prefix"):
        check_prefix(prefix, kind)


def test_not_found_names_the_version_and_how_to_provide_it(rescan) -> None:
    with pytest.raises(InterpreterNotFound) as exc:
        find_interpreter("3.1.99")
    msg = str(exc.value)
    assert "\n" not in msg
    assert msg.startswith("no CPython 3.1.99 on this machine (have: ")
    assert "`uv python install 3.1.99`" in msg and "`pyenv install 3.1.99`" in msg
    assert "UV_PYTHON_INSTALL_MIRROR" in msg


def test_running_interpreter_is_found_with_its_kind(rescan) -> None:
    here = f"{sys.version_info.major}.{sys.version_info.minor}.{sys.version_info.micro}"
    assert any(i.version == here for i in interpreters.available())


def test_a_recorded_system_interpreter_is_checked_without_a_scan(monkeypatch) -> None:
    """The common case of a `run` over an env recorded with /usr's python: the recorded
    interpreter is asked its version once, no scan (pyenv root, every other python) runs;
    another version at that path still goes through the scan and its error."""
    import platform

    if not os.access(f"/usr/bin/python{sys.version_info[0]}.{sys.version_info[1]}", os.X_OK):
        pytest.skip("no system python of this minor version")
    info = interpreters._system_version(f"/usr/bin/python{sys.version_info[0]}.{sys.version_info[1]}")
    assert info is not None and platform.python_version_tuple()[:2] == tuple(info[0].split(".")[:2])

    def no_scan():
        raise AssertionError("scanned")

    monkeypatch.setattr(interpreters, "_scan", no_scan)
    assert interpreters.interpreter_binds(info[0], "/usr") == []
    with pytest.raises(AssertionError, match="scanned"):
        interpreters.interpreter_binds(info[0] + "9", "/usr")


def test_the_running_interpreter_is_not_started_to_ask_its_version(monkeypatch, tmp_path) -> None:
    """The recorded system interpreter is the very file this process runs on: its version
    comes from this process (no `python -c` per `run`); a copy of it (another inode) and a
    missing file are still asked or refused."""
    base = getattr(sys, "_base_executable", None) or sys.executable
    here = ".".join(str(n) for n in sys.version_info[:3])
    assert interpreters._running_version(base) == (here, sys.base_prefix)
    assert interpreters._running_version(os.path.realpath(base)) == (here, sys.base_prefix)
    copy = tmp_path / "python-copy"
    copy.write_bytes(open(os.path.realpath(base), "rb").read(4096))
    assert interpreters._running_version(str(copy)) is None
    assert interpreters._running_version(str(tmp_path / "missing")) is None
    exe = f"/usr/bin/python{sys.version_info[0]}.{sys.version_info[1]}"
    if os.path.realpath(exe) != os.path.realpath(base):
        pytest.skip("this process does not run on the system python")

    def no_process(executable: str):
        raise AssertionError(f"started {executable}")

    monkeypatch.setattr(interpreters, "_system_version", no_process)
    assert interpreters.interpreter_binds(here, "/usr") == []


def test_a_system_interpreter_is_asked_its_version_once_per_file(monkeypatch, tmp_path) -> None:
    """A warm `run` over an env recorded with another interpreter than the CLI's starts no
    process: the answer is remembered in the node state, keyed by the file's identity; a
    changed file (an upgrade) and an entry that does not read as a version are asked again."""
    monkeypatch.setenv("MINISANDBOX_STATE", str(tmp_path / "state"))
    exe = tmp_path / "python3.11"
    exe.write_text("#!/bin/sh\n")
    asked: list[str] = []

    def ask(executable: str):
        asked.append(executable)
        return ("3.11.2", "/usr")

    monkeypatch.setattr(interpreters, "_system_version", ask)
    assert interpreters._remembered_version(str(exe)) == ("3.11.2", "/usr")
    assert interpreters._remembered_version(str(exe)) == ("3.11.2", "/usr")
    assert len(asked) == 1
    os.utime(exe, ns=(1, 1))  # another file identity: asked again
    assert interpreters._remembered_version(str(exe)) == ("3.11.2", "/usr") and len(asked) == 2
    probes = tmp_path / "state" / interpreters.PROBES_FILE
    ident = interpreters._file_identity(str(exe))
    probes.write_text(json.dumps({ident: ["3.11.2; rm -rf /", "relative"]}))
    assert interpreters._remembered_version(str(exe)) == ("3.11.2", "/usr") and len(asked) == 3
    probes.write_text("not json")
    assert interpreters._remembered_version(str(exe)) == ("3.11.2", "/usr") and len(asked) == 4
    assert interpreters._remembered_version(str(tmp_path / "missing")) is None and len(asked) == 4
