"""The published index in a store: writing it (last step of the pipeline) and reading it
(one shard per lookup) on a node.

The format itself (sharding, catalog layout, `build_index`) is the contract
`minisandbox.index`; this module is the store side of it.

Freshness: the catalog carries a `sequence` (`index.next_sequence`) and the sha256 of every
shard. A node that verifies signatures (a store public key) reads the catalog before a shard,
refuses a catalog older than one it accepted (`minisandbox.node.freshness`) and a shard
whose bytes are not the ones the catalog names, so neither can be rolled back alone.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator

from minisandbox.index import (
    CATALOG,
    SHARDS,
    UnknownTask,
    next_sequence,
    parse_shard,
    shard_digest,
    shard_of,
    shard_path,
    validate_catalog,
    validate_catalog_head,
)
from minisandbox.manifest import StoreDataError, manifest_path, validate_manifest
from minisandbox.node.store import NotInStore, Store, StoreIndexMissing
from minisandbox.records import Selection

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a warm `run` does not)
if TYPE_CHECKING:
    from typing import Any, TypeVar

    from minisandbox.node.verified import Verified

    T = TypeVar("T")


def _previous_sequence(store: Store) -> int:
    """The sequence of the catalog the store holds now (0: none, unreadable, or older than
    sequences): the next publish must be above it."""
    try:
        if not store.exists(CATALOG):
            return 0
        data = json.loads(store.read_bytes(CATALOG))
    except (StoreDataError, NotInStore, ValueError):
        return 0
    seq = data.get("sequence") if isinstance(data, dict) else None
    return seq if isinstance(seq, int) and seq >= 0 else 0


def publish_index(store: Store, catalog: dict[str, Any], shards: dict[str, list[str]]) -> None:
    """Every shard (empty ones too, so stale tasks disappear), then the catalog, with the
    next `sequence` and every shard's sha256 (signed with it when publishing signs)."""
    digests: dict[str, str] = {}
    for i in range(SHARDS):
        shard = f"{i:02x}"
        data = "".join(line + "\n" for line in sorted(shards.get(shard, []))).encode("utf-8")
        store.put_bytes(shard_path(shard), data)
        digests[shard] = shard_digest(data)
    catalog = {**catalog, "sequence": next_sequence(_previous_sequence(store)), "shards_sha256": digests}
    store.put_text(CATALOG, json.dumps(catalog, indent=1, sort_keys=True) + "\n")


def read_catalog(store: Store) -> dict[str, Any]:
    """The validated catalog; with a store public key also verified and checked for
    freshness (an older sequence than this node accepted is a StaleStoreError)."""
    if not store.exists(CATALOG):
        raise StoreIndexMissing(
            f"no index at {store.url}/{CATALOG}: is this a published store? "
            "Build one with `snakemake --cores N` or pass --store URL"
        )
    where = f"store {store.url}: {CATALOG}"
    catalog = validate_catalog(_json(store.read_bytes(CATALOG), where), where=where)
    if store.verifier is not None:
        from minisandbox.node.freshness import check_sequence

        check_sequence(store.url, store.verifier.key_id, int(catalog.get("sequence") or 0), where=where)
    return catalog


def _shard_digests(store: Store) -> dict[str, str] | None:
    """The shard digests of the verified, fresh catalog when the store has a public key
    (None without one, or for a catalog published before digests). Reads only what
    freshness needs (`sequence`, `shards_sha256`): validating every manifest copy in a
    large catalog on each lookup would cost more than the lookup (bench/bench_freshness.py)."""
    if store.verifier is None:
        return None
    from minisandbox.node.freshness import check_sequence

    if not store.exists(CATALOG):
        raise StoreIndexMissing(
            f"no index at {store.url}/{CATALOG}: is this a published store? "
            "Build one with `snakemake --cores N` or pass --store URL"
        )
    where = f"store {store.url}: {CATALOG}"
    raw = store.read_bytes(CATALOG)  # the signature is verified here
    digest = shard_digest(raw)
    head = _HEADS.get(digest)
    if head is None:  # parsed once per catalog version and process
        head = validate_catalog_head(_json(raw, where), where=where)
        if len(_HEADS) >= 8:
            _HEADS.pop(next(iter(_HEADS)))
        _HEADS[digest] = head
    check_sequence(store.url, store.verifier.key_id, head.sequence or 0, where=where)
    return head.shards_sha256


#: sha256 of catalog bytes -> its validated head (a few recent versions)
_HEADS: dict[str, Any] = {}


def _json(data: bytes, where: str) -> Any:
    try:
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise StoreDataError(
            f"{where}: not JSON ({getattr(exc, 'msg', exc)}); re-publish it or fix the store"
        ) from None


def _checked(
    verified: Verified | None, what: str, data: bytes, validate: Callable[[bytes], T], parse: Callable[[bytes], T]
) -> T:
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


def iter_shard(
    store: Store, shard: str, verified: Verified | None = None, digests: dict[str, str] | None = None
) -> Iterator[dict[str, Any]]:
    """The validated task entries of one shard (a missing shard reads as empty; a damaged
    one is a StoreDataError naming it). `verified`: skip validating a shard this node
    validated before (the node cache's markers). `digests` (the catalog's
    `shards_sha256`): the shard's bytes must have the sha256 named there."""
    path = shard_path(shard)
    where = f"store {store.url}: index shard {path}"
    data = store.read_bytes(path) if store.exists(path) else b""
    if digests is not None and digests.get(shard) != shard_digest(data):
        raise StoreDataError(
            f"{where}: its sha256 is not the one {CATALOG} names for it (an older or altered "
            f"copy of the shard{', or it is missing' if not data else ''}); re-publish the "
            f"index or fix the store"
        )
    if data:
        yield from _checked(verified, f"shard {path}", data, lambda d: parse_shard(d, where=where), _shard_lines)


def read_manifest(store: Store, kind: str, key: str, verified: Verified | None = None) -> dict[str, Any]:
    """The validated manifest of artifact `kind`/`key` (kind and key must match its place).
    `verified`: as `iter_shard`."""
    rel = manifest_path(kind, key)
    try:
        data = store.read_bytes(rel)
    except NotInStore:
        raise NotInStore(
            f"{kind} manifest {store.url_of(rel)} is missing although the index lists it; "
            f"re-run the publish step for {key}"
        ) from None
    where = f"store {store.url}: {rel}"
    return _checked(
        verified,
        f"manifest {rel}",
        data,
        lambda d: validate_manifest(_json(d, where), where=where, kind=kind, key=key),
        json.loads,
    )


def lookup(store: Store, instance_id: str, verified: Verified | None = None) -> dict[str, Any]:
    """The index entry of one task (reads one shard; with a public key, the catalog first;
    `verified`: as `iter_shard`)."""
    for entry in iter_shard(store, shard_of(instance_id), verified, _shard_digests(store)):
        if entry["instance_id"] == instance_id:
            return entry
    raise UnknownTask(
        f"unknown task id {instance_id!r} in store {store.url}; list its tasks with "
        f"`minisandbox tasks --store {store.url}`"
    )


def iter_tasks(store: Store) -> Iterator[dict[str, Any]]:
    digests = _shard_digests(store)
    for i in range(SHARDS):
        yield from iter_shard(store, f"{i:02x}", digests=digests)


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
        digests = _shard_digests(store)
        entries: Iterator[dict[str, Any]] = (
            e
            for shard in sorted({shard_of(i) for i in selection.ids})
            for e in iter_shard(store, shard, digests=digests)
        )
    else:
        entries = iter_tasks(store)
    for entry in entries:
        repo = str((entry.get("record") or {}).get("repo", ""))
        found_ids.add(entry["instance_id"])
        found_repos.add(repo)
        if selection.matches(entry["instance_id"], repo):
            yield entry
    selection.check_found(found_ids, found_repos, f"store {store.url}")
