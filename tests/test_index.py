"""The index: sharded task entries, statuses from artifacts, one-shard lookups."""

from __future__ import annotations

import pytest

from minisandbox import index as idx
from minisandbox.node import published
from minisandbox.node.store import Store


def _tasks(n: int) -> list[dict]:
    return [
        {
            "instance_id": f"t-{i}",
            "env_key": "env-a" if i % 2 else "env-b",
            "repo_key": "repo-a",
            "spec_name": "s",
            "record": {
                "instance_id": f"t-{i}",
                "repo": "r",
                "format": "swesmith",
                "patch": "",
                "fail_to_pass": [],
                "pass_to_pass": [],
            },
        }
        for i in range(n)
    ]


def test_statuses_counts_and_lookup(tmp_path):
    envs = {"env-a": {"status": "ok"}, "env-b": {"status": "failed", "error": "build: exit 3"}}
    repos = {"repo-a": {"status": "ok"}}
    catalog, shards = idx.build_index(
        _tasks(1000),
        envs,
        repos,
        [{"file": "f", "line": 1, "field": "patch", "error": "x"}],
        {"t-1": {"status": "valid"}},
    )
    store = Store(str(tmp_path / "store"))
    published.publish_index(store, catalog, shards)
    c = published.read_catalog(store)["counts"]
    assert c["tasks"] == 1000 and c["tasks_ready"] == 500 and c["tasks_env_failed"] == 500
    assert c["envs_failed"] == 1 and c["invalid_records"] == 1 and c["validation_valid"] == 1
    assert published.lookup(store, "t-1")["status"] == "ready"
    assert published.lookup(store, "t-1")["validation"] == {"status": "valid"}
    assert published.lookup(store, "t-2")["status"] == "env-failed"
    assert len(list((tmp_path / "store" / "index" / "tasks").iterdir())) == idx.SHARDS
    # a lookup touches exactly one shard
    shard_file = tmp_path / "store" / idx.shard_path(idx.shard_of("t-7"))
    assert any('"t-7"' in line for line in shard_file.read_text().splitlines())
    assert sum(1 for _ in published.iter_tasks(store)) == 1000


def test_unknown_task_and_missing_index(tmp_path):
    store = Store(str(tmp_path / "store"))
    with pytest.raises(FileNotFoundError, match="no index"):
        published.read_catalog(store)
    catalog, shards = idx.build_index([], {}, {}, [])
    published.publish_index(store, catalog, shards)
    with pytest.raises(idx.UnknownTask, match="unknown task id 'nope'"):
        published.lookup(store, "nope")


def test_republish_drops_stale_tasks(tmp_path):
    store = Store(str(tmp_path / "store"))
    env = {"env-a": {"status": "ok"}, "env-b": {"status": "ok"}}
    published.publish_index(store, *idx.build_index(_tasks(10), env, {"repo-a": {"status": "ok"}}, []))
    published.publish_index(store, *idx.build_index(_tasks(3), env, {"repo-a": {"status": "ok"}}, []))
    assert sum(1 for _ in published.iter_tasks(store)) == 3
    with pytest.raises(idx.UnknownTask):
        published.lookup(store, "t-5")
