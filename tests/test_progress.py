"""minisandbox.progress: a tqdm bar on a terminal, plain periodic lines elsewhere."""

from __future__ import annotations

import fcntl
import io
import os
import re
import select
import struct
import termios
import threading

import pytest

from minisandbox.progress import Progress


class _Pipe(io.StringIO):
    """A non-terminal stream (what stderr is under CI, Slurm or a log file)."""

    def isatty(self) -> bool:
        return False


def test_plain_lines_carry_done_total_percent_rate_and_eta(monkeypatch) -> None:
    monkeypatch.delenv("MINISANDBOX_PROGRESS", raising=False)
    out = _Pipe()
    with Progress("fetch", 3 << 20, stream=out, interval=0) as p:
        for _ in range(3):
            p.update(1 << 20)
    lines = out.getvalue().splitlines()
    assert p.mode == "lines" and len(lines) == 3  # one per update; the final numbers were just shown: not again
    assert re.fullmatch(r"fetch: 1\.00M/3\.00M \(33%\), .*B/s, elapsed 00:00, ETA .*", lines[0]), lines[0]
    assert lines[-1].startswith("fetch: 3.00M/3.00M (100%)")


def test_the_final_line_is_printed_once_and_only_when_it_adds_something(monkeypatch) -> None:
    monkeypatch.setenv("MINISANDBOX_PROGRESS", "lines")
    out = _Pipe()
    p = Progress("pull", 100, stream=out, interval=0)
    p.update(40)
    p.interval = 3600  # the next updates print nothing: the final line must show them
    p.update(60)
    p.close()
    lines = out.getvalue().splitlines()
    assert [line.split(" (")[0] for line in lines] == ["pull: 40.0/100", "pull: 100/100"]
    assert len(set(lines)) == len(lines)


def test_updates_too_small_to_change_the_shown_counts_print_no_line(monkeypatch) -> None:
    """Chunks of a few KiB of a MiB total round to the same shown numbers: a line that
    repeats the last one's counts says nothing and is not printed (no two lines alike)."""
    monkeypatch.setenv("MINISANDBOX_PROGRESS", "lines")
    out = _Pipe()
    with Progress("push", 1 << 20, stream=out, interval=0) as p:
        p.update(1_000_000)
        for _ in range(5):
            p.update(10)  # still "977k" done
        p.update((1 << 20) - p.n)
    lines = out.getvalue().splitlines()
    assert [line.split(" ", 2)[1] for line in lines] == ["977k/1.00M", "1.00M/1.00M"], lines
    assert len(set(lines)) == len(lines), lines


def test_a_fixed_total_never_grows_and_finish_settles_on_the_work_done(monkeypatch) -> None:
    monkeypatch.setenv("MINISANDBOX_PROGRESS", "lines")
    out = _Pipe()
    with Progress("fetch", 1000, stream=out, interval=0, fixed=True, unit="item") as p:
        p.update(300)
        p.add_total(500)  # found more work: a fixed total ignores it
        assert p.total == 1000
        p.update(500)
        p.finish()  # 200 planned units were not needed (e.g. chunks found locally)
    lines = out.getvalue().splitlines()
    assert [re.search(r"\((\d+)%\)", line).group(1) for line in lines] == ["30", "80", "100"]
    assert lines[-1].startswith("fetch: 800/800")


def test_a_total_planned_after_opening_is_fixed_from_then_on(monkeypatch) -> None:
    """`push` opens its meter, lists what it will copy, then fixes the total."""
    monkeypatch.setenv("MINISANDBOX_PROGRESS", "lines")
    out = _Pipe()
    with Progress("push", 0, stream=out, interval=0, unit="item") as p:
        p.fix_total(400)
        p.update(100)
        p.add_total(600)  # a lower layer discovering work: ignored once planned
        p.update(300)
    lines = out.getvalue().splitlines()
    assert [line.split(" ", 2)[1] for line in lines] == ["100/400", "400/400"]


def test_plain_lines_are_periodic_not_per_update(monkeypatch) -> None:
    monkeypatch.delenv("MINISANDBOX_PROGRESS", raising=False)
    out = _Pipe()
    with Progress("push", 1000, stream=out, interval=3600) as p:
        for _ in range(1000):
            p.update(1)
    assert out.getvalue() == ""  # a short transfer prints nothing (not one line per chunk)


def test_total_grows_and_updates_from_threads_add_up(monkeypatch) -> None:
    monkeypatch.setenv("MINISANDBOX_PROGRESS", "lines")
    out = _Pipe()
    p = Progress("verify", 0, stream=out, interval=3600)

    def work() -> None:
        p.add_total(1000)
        for _ in range(1000):
            p.update(1)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert (p.n, p.total) == (8000, 8000)
    assert p.line().startswith("verify: 7.81k/7.81k (100%)")


def test_bar_on_a_terminal(monkeypatch) -> None:
    """A real pseudo-terminal as the stream: tqdm draws a bar with rate and ETA."""
    monkeypatch.delenv("MINISANDBOX_PROGRESS", raising=False)
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))  # a 100-column terminal
    stream = os.fdopen(slave, "w", buffering=1)
    try:
        p = Progress("pull", 4 << 20, stream=stream)
        assert p.mode == "bar"
        for _ in range(4):
            p.update(1 << 20)
        p.write("copied\tenv-x")
        p.close()
        stream.flush()
        chunks = []
        while select.select([master], [], [], 0.2)[0]:
            chunks.append(os.read(master, 65536))
        drawn = b"".join(chunks).decode(errors="replace")
    finally:
        stream.close()
        os.close(master)
    assert "pull: 100%|" in drawn and "4.00M/4.00M" in drawn and "B/s]" in drawn
    assert "copied\tenv-x" in drawn


def test_off_prints_messages_only(monkeypatch) -> None:
    monkeypatch.setenv("MINISANDBOX_PROGRESS", "off")
    out = _Pipe()
    with Progress("eval", 2, unit="task", stream=out, interval=0) as p:
        p.update()
        p.write("[1/2] x: resolved")
        p.update()
    assert out.getvalue() == "[1/2] x: resolved\n"


@pytest.mark.parametrize("value,mode", [("bar", "bar"), ("lines", "lines"), ("0", "off"), ("auto", "lines")])
def test_mode_from_environment(monkeypatch, value: str, mode: str) -> None:
    monkeypatch.setenv("MINISANDBOX_PROGRESS", value)
    p = Progress("x", 1, stream=_Pipe(), interval=0)
    assert p.mode == mode
    p.close()


def test_no_work_draws_nothing_even_on_a_terminal(monkeypatch) -> None:
    """`fetch` of cached tasks: no empty bar."""
    monkeypatch.setenv("MINISANDBOX_PROGRESS", "bar")
    out = _Pipe()
    with Progress("fetch", 0, stream=out):
        pass
    assert out.getvalue() == ""
