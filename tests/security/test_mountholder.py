"""Attack: reach the rootless mount holder, which runs outside every sandbox's pid namespace
and serves all the sandboxes of a user on the node.

What holds: a sandbox joined to the holder's namespaces cannot see, signal or trace it (it
is in the host's pid namespace); the holder is non-dumpable, so even a process of the same
user without rights over its user namespace cannot ptrace it; a caller from a sandbox is
refused before anything is read from it, and a caller that connects and sends nothing
(holding its request open) only ties up its own thread: the holder keeps serving others.
"""

from __future__ import annotations

import pytest

from tests.fixtures.sandbox import run_json_as_user

pytestmark = pytest.mark.rootless

SNIPPET = r'''
import ctypes, errno, json, os, socket, subprocess, sys, tempfile, time
from pathlib import Path
import minisandbox
from minisandbox.sandbox.rootfs import Bind
from minisandbox.sandbox.sandbox import Sandbox

SCRIPT = os.path.join(os.path.dirname(minisandbox.__file__), "node", "mountholder.py")  # as node.fusemount starts it
root = Path(tempfile.mkdtemp(prefix="msb-holder-"))
(root / "mounts").mkdir()
sock = root / "mounts" / "holder.sock"
holder = subprocess.Popen(["unshare", "--user", "--map-root-user", "--mount", "--propagation", "private", "--",
                           sys.executable, "-I", "-S", "-B", SCRIPT, str(root), str(sock),
                           "/bin/false"], stdin=subprocess.DEVNULL)
while not sock.exists():
    time.sleep(0.01)
pid = holder.pid
ns = {"pid": pid, "start": open(f"/proc/{pid}/stat", "rb").read().rsplit(b")", 1)[1].split()[19].decode()}
out = {}

def ping():
    t = time.monotonic()
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(30)
        s.connect(str(sock))
        s.sendall(b'{"op": "ping"}\n')
        reply = json.loads(s.makefile("rb").readline())
    return reply.get("ok"), time.monotonic() - t

# 1. callers that hold their request open do not stop the holder serving others
held = []
for _ in range(20):
    c = socket.socket(socket.AF_UNIX)
    c.connect(str(sock))
    held.append(c)
out["ping_while_held"] = ping()

# 2. a sandbox joined to the holder's namespaces, with the socket in reach
probe = r"""
import ctypes, errno, json, os, signal, socket, sys, time
pid = int(sys.argv[1])
libc = ctypes.CDLL(None, use_errno=True)
seen = [n for n in os.listdir("/proc") if n.isdigit() and n != str(os.getpid()) and b"mountholder" in open(f"/proc/{n}/cmdline", "rb").read()]
try:
    os.kill(pid, 0)
    kill = "delivered"
except OSError as exc:
    kill = errno.errorcode[exc.errno]
r = libc.ptrace(16, pid, 0, 0)
trace = errno.errorcode.get(ctypes.get_errno(), "?") if r else "attached"
s = socket.socket(socket.AF_UNIX)
s.settimeout(10)
s.connect("/holder/holder.sock")
reply = s.makefile("rb").readline().decode()
print(json.dumps({"seen": seen, "kill": kill, "ptrace": trace, "reply": reply}))
"""
with Sandbox([], join_ns=ns, binds=[Bind(str(root / "mounts"), "/holder", False)], ptrace=True) as sb:
    res = sb.run(["python3", "-c", probe, str(pid)])
    out["inside"] = json.loads(res.output.strip().splitlines()[-1]) if res.returncode == 0 else res.output
out["ping_after_sandbox"] = ping()

# 3. non-dumpable: a process of the same user in another user namespace cannot trace it
trace = ("import ctypes, errno, sys; libc = ctypes.CDLL(None, use_errno=True); "
         "r = libc.ptrace(16, int(sys.argv[1]), 0, 0); "
         "print('attached' if r == 0 else errno.errorcode[ctypes.get_errno()])")
proc = subprocess.run(["unshare", "--user", "--", sys.executable, "-c", trace, str(pid)], capture_output=True,
                      text=True)
out["sibling_userns_ptrace"] = proc.stdout.strip() or proc.stderr.strip()
for c in held:
    c.close()
out["alive"] = holder.poll() is None
with socket.socket(socket.AF_UNIX) as s:
    s.connect(str(sock))
    s.sendall(b'{"op": "stop"}\n')
    out["stop"] = json.loads(s.makefile("rb").readline())
holder.wait(10)
print(json.dumps(out))
'''


def test_mount_holder_cannot_be_reached_or_stalled_from_a_sandbox(rootless_user) -> None:
    out = run_json_as_user(SNIPPET, timeout=120)
    ok, seconds = out["ping_while_held"]
    assert ok is True and seconds < 5, out  # served while 20 connections hold their requests open
    inside = out["inside"]
    assert isinstance(inside, dict), inside
    assert inside["seen"] == [], inside  # not in the sandbox's pid namespace
    assert inside["kill"] == "ESRCH" or inside["ptrace"] in ("ESRCH", "EPERM"), inside
    assert inside["ptrace"] in ("ESRCH", "EPERM"), inside
    assert "another pid namespace" in inside["reply"], inside
    assert out["ping_after_sandbox"][0] is True, out
    assert out["sibling_userns_ptrace"] == "EPERM", out
    assert out["alive"] is True and out["stop"] == {"ok": True}, out
