"""IOBudget: a cross-process counting semaphore with oldest-ticket-first service."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from minisandbox.node.iobudget import RAY_RESOURCE, IOBudget, default_slots

HOLDER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from minisandbox.node.iobudget import IOBudget
    d, slots, ticket, hold, log = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
    with IOBudget(slots, Path(d)).acquire(ticket=ticket) as slot:
        t0 = time.time()
        with open(log, "a") as f:
            f.write(f"start {ticket} {t0}\\n")
        Path(log + f".held-{ticket}").touch()
        if hold < 0:  # hold until the test says so
            while not Path(log + ".release").exists():
                time.sleep(0.01)
        time.sleep(abs(hold))
        with open(log, "a") as f:
            f.write(f"end {ticket} {time.time()}\\n")
""")


def spawn(d: Path, slots: int, ticket: float, hold: float, log: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", HOLDER, str(d), str(slots), str(ticket), str(hold), str(log)])


def read_log(log: Path) -> list[tuple[str, float, float]]:
    return [(k, float(t), float(ts)) for k, t, ts in (line.split() for line in log.read_text().splitlines())]


def test_at_most_n_processes_hold_a_slot(tmp_path: Path) -> None:
    log = tmp_path / "log"
    procs = [spawn(tmp_path / "b", 2, 100 + i, 0.4, log) for i in range(6)]
    assert all(p.wait(60) == 0 for p in procs)
    events = sorted(read_log(log), key=lambda e: (e[2], e[0] == "start"))
    running = peak = 0
    for kind, _, _ in events:
        running += 1 if kind == "start" else -1
        peak = max(peak, running)
    assert peak == 2


def test_older_tickets_are_served_first(tmp_path: Path) -> None:
    d, log = tmp_path / "b", tmp_path / "log"
    first = spawn(d, 1, 1.0, -0.01, log)
    while not Path(f"{log}.held-1.0").exists():
        time.sleep(0.01)
    waiters = []
    for n, ticket in enumerate((30.0, 10.0, 20.0), start=1):  # arrive in this order, served by ticket
        waiters.append(spawn(d, 1, ticket, 0.05, log))
        deadline = time.time() + 60
        while len(list((d / "queue").glob("*.wait"))) < n and time.time() < deadline:
            time.sleep(0.01)
    Path(f"{log}.release").touch()
    assert first.wait(60) == 0 and all(p.wait(60) == 0 for p in waiters)
    starts = [t for kind, t, _ in sorted(read_log(log), key=lambda e: e[2]) if kind == "start"]
    assert starts == [1.0, 10.0, 20.0, 30.0]


def test_killed_holder_and_dead_waiter_do_not_block(tmp_path: Path) -> None:
    d, log = tmp_path / "b", tmp_path / "log"
    p = spawn(d, 1, 1.0, 60, log)
    while not Path(f"{log}.held-1.0").exists():
        time.sleep(0.01)
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    (d / "queue").mkdir(parents=True, exist_ok=True)
    (d / "queue" / f"{0.5:020.6f}-999999-dead.wait").touch()  # an older waiter that died
    t0 = time.monotonic()
    with IOBudget(1, d).acquire(ticket=2.0, timeout=10) as slot:
        assert slot.index == 0
    assert time.monotonic() - t0 < 2
    assert not list((d / "queue").iterdir())  # stale entry cleaned up


def test_timeout_names_the_budget(tmp_path: Path) -> None:
    budget = IOBudget(1, tmp_path)
    with budget.acquire():
        with pytest.raises(TimeoutError, match="no I/O budget slot"):
            with IOBudget(1, tmp_path).acquire(timeout=0.2):
                pass


def test_unlimited_and_defaults(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    with IOBudget.unlimited().acquire() as slot:
        assert slot.index == -1
    monkeypatch.setenv("MINISANDBOX_IO_SLOTS", "5")
    assert default_slots() == 5 and IOBudget(directory=tmp_path).slots == 5
    assert IOBudget.ray_resources() == {RAY_RESOURCE: 5.0}
    monkeypatch.setenv("MINISANDBOX_IO_SLOTS", "lots")
    with pytest.raises(ValueError, match="MINISANDBOX_IO_SLOTS"):
        default_slots()
    monkeypatch.delenv("MINISANDBOX_IO_SLOTS")
    assert default_slots() == max(2, (os.cpu_count() or 2) // 2)


CPU_WAITER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from minisandbox.node.iobudget import IOBudget
    c0 = time.process_time()
    with IOBudget(1, Path(sys.argv[1])).acquire(ticket=float(sys.argv[2])):
        pass
    print(time.process_time() - c0)
""")


def test_waiters_sleep_instead_of_spinning(tmp_path: Path) -> None:
    """Many waiters must not eat the CPU the unpacks need (2-core nodes, 64 requests)."""
    d, log = tmp_path / "b", tmp_path / "log"
    holder = spawn(d, 1, 1.0, -1.5, log)
    while not Path(f"{log}.held-1.0").exists():
        time.sleep(0.01)
    waiters = [
        subprocess.Popen([sys.executable, "-c", CPU_WAITER, str(d), str(10 + i)], stdout=subprocess.PIPE, text=True)
        for i in range(6)
    ]
    deadline = time.time() + 60
    while len(list((d / "queue").glob("*.wait"))) < 6 and time.time() < deadline:
        time.sleep(0.05)
    time.sleep(1.0)  # everyone queued and waiting for a while
    Path(f"{log}.release").touch()
    cpu = [float(w.communicate(timeout=60)[0]) for w in waiters]
    assert holder.wait(60) == 0
    assert max(cpu) < 0.5, cpu  # a polling waiter would burn far more in ~1.5+ s of waiting
