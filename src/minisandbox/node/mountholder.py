"""The mount holder: a small daemon that owns one user + mount namespace and the squashfuse
processes serving the images mounted in it (rootless image mounts, `minisandbox.node.fusemount`).

Runs as a script (``unshare --user --map-root-user --mount --propagation private
python3 -I -S mountholder.py CACHE_ROOT SOCKET``), standard library only. It is root inside
its own user namespace only (mapped to the calling user), so it can do nothing the user
could not; it exists so that:

* FUSE mounts made by an unprivileged user (allowed in a user namespace, Linux >= 4.18) are
  shared by every sandbox of that user on the node: a sandbox joins this namespace (setns)
  before creating its own, so it sees the mounts; the host namespace never does;
* the squashfuse daemons are children of this process, in the host's pid namespace: no
  sandbox (each has its own pid namespace) can see, signal or trace them.

Requests arrive on a UNIX socket (mode 0600), one JSON line each. Only paths of the node
cache it was started for are accepted (`CACHE/archives/<sha256>` mounted at
`CACHE/layers/<sha256>`), and callers in another pid namespace (a sandboxed process that
could reach the socket) are refused.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time

HEX64 = re.compile(r"[0-9a-f]{64}")


def _same_pidns(pid: int) -> bool:
    """True if `pid` lives in our pid namespace, not a nested one (a sandbox): its NSpid line
    in /proc/PID/status (readable without ptrace rights) then has exactly one entry."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("NSpid:"):
                    return len(line.split()) == 2
    except OSError:
        pass
    return False


def _reap(children: dict[str, subprocess.Popen]) -> None:
    for mnt, proc in list(children.items()):
        if proc.poll() is not None:
            del children[mnt]
    while True:  # squashfuse helpers it may fork, and anything else re-parented here
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _mount(root: str, squashfuse: str, req: dict, children: dict[str, subprocess.Popen]) -> dict:
    image, mnt = req.get("image", ""), req.get("mountpoint", "")
    digest = os.path.basename(mnt)
    if (not HEX64.fullmatch(digest) or mnt != os.path.join(root, "layers", digest)
            or not HEX64.fullmatch(os.path.basename(image)) or image != os.path.join(root, "archives", os.path.basename(image))):
        return {"ok": False, "error": f"refusing to mount {image!r} at {mnt!r}: not an image of cache {root}"}
    if os.path.ismount(mnt):
        return {"ok": True, "already": True}
    err = tempfile.TemporaryFile()  # not a pipe: a daemon writing to a closed pipe would die
    proc = subprocess.Popen([squashfuse, "-f", "-o", "ro", image, mnt], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=err, start_new_session=True)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if os.path.ismount(mnt):
            children[mnt] = proc
            return {"ok": True, "pid": proc.pid}
        if proc.poll() is not None:
            err.seek(0)
            text = err.read().decode(errors="replace").strip()
            return {"ok": False, "error": f"squashfuse exited {proc.returncode}: {text.splitlines()[-1] if text else ''}"}
        time.sleep(0.002)
    proc.kill()
    return {"ok": False, "error": f"squashfuse did not mount {image} within 30 s"}


def _umount(root: str, req: dict, children: dict[str, subprocess.Popen]) -> dict:
    mnt = req.get("mountpoint", "")
    if not HEX64.fullmatch(os.path.basename(mnt)) or mnt != os.path.join(root, "layers", os.path.basename(mnt)):
        return {"ok": False, "error": f"refusing to unmount {mnt!r}: not a layer of cache {root}"}
    if not os.path.ismount(mnt):
        return {"ok": True, "was_mounted": False}
    proc = subprocess.run(["umount", mnt], capture_output=True, text=True)
    if proc.returncode != 0:
        return {"ok": False, "busy": True, "error": (proc.stderr or "").strip()}
    child = children.pop(mnt, None)
    if child is not None:
        try:
            child.wait(timeout=10)
        except subprocess.TimeoutExpired:
            child.kill()
    return {"ok": True, "was_mounted": True}


def main(root: str, sock_path: str, squashfuse: str) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    children: dict[str, subprocess.Popen] = {}
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    tmp = f"{sock_path}.{os.getpid()}.tmp"
    if os.path.exists(tmp):
        os.unlink(tmp)
    old = os.umask(0o077)
    srv.bind(tmp)
    os.umask(old)
    srv.listen(16)
    os.replace(tmp, sock_path)  # appears only once it accepts connections
    while True:
        conn, _ = srv.accept()
        with conn:
            _reap(children)
            pid, _uid, _gid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                                                   struct.calcsize("3i")))
            try:
                line = conn.makefile("rb").readline()
                req = json.loads(line or b"{}")
            except ValueError:
                req = {}
            if not _same_pidns(pid):
                reply = {"ok": False, "error": "refused: caller is in another pid namespace (a sandbox?)"}
            elif req.get("op") == "ping":
                reply = {"ok": True, "pid": os.getpid()}
            elif req.get("op") == "mount":
                reply = _mount(root, squashfuse, req, children)
            elif req.get("op") == "umount":
                reply = _umount(root, req, children)
            elif req.get("op") == "stop":
                for mnt in list(children):
                    _umount(root, {"mountpoint": mnt}, children)
                busy = [m for m in children]
                if busy:
                    reply = {"ok": False, "busy": True, "error": f"{len(busy)} image(s) still in use"}
                else:
                    conn.sendall(json.dumps({"ok": True}).encode() + b"\n")
                    try:
                        os.unlink(sock_path)
                    except FileNotFoundError:
                        pass
                    return
            else:
                reply = {"ok": False, "error": f"unknown request {req.get('op')!r}"}
            try:
                conn.sendall(json.dumps(reply).encode() + b"\n")
            except OSError:
                pass


if __name__ == "__main__":
    if len(sys.argv) != 4:
        print("usage: mountholder.py CACHE_ROOT SOCKET SQUASHFUSE (internal daemon of minisandbox.node.fusemount)",
              file=sys.stderr)
        sys.exit(2)
    main(sys.argv[1], sys.argv[2], sys.argv[3])
