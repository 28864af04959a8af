"""Stage results: every pipeline step writes a small JSON status next to its output.

A failed step is a *result*, not a Snakemake failure: the failure is recorded (error +
log) and flows downstream to the index, so one broken environment never stops the
others and a rerun with nothing changed runs zero jobs.
"""

from __future__ import annotations

from pathlib import Path

from minisandbox.status import StageStatus, read_status, write_status

__all__ = ["StageStatus", "first_failure", "one_line", "read_status", "write_status"]


def first_failure(*paths: Path) -> StageStatus | None:
    """The first failed upstream status among `paths`, so a step can pass the failure on."""
    for p in paths:
        st = read_status(p)
        if not st.ok:
            return st
    return None


def one_line(text: str, limit: int = 300) -> str:
    """Last meaningful line of an error output, for the index and the run report."""
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    if not lines:
        return "failed without output"
    line = lines[-1]
    return line if len(line) <= limit else line[: limit - 3] + "..."
