"""fsutil's lock and lazy patterns: the node cache's digest locks and the start-up rules
depend on them."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from minisandbox.fsutil import FileLock, LazyPattern, LockTimeout

HOLD = """
import sys, time
from minisandbox.fsutil import FileLock
lock = FileLock(sys.argv[1])
lock.acquire()
print("held", flush=True)
time.sleep(float(sys.argv[2]))
"""


def test_instances_exclude_each_other_and_release_frees(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "x.lock"  # the parent is created
    a, b = FileLock(path), FileLock(path)
    a.acquire()
    assert a.is_locked and path.exists()
    with pytest.raises(LockTimeout):
        b.acquire(timeout=0)
    t0 = time.monotonic()
    with pytest.raises(LockTimeout):
        b.acquire(timeout=0.2)
    assert time.monotonic() - t0 >= 0.2
    assert not b.is_locked
    a.release()
    b.acquire(timeout=0)
    assert b.is_locked
    b.release()
    with a:  # context manager; a second acquire of a held instance is a bug
        with pytest.raises(RuntimeError):
            a.acquire()
    assert not a.is_locked


def test_a_blocked_waiter_gets_the_lock_when_it_is_released(tmp_path: Path) -> None:
    path = tmp_path / "x.lock"
    holder = FileLock(path)
    holder.acquire()
    got = threading.Event()

    def wait() -> None:
        with FileLock(path):
            got.set()

    t = threading.Thread(target=wait)
    t.start()
    assert not got.wait(0.3)
    holder.release()
    assert got.wait(10)
    t.join(10)


def test_the_lock_of_a_process_that_dies_is_free(tmp_path: Path) -> None:
    path = tmp_path / "x.lock"
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(path), "60"], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "held"
        with pytest.raises(LockTimeout):
            FileLock(path).acquire(timeout=0)
    finally:
        proc.kill()
        proc.wait(10)
    lock = FileLock(path)
    lock.acquire(timeout=5)
    lock.release()


def test_lazy_pattern_compiles_on_first_use() -> None:
    p = LazyPattern(r"[a-z]+-(\d+)")
    assert p._compiled is None
    assert p.fullmatch("abc-12").group(1) == "12"
    assert p.match("x") is None and p._compiled is not None
    assert p.pattern == r"[a-z]+-(\d+)"


def test_the_builtin_sha256_gives_hashlibs_digests() -> None:
    """`fsutil.sha256` (the hot path's SHA-256 without OpenSSL) is SHA-256: same digests as
    hashlib's, in one piece or fed in parts, for empty, small and multi-block inputs."""
    import hashlib

    from minisandbox.fsutil import sha256

    for data in (b"", b"abc", bytes(range(256)) * 1000):
        assert sha256(data).hexdigest() == hashlib.sha256(data).hexdigest()
        h = sha256()
        for at in range(0, len(data), 777):
            h.update(data[at : at + 777])
        assert h.hexdigest() == hashlib.sha256(data).hexdigest()
    assert sha256(b"abc").hexdigest() == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
