"""Rootless image mounts: squashfuse inside the node cache's mount-holder namespace.

Why: mounting a verified squashfs image makes an environment ready in milliseconds instead
of unpacking ten thousand files (docs/runtime.md, bench/bench_runtime.py), but the kernel's
squashfs needs root and loop devices. FUSE file systems may be mounted by an unprivileged
user inside a user namespace (Linux >= 4.18), and `squashfuse` (a Debian package) serves
squashfs through FUSE. A mount only exists in the mount namespace it was made in, so every
cache has one long-lived *mount holder* (`minisandbox/node/mountholder.py`): a process in
its own user + mount namespace that starts one squashfuse per image and keeps it. Sandboxes
join the holder's namespaces before creating theirs (`PreparedTask.mount_ns`, the sandbox
spec's `join_ns`), so they see the mounted layers at `layers/<sha256>`; in the host
namespace those stay empty directories.

The FUSE daemons run in the host pid namespace as children of the holder: no sandbox can
see or signal them (each sandbox has its own pid namespace). The image file is checked
against the manifest's sha256 by the cache before every mount (`Cache.image_layer`).

State under `<cache>/mounts/`: `holder.json` (pid, kernel start time, socket) and
`holder.sock`. A dead holder (reboot, OOM kill) takes its mounts with it; the next
`ensure()` starts a new one and layers are mounted again on their next use.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from minisandbox.errors import MinisandboxError
from minisandbox.fsutil import FileLock, atomic_write_json
from minisandbox.sandbox.leftovers import proc_start

HOLDER_SCRIPT = Path(__file__).with_name("mountholder.py")


class FuseMountError(MinisandboxError, RuntimeError):
    """A rootless image mount failed; the caller may unpack the archive instead."""


def squashfuse_bin() -> str | None:
    """The squashfuse executable: $MINISANDBOX_SQUASHFUSE or the one on PATH."""
    exe = os.environ.get("MINISANDBOX_SQUASHFUSE") or shutil.which("squashfuse")
    return exe if exe and os.access(exe, os.X_OK) else None


def unavailable_reason() -> str | None:
    """Why this process cannot mount images through FUSE (None: it can)."""
    if squashfuse_bin() is None:
        return "squashfuse not found (apt-get install squashfuse, or set MINISANDBOX_SQUASHFUSE)"
    for tool, pkg in (("unshare", "util-linux"), ("umount", "mount")):
        if not shutil.which(tool):
            return f"{tool} not found (apt-get install {pkg})"
    if not os.access("/dev/fuse", os.R_OK | os.W_OK):
        return "/dev/fuse is not readable and writable by this user (udev's default is mode 0666: chmod 0666 /dev/fuse)"
    try:
        if int(Path("/proc/sys/user/max_user_namespaces").read_text()) <= 0:
            return "user namespaces are disabled (sysctl user.max_user_namespaces = 0)"
    except OSError:
        return "cannot read /proc/sys/user/max_user_namespaces"
    try:
        with open("/proc/filesystems") as f:
            if not any(line.split()[-1] == "fuse" for line in f if line.strip()):
                return "the kernel has no fuse file system (modprobe fuse)"
    except OSError:
        return "cannot read /proc/filesystems"
    return None


def _escape_mountinfo(path: str) -> str:
    """A path as /proc/PID/mountinfo writes it (space, tab, newline, backslash octal-escaped)."""
    return path.replace("\\", "\\134").replace(" ", "\\040").replace("\t", "\\011").replace("\n", "\\012")


class MountHolder:
    """The mount holder of one node cache (`root`): start, ask, stop."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root).resolve()
        self.dir = self.root / "mounts"
        self.state = self.dir / "holder.json"
        self.sock = self.dir / "holder.sock"

    # -- lifecycle -------------------------------------------------------------------------
    def _read_state(self) -> dict[str, Any] | None:
        try:
            data = json.loads(self.state.read_text())
        except (FileNotFoundError, ValueError):
            return None
        pid = data.get("pid")
        if not isinstance(pid, int) or proc_start(pid) != data.get("start"):
            return None
        return data

    def alive(self) -> dict[str, Any] | None:
        """{"pid", "start"} of the running holder, or None."""
        data = self._read_state()
        if data is None:
            return None
        try:
            self._request({"op": "ping"}, timeout=5)
        except FuseMountError:
            return None
        return {"pid": data["pid"], "start": data["start"]}

    def ensure(self) -> dict[str, Any]:
        """Start the holder unless one is running; returns {"pid", "start"}."""
        data = self.alive()
        if data:
            return data
        self.dir.mkdir(parents=True, exist_ok=True)
        with FileLock(str(self.dir / "holder.lock")):
            data = self.alive()
            if data:
                return data
            reason = unavailable_reason()
            if reason:
                raise FuseMountError(f"cannot mount images without root: {reason}")
            self.sock.unlink(missing_ok=True)
            log = open(self.dir / "holder.log", "ab")
            try:
                proc = subprocess.Popen(
                    [
                        "unshare",
                        "--user",
                        "--map-root-user",
                        "--mount",
                        "--propagation",
                        "private",
                        "--",
                        sys.executable,
                        "-I",
                        "-S",
                        "-B",
                        str(HOLDER_SCRIPT),
                        str(self.root),
                        str(self.sock),
                        str(squashfuse_bin()),
                    ],
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=log,
                    cwd="/",
                    start_new_session=True,
                )
            finally:
                log.close()
            deadline = time.monotonic() + 20
            while not self.sock.exists():
                if proc.poll() is not None or time.monotonic() > deadline:
                    proc.kill()
                    tail = (self.dir / "holder.log").read_text(errors="replace").strip().splitlines()
                    raise FuseMountError(
                        f"mount holder for {self.root} did not start (exit {proc.poll()}): "
                        f"{tail[-1] if tail else 'no message'}; see {self.dir / 'holder.log'}"
                    )
                time.sleep(0.002)
            data = {"pid": proc.pid, "start": proc_start(proc.pid)}
            atomic_write_json(self.state, {**data, "socket": str(self.sock)})
            return data

    def stop(self) -> bool:
        """Unmount everything and end the holder; False if an image is still in use."""
        data = self._read_state()
        if data is None:
            return True
        try:
            reply = self._request({"op": "stop"}, timeout=60)
        except FuseMountError:
            return True
        if not reply.get("ok"):
            return False
        self.state.unlink(missing_ok=True)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:  # reap it if this process started it
            try:
                pid, _ = os.waitpid(data["pid"], os.WNOHANG)
            except ChildProcessError:
                break
            if pid:
                break
            time.sleep(0.01)
        return True

    # -- requests --------------------------------------------------------------------------
    def _request(self, req: dict[str, Any], timeout: float = 60) -> dict[str, Any]:
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.settimeout(timeout)
                s.connect(str(self.sock))
                s.sendall(json.dumps(req).encode() + b"\n")
                line = s.makefile("rb").readline()
        except OSError as exc:
            raise FuseMountError(
                f"mount holder of {self.root} unreachable ({exc}); it restarts on the next use"
            ) from exc
        if not line:
            raise FuseMountError(f"mount holder of {self.root} closed the connection")
        return json.loads(line)

    def mount(self, image: Path, mountpoint: Path) -> None:
        """Mount the (already verified) squashfs `image` at `mountpoint` inside the holder."""
        self.ensure()
        reply = self._request(
            {"op": "mount", "image": str(Path(image).resolve()), "mountpoint": str(Path(mountpoint).resolve())}
        )
        if not reply.get("ok"):
            raise FuseMountError(
                f"{image}: rootless mount failed: {reply.get('error')}; "
                f"set MINISANDBOX_IMAGES=0 to unpack archives instead"
            )

    def unmount(self, mountpoint: Path) -> bool:
        """Unmount one layer; False while a sandbox still uses it."""
        if self._read_state() is None:
            return True  # the holder is gone, and its mounts with it
        reply = self._request({"op": "umount", "mountpoint": str(Path(mountpoint).resolve())})
        return bool(reply.get("ok"))

    def is_mounted(self, mountpoint: Path) -> bool:
        """Mounted in the holder's namespace (read from its mountinfo; no round trip)."""
        data = self._read_state()
        if data is None:
            return False
        want = _escape_mountinfo(str(Path(mountpoint).resolve()))
        try:
            with open(f"/proc/{data['pid']}/mountinfo") as f:
                return any(line.split()[4] == want for line in f)
        except OSError:
            return False

    def namespace(self) -> dict[str, Any] | None:
        """What a sandbox needs to join the holder's user and mount namespaces."""
        data = self._read_state()
        return {"pid": data["pid"], "start": data["start"]} if data else None


__all__ = ["FuseMountError", "MountHolder", "squashfuse_bin", "unavailable_reason"]
