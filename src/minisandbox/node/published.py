"""The published index in a store: writing it (last step of the pipeline) and reading it
(one shard per lookup) on a node.

The format itself (sharding, catalog layout, `build_index`) is the contract
`minisandbox.index`; this module is the store side of it.
"""

from __future__ import annotations

import json
from typing import Any, Iterator

from minisandbox.index import CATALOG, SHARDS, UnknownTask, shard_of, shard_path
from minisandbox.node.store import Store, StoreIndexMissing


def publish_index(store: Store, catalog: dict[str, Any], shards: dict[str, list[str]]) -> None:
    """Every shard (empty ones too, so stale tasks disappear), then the catalog."""
    for i in range(SHARDS):
        shard = f"{i:02x}"
        lines = sorted(shards.get(shard, []))
        store.put_text(shard_path(shard), "".join(line + "\n" for line in lines))
    store.put_text(CATALOG, json.dumps(catalog, indent=1, sort_keys=True) + "\n")


def read_catalog(store: Store) -> dict[str, Any]:
    if not store.exists(CATALOG):
        raise StoreIndexMissing(
            f"no index at {store.url}/{CATALOG}: is this a published store? "
            "Build one with `snakemake --cores N` or pass --store URL"
        )
    return json.loads(store.read_text(CATALOG))


def iter_shard(store: Store, shard: str) -> Iterator[dict[str, Any]]:
    path = shard_path(shard)
    if not store.exists(path):
        return
    for line in store.read_text(path).splitlines():
        if line.strip():
            yield json.loads(line)


def lookup(store: Store, instance_id: str) -> dict[str, Any]:
    """The index entry of one task (reads one shard)."""
    for entry in iter_shard(store, shard_of(instance_id)):
        if entry["instance_id"] == instance_id:
            return entry
    raise UnknownTask(f"unknown task id {instance_id!r} in store {store.url}; list its tasks with "
                      f"`minisandbox tasks --store {store.url}`")


def iter_tasks(store: Store) -> Iterator[dict[str, Any]]:
    for i in range(SHARDS):
        yield from iter_shard(store, f"{i:02x}")
