"""Stage results: every pipeline step writes a small JSON status next to its output.

A failed step is a *result*, not a Snakemake failure: the failure is recorded (error +
log) and flows downstream to the index, so one broken environment never stops the
others and a rerun with nothing changed runs zero jobs.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class StageStatus:
    ok: bool
    stage: str
    key: str
    error: str | None = None
    log: str | None = None
    data: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def write_json_atomic(path: Path, data: Any) -> None:
    """Write JSON via a temp file + rename so readers never see half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as fh:
            json.dump(data, fh, indent=1, sort_keys=True)
            fh.write("\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_status(path: Path, status: StageStatus) -> None:
    write_json_atomic(path, status.to_dict())


def read_status(path: Path) -> StageStatus:
    data = json.loads(Path(path).read_text())
    return StageStatus(**data)


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
