"""The artifact store: one fsspec URL root (local directory, file://, s3://bucket/prefix).

Why atomic writes: a reader that sees an object must be able to rely on it (manifests are
written after their archive, the index last; docs/design.md). Every write goes to
`<rel>.tmp-<uuid>`, is verified (size; sha256 for local stores, where it is cheap), then
moved into place. On S3 the move is a server-side copy + delete, so a partial object is
never visible at `<rel>`.

Signatures (optional, minisandbox.node.signing): with a private key configured, writing a
manifest, an index shard or the catalog also writes its `.sig` (first, so a new document is
never visible unsigned); with a public key configured, reading one verifies it.

Endpoints and credentials come from the standard places: for S3 the AWS environment
variables / config files (`AWS_ENDPOINT_URL` for moto or MinIO, `AWS_DEFAULT_REGION`,
`AWS_ACCESS_KEY_ID`, ...) or `FSSPEC_S3_*` variables. Transient errors are retried with
exponential backoff; the final error names the store URL and what to check.
"""

from __future__ import annotations

import errno
import os
import time
from collections.abc import Callable
from pathlib import Path

from minisandbox.errors import MinisandboxError
from minisandbox.fsutil import file_digest
from minisandbox.node import signing

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a warm `run` does not)
if TYPE_CHECKING:
    from typing import Any, TypeVar

    import fsspec

    T = TypeVar("T")

#: URL schemes fsspec serves from the local file system.
_LOCAL_PROTOCOLS = ("file", "local")

#: Default number of attempts for one store operation (1 + retries).
DEFAULT_ATTEMPTS = int(os.environ.get("MINISANDBOX_STORE_ATTEMPTS", "4"))


class StoreError(MinisandboxError, RuntimeError):
    """A store operation failed for good; the message names the URL and what to do."""


class NotInStore(StoreError, FileNotFoundError):
    """The object does not exist in the store (not transient: never retried)."""


class StoreIndexMissing(StoreError, FileNotFoundError):
    """The store has no index: not a published store (or the wrong URL)."""


class StoreIntegrityError(StoreError):
    """An uploaded object did not verify (size or sha256) and was not moved into place."""


_PERMANENT = (
    FileNotFoundError,
    IsADirectoryError,
    NotADirectoryError,
    PermissionError,
    FileExistsError,
    StoreError,
    ValueError,
    TypeError,
    KeyError,
)
_TRANSIENT_ERRNOS = {
    errno.EIO,
    errno.EAGAIN,
    errno.ECONNRESET,
    errno.ECONNREFUSED,
    errno.ETIMEDOUT,
    errno.EHOSTUNREACH,
    errno.ENETUNREACH,
    errno.EPIPE,
    errno.ECONNABORTED,
    errno.EBUSY,
}


def is_transient(exc: BaseException) -> bool:
    """Network-ish failures worth another attempt; missing objects and bad input are not."""
    if isinstance(exc, StoreIntegrityError):
        return True  # a short or damaged upload: the next attempt starts from scratch
    if isinstance(exc, _PERMANENT):
        return False
    if _unreachable(exc):
        return False  # reported at once, naming the endpoint (Store._call)
    if type(exc).__name__ in ("NoCredentialsError", "PartialCredentialsError"):
        return False  # no attempt will find them
    if isinstance(exc, (ConnectionError, TimeoutError)):
        return True
    mod = type(exc).__module__ or ""
    if mod.startswith(("botocore", "aiobotocore", "aiohttp", "urllib3", "requests")):
        return True
    if isinstance(exc, OSError):
        # s3fs maps many service errors to OSError without errno; treat unknown as transient.
        return exc.errno is None or exc.errno in _TRANSIENT_ERRNOS
    return False


#: S3 client settings (botocore's Config, passed by s3fs as `config_kwargs`), from the
#: environment: an endpoint that does not answer is reported within seconds, not after
#: minutes of nested retries (s3fs's own loop, botocore's, ours).
S3_CONNECT_TIMEOUT_ENV = "MINISANDBOX_S3_CONNECT_TIMEOUT"  # seconds to open a connection (3)
S3_READ_TIMEOUT_ENV = "MINISANDBOX_S3_READ_TIMEOUT"  # seconds to wait for a response (60)
S3_ATTEMPTS_ENV = "MINISANDBOX_S3_ATTEMPTS"  # botocore attempts per request, the first included (3)


def _env_number(name: str, default: float, kind: type = float) -> Any:
    text = os.environ.get(name)
    if text is None or not text.strip():
        return kind(default)
    try:
        value = kind(text)
    except ValueError:
        value = None
    if value is None or value <= 0:
        raise StoreError(f"${name}={text!r}: expected a positive number")
    return value


def s3_client_options() -> dict[str, Any]:
    """s3fs options for a quick, bounded failure: botocore's connect/read timeouts and its
    attempts per request (standard retry mode: throttling and transient errors, backoff
    with jitter) from MINISANDBOX_S3_*. s3fs's own retry loop around botocore's is turned
    off in `Store` (retries are counted in one place). Settings given through fsspec's own
    configuration (FSSPEC_S3_CONFIG_KWARGS, ...) win."""
    config = {
        "connect_timeout": _env_number(S3_CONNECT_TIMEOUT_ENV, 3),
        "read_timeout": _env_number(S3_READ_TIMEOUT_ENV, 60),
        "retries": {"total_max_attempts": _env_number(S3_ATTEMPTS_ENV, 3, int), "mode": "standard"},
    }
    import fsspec.config

    user = fsspec.config.conf.get("s3", {})
    return {"config_kwargs": {**config, **(user.get("config_kwargs") or {})}}


def _storage_options(protocol: str) -> dict[str, Any]:
    """Explicit endpoint for S3 from the environment, so fsspec's instance cache is keyed on
    it, and the client settings of `s3_client_options`."""
    if protocol in ("s3", "s3a"):
        options = s3_client_options()
        endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
        if endpoint:
            options["endpoint_url"] = endpoint
        return options
    return {}


def _unreachable(exc: BaseException) -> bool:
    """The endpoint itself cannot be reached (refused, no route, DNS, connect timeout):
    botocore has already retried; more attempts would only make the user wait."""
    names = {c.__name__ for c in type(exc).__mro__}
    return bool(names & {"EndpointConnectionError", "ConnectTimeoutError", "ProxyConnectionError"})


class Store:
    """Atomic, verified, retried file operations on an fsspec URL root."""

    def __init__(
        self,
        url: str | os.PathLike[str],
        *,
        attempts: int | None = None,
        backoff: float = 0.2,
        signer: signing.Signer | None = None,
        verifier: signing.Verifier | None = None,
        **storage_options: Any,
    ) -> None:
        """`signer`/`verifier` default to the keys named by $MINISANDBOX_SIGNING_KEY and
        $MINISANDBOX_STORE_PUBLIC_KEY (none when unset)."""
        url = os.fspath(url)
        self.signer = signer if signer is not None else _env_key(signing.SIGNING_KEY_ENV, signing.Signer)
        self.verifier = verifier if verifier is not None else _env_key(signing.PUBLIC_KEY_ENV, signing.Verifier)
        self._url = url.rstrip("/") or url
        protocol = self._url.split("://", 1)[0] if "://" in self._url else "file"
        options = {**_storage_options(protocol), **storage_options}
        self._options = options
        self._fs: fsspec.AbstractFileSystem | None = None
        if protocol in _LOCAL_PROTOCOLS and not storage_options:
            # A local store's reads (every `minisandbox run`) need no fsspec, whose import
            # costs more than the rest of the command's start-up: `fs` is made on first use.
            root = _local_path(self._url)
        else:
            root = self._make_fs()
        self.root = root.rstrip("/") if root != "/" else root
        self.local = protocol in _LOCAL_PROTOCOLS if self._fs is None else "file" in _protocols(self._fs)
        #: what a request may cost before it fails, for messages (botocore rewrites its config)
        self._client = dict(options.get("config_kwargs") or {})
        self.attempts = attempts if attempts is not None else DEFAULT_ATTEMPTS
        self.backoff = backoff

    def _make_fs(self) -> str:
        """Make the fsspec file system of the URL (importing fsspec); returns its root path."""
        import fsspec.core

        try:
            fs, root = fsspec.core.url_to_fs(self._url, **self._options)
        except ImportError as exc:
            raise StoreError(
                f"store {self._url}: {exc}; install the filesystem package (for s3://: pip install s3fs)"
            ) from exc
        if "s3" in _protocols(fs):
            fs.retries = 1  # s3fs's loop (5 by default) around botocore's own: attempts multiply
        self._fs = fs
        return root

    @property
    def fs(self) -> fsspec.AbstractFileSystem:
        """The fsspec file system (for a local store: made on first use)."""
        if self._fs is None:
            self._make_fs()
        return self._fs

    # -- naming ---------------------------------------------------------------------------
    @property
    def url(self) -> str:
        return self._url

    def __repr__(self) -> str:
        return f"Store({self._url!r})"

    def path(self, rel: str) -> str:
        """Filesystem path of `rel` (the URL root joined with a relative key)."""
        rel = rel.lstrip("/")
        if not rel:
            return self.root
        if any(part in ("..", ".") for part in rel.split("/")):
            raise StoreError(f"store key {rel!r} must not contain '.' or '..' components")
        return f"{self.root}/{rel}"

    def url_of(self, rel: str) -> str:
        return f"{self._url}/{rel.lstrip('/')}"

    # -- retry plumbing -------------------------------------------------------------------
    def _hint(self) -> str:
        if self.local:
            return "check the path exists and is readable, or pass --store URL"
        return "check AWS_ENDPOINT_URL / AWS_DEFAULT_REGION / credentials and that the bucket exists"

    def _attempts(self, what: str, rel: str, fn: Callable[[], T]) -> T:
        """`fn()`, retried with exponential backoff while it fails transiently, `attempts`
        times in all. The first attempt runs bare: tenacity (whose import costs a CLI call
        ~10 ms) is only brought in once a transient failure needs another attempt."""
        try:
            return fn()
        except Exception as exc:
            if self.attempts <= 1 or not is_transient(exc):
                raise
        from tenacity import RetryError, Retrying, retry_if_exception, stop_after_attempt, wait_exponential

        time.sleep(min(self.backoff, 5))  # the wait after attempt 1; attempt k waits backoff * 2**(k-1)
        try:
            for attempt in Retrying(
                stop=stop_after_attempt(self.attempts - 1),
                wait=wait_exponential(multiplier=self.backoff * 2, max=5),
                retry=retry_if_exception(is_transient),
                reraise=True,
            ):
                with attempt:
                    return fn()
        except RetryError as exc:  # pragma: no cover - reraise=True makes this rare
            raise StoreError(f"store {self._url} unreachable during {what} {rel}: {exc}; {self._hint()}") from exc
        raise AssertionError("unreachable")  # pragma: no cover

    def _call(self, what: str, rel: str, fn: Callable[[], T]) -> T:
        try:
            return self._attempts(what, rel, fn)
        except FileNotFoundError as exc:
            if isinstance(exc, StoreError):
                raise
            raise NotInStore(self._missing_message(rel)) from exc
        except StoreError:
            raise
        except Exception as exc:
            if type(exc).__module__.startswith("minisandbox."):
                raise  # our own errors (e.g. an unsafe archive met while streaming) keep their type
            if _unreachable(exc):
                raise StoreError(
                    f"store {self._url}: cannot reach the S3 endpoint {self.endpoint()} "
                    f"({type(exc).__name__}, {self.attempts_note()}); check AWS_ENDPOINT_URL "
                    f"(or AWS_ENDPOINT_URL_S3) and that the service is up"
                ) from exc
            if is_transient(exc):
                raise StoreError(
                    f"store {self._url} unreachable ({what} {rel}, {self.attempts} attempts): "
                    f"{type(exc).__name__}: {_one_line(exc)}; {self._hint()}"
                ) from exc
            raise StoreError(
                f"store {self._url}: {what} {rel} failed: {type(exc).__name__}: {_one_line(exc)}; {self._hint()}"
            ) from exc
        raise AssertionError("unreachable")  # pragma: no cover

    def _missing_message(self, rel: str) -> str:
        if self.local and not os.path.isdir(self.root):
            return f"store {self._url} does not exist (no directory {self.root}); publish one first or pass --store URL"
        if self.bucket_missing():
            return self._bucket_message()
        return f"{self.url_of(rel)} not found in store {self._url}"

    # -- object storage: endpoint and bucket ----------------------------------------------
    def endpoint(self) -> str:
        """The S3 endpoint this store talks to (for messages)."""
        client = getattr(self.fs, "s3", None)
        url = getattr(getattr(client, "meta", None), "endpoint_url", None)
        return url or getattr(self.fs, "endpoint_url", None) or os.environ.get("AWS_ENDPOINT_URL") or "AWS default"

    def attempts_note(self) -> str:
        retries = self._client.get("retries") or {}
        tries = retries.get("total_max_attempts") or retries.get("max_attempts")
        timeout = self._client.get("connect_timeout")
        if not tries:
            return "no answer"
        return f"{tries} attempts, {timeout:g} s connect timeout each: ${S3_ATTEMPTS_ENV}, ${S3_CONNECT_TIMEOUT_ENV}"

    @property
    def bucket(self) -> str | None:
        """The bucket of an object-storage URL (None for a local store)."""
        return None if self.local else self.root.split("/", 1)[0] or None

    def bucket_missing(self) -> bool:
        """The store's bucket does not exist (asked once per Store, only on a miss:
        a missing bucket otherwise shows up as every object missing)."""
        if self.bucket is None or "s3" not in _protocols(self.fs):
            return False
        if not hasattr(self, "_bucket_missing"):
            try:
                self.fs.invalidate_cache(self.bucket)
                self._bucket_missing = not self.fs.exists(self.bucket)
            except Exception:  # noqa: BLE001 - unknown (no permission to look): not claimed
                self._bucket_missing = False
        return self._bucket_missing

    def _bucket_message(self) -> str:
        return (
            f"store {self._url}: bucket {self.bucket!r} does not exist at {self.endpoint()}; create it "
            f"(`minisandbox push --create-bucket SRC {self._url}`, or `aws s3 mb s3://{self.bucket}`) "
            f"or check the URL"
        )

    def create_bucket(self) -> bool:
        """Create the store's bucket if it does not exist; True when it was created."""
        if not self.bucket_missing():
            return False
        self._call("create bucket", "", lambda: self.fs.mkdir(self.bucket))
        self._bucket_missing = False
        return True

    # -- reads ----------------------------------------------------------------------------
    def exists(self, rel: str) -> bool:
        """Whether the object is there; a store whose bucket does not exist is an error
        (naming the bucket), not a store where nothing exists."""
        if self._fs is None:  # a local store, fsspec not needed yet (as LocalFileSystem.exists)
            return self._call("exists", rel, lambda: os.path.lexists(self.path(rel)))
        found = self._call("exists", rel, lambda: bool(self.fs.exists(self.path(rel))))
        if not found and self.bucket_missing():
            raise StoreError(self._bucket_message())
        return found

    def size(self, rel: str) -> int:
        return int(self._call("size", rel, lambda: self.fs.size(self.path(rel))))

    def ls(self, rel: str = "") -> list[str]:
        """Names (relative to the store root) directly under `rel`; [] if it does not exist."""

        def run() -> list[str]:
            p = self.path(rel)
            if not self.fs.exists(p):
                return []
            prefix = self.root.rstrip("/") + "/"
            out = []
            for name in self.fs.ls(p, detail=False):
                name = name.rstrip("/")
                out.append(name[len(prefix) :] if name.startswith(prefix) else name)
            return sorted(out)

        return self._call("ls", rel, run)

    def read_bytes(self, rel: str) -> bytes:
        """An object's bytes; a signed document (manifest, index shard, catalog) is
        verified first when this store has a public key."""
        data = self._call("read", rel, lambda: self._cat(rel))
        if self.verifier is not None and signing.is_signed_document(rel):
            self.verifier.verify(f"store {self._url}", rel, data, self.read_signature(rel))
        return data

    def read_range(self, rel: str, start: int, end: int) -> bytes:
        """Bytes [start, end) of an object: one ranged GET on an object store. An object that
        ends early gives a short answer (none when it ends before `start`, which S3 answers
        with "range not satisfiable"), for the caller to refuse as truncated."""

        def run() -> bytes:
            try:
                return self.fs.cat_file(self.path(rel), start=start, end=end)
            except OSError as exc:
                if exc.errno == errno.EINVAL and "range" in str(exc).lower():
                    return b""
                raise

        return self._call("read", f"{rel} [{start}:{end}]", run)

    def _cat(self, rel: str) -> bytes:
        if self._fs is None:  # a local store, fsspec not needed yet (as LocalFileSystem.cat_file)
            with open(self.path(rel), "rb") as fh:
                return fh.read()
        return self.fs.cat_file(self.path(rel))

    def read_signature(self, rel: str) -> bytes | None:
        """The `.sig` object of document `rel`, None when there is none."""
        sig = signing.signature_path(rel)
        try:
            return self._call("read", sig, lambda: self._cat(sig))
        except NotInStore:
            return None

    def read_text(self, rel: str) -> str:
        return self.read_bytes(rel).decode("utf-8")

    def open(self, rel: str, mode: str = "rb", **kwargs: Any):
        """Open an object for streaming (no retry: callers retry the whole transfer)."""
        try:
            return self.fs.open(self.path(rel), mode, **kwargs)
        except FileNotFoundError as exc:
            raise NotInStore(self._missing_message(rel)) from exc

    def get_file(self, rel: str, local: Path, *, callback: Any = None) -> None:
        """Download `rel` to `local` (the caller verifies and places it atomically).
        `callback`: an fsspec callback told the bytes as they arrive (progress)."""
        local = Path(local)
        local.parent.mkdir(parents=True, exist_ok=True)
        kw = {"callback": callback} if callback is not None else {}
        self._call("get", rel, lambda: self.fs.get_file(self.path(rel), str(local), **kw))

    # -- writes ---------------------------------------------------------------------------
    def _tmp(self, rel: str) -> str:
        return f"{self.path(rel)}.tmp-{os.urandom(16).hex()}"

    def _ensure_parent(self, path: str) -> None:
        if self.local:
            self.fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)

    def _place(self, tmp: str, rel: str) -> None:
        dest = self.path(rel)
        if self.local:
            os.replace(tmp, dest)  # atomic rename, overwrites
        else:
            self.fs.mv(tmp, dest)

    def _discard(self, tmp: str) -> None:
        try:
            self.fs.rm_file(tmp)
        except Exception:
            pass

    def put_file(self, local: Path, rel: str, *, sha256: str | None = None, callback: Any = None) -> None:
        """Upload atomically: tmp object, verify size (and sha256 when local), move into place.
        `callback`: an fsspec callback told the bytes as they leave (progress)."""
        local = Path(local)
        want_size = local.stat().st_size
        if sha256 is None and self.local:
            sha256, _ = file_digest(local)

        def run() -> None:
            tmp = self._tmp(rel)
            self._ensure_parent(tmp)
            try:
                self.fs.put_file(str(local), tmp, **({"callback": callback} if callback is not None else {}))
                got = int(self.fs.size(tmp))
                if got != want_size:
                    raise StoreIntegrityError(
                        f"upload of {local} to {self.url_of(rel)}: size {got} != {want_size}; "
                        f"retry the publish step (store full or connection cut?)"
                    )
                if self.local and sha256:
                    got_sha, _ = file_digest(Path(tmp))
                    if got_sha != sha256:
                        raise StoreIntegrityError(
                            f"upload of {local} to {self.url_of(rel)}: sha256 {got_sha} != "
                            f"{sha256}; the local file changed during upload, rebuild it"
                        )
                self._place(tmp, rel)
            except BaseException:
                self._discard(tmp)
                raise

        self._call("put", rel, run)

    def put_bytes(self, rel: str, data: bytes, *, signature: bytes | None = None) -> None:
        """Write an object atomically. A signed document gets its `.sig` written first:
        `signature` when given (a copy carrying the publisher's), else made with this
        store's signing key when it has one."""
        if signing.is_signed_document(rel):
            if signature is None and self.signer is not None:
                signature = self.signer.sign(rel, data)
            if signature is not None:
                self._put_bytes(signing.signature_path(rel), signature)
        self._put_bytes(rel, data)

    def _put_bytes(self, rel: str, data: bytes) -> None:
        import hashlib

        want = hashlib.sha256(data).hexdigest()

        def run() -> None:
            tmp = self._tmp(rel)
            self._ensure_parent(tmp)
            try:
                self.fs.pipe_file(tmp, data)
                got = int(self.fs.size(tmp))
                if got != len(data):
                    raise StoreIntegrityError(f"write of {self.url_of(rel)}: size {got} != {len(data)}; retry")
                if self.local and hashlib.sha256(Path(tmp).read_bytes()).hexdigest() != want:
                    raise StoreIntegrityError(f"write of {self.url_of(rel)}: sha256 mismatch; retry")
                self._place(tmp, rel)
            except BaseException:
                self._discard(tmp)
                raise

        self._call("put", rel, run)

    def put_object(self, rel: str, data: bytes) -> None:
        """Write an object that readers check by digest (a pack, its index, a chunk list
        whose sha256 its manifest records). On an object store this is one PUT to `rel`
        (the service makes an object visible only once it is whole and checks the body's
        checksum), not the four requests of `put_bytes`; a local store still writes a temp
        file and renames it."""
        if self.local:
            self._put_bytes(rel, data)
            return
        self._call("put", rel, lambda: self.fs.pipe_file(self.path(rel), data))

    def put_text(self, rel: str, text: str) -> None:
        self.put_bytes(rel, text.encode("utf-8"))

    def delete(self, rel: str, *, recursive: bool = False) -> None:
        """Remove an object (or a prefix with recursive=True); missing is not an error."""

        def run() -> None:
            p = self.path(rel)
            if self.fs.exists(p):
                self.fs.rm(p, recursive=recursive)

        self._call("delete", rel, run)


_KEYS: dict[tuple[str, str], Any] = {}


def _env_key(var: str, kind: type) -> Any:
    """The Signer/Verifier for the key file named by $`var` (loaded once per path)."""
    path = os.environ.get(var, "").strip()
    if not path:
        return None
    if (var, path) not in _KEYS:
        _KEYS[(var, path)] = kind(path)
    return _KEYS[(var, path)]


def _protocols(fs: fsspec.AbstractFileSystem) -> tuple[str, ...]:
    proto = fs.protocol
    return (proto,) if isinstance(proto, str) else tuple(proto)


def _local_path(url: str) -> str:
    """The directory of a local store URL (a path, `file://PATH` or `local://PATH`), as
    fsspec's LocalFileSystem names it: absolute, `~` expanded."""
    path = url.split("://", 1)[1] if "://" in url else url
    if path.startswith("/"):
        return path
    if path.startswith("~"):
        return os.path.expanduser(path)
    return f"{os.getcwd()}/{'' if path == '.' else path.removeprefix('./')}"


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:300] if text else repr(exc)


def open_store(store: Store | str | os.PathLike[str] | None = None) -> Store:
    """A Store from a URL, an existing Store, or None (the default config's store)."""
    if isinstance(store, Store):
        return store
    if store is None:
        from minisandbox.paths import default_store

        store = default_store()
    return Store(store)
