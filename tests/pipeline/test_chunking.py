"""pipeline.chunking: content-defined cutting of images (deterministic, bounded, shift-proof)
and the chunk list it writes (valid against minisandbox.manifest.ChunkList)."""

from __future__ import annotations

import hashlib
import json
import random
import shutil
from pathlib import Path

import pytest

from minisandbox.manifest import ChunkList, parse_chunk_list
from minisandbox.pipeline.chunking import CHUNK_MAX, CHUNK_MIN, cut, write_chunk_list


def blob(seed: int, n: int) -> bytes:
    return random.Random(seed).randbytes(n)


def test_cut_is_deterministic_bounded_and_covers_the_file(tmp_path: Path) -> None:
    data = blob(1, 3_000_000)
    a, b = tmp_path / "a.img", tmp_path / "b.img"
    a.write_bytes(data)
    b.write_bytes(data)
    ca, cb = cut(a), cut(b)
    assert ca == cb
    assert ca.image_sha256 == hashlib.sha256(data).hexdigest() and ca.size == len(data)
    lengths = [n for _, n in ca.chunks]
    assert sum(lengths) == len(data)
    assert all(CHUNK_MIN <= n <= CHUNK_MAX for n in lengths[:-1])
    assert 1 <= lengths[-1] <= CHUNK_MAX
    for (sha, n), at in zip(ca.chunks, ca.offsets()):
        assert hashlib.sha256(data[at : at + n]).hexdigest() == sha
    assert 10 < len(lengths) < 3_000_000 // CHUNK_MIN


def test_cut_points_follow_content_not_offsets(tmp_path: Path) -> None:
    """Bytes inserted before a shared run shift it; FastCDC still finds the same chunks in it
    (what makes images of different environments share chunks)."""
    shared = blob(2, 2_000_000)
    (tmp_path / "a.img").write_bytes(blob(3, 100_000) + shared)
    (tmp_path / "b.img").write_bytes(blob(4, 37_123) + shared + blob(5, 5_000))
    a = {sha for sha, _ in cut(tmp_path / "a.img").chunks}
    b = {sha for sha, _ in cut(tmp_path / "b.img").chunks}
    shared_chunks = {sha for sha, _ in cut_bytes(tmp_path, shared).chunks}
    # all but the chunks at the two seams are found again
    assert len(a & b) >= len(shared_chunks) - 3
    assert len(a & b) >= 0.8 * len(a)


def cut_bytes(tmp_path: Path, data: bytes):
    p = tmp_path / f"{hashlib.sha256(data).hexdigest()[:8]}.img"
    p.write_bytes(data)
    return cut(p)


def test_empty_and_tiny_files(tmp_path: Path) -> None:
    (tmp_path / "e").write_bytes(b"")
    assert cut(tmp_path / "e").chunks == () and cut(tmp_path / "e").size == 0
    (tmp_path / "t").write_bytes(b"xyz")
    assert cut(tmp_path / "t").chunks == ((hashlib.sha256(b"xyz").hexdigest(), 3),)


def test_write_chunk_list_is_a_valid_compact_document(tmp_path: Path) -> None:
    img = tmp_path / "packed" / "k1.squashfs"
    img.parent.mkdir()
    img.write_bytes(blob(6, 700_000))
    path, chunking = write_chunk_list(img, "k1")
    assert path == img.parent / "k1.chunks.json"
    assert sorted(p.name for p in img.parent.iterdir()) == ["k1.chunks.json", "k1.squashfs"]  # no temp left
    data = path.read_bytes()
    doc = json.loads(data)
    assert doc["schema"] == 1 and doc["image_sha256"] == chunking.image_sha256 and doc["size"] == 700_000
    assert doc["chunks"] == [list(c) for c in chunking.chunks]
    cl = parse_chunk_list(
        data, where="t", image_sha256=chunking.image_sha256, image_size=700_000, count=len(chunking.chunks)
    )
    assert isinstance(cl, ChunkList) and len(cl.chunks) == len(chunking.chunks)
    assert write_chunk_list(img, "k1")[0].read_bytes() == data  # same image, same bytes


def test_real_squashfs_images_of_overlapping_trees_share_chunks(tmp_path: Path) -> None:
    """Two environments with the same big package and different small ones: their images
    share most chunks once packed deterministically."""
    if not shutil.which("mksquashfs"):
        pytest.skip("squashfs-tools not installed (apt-get install squashfs-tools)")
    from minisandbox.pipeline.pack import normalize_tree, pack_image

    rng = random.Random(7)
    common = {
        f"lib/common/m{i}.py": ("\n".join(f"v{i}_{j} = {rng.random()!r}" for j in range(400))).encode()
        for i in range(120)
    }
    images = []
    for env, extra in (("a", b"A" * 10), ("b", b"B" * 10_000)):
        tree = tmp_path / env
        for rel, data in {**common, f"lib/only_{env}.py": extra}.items():
            (tree / rel).parent.mkdir(parents=True, exist_ok=True)
            (tree / rel).write_bytes(data)
        normalize_tree(tree)
        pack_image(tree, tmp_path / f"{env}.squashfs")
        images.append({sha: n for sha, n in cut(tmp_path / f"{env}.squashfs").chunks})
    a, b = images
    shared = sum(n for sha, n in a.items() if sha in b)
    assert shared >= 0.5 * sum(a.values()), (shared, sum(a.values()))
