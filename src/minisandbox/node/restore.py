"""Safe, fast restore of an archive into a layer directory.

Why not `tarfile.extractall`: single-threaded Python and, for the published method, gzip
level 9, is what made environment preparation slow. Here Python decompresses (zstd or
gzip) and *checks every tar header* before handing the bytes to GNU tar, which creates the
files in a second process; decompression and file creation overlap on two cores.

Why check headers ourselves: GNU tar run as root would create device nodes, and its
defences differ across versions. A member is refused (and nothing is renamed into place)
when extracting it could write outside the layer directory or create something that is
not a plain file, directory, symlink or hardlink:

* absolute member names and names with `..` components;
* device, fifo, sparse, volume and multi-volume members;
* hardlinks whose target is absolute, has `..`, or is not an earlier member;
* any member below, or replacing, an earlier symlink (writing *through* a symlink).

Symlink *targets* are not restricted: venvs contain absolute links such as
`bin/python -> /root/.pyenv/versions/3.10.13/bin/python3.10` that are only resolved inside
the sandbox, where the layer is bound at its canonical path.

Atomicity: extraction goes into `<layers>/.tmp-<digest>-<uuid>` and is renamed to
`<layers>/<digest>` only when tar exited 0; a killed process leaves only a `.tmp-` dir,
which the next attempt (under the digest lock) removes.
"""

from __future__ import annotations

import os
import stat
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from minisandbox.errors import MinisandboxError
from minisandbox.fsutil import CHUNK

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a warm `run` does not)
if TYPE_CHECKING:
    import subprocess
    from typing import BinaryIO, TypeVar

    T = TypeVar("T")

BLOCK = 512

_ALLOWED_TYPES = {b"0", b"\0", b"7", b"1", b"2", b"5"}
_META_TYPES = {b"L", b"K", b"x", b"g"}
_TYPE_NAMES = {
    b"3": "character device",
    b"4": "block device",
    b"6": "fifo",
    b"S": "sparse file",
    b"V": "volume label",
    b"M": "multi-volume continuation",
    b"N": "old GNU long name",
}


class UnsafeArchiveError(MinisandboxError, ValueError):
    """The archive tries to write outside the layer or create a device; never retried."""


class RestoreError(MinisandboxError, RuntimeError):
    """Extraction failed (corrupt stream, tar error); the message names the archive."""


# -- decompression --------------------------------------------------------------------------
def _zstd_chunks(f: BinaryIO) -> Iterator[bytes]:
    import zstandard  # here, not at import: a warm `minisandbox run` unpacks nothing

    reader = zstandard.ZstdDecompressor().stream_reader(f, read_size=CHUNK, read_across_frames=True)
    while chunk := reader.read(CHUNK):
        yield chunk


def _gzip_chunks(f: BinaryIO) -> Iterator[bytes]:
    import zlib

    d = zlib.decompressobj(wbits=31)
    while True:
        raw = f.read(CHUNK)
        if not raw:
            break
        out = d.decompress(raw)
        if out:
            yield out
        while d.eof and d.unused_data:  # concatenated gzip members
            rest = d.unused_data
            d = zlib.decompressobj(wbits=31)
            out = d.decompress(rest)
            if out:
                yield out
    if not d.eof:
        raise RestoreError("gzip stream ends early (truncated archive)")
    tail = d.flush()
    if tail:
        yield tail


def _plain_chunks(f: BinaryIO) -> Iterator[bytes]:
    while chunk := f.read(CHUNK):
        yield chunk


DECOMPRESSORS: dict[str, Callable[[BinaryIO], Iterator[bytes]]] = {
    "tar.zst": _zstd_chunks,
    "tar.gz": _gzip_chunks,
    "tar": _plain_chunks,
}


class _Reader:
    """Exact-size reads over an iterator of chunks."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self._chunks = chunks
        self._buf = bytearray()
        self.offset = 0

    def read(self, n: int) -> bytes:
        while len(self._buf) < n:
            nxt = next(self._chunks, None)
            if nxt is None:
                break
            self._buf += nxt
        out = bytes(self._buf[:n])
        del self._buf[:n]
        self.offset += len(out)
        return out

    def pieces(self, n: int) -> Iterator[bytes]:
        """Yield exactly n bytes in chunks (fewer only at end of stream)."""
        left = n
        while left > 0:
            if not self._buf:
                nxt = next(self._chunks, None)
                if nxt is None:
                    return
                self._buf += nxt
            take = min(left, len(self._buf))
            out = bytes(self._buf[:take])
            del self._buf[:take]
            self.offset += take
            left -= take
            yield out

    def rest(self) -> Iterator[bytes]:
        if self._buf:
            yield bytes(self._buf)
            self._buf.clear()
        yield from self._chunks


# -- tar header checks ----------------------------------------------------------------------
def _cstr(field: bytes) -> str:
    return field.split(b"\0", 1)[0].decode("utf-8", "surrogateescape")


def _number(field: bytes) -> int:
    if field and field[0] & 0x80:  # GNU base-256
        value = field[0] & 0x7F
        for b in field[1:]:
            value = (value << 8) | b
        return value
    text = field.split(b"\0", 1)[0].strip()
    return int(text, 8) if text else 0


def _checksum_ok(hdr: bytes) -> bool:
    stored = _number(hdr[148:156])
    total = sum(hdr[:148]) + 8 * 32 + sum(hdr[156:])
    return stored == total


def _pax(data: bytes) -> dict[str, str]:
    out: dict[str, str] = {}
    pos = 0
    while pos < len(data):
        sp = data.index(b" ", pos)
        length = int(data[pos:sp])
        record = data[sp + 1 : pos + length - 1]  # without trailing newline
        key, _, value = record.partition(b"=")
        out[key.decode("utf-8", "surrogateescape")] = value.decode("utf-8", "surrogateescape")
        pos += length
    return out


def _parts(name: str, what: str, archive: str) -> tuple[str, ...]:
    if name.startswith("/"):
        raise UnsafeArchiveError(f"{archive}: {what} {name!r} is an absolute path; refusing to extract")
    parts = tuple(p for p in name.split("/") if p not in ("", "."))
    if ".." in parts:
        raise UnsafeArchiveError(f"{archive}: {what} {name!r} contains '..'; refusing to extract")
    if any("\0" in p for p in parts):
        raise UnsafeArchiveError(f"{archive}: {what} {name!r} contains NUL; refusing to extract")
    return parts


class _Checker:
    """Tracks members seen so far to catch writes through symlinks and dangling hardlinks."""

    def __init__(self, archive: str) -> None:
        self.archive = archive
        self.symlinks: set[tuple[str, ...]] = set()
        self.entries: set[tuple[str, ...]] = set()
        self.dirs: set[tuple[str, ...]] = {()}
        self.members = 0

    def _through_symlink(self, parts: tuple[str, ...], name: str) -> None:
        for i in range(1, len(parts) + 1):
            if parts[:i] in self.symlinks:
                where = "replaces" if i == len(parts) else "is below"
                raise UnsafeArchiveError(
                    f"{self.archive}: member {name!r} {where} the symlink "
                    f"{'/'.join(parts[:i])!r}; refusing to write through a link"
                )

    def check(self, typeflag: bytes, name: str, linkname: str) -> None:
        if typeflag not in _ALLOWED_TYPES:
            kind = _TYPE_NAMES.get(typeflag, f"type {typeflag!r}")
            raise UnsafeArchiveError(f"{self.archive}: member {name!r} is a {kind}; refusing to extract")
        parts = _parts(name, "member", self.archive)
        if not parts and typeflag != b"5":
            raise UnsafeArchiveError(f"{self.archive}: member {name!r} is the layer root but not a directory")
        self._through_symlink(parts, name)
        if typeflag == b"5" and parts in self.entries:
            raise UnsafeArchiveError(f"{self.archive}: directory {name!r} replaces a file; refusing to extract")
        if typeflag == b"1":
            target = _parts(linkname, f"hardlink target of {name!r}:", self.archive)
            if target not in self.entries:
                raise UnsafeArchiveError(
                    f"{self.archive}: hardlink {name!r} points to {linkname!r}, which is not "
                    f"an earlier file in the archive; refusing to extract"
                )
            self._through_symlink(target, linkname)
            if target in self.symlinks:
                self.symlinks.add(parts)
        if typeflag == b"2":
            self.symlinks.add(parts)
        if typeflag == b"5":
            self.dirs.add(parts)
        elif parts in self.dirs:
            raise UnsafeArchiveError(f"{self.archive}: member {name!r} replaces a directory; refusing to extract")
        else:
            self.entries.add(parts)
        self.members += 1


def checked_stream(chunks: Iterator[bytes], archive: str) -> Iterator[bytes]:
    """Yield the tar stream unchanged, but only after each member header has been checked.

    Raises UnsafeArchiveError before yielding the header of an unsafe member, and
    RestoreError for a corrupt or truncated stream."""
    reader = _Reader(chunks)
    checker = _Checker(archive)
    long_name: str | None = None
    long_link: str | None = None
    pax: dict[str, str] = {}
    while True:
        hdr = reader.read(BLOCK)
        if not hdr:
            raise RestoreError(f"{archive}: tar stream ends without an end-of-archive marker (truncated)")
        if len(hdr) < BLOCK:
            raise RestoreError(f"{archive}: tar stream truncated at byte {reader.offset}")
        if hdr == bytes(BLOCK):
            yield hdr
            yield from reader.rest()
            return
        if not _checksum_ok(hdr):
            raise RestoreError(f"{archive}: bad tar header checksum at byte {reader.offset - BLOCK} (corrupt archive)")
        typeflag = hdr[156:157]
        size = _number(hdr[124:136])
        padded = (size + BLOCK - 1) // BLOCK * BLOCK
        if typeflag in _META_TYPES:
            data = reader.read(padded)
            if len(data) < padded:
                raise RestoreError(f"{archive}: tar stream truncated in a header extension")
            payload = data[:size]
            if typeflag == b"L":
                long_name = _cstr(payload)
            elif typeflag == b"K":
                long_link = _cstr(payload)
            else:
                try:
                    fields = _pax(payload)
                except (ValueError, IndexError):
                    raise RestoreError(f"{archive}: malformed pax header at byte {reader.offset}") from None
                if typeflag == b"g" and ({"path", "linkpath"} & fields.keys()):
                    raise UnsafeArchiveError(f"{archive}: global pax header sets path/linkpath; refusing to extract")
                if typeflag == b"x":
                    pax.update(fields)
            yield hdr
            yield data
            continue
        name = _cstr(hdr[0:100])
        # POSIX ustar only: in the old GNU format ("ustar  ") those bytes hold atime/ctime.
        if hdr[257:263] == b"ustar\0" and hdr[345:500].strip(b"\0"):
            name = _cstr(hdr[345:500]) + "/" + name
        linkname = _cstr(hdr[157:257])
        if long_name is not None:
            name = long_name
        if long_link is not None:
            linkname = long_link
        name = pax.get("path", name)
        linkname = pax.get("linkpath", linkname)
        if "size" in pax:
            size = int(pax["size"])
            padded = (size + BLOCK - 1) // BLOCK * BLOCK
        if typeflag in (b"1", b"2", b"5") and size:
            raise UnsafeArchiveError(
                f"{archive}: link/directory member {name!r} has data ({size} bytes); "
                f"refusing to extract a malformed archive"
            )
        checker.check(typeflag, name, linkname)
        long_name = long_link = None
        pax = {}
        yield hdr
        got = 0
        for piece in reader.pieces(padded):
            got += len(piece)
            yield piece
        if got < padded:
            raise RestoreError(f"{archive}: tar stream truncated inside member {name!r}")


# -- extraction ---------------------------------------------------------------------------
def _tar_argv(dest: Path) -> list[str]:
    import shutil

    tar = shutil.which("tar")
    if not tar:
        raise RestoreError("GNU tar not found on PATH: install it (apt-get install tar)")
    return [
        tar,
        "--extract",
        "--file=-",
        f"--directory={dest}",
        "--no-same-owner",
        "--preserve-permissions",
        "--delay-directory-restore",
        "--no-overwrite-dir",
        "--no-acls",
        "--no-xattrs",
        "--no-selinux",
        "--warning=no-unknown-keyword",
        "--warning=no-timestamp",
    ]


def extract(archive: Path, fmt: str, dest: Path) -> int:
    """Extract the archive file `archive` into the existing empty directory `dest`."""
    with open(archive, "rb") as f:
        return extract_fileobj(f, fmt, dest, str(archive))


def extract_fileobj(f: BinaryIO, fmt: str, dest: Path, label: str) -> int:
    """Extract a compressed tar stream (tar.zst | tar.gz | tar) into the empty directory `dest`.

    `label` names the archive in errors. Returns the number of decompressed bytes. Raises
    UnsafeArchiveError / RestoreError; on error `dest` may hold a partial tree (callers
    extract into a temporary directory)."""
    import subprocess
    import zlib

    import zstandard  # here, not at import: a warm `minisandbox run` unpacks nothing

    if fmt not in DECOMPRESSORS:
        raise RestoreError(f"{label}: unknown archive format {fmt!r}; expected one of {', '.join(DECOMPRESSORS)}")
    proc = subprocess.Popen(_tar_argv(dest), stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert proc.stdin is not None and proc.stderr is not None
    errbuf: list[bytes] = []
    drain = threading.Thread(target=lambda: errbuf.append(proc.stderr.read()), daemon=True)
    drain.start()
    total = 0
    failure: BaseException | None = None
    try:
        try:
            batch = bytearray()  # fewer, larger pipe writes; order (check before tar sees it) is kept
            for piece in checked_stream(DECOMPRESSORS[fmt](f), label):
                batch += piece
                if len(batch) >= CHUNK:
                    proc.stdin.write(batch)
                    total += len(batch)
                    batch.clear()
            proc.stdin.write(batch)
            total += len(batch)
        except zstandard.ZstdError as exc:
            raise RestoreError(f"{label}: corrupt zstd stream ({exc})") from exc
        except zlib.error as exc:
            raise RestoreError(f"{label}: corrupt gzip stream ({exc})") from exc
    except BrokenPipeError:
        pass  # tar exited early; its exit status and stderr say why
    except BaseException as exc:
        failure = exc
        proc.kill()
    finally:
        try:
            proc.stdin.close()
        except BrokenPipeError:
            pass
        rc = proc.wait()
        drain.join()
    if failure is not None:
        raise failure
    if rc != 0:
        err = b"".join(errbuf).decode(errors="replace").strip().splitlines()
        raise RestoreError(f"{label}: tar exited {rc}: {err[-1] if err else 'no message'}")
    return total


def ensure_layer(layers: Path, digest: str, fill: Callable[[Path], T]) -> tuple[Path, T | None]:
    """Make `layers/<digest>` exist: `fill(tmp_dir)` extracts (and verifies) into a fresh
    temporary directory that is renamed into place only if `fill` returns. The caller holds
    the digest lock, so stale `.tmp-<digest>-*` dirs belong to dead attempts.

    Returns (layer dir, fill's result or None if the layer was already there)."""
    final = layers / digest
    if final.is_dir():
        return final, None
    layers.mkdir(parents=True, exist_ok=True)
    for stale in layers.glob(f".tmp-{digest}-*"):
        remove_tree(stale)  # a previous attempt died mid-unpack
    tmp = layers / f".tmp-{digest}-{os.urandom(6).hex()}"
    tmp.mkdir()
    try:
        result = fill(tmp)
        os.rename(tmp, final)
    except BaseException:
        remove_tree(tmp)
        raise
    return final, result


def unpack_file(archive: Path, fmt: str, layers: Path, digest: str) -> Path:
    """Unpack a local archive file as layer `digest` (no download, no digest check)."""
    return ensure_layer(layers, digest, lambda tmp: extract(archive, fmt, tmp))[0]


def remove_tree(path: Path) -> None:
    """rm -rf that also handles read-only directories inside the tree."""
    import shutil

    def onerror(func, p, exc_info):  # noqa: ANN001 - shutil's callback signature
        try:
            os.chmod(os.path.dirname(p), 0o755)
            if os.path.isdir(p) and not os.path.islink(p):
                os.chmod(p, 0o755)
            func(p)
        except FileNotFoundError:
            pass

    if path.is_symlink() or path.is_file():
        path.unlink(missing_ok=True)
        return
    for attempt in range(5):  # a dying writer (orphaned tar) may still add entries briefly
        try:
            if path.exists():
                shutil.rmtree(path, onerror=onerror)
            return
        except OSError:
            if attempt == 4:
                raise
            time.sleep(0.1 * (attempt + 1))


# -- filesystem images (root only) ----------------------------------------------------------
def can_mount_images(fmt: str = "squashfs") -> bool:
    """True when this process can loop-mount `fmt` images: root, loop devices, kernel support."""
    if os.geteuid() != 0 or not os.path.exists("/dev/loop-control") or not _on_path("mount"):
        return False
    try:
        with open("/proc/filesystems") as f:
            return any(line.split()[-1] == fmt for line in f if line.strip())
    except OSError:
        return False


def _on_path(tool: str) -> bool:
    """Is `tool` an executable in a directory of $PATH? (`shutil.which` without importing
    shutil, with bz2 and lzma: a warm `run` asks this and nothing else of it.)"""
    dirs = os.environ.get("PATH", os.defpath).split(os.pathsep)
    return any(os.access(os.path.join(d, tool), os.X_OK) and not os.path.isdir(os.path.join(d, tool)) for d in dirs)


def is_mounted(path: Path) -> bool:
    return os.path.ismount(path)


def mount_image(image: Path, mountpoint: Path, fmt: str = "squashfs") -> None:
    """Loop-mount a verified image read-only (nodev, nosuid) at `mountpoint` (an empty dir).

    Nothing is written to the host filesystem, so there is nothing to escape; device nodes
    inside the image are inert (nodev)."""
    _run_or_raise(
        ["mount", "-t", fmt, "-o", "loop,ro,nodev,nosuid", str(image), str(mountpoint)],
        f"{image}: mount -t {fmt}",
        "; set MINISANDBOX_IMAGES=0 to unpack instead",
    )


def _run_or_raise(argv: list[str], what: str, hint: str = "") -> subprocess.CompletedProcess:
    """Run a tool; on failure a RestoreError naming `what`, the exit code and its last line."""
    import subprocess

    proc = subprocess.run(argv, capture_output=True, text=True)
    if proc.returncode != 0:
        err = (proc.stderr or proc.stdout).strip().splitlines()
        raise RestoreError(f"{what} failed (exit {proc.returncode}): {err[-1] if err else ''}{hint}")
    return proc


#: file types a squashfs listing (`unsquashfs -lln`) may show: directory, file, symlink
_IMAGE_TYPES = {"d", "-", "l"}


def unsquash(image: Path, dest: Path) -> int:
    """Unpack a verified squashfs image into the existing empty directory `dest`, for a node
    that can mount it neither with the kernel nor with squashfuse when the store holds no
    archive (config `archive: false`). Returns the bytes of its files.

    The image's listing is checked first, with the archive's rules: only directories,
    files and symlinks (unsquashfs run as root would create device nodes and fifos). A
    squashfs tree cannot place an entry below a symlink or outside its root, so the
    path rules of `checked_stream` hold by construction."""
    import shutil

    exe = shutil.which("unsquashfs")
    if not exe:
        raise RestoreError(
            f"{image}: unsquashfs not found: install squashfs-tools (apt-get install squashfs-tools), "
            f"or publish archives too (config archive: true)"
        )
    listing = _run_or_raise([exe, "-lln", "-d", "", str(image)], f"{image}: unsquashfs -lln")
    for line in listing.stdout.splitlines():
        fields = line.split(None, 5)
        if not fields:
            continue
        if fields[0][0] not in _IMAGE_TYPES:
            name = fields[-1] if len(fields) == 6 else line
            raise UnsafeArchiveError(
                f"{image}: entry {name!r} is not a file, directory or symlink (mode {fields[0]}); refusing to unpack"
            )
    _run_or_raise([exe, "-no-xattrs", "-f", "-q", "-n", "-d", str(dest), str(image)], f"{image}: unsquashfs")
    return _file_bytes(dest)


def _file_bytes(root: Path) -> int:
    """Bytes of the regular files under `root`, a hard-linked file once."""
    seen: set[int] = set()
    total = 0
    for dirpath, _, files in os.walk(root):
        for name in files:
            st = os.lstat(os.path.join(dirpath, name))
            if stat.S_ISREG(st.st_mode) and st.st_ino not in seen:
                seen.add(st.st_ino)
                total += st.st_size
    return total


def unmount(mountpoint: Path) -> bool:
    """Unmount a layer image; False if it is busy (a sandbox still uses it)."""
    import subprocess

    proc = subprocess.run(["umount", str(mountpoint)], capture_output=True, text=True)
    return proc.returncode == 0 or not is_mounted(mountpoint)
