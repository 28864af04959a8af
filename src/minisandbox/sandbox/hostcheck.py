"""What this machine gives a sandbox, checked for real: `minisandbox doctor`.

Why: the same code enforces limits and isolation differently by host and by user (cgroup v2
delegation, cgroup v1, or per-process rlimits; seccomp; user namespaces), and the weaker
fallbacks are silent. Each check here does the real thing once (creates and removes a
limit cgroup, installs the seccomp filter in a child process, joins a keyring) and says
what a sandbox created by *this* user would get, and what to do about a weak spot.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import asdict, dataclass

from minisandbox.sandbox.limits import LimitGroup, Limits, cgroup_parents, v2_delegated

OK, WARN, FAIL = "ok", "warn", "fail"


@dataclass(frozen=True)
class Check:
    name: str
    status: str  # ok | warn | fail
    detail: str

    def to_dict(self) -> dict[str, str]:
        return asdict(self)


def _userns() -> Check:
    try:
        n = int(open("/proc/sys/user/max_user_namespaces").read())
    except OSError:
        n = -1
    if os.geteuid() == 0:
        return Check(
            "user namespaces",
            OK if n > 0 else WARN,
            f"user.max_user_namespaces = {n}" + ("" if n > 0 else "; rootless sandboxes need it > 0"),
        )
    if n > 0:
        return Check("user namespaces", OK, f"user.max_user_namespaces = {n} (rootless sandboxes work)")
    return Check(
        "user namespaces",
        FAIL,
        "user.max_user_namespaces = 0: rootless sandboxes cannot start; "
        "ask an admin for `sysctl -w user.max_user_namespaces=15000`",
    )


_SECCOMP_PROBE = """
import ctypes, errno, os, sys
from minisandbox.sandbox import seccomp
libc = ctypes.CDLL(None, use_errno=True)
libc.prctl(38, 1, 0, 0, 0)  # no_new_privs, as in a payload
seccomp.install(seccomp.program())
nr = seccomp.NAMESPACE_FLAGS_ARG0["unshare"][seccomp._MACHINES.index(os.uname().machine)]
ok = libc.syscall(nr, 0x10000000) == 0  # unshare(CLONE_NEWUSER)
print("unshare allowed" if ok else errno.errorcode[ctypes.get_errno()])
"""


def _seccomp() -> Check:
    proc = subprocess.run(
        [sys.executable, "-c", _SECCOMP_PROBE],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)},
    )
    out = (proc.stdout.strip().splitlines() or [""])[-1]
    if proc.returncode == 0 and out == "EPERM":
        return Check("seccomp filter", OK, "installed in a test process: a nested user namespace is refused (EPERM)")
    err = (proc.stderr.strip().splitlines() or [out])[-1]
    return Check(
        "seccomp filter",
        FAIL,
        f"could not be installed or did not hold ({err}); sandboxes fail to "
        "start unless created with seccomp=False (--no-seccomp), which leaves nested namespaces open",
    )


def _limits() -> list[Check]:
    group = LimitGroup(Limits.default())
    try:
        mode = dict(group.mode)
    finally:
        group.close()
    out = []
    parents = cgroup_parents()
    v2 = parents.get("v2")
    why = (
        f"cgroup v2 {v2} does not delegate memory+pids to uid {os.geteuid()}"
        if v2 and not v2_delegated(v2)
        else "no writable cgroup for this user"
    )
    fix = (
        "for whole-sandbox accounting run under a delegated cgroup v2 (e.g. `systemd-run --user "
        "-p Delegate=yes --scope minisandbox ...`) or as root"
    )
    memory = mode.get("memory", "none")
    if memory.startswith("cgroup"):
        out.append(Check("memory limit", OK, f"{memory}: the whole sandbox, tmpfs pages included"))
    else:
        out.append(
            Check(
                "memory limit",
                WARN,
                f"RLIMIT_AS per process ({why}): a process tree can use a multiple "
                f"of the limit and tmpfs pages are not counted (the tmpfs budget bounds those); {fix}",
            )
        )
    pids = mode.get("pids", "none")
    if pids.startswith("cgroup"):
        out.append(Check("pids limit", OK, f"{pids}: every process and thread of the sandbox"))
    elif os.geteuid() != 0:
        out.append(
            Check(
                "pids limit",
                OK,
                "RLIMIT_NPROC, counted per uid of the sandbox's own user namespace (= the sandbox's processes)",
            )
        )
    else:
        out.append(Check("pids limit", WARN, f"RLIMIT_NPROC counted over all of uid 0's processes ({why}); {fix}"))
    cpu = mode.get("cpu_seconds", "none")
    if cpu.startswith("cgroup"):
        out.append(Check("cpu time limit", OK, f"a total per command: {cpu}"))
    else:
        cpu_fix = (
            "for a per-command total run as root or under a writable (delegated) cgroup v2, e.g. "
            "`systemd-run --user -p Delegate=yes --scope minisandbox ...`"
        )
        out.append(
            Check(
                "cpu time limit",
                WARN,
                f"RLIMIT_CPU per process (no writable cgroup v2 or cpuacct "
                f"cgroup for uid {os.geteuid()}): a command with N busy processes can use N times "
                f"the limit; {cpu_fix}",
            )
        )
    budget = mode.get("sandbox_cpu_seconds", "none")
    total = Limits.default().sandbox_cpu_seconds
    if budget.startswith("cgroup"):
        out.append(Check("sandbox cpu budget", OK, f"{total} s per sandbox, background processes included: {budget}"))
    elif total is None:
        out.append(
            Check(
                "sandbox cpu budget",
                WARN,
                "lifted ($MINISANDBOX_LIMITS sandbox_cpu=none): a sandbox's "
                "background processes can use CPU until it closes",
            )
        )
    else:
        out.append(
            Check(
                "sandbox cpu budget",
                WARN,
                f"not enforced (no writable cgroup v2 or cpuacct cgroup for uid "
                f"{os.geteuid()}): what is enforced instead is RLIMIT_CPU per process (the per-command "
                f"limit), so background processes a command leaves behind can together use more than "
                f"{total} s until the sandbox closes; for the budget run as root or under a delegated "
                "cgroup v2 (`systemd-run --user -p Delegate=yes --scope minisandbox ...`)",
            )
        )
    out.append(Check("tmpfs / output limits", OK, "one tmpfs budget per sandbox; output kept per command"))
    return out


def _keyring() -> Check:
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    nr = {"x86_64": 250, "aarch64": 219}.get(os.uname().machine)
    if nr is None:
        return Check("session keyring", WARN, f"unknown keyctl number on {os.uname().machine}")
    if libc.syscall(nr, 0, -3, 0) >= 0:  # KEYCTL_GET_KEYRING_ID @s (no change)
        return Check("session keyring", OK, "keyrings available: each sandbox joins a fresh session keyring")
    return Check("session keyring", OK, "keyrings unavailable here (nothing to isolate)")


def _user_counters() -> Check:
    """Whose per-user kernel counters (inotify instances, queued signals, message queue
    bytes) a payload draws on: root sandboxes' own owner uids, or host root's."""
    from minisandbox.sandbox import init_program, rootfs

    name = "per-user counters"
    if os.geteuid() != 0:
        return Check(
            name,
            OK,
            f"each sandbox gets 1/{init_program.USER_COUNTER_SHARE} of this user's inotify instances and watches, "
            f"queued signals and message queue bytes ({init_program.USER_COUNTER_SHARE} sandboxes at once can "
            "still take them all)",
        )
    try:
        base = rootfs.userns_base({"rootless": False})
    except rootfs.SandboxError as exc:
        return Check(name, FAIL, str(exc))
    if base is not None:
        return Check(
            name,
            OK,
            f"each sandbox's user namespace belongs to uid {base} + its starter's pid: payloads draw on that "
            "uid's inotify instances, queued signals and message queues, not host root's",
        )
    why = (
        "MINISANDBOX_USERNS_BASE=off"
        if os.environ.get("MINISANDBOX_USERNS_BASE", "").strip().lower() == "off"
        else "not root of the host's user namespace"
    )
    return Check(
        name,
        WARN,
        f"payloads are uid 0 of this user namespace ({why}): one can take all of root's inotify instances, "
        "queued signals and message queues while it runs (unset MINISANDBOX_USERNS_BASE, run as host root)",
    )


_ISOLATION_PROBE = (
    "import ctypes\n"
    "libc = ctypes.CDLL(None, use_errno=True)\n"
    "init = [l.split()[1] for l in open('/proc/1/status') if l.startswith('Seccomp:')][0]\n"
    "print(init, libc.ptrace(16, 1, 0, 0), ctypes.get_errno())\n"
)


def _isolation() -> Check:
    """A real sandbox: its init is under seccomp and cannot be ptraced from inside."""
    import errno

    from minisandbox.sandbox.sandbox import Sandbox

    try:
        with Sandbox([], limits=Limits.unlimited()) as sb:
            res = sb.run([sys.executable if sys.executable.startswith("/usr/") else "python3", "-c", _ISOLATION_PROBE])
    except Exception as exc:  # reported as the check's result
        return Check("init and helpers", FAIL, f"could not start a sandbox to check: {exc}")
    fields = res.output.split()
    if (
        res.returncode == 0
        and len(fields) == 3
        and fields[0] == "2"
        and fields[1] == "-1"
        and int(fields[2]) == errno.EPERM
    ):
        return Check(
            "init and helpers",
            OK,
            "init runs under seccomp and no payload can ptrace it (non-dumpable; "
            "ptrace is off unless --allow-ptrace); the controller's file reads/writes refuse FIFOs, "
            "sockets, devices and links out of the sandbox",
        )
    return Check(
        "init and helpers",
        FAIL,
        f"init's isolation did not hold (seccomp mode, ptrace, errno: {res.output.strip()[:200]})",
    )


def run_checks() -> list[Check]:
    """Every check, in the order `minisandbox doctor` prints them."""
    return [_userns(), _seccomp(), *_limits(), _user_counters(), _keyring(), _isolation()]
