"""Progress of long work (downloads, uploads, checks, evaluations) on stderr.

Why: a multi-GB fetch or push that prints nothing until it ends looks hung. On a
terminal this draws a tqdm bar (done/total, rate, ETA); anywhere else (a log file, CI, a
Slurm job) it prints one plain line every `interval` seconds with the same numbers, so
logs stay readable. stdout is never touched: commands keep it for their result (`--json`).

`MINISANDBOX_PROGRESS`: `auto` (default: bar on a terminal, lines otherwise), `bar`,
`lines`, or `off`. `MINISANDBOX_PROGRESS_INTERVAL`: seconds between plain lines (10).

Contract level: imports no subsystem.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import Any, TextIO

#: The plain line: the same numbers as the bar, without the bar.
PLAIN_FORMAT = "{desc}: {n_fmt}/{total_fmt} ({percentage:.0f}%), {rate_fmt}, elapsed {elapsed}, ETA {remaining}"
PLAIN_FORMAT_NO_TOTAL = "{desc}: {n_fmt}, {rate_fmt}, elapsed {elapsed}"


def _mode(stream: TextIO) -> str:
    value = os.environ.get("MINISANDBOX_PROGRESS", "auto").strip().lower()
    if value in ("0", "off", "no", "none", "false"):
        return "off"
    if value in ("bar", "lines"):
        return value
    isatty = getattr(stream, "isatty", None)
    return "bar" if isatty is not None and isatty() else "lines"


def _interval() -> float:
    try:
        return max(0.0, float(os.environ.get("MINISANDBOX_PROGRESS_INTERVAL", "10")))
    except ValueError:
        return 10.0


class Progress:
    """Work done of a total that may grow (`add_total`) as work is discovered, or of a
    total known up front (`fixed=True`: `add_total` is ignored, so the percentage and the
    ETA never jump back; `finish` settles the total on the work actually done when that
    was less, e.g. chunks found locally).

    Thread-safe: pool workers call `update` concurrently. `unit="B"` shows bytes with
    binary prefixes; any other unit counts items. Use as a context manager.
    """

    def __init__(
        self,
        desc: str,
        total: int | None = None,
        *,
        unit: str = "B",
        stream: TextIO | None = None,
        interval: float | None = None,
        fixed: bool = False,
    ) -> None:
        self.desc = desc
        self.fixed = fixed
        self.unit = unit
        self.stream = stream if stream is not None else sys.stderr
        self.mode = _mode(self.stream)
        self.interval = _interval() if interval is None else interval
        self.total = total
        self.n = 0
        self.lines = 0  # plain lines printed (tests read it)
        self._printed: tuple[str, str] | None = None  # (done, total) as the last plain line showed them
        self._t0 = time.monotonic()
        self._last = self._t0
        self._lock = threading.Lock()
        self._bar: Any = None  # drawn on the first work, so a no-op command draws nothing

    # -- feeding it ----------------------------------------------------------------------
    def _draw(self) -> Any:
        if self._bar is None and self.mode == "bar":
            from tqdm import tqdm

            self._bar = tqdm(
                total=self.total or None,
                initial=self.n,
                desc=self.desc,
                unit=self.unit,
                unit_scale=self.unit == "B",
                unit_divisor=1024 if self.unit == "B" else 1000,
                file=self.stream,
                dynamic_ncols=True,
                leave=True,
            )
        return self._bar

    def add_total(self, n: int) -> None:
        """More work was found (e.g. one more archive to download); ignored when the total
        was fixed up front."""
        if self.fixed:
            return
        with self._lock:
            self.total = (self.total or 0) + n
            if self._draw() is not None:
                self._bar.total = self.total
                self._bar.refresh()

    def fix_total(self, n: int) -> None:
        """The total, planned before the first unit of work (e.g. `push` once it has listed
        what it will copy): from now on it is fixed, as with `fixed=True`."""
        with self._lock:
            self.total, self.fixed = n, True
            if self._bar is not None:
                self._bar.total = n
                self._bar.refresh()

    def update(self, n: int = 1) -> None:
        with self._lock:
            bar = self._draw()
            self.n += n
            if bar is not None:
                bar.update(n)
            elif self.mode == "lines":
                now = time.monotonic()
                if now - self._last >= self.interval and self._counts() != self._printed:
                    self._last = now
                    self._print_line(now)

    def write(self, line: str) -> None:
        """A message line (e.g. one evaluation's result) that does not break the bar."""
        with self._lock:
            if self._bar is not None:
                self._bar.write(line, file=self.stream)
            else:  # messages are output, not decoration: printed in every mode
                print(line, file=self.stream, flush=True)

    def finish(self) -> None:
        """The work is complete: a fixed total larger than the work done becomes the work
        done, so the last line reads 100% (call before `close`, only on success)."""
        with self._lock:
            if self.total and self.n < self.total:
                self.total = self.n
                if self._bar is not None:
                    self._bar.total = self.n
                    self._bar.refresh()

    def close(self) -> None:
        with self._lock:
            if self._bar is not None:
                self._bar.close()
                self._bar = None
            elif self.mode == "lines" and self.lines and self._printed != self._counts():
                self._print_line(time.monotonic())  # the final numbers, unless just shown

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- plain lines ---------------------------------------------------------------------
    def line(self, now: float | None = None) -> str:
        """The current numbers as one plain line."""
        from tqdm import tqdm

        elapsed = (now if now is not None else time.monotonic()) - self._t0
        fmt = PLAIN_FORMAT if self.total else PLAIN_FORMAT_NO_TOTAL
        return tqdm.format_meter(
            self.n,
            self.total or None,
            elapsed,
            prefix=self.desc,
            unit=self.unit,
            unit_scale=self.unit == "B",
            unit_divisor=1024 if self.unit == "B" else 1000,
            bar_format=fmt,
        )

    def _counts(self) -> tuple[str, str]:
        """Done and total as a line shows them. Why: small updates (a few KiB of a MiB
        total) round to the same shown numbers; a line repeating the last one's counts says
        nothing new, so it is not printed, and no two plain lines are ever the same."""
        from tqdm import tqdm

        def shown(n: int | None) -> str:
            if n is None or self.unit != "B":
                return str(n)
            return tqdm.format_sizeof(n, divisor=1024)

        return shown(self.n), shown(self.total or None)

    def _print_line(self, now: float) -> None:
        print(self.line(now), file=self.stream, flush=True)
        self.lines += 1
        self._printed = self._counts()
