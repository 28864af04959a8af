"""Attack: undo the sandbox's limits and isolation from inside through a nested user
namespace (and the other kernel interfaces Docker's default seccomp profile closes).
Each payload runs as the sandboxed agent would, as root and rootless; the same sandbox
must still run ordinary work (threads, subprocesses, multiprocessing, git)."""

from __future__ import annotations

import json
import platform

import pytest

from tests.security.conftest import MODES

pytestmark = pytest.mark.slow

# Raw syscalls through ctypes: what a payload that does not trust libc wrappers would do.
PAYLOAD = r"""
import ctypes, errno, json, os
libc = ctypes.CDLL(None, use_errno=True)
def call(nr, *args):
    ctypes.set_errno(0)
    r = libc.syscall(nr, *[ctypes.c_long(a) for a in args])
    return "ok" if r >= 0 else errno.errorcode.get(ctypes.get_errno(), "?")
res = {}
CLONE_NEWUSER, SIGCHLD = 0x10000000, 17
res["unshare_user"] = call(272, CLONE_NEWUSER)
res["clone_newuser"] = call(56, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0)
res["clone3"] = call(435, 0, 0)
res["keyctl"] = call(250, 0, -3, 0)                       # KEYCTL_GET_KEYRING_ID @s
res["add_key"] = call(248, 0, 0, 0, 0, -4)
res["request_key"] = call(249, 0, 0, 0, 0)
res["bpf"] = call(321, 0, 0, 0)
res["perf_event_open"] = call(298, 0, -1, 0, -1, 0)
res["mount"] = call(165, 0, 0, 0, 0, 0)
res["setns"] = call(308, 0, 0)
res["userfaultfd"] = call(323, 0)
res["x32_unshare"] = call(0x40000000 | 272, CLONE_NEWUSER)
print(json.dumps(res))
"""

WORK = r"""
import concurrent.futures as cf, json, multiprocessing as mp, subprocess, threading
with cf.ThreadPoolExecutor(4) as pool:
    squares = sum(pool.map(lambda x: x * x, range(10)))
with mp.Pool(2) as p:
    doubled = p.map(abs, [-1, -2, -3])
sub = subprocess.run(["git", "-c", "safe.directory=*", "status", "--short"], capture_output=True, text=True,
                     cwd="/testbed").returncode
print(json.dumps({"threads": squares, "mp": doubled, "git": sub}))
"""


@pytest.mark.skipif(platform.machine() != "x86_64", reason="the payload uses x86_64 syscall numbers")
@pytest.mark.parametrize("attack", MODES, indirect=True)
def test_nested_namespaces_and_kernel_interfaces_are_denied(attack):
    out = attack(
        """
        with Sandbox([Layer(P["repo"], "/testbed")], network="none") as sb:
            r = sb.run(["python3", "-c", P["payload"]])
            u = sb.execute("unshare -Ur true; echo rc=$?; grep Seccomp: /proc/self/status")
            w = sb.run(["python3", "-c", P["work"]])
            out = {"payload": r.output, "unshare": u.output, "work": w.output, "rc": w.returncode,
                   "info": sb._root.info.get("seccomp")}
    """,
        payload=PAYLOAD,
        work=WORK,
    )
    res = json.loads(out["payload"].strip().splitlines()[-1])
    assert res["unshare_user"] == "EPERM" and res["clone_newuser"] == "EPERM"
    assert res["clone3"] == "ENOSYS"  # libc falls back to clone, whose flags the filter sees
    for name in (
        "keyctl",
        "add_key",
        "request_key",
        "bpf",
        "perf_event_open",
        "mount",
        "setns",
        "userfaultfd",
        "x32_unshare",
    ):
        assert res[name] == "EPERM", (name, res)
    assert "Operation not permitted" in out["unshare"] and "rc=0" not in out["unshare"]
    assert "Seccomp:\t2" in out["unshare"] and out["info"] is True
    # the legitimate path: threads (clone3 -> clone fallback), processes, multiprocessing, git
    work = json.loads(out["work"].strip().splitlines()[-1])
    assert out["rc"] == 0 and work == {"threads": 285, "mp": [1, 2, 3], "git": 0}


@pytest.mark.parametrize("attack", MODES, indirect=True)
def test_seccomp_off_is_a_debug_switch(attack):
    """seccomp=False really turns the filter off (so the test above tests the filter)."""
    out = attack("""
        with Sandbox([Layer(P["repo"], "/testbed")], seccomp=False) as sb:
            out = {"o": sb.execute("grep Seccomp: /proc/self/status; unshare -U true; echo rc=$?").output}
    """)
    assert "Seccomp:\t0" in out["o"] and "rc=0" in out["o"]


def test_filter_program_is_well_formed():
    """The BPF program: a multiple of 8 bytes, < 4096 instructions, kills foreign ABIs."""
    from minisandbox.sandbox import seccomp

    for machine in ("x86_64", "aarch64"):
        prog = seccomp.program(machine)
        assert len(prog) % 8 == 0 and 0 < len(prog) // 8 < 4096
    with pytest.raises(seccomp.SeccompUnsupported, match="seccomp=False"):
        seccomp.program("sparc64")


INIT_PROBE = r"""
import ctypes, errno, json, os
from minisandbox.sandbox import seccomp
libc = ctypes.CDLL(None, use_errno=True)
def call(nr, *args):
    ctypes.set_errno(0)
    r = libc.syscall(nr, *[ctypes.c_long(a) for a in args])
    return "ok" if r >= 0 else errno.errorcode.get(ctypes.get_errno(), "?")
libc.prctl(38, 1, 0, 0, 0)
seccomp.install(seccomp.init_program())
res = {"unshare_user": call(272, 0x10000000), "unshare_net": call(272, 0x40000000),
       "unshare_pid_mnt": call(272, 0x20000000 | 0x00020000), "keyctl": call(250, 0, -3, 0),
       "add_key": call(248, 0, 0, 0, 0, -4), "ptrace": call(101, 16, 1, 0, 0), "setns": call(308, 0, 0),
       "bpf": call(321, 0, 0, 0), "mount_proc": call(165, 0, 0, 0, 0, 0)}
print(json.dumps(res))
"""


@pytest.mark.root
@pytest.mark.skipif(platform.machine() != "x86_64", reason="the probe uses x86_64 syscall numbers")
def test_init_filter_keeps_what_init_needs_and_closes_the_rest(as_root):
    """init's own filter (which its helpers inherit): a payload's pid namespace with its
    /proc (a new pid and mount namespace, mount) stays possible, and nothing else the
    payloads' filter closes: no nested user namespace, keyring, ptrace, setns or bpf."""
    import subprocess
    import sys

    from tests.fixtures.sandbox import SRC

    proc = subprocess.run(
        [sys.executable, "-c", INIT_PROBE],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PYTHONPATH": SRC, "PATH": "/usr/bin:/bin"},
    )
    assert proc.returncode == 0, proc.stderr
    res = json.loads(proc.stdout)
    assert res["unshare_pid_mnt"] == "ok", res
    assert res["mount_proc"] == "EFAULT", res  # reached the kernel (bad pointers), not the filter's EPERM
    for name in ("unshare_user", "unshare_net", "keyctl", "add_key", "ptrace", "setns", "bpf"):
        assert res[name] == "EPERM", (name, res)
