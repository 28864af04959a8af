"""Chunked images: chunk objects and chunk lists in a store, and reassembling an image.

A layer image is stored as content-defined chunks, `chunks/<aa>/<sha256>` (raw bytes; the
squashfs data is compressed already), and a chunk list `artifacts/<kind>/<key>.chunks.json`
that the manifest names under `image.chunks` (schema: `minisandbox.manifest.ChunkList`;
cutting: `minisandbox.pipeline.chunks`). Environments share most chunks, so the store keeps
each once (docs/pipeline.md, "Store size: cross-environment dedup").

Everything read from a store is checked before use: a chunk list against the digest and
size its manifest records, then against the schema; every chunk against its sha256 and
length. The functions here serve publishing (upload what the store lacks), `push`/`pull`
(copy what the destination lacks), `verify`, and the node cache, which reassembles an
image from chunks it already holds in other images and from the store
(`minisandbox.node.cache.Cache.image_layer`).
"""

from __future__ import annotations

import hashlib
import os
import re
import threading
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

from minisandbox.manifest import DIGEST, ChunkList, ChunksInfo, chunk_path, parse_chunk_list, parse_store_model
from minisandbox.node.store import NotInStore, Store, StoreError
from minisandbox.progress import Progress

#: Store requests in flight for one image (chunks are ~64 KiB: on object stores latency,
#: not bandwidth, bounds a single stream).
WORKERS = 8
_HEX = re.compile(DIGEST)


class ChunkError(StoreError):
    """A chunk or chunk list in a store is missing or does not match what names it; the
    message names the store object and the artifact."""

    def __init__(self, message: str, rel: str, *, missing: bool = False) -> None:
        super().__init__(message)
        self.rel = rel
        self.missing = missing


@dataclass(frozen=True)
class ChunkedImage:
    """One manifest's chunked image: where its chunk list is and what it and the image must be."""

    kind: str
    key: str
    list_rel: str
    list_sha256: str
    list_size: int
    count: int
    image_sha256: str
    image_size: int

    @classmethod
    def from_manifest(cls, manifest: dict[str, Any], *, where: str = "manifest") -> "ChunkedImage | None":
        """The manifest's `image.chunks`, or None. The manifest passed `validate_manifest`
        already when it came from a store; the chunk part is checked here again because it
        names a store object."""
        img = manifest.get("image") or {}
        if not isinstance(img, dict) or not img.get("chunks"):
            return None
        info = parse_store_model(ChunksInfo, img["chunks"], where=f"{where}: image.chunks",
                                 hint="re-publish the artifact")
        image_sha = img.get("sha256")
        chunk_path(image_sha)  # 64 lowercase hex, or StoreDataError
        return cls(kind=manifest["kind"], key=manifest["key"], list_rel=f"artifacts/{manifest['kind']}/{info.artifact}",
                   list_sha256=info.sha256, list_size=info.size, count=info.count,
                   image_sha256=image_sha, image_size=int(img["size"]))

    @property
    def what(self) -> str:
        return f"the image of {self.kind} {self.key}"


def read_chunk_list(store: Store, ref: ChunkedImage) -> ChunkList:
    """The validated chunk list of `ref`: its bytes must have the digest and size the manifest
    records (else ChunkError: changed or damaged), then match the schema and the manifest's
    image (else StoreDataError naming the field)."""
    try:
        data = store.read_bytes(ref.list_rel)
    except NotInStore as exc:
        raise ChunkError(f"chunk list {store.url_of(ref.list_rel)} of {ref.what} is missing from the store; "
                         f"re-publish {ref.key} (or push/pull it again)", ref.list_rel, missing=True) from exc
    sha = hashlib.sha256(data).hexdigest()
    if len(data) != ref.list_size or sha != ref.list_sha256:
        raise ChunkError(f"chunk list {store.url_of(ref.list_rel)} of {ref.what} does not match its manifest "
                         f"(size {len(data)} sha256 {sha[:12]}.., manifest image.chunks says size {ref.list_size} "
                         f"sha256 {ref.list_sha256[:12]}..); re-publish {ref.key}", ref.list_rel)
    return parse_chunk_list(data, where=f"store {store.url}: {ref.list_rel}", image_sha256=ref.image_sha256,
                            image_size=ref.image_size, count=ref.count)


def fetch_chunk(store: Store, digest: str, length: int, what: str) -> bytes:
    """One chunk's bytes from the store, checked (sha256 and length); a damaged copy is read
    once more, then ChunkError names the chunk and `what` it belongs to."""
    rel = chunk_path(digest)
    got = ""
    for _ in (1, 2):
        try:
            data = store.read_bytes(rel)
        except NotInStore as exc:
            raise ChunkError(f"chunk {store.url_of(rel)} of {what} is missing from the store; re-publish it "
                             f"(or push/pull it again)", rel, missing=True) from exc
        sha = hashlib.sha256(data).hexdigest()
        if len(data) == length and sha == digest:
            return data
        got = f"size {len(data)} sha256 {sha[:12]}.."
    raise ChunkError(f"chunk {store.url_of(rel)} of {what} is corrupt: {got} on 2 reads, its name says "
                     f"sha256 {digest[:12]}.. and the list length {length}; re-publish it (or copy it again "
                     f"from a good store)", rel)


def _pool_map(fn: Callable[[Any], Any], items: Iterable[Any], workers: int) -> list[Any]:
    items = list(items)
    if workers <= 1 or len(items) <= 1:
        return [fn(it) for it in items]
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(fn, items))


def missing_chunks(store: Store, digests: Iterable[str], workers: int = WORKERS) -> list[str]:
    """The digests (distinct, in first-seen order) whose chunk object `store` lacks."""
    unique = list(dict.fromkeys(digests))
    present = _pool_map(lambda d: store.exists(chunk_path(d)), unique, workers)
    return [d for d, ok in zip(unique, present) if not ok]


def upload_image_chunks(store: Store, image: Path, chunks: list[tuple[str, int]], *,
                        workers: int = WORKERS) -> tuple[int, int]:
    """Upload the chunks of `image` (in the order of `chunks`) that `store` lacks, each read
    from the image file at its offset and checked first. Returns (chunks uploaded, bytes)."""
    where: dict[str, tuple[int, int]] = {}
    at = 0
    for digest, length in chunks:
        where.setdefault(digest, (at, length))
        at += length
    todo = missing_chunks(store, where, workers)
    fd = os.open(image, os.O_RDONLY)
    try:
        def put(digest: str) -> int:
            offset, length = where[digest]
            data = os.pread(fd, length, offset)
            if len(data) != length or hashlib.sha256(data).hexdigest() != digest:
                raise ChunkError(f"{image} changed since it was cut (chunk at {offset} no longer has sha256 "
                                 f"{digest[:12]}..); pack it again", chunk_path(digest))
            store.put_bytes(chunk_path(digest), data)
            return length

        sent = _pool_map(put, todo, workers)
    finally:
        os.close(fd)
    return len(todo), sum(sent)


def chunk_sizes(store: Store) -> dict[str, int]:
    """digest -> size of every chunk object in `store`, from one listing of `chunks/` (on
    S3 one request per 1,000 objects, instead of one per chunk and image)."""
    try:
        found = store.fs.find(store.path("chunks"), detail=True)
    except FileNotFoundError:
        return {}
    out: dict[str, int] = {}
    for path, info in found.items():
        name = path.rstrip("/").rsplit("/", 1)[-1]
        if len(name) == 64 and _HEX.fullmatch(name):
            out[name] = int(info.get("size") or 0)
    return out


class DestinationChunks:
    """The chunks a destination store holds, shared by the copies of several images that run
    at once: each chunk is copied by one of them, and every copy returns only when all the
    chunks its image needs are in place (so its chunk list and manifest may follow)."""

    def __init__(self, sizes: dict[str, int]) -> None:
        self.sizes = sizes
        self._lock = threading.Lock()
        self._inflight: dict[str, threading.Event] = {}

    def claim(self, lengths: dict[str, int]) -> tuple[list[str], list[tuple[str, threading.Event]]]:
        """(chunks this caller copies, chunks another caller is copying right now)."""
        mine, wait = [], []
        with self._lock:
            for digest, length in lengths.items():
                if self.sizes.get(digest) == length:
                    continue
                if digest in self._inflight:
                    wait.append((digest, self._inflight[digest]))
                else:
                    self._inflight[digest] = threading.Event()
                    mine.append(digest)
        return mine, wait

    def settle(self, digest: str, size: int | None) -> None:
        """A claimed chunk is in place (`size`) or its copy failed (None)."""
        with self._lock:
            if size is not None:
                self.sizes[digest] = size
            self._inflight.pop(digest).set()


def copy_chunks(src: Store, dst: Store, chunks: list[tuple[str, int]], what: str, *, workers: int = WORKERS,
                meter: Progress | None = None, have: DestinationChunks | None = None) -> tuple[int, int]:
    """Copy the chunks `dst` lacks from `src`, each checked on the way (a damaged source
    chunk is never propagated). `have`: what `dst` holds (`chunk_sizes(dst)`), shared by
    concurrent copies; without it, one existence request per chunk. Returns (chunks
    copied by this call, bytes)."""
    lengths = dict(chunks)
    if have is None:
        todo, wait = missing_chunks(dst, lengths, workers), []
    else:
        todo, wait = have.claim(lengths)
    if meter is not None:
        meter.add_total(sum(lengths[d] for d in todo))

    def one(digest: str) -> int:
        size = None
        try:
            data = fetch_chunk(src, digest, lengths[digest], what)
            dst.put_bytes(chunk_path(digest), data)
            size = len(data)
        finally:
            if have is not None:
                have.settle(digest, size)
        if meter is not None:
            meter.update(size)
        return size

    sent = sum(_pool_map(one, todo, workers))
    for digest, event in wait:
        event.wait()
        if have is not None and have.sizes.get(digest) != lengths[digest]:
            raise ChunkError(f"chunk {dst.url_of(chunk_path(digest))} of {what} could not be copied (the copy "
                             f"for another image failed); rerun", chunk_path(digest))
    return len(todo), sent


@dataclass(frozen=True)
class ChunkProblem:
    what: str  # missing | corrupt
    rel: str
    detail: str


def check_chunks(store: Store, cl: ChunkList, what: str, *, quick: bool, workers: int = WORKERS,
                 meter: Progress | None = None, memo: dict[str, int | None] | None = None
                 ) -> list[ChunkProblem]:
    """`quick`: every chunk present with its length (one size request per distinct chunk;
    `memo`, digest -> size or None when missing, shares the answers between images, as
    chunks are shared). Otherwise every chunk is read and hashed and the chunks, in order,
    must hash to the list's image_sha256."""
    problems: list[ChunkProblem] = []
    if quick:
        lengths = dict(cl.chunks)
        memo = {} if memo is None else memo
        todo = [d for d in lengths if d not in memo]

        def size_of(digest: str) -> int | None:
            try:
                return store.size(chunk_path(digest))
            except NotInStore:
                return None

        memo.update(zip(todo, _pool_map(size_of, todo, workers)))
        for digest, length in lengths.items():
            size, rel = memo[digest], chunk_path(digest)
            if size is None:
                problems.append(ChunkProblem("missing", rel, f"chunk of {what}; re-publish it (or push/pull it again)"))
            elif size != length:
                problems.append(ChunkProblem("corrupt", rel, f"chunk of {what}: size {size} != {length} in its "
                                                             f"list; re-publish it or copy it again"))
        if meter is not None:
            meter.update(len(cl.chunks))
        return problems
    whole = hashlib.sha256()
    complete = True
    for digest, length, data in _ordered(store, cl, what, workers):
        if isinstance(data, ChunkError):
            problems.append(ChunkProblem("missing" if data.missing else "corrupt", data.rel, str(data)))
            complete = False
            continue
        whole.update(data)
        if meter is not None:
            meter.update(length)
    if complete and whole.hexdigest() != cl.image_sha256:
        problems.append(ChunkProblem("corrupt", "", f"the chunks of {what} reassemble to sha256 "
                                                    f"{whole.hexdigest()[:16]}.., the list says "
                                                    f"{cl.image_sha256[:16]}..; re-publish it"))
    return problems


def _ordered(store: Store, cl: ChunkList, what: str, workers: int, skip: Callable[[int], bool] = lambda i: False):
    """(digest, length, bytes | ChunkError) for each chunk in list order, fetched from the
    store `workers` at a time ahead of the consumer (bounded memory: 2 x workers chunks).
    Chunks where `skip(i)` is true yield None and are not fetched."""
    window = max(1, 2 * workers)
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


# ------------------------------------------------------------------ node: reassembly
@dataclass
class Assembled:
    sha256: str
    size: int
    fetched: int = 0  # chunks read from the store
    fetched_bytes: int = 0
    reused: int = 0  # chunks copied from images this node holds (or earlier in this image)
    reused_bytes: int = 0


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


def assemble(store: Store, ref: ChunkedImage, cl: ChunkList, out: Path, local: LocalChunks, *,
             workers: int = WORKERS, progress: Progress | None = None) -> Assembled:
    """Write the image `cl` describes to `out` (a new file) in one sequential pass: each chunk
    from earlier in this image, from `local`, or from the store (prefetched `workers` at a
    time, each checked), hashing every byte written. The caller compares the returned
    sha256 and size with the manifest's image before using `out`."""
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
                    fetched = fetch_chunk(store, digest, length, ref.what)  # local copy changed
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
                view = view[os.write(fd, view):]
    finally:
        chunks.close()  # stops the prefetch (waits for the few requests in flight)
        os.close(fd)
    result.sha256, result.size = whole.hexdigest(), at
    return result


__all__ = ["Assembled", "ChunkError", "ChunkProblem", "ChunkedImage", "LocalChunks", "assemble", "check_chunks",
           "chunk_sizes", "copy_chunks", "DestinationChunks", "fetch_chunk", "missing_chunks", "read_chunk_list", "upload_image_chunks"]
