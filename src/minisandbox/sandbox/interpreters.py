"""Find base CPython interpreters on this machine: uv-managed, pyenv, system.

Why: a venv only works with its base interpreter at the exact path recorded in
`pyvenv.cfg`. Builds pick an interpreter by version ("3.10" -> newest 3.10.x), preferring
uv-managed standalone builds (python-build-standalone: relocatable, their own copies of
OpenSSL/SQLite/...), then pyenv's, then the system's. The interpreter is published as a
layer of its own (`interpreter_key`, docs/interpreters.md) and mounted at
its recorded prefix on the node. Stores built before that (manifests without an
interpreter key) still work the old way: a local interpreter with the same full version
is bound read-only at the recorded prefix (`interpreter_binds`).

Prefixes (the mount paths of interpreter layers, a fixed pattern `PREFIX_PATTERNS`):
* uv-managed: bound at `/opt/minisandbox/python/<uv's directory name>` during the build
  (relocatable, so the venv records that canonical path);
* pyenv: its own prefix (`<pyenv root>/versions/X.Y.Z`): pyenv builds link libpython with
  an absolute RUNPATH, so they only run there;
* system (`/usr`): not a layer (every sandbox binds the host's /usr); recorded with a warning.
"""

from __future__ import annotations

import functools
import os
import re
import sys
from collections import namedtuple

from minisandbox.errors import MinisandboxError
from minisandbox.fsutil import LazyPattern
from minisandbox.sandbox.init_program import SYSTEM_DIRS
from minisandbox.sandbox.rootfs import Bind

_FULL = LazyPattern(r"^(\d+)\.(\d+)\.(\d+)$")
_SYSTEM_BIN_DIRS = ("/usr/bin", "/usr/local/bin")
#: uv's directory names for CPython builds, e.g. cpython-3.10.13-linux-x86_64-gnu
_UV_NAME = LazyPattern(r"^cpython-(\d+\.\d+\.\d+)-linux-[a-z0-9_]+-gnu$")

UV_MANAGED, PYENV, SYSTEM = "uv-managed", "pyenv", "system"
KINDS = (UV_MANAGED, PYENV, SYSTEM)
#: Where uv-managed interpreters appear inside builds and sandboxes.
UV_PREFIX_ROOT = "/opt/minisandbox/python"
#: Allowed mount paths of interpreter layers (also /tmp/team contract with store validation).
PREFIX_PATTERNS = {
    PYENV: LazyPattern(r"/(?:[A-Za-z0-9._-]+/)*versions/\d+\.\d+\.\d+"),
    UV_MANAGED: LazyPattern(re.escape(UV_PREFIX_ROOT) + r"/cpython-\d+\.\d+\.\d+[A-Za-z0-9._+-]*"),
}
#: Interpreter artifact keys: cpython-<version>-<uv|pyenv>-<16 hex>.
KEY_PATTERN = LazyPattern(r"cpython-\d+\.\d+\.\d+-(uv|pyenv)-[0-9a-f]{16}")
SYSTEM_WARNING = (
    "base interpreter is the system's ({prefix}): it is not shipped as a layer, so a node "
    "needs the same Python {version} at {prefix}; install uv-managed or pyenv {version} to ship it"
)


class Interpreter(
    namedtuple(
        "Interpreter",
        [
            "version",  # full version, e.g. "3.10.13"
            "prefix",  # sys.prefix on this host, e.g. /root/.pyenv/versions/3.10.13 or /usr
            "executable",  # e.g. <prefix>/bin/python3.10
            "kind",  # uv-managed | pyenv | system (default pyenv)
        ],
        defaults=[PYENV],
    )
):
    """A base interpreter on this host (a named tuple: no `typing` on a warm `run`'s path,
    docs/design.md "Record types")."""

    __slots__ = ()

    @property
    def minor(self) -> str:
        return ".".join(self.version.split(".")[:2])

    @property
    def canonical_prefix(self) -> str:
        """Where the interpreter appears in builds and sandboxes (see the module doc)."""
        if self.kind == UV_MANAGED:
            return f"{UV_PREFIX_ROOT}/{os.path.basename(os.path.normpath(self.prefix))}"
        return self.prefix

    @property
    def canonical_executable(self) -> str:
        return os.path.join(self.canonical_prefix, os.path.relpath(self.executable, self.prefix))


class InterpreterNotFound(MinisandboxError, LookupError):
    """No local interpreter matches the requested version."""


def _vkey(version: str) -> tuple[int, ...]:
    return tuple(int(x) for x in version.split("."))


def pyenv_roots() -> list[str]:
    """Candidate pyenv roots: $PYENV_ROOT, `pyenv root`, ~/.pyenv, /root/.pyenv."""
    import shutil
    import subprocess

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
    return _unique(roots)


def uv_python_dirs() -> list[str]:
    """Where uv keeps managed interpreters: $UV_PYTHON_INSTALL_DIR, else
    $XDG_DATA_HOME/uv/python, ~/.local/share/uv/python (what `uv python dir` prints)."""
    dirs = []
    if os.environ.get("UV_PYTHON_INSTALL_DIR"):
        dirs.append(os.environ["UV_PYTHON_INSTALL_DIR"])
    if os.environ.get("XDG_DATA_HOME"):
        dirs.append(os.path.join(os.environ["XDG_DATA_HOME"], "uv", "python"))
    dirs.append(os.path.expanduser("~/.local/share/uv/python"))
    return _unique(dirs)


def _unique(paths: list[str]) -> list[str]:
    seen, unique = set(), []
    for r in paths:
        r = os.path.realpath(r)
        if r not in seen:
            seen.add(r)
            unique.append(r)
    return unique


def _system_version(executable: str) -> tuple[str, str] | None:
    import subprocess

    try:
        out = subprocess.run(
            [executable, "-I", "-S", "-c", "import sys; print('%d.%d.%d' % sys.version_info[:3]); print(sys.prefix)"],
            capture_output=True,
            text=True,
            timeout=20,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = out.stdout.split()
    if out.returncode != 0 or len(lines) != 2 or not _FULL.match(lines[0]):
        return None
    return lines[0], lines[1]


#: Where the versions asked of system interpreters are remembered (under the node state).
PROBES_FILE = "interpreter-probes.json"


def _file_identity(executable: str) -> str | None:
    """What names one interpreter file: its real path, device, inode, size and mtime (a
    replaced or upgraded binary is another identity)."""
    try:
        real = os.path.realpath(executable)
        st = os.stat(real)
    except OSError:
        return None
    return f"{real}:{st.st_dev}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}"


def _remembered_version(executable: str) -> tuple[str, str] | None:
    """`_system_version`, asked once per interpreter file and remembered in the node state
    (`PROBES_FILE`, keyed by `_file_identity`): starting the interpreter costs a `minisandbox
    run` over an environment recorded with /usr's python tens of milliseconds and a
    `subprocess` import when the CLI runs on another interpreter. An entry that does not
    read as a version and an absolute prefix is asked again."""
    import json

    from minisandbox.fsutil import atomic_write_json
    from minisandbox.paths import state_dir

    ident = _file_identity(executable)
    if ident is None:
        return None
    path = state_dir() / PROBES_FILE
    try:
        known = json.loads(path.read_text())
    except (OSError, ValueError):
        known = {}
    if not isinstance(known, dict):
        known = {}
    hit = known.get(ident)
    if (
        isinstance(hit, list)
        and len(hit) == 2
        and all(isinstance(x, str) for x in hit)
        and _FULL.match(hit[0])
        and os.path.isabs(hit[1])
    ):
        return hit[0], hit[1]
    info = _system_version(executable)
    if info is not None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_json(path, {**known, ident: list(info)})
        except OSError:
            pass  # a read-only state dir: asked again next time
    return info


def _running_version(executable: str) -> tuple[str, str] | None:
    """(full version, prefix) of `executable` when it is the very file this process's
    interpreter was started from (same device and inode: a replaced binary is another file),
    without starting it; else None (ask it with `_remembered_version`). A `minisandbox run`
    over an environment built on this machine's system Python then starts no process to
    check it."""
    base = getattr(sys, "_base_executable", None) or sys.executable
    try:
        st, mine = os.stat(executable), os.stat(base)
    except OSError:
        return None
    if (st.st_dev, st.st_ino) != (mine.st_dev, mine.st_ino):
        return None
    return ".".join(str(n) for n in sys.version_info[:3]), sys.base_prefix


def _listdir(path: str, unreadable: list[str]) -> list[str]:
    try:
        return sorted(os.listdir(path))
    except PermissionError:
        unreadable.append(path)
    except OSError:
        pass
    return []


@functools.lru_cache(maxsize=1)
def _scan() -> tuple[tuple[Interpreter, ...], tuple[str, ...]]:
    """(interpreters, unreadable places): uv-managed, then pyenv, then system pythons."""
    found: list[Interpreter] = []
    unreadable: list[str] = []
    for root in uv_python_dirs():
        for name in _listdir(root, unreadable):
            m = _UV_NAME.match(name)
            prefix = os.path.join(root, name)
            if not m or os.path.islink(prefix):  # uv's minor-version links point at the real dirs
                continue
            major, minor, _ = m.group(1).split(".")
            exe = os.path.join(prefix, "bin", f"python{major}.{minor}")
            if os.access(exe, os.X_OK):
                found.append(Interpreter(m.group(1), prefix, exe, UV_MANAGED))
    for root in pyenv_roots():
        versions = os.path.join(root, "versions")
        for name in _listdir(versions, unreadable):
            m = _FULL.match(name)
            if not m:
                continue
            prefix = os.path.join(versions, name)
            exe = os.path.join(prefix, "bin", f"python{m.group(1)}.{m.group(2)}")
            if os.access(exe, os.X_OK):
                found.append(Interpreter(name, prefix, exe, PYENV))
    for bindir in _SYSTEM_BIN_DIRS:
        for name in _listdir(bindir, []):
            if not re.fullmatch(r"python\d+\.\d+", name):
                continue
            exe = os.path.join(bindir, name)
            info = _system_version(exe)
            if info and not any(i.executable == exe for i in found):
                found.append(Interpreter(info[0], info[1], exe, SYSTEM))
    return tuple(found), tuple(unreadable)


def rescan() -> None:
    """Forget the cached scan (after `uv python install` or `pyenv install`)."""
    _scan.cache_clear()


def available() -> list[Interpreter]:
    """Every interpreter found, in discovery order."""
    return list(_scan()[0])


def _not_found(version: str) -> InterpreterNotFound:
    interps, unreadable = _scan()
    have = ", ".join(f"{i.version} ({i.prefix})" for i in interps) or "none"
    extra = f"; unreadable: {', '.join(unreadable)}" if unreadable else ""
    return InterpreterNotFound(
        f"no CPython {version} on this machine (have: {have}{extra}): provide it with `uv python install "
        f"{version}` (preferred: a standalone build shipped as its own layer; UV_PYTHON_INSTALL_MIRROR "
        f"names a local mirror) or `pyenv install {version}`"
    )


def find_interpreter(version: str) -> Interpreter:
    """The interpreter for "3.10" (any patch) or "3.10.13" (exact): uv-managed builds
    first, then pyenv's, then the system's; the newest patch within the first kind that
    has one."""
    version = str(version).strip()
    if not re.fullmatch(r"\d+\.\d+(\.\d+)?", version):
        raise ValueError(f"interpreter version {version!r} must look like 3.10 or 3.10.13")
    want = _vkey(version)
    matches = [i for i in _scan()[0] if _vkey(i.version)[: len(want)] == want]
    if not matches:
        raise _not_found(version)
    kind = min((i.kind for i in matches), key=KINDS.index)
    matches = [i for i in matches if i.kind == kind]
    best = max(_vkey(i.version) for i in matches)
    return next(i for i in matches if _vkey(i.version) == best)


def find_prefix(full_version: str) -> str:
    """Prefix of a local interpreter with exactly this full version."""
    if not _FULL.match(str(full_version)):
        raise ValueError(f"interpreter version {full_version!r} must be a full version like 3.10.13")
    return find_interpreter(full_version).prefix


# -- the interpreter as a layer -----------------------------------------------------------


@functools.lru_cache(maxsize=64)
def _file_sha256(path: str, size: int, mtime_ns: int) -> str:
    import hashlib

    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _digest(path: str) -> str:
    st = os.stat(path)
    return _file_sha256(os.path.realpath(path), st.st_size, st.st_mtime_ns)


def build_files(interp: Interpreter) -> list[str]:
    """The files that make one build of an interpreter: its executable and libpython."""
    files = [interp.executable]
    libdir = os.path.join(interp.prefix, "lib")
    for name in _listdir(libdir, []):
        p = os.path.join(libdir, name)
        if name.startswith("libpython") and ".so" in name and not os.path.islink(p):
            files.append(p)
    return files


def interpreter_key(interp: Interpreter) -> str | None:
    """Content key of the interpreter's layer, `cpython-3.10.13-pyenv-<16 hex>`: the same
    build (version, kind, canonical prefix, executable and libpython bytes) gives the same
    key on every machine, so all environments of that build share one artifact. None for
    a system interpreter (not a layer)."""
    import hashlib

    if interp.kind == SYSTEM:
        return None
    h = hashlib.sha256(f"{interp.kind}\n{interp.version}\n{interp.canonical_prefix}\n".encode())
    for f in build_files(interp):
        h.update(f"{os.path.relpath(f, interp.prefix)}:{_digest(f)}\n".encode())
    short = "uv" if interp.kind == UV_MANAGED else "pyenv"
    return f"cpython-{interp.version}-{short}-{h.hexdigest()[:16]}"


def describe(interp: Interpreter) -> dict[str, str]:
    """What an env manifest records about its base interpreter (`interpreter` field)."""
    out = {"version": interp.version, "prefix": interp.canonical_prefix, "kind": interp.kind}
    key = interpreter_key(interp)
    if key:
        out["key"] = key
    else:
        out["warning"] = SYSTEM_WARNING.format(prefix=interp.prefix, version=interp.version)
    return out


def check_prefix(prefix: str, kind: str) -> str:
    """`prefix` if it is an allowed mount path for an interpreter layer of `kind`, else a
    one-line ValueError (store data is untrusted: this guards every host path made from it)."""
    if not isinstance(prefix, str) or os.path.normpath(prefix) != prefix or not prefix.startswith("/"):
        raise ValueError(f"interpreter prefix {prefix!r} is not a normalised absolute path")
    pattern = PREFIX_PATTERNS.get(kind)
    if pattern is None or not pattern.fullmatch(prefix) or is_system_path(prefix):
        raise ValueError(
            f"interpreter prefix {prefix!r} is not an allowed {kind} interpreter location "
            f"(pyenv: <root>/versions/X.Y.Z; uv-managed: {UV_PREFIX_ROOT}/cpython-X.Y.Z-...)"
        )
    return prefix


def is_system_path(path: str) -> bool:
    """True when `path` lies in a directory every private root already binds."""
    parts = os.path.normpath(path).split("/")
    return len(parts) > 1 and parts[1] in SYSTEM_DIRS


def interpreter_binds(version: str, recorded_prefix: str) -> list[Bind]:
    """Read-only bind(s) that make an interpreter with `version` appear at
    `recorded_prefix` inside a private root (none when it is a system path that exists).
    For environments whose manifest has no interpreter layer (older stores, system
    interpreters)."""
    if is_system_path(recorded_prefix):
        # the recorded system interpreter itself, asked once (a full scan also runs `pyenv root`
        # and every other python: tens of ms on every `minisandbox run`)
        exe = os.path.join(recorded_prefix, "bin", "python" + ".".join(str(version).split(".")[:2]))
        info = _running_version(exe) or (_remembered_version(exe) if os.access(exe, os.X_OK) else None)
        if info and info[0] == version and os.path.realpath(info[1]) == os.path.realpath(recorded_prefix):
            return []
        local = find_prefix(version)
        if os.path.realpath(local) == os.path.realpath(recorded_prefix):
            return []
        raise InterpreterNotFound(
            f"interpreter {version} was recorded at system path {recorded_prefix}, which this machine "
            f"does not provide with that version (found {local}): rebuild the environment here"
        )
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
    m = _UV_NAME.match(name)
    if m:
        return m.group(1)
    for i in _scan()[0]:
        if os.path.realpath(i.prefix) == os.path.realpath(prefix):
            return i.version
    return None
