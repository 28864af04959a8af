"""push / pull / verify of images stored as chunks (the pipeline's default): missing packs
(with their indexes) copied once, checked on the way; verify names the artifact and the pack
(quick: present with its size; full: every chunk's digest, and the list reassembles to the
image). Stores of the older layout (one object per chunk) mirror and verify as before."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from minisandbox.cli import main
from minisandbox.index import CATALOG
from minisandbox.manifest import chunk_path, pack_index_path
from minisandbox.node.chunks import ChunkedImage, needed_objects, read_chunk_list
from minisandbox.node.store import Store
from minisandbox.node.sync import SyncError, mirror, verify
from tests.fixtures.s3 import S3, publish_synthetic_store

pytestmark = pytest.mark.skipif(
    not shutil.which("mksquashfs"), reason="mksquashfs not installed (apt-get install squashfs-tools)"
)


@pytest.fixture
def src(tmp_path: Path) -> dict:
    return publish_synthetic_store(
        str(tmp_path / "src"),
        tmp_path / "work",
        n_envs=3,
        n_repos=1,
        failed_env=False,
        images=True,
        chunked=True,
        payload=200_000,
    )


def chunks_of(store: Store, m: dict) -> list[tuple[str, int]]:
    return list(read_chunk_list(store, ChunkedImage.from_manifest(m)).chunks)


def all_chunks(info: dict) -> dict[str, int]:
    out: dict[str, int] = {}
    for m in info["envs"].values():
        out.update(chunks_of(info["store"], m))
    return out


def objects_of(store: Store, m: dict) -> dict[str, int]:
    """Store path -> size of the packs (or chunk objects) the manifest's image is read from."""
    return needed_objects(read_chunk_list(store, ChunkedImage.from_manifest(m)))


def all_objects(info: dict) -> dict[str, int]:
    out: dict[str, int] = {}
    for m in info["envs"].values():
        out.update(objects_of(info["store"], m))
    return out


def test_mirror_copies_each_pack_once_and_no_whole_image(src: dict, tmp_path: Path) -> None:
    distinct = all_chunks(src)
    refs = sum(len(chunks_of(src["store"], m)) for m in src["envs"].values())
    assert len(distinct) < refs  # the envs share chunks (the common file)
    packs = all_objects(src)
    assert all(rel.startswith("packs/") for rel in packs)
    dst = Store(tmp_path / "dst")
    report = mirror(src["store"], dst)
    assert report.chunks == len(packs)
    assert all(dst.size(rel) == n and dst.exists(rel + ".idx") for rel, n in packs.items())
    for _key, m in src["envs"].items():
        assert dst.exists(f"artifacts/env/{m['image']['chunks']['artifact']}")
        assert not dst.exists(f"artifacts/env/{m['image']['artifact']}")
    for quick in (True, False):
        report = verify(dst, quick=quick)
        assert report.ok, report.problems
        assert report.chunks == refs
    again = mirror(src["store"], dst)
    assert again.copied == [] and again.chunks == 0


def test_a_store_without_archives_mirrors_and_verifies(tmp_path: Path) -> None:
    """config `archive: false` (the default): manifests name no archive; mirror copies the
    packs, lists and manifests, verify checks them, and a second mirror copies nothing."""
    info = publish_synthetic_store(
        str(tmp_path / "src"),
        tmp_path / "work",
        n_envs=2,
        n_repos=1,
        failed_env=False,
        images=True,
        chunked=True,
        archives=False,
        payload=100_000,
    )
    assert all("artifact" not in m for m in info["envs"].values())
    dst = Store(tmp_path / "dst")
    report = mirror(info["store"], dst)
    assert sorted(report.copied) == sorted([*info["envs"], *info["repos"]])
    assert not list(Path(dst.path("artifacts/env")).glob("*.tar.zst"))
    assert verify(dst, quick=False).ok
    assert mirror(info["store"], dst).copied == []
    # a pack lost at the destination is a problem verify names, with the artifact
    lost = next(iter(all_objects(info)))
    Path(dst.path(lost)).unlink()
    problems = verify(dst, quick=True).problems
    assert problems and all(p.what == "missing" for p in problems) and any(lost in p.rel for p in problems)


def own_packs(src: dict) -> list[tuple[str, str]]:
    """(env key, pack) for packs only one env's image reads from."""
    per = {k: objects_of(src["store"], m) for k, m in src["envs"].items()}
    return [(k, rel) for k, objs in sorted(per.items()) for rel in objs if sum(rel in o for o in per.values()) == 1]


def test_verify_names_missing_and_corrupt_packs_with_their_artifact(src: dict) -> None:
    store = src["store"]
    (gone_key, gone), (bad_key, bad) = own_packs(src)[:2]
    Path(store.path(gone)).unlink()
    p = Path(store.path(bad))
    data = bytearray(p.read_bytes())
    data[0] ^= 0xFF
    p.write_bytes(bytes(data))
    quick = verify(store, quick=True).problems
    assert [(q.what, q.rel) for q in quick] == [("missing", gone)]  # same size: quick cannot see it
    assert f"env {gone_key}" in quick[0].detail
    full = verify(store).problems
    assert sorted((q.what, q.rel) for q in full) == sorted([("missing", gone), ("corrupt", bad)])
    assert {q.rel: q.detail for q in full}[bad].count(bad_key) >= 1


def test_verify_names_a_changed_chunk_list(src: dict) -> None:
    store = src["store"]
    key, m = sorted(src["envs"].items())[1]
    rel = f"artifacts/env/{m['image']['chunks']['artifact']}"
    doc = json.loads(store.read_bytes(rel))
    doc["chunks"].reverse()
    store.put_text(rel, json.dumps(doc))
    problems = verify(store, quick=False).problems
    assert {(q.what, q.rel) for q in problems} == {("corrupt", rel)}
    assert any(key in q.detail for q in problems)


def test_mirror_refuses_a_damaged_source_pack_and_brings_back_a_lost_one(src: dict, tmp_path: Path) -> None:
    dst = tmp_path / "dst"
    mirror(src["store"], str(dst))
    _, rel = own_packs(src)[-1]
    (dst / rel).unlink()  # lost at the destination: verify says so, pull brings it back
    assert [q.rel for q in verify(str(dst), quick=True).problems] == [rel]
    again = mirror(src["store"], str(dst))
    assert again.chunks == 1 and verify(str(dst)).ok
    # a damaged source pack is never propagated
    (dst / rel).unlink()
    p = Path(src["store"].path(rel))
    good = p.read_bytes()
    data = bytearray(good)
    data[0] ^= 0xFF
    p.write_bytes(bytes(data))
    with pytest.raises(SyncError, match=f"{rel}.*corrupt"):
        mirror(src["store"], str(dst))
    assert not (dst / rel).exists()
    # nor is a forged index (right pack, an index naming other chunks)
    p.write_bytes(good)
    idx = Path(src["store"].path(rel + ".idx"))
    doc = json.loads(idx.read_bytes())
    doc["chunks"][0][0] = "0" * 64
    idx.write_text(json.dumps(doc))
    with pytest.raises(SyncError, match=r"\.idx.*corrupt.*does not have sha256"):
        mirror(src["store"], str(dst))
    assert not (dst / rel).exists()


def test_a_store_of_the_older_layout_mirrors_and_verifies(src: dict, tmp_path: Path) -> None:
    """A store written before packs (chunk list schema 1, one object per chunk) still
    mirrors (chunk objects copied, each checked) and verifies."""
    from tests.node.test_chunks import publish_old_layout

    store = src["store"]
    catalog = json.loads(store.read_bytes(CATALOG))
    for key, m in src["envs"].items():
        catalog["envs"][key]["manifest"] = src["envs"][key] = publish_old_layout(store, m)
    store.put_text(CATALOG, json.dumps(catalog))
    shutil.rmtree(store.path("packs"))
    dst = Store(tmp_path / "dst")
    report = mirror(store, dst)
    distinct = all_chunks(src)
    assert report.chunks == len(distinct) and all(dst.size(chunk_path(d)) == n for d, n in distinct.items())
    assert verify(dst).ok and verify(dst, quick=True).ok
    assert not dst.exists(pack_index_path("0" * 64))


@pytest.mark.s3
def test_push_packs_to_s3_pull_back_and_verify(src: dict, s3: S3, tmp_path: Path, capsys) -> None:
    url = s3.url("stores/chunked")
    assert main(["push", src["store"].url, url]) == 0
    packs = all_objects(src)
    assert f"({len(packs)} chunk packs or chunk objects)" in capsys.readouterr().out
    fs = s3.fs()
    for rel, n in packs.items():
        assert fs.size(f"{s3.bucket}/stores/chunked/{rel}") == n
        assert fs.exists(f"{s3.bucket}/stores/chunked/{rel}.idx")
    assert not [p for p in fs.find(f"{s3.bucket}/stores/chunked") if ".tmp-" in p]
    capsys.readouterr()
    assert main(["verify", url]) == 0 and main(["verify", "--quick", url]) == 0
    refs = sum(len(chunks_of(src["store"], m)) for m in src["envs"].values())
    assert f"+ {refs} image chunks, sizes checked" in capsys.readouterr().out
    local = tmp_path / "node"
    assert main(["pull", url, str(local)]) == 0
    for rel in packs:
        assert (local / rel).read_bytes() == Path(src["store"].path(rel)).read_bytes()
    assert verify(str(local)).ok
