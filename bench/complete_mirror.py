"""Complete a fetched repository snapshot with blobs from a release's sdist.

A snapshot of the search tool's `fetch` omits files of 4 MiB and more, so a release tag
whose tree holds such a file (astropy's IERS table, pvlib's data files, pydicom's test
images) cannot be checked out, and bench_fidelity.py lists its SWE-bench series as not
measurable. The release's sdist often ships the very file. This makes a new bare
repository that borrows every object of the snapshot (git alternates, nothing copied),
has its refs, and adds each missing blob of the given tags whose bytes the sdist holds
*and* whose git blob id is the one the tag's tree names: the tag's commit is then the
upstream commit, complete and verified object by object. A commit can stand for a tag (a
SWE-smith profile commit between releases): the sdist of a release that ships the same
bytes fills it as well, since only the blob ids decide. Blobs the sdist lacks or holds
with other bytes stay missing (and are listed), so the bench keeps the series out.

    python bench/complete_mirror.py --git-dir MIRROR/repo --out MIRRORS2/owner+repo/repo \\
        --sdist v5.3.4=astropy-5.3.4.tar.gz [--sdist TAG=FILE ...]
"""

from __future__ import annotations

import argparse
import hashlib
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path


def git(git_dir: Path, *args: str, data: bytes | None = None) -> str:
    proc = subprocess.run(["git", "--git-dir", str(git_dir), *args], input=data, capture_output=True, check=True)
    return proc.stdout.decode()


def blob_id(content: bytes) -> str:
    """The git object id of a blob with these bytes."""
    return hashlib.sha1(b"blob %d\0" % len(content) + content).hexdigest()


def missing_blobs(git_dir: Path, rev: str) -> dict[str, str]:
    """{object id: path} of the objects of `rev`'s tree that `git_dir` lacks."""
    out = git(git_dir, "rev-list", "--objects", "--missing=print", "--no-walk", rev)
    missing = {line[1:] for line in out.splitlines() if line.startswith("?")}
    if not missing:
        return {}
    paths: dict[str, str] = {}
    for line in git(git_dir, "ls-tree", "-r", "-z", rev).split("\0"):
        if not line:
            continue
        meta, path = line.split("\t", 1)
        oid = meta.split()[2]
        if oid in missing:
            paths[oid] = path
    return {oid: paths.get(oid, "?") for oid in missing}


def sdist_files(path: Path) -> dict[str, bytes]:
    """The regular files of an sdist (.tar.gz or .zip), by path below its top directory."""
    files: dict[str, bytes] = {}
    if path.suffix == ".zip":
        with zipfile.ZipFile(path) as zf:
            for info in zf.infolist():
                if not info.is_dir() and "/" in info.filename:
                    files[info.filename.split("/", 1)[1]] = zf.read(info)
        return files
    with tarfile.open(path) as tf:
        for member in tf:
            if member.isfile() and "/" in member.name:
                fh = tf.extractfile(member)
                if fh is not None:
                    files[member.name.split("/", 1)[1]] = fh.read()
    return files


def make_overlay(src: Path, dest: Path) -> None:
    """A bare repository at `dest` that borrows `src`'s objects and has its refs and HEAD."""
    if not (dest / "HEAD").is_file():
        dest.mkdir(parents=True, exist_ok=True)
        git(dest, "init", "--bare", "--quiet")
    (dest / "objects" / "info").mkdir(parents=True, exist_ok=True)
    (dest / "objects" / "info" / "alternates").write_text(str((src / "objects").resolve()) + "\n")
    refs = git(src, "for-each-ref", "--format=%(objectname) %(refname)")
    (dest / "packed-refs").write_text("# pack-refs with: sorted\n" + refs)
    head = (src / "HEAD").read_text()
    (dest / "HEAD").write_text(head)


def commit_of(git_dir: Path, name: str) -> str:
    """The commit a release tag names, else `name` itself as a commit (a SWE-smith profile
    commit, which no tag may name; the sdist is then that of a release with the same file)."""
    proc = subprocess.run(
        ["git", "--git-dir", str(git_dir), "rev-parse", "--verify", "--quiet", f"refs/tags/{name}^{{commit}}"],
        capture_output=True,
        text=True,
    )
    return proc.stdout.strip() if proc.returncode == 0 else f"{name}^{{commit}}"


def complete(src: Path, dest: Path, sdists: list[tuple[str, Path]]) -> list[str]:
    """Fill what the sdists can of each tag (or commit); returns one report line per tag."""
    make_overlay(src, dest)
    lines = []
    for tag, sdist in sdists:
        rev = commit_of(dest, tag)
        missing = missing_blobs(dest, rev)
        files = sdist_files(sdist) if missing else {}
        filled, left = [], []
        for oid, path in sorted(missing.items(), key=lambda kv: kv[1]):
            content = files.get(path)
            if content is not None and blob_id(content) == oid:
                git(dest, "hash-object", "-w", "--stdin", data=content)
                filled.append(path)
            else:
                why = "not in the sdist" if content is None else "other bytes in the sdist"
                left.append(f"{path} ({why})")
        lines.append(
            f"{tag}: {len(missing)} missing, {len(filled)} filled from {sdist.name}"
            + (f"; still missing: {', '.join(left)}" if left else "")
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--git-dir", type=Path, required=True, help="the fetched snapshot (a git dir)")
    ap.add_argument("--out", type=Path, required=True, help="the completed repository to make (bare)")
    ap.add_argument(
        "--sdist",
        action="append",
        default=[],
        metavar="TAG=FILE",
        help="a tag (or a commit) and a release's sdist; only blobs with the tree's ids are taken",
    )
    args = ap.parse_args(argv)
    pairs = []
    for item in args.sdist:
        tag, sep, file = item.partition("=")
        if not sep or not Path(file).is_file():
            print(f"complete_mirror: --sdist {item}: expected TAG=FILE with an existing FILE", file=sys.stderr)
            return 2
        pairs.append((tag, Path(file)))
    for line in complete(args.git_dir, args.out, pairs):
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
