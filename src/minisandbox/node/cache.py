"""Node-local, content-addressed cache of restored layers, with leases and LRU GC.

Layout under the cache root (`minisandbox.paths.cache_dir()`):

    layers/<sha256>/          read-only layer: the unpacked archive whose sha256 this is
    layers/<sha256>.json      metadata (key, kind, bytes); its mtime is the last use (LRU)
    layers/.tmp-<sha256>-*/   unpack in progress (or left by a killed process)
    layers/<sha256>/ (kind "start")  a task's start state this node made (`made_layer`,
                              minisandbox.task): the upper directory of its set-up, stacked
                              under later sandboxes' /testbed; its sha256 names its inputs
    archives/<sha256>         verified archive files, only for `fetch_archive` (images, tools)
    archives/<sha256>.chunks.json  the chunk list of an image assembled from chunks: which
                              chunks later assemblies can copy from it instead of fetching
    tmp/                      downloads in progress
    locks/<sha256>.lock       one cross-process lock per digest
    leases/<sha256>/<id>.json live uses of a layer: GC never removes a leased layer
    budget/                   the node's I/O budget (minisandbox.node.iobudget)
    verified/<aa>/<sha256>    store documents (manifests, index shards) validated here once
                              (minisandbox.node.verified): the next `run` only parses them

Why stream: the archive is read from the store once, hashed, decompressed, checked and
unpacked in one pass into a temporary layer dir; only when the sha256 and size match the
manifest is it renamed into place. A corrupt or truncated download is discarded and fetched
once more, then the error names the artifact. Processes that want the same digest at the
same time serialise on its lock: exactly one downloads, the others find the layer ready.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import time
from collections import namedtuple
from pathlib import Path

from minisandbox.errors import MinisandboxError
from minisandbox.fsutil import CHUNK, FileLock, LazyPattern, LockTimeout, atomic_write_json, file_digest
from minisandbox.manifest import DIGEST, KINDS, StoreDataError, plain_name
from minisandbox.node import restore
from minisandbox.node.chunks import ChunkedImage, ChunkError, LocalChunks, assemble, read_chunk_list
from minisandbox.node.iobudget import IOBudget
from minisandbox.node.store import Store, StoreError
from minisandbox.node.verified import Verified
from minisandbox.sandbox.leftovers import ReapReport, proc_start, reap

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a warm `run` does not)
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, BinaryIO

    from minisandbox.node.fusemount import MountHolder
    from minisandbox.progress import Progress


class CacheError(MinisandboxError, RuntimeError):
    """A cache operation failed; the message names the artifact and what to do."""


class CacheBusy(CacheError):
    """`clear` found layers leased by live processes (or mounts it could not undo)."""


class ArtifactCorruptError(CacheError):
    """The store's copy does not match its manifest (twice)."""


_DIGEST = LazyPattern(DIGEST)


def check_digest(digest: str, what: str) -> str:
    """`digest` if it is a sha256 in lowercase hex, else StoreDataError: the cache names
    directories, locks and leases after digests, so anything else could name a host path."""
    if not isinstance(digest, str) or not _DIGEST.fullmatch(digest):
        raise StoreDataError(
            f"{what}: sha256 {str(digest)[:80]!r} is not 64 lowercase hex digits; "
            f"the store's manifest is damaged or tampered with: re-publish it"
        )
    return digest


class Artifact:
    """What the cache needs from a manifest to fetch and verify one archive (checked when
    made; not changed afterwards)."""

    def __init__(
        self,
        store_url: str,
        rel: str,
        sha256: str,
        size: int,
        fmt: str,
        key: str,
        kind: str,
        chunks: ChunkedImage | None = None,
    ) -> None:
        self.store_url = store_url
        self.rel = rel  # path in the store, e.g. artifacts/env/<key>.tar.zst
        self.sha256 = sha256
        self.size = size
        self.fmt = fmt
        self.key = key
        self.kind = kind
        #: an image stored as chunks + chunk list (manifest `image.chunks`): assembled, not downloaded
        self.chunks = chunks
        # Defence in depth below the manifest schema: `sha256` names cache directories, lock
        # and lease files, `rel` a store object; neither may ever walk out of its place.
        check_digest(self.sha256, f"artifact {self.label}")
        parts = self.rel.split("/")
        if len(parts) != 3 or parts[0] != "artifacts" or parts[1] not in KINDS:
            raise StoreDataError(f"artifact {self.label}: store path must be artifacts/<kind>/<name>")
        try:
            plain_name(parts[2], "artifact")
            plain_name(self.key, "key")
        except ValueError as exc:
            raise StoreDataError(f"artifact {self.label}: {exc}") from None

    @classmethod
    def from_manifest(cls, store: Store, manifest: dict[str, Any]) -> Artifact:
        try:
            kind = manifest["kind"]
            return cls(
                store.url,
                f"artifacts/{kind}/{manifest['artifact']}",
                manifest["sha256"],
                int(manifest["size"]),
                manifest.get("format", "tar.zst"),
                manifest["key"],
                kind,
            )
        except KeyError as exc:
            raise CacheError(
                f"manifest of {manifest.get('key', '?')} in {store.url} lacks {exc}; re-run the publish step"
            ) from None

    @classmethod
    def image_from_manifest(cls, store: Store, manifest: dict[str, Any]) -> Artifact | None:
        """The manifest's optional filesystem image (`"image": {format, artifact, sha256, size}`)."""
        img = manifest.get("image")
        if not img:
            return None
        try:
            return cls(
                store.url,
                f"artifacts/{manifest['kind']}/{img['artifact']}",
                img["sha256"],
                int(img["size"]),
                img.get("format", "squashfs"),
                manifest["key"],
                manifest["kind"],
                ChunkedImage.from_manifest(manifest, where=f"store {store.url}: manifest of {manifest['key']}"),
            )
        except KeyError as exc:
            raise CacheError(
                f"image entry of {manifest.get('key', '?')} in {store.url} lacks {exc}; re-run the publish step"
            ) from None

    @property
    def label(self) -> str:
        return f"{self.store_url}/{self.rel}"


class LayerResult:
    """How one layer was made ready (`Cache.layer`, `Cache.image_layer`)."""

    def __init__(self, path: Path, digest: str, downloaded: bool) -> None:
        self.path = path
        self.digest = digest
        self.downloaded = downloaded  # this call transferred the artifact from the store
        self.attempts = 0  # downloads made by this call (2 = one corrupt copy discarded)
        self.waited_budget = 0.0
        self.seconds = 0.0
        self.mounter = ""  # an image layer: "kernel" (root, loop device) or "fuse" (squashfuse, rootless)


class Entry(
    namedtuple(
        "Entry",
        [
            "digest",
            "key",
            "kind",
            "layer_bytes",  # int
            "archive_bytes",  # int
            "last_used",  # float, a time.time()
            "leases",  # int
            "path",  # Path
        ],
    )
):
    """One layer in the cache, as `Cache.entries` lists it (a named tuple, as the other
    records a warm `run` reads: docs/design.md, "Record types")."""

    __slots__ = ()


class GcReport:
    """What `Cache.gc` removed and kept."""

    def __init__(self, *, stale_removed: int = 0, leftovers: ReapReport | None = None) -> None:
        self.removed: list[Entry] = []
        self.freed = 0
        self.total_before = 0
        self.total_after = 0
        self.kept_leased = 0
        self.stale_removed = stale_removed
        #: host resources of controllers that died without cleaning up (minisandbox.sandbox.leftovers)
        self.leftovers = leftovers


class ClearReport:
    """What `Cache.clear` removed."""

    def __init__(self, root: Path, *, ended: dict[int, str] | None = None) -> None:
        self.root = root
        self.freed = 0
        self.entries = 0
        self.unmounted = 0
        #: processes that held leases and were ended (`clear(force=True)`): pid -> lease owner
        self.ended = ended if ended is not None else {}
        self.leftovers: ReapReport | None = None


class _HashingReader:
    """File-like wrapper that hashes and counts every byte read through it (and reports
    the count to a progress meter, if any)."""

    def __init__(self, f: BinaryIO, progress: Progress | None = None) -> None:
        import hashlib

        self._f = f
        self.sha = hashlib.sha256()
        self.size = 0
        self._progress = progress

    def read(self, n: int = -1) -> bytes:
        data = self._f.read(n)
        self.sha.update(data)
        self.size += len(data)
        if self._progress is not None and data:
            self._progress.update(len(data))
        return data

    def drain(self) -> None:
        while self.read(CHUNK):
            pass


def _block_size(store: Store) -> int:
    """Read size for a transfer: 1 MiB locally; 8 MiB for object stores, where every block
    is one ranged GET and request latency, not bandwidth, would dominate."""
    return CHUNK if store.local else 8 * CHUNK


class Lease:
    """Marks layers as in use by a live process; GC skips them. Release when the sandbox ends."""

    def __init__(self, files: list[Path]) -> None:
        self.files = files
        self.released = False

    def release(self) -> None:
        for f in self.files:
            with contextlib.suppress(FileNotFoundError):
                f.unlink()
        self.released = True

    def transfer(self, pid: int) -> None:
        """Re-point the lease to another live process (e.g. the long-lived sandbox)."""
        start = proc_start(pid)
        if start is None:
            raise CacheError(f"cannot transfer lease to pid {pid}: no such process")
        for f in self.files:
            data = json.loads(f.read_text())
            data.update(pid=pid, start=start)
            atomic_write_json(f, data)

    def __enter__(self) -> Lease:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


class Cache:
    """The node cache at `root` (default `minisandbox.paths.cache_dir()`)."""

    def __init__(
        self, root: Path | None = None, budget: IOBudget | None = None, *, progress: Progress | None = None
    ) -> None:
        """`progress`: a meter that downloads add their sizes to and their bytes to (the
        `fetch` command's bar); None for silent use (sandboxes, workers)."""
        self.progress = progress
        if root is None:
            from minisandbox.paths import cache_dir

            root = cache_dir()
        self.root = Path(root)
        self.layers = self.root / "layers"
        self.archives = self.root / "archives"
        self.tmp = self.root / "tmp"
        self.locks = self.root / "locks"
        self.leases = self.root / "leases"
        for d in (self.layers, self.archives, self.tmp, self.locks, self.leases):
            d.mkdir(parents=True, exist_ok=True)
        self.budget = budget if budget is not None else IOBudget(directory=self.root / "budget")
        #: store documents this node validated already (`minisandbox.node.verified`)
        self.verified = Verified(self.root / "verified")

    # -- locks and leases -----------------------------------------------------------------
    def lock(self, digest: str) -> FileLock:
        check_digest(digest, "cache lock")
        return FileLock(str(self.locks / f"{digest}.lock"))

    def _lease_one(self, digest: str, owner: str) -> Path:
        check_digest(digest, "cache lease")
        d = self.leases / digest
        d.mkdir(parents=True, exist_ok=True)
        path = d / f"{os.urandom(16).hex()}.json"
        pid = os.getpid()
        atomic_write_json(path, {"pid": pid, "start": proc_start(pid), "owner": owner, "created": time.time()})
        return path

    def live_leases(self, digest: str) -> list[Path]:
        """Lease files of `digest` whose process is alive; stale ones are removed."""
        live = []
        d = self.leases / digest
        if not d.is_dir():
            return live
        for f in d.glob("*.json"):
            try:
                data = json.loads(f.read_text())
            except (FileNotFoundError, json.JSONDecodeError):
                continue  # being written or just released
            if data.get("pid") and proc_start(int(data["pid"])) == data.get("start"):
                live.append(f)
            else:
                with contextlib.suppress(FileNotFoundError):
                    f.unlink()
        return live

    # -- the main path --------------------------------------------------------------------
    def layer(
        self, store: Store, artifact: Artifact, *, ticket: float | None = None, owner: str = ""
    ) -> tuple[LayerResult, Path]:
        """Make the artifact's layer exist on this node and lease it.

        Returns (result, lease file). Holding the digest lock from the check to the lease
        means GC cannot remove the layer in between."""
        t0 = time.monotonic()
        digest = artifact.sha256
        with self.lock(digest):
            final = self.layers / digest
            result = LayerResult(final, digest, downloaded=False)
            if not final.is_dir():
                with self.budget.acquire(ticket) as slot:
                    result.waited_budget = slot.waited
                    attempts, nbytes = self._stream_into_layer(store, artifact)
                result.downloaded = True
                result.attempts = attempts
                atomic_write_json(
                    self.layers / f"{digest}.json",
                    {
                        "digest": digest,
                        "key": artifact.key,
                        "kind": artifact.kind,
                        "format": artifact.fmt,
                        "artifact": artifact.rel,
                        "store": artifact.store_url,
                        "archive_bytes": artifact.size,
                        "layer_bytes": nbytes,
                        "created": time.time(),
                    },
                )
            else:
                self._touch(digest)
            lease = self._lease_one(digest, owner)
        result.seconds = time.monotonic() - t0
        return result, lease

    def made_layer(
        self, digest: str, fill: Callable[[Path], None], meta: dict[str, Any], *, owner: str = ""
    ) -> tuple[Path, Path, bool]:
        """A layer this node makes itself from restored ones (a task's start state,
        minisandbox.task), under the digest lock: `fill(tmp)` fills a fresh directory that
        is renamed into place only if it returns; listed, evicted and cleared like a restored
        layer. Returns (layer dir, lease file, whether it was made now)."""
        with self.lock(digest):
            final, made = restore.ensure_layer(self.layers, digest, lambda tmp: fill(tmp) or True)
            if made:
                atomic_write_json(
                    self.layers / f"{digest}.json",
                    {"digest": digest, **meta, "layer_bytes": _du(final), "created": time.time()},
                )
            else:
                self._touch(digest)
            lease = self._lease_one(digest, owner)
        return final, lease, bool(made)

    def image_layer(
        self, store: Store, image: Artifact, *, unpack: bool = False, ticket: float | None = None, owner: str = ""
    ) -> tuple[LayerResult, Path]:
        """Like `layer`, for a filesystem image: download the image file (or re-check the one
        kept here) against the manifest's sha256, then mount it read-only at layers/<sha256>:
        with the kernel (root with loop devices) or with squashfuse in this cache's mount
        holder (`minisandbox.node.fusemount`). A mountpoint counts as ready only while
        mounted, so a crash between mkdir and mount is simply redone.

        `unpack`: unpack the image's files there instead (`restore.unsquash`), for a node that
        can mount it neither way when the store holds no archive. Same name as the mount
        since it is the same tree, so either serves both requests; an unpacked tree counts as
        ready only once its metadata says `unpacked` (written last), so an empty mountpoint
        left by a crash is never taken for a layer."""
        t0 = time.monotonic()
        digest = image.sha256
        with self.lock(digest):
            final = self.layers / digest
            result = LayerResult(final, digest, downloaded=False)
            if self._unpacked_image(digest):
                self._touch(digest)
            elif self.is_mounted(final):
                result.mounter = "kernel" if restore.is_mounted(final) else "fuse"
                self._touch(digest)
            else:
                with self.budget.acquire(ticket) as slot:
                    result.waited_budget = slot.waited
                    path, result.downloaded = self._verified_image(store, image)
                    result.attempts = 1 if result.downloaded else 0
                    if unpack:
                        nbytes = self._unpack_image(path, final)
                    else:
                        result.mounter, nbytes = self._mount_image(path, final, image.fmt), 0
                atomic_write_json(
                    self.layers / f"{digest}.json",
                    {
                        "digest": digest,
                        "key": image.key,
                        "kind": image.kind,
                        "format": image.fmt,
                        "artifact": image.rel,
                        "store": image.store_url,
                        "archive_bytes": image.size,
                        "layer_bytes": nbytes,
                        "image": True,
                        **({"unpacked": True} if unpack else {}),
                        "created": time.time(),
                    },
                )
            lease = self._lease_one(digest, owner)
        result.seconds = time.monotonic() - t0
        return result, lease

    def _mount_image(self, image: Path, final: Path, fmt: str) -> str:
        """Mount the verified image file at `final`; returns who mounted it."""
        final.mkdir(parents=True, exist_ok=True)
        try:
            if kernel_mount(fmt):
                restore.mount_image(image, final, fmt)
            else:
                self.mount_holder.mount(image, final)
            return "kernel" if restore.is_mounted(final) else "fuse"
        except BaseException:
            with contextlib.suppress(OSError):
                final.rmdir()
            raise

    def _unpack_image(self, image: Path, final: Path) -> int:
        """Unpack the verified image file as the layer `final`; returns its file bytes."""
        if final.is_dir():
            restore.remove_tree(final)  # a mountpoint or tree a dead process left
        _, nbytes = restore.ensure_layer(self.layers, final.name, lambda tmp: restore.unsquash(image, tmp))
        return nbytes or 0

    def _unpacked_image(self, digest: str) -> bool:
        """layers/<digest> is an image's unpacked tree (complete: its metadata is written last)."""
        final = self.layers / digest
        if not final.is_dir() or self.is_mounted(final):
            return False
        try:
            return json.loads((self.layers / f"{digest}.json").read_text()).get("unpacked") is True
        except (OSError, ValueError, AttributeError):
            return False

    @property
    def mount_holder(self) -> MountHolder:
        """This cache's rootless mount namespace (`minisandbox.node.fusemount`: imported here,
        a root node's warm `run` never needs it)."""
        from minisandbox.node.fusemount import MountHolder

        return MountHolder(self.root)

    def is_mounted(self, layer: Path) -> bool:
        """A layer mounted from an image: by the kernel here, or by squashfuse in the holder."""
        return restore.is_mounted(layer) or self.mount_holder.is_mounted(layer)

    def _unmount(self, layer: Path) -> bool:
        if restore.is_mounted(layer):
            return restore.unmount(layer)
        return self.mount_holder.unmount(layer)

    def mount_namespace(self) -> dict[str, Any] | None:
        """The namespaces a sandbox must join to see this cache's rootless image mounts."""
        return self.mount_holder.namespace()

    def stop_mounts(self) -> bool:
        """End the rootless mount holder (unmounting its images); False while one is in use."""
        return self.mount_holder.stop()

    def _verified_image(self, store: Store, image: Artifact) -> tuple[Path, bool]:
        """The image file, checked against the manifest's sha256 and size right before it is
        mounted: a download is hashed as it streams; a file kept from an earlier mount is
        hashed again (the node cache is writable by its user), and replaced if it changed.
        An image stored as chunks is assembled (`_assemble_image`) instead of downloaded."""
        fetch = self._assemble_image if image.chunks is not None else self._fetch_archive_locked
        path = self.archives / image.sha256
        if path.is_file():
            sha, size = file_digest(path)
            if sha == image.sha256 and size == image.size:
                return path, False
            path.unlink(missing_ok=True)  # changed on this node since it was verified: fetch again
            self._chunk_list_of(image.sha256).unlink(missing_ok=True)
        return fetch(store, image)

    # -- images stored as chunks ----------------------------------------------------------
    def _chunk_list_of(self, digest: str) -> Path:
        return self.archives / f"{check_digest(digest, 'cache image')}.chunks.json"

    def local_chunks(self, exclude: str | None = None) -> LocalChunks:
        """The chunks inside the images this cache holds (from the chunk lists kept beside
        them), for reuse by the next assembly. A list that does not parse is skipped: reused
        chunks are hashed again anyway."""
        local = LocalChunks()
        for lst in sorted(self.archives.glob("*.chunks.json")):
            digest = lst.name.split(".", 1)[0]
            image = self.archives / digest
            if digest == exclude or not _DIGEST.fullmatch(digest) or not image.is_file():
                continue
            try:
                doc = json.loads(lst.read_bytes())
                local.add(image, [(str(d), int(n)) for d, n in doc["chunks"]])
            except (OSError, ValueError, KeyError, TypeError):
                continue
        return local

    def _assemble_image(self, store: Store, image: Artifact) -> tuple[Path, bool]:
        """Assemble archives/<sha256> from chunks (those this cache holds, the rest from the
        store), then check the whole image's sha256 and size against the manifest: only then
        is it renamed into place, with its chunk list beside it. A tampered or missing chunk
        or list is an ArtifactCorruptError naming it; nothing is left in tmp/."""
        ref = image.chunks
        assert ref is not None
        final = self.archives / image.sha256
        try:
            cl = read_chunk_list(store, ref)
        except ChunkError as exc:
            raise ArtifactCorruptError(f"artifact {image.label} ({image.key}): {exc}") from None
        local = self.local_chunks(exclude=image.sha256)
        part = self.tmp / f"{image.sha256}.{os.urandom(4).hex()}.part"
        try:
            try:
                done = assemble(store, ref, cl, part, local, progress=self.progress)
            except ChunkError as exc:
                raise ArtifactCorruptError(f"artifact {image.label} ({image.key}): {exc}") from None
            finally:
                local.close()
            if done.sha256 != image.sha256 or done.size != image.size:
                raise ArtifactCorruptError(
                    f"artifact {image.label} ({image.key}): its chunk list {store.url_of(ref.list_rel)} assembles to "
                    f"size {done.size} sha256 {done.sha256[:12]}.., the manifest says size {image.size} sha256 "
                    f"{image.sha256[:12]}..; re-publish {image.key}"
                )
            os.replace(part, final)
        finally:
            part.unlink(missing_ok=True)
        atomic_write_json(
            self._chunk_list_of(image.sha256),
            {"image_sha256": cl.image_sha256, "size": cl.size, "chunks": [list(c) for c in cl.chunks]},
        )
        return final, True

    def _touch(self, digest: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.utime(self.layers / f"{digest}.json")

    def _stream_into_layer(self, store: Store, artifact: Artifact) -> tuple[int, int]:
        """Download + verify + unpack in one pass; one more try if the copy is corrupt."""
        if self.progress is not None:
            self.progress.add_total(artifact.size)
        problems: list[str] = []
        for attempt in (1, 2):

            def fill(tmp: Path) -> int:
                return self._stream_once(store, artifact, tmp)

            try:
                _, nbytes = restore.ensure_layer(self.layers, artifact.sha256, fill)
                return attempt, int(nbytes or 0)
            except _Corrupt as exc:
                problems.append(str(exc))
                continue
        raise ArtifactCorruptError(
            f"artifact {artifact.label} ({artifact.key}) is corrupt: {problems[-1]} on {len(problems)} downloads; "
            f"the store copy does not match its manifest: re-publish {artifact.key} (or remove it from the store)"
        )

    def _stream_once(self, store: Store, artifact: Artifact, tmp: Path) -> int:
        def transfer() -> int:
            # A fresh temp dir for each transient retry: start from empty.
            for child in tmp.iterdir():
                restore.remove_tree(child)
            with store.open(artifact.rel, "rb", block_size=_block_size(store)) as raw:
                reader = _HashingReader(raw, self.progress)
                error: BaseException | None = None
                nbytes = 0
                try:
                    nbytes = restore.extract_fileobj(reader, artifact.fmt, tmp, artifact.label)
                except (restore.RestoreError, restore.UnsafeArchiveError) as exc:
                    error = exc
                reader.drain()  # hash every byte, so a bad copy is told from a bad archive
            got_sha, got_size = reader.sha.hexdigest(), reader.size
            if got_size != artifact.size or got_sha != artifact.sha256:
                raise _Corrupt(
                    f"got size {got_size} sha256 {got_sha[:12]}..., manifest says size "
                    f"{artifact.size} sha256 {artifact.sha256[:12]}..."
                )
            if error is not None:
                raise error  # the published archive itself is bad: not retried
            return nbytes

        return store._call("download", artifact.rel, transfer)

    # -- archives (for images and tools that want the file itself) ------------------------
    def fetch_archive(self, store: Store, artifact: Artifact) -> tuple[Path, bool]:
        """Download to tmp/, verify sha256 and size, place at archives/<sha256>. One more try
        for a corrupt copy. An image stored as chunks is assembled instead (`_assemble_image`).
        Returns (path, downloaded now)."""
        with self.lock(artifact.sha256):
            if artifact.chunks is not None:
                final = self.archives / artifact.sha256
                return (final, False) if final.is_file() else self._assemble_image(store, artifact)
            return self._fetch_archive_locked(store, artifact)

    def _fetch_archive_locked(self, store: Store, artifact: Artifact) -> tuple[Path, bool]:
        final = self.archives / artifact.sha256
        if final.is_file():
            return final, False
        if self.progress is not None:
            self.progress.add_total(artifact.size)
        problems = []
        for _ in (1, 2):
            part = self.tmp / f"{artifact.sha256}.{os.urandom(4).hex()}.part"
            try:

                def transfer(part: Path = part) -> tuple[str, int]:
                    with store.open(artifact.rel, "rb", block_size=_block_size(store)) as raw, open(part, "wb") as out:
                        reader = _HashingReader(raw, self.progress)
                        while chunk := reader.read(CHUNK):
                            out.write(chunk)
                    return reader.sha.hexdigest(), reader.size

                sha, size = store._call("download", artifact.rel, transfer)
                if sha == artifact.sha256 and size == artifact.size:
                    os.replace(part, final)
                    return final, True
                problems.append(f"got size {size} sha256 {sha[:12]}...")
            finally:
                part.unlink(missing_ok=True)
        raise ArtifactCorruptError(
            f"artifact {artifact.label} ({artifact.key}) is corrupt: {problems[-1]} on "
            f"2 downloads, manifest says size {artifact.size} sha256 {artifact.sha256[:12]}...; "
            f"re-publish {artifact.key} (or remove it from the store)"
        )

    # -- listing and GC -------------------------------------------------------------------
    def entries(self) -> list[Entry]:
        out = []
        digests = (
            {p.stem for p in self.layers.glob("*.json") if _DIGEST.fullmatch(p.stem)}
            | {p.name for p in self.layers.iterdir() if len(p.name) == 64 and p.is_dir()}
            | {p.name for p in self.archives.iterdir() if len(p.name) == 64}
        )
        for digest in sorted(digests):
            meta_path = self.layers / f"{digest}.json"
            try:
                meta = json.loads(meta_path.read_text())
                last = meta_path.stat().st_mtime
            except (FileNotFoundError, json.JSONDecodeError):
                meta, last = {}, 0.0
            layer = self.layers / digest
            archive = self.archives / digest
            archive_bytes = archive.stat().st_size if archive.is_file() else 0
            if archive.is_file():
                last = max(last, archive.stat().st_mtime)
            layer_bytes = 0
            if layer.is_dir() and not self.is_mounted(layer):
                layer_bytes = int(meta["layer_bytes"]) if "layer_bytes" in meta else _du(layer)
            out.append(
                Entry(
                    digest,
                    meta.get("key", "?"),
                    meta.get("kind", "?"),
                    layer_bytes,
                    archive_bytes,
                    last,
                    len(self.live_leases(digest)),
                    layer,
                )
            )
        return out

    def _remove_stale_tmp(self) -> int:
        """Remove `.tmp-` layers and partial downloads whose digest lock is free (dead writers)."""
        n = 0
        for tmp in list(self.layers.glob(".tmp-*")) + list(self.layers.glob(".trash-*")):
            digest = tmp.name.split("-")[1] if tmp.name.startswith(".tmp-") else None
            if digest and _DIGEST.fullmatch(digest):
                lock = self.lock(digest)
                try:
                    lock.acquire(timeout=0)
                except LockTimeout:
                    continue
                try:
                    restore.remove_tree(tmp)
                finally:
                    lock.release()
            else:
                restore.remove_tree(tmp)
            n += 1
        for part in self.tmp.glob("*.part"):
            if not _DIGEST.fullmatch(part.name.split(".")[0]):
                continue
            lock = self.lock(part.name.split(".")[0])
            try:
                lock.acquire(timeout=0)
            except LockTimeout:
                continue
            try:
                part.unlink(missing_ok=True)
                n += 1
            finally:
                lock.release()
        return n

    def state_dir(self) -> Path:
        """The node state directory sandboxes record their host resources in:
        $MINISANDBOX_STATE, else `state/` in this cache (the default cache's is the one
        `minisandbox.paths.state_dir()` names)."""
        env = os.environ.get("MINISANDBOX_STATE")
        return Path(env) if env else self.root / "state"

    def gc(self, max_bytes: int | None = None) -> GcReport:
        """Evict least-recently-used unleased layers until the cache holds <= max_bytes.

        A layer with a live lease is never removed (its archive file may be). Stale leases
        and dead temporary dirs are always cleaned, and so are the cgroups, scratch
        directories and mounts of dead controllers recorded in the node state directory
        (`state_dir()`; minisandbox.sandbox.leftovers)."""
        report = GcReport(stale_removed=self._remove_stale_tmp(), leftovers=reap(self.state_dir()))
        entries = self.entries()
        total = sum(e.layer_bytes + e.archive_bytes for e in entries)
        report.total_before = total
        if max_bytes is not None:
            candidates = sorted((e for e in entries if e.leases == 0), key=lambda e: e.last_used)
            for e in candidates:
                if total <= max_bytes:
                    break
                freed = self._evict(e, whole=True)
                if freed is not None:
                    total -= freed
                    report.freed += freed
                    report.removed.append(e)
            for e in sorted(
                (e for e in entries if e.leases and e.archive_bytes and not self.is_mounted(e.path)),
                key=lambda e: e.last_used,
            ):
                if total <= max_bytes:
                    break
                freed = self._evict(e, whole=False)  # keep the leased layer, drop its archive
                if freed:
                    total -= freed
                    report.freed += freed
        report.kept_leased = sum(1 for e in self.entries() if e.leases)
        report.total_after = total
        return report

    def holders(self) -> dict[int, str]:
        """Live processes holding a lease on any layer: pid -> what they leased it for
        (the lease's owner, e.g. a task id). Stale leases are removed on the way."""
        out: dict[int, str] = {}
        for d in sorted(p for p in self.leases.iterdir() if _DIGEST.fullmatch(p.name)):
            for f in self.live_leases(d.name):
                with contextlib.suppress(FileNotFoundError, json.JSONDecodeError):
                    data = json.loads(f.read_text())
                    owners = {o for o in (out.get(int(data["pid"]), ""), str(data.get("owner") or "")) if o}
                    out[int(data["pid"])] = ", ".join(sorted(owners))
        return out

    def clear(self, *, force: bool = False, grace: float = 5.0) -> ClearReport:
        """Unmount every layer and remove the whole cache directory.

        Why not `rm -rf`: mounted image layers are read-only file systems, so removing the
        tree fails on every file in them. Layers leased by a live process (a sandbox, an
        evaluation) are refused with the holders named, unless `force`: then those
        processes are ended (SIGTERM, SIGKILL after `grace` seconds) and the host resources
        of dead controllers (cgroups, scratch dirs, mounts) are reaped first. Mounts under
        the cache that cannot be undone stop the removal (nothing is half-deleted through a
        mount)."""
        holders = self.holders()
        holders.pop(os.getpid(), None)  # this process leases nothing it would keep
        if holders and not force:
            raise CacheBusy(
                f"cache {self.root} is in use: layers leased by {_name_holders(holders)}; "
                f"end them first, or pass --force to end them"
            )
        report = ClearReport(self.root, ended=holders)
        _end_processes(holders, grace)
        report.leftovers = reap(self.state_dir())
        entries = self.entries()
        report.entries = len(entries)
        report.freed = sum(e.layer_bytes + e.archive_bytes for e in entries)
        for e in entries:
            if self.is_mounted(e.path) and self._unmount(e.path):
                report.unmounted += 1
        if not self.stop_mounts():
            raise CacheBusy(
                f"cache {self.root}: the rootless mount holder still has an image in use; "
                f"end the sandboxes using it (or pass --force) and run `minisandbox cache clear` again"
            )
        for mountpoint in reversed(_mounts_under(self.root)):  # e.g. left by a killed controller
            restore.unmount(Path(mountpoint))
        left = _mounts_under(self.root)
        if left:
            raise CacheBusy(
                f"cache {self.root}: {len(left)} mount(s) could not be undone ({left[0]}"
                f"{', ...' if len(left) > 1 else ''}); nothing was removed; `umount` them and retry"
            )
        restore.remove_tree(self.root)
        return report

    def _evict(self, e: Entry, *, whole: bool) -> int | None:
        lock = self.lock(e.digest)
        try:
            lock.acquire(timeout=0)
        except LockTimeout:
            return None  # being fetched right now: in use
        try:
            freed = 0
            if whole:
                if self.live_leases(e.digest):
                    return None
                layer = self.layers / e.digest
                if self.is_mounted(layer):
                    if not self._unmount(layer):
                        return None  # busy: still used by a sandbox without a lease
                    layer.rmdir()
                    (self.layers / f"{e.digest}.json").unlink(missing_ok=True)
                elif layer.is_dir():
                    trash = self.layers / f".trash-{os.urandom(6).hex()}"
                    os.rename(layer, trash)  # atomic: the layer disappears whole
                    (self.layers / f"{e.digest}.json").unlink(missing_ok=True)
                    freed += e.layer_bytes
                else:
                    (self.layers / f"{e.digest}.json").unlink(missing_ok=True)
            archive = self.archives / e.digest
            if archive.is_file():
                self._chunk_list_of(e.digest).unlink(missing_ok=True)  # its chunks can no longer be reused
                archive.unlink()
                freed += e.archive_bytes
            if whole:
                with contextlib.suppress(OSError):
                    (self.leases / e.digest).rmdir()  # empty once no lease is left
        finally:
            lock.release()
        if whole:
            for trash in self.layers.glob(".trash-*"):
                restore.remove_tree(trash)
        return freed


def check_cache_dir(root: Path) -> None:
    """Refuse a directory that is not a cache before anything removes it (`cache clear
    --cache ~/thesis` must not delete a thesis). `Cache(root)` creates the layout, so
    check before constructing one."""
    if not (Path(root) / "layers").is_dir():
        raise CacheError(
            f"{root} does not look like a minisandbox cache (no layers/ directory): not removing it; check --cache"
        )


def _name_holders(holders: dict[int, str]) -> str:
    shown = [f"pid {pid}" + (f" ({owner})" if owner else "") for pid, owner in sorted(holders.items())[:5]]
    more = f" and {len(holders) - 5} more" if len(holders) > 5 else ""
    return ", ".join(shown) + more


def _end_processes(holders: dict[int, str], grace: float) -> None:
    """SIGTERM each holder, SIGKILL those still alive after `grace` seconds. A pid is
    signalled only while its start time is the one seen now (never a recycled pid)."""
    import signal

    starts = {pid: proc_start(pid) for pid in holders}
    for sig in (signal.SIGTERM, signal.SIGKILL):
        alive = [pid for pid, start in starts.items() if start is not None and proc_start(pid) == start]
        for pid in alive:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
        deadline = time.monotonic() + grace
        while alive and time.monotonic() < deadline:
            time.sleep(0.05)
            alive = [pid for pid in alive if proc_start(pid) == starts[pid]]
        if not alive:
            return


def _mounts_under(root: Path) -> list[str]:
    """Mount points at or under `root` in this mount namespace, outermost first."""
    base = str(Path(root).resolve())
    points = []
    with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as f:
        for line in f:
            # field 5 is the mount point, with space, tab, newline, backslash octal-escaped
            point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), line.split()[4])
            if point == base or point.startswith(base + "/"):
                points.append(point)
    return sorted(set(points))


def kernel_mount(fmt: str = "squashfs") -> bool:
    """Mount images with the kernel (root with loop devices) rather than squashfuse."""
    return restore.can_mount_images(fmt)


class _Corrupt(StoreError):
    """Download did not match the manifest (permanent for the retry loop of one transfer)."""


def _du(path: Path) -> int:
    """Bytes under `path` (for a layer whose metadata was lost when its writer died)."""
    total = 0
    for root, dirs, files in os.walk(path):
        for name in files + dirs:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(root, name)).st_size
    return total


__all__ = [
    "Artifact",
    "ArtifactCorruptError",
    "Cache",
    "CacheBusy",
    "CacheError",
    "ClearReport",
    "Entry",
    "GcReport",
    "Lease",
    "LayerResult",
]
