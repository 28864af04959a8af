"""Node-wide, cross-process I/O budget: at most N concurrent unpacks (downloads + restores).

Why: with 16 restores at once on 2 cores every environment is ready after ~26 s; two at a
time gets the first one ready in ~2.7 s for the same total. So work
that fills the disk takes a *slot*, and waiting requests are served oldest ticket first
(a task's second artifact keeps the ticket of its first request, so early tasks finish
early instead of all tasks finishing late).

Mechanics: one lock file per slot (`slot-<i>.lock`, fcntl locks released by the kernel
when a process dies) plus a queue directory of waiter files, each held locked by its live
waiter, so a crashed waiter never blocks the queue. The `slots` oldest waiters poll the
slots every few ms; everyone else sleeps in the kernel on the oldest waiter's lock.

On Ray the same number is the per-node custom resource ``minisandbox_io``: start nodes
with ``resources=IOBudget.ray_resources()`` and let tasks request ``{"minisandbox_io": 1}``;
then call the runtime with ``budget=IOBudget.unlimited()`` since Ray enforces the limit.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections import namedtuple
from collections.abc import Iterator
from pathlib import Path

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


class Slot(namedtuple("Slot", ["index", "waited"])):
    """An I/O slot held: its `index` (-1 when unlimited) and the seconds spent waiting for it."""

    __slots__ = ()


class IOBudget:
    """A counting semaphore shared by every process on the node that uses `directory`.

    `slots == 0` means unlimited (no locking at all)."""

    def __init__(self, slots: int | None = None, directory: Path | None = None) -> None:
        if directory is None:
            from minisandbox.paths import cache_dir

            directory = cache_dir() / "budget"
        self.slots = default_slots() if slots is None else int(slots)
        if self.slots < 0:
            raise ValueError(f"I/O budget slots must be >= 0, got {self.slots}")
        self.directory = Path(directory)
        self.queue = self.directory / "queue"

    @classmethod
    def unlimited(cls) -> IOBudget:
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
        index, fd = self._wait(ticket, start, timeout)
        try:
            yield Slot(index, time.monotonic() - start)
        finally:
            os.close(fd)  # closing the descriptor releases the slot's lock

    # -- internals ------------------------------------------------------------------------
    # Raw fcntl locks (not `filelock`) because waiters probe locks often: a failed
    # non-blocking flock costs microseconds here, and blocked waiters sleep in the kernel
    # instead of polling, which matters with 64 waiters on 2 cores.
    def _try_slots(self) -> tuple[int, int] | None:
        import random  # here: only a download takes a slot, and a warm `run` never imports it

        order = list(range(self.slots))
        random.shuffle(order)  # spread contention over the lock files
        for i in order:
            fd = os.open(self.directory / f"slot-{i}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            return i, fd
        return None

    def _wait(self, ticket: float, start: float, timeout: float | None) -> tuple[int, int]:
        # Fast path: nobody queued and a slot free.
        if not any(n.endswith(".wait") for n in os.listdir(self.queue)):
            got = self._try_slots()
            if got is not None:
                return got
        name = f"{ticket:020.6f}-{os.getpid()}-{os.urandom(4).hex()}.wait"
        # Lock the entry before it becomes visible (rename), so a live waiter is never
        # mistaken for a dead one.
        tmp = self.queue / f".{name}.new"
        me = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        fcntl.flock(me, fcntl.LOCK_EX)
        os.rename(tmp, self.queue / name)
        try:
            while True:
                ahead = self._live_ahead(name)
                if len(ahead) < self.slots:
                    got = self._try_slots()
                    if got is not None:
                        return got
                    time.sleep(_POLL_ELIGIBLE * (0.5 + os.urandom(1)[0] / 255))
                else:
                    self._wait_for_exit(ahead[0], start, timeout)
                if timeout is not None and time.monotonic() - start > timeout:
                    raise TimeoutError(
                        f"no I/O budget slot free in {self.directory} after {timeout:.0f} s "
                        f"({self.slots} slots); raise MINISANDBOX_IO_SLOTS or check for stuck unpacks"
                    )
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.queue / name)
            os.close(me)

    def _live_ahead(self, name: str) -> list[str]:
        """Names of live waiters with an older ticket (stale entries are removed)."""
        older = sorted(n for n in os.listdir(self.queue) if n.endswith(".wait") and n < name)
        return [n for n in older if self._alive(n)]

    def _alive(self, name: str) -> bool:
        try:
            fd = os.open(self.queue / name, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return False
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                return True  # its waiter holds it
            # Nobody holds it: its waiter died. Remove the stale entry.
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.queue / name)
            return False
        finally:
            os.close(fd)

    def _wait_for_exit(self, name: str, start: float, timeout: float | None) -> None:
        """Sleep in the kernel until the waiter `name` leaves the queue (or dies)."""
        try:
            fd = os.open(self.queue / name, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return
        try:
            if timeout is None:
                fcntl.flock(fd, fcntl.LOCK_SH)  # shared: every waiter behind it wakes at once
                return
            while time.monotonic() - start <= timeout:
                try:
                    fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                    return
                except BlockingIOError:
                    time.sleep(_POLL_WAITING)
        finally:
            os.close(fd)
