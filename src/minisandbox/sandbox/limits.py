"""Per-sandbox resource limits: cgroup v2 where delegated, else cgroup v1, else rlimits.

Why three ways: clusters differ. A cgroup holds *all* processes of a sandbox (memory and
process count are shared by the whole tree, and the OOM killer stays inside it); rlimits
are per process (memory = address space of each process, RLIMIT_NPROC = processes of the
uid in its user namespace). CPU time and file size are always rlimits (no cgroup controller
limits total CPU seconds). `LimitGroup.mode` says which was used, per limit.
"""

from __future__ import annotations

import os
import time
import uuid
from dataclasses import dataclass, field

CGROUP_ROOT = "/sys/fs/cgroup"


@dataclass(frozen=True)
class Limits:
    """Resource limits for one sandbox (None = unlimited)."""

    memory_bytes: int | None = None  # whole sandbox (cgroup) or per process (RLIMIT_AS)
    pids: int | None = None  # processes+threads of the sandbox (cgroup) or of its uid (RLIMIT_NPROC)
    cpu_seconds: int | None = None  # per process (RLIMIT_CPU)
    file_size_bytes: int | None = None  # largest file a process may write (RLIMIT_FSIZE)
    open_files: int | None = None  # per process (RLIMIT_NOFILE)


def _own_cgroup(controller: str | None) -> str | None:
    """This process's cgroup path for a v1 controller, or the v2 path when None."""
    try:
        with open("/proc/self/cgroup") as fh:
            for line in fh:
                _id, ctrls, path = line.rstrip("\n").split(":", 2)
                if controller is None and _id == "0" and ctrls == "":
                    return path
                if controller is not None and controller in ctrls.split(","):
                    return path
    except OSError:
        return None
    return None


def _write(path: str, value: str) -> None:
    with open(path, "w") as fh:
        fh.write(value)


def _v2_mount() -> str | None:
    for cand in (CGROUP_ROOT, CGROUP_ROOT + "/unified"):
        if os.path.exists(cand + "/cgroup.controllers"):
            return cand
    return None


@dataclass
class LimitGroup:
    """The cgroup(s) and rlimits of one sandbox. Create before the sandbox starts, pass
    `procs_files` to the init helper (it joins them before unsharing), `rlimits` to every
    spawn, and `close()` after the sandbox's processes are gone."""

    limits: Limits
    name: str = field(default_factory=lambda: f"minisandbox-{os.getpid()}-{uuid.uuid4().hex[:8]}")
    dirs: list[str] = field(default_factory=list)
    procs_files: list[str] = field(default_factory=list)
    rlimits: dict[str, int] = field(default_factory=dict)
    mode: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        lim = self.limits
        need_cgroup = {"memory": lim.memory_bytes, "pids": lim.pids}
        if any(v is not None for v in need_cgroup.values()):
            if not self._try_v2(need_cgroup):
                self._try_v1(need_cgroup)
        if lim.memory_bytes is not None and "memory" not in self.mode:
            self.rlimits["RLIMIT_AS"] = lim.memory_bytes
            self.mode["memory"] = "rlimit RLIMIT_AS (per process)"
        if lim.pids is not None and "pids" not in self.mode:
            self.rlimits["RLIMIT_NPROC"] = self._nproc_limit(lim.pids)
            self.mode["pids"] = "rlimit RLIMIT_NPROC (per uid in the sandbox's user namespace)"
        if lim.cpu_seconds is not None:
            self.rlimits["RLIMIT_CPU"] = lim.cpu_seconds
            self.mode["cpu_seconds"] = "rlimit RLIMIT_CPU (per process)"
        if lim.file_size_bytes is not None:
            self.rlimits["RLIMIT_FSIZE"] = lim.file_size_bytes
            self.mode["file_size_bytes"] = "rlimit RLIMIT_FSIZE"
        if lim.open_files is not None:
            self.rlimits["RLIMIT_NOFILE"] = lim.open_files
            self.mode["open_files"] = "rlimit RLIMIT_NOFILE"

    @staticmethod
    def _nproc_limit(pids: int) -> int:
        """RLIMIT_NPROC counts every process of the uid in its user namespace: for a
        rootless sandbox that is the sandbox alone; as root (uid 0 shared with the host)
        the host's uid-0 processes are added so the payload still gets `pids` more."""
        if os.geteuid() != 0:
            return pids
        count = 0
        for name in os.listdir("/proc"):
            if name.isdigit():
                try:
                    if os.stat(f"/proc/{name}").st_uid == 0:
                        count += 1
                except OSError:
                    pass
        return count + pids

    def _try_v2(self, need: dict) -> bool:
        mount = _v2_mount()
        own = _own_cgroup(None)
        if mount is None or own is None:
            return False
        parent = os.path.join(mount, own.lstrip("/"))
        try:
            enabled = open(os.path.join(parent, "cgroup.subtree_control")).read().split()
        except OSError:
            return False
        wanted = [c for c, v in need.items() if v is not None]
        if not all(c in enabled for c in wanted) or not os.access(parent, os.W_OK):
            return False
        path = os.path.join(parent, self.name)
        try:
            os.mkdir(path)
            if need["memory"] is not None:
                _write(os.path.join(path, "memory.max"), str(need["memory"]))
                if os.path.exists(os.path.join(path, "memory.swap.max")):
                    _write(os.path.join(path, "memory.swap.max"), "0")
            if need["pids"] is not None:
                _write(os.path.join(path, "pids.max"), str(need["pids"]))
        except OSError:
            self._rmdir(path)
            return False
        self.dirs.append(path)
        self.procs_files.append(os.path.join(path, "cgroup.procs"))
        for c in wanted:
            self.mode[c] = "cgroup v2"
        return True

    def _try_v1(self, need: dict) -> None:
        for ctrl, value in need.items():
            if value is None:
                continue
            own = _own_cgroup(ctrl)
            base = os.path.join(CGROUP_ROOT, ctrl)
            if own is None or not os.path.isdir(base):
                continue
            parent = os.path.join(base, own.lstrip("/"))
            if not os.access(parent, os.W_OK):
                continue
            path = os.path.join(parent, self.name)
            try:
                os.mkdir(path)
                if ctrl == "memory":
                    _write(os.path.join(path, "memory.limit_in_bytes"), str(value))
                    memsw = os.path.join(path, "memory.memsw.limit_in_bytes")
                    if os.path.exists(memsw):
                        _write(memsw, str(value))
                else:
                    _write(os.path.join(path, "pids.max"), str(value))
            except OSError:
                self._rmdir(path)
                continue
            self.dirs.append(path)
            self.procs_files.append(os.path.join(path, "cgroup.procs"))
            self.mode[ctrl] = "cgroup v1"

    @staticmethod
    def _rmdir(path: str, wait: float = 0.0) -> bool:
        deadline = time.monotonic() + wait
        while True:
            try:
                os.rmdir(path)
                return True
            except FileNotFoundError:
                return True
            except OSError:
                if time.monotonic() >= deadline:
                    return False
                time.sleep(0.01)

    def close(self) -> None:
        """Remove the cgroups (their processes must be gone; waits briefly for the kernel
        to finish tearing them down)."""
        left = [d for d in self.dirs if not self._rmdir(d, wait=5.0)]
        self.dirs = left
        if left:
            raise RuntimeError(f"cgroup {left[0]} still busy after the sandbox closed: kill its processes "
                               f"(cat {left[0]}/cgroup.procs) and rmdir it")
