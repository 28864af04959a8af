"""Install residue of /testbed and the build's HOME (minisandbox.pipeline.residue)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from minisandbox.pipeline.residue import HOME_DIR, RESIDUE_DIR, collect_residue, pack_home


def _tree(root: Path) -> dict[str, str]:
    return {
        p.relative_to(root).as_posix(): (os.readlink(p) if p.is_symlink() else p.read_text())
        for p in sorted(root.rglob("*"))
        if p.is_file() or p.is_symlink()
    }


def test_collect_residue_copies_exactly_what_the_install_added_or_changed(tmp_path: Path) -> None:
    before, after, dest = tmp_path / "before", tmp_path / "after", tmp_path / "dest"
    (before / "pkg").mkdir(parents=True)
    (before / "pkg" / "__init__.py").write_text("from ._version import version\n")
    (before / "setup.py").write_text("setup()\n")
    (before / "old.txt").write_text("removed by the install\n")
    (before / ".git").mkdir()
    (before / ".git" / "index").write_text("i1")
    shutil.copytree(before, after, symlinks=True)
    (after / "pkg" / "_version.py").write_text("version = '1.0'\n")  # setuptools_scm
    (after / "pkg.egg-info").mkdir()
    (after / "pkg.egg-info" / "PKG-INFO").write_text("Name: pkg\n")
    (after / "pkg.egg-info" / "top_level.txt").write_text("pkg\n")
    (after / "setup.py").write_text("setup()  # rewritten\n")
    (after / "data").symlink_to("pkg")
    (after / "old.txt").unlink()
    (after / ".git" / "index").write_text("i2")  # version tools refresh git's index: not residue
    for junk in ("pkg/__pycache__/m.cpython-311.pyc", ".pytest_cache/v/x", ".hypothesis/db"):
        (after / junk).parent.mkdir(parents=True, exist_ok=True)
        (after / junk).write_text("cache")

    res = collect_residue(before, after, dest)

    assert res.new == ["/data", "/pkg/_version.py", "/pkg.egg-info/"]
    assert res.modified == ["setup.py"] and res.deleted == ["old.txt"]
    assert res.files == 5
    assert _tree(dest) == {
        "data": "pkg",
        "pkg/_version.py": "version = '1.0'\n",
        "pkg.egg-info/PKG-INFO": "Name: pkg\n",
        "pkg.egg-info/top_level.txt": "pkg\n",
        "setup.py": "setup()  # rewritten\n",
    }
    assert res.to_dict()["dir"] == RESIDUE_DIR


def test_an_install_that_changes_nothing_leaves_no_residue(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "x.py").write_text("x")
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    res = collect_residue(tmp_path / "a", tmp_path / "b", tmp_path / "d")
    assert (res.files, res.new, res.modified, res.deleted) == (0, [], [], [])


def test_pack_home_drops_mount_points_and_keeps_content(tmp_path: Path) -> None:
    home, dest = tmp_path / "home", tmp_path / "venv" / HOME_DIR
    for d in (".pyenv/versions/3.11.7", ".cache/uv", ".cache/pip"):
        (home / d).mkdir(parents=True)  # created by the build's binds under /root
    (home / ".cache" / "suite").mkdir()
    (home / ".cache" / "suite" / "data.bin").write_bytes(b"42")
    info = pack_home(home, dest, ["/testbed", "/root/.pyenv/versions/3.11.7", "/root/.cache/uv", "/root/.cache/pip"])
    assert info == {"dir": HOME_DIR, "path": "/root", "files": 1}
    assert _tree(dest) == {".cache/suite/data.bin": "42"} and not (dest / ".pyenv").exists()
    assert not (dest / ".cache" / "uv").exists()


def test_pack_home_of_an_untouched_home_is_none(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / ".cache" / "uv").mkdir(parents=True)
    assert pack_home(home, tmp_path / "dest", ["/root/.cache/uv"]) is None
    assert not (tmp_path / "dest").exists()


def test_special_files_are_never_residue(tmp_path: Path) -> None:
    before, after = tmp_path / "before", tmp_path / "after"
    before.mkdir()
    (after / "newdir").mkdir(parents=True)
    os.mkfifo(after / "pipe")  # e.g. left by a test server during the warm-up
    os.mkfifo(after / "newdir" / "pipe")
    (after / "newdir" / "ok.txt").write_text("x")
    res = collect_residue(before, after, tmp_path / "dest")
    assert res.new == ["/newdir/"] and res.files == 1
    assert _tree(tmp_path / "dest") == {"newdir/ok.txt": "x"}
