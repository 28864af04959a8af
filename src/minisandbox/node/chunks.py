"""Chunked images: packs, chunk lists and chunk objects in a store, and reassembling an image.

A layer image is stored as content-defined chunks (cutting: `minisandbox.pipeline.chunking`)
and a chunk list `artifacts/<kind>/<key>.chunks.json` that the manifest names under
`image.chunks` (schema: `minisandbox.manifest.ChunkList`). Environments share most chunks,
so the store keeps each once (docs/pipeline.md, "Store size: cross-environment dedup").

Where the chunks live (docs/design.md, "Store layout"):
* schema 2, what publishing writes: inside packs `packs/<aa>/<sha256>` of ~16 MiB (the new
  chunks of one image, concatenated in image order) with an index `<pack>.idx` each. A node
  reads an image with ranged GETs, neighbouring chunks of a pack coalesced into one read of up
  to RANGE_BYTES, RANGE_WORKERS in flight: a 30 MB image is a handful of requests instead of
  ~470, which is what an object store's per-request latency (tens of ms) needs. A publisher
  finds the chunks the store holds from one listing of `packs/` and the indexes (each read
  once per process), so a new image uploads only its new chunks, in a few PUTs.
* schema 1, older stores: one object per chunk, `chunks/<aa>/<sha256>`, read WORKERS at a time.

Everything read from a store is checked before use: a chunk list against the digest and
size its manifest records, then against the schema (every pack offset inside its pack);
every chunk, wherever it came from, against its sha256 and length; a pack index against the
pack's listed size (and, when a mirror copies a pack, every chunk it names). The functions
here serve publishing, `push`/`pull` (copy what the destination lacks), `verify`, and the
node cache, which reassembles an image from chunks it already holds in other images and from
the store (`minisandbox.node.cache.Cache.image_layer`).
"""

from __future__ import annotations

import os
import threading
from collections import deque, namedtuple
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from minisandbox.fsutil import LazyPattern, atomic_write_bytes
from minisandbox.manifest import (
    CHUNK_LIST_SUFFIX,
    DIGEST,
    MAX_CHUNK_LIST_BYTES,
    MAX_CHUNKS,
    PACK_INDEX_SUFFIX,
    StoreDataError,
    chunk_list_document,
    chunk_path,
    pack_index_document,
    pack_index_path,
    pack_path,
    parse_chunk_list,
    parse_pack_index,
    plain_name,
)
from minisandbox.node.store import NotInStore, Store, StoreError
from minisandbox.paths import cache_dir

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a warm `run` does not)
if TYPE_CHECKING:
    from concurrent.futures import Future
    from typing import Any

    from minisandbox.manifest import ChunkList
    from minisandbox.progress import Progress

#: Requests in flight for one image stored as one object per chunk (schema 1), and for
#: existence checks: on object stores latency, not bandwidth, bounds one ~64 KiB request.
WORKERS = 32
#: Publishing: the new chunks of an image go into packs of about this size.
PACK_BYTES = 16 << 20
#: Reading: chunks of one pack closer than GAP_BYTES are read in one range (the gap is read
#: and dropped) of at most RANGE_BYTES; RANGE_WORKERS ranges in flight.
RANGE_BYTES = 4 << 20
GAP_BYTES = 256 << 10
RANGE_WORKERS = 12
#: Packs uploaded at once by one publisher (each held in memory while it is sent).
PACK_WORKERS = 4
_HEX = LazyPattern(DIGEST)


class ChunkError(StoreError):
    """A chunk or chunk list in a store is missing or does not match what names it; the
    message names the store object and the artifact."""

    def __init__(self, message: str, rel: str, *, missing: bool = False) -> None:
        super().__init__(message)
        self.rel = rel
        self.missing = missing


class ChunkedImage(
    namedtuple(
        "ChunkedImage",
        [
            "kind",
            "key",
            "list_rel",
            "list_sha256",
            "list_size",  # int
            "count",  # int
            "image_sha256",
            "image_size",  # int
        ],
    )
):
    """One manifest's chunked image: where its chunk list is and what it and the image must
    be (a named tuple, as the other records a warm `run` reads: docs/design.md, "Record types")."""

    __slots__ = ()

    @classmethod
    def from_manifest(cls, manifest: dict[str, Any], *, where: str = "manifest") -> ChunkedImage | None:
        """The manifest's `image.chunks`, or None. The manifest passed `validate_manifest`
        already when it came from a store (the `ChunksInfo` schema); the fields that name a
        store object or bound an allocation are checked here again, in plain Python (a
        `minisandbox run` on a warm node builds no schema models)."""
        img = manifest.get("image") or {}
        if not isinstance(img, dict) or not img.get("chunks"):
            return None
        info = img["chunks"]
        where = f"{where}: image.chunks"
        try:
            artifact = plain_name(info.get("artifact") if isinstance(info, dict) else None, "chunk list artifact")
        except ValueError as exc:
            raise StoreDataError(f"{where}: {exc}; re-publish the artifact") from None
        if not artifact.endswith(CHUNK_LIST_SUFFIX):
            raise StoreDataError(f"{where}: artifact must end with {CHUNK_LIST_SUFFIX}; re-publish the artifact")
        size, count = info.get("size"), info.get("count")
        if not (
            type(size) is int and 1 <= size <= MAX_CHUNK_LIST_BYTES and type(count) is int and 0 <= count <= MAX_CHUNKS
        ):
            raise StoreDataError(f"{where}: size or count out of range ({size!r}, {count!r}); re-publish the artifact")
        chunk_path(info.get("sha256"))  # 64 lowercase hex, or StoreDataError
        image_sha = img.get("sha256")
        chunk_path(image_sha)
        return cls(
            kind=manifest["kind"],
            key=manifest["key"],
            list_rel=f"artifacts/{manifest['kind']}/{artifact}",
            list_sha256=info["sha256"],
            list_size=size,
            count=count,
            image_sha256=image_sha,
            image_size=int(img["size"]),
        )

    @property
    def what(self) -> str:
        return f"the image of {self.kind} {self.key}"


def read_chunk_list(store: Store, ref: ChunkedImage) -> ChunkList:
    """The validated chunk list of `ref`: its bytes must have the digest and size the manifest
    records (else ChunkError: changed or damaged), then match the schema and the manifest's
    image (else StoreDataError naming the field)."""
    import hashlib

    try:
        data = store.read_bytes(ref.list_rel)
    except NotInStore as exc:
        raise ChunkError(
            f"chunk list {store.url_of(ref.list_rel)} of {ref.what} is missing from the store; "
            f"re-publish {ref.key} (or push/pull it again)",
            ref.list_rel,
            missing=True,
        ) from exc
    sha = hashlib.sha256(data).hexdigest()
    if len(data) != ref.list_size or sha != ref.list_sha256:
        raise ChunkError(
            f"chunk list {store.url_of(ref.list_rel)} of {ref.what} does not match its manifest "
            f"(size {len(data)} sha256 {sha[:12]}.., manifest image.chunks says size {ref.list_size} "
            f"sha256 {ref.list_sha256[:12]}..); re-publish {ref.key}",
            ref.list_rel,
        )
    return parse_chunk_list(
        data,
        where=f"store {store.url}: {ref.list_rel}",
        image_sha256=ref.image_sha256,
        image_size=ref.image_size,
        count=ref.count,
    )


def fetch_chunk(store: Store, digest: str, length: int, what: str) -> bytes:
    """One chunk object's bytes from the store (schema 1), checked (sha256 and length); a
    damaged copy is read once more, then ChunkError names the chunk and `what` it belongs to."""
    import hashlib

    rel = chunk_path(digest)
    got = ""
    for _ in (1, 2):
        try:
            data = store.read_bytes(rel)
        except NotInStore as exc:
            raise ChunkError(
                f"chunk {store.url_of(rel)} of {what} is missing from the store; re-publish it (or push/pull it again)",
                rel,
                missing=True,
            ) from exc
        sha = hashlib.sha256(data).hexdigest()
        if len(data) == length and sha == digest:
            return data
        got = f"size {len(data)} sha256 {sha[:12]}.."
    raise ChunkError(
        f"chunk {store.url_of(rel)} of {what} is corrupt: {got} on 2 reads, its name says "
        f"sha256 {digest[:12]}.. and the list length {length}; re-publish it (or copy it again "
        f"from a good store)",
        rel,
    )


# ------------------------------------------------------------------ packs: ranged reads
class Segment:
    """One ranged read of a pack: bytes [start, end) holding chunks `items` as (list index,
    offset in the pack, length, sha256), in list order."""

    def __init__(self, pack: str, start: int, end: int, items: list[tuple[int, int, int, str]] | None = None) -> None:
        self.pack = pack
        self.start = start
        self.end = end
        self.items = items if items is not None else []


def plan_segments(
    located: list[tuple[str, int, str, int]], wanted: Iterable[int], *, gap: int = GAP_BYTES, limit: int = RANGE_BYTES
) -> list[Segment]:
    """The ranged reads that fetch chunks `wanted` (list indexes, ascending) of a packed list:
    a chunk joins the previous read when it is in the same pack, at most `gap` bytes after
    it, and the read stays within `limit` bytes (a chunk longer than `limit` is read alone)."""
    out: list[Segment] = []
    for i in wanted:
        digest, length, pack, offset = located[i]
        cur = out[-1] if out else None
        if (
            cur is not None
            and cur.pack == pack
            and cur.end <= offset <= cur.end + gap
            and offset + length - cur.start <= limit
        ):
            cur.end = offset + length
        else:
            cur = Segment(pack, offset, offset + length)
            out.append(cur)
        cur.items.append((i, offset, length, digest))
    return out


def fetch_segment(store: Store, seg: Segment, what: str) -> list[bytes]:
    """The chunks of `seg`, each checked (sha256 and length); a short or damaged read is
    read once more, then ChunkError names the pack, the range and what was wrong."""
    import hashlib

    rel = pack_path(seg.pack)
    problem = ""
    for _ in (1, 2):
        try:
            data = store.read_range(rel, seg.start, seg.end)
        except NotInStore as exc:
            raise ChunkError(
                f"pack {store.url_of(rel)} of {what} is missing from the store; re-publish it (or push/pull it again)",
                rel,
                missing=True,
            ) from exc
        if len(data) != seg.end - seg.start:
            problem = (
                f"bytes {seg.start}-{seg.end} came back as {len(data)} bytes (truncated pack or offsets past its end)"
            )
            continue
        view = memoryview(data)
        out = []
        for _, offset, length, digest in seg.items:
            part = view[offset - seg.start : offset - seg.start + length]
            if hashlib.sha256(part).hexdigest() != digest:
                problem = f"the chunk at offset {offset} (length {length}) does not have sha256 {digest[:12]}.."
                break
            out.append(bytes(part))
        else:
            return out
    raise ChunkError(
        f"pack {store.url_of(rel)} of {what} is corrupt: {problem} on 2 reads; re-publish it (or "
        f"copy it again from a good store)",
        rel,
    )


def fetch_listed(store: Store, cl: ChunkList, i: int, what: str) -> bytes:
    """Chunk `i` of list `cl`, from its pack (schema 2) or its own object (schema 1), checked."""
    digest, length = cl.chunks[i]
    if cl.schema_version == 1:
        return fetch_chunk(store, digest, length, what)
    assert cl.packs is not None and cl.at is not None
    pack, offset = cl.at[i]
    return fetch_segment(
        store, Segment(cl.packs[pack][0], offset, offset + length, [(i, offset, length, digest)]), what
    )[0]


def needed_objects(cl: ChunkList) -> dict[str, int]:
    """Store-relative path -> size of every object the chunks of `cl` are read from."""
    if cl.schema_version == 1:
        return {chunk_path(d): n for d, n in cl.chunks}
    assert cl.packs is not None
    return {pack_path(p): n for p, n in cl.packs}


# ------------------------------------------------------------------ publishing
def _pool_map(fn: Callable[[Any], Any], items: Iterable[Any], workers: int) -> list[Any]:
    items = list(items)
    if workers <= 1 or len(items) <= 1:
        return [fn(it) for it in items]
    from concurrent.futures import ThreadPoolExecutor  # here: it imports logging, which a warm `run` never needs

    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(fn, items))


def missing_chunks(store: Store, digests: Iterable[str], workers: int = WORKERS) -> list[str]:
    """The digests (distinct, in first-seen order) whose chunk object `store` lacks."""
    unique = list(dict.fromkeys(digests))
    present = _pool_map(lambda d: store.exists(chunk_path(d)), unique, workers)
    return [d for d, ok in zip(unique, present) if not ok]


def _listing(store: Store, top: str) -> dict[str, int]:
    """Store-relative path -> size of every object under `top` (one LIST per 1,000 objects)."""
    try:
        found = store.fs.find(store.path(top), detail=True)
    except FileNotFoundError:
        return {}
    prefix = store.root.rstrip("/") + "/"
    out: dict[str, int] = {}
    for path, info in found.items():
        path = path.rstrip("/")
        rel = path[len(prefix) :] if path.startswith(prefix) else path
        out[rel] = int(info.get("size") or 0)
    return out


_INDEXES: dict[tuple[str, str, int], list[tuple[str, int]]] = {}
_INDEXES_LOCK = threading.Lock()


def pack_locations(store: Store, *, workers: int = WORKERS) -> tuple[dict[str, tuple[str, int]], dict[str, int]]:
    """Where `store` holds chunks: (chunk sha256 -> (pack, offset), pack -> size), from one
    listing of `packs/` and the index of each pack (read once per process, and kept on disk
    for remote stores: packs are named by their content). A pack without its index (an upload in progress) or whose index does
    not parse or fill it is left out: its chunks are packed again, never referenced."""
    listed = _listing(store, "packs")
    packs: dict[str, int] = {}
    for rel, size in listed.items():
        name = rel.rsplit("/", 1)[-1]
        if _HEX.fullmatch(name) and rel == pack_path(name) and listed.get(rel + PACK_INDEX_SUFFIX):
            packs[name] = size
    todo = [p for p in packs if (store.url, p, packs[p]) not in _INDEXES]

    kept = _kept_indexes(store)

    def load(pack: str) -> None:
        where = store.url_of(pack_index_path(pack))
        local = kept / f"{pack}-{packs[pack]}.idx" if kept is not None else None
        chunks = None
        if local is not None and local.is_file():
            try:
                chunks = parse_pack_index(local.read_bytes(), where=str(local), pack_size=packs[pack])
            except (OSError, StoreDataError):
                chunks = None
        if chunks is None:
            try:
                data = store.read_bytes(pack_index_path(pack))
                chunks = parse_pack_index(data, where=where, pack_size=packs[pack])
            except (NotInStore, StoreDataError):
                return
            if local is not None:
                _keep(local, data)
        with _INDEXES_LOCK:
            _INDEXES[(store.url, pack, packs[pack])] = chunks

    _pool_map(load, todo, workers)
    where: dict[str, tuple[str, int]] = {}
    sizes: dict[str, int] = {}
    for pack, size in sorted(packs.items()):
        chunks = _INDEXES.get((store.url, pack, size))
        if chunks is None:
            continue
        sizes[pack] = size
        at = 0
        for digest, length in chunks:
            where.setdefault(digest, (pack, at))
            at += length
    return where, sizes


def _kept_indexes(store: Store) -> Path | None:
    """Where this user keeps the pack indexes read from a remote `store` (they never change:
    a pack is named by its content), so each is read once per host rather than once per
    publishing process: <cache dir>/pack-indexes/<sha256 of the store URL>/. Kept per store,
    so one store's indexes never stand in for another's. None for local stores."""
    import hashlib

    if store.local:
        return None
    return cache_dir() / "pack-indexes" / hashlib.sha256(store.url.encode()).hexdigest()[:32]


def _keep(path: Path, data: bytes) -> None:
    """Best effort (a read-only cache directory only costs the read next time)."""
    try:
        atomic_write_bytes(path, data)
    except OSError:
        pass


class Published(
    namedtuple("Published", ["document", "packs_written", "bytes_written", "chunks_new"], defaults=[0] * 3)
):
    """What publishing an image as packs did: the chunk list's bytes, and what was sent (counts)."""

    __slots__ = ()


def upload_image_packs(
    store: Store,
    image: Path,
    image_sha256: str,
    chunks: list[tuple[str, int]],
    *,
    pack_bytes: int = PACK_BYTES,
    workers: int = PACK_WORKERS,
) -> Published:
    """Publish the chunks of `image` (cut as `chunks`, in order) that `store` lacks, as packs
    of about `pack_bytes` (each chunk read from the image at its offset and checked first;
    each pack written, then its index: an index is never visible before its pack), and return
    the image's schema 2 chunk list (not written: the caller writes it, then the manifest).
    Chunks the store holds already (in packs whose index says so) are referenced, not sent:
    dedup across images as with one object per chunk."""
    where, sizes = pack_locations(store)
    first: dict[str, int] = {}
    at = 0
    for digest, length in chunks:
        first.setdefault(digest, at)
        at += length
    new = [(d, n) for d, n in dict(chunks).items() if d not in where]
    groups: list[list[tuple[str, int]]] = []
    size = 0
    for digest, length in new:
        if not groups or size + length > pack_bytes:
            groups.append([])
            size = 0
        groups[-1].append((digest, length))
        size += length
    kept = _kept_indexes(store)
    fd = os.open(image, os.O_RDONLY)
    try:

        def put(group: list[tuple[str, int]]) -> tuple[str, int, list[tuple[str, int]]]:
            import hashlib

            parts = []
            for digest, length in group:
                data = os.pread(fd, length, first[digest])
                if len(data) != length or hashlib.sha256(data).hexdigest() != digest:
                    raise ChunkError(
                        f"{image} changed since it was cut (chunk at {first[digest]} no longer has "
                        f"sha256 {digest[:12]}..); pack it again",
                        str(image),
                    )
                parts.append(data)
            blob = b"".join(parts)
            pack = hashlib.sha256(blob).hexdigest()
            index = pack_index_document(group)
            store.put_object(pack_path(pack), blob)
            store.put_object(pack_index_path(pack), index)
            if kept is not None:  # the next publisher on this host need not read it back
                _keep(kept / f"{pack}-{len(blob)}.idx", index)
            return pack, len(blob), group

        written = _pool_map(put, groups, workers)
    finally:
        os.close(fd)
    for pack, blob_size, group in written:
        sizes[pack] = blob_size
        off = 0
        for digest, length in group:
            where[digest] = (pack, off)
            off += length
    order: dict[str, int] = {}
    at_list: list[tuple[int, int]] = []
    for digest, _ in chunks:
        pack, offset = where[digest]
        at_list.append((order.setdefault(pack, len(order)), offset))
    doc = chunk_list_document(image_sha256, at, list(chunks), packs=[(p, sizes[p]) for p in order], at=at_list)
    return Published(doc, len(written), sum(n for _, n, _ in written), len(new))


def chunk_sizes(store: Store) -> dict[str, int]:
    """Store-relative path -> size of every chunk object and pack in `store`, from one
    listing of `chunks/` and `packs/` (on S3 one request per 1,000 objects, instead of one
    per chunk and image)."""
    out = {rel: n for rel, n in _listing(store, "chunks").items() if _HEX.fullmatch(rel.rsplit("/", 1)[-1])}
    out.update((rel, n) for rel, n in _listing(store, "packs").items() if _HEX.fullmatch(rel.rsplit("/", 1)[-1]))
    return out


class DestinationChunks:
    """The chunk objects and packs a destination store holds (store-relative path -> size),
    shared by the copies of several images that run at once: each object is copied by one of
    them, and every copy returns only when all the objects its image needs are in place (so
    its chunk list and manifest may follow)."""

    def __init__(self, sizes: dict[str, int]) -> None:
        self.sizes = sizes
        self._lock = threading.Lock()
        self._inflight: dict[str, threading.Event] = {}

    def claim(self, lengths: dict[str, int]) -> tuple[list[str], list[tuple[str, threading.Event]]]:
        """(objects this caller copies, objects another caller is copying right now)."""
        mine, wait = [], []
        with self._lock:
            for rel, length in lengths.items():
                if self.sizes.get(rel) == length:
                    continue
                if rel in self._inflight:
                    wait.append((rel, self._inflight[rel]))
                else:
                    self._inflight[rel] = threading.Event()
                    mine.append(rel)
        return mine, wait

    def settle(self, rel: str, size: int | None) -> None:
        """A claimed object is in place (`size`) or its copy failed (None)."""
        with self._lock:
            if size is not None:
                self.sizes[rel] = size
            self._inflight.pop(rel).set()


def _copy_pack(src: Store, dst: Store, rel: str, size: int, what: str) -> int:
    """Copy one pack and its index: the pack must hash to its name and have `size` bytes,
    and its index must fill it with chunks that each hash to what the index says (so a
    damaged or forged pack or index is never propagated). Returns the pack's size."""
    import hashlib

    digest = rel.rsplit("/", 1)[-1]
    try:
        data = src.read_bytes(rel)
        index = src.read_bytes(rel + PACK_INDEX_SUFFIX)
    except NotInStore as exc:
        raise ChunkError(
            f"{exc} (a pack of {what}, or its index); re-publish it (or push/pull it again)", rel, missing=True
        ) from exc
    sha = hashlib.sha256(data).hexdigest()
    if sha != digest or len(data) != size:
        raise ChunkError(
            f"pack {src.url_of(rel)} of {what} is corrupt: size {len(data)} sha256 {sha[:12]}.., its "
            f"name says sha256 {digest[:12]}.. and the list size {size}; re-publish it",
            rel,
        )
    try:
        chunks = parse_pack_index(index, where=src.url_of(rel + PACK_INDEX_SUFFIX), pack_size=size)
    except StoreDataError as exc:
        raise ChunkError(str(exc), rel + PACK_INDEX_SUFFIX) from None
    view, at = memoryview(data), 0
    for d, n in chunks:
        if hashlib.sha256(view[at : at + n]).hexdigest() != d:
            raise ChunkError(
                f"pack index {src.url_of(rel + PACK_INDEX_SUFFIX)} of {what} is corrupt: the chunk at "
                f"offset {at} does not have sha256 {d[:12]}..; re-publish it",
                rel + PACK_INDEX_SUFFIX,
            )
        at += n
    dst.put_object(rel, data)
    dst.put_object(rel + PACK_INDEX_SUFFIX, index)
    return size


def copy_chunks(
    src: Store,
    dst: Store,
    cl: ChunkList,
    what: str,
    *,
    workers: int = WORKERS,
    meter: Progress | None = None,
    have: DestinationChunks | None = None,
) -> tuple[int, int]:
    """Copy the chunk objects or packs (with their indexes) of `cl` that `dst` lacks from
    `src`, each checked on the way (a damaged source is never propagated). `have`: what
    `dst` holds (`chunk_sizes(dst)`), shared by concurrent copies; without it, one existence
    request per object. Returns (objects copied by this call, bytes)."""
    lengths = needed_objects(cl)
    if have is None:
        present = _pool_map(lambda rel: dst.exists(rel), list(lengths), workers)
        todo, wait = [rel for rel, ok in zip(lengths, present) if not ok], []
    else:
        todo, wait = have.claim(lengths)
    if meter is not None:
        meter.add_total(sum(lengths[r] for r in todo))

    def one(rel: str) -> int:
        size = None
        try:
            if cl.schema_version == 1:
                data = fetch_chunk(src, rel.rsplit("/", 1)[-1], lengths[rel], what)
                dst.put_object(rel, data)
                size = len(data)
            else:
                size = _copy_pack(src, dst, rel, lengths[rel], what)
        finally:
            if have is not None:
                have.settle(rel, size)
        if meter is not None:
            meter.update(size)
        return size

    sent = sum(_pool_map(one, todo, workers if cl.schema_version == 1 else PACK_WORKERS))
    for rel, event in wait:
        event.wait()
        if have is not None and have.sizes.get(rel) != lengths[rel]:
            raise ChunkError(
                f"{dst.url_of(rel)} of {what} could not be copied (the copy for another image failed); rerun", rel
            )
    return len(todo), sent


class ChunkProblem(namedtuple("ChunkProblem", ["what", "rel", "detail"])):
    """A chunk or pack a check found `what` ("missing" | "corrupt") at `rel`."""

    __slots__ = ()


def check_chunks(
    store: Store,
    cl: ChunkList,
    what: str,
    *,
    quick: bool,
    workers: int = WORKERS,
    meter: Progress | None = None,
    memo: dict[str, int | None] | None = None,
) -> list[ChunkProblem]:
    """`quick`: every chunk object or pack present with its size (one size request per
    distinct object; `memo`, store-relative path -> size or None when missing, shares the
    answers between images, as chunks are shared). Otherwise every chunk is read and
    hashed and the chunks, in order, must hash to the list's image_sha256."""
    import hashlib

    problems: list[ChunkProblem] = []
    if quick:
        lengths = needed_objects(cl)
        noun = "chunk" if cl.schema_version == 1 else "pack"
        memo = {} if memo is None else memo
        todo = [rel for rel in lengths if rel not in memo]

        def size_of(rel: str) -> int | None:
            try:
                return store.size(rel)
            except NotInStore:
                return None

        memo.update(zip(todo, _pool_map(size_of, todo, workers)))
        for rel, length in lengths.items():
            size = memo[rel]
            if size is None:
                problems.append(
                    ChunkProblem("missing", rel, f"{noun} of {what}; re-publish it (or push/pull it again)")
                )
            elif size != length:
                problems.append(
                    ChunkProblem(
                        "corrupt",
                        rel,
                        f"{noun} of {what}: size {size} != {length} in its list; re-publish it or copy it again",
                    )
                )
        if meter is not None:
            meter.update(len(cl.chunks))
        return problems
    whole = hashlib.sha256()
    complete = True
    seen: set[tuple[str, str]] = set()
    for _digest, length, data in _ordered(store, cl, what, workers):
        if isinstance(data, ChunkError):
            problem = ChunkProblem("missing" if data.missing else "corrupt", data.rel, str(data))
            if (problem.what, problem.rel) not in seen:  # one per object, not per chunk in it
                seen.add((problem.what, problem.rel))
                problems.append(problem)
            complete = False
            continue
        whole.update(data)
        if meter is not None:
            meter.update(length)
    if complete and whole.hexdigest() != cl.image_sha256:
        problems.append(
            ChunkProblem(
                "corrupt",
                "",
                f"the chunks of {what} reassemble to sha256 "
                f"{whole.hexdigest()[:16]}.., the list says "
                f"{cl.image_sha256[:16]}..; re-publish it",
            )
        )
    return problems


def _ordered(
    store: Store, cl: ChunkList, what: str, workers: int, skip: Callable[[int], bool] = lambda i: False
) -> Iterator[tuple[str, int, bytes | ChunkError | None]]:
    """(digest, length, bytes | ChunkError) for each chunk in list order, fetched ahead of
    the consumer: chunk objects `workers` at a time (bounded memory: 2 x workers chunks),
    packed chunks as coalesced ranges, RANGE_WORKERS at a time (at most 2 x RANGE_WORKERS
    ranges of <= RANGE_BYTES held). Chunks where `skip(i)` is true yield None and are not
    fetched."""
    if cl.schema_version == 2:
        yield from _ordered_packed(store, cl, what, skip)
        return
    window = max(1, 2 * workers)
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        pending: deque[tuple[int, Future | None]] = deque()
        nxt = 0

        def get(digest: str, length: int) -> bytes | ChunkError:
            try:
                return fetch_chunk(store, digest, length, what)
            except ChunkError as exc:
                return exc

        for i, (digest, length) in enumerate(cl.chunks):
            while nxt < len(cl.chunks) and len(pending) < window:
                d, n = cl.chunks[nxt]
                pending.append((nxt, None if skip(nxt) else pool.submit(get, d, n)))
                nxt += 1
            j, fut = pending.popleft()
            assert j == i
            yield digest, length, (fut.result() if fut is not None else None)


def _ordered_packed(
    store: Store, cl: ChunkList, what: str, skip: Callable[[int], bool]
) -> Iterator[tuple[str, int, bytes | ChunkError | None]]:
    segments = plan_segments(cl.located(), [i for i in range(len(cl.chunks)) if not skip(i)])

    def get(seg: Segment) -> list[bytes] | ChunkError:
        try:
            return fetch_segment(store, seg, what)
        except ChunkError as exc:
            return exc

    window = 2 * RANGE_WORKERS
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=RANGE_WORKERS) as pool:
        pending: deque[tuple[Segment, Future]] = deque()
        nxt = 0
        current: deque[tuple[int, bytes | ChunkError]] = deque()
        for i, (digest, length) in enumerate(cl.chunks):
            if skip(i):
                yield digest, length, None
                continue
            if not current:
                while nxt < len(segments) and len(pending) < window:
                    pending.append((segments[nxt], pool.submit(get, segments[nxt])))
                    nxt += 1
                seg, fut = pending.popleft()
                got = fut.result()
                current.extend(
                    (j, got if isinstance(got, ChunkError) else got[k]) for k, (j, _, _, _) in enumerate(seg.items)
                )
            j, data = current.popleft()
            assert j == i
            yield digest, length, data


# ------------------------------------------------------------------ node: reassembly
class Assembled:
    """What assembling one image did: its digest and size, and where its chunks came from."""

    def __init__(self, sha256: str, size: int) -> None:
        self.sha256 = sha256
        self.size = size
        self.fetched = 0  # chunks read from the store
        self.fetched_bytes = 0
        self.reused = 0  # chunks copied from images this node holds (or earlier in this image)
        self.reused_bytes = 0


class LocalChunks:
    """Chunks this node holds inside images it already has: digest -> (image file, offset,
    length). Each reused chunk is hashed again before it is written (the cache directory is
    writable by its user); one that does not match is fetched from the store instead."""

    def __init__(self, index: dict[str, tuple[Path, int, int]] | None = None) -> None:
        self.index = index or {}
        self._fds: dict[Path, int] = {}
        self._lock = threading.Lock()

    def add(self, image: Path, chunks: Iterable[tuple[str, int]]) -> None:
        at = 0
        for digest, length in chunks:
            self.index.setdefault(digest, (image, at, length))
            at += length

    def read(self, digest: str, length: int) -> bytes | None:
        import hashlib

        hit = self.index.get(digest)
        if hit is None or hit[2] != length:
            return None
        path, offset, _ = hit
        try:
            with self._lock:
                fd = self._fds.get(path)
                if fd is None:
                    fd = self._fds[path] = os.open(path, os.O_RDONLY)
            data = os.pread(fd, length, offset)
        except OSError:
            return None  # evicted meanwhile: fetch from the store
        if len(data) != length or hashlib.sha256(data).hexdigest() != digest:
            return None
        return data

    def close(self) -> None:
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()


def assemble(
    store: Store,
    ref: ChunkedImage,
    cl: ChunkList,
    out: Path,
    local: LocalChunks,
    *,
    workers: int = WORKERS,
    progress: Progress | None = None,
) -> Assembled:
    """Write the image `cl` describes to `out` (a new file) in one sequential pass: each chunk
    from earlier in this image, from `local`, or from the store (prefetched `workers` at a
    time, each checked), hashing every byte written. The caller compares the returned
    sha256 and size with the manifest's image before using `out`."""
    import hashlib

    offsets: dict[str, int] = {}
    at = 0
    earlier: list[int | None] = []
    local_hit: list[bool] = []
    for digest, length in cl.chunks:
        if digest in offsets:
            earlier.append(offsets[digest])
            local_hit.append(False)
        else:
            offsets[digest] = at
            earlier.append(None)
            local_hit.append(digest in local.index and local.index[digest][2] == length)
        at += length
    if progress is not None:
        progress.add_total(sum(n for (_, n), e, h in zip(cl.chunks, earlier, local_hit) if e is None and not h))
    result = Assembled("", 0)
    whole = hashlib.sha256()
    fd = os.open(out, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
    chunks = _ordered(store, cl, ref.what, workers, skip=lambda i: earlier[i] is not None or local_hit[i])
    try:
        for i, (digest, length, fetched) in enumerate(chunks):
            data: bytes | None = None
            if earlier[i] is not None:
                data = os.pread(fd, length, earlier[i])
                result.reused += 1
                result.reused_bytes += length
            elif local_hit[i]:
                data = local.read(digest, length)
                if data is not None:
                    result.reused += 1
                    result.reused_bytes += length
                else:
                    fetched = fetch_listed(store, cl, i, ref.what)  # local copy changed
            if data is None:
                if isinstance(fetched, ChunkError):
                    raise fetched
                assert fetched is not None
                data = fetched
                result.fetched += 1
                result.fetched_bytes += length
                if progress is not None:
                    progress.update(length)
            whole.update(data)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
    finally:
        chunks.close()  # stops the prefetch (waits for the few requests in flight)
        os.close(fd)
    result.sha256, result.size = whole.hexdigest(), at
    return result


__all__ = [
    "Assembled",
    "ChunkError",
    "ChunkProblem",
    "ChunkedImage",
    "LocalChunks",
    "Published",
    "Segment",
    "assemble",
    "check_chunks",
    "chunk_sizes",
    "copy_chunks",
    "DestinationChunks",
    "fetch_chunk",
    "fetch_listed",
    "fetch_segment",
    "missing_chunks",
    "needed_objects",
    "pack_locations",
    "plan_segments",
    "read_chunk_list",
    "upload_image_packs",
]
