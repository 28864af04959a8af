"""Manifests: what an artifact is (key, digest, size, file count, mount path, interpreter).

Written beside every published archive (docs/design.md, "Manifest"). A reader trusts an
archive only through its manifest's sha256 and size.
"""

from __future__ import annotations

import datetime as _dt
from pathlib import Path
from typing import Any

from minisandbox import __version__
from minisandbox.fsutil import file_digest
from minisandbox.paths import REPO_PATH, VENV_PATH

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
    archive: Path,
    files: int,
    raw_bytes: int,
    spec: dict[str, Any],
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Digest the archive and describe it. `extra`: interpreter/lock (env) or commit/source (repo)."""
    sha, size = file_digest(archive)
    return {
        "schema": SCHEMA,
        "kind": kind,
        "key": key,
        "format": fmt,
        "artifact": artifact_name(key, fmt),
        "sha256": sha,
        "size": size,
        "files": files,
        "raw_bytes": raw_bytes,
        "mount_path": VENV_PATH if kind == "env" else REPO_PATH,
        **(extra or {}),
        "spec": spec,
        "created": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "tool_version": __version__,
    }
