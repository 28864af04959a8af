"""The mount holder's own housekeeping (its isolation is attacked in tests/security)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

import minisandbox

SCRIPT = os.path.join(os.path.dirname(minisandbox.__file__), "node", "mountholder.py")

pytestmark = pytest.mark.root


def _request(sock: Path, req: dict) -> dict:
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(30)
        s.connect(str(sock))
        s.sendall(json.dumps(req).encode() + b"\n")
        return json.loads(s.makefile("rb").readline())


def _state(pid: int) -> str | None:
    try:
        return open(f"/proc/{pid}/stat").read().rpartition(")")[2].split()[0]
    except FileNotFoundError:
        return None


def _start_holder(tmp_path: Path) -> tuple[subprocess.Popen, Path, Path, Path]:
    """A holder (as root, in a private mount namespace) for a cache with one image:
    (holder, socket, image, mountpoint)."""
    if os.geteuid() != 0:
        pytest.skip("starts the holder in a private mount namespace as root")
    src = tmp_path / "src"
    src.mkdir()
    (src / "hello").write_text("hi\n")
    staged = tmp_path / "image.sqfs"
    subprocess.run(["mksquashfs", str(src), str(staged), "-quiet", "-no-progress"], check=True)
    digest = hashlib.sha256(staged.read_bytes()).hexdigest()
    root = tmp_path / "cache"
    for sub in ("archives", "layers", "mounts"):
        (root / sub).mkdir(parents=True)
    image = root / "archives" / digest
    staged.rename(image)
    mountpoint = root / "layers" / digest
    mountpoint.mkdir()
    sock = root / "mounts" / "holder.sock"
    holder = subprocess.Popen(
        ["unshare", "--mount", "--propagation", "private", "--", sys.executable, "-I", "-S", "-B", SCRIPT]
        + [str(root), str(sock), "squashfuse"],
        stdin=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while not sock.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    return holder, sock, image, mountpoint


def _wait_gone(pid: int, seconds: float = 30) -> str | None:
    """The state of `pid` once it is gone (None) or `seconds` have passed."""
    deadline = time.monotonic() + seconds
    while _state(pid) is not None and time.monotonic() < deadline:
        time.sleep(0.05)
    return _state(pid)


def test_a_daemon_that_died_is_reaped_without_a_new_request(tmp_path: Path) -> None:
    holder, sock, image, mountpoint = _start_holder(tmp_path)
    try:
        reply = _request(sock, {"op": "mount", "image": str(image), "mountpoint": str(mountpoint)})
        assert reply.get("ok") and reply.get("pid"), reply
        daemon = int(reply["pid"])
        os.kill(daemon, signal.SIGKILL)
        left = _wait_gone(daemon)
        assert left is None, f"squashfuse {daemon} left as {left!r} while the holder was idle"
        assert holder.poll() is None, "the holder must keep serving"
        assert _request(sock, {"op": "ping"})["ok"]
    finally:
        holder.kill()
        holder.wait()


def test_a_holder_whose_cache_is_deleted_ends_itself_and_its_daemons(tmp_path: Path) -> None:
    """Its socket gone with the cache, nobody could ever ask it to stop."""
    holder, sock, image, mountpoint = _start_holder(tmp_path)
    try:
        reply = _request(sock, {"op": "mount", "image": str(image), "mountpoint": str(mountpoint)})
        assert reply.get("ok") and reply.get("pid"), reply
        daemon = int(reply["pid"])
        shutil.rmtree(tmp_path / "cache")
        assert _wait_gone(holder.pid) in (None, "Z"), "the holder outlived its cache"
        assert holder.wait(timeout=10) == 0
        assert _wait_gone(daemon) is None, "its squashfuse outlived it"
    finally:
        holder.kill()
        holder.wait()
