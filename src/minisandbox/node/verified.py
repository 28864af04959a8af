"""Store documents this node has already validated, so the hot path does not validate again.

Why: every `minisandbox run` reads its task's index shard and two or three manifests from
the store (always: a store may be re-published at any time, see `runtime.index_ttl`), and
checking them against the schema (`minisandbox.manifest`, `minisandbox.index`: pydantic
models) cost more than the rest of the command's start-up. A document's bytes are the same
from call to call, so the node cache remembers which it validated: a marker named by the
sha256 of (the validating code, what the document is, its bytes). A document whose marker
exists is parsed as JSON only; any other (new, changed, damaged) goes through the schema
and gets its marker only if it passed. Signatures (`store.read_bytes`) are still checked on
every read, and the bytes used are always the ones just read from the store.

The markers live in the node cache (`<cache>/verified/`), which the node trusts as it trusts
the layers in it; they are empty files (created whole, never partial: one inode per document
version the node has read).
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

from minisandbox.fsutil import sha256


@functools.cache
def _code_tag() -> bytes:
    """The digest of the modules whose checks a marker vouches for: a node running changed
    validation code validates every document again."""
    from minisandbox import index, manifest, records

    h = sha256()
    for mod in (manifest, index, records):
        h.update(Path(mod.__file__).read_bytes())
    return h.digest()


class Verified:
    """Markers of validated store documents under `root`."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def _marker(self, what: str, data: bytes) -> Path:
        h = sha256(_code_tag())
        h.update(what.encode() + b"\0")
        h.update(data)
        digest = h.hexdigest()
        return self.root / digest[:2] / digest

    def known(self, what: str, data: bytes) -> bool:
        """Did `data`, read as `what` (e.g. "manifest env/KEY"), pass validation here before?"""
        return self._marker(what, data).exists()

    def remember(self, what: str, data: bytes) -> None:
        """Record that `data` passed validation as `what` (best effort: a read-only cache
        only means validating again next time)."""
        marker = self._marker(what, data)
        try:
            marker.parent.mkdir(parents=True, exist_ok=True)
            os.close(os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644))
        except OSError:
            pass
