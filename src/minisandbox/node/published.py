"""The published index in a store: writing it (last step of the pipeline) and reading it
(one shard per lookup) on a node.

The format itself (sharding, catalog layout, `build_index`) is the contract
`minisandbox.index`; this module is the store side of it.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Callable, Iterator, TypeVar

from minisandbox.index import CATALOG, SHARDS, UnknownTask, parse_shard, shard_of, shard_path, validate_catalog
from minisandbox.manifest import StoreDataError, manifest_path, validate_manifest
from minisandbox.node.store import NotInStore, Store, StoreIndexMissing
from minisandbox.records import Selection

if TYPE_CHECKING:
    from minisandbox.node.verified import Verified

T = TypeVar("T")


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


def _checked(verified: Verified | None, what: str, data: bytes, validate: Callable[[bytes], T],
             parse: Callable[[bytes], T]) -> T:
    """`validate(data)`, or only `parse(data)` when this node validated these very bytes as
    `what` before (`minisandbox.node.verified`); `validate` returns what `parse` would."""
    if verified is not None and verified.known(what, data):
        return parse(data)
    out = validate(data)
    if verified is not None:
        verified.remember(what, data)
    return out


def _shard_lines(data: bytes) -> list[dict[str, Any]]:
    return [json.loads(line) for line in data.decode("utf-8").splitlines() if line.strip()]


def iter_shard(store: Store, shard: str, verified: Verified | None = None) -> Iterator[dict[str, Any]]:
    """The validated task entries of one shard (a missing shard reads as empty; a damaged
    one is a StoreDataError naming it). `verified`: skip validating a shard this node
    validated before (the node cache's markers)."""
    path = shard_path(shard)
    if not store.exists(path):
        return
    where = f"store {store.url}: index shard {path}"
    yield from _checked(verified, f"shard {path}", store.read_bytes(path),
                        lambda data: parse_shard(data, where=where), _shard_lines)


def read_manifest(store: Store, kind: str, key: str, verified: Verified | None = None) -> dict[str, Any]:
    """The validated manifest of artifact `kind`/`key` (kind and key must match its place).
    `verified`: as `iter_shard`."""
    rel = manifest_path(kind, key)
    try:
        data = store.read_bytes(rel)
    except NotInStore:
        raise NotInStore(f"{kind} manifest {store.url_of(rel)} is missing although the index lists it; "
                         f"re-run the publish step for {key}") from None
    where = f"store {store.url}: {rel}"
    return _checked(verified, f"manifest {rel}", data,
                    lambda d: validate_manifest(_json(d, where), where=where, kind=kind, key=key), json.loads)


def lookup(store: Store, instance_id: str, verified: Verified | None = None) -> dict[str, Any]:
    """The index entry of one task (reads one shard; `verified`: as `iter_shard`)."""
    for entry in iter_shard(store, shard_of(instance_id), verified):
        if entry["instance_id"] == instance_id:
            return entry
    raise UnknownTask(f"unknown task id {instance_id!r} in store {store.url}; list its tasks with "
                      f"`minisandbox tasks --store {store.url}`")


def iter_tasks(store: Store) -> Iterator[dict[str, Any]]:
    for i in range(SHARDS):
        yield from iter_shard(store, f"{i:02x}")


def iter_selected(store: Store, selection: Selection) -> Iterator[dict[str, Any]]:
    """The index entries `selection` picks (`--instance-ids`/`--repo`), in index order.
    Ids alone read only their shards; a repository filter reads them all. At the end,
    ids that are no task here and repositories with no task here raise SelectionError
    (`Selection.check_found`), so a typo is not mistaken for an empty result."""
    if not selection.active:
        yield from iter_tasks(store)
        return
    found_ids: set[str] = set()
    found_repos: set[str] = set()
    if selection.ids is not None and not selection.repos:
        entries: Iterator[dict[str, Any]] = (e for shard in sorted({shard_of(i) for i in selection.ids})
                                             for e in iter_shard(store, shard))
    else:
        entries = iter_tasks(store)
    for entry in entries:
        repo = str((entry.get("record") or {}).get("repo", ""))
        found_ids.add(entry["instance_id"])
        found_repos.add(repo)
        if selection.matches(entry["instance_id"], repo):
            yield entry
    selection.check_found(found_ids, found_repos, f"store {store.url}")
