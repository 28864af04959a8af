"""Content-defined chunks of a layer image: the store's default representation of images.

Why: a squashfs image per environment costs its full size again in the store, although
environments share most of their files (docs/pipeline.md, "Store size: cross-environment
dedup"). Packing is deterministic and `normalize_tree` makes the same package the same
bytes in every environment, so images of different environments share long runs of
bytes. FastCDC (the `fastcdc` package) cuts an image where its content says, not at fixed
offsets, so a shared run gives the same chunks wherever it sits in the image; the store
keeps each distinct chunk once (`chunks/<aa>/<sha256>`) and a chunk list per image, and a
node reassembles the image (`minisandbox.node.chunks`) reusing chunks it already holds.

The cut points depend on the parameters below; changing them changes every list (chunks of
old and new lists simply do not share). They live here and nowhere else.
"""

from __future__ import annotations

import hashlib
import mmap
from dataclasses import dataclass
from pathlib import Path

from fastcdc import fastcdc

from minisandbox.fsutil import atomic_write_bytes
from minisandbox.manifest import chunk_list_document, chunk_list_name

#: FastCDC sizes (bytes): minimum, average (the normalised target), maximum chunk.
CHUNK_MIN = 16 * 1024
CHUNK_AVG = 64 * 1024
CHUNK_MAX = 256 * 1024


@dataclass(frozen=True)
class Chunking:
    """An image cut into chunks: its digest and size, and (sha256, length) per chunk in order."""

    image_sha256: str
    size: int
    chunks: tuple[tuple[str, int], ...]

    def document(self) -> bytes:
        """The chunk list's bytes (`minisandbox.manifest.ChunkList`)."""
        return chunk_list_document(self.image_sha256, self.size, list(self.chunks))

    def offsets(self) -> list[int]:
        out, at = [], 0
        for _, length in self.chunks:
            out.append(at)
            at += length
        return out


def cut(image: Path, *, min_size: int = CHUNK_MIN, avg_size: int = CHUNK_AVG, max_size: int = CHUNK_MAX) -> Chunking:
    """Cut `image` into content-defined chunks, hashing each chunk and the whole image in
    one read (the file is memory-mapped, nothing is copied)."""
    image = Path(image)
    whole = hashlib.sha256()
    chunks: list[tuple[str, int]] = []
    size = image.stat().st_size
    if size == 0:
        return Chunking(whole.hexdigest(), 0, ())
    with open(image, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        view = memoryview(mm)
        try:
            for c in fastcdc(view, min_size=min_size, avg_size=avg_size, max_size=max_size):
                part = view[c.offset : c.offset + c.length]
                whole.update(part)
                chunks.append((hashlib.sha256(part).hexdigest(), c.length))
                part.release()
        finally:
            view.release()
    if sum(length for _, length in chunks) != size:
        raise RuntimeError(f"chunking {image}: the chunks do not cover the file (changed while read?)")
    return Chunking(whole.hexdigest(), size, tuple(chunks))


def chunk_list_path(image: Path, key: str) -> Path:
    """Where packing puts an image's chunk list: beside the image, named by key."""
    return Path(image).parent / chunk_list_name(key)


def write_chunk_list(image: Path, key: str) -> tuple[Path, Chunking]:
    """Cut `image` and write its chunk list beside it (atomically). Returns (path, chunking)."""
    chunking = cut(image)
    out = chunk_list_path(image, key)
    atomic_write_bytes(out, chunking.document())
    return out, chunking
