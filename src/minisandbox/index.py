"""The index: one catalog mapping every task to its artifacts, digests, status and log.

Tasks are sharded by sha256(instance_id)[:2] so a lookup reads one small shard, never
50k records. Shards are uploaded first and `index/catalog.json` last: a reader that sees
the new catalog sees complete shards.

This module is the format (a contract: it imports no subsystem). Reading and writing it in
a store is `minisandbox.node.published`.
"""

from __future__ import annotations

import functools
import json
import re
import time
from collections import defaultdict, namedtuple
from collections.abc import Iterable, Iterator
from pathlib import Path

from minisandbox.errors import MinisandboxError
from minisandbox.fsutil import sha256
from minisandbox.manifest import KINDS, PLAIN_NAME, StoreDataError, parse_store_model, plain_name, validate_manifest
from minisandbox.records import LIST_FIELDS, TaskRecord

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a warm `run` does not)
if TYPE_CHECKING:
    from typing import Any

SCHEMA = 1
SHARDS = 256
CATALOG = "index/catalog.json"


class UnknownTask(MinisandboxError, KeyError):
    def __str__(self) -> str:  # KeyError quotes its message; we want one plain line
        return str(self.args[0])


def shard_of(instance_id: str) -> str:
    return sha256(instance_id.encode()).hexdigest()[:2]


def shard_path(shard: str) -> str:
    return f"index/tasks/{shard}.jsonl"


def shard_digest(data: bytes) -> str:
    """The sha256 the catalog records for a shard's exact bytes (a missing shard reads as b"")."""
    import hashlib

    return hashlib.sha256(data).hexdigest()


def next_sequence(previous: int | None, now: float | None = None) -> int:
    """The catalog's `sequence` for a new publish: milliseconds since the epoch, and at
    least the previous sequence + 1. Why both: +1 keeps re-publishes of one store
    monotonic whatever the clocks say, and the clock keeps a store rebuilt from scratch
    (no previous catalog) ahead of what nodes accepted from its earlier life."""
    clock = int((time.time() if now is None else now) * 1000)
    return max(clock, (previous or 0) + 1)


def _task_status(env: dict[str, Any] | None, repo: dict[str, Any] | None) -> str:
    if not repo or repo.get("status") != "ok":
        return "repo-failed"
    if not env or env.get("status") != "ok":
        return "env-failed"
    return "ready"


def build_index(
    tasks: Iterable[dict[str, Any]],
    envs: dict[str, dict[str, Any]],
    repos: dict[str, dict[str, Any]],
    invalid: list[dict[str, Any]],
    validation: dict[str, dict[str, Any]] | None = None,
) -> tuple[dict[str, Any], dict[str, list[str]]]:
    """Catalog dict and shard -> JSONL lines. `validation`: instance_id -> {status, ...}."""
    shards: dict[str, list[str]] = defaultdict(list)
    counts: dict[str, int] = defaultdict(int)
    for t in tasks:
        status = _task_status(envs.get(t["env_key"]), repos.get(t["repo_key"]))
        entry = {**t, "status": status}
        if validation and t["instance_id"] in validation:
            entry["validation"] = validation[t["instance_id"]]
            counts[f"validation_{validation[t['instance_id']].get('status', 'unknown')}"] += 1
        counts["tasks"] += 1
        counts[f"tasks_{status.replace('-', '_')}"] += 1
        shards[shard_of(t["instance_id"])].append(json.dumps(entry, sort_keys=True))
    counts["envs_ok"] = sum(1 for e in envs.values() if e.get("status") == "ok")
    counts["envs_failed"] = sum(1 for e in envs.values() if e.get("status") != "ok")
    counts["repos_ok"] = sum(1 for e in repos.values() if e.get("status") == "ok")
    counts["repos_failed"] = sum(1 for e in repos.values() if e.get("status") != "ok")
    counts["invalid_records"] = len(invalid)
    catalog = {
        "schema": SCHEMA,
        "generated": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "shards": SHARDS,
        "envs": envs,
        "repos": repos,
        "counts": dict(sorted(counts.items())),
        "invalid_records": invalid,
    }
    return catalog, shards


def load_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    with Path(path).open() as fh:
        for line in fh:
            if line.strip():
                yield json.loads(line)


# ------------------------------------------------------------------ reading: the schema
_INSTANCE_ID = r"[A-Za-z0-9_.\-]{1,256}"
_LOG = rf"logs/(?:{'|'.join(KINDS)})/{PLAIN_NAME}\.log"
_SECTIONS = {"envs": "env", "repos": "repo", "interps": "interp"}
_SHARD = r"[0-9a-f]{2}"
_SHA256 = r"[0-9a-f]{64}"


@functools.cache
def _record_fields() -> tuple[dict[str, str], tuple[str, ...]]:
    """TaskRecord's fields (name -> "list" or "str") and those it cannot be made without (no
    default): an entry lacking one is refused here rather than failing later with a
    TypeError where the record is used."""
    kinds = {name: ("list" if name in LIST_FIELDS else "str") for name in TaskRecord._fields}
    required = tuple(name for name in TaskRecord._fields if name not in TaskRecord._field_defaults)
    return kinds, required


def _instance_id(value: Any) -> str:
    if not isinstance(value, str) or not re.fullmatch(_INSTANCE_ID, value) or value in (".", ".."):
        raise ValueError("must be a task id of [A-Za-z0-9_.-] (not '.' or '..'), at most 256 characters")
    return value


@functools.cache
def _models() -> dict[str, Any]:
    """The pydantic models of index shards and the catalog, built on first use (see
    `minisandbox.manifest._models`: a `minisandbox run` whose documents were verified before
    builds none)."""
    from typing import Any, Literal  # noqa: F401  (pydantic evaluates the annotations below here)

    from pydantic import BaseModel, ConfigDict, Field, StrictInt, field_validator

    class IndexEntry(BaseModel):
        """One task line of an index shard."""

        model_config = ConfigDict(extra="allow")

        instance_id: str
        env_key: str
        repo_key: str
        status: Literal["ready", "env-failed", "repo-failed"] = "ready"
        record: dict[str, Any]

        @field_validator("instance_id")
        @classmethod
        def _iid(cls, value: Any) -> str:
            return _instance_id(value)

        @field_validator("env_key", "repo_key")
        @classmethod
        def _key(cls, value: Any) -> str:
            return plain_name(value, "key")

        @field_validator("record")
        @classmethod
        def _record(cls, value: dict[str, Any]) -> dict[str, Any]:
            record_kinds, record_required = _record_fields()
            for name, v in value.items():
                want = record_kinds.get(name)
                if want is None:
                    raise ValueError(f"record has an unknown field {name!r}")
                ok = (
                    (isinstance(v, list) and all(isinstance(t, str) for t in v))
                    if want == "list"
                    else isinstance(v, str)
                )
                if not ok:
                    raise ValueError(
                        f"record field {name!r} must be {'a list of strings' if want == 'list' else 'a string'}"
                    )
            missing = [name for name in record_required if name not in value]
            if missing:
                raise ValueError(f"record lacks field {missing[0]!r}")
            if value.get("format", "swesmith") not in ("swesmith", "swebench"):
                raise ValueError("record format must be swesmith or swebench")
            _instance_id(value.get("instance_id"))
            return value

    class _CatalogEntry(BaseModel):
        model_config = ConfigDict(extra="allow")

        status: str
        log: str | None = None
        manifest: dict[str, Any] | None = None

        @field_validator("log")
        @classmethod
        def _log(cls, value: str | None) -> str | None:
            if value is not None and not re.fullmatch(_LOG, value):
                raise ValueError("must be logs/<kind>/<key>.log")
            return value

    class _Catalog(BaseModel):
        model_config = ConfigDict(extra="allow", populate_by_name=True)

        schema_version: Literal[1] = Field(alias="schema")
        shards: StrictInt = Field(ge=1, le=256)
        sequence: StrictInt | None = Field(default=None, ge=0)
        shards_sha256: dict[str, str] | None = None
        envs: dict[str, _CatalogEntry] = Field(default_factory=dict)
        repos: dict[str, _CatalogEntry] = Field(default_factory=dict)
        interps: dict[str, _CatalogEntry] = Field(default_factory=dict)

        @field_validator("shards_sha256")
        @classmethod
        def _shard_digests(cls, value: dict[str, str] | None) -> dict[str, str] | None:
            return _check_shard_digests(value)

    IndexEntry.__qualname__ = "IndexEntry"  # as the module's attribute (`__getattr__`): repr and pickle work
    return {"IndexEntry": IndexEntry, "_Catalog": _Catalog}


def __getattr__(name: str) -> Any:
    """`from minisandbox.index import IndexEntry` builds the models then."""
    if name == "IndexEntry":
        return _models()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def validate_entry(data: Any, *, where: str) -> dict[str, Any]:
    """`data` (one parsed shard line) if it matches the schema, else StoreDataError."""
    hint = "re-run the index step (or fix the store)"
    entry = parse_store_model(_models()["IndexEntry"], data, where=where, hint=hint)
    if entry.record["instance_id"] != entry.instance_id:
        raise StoreDataError(
            f"{where}: record.instance_id {entry.record['instance_id']!r} differs from "
            f"instance_id {entry.instance_id!r}; {hint}"
        )
    return data


def parse_shard(data: bytes, *, where: str) -> list[dict[str, Any]]:
    """Every task entry of one shard file, each validated; garbage names the shard and line."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise StoreDataError(f"{where}: not UTF-8 text (byte {exc.start}); re-run the index step") from None
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            parsed = json.loads(line)
        except ValueError as exc:
            raise StoreDataError(
                f"{where} line {n}: not JSON ({getattr(exc, 'msg', exc)}); re-run the index step"
            ) from None
        out.append(validate_entry(parsed, where=f"{where} line {n}"))
    return out


def _check_shard_digests(value: Any) -> dict[str, str] | None:
    if value is None:
        return None
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and re.fullmatch(_SHARD, k) and isinstance(v, str) and re.fullmatch(_SHA256, v)
        for k, v in value.items()
    ):
        raise ValueError("must map shard names (2 hex digits) to sha256 digests (64 hex digits)")
    return value


class CatalogHead(namedtuple("CatalogHead", ["sequence", "shards_sha256"])):
    """What freshness needs of the catalog (`sequence`, an int, 0: published before
    sequences; `shards_sha256`, shard name -> digest, None: before shard digests)."""

    __slots__ = ()


def validate_catalog_head(data: Any, *, where: str) -> CatalogHead:
    """The catalog's schema, `sequence` and `shards_sha256`, checked by hand (no schema
    models: this runs on every lookup of a node with a store public key); StoreDataError
    naming the field if not."""
    hint = "re-run the index step (or fix the store)"
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise StoreDataError(f"{where}: not a schema-{SCHEMA} catalog; {hint}")
    seq = data.get("sequence")
    if seq is not None and (type(seq) is not int or seq < 0):
        raise StoreDataError(f"{where}: field 'sequence' must be a whole number >= 0 (got {seq!r:.40}); {hint}")
    try:
        digests = _check_shard_digests(data.get("shards_sha256"))
    except ValueError as exc:
        raise StoreDataError(f"{where}: field 'shards_sha256' {exc}; {hint}") from None
    return CatalogHead(seq or 0, digests)


def validate_catalog(data: Any, *, where: str) -> dict[str, Any]:
    """`data` (the parsed catalog) if it and every manifest copy in it match the schema."""
    hint = "re-run the index step (or fix the store)"
    cat = parse_store_model(_models()["_Catalog"], data, where=where, hint=hint)
    for section, kind in _SECTIONS.items():
        for key, entry in getattr(cat, section).items():
            try:
                plain_name(key, "key")
            except ValueError as exc:
                raise StoreDataError(f"{where}: {section} key {key!r}: {exc}; {hint}") from None
            if entry.manifest is not None:
                validate_manifest(entry.manifest, where=f"{where}: {section}.{key}.manifest", kind=kind, key=key)
    return data
