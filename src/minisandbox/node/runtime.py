"""Node runtime: resolve a task id in a published store to leased, ready layer directories.

Why: hundreds of sandboxes per node need their environment within seconds. The first use
of an artifact on a node streams it from the store into the content-addressed cache
(bounded by disk/network speed and the node's I/O budget); every further sandbox of that
environment only takes a lock, writes a lease and gets the paths (milliseconds). Sandboxes
mount the layers read-only as overlay lowers at their canonical paths (docs/design.md).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from minisandbox.errors import MinisandboxError
from minisandbox.fsutil import LazyPattern
from minisandbox.manifest import has_archive
from minisandbox.node.cache import Artifact, Cache, LayerResult, Lease
from minisandbox.node.iobudget import IOBudget
from minisandbox.node.restore import RestoreError
from minisandbox.node.store import Store, StoreIndexMissing, open_store  # noqa: F401  (StoreIndexMissing: re-exported)
from minisandbox.paths import HOME_PATH, REPO_PATH, VENV_PATH
from minisandbox.sandbox.hostlibs import check_host_libs
from minisandbox.syspkgs import installed_state, validate_names
from minisandbox.syspkgs import require as require_system_packages

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a warm `run` does not)
if TYPE_CHECKING:
    from typing import Any, TypeVar

    from minisandbox.node.verified import Verified

    T = TypeVar("T")


class TaskNotReady(MinisandboxError, RuntimeError):
    """The task exists but its environment or repository failed to build."""


class EnvManifestError(MinisandboxError, ValueError):
    """An env manifest field this node needs is malformed (one line naming the field)."""


_PLAIN = LazyPattern(r"[A-Za-z0-9._+-]+")


def _sub_dir(env_key: str, field_name: str, value: object) -> str:
    """A directory inside the env layer named by the manifest: relative, plain components
    only, so joining it to the layer path can never leave the layer."""
    parts = value.split("/") if isinstance(value, str) else []
    if not parts or len(parts) > 8 or any(p in ("", ".", "..") or not _PLAIN.fullmatch(p) for p in parts):
        raise EnvManifestError(
            f"env manifest {env_key}: {field_name} {value!r} is not a plain relative "
            "directory; re-publish the environment"
        )
    return "/".join(parts)


def testbed_residue(env_manifest: Mapping[str, Any], repo_manifest: Mapping[str, Any]) -> dict[str, Any] | None:
    """The env build's install residue of /testbed (docs/design.md "Environment fidelity")
    when it belongs to this task's snapshot: the build ran on the same commit (always for
    SWE-smith; for SWE-bench only when the base commit is the environment's setup commit)."""
    tb = env_manifest.get("testbed")
    if not isinstance(tb, dict) or not tb.get("commit") or tb.get("commit") != repo_manifest.get("commit"):
        return None
    key = str(env_manifest.get("key", "?"))
    out = {**tb, "dir": _sub_dir(key, "testbed.dir", tb.get("dir"))}
    for name in ("new", "modified"):
        items = tb.get(name) or []
        if not isinstance(items, list) or not all(
            isinstance(i, str) and "\n" not in i and ".." not in i.split("/") for i in items
        ):
            raise EnvManifestError(
                f"env manifest {key}: testbed.{name} must be a list of relative paths; re-publish the environment"
            )
    return out


def sandbox_layers(
    layers: Mapping[str, Path], env_manifest: Mapping[str, Any], repo_manifest: Mapping[str, Any]
) -> list[Any]:
    """The `minisandbox.sandbox.sandbox.Layer`s of one task: the restored repo and env
    layers at their mount paths, the env's install residue stacked over the snapshot at
    /testbed, and the HOME the build left, at HOME (both packed inside the env layer)."""
    from minisandbox.sandbox.sandbox import Layer

    env_dir = layers.get(VENV_PATH)
    tb = testbed_residue(env_manifest, repo_manifest) if env_dir is not None else None
    out = [
        Layer(str(path), mount, over=(str(Path(env_dir) / tb["dir"]),) if tb and mount == REPO_PATH else ())
        for mount, path in layers.items()
    ]
    home = env_manifest.get("home")
    if isinstance(home, dict) and env_dir is not None:
        key = str(env_manifest.get("key", "?"))
        if home.get("path") != HOME_PATH:
            raise EnvManifestError(
                f"env manifest {key}: home.path {home.get('path')!r} is not {HOME_PATH}; re-publish the environment"
            )
        out.append(Layer(str(Path(env_dir) / _sub_dir(key, "home.dir", home.get("dir"))), HOME_PATH))
    return out


def check_host(env_manifest: Mapping[str, Any], what: str, verified: Verified | None = None) -> None:
    """The Debian packages the environment was built with must be on this node too.
    `verified`: the node cache's markers, which remember a check that passed for as long as
    dpkg's database is unchanged (`syspkgs.installed_state`): asking dpkg-query costs about
    12 ms of CPU and 20 ms of wall time, on every `run` of such an environment otherwise."""
    names = env_manifest.get("system_packages") or []
    if not isinstance(names, list):
        raise EnvManifestError(f"env manifest {env_manifest.get('key', '?')}: system_packages must be a list")
    names = validate_names(names, f"env manifest {env_manifest.get('key', '?')}")
    if not names:
        return
    state = installed_state() if verified is not None else None
    checked = state + b"\0" + "\0".join(sorted(set(names))).encode() if state is not None else b""
    if state is not None and verified.known("installed system packages", checked):
        return
    require_system_packages(names, what)
    if state is not None:
        verified.remember("installed system packages", checked)


class PreparedTask:
    """Everything a sandbox needs for one task. Release the lease when the sandbox ends."""

    def __init__(
        self,
        *,
        instance_id: str,
        task: dict[str, Any],
        env_manifest: dict[str, Any],
        repo_manifest: dict[str, Any],
        layers: dict[str, Path],
        interpreter: dict[str, str],
        lease: Lease,
        store_url: str,
        results: list[LayerResult] | None = None,
        seconds: float = 0.0,
        mount_ns: dict[str, Any] | None = None,
    ) -> None:
        self.instance_id = instance_id
        self.task = task  # the index shard entry (env_key, repo_key, status, record, ...)
        self.env_manifest = env_manifest
        self.repo_manifest = repo_manifest
        self.layers = layers  # canonical mount path -> read-only layer dir (repo, env, interpreter)
        #: {"version": "3.10.13", "prefix": "/root/.pyenv/versions/3.10.13", "kind", "key"}
        self.interpreter = interpreter
        self.lease = lease
        self.store_url = store_url
        self.results = results if results is not None else []
        self.seconds = seconds
        #: {"pid", "start"} of the cache's mount holder when a layer is a rootless (squashfuse)
        #: image mount: a sandbox joins its namespaces to see the layer (SandboxConfig.join_ns).
        self.mount_ns = mount_ns

    @property
    def record(self) -> dict[str, Any]:
        return self.task.get("record", {})

    def sandbox_layers(self) -> list[Any]:
        """Layers for a `Sandbox` of this task (see `sandbox_layers`)."""
        return sandbox_layers(self.layers, self.env_manifest, self.repo_manifest)

    @property
    def testbed(self) -> dict[str, Any] | None:
        """The install residue stacked at /testbed for this task (None: none)."""
        return testbed_residue(self.env_manifest, self.repo_manifest)

    @property
    def host_layers(self) -> dict[str, Path]:
        """The layers as this (host) process can read them: a rootless image mount exists only
        in the mount holder's namespace, reached through /proc/<holder pid>/root."""
        if not self.mount_ns:
            return dict(self.layers)
        fuse = {r.path for r in self.results if r.mounter == "fuse"}
        return {
            m: Path(f"/proc/{self.mount_ns['pid']}/root{p.resolve()}") if p in fuse else p
            for m, p in self.layers.items()
        }

    @property
    def downloaded(self) -> bool:
        return any(r.downloaded for r in self.results)

    def release(self) -> None:
        self.lease.release()

    def __enter__(self) -> PreparedTask:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


_MEMO: dict[tuple[str, str], tuple[float, Any]] = {}
_MEMO_LOCK = threading.Lock()


def index_ttl() -> float:
    """Seconds a process reuses an index entry or manifest it read ($MINISANDBOX_INDEX_TTL,
    default 0 = always ask the store). Why: on S3 each read is a round trip, and a training
    process preparing hundreds of sandboxes would pay four per sandbox; set it when the store
    does not change during the run (a re-published artifact would not match a stale manifest)."""
    try:
        return float(os.environ.get("MINISANDBOX_INDEX_TTL", "0"))
    except ValueError:
        raise ValueError(
            f"MINISANDBOX_INDEX_TTL={os.environ['MINISANDBOX_INDEX_TTL']!r} is not a number of seconds"
        ) from None


def _memo(store: Store, what: str, fn: Callable[[], T]) -> T:
    ttl = index_ttl()
    key = (store.url, what)
    now = time.monotonic()
    if ttl <= 0:
        return fn()
    import copy  # (only with a TTL: a `run` process reads each document once)

    with _MEMO_LOCK:
        hit = _MEMO.get(key)
    if hit and now - hit[0] < ttl:
        return copy.deepcopy(hit[1])
    value = fn()  # errors are not remembered
    with _MEMO_LOCK:
        _MEMO[key] = (now, copy.deepcopy(value))
    return value


def _manifest(store: Store, kind: str, key: str, verified: Verified | None = None) -> dict[str, Any]:
    """The validated manifest (`minisandbox.node.published.read_manifest`), memoised.
    `verified`: the node cache's record of documents it validated (`Cache.verified`)."""
    from minisandbox.manifest import manifest_path
    from minisandbox.node.published import read_manifest

    return _memo(store, manifest_path(kind, key), lambda: read_manifest(store, kind, key, verified))


def lookup_task(store: Store, instance_id: str, verified: Verified | None = None) -> dict[str, Any]:
    """The task's index entry, with one-line errors for a missing index or unknown id."""
    return _memo(store, f"task:{instance_id}", lambda: _lookup_task(store, instance_id, verified))


def _lookup_task(store: Store, instance_id: str, verified: Verified | None = None) -> dict[str, Any]:
    from minisandbox.index import CATALOG
    from minisandbox.node.published import lookup

    if not store.exists(CATALOG):
        raise StoreIndexMissing(
            f"no index at {store.url_of(CATALOG)}: is {store.url} a published store? "
            f"Build one with `snakemake --cores N` or pass --store URL"
        )
    entry = lookup(store, instance_id, verified)
    status = entry.get("status", "ready")
    if status != "ready":
        key = entry.get("env_key") if status == "env-failed" else entry.get("repo_key")
        kind = "env" if status == "env-failed" else "repo"
        raise TaskNotReady(
            f"task {instance_id} is not ready in {store.url}: {status} "
            f"(build log: {store.url_of(f'logs/{kind}/{key}.log')})"
        )
    return entry


def interpreter_manifest(
    store: Store, env_m: dict[str, Any], verified: Verified | None = None
) -> dict[str, Any] | None:
    """The manifest of an environment's interpreter layer; None for a system interpreter
    or a store published before interpreter layers (then a local interpreter of the same
    version is bound instead: `sandbox.interpreters.interpreter_binds`). Every field that
    becomes a mount path is checked against the allowed interpreter prefixes first."""
    from minisandbox.sandbox.interpreters import KEY_PATTERN, check_prefix

    interp = env_m.get("interpreter") or {}
    key = interp.get("key") if isinstance(interp, dict) else None
    if key is None:
        return None
    what = f"environment {env_m.get('key')} in {store.url}"
    if not isinstance(key, str) or not KEY_PATTERN.fullmatch(key):
        raise RestoreError(f"{what}: interpreter key {key!r} is malformed; re-publish the environment")
    m = _manifest(store, "interp", key, verified)
    kind = (m.get("interpreter") or {}).get("kind") if isinstance(m.get("interpreter"), dict) else None
    try:
        prefix = check_prefix(m.get("mount_path"), str(kind))
    except ValueError as exc:
        raise RestoreError(f"interpreter layer {key} in {store.url}: {exc}; re-publish it") from None
    if m.get("key") != key or m.get("kind") != "interp" or prefix != interp.get("prefix"):
        raise RestoreError(
            f"interpreter layer {key} in {store.url} does not match {what} (key, kind or "
            f"prefix differ); re-publish both"
        )
    return m


def task_layer_names(task_id: str, store: Store | str | os.PathLike[str] | None = None) -> list[tuple[str, ...]]:
    """For each layer a task needs (repo, env, interpreter), the names its directory may
    have in a node cache: the archive's sha256 (unpacked) and the image's (mounted, or
    unpacked when the store has no archive: `ready_layer`).
    `prepare` picks one by `use_images()` and by what works on the node, so a scheduler
    that asks "are this task's layers here?" must accept either (`integrations.ray`)."""
    st = open_store(store)
    entry = lookup_task(st, task_id)
    env_m = _manifest(st, "env", entry["env_key"])
    manifests = [_manifest(st, "repo", entry["repo_key"]), env_m]
    interp_m = interpreter_manifest(st, env_m)
    if interp_m is not None:
        manifests.append(interp_m)
    names = []
    for m in manifests:
        image = Artifact.image_from_manifest(st, m)
        archive = Artifact.from_manifest(st, m) if has_archive(m) else None
        names.append(tuple(a.sha256 for a in (archive, image) if a is not None))
    return names


def use_images(setting: bool | None = None) -> bool:
    """Mount filesystem images instead of unpacking? `setting` or $MINISANDBOX_IMAGES
    (`auto` default: when root can loop-mount squashfs, or this user can mount it with
    squashfuse in a user namespace; `0`/`never`; `1`/`always`)."""
    if setting is not None:
        return setting
    value = os.environ.get("MINISANDBOX_IMAGES", "auto").strip().lower()
    if value in ("0", "no", "never", "false", "off"):
        return False
    if value in ("1", "yes", "always", "true", "on"):
        return True
    from minisandbox.node.restore import can_mount_images

    if can_mount_images():
        return True
    from minisandbox.node.fusemount import unavailable_reason

    return unavailable_reason() is None


def ready_layer(
    cache: Cache,
    store: Store,
    manifest: dict[str, Any],
    *,
    mount: bool,
    insist: bool = False,
    ticket: float | None = None,
    owner: str = "",
) -> tuple[LayerResult, Path]:
    """One layer of a task, ready and leased, the best way this node can: mount the image
    (`mount`: `use_images()`), else unpack the archive, else unpack the image (a store that
    publishes no archive, config `archive: false`). `insist`: images were asked for
    explicitly, so a failed mount is raised rather than hidden by unpacking."""
    image = Artifact.image_from_manifest(store, manifest)
    if image is not None and mount:
        try:
            return cache.image_layer(store, image, ticket=ticket, owner=owner)
        except MinisandboxError as exc:
            from minisandbox.node.fusemount import FuseMountError  # (only rootless nodes mount with it)

            if insist or not isinstance(exc, (RestoreError, FuseMountError)):
                raise
            # auto mode and the mount failed here (no loop devices, no FUSE?): unpack instead
    if has_archive(manifest) or image is None:
        return cache.layer(store, Artifact.from_manifest(store, manifest), ticket=ticket, owner=owner)
    return cache.image_layer(store, image, unpack=True, ticket=ticket, owner=owner)


def prepare(
    task_id: str,
    store: Store | str | os.PathLike[str] | None = None,
    *,
    cache: Cache | None = None,
    budget: IOBudget | None = None,
    ticket: float | None = None,
    owner: str = "",
    images: bool | None = None,
) -> PreparedTask:
    """Resolve `task_id`, make its repo and env layers ready on this node and lease them.

    `store`: Store, URL or None (`minisandbox.paths.default_store()`). `ticket`: priority
    in the I/O budget queue (default: now; older first). `images`: mount the manifests'
    squashfs images instead of unpacking (default: `use_images()`); layers without an
    image are unpacked (`ready_layer`)."""
    t0 = time.monotonic()
    st = open_store(store)
    if cache is None:
        cache = Cache(budget=budget)
    ticket = time.time() if ticket is None else ticket
    mount = use_images(images)
    entry = lookup_task(st, task_id, cache.verified)
    repo_m = _manifest(st, "repo", entry["repo_key"], cache.verified)
    env_m = _manifest(st, "env", entry["env_key"], cache.verified)
    check_host_libs(env_m.get("host_libs"), f"environment {entry['env_key']}")  # before any download
    interp_m = interpreter_manifest(st, env_m, cache.verified)
    check_host(env_m, f"task {task_id} (environment {entry['env_key']})", cache.verified)
    lease_files: list[Path] = []
    results: list[LayerResult] = []
    layers: dict[str, Path] = {}
    try:
        wanted = [(repo_m, REPO_PATH), (env_m, VENV_PATH)] + ([(interp_m, interp_m["mount_path"])] if interp_m else [])
        for manifest, default_path in wanted:
            result, lease_file = ready_layer(
                cache, st, manifest, mount=mount, insist=bool(images), ticket=ticket, owner=owner or task_id
            )
            lease_files.append(lease_file)
            results.append(result)
            layers[manifest.get("mount_path") or default_path] = result.path
    except BaseException:
        Lease(lease_files).release()
        raise
    return PreparedTask(
        instance_id=task_id,
        task=entry,
        env_manifest=env_m,
        repo_manifest=repo_m,
        layers=layers,
        interpreter=dict(env_m.get("interpreter") or {}),
        lease=Lease(lease_files),
        store_url=st.url,
        results=results,
        seconds=time.monotonic() - t0,
        mount_ns=cache.mount_namespace() if any(r.mounter == "fuse" for r in results) else None,
    )


def still_current(
    prepared: PreparedTask, store: Store | str | os.PathLike[str] | None = None, *, cache: Cache | None = None
) -> bool:
    """Does the store still publish what `prepared` was made from (its index entry and the
    repo and env manifests)? A sandbox opened ahead of its use (the node-local
    helper's spare) is used only if so; the documents are read again, as `prepare` reads them."""
    st = open_store(store if store is not None else prepared.store_url)
    verified = cache.verified if cache is not None else None
    try:
        entry = lookup_task(st, prepared.instance_id, verified)
        if entry != prepared.task:
            return False
        env_m = _manifest(st, "env", entry["env_key"], verified)
        return (
            env_m == prepared.env_manifest
            and _manifest(st, "repo", entry["repo_key"], verified) == prepared.repo_manifest
        )
    except MinisandboxError:
        return False


def planned_bytes(
    task_ids: Iterable[str], store: Store | str | None = None, *, cache: Cache, images: bool | None = None
) -> int:
    """Bytes `fetch` of these tasks will download at most: each distinct layer this cache
    lacks, counted once, at the size of the file that `ready_layer` would fetch (the image
    when mounting, else the archive). Known before the first byte moves, so a progress
    total never grows mid-transfer. An upper bound: chunks an image shares with ones already
    here are copied locally instead. Tasks that cannot be resolved count 0 (fetch reports
    them). Index and manifests are memoised, so `fetch` does not read them again."""
    st = open_store(store)
    mount = use_images(images)
    sizes: dict[str, int] = {}
    for task_id in dict.fromkeys(task_ids):
        try:
            entry = lookup_task(st, task_id)
            env_m = _manifest(st, "env", entry["env_key"])
            manifests = [_manifest(st, "repo", entry["repo_key"]), env_m, interpreter_manifest(st, env_m)]
        except Exception:  # noqa: BLE001 - reported by fetch itself, per task
            continue
        for manifest in filter(None, manifests):
            image = Artifact.image_from_manifest(st, manifest)
            if image is not None and (mount or not has_archive(manifest)):
                layer = cache.layers / image.sha256
                ready = cache._unpacked_image(image.sha256) or cache.is_mounted(layer)
                if not ready and not (cache.archives / image.sha256).is_file():
                    sizes[image.sha256] = image.size
            else:
                artifact = Artifact.from_manifest(st, manifest)
                if not (cache.layers / artifact.sha256).is_dir():
                    sizes[artifact.sha256] = artifact.size
    return sum(sizes.values())


def fetch(
    task_ids: Iterable[str], store: Store | str | None = None, *, cache: Cache | None = None, workers: int | None = None
) -> list[PreparedTask | BaseException]:
    """Warm this node's cache for several tasks (leases released at once). Results are in
    input order: a PreparedTask or the exception that task raised."""
    ids = list(task_ids)
    st = open_store(store)
    cache = cache or Cache()
    n = workers or max(1, min(len(ids), cache.budget.slots or 4))
    ticket = time.time()  # one batch: served in input order by the budget

    def one(i: int) -> PreparedTask | BaseException:
        try:
            prepared = prepare(ids[i], st, cache=cache, ticket=ticket + i * 1e-6)
        except Exception as exc:  # reported per task; the others go on
            return exc
        prepared.release()
        return prepared

    from concurrent.futures import ThreadPoolExecutor  # here: it imports logging, which `run` never needs

    with ThreadPoolExecutor(max_workers=n) as pool:
        return list(pool.map(one, range(len(ids))))
