"""Node-wide, cross-process I/O budget: at most N concurrent unpacks (downloads + restores).

Why: with 16 restores at once on 2 cores every environment is ready after ~26 s; two at a
time gets the first one ready in ~2.7 s for the same total (REFERENCE section 4). So work
that fills the disk takes a *slot*, and waiting requests are served oldest ticket first
(a task's second artifact keeps the ticket of its first request, so early tasks finish
early instead of all tasks finishing late).

Mechanics: one lock file per slot (`slot-<i>.lock`, fcntl locks via `filelock`, released
by the kernel when a process dies) plus a queue directory of waiter files, each held
locked by its live waiter, so a crashed waiter never blocks the queue.

On Ray the same number is the per-node custom resource ``minisandbox_io``: start nodes
with ``resources=IOBudget.ray_resources()`` and let tasks request ``{"minisandbox_io": 1}``;
then call the runtime with ``budget=IOBudget.unlimited()`` since Ray enforces the limit.
"""

from __future__ import annotations

import contextlib
import os
import random
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from filelock import FileLock, Timeout

RAY_RESOURCE = "minisandbox_io"
_POLL_ELIGIBLE = 0.005
_POLL_WAITING = 0.05


def default_slots() -> int:
    """$MINISANDBOX_IO_SLOTS, else half the cores (at least 2): each unpack keeps about two
    cores busy (decompression in Python, file creation in tar)."""
    env = os.environ.get("MINISANDBOX_IO_SLOTS")
    if env:
        try:
            n = int(env)
        except ValueError:
            raise ValueError(f"MINISANDBOX_IO_SLOTS={env!r} is not an integer; set a slot count like 4") from None
        if n < 0:
            raise ValueError(f"MINISANDBOX_IO_SLOTS={env!r} must be >= 0 (0 = unlimited)")
        return n
    return max(2, (os.cpu_count() or 2) // 2)


@dataclass
class Slot:
    index: int  # -1 when unlimited
    waited: float  # seconds spent waiting for it


class IOBudget:
    """A counting semaphore shared by every process on the node that uses `directory`.

    `slots == 0` means unlimited (no locking at all)."""

    def __init__(self, slots: int | None = None, directory: Path | None = None) -> None:
        if directory is None:
            from .paths import cache_dir

            directory = cache_dir() / "budget"
        self.slots = default_slots() if slots is None else int(slots)
        if self.slots < 0:
            raise ValueError(f"I/O budget slots must be >= 0, got {self.slots}")
        self.directory = Path(directory)
        self.queue = self.directory / "queue"

    @classmethod
    def unlimited(cls) -> "IOBudget":
        return cls(0, Path("/nonexistent-unused"))

    @staticmethod
    def ray_resources(slots: int | None = None) -> dict[str, float]:
        """Custom resources for `ray start --resources` / `ray.init(resources=...)`."""
        return {RAY_RESOURCE: float(default_slots() if slots is None else slots)}

    def __repr__(self) -> str:
        return f"IOBudget(slots={self.slots}, directory={str(self.directory)!r})"

    @contextlib.contextmanager
    def acquire(self, ticket: float | None = None, timeout: float | None = None) -> Iterator[Slot]:
        """Hold one slot for the duration of the block. Older tickets are served first."""
        if self.slots == 0:
            yield Slot(-1, 0.0)
            return
        start = time.monotonic()
        ticket = time.time() if ticket is None else ticket
        self.queue.mkdir(parents=True, exist_ok=True)
        lock = self._wait(ticket, start, timeout)
        try:
            yield Slot(int(Path(lock.lock_file).stem.split("-")[1]), time.monotonic() - start)
        finally:
            lock.release()

    # -- internals ------------------------------------------------------------------------
    def _slot_lock(self, i: int) -> FileLock:
        return FileLock(str(self.directory / f"slot-{i}.lock"))

    def _try_slots(self) -> FileLock | None:
        order = list(range(self.slots))
        random.shuffle(order)  # spread contention over the lock files
        for i in order:
            lock = self._slot_lock(i)
            try:
                lock.acquire(timeout=0)
                return lock
            except Timeout:
                continue
        return None

    def _wait(self, ticket: float, start: float, timeout: float | None) -> FileLock:
        # Fast path: a free slot and nobody queued.
        if not any(self.queue.iterdir()):
            got = self._try_slots()
            if got is not None:
                return got
        name = f"{ticket:020.6f}-{os.getpid()}-{uuid.uuid4().hex[:8]}.wait"
        me = FileLock(str(self.queue / name))
        me.acquire()  # held while we wait: a live waiter's file cannot be locked by others
        try:
            while True:
                if self._eligible(name):
                    got = self._try_slots()
                    if got is not None:
                        return got
                    delay = _POLL_ELIGIBLE
                else:
                    delay = _POLL_WAITING
                if timeout is not None and time.monotonic() - start > timeout:
                    raise TimeoutError(f"no I/O budget slot free in {self.directory} after {timeout:.0f} s "
                                       f"({self.slots} slots); raise MINISANDBOX_IO_SLOTS or check for stuck unpacks")
                time.sleep(delay * (0.5 + random.random()))
        finally:
            me.release()
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.queue / name)

    def _eligible(self, name: str) -> bool:
        """True if fewer than `slots` live waiters have an older ticket than ours."""
        ahead = 0
        for other in sorted(p.name for p in self.queue.iterdir() if p.suffix == ".wait"):
            if other >= name:
                break
            if self._alive(other):
                ahead += 1
                if ahead >= self.slots:
                    return False
        return True

    def _alive(self, name: str) -> bool:
        probe = FileLock(str(self.queue / name))
        try:
            probe.acquire(timeout=0)
        except Timeout:
            return True
        except FileNotFoundError:
            return False
        # Nobody holds it: its waiter died (or just finished). Remove the stale entry.
        try:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.queue / name)
        finally:
            probe.release()
        return False
