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


def test_snapshot_records_the_nearest_release_tag_and_builds_read_its_version(tmp_path):
    """The snapshot has no tags, but records `git describe` of the source commit (nothing
    later than it); a SWE-bench build turns it into setuptools_scm's version, as SWE-bench's
    clone with tags would give it (a tagged commit: the tag; later: the next dev release)."""
    from minisandbox.pipeline.build import scm_version
    from minisandbox.pipeline.git import DESCRIBE_FILE

    src = tmp_path / "src"
    tagged = make_tiny_project(src)  # (its later "fix" commit is one after it)
    git(src, "tag", "v1.2.0", tagged)
    (src / "later.txt").write_text("x\n")
    git(src, "add", "later.txt")
    git(src, "commit", "-q", "-m", "after the release")
    after = git(src, "rev-parse", "HEAD")
    git(src, "tag", "v1.3.0")  # a later release: never visible from the earlier commit
    git(src, "tag", "docs-backup", tagged)  # not a version: ignored, as setuptools_scm does
    mirror = tmp_path / "m.git"
    ensure_mirror(str(src), mirror)

    make_snapshot(mirror, tagged, tmp_path / "at-tag")
    assert (tmp_path / "at-tag" / ".git" / DESCRIBE_FILE).read_text().startswith("v1.2.0-0-g")
    assert scm_version(tmp_path / "at-tag") == "1.2.0"
    assert git(tmp_path / "at-tag", "tag") == "" and git(tmp_path / "at-tag", "status", "--porcelain") == ""

    git(mirror, "tag", "-d", "v1.3.0")  # the commit after the release, before the next one
    make_snapshot(mirror, after, tmp_path / "after")
    assert scm_version(tmp_path / "after") == f"1.2.1.dev2+g{after[:7]}"

    untagged = tmp_path / "untagged-src"
    plain = make_tiny_project(untagged)
    make_snapshot(untagged / ".git", plain, tmp_path / "plain")
    assert not (tmp_path / "plain" / ".git" / DESCRIBE_FILE).exists()
    assert scm_version(tmp_path / "plain") is None


@pytest.mark.parametrize(
    "described, version",
    [
        ("sympy-1.14.0-0-gabc1234", "1.14.0"),
        ("8.0.0rc2-3-gabc1234", "8.0.0rc2.dev3+gabc1234"),
        ("v2024.05.0-12-gabc1234", "2024.05.1.dev12+gabc1234"),
        ("nonsense", None),
    ],
)
def test_scm_version_follows_setuptools_scm_default_scheme(tmp_path, described, version):
    from minisandbox.pipeline.build import scm_version
    from minisandbox.pipeline.git import DESCRIBE_FILE

    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / DESCRIBE_FILE).write_text(described + "\n")
    assert scm_version(tmp_path) == version


def test_a_build_copy_gets_the_release_tag_versioneer_reads(tmp_path):
    """versioneer runs `git describe` itself (no override like setuptools_scm's): the build's
    private copy of a SWE-bench snapshot is tagged with the recorded release tag, so it
    derives the release's version; the snapshot itself stays without tags."""
    import shutil

    from minisandbox.pipeline.git import DESCRIBE_FILE, tag_release

    src = tmp_path / "src"
    tagged = make_tiny_project(src)
    git(src, "tag", "v0.8.1", tagged)
    mirror = tmp_path / "m.git"
    ensure_mirror(str(src), mirror)
    snap = tmp_path / "snap"
    make_snapshot(mirror, tagged, snap)
    copy = tmp_path / "testbed"
    shutil.copytree(snap, copy, symlinks=True)
    versioneer = ("describe", "--tags", "--dirty", "--always", "--long", "--match", "v*")
    assert git(copy, *versioneer).count("-") == 0  # untagged: versioneer's `0+untagged`

    assert tag_release(copy) == "v0.8.1"
    assert git(copy, *versioneer).startswith("v0.8.1-0-g")
    assert git(copy, "status", "--porcelain") == ""
    assert git(snap, "tag") == ""

    (copy / ".git" / DESCRIBE_FILE).write_text("v1..2-0-gabc1234\n")  # git refuses the ref name
    assert tag_release(copy) is None
    (copy / ".git" / DESCRIBE_FILE).write_text("--upload-pack=x-0-gabc1234\n")
    assert tag_release(copy) is None
    assert git(copy, "tag") == "v0.8.1"
    (copy / ".git" / DESCRIBE_FILE).unlink()
    assert tag_release(copy) is None


def test_a_snapshot_keeps_its_submodules_for_an_install_to_check_out(tmp_path):
    """astropy 1.3's install runs `git submodule update --init astropy_helpers` (SWE-bench's
    image clones it then): the snapshot records the submodule's commit (not its files, which
    the mirror does not have), so that command fetches it from the URL in .gitmodules, here
    a local repository as a site's mirror rules would make it."""
    helpers = tmp_path / "helpers"
    make_tiny_project(helpers)
    pinned = git(helpers, "rev-parse", "HEAD~1")
    src = tmp_path / "src"
    make_tiny_project(src)
    (src / ".gitmodules").write_text(f'[submodule "ah"]\n\tpath = ah\n\turl = {helpers}\n')
    git(src, "add", ".gitmodules")
    git(src, "update-index", "--add", "--cacheinfo", f"160000,{pinned},ah")
    git(src, "commit", "-q", "-m", "submodule")
    mirror = tmp_path / "m.git"
    ensure_mirror(str(src), mirror)
    snap = tmp_path / "snap"
    make_snapshot(mirror, git(src, "rev-parse", "HEAD"), snap)
    assert git(snap, "ls-files", "-s", "ah").split()[:2] == ["160000", pinned]
    assert git(snap, "status", "--porcelain") == ""
    git(snap, "-c", "protocol.file.allow=always", "submodule", "update", "--init", "--", "ah")
    assert (snap / "ah" / "tinycalc" / "__init__.py").exists()
    assert git(snap / "ah", "rev-parse", "HEAD") == pinned
