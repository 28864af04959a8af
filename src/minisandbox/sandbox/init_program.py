"""The sandbox's init program: the fork server, each sandbox's starter and init, the
command spawner and the file-open helpers. The controller side (`minisandbox.sandbox.rootfs`)
starts it as the fork server, ``python -I -S`` loading this file by path and calling
`_zygote_main(FD)` (`rootfs._ZYGOTE_BOOT`; ``init_program.py --zygote FD`` does the same
from a shell), and talks to it over
SOCK_SEQPACKET sockets; this whole file runs in those processes.

Why a helper process: setting up namespaces needs a single-threaded process (user
namespaces refuse threaded callers, and forking a threaded Python then running Python code
in the child can deadlock). So the controller starts this file once, a *fork server* (the
"zygote"). Per sandbox the zygote forks *init* (~1 ms instead of 20-90 ms for a new
interpreter), pid 1 of a new pid namespace, which makes its other namespaces (rootless, or
joining a mount holder's namespaces: a starter between them unshares or joins the
namespaces and forks init); init builds the root, pivots into it and then serves requests over its own
control socket: spawn a payload, kill a process tree, open a file. Every payload is
started with all capabilities dropped (bounding set too), locked securebits and
no_new_privs, so it cannot remount, mknod or escape even when it runs as uid 0. A warm
sandbox stops after the spec-independent part of the set-up until its spec comes
(`_await_spec`); ordinary commands are started by a command spawner (`_spawner_main`).

Lifetime is bound to the control socket: when the caller closes it (or dies), init kills
every process of the namespace and exits; the kernel then tears down the mount namespace
and with it every mount (the root and its scratch space live in tmpfs, so nothing is left
on the host).

This module imports only the standard library and `seccomp.py` (loaded by path when it runs
as a script; `minisandbox.errors` only when importable): it runs under ``-I -S``.
"""

from __future__ import annotations

import _signal  # `signal.signal` without the enum conversion (see `_set_handler`)
import _socket  # not `socket`: its constants made enums, and `selectors` (2-3 ms of a warm run's CPU)
import array
import contextlib
import errno
import fcntl  # noqa: F401  (imported before pivot_root: the stdlib is not visible after it)
import gc
import json
import os
import re
import resource  # noqa: F401  (same reason)
import select
import signal
import stat
import struct
import sys
import time

# ---------------------------------------------------------------------------- constants

CLONE_NEWNS = 0x00020000
CLONE_NEWCGROUP = 0x02000000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000

MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_NOATIME = 1024
MS_NODIRATIME = 2048
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
MS_RELATIME = 1 << 21
MNT_DETACH = 2

AT_FDCWD = -100
AT_RECURSIVE = 0x8000
MOUNT_ATTR_RDONLY = 0x1

PR_CAPBSET_DROP = 24
PR_SET_SECUREBITS = 28
PR_SET_NO_NEW_PRIVS = 38
PR_SET_DUMPABLE = 4
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
# SECBIT_NOROOT, NO_SETUID_FIXUP, KEEP_CAPS_LOCKED, NO_CAP_AMBIENT_RAISE and their locks.
SECUREBITS_LOCKED_DOWN = 0x01 | 0x02 | 0x04 | 0x08 | 0x20 | 0x40 | 0x80
LINUX_CAPABILITY_VERSION_3 = 0x20080522

_SYSCALLS = {
    "x86_64": {
        "pivot_root": 155,
        "capset": 126,
        "mount_setattr": 442,
        "keyctl": 250,
        "openat2": 437,
        "close_range": 436,
    },
    "aarch64": {
        "pivot_root": 41,
        "capset": 91,
        "mount_setattr": 442,
        "keyctl": 219,
        "openat2": 437,
        "close_range": 436,
    },
}

# openat2(2) resolve flags
RESOLVE_NO_MAGICLINKS = 0x02
RESOLVE_IN_ROOT = 0x10

#: How long init lets a file-open helper run before killing it (it opens with O_NONBLOCK
#: and never reads, so only a stopped or starved helper gets there).
OPEN_HELPER_TIMEOUT = 5.0

#: Host system directories bound read-only into every private root (symlinks of a
#: merged-/usr system are recreated as symlinks).
SYSTEM_DIRS = ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "etc")

#: Files under /etc hidden from the payload (a uid-0 payload could read them otherwise).
ETC_MASKS = ("/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-", "/etc/ssh")


def _private_etc(top: str = "/etc") -> tuple[str, ...]:
    """Every regular file under `top` that other users cannot read and every directory they
    cannot enter, not descending into those: a root sandbox's payload is uid 0 without
    capabilities, so it owns (and can read) each root-owned 0600 file there (a database's
    maintenance password, a cluster's credentials); masked as ETC_MASKS are. ~1,300
    entries, a few ms: walked once per fork server (`_zygote_main`)."""
    found: list[str] = []
    try:
        entries = list(os.scandir(top))
    except OSError:
        return ()
    for entry in entries:
        try:
            mode = entry.stat(follow_symlinks=False).st_mode
        except OSError:
            continue
        if stat.S_ISDIR(mode):
            if mode & 0o005 != 0o005:
                found.append(entry.path)
            else:
                found += _private_etc(entry.path)
        elif stat.S_ISREG(mode) and not mode & 0o004:
            found.append(entry.path)
    return tuple(found)


#: ETC_MASKS and, for a root fork server, `_private_etc()` (set in `_zygote_main`).
_ETC_MASKED: tuple[str, ...] = ETC_MASKS

#: /proc entries made read-only (as container runtimes do): a uid-0 payload without
#: capabilities could otherwise still write root-owned sysctls of the host.
PROC_READONLY = ("sys", "sysrq-trigger", "irq", "bus", "fs")

#: /proc files hidden behind /dev/null (Docker's masked paths): kernel-wide state that is
#: not namespaced (the keyring's key list, kernel memory, timers, the scheduler).
PROC_MASKED = ("keys", "key-users", "kcore", "timer_list", "sched_debug", "latency_stats")

DEV_NODES = ("null", "zero", "full", "random", "urandom", "tty")

#: Most ptys a sandbox's devpts instance hands out. Every instance but the host's first
#: draws on one pool of the kernel (`kernel.pty.max` - `kernel.pty.reserve`, 3,072 by
#: default): uncapped, one payload took all of it and every other sandbox's (and container's)
#: /dev/ptmx failed with ENOSPC.
DEVPTS_MAX = 64

#: Candidate host directories to mount the scratch tmpfs on (private mount ns only).
_BASE_CANDIDATES = ("/mnt", "/media", "/srv", "/boot", "/run", "/var/empty", "/opt")


def _load_seccomp():
    """minisandbox.sandbox.seccomp, also when this file runs as a stdlib-only script."""
    try:
        from minisandbox.sandbox import seccomp
    except ImportError:
        import importlib.util

        where = os.path.join(os.path.dirname(os.path.abspath(__file__)), "seccomp.py")
        spec = importlib.util.spec_from_file_location("_minisandbox_seccomp", where)
        seccomp = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(seccomp)
    return seccomp


_seccomp = _load_seccomp()

#: The filter every payload of this sandbox gets (built by init before pivot_root; None
#: when the sandbox was created with seccomp=False).
_PAYLOAD_SECCOMP: bytes | None = None
#: The filter of init itself and so of every helper it forks (`seccomp.init_program`).
_INIT_SECCOMP: bytes | None = None

try:
    from minisandbox.errors import SandboxError
except ImportError:  # the fork server runs as `python -I -S init_program.py`: only the stdlib is importable

    class SandboxError(RuntimeError):  # type: ignore[no-redef]
        """Setting up or talking to a private root failed (one line, says what to do)."""


# ---------------------------------------------------------------------------- syscalls

_libc = None


def _lib():
    """libc through ctypes, and the C structures below, made once per process. ctypes is
    imported here (and looked up in the functions that use it), not at module import: the
    controller imports this module for its shared code and on a warm `run` makes no
    syscall through it (ctypes was ~4 ms of that process's CPU). The fork server calls
    this first thing (`_zygote_main`'s prctl), so every process forked from it has ctypes
    and the structures before any pivot_root hides the standard library."""
    global _libc, _MountAttr, _CapHeader, _CapData
    if _libc is None:
        import ctypes

        # The C structures are defined once (in the zygote, before any fork): a class made
        # per call cost each sandbox's init and helpers a class creation (and its pages).
        class MountAttr(ctypes.Structure):
            _fields_ = [
                ("attr_set", ctypes.c_uint64),
                ("attr_clr", ctypes.c_uint64),
                ("propagation", ctypes.c_uint64),
                ("userns_fd", ctypes.c_uint64),
            ]

        class CapHeader(ctypes.Structure):
            _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

        class CapData(ctypes.Structure):
            _fields_ = [
                ("effective", ctypes.c_uint32),
                ("permitted", ctypes.c_uint32),
                ("inheritable", ctypes.c_uint32),
            ]

        _MountAttr, _CapHeader, _CapData = MountAttr, CapHeader, CapData
        libc = ctypes.CDLL(None, use_errno=True)
        libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
        libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
        libc.unshare.argtypes = [ctypes.c_int]
        libc.setns.argtypes = [ctypes.c_int, ctypes.c_int]
        libc.sethostname.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
        libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
        _libc = libc
    return _libc


_MountAttr = _CapHeader = _CapData = None  # (made by `_lib`)


def _check(ret: int, what: str) -> int:
    if ret < 0:
        import ctypes

        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")
    return ret


def _b(s: str | None) -> bytes | None:
    return None if s is None else os.fsencode(s)


#: This machine's row of `_SYSCALLS`, looked up once (in the fork server, before it forks):
#: `os.uname()` per syscall made a result object in every sandbox's processes.
_MACHINE = os.uname().machine
_SYSCALL_TABLE = _SYSCALLS.get(_MACHINE)


def _nr(name: str) -> int:
    if _SYSCALL_TABLE is None:
        raise SandboxError(f"unsupported architecture {_MACHINE}: add syscall numbers to init_program._SYSCALLS")
    return _SYSCALL_TABLE[name]


def _set_handler(sig: int, handler) -> None:
    """`signal.signal` without its enum conversions: `signal.signal` turns the previous
    handler back into a `Handlers` member, which for a Python handler (the fork server's
    SIGCHLD one) means the enum raising and catching a ValueError; in a freshly forked
    starter, init or spawner each object that touches is a page copied."""
    if not callable(handler):  # (`_signal` takes only its own SIG_DFL / SIG_IGN objects)
        handler = _signal.SIG_IGN if handler == _signal.SIG_IGN else _signal.SIG_DFL
    _signal.signal(int(sig), handler)


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    _check(_lib().mount(_b(source), _b(target), _b(fstype), flags, _b(data)), f"mount {fstype or source} at {target}")


def umount2(target: str, flags: int) -> None:
    _check(_lib().umount2(_b(target), flags), f"umount {target}")


def unshare(flags: int) -> None:
    _check(_lib().unshare(flags), "unshare")


def setns(fd: int, nstype: int) -> None:
    _check(_lib().setns(fd, nstype), "setns")


def _join_namespaces(join: dict) -> None:
    """Enter the user and mount namespaces of a node cache's mount holder before creating
    the sandbox's own: rootless image layers are squashfuse mounts that exist only there
    (minisandbox.node.fusemount). `join` = {"pid", "start"}; the start time guards against
    a recycled pid. The holder's processes stay in the host pid namespace, out of reach."""
    pid = int(join["pid"])
    fds: list[int] = []
    try:
        try:
            for name in ("user", "mnt"):
                fds.append(os.open(f"/proc/{pid}/ns/{name}", os.O_RDONLY | os.O_CLOEXEC))
            with open(f"/proc/{pid}/stat", "rb") as fh:
                start = fh.read().rsplit(b")", 1)[1].split()[19].decode()
        except FileNotFoundError:
            start = None
        if start != str(join.get("start")):
            raise SandboxError(f"the image mount holder (pid {pid}) has exited: prepare the task again")
        setns(fds[0], CLONE_NEWUSER)
        setns(fds[1], CLONE_NEWNS)
    finally:
        for fd in fds:
            os.close(fd)


def pivot_root(new_root: str, put_old: str) -> None:
    _check(_lib().syscall(_nr("pivot_root"), _b(new_root), _b(put_old)), "pivot_root")


def prctl(option: int, a2: int = 0, a3: int = 0, a4: int = 0, a5: int = 0) -> int:
    return _check(_lib().prctl(option, a2, a3, a4, a5), f"prctl({option})")


def make_readonly(path: str, recursive: bool = True) -> None:
    """Make the mount at `path` (and below) read-only, keeping its other flags.

    mount_setattr changes only the read-only bit, so locked flags of mounts inherited
    into a user namespace (nosuid, nodev, atime) never make it fail; old kernels fall
    back to a bind remount that repeats the flags statvfs reports.
    """
    import ctypes

    lib = _lib()  # (first: it makes _MountAttr)
    attr = _MountAttr(MOUNT_ATTR_RDONLY, 0, 0, 0)
    ret = lib.syscall(
        _nr("mount_setattr"),
        AT_FDCWD,
        _b(path),
        AT_RECURSIVE if recursive else 0,
        ctypes.byref(attr),
        ctypes.sizeof(attr),
    )
    if ret == 0:
        return
    if ctypes.get_errno() != errno.ENOSYS:
        _check(ret, f"make {path} read-only")
    st = os.statvfs(path)
    flags = MS_REMOUNT | MS_BIND | MS_RDONLY
    for st_flag, ms_flag in (
        (os.ST_NOSUID, MS_NOSUID),
        (os.ST_NODEV, MS_NODEV),
        (os.ST_NOEXEC, MS_NOEXEC),
        (os.ST_NOATIME, MS_NOATIME),
        (os.ST_NODIRATIME, MS_NODIRATIME),
        (os.ST_RELATIME, MS_RELATIME),
    ):
        if st.f_flag & st_flag:
            flags |= ms_flag
    mount(None, path, None, flags)


_CAP_LAST: int | None = None


def _cap_last() -> int:
    """The highest capability number the kernel knows (read once per process: init and the
    zygote read it before forking the children that drop every capability)."""
    global _CAP_LAST
    if _CAP_LAST is None:
        with open("/proc/sys/kernel/cap_last_cap") as fh:
            _CAP_LAST = int(fh.read())
    return _CAP_LAST


def drop_privileges() -> None:
    """Drop every capability for good: locked securebits, empty bounding and ambient
    sets, no_new_privs, then an all-zero capset. After this even uid 0 cannot remount,
    mknod, load modules, change namespaces or regain capabilities by exec."""
    prctl(PR_SET_SECUREBITS, SECUREBITS_LOCKED_DOWN)
    for cap in range(_cap_last() + 1):
        prctl(PR_CAPBSET_DROP, cap)
    prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)
    prctl(PR_SET_NO_NEW_PRIVS, 1)  # (prctl loaded libc and made _CapHeader, _CapData)
    import ctypes

    hdr = _CapHeader(LINUX_CAPABILITY_VERSION_3, 0)
    data = (_CapData * 2)()
    _check(_lib().syscall(_nr("capset"), ctypes.byref(hdr), ctypes.byref(data)), "capset")


#: `struct ifreq` with its flags, compiled once in the fork server (not in every sandbox's init)
_IFREQ_FLAGS = struct.Struct("16sH14s")


def _loopback_up() -> None:
    """Bring `lo` up in a fresh network namespace (it starts down)."""
    SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1
    s = _socket.socket(_socket.AF_INET, _socket.SOCK_DGRAM)
    try:
        ifr = _IFREQ_FLAGS.pack(b"lo", 0, b"")
        flags = _IFREQ_FLAGS.unpack(fcntl.ioctl(s.fileno(), SIOCGIFFLAGS, ifr))[1]
        fcntl.ioctl(s.fileno(), SIOCSIFFLAGS, _IFREQ_FLAGS.pack(b"lo", flags | IFF_UP, b""))
    finally:
        s.close()


def wait_readable(objs: list, timeout: float | None) -> list:
    """The subset of `objs` (fds or objects with fileno()) readable within `timeout`
    seconds (None: wait forever). poll(), not select(): a controller holding hundreds of
    sandboxes has fds above select's limit of 1024."""
    poller = select.poll()
    by_fd = {}
    for obj in objs:
        fd = obj if isinstance(obj, int) else obj.fileno()
        by_fd[fd] = obj
        poller.register(fd, select.POLLIN | select.POLLHUP | select.POLLERR)
    ms = None if timeout is None else max(0, int(timeout * 1000 + 0.999))
    try:
        events = poller.poll(ms)
    except InterruptedError:
        return []
    return [by_fd[fd] for fd, _ev in events]


# ---------------------------------------------------------------------------- root setup (init side)


def _mkdirs(path: str) -> None:
    try:
        os.makedirs(path, exist_ok=True)
    except FileExistsError:
        pass


def _touch(path: str) -> None:
    _mkdirs(os.path.dirname(path))
    if not os.path.lexists(path):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o644))


def _pick_base(spec: dict) -> str:
    """A host directory to mount the scratch tmpfs on, that hides no bind source."""
    sources = [b[0] for b in spec.get("binds", [])]
    for o in spec.get("overlays", []):  # a lower, or a list of stacked lowers (topmost first)
        sources += list(o[0]) if isinstance(o[0], (list, tuple)) else [o[0]]
    sources += [o[2] for o in spec.get("overlays", []) if o[2]]
    reals = [os.path.realpath(s) for s in sources]  # (once: a realpath is a stat per component)
    for cand in _BASE_CANDIDATES:
        if not os.path.isdir(cand) or os.path.islink(cand):
            continue
        real = os.path.realpath(cand)
        if any(s == real or s.startswith(real + "/") for s in reals):
            continue
        return cand
    raise SandboxError(
        "no free host directory to mount the private root on (all of "
        f"{', '.join(_BASE_CANDIDATES)} hold bind sources): move the sources"
    )


def _parts(target: str) -> list[str]:
    """Components of an absolute target path; `.`/`..` and empty names are refused."""
    parts = target.split("/")
    if not target.startswith("/") or any(p in (".", "..") for p in parts) or "\0" in target:
        raise SandboxError(f"mount target {target!r} must be a normalised absolute path")
    return [p for p in parts if p]


def _walk(root_fd: int, target: str, *, create: bool = True, upto: int | None = None) -> int:
    """An O_PATH fd of the directory `target` under the directory `root_fd`, reached one
    component at a time with O_NOFOLLOW (missing ones created when `create`).

    Why: set-up runs before pivot_root, where an absolute symlink resolves against the
    *host's* root. Paths under the new root pass through layers whose content comes from
    archives (a store is as trusted as whoever can write to its bucket), so a symlink there
    must never be followed: it is an error instead."""
    parts = _parts(target)
    if upto is not None:
        parts = parts[:upto]
    fd = os.open(".", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=root_fd)
    try:
        for i, name in enumerate(parts):
            flags = os.O_PATH | os.O_NOFOLLOW | os.O_DIRECTORY | os.O_CLOEXEC
            try:
                nfd = os.open(name, flags, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                try:
                    os.mkdir(name, 0o755, dir_fd=fd)
                except FileExistsError:
                    pass
                nfd = os.open(name, flags, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    where = "/" + "/".join(parts[: i + 1])
                    raise SandboxError(
                        f"{where} (on the way to {target}) is a symlink or not a directory inside "
                        f"the sandbox root, probably from a layer's content: refusing to follow it; "
                        f"the layer's archive is bad, re-publish it"
                    ) from None
                raise
            os.close(fd)
            fd = nfd
    except BaseException:
        os.close(fd)
        raise
    return fd


def _open_file_beneath(root_fd: int, target: str, flags: int, mode: int = 0o644) -> int:
    """Open (O_CREAT) the file `target` under `root_fd` without following any symlink, not
    even the last component's (a layer's `bin/activate -> /host/file` fails with ELOOP)."""
    parts = _parts(target)
    if not parts:
        raise SandboxError("cannot open the sandbox root as a file")
    parent = _walk(root_fd, target, upto=len(parts) - 1)
    try:
        return os.open(parts[-1], flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=parent)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise SandboxError(
                f"{target} is a symlink inside the sandbox root, probably from a layer's content: "
                f"refusing to write through it; the layer's archive is bad, re-publish it"
            ) from None
        raise
    finally:
        os.close(parent)


def _file_mountpoint(root_fd: int, target: str) -> int:
    """An O_PATH fd of the file `target` (created empty when missing) to mount a file on;
    a symlink there is refused like in _walk."""
    try:
        fd = _open_file_beneath(root_fd, target, os.O_PATH)
    except FileNotFoundError:
        os.close(_open_file_beneath(root_fd, target, os.O_WRONLY | os.O_CREAT | os.O_EXCL))
        fd = _open_file_beneath(root_fd, target, os.O_PATH)
    if stat.S_ISLNK(os.fstat(fd).st_mode):  # O_PATH|O_NOFOLLOW opens the link itself
        os.close(fd)
        raise SandboxError(
            f"{target} is a symlink inside the sandbox root, probably from a layer's content: "
            f"refusing to mount over it; the layer's archive is bad, re-publish it"
        )
    return fd


def _fd_path(fd: int) -> str:
    """A path naming exactly the file `fd` refers to (mount(2) resolves the magic link to
    that very dentry, never by name again)."""
    return f"/proc/self/fd/{fd}"


def _mount_beneath(
    root_fd: int,
    target: str,
    source: str | None,
    fstype: str | None,
    flags: int,
    data: str | None = None,
    *,
    is_file: bool = False,
    readonly: bool = False,
) -> None:
    """mount(2) at `target` under the root, the mountpoint reached without following
    symlinks; `readonly` then makes the new mount read-only (looked up again: the old fd
    names the covered directory, not the new mount)."""
    if is_file:
        fd = _file_mountpoint(root_fd, target)
    else:
        fd = _walk(root_fd, target)
    try:
        mount(source, _fd_path(fd), fstype, flags, data)
    finally:
        os.close(fd)
    if readonly:
        fd = _file_mountpoint(root_fd, target) if is_file else _walk(root_fd, target, create=False)
        try:
            make_readonly(_fd_path(fd))
        finally:
            os.close(fd)


def _bind_into(root_fd: int, source: str, target: str, readonly: bool) -> None:
    if not os.path.lexists(source):
        raise SandboxError(f"bind source {source} does not exist (for {target}): restore it first")
    _mount_beneath(
        root_fd, target, source, None, MS_BIND | MS_REC, is_file=not os.path.isdir(source), readonly=readonly
    )


def _escape_overlay(path: str) -> str:
    return path.replace("\\", "\\\\").replace(",", "\\,").replace(":", "\\:")


def _overlay_into(
    root_fd: int,
    scratch: str,
    n: int,
    lower: str,
    target: str,
    upper_base: str | None,
    userxattr: bool,
    force_copy: bool,
) -> str:
    """Mount `lower` at `target` writable: an overlay (upper in scratch tmpfs or in
    `upper_base` on disk), or a private copy where overlays are unavailable. Returns the
    method used."""
    lowers = list(lower) if isinstance(lower, (list, tuple)) else [lower]  # topmost first
    for one in lowers:
        if not os.path.isdir(one):
            raise SandboxError(f"layer {one} is not a directory (for {target}): restore it first")
    held = [_layer_subdir_fd(one) for one in lowers]
    try:
        mount_lowers = [one if fd is None else _fd_path(fd) for one, fd in zip(lowers, held)]
        return _overlay_lowers(root_fd, scratch, n, mount_lowers, lowers, target, upper_base, userxattr, force_copy)
    finally:
        for fd in held:
            if fd is not None:
                os.close(fd)


_DIGEST_DIR = r"[0-9a-f]{64}"  # a pattern string: compiled (and cached by `re`) on first use


def _layer_subdir_fd(path: str) -> int | None:
    """For a directory *inside* a restored layer (`<cache>/layers/<sha256>/sub/dir`, e.g. an
    environment's install residue stacked over /testbed): an O_PATH fd reached from the
    layer's root without following symlinks, since `sub/dir` comes from archive content and
    overlayfs would resolve a symlink there against the host's root. None for other paths."""
    parts = path.split("/")
    idx = max((i for i, p in enumerate(parts) if re.fullmatch(_DIGEST_DIR, p)), default=None)
    if idx is None or idx == len(parts) - 1:
        return None
    base = os.open("/".join(parts[: idx + 1]), os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        return _walk(base, "/" + "/".join(parts[idx + 1 :]), create=False)
    finally:
        os.close(base)


def _overlay_lowers(
    root_fd: int,
    scratch: str,
    n: int,
    mount_lowers: list[str],
    lowers: list[str],
    target: str,
    upper_base: str | None,
    userxattr: bool,
    force_copy: bool,
) -> str:
    """_overlay_into's mount: `mount_lowers` name the checked directories for overlayfs,
    `lowers` the same ones by path for the copy fallback (cp runs in another process)."""
    base = upper_base or os.path.join(scratch, f"layer{n}")
    upper, work = os.path.join(base, "upper"), os.path.join(base, "work")
    _mkdirs(upper)
    _mkdirs(work)
    if not force_copy:
        lowerdir = ":".join(_escape_overlay(one) for one in mount_lowers)
        opts = f"lowerdir={lowerdir},upperdir={_escape_overlay(upper)},workdir={_escape_overlay(work)}"
        if userxattr:
            opts += ",userxattr"
        try:
            _mount_beneath(root_fd, target, "overlay", "overlay", MS_NOSUID | MS_NODEV, opts)
            return "overlay"
        except SandboxError:
            raise
        except OSError:
            pass
    import subprocess  # here: the fallback is rare, and a warm `run` imports no `subprocess`

    copy = os.path.join(base, "copy")
    proc = subprocess.run(
        ["cp", "-a", "--", lowers[-1], copy], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    for one in reversed(lowers[:-1]):  # bottom first, each stacked layer over it
        if proc.returncode == 0:
            proc = subprocess.run(
                ["cp", "-a", "--", one + "/.", copy], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
            )
    if proc.returncode != 0:
        raise SandboxError(f"copy fallback of layer {lowers[-1]} failed: {proc.stderr.strip()[:200]}")
    _mount_beneath(root_fd, target, copy, None, MS_BIND | MS_REC)
    return "copy"


def _setup_dev(root: str, shm: str) -> None:
    dev = root + "/dev"
    _mkdirs(dev)
    mount("tmpfs", dev, "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755,size=64k")
    for name in DEV_NODES:
        if os.path.exists("/dev/" + name):
            _touch(f"{dev}/{name}")
            mount("/dev/" + name, f"{dev}/{name}", None, MS_BIND)
    _mkdirs(dev + "/pts")
    mount(
        "devpts", dev + "/pts", "devpts", MS_NOSUID | MS_NOEXEC, f"newinstance,ptmxmode=0666,mode=0620,max={DEVPTS_MAX}"
    )
    os.symlink("pts/ptmx", dev + "/ptmx")
    _mkdirs(dev + "/shm")
    mount(shm, dev + "/shm", None, MS_BIND)  # part of the one tmpfs budget (see _setup_root)
    for name, dest in (
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ):
        os.symlink(dest, f"{dev}/{name}")


def _scratch_dir(scratch: str, name: str, mode: int) -> str:
    path = os.path.join(scratch, name)
    os.mkdir(path)
    os.chmod(path, mode)  # exact mode (mkdir's is filtered by the umask; 1777 needs chmod)
    return path


def _join_fresh_keyring() -> str:
    """Give this process (and so every payload it spawns) a new anonymous session keyring,
    so nothing inside can reach the caller's session keys. Returns how it went."""
    KEYCTL_JOIN_SESSION_KEYRING = 1
    if _lib().syscall(_nr("keyctl"), KEYCTL_JOIN_SESSION_KEYRING, None) >= 0:
        return "fresh session keyring"
    import ctypes

    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EPERM, errno.EACCES):
        # keyrings compiled out, or denied by a filter around us: the payload cannot use them either
        return f"keyring unavailable ({errno.errorcode.get(err, err)})"
    raise OSError(err, f"keyctl(JOIN_SESSION_KEYRING): {os.strerror(err)}")


def _mount_proc(path: str) -> None:
    """A proc filesystem of the current pid namespace at `path`, with the entries that
    reach the host (PROC_READONLY) read-only and PROC_MASKED hidden."""
    mount("proc", path, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    for entry in PROC_READONLY:
        sub = f"{path}/{entry}"
        if os.path.exists(sub):
            mount(sub, sub, None, MS_BIND | MS_REC)
            make_readonly(sub)
    for entry in PROC_MASKED:
        sub = f"{path}/{entry}"
        if os.path.exists(sub):
            mount("/dev/null", sub, None, MS_BIND)


def _enter_own_pidns() -> None:
    """Move the payload being set up into a fresh pid namespace with its own /proc: it
    sees no ancestor (not init, not the shell that asked for it) and so none of their
    /proc/<pid>/fd, environ or memory. The calling process stays outside as the payload's
    reaper and exits with its status (a signal death re-raised), so init's exit event is
    the payload's. Returns only in the payload (pid 1 of the new namespace; when it
    exits, the kernel kills whatever it left behind in the namespace)."""
    unshare(CLONE_NEWPID | CLONE_NEWNS)
    pid = os.fork()
    if pid == 0:
        _mount_proc("/proc")
        return
    # the reaper is a helper: it keeps nothing a payload lacks (non-dumpable, from init)
    drop_privileges()
    if _PAYLOAD_SECCOMP is not None:
        _seccomp.install(_PAYLOAD_SECCOMP)
    os.closerange(0, 65536)
    while True:
        try:
            _, status = os.waitpid(pid, 0)
            break
        except InterruptedError:
            continue
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        signal.signal(sig, signal.SIG_DFL)
        prctl(PR_SET_DUMPABLE, 0)  # no core file for a re-raised SIGSEGV/SIGABRT
        os.kill(os.getpid(), sig)
    os._exit(os.waitstatus_to_exitcode(status) & 0xFF)


def _setup_root(spec: dict) -> dict:
    """Build the private root and pivot into it (runs as pid 1 of the new pid ns).

    One tmpfs (size = spec["tmpfs_size"] bytes, when given) holds the root tree, the
    overlays' upper layers, /tmp, /root and /dev/shm: a single budget for everything a
    payload can write to memory-backed storage (four tmpfs mounts of half the RAM each
    were four budgets)."""
    return _finish_root(spec, _base_root(spec))


def _base_root(spec: dict) -> dict:
    """The part of `_setup_root` that no sandbox's own layers, binds or files change: the
    tmpfs, the host system, masks, /proc, /dev, /tmp and /root. A pre-started ("warm")
    sandbox stops after it until its spec arrives."""
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    base = _pick_base(spec)
    size = spec.get("tmpfs_size")
    mount("tmpfs", base, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755" + (f",size={int(size)}" if size else ""))
    root, scratch = base + "/root", base + "/scratch"
    os.mkdir(root, 0o755)
    os.mkdir(scratch, 0o700)
    mount(root, root, None, MS_BIND | MS_REC)
    root_fd = os.open(root, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        _populate_base(spec, root, root_fd, scratch)
    except BaseException:
        os.close(root_fd)
        raise
    return {"base": base, "root": root, "scratch": scratch, "root_fd": root_fd, "tmpfs_size": size}


def _resize_tmpfs(state: dict, size: int | None) -> None:
    """Give a warm sandbox's tmpfs the size its spec asks for (a remount changes only the
    limit; what is in it stays)."""
    if size != state["tmpfs_size"]:
        mount(
            "tmpfs",
            state["base"],
            "tmpfs",
            MS_REMOUNT | MS_NOSUID | MS_NODEV,
            "mode=0755" + (f",size={int(size)}" if size else ",size=50%"),
        )
        state["tmpfs_size"] = size


def _finish_root(spec: dict, state: dict) -> dict:
    """The rest of `_setup_root`: the spec's layers, binds and files, then pivot_root."""
    root, root_fd = state["root"], state["root_fd"]
    try:
        methods = _populate_layers(spec, root, root_fd, state["scratch"])
    finally:
        os.close(root_fd)

    os.chdir(root)
    pivot_root(".", ".")
    umount2(".", MNT_DETACH)
    os.chdir("/")
    make_readonly("/", recursive=False)
    make_readonly("/dev", recursive=False)
    return {"layers": methods}


def _populate_base(spec: dict, root: str, root_fd: int, scratch: str) -> None:
    """System dirs, masks, /proc, /dev, the scratch-backed writable dirs (see _setup_root)."""
    for name in spec.get("system_dirs", SYSTEM_DIRS):
        host = "/" + name
        if os.path.islink(host):
            os.symlink(os.readlink(host), f"{root}/{name}")
        elif os.path.isdir(host):
            _bind_into(root_fd, host, host, True)
    for mask in _ETC_MASKED:
        if os.path.isdir(mask) and not os.path.islink(mask):
            _mount_beneath(root_fd, mask, "tmpfs", "tmpfs", MS_NOSUID | MS_NODEV | MS_RDONLY, "mode=0755,size=4k")
        elif os.path.isfile(mask):
            _mount_beneath(root_fd, mask, "/dev/null", None, MS_BIND, is_file=True)

    _mkdirs(root + "/proc")
    _mount_proc(root + "/proc")
    _setup_dev(root, _scratch_dir(scratch, "shm", 0o1777))
    for path, name, mode in (("/tmp", "tmp", 0o1777), ("/root", "home", 0o700)):
        _mount_beneath(root_fd, path, _scratch_dir(scratch, name, mode), None, MS_BIND)
    os.symlink("/tmp", _prep(root + "/var/tmp"))


def _populate_layers(spec: dict, root: str, root_fd: int, scratch: str) -> dict:
    """The layers, binds and files of `spec` (see _setup_root); returns each layer's method."""
    # Writable layers and binds, parents first so nested targets land in their parents.
    items = [("overlay", i, o) for i, o in enumerate(spec.get("overlays", []))]
    items += [("bind", i, b) for i, b in enumerate(spec.get("binds", []))]
    items.sort(key=lambda it: it[2][1].rstrip("/").count("/"))
    methods = {}
    for kind, i, item in items:
        if kind == "overlay":
            lower, target, upper_base = item
            methods[target] = _overlay_into(
                root_fd, scratch, i, lower, target, upper_base, _in_userns(spec), bool(spec.get("force_copy"))
            )
        else:
            source, target, readonly = item
            _bind_into(root_fd, source, target, readonly)
    for target, content, mode in spec.get("files", []):
        fd = _open_file_beneath(root_fd, target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
        with os.fdopen(fd, "w") as fh:
            fh.write(content)
            os.fchmod(fh.fileno(), mode)
    return methods


def _prep(path: str) -> str:
    _mkdirs(os.path.dirname(path))
    return path


# ---------------------------------------------------------------------------- init server

#: Messages above this size travel in a memfd (a SEQPACKET message must fit the socket
#: buffer, ~200 KB by default; a command line with an inline patch can be larger).
_INLINE_MAX = 32 << 10


def _send(sock: _socket.socket, msg: dict, fds: list[int] | None = None, flags: int = 0) -> None:
    """`msg` (and `fds`) as one message; `flags` of sendmsg (MSG_DONTWAIT: BlockingIOError
    rather than wait while the receiver's queue is full)."""
    data = json.dumps(msg).encode()
    fds = list(fds or [])
    big = None
    if len(data) > _INLINE_MAX:
        big = os.memfd_create("minisandbox-msg", os.MFD_CLOEXEC)
        view = memoryview(data)
        while view:
            view = view[os.write(big, view) :]
        fds.append(big)
        data = json.dumps({"_memfd": True}).encode()
    try:
        if fds:
            sock.sendmsg([data], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, array.array("i", fds))], flags)
        else:
            sock.send(data, flags)
    finally:
        if big is not None:
            os.close(big)


def _recv(sock: _socket.socket, maxfds: int = 12) -> tuple[dict | None, list[int]]:
    fds = array.array("i")
    # close-on-exec at once: a threaded caller must not leak a received fd (a file being
    # written, a pipe end) into a process another thread starts meanwhile
    data, anc, flags, _ = sock.recvmsg(1 << 16, _socket.CMSG_LEN((maxfds + 1) * fds.itemsize), _socket.MSG_CMSG_CLOEXEC)
    for level, typ, cdata in anc:
        if level == _socket.SOL_SOCKET and typ == _socket.SCM_RIGHTS:
            fds.frombytes(cdata[: len(cdata) - (len(cdata) % fds.itemsize)])
    if not data:
        for fd in fds:
            os.close(fd)
        return None, []
    msg = json.loads(data)
    out = list(fds)
    if msg.get("_memfd") and out:
        big = out.pop()
        try:
            os.lseek(big, 0, os.SEEK_SET)
            with os.fdopen(big, "rb", closefd=False) as fh:
                msg = json.loads(fh.read())
        finally:
            os.close(big)
    return msg, out


def _proc_table() -> dict[int, tuple[int, int]]:
    """pid -> (ppid, session) for every process visible in /proc (the sandbox's own)."""
    table = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:
            continue
        fields = stat[stat.rindex(b")") + 2 :].split()
        table[int(name)] = (int(fields[1]), int(fields[3]))
    return table


def _kill_tree(pid: int, sig: int, children_only: bool) -> None:
    """Signal `pid`'s session and all its descendants (orphans re-parented to init stay
    in the session), or only the descendants when `children_only`."""
    table = _proc_table()
    targets = set()
    frontier = [pid]
    while frontier:
        p = frontier.pop()
        for child, (ppid, _sid) in table.items():
            if ppid == p and child not in targets:
                targets.add(child)
                frontier.append(child)
    if not children_only:
        targets.add(pid)
        targets.update(p for p, (_pp, sid) in table.items() if sid == pid and p != 1)
    targets.discard(1)
    targets.discard(os.getpid())
    for p in targets:
        try:
            os.kill(p, sig)
        except ProcessLookupError:
            pass


def _reset_signals() -> None:
    for sig in (
        signal.SIGPIPE,
        signal.SIGXFSZ,
        signal.SIGINT,
        signal.SIGTERM,
        signal.SIGHUP,
        signal.SIGQUIT,
        signal.SIGCHLD,
        signal.SIGTSTP,
        signal.SIGTTIN,
        signal.SIGTTOU,
    ):
        _set_handler(sig, signal.SIG_DFL)
    signal.set_wakeup_fd(-1)


#: RLIMIT_CPU's hard limit is this many seconds above the soft one: at the soft limit the
#: kernel sends SIGXCPU (a death the caller can recognise and report as the CPU limit;
#: with soft == hard it sends SIGKILL straight away), at the hard one SIGKILL.
CPU_HARD_GRACE = 5


def _apply_rlimits(limits: dict) -> None:
    for name, value in (limits or {}).items():
        hard = int(value) + CPU_HARD_GRACE if name == "RLIMIT_CPU" else int(value)
        resource.setrlimit(getattr(resource, name), (int(value), hard))


def _child_exec(req: dict, fds: list[int], sock_fd: int) -> None:
    """In the forked child of init: become the payload (never returns)."""
    try:
        targets = [int(t) for t in req.get("fd_targets") or []]
        if req.get("cgroup"):
            # first of all: join the command's own cgroup (its CPU total, its kill), while
            # the caller's fd of its join file is still open ("0" = this process, single-threaded)
            os.write(fds[3 + len(targets)], b"0")
        _reset_signals()
        os.setsid()
        for i, fd in enumerate(fds[:3]):
            os.dup2(fd, i, inheritable=True)
        moved = [os.dup(fd) for fd in fds[3 : 3 + len(targets)]]  # out of the way of the targets
        for fd, target in zip(moved, targets):
            os.dup2(fd, target, inheritable=True)
        low = 3
        for target in sorted(set(targets)) + [65536]:
            os.closerange(low, target)
            low = target + 1
        try:
            os.chdir(req.get("cwd") or "/")
        except OSError as exc:
            os.write(2, f"minisandbox: cannot enter {req.get('cwd')}: {exc.strerror}\n".encode())
            os._exit(126)
        os.umask(req.get("umask", 0o022))
        _apply_rlimits(req.get("rlimits"))  # before the pid namespace: its reaper gets them too
        if req.get("pidns"):
            _enter_own_pidns()
        if req.get("drop", True):
            drop_privileges()
            if _PAYLOAD_SECCOMP is not None:
                _seccomp.install(_PAYLOAD_SECCOMP)  # last: no_new_privs is set, exec is next
        argv = req["argv"]
        env = req.get("env") or {}
        try:
            os.execvpe(argv[0], argv, env)
        except OSError as exc:
            os.write(2, f"minisandbox: cannot run {argv[0]}: {exc.strerror}\n".encode())
            os._exit(127)
    except BaseException as exc:  # never fall back into the init loop
        try:
            os.write(2, f"minisandbox: payload set-up failed: {exc}\n".encode())
        finally:
            os._exit(126)


def _openat2(dirfd: int, path: str, flags: int, mode: int, resolve: int) -> int:
    """openat2(2): `path` resolved under `dirfd` as `resolve` says."""
    import ctypes

    class OpenHow(ctypes.Structure):
        _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]

    tmpfile = getattr(os, "O_TMPFILE", 0)
    creates = bool(flags & os.O_CREAT) or (tmpfile and flags & tmpfile == tmpfile)
    how = OpenHow(flags, mode if creates else 0, resolve)
    fd = _lib().syscall(_nr("openat2"), dirfd, _b(path), ctypes.byref(how), ctypes.sizeof(how))
    if fd < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err), path)
    return fd


#: File types the controller's file operations accept; a FIFO, socket or device could block
#: the controller or reach beyond the sandbox's files.
_PLAIN_TYPES = (stat.S_IFREG, stat.S_IFDIR)


def _refuse_special(fd: int, path: str) -> None:
    kind = stat.S_IFMT(os.fstat(fd).st_mode)
    if kind not in _PLAIN_TYPES:
        os.close(fd)
        what = {
            stat.S_IFIFO: "a FIFO",
            stat.S_IFSOCK: "a socket",
            stat.S_IFCHR: "a character device",
            stat.S_IFBLK: "a block device",
            stat.S_IFLNK: "a symlink",
        }.get(kind, "not a regular file")
        raise OSError(errno.EINVAL, f"is {what}: only regular files and directories are read or written")


def open_in_root(path: str, flags: int, mode: int = 0o644, *, makedirs: bool = False) -> int:
    """Open `path` for the controller (read_file, write_file, upload) inside the sandbox:
    every symlink resolves inside the root ("/": RESOLVE_IN_ROOT, an absolute target
    included), no magic link (/proc/PID/root, /proc/PID/fd/N) is followed, only regular
    files and directories are accepted, and nothing blocks: the file is looked at through
    an O_PATH fd first and opened with O_NONBLOCK (a FIFO swapped in between is refused by
    the second fstat), then O_NONBLOCK is cleared."""
    resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS
    root = os.open("/", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        if makedirs:
            parts = [p for p in path.split("/") if p][:-1]
            for i in range(1, len(parts) + 1):
                try:
                    os.close(_openat2(root, "/".join(parts[:i]), os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC, 0, resolve))
                except FileNotFoundError:
                    parent = _openat2(
                        root, "/".join(parts[: i - 1]) or ".", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC, 0, resolve
                    )
                    try:
                        os.mkdir(parts[i - 1], 0o755, dir_fd=parent)
                    except FileExistsError:
                        pass
                    finally:
                        os.close(parent)
        try:
            _refuse_special(_openat2(root, path, os.O_PATH | os.O_CLOEXEC, 0, resolve), path)
        except FileNotFoundError:
            if not flags & os.O_CREAT:
                raise
        fd = _openat2(root, path, flags | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC, mode, resolve)
        _refuse_special(fd, path)
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
        return fd
    finally:
        os.close(root)


def _child_open(req: dict, back: _socket.socket) -> None:
    """In a forked child of init: open a file with the payload's privileges and hand the
    fd to init over `back`. init forwards it to the caller only once this child has
    exited, so the caller's fd is the only one left: a file written through it can be
    executed right away (a copy still open here made exec fail with ETXTBSY under load).

    The helper is as confined as a payload: non-dumpable (from init; no payload can
    ptrace it or read its memory), the sandbox's rlimits, no capabilities, the payloads'
    seccomp filter over init's; and it opens through `open_in_root`."""
    try:
        _apply_rlimits(req.get("rlimits"))
        drop_privileges()
        prctl(PR_SET_DUMPABLE, 0)
        if _PAYLOAD_SECCOMP is not None:
            _seccomp.install(_PAYLOAD_SECCOMP)
        fd = open_in_root(
            req["path"], req.get("flags", os.O_RDONLY), req.get("mode", 0o644), makedirs=bool(req.get("makedirs"))
        )
        _send(back, {"ok": True}, [fd])
        os._exit(0)
    except BaseException as exc:
        try:
            err = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            _send(back, {"ok": False, "error": f"{req.get('path')}: {err}"})
        finally:
            os._exit(1)


def _finish_open(sock: _socket.socket, seq: int, back: _socket.socket, started: float = 0.0, path: str = "") -> None:
    """The open helper has exited: forward its fd (or its error) as the reply."""
    try:
        try:
            back.setblocking(False)
            msg, fds = _recv(back)
        except OSError:
            msg, fds = None, []
        if msg is None:
            late = started and time.monotonic() - started >= OPEN_HELPER_TIMEOUT
            why = (
                f"did not finish within {OPEN_HELPER_TIMEOUT:g} s and was killed"
                if late
                else "was killed before it answered"
            )
            _send(sock, {"re": seq, "ok": False, "error": f"{path}: the sandbox's file-open helper {why}"})
            return
        try:
            _send(sock, {**msg, "re": seq}, fds)
        finally:
            for fd in fds:
                os.close(fd)
    finally:
        back.close()


def _sigchld_wakeup() -> int:
    """A pipe that becomes readable on SIGCHLD, so a poll loop wakes to reap children."""
    rfd, wfd = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.set_wakeup_fd(wfd)
    _set_handler(signal.SIGCHLD, lambda *_: None)
    return rfd


def _wait_or_sigchld(sock: _socket.socket, rfd: int, timeout: float = 5.0, extra: tuple | list = ()) -> list:
    """Wait until `sock` (or a descriptor of `extra`) is readable or a child exited; drains
    the wake-up pipe."""
    try:
        ready = wait_readable([sock, rfd, *extra], timeout)
    except InterruptedError:
        ready = []
    if rfd in ready:
        try:
            while os.read(rfd, 512):
                pass
        except BlockingIOError:
            pass
    return ready


def _sandbox_stat() -> dict:
    """What init sees of its sandbox's state, for telling why a command failed: processes
    alive (init excluded) and the free and total bytes of the one tmpfs budget."""
    procs = sum(1 for name in os.listdir("/proc") if name.isdigit()) - 1
    try:
        st = os.statvfs("/tmp")
        tmpfs = [st.f_bavail * st.f_frsize, st.f_blocks * st.f_frsize]
    except OSError:
        tmpfs = None
    return {"procs": procs, "tmpfs": tmpfs}


#: Seconds `killall` waits for the processes it killed to be gone (one in uninterruptible
#: sleep, a stuck FUSE read, is left to `close`).
KILLALL_WAIT = 2.0


def _others() -> set[int]:
    """Every process of the sandbox but init (its /proc is the sandbox's own)."""
    me = os.getpid()
    return {int(name) for name in os.listdir("/proc") if name.isdigit() and int(name) != me}


def _until_gone(reap, pids: set[int], deadline: float) -> None:
    """Reap until none of `pids` is left in the process table, or until `deadline`. A
    SIGKILL takes effect when its target next runs, which on a loaded machine is not at
    once, and the dead stay in the table until init reaps them (or, a command spawner's
    children, until the spawner is gone too): a one-shot `minisandbox run` ends its
    command's leftovers with `killall`, and a command run right after it saw them (found
    by tests/security/test_cpu_budget.py under load)."""
    while True:
        reap()
        if not any(os.path.exists(f"/proc/{pid}") for pid in pids):
            return
        if time.monotonic() >= deadline:
            return
        time.sleep(0.0005)


def _serve(sock: _socket.socket) -> None:
    """init's loop: spawn/kill/open requests in, exit events out, reap every zombie."""
    rfd = _sigchld_wakeup()
    children: dict[int, int] = {}  # pid -> command id
    spawners: set[int] = set()  # command spawners forked (see _spawner_main)
    # open helper pid -> (request seq, its socket, start time, path)
    opening: dict[int, tuple[int, _socket.socket, float, str]] = {}

    def reap() -> None:
        """Collect every child that exited: a command's exit goes to the controller, an open
        helper's answer is finished; a stopped command spawner is continued."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG | os.WUNTRACED)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if os.WIFSTOPPED(status):
                if pid in spawners:  # a payload stopped the command spawner: it reports exits, so it goes on
                    try:
                        os.kill(pid, signal.SIGCONT)
                    except ProcessLookupError:
                        pass
                continue
            spawners.discard(pid)
            cid = children.pop(pid, None)
            if cid is not None:
                _send(sock, {"ev": "exit", "id": cid, "status": status})
            elif pid in opening:
                _finish_open(sock, *opening.pop(pid))

    running = True
    while running:
        now = time.monotonic()
        for pid, (_seq, _back, started, _path) in opening.items():
            if now - started >= OPEN_HELPER_TIMEOUT:  # stopped or starved: never let it stall the caller
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        wait = min((started + OPEN_HELPER_TIMEOUT - now for _s, _b, started, _p in opening.values()), default=5.0)
        ready = _wait_or_sigchld(sock, rfd, max(0.05, min(5.0, wait)))
        reap()
        if sock not in ready:
            continue
        try:
            req, fds = _recv(sock)
        except (ConnectionResetError, OSError):
            req, fds = None, []
        if req is None:
            break
        op = req.get("op")
        try:
            if op == "spawn":
                pid = os.fork()
                if pid == 0:
                    _child_exec(req, fds, sock.fileno())
                children[pid] = req["id"]
                _send(sock, {"re": req["seq"], "ok": True, "pid": pid})
            elif op == "kill":
                pid = next((p for p, c in children.items() if c == req["id"]), None)
                if pid is None and req.get("pid"):  # started by the spawner: the controller knows its pid
                    pid = int(req["pid"])
                if pid is not None:
                    _kill_tree(pid, req.get("sig", signal.SIGKILL), bool(req.get("children_only")))
                _send(sock, {"re": req["seq"], "ok": True, "found": pid is not None})
            elif op == "open":
                mine, back = _socket.socketpair(_socket.AF_UNIX, _socket.SOCK_SEQPACKET)
                pid = os.fork()
                if pid == 0:
                    mine.close()
                    sock.close()
                    _child_open(req, back)
                back.close()
                opening[pid] = (req["seq"], mine, time.monotonic(), str(req.get("path")))
            elif op == "spawner":  # a pre-dropped command spawner (see _spawner_main)
                mine, theirs = _socket.socketpair(_socket.AF_UNIX, _socket.SOCK_SEQPACKET)
                pid = os.fork()
                if pid == 0:
                    mine.close()
                    _spawner_main(sock, theirs, req, fds)
                theirs.close()
                spawners.add(pid)
                try:
                    _send(sock, {"re": req["seq"], "ok": True, "pid": pid}, [mine.fileno()])
                finally:
                    mine.close()
            elif op == "drop_spawner":  # unresponsive (stopped): kill it and what it started
                for pid in list(spawners):
                    _kill_spawner(pid)
                    spawners.discard(pid)
                _send(sock, {"re": req["seq"], "ok": True})
            elif op == "killall":  # every process but init (kill(-1) spares the caller)
                # (the command spawners are left to die in their own time: nothing waits on
                # them, and a one-shot `run` that left nothing pays no wait)
                leftovers = _others() - spawners
                try:
                    os.kill(-1, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                if leftovers:
                    _until_gone(reap, leftovers, time.monotonic() + KILLALL_WAIT)
                _send(sock, {"re": req["seq"], "ok": True})
            elif op == "stat":
                _send(sock, {"re": req["seq"], "ok": True, **_sandbox_stat()})
            elif op == "ping":
                _send(sock, {"re": req["seq"], "ok": True})
            elif op == "shutdown":
                running = False
                _send(sock, {"re": req["seq"], "ok": True})
            else:
                _send(sock, {"re": req.get("seq"), "ok": False, "error": f"unknown op {op!r}"})
        except OSError as exc:
            _send(sock, {"re": req.get("seq"), "ok": False, "error": str(exc)})
        finally:
            for fd in fds:
                os.close(fd)
    # Kill everything in the namespace (pid 1 is spared by kill(-1)), reap, exit.
    try:
        os.kill(-1, signal.SIGKILL)
    except ProcessLookupError:
        pass
    while True:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            break


#: Signals a payload starts with at their default action (see _reset_signals).
_DEFAULT_SIGNALS = (
    "SIGPIPE",
    "SIGXFSZ",
    "SIGINT",
    "SIGTERM",
    "SIGHUP",
    "SIGQUIT",
    "SIGCHLD",
    "SIGTSTP",
    "SIGTTIN",
    "SIGTTOU",
)


class _Fallback(Exception):
    """The spawner leaves this command to init's own fork path (which reports the error
    the way a payload child does: a line on its stderr and exit code 126 or 127)."""


def _which(name: str, env: dict) -> str | None:
    """`name` resolved as execvpe would, through the command's own PATH."""
    if "/" in name:
        return name
    for d in (env.get("PATH") or os.defpath).split(os.pathsep):
        path = os.path.join(d or ".", name)
        if os.access(path, os.X_OK) and not os.path.isdir(path):
            return path
    return None


#: Characters bash reads literally in a word: a command of only these and blanks holds no
#: quoting, expansion, glob, redirection, comment, separator or control operator.
_PLAIN = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_@%+=:,./- \t")

#: Bash's reserved words and builtins (5.2's; older versions have fewer): a first word among
#: them is not looked up in PATH. `true` and `false` alone are the exceptions: their
#: programs do exactly what the builtins do (no output, status 0 or 1).
_BASH_WORDS = frozenset(
    "if then else elif fi case esac for select while until do done in function time coproc "
    ". : alias bg bind break builtin caller cd command compgen complete compopt continue declare "
    "dirs disown echo enable eval exec exit export false fc fg getopts hash help history jobs kill "
    "let local logout mapfile popd printf pushd pwd read readarray readonly return set shift "
    "shopt source suspend test times trap true type typeset ulimit umask unalias unset wait".split()
)

#: Environment variables that change what bash does before it runs a command (a start-up
#: file, options, exported functions, the command search) or that it rewrites (PWD, OLDPWD,
#: SHLVL, _); any BASH* variable counts too.
_BASH_VARS = frozenset({"ENV", "SHELLOPTS", "POSIXLY_CORRECT", "EXECIGNORE", "PWD", "OLDPWD", "SHLVL", "_"})

#: SHLVL of a program that `bash -c` runs without forking: bash 5.1 and later count their
#: own level (1 when unset) down again before that exec.
_ONESHOT_SHLVL = "0"


def _plain_words(argv: list[str], env: dict) -> list[str] | None:
    """The words of `argv` = ["bash", "-c", COMMAND] when all bash would do is look
    COMMAND's first word up in PATH and exec it with the other words as its arguments
    (`bash -c` execs a single simple command without forking); else None. Why: bash's own
    start is half of a trivial command's cost (~0.5 ms of exec, relocations and page
    faults), and an agent runs tens of thousands of such commands."""
    if len(argv) != 3 or argv[0] != "bash" or argv[1] != "-c" or not set(argv[2]) <= _PLAIN:
        return None
    if "PATH" not in env or any(k in _BASH_VARS or k.startswith("BASH") for k in env):
        return None
    words = argv[2].split()  # (blanks only: every other space character is refused above)
    if not words or "=" in words[0] or words[0].startswith("%"):  # an assignment, a job
        return None
    if words[0] in _BASH_WORDS and not (len(words) == 1 and words[0] in ("true", "false")):
        return None
    return words


def _bash_lookup(name: str, env: dict) -> str | None:
    """The file bash would exec for command `name` (its PATH search, from the current
    directory), or None when it would find none or anything is unusual (a directory, a file
    it may not run, a PATH entry bash tilde-expands): bash itself then runs the command and
    reports what it would."""
    if "/" in name:
        candidates = [name]
    else:
        dirs = env["PATH"].split(":")
        if any(d.startswith("~") for d in dirs):
            return None
        candidates = [f"{d or '.'}/{name}" for d in dirs]
    for path in candidates:
        try:
            mode = os.stat(path).st_mode
        except OSError:
            continue
        if not stat.S_ISREG(mode) or not os.access(path, os.X_OK):
            return None
        return path
    return None


def _spawner_spawn(req: dict, fds: list[int], leaf: int | None) -> int:
    """posix_spawn one command as `_child_exec` would start it (the spawner already holds
    the payloads' privileges, filter and rlimits, so the child inherits them); returns its
    pid. Raises _Fallback for anything the fast path does not do the same way.

    `direct` in `req` (a `bash -c COMMAND` of `Sandbox.execute`): a COMMAND of plain words
    (`_plain_words`) is exec'd without bash, with the environment bash would give it (PWD
    the working directory, SHLVL, `_` the program's path); anything else, or a program
    that cannot be exec'd, runs through bash."""
    argv, env = req["argv"], req.get("env") or {}
    words = _plain_words(argv, env) if req.get("direct") else None
    targets = [int(t) for t in req.get("fd_targets") or []]
    n = 3 + len(targets)
    # every source out of the targets' way first (received fds are close-on-exec: only the
    # dup2'd targets survive the exec, as with _child_exec's closerange)
    low = max([63, *targets]) + 1  # above every target, so no dup2 overwrites a source still to be read
    high = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, low) for fd in fds[:n]]
    try:
        try:
            os.chdir(req.get("cwd") or "/")
        except OSError as exc:
            raise _Fallback(str(exc)) from None
        joined = False
        try:
            # (looked up from the command's working directory, as execvpe in _child_exec does)
            program = _bash_lookup(words[0], env) if words else None
            path = _which(argv[0], env) if program is None else None
            if program is None and path is None:
                raise _Fallback(f"{argv[0]}: not found")
            if req.get("cgroup"):
                os.write(fds[n], b"0")  # the command is born in its own cgroup (see _child_exec)
                joined = True
            old = os.umask(req.get("umask", 0o022))
            try:
                actions = [(os.POSIX_SPAWN_DUP2, fd, target) for fd, target in zip(high, [0, 1, 2, *targets])]
                if program is not None:
                    try:
                        return _posix_spawn(
                            program, words, {**env, "PWD": os.getcwd(), "SHLVL": _ONESHOT_SHLVL, "_": program}, actions
                        )
                    except OSError:  # (not exec'd: ENOEXEC, EACCES...) bash runs it and says what it would
                        path = _which(argv[0], env)
                        if path is None:
                            raise _Fallback(f"{argv[0]}: not found") from None
                return _posix_spawn(path, argv, env, actions)
            except OSError as exc:
                raise _Fallback(str(exc)) from None
            finally:
                os.umask(old)
        finally:
            os.chdir("/")
            if joined:
                os.write(leaf, b"0")  # back to the sandbox's own leaf (raises: the spawner retires)
    finally:
        for fd in high:
            os.close(fd)


#: The signal numbers of _DEFAULT_SIGNALS (looked up once, not per command).
_DEFAULT_SIGNUMS = tuple(getattr(signal, name) for name in _DEFAULT_SIGNALS)


def _posix_spawn(path: str, argv: list[str], env: dict, actions: list) -> int:
    """posix_spawn `path` in a session of its own, no signal blocked, _DEFAULT_SIGNALS at
    their defaults."""
    return os.posix_spawn(path, argv, env, file_actions=actions, setsid=True, setsigmask=(), setsigdef=_DEFAULT_SIGNUMS)


#: How long the command spawner holds back a command's start reply (its pid) waiting for
#: the command to exit, when the caller only reads its output until then (`hold` in the
#: request: `Sandbox.run` without input): a short command's start and exit then reach the
#: controller as one message, and its output pipes are at end of file by then, so the
#: controller wakes once per command instead of three times (start reply, pipe end, exit
#: event). A command still running when this passes gets its reply then and its exit event
#: later, as before; its controller starts reading its output (and counting its timeout)
#: that much later.
EXIT_HOLD = 0.01


def _spawner_main(ctl: _socket.socket, reqs: _socket.socket, req: dict, fds: list[int]) -> None:
    """A command spawner, forked by init on the controller's first ordinary command: it
    applies the sandbox's rlimits, drops every privilege and installs the payloads' filter
    once, then starts each command with posix_spawn (vfork + exec: no copy of a Python
    process, no second process to schedule before the exec) and reports its pid and exit
    on the control socket `ctl`, as init does. Requests come on `reqs`; commands that need
    more (their own pid namespace, other rlimits, privileges) stay with init's fork path.

    It is as confined as a file-open helper: non-dumpable (from init), no capabilities,
    the payloads' seccomp filter over init's, the sandbox's rlimits. A payload can only
    signal it (same uid): the controller then treats its commands as killed, kills what
    they left and starts another. When `reqs` closes it exits once its commands have."""
    try:
        leaf = fds[0] if req.get("leaf") and fds else None
        keep = {0, 1, 2, ctl.fileno(), reqs.fileno(), *([leaf] if leaf is not None else [])}
        signal.set_wakeup_fd(-1)
        _close_all_but(keep)  # init's other descriptors: not ours to hold
        rfd = _sigchld_wakeup()
        _apply_rlimits(req.get("rlimits"))
        drop_privileges()
        if _PAYLOAD_SECCOMP is not None:
            _seccomp.install(_PAYLOAD_SECCOMP)
        os.chdir("/")
        children: dict[int, int] = {}
        held: tuple[int, int, float] | None = None  # (seq, pid, until): a start reply held back
        retire = False
        while not retire or children or held is not None:
            wait = 5.0 if held is None else max(0.0, held[2] - time.monotonic())
            ready = _wait_or_sigchld(reqs, rfd, wait) if not retire else _wait_or_sigchld(rfd, rfd, wait)
            while children:
                try:
                    pid, status = os.waitpid(-1, os.WNOHANG)
                except ChildProcessError:
                    break
                if pid == 0:
                    break
                cid = children.pop(pid, None)
                if held is not None and pid == held[1]:  # start and exit in one message
                    _send(ctl, {"re": held[0], "ok": True, "pid": pid, "status": status})
                    held = None
                elif cid is not None:
                    _send(ctl, {"ev": "exit", "id": cid, "status": status})
            if held is not None and (retire or reqs in ready or time.monotonic() >= held[2]):
                _send(ctl, {"re": held[0], "ok": True, "pid": held[1]})  # still running: its exit follows
                held = None
            if retire or reqs not in ready:
                continue
            try:
                msg, mfds = _recv(reqs)
            except OSError:
                msg, mfds = None, []
            if msg is None:
                retire = True
                continue
            try:
                pid = _spawner_spawn(msg, mfds, leaf)
            except _Fallback as exc:
                _send(ctl, {"re": msg.get("seq"), "ok": False, "fallback": True, "error": str(exc)})
            except OSError as exc:  # its cgroup moves failed: this spawner is done
                _send(ctl, {"re": msg.get("seq"), "ok": False, "fallback": True, "retire": True, "error": str(exc)})
                retire = True
            else:
                children[pid] = msg["id"]
                if msg.get("hold"):
                    held = (msg["seq"], pid, time.monotonic() + EXIT_HOLD)
                else:  # the caller has more to do before the exit (feed its stdin...)
                    _send(ctl, {"re": msg["seq"], "ok": True, "pid": pid})
            finally:
                # (before any reply: once the command has exited, the caller finds its
                # output pipes at end of file when the reply comes)
                for fd in mfds:
                    os.close(fd)
    finally:
        os._exit(0)


#: Above any descriptor a process can hold (`os.closerange` stops below it).
_FD_END = 0x7FFFFFFF

#: Whether the kernel has close_range (5.9 and later; see `_has_close_range`).
_HAS_CLOSE_RANGE: bool | None = None


def _has_close_range() -> bool:
    """Whether close_range(2) exists, asked once per process (the fork server asks before it
    forks anything): without it `os.closerange` closes one descriptor at a time up to its
    end, which for `_FD_END` would be two billion calls."""
    global _HAS_CLOSE_RANGE
    if _HAS_CLOSE_RANGE is None:  # (closes nothing: no descriptor is that high)
        _HAS_CLOSE_RANGE = _lib().syscall(_nr("close_range"), _FD_END, _FD_END, 0) == 0
    return _HAS_CLOSE_RANGE


def _close_all_but(keep: set[int]) -> None:
    """Close every descriptor of this process but `keep`'s, with one `close_range` per gap
    (os.closerange): listing /proc/self/fd made a string and an int per descriptor, which
    a freshly forked process pays for in copy-on-write faults. Kernels without close_range
    get the listing."""
    if not _has_close_range():
        for name in os.listdir("/proc/self/fd"):
            if int(name) not in keep:
                try:
                    os.close(int(name))
                except OSError:
                    pass
        return
    low = 0
    for fd in sorted(keep):
        if fd > low:
            os.closerange(low, fd)
        low = max(low, fd + 1)
    os.closerange(low, _FD_END)


def _kill_spawner(pid: int) -> None:
    """SIGKILL a spawner and every process tree it started (they would otherwise run on
    as orphans nobody reports), then reap it."""
    for child, (ppid, _sid) in _proc_table().items():
        if ppid == pid:
            _kill_tree(child, signal.SIGKILL, False)
    try:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    except (ProcessLookupError, ChildProcessError):
        pass


#: ptrace allowed -> (payload program, init program), built once per process: the zygote
#: builds both variants before it forks any sandbox, so no sandbox compiles a filter.
_FILTERS: dict[bool, tuple[bytes, bytes]] = {}


def _filters(ptrace: bool) -> tuple[bytes, bytes]:
    if ptrace not in _FILTERS:
        _FILTERS[ptrace] = (_seccomp.program(ptrace=ptrace), _seccomp.init_program(ptrace=ptrace))
    return _FILTERS[ptrace]


def _prepare_payload_filter(enabled: bool, ptrace: bool = False) -> None:
    """Pick the payloads' and init's seccomp programs in init (before pivot_root hides
    the stdlib)."""
    global _PAYLOAD_SECCOMP, _INIT_SECCOMP
    _PAYLOAD_SECCOMP, _INIT_SECCOMP = _filters(ptrace) if enabled else (None, None)


def _harden_init() -> None:
    """After set-up: init (and every helper it forks, until a payload's exec) becomes
    non-dumpable, so no payload can ptrace it, read its memory or open its /proc files
    even as the same uid, and runs under `seccomp.init_program`."""
    prctl(PR_SET_DUMPABLE, 0)
    if _INIT_SECCOMP is not None:
        _seccomp.install(_INIT_SECCOMP)


def _await_spec(sock: _socket.socket, warm: dict, state: dict) -> dict:
    """A warm init, its base root built (and in its cgroups, which its starter joined): wait
    for the sandbox's spec, then make the cgroup namespace (rooted at the leaf, as a cold
    start's is) and size the tmpfs. Exits when the caller closes the socket first (a warm
    sandbox nobody took)."""
    try:
        _send(sock, {"ev": "warm"})
        msg, _ = _recv(sock)
    except OSError:
        msg = None
    if msg is None:  # nobody took it
        os._exit(0)
    spec = msg["spec"]
    unshare(CLONE_NEWCGROUP)
    _resize_tmpfs(state, spec.get("tmpfs_size"))
    for key in ("rootless", "userns_base", "network", "ipc", "uts", "system_dirs", "join_ns", "cgroup_procs"):
        if spec.get(key) != warm.get(key):
            raise SandboxError(f"a warm sandbox was given a spec with another {key}: start it cold")
    return spec


def _start_sandbox(sock: _socket.socket, spec: dict, sync: tuple[int, int] | None = None) -> None:
    """In a fresh fork of the zygote: unshare, fork init (pid 1 of the new pid namespace),
    report its host pid, exit. Never returns. (A root sandbox that joins no namespace and
    has no user namespace has no starter: see `_fork_init`.) `sync`: this process's ends
    of the pipes to the zygote, which maps the user namespace a root sandbox's starter
    makes (see `_enter_owned_userns`)."""
    times = {"helper": time.monotonic()}  # CLOCK_MONOTONIC is system-wide: the caller can compare
    warm = bool(spec.get("warm"))
    try:
        if sync is not None:  # first: the zygote waits for it (joining a cgroup can take ms)
            _enter_owned_userns(int(spec["userns_base"]) + os.getpid(), sync)
        _join_cgroups(spec)
        if spec.get("join_ns"):
            _join_namespaces(spec["join_ns"])  # before reading our uid: 0 inside the holder's namespace
        uid, gid = os.geteuid(), os.getegid()
        unshare(CLONE_NEWPID | _ns_flags(spec, warm))
        times["unshared"] = time.monotonic()
        if spec.get("rootless"):
            with open("/proc/self/setgroups", "w") as fh:
                fh.write("deny")
            with open("/proc/self/uid_map", "w") as fh:
                fh.write(f"0 {uid} 1")
            with open("/proc/self/gid_map", "w") as fh:
                fh.write(f"0 {gid} 1")
        order_r, order_w = os.pipe()
        pid = os.fork()
    except Exception as exc:
        _send(sock, {"ev": "error", "error": _describe(exc, spec)})
        os._exit(1)
    if pid == 0:
        os.close(order_w)
        _init_main(sock, spec, times, order_r)
    # init's parent exits now: init is re-parented to the zygote (a child subreaper) and
    # lives exactly as long as its control socket.
    try:
        _send(sock, {"ev": "pid", "pid": pid})
    finally:
        os.close(order_w)
        os._exit(0)


#: The identity map a root sandbox's user namespace gets (`_enter_owned_userns`).
IDENTITY_MAP = "0 0 4294967295"
_IDENTITY_MAP_BYTES = IDENTITY_MAP.encode()


def _in_userns(spec: dict) -> bool:
    """Whether the sandbox runs in a user namespace of its own (rootless, or a root sandbox
    whose namespace an unprivileged uid owns): overlays then keep their metadata in
    `user.*` xattrs (`trusted.*` needs CAP_SYS_ADMIN in the host's namespace)."""
    return bool(spec.get("rootless")) or spec.get("userns_base") is not None


def _enter_owned_userns(owner: int, sync: tuple[int, int]) -> None:
    """A root sandbox's starter: make the sandbox's user namespace with `owner` (an
    unprivileged uid no process runs as: the spec's `userns_base` plus the starter's pid, so
    sandboxes started at the same time have distinct owners) as its effective uid, so the
    namespace belongs to that uid; the zygote (root of the host's namespace) then gives it
    the identity map (`_map_owned_userns`), and this process becomes its uid 0.

    Why: the kernel charges the per-user counters (inotify instances and watches, queued
    signals, POSIX message queue bytes, processes, namespaces) to the uid in the process's
    own user namespace and then to the owner of that namespace, up to the host's. A
    payload in the host's namespace, or in one root owns, drew on host root's counters and
    starved host root while it lived (`tests/security/test_user_counters.py`); here it
    draws on `owner`'s, and each sandbox has the host's per-user limits to itself (a
    starter's pid is reused only once it has exited, so two live sandboxes can share an
    owner, and then its counters, but never with a host process). Files keep their owners (identity map): the layers, the scratch
    tmpfs, ptys look as before. Any process running as `owner` on the host would hold every
    capability over the sandbox's namespaces, so `owner` must be a uid of no account."""
    to_zygote, from_zygote = sync
    os.setresuid(0, owner, 0)  # the namespace's owner is the creator's effective uid
    unshare(CLONE_NEWUSER)
    os.write(to_zygote, b"u")
    mapped = os.read(from_zygote, 1) == b"m"
    os.close(to_zygote)
    os.close(from_zygote)
    if not mapped:
        raise SandboxError(f"the fork server could not map the user namespace owned by uid {owner}")
    os.setresuid(0, 0, 0)  # (full capabilities in the new namespace: uid 0 there is the host's)


#: A rootless sandbox gets this fraction (1/N) of the caller's per-user counters.
USER_COUNTER_SHARE = 8

#: (the host's per-user limit, the sandbox user namespace's own) for inotify
USER_COUNTER_SYSCTLS = (
    ("fs/inotify/max_user_instances", "user/max_inotify_instances"),
    ("fs/inotify/max_user_watches", "user/max_inotify_watches"),
)


def _share_user_counters() -> None:
    """A rootless sandbox's init, in the user namespace it made as the caller: the kernel
    charges a payload's inotify instances and watches, queued signals and message queue
    bytes to the caller's uid too, so one payload could take all of them from the
    caller's own processes (`tests/security/test_user_counters.py`). Bound the sandbox to
    1/USER_COUNTER_SHARE of each: its namespace's inotify limits (writable by its root,
    counted for the whole namespace), and RLIMIT_SIGPENDING and RLIMIT_MSGQUEUE, soft and
    hard, which init's processes inherit and which the kernel compares with the count of
    the namespace's uid. Several sandboxes of one caller can still take it all together,
    and where /proc/sys is read-only only the rlimits apply."""
    for host, own in USER_COUNTER_SYSCTLS:
        try:
            fd = os.open(f"/proc/sys/{host}", os.O_RDONLY | os.O_CLOEXEC)
            try:
                total = int(os.read(fd, 64))
            finally:
                os.close(fd)
            fd = os.open(f"/proc/sys/{own}", os.O_WRONLY | os.O_CLOEXEC)
            try:
                os.write(fd, b"%d" % max(1, total // USER_COUNTER_SHARE))
            finally:
                os.close(fd)
        except OSError:  # /proc/sys read-only (a container's): the caller's limit alone holds
            pass
    for res in (resource.RLIMIT_SIGPENDING, resource.RLIMIT_MSGQUEUE):
        soft, _hard = resource.getrlimit(res)
        if soft != resource.RLIM_INFINITY:
            share = max(1, soft // USER_COUNTER_SHARE)
            resource.setrlimit(res, (share, share))


def _map_owned_userns(pid: int, sync: tuple[int, int]) -> None:
    """The zygote's half of `_enter_owned_userns`, once starter `pid`'s pipe is readable
    (`_zygote_main` waits for it with its other requests): it has made its user namespace;
    write the identity maps (only a process with CAP_SETUID and CAP_SETFCAP
    in the parent namespace may map uid 0), tell it. A starter that died first is an EOF
    here; a failure here is an EOF there (it reports the error)."""
    from_starter, to_starter = sync
    try:
        if os.read(from_starter, 1) == b"u":
            for name in ("uid_map", "gid_map"):
                # os.open, not open(): no text-I/O objects in the zygote's loop, which the
                # next fork would have it copy again page by page
                fd = os.open(f"/proc/{pid}/{name}", os.O_WRONLY | os.O_CLOEXEC)
                try:
                    os.write(fd, _IDENTITY_MAP_BYTES)
                finally:
                    os.close(fd)
            os.write(to_starter, b"m")
    except OSError:
        pass
    finally:
        os.close(from_starter)
        os.close(to_starter)


def _join_cgroups(spec: dict) -> None:
    """Move this process into the sandbox's cgroups (before its cgroup namespace is made, so
    that the namespace is rooted at the sandbox's own leaf). The files are the leaves' join
    files (`limits.join_file`: `tasks` on v1, which moves the writing thread: this process
    was just forked and has no other)."""
    for procs in spec.get("cgroup_procs", []):
        # os.open, not open(): a text file's objects cost a just-forked process page copies
        fd = os.open(procs, os.O_WRONLY | os.O_CLOEXEC)
        try:
            os.write(fd, b"0")  # 0: the writing process
        finally:
            os.close(fd)


def _ns_flags(spec: dict, warm: bool) -> int:
    """The namespaces a sandbox's init gets besides its pid namespace."""
    flags = CLONE_NEWNS
    if not warm:  # (a warm init makes its cgroup namespace once it has joined its cgroups)
        flags |= CLONE_NEWCGROUP  # after joining the limit cgroups
    if spec.get("rootless"):
        flags |= CLONE_NEWUSER
    if spec.get("network", "host") == "none":
        flags |= CLONE_NEWNET
    if spec.get("ipc", True):
        flags |= CLONE_NEWIPC
    if spec.get("uts", True):
        flags |= CLONE_NEWUTS
    return flags


def _direct(spec: dict) -> bool:
    """Whether the zygote forks this sandbox's init itself (`_fork_init`): as root, joining
    no other namespaces and making no user namespace. A sandbox with a user namespace
    (rootless, or root's, see `_enter_owned_userns`) needs a process that makes it first:
    its pid namespace must belong to it, or init could not mount its /proc. One that joins
    a mount holder's namespaces must not be the zygote. Both get a starter
    (`_start_sandbox`)."""
    return _CAN_FORK_INIT and not _in_userns(spec) and not spec.get("join_ns")


#: The zygote's own pid namespace (see `_fork_init`), opened when the zygote starts.
_OWN_PIDNS = -1

#: Whether the zygote may go back into its own pid namespace after unsharing one (set when
#: it starts, `_may_return_to_own_pidns`).
_CAN_FORK_INIT = False

NS_GET_USERNS = 0xB701  # ioctl on a namespace fd: an fd of the user namespace that owns it


def _may_return_to_own_pidns() -> bool:
    """`setns` into a pid namespace needs CAP_SYS_ADMIN in the user namespace that owns it:
    true for root in that user namespace, not for root of a nested one whose pid namespace
    belongs to its parent (`unshare -Ur` without -p). There the zygote keeps the starter
    (which unshares its pid namespace and never goes back) for every sandbox."""
    if os.geteuid() != 0:
        return False
    try:
        owner = fcntl.ioctl(_OWN_PIDNS, NS_GET_USERNS)
    except OSError:
        return False
    try:
        mine, theirs = os.stat("/proc/self/ns/user"), os.fstat(owner)
        return (mine.st_dev, mine.st_ino) == (theirs.st_dev, theirs.st_ino)
    finally:
        os.close(owner)


def _fork_init(sock: _socket.socket, spec: dict, leave_zygote) -> int:
    """In the zygote: fork the sandbox's init as pid 1 of a new pid namespace, with no
    starter process between (one Python fork and exit less per sandbox). The zygote's
    children go to the new pid namespace from `unshare` until `setns` puts them back in its
    own, right after the fork; if that fails the zygote exits (no later sandbox may start
    inside this one's namespace) and the controller starts another. init (after
    `leave_zygote()`, which closes the zygote's descriptors) joins its cgroups and makes its
    other namespaces itself. Returns init's pid, or -1 after reporting an error on `sock`
    (a caller that is gone by then gets nothing: the zygote goes on)."""
    times = {"helper": time.monotonic()}
    try:
        order_r, order_w = os.pipe()
        try:
            unshare(CLONE_NEWPID)
            try:
                pid = os.fork()
            except BaseException:
                _back_to_own_pidns()
                raise
        except BaseException:
            os.close(order_r)
            os.close(order_w)
            raise
    except Exception as exc:
        with contextlib.suppress(OSError):
            _send(sock, {"ev": "error", "error": _describe(exc, spec)})
        return -1
    if pid == 0:  # init: never returns into the zygote's loop
        try:
            os.close(order_w)
            leave_zygote()
            try:
                _join_cgroups(spec)
                unshare(_ns_flags(spec, bool(spec.get("warm"))))
                times["unshared"] = time.monotonic()
            except Exception as exc:
                _send(sock, {"ev": "error", "error": _describe(exc, spec)})
                os._exit(1)
            _init_main(sock, spec, times, order_r)
        finally:
            os._exit(1)
    _back_to_own_pidns()
    os.close(order_r)
    try:
        _send(sock, {"ev": "pid", "pid": pid})
    except OSError:  # the caller is gone: init finds its socket closed and exits
        pass
    finally:
        os.close(order_w)
    return pid


def _back_to_own_pidns() -> None:
    """The zygote's next children in its own pid namespace again (see `_fork_init`)."""
    try:
        setns(_OWN_PIDNS, CLONE_NEWPID)
    except OSError:
        os._exit(70)


def _init_main(sock: _socket.socket, spec: dict, times: dict, order_r: int) -> None:
    """A sandbox's init, pid 1 of its pid namespace, in its other namespaces: build the root,
    report "ready" (after the "pid" event, which `order_r`'s EOF signals), serve. Never
    returns."""
    warm = bool(spec.get("warm"))
    try:
        if spec.get("network", "host") == "none":
            _loopback_up()
        times["forked"] = time.monotonic()
        keyring = _join_fresh_keyring()
        if spec.get("rootless"):
            _share_user_counters()
        state = _base_root(spec)
        if warm:
            spec = _await_spec(sock, spec, state)
            times["spec"] = time.monotonic()
        if spec.get("uts", True):
            name = _b(spec.get("hostname", "sandbox"))
            _check(_lib().sethostname(name, len(name)), "sethostname")
        _prepare_payload_filter(bool(spec.get("seccomp", True)), bool(spec.get("ptrace")))
        info = _finish_root(spec, state)
        _harden_init()
        # the sandbox's per-process memory and file-size rlimits hold for init too; not
        # RLIMIT_NPROC (init must still fork to serve and clean up a full sandbox) nor
        # RLIMIT_CPU (a long-lived server; the cgroup budget counts it where there is one)
        _apply_rlimits(spec.get("init_rlimits"))
        info["keyring"] = keyring
        info["seccomp"] = _PAYLOAD_SECCOMP is not None
        times["root"] = time.monotonic()
        info["times"] = times
    except Exception as exc:
        try:
            _send(sock, {"ev": "error", "error": _describe(exc, spec)})
        except OSError:  # the caller is gone
            pass
        os._exit(1)
    os.read(order_r, 1)  # EOF once the "pid" event is sent: "pid" precedes "ready"
    os.close(order_r)
    _send(sock, {"ev": "ready", **info})
    try:
        _serve(sock)
    finally:
        os._exit(0)


PR_SET_CHILD_SUBREAPER = 36


def _zygote_main(sock_fd: int) -> None:
    """A single-threaded fork server: for each request (spec + control socket) it forks a
    process that becomes a sandbox. Forking this small, already-initialised Python costs
    about a millisecond; starting a new interpreter per sandbox costs 20-90 ms."""
    global _OWN_PIDNS, _CAN_FORK_INIT, _ETC_MASKED
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    prctl(PR_SET_CHILD_SUBREAPER, 1)
    _OWN_PIDNS = os.open("/proc/self/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
    _CAN_FORK_INIT = _may_return_to_own_pidns()
    zsock = _socket.socket(fileno=sock_fd)
    rfd = _sigchld_wakeup()
    # Everything a sandbox would otherwise redo is done once here and inherited by every
    # fork: both filter variants, the libc lookups, the capability count.
    for ptrace in (False, True):
        _filters(ptrace)
    _seccomp._prctl_fn()
    _cap_last()
    _has_close_range()
    re.compile(_DIGEST_DIR)  # (cached by `re`: `_layer_subdir_fd` matches it in every sandbox)
    if os.geteuid() == 0:  # a rootless payload is another uid to the host's files: "other" bits
        _ETC_MASKED = tuple(dict.fromkeys(ETC_MASKS + _private_etc()))
    # Objects that exist now are never collected: the cyclic GC of a forked sandbox then
    # never walks (and so never copies) the pages it shares with the zygote.
    gc.freeze()
    #: starter pid -> its sync pipes' zygote ends, until its user namespace is mapped
    mapping: dict[int, tuple[int, int]] = {}
    while True:
        ready = _wait_or_sigchld(zsock, rfd, extra=[sync[0] for sync in mapping.values()])
        while True:  # reap inits and sandbox starters
            try:
                pid, _status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            if pid in mapping:  # died before its map: its pid may be reused from now on
                for fd in mapping.pop(pid):
                    os.close(fd)
        for pid, sync in list(mapping.items()):
            if sync[0] in ready:
                del mapping[pid]
                _map_owned_userns(pid, sync)
        if zsock not in ready:
            continue
        try:
            msg, fds = _recv(zsock)
        except OSError:
            msg, fds = None, []
        if msg is None:
            return  # the caller is gone; running sandboxes live on until their sockets close
        # a request of one of several processes sharing this server brings its own reply
        # socket (`rootfs._Zygote.fork`): none of them waits for another's answer
        reply = _socket.socket(fileno=fds.pop(1)) if msg.get("reply") and len(fds) > 1 else None
        if not fds:
            if not msg.get("spec", {}).get("warm"):
                _send(zsock, {"ok": False, "error": "no control socket passed"})
            continue
        spec = msg["spec"]

        def leave_zygote(extras=fds[1:], reply=reply) -> None:
            """In a fork: drop what only the zygote holds."""
            zsock.close()
            os.close(rfd)
            os.close(_OWN_PIDNS)
            wfd = signal.set_wakeup_fd(-1)  # the wake-up pipe's write end (see _sigchld_wakeup)
            if wfd >= 0:
                os.close(wfd)
            _set_handler(signal.SIGCHLD, signal.SIG_DFL)
            for extra in extras:
                os.close(extra)
            for sync in mapping.values():  # other starters' pipes: their EOF is the zygote's exit
                for fd in sync:
                    os.close(fd)
            if reply is not None:
                reply.close()

        if _direct(spec):
            ctl = _socket.socket(fileno=fds[0])
            try:
                pid = _fork_init(ctl, spec, leave_zygote)
            finally:
                ctl.close()
                for fd in fds[1:]:
                    os.close(fd)
        else:
            up = down = None
            if spec.get("userns_base") is not None:  # (rootless: the starter maps itself)
                up, down = os.pipe(), os.pipe()
            pid = os.fork()
            if pid == 0:
                leave_zygote()
                sync = None
                if up is not None and down is not None:
                    os.close(up[0])
                    os.close(down[1])
                    sync = (up[1], down[0])
                _start_sandbox(_socket.socket(fileno=fds[0]), spec, sync)
            if up is not None and down is not None:
                os.close(up[1])
                os.close(down[0])
                # mapped once the starter has made its namespace (the loop above): the
                # zygote serves the next request meanwhile, not waiting for the starter to
                # get a core (a burst of 128 on 2 busy cores waited ~20 ms per sandbox)
                mapping[pid] = (up[0], down[1])
            for fd in fds:
                os.close(fd)
        if reply is not None:
            try:
                _send(reply, {"ok": True, "pid": pid})
            except OSError:  # the requester is gone: its sandbox's control socket ends too
                pass
            finally:
                reply.close()
        elif not spec.get("warm"):  # nobody waits for a warm sandbox's starter
            _send(zsock, {"ok": True, "pid": pid})


def _describe(exc: BaseException, spec: dict) -> str:
    text = str(exc) if isinstance(exc, SandboxError) else f"{type(exc).__name__}: {exc}"
    if isinstance(exc, OSError) and exc.errno in (errno.EPERM, errno.EACCES, errno.ENOSPC):
        if spec.get("rootless"):
            text += " (rootless: check that user namespaces are enabled, `sysctl user.max_user_namespaces` > 0)"
        else:
            text += " (needs root; pass rootless=True to use a user namespace)"
    return text


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--zygote":
        _zygote_main(int(sys.argv[2]))
    else:
        print("usage: init_program.py --zygote FD (the fork server minisandbox.sandbox.rootfs starts)", file=sys.stderr)
        sys.exit(2)
