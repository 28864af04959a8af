"""Step status files: the small JSON every pipeline step writes next to its output.

A contract between the build steps (`minisandbox.pipeline`) that write them and the
readers downstream (publish receipts read by `minisandbox.grading.validate`, the index):
it lives at the package root so both sides can import it without importing each other.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from minisandbox.fsutil import atomic_write_json


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


def write_status(path: Path, status: StageStatus) -> None:
    atomic_write_json(path, status.to_dict())


def read_status(path: Path) -> StageStatus:
    data = json.loads(Path(path).read_text())
    return StageStatus(**data)
