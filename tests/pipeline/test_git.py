"""Mirrors and leak-free snapshots on real local git repositories."""

from __future__ import annotations


import pytest

from minisandbox.pipeline.git import GitError, ensure_mirror, make_snapshot
from tests.fixtures.pipeline import git, make_tiny_project


def test_snapshot_is_a_fresh_single_commit_repo(tmp_path):
    src = tmp_path / "src"
    first = make_tiny_project(src)
    mirror = tmp_path / "m.git"
    ensure_mirror(str(src), mirror)
    ensure_mirror(str(src), mirror)  # second call fetches, does not fail
    head1 = make_snapshot(mirror, first, tmp_path / "a")
    head2 = make_snapshot(mirror, first, tmp_path / "b")
    assert head1 == head2  # deterministic
    snap = tmp_path / "a"
    assert git(snap, "rev-list", "--all", "--count") == "1"
    assert git(snap, "tag") == "" and git(snap, "remote") == ""
    assert not (snap / "NEWS").exists()
    assert (snap / "tinycalc" / "__init__.py").exists()
    assert git(snap, "status", "--porcelain") == ""


def test_snapshot_fetches_commits_missing_from_an_old_mirror(tmp_path):
    src = tmp_path / "src"
    make_tiny_project(src)
    mirror = tmp_path / "m.git"
    ensure_mirror(str(src), mirror)
    (src / "EXTRA").write_text("x\n")
    git(src, "add", "-A")
    git(src, "commit", "-q", "-m", "new")
    new = git(src, "rev-parse", "HEAD")
    make_snapshot(mirror, new, tmp_path / "s", source=str(src))
    assert (tmp_path / "s" / "EXTRA").exists()


def test_errors_name_the_problem(tmp_path):
    with pytest.raises(GitError, match="git clone"):
        ensure_mirror(str(tmp_path / "does-not-exist"), tmp_path / "m.git")
    assert not (tmp_path / "m.git").exists()  # no half mirror
    src = tmp_path / "src"
    make_tiny_project(src)
    ensure_mirror(str(src), tmp_path / "m.git")
    with pytest.raises(GitError, match="not found"):
        make_snapshot(tmp_path / "m.git", "0" * 40, tmp_path / "s")
    assert not (tmp_path / "s").exists()
