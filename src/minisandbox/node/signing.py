"""Publisher signatures over a store's documents (optional): ed25519, one detached
`<document>.sig` beside each manifest, index shard and the index catalog.

Why: a store is as trusted as whoever can write to its bucket. Schema validation
(minisandbox.manifest) keeps a tampered document from reaching a host path, and every
archive and image is checked against the sha256 its manifest names; with signatures, a node
given the publisher's public key also refuses documents the publisher did not write (a
swapped manifest that points at another, valid archive; a task added to a shard). The
documents are the root of that chain: a manifest names its archive, image and chunk list by
sha256, so signing the documents covers every byte a node uses.

What is signed: ``b"minisandbox-store-v1\\0" + <store-relative path> + b"\\0" + <document
bytes>``, so a signed document cannot be moved to another place in the store (shard 00's
tasks served as shard 01's, one key's manifest as another's). Rolling the index back to an
older signed version is refused by minisandbox.node.freshness (the catalog's sequence and
shard digests). Not covered: one manifest rolled back to an older signed version of itself
(docs/pipeline.md).

Keys are PEM files as `openssl genpkey -algorithm ed25519` writes them (private) and
`openssl pkey -pubout` (public). Publishing signs when a private key is configured
(`MINISANDBOX_SIGNING_KEY`, set from the workflow's `signing_key`); a node verifies when
given a public key (`MINISANDBOX_STORE_PUBLIC_KEY`, or the CLI's `--store-public-key`);
without one, unsigned stores keep working. `cryptography` (extra `signing`) is imported
only when a key is configured.
"""

from __future__ import annotations

import os
from pathlib import Path

from minisandbox.errors import MinisandboxError
from minisandbox.fsutil import LazyPattern
from minisandbox.manifest import StoreDataError

#: Private key (PEM) that publishing signs with; unset: documents are published unsigned.
SIGNING_KEY_ENV = "MINISANDBOX_SIGNING_KEY"
#: Public key (PEM) that a node verifies every store document with; unset: no verification.
PUBLIC_KEY_ENV = "MINISANDBOX_STORE_PUBLIC_KEY"

SIG_SUFFIX = ".sig"
_CONTEXT = b"minisandbox-store-v1\0"
_SIG_PREFIX = "ed25519 "

#: The store documents that carry a signature (everything else is named by sha256 in one
#: of them, or is a build log).
SIGNED_DOCUMENT = LazyPattern(
    r"artifacts/(env|repo|interp)/[^/]+\.manifest\.json"
    r"|index/catalog\.json|index/tasks/[0-9a-f]{2}\.jsonl"
)


class SigningKeyError(MinisandboxError, ValueError):
    """A signing or public key file that cannot be used."""


class StoreSignatureError(StoreDataError):
    """A store document whose signature is missing or does not verify."""


def is_signed_document(rel: str) -> bool:
    return SIGNED_DOCUMENT.fullmatch(rel.lstrip("/")) is not None


def signature_path(rel: str) -> str:
    return rel.lstrip("/") + SIG_SUFFIX


def _message(rel: str, data: bytes) -> bytes:
    return _CONTEXT + rel.lstrip("/").encode("utf-8") + b"\0" + data


def _crypto():
    try:
        from cryptography.exceptions import InvalidSignature
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import ed25519
    except ImportError:
        raise SigningKeyError(
            "store signatures need the `cryptography` package: pip install 'minisandbox[signing]'"
        ) from None
    return serialization, ed25519, InvalidSignature


def _read_key(path: str | os.PathLike[str], what: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise SigningKeyError(f"{what} {path}: {exc.strerror or exc}") from None


class Signer:
    """Signs store documents with an ed25519 private key."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        serialization, ed25519, _ = _crypto()
        self.path = str(path)
        try:
            key = serialization.load_pem_private_key(_read_key(path, "signing key"), password=None)
        except (ValueError, TypeError) as exc:
            raise SigningKeyError(
                f"signing key {path}: not an unencrypted PEM private key ({exc}); make one with "
                "`openssl genpkey -algorithm ed25519 -out KEY.pem`"
            ) from None
        if not isinstance(key, ed25519.Ed25519PrivateKey):
            raise SigningKeyError(
                f"signing key {path}: a {type(key).__name__}, not an ed25519 key; make one with "
                "`openssl genpkey -algorithm ed25519 -out KEY.pem`"
            )
        self._key = key

    def sign(self, rel: str, data: bytes) -> bytes:
        """The content of `rel`'s `.sig` object."""
        import base64

        sig = self._key.sign(_message(rel, data))
        return (_SIG_PREFIX + base64.b64encode(sig).decode("ascii") + "\n").encode("ascii")


class Verifier:
    """Verifies store documents against an ed25519 public key."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        import hashlib

        serialization, ed25519, invalid = _crypto()
        self.path = str(path)
        self._invalid = invalid
        try:
            key = serialization.load_pem_public_key(_read_key(path, "store public key"))
        except (ValueError, TypeError) as exc:
            raise SigningKeyError(
                f"store public key {path}: not a PEM public key ({exc}); export it with "
                "`openssl pkey -in KEY.pem -pubout -out KEY.pub.pem`"
            ) from None
        if not isinstance(key, ed25519.Ed25519PublicKey):
            raise SigningKeyError(f"store public key {path}: a {type(key).__name__}, not an ed25519 key")
        self._key = key
        raw = key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        #: names the key in the node's freshness record (minisandbox.node.freshness)
        self.key_id = hashlib.sha256(raw).hexdigest()[:16]

    def verify(self, where: str, rel: str, data: bytes, signature: bytes | None) -> None:
        """Raise StoreSignatureError (one line naming the document) unless `signature` (the
        `.sig` object's content, None when missing) is the publisher's over `rel`/`data`."""
        import base64

        sig_rel = signature_path(rel)
        if signature is None:
            raise StoreSignatureError(
                f"{where}: {rel}: signature {sig_rel} is missing, and a store public key is "
                f"set ({self.path}); re-publish with the signing key, or unset "
                f"{PUBLIC_KEY_ENV} for an unsigned store"
            )
        try:
            text = signature.decode("ascii").strip()
            if not text.startswith(_SIG_PREFIX):
                raise ValueError("not an ed25519 signature")
            raw = base64.b64decode(text[len(_SIG_PREFIX) :], validate=True)
            self._key.verify(raw, _message(rel, data))
        except (ValueError, UnicodeDecodeError, self._invalid):
            raise StoreSignatureError(
                f"{where}: {rel}: signature {sig_rel} does not verify with {self.path}: the "
                "document was changed after it was signed, or signed with another key; "
                "re-publish it or fix the store"
            ) from None


def use_signing_key(path: str | os.PathLike[str] | None) -> None:
    """Make every store write of this process and its children sign (the workflow calls
    this with its `signing_key`): checks the key now, so a bad path or key fails before
    any job runs, then exports it as $MINISANDBOX_SIGNING_KEY. Empty: nothing changes."""
    if not path or not str(path).strip():
        return
    full = str(Path(path).resolve())
    Signer(full)
    os.environ[SIGNING_KEY_ENV] = full
