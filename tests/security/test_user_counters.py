"""Attack: exhaust a per-user kernel counter from inside and starve the host's processes of
the same uid while the payload lives. The kernel charges inotify instances, queued signals
(RLIMIT_SIGPENDING) and POSIX message queue bytes (RLIMIT_MSGQUEUE) to a uid, hierarchically:
to the uid in the process's user namespace and then to whoever made that namespace. A root
sandbox's payload is uid 0 without capabilities; when its namespace is the host's (or one
root made), it drew on host root's counters: measured, a payload holding 128 inotify
instances made `inotify_init1` of every host root process fail with EMFILE.

The payload takes as much of each counter as it can and holds it; the runner (host root, or
the test user for rootless) then asks for one more of the same on the host."""

from __future__ import annotations

import pytest

from tests.security.conftest import MODES

pytestmark = pytest.mark.slow

#: In the sandbox: take all of one counter (P["what"]), say how much on stdout, hold it until
#: /tmp/release exists (the runner writes it), at most 60 s.
PAYLOAD = r"""
import ctypes, errno, json, os, signal, sys, time
libc = ctypes.CDLL(None, use_errno=True)
what, got, err = sys.argv[1], 0, None
held = []
if what == "inotify":
    while got < 100000:
        fd = libc.inotify_init1(0o2000000)
        if fd < 0:
            err = errno.errorcode[ctypes.get_errno()]
            break
        held.append(fd)
        got += 1
elif what == "sigpending":
    sig = signal.SIGRTMIN
    signal.pthread_sigmask(signal.SIG_BLOCK, [sig])
    while got < 10**6:
        if libc.sigqueue(os.getpid(), sig, ctypes.c_void_p(0)) != 0:
            err = errno.errorcode[ctypes.get_errno()]
            break
        got += 1
elif what == "mqueue":
    class Attr(ctypes.Structure):
        _fields_ = [("flags", ctypes.c_long), ("maxmsg", ctypes.c_long), ("msgsize", ctypes.c_long),
                    ("curmsgs", ctypes.c_long), ("pad", ctypes.c_long * 4)]
    for maxmsg, msgsize in ((10, 1024), (1, 64), (1, 1)):  # big queues, then the crumbs
        while got < 10000:
            attr = Attr(0, maxmsg, msgsize)
            fd = libc.mq_open(f"/msb-{got}".encode(), os.O_RDWR | os.O_CREAT, 0o600, ctypes.byref(attr))
            if fd < 0:
                err = errno.errorcode[ctypes.get_errno()]
                break
            got += 1
print(json.dumps({"got": got, "err": err}), flush=True)
for _ in range(600):
    if os.path.exists("/tmp/release"):
        break
    time.sleep(0.1)
"""

#: On the host, as the runner's uid: one more of the same counter.
PROBE = r"""
import ctypes, errno, os, signal, sys
libc = ctypes.CDLL(None, use_errno=True)

def probe(what):
    if what == "inotify":
        fd = libc.inotify_init1(0o2000000)
        if fd >= 0:
            os.close(fd)
            return "ok"
    elif what == "sigpending":
        sig = signal.SIGRTMIN + 1
        signal.pthread_sigmask(signal.SIG_BLOCK, [sig])
        try:
            libc.pthread_self.restype = ctypes.c_ulong  # to this thread: the runner has others
            err = libc.pthread_sigqueue(ctypes.c_ulong(libc.pthread_self()), sig, ctypes.c_void_p(0))
            if err == 0:
                signal.sigtimedwait([sig], 0)
                return "ok"
            return errno.errorcode[err]  # (pthread_sigqueue returns the error number)
        finally:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, [sig])
    elif what == "mqueue":
        class Attr(ctypes.Structure):
            _fields_ = [("flags", ctypes.c_long), ("maxmsg", ctypes.c_long), ("msgsize", ctypes.c_long),
                        ("curmsgs", ctypes.c_long), ("pad", ctypes.c_long * 4)]
        name = f"/msb-probe-{os.getpid()}".encode()
        attr = Attr(0, 1, 64)
        fd = libc.mq_open(name, os.O_RDWR | os.O_CREAT, 0o600, ctypes.byref(attr))
        if fd >= 0:
            os.close(fd)
            libc.mq_unlink(name)
            return "ok"
    return errno.errorcode[ctypes.get_errno()]
"""

RUNNER = """
import time
exec(P["probe"])
out["before"] = probe(P["what"])
with Sandbox([Layer(P["repo"], "/testbed")]) as sb:
    sb.write_file("/tmp/payload.py", P["payload"])
    sb.run(["sh", "-c", "python3 /tmp/payload.py $0 > /tmp/state 2>&1 &", P["what"]])
    state = b""
    for _ in range(600):
        try:
            state = sb.read_file("/tmp/state")
        except OSError:  # not made yet
            state = b""
        if state.endswith(b"\\n"):
            break
        time.sleep(0.1)
    out["payload"] = json.loads(state.decode().splitlines()[-1])
    out["host"] = probe(P["what"])  # while the payload holds everything it could take
    with Sandbox([Layer(P["repo"], "/testbed")]) as other:  # and a sandbox started meanwhile
        code = P["probe"] + "\\nprint(probe(sys.argv[1]))"
        out["other"] = other.run(["python3", "-c", code, P["what"]]).output.strip().splitlines()[-1]
    sb.write_file("/tmp/release", "")
for _ in range(100):  # (the kernel frees a dead ipc namespace's queues a little later)
    out["after"] = probe(P["what"])
    if out["after"] == "ok":
        break
    time.sleep(0.1)
"""


@pytest.mark.parametrize("what", ["inotify", "sigpending", "mqueue"])
@pytest.mark.parametrize("attack", MODES, indirect=True)
def test_payload_cannot_starve_host_uid(attack, what):
    out = attack(RUNNER, payload=PAYLOAD, probe=PROBE, what=what)
    assert out["before"] == "ok" and out["after"] == "ok", out
    assert out["payload"]["got"] > 0 and out["payload"]["err"], out  # it took what it could
    assert out["host"] == "ok", out  # and the host's processes of the runner's uid still get one
    assert out["other"] == "ok", out  # so does another sandbox's payload
