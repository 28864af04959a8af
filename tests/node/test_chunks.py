"""Chunked images on a node: assembled from a real local store (published with the
pipeline's own code), reusing chunks of images the cache holds, every byte checked;
tampered chunks and lists are refused with their names; GC removes assembled images."""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
from pathlib import Path

import pytest

from minisandbox.fsutil import file_digest
from minisandbox.manifest import StoreDataError, chunk_path
from minisandbox.node.cache import Artifact, ArtifactCorruptError, Cache
from minisandbox.node.chunks import ChunkedImage, missing_chunks, read_chunk_list, upload_image_chunks
from minisandbox.node.iobudget import IOBudget
from minisandbox.node.store import Store
from tests.fixtures.runtime import publish_tree

pytestmark = pytest.mark.skipif(not shutil.which("mksquashfs"),
                                reason="squashfs-tools not installed (apt-get install squashfs-tools)")


class CountingStore(Store):
    """The real Store, recording every object read (what a node fetched)."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.reads: list[str] = []

    def read_bytes(self, rel: str) -> bytes:
        self.reads.append(rel)
        return super().read_bytes(rel)

    def open(self, rel: str, mode: str = "rb", **kw):
        self.reads.append(rel)
        return super().open(rel, mode, **kw)

    def chunk_reads(self) -> list[str]:
        return [r for r in self.reads if r.startswith("chunks/")]


def env_tree(root: Path, own: int, shared_seed: int = 1) -> Path:
    """An env-like tree: 1.5 MB of files every env has (same bytes), plus files of its own."""
    rng = random.Random(shared_seed)
    for i in range(30):
        p = root / "lib" / "common" / f"m{i:02d}.py"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(rng.randbytes(50_000))
    mine = random.Random(1000 + own)
    (root / "lib" / f"own{own}").mkdir(parents=True)
    (root / "lib" / f"own{own}" / "data.bin").write_bytes(mine.randbytes(300_000))
    (root / "pyvenv.cfg").write_text("home = /usr/bin\n")
    return root


def publish_env(store: Store, tmp: Path, i: int, *, whole: bool = False) -> dict:
    key = f"env-chunky{i}-{i:016x}"
    return publish_tree(store, "env", key, env_tree(tmp / "trees" / key, i), tmp / "work",
                        extra={"interpreter": {"version": "3.11.9", "prefix": "/usr"}}, image=True, chunked=True,
                        whole=whole)


def new_cache(tmp_path: Path) -> Cache:
    return Cache(tmp_path / "cache", budget=IOBudget(2, tmp_path / "cache" / "budget"))


def chunks_of(store: Store, manifest: dict) -> list[tuple[str, int]]:
    return list(read_chunk_list(store, ChunkedImage.from_manifest(manifest)).chunks)


@pytest.fixture
def two_envs(tmp_path: Path) -> dict:
    (tmp_path / "work").mkdir()
    store = Store(tmp_path / "store")
    return {"store": store, "url": str(tmp_path / "store"), "a": publish_env(store, tmp_path, 0),
            "b": publish_env(store, tmp_path, 1)}


def test_published_as_chunks_without_the_whole_image(two_envs: dict) -> None:
    store, m = two_envs["store"], two_envs["a"]
    assert m["image"]["whole"] is False and m["image"]["chunks"]["artifact"] == f"{m['key']}.chunks.json"
    assert not store.exists(f"artifacts/env/{m['image']['artifact']}")
    chunks = chunks_of(store, m)
    assert len(chunks) == m["image"]["chunks"]["count"] and sum(n for _, n in chunks) == m["image"]["size"]
    assert all(store.size(chunk_path(d)) == n for d, n in chunks)
    # the second env's image shares the common files' chunks: the store holds them once
    shared = {d for d, _ in chunks} & {d for d, _ in chunks_of(store, two_envs["b"])}
    assert sum(n for d, n in dict(chunks).items() if d in shared) > 0.5 * m["image"]["size"]
    stored = sum(os.path.getsize(p) for p in Path(store.path("chunks")).rglob("*") if p.is_file())
    assert stored < 0.8 * (m["image"]["size"] + two_envs["b"]["image"]["size"])


def test_cold_assembly_reads_each_chunk_once_and_checks_the_image(two_envs: dict, tmp_path: Path) -> None:
    store = CountingStore(two_envs["url"])
    m = two_envs["a"]
    img = Artifact.image_from_manifest(store, m)
    cache = new_cache(tmp_path)
    path, made = cache.fetch_archive(store, img)
    assert made and path == cache.archives / m["image"]["sha256"]
    assert file_digest(path) == (m["image"]["sha256"], m["image"]["size"])
    distinct = {d for d, _ in chunks_of(store, m)}
    assert sorted(store.chunk_reads()) == sorted(chunk_path(d) for d in distinct)
    assert f"artifacts/env/{m['image']['artifact']}" not in store.reads  # the whole image is not in the store
    assert json.loads((cache.archives / f"{m['image']['sha256']}.chunks.json").read_text())["size"] == m["image"]["size"]
    assert not any(cache.tmp.iterdir())
    store.reads.clear()
    assert cache.fetch_archive(store, img) == (path, False) and store.reads == []  # warm


def test_second_image_reuses_the_chunks_this_node_holds(two_envs: dict, tmp_path: Path) -> None:
    store = CountingStore(two_envs["url"])
    cache = new_cache(tmp_path)
    cache.fetch_archive(store, Artifact.image_from_manifest(store, two_envs["a"]))
    store.reads.clear()
    b = two_envs["b"]
    path, made = cache.fetch_archive(store, Artifact.image_from_manifest(store, b))
    assert made and file_digest(path) == (b["image"]["sha256"], b["image"]["size"])
    held = {d for d, _ in chunks_of(store, two_envs["a"])}
    wanted = {d for d, _ in chunks_of(store, b)}
    assert held & wanted, "the two images share no chunk: the fixture is wrong"
    # zero store reads for shared chunks: only the chunks the node did not hold
    assert sorted(store.chunk_reads()) == sorted(chunk_path(d) for d in wanted - held)


def test_a_changed_local_chunk_is_fetched_from_the_store_instead(two_envs: dict, tmp_path: Path) -> None:
    store = CountingStore(two_envs["url"])
    cache = new_cache(tmp_path)
    a_path, _ = cache.fetch_archive(store, Artifact.image_from_manifest(store, two_envs["a"]))
    a_chunks = chunks_of(store, two_envs["a"])
    shared = [d for d, _ in chunks_of(store, two_envs["b"]) if d in dict(a_chunks)]
    offset = 0
    for d, n in a_chunks:  # damage the first shared chunk inside the cached image A
        if d == shared[0]:
            break
        offset += n
    with open(a_path, "r+b") as f:
        f.seek(offset + 10)
        f.write(b"\0tampered\0")
    store.reads.clear()
    b = two_envs["b"]
    path, _ = cache.fetch_archive(store, Artifact.image_from_manifest(store, b))
    assert file_digest(path) == (b["image"]["sha256"], b["image"]["size"])
    assert chunk_path(shared[0]) in store.chunk_reads()
    assert all(chunk_path(d) not in store.chunk_reads() for d in shared[1:])


def test_tampered_chunk_in_the_store_is_refused_by_name(two_envs: dict, tmp_path: Path) -> None:
    store = two_envs["store"]
    m = two_envs["a"]
    digest, _ = chunks_of(store, m)[3]
    p = Path(store.path(chunk_path(digest)))
    data = bytearray(p.read_bytes())
    data[5] ^= 0xFF
    p.write_bytes(bytes(data))
    cache = new_cache(tmp_path)
    with pytest.raises(ArtifactCorruptError) as exc:
        cache.fetch_archive(store, Artifact.image_from_manifest(store, m))
    msg = str(exc.value)
    assert chunk_path(digest) in msg and m["key"] in msg and "corrupt" in msg and "\n" not in msg
    assert not (cache.archives / m["image"]["sha256"]).exists() and not any(cache.tmp.iterdir())
    p.unlink()  # a missing chunk is named too
    with pytest.raises(ArtifactCorruptError, match=f"{chunk_path(digest)}.*missing"):
        cache.fetch_archive(store, Artifact.image_from_manifest(store, m))
    assert not any(cache.tmp.iterdir())


def test_tampered_chunk_list_is_refused(two_envs: dict, tmp_path: Path) -> None:
    store = two_envs["store"]
    m = two_envs["a"]
    lst = Path(store.path(f"artifacts/env/{m['image']['chunks']['artifact']}"))
    doc = json.loads(lst.read_bytes())
    doc["chunks"][0], doc["chunks"][1] = doc["chunks"][1], doc["chunks"][0]  # same chunks, other order
    lst.write_text(json.dumps(doc))
    cache = new_cache(tmp_path)
    with pytest.raises(ArtifactCorruptError, match=f"chunk list .*{m['key']}.chunks.json.*does not match its manifest"):
        cache.fetch_archive(store, Artifact.image_from_manifest(store, m))
    assert not any(cache.archives.iterdir()) and not any(cache.tmp.iterdir())


def test_bad_chunk_list_matching_its_manifest_names_the_field(two_envs: dict, tmp_path: Path) -> None:
    """A list whose digest the manifest vouches for but that breaks the schema (a bad
    publisher, or someone who rewrote both): StoreDataError naming the file and field."""
    store = two_envs["store"]
    m = json.loads(json.dumps(two_envs["a"]))
    lst = Path(store.path(f"artifacts/env/{m['image']['chunks']['artifact']}"))
    doc = json.loads(lst.read_bytes())
    doc["chunks"][2][0] = "../../../etc/passwd"
    data = json.dumps(doc).encode()
    lst.write_bytes(data)
    m["image"]["chunks"].update(sha256=hashlib.sha256(data).hexdigest(), size=len(data))
    cache = new_cache(tmp_path)
    with pytest.raises(StoreDataError) as exc:
        cache.fetch_archive(store, Artifact.image_from_manifest(store, m))
    msg = str(exc.value)
    assert f"artifacts/env/{m['key']}.chunks.json" in msg and "'chunks.2.0'" in msg and "\n" not in msg
    assert not any(cache.archives.iterdir()) and not any(cache.tmp.iterdir())


def test_gc_removes_assembled_images_and_their_lists(two_envs: dict, tmp_path: Path) -> None:
    store = two_envs["store"]
    cache = new_cache(tmp_path)
    for k in ("a", "b"):
        cache.fetch_archive(store, Artifact.image_from_manifest(store, two_envs[k]))
    entries = cache.entries()
    assert {e.digest for e in entries} == {two_envs[k]["image"]["sha256"] for k in ("a", "b")}
    assert all(e.archive_bytes > 0 for e in entries)
    report = cache.gc(max_bytes=0)
    assert len(report.removed) == 2 and report.total_after == 0
    assert not any(cache.archives.iterdir())


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture
def no_archive(tmp_path: Path) -> dict:
    """An env published as config `archive: false` does it: image chunks and list only."""
    (tmp_path / "work").mkdir()
    store = Store(tmp_path / "store")
    key = "env-bare0-0000000000000000"
    tree = env_tree(tmp_path / "trees" / key, 0)
    m = publish_tree(store, "env", key, tree, tmp_path / "work", image=True, chunked=True, whole=False,
                     archive=False, extra={"interpreter": {"version": "3.11.9", "prefix": "/usr"}})
    return {"store": store, "url": str(tmp_path / "store"), "m": m, "tree": tree}


def test_without_an_archive_a_node_that_cannot_mount_unpacks_the_image(no_archive: dict, tmp_path: Path) -> None:
    from minisandbox.node import restore
    from minisandbox.node.runtime import ready_layer

    store, m = CountingStore(no_archive["url"]), no_archive["m"]
    assert "artifact" not in m and not list(Path(store.path("artifacts")).rglob("*.tar.*"))
    cache = new_cache(tmp_path)
    result, lease = ready_layer(cache, store, m, mount=False, owner="t1")
    assert result.downloaded and result.path == cache.layers / m["image"]["sha256"]
    assert not restore.is_mounted(result.path) and _files(result.path) == _files(no_archive["tree"])
    assert sorted(store.chunk_reads()) == sorted(chunk_path(d) for d in {d for d, _ in chunks_of(store, m)})
    # warm: nothing read from the store, the same tree
    store.reads.clear()
    again, lease2 = ready_layer(cache, store, m, mount=False, owner="t2")
    assert not again.downloaded and again.path == result.path and store.reads == []
    # GC never removes a leased tree (over budget it drops only the assembled image), and
    # removes the tree once released
    assert (cache.archives / m["image"]["sha256"]).is_file()
    assert cache.gc(max_bytes=0).removed == [] and result.path.is_dir()
    assert not (cache.archives / m["image"]["sha256"]).exists() and _files(result.path) == _files(no_archive["tree"])
    lease.unlink()
    lease2.unlink()
    report = cache.gc(max_bytes=0)
    assert [e.digest for e in report.removed] == [m["image"]["sha256"]] and report.freed > 0
    assert not result.path.exists() and not any(cache.archives.iterdir())


def test_an_empty_mountpoint_left_behind_is_not_taken_for_an_unpacked_layer(no_archive: dict,
                                                                           tmp_path: Path) -> None:
    from minisandbox.node.runtime import ready_layer

    store, m = no_archive["store"], no_archive["m"]
    cache = new_cache(tmp_path)
    (cache.layers / m["image"]["sha256"]).mkdir(parents=True)  # a mount attempt died after mkdir
    result, _ = ready_layer(cache, store, m, mount=False)
    assert result.downloaded and _files(result.path) == _files(no_archive["tree"])


@pytest.mark.skipif(os.geteuid() != 0 or not os.path.exists("/dev/loop-control"), reason="needs root and loop devices")
def test_an_unpacked_image_serves_a_later_mount_request_without_mounting(no_archive: dict, tmp_path: Path) -> None:
    from minisandbox.node import restore
    from minisandbox.node.runtime import ready_layer

    store, m = no_archive["store"], no_archive["m"]
    cache = new_cache(tmp_path)
    first, _ = ready_layer(cache, store, m, mount=False)
    second, _ = ready_layer(cache, store, m, mount=True, insist=True)
    assert second.path == first.path and not second.downloaded and not restore.is_mounted(second.path)
    assert _files(second.path) == _files(no_archive["tree"])


def test_publish_uploads_only_the_chunks_the_store_lacks(two_envs: dict, tmp_path: Path) -> None:
    from minisandbox.pipeline.chunks import cut
    from minisandbox.pipeline.pack import pack_image

    store = two_envs["store"]
    tree = env_tree(tmp_path / "trees" / "third", 2)
    img = tmp_path / "third.squashfs"
    pack_image(tree, img)
    chunks = list(cut(img).chunks)
    lacking = missing_chunks(store, [d for d, _ in chunks])
    assert 0 < len(lacking) < len({d for d, _ in chunks})
    assert upload_image_chunks(store, img, chunks) == (len(lacking), sum(dict(chunks)[d] for d in lacking))
    assert missing_chunks(store, [d for d, _ in chunks]) == []
    assert upload_image_chunks(store, img, chunks) == (0, 0)


@pytest.mark.s3
def test_assembly_from_s3_reuses_local_chunks(s3, tmp_path: Path) -> None:
    """The same on a real S3 API (moto_server): chunks fetched in parallel, shared ones reused."""
    from tests.fixtures.s3 import publish_synthetic_store

    info = publish_synthetic_store(s3.url("chunked"), tmp_path / "work", n_envs=2, n_repos=1, failed_env=False,
                                   images=True, chunked=True, payload=200_000)
    store = CountingStore(s3.url("chunked"))
    (a_key, a), (b_key, b) = sorted(info["envs"].items())
    cache = new_cache(tmp_path)
    path, made = cache.fetch_archive(store, Artifact.image_from_manifest(store, a))
    assert made and file_digest(path) == (a["image"]["sha256"], a["image"]["size"])
    store.reads.clear()
    path, made = cache.fetch_archive(store, Artifact.image_from_manifest(store, b))
    assert made and file_digest(path) == (b["image"]["sha256"], b["image"]["size"])
    held, wanted = {d for d, _ in chunks_of(store, a)}, {d for d, _ in chunks_of(store, b)}
    assert held & wanted and sorted(store.chunk_reads()) == sorted(chunk_path(d) for d in wanted - held)
