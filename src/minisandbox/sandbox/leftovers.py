"""Host resources of a controller that died without cleaning up, and their removal.

Why: a sandbox's mounts live in its own mount namespace and die with it, but its cgroups
(`minisandbox.sandbox.limits`) and on-disk `--scratch` upper layers are host objects that
only the controller's `close()` removes. A controller killed with SIGKILL leaves them.

How: before a controller creates its first such resource it writes a record into the node
state directory (`minisandbox.paths.state_dir()`): its pid and kernel start time and the
*parents* it will create resources under (its cgroup directory per hierarchy, each scratch
directory, host mountpoints). Resource names carry the controller's pid
(`minisandbox-<pid>-<hex>` cgroups, `sandbox-<pid>-<id>` scratch dirs), so anything created
under a recorded parent is found even if the controller died between creating it and
saying so. `reap()` - run by the next sandbox start in any process on the node (once per
process) and by `minisandbox cache gc` - removes the resources of every record whose
process is gone (pid not running, or running with another start time), then the record.

A live controller is never touched: liveness is pid + start time; and a record is reaped
under the node-wide lock that registration takes too, so a new controller that got a dead
one's pid cannot register (and create `minisandbox-<pid>-*`) while its leftovers are
being removed; a live controller with the same pid blocks the glob altogether.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import threading
import time
from pathlib import Path

from minisandbox.fsutil import atomic_write_text
from minisandbox.sandbox.limits import CGROUP_PREFIX, cgroup_owner, cgroup_parents, remove_cgroup_tree

SCRATCH_PREFIX = "sandbox-"


@contextlib.contextmanager
def _node_lock(state: Path):
    """The state directory's lock (flock: released by the kernel if its holder dies).
    Standard library only: rootless sandboxes run under interpreters without filelock."""
    fd = os.open(state / "reap.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def proc_start(pid: int) -> str | None:
    """Kernel start time of `pid` (clock ticks since boot), to tell a live process from a
    recycled pid; None if there is no such process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    return data.rsplit(b")", 1)[1].split()[19].decode()


def caller_cgroup_dirs() -> list[str]:
    """This process's cgroup directory in each hierarchy a `LimitGroup` may create its
    cgroups under (minisandbox.sandbox.limits.cgroup_parents)."""
    return list(cgroup_parents().values())


def scratch_name(sandbox_id: str) -> str:
    """The on-disk upper-layer directory name of a sandbox (carries the controller pid)."""
    return f"{SCRATCH_PREFIX}{os.getpid()}-{sandbox_id}"


class Record:
    """One controller's entry in the state directory."""

    def __init__(
        self,
        pid: int,
        start: str,
        cgroup_parents: list[str] | None = None,
        scratch_parents: list[str] | None = None,
        mounts: list[str] | None = None,
    ) -> None:
        self.pid = pid
        self.start = start
        self.cgroup_parents = cgroup_parents if cgroup_parents is not None else []
        self.scratch_parents = scratch_parents if scratch_parents is not None else []
        self.mounts = mounts if mounts is not None else []

    def to_json(self) -> str:
        return json.dumps(self.__dict__, indent=1, sort_keys=True) + "\n"

    @classmethod
    def from_file(cls, path: Path) -> Record | None:
        try:
            data = json.loads(path.read_text())
            rec = cls(
                int(data["pid"]),
                str(data["start"]),
                [str(x) for x in data.get("cgroup_parents", [])],
                [str(x) for x in data.get("scratch_parents", [])],
                [str(x) for x in data.get("mounts", [])],
            )
        except (OSError, ValueError, KeyError, TypeError):
            return None
        return rec

    @property
    def alive(self) -> bool:
        """The recorded controller still runs (a zombie does not: its files are closed, and
        a SIGKILLed controller whose parent died too stays one until init reaps it)."""
        return _alive(self.pid, self.start)


def _alive(pid: int, start: str) -> bool:
    return proc_start(pid) == start and not _zombie(pid)


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] == b"Z"
    except (OSError, IndexError):
        return False


class ReapReport:
    """What `reap` cleaned up (the lists name what was removed) and what it could not."""

    def __init__(self) -> None:
        self.records = 0  # dead controllers cleaned
        self.cgroups: list[str] = []
        self.scratch: list[str] = []
        self.mounts: list[str] = []
        self.errors: list[str] = []


class Tracker:
    """This process's record in a state directory (one per process and directory)."""

    _lock = threading.Lock()
    _instances: dict[tuple[int, str], Tracker] = {}

    def __init__(self, state: Path) -> None:
        self.state = state
        self.dir = state / "controllers"
        self.dir.mkdir(parents=True, exist_ok=True)
        pid = os.getpid()
        self.record = Record(pid, proc_start(pid) or "?")
        self.path = self.dir / f"{pid}-{self.record.start}.json"
        self._mutex = threading.Lock()
        #: nothing this process records is older (write-ahead: the record comes first); 1 s
        #: of slack for the coarse clock of directory times (`release`)
        self.since = time.time() - 1.0

    @classmethod
    def get(cls, state: Path) -> Tracker:
        key = (os.getpid(), str(state))
        with cls._lock:
            tr = cls._instances.get(key)
            if tr is None:
                tr = cls._instances[key] = cls(state)
            return tr

    def add(self, *, cgroup_parents: list[str] = (), scratch_parents: list[str] = (), mounts: list[str] = ()) -> None:
        """Record parents before anything is created under them (write-ahead)."""
        with self._mutex:
            changed = False
            for attr, values in (
                ("cgroup_parents", cgroup_parents),
                ("scratch_parents", scratch_parents),
                ("mounts", mounts),
            ):
                have = getattr(self.record, attr)
                for v in values:
                    v = os.path.abspath(v)
                    if v not in have:
                        have.append(v)
                        changed = True
            if changed:
                with _node_lock(self.state):
                    atomic_write_text(self.path, self.record.to_json())

    def release(self) -> bool:
        """At this process's normal exit: remove its record when nothing it recorded is
        left (no `minisandbox-<pid>-*` cgroup nor `sandbox-<pid>-*` scratch directory under
        its parents, no recorded mount still mounted), so that the next process's `reap`
        has no dead record to read and no parents to scan. Anything left keeps the record
        for `reap`. Only the process the record names does this (a fork inherits exit
        handlers). True when the record was removed."""
        pid = self.record.pid
        if os.getpid() != pid:
            return False
        with self._mutex, _node_lock(self.state):
            # (a directory older than this process's record is another process's of the same
            # pid, left with its own record or none: found on a test machine, and it kept
            # every later controller of that pid from removing its record)
            if any(_newer(_children(p, f"{CGROUP_PREFIX}{pid}-"), self.since) for p in self.record.cgroup_parents):
                return False
            if any(_newer(_children(p, f"{SCRATCH_PREFIX}{pid}-"), self.since) for p in self.record.scratch_parents):
                return False
            if any(_mounted(m) for m in self.record.mounts):
                return False
            self.path.unlink(missing_ok=True)
            self.record.cgroup_parents, self.record.scratch_parents, self.record.mounts = [], [], []
            return True


def _cgroup_procs(path: str) -> list[int]:
    out = []
    for root, _dirs, files in os.walk(path):
        if "cgroup.procs" in files:
            with contextlib.suppress(OSError), open(os.path.join(root, "cgroup.procs")) as fh:
                out += [int(x) for x in fh.read().split()]
    return out


def remove_cgroup(path: str, wait: float = 5.0) -> bool:
    """Kill what is left in a dead controller's cgroup tree (its sandbox inits exit on
    their own once the control socket is gone; this covers a stuck one), then remove the
    tree depth-first."""
    kill = os.path.join(path, "cgroup.kill")
    if os.path.exists(kill):
        with contextlib.suppress(OSError), open(kill, "w") as fh:
            fh.write("1")
    for pid in _cgroup_procs(path):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    return remove_cgroup_tree(path, wait=wait)


def remove_scratch(path: str) -> None:
    """Remove an on-disk upper layer (overlayfs leaves a mode-000 work dir behind)."""
    import shutil

    def onerror(func, p, _exc):  # noqa: ANN001 - shutil's callback signature
        with contextlib.suppress(OSError):
            os.chmod(os.path.dirname(p), 0o700)
            if os.path.isdir(p) and not os.path.islink(p):
                os.chmod(p, 0o700)
                shutil.rmtree(p, onerror=onerror)
            else:
                func(p)

    shutil.rmtree(path, onerror=onerror)


def _mounted(path: str) -> bool:
    with contextlib.suppress(OSError):
        return os.path.ismount(path)
    return False


def _named(name: str) -> tuple[int, str] | None:
    """(pid, start time) from a record's file name, `<pid>-<start>.json` (`Tracker`)."""
    pid, sep, start = name.removesuffix(".json").partition("-")
    return (int(pid), start) if sep and pid.isdigit() and start.isdigit() else None


def _children(parent: str, prefix: str) -> list[Path]:
    """The entries of `parent` whose names start with `prefix`, sorted (a prefix test, not a
    glob: no pattern is compiled for each dead controller's pid)."""
    try:
        with os.scandir(parent) as it:
            return sorted(Path(e.path) for e in it if e.name.startswith(prefix))
    except OSError:
        return []


def _newer(paths: list[Path], since: float) -> list[Path]:
    """The paths changed at or after `since` (a directory made later has a later time)."""
    out = []
    for path in paths:
        with contextlib.suppress(OSError):
            if path.lstat().st_mtime >= since:
                out.append(path)
    return out


def reap(state: Path) -> ReapReport:
    """Remove the leftovers of every dead controller recorded in `state`. A record whose
    file name names a live controller (pid and start time) is not read."""
    report = ReapReport()
    d = state / "controllers"
    if not d.is_dir():
        return report
    with _node_lock(state):
        live_pids: set[int] = set()
        records = []
        for name in sorted(n for n in os.listdir(d) if n.endswith(".json")):
            named = _named(name)
            if named is not None and _alive(*named):
                live_pids.add(named[0])
                continue
            rec = Record.from_file(d / name)
            if rec is not None and rec.alive:
                live_pids.add(rec.pid)
            elif rec is not None:
                records.append((d / name, rec))
        for path, rec in records:
            if proc_start(rec.pid) is not None and rec.pid in live_pids:
                continue  # a live controller has this pid now: its names would match the prefix
            ok = True
            for parent in rec.cgroup_parents:
                for cg in _children(parent, f"{CGROUP_PREFIX}{rec.pid}-"):
                    if cgroup_owner(cg.name) != rec.pid:
                        continue
                    if remove_cgroup(str(cg)):
                        report.cgroups.append(str(cg))
                    else:
                        ok = False
                        report.errors.append(f"cgroup {cg} still busy")
            for parent in rec.scratch_parents:
                for sd in _children(parent, f"{SCRATCH_PREFIX}{rec.pid}-"):
                    remove_scratch(str(sd))
                    if sd.exists():
                        ok = False
                        report.errors.append(f"scratch {sd} not removed")
                    else:
                        report.scratch.append(str(sd))
            for mnt in rec.mounts:
                if _mounted(mnt):
                    from minisandbox.sandbox.init_program import MNT_DETACH, umount2

                    try:
                        umount2(mnt, MNT_DETACH)
                        report.mounts.append(mnt)
                    except OSError as exc:
                        ok = False
                        report.errors.append(f"mount {mnt}: {exc}")
            if ok:
                path.unlink(missing_ok=True)
                report.records += 1
    return report
