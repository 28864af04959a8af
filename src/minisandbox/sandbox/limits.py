"""Per-sandbox resource limits, on by default: cgroup v2 where delegated, else cgroup v1,
else rlimits.

Why three ways: clusters differ. A cgroup holds *all* processes of a sandbox (memory and
process count are shared by the whole tree, tmpfs pages are charged to it, and the OOM
killer stays inside it); rlimits are per process (memory = address space of each process,
RLIMIT_NPROC = processes of the uid in its user namespace). `LimitGroup.mode` says which was
used, per limit; `minisandbox doctor` says which would be used here.

CPU time is a total per command: no cgroup controller *limits* CPU seconds, but every
cgroup counts them (v2 `cpu.stat` usage_usec, present without any controller enabled; v1
`cpuacct.usage`). Each command runs in a cgroup of its own below the sandbox's leaf
(`CommandCgroup`, joined by the payload before exec), and the controller that waits for it
(minisandbox.sandbox.sandbox) kills the whole cgroup once its total passes the limit. Where
no cgroup can be made (rootless without a delegated cgroup v2), RLIMIT_CPU per process is
all there is: a command that forks N workers can then use N times the limit. RLIMIT_CPU is
set in both cases, as a backstop for processes nobody waits for.

CPU time is also a total per sandbox (`sandbox_cpu_seconds`, default one CPU-hour): the
sandbox's leaf counts every process it ever ran, a command's leftovers (a detached busy
loop that respawns itself) included. The controller checks it while a command runs, and a
single watcher thread per sandbox checks it while anything is left behind (a command's
background processes, a session's shell): a command's leftovers are also still held to the
per-command limit (their cgroup is the command's), and past the sandbox total every process
in the sandbox is killed and it refuses new commands. Without a cgroup the total is not
enforced (`SANDBOX_CPU_UNCOUNTED`, reported by `minisandbox doctor`).

Why a parent and a leaf (docs/sandbox.md, "Limits"): the limits are written to
``minisandbox-<pid>-<hex>/`` and the sandbox's processes live in its child ``sandbox/``;
init (or its starter) joins the leaf before unsharing its cgroup namespace, so from inside, the leaf
is the root of the cgroup tree. Whatever a payload might write there (it has no cgroupfs,
and the seccomp filter stops the nested user namespace it would need to mount one), a
leaf's limit can never exceed its parent's, and the caller's own cgroup is out of sight.
"""

from __future__ import annotations

import os
import re
import time
from collections import namedtuple

from minisandbox.errors import MinisandboxError, SizeError
from minisandbox.fsutil import LazyPattern, human_size, parse_size

CGROUP_ROOT = "/sys/fs/cgroup"

#: Prefix of every cgroup a sandbox creates: ``minisandbox-<controller pid>-<8 hex>``
#: (crash cleanup finds a dead controller's cgroups by it).
CGROUP_PREFIX = "minisandbox-"

#: The child cgroup of a sandbox's limit cgroup that holds its processes.
LEAF = "sandbox"

#: Name of the environment variable that overrides the default limits.
LIMITS_ENV = "MINISANDBOX_LIMITS"


class LimitsError(MinisandboxError, ValueError):
    """A limits setting (MINISANDBOX_LIMITS, a CLI option) could not be understood."""


class CgroupBusy(MinisandboxError, RuntimeError):
    """A sandbox's cgroup still holds processes after the sandbox closed."""


class Limits(
    namedtuple(
        "Limits",
        [
            "memory_bytes",  # whole sandbox (cgroup) or per process (RLIMIT_AS)
            "pids",  # processes+threads of the sandbox (cgroup) or of its uid (RLIMIT_NPROC)
            "cpu_seconds",  # CPU time of all processes of one command (cgroup), else per process
            # CPU time of everything the sandbox ever ran, background processes included (cgroup only)
            "sandbox_cpu_seconds",
            "file_size_bytes",  # largest file a process may write (RLIMIT_FSIZE)
            "open_files",  # per process (RLIMIT_NOFILE)
            "tmpfs_bytes",  # ONE budget: root tree, upper layers, /tmp, /root, /dev/shm
            "output_bytes",  # output kept per command (the rest is read and dropped)
        ],
        defaults=[None] * 8,
    )
):
    """Resource limits for one sandbox (each an int, None = unlimited). `Limits.default()` is
    what every sandbox gets unless told otherwise. A named tuple: no `typing` on a warm
    `run`'s path (docs/design.md, "Record types")."""

    __slots__ = ()

    @classmethod
    def default(cls) -> Limits:
        """`DEFAULT_LIMITS`, changed by $MINISANDBOX_LIMITS (e.g. ``memory=4G,pids=1024,
        cpu=600,tmpfs=2G,output=1M``; ``none`` lifts one limit)."""
        text = os.environ.get(LIMITS_ENV, "").strip()
        return DEFAULT_LIMITS.with_settings(text, where=f"${LIMITS_ENV}") if text else DEFAULT_LIMITS

    @classmethod
    def unlimited(cls) -> Limits:
        return cls()

    def with_settings(self, text: str, *, where: str = "limits") -> Limits:
        """A copy with `name=value` settings applied (names: memory, pids, cpu, file_size,
        open_files, tmpfs, output, or the field names; sizes like 4G; `none` = unlimited)."""
        changes: dict[str, int | None] = {}
        for item in filter(None, (p.strip() for p in text.split(","))):
            name, sep, value = item.partition("=")
            key = _ALIASES.get(name.strip().lower().replace("-", "_"))
            if not sep or key is None:
                raise LimitsError(
                    f"{where}: {item!r} is not a limit setting; use NAME=VALUE with NAME one of "
                    f"{', '.join(sorted(_NAMES))} (e.g. memory=4G,pids=1024,tmpfs=none)"
                )
            changes[key] = parse_limit(key, value, where=f"{where} {name.strip()}")
        return self._replace(**changes)

    def describe(self) -> dict[str, str]:
        """Human-readable values, e.g. {"memory_bytes": "8.0G", "pids": "4096", ...}."""
        out = {}
        for name, value in self._asdict().items():
            out[name] = "unlimited" if value is None else (human_size(value) if name.endswith("_bytes") else str(value))
        return out


def parse_limit(name: str, value: str | int | None, *, where: str = "limit") -> int | None:
    """One limit value: a size (for *_bytes), a count, or none/unlimited/0 -> None."""
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    else:
        text = str(value).strip().lower()
        if text in ("none", "unlimited", "off", "max", ""):
            return None
        try:
            number = parse_size(text) if name.endswith("_bytes") else int(text)
        except (SizeError, ValueError):
            kind = "a size like 4G" if name.endswith("_bytes") else "a whole number"
            raise LimitsError(f"{where}: {value!r} is not {kind} (or 'none')") from None
    if number < 0:
        raise LimitsError(f"{where}: {value!r} must not be negative")
    return number or None


_ALIASES = {
    "memory": "memory_bytes",
    "mem": "memory_bytes",
    "pids": "pids",
    "cpu": "cpu_seconds",
    "sandbox_cpu": "sandbox_cpu_seconds",
    "cpu_total": "sandbox_cpu_seconds",
    "cpu_seconds": "cpu_seconds",
    "file_size": "file_size_bytes",
    "open_files": "open_files",
    "nofile": "open_files",
    "tmpfs": "tmpfs_bytes",
    "output": "output_bytes",
    "max_output": "output_bytes",
}
_ALIASES.update({name: name for name in Limits._fields})
_NAMES = {"memory", "pids", "cpu", "sandbox_cpu", "file_size", "open_files", "tmpfs", "output"}

#: The defaults every sandbox (run, shell, sandbox-exec, eval, validation) gets: enough for
#: real test suites, small enough that one runaway sandbox cannot take a node down.
DEFAULT_LIMITS = Limits(
    memory_bytes=8 << 30,
    pids=4096,
    cpu_seconds=3600,
    sandbox_cpu_seconds=3600,
    tmpfs_bytes=4 << 30,
    output_bytes=8 << 20,
)


def _own_cgroup(controller: str | None, lines: list[str] | None = None) -> str | None:
    """This process's cgroup path for a v1 controller, or the v2 path when None (from
    `lines` of /proc/self/cgroup when given)."""
    if lines is None:
        lines = _own_cgroup_lines()
    for line in lines:
        _id, ctrls, path = line.rstrip("\n").split(":", 2)
        if controller is None and _id == "0" and ctrls == "":
            return path
        if controller is not None and controller in ctrls.split(","):
            return path
    return None


def _own_cgroup_lines() -> list[str]:
    try:
        with open("/proc/self/cgroup") as fh:
            return fh.readlines()
    except OSError:
        return []


def _write(path: str, value: str) -> None:
    with open(path, "w") as fh:
        fh.write(value)


def _v2_mount() -> str | None:
    for cand in (CGROUP_ROOT, CGROUP_ROOT + "/unified"):
        if os.path.exists(cand + "/cgroup.controllers"):
            return cand
    return None


def cgroup_name(pid: int | None = None) -> str:
    """A new sandbox cgroup name: ``minisandbox-<controller pid>-<8 hex>``."""
    return f"{CGROUP_PREFIX}{os.getpid() if pid is None else pid}-{os.urandom(4).hex()}"


_NAME = LazyPattern(rf"{re.escape(CGROUP_PREFIX)}(\d+)-[0-9a-f]{{8}}")


def cgroup_owner(name: str) -> int | None:
    """The controller pid encoded in a sandbox cgroup name, None for other names."""
    m = _NAME.fullmatch(name)
    return int(m.group(1)) if m else None


def cgroup_parents() -> dict[str, str]:
    """Where this process creates sandbox cgroups: {"v2" | "memory" | "pids" | "cpuacct":
    directory} (the caller's own cgroup in each hierarchy that exists; writability not
    checked)."""
    out = {}
    mount, v1 = _hierarchies()
    lines = _own_cgroup_lines()  # read once: a sandbox creation asks several times
    own = _own_cgroup(None, lines)
    if mount and own is not None:
        out["v2"] = os.path.join(mount, own.lstrip("/"))
    for ctrl in v1:
        own = _own_cgroup(ctrl, lines)
        if own is not None:
            out[ctrl] = os.path.join(CGROUP_ROOT, ctrl, own.lstrip("/"))
    return out


#: (the v2 mount or None, the v1 controllers of "memory", "pids", "cpuacct" mounted), looked
#: up once per process: every sandbox creation asks (five stats), and a host's cgroup mounts
#: do not change under a running controller.
_HIERARCHIES: tuple[str | None, tuple[str, ...]] | None = None


def _hierarchies() -> tuple[str | None, tuple[str, ...]]:
    global _HIERARCHIES
    if _HIERARCHIES is None:
        v1 = tuple(c for c in ("memory", "pids", "cpuacct") if os.path.isdir(os.path.join(CGROUP_ROOT, c)))
        _HIERARCHIES = (_v2_mount(), v1)
    return _HIERARCHIES


def join_file(cgroup: str, version: str) -> str:
    """The file a process writes "0" to in order to join `cgroup` (a directory of a
    `version` hierarchy, "v1" or "v2"): `cgroup.procs` on v2, `tasks` on v1.

    Why not `cgroup.procs` everywhere: writing it takes the kernel's global threadgroup
    lock for writing, and the first writer after a quiet spell waits for an RCU grace
    period (measured on this project's development host, kernel 6.18: 5.7 ms median per
    move into three cgroups, against 0.3 ms through v1 `tasks`; a sandbox joins its
    cgroups once and every command once, so two such waits per `minisandbox run`). A
    write of "0" to v1 `tasks` moves only the writing thread and skips that lock. Every
    writer here is single-threaded, so the whole process moves: a sandbox's init right
    after its fork, a command's child before its exec, the command spawner (which starts
    no thread; a command it starts is born in the cgroup it is in at that moment). v2 has
    no such file (`cgroup.threads` refuses moves between domain cgroups)."""
    return os.path.join(cgroup, "tasks" if version == "v1" else "cgroup.procs")


def v2_delegated(parent: str, controllers: tuple[str, ...] = ("memory", "pids")) -> bool:
    """True when `parent` (a v2 cgroup) is writable by us and hands `controllers` down."""
    try:
        with open(os.path.join(parent, "cgroup.subtree_control")) as fh:
            enabled = fh.read().split()
    except OSError:
        return False
    return all(c in enabled for c in controllers) and os.access(parent, os.W_OK)


def v2_writable(parent: str) -> bool:
    """True when we may create a v2 cgroup below `parent` and move processes into it (no
    controller needed: every v2 cgroup counts CPU time in `cpu.stat`)."""
    return os.access(parent, os.W_OK) and os.access(os.path.join(parent, "cgroup.procs"), os.W_OK)


def remove_cgroup_tree(path: str, wait: float = 0.0, expect: tuple[str, ...] = ()) -> bool:
    """rmdir `path` and every cgroup below it, deepest first (a payload may have created
    children of its leaf). False if one stays busy for `wait` seconds. `expect`: the
    children `path` has when nothing else was made below it (a sandbox's leaf): they and
    `path` are removed first without listing anything, the walk is for the other cases
    (a cgroup directory holds dozens of control files: walking three of them was about
    a sixth of a sandbox's close)."""
    if _remove_expected(path, expect):
        return True
    deadline = time.monotonic() + wait
    while True:
        try:
            for dirpath, dirnames, _files in os.walk(path, topdown=False):
                for d in dirnames:
                    _rmdir(os.path.join(dirpath, d))
            os.rmdir(path)
            return True
        except FileNotFoundError:
            return True
        except OSError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.01)


def _remove_expected(path: str, children: tuple[str, ...]) -> bool:
    """rmdir `children` of `path`, then `path`; False (some may be gone) when anything else
    is in the way."""
    try:
        for child in children:
            _rmdir(os.path.join(path, child))
        _rmdir(path)
    except OSError:
        return False
    return True


def _rmdir(path: str) -> None:
    """rmdir `path` unless it is gone already (a payload or the kernel may have removed it)."""
    try:
        os.rmdir(path)
    except FileNotFoundError:
        pass


class LimitGroup:
    """The cgroups and rlimits of one sandbox. Create before the sandbox starts, pass
    `procs_files` (the leaves) to the init helper (it joins them before unsharing), `rlimits`
    to every spawn, and `close()` after the sandbox's processes are gone."""

    def __init__(self, limits: Limits, name: str | None = None) -> None:
        self.limits = limits
        self.name = name if name is not None else cgroup_name()
        self.dirs: list[str] = []  # limit (parent) cgroups we created
        self.procs_files: list[str] = []  # the leaves' join files (`join_file`)
        self.rlimits: dict[str, int] = {}
        self.mode: dict[str, str] = {}
        #: (leaf directory, "v2" | "v1") where each command gets a CPU-accounting cgroup, or None
        self.cpu_leaf: tuple[str, str] | None = None
        lim = limits
        need = {"memory": lim.memory_bytes, "pids": lim.pids}
        # A leaf is made even without memory/pids limits, so the sandbox's cgroup namespace
        # is never rooted at the caller's own cgroup.
        if not self._try_v2(need):
            self._try_v1(need)
        if lim.cpu_seconds is not None or lim.sandbox_cpu_seconds is not None:
            self._try_cpu_accounting()
        if lim.memory_bytes is not None and "memory" not in self.mode:
            self.rlimits["RLIMIT_AS"] = lim.memory_bytes
            self.mode["memory"] = "rlimit RLIMIT_AS (per process; tmpfs is bounded by the tmpfs budget instead)"
        if lim.pids is not None and "pids" not in self.mode:
            self.rlimits["RLIMIT_NPROC"] = self._nproc_limit(lim.pids)
            self.mode["pids"] = "rlimit RLIMIT_NPROC (per uid in the sandbox's user namespace)"
        if lim.cpu_seconds is not None:
            self.rlimits["RLIMIT_CPU"] = lim.cpu_seconds  # backstop for processes nobody waits for
            if self.cpu_leaf is not None:
                stat = "cpu.stat usage_usec" if self.cpu_leaf[1] == "v2" else "cpuacct.usage"
                self.mode["cpu_seconds"] = (
                    f"cgroup {self.cpu_leaf[1]} {stat} (total of each command's "
                    "processes; RLIMIT_CPU per process as a backstop)"
                )
            else:
                self.mode["cpu_seconds"] = CPU_RLIMIT_MODE
        if lim.sandbox_cpu_seconds is not None:
            if self.cpu_leaf is not None:
                stat = "cpu.stat usage_usec" if self.cpu_leaf[1] == "v2" else "cpuacct.usage"
                self.mode["sandbox_cpu_seconds"] = (
                    f"cgroup {self.cpu_leaf[1]} {stat} of the whole sandbox (background processes included)"
                )
            else:
                self.mode["sandbox_cpu_seconds"] = SANDBOX_CPU_UNCOUNTED
        if lim.file_size_bytes is not None:
            self.rlimits["RLIMIT_FSIZE"] = lim.file_size_bytes
            self.mode["file_size_bytes"] = "rlimit RLIMIT_FSIZE"
        if lim.open_files is not None:
            self.rlimits["RLIMIT_NOFILE"] = lim.open_files
            self.mode["open_files"] = "rlimit RLIMIT_NOFILE"
        if lim.tmpfs_bytes is not None:
            self.mode["tmpfs_bytes"] = "tmpfs size (one budget for every writable tmpfs)"
        if lim.output_bytes is not None:
            self.mode["output_bytes"] = "kept per command by the controller"

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

    def _make(self, parent: str, settings: dict[str, str], version: str) -> bool:
        """Create `parent/<name>` with `settings` written and its leaf (in a `version`
        hierarchy, "v1" or "v2"); False (nothing left behind) when the kernel or
        permissions say no."""
        path = os.path.join(parent, self.name)
        try:
            os.mkdir(path)
        except OSError:
            return False
        try:
            for fname, value in settings.items():
                _write(os.path.join(path, fname), value)
            os.mkdir(os.path.join(path, LEAF))
        except OSError:
            remove_cgroup_tree(path)
            return False
        self.dirs.append(path)
        self.procs_files.append(join_file(os.path.join(path, LEAF), version))
        return True

    def _try_cpu_accounting(self) -> None:
        """Pick the hierarchy that counts each command's CPU time: the sandbox's v2 cgroup
        when it has one; else v1 `cpuacct` when it is writable (a hybrid or v1 host, where
        the sandbox's other cgroups are v1 too: joining v1 cgroups costs no RCU grace
        period, see `join_file`, where one v2 join would cost one per sandbox and per
        command); else a v2 cgroup of its own when the caller's v2 cgroup is writable (a
        delegated subtree without memory/pids). None of them: RLIMIT_CPU per process
        only."""
        parents = cgroup_parents()
        v2 = parents.get("v2")
        if v2 is not None and os.path.join(v2, self.name) in self.dirs:
            self.cpu_leaf = (os.path.join(v2, self.name, LEAF), "v2")
            return
        acct = parents.get("cpuacct")
        if acct is not None and os.access(acct, os.W_OK) and self._make(acct, {}, "v1"):
            self.cpu_leaf = (os.path.join(acct, self.name, LEAF), "v1")
            return
        if v2 is not None and v2_writable(v2) and self._make(v2, {}, "v2"):
            self.cpu_leaf = (os.path.join(v2, self.name, LEAF), "v2")

    def events(self) -> dict[str, int]:
        """The sandbox cgroups' limit events so far: {"oom_kill": processes the OOM killer
        ended, "pids_max": forks refused at the process limit} (from memory.events /
        memory.oom_control and pids.events; missing counters are left out)."""
        out: dict[str, int] = {}
        for d in self.dirs:
            for fname, key, name in (
                ("memory.events", "oom_kill", "oom_kill"),
                ("memory.oom_control", "oom_kill", "oom_kill"),
                ("pids.events", "max", "pids_max"),
            ):
                seen = 0  # v2 counts an event in every ancestor, v1 only where it happened (the leaf)
                for where in (d, os.path.join(d, LEAF)):
                    try:
                        with open(os.path.join(where, fname)) as fh:
                            for line in fh:
                                k, _, v = line.partition(" ")
                                if k == key:
                                    seen = max(seen, int(v))
                    except (OSError, ValueError):
                        pass
                if seen:
                    out[name] = out.get(name, 0) + seen
        return out

    def sandbox_usage(self) -> float | None:
        """CPU seconds used so far by every process the sandbox ever ran (None without a
        cgroup that counts them)."""
        if self.cpu_leaf is None:
            return None
        return CommandCgroup(*self.cpu_leaf).usage()

    def command_cgroup(self) -> CommandCgroup | None:
        """A new cgroup for one command below the CPU-accounting leaf (None without one)."""
        if self.cpu_leaf is None:
            return None
        leaf, version = self.cpu_leaf
        path = os.path.join(leaf, f"cmd-{os.urandom(4).hex()}")
        try:
            os.mkdir(path)
        except OSError:
            return None
        return CommandCgroup(path, version)

    def _try_v2(self, need: dict) -> bool:
        parent = cgroup_parents().get("v2")
        if parent is None or not v2_delegated(parent):
            return False
        settings = {}
        if need["memory"] is not None:
            settings["memory.max"] = str(need["memory"])
            if os.path.exists(os.path.join(parent, "memory.swap.max")):
                settings["memory.swap.max"] = "0"
        if need["pids"] is not None:
            settings["pids.max"] = str(need["pids"])
        if not self._make(parent, settings, "v2"):
            return False
        for c, v in need.items():
            if v is not None:
                self.mode[c] = "cgroup v2"
        return True

    def _try_v1(self, need: dict) -> None:
        parents = cgroup_parents()
        for ctrl, value in need.items():
            parent = parents.get(ctrl)
            if parent is None or not os.access(parent, os.W_OK):
                continue
            settings = {}
            if value is not None and ctrl == "memory":
                settings["memory.limit_in_bytes"] = str(value)
                if os.path.exists(os.path.join(parent, "memory.memsw.limit_in_bytes")):
                    settings["memory.memsw.limit_in_bytes"] = str(value)
            elif value is not None:
                settings["pids.max"] = str(value)
            if self._make(parent, settings, "v1") and value is not None:
                self.mode[ctrl] = "cgroup v1"

    def close(self) -> None:
        """Remove the cgroups, leaves, command cgroups and anything a payload created below them (their
        processes must be gone; waits briefly for the kernel to finish tearing them down)."""
        left = [d for d in self.dirs if not remove_cgroup_tree(d, wait=5.0, expect=(LEAF,))]
        self.dirs = left
        if left:
            raise CgroupBusy(
                f"cgroup {left[0]} still busy after the sandbox closed: kill its processes "
                f"(cat {left[0]}/{LEAF}/cgroup.procs) and rmdir it"
            )


#: `LimitGroup.mode["cpu_seconds"]` where no cgroup counts a command's CPU time.
CPU_RLIMIT_MODE = "rlimit RLIMIT_CPU (per process: a command with N busy processes can use N x the limit)"

#: `LimitGroup.mode["sandbox_cpu_seconds"]` where no cgroup counts the sandbox's CPU time.
SANDBOX_CPU_UNCOUNTED = (
    "not enforced: no cgroup counts the sandbox's CPU time (rootless without a delegated "
    "cgroup v2); each process is held to RLIMIT_CPU (the per-command limit) instead, so "
    "background processes can together use more"
)


def _read_raw(path: str) -> bytes:
    """The first 4 KiB of a cgroup file (open, read, close: nothing else)."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        return os.read(fd, 4096)
    finally:
        os.close(fd)


class CommandCgroup(
    namedtuple(
        "CommandCgroup",
        [
            "path",
            "version",  # "v2" (cpu.stat usage_usec) | "v1" (cpuacct.usage, nanoseconds)
        ],
    )
):
    """One command's own cgroup, below its sandbox's leaf: the command's process joins it
    before exec (through an fd of its join file, see `open_procs`), so every process
    it starts is counted in it, and killed with it. Nothing inside can move out: no
    cgroup filesystem is mounted in a sandbox, and the seccomp filter stops the nested
    user namespace that mounting one would need."""

    __slots__ = ()

    def open_procs(self) -> int:
        """A write fd of the cgroup's join file (`join_file`) for the command to join with
        (it writes "0")."""
        return os.open(join_file(self.path, self.version), os.O_WRONLY | os.O_CLOEXEC)

    def usage(self) -> float | None:
        """CPU seconds used by every process that ever ran in this cgroup (None when the
        cgroup is gone)."""
        try:  # (read raw: every command reads it at its end, open() costs three times the syscalls)
            if self.version == "v1":
                return int(_read_raw(self.path + "/cpuacct.usage")) / 1e9
            for line in _read_raw(self.path + "/cpu.stat").splitlines():
                key, _, value = line.partition(b" ")
                if key == b"usage_usec":
                    return int(value) / 1e6
        except (OSError, ValueError):
            return None
        return None

    def pids(self) -> list[int]:
        """Host pids of the processes in this cgroup and below it."""
        out = []
        for dirpath, _dirs, files in os.walk(self.path):
            if "cgroup.procs" in files:
                try:
                    with open(os.path.join(dirpath, "cgroup.procs")) as fh:
                        out += [int(x) for x in fh.read().split()]
                except (OSError, ValueError):
                    pass
        return out

    def kill(self, *, spare: int | None = None, wait: float = 5.0) -> bool:
        """SIGKILL every process in the cgroup (`spare`: a host pid to leave alive, e.g. a
        session's shell); repeated until it is empty, since a fork may race the signal.
        True when nothing but `spare` is left."""
        deadline = time.monotonic() + wait
        kill_file = os.path.join(self.path, "cgroup.kill")
        while True:
            left = [p for p in self.pids() if p != spare]
            if not left:
                return True
            if spare is None and self.version == "v2" and os.path.exists(kill_file):
                try:
                    _write(kill_file, "1")
                except OSError:
                    pass
            for pid in left:
                try:
                    os.kill(pid, 9)
                except (ProcessLookupError, PermissionError):
                    pass
            if time.monotonic() >= deadline:
                return not [p for p in self.pids() if p != spare]
            time.sleep(0.01)

    def remove(self) -> bool:
        """rmdir the cgroup once empty; False while processes (background jobs) remain:
        `LimitGroup.close` removes it with the rest of the tree."""
        return remove_cgroup_tree(self.path)


def sandbox_pid(host_pid: int) -> int | None:
    """The pid a host process has in the sandbox's pid namespace (second NSpid field as
    seen from here), None if gone."""
    try:
        with open(f"/proc/{host_pid}/status") as fh:
            for line in fh:
                if line.startswith("NSpid:"):
                    parts = line.split()[1:]
                    return int(parts[1]) if len(parts) > 1 else int(parts[0])
    except (OSError, ValueError):
        return None
    return None
