"""Host shared libraries an environment loads from outside its layers (found with `ldd`,
or the dynamic loader's own trace, which is what ldd runs).

Why: an environment's layers carry the venv and its base interpreter, but the interpreter
and the venv's extension modules still load some libraries from the host's `/usr` (libc,
libssl, libsqlite3, libffi, ...), which every sandbox binds from the node. A node that
lacks one would fail deep inside a test run with an ImportError; recording them at build
time lets a node say, before it starts anything, which library is missing.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from minisandbox.errors import MinisandboxError
from minisandbox.fsutil import LazyPattern

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a warm `run` does not)
if TYPE_CHECKING:
    from typing import Any

#: A soname as ldd prints it: libssl.so.3, ld-linux-x86-64.so.2, libc.so.6
SONAME = LazyPattern(r"[A-Za-z0-9_][A-Za-z0-9._+-]*\.so(\.[0-9]+)*")
_LDD_LINE = LazyPattern(r"^\s*(\S+)\s+=>\s+(\S+)\s+\(0x[0-9a-f]+\)\s*$")
_LDD_DIRECT = LazyPattern(r"^\s*(/\S+)\s+\(0x[0-9a-f]+\)\s*$")  # the dynamic loader itself
_BATCH = 200


class MissingHostLibrary(MinisandboxError, RuntimeError):
    """An environment needs a host library this node does not have."""


def is_elf(path: Path) -> bool:
    try:
        with open(path, "rb") as fh:
            return fh.read(4) == b"\x7fELF"
    except OSError:
        return False


def shared_objects(root: Path) -> list[Path]:
    """ELF shared objects under `root` (extension modules, bundled libraries), sorted."""
    out = []
    for dirpath, _dirs, names in os.walk(root):
        for name in names:
            if ".so" not in name:
                continue
            p = Path(dirpath) / name
            if not p.is_symlink() and p.is_file() and is_elf(p):
                out.append(p)
    return sorted(out)


def _inside(path: str, roots: Iterable[str]) -> bool:
    real = os.path.realpath(path)
    for r in roots:
        r = os.path.realpath(r)
        if real == r or real.startswith(r.rstrip("/") + "/"):
            return True
    return False


#: The loader's trace of each file, as ldd gives it for a file the native loader verifies
#: (ldd's own environment for the trace), framed by the file's index and the trace's exit
#: status. ldd probes every loader of its list and runs each step in subshells, ~5.7 ms of
#: CPU per file against ~1 ms here: ~4 CPU s of the bundled main job's ~720 files.
_TRACE_LOOP = (
    'rtld=$1; shift; i=0; for f do echo "@@ $i"; i=$((i + 1)); '
    'LD_TRACE_LOADED_OBJECTS=1 LD_WARN= LD_BIND_NOW= LD_LIBRARY_VERSION= LD_VERBOSE= "$rtld" "$f" 2>&1; '
    'echo "@@rc $?"; done'
)
_TOOL_ENV = {"PATH": "/usr/bin:/bin", "LC_ALL": "C"}


def _native_loader(ldd: str) -> str | None:
    """The dynamic loader ldd traces this machine's own programs with (`/bin/sh`'s), or
    None when ldd names none."""
    import subprocess

    proc = subprocess.run([ldd, "/bin/sh"], capture_output=True, text=True, timeout=60, env=_TOOL_ENV)
    for line in proc.stdout.splitlines():
        m = _LDD_DIRECT.match(line)
        if m and os.access(m.group(1), os.X_OK):
            return m.group(1)
    return None


def _traces(ldd: str, files: list[str]) -> dict[str, list[str]]:
    """{file: the lines ldd prints for it}. Files the native loader traces (exit 0) are
    traced by it directly, several per shell; the others (another class of ELF, not a
    dynamic object) go through ldd itself, which tries every loader it knows."""
    import subprocess

    out: dict[str, list[str]] = {}
    rtld = _native_loader(ldd)
    rest = list(files) if rtld is None else []
    for i in range(0, len(files) if rtld else 0, _BATCH):
        batch = files[i : i + _BATCH]
        proc = subprocess.run(
            ["/bin/sh", "-c", _TRACE_LOOP, "sh", rtld, *batch],
            capture_output=True,
            text=True,
            timeout=300,
            env=_TOOL_ENV,
        )
        current: int | None = None
        lines: list[str] = []
        for line in proc.stdout.splitlines():
            if line.startswith("@@ ") and line[3:].isdigit():
                current, lines = int(line[3:]), []
            elif line.startswith("@@rc ") and current is not None and current < len(batch):
                if line == "@@rc 0":
                    out[batch[current]] = lines
                current = None
            elif current is not None:
                lines.append(line)
        rest += [f for f in batch if f not in out]  # a trace that failed, or a shell that stopped early
    for i in range(0, len(rest), _BATCH):
        batch = rest[i : i + _BATCH]
        proc = subprocess.run([ldd, *batch], capture_output=True, text=True, timeout=300, env=_TOOL_ENV)
        current = batch[0]
        for line in proc.stdout.splitlines():
            if len(batch) > 1 and line.endswith(":") and line[:-1] in batch:
                current = line[:-1]
                continue
            out.setdefault(current, []).append(line)
    return out


def ldd_host_libs(files: Iterable[Path], own_roots: Iterable[Path]) -> list[dict[str, Any]]:
    """Libraries `files` load from outside `own_roots` (the layers), as
    [{"name": soname, "path": resolved host path, "used_by": file name}], sorted by name
    (`used_by`: the first file that needs it, for the error message). Libraries ldd cannot
    find at build time are left out (the build itself would have failed on them)."""
    import shutil

    ldd = shutil.which("ldd")
    if ldd is None:
        raise MissingHostLibrary("ldd not found on PATH: install libc-bin (apt-get install libc-bin)")
    roots = [str(r) for r in own_roots]
    files = [str(f) for f in files]
    traces = _traces(ldd, files)
    found: dict[str, tuple[str, str]] = {}
    for current in files:
        for line in traces.get(current, ()):
            m = _LDD_LINE.match(line)
            if m:
                name, path = m.group(1), m.group(2)
            else:
                m = _LDD_DIRECT.match(line)
                if not m:
                    continue
                path = m.group(1)
                name = os.path.basename(path)
            if not SONAME.fullmatch(name) or not path.startswith("/") or _inside(path, roots):
                continue
            found.setdefault(name, (os.path.normpath(path), os.path.basename(current)))
    return [{"name": n, "path": found[n][0], "used_by": found[n][1]} for n in sorted(found)]


def add_packages(libs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Name the Debian package of each library (`dpkg -S`), where dpkg knows it: the hint a
    node's one-line error gives. Best effort: no dpkg, no package names."""
    import shutil
    import subprocess

    dpkg = shutil.which("dpkg")
    if not dpkg or not libs:
        return libs
    owners: dict[str, str] = {}
    paths = sorted({lib["path"] for lib in libs} | {os.path.realpath(lib["path"]) for lib in libs})
    # dpkg records /lib/... or /usr/lib/... (merged /usr): ask for both spellings
    alt = [p[4:] if p.startswith("/usr/lib/") else "/usr" + p for p in paths if p.startswith(("/lib/", "/usr/lib/"))]
    proc = subprocess.run(
        [dpkg, "-S", *paths, *alt],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin:/usr/sbin:/sbin", "LC_ALL": "C"},
    )
    for line in proc.stdout.splitlines():
        pkg, _, path = line.partition(": ")
        if pkg and path and "," not in pkg:
            owners[os.path.basename(path.strip())] = pkg.split(":")[0]
    for lib in libs:
        pkg = owners.get(os.path.basename(lib["path"])) or owners.get(os.path.basename(os.path.realpath(lib["path"])))
        if pkg:
            lib["package"] = pkg
    return libs


def _ldconfig_names() -> set[str]:
    import shutil
    import subprocess

    exe = shutil.which("ldconfig") or ("/sbin/ldconfig" if os.path.exists("/sbin/ldconfig") else None)
    if exe is None:
        return set()
    try:
        out = subprocess.run([exe, "-p"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return set()
    return {line.split()[0] for line in out.splitlines()[1:] if line.strip()}


def check_host_libs(libs: Any, what: str) -> None:
    """Raise a one-line MissingHostLibrary naming the first library of `libs` (a manifest's
    `host_libs`) this node lacks: not at its recorded path and not known to ldconfig."""
    if not libs:
        return
    if not isinstance(libs, list):
        raise MissingHostLibrary(f"{what}: host_libs must be a list, not {type(libs).__name__}: re-publish it")
    known: set[str] | None = None
    missing = []
    for i, lib in enumerate(libs):
        name = lib.get("name") if isinstance(lib, dict) else None
        path = lib.get("path") if isinstance(lib, dict) else None
        if (
            not isinstance(name, str)
            or not SONAME.fullmatch(name)
            or not isinstance(path, str)
            or not path.startswith("/")
            or os.path.normpath(path) != path
        ):
            raise MissingHostLibrary(
                f"{what}: host_libs[{i}] is not {{name: soname, path: absolute path}}: re-publish it"
            )
        if os.path.exists(path):
            continue
        if known is None:
            known = _ldconfig_names()
        if name not in known:
            missing.append(lib)
    if missing:
        lib = missing[0]
        pkg = f", Debian package {lib['package']}" if isinstance(lib.get("package"), str) else ""
        user = f" for {lib['used_by']}" if isinstance(lib.get("used_by"), str) else ""
        more = (
            f" (and {len(missing) - 1} more: {', '.join(m['name'] for m in missing[1:4])})" if len(missing) > 1 else ""
        )
        raise MissingHostLibrary(
            f"{what} needs host library {lib['name']}{user} (built against {lib['path']}{pkg}), which this node "
            f"lacks{more}: install it on the node, or rebuild with a uv-managed interpreter"
        )
