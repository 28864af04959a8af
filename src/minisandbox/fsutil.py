"""Small file helpers every subsystem shares: atomic writes, streaming digests, sizes.

One helper per job, so a fix (a missed fsync, a temp name that two threads share) lands
everywhere at once. Contract level: imports nothing from the subsystems.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from minisandbox.errors import SizeError

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a warm `run` does not)
if TYPE_CHECKING:
    from typing import Any

#: Read/write chunk for streaming copies and digests: 1 MiB keeps memory constant and
#: syscalls few.
CHUNK = 1 << 20


class LockTimeout(TimeoutError):
    """`FileLock.acquire(timeout=...)` gave up: another process or descriptor holds the lock."""


class FileLock:
    """An exclusive, cross-process lock on a file (`flock`), released when the holder closes
    it or dies. Used as `with FileLock(path): ...`, or `acquire(timeout=0)` / `release()`.

    Why not the `filelock` package: what we need is these lines, and importing it costs a
    `minisandbox run` about a fifth of its start-up CPU (it pulls in logging, secrets,
    decimal, ...). Waiting blocks in the kernel (no polling) unless a timeout is given. Each
    instance has its own descriptor, so two instances on one file exclude each other even in
    one process (not re-entrant, as with `filelock` instances)."""

    __slots__ = ("path", "_fd")

    def __init__(self, path: Path | str) -> None:
        self.path = str(path)
        self._fd: int | None = None

    def acquire(self, timeout: float | None = None) -> None:
        """Take the lock; `timeout` seconds at most (0: try once), else LockTimeout."""
        import fcntl
        import time

        if self._fd is not None:
            raise RuntimeError(f"lock {self.path} is already held by this FileLock")
        os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            if timeout is None:
                fcntl.flock(fd, fcntl.LOCK_EX)
            else:
                deadline = time.monotonic() + timeout
                while True:
                    try:
                        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                        break
                    except BlockingIOError:
                        if time.monotonic() >= deadline:
                            raise LockTimeout(f"lock {self.path} is held elsewhere") from None
                        time.sleep(min(0.05, max(0.0, deadline - time.monotonic())))
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)  # closing the descriptor releases the flock

    @property
    def is_locked(self) -> bool:
        return self._fd is not None

    def __enter__(self) -> FileLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


class LazyPattern:
    """A regular expression compiled on first use (`.match`, `.fullmatch`, ... as on the
    compiled pattern). Why: modules define their patterns at module level, and compiling
    them all at import is start-up cost for every command, most of which never match them
    (`minisandbox run` is called tens of thousands of times; tests/test_import_structure.py
    checks that importing its modules compiles none)."""

    __slots__ = ("pattern", "flags", "_compiled")

    def __init__(self, pattern: str, flags: int = 0) -> None:
        self.pattern = pattern
        self.flags = flags
        self._compiled: re.Pattern[str] | None = None

    def __getattr__(self, name: str) -> Any:
        if self._compiled is None:
            self._compiled = re.compile(self.pattern, self.flags)
        return getattr(self._compiled, name)

    def __repr__(self) -> str:
        return f"LazyPattern({self.pattern!r})"


class atomic_output:
    """`with atomic_output(path) as fh:` writes a binary file that readers see whole or not
    at all: a unique temp file beside `path`, renamed over it when the block ends without an
    error, removed when it does not. `fsync=True` makes the bytes durable before the rename
    (published artifacts). A plain class, not contextlib: fsutil is imported on start-up."""

    def __init__(self, path: Path | str, *, fsync: bool = False) -> None:
        self.path = Path(path)
        self.fsync = fsync
        self.tmp = self.path.with_name(f".{self.path.name}.{os.urandom(6).hex()}.tmp")

    def __enter__(self):
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        self.fh = os.fdopen(fd, "wb")
        return self.fh

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            if exc_type is None:
                self.fh.flush()
                if self.fsync:
                    os.fsync(self.fh.fileno())
            self.fh.close()
            if exc_type is None:
                os.replace(self.tmp, self.path)
        finally:
            if exc_type is not None or self.tmp.exists():
                self.tmp.unlink(missing_ok=True)


def atomic_write_bytes(path: Path | str, data: bytes) -> None:
    """Write `data` to `path` via a unique temp file + rename, so readers see the old file or
    the new one, never half a file. Safe across threads and processes (the temp name is
    unique); the file gets the usual umask-based mode."""
    with atomic_output(path) as fh:
        fh.write(data)


def atomic_write_text(path: Path | str, text: str) -> None:
    """`atomic_write_bytes` for UTF-8 text."""
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: Path | str, data: Any, *, indent: int | None = 1) -> None:
    """`atomic_write_bytes` for JSON with sorted keys (stable bytes for equal data) and a
    trailing newline."""
    atomic_write_text(path, json.dumps(data, indent=indent, sort_keys=True) + "\n")


def sha256(data: bytes = b""):  # -> a hashlib-style hash object
    """SHA-256 from the interpreter's built-in module (`_sha256`, `_sha2` from 3.12), for
    the few small documents a `minisandbox run` hashes (the verified-document markers, the
    index shard name): `hashlib` loads OpenSSL on import, about 4 ms of a warm `run`'s CPU.
    Same digests; large data (images, chunks, files) goes through `hashlib`, whose OpenSSL
    code is several times faster per byte."""
    global _SHA256
    if _SHA256 is None:
        try:
            from _sha2 import sha256 as builtin  # 3.12+
        except ImportError:
            try:
                from _sha256 import sha256 as builtin  # 3.11
            except ImportError:  # an interpreter built without them
                from hashlib import sha256 as builtin
        _SHA256 = builtin
    return _SHA256(data)


_SHA256 = None  # (the constructor `sha256` found: a failed import is not cached by Python)


def file_digest(path: Path | str) -> tuple[str, int]:
    """Streaming sha256 and size of a file (`CHUNK` at a time, constant memory)."""
    import hashlib

    h = hashlib.sha256()
    size = 0
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            h.update(chunk)
            size += len(chunk)
    return h.hexdigest(), size


_UNITS = {"": 1, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
_SIZE = LazyPattern(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([kmgtb]?)(?:i?b)?\s*")


def parse_size(text: str) -> int:
    """`500M`, `2G`, `1.5T`, `512MiB`, `1234` -> bytes (binary units)."""
    m = _SIZE.fullmatch(text.lower())
    if not m:
        raise SizeError(f"{text!r} is not a size; use e.g. 500M, 20G or a byte count")
    return int(float(m.group(1)) * _UNITS[m.group(2)])


def human_size(n: float) -> str:
    """Bytes -> `512B`, `1.5G` (binary units), for tables and progress lines."""
    for unit in ("B", "K", "M", "G", "T"):
        if abs(n) < 1024 or unit == "T":
            return f"{n:.0f}{unit}" if unit == "B" else f"{n:.1f}{unit}"
        n /= 1024
    return f"{n}"
