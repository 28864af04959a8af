"""The mount holder's own housekeeping (its isolation is attacked in tests/security)."""

from __future__ import annotations

import hashlib
import json
import os
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


def test_a_daemon_that_died_is_reaped_without_a_new_request(tmp_path: Path) -> None:
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
    try:
        deadline = time.monotonic() + 30
        while not sock.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        reply = _request(sock, {"op": "mount", "image": str(image), "mountpoint": str(mountpoint)})
        assert reply.get("ok") and reply.get("pid"), reply
        daemon = int(reply["pid"])
        os.kill(daemon, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while _state(daemon) is not None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _state(daemon) is None, f"squashfuse {daemon} left as {_state(daemon)!r} while the holder was idle"
        assert holder.poll() is None, "the holder must keep serving"
        assert _request(sock, {"op": "ping"})["ok"]
    finally:
        holder.kill()
        holder.wait()
