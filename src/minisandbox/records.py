"""Task ingestion: SWE-smith and SWE-bench records from JSONL, JSON or Parquet.

A malformed record never stops the others: it becomes an `InvalidRecord` naming the
file, the line (1-based; for JSON arrays and Parquet the record's position) and the
field, and the run report lists it. A file that cannot be read at all (missing,
unsupported type, not Parquet) is one `InvalidRecord` at line 0, field `<file>`.
"""

from __future__ import annotations

import json
from collections import namedtuple
from collections.abc import Iterable, Iterator
from pathlib import Path

from minisandbox.errors import MinisandboxError
from minisandbox.fsutil import LazyPattern

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a warm `run` does not)
if TYPE_CHECKING:
    from typing import Any, Literal

    Format = Literal["swesmith", "swebench"]

#: What an instance id may contain (it becomes a directory name in reports and caches).
INSTANCE_ID = LazyPattern(r"^[A-Za-z0-9_.\-]+$")
_COMMIT = LazyPattern(r"^[0-9a-f]{7,40}$")


#: TaskRecord's fields that hold a list of test ids (every other field is a str).
LIST_FIELDS = ("fail_to_pass", "pass_to_pass")


class TaskRecord(
    namedtuple(
        "TaskRecord",
        [
            "instance_id",
            "format",  # "swesmith" | "swebench"
            "repo",
            "patch",
            *LIST_FIELDS,
            "test_patch",  # the rest: "" when the format has no such field
            "base_commit",
            "version",
            "environment_setup_commit",
            "image_name",
            "problem_statement",
        ],
        defaults=[""] * 6,
    )
):
    """One task, normalised: lists are lists, both formats share one shape. A named tuple (a
    changed copy: `record._replace(...)`), as the other records `minisandbox run` reads: no
    dataclass and no `typing` on its path (docs/design.md, "Record types")."""

    __slots__ = ()

    @property
    def swesmith_profile(self) -> str:
        """SWE-smith profile name: `swesmith/{owner}__{repo}.{sha8}` -> `{owner}__{repo}.{sha8}`."""
        return self.repo.split("/", 1)[1] if "/" in self.repo else self.repo

    def to_dict(self) -> dict[str, Any]:
        return self._asdict()  # shallow on purpose: a deep copy dominated 50k-task planning

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TaskRecord:
        return cls(**data)


class InvalidRecord(namedtuple("InvalidRecord", ["file", "line", "field", "error", "instance_id"], defaults=[""])):
    """A record that could not be used, and why, for the run report (`line`: an int, 1-based;
    `instance_id`: "" when unknown)."""

    __slots__ = ()

    def __str__(self) -> str:
        who = f" ({self.instance_id})" if self.instance_id else ""
        return f"{self.file}:{self.line}{who}: field {self.field!r}: {self.error}"

    def to_dict(self) -> dict[str, Any]:
        return self._asdict()


class RecordError(MinisandboxError, ValueError):
    def __init__(self, field_name: str, message: str):
        super().__init__(message)
        self.field = field_name


class TaskFileMissing(MinisandboxError, FileNotFoundError):
    """A task file named by the configuration or `--tasks` does not exist."""


class Ingested:
    """What reading task files gave: the good records and the invalid ones."""

    def __init__(self) -> None:
        self.records: list[TaskRecord] = []
        self.invalid: list[InvalidRecord] = []
        #: instance_id -> (file, line) of each good record, so later checks (a record that
        #: matches no environment spec) can name where it came from.
        self.origins: dict[str, tuple[str, int]] = {}


#: Keys only SWE-bench records carry: any one of them makes a record SWE-bench, so a
#: SWE-bench record that lacks `base_commit` is reported as such, not misread as SWE-smith.
SWEBENCH_ONLY = ("base_commit", "version", "environment_setup_commit", "test_patch")


def detect_format(raw: dict[str, Any]) -> Format:
    """SWE-bench records carry `base_commit` (and version, ...); SWE-smith records do not."""
    return "swebench" if any(k in raw for k in SWEBENCH_ONLY) else "swesmith"


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


def normalize(raw: Any, *, label: bool = False) -> TaskRecord:
    """Validate one raw record and return it normalised; raises RecordError naming the field.

    `label`: a labelling candidate (docs/labelling.md): a SWE-smith record whose
    FAIL_TO_PASS/PASS_TO_PASS may be absent, as the labelling computes them. Everywhere else
    an absent list is an invalid record."""
    if not isinstance(raw, dict):
        raise RecordError("<record>", f"must be an object, got {type(raw).__name__}")
    fmt = detect_format(raw)
    instance_id = _text(raw, "instance_id", required=True)
    if not INSTANCE_ID.match(instance_id):
        raise RecordError("instance_id", f"invalid characters in {instance_id!r}")
    if instance_id in (".", ".."):  # (log and report directories are named by it)
        raise RecordError("instance_id", f"{instance_id!r} is no instance id")
    repo = _text(raw, "repo", required=True)
    if "/" not in repo:
        raise RecordError("repo", f"expected owner/name, got {repo!r}")
    patch = _text(raw, "patch", required=True)
    if "diff --git" not in patch and "--- " not in patch:
        raise RecordError("patch", "not a unified diff")
    if label and fmt != "swesmith":
        raise RecordError(
            "repo",
            "labelling takes SWE-smith records (a `patch` that is the bug, no "
            "base_commit/version/test_patch); label SWE-bench tasks with their own harness",
        )
    f2p = [] if label and raw.get("FAIL_TO_PASS") in (None, "") else _test_list(raw, "FAIL_TO_PASS")
    p2p = [] if label and raw.get("PASS_TO_PASS") in (None, "") else _test_list(raw, "PASS_TO_PASS")
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
    if version is None or version == "":
        raise RecordError("version", "missing")
    if isinstance(version, float):  # 3.10 parsed as a number is 3.1: refuse to guess
        raise RecordError("version", f'must be a string such as "3.10", got the number {version}')
    if isinstance(version, int) and not isinstance(version, bool):
        version = str(version)
    if not isinstance(version, str):
        raise RecordError("version", f"must be a string, got {type(version).__name__}")
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


def _iter_jsonl(path: Path) -> Iterator[tuple[int, Any]]:
    with path.open("rb") as fh:
        for lineno, raw_line in enumerate(fh, 1):
            try:
                line = raw_line.decode("utf-8")
            except UnicodeDecodeError as exc:
                yield lineno, RecordError("<json>", f"not UTF-8 text (byte {exc.start})")
                continue
            if not line.strip():
                continue
            try:
                yield lineno, json.loads(line)
            except json.JSONDecodeError as exc:
                yield lineno, RecordError("<json>", f"invalid JSON: {exc.msg} (column {exc.colno})")


def _iter_json(path: Path) -> Iterator[tuple[int, Any]]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        yield 0, RecordError("<file>", f"not UTF-8 text (byte {exc.start}); fix the file and rerun")
        return
    except json.JSONDecodeError as exc:
        if exc.msg == "Extra data" and exc.colno == 1:
            # one document per line under a .json name (as many dataset exports are):
            # read it as JSONL, so an error names its own line and column, not "line 2
            # column 1" of a whole-file parse
            yield from _iter_jsonl(path)
            return
        yield exc.lineno, RecordError("<json>", f"invalid JSON: {exc.msg} (column {exc.colno}); fix the file and rerun")
        return
    if isinstance(data, dict):
        data = [data]
    if not isinstance(data, list):
        yield 1, RecordError("<json>", "top level must be a list of records")
        return
    yield from enumerate(data, 1)


def _iter_parquet(path: Path) -> Iterator[tuple[int, Any]]:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:  # a slim (core) install: Parquet support is an extra
        yield (
            0,
            RecordError(
                "<file>", "reading Parquet task files needs pyarrow: pip install 'minisandbox[parquet]' (or use JSONL)"
            ),
        )
        return

    try:
        pf = pq.ParquetFile(path)
    except (pa.ArrowException, OSError) as exc:
        yield 0, RecordError("<file>", f"unreadable Parquet file: {str(exc).splitlines()[0]}")
        return
    pos = 0
    for batch in pf.iter_batches(batch_size=1024):  # bounded memory for large task sets
        for row in batch.to_pylist():
            pos += 1
            yield pos, row


_READERS = {".jsonl": _iter_jsonl, ".ndjson": _iter_jsonl, ".json": _iter_json, ".parquet": _iter_parquet}


def _iter_raw(path: Path) -> Iterator[tuple[int, Any]]:
    """Yield (line or position, raw record or a RecordError marker) from one task file.

    File-level problems (missing, unsupported type, unreadable) are one marker at line 0.
    """
    if not path.is_file():
        yield 0, RecordError("<file>", "task file does not exist; check --config tasks=...")
        return
    reader = _READERS.get(path.suffix.lower())
    if reader is None:
        yield 0, RecordError("<file>", f"unsupported task file type {path.suffix!r}; use .jsonl, .json or .parquet")
        return
    yield from reader(path)


def read_tasks(paths: Iterable[str | Path], *, label: bool = False) -> Ingested:
    """Read task files; bad records, bad files and duplicates are collected in `.invalid`.

    Nothing here is fatal: one broken line or file never hides the other records.
    `label`: read labelling candidates (`normalize`).
    """
    out = Ingested()
    seen = out.origins
    for p in paths:
        path = Path(p)
        for line, raw in _iter_raw(path):
            if isinstance(raw, RecordError):
                out.invalid.append(InvalidRecord(str(path), line, raw.field, str(raw)))
                continue
            iid = raw.get("instance_id", "") if isinstance(raw, dict) else ""
            iid = iid if isinstance(iid, str) else ""
            try:
                rec = normalize(raw, label=label)
            except RecordError as exc:
                out.invalid.append(InvalidRecord(str(path), line, exc.field, str(exc), iid))
                continue
            if rec.instance_id in seen:
                first = ":".join(map(str, seen[rec.instance_id]))
                out.invalid.append(InvalidRecord(str(path), line, "instance_id", f"duplicate of {first}", iid))
                continue
            seen[rec.instance_id] = (str(path), line)
            out.records.append(rec)
    return out


def to_raw(record: TaskRecord) -> dict[str, Any]:
    """A TaskRecord back in its source format (SWE-smith or SWE-bench field names)."""
    raw: dict[str, Any] = {
        "instance_id": record.instance_id,
        "repo": record.repo,
        "patch": record.patch,
        "FAIL_TO_PASS": list(record.fail_to_pass),
        "PASS_TO_PASS": list(record.pass_to_pass),
        "problem_statement": record.problem_statement,
    }
    if record.format == "swebench":
        raw.update(
            base_commit=record.base_commit,
            version=record.version,
            test_patch=record.test_patch,
            environment_setup_commit=record.environment_setup_commit,
            FAIL_TO_PASS=json.dumps(list(record.fail_to_pass)),
            PASS_TO_PASS=json.dumps(list(record.pass_to_pass)),
        )
    else:
        raw["image_name"] = record.image_name
    return raw


def test_files_of(test_ids: list[str]) -> list[str]:
    """Unique file paths of pytest node ids (`path::name` -> `path`), in order: the files a
    SWE-smith task's start state removes and grading puts back (here, with the record, so a
    sandbox's start state needs no grading module)."""
    out: dict[str, None] = {}
    for t in test_ids:
        if "::" in t:
            out[t.split("::", 1)[0]] = None
    return list(out)


def changed_by(patch: str, path: str) -> bool:
    """Whether the git diff `patch` changes, creates or deletes `path` (its `--- a/<path>` or
    `+++ b/<path>` header; SWE-smith's and SWE-bench's patches are git diffs)."""
    return f"+++ b/{path}\n" in patch or f"--- a/{path}\n" in patch


def task_test_files(test_ids: list[str], patch: str) -> list[str]:
    """The files of `test_ids` (`test_files_of`) that the task's own patch does not change:
    the test files a SWE-smith task's start state removes and grading puts back. A file the
    bug is in is code under test even when its doctests are among the ids (tldextract's
    suite runs `--doctest-modules`: `tldextract/tldextract.py::...`): removing it broke the
    task, and putting its reference back graded the fixed code, whatever the candidate did."""
    return [f for f in test_files_of(test_ids) if not changed_by(patch, f)]


# --------------------------------------------------------------------------- selection


class SelectionError(MinisandboxError, ValueError):
    """A subset filter (`--instance-ids`, `--repo`) that cannot be used or matches nothing."""


def repo_names(repo: str) -> set[str]:
    """The names a user may give for a record's `repo` (compared case-insensitively):
    the field itself, and `owner/name` for both formats (SWE-smith's
    `swesmith/owner__name.sha8` also answers to `owner__name.sha8` and `owner/name`)."""
    names = {repo}
    tail = repo.split("/", 1)[1] if repo.startswith("swesmith/") else ""
    if tail:
        names.add(tail)
        owner_name = tail.rsplit(".", 1)[0] if "." in tail else tail
        if "__" in owner_name:
            names.add(owner_name.replace("__", "/", 1))
    return {n.casefold() for n in names}


def read_id_file(path: str | Path) -> list[str]:
    """Instance ids from a file: a JSON list, or ids separated by white space (one per line
    is usual); `#` starts a comment. Why both: SWE-bench subsets are shared either way."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SelectionError(f"file of instance ids {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise SelectionError(f"file of instance ids {path}: not UTF-8 text (byte {exc.start})") from None
    if text.lstrip().startswith("["):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise SelectionError(f"file of instance ids {path}:{exc.lineno}: invalid JSON ({exc.msg})") from None
        if not all(isinstance(x, str) for x in data):
            raise SelectionError(f"file of instance ids {path}: a JSON list must hold only strings")
        ids = list(data)
    else:
        ids = [word for line in text.splitlines() for word in line.split("#", 1)[0].split()]
    for n, iid in enumerate(ids, 1):
        if not INSTANCE_ID.match(iid):
            raise SelectionError(f"file of instance ids {path}: id {n} {iid!r} is not an instance id")
    return ids


class Selection:
    """A subset of tasks: by instance id and/or by repository (both must match when both
    are given). The one filter behind `eval`, `tasks` and `fetch`'s `--instance-ids`/`--repo`."""

    def __init__(self, ids: tuple[str, ...] | None = None, repos: tuple[str, ...] = ()) -> None:
        self.ids = ids  # None: every id
        self.repos = repos
        self._id_set = frozenset(ids or ())

    @classmethod
    def parse(cls, ids: Iterable[str] | None = None, repos: Iterable[str] | None = None) -> Selection:
        """From the command-line values: an id, or `@FILE` for a file of ids (`read_id_file`)."""
        picked: list[str] | None = None
        if ids is not None:
            picked = []
            for value in ids:
                if value.startswith("@"):
                    picked += read_id_file(value[1:])
                elif INSTANCE_ID.match(value):
                    picked.append(value)
                else:
                    hint = f"; to read ids from the file, write @{value}" if Path(value).is_file() else ""
                    raise SelectionError(f"--instance-ids: {value!r} is not an instance id{hint}")
        return cls(
            tuple(dict.fromkeys(picked)) if picked is not None else None,
            tuple(dict.fromkeys(r.strip() for r in repos or () if r.strip())),
        )

    @property
    def active(self) -> bool:
        return self.ids is not None or bool(self.repos)

    def matches(self, instance_id: str, repo: str | None) -> bool:
        """Is this task selected? `repo` None: not known here, only the id is judged."""
        if self.ids is not None and instance_id not in self._id_set:
            return False
        if self.repos and repo is not None:
            names = repo_names(repo)
            return any(r.casefold() in names for r in self.repos)
        return True

    def check_found(self, found_ids: Iterable[str], found_repos: Iterable[str], source: str) -> None:
        """Raise SelectionError naming what the filter asked for and `source` does not hold
        (ids that are no task there, repositories no task belongs to): a typo must not
        look like an empty result."""
        self.check_ids(found_ids, source)
        self.check_repos(found_repos, source)

    def check_ids(self, found_ids: Iterable[str], source: str) -> None:
        """SelectionError unless every id asked for is in `found_ids`."""
        missing = sorted(set(self.ids or ()) - set(found_ids))
        if missing:
            shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
            raise SelectionError(f"--instance-ids: {len(missing)} id(s) name no task in {source}: {shown}")

    def check_repos(self, found_repos: Iterable[str], source: str) -> None:
        """SelectionError unless every repository asked for is one of `found_repos`."""
        if self.repos:
            names: set[str] = set()
            for repo in found_repos:
                names |= repo_names(repo)
            unknown = [r for r in self.repos if r.casefold() not in names]
            if unknown:
                raise SelectionError(
                    f"--repo: no task of {', '.join(unknown)} in {source} (give owner/name, "
                    f"as `minisandbox tasks` lists the tasks)"
                )
