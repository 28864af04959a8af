"""A task sandbox built from restored layers: namespaces, overlays, limits, sessions, diff.

What it is: new mount, pid, ipc, uts and (by default) network namespaces; a
private tmpfs root entered with pivot_root holding the host system read-only, the base
interpreter read-only at its recorded prefix, and each writable layer (repo at /testbed,
venv at /opt/miniconda3/envs/testbed) as a per-sandbox overlay over the shared, read-only
restored tree (a private copy where overlays are unavailable). Every payload runs with
all capabilities dropped and no_new_privs. See minisandbox.sandbox.rootfs for the mechanics.

Why overlays with the upper layer in the sandbox's tmpfs by default: the shared layer is
never written, creating one costs ~1 ms, and a crashed controller can leave nothing
behind on disk (the tmpfs dies with the namespace). Pass `scratch_dir` to put upper
layers on disk instead (large installs inside a sandbox).

Start state and `diff()`: the start state is the repo's working tree (tracked and
untracked, minus ignored files) captured just before the first command runs; a caller
that prepares the task first (for example applies the SWE-smith bug patch) calls
`mark_start()` afterwards to move the start state there. `diff()` is the binary git diff
from the start state to the current tree, computed with a temporary index, so HEAD, the
repo's index and its history are never touched.
"""

from __future__ import annotations

import atexit
import errno
import fcntl
import os
import shlex
import signal
import stat
import struct
import termios
import threading
import time
import weakref
from collections import namedtuple
from collections.abc import Callable

from minisandbox.errors import MinisandboxError
from minisandbox.paths import CONDA_ROOT, REPO_PATH, state_dir
from minisandbox.sandbox import leftovers, rootfs
from minisandbox.sandbox.conda_shim import shim_files
from minisandbox.sandbox.interpreters import interpreter_binds
from minisandbox.sandbox.limits import (
    CommandCgroup,
    LimitGroup,
    Limits,
    cgroup_owner,
    join_file,
    remove_cgroup_tree,
    sandbox_pid,
)

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a warm `run` does not)
if TYPE_CHECKING:
    from typing import Any, Protocol, TypeVar

#: No TERM: the reference images run tests through `docker exec` without a tty, where TERM
#: is unset; `TERM=dumb` turns colour off in libraries such as termcolor and fails their
#: tests (found by bench/bench_fidelity.py on termcolor).
DEFAULT_ENV = {
    "PATH": f"/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:{CONDA_ROOT}/bin",
    "HOME": "/root",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "USER": "root",
    "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    "PIP_NO_INPUT": "1",
}

GIT = "git -c safe.directory='*' -c core.quotepath=off -c core.fsmonitor=false"

#: The start of every script that snapshots or diffs the repository in a sandbox: the host
#: system's tools first on PATH, and no git configuration but the repository's own. The
#: agent can write its venv's `bin/` (first on the sandbox's PATH) and its `$HOME`: a `git`
#: or `mktemp` planted there, or a `~/.gitconfig` with `diff.noprefix`, made `diff()` run
#: the agent's program or return a patch that `git apply -p1` reads otherwise. (The patch
#: is the agent's to write anyway, so this is about a faithful diff, not about rewards.)
_GIT_PRELUDE = (
    "PATH=/usr/local/bin:/usr/bin:/bin; GIT_CONFIG_NOSYSTEM=1; GIT_CONFIG_GLOBAL=/dev/null; "
    "export PATH GIT_CONFIG_NOSYSTEM GIT_CONFIG_GLOBAL; "
)


class Layer(
    namedtuple(
        "Layer",
        [
            "lower",  # host directory (shared cache: never modified)
            "mount_path",  # e.g. /testbed or /opt/miniconda3/envs/testbed
            "writable",  # per-sandbox overlay (True, the default) or read-only bind (False)
            # host directories stacked above `lower` in the same overlay, topmost first (the
            # environment's install residue over the shared clean snapshot at /testbed): a tuple
            "over",
        ],
        defaults=[True, ()],
    )
):
    """A restored, read-only tree and where it appears inside the sandbox (a named tuple: no
    `typing` on a warm `run`'s path, docs/design.md "Record types")."""

    __slots__ = ()


class ExecResult:
    """What one command or script produced; the one result type of every executor (the
    sandbox, its shell sessions, grading's host and sandbox environments).

    A plain class, not a dataclass: it is defined on `minisandbox run`'s path, where building
    dataclasses costs more than the rest of the module (docs/sandbox.md, "The run path")."""

    def __init__(
        self,
        output: str,
        returncode: int,
        timed_out: bool = False,
        truncated: bool = False,
        seconds: float = 0.0,
        script: str = "",
        limit_hit: str = "",
        cpu_seconds: float | None = None,
        cause: str = "",
    ) -> None:
        self.output = output  # stdout and stderr, interleaved as written
        self.returncode = returncode  # negative signal number when killed
        self.timed_out = timed_out
        self.truncated = truncated  # output longer than the sandbox's max_output was cut
        self.seconds = seconds  # wall time, where the executor measures it
        self.script = script  # the exact script text that ran, where there was one
        #: "cpu": stopped by its CPU time limit; "cpu-total": by the sandbox's CPU budget (a
        #: line in `output` says so)
        self.limit_hit = limit_hit
        self.cpu_seconds = cpu_seconds  # CPU time of all the command's processes, where a cgroup counts it
        #: why the command ended, in one line, when a limit, a signal, a timeout or the sandbox
        #: did it ("" for an ordinary exit); see `Sandbox.explain`
        self.cause = cause

    def __repr__(self) -> str:
        return f"{type(self).__name__}({vars(self)!r})"


class CpuWatch:
    """One command's CPU time against the per-command limit, read from its own cgroup
    (`minisandbox.sandbox.limits.CommandCgroup`) from the moment the watch starts, and the
    sandbox's total against its budget; `stop` kills every process the command started
    (`spend`, called once the total is over, every process of the sandbox)."""

    def __init__(
        self,
        group: CommandCgroup,
        limit: float | None,
        start: float,
        stop: Callable[[], None],
        *,
        budget: float | None = None,
        total: Callable[[], float | None] | None = None,
        spend: Callable[[], None] | None = None,
    ) -> None:
        self.group = group
        self.limit = limit
        self.start = start
        self.stop = stop
        self.budget = budget  # the sandbox's CPU budget (seconds)
        self.total = total  # the sandbox's CPU total so far
        self.spend = spend
        self.used = 0.0
        self.total_used = 0.0
        self.hit = ""  # "cpu" (per command) | "cpu-total" (the sandbox's budget)
        #: the first look is 50 ms after the start (a command's cgroup has used nothing
        #: before): a command that ends sooner costs one forced read at its end
        self._read_at = time.monotonic()

    def exceeded(self, *, force: bool = False) -> bool:
        """True once the command has used more than `limit` CPU seconds or the sandbox more
        than its budget (the cgroups are read at most every 50 ms unless `force`)."""
        now = time.monotonic()
        if force or now - self._read_at >= 0.05:
            self._read_at = now
            usage = self.group.usage()
            if usage is not None:
                self.used = usage - self.start
            if self.budget is not None and self.total is not None:
                self.total_used = self.total() or self.total_used
        if not self.hit and self.limit is not None and self.used > self.limit:
            self.hit = "cpu"
        elif not self.hit and self.budget is not None and self.total_used > self.budget:
            self.hit = "cpu-total"
            if self.spend is not None:
                self.spend()
        return bool(self.hit)

    def message(self) -> str:
        if self.hit == "cpu-total":
            return "\nminisandbox: " + budget_message(self.total_used, self.budget) + "\n"
        return (
            f"\nminisandbox: CPU time limit: the command's processes used {self.used:.2f} s of CPU in total, "
            f"over the limit of {self.limit:g} s per command; all of them were killed (raise it with "
            "--cpu-seconds N or MINISANDBOX_LIMITS=cpu=N)\n"
        )


def budget_message(used: float, budget: float | None) -> str:
    """The one line of a sandbox whose CPU budget ran out."""
    return (
        f"sandbox CPU budget: its processes used {used:.2f} s of CPU in total, over the budget of {budget:g} s "
        "per sandbox; every process in it was killed and it runs no more commands (raise it with "
        "--sandbox-cpu-seconds N or MINISANDBOX_LIMITS=sandbox_cpu=N)"
    )


def rlimit_cpu_message(limit: int | None) -> str:
    """What a command killed by the RLIMIT_CPU fallback (no cgroup counts its total) gets."""
    return (
        f"\nminisandbox: CPU time limit: a process of the command reached RLIMIT_CPU ({limit} s per process) "
        "and was killed (SIGXCPU); raise it with --cpu-seconds N or MINISANDBOX_LIMITS=cpu=N\n"
    )


if TYPE_CHECKING:

    class Session(Protocol):
        """What the sandbox needs of a session it keeps (see `minisandbox.sandbox.shell`)."""

        @property
        def alive(self) -> bool: ...

        def interrupt(self) -> None: ...

        def close(self) -> None: ...

        def detach(self) -> None: ...

    S = TypeVar("S", bound=Session)


#: `SandboxConfig(limits=...)` not given: `Limits.default()`, read when the config is made
#: (None means no limits).
_DEFAULT_LIMITS: Any = object()


class SandboxConfig:
    """Options of a sandbox (all optional, keyword only)."""

    def __init__(
        self,
        *,
        network: str = "none",
        rootless: bool | None = None,
        limits: Limits | None = _DEFAULT_LIMITS,
        seccomp: bool = True,
        ptrace: bool = False,
        scratch_dir: str | None = None,
        copy_layers: bool = False,
        binds: list[rootfs.Bind] | None = None,
        env: dict[str, str] | None = None,
        repo_path: str = REPO_PATH,
        hostname: str = "sandbox",
        max_output: int | None = None,
        join_ns: dict | None = None,
        diff_excludes: tuple[str, ...] = ("**/__pycache__/**", "**/*.py[co]", "**/.pytest_cache/**"),
        warm_next: bool = True,
    ) -> None:
        self.network = network  # "none": loopback only (downloads fail fast); "host": share
        self.rootless = rootless  # None: rootless when not euid 0
        #: memory, pids, CPU time, tmpfs budget, output per command...: on unless told
        #: otherwise (`Limits.default()`, $MINISANDBOX_LIMITS); None or `Limits.unlimited()`
        #: lifts them all.
        self.limits = Limits.default() if limits is _DEFAULT_LIMITS else limits
        #: the seccomp filter of every payload (minisandbox.sandbox.seccomp); False only to debug
        self.seccomp = seccomp
        #: let payloads ptrace their sandbox's other payloads (gdb, strace); off by default.
        #: init and its helpers stay out of reach either way (non-dumpable)
        self.ptrace = ptrace
        self.scratch_dir = scratch_dir  # on-disk upper layers (default: tmpfs in the sandbox)
        self.copy_layers = copy_layers  # force the copy fallback instead of overlays
        self.binds = binds if binds is not None else []  # extra binds
        self.env = env if env is not None else {}  # added to DEFAULT_ENV
        self.repo_path = repo_path
        self.hostname = hostname
        self.max_output = max_output  # bytes kept from one command's output (default: limits.output_bytes)
        #: {"pid", "start"} of a node cache's mount holder to join first: rootless image
        #: layers are mounted there (`PreparedTask.mount_ns`, minisandbox.node.fusemount)
        self.join_ns = join_ns
        #: untracked build/test by-products left out of diff() even when the repo does not ignore them
        self.diff_excludes = diff_excludes
        #: counts as a creation for the warmer, which prepares the next sandbox from a
        #: process's second one on; False for a sandbox made on the way to another (a task's
        #: start-state layer), so a one-shot `run` stays one creation
        self.warm_next = warm_next


#: The start tree of a sandbox that takes no diff (`Sandbox.forgo_diff`).
_NO_DIFF = "(no diff)"


class Sandbox:
    """One task's sandbox. Use as a context manager or call close()."""

    def __init__(
        self,
        layers: list[Layer],
        *,
        interpreter: tuple[str, str] | None = None,
        config: SandboxConfig | None = None,
        **options,
    ) -> None:
        """`interpreter`: (full version, recorded prefix) from the env manifest; a local
        interpreter of that version is bound read-only at the recorded prefix.
        `options` are SandboxConfig fields (network=..., limits=..., ...)."""
        if config and options:
            raise TypeError("pass either config= or keyword options, not both")
        self.config = config or SandboxConfig(**options)
        cfg = self.config
        self.id = os.urandom(6).hex()
        self.layers = list(layers)
        self.env = {**DEFAULT_ENV, **cfg.env}
        self._sessions: dict[str, Session] = {}
        self._lock = threading.Lock()  # start state
        self._sessions_lock = threading.Lock()
        self._start_tree: str | None = None
        self._upper_dirs: list[str] = []
        self._cmd_cgroups: dict[int, CommandCgroup] = {}  # command id -> its CPU-accounting cgroup
        self._cpu_counted: set[int] = set()  # commands `cpu_watch` has counted before
        # what the CPU watcher checks: command id -> (its cgroup, per-command limit (None for a
        # session's shell, held to the sandbox total only), whether the command has returned
        # (its cgroup is then removed once empty))
        self._watched: dict[int, tuple[CommandCgroup, float | None, bool]] = {}
        self._watch_lock = threading.Lock()
        self._watcher: threading.Thread | None = None
        self._watch_wake = threading.Event()
        #: set (one line) once the sandbox's CPU budget ran out: it runs no more commands
        self.cpu_spent = ""
        #: why the sandbox's processes were killed behind a caller's back (the watcher)
        self.notes: list[str] = []
        self._events_seen: dict[str, int] = {}
        self._closed = False
        self._root: rootfs.PrivateRoot | None = None
        tracker = _track_host_resources(cfg)
        # Always a LimitGroup: even without limits the sandbox gets its own leaf cgroup.
        self.limits: LimitGroup | None
        self.limits = _limit_group(cfg.limits or Limits.unlimited())
        started = False  # a PrivateRoot was asked for (it may have taken the warm sandbox)
        try:
            if self.limits and self.limits.dirs:
                tracker.add(
                    cgroup_parents=[
                        os.path.dirname(d)
                        for d in self.limits.dirs
                        if os.path.basename(d).startswith(leftovers.CGROUP_PREFIX)
                    ]
                )
            binds = list(cfg.binds)
            if interpreter is not None and any(layer.mount_path == interpreter[1] for layer in self.layers):
                # the interpreter came as a layer of its own (node.runtime): a read-only bind
                self.layers = [
                    Layer(layer.lower, layer.mount_path, False) if layer.mount_path == interpreter[1] else layer
                    for layer in self.layers
                ]
            elif interpreter is not None:
                binds += interpreter_binds(interpreter[0], interpreter[1])
            overlays = []
            for n, layer in enumerate(self.layers):
                # stacked sub-directories of a layer mounted in a joined namespace (rootless
                # images) are not visible from here: rootfs checks them inside
                for lower in (*(() if cfg.join_ns else layer.over), layer.lower):
                    if not os.path.isdir(lower):
                        raise rootfs.SandboxError(
                            f"layer {lower} (for {layer.mount_path}) is not a directory: "
                            "restore the task's layers first"
                        )
                if layer.over and not layer.writable:
                    raise rootfs.SandboxError(f"layer for {layer.mount_path}: stacked layers need writable=True")
                if layer.writable:
                    _check_owner(layer, cfg.rootless)
                    upper = None
                    if cfg.scratch_dir:
                        upper = os.path.join(cfg.scratch_dir, leftovers.scratch_name(self.id), f"layer{n}")
                        os.makedirs(upper)
                        self._upper_dirs.append(os.path.dirname(upper))
                    lowers = [os.path.abspath(p) for p in (*layer.over, layer.lower)]
                    overlays.append((lowers if layer.over else lowers[0], layer.mount_path, upper))
                else:
                    binds.append(rootfs.Bind(layer.lower, layer.mount_path, True))
            files = shim_files()
            extra = {"hostname": cfg.hostname, "force_copy": cfg.copy_layers}
            if cfg.join_ns:
                extra["join_ns"] = dict(cfg.join_ns)
            if self.limits.limits.tmpfs_bytes:
                extra["tmpfs_size"] = self.limits.limits.tmpfs_bytes
            extra["cgroup_procs"] = self.limits.procs_files
            extra["seccomp"] = bool(cfg.seccomp)
            extra["ptrace"] = bool(cfg.ptrace)
            extra["init_rlimits"] = {k: v for k, v in self.limits.rlimits.items() if k in ("RLIMIT_AS", "RLIMIT_FSIZE")}
            spec = rootfs.build_spec(
                binds, network=cfg.network, rootless=cfg.rootless, overlays=overlays, files=files, **extra
            )
            leaf = self.limits.cpu_leaf
            started = True
            self._root = rootfs.PrivateRoot(spec, cgroup_home=join_file(*leaf) if leaf else None)
            if cfg.warm_next:
                _warmer.prepare(self.limits.limits, spec)
        except BaseException:
            if not started and _return_spare(self.limits):  # a bad layer: the warm sandbox in them waits on
                self.limits = None
            self._cleanup_host()
            raise
        self.layer_methods: dict[str, str] = self._root.info.get("layers", {})

    # -- introspection
    @property
    def rootless(self) -> bool:
        return bool(self._root and self._root.spec.get("rootless"))

    @property
    def limits_mode(self) -> dict[str, str]:
        """How each limit is enforced, e.g. {"memory": "cgroup v1", "cpu_seconds": "rlimit ..."}."""
        return dict(self.limits.mode) if self.limits else {}

    @property
    def max_output(self) -> int:
        """Bytes of output kept per command (and per pipe); the rest is read and dropped."""
        if self.config.max_output is not None:
            return self.config.max_output
        limit = self.limits.limits.output_bytes if self.limits else None
        return limit if limit is not None else 1 << 62

    @property
    def rlimits(self) -> dict[str, int]:
        return dict(self.limits.rlimits) if self.limits else {}

    def _live(self) -> rootfs.PrivateRoot:
        if self._closed or self._root is None:
            raise rootfs.SandboxError(f"sandbox {self.id} is closed")
        return self._root

    # -- processes
    def spawn(
        self,
        argv: list[str],
        *,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        stdin=None,
        stdout=None,
        stderr=None,
        pass_fds: dict[int, int] | None = None,
        pidns: bool = False,
        long_lived: bool = False,
    ) -> int:
        """Start a process inside; returns its command id (see wait/kill). `pass_fds` and
        `pidns` as in `rootfs.PrivateRoot.spawn`. `long_lived`: a process that runs many
        commands (a session's shell): where a cgroup counts CPU per command it gets no
        RLIMIT_CPU of its own, which would add up its CPU over all of them.

        Nobody may wait for a spawned command, so the sandbox's CPU watcher holds it to the
        sandbox's budget (a session's shell) and to the per-command limit (any other) until
        `wait`/`collect` take over."""
        self._ensure_start()
        return self._spawn(
            argv,
            env={**self.env, **(env or {})},
            cwd=cwd or self._default_cwd(),
            stdin=stdin,
            stdout=stdout,
            stderr=stderr,
            pass_fds=pass_fds,
            pidns=pidns,
            long_lived=long_lived,
            watch=True,
        )

    def prepare_commands(self) -> None:
        """Start the command spawner now rather than with the first command: for a sandbox
        opened ahead of its call (the node-local helper's spares), whose first command is
        the caller's. It runs nothing in the sandbox."""
        self._live().start_spawner(self.rlimits)

    def _spawn(self, argv: list[str], *, long_lived: bool = False, watch: bool = False, **kw) -> int:
        """`PrivateRoot.spawn` with the sandbox's rlimits, in a cgroup of its own when a
        cgroup counts CPU time per command (see `cpu_watch`)."""
        root = self._live()
        if self.cpu_spent:
            raise rootfs.SandboxError(self.cpu_spent)
        lim = self.limits
        group = lim.command_cgroup() if lim is not None else None
        fd = group.open_procs() if group is not None else None
        rlimits = self.rlimits
        if long_lived and group is not None:
            rlimits.pop("RLIMIT_CPU", None)
        try:
            cid = root.spawn(argv, rlimits=rlimits, cgroup_fd=fd, **kw)
        except BaseException:
            if group is not None:
                group.remove()
            raise
        finally:
            if fd is not None:
                os.close(fd)
        if group is not None and cid in root.lost:  # its start was cut short (see PrivateRoot.lost)
            group.kill()
        if group is not None:
            self._cmd_cgroups[cid] = group
            limit = self.limits.limits.cpu_seconds if self.limits else None
            if long_lived and self._budget() is not None:
                self._watch(cid, group, None, returned=False)
            elif watch and (limit is not None or self._budget() is not None):
                self._watch(cid, group, float(limit) if limit is not None else float("inf"), returned=False)
        return cid

    def _budget(self) -> float | None:
        """The sandbox's CPU budget where a cgroup counts its total (else None)."""
        lim = self.limits
        if lim is None or lim.cpu_leaf is None or lim.limits.sandbox_cpu_seconds is None:
            return None
        return float(lim.limits.sandbox_cpu_seconds)

    def cpu_watch(self, cid: int) -> CpuWatch | None:
        """Count command `cid`'s CPU time against the per-command CPU limit and the
        sandbox's total against its budget; None without a cgroup to count in (then
        RLIMIT_CPU per process is all). The first watch of a command counts from its start
        (its cgroup is new: what it used before the caller got here counts too, as it does
        for the CPU watcher); a later one (a session's next command) from now on."""
        group = self._cmd_cgroups.get(cid)
        limit = self.limits.limits.cpu_seconds if self.limits else None
        budget = self._budget()
        if group is None or (limit is None and budget is None):
            return None
        start = (group.usage() or 0.0) if cid in self._cpu_counted else 0.0
        self._cpu_counted.add(cid)
        return CpuWatch(
            group,
            None if limit is None else float(limit),
            start,
            lambda: self.kill_cgroup(cid),
            budget=budget,
            total=self.limits.sandbox_usage if self.limits else None,
            spend=self._spend_budget,
        )

    # -- the sandbox's CPU total, while nobody waits for a command
    def _watch(self, cid: int, group: CommandCgroup, limit: float | None, *, returned: bool) -> None:
        """Hold `group` (a returned command's leftovers, or a session's shell) to `limit`
        and the sandbox's budget from the one watcher thread of this sandbox (started on
        demand, ends when nothing is left to watch)."""
        with self._watch_lock:
            self._watched[cid] = (group, limit, returned)
            if self._watcher is None or not self._watcher.is_alive():
                self._watch_wake.clear()
                # a weak reference: a sandbox dropped without close() is still collected
                self._watcher = threading.Thread(
                    target=_watch_thread,
                    args=(weakref.ref(self), self._watch_wake),
                    name=f"minisandbox-cpu-{self.id}",
                    daemon=True,
                )
                self._watcher.start()

    def _watch_pass(self) -> bool:
        """One look at what the watcher holds (see `_watch`); False when nothing is left."""
        if self._closed:
            return False
        with self._watch_lock:
            items = list(self._watched.items())
            if not items:
                self._watcher = None
                return False
        for cid, (group, limit, returned) in items:
            if limit is None:
                continue  # a session's shell: the sandbox total only
            if returned and not group.pids():  # (a running command's first process may not have joined yet)
                if group.remove():
                    with self._watch_lock:
                        self._watched.pop(cid, None)
                continue
            used = group.usage()
            if used is not None and used > limit:
                group.kill()
                what = "background processes" if returned else "processes"
                self.notes.append(
                    f"CPU time limit: command {cid}'s {what} used {used:.2f} s "
                    f"of CPU, over the limit of {limit:g} s per command; they were killed"
                )
        budget = self._budget()
        total = self.limits.sandbox_usage() if self.limits is not None and budget is not None else None
        if total is not None and budget is not None and total > budget:
            self._spend_budget(total)
        return True

    def _spend_budget(self, total: float | None = None) -> None:
        """The sandbox's CPU budget ran out: kill every process in it, refuse new commands."""
        if self.cpu_spent:
            return
        used = total if total is not None else (self.limits.sandbox_usage() if self.limits else None) or 0.0
        self.cpu_spent = budget_message(used, self._budget())
        self.notes.append(self.cpu_spent)
        try:
            if self._root is not None and not self._closed:
                self._root.kill_all()
        except (OSError, rootfs.SandboxError):
            pass

    def kill_leftovers(self) -> None:
        """Kill every process still running in the sandbox (init aside): what a one-shot
        command left behind (`minisandbox run`), so nothing changes the tree afterwards."""
        self._live().kill_all()
        with self._watch_lock:
            items = list(self._watched.items())
        for cid, (group, _limit, returned) in items:
            if returned and group.kill(wait=2.0) and group.remove():
                with self._watch_lock:
                    self._watched.pop(cid, None)

    def kill_cgroup(self, cid: int, *, spare_leader: bool = False) -> None:
        """SIGKILL every process command `cid` started, wherever it went in the process
        tree (its cgroup); `spare_leader` keeps the command's own process (a session's
        shell). Without a command cgroup: its process tree, as `kill` does."""
        root = self._live()
        group = self._cmd_cgroups.get(cid)
        if group is None:
            root.kill(cid, signal.SIGKILL, children_only=spare_leader)
            return
        spare = None
        if spare_leader and cid in root.pids:
            spare = next((p for p in group.pids() if sandbox_pid(p) == root.pids[cid]), None)
        if not spare_leader:
            root.kill(cid, signal.SIGKILL)
        group.kill(spare=spare)

    def _finished(self, cid: int) -> None:
        """Command `cid` has exited: remove its cgroup when empty; when background jobs are
        left in it, the CPU watcher holds them to the per-command limit and the sandbox's
        budget (and `close()` removes it with the sandbox's cgroup tree)."""
        group = self._cmd_cgroups.pop(cid, None)
        self._cpu_counted.discard(cid)
        with self._watch_lock:
            self._watched.pop(cid, None)  # a session's shell that exited
        if group is not None and not group.remove() and not self._closed:
            limit = self.limits.limits.cpu_seconds if self.limits else None
            if limit is not None or self._budget() is not None:
                self._watch(cid, group, float(limit) if limit is not None else float("inf"), returned=True)
        if self._root is not None:
            self._root.forget(cid)

    def wait(self, cid: int, timeout: float | None = None) -> int:
        """Exit code of command `cid`; raises TimeoutError after `timeout` seconds (the
        command keeps running). Enforces the per-command CPU limit meanwhile."""
        root = self._live()
        watch = self.cpu_watch(cid)
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = None if deadline is None else deadline - time.monotonic()
            step = 0.5 if left is None else max(0.0, min(0.5, left))
            try:
                code = root.wait(cid, step)
            except TimeoutError:
                if left is not None and left <= 0.5:
                    raise
                if watch is not None and watch.exceeded():
                    watch.stop()
                continue
            self._finished(cid)
            return code

    def poll(self, cid: int) -> int | None:
        """The exit code of command `cid` if it has exited, else None (never blocks)."""
        return self._live().poll(cid)

    def kill(self, cid: int, sig: int = signal.SIGKILL, *, children_only: bool = False) -> bool:
        return self._live().kill(cid, sig, children_only=children_only)

    def collect(self, cid: int, fds: list[int], timeout: float | None = None) -> tuple[list[bytes], int, bool]:
        """Read the pipes `fds` of command `cid` (spawned with `spawn`) until it exits,
        killing its process tree after `timeout` seconds; returns (bytes per pipe, exit
        code, timed out). The same collection `run` uses, for callers that need stdout and
        stderr apart (the SWE-ReX adapter). Keeps at most `max_output` bytes per pipe."""
        outs, code, timed_out, _, _ = _collect_fds(
            self._live(), cid, fds, timeout, self.max_output, self.cpu_watch(cid), self._cpu_rlimit()
        )
        self._finished(cid)
        return outs, code, timed_out

    def _cpu_rlimit(self) -> int | None:
        """The RLIMIT_CPU fallback's limit when no cgroup counts per command (else None)."""
        if self.limits is None or self.limits.cpu_leaf is not None:
            return None
        return self.limits.limits.cpu_seconds

    def _default_cwd(self) -> str:
        return self.config.repo_path if any(layer.mount_path == self.config.repo_path for layer in self.layers) else "/"

    def run(
        self,
        argv: list[str],
        *,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        timeout: float | None = None,
        input: bytes | None = None,
        pass_fds: dict[int, int] | None = None,
        pidns: bool = False,
        _mark: bool = True,
        _direct: bool = False,
    ) -> ExecResult:
        """Run argv to completion; stdout+stderr captured. On timeout the whole process
        tree is killed and `timed_out` is set. `pass_fds` and `pidns` as in
        `rootfs.PrivateRoot.spawn` (the grader runs tests with both)."""
        if _mark:
            self._ensure_start()
        root = self._live()
        rfd, wfd = os.pipe2(os.O_CLOEXEC)
        in_r = in_w = None
        if input is not None:
            in_r, in_w = os.pipe2(os.O_CLOEXEC)
        try:
            cid = self._spawn(
                argv,
                env={**self.env, **(env or {})},
                cwd=cwd or self._default_cwd(),
                stdin=in_r if in_r is not None else rootfs.DEVNULL,
                stdout=wfd,
                stderr=wfd,
                pass_fds=pass_fds,
                pidns=pidns,
                direct=_direct,
                hold=input is None,  # (a command fed on stdin gets its reply at once: the feeding starts then)
            )
        except BaseException:
            for fd in (rfd, wfd, in_r, in_w):
                if fd is not None:
                    os.close(fd)
            raise
        os.close(wfd)
        if in_r is not None:
            os.close(in_r)
            threading.Thread(target=_feed, args=(in_w, input), daemon=True).start()
        try:
            res = _collect(root, cid, rfd, timeout, self.max_output, self.cpu_watch(cid), self._cpu_rlimit())
        except rootfs.SandboxError as exc:
            raise self._init_gone(exc) from None
        finally:
            os.close(rfd)
            self._finished(cid)
        return self._with_cause(res, timeout)

    # -- why a command ended
    def _with_cause(self, res: ExecResult, timeout: float | None) -> ExecResult:
        """`res` with its `cause` (and, for a limit that the output does not mention yet, a
        last line saying so)."""
        if res.returncode == 0 and not (res.timed_out or res.truncated or res.limit_hit):
            return res  # the common case costs nothing
        res.cause = self.explain(
            res.returncode,
            limit_hit=res.limit_hit,
            timed_out=res.timed_out,
            timeout=timeout,
            truncated=res.truncated,
            cpu_used=res.cpu_seconds,
        )
        limits = [c for c in res.cause.split("; ") if c.startswith(("memory limit", "process limit", "tmpfs budget"))]
        if limits:
            res.output += "".join(f"\nminisandbox: {c}\n" for c in limits)
        return res

    def explain(
        self,
        code: int,
        *,
        limit_hit: str = "",
        timed_out: bool = False,
        timeout: float | None = None,
        truncated: bool = False,
        cpu_used: float | None = None,
    ) -> str:
        """Why a command that exited with `code` ended, in one line ("" for an ordinary
        exit): a timeout, the CPU limit or budget, the memory or process limit (the
        cgroup's event counters, else the processes init sees against RLIMIT_NPROC), a full
        tmpfs budget, a signal, dropped output. Looked up only for a failure: init is
        asked for the sandbox's state (one round trip) and the cgroups' counters read."""
        lim = self.limits.limits if self.limits else Limits.unlimited()
        parts: list[str] = []
        if timed_out:
            parts.append(
                f"timed out after {timeout:g} s: its processes were killed"
                if timeout
                else "timed out: its processes were killed"
            )
        if limit_hit == "cpu-total":
            parts.append(self.cpu_spent or budget_message(cpu_used or 0.0, self._budget()))
        elif limit_hit == "cpu":
            parts.append(f"CPU time limit ({lim.cpu_seconds} s per command) reached: its processes were killed")
        if code != 0 and not timed_out and not limit_hit:
            parts += self._limit_causes()
        if code < 0 and not timed_out and not limit_hit:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            parts.append(f"killed by {name}")
        if truncated:
            parts.append(f"output over {self.max_output} bytes was dropped (--max-output)")
        return "; ".join(parts)

    def _limit_causes(self) -> list[str]:
        """The sandbox limits that were hit since the last look (see `explain`)."""
        from minisandbox.fsutil import human_size

        lim = self.limits.limits if self.limits else Limits.unlimited()
        out = []
        events = self.limits.events() if self.limits else {}
        new = {k: v - self._events_seen.get(k, 0) for k, v in events.items() if v > self._events_seen.get(k, 0)}
        self._events_seen.update(events)
        if new.get("oom_kill"):
            out.append(
                f"memory limit ({human_size(lim.memory_bytes or 0)}) reached: the kernel killed "
                f"{new['oom_kill']} process(es) (--memory)"
            )
        if new.get("pids_max"):
            out.append(f"process limit ({lim.pids}) reached: {new['pids_max']} fork(s) refused (--pids)")
        try:
            st = self._live().stat()
        except (OSError, rootfs.SandboxError):
            st = {}
        tmpfs = st.get("tmpfs")
        if tmpfs and lim.tmpfs_bytes and tmpfs[0] < max(256 << 10, tmpfs[1] // 100):
            out.append(
                f"tmpfs budget ({human_size(lim.tmpfs_bytes)}) is full: writes to /tmp, /root, /dev/shm "
                "and the writable layers fail (ENOSPC) (--tmpfs)"
            )
        nproc = self.limits.rlimits.get("RLIMIT_NPROC") if self.limits else None
        procs = st.get("procs")
        # RLIMIT_NPROC keeps no count of refusals: what is left running (init included; the
        # command's own few processes have exited) tells instead
        if (
            nproc
            and lim.pids
            and procs is not None
            and os.geteuid() != 0
            and procs + 1 >= lim.pids - min(4, lim.pids // 10)
        ):
            out.append(
                f"process limit ({lim.pids}, RLIMIT_NPROC) reached: {procs + 1} processes are still running (--pids)"
            )
        return out

    def _init_gone(self, exc: rootfs.SandboxError) -> rootfs.SandboxError:
        """The error for a command whose sandbox's init died under it, with the cause where
        the cgroup tells it (the OOM killer)."""
        events = self.limits.events() if self.limits else {}
        if events.get("oom_kill", 0) > self._events_seen.get("oom_kill", 0) and self.limits is not None:
            from minisandbox.fsutil import human_size

            limit = self.limits.limits.memory_bytes
            return rootfs.SandboxError(
                f"{exc}: the sandbox reached its memory limit "
                f"({human_size(limit or 0)}) and the kernel's OOM killer ended it (--memory)"
            )
        if self.cpu_spent:
            return rootfs.SandboxError(f"{exc}: {self.cpu_spent}")
        return exc

    def execute(
        self, command: str, *, cwd: str | None = None, timeout: float | None = None, env: dict[str, str] | None = None
    ) -> ExecResult:
        """One-shot `bash -c command` (a fresh shell: no state carried over). Commands
        beyond the kernel's 128 KiB limit for one argument go in through stdin. A command of
        plain words (`ls -la src`, `true`: no quoting, expansion, redirection or operator, no
        builtin) runs as bash would run it but without bash: its program exec'd with the
        environment bash gives it (docs/sandbox.md, "Command spawner")."""
        if len(command.encode()) > 100_000:
            return self.run(
                ["bash", "-c", 'eval "$(cat)" < /dev/null'], cwd=cwd, timeout=timeout, env=env, input=command.encode()
            )
        return self.run(["bash", "-c", command], cwd=cwd, timeout=timeout, env=env, _direct=True)

    # -- files
    def read_file(self, path: str) -> bytes:
        """Contents of a regular file inside the sandbox, opened with the payload's
        privileges by a confined helper (`init_program.open_in_root`: symlinks resolve inside the
        sandbox, a FIFO, socket or device is refused at once: OSError). At most `max_output`
        bytes, as of a command's output: a sparse file costs the payload neither tmpfs nor
        memory whatever its size, but reading it whole would cost the controller all of it
        (OSError EFBIG past the limit)."""
        fd = self._live().open(path, os.O_RDONLY, rlimits=self.rlimits)
        if stat.S_ISDIR(os.fstat(fd).st_mode):
            os.close(fd)
            raise IsADirectoryError(21, "is a directory, not a file", path)
        limit = self.max_output
        with os.fdopen(fd, "rb") as fh:
            data = bytearray()
            while len(data) <= limit and (chunk := fh.read(min(1 << 20, limit + 1 - len(data)))):
                data += chunk
        if len(data) > limit:
            raise OSError(
                errno.EFBIG,
                f"larger than the output limit of {limit} bytes, which the controller keeps of a file as of "
                f"a command's output; read it in parts with a command (head -c, tail -c) or raise the limit "
                "(--max-output / MINISANDBOX_LIMITS output=)",
                path,
            )
        return bytes(data)

    def write_file(self, path: str, data: bytes | str, mode: int = 0o644) -> None:
        """Create or replace a regular file inside the sandbox (parent directories
        created; the same confinement as `read_file`)."""
        self._ensure_start()
        if isinstance(data, str):
            data = data.encode()
        fd = self._live().open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode, makedirs=True, rlimits=self.rlimits)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)

    def upload(self, source: str, target: str) -> None:
        """Copy a host file or directory tree to `target` inside the sandbox."""
        if os.path.isdir(source):
            self._ensure_start()
            res = self.run(["mkdir", "-p", target], _mark=False)
            if res.returncode != 0:
                raise rootfs.SandboxError(f"upload {source}: cannot create {target}: {res.output.strip()}")
            root = self._live()
            rfd, wfd = os.pipe2(os.O_CLOEXEC)
            out_r, out_w = os.pipe2(os.O_CLOEXEC)
            try:
                cid = self._spawn(
                    ["tar", "-x", "--no-same-owner", "-f", "-", "-C", target],
                    env=self.env,
                    cwd="/",
                    stdin=rfd,
                    stdout=out_w,
                    stderr=out_w,
                )
            finally:
                os.close(rfd)
                os.close(out_w)
            import subprocess

            tar = subprocess.Popen(["tar", "-c", "-f", "-", "-C", source, "."], stdout=wfd, stderr=subprocess.PIPE)
            os.close(wfd)
            _, err = tar.communicate()
            res = _collect(root, cid, out_r, 600, 1 << 16, self.cpu_watch(cid), self._cpu_rlimit())
            os.close(out_r)
            self._finished(cid)
            if tar.returncode != 0 or res.returncode != 0:
                raise rootfs.SandboxError(
                    f"upload {source} -> {target} failed: {(err.decode() + res.output).strip()[:300]}"
                )
        else:
            with open(source, "rb") as fh:
                data = fh.read()
            self.write_file(target, data, os.stat(source).st_mode & 0o777)

    # -- diff
    def _git_tree(self) -> str:
        repo = self.config.repo_path
        excludes = " ".join(shlex.quote(f":(exclude,glob){p}") for p in self.config.diff_excludes)
        script = (
            f"{_GIT_PRELUDE}set -e; cd {shlex.quote(repo)}; "
            f"if [ -e .git ]; then gd=$({GIT} rev-parse --git-dir); else gd=/tmp/.minisandbox-start.git; "
            f"  export GIT_DIR=$gd GIT_WORK_TREE={shlex.quote(repo)}; [ -d $gd ] || {GIT} init -q; fi; "
            "export GIT_INDEX_FILE=$(mktemp /tmp/.minisandbox-index.XXXXXX); "
            "trap 'rm -f $GIT_INDEX_FILE' EXIT; "
            "[ -f $gd/index ] && cp $gd/index $GIT_INDEX_FILE || rm -f $GIT_INDEX_FILE; "
            f"{GIT} add -A -- . {excludes} && {GIT} write-tree"
        )
        res = self.run(
            ["/bin/sh", "-c", script],
            cwd="/",
            timeout=600,
            _mark=False,
            env={
                "GIT_AUTHOR_NAME": "minisandbox",
                "GIT_COMMITTER_NAME": "minisandbox",
                "GIT_AUTHOR_EMAIL": "minisandbox@localhost",
                "GIT_COMMITTER_EMAIL": "minisandbox@localhost",
            },
        )
        tree = res.output.strip().splitlines()[-1] if res.output.strip() else ""
        if res.returncode != 0 or len(tree) not in (40, 64):
            raise rootfs.SandboxError(
                f"git snapshot of {self.config.repo_path} failed ({res.returncode}): {res.output.strip()[-300:]}"
            )
        return tree

    def mark_start(self) -> str:
        """Record the repo's current tree as the start state for diff(); returns its hash."""
        self._start_tree = self._git_tree()
        return self._start_tree

    def forgo_diff(self) -> None:
        """diff() will never be asked of this sandbox (a one-shot `minisandbox run` without
        --diff): skip the start-state snapshot (a `git add` of the whole repo) that the
        first command would otherwise take."""
        self._start_tree = _NO_DIFF

    def _ensure_start(self) -> None:
        if (
            self._start_tree is None
            and not self._closed
            and any(layer.mount_path == self.config.repo_path and layer.writable for layer in self.layers)
        ):
            with self._lock:
                if self._start_tree is None:
                    self._start_tree = self._git_tree()

    def diff(self) -> str:
        """The repo's changes since the start state, as a binary git patch (untracked files
        included, ignored files not). A patch over the output limit raises SandboxError
        rather than coming back cut."""
        self._ensure_start()
        if self._start_tree is _NO_DIFF:
            raise rootfs.SandboxError(f"sandbox {self.id} was opened without a start state (forgo_diff)")
        now = self._git_tree()
        if now == self._start_tree:
            return ""
        # (git's stderr stays out of the patch: shown only when git fails)
        res = self.run(
            [
                "/bin/sh",
                "-c",
                f"{_GIT_PRELUDE}cd {shlex.quote(self.config.repo_path)} || exit 1; "
                f"if [ ! -e .git ]; then export GIT_DIR=/tmp/.minisandbox-start.git "
                f"GIT_WORK_TREE={shlex.quote(self.config.repo_path)}; fi; "
                "e=$(mktemp) || exit 1; trap 'rm -f \"$e\"' EXIT; "
                f"{GIT} diff --binary --no-color --no-ext-diff --no-renames --src-prefix=a/ --dst-prefix=b/ "
                f'{self._start_tree} {now} 2>"$e" || {{ cat "$e"; exit 1; }}',
            ],
            cwd="/",
            timeout=600,
            _mark=False,
        )
        if res.returncode != 0:
            raise rootfs.SandboxError(f"git diff in {self.config.repo_path} failed: {res.output.strip()[-300:]}")
        if res.truncated:  # a cut patch: its last hunk broken, every later file missing
            raise rootfs.SandboxError(
                f"the diff of {self.config.repo_path} is larger than the output limit of {self.max_output} bytes; "
                "raise it (--max-output / MINISANDBOX_LIMITS output=) or leave the large files out of the repo"
            )
        return res.output

    # -- sessions
    def session_for(self, name: str, factory: Callable[[], S]) -> S:
        """The live session called `name`, made with `factory` on first use or when its shell
        died. Sessions are kept here so `close()` ends them; `minisandbox.sandbox.shell.session`
        is the usual way in."""
        with self._sessions_lock:
            sess = self._sessions.get(name)
            if sess is None or not sess.alive:
                self._live()
                sess = factory()
                self._sessions[name] = sess
            return sess  # type: ignore[return-value]  (a name always maps to its factory's type)

    def close_session(self, name: str = "default") -> None:
        sess = self._sessions.pop(name, None)
        if sess is not None:
            sess.close()

    @property
    def sessions(self) -> list[str]:
        return sorted(self._sessions)

    # -- lifetime
    @property
    def alive(self) -> bool:
        root = self._root
        return (
            not self._closed
            and root is not None
            and not root._closed
            and (root.proc is None or root.proc.poll() is None)
        )

    def abort(self) -> None:
        """Kill the sandbox's init (SIGKILL through its pidfd), from any thread: every
        process in its pid namespace dies with it, and a call waiting on it raises
        SandboxError; `close()` still removes the rest. For stopping a run from outside
        (`minisandbox eval` on Ctrl-C), where `close()` would race the waiting thread."""
        root = self._root
        init = root.proc if root is not None else None
        if init is not None:
            init.kill()

    def close(self) -> None:
        """Kill every process, tear down the namespaces (all mounts go with them), remove
        the cgroups and any on-disk upper layers."""
        if self._closed:
            return
        self._begin_close()
        try:
            if self._root is not None:
                self._root.close()
        finally:
            self._cleanup_host()

    def _begin_close(self) -> None:
        """Mark the sandbox closed, wake its watcher and detach its sessions (both ways of
        closing start so)."""
        self._closed = True
        self._watch_wake.set()
        for sess in list(self._sessions.values()):
            sess.detach()
        self._sessions.clear()

    def close_keeping(self, mount_path: str, dest: str) -> None:
        """Close the sandbox and keep what it changed in its writable layer at `mount_path`:
        the overlay's upper directory (changed files, whiteouts of removed ones, opaque
        directories) is renamed to `dest` (an empty directory or no entry on the scratch
        directory's filesystem) once init has exited, so no process of the sandbox is left to
        write into it. A node-side cache of a task's start state (minisandbox.task) stacks it
        under later sandboxes' overlays, read-only. Needs `scratch_dir` and an overlay at
        `mount_path` (the copy fallback keeps no upper directory)."""
        index = next((n for n, layer in enumerate(self.layers) if layer.mount_path == mount_path), None)
        if index is None or not self.config.scratch_dir or self.layer_methods.get(mount_path) != "overlay":
            self.close()
            raise rootfs.SandboxError(f"sandbox {self.id}: no on-disk overlay at {mount_path} to keep")
        base = os.path.join(self.config.scratch_dir, leftovers.scratch_name(self.id), f"layer{index}")
        self._begin_close()
        try:
            root = self._root
            if root is not None:
                root.close()
                if not root.exited:  # keep nothing a process of the sandbox could still write
                    raise rootfs.SandboxError(f"sandbox {self.id}: init did not exit; its {mount_path} is not kept")
            os.rename(os.path.join(base, "upper"), dest)
        finally:
            self._cleanup_host()

    def _cleanup_host(self) -> None:
        try:
            if self.limits:
                self.limits.close()
        finally:
            for d in self._upper_dirs:
                leftovers.remove_scratch(d)
            self._upper_dirs = []

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass


_reaped: set[tuple[int, str]] = set()
_reaped_lock = threading.Lock()

#: The cgroups of the next sandbox this process creates, made ahead: this process's warm
#: sandbox (`rootfs._Zygote.take_warm`) is started in them, so a sandbox with the same limits
#: starts in cgroups it has already joined. Groups made for another limit setting or left
#: over wait in `_unused` until they are empty.
_spare: LimitGroup | None = None
_unused: list[LimitGroup] = []
_spare_lock = threading.Lock()


def _mine(group: LimitGroup) -> bool:
    return cgroup_owner(group.name) == os.getpid()


def _limit_group(limits: Limits) -> LimitGroup:
    """This sandbox's cgroups: the spare ones when they have these limits, else new ones."""
    global _spare
    with _spare_lock:
        spare, _spare = _spare, None
        if spare is not None and not _mine(spare):  # a forked controller's parent owns it
            spare = None
        if spare is not None and spare.limits != limits:
            _unused.append(spare)
            spare = None
        _remove_unused(wait=False)
        if not _exit_hook:
            _exit_hook.append(True)
            atexit.register(_drop_spares)
    return spare if spare is not None else LimitGroup(limits)


def _return_spare(group: LimitGroup) -> bool:
    """Give `group` back as the spare (the sandbox using it failed before it started: the
    warm sandbox in it is still there); False when there is another spare already."""
    global _spare
    with _spare_lock:
        if _spare is None and _mine(group):
            _spare = group
            return True
    return False


class _Warmer:
    """One thread per controller process that prepares the next sandbox after each
    creation, off the creating thread's path: the spare cgroups (`_spare`) and, in them,
    the zygote's warm sandbox (`rootfs.start_warm`)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._want: tuple[Limits, dict] | None = None
        self._thread: threading.Thread | None = None
        self._owner = os.getpid()
        self._created = 0  # sandboxes this process created
        self._stopped = False  # the process is ending: nothing more is prepared
        #: set while nothing is asked for or being prepared (`wait_idle`)
        self._idle = threading.Event()
        self._idle.set()

    def prepare(self, limits: Limits, spec: dict) -> None:
        """Prepare a sandbox like the one just created with `spec`, from the second creation
        in this process on (a one-shot process, such as `minisandbox run`, never pays for a
        warm sandbox it will not use)."""
        with self._lock:
            if self._owner != os.getpid():  # a forked controller (the parent's thread is not here)
                self._owner, self._created, self._thread, self._want = os.getpid(), 0, None, None
            self._created += 1
            if self._created < 2 or self._stopped:
                return
            self._want = (limits, spec)
            self._idle.clear()
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="minisandbox-warmer", daemon=True)
                self._thread.start()
        self._wake.set()

    def _run(self) -> None:
        global _spare
        while True:
            fired = self._wake.wait(30.0)
            with self._lock:
                want, self._want = self._want, None
                self._wake.clear()
                if want is None and not fired:  # idle: end (the next `prepare` starts another)
                    self._thread = None
                    self._idle.set()
                    return
            if want is None:
                self._mark_idle()
                continue
            limits, spec = want
            try:
                with _spare_lock:
                    spare = _spare
                if spare is None or spare.limits != limits:
                    spare = LimitGroup(limits)
                    with _spare_lock:
                        if _spare is not None:
                            _unused.append(_spare)
                        _spare = spare
                rootfs.start_warm({**spec, "cgroup_procs": list(spare.procs_files)})
            except Exception:  # a warm sandbox is an optimisation: the next one starts cold
                pass
            self._mark_idle()

    def _mark_idle(self) -> None:
        with self._lock:
            if self._want is None:
                self._idle.set()

    def stop(self, timeout: float) -> bool:
        """Prepare nothing more (the process is ending) and wait up to `timeout` for the
        preparation under way: cgroups it is creating when the exit handlers remove the
        spare ones would be left behind (they were, about one process in ten that ended
        right after its second sandbox). False on timeout."""
        with self._lock:
            self._stopped = True
            self._want = None
        self._wake.set()
        return self._idle.wait(timeout)

    def wait_idle(self, timeout: float) -> bool:
        """Wait until the sandbox asked for last is prepared (or failed): what it opened
        (sockets, cgroups) exists from then on, for callers that depend on which descriptors
        are free. False on timeout."""
        return self._idle.wait(timeout)


_warmer = _Warmer()


def _after_fork_in_child() -> None:
    """A forked controller starts with fresh locks (another thread may have held one at the
    fork) and without its parent's spare cgroups or warmer."""
    global _spare_lock, _spare, _warmer
    _spare_lock = threading.Lock()
    _spare = None
    _unused.clear()
    _warmer = _Warmer()


os.register_at_fork(after_in_child=_after_fork_in_child)


_exit_hook: list[bool] = []


def _remove_unused(*, wait: bool) -> None:
    """Remove the spare cgroups nobody will use, once empty (caller holds `_spare_lock`)."""
    for group in list(_unused):
        if not _mine(group):
            _unused.remove(group)
            continue
        try:
            if wait:
                group.close()
                _unused.remove(group)
            elif all(remove_cgroup_tree(d) for d in group.dirs):
                _unused.remove(group)
        except (OSError, MinisandboxError):
            pass


def _drop_spares(final: bool = True) -> None:
    """At exit: end the warm sandbox, then remove the spare cgroups it was in, once the
    warmer has finished what it was preparing (`final`: and prepares nothing more)."""
    global _spare
    if final:
        _warmer.stop(5.0)
    else:
        _warmer.wait_idle(5.0)
    rootfs.drop_warm()
    with _spare_lock:
        if _spare is not None:
            _unused.append(_spare)
            _spare = None
        _remove_unused(wait=True)


#: (pid, state directory) whose record is removed at a clean exit (`_release_record`)
_releasing: set[tuple[int, str]] = set()


def _release_record(tracker: leftovers.Tracker) -> None:
    """At exit (after `_drop_spares`): a process whose warmer never ran (one sandbox, as a
    `run` or a helper's worker: no thread can make a cgroup after the check) removes its
    record when its sandboxes left nothing behind (`Tracker.release`), so the next start's
    `reap` has nothing to read."""
    if _warmer._created < 2:
        try:
            tracker.release()
        except OSError:  # the record stays: the next `reap` reads it
            pass


def _track_host_resources(cfg: SandboxConfig) -> leftovers.Tracker:
    """Crash cleanup (minisandbox.sandbox.leftovers): the first sandbox of this process on
    a node removes what dead controllers left there; every sandbox records, before
    creating them, the parents of the host resources it makes (its cgroups, its
    scratch directory), so a SIGKILL of this process leaves nothing that the next start
    or `minisandbox cache gc` cannot find."""
    state = state_dir()
    key = (os.getpid(), str(state))
    with _reaped_lock:
        if key not in _reaped:
            _reaped.add(key)
            leftovers.reap(state)
    tracker = leftovers.Tracker.get(state)
    with _reaped_lock:
        if key not in _releasing:
            _releasing.add(key)
            atexit.register(_release_record, tracker)
    parents = leftovers.caller_cgroup_dirs()  # every sandbox has a cgroup where one can be made
    tracker.add(cgroup_parents=parents, scratch_parents=[cfg.scratch_dir] if cfg.scratch_dir else [])
    return tracker


def _watch_thread(ref: weakref.ref[Sandbox], wake: threading.Event, interval: float = 0.5) -> None:
    """The CPU watcher of one sandbox: a pass every `interval` seconds until nothing is
    left to watch, the sandbox is closed (`wake`) or collected."""
    while True:
        sb = ref()
        if sb is None or not sb._watch_pass():
            return
        del sb
        if wake.wait(interval):
            return


def _check_owner(layer: Layer, rootless: bool | None) -> None:
    """A rootless sandbox maps only the runner's uid and gid: files of other owners appear
    as nobody, and the overlay cannot copy them up (EOVERFLOW) - fail early instead."""
    if rootless is False or (rootless is None and os.geteuid() == 0):
        return
    st = os.stat(layer.lower)
    if (st.st_uid, st.st_gid) != (os.geteuid(), os.getegid()):
        raise rootfs.SandboxError(
            f"layer {layer.lower} is owned by {st.st_uid}:{st.st_gid}, but a rootless sandbox can only write "
            f"layers owned by its user ({os.geteuid()}:{os.getegid()}): restore the layers as this user"
        )


def _feed(fd: int, data: bytes) -> None:
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
    except (BrokenPipeError, OSError):
        pass


def _collect(
    root: rootfs.PrivateRoot,
    cid: int,
    rfd: int,
    timeout: float | None,
    max_output: int,
    cpu: CpuWatch | None = None,
    cpu_rlimit: int | None = None,
) -> ExecResult:
    """Read a command's output (stdout and stderr on one pipe) until it exits; see
    `_collect_fds`."""
    (out,), code, timed_out, truncated, limit_hit = _collect_fds(root, cid, [rfd], timeout, max_output, cpu, cpu_rlimit)
    return ExecResult(
        out.decode("utf-8", "replace"),
        code,
        timed_out,
        truncated,
        limit_hit=limit_hit,
        cpu_seconds=None if cpu is None else round(cpu.used, 3),
    )


def _buffered(fd: int) -> int:
    """Bytes waiting in pipe `fd` (FIONREAD; 0 if the kernel will not say)."""
    try:
        return struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"))[0]
    except OSError:
        return 0


def _collect_fds(
    root: rootfs.PrivateRoot,
    cid: int,
    fds: list[int],
    timeout: float | None,
    max_output: int,
    cpu: CpuWatch | None = None,
    cpu_rlimit: int | None = None,
) -> tuple[list[bytes], int, bool, bool, str]:
    """Read every pipe in `fds` until command `cid` exits (or times out: kill its tree);
    returns (bytes per fd, exit code, timed out, truncated, limit hit). Waits with
    `rootfs.wait_readable` (poll, so descriptors past 1024 work). Background processes that
    keep a pipe open do not block: after the exit, what is buffered at that moment (what
    the command wrote before it exited) is read in full, however late this thread runs;
    anything written later only for at most 20 ms. At most `max_output` bytes are kept per
    pipe.

    CPU time: with `cpu`, the command's cgroup total is checked at least every 0.5 s and
    the command's every process killed once it passes the limit (limit hit "cpu", a line
    saying so appended to the last pipe's output). Without a cgroup (`cpu_rlimit` set),
    a death by SIGXCPU is reported the same way."""
    chunks: dict[int, list[bytes]] = {fd: [] for fd in fds}
    sizes = dict.fromkeys(fds, 0)
    open_fds = list(fds)
    timed_out = False
    limit_hit = ""
    deadline = None if timeout is None else time.monotonic() + timeout
    code: int | None = None
    drain_end = 0.0
    owed: dict[int, int] = {}  # bytes buffered in each pipe when the exit was seen: read them all
    while True:
        if code is None:
            code = root.poll(cid)
            if code is not None:
                owed = {fd: _buffered(fd) for fd in open_fds}
                drain_end = time.monotonic() + 0.02
                if cpu is not None and cpu.exceeded(force=True) and code != 0:
                    limit_hit = cpu.hit  # the RLIMIT_CPU backstop got there first
        if code is None and cpu is not None and cpu.exceeded():
            limit_hit = cpu.hit
            cpu.stop()
            code = root.wait(cid, 30)
            cpu.exceeded(force=True)  # the final total
            owed = {fd: _buffered(fd) for fd in open_fds}
            drain_end = time.monotonic() + 0.02
            continue
        now = time.monotonic()
        if code is not None and (
            not open_fds or (now >= drain_end and not any(owed.get(fd, 0) > 0 for fd in open_fds))
        ):
            break
        if code is None and deadline is not None and now >= deadline:
            timed_out = True
            root.kill(cid, signal.SIGKILL)
            code = root.wait(cid, 30)
            owed = {fd: _buffered(fd) for fd in open_fds}
            drain_end = time.monotonic() + 0.02
            continue
        watch: list[int] = list(open_fds)
        if code is None:
            watch.append(root.fileno())
            wait = 0.5 if deadline is None else max(0.0, min(0.5, deadline - now))
        else:
            wait = 0.0
        ready = rootfs.wait_readable(watch, wait)
        got = False
        for fd in open_fds[:]:
            if fd not in ready:
                continue
            got = True
            data = os.read(fd, 1 << 16)
            if not data:
                open_fds.remove(fd)
                continue
            owed[fd] = owed.get(fd, 0) - len(data)
            if sizes[fd] < max_output:
                chunks[fd].append(data[: max_output - sizes[fd]])
            sizes[fd] += len(data)
        if code is not None and not got:
            break  # exited and nothing more buffered
    truncated = any(n > max_output for n in sizes.values())
    outs = [b"".join(chunks[fd]) for fd in fds]
    if not limit_hit and cpu is None and cpu_rlimit is not None and code == -signal.SIGXCPU:
        limit_hit = "cpu"
    if limit_hit and outs:
        note = cpu.message() if cpu is not None else rlimit_cpu_message(cpu_rlimit)
        outs[-1] += note.encode()
    return outs, code, timed_out, truncated, limit_hit
