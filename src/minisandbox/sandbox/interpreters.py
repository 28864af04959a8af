"""Find base CPython interpreters on this machine (pyenv versions and system pythons).

Why: a venv only works with its base interpreter at the exact path recorded in
`pyvenv.cfg`. Builds pick an interpreter by version ("3.10" -> newest 3.10.x); a sandbox
restoring an artifact built elsewhere needs *a* local interpreter with the same full
version, which it binds read-only at the recorded prefix (`interpreter_binds`).
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
from dataclasses import dataclass

from minisandbox.sandbox.rootfs import SYSTEM_DIRS, Bind
from minisandbox.errors import MinisandboxError

_FULL = re.compile(r"^(\d+)\.(\d+)\.(\d+)$")
_SYSTEM_BIN_DIRS = ("/usr/bin", "/usr/local/bin")


@dataclass(frozen=True)
class Interpreter:
    version: str  # full version, e.g. "3.10.13"
    prefix: str  # sys.prefix, e.g. /root/.pyenv/versions/3.10.13 or /usr
    executable: str  # e.g. <prefix>/bin/python3.10


class InterpreterNotFound(MinisandboxError, LookupError):
    """No local interpreter matches the requested version."""


def _vkey(version: str) -> tuple[int, ...]:
    return tuple(int(x) for x in version.split("."))


def pyenv_roots() -> list[str]:
    """Candidate pyenv roots: $PYENV_ROOT, `pyenv root`, ~/.pyenv, /root/.pyenv."""
    roots = []
    if os.environ.get("PYENV_ROOT"):
        roots.append(os.environ["PYENV_ROOT"])
    exe = shutil.which("pyenv")
    if exe:
        try:
            out = subprocess.run([exe, "root"], capture_output=True, text=True, timeout=10)
            if out.returncode == 0 and out.stdout.strip():
                roots.append(out.stdout.strip())
        except (OSError, subprocess.TimeoutExpired):
            pass
    roots += [os.path.expanduser("~/.pyenv"), "/root/.pyenv"]
    seen, unique = set(), []
    for r in roots:
        r = os.path.realpath(r)
        if r not in seen:
            seen.add(r)
            unique.append(r)
    return unique


def _system_version(executable: str) -> tuple[str, str] | None:
    try:
        out = subprocess.run([executable, "-I", "-S", "-c",
                              "import sys; print('%d.%d.%d' % sys.version_info[:3]); print(sys.prefix)"],
                             capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = out.stdout.split()
    if out.returncode != 0 or len(lines) != 2 or not _FULL.match(lines[0]):
        return None
    return lines[0], lines[1]


@functools.lru_cache(maxsize=1)
def _scan() -> tuple[tuple[Interpreter, ...], tuple[str, ...]]:
    """(interpreters, unreadable places). Pyenv versions first, then system pythons."""
    found: list[Interpreter] = []
    unreadable: list[str] = []
    for root in pyenv_roots():
        versions = os.path.join(root, "versions")
        try:
            names = sorted(os.listdir(versions))
        except PermissionError:
            unreadable.append(versions)
            continue
        except OSError:
            continue
        for name in names:
            m = _FULL.match(name)
            if not m:
                continue
            prefix = os.path.join(versions, name)
            exe = os.path.join(prefix, "bin", f"python{m.group(1)}.{m.group(2)}")
            if os.access(exe, os.X_OK):
                found.append(Interpreter(name, prefix, exe))
    for bindir in _SYSTEM_BIN_DIRS:
        try:
            names = sorted(os.listdir(bindir))
        except OSError:
            continue
        for name in names:
            if not re.fullmatch(r"python\d+\.\d+", name):
                continue
            exe = os.path.join(bindir, name)
            info = _system_version(exe)
            if info and not any(i.executable == exe for i in found):
                found.append(Interpreter(info[0], info[1], exe))
    return tuple(found), tuple(unreadable)


def available() -> list[Interpreter]:
    """Every interpreter found, in discovery order."""
    return list(_scan()[0])


def _not_found(version: str) -> InterpreterNotFound:
    interps, unreadable = _scan()
    have = ", ".join(f"{i.version} ({i.prefix})" for i in interps) or "none"
    extra = f"; unreadable: {', '.join(unreadable)}" if unreadable else ""
    return InterpreterNotFound(
        f"no CPython {version} on this machine (have: {have}{extra}): install it with `pyenv install {version}`")


def find_interpreter(version: str) -> Interpreter:
    """The newest interpreter matching "3.10" (any patch) or "3.10.13" (exact)."""
    version = str(version).strip()
    if not re.fullmatch(r"\d+\.\d+(\.\d+)?", version):
        raise ValueError(f"interpreter version {version!r} must look like 3.10 or 3.10.13")
    want = _vkey(version)
    matches = [i for i in _scan()[0] if _vkey(i.version)[: len(want)] == want]
    if not matches:
        raise _not_found(version)
    best = max(_vkey(i.version) for i in matches)
    return next(i for i in matches if _vkey(i.version) == best)  # pyenv wins ties


def find_prefix(full_version: str) -> str:
    """Prefix of a local interpreter with exactly this full version."""
    if not _FULL.match(str(full_version)):
        raise ValueError(f"interpreter version {full_version!r} must be a full version like 3.10.13")
    return find_interpreter(full_version).prefix


def is_system_path(path: str) -> bool:
    """True when `path` lies in a directory every private root already binds."""
    parts = os.path.normpath(path).split("/")
    return len(parts) > 1 and parts[1] in SYSTEM_DIRS


def interpreter_binds(version: str, recorded_prefix: str) -> list[Bind]:
    """Read-only bind(s) that make an interpreter with `version` appear at
    `recorded_prefix` inside a private root (none when it is a system path that exists)."""
    if is_system_path(recorded_prefix):
        local = find_prefix(version)
        if os.path.realpath(local) == os.path.realpath(recorded_prefix):
            return []
        raise InterpreterNotFound(
            f"interpreter {version} was recorded at system path {recorded_prefix}, which this machine "
            f"does not provide with that version (found {local}): rebuild the environment here")
    if os.path.isdir(recorded_prefix) and os.access(recorded_prefix, os.R_OK | os.X_OK):
        exe_dir = os.path.join(recorded_prefix, "bin")
        if any(n.startswith("python") for n in os.listdir(exe_dir)) and _prefix_version(recorded_prefix) == version:
            return [Bind(recorded_prefix, recorded_prefix, True)]
    return [Bind(find_prefix(version), recorded_prefix, True)]


def _prefix_version(prefix: str) -> str | None:
    """Full version of the interpreter at `prefix`: pyenv-style directory name, else ask it."""
    name = os.path.basename(os.path.normpath(prefix))
    if _FULL.match(name):
        return name
    for i in _scan()[0]:
        if os.path.realpath(i.prefix) == os.path.realpath(prefix):
            return i.version
    return None
