"""push / pull / verify of images stored as chunks (the pipeline's default): missing chunks
copied once, checked on the way; verify names the artifact and the chunk (quick: present
with its length; full: digests, and the list reassembles to the image)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from minisandbox.cli import main
from minisandbox.manifest import chunk_path
from minisandbox.node.chunks import ChunkedImage, read_chunk_list
from minisandbox.node.store import Store
from minisandbox.node.sync import SyncError, mirror, verify
from tests.fixtures.s3 import S3, publish_synthetic_store

pytestmark = pytest.mark.skipif(not shutil.which("mksquashfs"),
                                reason="mksquashfs not installed (apt-get install squashfs-tools)")


@pytest.fixture
def src(tmp_path: Path) -> dict:
    return publish_synthetic_store(str(tmp_path / "src"), tmp_path / "work", n_envs=3, n_repos=1,
                                   failed_env=False, images=True, chunked=True,
                                   payload=200_000)


def chunks_of(store: Store, m: dict) -> list[tuple[str, int]]:
    return list(read_chunk_list(store, ChunkedImage.from_manifest(m)).chunks)


def all_chunks(info: dict) -> dict[str, int]:
    out: dict[str, int] = {}
    for m in info["envs"].values():
        out.update(chunks_of(info["store"], m))
    return out


def test_mirror_copies_each_chunk_once_and_no_whole_image(src: dict, tmp_path: Path) -> None:
    distinct = all_chunks(src)
    refs = sum(len(chunks_of(src["store"], m)) for m in src["envs"].values())
    assert len(distinct) < refs  # the envs share chunks (the common file)
    dst = Store(tmp_path / "dst")
    report = mirror(src["store"], dst)
    assert report.chunks == len(distinct)
    assert all(dst.size(chunk_path(d)) == n for d, n in distinct.items())
    for key, m in src["envs"].items():
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
    chunks, lists and manifests, verify checks them, and a second mirror copies nothing."""
    info = publish_synthetic_store(str(tmp_path / "src"), tmp_path / "work", n_envs=2, n_repos=1, failed_env=False,
                                   images=True, chunked=True, archives=False, payload=100_000)
    assert all("artifact" not in m for m in info["envs"].values())
    dst = Store(tmp_path / "dst")
    report = mirror(info["store"], dst)
    assert sorted(report.copied) == sorted([*info["envs"], *info["repos"]])
    assert not list(Path(dst.path("artifacts/env")).glob("*.tar.zst"))
    assert verify(dst, quick=False).ok
    assert mirror(info["store"], dst).copied == []
    # a chunk lost at the destination is a problem verify names, with the artifact
    lost = chunk_path(next(iter(all_chunks(info))))
    Path(dst.path(lost)).unlink()
    problems = verify(dst, quick=True).problems
    assert problems and all(p.what == "missing" for p in problems) and any(lost in p.rel for p in problems)


def test_verify_names_missing_and_corrupt_chunks_with_their_artifact(src: dict) -> None:
    store = src["store"]
    key, m = sorted(src["envs"].items())[0]
    own = [d for d, _ in chunks_of(store, m) if sum(d in dict(chunks_of(store, o)) for o in src["envs"].values()) == 1]
    gone, bad = own[0], own[1]
    Path(store.path(chunk_path(gone))).unlink()
    p = Path(store.path(chunk_path(bad)))
    data = bytearray(p.read_bytes())
    data[0] ^= 0xFF
    p.write_bytes(bytes(data))
    quick = verify(store, quick=True).problems
    assert [(q.what, q.rel) for q in quick] == [("missing", chunk_path(gone))]  # same size: quick cannot see it
    assert f"env {key}" in quick[0].detail
    full = verify(store).problems
    assert sorted((q.what, q.rel) for q in full) == sorted([("missing", chunk_path(gone)), ("corrupt", chunk_path(bad))])
    assert all(key in q.detail for q in full)


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


def test_mirror_refuses_a_damaged_source_chunk_and_brings_back_a_lost_one(src: dict, tmp_path: Path) -> None:
    dst = tmp_path / "dst"
    mirror(src["store"], str(dst))
    key, m = sorted(src["envs"].items())[0]
    digest, _ = chunks_of(src["store"], m)[-1]
    (dst / chunk_path(digest)).unlink()  # lost at the destination: verify says so, pull brings it back
    assert [q.rel for q in verify(str(dst), quick=True).problems] == [chunk_path(digest)]
    again = mirror(src["store"], str(dst))
    assert again.chunks == 1 and verify(str(dst)).ok
    # a damaged source chunk is never propagated
    (dst / chunk_path(digest)).unlink()
    p = Path(src["store"].path(chunk_path(digest)))
    data = bytearray(p.read_bytes())
    data[0] ^= 0xFF
    p.write_bytes(bytes(data))
    with pytest.raises(SyncError, match=f"{chunk_path(digest)}.*corrupt"):
        mirror(src["store"], str(dst))
    assert not (dst / chunk_path(digest)).exists()


@pytest.mark.s3
def test_push_chunks_to_s3_pull_back_and_verify(src: dict, s3: S3, tmp_path: Path, capsys) -> None:
    url = s3.url("stores/chunked")
    assert main(["push", src["store"].url, url]) == 0
    assert f"({len(all_chunks(src))} image chunks)" in capsys.readouterr().out
    fs = s3.fs()
    distinct = all_chunks(src)
    for d, n in distinct.items():
        assert fs.size(f"{s3.bucket}/stores/chunked/{chunk_path(d)}") == n
    assert not [p for p in fs.find(f"{s3.bucket}/stores/chunked") if ".tmp-" in p]
    capsys.readouterr()
    assert main(["verify", url]) == 0 and main(["verify", "--quick", url]) == 0
    refs = sum(len(chunks_of(src["store"], m)) for m in src["envs"].values())
    assert f"+ {refs} image chunks, sizes checked" in capsys.readouterr().out
    local = tmp_path / "node"
    assert main(["pull", url, str(local)]) == 0
    for d in distinct:
        assert (local / chunk_path(d)).read_bytes() == Path(src["store"].path(chunk_path(d))).read_bytes()
    assert verify(str(local)).ok
