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
could reach the socket) are refused before anything is read from them.

No caller can make it stop serving the others: each connection is served by a thread of
its own and must send its request within `REQUEST_TIMEOUT` seconds (a client that connects
and holds the connection open only ties up its own thread); mounts and unmounts take a
lock, not the accept loop. The holder is non-dumpable (PR_SET_DUMPABLE 0): even a process of
the same user in a sandbox joined to its namespaces, which could not name it anyway (it is
in the host's pid namespace), could not ptrace it or read its memory; the controller that
started it can still read its /proc entries (it owns the holder's user namespace).
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
import threading
import time

HEX64 = re.compile(r"[0-9a-f]{64}")

#: Seconds a connection has to send its request line.
REQUEST_TIMEOUT = 5.0

#: Seconds the accept loop waits before it looks after itself: a squashfuse that died
#: (killed, or its image unmounted from outside) would otherwise stay a zombie until the
#: next request, which on an idle node may never come; and a holder whose socket is gone
#: (its cache deleted) can never be asked to stop, so it stops on its own.
IDLE_REAP_SECONDS = 2.0

PR_SET_DUMPABLE = 4


def _not_dumpable() -> None:
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)


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
    if (
        not HEX64.fullmatch(digest)
        or mnt != os.path.join(root, "layers", digest)
        or not HEX64.fullmatch(os.path.basename(image))
        or image != os.path.join(root, "archives", os.path.basename(image))
    ):
        return {"ok": False, "error": f"refusing to mount {image!r} at {mnt!r}: not an image of cache {root}"}
    if os.path.ismount(mnt):
        return {"ok": True, "already": True}
    err = tempfile.TemporaryFile()  # not a pipe: a daemon writing to a closed pipe would die
    proc = subprocess.Popen(
        [squashfuse, "-f", "-o", "ro", image, mnt],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=err,
        start_new_session=True,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if os.path.ismount(mnt):
            children[mnt] = proc
            return {"ok": True, "pid": proc.pid}
        if proc.poll() is not None:
            err.seek(0)
            text = err.read().decode(errors="replace").strip()
            return {
                "ok": False,
                "error": f"squashfuse exited {proc.returncode}: {text.splitlines()[-1] if text else ''}",
            }
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


def _read_request(conn: socket.socket) -> dict:
    """The request line, read within REQUEST_TIMEOUT seconds ({} on a timeout or bad JSON)."""
    conn.settimeout(REQUEST_TIMEOUT)
    deadline = time.monotonic() + REQUEST_TIMEOUT
    data = b""
    try:
        while b"\n" not in data and len(data) < 1 << 16 and time.monotonic() < deadline:
            chunk = conn.recv(4096)
            if not chunk:
                break
            data += chunk
        return json.loads(data.split(b"\n", 1)[0] or b"{}")
    except (OSError, ValueError):
        return {}


def _serve_one(
    conn: socket.socket,
    root: str,
    sock_path: str,
    squashfuse: str,
    children: dict[str, subprocess.Popen],
    lock: threading.Lock,
) -> None:
    """One connection, in a thread of its own."""
    with conn:
        req = _read_request(conn)
        op = req.get("op")
        if op == "ping":
            if lock.acquire(blocking=False):  # reap exited daemons, unless a mount is under way
                try:
                    _reap(children)
                finally:
                    lock.release()
            reply = {"ok": True, "pid": os.getpid()}
        elif op in ("mount", "umount", "stop"):
            with lock:
                _reap(children)
                if op == "mount":
                    reply = _mount(root, squashfuse, req, children)
                elif op == "umount":
                    reply = _umount(root, req, children)
                else:
                    for mnt in list(children):
                        _umount(root, {"mountpoint": mnt}, children)
                    if children:
                        reply = {"ok": False, "busy": True, "error": f"{len(children)} image(s) still in use"}
                    else:
                        try:
                            os.unlink(sock_path)
                        except FileNotFoundError:
                            pass
                        try:
                            conn.sendall(json.dumps({"ok": True}).encode() + b"\n")
                        finally:
                            os._exit(0)
        else:
            reply = {"ok": False, "error": f"unknown request {op!r}"}
        try:
            conn.settimeout(REQUEST_TIMEOUT)
            conn.sendall(json.dumps(reply).encode() + b"\n")
        except OSError:
            pass


def _reachable(sock_path: str, ino: int) -> bool:
    """Is our socket still where callers look for it (not deleted with its cache, not
    replaced by another holder's)?"""
    try:
        return os.stat(sock_path).st_ino == ino
    except OSError:
        return False


def _abandon(children: dict[str, subprocess.Popen]) -> None:
    """Nobody can reach us any more: detach every mount, end its daemon, and exit (the
    namespace, and anything still mounted in it, goes with the last process in it)."""
    for mnt, proc in children.items():
        subprocess.run(["umount", "-l", mnt], capture_output=True)
        proc.terminate()
    for proc in children.values():
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    os._exit(0)


def main(root: str, sock_path: str, squashfuse: str) -> None:
    _not_dumpable()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    children: dict[str, subprocess.Popen] = {}
    lock = threading.Lock()
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    tmp = f"{sock_path}.{os.getpid()}.tmp"
    if os.path.exists(tmp):
        os.unlink(tmp)
    old = os.umask(0o077)
    srv.bind(tmp)
    os.umask(old)
    srv.listen(64)
    os.replace(tmp, sock_path)  # appears only once it accepts connections
    ours = os.stat(sock_path).st_ino
    srv.settimeout(IDLE_REAP_SECONDS)  # accepted connections are blocking (no default timeout)
    while True:
        try:
            conn, _ = srv.accept()
        except TimeoutError:
            if lock.acquire(blocking=False):  # not while a mount or unmount is under way
                try:
                    _reap(children)
                    if not _reachable(sock_path, ours):
                        _abandon(children)
                finally:
                    lock.release()
            continue
        pid, _uid, _gid = struct.unpack(
            "3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        )
        if not _same_pidns(pid):  # refused before reading anything: a sandbox cannot hold us
            try:
                conn.setblocking(False)
                conn.send(
                    json.dumps(
                        {"ok": False, "error": "refused: caller is in another pid namespace (a sandbox?)"}
                    ).encode()
                    + b"\n"
                )
            except OSError:
                pass
            conn.close()
            continue
        threading.Thread(
            target=_serve_one, args=(conn, root, sock_path, squashfuse, children, lock), daemon=True
        ).start()


if __name__ == "__main__":
    if len(sys.argv) != 4:
        print(
            "usage: mountholder.py CACHE_ROOT SOCKET SQUASHFUSE (internal daemon of minisandbox.node.fusemount)",
            file=sys.stderr,
        )
        sys.exit(2)
    main(sys.argv[1], sys.argv[2], sys.argv[3])
