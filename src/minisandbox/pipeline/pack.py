"""Deterministic archives of a built tree (a venv or a repository snapshot).

Why deterministic: the archive's sha256 is recorded in the manifest and is the node cache
key, so packing the same tree twice must give the same bytes (sorted members, every mtime
EPOCH, uid/gid 0, numeric owners, no atime/ctime headers). `normalize_tree` runs first, so
that the same package version gives the same bytes in every environment (.py and .pyc
alike): what makes chunks of different environments' images shareable (docs/pipeline.md,
"Store size: cross-environment dedup"). Members are relative (`./bin/python`)
and are extracted into an empty directory that becomes the content of the mount path.

Two formats:
* ``tar.zst`` (default): GNU tar piped into multi-threaded zstd; packs a 400 MB venv in
  ~1.6 s instead of ~43 s.
* ``tar.gz``: Python ``tarfile`` gzip level 9, the published method's format, kept so that
  stores in that format can be produced and read (and benchmarked against).
"""

from __future__ import annotations

import gzip
import importlib.util
import io
import os
import shutil
import stat
import subprocess
import tarfile
import uuid
from dataclasses import dataclass
from pathlib import Path

import zstandard

from minisandbox.errors import MinisandboxError
from minisandbox.fsutil import CHUNK, atomic_output

FORMATS = ("tar.zst", "tar.gz")
#: Read-only filesystem images a root node can loop-mount instead of unpacking.
IMAGE_FORMATS = ("squashfs",)
#: zstd level of squashfs images: a trade of the store's size (images are its default
#: representation, as chunks) against the CPU of packing every layer. Level 15 (until
#: BUILD_FORMAT 4) gave ~5% smaller images than 9 for ~6x the mksquashfs CPU: the bundled
#: set's 3 env images 18.7 -> 19.7 MB, unique chunk bytes +4.4%, 14.3 -> 2.3 CPU s; 4 real
#: SWE-smith env layers (236 MB raw) 70.8 -> 74.4 MB, unique chunks 0.698 -> 0.738 of
#: tar.gz-9, 53.7 -> 8.3 CPU s. Reading a mounted image is as fast at every level.
#: docs/pipeline.md ("zstd level of the images") has the tables.
IMAGE_LEVEL = 9


class PackError(MinisandboxError, RuntimeError):
    """Packing failed; the message names the tree and what to do."""


@dataclass(frozen=True)
class PackStats:
    files: int  # members that are not directories (files, symlinks, hardlinks)
    raw_bytes: int  # sum of regular file sizes (each inode counted once)


#: Top-level names that are never part of a tree: Snakemake's marker in directory outputs.
TOP_LEVEL_EXCLUDES = (".snakemake_timestamp",)

#: The one time every packed file, directory and link carries, in the tree, the archive and the
#: image (2020-01-01T00:00:00Z). A real date, not 0: some projects' tests (bottle's) break on
#: files dated 1970.
EPOCH = 1577836800

_PYC_HEADER = 16  # magic, flags, source mtime, source size (PEP 552), all 4 bytes


def restamped_pyc(pyc: str, data: bytes) -> bytes | None:
    """`data` (the bytes of the timestamp-based .pyc at `pyc`) with header mtime EPOCH when it
    is valid for its source `../<name>.py` (a regular file of the recorded size and mtime,
    what the interpreter checks); None when it is not, or is hash-based, or already EPOCH.
    Pure: reads only the source's metadata (see `_restamp_pyc` for why a stale pyc stays stale)."""
    try:
        source = importlib.util.source_from_cache(pyc)
        sst = os.lstat(source)
    except (ValueError, FileNotFoundError, NotADirectoryError):
        return None
    if not stat.S_ISREG(sst.st_mode):
        return None
    if len(data) < _PYC_HEADER or int.from_bytes(data[4:8], "little") != 0:
        return None
    mtime, size = int.from_bytes(data[8:12], "little"), int.from_bytes(data[12:16], "little")
    if size != sst.st_size & 0xFFFFFFFF or mtime != int(sst.st_mtime) & 0xFFFFFFFF or mtime == EPOCH:
        return None
    return data[:8] + EPOCH.to_bytes(4, "little") + data[12:]


def _restamp_pyc(pyc: str) -> bool:
    """Give one timestamp-based .pyc the header mtime EPOCH if it was valid for its source.

    Only a pyc in `__pycache__/<name>.<tag>[.opt-N].pyc` whose source `../<name>.py` is a
    regular file of the recorded size *and* recorded mtime (what the interpreter checks) is
    restamped: a pyc already stale stays stale rather than being made to look valid for a
    source it was not compiled from. Hash-based pycs (flags != 0) are left as they are.
    The new bytes go to a new file renamed over the old one, never written through the old
    inode (an interpreter layer's tree is hard-linked to the host's files)."""
    try:
        pst = os.lstat(pyc)
    except FileNotFoundError:
        return False
    if not stat.S_ISREG(pst.st_mode):
        return False
    with open(pyc, "rb") as f:
        data = restamped_pyc(pyc, f.read())
    if data is None:
        return False
    try:
        with atomic_output(pyc) as f:
            f.write(data)
            os.fchmod(f.fileno(), stat.S_IMODE(pst.st_mode))
    except PermissionError as exc:
        raise PackError(
            f"cannot restamp {pyc} while normalising the tree: {exc}; pack as a user who can write the tree"
        ) from None
    return True


@dataclass(frozen=True)
class NormalizeStats:
    pycs: int  # .pyc headers restamped to EPOCH
    times: int  # entries whose mtime was set to EPOCH
    shared: int  # regular files hard-linked outside the tree: their times are left alone


def normalize_tree(tree: Path) -> NormalizeStats:
    """Make `tree` independent of when it was built: every timestamp-based .pyc whose source
    is beside it gets header mtime EPOCH (see `_restamp_pyc`), then every file, directory
    and symlink (never followed) gets mtime EPOCH.

    Why: identical package versions then give byte-identical .py and .pyc files in every
    environment's archive and image (dedup across environments), and the pycs stay valid
    inside an image whose times are EPOCH (no recompilation in every sandbox).
    A regular file with hard links outside the tree (an interpreter layer is staged as hard
    links to the host's prefix) keeps its time: changing it would change the host's file;
    the archive and image writers pin every time to EPOCH anyway."""
    tree = Path(tree)
    if not tree.is_dir():
        raise PackError(f"cannot normalise {tree}: not a directory (was the build step run?)")
    top = {os.path.join(str(tree), name) for name in TOP_LEVEL_EXCLUDES}
    links: dict[tuple[int, int], int] = {}
    pycs = 0
    for root, dirs, names in os.walk(tree):
        dirs.sort()
        for name in sorted(names):
            path = os.path.join(root, name)
            if name.endswith(".pyc") and os.path.basename(root) == "__pycache__" and _restamp_pyc(path):
                pycs += 1
            st = os.lstat(path)
            if stat.S_ISREG(st.st_mode) and st.st_nlink > 1:
                links[(st.st_dev, st.st_ino)] = links.get((st.st_dev, st.st_ino), 0) + 1
    times = shared = 0
    for root, dirs, names in os.walk(tree, topdown=False):
        for name in names + dirs:
            path = os.path.join(root, name)
            if path in top:
                continue
            st = os.lstat(path)
            if stat.S_ISREG(st.st_mode) and st.st_nlink > links.get((st.st_dev, st.st_ino), 1):
                shared += 1
                continue
            if st.st_mtime != EPOCH:
                os.utime(path, (EPOCH, EPOCH), follow_symlinks=False)
                times += 1
    if os.lstat(tree).st_mtime != EPOCH:
        os.utime(tree, (EPOCH, EPOCH), follow_symlinks=False)
        times += 1
    return NormalizeStats(pycs=pycs, times=times, shared=shared)


def tree_stats(src: Path) -> PackStats:
    """Count non-directory entries and regular-file bytes (hardlinked inodes once)."""
    files = 0
    raw = 0
    seen: set[tuple[int, int]] = set()
    for root, dirs, names in os.walk(src):
        for name in names + [d for d in dirs if os.path.islink(os.path.join(root, d))]:
            if root == str(src) and name in TOP_LEVEL_EXCLUDES:
                continue
            files += 1
            st = os.lstat(os.path.join(root, name))
            if not os.path.islink(os.path.join(root, name)) and (st.st_dev, st.st_ino) not in seen:
                seen.add((st.st_dev, st.st_ino))
                raw += st.st_size
    return PackStats(files=files, raw_bytes=raw)


def _gnu_tar() -> str:
    tar = shutil.which("tar")
    if not tar:
        raise PackError("GNU tar not found on PATH: install it (apt-get install tar)")
    return tar


def _pack_zst(src: Path, fileobj, level: int) -> None:
    argv = [
        _gnu_tar(),
        "--create",
        "--file=-",
        f"--directory={src}",
        "--format=gnu",
        "--sort=name",
        f"--mtime=@{EPOCH}",
        "--owner=0",
        "--group=0",
        "--numeric-owner",
        "--no-acls",
        "--no-xattrs",
        "--no-selinux",
        "--anchored",
        *(f"--exclude=./{name}" for name in TOP_LEVEL_EXCLUDES),
        ".",
    ]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    cctx = zstandard.ZstdCompressor(level=level, threads=-1, write_checksum=True)  # detects bit rot
    try:
        cctx.copy_stream(proc.stdout, fileobj, read_size=CHUNK, write_size=CHUNK)
    finally:
        proc.stdout.close()
        err = proc.stderr.read().decode(errors="replace").strip()
        proc.stderr.close()
        rc = proc.wait()
    if rc != 0:
        raise PackError(f"tar of {src} failed (exit {rc}): {err.splitlines()[-1] if err else ''}")


def _normalise(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
    if info.name in {f"./{name}" for name in TOP_LEVEL_EXCLUDES}:
        return None
    info.mtime = EPOCH
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    info.pax_headers = {}
    return info


def _pack_gz(src: Path, fileobj) -> None:
    # gzip header mtime 0 and no file name, so the bytes depend on the tree only.
    with gzip.GzipFile(filename="", mode="wb", compresslevel=9, fileobj=fileobj, mtime=0) as gz:
        with tarfile.open(fileobj=gz, mode="w", format=tarfile.GNU_FORMAT) as tar:
            # tarfile.add sorts directory listings, so members come out in name order.
            tar.add(str(src), arcname=".", recursive=True, filter=_normalise)


def _checked(src: Path, out: Path, fmt: str, formats, what: str) -> tuple[Path, Path]:
    """Common preconditions of packing: a known format, a source directory, a parent for `out`."""
    src, out = Path(src), Path(out)
    if fmt not in formats:
        raise PackError(f"unknown {what} format {fmt!r} for {out}: use one of {', '.join(formats)}")
    if not src.is_dir():
        raise PackError(f"cannot pack {src}: not a directory (was the build step run?)")
    out.parent.mkdir(parents=True, exist_ok=True)
    return src, out


def pack_tree(src: Path, out: Path, fmt: str = "tar.zst", level: int = 3) -> PackStats:
    """Archive the *contents* of `src` to `out` (atomically: temp file, then rename)."""
    src, out = _checked(src, out, fmt, FORMATS, "archive")
    with atomic_output(out, fsync=True) as f:
        if fmt == "tar.zst":
            _pack_zst(src, f, level)
        else:
            _pack_gz(src, f)
    return tree_stats(src)


def _member(path: str, arcname: str, st: os.stat_result, inodes: dict[tuple[int, int], str]) -> tarfile.TarInfo | None:
    """The normalised member for `path` (what `tar.gettarinfo` then `_normalise` give, from
    one lstat and without gettarinfo's user and group name lookups); a regular file seen
    before under another name (a hard link) becomes a link to it, as tarfile does."""
    mode = st.st_mode
    info = tarfile.TarInfo(arcname)
    size, linkname = 0, ""
    if stat.S_ISREG(mode):
        inode = (st.st_ino, st.st_dev)
        if st.st_nlink > 1 and inode in inodes and arcname != inodes[inode]:
            kind, linkname = tarfile.LNKTYPE, inodes[inode]
        else:
            kind, size = tarfile.REGTYPE, st.st_size
            if inode[0]:
                inodes[inode] = arcname
    elif stat.S_ISDIR(mode):
        kind = tarfile.DIRTYPE
    elif stat.S_ISLNK(mode):
        kind, linkname = tarfile.SYMTYPE, os.readlink(path)
    elif stat.S_ISFIFO(mode):
        kind = tarfile.FIFOTYPE
    elif stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        kind = tarfile.CHRTYPE if stat.S_ISCHR(mode) else tarfile.BLKTYPE
        info.devmajor, info.devminor = os.major(st.st_rdev), os.minor(st.st_rdev)
    else:  # sockets and other special files are not part of a layer
        return None
    info.mode, info.size, info.type, info.linkname = mode, size, kind, linkname
    info.mtime, info.uid, info.gid, info.uname, info.gname = EPOCH, 0, 0, "", ""
    return info


def _stream_members(src: str, tar: tarfile.TarFile, empty: frozenset[str]) -> PackStats:
    """Add `src`'s contents to `tar` in name order (as GNU tar --sort=name), normalised as
    `_normalise` does, with valid pycs restamped in memory (`restamped_pyc`). Directories
    whose real path is in `empty` are archived empty. Nothing under `src` is written to.
    One lstat per entry (an interpreter prefix is ~8k files: the per-file Python work is
    what this costs besides compression)."""
    files = raw = 0
    seen: set[tuple[int, int]] = set()
    inodes: dict[tuple[int, int], str] = {}

    def add(path: str, arcname: str, st: os.stat_result) -> None:
        nonlocal files, raw
        info = _member(path, arcname, st, inodes)
        if info is None:
            return
        if info.type == tarfile.REGTYPE:
            with open(path, "rb") as fh:
                if arcname.endswith(".pyc") and os.path.basename(os.path.dirname(path)) == "__pycache__":
                    data = fh.read()
                    new = restamped_pyc(path, data)
                    info.size = len(new if new is not None else data)
                    tar.addfile(info, io.BytesIO(new if new is not None else data))
                else:
                    tar.addfile(info, fh)
            files += 1
            if (st.st_dev, st.st_ino) not in seen:
                seen.add((st.st_dev, st.st_ino))
                raw += info.size
        else:
            tar.addfile(info)
            if info.type != tarfile.DIRTYPE:
                files += 1

    def walk(directory: str, arcdir: str) -> None:
        if os.path.realpath(directory) in empty:
            return
        for name in sorted(os.listdir(directory)):
            if arcdir == "." and name in TOP_LEVEL_EXCLUDES:
                continue
            path = os.path.join(directory, name)
            st = os.lstat(path)
            add(path, f"{arcdir}/{name}", st)
            if stat.S_ISDIR(st.st_mode):
                walk(path, f"{arcdir}/{name}")

    add(src, ".", os.lstat(src))
    walk(src, ".")
    return PackStats(files=files, raw_bytes=raw)


def pack_stream(
    src: Path, out: Path, fmt: str = "tar.zst", level: int = 3, empty_dirs: tuple[Path, ...] = ()
) -> PackStats:
    """Archive the contents of a tree that is not ours to change (an interpreter's install
    prefix) straight into `out`, atomically: no staging copy, no hard link, no write to the
    tree. Member times are EPOCH and valid pycs are restamped in the stream, so the archive
    holds what `normalize_tree` then `pack_tree` would give for a copy of the tree.

    Why not stage and tar: a hard-linked staging tree shares inodes with the host install;
    another build linking the same install changes their ctimes and GNU tar fails with
    `file changed as we read it`. Reading each file once into the stream is also faster
    than linking, walking and re-reading the tree. `empty_dirs` (e.g. the base
    interpreter's site-packages) are archived as empty directories."""
    src, out = _checked(src, out, fmt, FORMATS, "archive")
    empty = frozenset(os.path.realpath(d) for d in empty_dirs)
    with atomic_output(out, fsync=True) as f:
        if fmt == "tar.zst":
            cctx = zstandard.ZstdCompressor(level=level, threads=-1, write_checksum=True)
            with (
                cctx.stream_writer(f, closefd=False) as z,
                tarfile.open(fileobj=z, mode="w|", format=tarfile.GNU_FORMAT) as tar,
            ):
                stats = _stream_members(str(src), tar, empty)
        else:
            with (
                gzip.GzipFile(filename="", mode="wb", compresslevel=9, fileobj=f, mtime=0) as gz,
                tarfile.open(fileobj=gz, mode="w", format=tarfile.GNU_FORMAT) as tar,
            ):
                stats = _stream_members(str(src), tar, empty)
    return stats


def pack_image(src: Path, out: Path, fmt: str = "squashfs", level: int = IMAGE_LEVEL) -> PackStats:
    """A deterministic read-only filesystem image of `src` (squashfs, zstd), atomically.

    Why: a root node can loop-mount the image as the layer in ~20 ms instead of unpacking
    thousands of files (0.025 s vs 1.2 s for 400 MB). mksquashfs 4.5
    builds reproducible images; every time is EPOCH (as in the archive, so the pycs
    `normalize_tree` restamped are valid inside the mounted image), owners root, no xattrs."""
    src, out = _checked(src, out, fmt, IMAGE_FORMATS, "image")
    exe = shutil.which("mksquashfs")
    if not exe:
        raise PackError(f"cannot build {out}: mksquashfs not found; apt-get install squashfs-tools")
    tmp = out.with_name(f"{out.name}.tmp-{uuid.uuid4().hex}")
    argv = [
        exe,
        str(src),
        str(tmp),
        "-noappend",
        "-comp",
        "zstd",
        "-Xcompression-level",
        str(level),
        "-no-xattrs",
        "-all-root",
        "-mkfs-time",
        str(EPOCH),
        "-all-time",
        str(EPOCH),
        "-reproducible",
        "-quiet",
        "-no-progress",
    ]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True)
        if proc.returncode != 0:
            err = (proc.stderr or proc.stdout).strip().splitlines()
            raise PackError(f"mksquashfs of {src} failed (exit {proc.returncode}): {err[-1] if err else ''}")
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.replace(tmp, out)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return tree_stats(src)
