"""pack_tree: deterministic bytes, relative members, both formats, atomic output."""

from __future__ import annotations

import io
import os
import tarfile
import time
from pathlib import Path

import pytest
import zstandard

from minisandbox.fsutil import file_digest



from minisandbox.pipeline.pack import PackError, pack_tree


def make_tree(root: Path) -> Path:
    (root / "bin").mkdir(parents=True)
    (root / "lib" / "pkg").mkdir(parents=True)
    (root / "lib" / "pkg" / "__init__.py").write_text("x = 1\n")
    (root / "lib" / "pkg" / "data.bin").write_bytes(os.urandom(200_000))
    (root / "bin" / "tool").write_text("#!/bin/sh\necho hi\n")
    (root / "bin" / "tool").chmod(0o755)
    os.symlink("/usr/bin/python3", root / "bin" / "python")  # absolute, legit in a venv
    os.link(root / "lib" / "pkg" / "__init__.py", root / "lib" / "hard.py")
    return root


def members(archive: Path, fmt: str) -> list[tarfile.TarInfo]:
    if fmt == "tar.zst":
        data = zstandard.ZstdDecompressor().decompressobj().decompress(archive.read_bytes())
        tf = tarfile.open(fileobj=io.BytesIO(data), mode="r:")
    else:
        tf = tarfile.open(archive, mode="r:gz")
    with tf:
        return tf.getmembers()


@pytest.mark.parametrize("fmt", ["tar.zst", "tar.gz"])
def test_pack_is_deterministic_and_relative(tmp_path: Path, fmt: str) -> None:
    tree = make_tree(tmp_path / "tree")
    a = tmp_path / f"a.{fmt}"
    b = tmp_path / f"b.{fmt}"
    stats = pack_tree(tree, a, fmt)
    time.sleep(1.1)  # change mtimes/atimes between the two packs: must not matter
    os.utime(tree / "bin" / "tool")
    (tree / "lib" / "pkg" / "__init__.py").read_text()
    pack_tree(tree, b, fmt)
    assert a.read_bytes() == b.read_bytes()
    assert stats.files == 5  # __init__, data.bin, tool, python link, hard link
    assert stats.raw_bytes == 200_000 + len("x = 1\n") + len("#!/bin/sh\necho hi\n")

    ms = members(a, fmt)
    names = [m.name for m in ms]
    assert all(n == "." or n.startswith("./") for n in names), names
    assert names[1:] == sorted(names[1:])
    assert all(m.mtime == 0 and m.uid == 0 and m.gid == 0 for m in ms)
    assert not any(m.pax_headers for m in ms)
    by = {m.name: m for m in ms}
    assert by["./bin/python"].issym() and by["./bin/python"].linkname == "/usr/bin/python3"
    assert by["./bin/tool"].mode & 0o111
    assert by["./lib/hard.py"].islnk() or by["./lib/pkg/__init__.py"].islnk()


def test_pack_writes_atomically_and_digest(tmp_path: Path) -> None:
    tree = make_tree(tmp_path / "tree")
    out = tmp_path / "out" / "x.tar.zst"
    pack_tree(tree, out)
    assert [p.name for p in out.parent.iterdir()] == ["x.tar.zst"]  # no temp file left
    sha, size = file_digest(out)
    assert size == out.stat().st_size
    import hashlib

    assert sha == hashlib.sha256(out.read_bytes()).hexdigest()


def test_pack_errors_name_the_tree(tmp_path: Path) -> None:
    with pytest.raises(PackError, match="not a directory"):
        pack_tree(tmp_path / "missing", tmp_path / "x.tar.zst")
    with pytest.raises(PackError, match="unknown archive format"):
        pack_tree(tmp_path, tmp_path / "x.zip", "zip")
    assert not list(tmp_path.glob("x.*"))


def test_pack_image_is_deterministic(tmp_path: Path) -> None:
    import shutil

    if not shutil.which("mksquashfs"):
        pytest.skip("squashfs-tools not installed (apt-get install squashfs-tools)")
    from minisandbox.fsutil import file_digest

    from minisandbox.pipeline.pack import pack_image

    tree = make_tree(tmp_path / "tree")
    a, b = tmp_path / "a.squashfs", tmp_path / "b.squashfs"
    stats = pack_image(tree, a)
    os.utime(tree / "bin" / "tool")
    pack_image(tree, b)
    assert a.read_bytes() == b.read_bytes() and a.read_bytes()[:4] == b"hsqs"
    assert stats.files == 5
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.squashfs", "b.squashfs", "tree"]
