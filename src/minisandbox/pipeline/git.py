"""Mirror and snapshot: source repositories in, leak-free single-commit trees out.

One bare mirror per source (reused for all its commits). A snapshot is the commit's tree
committed afresh into a new repository with no other history, refs or tags, so an agent
cannot read a later fix from `git log`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from minisandbox.errors import MinisandboxError

#: Fixed identity and dates: snapshots of the same tree are bit-identical commits.
SNAPSHOT_ENV = {
    "GIT_AUTHOR_NAME": "minisandbox",
    "GIT_AUTHOR_EMAIL": "snapshot@minisandbox.invalid",
    "GIT_COMMITTER_NAME": "minisandbox",
    "GIT_COMMITTER_EMAIL": "snapshot@minisandbox.invalid",
    "GIT_AUTHOR_DATE": "2000-01-01T00:00:00+0000",
    "GIT_COMMITTER_DATE": "2000-01-01T00:00:00+0000",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_TERMINAL_PROMPT": "0",
}


class GitError(MinisandboxError, RuntimeError):
    pass


def _git(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> str:
    full_env = {**os.environ, **SNAPSHOT_ENV, **(env or {})}
    proc = subprocess.run(
        ["git", "-c", "commit.gpgsign=false", "-c", "init.defaultBranch=main", *args],
        cwd=cwd,
        env=full_env,
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        msg = (proc.stderr or proc.stdout).strip().splitlines()
        raise GitError(f"git {' '.join(args[:2])} failed: {msg[-1] if msg else 'no output'}")
    return proc.stdout


def resolve_source(source: str, workdir: Path) -> str:
    """A git URL stays as is; a local path is made absolute against the workflow's workdir."""
    if "://" in source or source.startswith("git@"):
        return source
    path = Path(source)
    return str(path if path.is_absolute() else (workdir / path).resolve())


def has_commit(mirror: Path, commit: str) -> bool:
    try:
        _git("--git-dir", str(mirror), "cat-file", "-e", f"{commit}^{{commit}}")
        return True
    except GitError:
        return False


def ensure_mirror(source: str, mirror: Path) -> None:
    """Clone `source` as a bare mirror, or fetch into an existing one. Atomic: a failed
    clone leaves no half mirror behind."""
    mirror = Path(mirror).absolute()
    if (mirror / "HEAD").exists():
        _git("--git-dir", str(mirror), "fetch", "--prune", "--tags", "origin", "+refs/*:refs/*")
        return
    mirror.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=mirror.parent, prefix=f".{mirror.name}."))
    try:
        _git("clone", "--mirror", "--quiet", source, str(tmp / "m.git"))
        os.replace(tmp / "m.git", mirror)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


#: In a snapshot's `.git`: `git describe --tags --long` of the source commit (its nearest
#: earlier release tag; nothing later), which the snapshot itself no longer has. Builds of
#: SWE-bench specs give it to setuptools_scm (`minisandbox.pipeline.build.scm_version`).
DESCRIBE_FILE = "minisandbox-describe"


def describe(mirror: Path, commit: str) -> str | None:
    """`<tag>-<distance>-g<hash>` of the nearest tag reachable from `commit` that looks
    like a version (setuptools_scm's own `--match`), or None."""
    try:
        out = _git("--git-dir", str(mirror), "describe", "--tags", "--long", "--match", "*[0-9]*", commit)
    except GitError:
        return None
    return out.strip() or None


def recorded_describe(snapshot: Path) -> str | None:
    """The snapshot's recorded `git describe` of its source commit (`DESCRIBE_FILE`)."""
    try:
        return (Path(snapshot) / ".git" / DESCRIBE_FILE).read_text().strip() or None
    except OSError:
        return None


def described_tag(snapshot: Path) -> str | None:
    """The release tag of the snapshot's recorded `git describe`, or None."""
    described = recorded_describe(snapshot) or ""
    return described.rpartition("-g")[0].rpartition("-")[0] or None


def tag_release(work_tree: Path) -> str | None:
    """Tag HEAD of a snapshot's build copy with its recorded release tag, so versioneer
    (which runs `git describe` itself and has no override such as setuptools_scm's
    `SETUPTOOLS_SCM_PRETEND_VERSION`) derives the release's version instead of
    `0+untagged` (pvlib 0.6-0.8: `pvfactors` then refuses `pvlib 0+untagged`). Only the
    build's private copy gets it: snapshots stay tag-free. Returns the tag, or None
    without a record or when git refuses the name as a ref."""
    tag = described_tag(work_tree)
    if tag is None or tag.startswith("-"):
        return None
    try:
        _git("check-ref-format", f"refs/tags/{tag}")
        _git("update-ref", f"refs/tags/{tag}", "HEAD", cwd=Path(work_tree))
    except GitError:
        return None
    return tag


def gitlinks(mirror: Path, commit: str) -> list[tuple[str, str]]:
    """(commit, path) of every submodule `commit`'s tree records.

    Why a snapshot keeps them: an install may check a submodule out itself, as SWE-bench's
    images do at build time (astropy 1.3's ah_bootstrap runs `git submodule update --init
    astropy_helpers`, cloning from the URL in .gitmodules, which a site's `insteadOf` rules
    point at its mirror); without the gitlink git knows no such submodule. The mirror holds
    only the repository itself: the submodule's commits come from its own URL."""
    out = _git("--git-dir", str(mirror), "ls-tree", "-r", "-z", commit)
    links = []
    for entry in out.split("\0"):
        meta, _, path = entry.partition("\t")
        fields = meta.split()
        if len(fields) == 3 and fields[0] == "160000":
            links.append((fields[2], path))
    return links


def make_snapshot(mirror: Path, commit: str, dest: Path, *, source: str | None = None) -> str:
    """Write `commit`'s tree to `dest` as a fresh single-commit repository; return its hash.

    Fetches the commit into the mirror first if it is missing (a mirror made earlier for
    another commit). `dest` is replaced atomically.
    """
    # Absolute paths: git resolves GIT_INDEX_FILE relative to the work tree, not our cwd.
    mirror, dest = Path(mirror).absolute(), Path(dest).absolute()
    if not has_commit(mirror, commit) and source:
        _git("--git-dir", str(mirror), "fetch", "--quiet", source, commit)
    if not has_commit(mirror, commit):
        raise GitError(f"commit {commit} not found in {source or mirror}; check the spec's commit")
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=dest.parent, prefix=f".{dest.name}."))
    try:
        tree = tmp / "tree"
        tree.mkdir()
        index = tmp / "index"
        env = {"GIT_INDEX_FILE": str(index)}
        _git("--git-dir", str(mirror), "--work-tree", str(tree), "read-tree", commit, env=env)
        _git("--git-dir", str(mirror), "--work-tree", str(tree), "checkout-index", "-a", "-f", env=env)
        _git("init", "--quiet", "-b", "main", cwd=tree)
        _git("add", "-A", "-f", cwd=tree)
        for sha, path in gitlinks(mirror, commit):
            _git("update-index", "--add", "--cacheinfo", f"160000,{sha},{path}", cwd=tree)
        _git("commit", "--quiet", "--no-verify", "--allow-empty", "-m", f"snapshot of {commit}", cwd=tree)
        head = _git("rev-parse", "HEAD", cwd=tree).strip()
        if described := describe(mirror, commit):
            (tree / ".git" / DESCRIBE_FILE).write_text(described + "\n")
        if dest.exists():
            shutil.rmtree(dest)
        os.replace(tree, dest)
        return head
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
