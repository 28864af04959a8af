"""Debian packages an environment needs on the host (spec field `system_packages`).

Why a check and not an install: builds and sandboxes run unprivileged on shared nodes and
see the host's /usr read-only, so a missing package cannot be fixed from inside; the one
useful thing is to stop early with a line that names what to install, at build time and
again on each node that restores the environment.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from minisandbox.errors import MinisandboxError
from minisandbox.fsutil import LazyPattern

#: dpkg's database of installed packages (`installed_state`).
DPKG_STATUS = "/var/lib/dpkg/status"

_NAME = LazyPattern(r"^[a-z0-9][a-z0-9+.-]*(?::[a-z0-9-]+)?$")


class MissingSystemPackages(MinisandboxError):
    """Some Debian packages a spec declares are not installed on this host."""


def validate_names(names: Iterable[str], where: str) -> list[str]:
    """Debian package names (`name` or `name:arch`), else a one-line ValueError."""
    out = []
    for name in names:
        if not isinstance(name, str) or not _NAME.match(name):
            raise ValueError(f"{where}: system package {name!r} is not a Debian package name")
        out.append(name)
    return out


def missing(names: Iterable[str]) -> list[str]:
    """The names among `names` that dpkg does not report as installed ("ii")."""
    import subprocess

    wanted = list(dict.fromkeys(names))
    if not wanted:
        return []
    import shutil

    exe = shutil.which("dpkg-query")
    if exe is None:
        raise MissingSystemPackages(
            f"cannot check system packages {', '.join(wanted)}: dpkg-query not found (not a Debian host); "
            "install them with the host's package manager and run on a Debian/Ubuntu node"
        )
    proc = subprocess.run([exe, "-W", "-f=${Package}\t${db:Status-Abbrev}\n", *wanted], capture_output=True, text=True)
    installed = {
        line.split("\t", 1)[0]
        for line in proc.stdout.splitlines()
        if "\t" in line and line.split("\t", 1)[1].startswith("ii")
    }
    lack = [n for n in wanted if n.split(":", 1)[0] not in installed]
    if lack:
        provided = _provided(exe)
        lack = [n for n in lack if n.split(":", 1)[0] not in provided]
    return lack


def _provided(exe: str) -> set[str]:
    """Virtual package names that installed packages provide. Specs copy apt-get lines, and
    apt installs a virtual name through a package that provides it (`libxslt-dev` is
    `libxslt1-dev` on Debian 12), after which dpkg knows no package of that name."""
    import subprocess

    proc = subprocess.run([exe, "-W", "-f=${db:Status-Abbrev}\t${Provides}\n"], capture_output=True, text=True)
    names: set[str] = set()
    for line in proc.stdout.splitlines():
        status, _, provides = line.partition("\t")
        if status.startswith("ii"):
            names.update(p.split()[0].split(":", 1)[0] for p in provides.split(",") if p.strip())
    return names


def installed_state() -> bytes | None:
    """What changes whenever dpkg installs or removes a package: the identity of its status
    database (dpkg replaces the file on every change: another inode, size or mtime). None
    where there is none (not a Debian host). A check that passed is valid while this stays."""
    try:
        st = os.stat(DPKG_STATUS)
    except OSError:
        return None
    return f"{st.st_dev}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}".encode()


def require(names: Iterable[str], what: str) -> None:
    """Raise `MissingSystemPackages` naming the missing ones (one line)."""
    lack = missing(names)
    if lack:
        raise MissingSystemPackages(
            f"{what} needs Debian packages that are not installed on this host: {', '.join(lack)}; "
            f"install them with `apt-get install {' '.join(lack)}`"
        )
