"""Manifests: what an artifact is (key, digest, size, file count, mount path, interpreter).

Written beside every published archive (docs/design.md, "Manifest"). A reader trusts an
archive only through its manifest's sha256 and size, and the manifest only once it passed
`validate_manifest`: a store is as trusted as whoever can write to its bucket, and fields
such as `sha256` (a cache directory name) and `mount_path` (a mount target) would otherwise
become host paths (docs/sandbox.md, "Store data is untrusted input").
"""

from __future__ import annotations

import functools
import json
import posixpath
import re
import time
from pathlib import Path

from minisandbox import __version__
from minisandbox.errors import MinisandboxError
from minisandbox.fsutil import file_digest
from minisandbox.paths import REPO_PATH, VENV_PATH

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a warm `run` does not)
if TYPE_CHECKING:
    from typing import Any

    from pydantic import BaseModel, ValidationError

SCHEMA = 1
FORMATS = {"tar.zst": ".tar.zst", "tar.gz": ".tar.gz"}


def artifact_name(key: str, fmt: str) -> str:
    if fmt not in FORMATS:
        raise ValueError(f"unknown archive format {fmt!r}; use one of {', '.join(FORMATS)}")
    return f"{key}{FORMATS[fmt]}"


def artifact_path(kind: str, key: str, fmt: str) -> str:
    """Store-relative path of an archive."""
    return f"artifacts/{kind}/{artifact_name(key, fmt)}"


def manifest_path(kind: str, key: str) -> str:
    return f"artifacts/{kind}/{key}.manifest.json"


def log_path(kind: str, key: str) -> str:
    return f"logs/{kind}/{key}.log"


def make_manifest(
    *,
    kind: str,
    key: str,
    fmt: str,
    archive: Path | None,
    files: int,
    raw_bytes: int,
    spec: dict[str, Any],
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Digest the archive and describe it. `extra`: interpreter/lock (env) or commit/source
    (repo), and the image. `archive` None: the layer has no archive (`extra` must name an image)."""
    described: dict[str, Any] = {}
    if archive is not None:
        sha, size = file_digest(archive)
        described = {"artifact": artifact_name(key, fmt), "sha256": sha, "size": size}
    return {
        "schema": SCHEMA,
        "kind": kind,
        "key": key,
        "format": fmt,
        **described,
        "files": files,
        "raw_bytes": raw_bytes,
        "mount_path": VENV_PATH if kind == "env" else REPO_PATH,
        **(extra or {}),
        "spec": spec,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "tool_version": __version__,
    }


# ------------------------------------------------------------------ reading: the schema
class StoreDataError(MinisandboxError, ValueError):
    """A manifest, index shard or catalog read from a store does not match the schema.

    A store is as trusted as whoever can write to its bucket: nothing read from it becomes a
    host path before it passed this check. The message names the object and the field."""


#: sha256 digests: lowercase hex, exactly 64 digits.
DIGEST = r"[0-9a-f]{64}"
#: Keys and artifact file names: one plain path component.
PLAIN_NAME = r"[A-Za-z0-9][A-Za-z0-9._+-]{0,199}"
FULL_VERSION = r"\d+\.\d+\.\d+"
INTERP_KEY = r"cpython-\d+\.\d+\.\d+-(?:uv|pyenv)-[0-9a-f]{16}"
#: Interpreter prefixes a manifest may name (docs/sandbox.md "Store data"): a pyenv
#: version directory, or a relocatable uv-managed interpreter under /opt/minisandbox/python.
PYENV_PREFIX = r"/(?:[A-Za-z0-9._-]+/)*versions/\d+\.\d+\.\d+"
UV_PREFIX = r"/opt/minisandbox/python/cpython-\d+\.\d+\.\d+[A-Za-z0-9._+-]*"
#: Never an interpreter prefix: system and pseudo file systems, the layers' own places.
FORBIDDEN_PREFIX_ROOTS = (
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/etc",
    "/proc",
    "/sys",
    "/dev",
    "/tmp",
    "/var",
    "/boot",
    "/testbed",
    "/opt/miniconda3",
)
#: Where each kind of layer may be mounted (interp: see interpreter_prefix_ok).
MOUNT_PATHS = {"repo": REPO_PATH, "env": VENV_PATH}
KINDS = ("env", "repo", "interp")
IMAGE_SUFFIX = {"squashfs": ".squashfs"}


def plain_name(value: str, what: str = "name") -> str:
    """`value` if it is one plain path component (no `/`, no `..`, no leading dot)."""
    if not isinstance(value, str) or not re.fullmatch(PLAIN_NAME, value) or ".." in value:
        raise ValueError(f"{what} must be a plain name ([A-Za-z0-9._+-], no '..', not starting with '.' or '-')")
    return value


def normalised_absolute(path: str) -> bool:
    return (
        isinstance(path, str)
        and path.startswith("/")
        and "\0" not in path
        and posixpath.normpath(path) == path
        and "//" not in path
    )


def interpreter_prefix_ok(path: str, *, system: bool = False) -> bool:
    """True for a prefix a sandbox may bind an interpreter at (see PYENV_PREFIX/UV_PREFIX);
    `system`: an interpreter of the host's /usr (nothing is bound then)."""
    if not normalised_absolute(path):
        return False
    if system:
        return path == "/usr" or path.startswith("/usr/")
    if not (re.fullmatch(PYENV_PREFIX, path) or re.fullmatch(UV_PREFIX, path)):
        return False
    return not any(path == r or path.startswith(r + "/") for r in FORBIDDEN_PREFIX_ROOTS)


# ------------------------------------------------------------------ chunked images
# A layer image is stored as content-defined chunks plus a chunk list
# `artifacts/<kind>/<key>.chunks.json` named by the manifest's `image.chunks`; nodes
# reassemble the image from it (docs/pipeline.md, "Store size"). Schema 2 (what publishing
# writes): the chunks live inside packs, `packs/<aa>/<sha256 of the pack>` (chunks
# concatenated, read with ranged GETs, neighbours coalesced), each with its index
# `packs/<aa>/<sha256>.idx` (which chunks, in order) that publishers read to find chunks the
# store holds already. Schema 1 (older stores, and the list packing writes locally): one
# object per chunk, `chunks/<aa>/<sha256>`.
CHUNK_LIST_SCHEMA = 1
PACKED_LIST_SCHEMA = 2
PACK_INDEX_SCHEMA = 1
PACK_INDEX_SUFFIX = ".idx"
#: Largest pack a store may name (publishing makes ~16 MiB packs).
MAX_PACK_BYTES = 1 << 32
CHUNK_LIST_SUFFIX = ".chunks.json"
#: Bounds a chunk list from a store must keep (far above what packing makes: ~2k chunks of
#: <= 256 KiB for a 120 MB image), so a hostile list cannot make a node allocate without end.
MAX_IMAGE_BYTES = 1 << 40
MAX_CHUNKS = 1 << 22
MAX_CHUNK_BYTES = 64 << 20
MAX_CHUNK_LIST_BYTES = 512 << 20


def chunk_path(digest: str) -> str:
    """Store-relative path of one chunk object: `chunks/<first two hex digits>/<sha256>`."""
    if not isinstance(digest, str) or not re.fullmatch(DIGEST, digest):
        raise StoreDataError(f"chunk digest {str(digest)[:80]!r} is not 64 lowercase hex digits")
    return f"chunks/{digest[:2]}/{digest}"


def pack_path(digest: str) -> str:
    """Store-relative path of one pack object: `packs/<first two hex digits>/<sha256>`."""
    if not isinstance(digest, str) or not re.fullmatch(DIGEST, digest):
        raise StoreDataError(f"pack digest {str(digest)[:80]!r} is not 64 lowercase hex digits")
    return f"packs/{digest[:2]}/{digest}"


def pack_index_path(digest: str) -> str:
    """Store-relative path of a pack's index (`<pack path>.idx`)."""
    return pack_path(digest) + PACK_INDEX_SUFFIX


def chunk_list_name(key: str) -> str:
    return f"{key}{CHUNK_LIST_SUFFIX}"


def chunk_list_document(
    image_sha256: str,
    size: int,
    chunks: list[tuple[str, int]],
    *,
    packs: list[tuple[str, int]] | None = None,
    at: list[tuple[int, int]] | None = None,
) -> bytes:
    """The bytes of a chunk list (compact, deterministic: same image and packs, same bytes);
    schema 2 when `packs` and `at` are given."""
    doc: dict[str, Any] = {
        "schema": CHUNK_LIST_SCHEMA,
        "image_sha256": image_sha256,
        "size": size,
        "chunks": [[sha, length] for sha, length in chunks],
    }
    if packs is not None:
        assert at is not None and len(at) == len(chunks)
        doc.update(schema=PACKED_LIST_SCHEMA, packs=[[p, n] for p, n in packs], at=[[p, o] for p, o in at])
    return (json.dumps(doc, separators=(",", ":"), sort_keys=True) + "\n").encode()


def pack_index_document(chunks: list[tuple[str, int]]) -> bytes:
    return (
        json.dumps({"schema": PACK_INDEX_SCHEMA, "chunks": [[d, n] for d, n in chunks]}, separators=(",", ":")) + "\n"
    ).encode()


def parse_pack_index(data: bytes, *, where: str, pack_size: int) -> list[tuple[str, int]]:
    """The chunks of a pack index if it parses and its lengths fill the pack (`pack_size`, as
    the store lists it), else a one-line StoreDataError naming `where`."""
    hint = "delete the pack and its index from the store (publishing writes them again)"
    try:
        doc = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise StoreDataError(f"{where}: not JSON ({one_line_error(exc)}); {hint}") from None
    idx = parse_store_model(_models()["PackIndex"], doc, where=where, hint=hint)
    total = sum(n for _, n in idx.chunks)
    if total != pack_size:
        raise StoreDataError(
            f"{where}: field 'chunks': lengths add up to {total}, the pack has {pack_size} bytes; {hint}"
        )
    return [(d, n) for d, n in idx.chunks]


def parse_chunk_list(data: bytes, *, where: str, image_sha256: str, image_size: int, count: int) -> Any:
    """The chunk list (a `ChunkList`) in `data` if it matches the schema and the manifest
    that named it (`image_sha256`, `image_size`: its image; `count`: image.chunks.count), else a one-line
    StoreDataError naming `where` and the field. The caller checked `data` against
    image.chunks.sha256 and size first (a changed list is a corrupt artifact, not bad data)."""
    hint = "re-publish the artifact or fix the store"
    try:
        doc = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise StoreDataError(f"{where}: not JSON ({one_line_error(exc)}); {hint}") from None
    if isinstance(doc, dict) and doc.get("schema") not in (CHUNK_LIST_SCHEMA, PACKED_LIST_SCHEMA):
        raise StoreDataError(
            f"{where}: field 'schema' is {str(doc.get('schema'))[:20]!r}; this minisandbox reads "
            f"chunk lists of schema 1 and 2: upgrade minisandbox or re-publish the artifact"
        )
    cl = parse_store_model(_models()["ChunkList"], doc, where=where, hint=hint)
    if cl.image_sha256 != image_sha256:
        raise StoreDataError(
            f"{where}: field 'image_sha256' is {cl.image_sha256[:16]}.. but the manifest's image is "
            f"{image_sha256[:16]}..; {hint}"
        )
    if cl.size != image_size:
        raise StoreDataError(
            f"{where}: field 'size' is {cl.size} but the manifest's image has {image_size} bytes; {hint}"
        )
    if len(cl.chunks) != count:
        raise StoreDataError(
            f"{where}: field 'chunks' has {len(cl.chunks)} entries but the manifest's "
            f"image.chunks.count is {count}; {hint}"
        )
    return cl


def one_line_error(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:200] if text else type(exc).__name__


@functools.cache
def _models() -> dict[str, Any]:
    """The pydantic models of the store documents, built on first use: building them costs
    more than the rest of a `minisandbox run` start-up, and a node whose documents were
    verified once when they entered its cache (`minisandbox.node.verified`) needs none."""
    from typing import Annotated, Any, Literal  # noqa: F401  (pydantic evaluates the annotations below here)

    from pydantic import (
        BaseModel,
        ConfigDict,
        Field,
        StrictBool,
        StrictInt,
        StringConstraints,
        ValidationInfo,
        field_validator,
        model_validator,
    )

    Digest = Annotated[str, StringConstraints(strict=True, pattern=f"^{DIGEST}$")]
    Count = Annotated[StrictInt, Field(ge=0)]
    PlainName = Annotated[str, StringConstraints(strict=True, pattern=f"^{PLAIN_NAME}$")]

    class _Model(BaseModel):
        # Unknown keys stay (additive manifest changes keep working) but are never used as paths.
        model_config = ConfigDict(extra="allow", populate_by_name=True)

    ChunkLength = Annotated[StrictInt, Field(ge=1, le=MAX_CHUNK_BYTES)]

    class ChunksInfo(_Model):
        """`image.chunks` of a manifest: where the image's chunk list is and what it must be."""

        artifact: PlainName
        sha256: Digest
        size: Annotated[StrictInt, Field(ge=1, le=MAX_CHUNK_LIST_BYTES)]
        count: Annotated[StrictInt, Field(ge=0, le=MAX_CHUNKS)]

        @field_validator("artifact")
        @classmethod
        def _artifact(cls, value: str) -> str:
            plain_name(value, "chunk list artifact")
            if not value.endswith(CHUNK_LIST_SUFFIX):
                raise ValueError(f"must end with {CHUNK_LIST_SUFFIX}")
            return value

    PackSize = Annotated[StrictInt, Field(ge=1, le=MAX_PACK_BYTES)]
    Offset = Annotated[StrictInt, Field(ge=0, le=MAX_PACK_BYTES)]
    PackNumber = Annotated[StrictInt, Field(ge=0, le=MAX_CHUNKS)]

    class ChunkList(_Model):
        """A chunk list: the image's digest and size, and its chunks in order as [sha256, length].
        Schema 2 adds `packs` ([sha256, size] of each pack the image reads from) and `at`
        ([pack number, offset] of each chunk, parallel to `chunks`): every chunk lies inside
        its pack, so a hostile list cannot name bytes outside the objects it names."""

        schema_version: Literal[1, 2] = Field(alias="schema")
        image_sha256: Digest
        size: Annotated[StrictInt, Field(ge=0, le=MAX_IMAGE_BYTES)]
        chunks: Annotated[list[tuple[Digest, ChunkLength]], Field(max_length=MAX_CHUNKS)]
        packs: Annotated[list[tuple[Digest, PackSize]], Field(max_length=MAX_CHUNKS)] | None = None
        at: Annotated[list[tuple[PackNumber, Offset]], Field(max_length=MAX_CHUNKS)] | None = None

        @model_validator(mode="after")
        def _sizes_add_up(self) -> ChunkList:
            total = sum(length for _, length in self.chunks)
            if total != self.size:
                raise ValueError(f"field 'chunks': lengths add up to {total}, field 'size' says {self.size}")
            if self.schema_version == 1:
                if self.packs is not None or self.at is not None:
                    raise ValueError("fields 'packs'/'at' belong to schema 2, the list says schema 1")
                return self
            if self.packs is None or self.at is None:
                raise ValueError("schema 2 needs fields 'packs' and 'at'")
            if len(self.at) != len(self.chunks):
                raise ValueError(f"field 'at' has {len(self.at)} entries, field 'chunks' {len(self.chunks)}")
            for i, ((pack, offset), (_, length)) in enumerate(zip(self.at, self.chunks)):
                if pack >= len(self.packs):
                    raise ValueError(f"field 'at' entry {i}: pack {pack} but the list names {len(self.packs)} packs")
                if offset + length > self.packs[pack][1]:
                    raise ValueError(
                        f"field 'at' entry {i}: offset {offset} + length {length} is past the end of "
                        f"pack {self.packs[pack][0][:12]}.. (size {self.packs[pack][1]})"
                    )
            return self

        def located(self) -> list[tuple[str, int, str, int]]:
            """(chunk sha256, length, pack sha256, offset) per chunk (schema 2 only)."""
            assert self.packs is not None and self.at is not None
            return [(d, n, self.packs[p][0], off) for (d, n), (p, off) in zip(self.chunks, self.at)]

    class PackIndex(_Model):
        """A pack's index: the chunks it holds, in order, as [sha256, length] (they fill it)."""

        schema_version: Literal[1] = Field(alias="schema")
        chunks: Annotated[list[tuple[Digest, ChunkLength]], Field(min_length=1, max_length=MAX_CHUNKS)]

    class ImageInfo(_Model):
        format: Literal["squashfs"] = "squashfs"
        artifact: PlainName
        sha256: Digest
        size: Annotated[StrictInt, Field(ge=0, le=MAX_IMAGE_BYTES)]
        chunks: ChunksInfo | None = None
        #: False: the store holds only the chunks (config `image_whole: false`, the default)
        whole: StrictBool = True

        @model_validator(mode="after")
        def _somewhere(self) -> ImageInfo:
            if not self.whole and self.chunks is None:
                raise ValueError("field 'whole': an image that is not stored whole needs 'chunks'")
            return self

        @field_validator("artifact")
        @classmethod
        def _artifact(cls, value: str, info: ValidationInfo) -> str:
            plain_name(value, "image artifact")
            suffix = IMAGE_SUFFIX.get(info.data.get("format", "squashfs"), "")
            if not value.endswith(suffix):
                raise ValueError(f"must end with {suffix}")
            return value

    class InterpreterInfo(_Model):
        version: Annotated[str, StringConstraints(strict=True, pattern=f"^{FULL_VERSION}$")]
        prefix: str
        kind: Literal["uv-managed", "pyenv", "system"] | None = None
        key: Annotated[str, StringConstraints(strict=True, pattern=f"^{INTERP_KEY}$")] | None = None

        @model_validator(mode="after")
        def _prefix(self) -> InterpreterInfo:
            system = self.kind == "system" or (self.kind is None and self.prefix.startswith("/usr"))
            if not interpreter_prefix_ok(self.prefix, system=system):
                raise ValueError(
                    f"interpreter.prefix {self.prefix!r} is not allowed: use a pyenv "
                    f"'.../versions/X.Y.Z' or '/opt/minisandbox/python/cpython-X.Y.Z...' prefix"
                    + (" (or /usr for a system interpreter)" if self.kind in (None, "system") else "")
                )
            return self

    class SubdirInfo(_Model):
        """A directory *inside* an env layer (`testbed`, `home`: docs/design.md, "Environment fidelity")."""

        dir: str
        path: str | None = None

        @model_validator(mode="after")
        def _dir(self) -> SubdirInfo:
            parts = self.dir.split("/")
            if not (0 < len(parts) <= 8) or not all(
                re.fullmatch(r"[A-Za-z0-9._+-]+", p) and p not in (".", "..") for p in parts
            ):
                raise ValueError(
                    f"dir {self.dir!r} must be a relative path of plain names (no '.', '..' or '/' at either end)"
                )
            return self

    class HomeInfo(SubdirInfo):
        path: Literal["/root"] | None = None

    class Manifest(_Model):
        schema_version: Literal[1] = Field(alias="schema")
        kind: Literal["env", "repo", "interp"]
        key: PlainName
        format: Literal["tar.zst", "tar.gz"] = "tar.zst"
        #: the archive; absent when the store serves the layer only as an image (config
        #: `archive: false`, the default with images: docs/pipeline.md, "Store size")
        artifact: PlainName | None = None
        sha256: Digest | None = None
        size: Count | None = None
        files: Count | None = None
        raw_bytes: Count | None = None
        mount_path: str | None = None
        interpreter: InterpreterInfo | None = None
        image: ImageInfo | None = None
        testbed: SubdirInfo | None = None
        home: HomeInfo | None = None

        @field_validator("key")
        @classmethod
        def _key(cls, value: str) -> str:
            return plain_name(value, "key")

        @field_validator("artifact")
        @classmethod
        def _artifact(cls, value: str | None, info: ValidationInfo) -> str | None:
            if value is None:
                return value
            plain_name(value, "artifact")
            suffix = FORMATS.get(info.data.get("format", "tar.zst"), "")
            if not value.endswith(suffix):
                raise ValueError(f"must end with {suffix} (the archive format)")
            return value

        @field_validator("mount_path")
        @classmethod
        def _mount_path(cls, value: str | None, info: ValidationInfo) -> str | None:
            kind = info.data.get("kind")
            if value is None or kind is None:
                return value
            if kind == "interp":
                if not interpreter_prefix_ok(value):
                    raise ValueError(
                        "an interp layer's mount_path must be an interpreter prefix "
                        "('.../versions/X.Y.Z' or '/opt/minisandbox/python/cpython-X.Y.Z...')"
                    )
            elif value != MOUNT_PATHS[kind]:
                raise ValueError(f"a {kind} layer's mount_path must be {MOUNT_PATHS[kind]}")
            return value

        @model_validator(mode="after")
        def _served_somehow(self) -> Manifest:
            archive = (self.artifact, self.sha256, self.size)
            if any(v is None for v in archive) and any(v is not None for v in archive):
                missing = next(n for n, v in zip(("artifact", "sha256", "size"), archive) if v is None)
                raise ValueError(f"field {missing!r}: missing (an archive needs artifact, sha256 and size)")
            if self.artifact is None and self.image is None:
                raise ValueError("field 'artifact': missing (a layer without an archive needs an 'image')")
            return self

        @model_validator(mode="after")
        def _interp_needs_mount_path(self) -> Manifest:
            if self.kind == "interp" and self.mount_path is None:
                raise ValueError("an interp layer needs a mount_path (its interpreter prefix)")
            return self

    models = {
        "ChunksInfo": ChunksInfo,
        "ChunkList": ChunkList,
        "PackIndex": PackIndex,
        "ImageInfo": ImageInfo,
        "InterpreterInfo": InterpreterInfo,
        "SubdirInfo": SubdirInfo,
        "HomeInfo": HomeInfo,
        "Manifest": Manifest,
    }
    for name, cls in models.items():  # named as the module's attributes (`__getattr__`): repr and pickle work
        cls.__qualname__ = name
    return models


_MODEL_NAMES = (
    "ChunksInfo",
    "ChunkList",
    "PackIndex",
    "ImageInfo",
    "InterpreterInfo",
    "SubdirInfo",
    "HomeInfo",
    "Manifest",
)


def __getattr__(name: str) -> Any:
    """`from minisandbox.manifest import Manifest` (or ChunkList, ...) builds the models then."""
    if name in _MODEL_NAMES:  # any other name (the import system asks for `__path__`) builds nothing
        return _models()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def first_error(exc: ValidationError) -> str:
    err = exc.errors(include_url=False)[0]
    loc = ".".join(str(p) for p in err["loc"]) or "<document>"
    msg = err["msg"].removeprefix("Value error, ")
    if err["type"] == "missing":
        return f"field {loc!r}: missing"
    if not err["loc"]:
        return msg
    shown = repr(err.get("input"))
    shown = shown if len(shown) <= 80 else shown[:77] + "..."
    return f"field {loc!r}: {msg} (got {shown})"


def parse_store_model(model: type[BaseModel], data: object, *, where: str, hint: str) -> Any:
    """`data` parsed as `model`, or a one-line StoreDataError naming `where`, the first bad
    field and what to do (`hint`): the one way every store document is checked."""
    if not isinstance(data, dict):
        raise StoreDataError(f"{where}: not a JSON object; {hint}")
    from pydantic import ValidationError

    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise StoreDataError(f"{where}: {first_error(exc)}; {hint}") from None


def validate_manifest(data: object, *, where: str, kind: str | None = None, key: str | None = None) -> dict:
    """`data` (a parsed manifest) if it matches the schema, else StoreDataError naming
    `where` (e.g. "store s3://b: artifacts/env/K.manifest.json") and the field. `kind`/`key`:
    what the manifest's location says it describes (a manifest moved to another key's place
    is refused)."""
    hint = "re-publish the artifact or fix the store"
    m = parse_store_model(_models()["Manifest"], data, where=where, hint=hint)
    if kind is not None and m.kind != kind:
        raise StoreDataError(f"{where}: field 'kind' is {m.kind!r} but the manifest describes a {kind}; {hint}")
    if key is not None and m.key != key:
        raise StoreDataError(f"{where}: field 'key' is {m.key!r} but the manifest's name says {key!r}; {hint}")
    return data


def has_archive(manifest: dict[str, Any]) -> bool:
    """Does the store hold an archive of this (validated) manifest's layer?"""
    return manifest.get("artifact") is not None


def content_id(manifest: dict[str, Any]) -> tuple[Any, ...]:
    """What identifies a published layer's bytes: its archive's and its image's sha256 and
    size (either may be absent). Two manifests with the same id describe the same layer."""
    image = manifest.get("image") or {}
    return (manifest.get("sha256"), manifest.get("size"), image.get("sha256"), image.get("size"))
