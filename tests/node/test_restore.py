"""restore: safe streaming extraction (headers checked before GNU tar sees them), atomic layers."""

from __future__ import annotations

import io
import os
import stat
import tarfile
from pathlib import Path

import pytest
import zstandard

from minisandbox.node.restore import RestoreError, UnsafeArchiveError, ensure_layer, extract, unpack_file, unsquash
from minisandbox.pipeline.pack import pack_image, pack_tree

needs_squashfs = pytest.mark.skipif(
    not __import__("shutil").which("mksquashfs"), reason="squashfs-tools not installed (apt-get install squashfs-tools)"
)


def snapshot(root: Path) -> dict[str, tuple]:
    """Comparable description of a tree: type, mode, content / link target, hardlink groups."""
    out: dict[str, tuple] = {}
    inodes: dict[int, str] = {}
    for dirpath, dirs, files in os.walk(root):
        for name in sorted(dirs + files):
            p = Path(dirpath) / name
            rel = str(p.relative_to(root))
            st = p.lstat()
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", os.readlink(p))
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("dir", stat.S_IMODE(st.st_mode))
            else:
                first = inodes.setdefault(st.st_ino, rel)
                out[rel] = ("file", stat.S_IMODE(st.st_mode), p.read_bytes(), first if st.st_nlink > 1 else None)
    return out


def sample_tree(root: Path) -> Path:
    (root / "bin").mkdir(parents=True)
    (root / "deep" / ("d" * 120) / ("e" * 120)).mkdir(parents=True)  # > 100 char names
    (root / "deep" / ("d" * 120) / ("e" * 120) / "f.txt").write_text("long path\n")
    (root / "bin" / "run").write_text("#!/bin/sh\n")
    (root / "bin" / "run").chmod(0o750)
    os.symlink("/root/.pyenv/versions/3.10.13/bin/python3.10", root / "bin" / "python")  # legit absolute
    os.symlink("run", root / "bin" / "run2")
    (root / "data.bin").write_bytes(os.urandom(3 << 20))
    os.link(root / "data.bin", root / "data-hard.bin")
    (root / "ro").mkdir()
    (root / "ro" / "x").write_text("x")
    (root / "ro").chmod(0o555)  # read-only dir with content: needs delayed dir restore
    return root


@pytest.mark.parametrize("fmt", ["tar.zst", "tar.gz"])
def test_roundtrip_preserves_tree(tmp_path: Path, fmt: str) -> None:
    src = sample_tree(tmp_path / "src")
    archive = tmp_path / f"a.{fmt}"
    pack_tree(src, archive, fmt)
    dest = tmp_path / "dest"
    dest.mkdir()
    n = extract(archive, fmt, dest)
    assert n >= 3 << 20
    assert snapshot(dest) == snapshot(src)
    assert os.stat(dest / "data.bin").st_ino == os.stat(dest / "data-hard.bin").st_ino
    (src / "ro").chmod(0o755)


def tar_bytes(members: list[tuple[tarfile.TarInfo, bytes | None]], fmt: int = tarfile.GNU_FORMAT) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=fmt) as tf:
        for info, data in members:
            tf.addfile(info, io.BytesIO(data) if data is not None else None)
    return buf.getvalue()


def info(name: str, kind: bytes = tarfile.REGTYPE, data: bytes = b"", linkname: str = "") -> tuple:
    ti = tarfile.TarInfo(name)
    ti.type = kind
    ti.linkname = linkname
    ti.mode = 0o755 if kind == tarfile.DIRTYPE else 0o644
    if kind == tarfile.REGTYPE:
        ti.size = len(data)
        return ti, data
    return ti, None


def write_zst(path: Path, raw: bytes) -> Path:
    path.write_bytes(zstandard.ZstdCompressor().compress(raw))
    return path


EVIL = {
    "absolute": ([info("/tmp/OUTSIDE/abs.txt", data=b"x")], "absolute path"),
    "dotdot": ([info("./a/../../OUTSIDE/x.txt", data=b"x")], r"contains '\.\.'"),
    "chardev": ([info("./null", tarfile.CHRTYPE)], "character device"),
    "blockdev": ([info("./sda", tarfile.BLKTYPE)], "block device"),
    "fifo": ([info("./pipe", tarfile.FIFOTYPE)], "fifo"),
    "through_symlink": (
        [info("./esc", tarfile.SYMTYPE, linkname="{outside}"), info("./esc/pwned.txt", data=b"pwned")],
        "is below the symlink",
    ),
    "replace_symlink": (
        [info("./esc", tarfile.SYMTYPE, linkname="{outside}/target.txt"), info("./esc", data=b"pwned")],
        "replaces the symlink",
    ),
    "hardlink_outside": ([info("./h", tarfile.LNKTYPE, linkname="../OUTSIDE/target.txt")], r"contains '\.\.'"),
    "hardlink_absolute": ([info("./h", tarfile.LNKTYPE, linkname="{outside}/target.txt")], "absolute path"),
    "hardlink_unknown": ([info("./h", tarfile.LNKTYPE, linkname="etc/shadow")], "not an earlier file"),
    "hardlink_via_symlink": (
        [
            info("./d", tarfile.SYMTYPE, linkname="{outside}"),
            info("./f", data=b"1"),
            info("./h", tarfile.LNKTYPE, linkname="d/target.txt"),
        ],
        "not an earlier file",
    ),
}


@pytest.mark.parametrize("case", sorted(EVIL))
@pytest.mark.parametrize("tarfmt", [tarfile.GNU_FORMAT, tarfile.PAX_FORMAT])
def test_unsafe_archives_are_refused(tmp_path: Path, case: str, tarfmt: int) -> None:
    outside = tmp_path / "OUTSIDE"
    outside.mkdir()
    (outside / "target.txt").write_text("original")
    members = [(_fmt(ti, outside), data) for ti, data in EVIL[case][0]]
    archive = write_zst(tmp_path / "evil.tar.zst", tar_bytes([info("./", tarfile.DIRTYPE)] + members, tarfmt))
    layers = tmp_path / "cache" / "layers"
    with pytest.raises(UnsafeArchiveError, match=EVIL[case][1]):
        unpack_file(archive, "tar.zst", layers, "d" * 64)
    assert sorted(p.name for p in outside.iterdir()) == ["target.txt"]
    assert (outside / "target.txt").read_text() == "original"
    assert not (Path("/tmp/OUTSIDE") / "abs.txt").exists()
    assert list(layers.iterdir()) == []  # neither a layer nor a temp dir is left


def _fmt(ti: tarfile.TarInfo, outside: Path) -> tarfile.TarInfo:
    new = tarfile.TarInfo(ti.name.replace("{outside}", str(outside)))
    new.type, new.mode, new.size = ti.type, ti.mode, ti.size
    new.linkname = ti.linkname.replace("{outside}", str(outside))
    return new


def test_absolute_symlink_targets_are_allowed(tmp_path: Path) -> None:
    raw = tar_bytes(
        [
            info("./", tarfile.DIRTYPE),
            info("./bin", tarfile.DIRTYPE),
            info("./bin/python", tarfile.SYMTYPE, linkname="/root/.pyenv/versions/3.10.13/bin/python3"),
            info("./up", tarfile.SYMTYPE, linkname="../../etc"),
        ]
    )
    layer = unpack_file(write_zst(tmp_path / "ok.tar.zst", raw), "tar.zst", tmp_path / "layers", "a" * 64)
    assert os.readlink(layer / "bin" / "python") == "/root/.pyenv/versions/3.10.13/bin/python3"
    assert os.readlink(layer / "up") == "../../etc"


def test_truncated_and_corrupt_archives(tmp_path: Path) -> None:
    src = sample_tree(tmp_path / "src")
    good = tmp_path / "good.tar.zst"
    pack_tree(src, good)
    data = good.read_bytes()
    cut = tmp_path / "cut.tar.zst"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(RestoreError, match="truncated|corrupt"):
        unpack_file(cut, "tar.zst", tmp_path / "layers", "b" * 64)
    flipped = bytearray(data)
    for i in range(200, len(flipped), 997):
        flipped[i] ^= 0xFF
    bad = tmp_path / "bad.tar.zst"
    bad.write_bytes(bytes(flipped))
    with pytest.raises(RestoreError):
        unpack_file(bad, "tar.zst", tmp_path / "layers", "c" * 64)
    assert list((tmp_path / "layers").iterdir()) == []
    (src / "ro").chmod(0o755)


def test_ensure_layer_is_atomic_and_cleans_stale_tmp(tmp_path: Path) -> None:
    layers = tmp_path / "layers"
    stale = layers / f".tmp-{'e' * 64}-dead"
    (stale / "half").mkdir(parents=True)

    def boom(tmp: Path) -> int:
        (tmp / "partial").write_text("x")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError, match="disk full"):
        ensure_layer(layers, "e" * 64, boom)
    assert list(layers.iterdir()) == []  # stale dir removed, failed attempt removed, nothing final

    def ok(tmp: Path) -> int:
        (tmp / "file").write_text("y")
        return 7

    path, result = ensure_layer(layers, "e" * 64, ok)
    assert result == 7 and (path / "file").read_text() == "y"
    assert ensure_layer(layers, "e" * 64, boom) == (path, None)  # already there: fill not called


def test_ustar_prefix_is_part_of_the_checked_name(tmp_path: Path) -> None:
    name = "./../" + "x" * 120 + "/f.txt"  # > 100 chars: split into prefix "./../xxx" + name "f.txt"
    raw = tar_bytes([info("./", tarfile.DIRTYPE), info(name, data=b"x")], tarfile.USTAR_FORMAT)
    assert b"/../" in raw[512 + 345 : 512 + 500] and b".." not in raw[512 : 512 + 100]  # '..' only in the prefix
    with pytest.raises(UnsafeArchiveError, match=r"contains '\.\.'"):
        unpack_file(write_zst(tmp_path / "u.tar.zst", raw), "tar.zst", tmp_path / "layers", "1" * 64)


def _set_gnu_atime(raw: bytearray, offset: int) -> None:
    """Fill the old-GNU atime field of the header at `offset` and fix its checksum."""
    raw[offset + 345 : offset + 357] = b"%011o\0" % 1234567
    raw[offset + 148 : offset + 156] = b" " * 8
    raw[offset + 148 : offset + 156] = b"%06o\0 " % sum(raw[offset : offset + 512])


def test_old_gnu_time_fields_are_not_taken_for_a_prefix(tmp_path: Path) -> None:
    outside = tmp_path / "OUTSIDE"
    outside.mkdir()
    raw = bytearray(
        tar_bytes(
            [
                info("./", tarfile.DIRTYPE),
                info("./esc", tarfile.SYMTYPE, linkname=str(outside)),
                info("./esc/pwned.txt", data=b"pwned"),
            ],
            tarfile.GNU_FORMAT,
        )
    )
    _set_gnu_atime(raw, 512)  # the symlink's header: its name must still read "./esc"
    with pytest.raises(UnsafeArchiveError, match="is below the symlink"):
        unpack_file(write_zst(tmp_path / "g.tar.zst", bytes(raw)), "tar.zst", tmp_path / "layers", "2" * 64)
    assert list(outside.iterdir()) == []


@needs_squashfs
def test_unsquash_restores_the_tree_an_image_was_packed_from(tmp_path: Path) -> None:
    """A store without archives (config `archive: false`): nodes that cannot mount unpack the image."""
    src = sample_tree(tmp_path / "src")
    image = tmp_path / "layer.squashfs"
    pack_image(src, image)
    dest = tmp_path / "dest"
    dest.mkdir()
    n = unsquash(image, dest)
    assert snapshot(dest) == snapshot(src)
    assert n == sum(p.stat().st_size for p in src.rglob("*") if p.is_file() and not p.is_symlink()) - (3 << 20)


@needs_squashfs
@pytest.mark.parametrize(
    "pseudo, name",
    [("a/null c 644 0 0 1 3", "/a/null"), ("a/pipe i 644 0 0 f", "/a/pipe"), ("a/disk b 600 0 0 7 0", "/a/disk")],
)
def test_unsquash_refuses_devices_and_fifos_before_unpacking(tmp_path: Path, pseudo: str, name: str) -> None:
    src = tmp_path / "src"
    (src / "a").mkdir(parents=True)
    (src / "a" / "f").write_text("ok\n")
    image = tmp_path / "bad.squashfs"
    import subprocess

    subprocess.run(
        ["mksquashfs", str(src), str(image), "-noappend", "-quiet", "-no-progress", "-p", pseudo], check=True
    )
    dest = tmp_path / "dest"
    dest.mkdir()
    with pytest.raises(UnsafeArchiveError) as exc:
        unsquash(image, dest)
    assert name in str(exc.value) and "\n" not in str(exc.value)
    assert list(dest.iterdir()) == []  # checked before anything was created


def test_unsquash_of_a_damaged_image_is_a_restore_error(tmp_path: Path) -> None:
    if not __import__("shutil").which("unsquashfs"):
        pytest.skip("squashfs-tools not installed")
    image = tmp_path / "junk.squashfs"
    image.write_bytes(os.urandom(8192))
    dest = tmp_path / "dest"
    dest.mkdir()
    with pytest.raises(RestoreError, match="junk.squashfs"):
        unsquash(image, dest)
