"""manifest: the chunked-image parts of the store contract (image.chunks, chunk lists).
The rest of the manifest schema is exercised by tests/security/test_store_tampering.py."""

from __future__ import annotations

import hashlib
import json

import pytest

from minisandbox.manifest import StoreDataError, chunk_list_document, chunk_path, parse_chunk_list, validate_manifest

A, B = hashlib.sha256(b"a").hexdigest(), hashlib.sha256(b"b").hexdigest()


def manifest(**image) -> dict:
    return {
        "schema": 1,
        "kind": "env",
        "key": "k1",
        "format": "tar.zst",
        "artifact": "k1.tar.zst",
        "sha256": A,
        "size": 10,
        "mount_path": "/opt/miniconda3/envs/testbed",
        "image": {"format": "squashfs", "artifact": "k1.squashfs", "sha256": B, "size": 300, **image},
    }


def test_image_chunks_accepted() -> None:
    chunks = {"artifact": "k1.chunks.json", "sha256": A, "size": 200, "count": 2}
    assert validate_manifest(manifest(chunks=chunks), where="w")["image"]["chunks"] == chunks


@pytest.mark.parametrize(
    "chunks, field",
    [
        ({"artifact": "../x.chunks.json", "sha256": A, "size": 2, "count": 1}, "image.chunks.artifact"),
        ({"artifact": "k1.json", "sha256": A, "size": 2, "count": 1}, "image.chunks.artifact"),
        ({"artifact": "k1.chunks.json", "sha256": A.upper(), "size": 2, "count": 1}, "image.chunks.sha256"),
        ({"artifact": "k1.chunks.json", "sha256": A, "size": 0, "count": 1}, "image.chunks.size"),
        ({"artifact": "k1.chunks.json", "sha256": A, "size": 2, "count": -1}, "image.chunks.count"),
        ({"artifact": "k1.chunks.json", "sha256": A, "size": 2, "count": 1 << 30}, "image.chunks.count"),
        ({"artifact": "k1.chunks.json", "sha256": A, "size": 2}, "image.chunks.count"),
    ],
)
def test_bad_image_chunks_is_one_line_naming_the_field(chunks: dict, field: str) -> None:
    with pytest.raises(StoreDataError) as exc:
        validate_manifest(manifest(chunks=chunks), where="store S: artifacts/env/k1.manifest.json")
    msg = str(exc.value)
    assert "\n" not in msg and msg.startswith("store S: artifacts/env/k1.manifest.json:") and repr(field) in msg


def test_a_layer_without_an_archive_is_served_by_its_image() -> None:
    """config `archive: false`: no artifact/sha256/size, the image is the layer."""
    m = manifest(chunks={"artifact": "k1.chunks.json", "sha256": A, "size": 200, "count": 2}, whole=False)
    for name in ("artifact", "sha256", "size"):
        del m[name]
    assert validate_manifest(m, where="w") is m


@pytest.mark.parametrize(
    "drop, field",
    [
        (("artifact", "sha256", "size", "image"), "artifact"),  # neither archive nor image
        (("sha256",), "sha256"),  # half an archive
        (("artifact", "size"), "artifact"),
    ],
)
def test_a_layer_needs_a_whole_archive_or_an_image(drop: tuple, field: str) -> None:
    m = manifest()
    for name in drop:
        del m[name]
    with pytest.raises(StoreDataError) as exc:
        validate_manifest(m, where="store S: artifacts/env/k1.manifest.json")
    msg = str(exc.value)
    assert "\n" not in msg and msg.startswith("store S: artifacts/env/k1.manifest.json:") and repr(field) in msg


def doc(**over) -> bytes:
    d = json.loads(chunk_list_document(B, 300, [(A, 100), (B, 200)]))
    d.update(over)
    return json.dumps(d).encode()


def packed(**over) -> bytes:
    d = json.loads(chunk_list_document(B, 300, [(A, 100), (B, 200)], packs=[(A, 300)], at=[(0, 0), (0, 100)]))
    d.update(over)
    return json.dumps(d).encode()


def test_chunk_list_roundtrip() -> None:
    cl = parse_chunk_list(doc(), where="w", image_sha256=B, image_size=300, count=2)
    assert cl.chunks == [(A, 100), (B, 200)]


@pytest.mark.parametrize(
    "data, field",
    [
        (doc(chunks=[[A, 100], ["../../etc/passwd", 200]]), "'chunks.1.0'"),
        (doc(chunks=[[A, 100], [B, 0]]), "'chunks.1.1'"),
        (doc(chunks=[[A, 100], [B, "200"]]), "'chunks.1.1'"),
        (doc(chunks=[[A, 100], [B, 199]]), "'chunks'"),  # lengths do not add up to size
        (doc(size=301), "'chunks'"),
        (doc(image_sha256=A), "'image_sha256'"),  # another image's list
        (doc(schema=3), "'schema'"),  # a newer format: upgrade
        (doc(schema=2), "'packs'"),  # schema 2 without its pack fields
        (doc(packs=[[A, 300]], at=[[0, 0], [0, 100]]), "'packs'"),  # pack fields in a schema 1 list
        (packed(), None),
        (packed(at=[[0, 0], [1, 0]]), "'at' entry 1: pack 1"),  # names a pack the list lacks
        (packed(at=[[0, 0], [0, 101]]), "'at' entry 1: offset 101"),  # past the end of its pack
        (packed(at=[[0, -1], [0, 100]]), "'at.0.1'"),  # negative offset
        (packed(packs=[["../../x", 300]]), "'packs.0.0'"),  # a pack name that is a path
        (packed(packs=[[A, 0]]), "'packs.0.1'"),
        (packed(at=[[0, 0]]), "'at' has 1 entries"),
        (doc(chunks=[[A, 300]]), "'chunks'"),  # count differs from the manifest
        (b"{not json", "not JSON"),
        (b"[]", "not a JSON object"),
    ],
)
def test_bad_chunk_list_is_one_line_naming_the_field(data: bytes, field: str | None) -> None:
    if field is None:  # the valid schema 2 list the bad ones are made from
        cl = parse_chunk_list(data, where="w", image_sha256=B, image_size=300, count=2)
        assert cl.located() == [(A, 100, A, 0), (B, 200, A, 100)]
        return
    with pytest.raises(StoreDataError) as exc:
        parse_chunk_list(data, where="store S: artifacts/env/k1.chunks.json", image_sha256=B, image_size=300, count=2)
    msg = str(exc.value)
    assert "\n" not in msg and msg.startswith("store S: artifacts/env/k1.chunks.json:") and field in msg, msg


def test_chunk_path() -> None:
    assert chunk_path(A) == f"chunks/{A[:2]}/{A}"
    for bad in ("../x", A.upper(), A[:-1], None):
        with pytest.raises(StoreDataError):
            chunk_path(bad)
