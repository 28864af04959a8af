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
from minisandbox.pipeline.pack import EPOCH, PackError, normalize_tree, pack_tree


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
    # change mtimes/atimes between the two packs (an hour on, not a 1 s sleep): must not matter
    later = time.time() + 3600
    os.utime(tree / "bin" / "tool", (later, later))
    os.utime(tree / "lib" / "pkg", (later, later))
    (tree / "lib" / "pkg" / "__init__.py").read_text()
    pack_tree(tree, b, fmt)
    assert a.read_bytes() == b.read_bytes()
    assert stats.files == 5  # __init__, data.bin, tool, python link, hard link
    assert stats.raw_bytes == 200_000 + len("x = 1\n") + len("#!/bin/sh\necho hi\n")

    ms = members(a, fmt)
    names = [m.name for m in ms]
    assert all(n == "." or n.startswith("./") for n in names), names
    assert names[1:] == sorted(names[1:])
    assert all(m.mtime == EPOCH and m.uid == 0 and m.gid == 0 for m in ms)
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

    from minisandbox.pipeline.pack import pack_image

    tree = make_tree(tmp_path / "tree")
    a, b = tmp_path / "a.squashfs", tmp_path / "b.squashfs"
    stats = pack_image(tree, a)
    os.utime(tree / "bin" / "tool")
    pack_image(tree, b)
    assert a.read_bytes() == b.read_bytes() and a.read_bytes()[:4] == b"hsqs"
    assert stats.files == 5
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.squashfs", "b.squashfs", "tree"]


# -- normalize_tree: times and pyc headers --------------------------------------------------

import importlib.util  # noqa: E402
import py_compile  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
from importlib._bootstrap_external import _validate_timestamp_pyc  # noqa: E402


def make_package(root: Path, built_at: float) -> Path:
    """A package as an installer leaves it: sources dated `built_at`, pycs compiled then
    (header = the source's mtime), one hash-based pyc, one stale pyc, a symlink."""
    pkg = root / "site-packages" / "pkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("from pkg.mod import VALUE\n")
    (pkg / "mod.py").write_text("VALUE = 42\n")
    (pkg / "hashed.py").write_text("H = 1\n")
    (pkg / "stale.py").write_text("S = 1\n")
    for name in ("__init__", "mod", "hashed", "stale"):
        os.utime(pkg / f"{name}.py", (built_at, built_at))
    # dfile: the path code objects record; builds compile at the layer's canonical path
    for name in ("__init__", "mod", "stale"):
        py_compile.compile(str(pkg / f"{name}.py"), dfile=f"/site/pkg/{name}.py", doraise=True)
    py_compile.compile(
        str(pkg / "hashed.py"),
        dfile="/site/pkg/hashed.py",
        doraise=True,
        invalidation_mode=py_compile.PycInvalidationMode.CHECKED_HASH,
    )
    (pkg / "stale.py").write_text("S = 2\n")  # edited after compiling: same size, newer mtime
    os.utime(pkg / "stale.py", (built_at + 100, built_at + 100))
    os.symlink("mod.py", pkg / "alias.py")
    for d in (pkg / "__pycache__", pkg, pkg.parent, root):
        os.utime(d, (built_at, built_at))
    return pkg


def pyc(pkg: Path, name: str) -> Path:
    return Path(importlib.util.cache_from_source(str(pkg / f"{name}.py")))


def test_normalize_restamps_valid_pycs_and_every_time(tmp_path: Path) -> None:
    pkg = make_package(tmp_path / "tree", built_at=1_700_000_000)
    stale_before = pyc(pkg, "stale").read_bytes()
    hashed_before = pyc(pkg, "hashed").read_bytes()
    stats = normalize_tree(tmp_path / "tree")
    assert stats.pycs == 2  # __init__ and mod; not the stale one, not the hash-based one
    for name in ("__init__", "mod"):
        data = pyc(pkg, name).read_bytes()
        assert int.from_bytes(data[8:12], "little") == EPOCH
        src = os.stat(pkg / f"{name}.py")
        # the interpreter's own check: raises ImportError if the pyc is stale
        _validate_timestamp_pyc(data, int(src.st_mtime), src.st_size, name, {"name": name, "path": str(pyc(pkg, name))})
    assert pyc(pkg, "stale").read_bytes() == stale_before  # stale stays stale, never made to look valid
    assert pyc(pkg, "hashed").read_bytes() == hashed_before
    for root, dirs, names in os.walk(tmp_path / "tree"):
        for name in dirs + names:
            assert os.lstat(os.path.join(root, name)).st_mtime == EPOCH, os.path.join(root, name)
    assert os.lstat(tmp_path / "tree").st_mtime == EPOCH
    assert normalize_tree(tmp_path / "tree").pycs == 0  # idempotent


def test_normalized_pyc_is_used_by_the_interpreter_not_rewritten(tmp_path: Path) -> None:
    pkg = make_package(tmp_path / "tree", built_at=1_650_000_000)
    normalize_tree(tmp_path / "tree")
    before = {n: os.stat(pyc(pkg, n)) for n in ("__init__", "mod")}
    # A stale pyc would be recompiled and replaced (a new inode); a valid one is only read.
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import pkg; assert pkg.VALUE == 42"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(pkg.parent)},
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    assert "pkg.mod" in proc.stderr
    for n, st in before.items():
        after = os.stat(pyc(pkg, n))
        assert (after.st_ino, after.st_mtime_ns) == (st.st_ino, st.st_mtime_ns), n


def test_identical_packages_built_at_different_times_pack_to_identical_bytes(tmp_path: Path) -> None:
    a = make_package(tmp_path / "a", built_at=1_600_000_000)
    b = make_package(tmp_path / "b", built_at=1_700_000_123)
    assert pyc(a, "mod").read_bytes() != pyc(b, "mod").read_bytes()  # the problem being solved
    for pkg in (a, b):
        pyc(pkg, "stale").unlink()  # a stale pyc keeps its header (see the test above)
    normalize_tree(tmp_path / "a")
    normalize_tree(tmp_path / "b")
    for name in ("__init__", "mod", "hashed"):
        assert pyc(a, name).read_bytes() == pyc(b, name).read_bytes(), name
    pack_tree(tmp_path / "a", tmp_path / "a.tar.zst")
    pack_tree(tmp_path / "b", tmp_path / "b.tar.zst")
    assert (tmp_path / "a.tar.zst").read_bytes() == (tmp_path / "b.tar.zst").read_bytes()
    if shutil.which("mksquashfs"):
        from minisandbox.pipeline.pack import pack_image

        pack_image(tmp_path / "a", tmp_path / "a.squashfs")
        pack_image(tmp_path / "b", tmp_path / "b.squashfs")
        assert (tmp_path / "a.squashfs").read_bytes() == (tmp_path / "b.squashfs").read_bytes()


def test_normalize_never_changes_files_outside_the_tree(tmp_path: Path) -> None:
    """Symlinks are not followed; files hard-linked from outside (the interpreter layer's
    staging) keep their time, and a restamped pyc is a new file, the outside one unchanged."""
    host = make_package(tmp_path / "host", built_at=1_600_000_000)
    outside = tmp_path / "outside.txt"
    outside.write_text("x")
    os.utime(outside, (1_600_000_000, 1_600_000_000))
    tree = tmp_path / "tree"
    shutil.copytree(host.parent, tree / "lib", symlinks=True, copy_function=os.link)
    os.symlink(outside, tree / "link")
    host_pyc = pyc(host, "mod").read_bytes()
    stats = normalize_tree(tree)
    assert stats.pycs == 2 and stats.shared > 0
    assert os.stat(outside).st_mtime == 1_600_000_000
    assert os.lstat(tree / "link").st_mtime == EPOCH
    assert os.stat(host / "mod.py").st_mtime == 1_600_000_000
    assert pyc(host, "mod").read_bytes() == host_pyc
    assert int.from_bytes(pyc(tree / "lib" / "pkg", "mod").read_bytes()[8:12], "little") == EPOCH


def test_normalize_errors_name_the_tree(tmp_path: Path) -> None:
    with pytest.raises(PackError, match="missing.*not a directory"):
        normalize_tree(tmp_path / "missing")
