"""Chunked images on a node: assembled from a real local store (published with the
pipeline's own code: chunks in packs, read with coalesced ranged reads), reusing chunks of
images the cache holds, every byte checked; tampered packs, ranges, offsets and lists are
refused with one line naming them; stores of the older layout (one object per chunk) still
work; GC removes assembled images."""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
from pathlib import Path

import pytest

from minisandbox.fsutil import file_digest
from minisandbox.manifest import StoreDataError, chunk_list_document, chunk_path, pack_index_path, pack_path
from minisandbox.node import chunks as chunkmod
from minisandbox.node.cache import Artifact, ArtifactCorruptError, Cache
from minisandbox.node.chunks import ChunkedImage, pack_locations, read_chunk_list, upload_image_packs
from minisandbox.node.iobudget import IOBudget
from minisandbox.node.store import Store
from tests.fixtures.runtime import publish_tree

pytestmark = pytest.mark.skipif(
    not shutil.which("mksquashfs"), reason="squashfs-tools not installed (apt-get install squashfs-tools)"
)


class CountingStore(Store):
    """The real Store, recording every object read (what a node fetched) and every range."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.reads: list[str] = []
        self.ranges: list[tuple[str, int, int]] = []

    def read_bytes(self, rel: str) -> bytes:
        self.reads.append(rel)
        return super().read_bytes(rel)

    def read_range(self, rel: str, start: int, end: int) -> bytes:
        self.reads.append(rel)
        self.ranges.append((rel, start, end))
        return super().read_range(rel, start, end)

    def open(self, rel: str, mode: str = "rb", **kw):
        self.reads.append(rel)
        return super().open(rel, mode, **kw)

    def chunk_reads(self) -> list[str]:
        """Reads of chunk data: chunk objects (older stores) or packs."""
        return [r for r in self.reads if r.startswith("chunks/") or (r.startswith("packs/") and not r.endswith(".idx"))]

    def clear(self) -> None:
        self.reads.clear()
        self.ranges.clear()


def covered(ranges: list[tuple[str, int, int]], located: list[tuple[str, int, str, int]]) -> dict[str, int]:
    """chunk sha256 -> how many of `ranges` hold the whole chunk."""
    out: dict[str, int] = {}
    for d, n, pack, off in located:
        out[d] = sum(1 for rel, a, b in ranges if rel == pack_path(pack) and a <= off and off + n <= b)
    return out


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
    return publish_tree(
        store,
        "env",
        key,
        env_tree(tmp / "trees" / key, i),
        tmp / "work",
        extra={"interpreter": {"version": "3.11.9", "prefix": "/usr"}},
        image=True,
        chunked=True,
        whole=whole,
    )


def new_cache(tmp_path: Path) -> Cache:
    return Cache(tmp_path / "cache", budget=IOBudget(2, tmp_path / "cache" / "budget"))


def chunks_of(store: Store, manifest: dict) -> list[tuple[str, int]]:
    return list(read_chunk_list(store, ChunkedImage.from_manifest(manifest)).chunks)


def located(store: Store, manifest: dict) -> list[tuple[str, int, str, int]]:
    """(chunk, length, pack, offset) of each chunk of the manifest's image, in order."""
    return read_chunk_list(store, ChunkedImage.from_manifest(manifest)).located()


def rewrite_list(store: Store, m: dict, doc: dict | bytes) -> dict:
    """Replace the manifest's chunk list in the store, and return a copy of the manifest
    vouching for it (someone who can write both: the list must still be safe)."""
    data = doc if isinstance(doc, bytes) else json.dumps(doc).encode()
    m = json.loads(json.dumps(m))
    Path(store.path(f"artifacts/env/{m['image']['chunks']['artifact']}")).write_bytes(data)
    m["image"]["chunks"].update(sha256=hashlib.sha256(data).hexdigest(), size=len(data))
    return m


@pytest.fixture
def two_envs(tmp_path: Path) -> dict:
    (tmp_path / "work").mkdir()
    store = Store(tmp_path / "store")
    return {
        "store": store,
        "url": str(tmp_path / "store"),
        "a": publish_env(store, tmp_path, 0),
        "b": publish_env(store, tmp_path, 1),
    }


def test_published_as_packs_without_the_whole_image(two_envs: dict) -> None:
    store, m = two_envs["store"], two_envs["a"]
    assert m["image"]["whole"] is False and m["image"]["chunks"]["artifact"] == f"{m['key']}.chunks.json"
    assert not store.exists(f"artifacts/env/{m['image']['artifact']}")
    where = located(store, m)
    assert len(where) == m["image"]["chunks"]["count"] and sum(n for _, n, _, _ in where) == m["image"]["size"]
    for d, n, pack, off in where:  # every chunk is where its list says, in a pack with an index
        data = Path(store.path(pack_path(pack))).read_bytes()
        assert hashlib.sha256(data[off : off + n]).hexdigest() == d
        assert hashlib.sha256(data).hexdigest() == pack and store.exists(pack_index_path(pack))
    assert not os.path.exists(store.path("chunks"))  # no object per chunk any more
    # the second env's image shares the common files' chunks: the store holds them once,
    # and the second list points into the first image's packs for them
    b_where = located(store, two_envs["b"])
    shared = {d for d, _, _, _ in where} & {d for d, _, _, _ in b_where}
    assert sum(n for d, n, _, _ in where if d in shared) > 0.5 * m["image"]["size"]
    a_packs = {p for _, _, p, _ in where}
    assert all(p in a_packs for d, _, p, _ in b_where if d in shared)
    stored = sum(p.stat().st_size for p in Path(store.path("packs")).rglob("*") if p.is_file())
    assert stored < 0.8 * (m["image"]["size"] + two_envs["b"]["image"]["size"])


def test_cold_assembly_reads_few_ranges_and_checks_the_image(two_envs: dict, tmp_path: Path) -> None:
    store = CountingStore(two_envs["url"])
    m = two_envs["a"]
    img = Artifact.image_from_manifest(store, m)
    cache = new_cache(tmp_path)
    path, made = cache.fetch_archive(store, img)
    assert made and path == cache.archives / m["image"]["sha256"]
    assert file_digest(path) == (m["image"]["sha256"], m["image"]["size"])
    where = located(store, m)
    # every distinct chunk read exactly once, in coalesced ranges (not one request per chunk)
    assert set(covered(store.ranges, where).values()) == {1}
    assert len(store.ranges) <= -(-m["image"]["size"] // chunkmod.RANGE_BYTES) + len({p for *_, p, _ in where})
    assert len(store.ranges) < len({d for d, *_ in where}) / 4
    assert all(r.startswith("packs/") for r in store.chunk_reads())  # only ranges, no whole pack
    assert f"artifacts/env/{m['image']['artifact']}" not in store.reads  # the whole image is not in the store
    assert (
        json.loads((cache.archives / f"{m['image']['sha256']}.chunks.json").read_text())["size"] == m["image"]["size"]
    )
    assert not any(cache.tmp.iterdir())
    store.clear()
    assert cache.fetch_archive(store, img) == (path, False) and store.reads == []  # warm


def test_second_image_reuses_the_chunks_this_node_holds(two_envs: dict, tmp_path: Path) -> None:
    store = CountingStore(two_envs["url"])
    cache = new_cache(tmp_path)
    cache.fetch_archive(store, Artifact.image_from_manifest(store, two_envs["a"]))
    store.clear()
    b = two_envs["b"]
    path, made = cache.fetch_archive(store, Artifact.image_from_manifest(store, b))
    assert made and file_digest(path) == (b["image"]["sha256"], b["image"]["size"])
    held = {d for d, _ in chunks_of(store, two_envs["a"])}
    where = located(store, b)
    wanted = {d for d, *_ in where}
    assert held & wanted, "the two images share no chunk: the fixture is wrong"
    # the chunks the node did not hold are read once; shared ones at most as a small gap
    hits = covered(store.ranges, where)
    assert all(hits[d] == 1 for d in wanted - held)
    new_bytes = sum(n for d, n in dict(chunks_of(store, b)).items() if d not in held)
    read = sum(e - s for _, s, e in store.ranges)
    assert read <= new_bytes + chunkmod.GAP_BYTES * len(store.ranges) and read < b["image"]["size"] / 2


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
    store.clear()
    b = two_envs["b"]
    path, _ = cache.fetch_archive(store, Artifact.image_from_manifest(store, b))
    assert file_digest(path) == (b["image"]["sha256"], b["image"]["size"])
    hits = covered(store.ranges, located(store, b))
    assert hits[shared[0]] >= 1


def _pack_of(store: Store, m: dict, i: int) -> tuple[str, int, Path, int]:
    d, n, pack, off = located(store, m)[i]
    return d, n, Path(store.path(pack_path(pack))), off


def test_tampered_pack_in_the_store_is_refused_by_name(two_envs: dict, tmp_path: Path) -> None:
    store = two_envs["store"]
    m = two_envs["a"]
    _, _, p, off = _pack_of(store, m, 3)
    rel = str(p.relative_to(store.root))
    data = bytearray(p.read_bytes())
    data[off + 5] ^= 0xFF  # a wrong digest inside a pack
    p.write_bytes(bytes(data))
    cache = new_cache(tmp_path)
    with pytest.raises(ArtifactCorruptError) as exc:
        cache.fetch_archive(store, Artifact.image_from_manifest(store, m))
    msg = str(exc.value)
    assert rel in msg and m["key"] in msg and "corrupt" in msg and f"offset {off}" in msg and "\n" not in msg
    assert not (cache.archives / m["image"]["sha256"]).exists() and not any(cache.tmp.iterdir())
    p.write_bytes(bytes(data[:off]))  # truncated: the ranged read comes back short
    with pytest.raises(ArtifactCorruptError) as exc:
        cache.fetch_archive(store, Artifact.image_from_manifest(store, m))
    msg = str(exc.value)
    assert rel in msg and "truncated" in msg and "\n" not in msg
    p.unlink()  # a missing pack is named too
    with pytest.raises(ArtifactCorruptError, match=f"{rel}.*missing"):
        cache.fetch_archive(store, Artifact.image_from_manifest(store, m))
    assert not any(cache.tmp.iterdir())


def test_offsets_that_leave_their_pack_or_miss_their_chunk_are_refused(two_envs: dict, tmp_path: Path) -> None:
    """A list the manifest vouches for (someone rewrote both): an offset past the end of its
    pack fails the schema (nothing is read); one inside it but at other bytes fails the
    chunk's digest. Both one line, nothing left behind."""
    store = two_envs["store"]
    lst = Path(store.path(f"artifacts/env/{two_envs['a']['image']['chunks']['artifact']}"))
    doc = json.loads(lst.read_bytes())
    pack_size = doc["packs"][doc["at"][2][0]][1]
    cache = new_cache(tmp_path)
    past = json.loads(json.dumps(doc))
    past["at"][2][1] = pack_size - 1
    m = rewrite_list(store, two_envs["a"], past)
    with pytest.raises(StoreDataError) as exc:
        cache.fetch_archive(store, Artifact.image_from_manifest(store, m))
    msg = str(exc.value)
    assert "'at' entry 2" in msg and "past the end" in msg and "\n" not in msg
    shifted = json.loads(json.dumps(doc))
    shifted["at"][2][1] = doc["at"][2][1] + 1
    m = rewrite_list(store, two_envs["a"], shifted)
    with pytest.raises(ArtifactCorruptError) as exc:
        cache.fetch_archive(store, Artifact.image_from_manifest(store, m))
    assert "does not have sha256" in str(exc.value) and "\n" not in str(exc.value)
    assert not any(cache.archives.iterdir()) and not any(cache.tmp.iterdir())


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
    m = publish_tree(
        store,
        "env",
        key,
        tree,
        tmp_path / "work",
        image=True,
        chunked=True,
        whole=False,
        archive=False,
        extra={"interpreter": {"version": "3.11.9", "prefix": "/usr"}},
    )
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
    assert set(covered(store.ranges, located(store, m)).values()) == {1}
    # warm: nothing read from the store, the same tree
    store.clear()
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


def test_an_empty_mountpoint_left_behind_is_not_taken_for_an_unpacked_layer(no_archive: dict, tmp_path: Path) -> None:
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


def test_publish_packs_only_the_chunks_the_store_lacks(two_envs: dict, tmp_path: Path) -> None:
    from minisandbox.pipeline.chunking import cut
    from minisandbox.pipeline.pack import pack_image

    store = two_envs["store"]
    tree = env_tree(tmp_path / "trees" / "third", 2)
    img = tmp_path / "third.squashfs"
    pack_image(tree, img)
    cutting = cut(img)
    chunks = list(cutting.chunks)
    where, _ = pack_locations(store)
    lacking = [d for d in dict(chunks) if d not in where]
    assert 0 < len(lacking) < len({d for d, _ in chunks})
    done = upload_image_packs(store, img, cutting.image_sha256, chunks)
    assert done.chunks_new == len(lacking) and done.bytes_written == sum(dict(chunks)[d] for d in lacking)
    assert done.packs_written == 1  # a few hundred KB of new chunks: one pack, one PUT (+ its index)
    where, _ = pack_locations(store)
    assert all(d in where for d, _ in chunks)
    again = upload_image_packs(store, img, cutting.image_sha256, chunks)
    assert (again.packs_written, again.chunks_new, again.document) == (0, 0, done.document)


def test_a_pack_index_that_does_not_fill_its_pack_is_not_used(two_envs: dict, tmp_path: Path) -> None:
    """Publishers trust a pack's index only when its lengths fill the pack; otherwise the
    chunks are packed again (never referenced at an offset the index made up)."""
    store = two_envs["store"]
    d, n, p, _ = _pack_of(store, two_envs["a"], 0)
    pack = p.name
    idx = Path(store.path(pack_index_path(pack)))
    doc = json.loads(idx.read_bytes())
    doc["chunks"] = doc["chunks"][1:]
    idx.write_text(json.dumps(doc))
    chunkmod._INDEXES.clear()
    where, sizes = pack_locations(store)
    assert pack not in sizes and all(p != pack for p, _ in where.values())


def publish_old_layout(store: Store, m: dict) -> dict:
    """Turn a published image into the older store layout (schema 1: one object per chunk,
    no packs), as stores written before packs hold it."""
    cl = read_chunk_list(store, ChunkedImage.from_manifest(m))
    for d, n, pack, off in cl.located():
        store.put_bytes(chunk_path(d), Path(store.path(pack_path(pack))).read_bytes()[off : off + n])
    m = rewrite_list(store, m, chunk_list_document(cl.image_sha256, cl.size, list(cl.chunks)))
    store.put_text(f"artifacts/env/{m['key']}.manifest.json", json.dumps(m))
    return m


def test_a_store_of_the_older_layout_still_assembles(two_envs: dict, tmp_path: Path) -> None:
    m = publish_old_layout(two_envs["store"], two_envs["a"])
    shutil.rmtree(two_envs["store"].path("packs"))
    store = CountingStore(two_envs["url"])
    cache = new_cache(tmp_path)
    path, made = cache.fetch_archive(store, Artifact.image_from_manifest(store, m))
    assert made and file_digest(path) == (m["image"]["sha256"], m["image"]["size"])
    assert sorted(store.chunk_reads()) == sorted(chunk_path(d) for d in {d for d, _ in chunks_of(store, m)})
    assert store.ranges == []


@pytest.mark.s3
def test_assembly_from_s3_reuses_local_chunks(s3, tmp_path: Path) -> None:
    """The same on a real S3 API (moto_server): packed chunks read as ranges, shared ones reused."""
    from tests.fixtures.s3 import publish_synthetic_store

    info = publish_synthetic_store(
        s3.url("chunked"),
        tmp_path / "work",
        n_envs=2,
        n_repos=1,
        failed_env=False,
        images=True,
        chunked=True,
        payload=200_000,
    )
    store = CountingStore(s3.url("chunked"))
    (a_key, a), (b_key, b) = sorted(info["envs"].items())
    cache = new_cache(tmp_path)
    path, made = cache.fetch_archive(store, Artifact.image_from_manifest(store, a))
    assert made and file_digest(path) == (a["image"]["sha256"], a["image"]["size"])
    store.clear()
    path, made = cache.fetch_archive(store, Artifact.image_from_manifest(store, b))
    assert made and file_digest(path) == (b["image"]["sha256"], b["image"]["size"])
    held, wanted = {d for d, _ in chunks_of(store, a)}, {d for d, _ in chunks_of(store, b)}
    hits = covered(store.ranges, located(store, b))
    assert held & wanted and all(hits[d] == 1 for d in wanted - held)


@pytest.mark.s3
def test_a_publisher_reads_each_pack_index_of_a_remote_store_once_per_host(s3, tmp_path: Path, monkeypatch) -> None:
    """Indexes of a remote store are kept under the cache dir (per store): the next publishing
    process lists packs/ but reads no index it has seen; a kept index that no longer fills its
    pack is read from the store again."""
    monkeypatch.setenv("MINISANDBOX_CACHE", str(tmp_path / "node-cache"))
    (tmp_path / "work").mkdir()
    url = s3.url("kept")
    m = publish_env(Store(url), tmp_path, 0)
    chunkmod._INDEXES.clear()  # a new process
    store = CountingStore(url)
    where, sizes = pack_locations(store)
    assert sizes and not [r for r in store.reads if r.endswith(".idx")]
    assert {p for _, _, p, _ in located(store, m)} <= set(sizes)
    kept = next((tmp_path / "node-cache" / "pack-indexes").rglob("*.idx"))
    kept.write_text('{"schema": 1, "chunks": [["' + "a" * 64 + '", 1]]}')
    chunkmod._INDEXES.clear()
    store.clear()
    again, _ = pack_locations(store)
    assert again == where and len([r for r in store.reads if r.endswith(".idx")]) == 1


@pytest.mark.s3
def test_a_truncated_pack_on_s3_is_named_not_taken_for_an_unreachable_store(s3, tmp_path: Path) -> None:
    """S3 answers a range past the end of an object with 'range not satisfiable': that is a
    truncated pack (one line naming it and the artifact), not a store to retry or to check
    the credentials of."""
    (tmp_path / "work").mkdir()
    url = s3.url("trunc")
    m = publish_env(Store(url), tmp_path, 0)
    store = Store(url)
    _, _, pack, off = located(store, m)[-1]
    fs = s3.fs()
    key = f"{s3.bucket}/trunc/{pack_path(pack)}"
    fs.pipe_file(key, fs.cat_file(key)[: off // 2])
    cache = new_cache(tmp_path)
    with pytest.raises(ArtifactCorruptError) as exc:
        cache.fetch_archive(store, Artifact.image_from_manifest(store, m))
    msg = str(exc.value)
    assert pack_path(pack) in msg and "truncated" in msg and m["key"] in msg and "\n" not in msg
    assert not any(cache.tmp.iterdir())


def test_plan_segments_coalesces_neighbours_of_one_pack_within_gap_and_limit() -> None:
    from minisandbox.node.chunks import plan_segments

    P, Q = "p" * 64, "q" * 64
    located = [
        ("a", 100, P, 0),
        ("b", 100, P, 100),  # adjacent: one read
        ("c", 100, P, 250),  # a 50-byte gap: the same read
        ("d", 100, P, 1000),  # gap too wide: a new read
        ("e", 100, Q, 1100),  # another pack: a new read
        ("f", 100, Q, 0),  # backwards in the pack: a new read
        ("g", 100, Q, 100),
        ("h", 100, Q, 200),
    ]
    segs = plan_segments(located, range(8), gap=100, limit=1000)
    assert [(s.pack, s.start, s.end, [i for i, *_ in s.items]) for s in segs] == [
        (P, 0, 350, [0, 1, 2]),
        (P, 1000, 1100, [3]),
        (Q, 1100, 1200, [4]),
        (Q, 0, 300, [5, 6, 7]),
    ]
    # a read stops before it would pass the limit
    segs = plan_segments(located, range(8), gap=100, limit=250)
    assert [(s.start, s.end) for s in segs] == [(0, 200), (250, 350), (1000, 1100), (1100, 1200), (0, 200), (200, 300)]
    # skipped chunks (held locally) are not read: their neighbours still join across them
    segs = plan_segments(located, [0, 2], gap=200, limit=1000)
    assert [(s.start, s.end, [i for i, *_ in s.items]) for s in segs] == [(0, 350, [0, 2])]
