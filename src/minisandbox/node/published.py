"""The published index in a store: writing it (last step of the pipeline) and reading it
(one shard per lookup) on a node.

The format itself (sharding, catalog layout, `build_index`) is the contract
`minisandbox.index`; this module is the store side of it.
"""

from __future__ import annotations

import json
from typing import Any, Iterator

from minisandbox.index import CATALOG, SHARDS, UnknownTask, parse_shard, shard_of, shard_path, validate_catalog
from minisandbox.manifest import StoreDataError, manifest_path, validate_manifest
from minisandbox.node.store import NotInStore, Store, StoreIndexMissing


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
    where = f"store {store.url}: {CATALOG}"
    return validate_catalog(_json(store.read_bytes(CATALOG), where), where=where)


def _json(data: bytes, where: str) -> Any:
    try:
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise StoreDataError(f"{where}: not JSON ({getattr(exc, 'msg', exc)}); re-publish it or fix the store") \
            from None


def iter_shard(store: Store, shard: str) -> Iterator[dict[str, Any]]:
    """The validated task entries of one shard (a missing shard reads as empty; a damaged
    one is a StoreDataError naming it)."""
    path = shard_path(shard)
    if not store.exists(path):
        return
    yield from parse_shard(store.read_bytes(path), where=f"store {store.url}: index shard {path}")


def read_manifest(store: Store, kind: str, key: str) -> dict[str, Any]:
    """The validated manifest of artifact `kind`/`key` (kind and key must match its place)."""
    rel = manifest_path(kind, key)
    try:
        data = store.read_bytes(rel)
    except NotInStore:
        raise NotInStore(f"{kind} manifest {store.url_of(rel)} is missing although the index lists it; "
                         f"re-run the publish step for {key}") from None
    where = f"store {store.url}: {rel}"
    return validate_manifest(_json(data, where), where=where, kind=kind, key=key)


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
