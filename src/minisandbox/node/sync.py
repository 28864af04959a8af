"""Mirror a published store between locations, and verify a store against its index.

Why: stores are built on one machine (or a cluster's shared disk) and read on training
nodes from object storage, or the other way round. `mirror(src, dst)` copies everything
the index names (archives, images, manifests, logs, index shards, catalog last), each
archive checked against its manifest's sha256 on the way, so a damaged source is never
propagated. It is resumable: an artifact whose manifest on `dst` equals the source's and
whose archive has the recorded size is skipped, and every write goes through
`Store.put_*` (temp object, verify, move), so an interrupted mirror leaves only
complete artifacts and invisible temp objects. Rerunning it copies just the rest; the
destination's index is written last, so readers see the new set only when it is whole.

`verify(store)` checks every artifact the index names (present, size, sha256 against its
manifest, manifest equal to the catalog's copy), the logs and shards the index refers to,
and that ready tasks point at good artifacts.

Images stored as chunks (manifest `image.chunks`, `minisandbox.node.chunks`): `mirror`
copies the packs (with their indexes; or, in stores of chunk list schema 1, the chunk
objects) the destination lacks, each checked, then the chunk list, then the manifest;
`verify` checks the list against its manifest and every pack or chunk object (quick: present
with its size; full: every chunk's sha256, and the chunks in order hash to the image's sha256).
"""

from __future__ import annotations

import hashlib
import json
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import fsspec.callbacks

from minisandbox.errors import MinisandboxError
from minisandbox.fsutil import CHUNK, file_digest
from minisandbox.index import CATALOG, SHARDS, shard_digest, shard_path
from minisandbox.manifest import content_id, has_archive, manifest_path
from minisandbox.node.chunks import (
    ChunkedImage,
    ChunkError,
    DestinationChunks,
    check_chunks,
    chunk_sizes,
    copy_chunks,
    needed_objects,
    read_chunk_list,
)
from minisandbox.node.published import read_catalog
from minisandbox.node.store import NotInStore, Store, open_store
from minisandbox.progress import Progress

#: Temp objects older than this are left-overs of interrupted writers, not uploads in flight.
STALE_TMP_SECONDS = 6 * 3600.0


class SyncError(MinisandboxError, RuntimeError):
    """A mirror could not complete; the message names the object and what to do."""


@dataclass(frozen=True)
class Blob:
    """One archive or image the index promises, with the digest it must have."""

    rel: str
    sha256: str
    size: int


@dataclass(frozen=True)
class StoredArtifact:
    """A published artifact as a mirror sees it: its blobs (archive, optional image) and its
    manifest file (`minisandbox.node.cache.Artifact` is what a node fetches)."""

    kind: str
    key: str
    manifest_rel: str
    manifest: dict[str, Any]
    blobs: tuple[Blob, ...]
    #: the image is stored as chunks: its chunk list (also one of `blobs`) names them
    chunks: ChunkedImage | None = None


@dataclass
class SyncReport:
    """What one mirror run did (for the CLI summary and for tests)."""

    src: str
    dst: str
    copied: list[str] = field(default_factory=list)  # artifact keys transferred
    skipped: list[str] = field(default_factory=list)  # already complete at dst
    files: int = 0  # objects written (incl. index)
    bytes: int = 0  # archive/image/chunk bytes transferred
    chunks: int = 0  # packs (or chunk objects) copied
    seconds: float = 0.0
    stale_tmp_removed: int = 0  # left-over temp objects deleted at dst

    @property
    def mb_per_s(self) -> float:
        return self.bytes / 1e6 / self.seconds if self.seconds > 0 else 0.0


@dataclass(frozen=True)
class Problem:
    """One defect `verify` found: `what` is missing | corrupt | size | mismatch | inconsistent."""

    what: str
    rel: str
    detail: str

    def line(self, store: Store) -> str:
        return f"{self.what}: {store.url_of(self.rel)}: {self.detail}"


@dataclass
class VerifyReport:
    store: str
    artifacts: int = 0
    blobs: int = 0
    chunks: int = 0  # chunk references checked (a chunk shared by n images counts n times)
    bytes: int = 0
    tasks: int = 0
    problems: list[Problem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


# ------------------------------------------------------------------------ the index's view
def artifacts_of(catalog: dict[str, Any]) -> list[StoredArtifact]:
    """Every published artifact the catalog names (failed keys have none)."""
    out: list[StoredArtifact] = []
    for section, kind in (("repos", "repo"), ("envs", "env"), ("interps", "interp")):
        for key, entry in sorted(catalog.get(section, {}).items()):
            m = entry.get("manifest")
            if entry.get("status") != "ok" or not m:
                continue
            blobs = [Blob(f"artifacts/{kind}/{m['artifact']}", m["sha256"], int(m["size"]))] if has_archive(m) else []
            img = m.get("image")
            chunked = ChunkedImage.from_manifest(m, where=f"{CATALOG} entry {kind} {key}") if img else None
            if chunked is not None:
                blobs.append(Blob(chunked.list_rel, chunked.list_sha256, chunked.list_size))
            if img and img.get("whole", True):
                blobs.append(Blob(f"artifacts/{kind}/{img['artifact']}", img["sha256"], int(img["size"])))
            out.append(StoredArtifact(kind, key, manifest_path(kind, key), m, tuple(blobs), chunked))
    return out


def logs_of(catalog: dict[str, Any]) -> list[str]:
    """Store paths of the build logs the catalog refers to (failed builds have them too)."""
    logs = set()
    for section in ("envs", "repos"):
        for entry in catalog.get(section, {}).values():
            if entry.get("log"):
                logs.add(entry["log"])
    return sorted(logs)


def _fresh(store: Store) -> Store:
    """Drop fsspec's listing cache: another process may have written since (s3fs caches)."""
    try:
        store.fs.invalidate_cache()
    except Exception:
        pass
    return store


# ------------------------------------------------------------------------ progress
class _Transfer(fsspec.callbacks.Callback):
    """fsspec callback that forwards each chunk's bytes to a Progress meter; `finish()`
    tops the count up to the blob's size (local copies report no chunks)."""

    def __init__(self, meter: Progress | None, size: int) -> None:
        super().__init__(size=size)
        self.meter, self.sent = meter, 0

    def call(self, hook_name: str | None = None, **kwargs: Any) -> None:
        delta = min(self.value, self.size or self.value) - self.sent
        if delta > 0 and self.meter is not None:
            self.meter.update(delta)
            self.sent += delta

    def finish(self) -> None:
        self.absolute_update(self.size)


# ------------------------------------------------------------------------ mirror
def _copy_blob(src: Store, dst: Store, blob: Blob, tmpdir: Path, meter: Progress | None = None) -> int:
    """Copy one archive/image, refusing it if its sha256 or size differs from the manifest.
    The meter counts the network leg: the download from a remote source, else the upload."""
    transfer = _Transfer(meter, blob.size)
    if src.local:
        local = Path(src.path(blob.rel))
        if not local.exists():
            raise SyncError(
                f"{src.url_of(blob.rel)} is missing but the index names it; "
                f"run `minisandbox verify {src.url}` and re-publish that key"
            )
    else:
        local = tmpdir / f"{threading.get_ident()}-{Path(blob.rel).name}"
        try:
            src.get_file(blob.rel, local, callback=transfer)
        except NotInStore as exc:
            raise SyncError(
                f"{src.url_of(blob.rel)} is missing but the index names it; "
                f"run `minisandbox verify {src.url}` and re-publish that key"
            ) from exc
    try:
        sha, size = file_digest(local)
        if sha != blob.sha256 or size != blob.size:
            raise SyncError(
                f"{src.url_of(blob.rel)} does not match its manifest (sha256 {sha[:12]}.. size {size}, "
                f"want {blob.sha256[:12]}.. size {blob.size}); not copied: the source is damaged, "
                f"re-publish that key, then rerun"
            )
        dst.put_file(local, blob.rel, sha256=blob.sha256, callback=transfer if src.local else None)
        transfer.finish()
        return size
    finally:
        if not src.local:
            local.unlink(missing_ok=True)


def _copy_image_chunks(
    src: Store, dst: Store, art: StoredArtifact, meter: Progress | None, have: DestinationChunks
) -> tuple[int, int]:
    """Copy the chunks of `art`'s image that `dst` lacks (`have`: its chunk sizes); the list
    is read from `src` and checked against the manifest first (a damaged source is never
    propagated)."""
    assert art.chunks is not None
    try:
        cl = read_chunk_list(src, art.chunks)
        return copy_chunks(src, dst, cl, art.chunks.what, meter=meter, have=have)
    except ChunkError as exc:
        raise SyncError(
            f"{exc} (not copied: the source is damaged; run `minisandbox verify {src.url}`, "
            f"re-publish {art.key}, then rerun)"
        ) from None


def _complete_at(src: Store, dst: Store, art: StoredArtifact, manifest_bytes: bytes, have: DestinationChunks) -> bool:
    """Already mirrored: same manifest bytes, every blob present with its recorded size and,
    for a chunked image, every chunk its list names (`have`: dst's chunk sizes). Manifests
    are written after their parts, so a manifest implies finished uploads; the chunk check
    brings back a chunk lost at `dst` since."""
    try:
        if dst.read_bytes(art.manifest_rel) != manifest_bytes:
            return False
        if not all(dst.size(b.rel) == b.size for b in art.blobs):
            return False
    except NotInStore:
        return False
    if art.chunks is None:
        return True
    try:
        cl = read_chunk_list(src, art.chunks)
    except ChunkError:
        return False  # copying will name the damage
    return all(have.sizes.get(rel) == n for rel, n in needed_objects(cl).items())


def mirror(
    src: Store | str,
    dst: Store | str,
    *,
    workers: int = 4,
    on_artifact: Callable[[str, str], None] | None = None,
    stale_tmp_after: float = STALE_TMP_SECONDS,
    progress: Progress | None = None,
) -> SyncReport:
    """Copy the published store `src` to `dst` (any two fsspec URLs); resumable, verified.

    `on_artifact(key, "copied"|"skipped")` is called after each artifact (tests use it to
    interrupt a run); `progress` counts the bytes of the artifacts that need copying, its
    total fixed (`Progress.fix_total`) once every artifact is planned, before any copy.
    After a complete run, temp objects (`*.tmp-<uuid>`) older than `stale_tmp_after`
    seconds, left at `dst` by interrupted writers, are removed. Raises SyncError naming the first artifact that failed;
    everything copied before stays valid at `dst`, and the index there is untouched.
    """
    src, dst = _fresh(open_store(src)), _fresh(open_store(dst))
    if src.url.rstrip("/") == dst.url.rstrip("/"):
        raise SyncError(f"source and destination are the same store {src.url}")
    t0 = time.perf_counter()
    try:
        catalog_bytes = src.read_bytes(CATALOG)
    except NotInStore as exc:
        raise SyncError(
            f"{src.url_of(CATALOG)} not found: {src.url} is not a published store "
            f"(build it with snakemake, or check the URL)"
        ) from exc
    catalog = json.loads(catalog_bytes)
    report = SyncReport(src.url, dst.url)
    lock = threading.Lock()
    arts = artifacts_of(catalog)
    have = DestinationChunks(chunk_sizes(dst) if any(a.chunks for a in arts) else {})

    # Plan first: what each artifact needs, so the progress total is known before the first
    # byte moves (it never grows mid-copy). Chunk lists are read again when copying rather
    # than held: a store's lists together can outgrow memory.
    plans: dict[tuple[str, str], tuple[bytes, bool]] = {}
    chunk_todo: dict[str, int] = {}  # chunk objects/packs dst lacks, counted once across images

    def plan(art: StoredArtifact) -> None:
        try:
            manifest_bytes = src.read_bytes(art.manifest_rel)
        except NotInStore as exc:
            raise SyncError(
                f"{src.url_of(art.manifest_rel)} is missing but the index names {art.key}; "
                f"run `minisandbox verify {src.url}` and re-publish that key"
            ) from exc
        if content_id(json.loads(manifest_bytes)) != content_id(art.manifest):
            raise SyncError(
                f"{src.url_of(art.manifest_rel)} disagrees with {src.url_of(CATALOG)} "
                f"about {art.key}; re-run the index step on the source"
            )
        complete = _complete_at(src, dst, art, manifest_bytes, have)
        lacking: dict[str, int] = {}
        if not complete and art.chunks is not None:
            try:
                lacking = {
                    rel: n
                    for rel, n in needed_objects(read_chunk_list(src, art.chunks)).items()
                    if have.sizes.get(rel) != n
                }
            except ChunkError:
                pass  # copying names the damage
        with lock:
            plans[(art.kind, art.key)] = (manifest_bytes, complete)
            chunk_todo.update(lacking)

    _run_all(plan, arts, workers)
    if progress is not None:
        progress.fix_total(
            sum(b.size for a in arts if not plans[(a.kind, a.key)][1] for b in a.blobs) + sum(chunk_todo.values())
        )

    with tempfile.TemporaryDirectory(prefix="minisandbox-sync-") as tmp:
        tmpdir = Path(tmp)

        def one(art: StoredArtifact) -> None:
            manifest_bytes, complete = plans[(art.kind, art.key)]
            nchunks = 0
            if complete:
                status, n, files = "skipped", 0, 0
            else:
                n = 0
                if art.chunks is not None:  # chunks before the list that names them
                    nchunks, n = _copy_image_chunks(src, dst, art, progress, have)
                n += sum(_copy_blob(src, dst, b, tmpdir, progress) for b in art.blobs)
                dst.put_bytes(
                    art.manifest_rel,
                    manifest_bytes,  # after its blobs; the publisher's signature kept
                    signature=src.read_signature(art.manifest_rel),
                )
                status, files = "copied", len(art.blobs) + 1 + nchunks
            with lock:
                (report.copied if status == "copied" else report.skipped).append(art.key)
                report.bytes += n
                report.files += files
                report.chunks += nchunks
            if on_artifact:
                on_artifact(art.key, status)

        _run_all(one, arts, workers)

        def one_log(rel: str) -> None:
            try:
                data = src.read_bytes(rel)
            except NotInStore:
                return  # verify reports it; a missing log must not block the artifacts
            try:
                if dst.size(rel) == len(data):
                    return
            except NotInStore:
                pass
            dst.put_bytes(rel, data)
            with lock:
                report.files += 1

        _run_all(one_log, logs_of(catalog), workers)

        # Index last: shards, then the catalog (readers trust shards once they see it).
        # A missing shard reads as empty (minisandbox.index.iter_shard), so empty shards are
        # only written where `dst` holds a stale non-empty one; equal shards are skipped.
        src_sizes, dst_sizes = _shard_sizes(src), _shard_sizes(dst)

        def one_shard(rel: str) -> None:
            data = src.read_bytes(rel) if src_sizes.get(rel) else b""
            have = dst_sizes.get(rel)
            if not data and not have:
                return
            if have == len(data) and dst.read_bytes(rel) == data:
                return
            dst.put_bytes(rel, data, signature=src.read_signature(rel))
            with lock:
                report.files += 1

        nshards = int(catalog.get("shards", SHARDS))
        _run_all(one_shard, [shard_path(f"{i:02x}") for i in range(nshards)], max(workers, 8))
        dst.put_bytes(CATALOG, catalog_bytes, signature=src.read_signature(CATALOG))
        report.files += 1
    report.stale_tmp_removed = remove_stale_tmp(dst, stale_tmp_after)
    report.seconds = time.perf_counter() - t0
    return report


def _shard_sizes(store: Store) -> dict[str, int]:
    """Store-relative shard path -> size, from one listing (no request per shard)."""
    rel_dir = shard_path("00").rsplit("/", 1)[0]
    try:
        entries = store.fs.ls(store.path(rel_dir), detail=True)
    except FileNotFoundError:
        return {}
    return {
        f"{rel_dir}/{e['name'].rstrip('/').rsplit('/', 1)[-1]}": int(e.get("size") or 0)
        for e in entries
        if e.get("type") != "directory"
    }


def _modified(info: dict[str, Any]) -> float | None:
    """Modification time (epoch seconds) from an fsspec listing entry: local or S3."""
    t = info.get("mtime", info.get("LastModified", info.get("last_modified")))
    if t is None:
        return None
    return t.timestamp() if hasattr(t, "timestamp") else float(t)


def remove_stale_tmp(store: Store, older_than: float = STALE_TMP_SECONDS) -> int:
    """Delete `*.tmp-<uuid>` objects older than `older_than` seconds under the store's
    artifacts/, chunks/, packs/, logs/ and index/ (what interrupted uploads leave). Returns how many."""
    now = time.time()
    removed = 0
    for top in ("artifacts", "chunks", "packs", "logs", "index"):
        try:
            found = store.fs.find(store.path(top), detail=True)
        except FileNotFoundError:
            continue
        for path, info in found.items():
            if ".tmp-" not in path.rsplit("/", 1)[-1]:
                continue
            mtime = _modified(info)
            if mtime is not None and now - mtime > older_than:
                try:
                    store.fs.rm_file(path)
                    removed += 1
                except FileNotFoundError:
                    pass
    return removed


def _run_all(fn: Callable[[Any], None], items: Iterable[Any], workers: int) -> None:
    """Run fn over items on a thread pool; the first error stops new work and is raised."""
    items = list(items)
    if workers <= 1 or len(items) <= 1:
        for it in items:
            fn(it)
        return
    stop = threading.Event()

    def guarded(it: Any) -> None:
        if stop.is_set():
            return
        try:
            fn(it)
        except BaseException:
            stop.set()
            raise

    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = [pool.submit(guarded, it) for it in items]
        errors = [f.exception() for f in futures if f.exception() is not None]
    if errors:
        raise errors[0]


# ------------------------------------------------------------------------ verify
def _stream_digest(store: Store, rel: str, meter: Progress | None = None) -> tuple[str, int]:
    """sha256 and size of a store object, streamed (constant memory, no temp file)."""
    h = hashlib.sha256()
    size = 0
    with open(store.path(rel), "rb") if store.local else store.open(rel, "rb") as f:
        while chunk := f.read(CHUNK):
            h.update(chunk)
            size += len(chunk)
            if meter is not None:
                meter.update(len(chunk))
    return h.hexdigest(), size


def _verify_chunks(
    store: Store, art: StoredArtifact, quick: bool, meter: Progress | None, memo: dict[str, Any] | None
) -> tuple[list[Problem], int]:
    """Problems of `art`'s chunked image (its list, then its chunks) and how many chunks were
    checked. The list itself is one of the artifact's blobs (size and digest checked there)."""
    assert art.chunks is not None
    try:
        cl = read_chunk_list(store, art.chunks)
    except ChunkError as exc:
        if exc.missing:
            return [], 0  # reported with the blobs
        return [
            Problem(
                "corrupt",
                exc.rel,
                f"chunk list of {art.kind} {art.key} does not match its manifest; "
                f"re-publish {art.key} or copy it again",
            )
        ], 0
    except MinisandboxError as exc:  # StoreDataError: a bad list whose digest matches its manifest
        return [Problem("corrupt", art.chunks.list_rel, str(exc))], 0
    found = check_chunks(store, cl, art.chunks.what, quick=quick, meter=meter, memo=memo)
    return [Problem(p.what, p.rel or art.chunks.list_rel, p.detail) for p in found], len(cl.chunks)


def _verify_artifact(
    store: Store, art: StoredArtifact, quick: bool, meter: Progress | None = None
) -> tuple[list[Problem], int]:
    problems: list[Problem] = []
    nbytes = 0
    try:
        published = json.loads(store.read_bytes(art.manifest_rel))
        if content_id(published) != content_id(art.manifest):
            problems.append(
                Problem(
                    "mismatch", art.manifest_rel, f"manifest of {art.key} differs from the index; re-run the index step"
                )
            )
    except NotInStore:
        problems.append(Problem("missing", art.manifest_rel, f"manifest of {art.kind} {art.key}; re-publish it"))
    except ValueError:
        problems.append(Problem("corrupt", art.manifest_rel, f"manifest of {art.key} is not JSON; re-publish it"))
    for blob in art.blobs:
        try:
            if quick:
                size, sha = store.size(blob.rel), blob.sha256
                if meter is not None:
                    meter.update(1)
            else:
                sha, size = _stream_digest(store, blob.rel, meter)
                nbytes += size
        except (NotInStore, FileNotFoundError):
            problems.append(
                Problem(
                    "missing",
                    blob.rel,
                    f"archive of {art.kind} {art.key}; re-publish it (or push/pull it again from a good copy)",
                )
            )
            continue
        if size != blob.size:
            problems.append(
                Problem(
                    "corrupt",
                    blob.rel,
                    f"size {size} != {blob.size} in the index; re-publish {art.key} or copy it again",
                )
            )
        elif sha != blob.sha256:
            problems.append(
                Problem(
                    "corrupt",
                    blob.rel,
                    f"sha256 {sha[:16]}.. != {blob.sha256[:16]}.. in the index; re-publish {art.key} or copy it again",
                )
            )
    return problems, nbytes


def _iter_shard_lines(data: bytes) -> Iterator[dict[str, Any]]:
    for n, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), 1):
        if line.strip():
            try:
                yield json.loads(line)
            except ValueError:
                yield {"__bad_line__": n}


def verify(
    store: Store | str, *, quick: bool = False, workers: int = 4, progress: Progress | None = None
) -> VerifyReport:
    """Check every artifact, log and shard the index names. `quick`: sizes only, no digests.
    `progress` counts bytes hashed (files checked with `quick`), of a total fixed up front."""
    store = _fresh(open_store(store))
    catalog = read_catalog(store)
    report = VerifyReport(store.url)
    arts = artifacts_of(catalog)
    report.artifacts = len(arts)
    report.blobs = sum(len(a.blobs) for a in arts)
    if progress is not None:  # planned from the index alone: fixed before the first check
        progress.fix_total(
            report.blobs + sum(a.chunks.count for a in arts if a.chunks)
            if quick
            else sum(b.size for a in arts for b in a.blobs) + sum(a.chunks.image_size for a in arts if a.chunks)
        )
    lock = threading.Lock()
    # quick: chunk object and pack sizes from one listing; one missing from it is asked about once
    memo: dict[str, int | None] = chunk_sizes(store) if quick and any(a.chunks for a in arts) else {}

    def one(art: StoredArtifact) -> None:
        problems, nbytes = _verify_artifact(store, art, quick, progress)
        nchunks = 0
        if art.chunks is not None:
            more, nchunks = _verify_chunks(store, art, quick, progress, memo)
            problems += more
            if not quick:
                nbytes += art.chunks.image_size
        with lock:
            report.problems.extend(problems)
            report.bytes += nbytes
            report.chunks += nchunks

    _run_all(one, arts, workers)

    for rel in logs_of(catalog):
        if not store.exists(rel):
            report.problems.append(Problem("missing", rel, "build log named by the index; re-run publish for that key"))

    ok = {("env", k) for k, e in catalog.get("envs", {}).items() if e.get("status") == "ok"}
    ok |= {("repo", k) for k, e in catalog.get("repos", {}).items() if e.get("status") == "ok"}
    sizes = _shard_sizes(store)
    absent = []
    digests = catalog.get("shards_sha256") or {}  # stores published before them have none
    for i in range(int(catalog.get("shards", SHARDS))):
        rel = shard_path(f"{i:02x}")
        if rel not in sizes:
            if digests and digests.get(f"{i:02x}") != shard_digest(b""):
                report.problems.append(
                    Problem("missing", rel, f"index shard that {CATALOG} names with content; re-run the index step")
                )
            elif not digests:
                absent.append(rel)  # reads as empty: a problem only if tasks went missing
            continue
        data = store.read_bytes(rel) if sizes[rel] else b""
        if digests and digests.get(f"{i:02x}") != shard_digest(data):
            report.problems.append(
                Problem(
                    "mismatch",
                    rel,
                    f"sha256 is not the one {CATALOG} names (an older or altered shard); re-run the index step",
                )
            )
        entries = list(_iter_shard_lines(data))
        for e in entries:
            if "__bad_line__" in e:
                report.problems.append(
                    Problem("corrupt", rel, f"line {e['__bad_line__']} is not JSON; re-run the index step")
                )
                continue
            report.tasks += 1
            if e.get("status") == "ready":
                for kind in ("env", "repo"):
                    if (kind, e.get(f"{kind}_key")) not in ok:
                        report.problems.append(
                            Problem(
                                "inconsistent",
                                rel,
                                f"task {e.get('instance_id')} is ready but its {kind} "
                                f"{e.get(f'{kind}_key')} is not published ok; re-run the index step",
                            )
                        )
    counted = (catalog.get("counts") or {}).get("tasks")
    if counted is not None and counted != report.tasks:
        report.problems.append(
            Problem(
                "inconsistent",
                CATALOG,
                f"the index shards hold {report.tasks} tasks but the catalog counts "
                f"{counted}; a shard is missing or damaged: re-run the index step",
            )
        )
        report.problems.extend(Problem("missing", rel, "index shard (the task count is short)") for rel in absent)
    report.problems.sort(key=lambda p: (p.rel, p.what))
    return report
