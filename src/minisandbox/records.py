"""Task ingestion: SWE-smith and SWE-bench records from JSONL, JSON or Parquet.

A malformed record never stops the others: it becomes an `InvalidRecord` naming the
file, the line (1-based; for JSON arrays and Parquet the record's position) and the
field, and the run report lists it.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator, Literal

Format = Literal["swesmith", "swebench"]

SWESMITH_FIELDS = ("instance_id", "repo", "patch", "FAIL_TO_PASS", "PASS_TO_PASS")
SWEBENCH_FIELDS = (
    "instance_id",
    "repo",
    "base_commit",
    "version",
    "patch",
    "test_patch",
    "FAIL_TO_PASS",
    "PASS_TO_PASS",
)
_INSTANCE_ID = re.compile(r"^[A-Za-z0-9_.\-]+$")
_COMMIT = re.compile(r"^[0-9a-f]{7,40}$")


@dataclass(frozen=True)
class TaskRecord:
    """One task, normalised: lists are lists, both formats share one shape."""

    instance_id: str
    format: Format
    repo: str
    patch: str
    fail_to_pass: list[str]
    pass_to_pass: list[str]
    test_patch: str = ""
    base_commit: str = ""
    version: str = ""
    environment_setup_commit: str = ""
    image_name: str = ""
    problem_statement: str = ""

    @property
    def swesmith_profile(self) -> str:
        """SWE-smith profile name: `swesmith/{owner}__{repo}.{sha8}` -> `{owner}__{repo}.{sha8}`."""
        return self.repo.split("/", 1)[1] if "/" in self.repo else self.repo

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "TaskRecord":
        return cls(**data)


@dataclass(frozen=True)
class InvalidRecord:
    """A record that could not be used, and why, for the run report."""

    file: str
    line: int
    field: str
    error: str
    instance_id: str = ""

    def __str__(self) -> str:
        who = f" ({self.instance_id})" if self.instance_id else ""
        return f"{self.file}:{self.line}{who}: field {self.field!r}: {self.error}"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class RecordError(ValueError):
    def __init__(self, field_name: str, message: str):
        super().__init__(message)
        self.field = field_name


@dataclass
class Ingested:
    records: list[TaskRecord] = field(default_factory=list)
    invalid: list[InvalidRecord] = field(default_factory=list)


def detect_format(raw: dict[str, Any]) -> Format:
    """SWE-bench records carry `base_commit`; SWE-smith records do not."""
    return "swebench" if "base_commit" in raw else "swesmith"


def _test_list(raw: dict[str, Any], name: str) -> list[str]:
    value = raw.get(name)
    if value is None:
        raise RecordError(name, "missing")
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise RecordError(name, f"not a JSON list: {exc.msg}") from None
    if hasattr(value, "tolist"):  # numpy arrays from Parquet
        value = value.tolist()
    if not isinstance(value, list) or not all(isinstance(t, str) for t in value):
        raise RecordError(name, "must be a list of test ids (strings)")
    return list(value)


def _text(raw: dict[str, Any], name: str, *, required: bool, allow_empty: bool = False) -> str:
    value = raw.get(name)
    if value is None:
        if required:
            raise RecordError(name, "missing")
        return ""
    if not isinstance(value, str):
        raise RecordError(name, f"must be a string, got {type(value).__name__}")
    if required and not allow_empty and not value.strip():
        raise RecordError(name, "empty")
    return value


def normalize(raw: Any) -> TaskRecord:
    """Validate one raw record and return it normalised; raises RecordError naming the field."""
    if not isinstance(raw, dict):
        raise RecordError("<record>", f"must be an object, got {type(raw).__name__}")
    fmt = detect_format(raw)
    instance_id = _text(raw, "instance_id", required=True)
    if not _INSTANCE_ID.match(instance_id):
        raise RecordError("instance_id", f"invalid characters in {instance_id!r}")
    repo = _text(raw, "repo", required=True)
    if "/" not in repo:
        raise RecordError("repo", f"expected owner/name, got {repo!r}")
    patch = _text(raw, "patch", required=True)
    if "diff --git" not in patch and "--- " not in patch:
        raise RecordError("patch", "not a unified diff")
    f2p = _test_list(raw, "FAIL_TO_PASS")
    p2p = _test_list(raw, "PASS_TO_PASS")
    common = dict(
        instance_id=instance_id,
        format=fmt,
        repo=repo,
        patch=patch,
        fail_to_pass=f2p,
        pass_to_pass=p2p,
        problem_statement=_text(raw, "problem_statement", required=False),
    )
    if fmt == "swesmith":
        return TaskRecord(**common, image_name=_text(raw, "image_name", required=False))
    base_commit = _text(raw, "base_commit", required=True)
    if not _COMMIT.match(base_commit):
        raise RecordError("base_commit", f"not a git commit: {base_commit!r}")
    version = raw.get("version")
    if isinstance(version, (int, float)):
        version = str(version)
    if not isinstance(version, str) or not version:
        raise RecordError("version", "missing")
    setup = _text(raw, "environment_setup_commit", required=False) or base_commit
    if not _COMMIT.match(setup):
        raise RecordError("environment_setup_commit", f"not a git commit: {setup!r}")
    return TaskRecord(
        **common,
        test_patch=_text(raw, "test_patch", required=True, allow_empty=True),
        base_commit=base_commit,
        version=version,
        environment_setup_commit=setup,
    )


def _iter_raw(path: Path) -> Iterator[tuple[int, Any]]:
    """Yield (line or position, raw record or a JSON error marker) from one task file."""
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".ndjson"):
        with path.open(encoding="utf-8") as fh:
            for lineno, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    yield lineno, json.loads(line)
                except json.JSONDecodeError as exc:
                    yield lineno, RecordError("<json>", f"invalid JSON: {exc.msg} (column {exc.colno})")
    elif suffix == ".json":
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            yield exc.lineno, RecordError("<json>", f"invalid JSON: {exc.msg}; fix the file and rerun")
            return
        if isinstance(data, dict):
            data = [data]
        if not isinstance(data, list):
            yield 1, RecordError("<json>", "top level must be a list of records")
            return
        yield from enumerate(data, 1)
    elif suffix == ".parquet":
        import pyarrow.parquet as pq

        table = pq.read_table(path)
        for pos, row in enumerate(table.to_pylist(), 1):
            yield pos, row
    else:
        raise ValueError(f"{path}: unsupported task file type {suffix!r}; use .jsonl, .json or .parquet")


def read_tasks(paths: Iterable[str | Path]) -> Ingested:
    """Read task files; bad records are collected in `.invalid`, duplicates too."""
    out = Ingested()
    seen: dict[str, str] = {}
    for p in paths:
        path = Path(p)
        if not path.exists():
            raise FileNotFoundError(f"task file {path} does not exist; check --config tasks=...")
        for line, raw in _iter_raw(path):
            iid = raw.get("instance_id", "") if isinstance(raw, dict) else ""
            iid = iid if isinstance(iid, str) else ""
            if isinstance(raw, RecordError):
                out.invalid.append(InvalidRecord(str(path), line, raw.field, str(raw)))
                continue
            try:
                rec = normalize(raw)
            except RecordError as exc:
                out.invalid.append(InvalidRecord(str(path), line, exc.field, str(exc), iid))
                continue
            where = f"{path}:{line}"
            if rec.instance_id in seen:
                out.invalid.append(
                    InvalidRecord(str(path), line, "instance_id", f"duplicate of {seen[rec.instance_id]}", iid)
                )
                continue
            seen[rec.instance_id] = where
            out.records.append(rec)
    return out
