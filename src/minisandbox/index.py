"""The index: one catalog mapping every task to its artifacts, digests, status and log.

Tasks are sharded by sha256(instance_id)[:2] so a lookup reads one small shard, never
50k records. Shards are uploaded first and `index/catalog.json` last: a reader that sees
the new catalog sees complete shards.

This module is the format (a contract: it imports no subsystem). Reading and writing it in
a store is `minisandbox.node.published`.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
from collections import defaultdict
from pathlib import Path
from typing import Any, Iterable, Iterator

from minisandbox.errors import MinisandboxError

SCHEMA = 1
SHARDS = 256
CATALOG = "index/catalog.json"


class UnknownTask(MinisandboxError, KeyError):
    def __str__(self) -> str:  # KeyError quotes its message; we want one plain line
        return str(self.args[0])


def shard_of(instance_id: str) -> str:
    return hashlib.sha256(instance_id.encode()).hexdigest()[:2]


def shard_path(shard: str) -> str:
    return f"index/tasks/{shard}.jsonl"


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
        "generated": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
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
