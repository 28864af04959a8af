"""The sandbox's seccomp filter: a deny list modelled on Docker's default profile.

Why a filter on top of dropped capabilities: a payload without capabilities can still
create a *nested user namespace* (`unshare(CLONE_NEWUSER)`), where it holds every
capability again: enough to mount a fresh cgroupfs and rewrite its limits, or to reach
kernel interfaces that are not namespaced at all (the kernel keyring, bpf, perf). The
filter closes those doors for every process a sandbox's init spawns.

What it does (an attempted call fails with EPERM unless noted):

* `clone3` answers ENOSYS: seccomp cannot look into its flags struct, and libc falls back
  to `clone`, whose flags *can* be checked (Docker does the same);
* `clone` and `unshare` with any `CLONE_NEW*` flag (nested namespaces);
* `setns`, the mount family (`mount`, `umount2`, `pivot_root`, `open_tree`, `move_mount`,
  `fsopen`, `fsconfig`, `fsmount`, `fspick`, `mount_setattr`);
* the keyring (`keyctl`, `add_key`, `request_key`), `bpf`, `perf_event_open`,
  `userfaultfd`, `io_uring_*`;
* kernel modules and kexec, clocks, swap, reboot, accounting, quotas, `syslog`,
  `open_by_handle_at` and the other calls Docker's profile leaves out;
* a call made through another ABI (32-bit `int 0x80` on x86_64) kills the process, and
  x32 calls fail, so no call number can be reached under a second name.

* `ptrace`, `process_vm_readv`/`process_vm_writev` and `pidfd_getfd` (reading or driving
  another process), unless the sandbox was created with `ptrace=True` (debuggers: gdb,
  strace); even then init and its helpers are out of reach, being non-dumpable.

Everything else is allowed (threads, fork, exec, sockets).

Init and its helpers run under a filter too (`init_program`): the same deny list, except
that init may still mount (a payload's own /proc, see `init_program._enter_own_pidns`) and make
a new pid and mount namespace for it; a nested user namespace, the keyring, bpf and the
rest stay closed to it, so a process that took over init or a helper gains nothing a
payload lacks but its uid. This module imports only the standard library: `rootfs` runs it in the
sandbox's init (a ``python -I -S`` script), which builds the program once and installs it
in each payload child after ``no_new_privs``, right before exec.
"""

from __future__ import annotations

import errno
import os
import struct

#: Audit architecture of each supported machine (linux/audit.h).
AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}

#: x86_64 calls with this bit set are the x32 ABI's (same audit arch).
X32_SYSCALL_BIT = 0x40000000

#: Every namespace flag of clone/unshare: NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID,
#: NEWNET, NEWTIME.
CLONE_NEW_ANY = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000 | 0x00000080

#: Denied with EPERM: name -> (x86_64 number, aarch64 number); None where the call does not
#: exist on that architecture.
DENIED: dict[str, tuple[int | None, int | None]] = {
    "keyctl": (250, 219),
    "add_key": (248, 217),
    "request_key": (249, 218),
    "bpf": (321, 280),
    "perf_event_open": (298, 241),
    "userfaultfd": (323, 282),
    "io_uring_setup": (425, 425),
    "io_uring_enter": (426, 426),
    "io_uring_register": (427, 427),
    "setns": (308, 268),
    "mount": (165, 40),
    "umount2": (166, 39),
    "pivot_root": (155, 41),
    "open_tree": (428, 428),
    "move_mount": (429, 429),
    "fsopen": (430, 430),
    "fsconfig": (431, 431),
    "fsmount": (432, 432),
    "fspick": (433, 433),
    "mount_setattr": (442, 442),
    "kexec_load": (246, 104),
    "kexec_file_load": (320, 294),
    "init_module": (175, 105),
    "finit_module": (313, 273),
    "delete_module": (176, 106),
    "create_module": (174, None),
    "get_kernel_syms": (177, None),
    "query_module": (178, None),
    "acct": (163, 89),
    "swapon": (167, 224),
    "swapoff": (168, 225),
    "reboot": (169, 142),
    "settimeofday": (164, 170),
    "clock_settime": (227, 112),
    "clock_adjtime": (305, 266),
    "adjtimex": (159, 171),
    "quotactl": (179, 60),
    "quotactl_fd": (443, 443),
    "nfsservctl": (180, 42),
    "lookup_dcookie": (212, 18),
    "open_by_handle_at": (304, 265),
    "name_to_handle_at": (303, 264),
    "iopl": (172, None),
    "ioperm": (173, None),
    "uselib": (134, None),
    "ustat": (136, None),
    "sysfs": (139, None),
    "_sysctl": (156, None),
    "syslog": (103, 116),
    "vhangup": (153, 58),
}

#: Denied unless the sandbox allows debuggers (`ptrace=True`).
PTRACE: dict[str, tuple[int | None, int | None]] = {
    "ptrace": (101, 117),
    "process_vm_readv": (310, 270),
    "process_vm_writev": (311, 271),
    "pidfd_getfd": (438, 438),
}

#: What init itself still needs of DENIED after set-up: /proc for a payload's own pid
#: namespace (mount, a read-only remount through mount_setattr).
INIT_ALLOWED = ("mount", "mount_setattr")

#: Namespace flags init may still use: a payload's own pid namespace needs a mount
#: namespace for its /proc.
INIT_NAMESPACES = 0x20000000 | 0x00020000

#: Denied only when args[0] (the flags) holds a CLONE_NEW* bit.
NAMESPACE_FLAGS_ARG0 = {"clone": (56, 220), "unshare": (272, 97)}

#: Answered with ENOSYS so that libc falls back to an older call the filter can inspect.
NOT_IMPLEMENTED = {"clone3": (435, 435)}

# classic BPF opcodes (linux/filter.h) and seccomp return values (linux/seccomp.h)
_LD_W_ABS = 0x20
_JEQ_K = 0x15
_JGE_K = 0x35
_JSET_K = 0x45
_RET_K = 0x06
RET_ALLOW = 0x7FFF0000
RET_ERRNO = 0x00050000
RET_KILL_PROCESS = 0x80000000

# offsets in struct seccomp_data
_NR, _ARCH, _ARG0_LOW = 0, 4, 16

PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2
_MACHINES = ("x86_64", "aarch64")


class SeccompUnsupported(OSError):
    """No filter for this machine, or the kernel refused it."""


def _ins(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k & 0xFFFFFFFF)


def _numbers(table: dict[str, tuple[int | None, int | None]], machine: str) -> list[int]:
    col = _MACHINES.index(machine)
    return sorted({nrs[col] for nrs in table.values() if nrs[col] is not None})


def program(
    machine: str | None = None, *, ptrace: bool = False, allow: tuple[str, ...] = (), namespaces: int = 0
) -> bytes:
    """The filter as packed `struct sock_filter` instructions for `machine`: DENIED (minus
    `allow`), the PTRACE calls unless `ptrace`, and clone/unshare with any CLONE_NEW* flag
    except those in `namespaces`."""
    machine = machine or os.uname().machine
    if machine not in AUDIT_ARCH:
        raise SeccompUnsupported(
            errno.ENOSYS,
            f"no seccomp filter for {machine}: add its syscall numbers to "
            "minisandbox.sandbox.seccomp, or create the sandbox with seccomp=False",
        )
    eperm, enosys = RET_ERRNO | errno.EPERM, RET_ERRNO | errno.ENOSYS
    out = [
        _ins(_LD_W_ABS, _ARCH),
        _ins(_JEQ_K, AUDIT_ARCH[machine], 1, 0),
        _ins(_RET_K, RET_KILL_PROCESS),
        _ins(_LD_W_ABS, _NR),
    ]
    if machine == "x86_64":
        out += [_ins(_JGE_K, X32_SYSCALL_BIT, 0, 1), _ins(_RET_K, eperm)]
    denied = {k: v for k, v in DENIED.items() if k not in allow}
    if not ptrace:
        denied.update(PTRACE)
    for nr in _numbers(denied, machine):
        out += [_ins(_JEQ_K, nr, 0, 1), _ins(_RET_K, eperm)]
    for nr in _numbers(NOT_IMPLEMENTED, machine):
        out += [_ins(_JEQ_K, nr, 0, 1), _ins(_RET_K, enosys)]
    flagged = _numbers(NAMESPACE_FLAGS_ARG0, machine)
    for i, nr in enumerate(flagged):  # a match jumps past the other tests and the ALLOW below
        out.append(_ins(_JEQ_K, nr, len(flagged) - i, 0))
    out += [
        _ins(_RET_K, RET_ALLOW),
        _ins(_LD_W_ABS, _ARG0_LOW),  # the flags are an int: the low word is all of them
        _ins(_JSET_K, CLONE_NEW_ANY & ~namespaces, 0, 1),
        _ins(_RET_K, eperm),
        _ins(_RET_K, RET_ALLOW),
    ]
    return b"".join(out)


def init_program(machine: str | None = None, *, ptrace: bool = False) -> bytes:
    """The filter of a sandbox's init and every helper it forks (see the module's doc).
    Payloads inherit it below their own, so it allows ptrace exactly when theirs does."""
    return program(machine, ptrace=ptrace, allow=INIT_ALLOWED, namespaces=INIT_NAMESPACES)


_prctl = None
_SockFprog = None


def _prctl_fn():
    """libc's prctl, looked up once per process (a sandbox's init installs a filter in every
    payload child it forks: the lookup is inherited instead of repeated per child), and
    the `struct sock_fprog` type. ctypes is imported here, not when the module is: the
    controller imports this module for its tables only (ctypes is ~4 ms of a `run`'s CPU),
    and the fork server calls this before it forks anything (init_program's `_zygote_main`)."""
    global _prctl, _SockFprog
    if _prctl is None:
        import ctypes

        class SockFprog(ctypes.Structure):
            _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

        fn = ctypes.CDLL(None, use_errno=True).prctl
        fn.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
        _prctl, _SockFprog = fn, SockFprog
    return _prctl


def install(prog: bytes) -> None:
    """Install `prog` on the calling thread (no_new_privs must be set already, or the caller
    hold CAP_SYS_ADMIN in its user namespace; children and exec'd programs inherit it, it
    can never be removed, and a second filter only adds to the first)."""
    import ctypes  # (already loaded by `_prctl_fn`'s first call: this is a lookup)

    prctl = _prctl_fn()
    buf = ctypes.create_string_buffer(prog, len(prog))
    fprog = _SockFprog(len(prog) // 8, ctypes.cast(buf, ctypes.c_void_p))
    if prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(fprog), 0, 0) != 0:
        err = ctypes.get_errno()
        raise SeccompUnsupported(
            err,
            f"installing the seccomp filter failed: {errno.errorcode.get(err, err)} "
            "(kernel without CONFIG_SECCOMP_FILTER?); create the sandbox with seccomp=False",
        )


def status() -> str:
    """This process's seccomp mode as /proc reports it ("0" none, "2" filter), for checks."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("Seccomp:"):
                    return line.split()[1]
    except OSError:
        pass
    return "unknown"
