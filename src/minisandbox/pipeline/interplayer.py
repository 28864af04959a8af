"""The interpreter layer: an environment's base interpreter as an artifact of its own.

Why: a venv runs only with its base interpreter at the path recorded in `pyvenv.cfg`. A
node that pulls a prebuilt store has no pyenv (and no uv-managed Pythons), so the
interpreter is published like the venv and the repo: packed, checksummed, fetched into
the node cache and mounted read-only at the recorded prefix. One artifact per build of an
interpreter (`interpreters.interpreter_key`), shared by every environment built with it.

Preference (docs/interpreters.md): uv-managed standalone builds (with
`MINISANDBOX_PYTHON_INSTALL=uv` the planner first runs `uv python install X.Y`, which
honours `UV_PYTHON_INSTALL_MIRROR` / `UV_PYTHON_INSTALL_DIR`), then pyenv, then a system
interpreter, which is not a layer and is recorded with a warning.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from minisandbox.manifest import artifact_path, make_manifest, manifest_path
from minisandbox.sandbox import interpreters
from minisandbox.sandbox.interpreters import Interpreter, InterpreterNotFound
from minisandbox.status import StageStatus, write_status


def maybe_install_uv_python(version: str, log: Path | None = None) -> None:
    """With MINISANDBOX_PYTHON_INSTALL=uv, have uv install a standalone CPython `version`
    (from python-build-standalone, or the mirror UV_PYTHON_INSTALL_MIRROR names) before
    the interpreter is chosen. A failed download is logged, not fatal: pyenv's or the
    system's interpreter is used instead."""
    if os.environ.get("MINISANDBOX_PYTHON_INSTALL", "").strip().lower() != "uv":
        return
    from minisandbox.tools import uv_bin

    try:
        proc = subprocess.run([uv_bin(), "python", "install", version], capture_output=True, text=True, timeout=600)
        msg = (proc.stderr or proc.stdout).strip()
    except (OSError, subprocess.TimeoutExpired) as exc:
        proc, msg = None, str(exc)
    if log is not None and (proc is None or proc.returncode != 0):
        with Path(log).open("a") as fh:
            fh.write(f"# uv python install {version} failed, falling back to pyenv/system: {msg}\n")
    interpreters.rescan()


def plan_interpreter(version: str) -> dict[str, Any]:
    """What the planner records for `spec.python`: `interpreters.describe()` plus the
    host prefix, or {"version", "missing": one-line error} when there is none (the build
    of every environment that needs it then fails with that message)."""
    maybe_install_uv_python(str(version))
    try:
        interp = interpreters.find_interpreter(str(version))
    except InterpreterNotFound as exc:
        return {"version": str(version), "missing": str(exc)}
    return {**interpreters.describe(interp), "host_prefix": interp.prefix}


def plan_for(python: str, python_full: str | None = None) -> dict[str, Any]:
    """The planned interpreter of a spec: its reference's exact version (`python_full`)
    when this machine has it, else the newest of `python` (as the build chooses)."""
    if python_full:
        planned = plan_interpreter(str(python_full))
        if "missing" not in planned:
            return planned
    return plan_interpreter(str(python))


def env_key_part(planned: dict[str, Any]) -> str:
    """The interpreter's share of an environment key: its build key, or kind and version
    for a system interpreter, or `missing-<version>` (so installing it changes the key)."""
    if planned.get("key"):
        return planned["key"]
    if planned.get("missing"):
        return f"missing-{planned['version']}"
    return f"{planned.get('kind', 'system')}-{planned['version']}-{planned.get('prefix', '')}"


def local_interpreter(planned: dict[str, Any]) -> Interpreter:
    """The local interpreter of the build the planner chose; one-line errors when this
    machine has none of that version, or a different build of it (plan and build on
    machines with the same interpreters, or re-plan here)."""
    if planned.get("missing"):
        raise InterpreterNotFound(planned["missing"])
    interp = interpreters.find_interpreter(planned["version"])
    got = interpreters.interpreter_key(interp)
    if planned.get("key") and got != planned["key"]:
        raise InterpreterNotFound(
            f"the plan uses interpreter {planned['key']} (CPython {planned['version']}, {planned.get('kind')}) but "
            f"this machine's is {got or interp.kind} at {interp.prefix}: give build nodes the same interpreter "
            f"build, or plan on a build node"
        )
    return interp


def base_site_packages(interp: Interpreter) -> Path:
    """The base interpreter's site-packages, archived empty: a venv built without
    --system-site-packages never sees it (pyenv's may hold a whole tool stack)."""
    return Path(interp.prefix) / "lib" / f"python{interp.minor}" / "site-packages"


def _published(store: Any, key: str) -> dict[str, Any] | None:
    """The store's manifest of interpreter layer `key` when the layer is complete there."""
    from minisandbox.node.store import NotInStore

    try:
        existing = json.loads(store.read_text(manifest_path("interp", key)))
    except NotInStore:
        return None
    if existing and existing.get("key") == key and store.exists(artifact_path("interp", key, existing["format"])):
        return existing
    return None


def pack_and_publish(spec: dict[str, Any], store_url: str, work: Path, fmt: str, level: int) -> dict[str, Any]:
    """Publish the interpreter layer of `spec` (a planned interpreter) unless the store
    already has it; returns its manifest.

    The host's prefix is streamed straight into the archive (`pack.pack_stream`): nothing
    links, copies or writes into an install that other builds and users read at the same
    time. Builds on one host that need the same layer take a lock per key in `work`, so the
    second one finds it published and packs nothing; builds on other hosts pack the same
    bytes (the archive is deterministic) into a scratch file of their own."""
    from filelock import FileLock

    from minisandbox.node.store import Store
    from minisandbox.pipeline.pack import pack_stream

    key = spec["key"]
    store = Store(store_url)
    existing = _published(store, key)
    if existing:
        return existing
    interp = local_interpreter(spec)
    work.mkdir(parents=True, exist_ok=True)
    with FileLock(str(work / f".{key}.lock")):
        existing = _published(store, key)  # published by a neighbour while this one waited
        if existing:
            return existing
        with tempfile.TemporaryDirectory(dir=work, prefix=f".{key}.") as tmp:
            archive = Path(tmp) / f"{key}.{fmt}"
            stats = pack_stream(
                Path(interp.prefix), archive, fmt=fmt, level=level, empty_dirs=(base_site_packages(interp),)
            )
            described = interpreters.describe(interp)
            manifest = make_manifest(
                kind="interp",
                key=key,
                fmt=fmt,
                archive=archive,
                files=stats.files,
                raw_bytes=stats.raw_bytes,
                spec={"version": interp.version, "kind": interp.kind, "prefix": described["prefix"]},
                extra={
                    "mount_path": interpreters.check_prefix(described["prefix"], interp.kind),
                    "interpreter": described,
                },
            )
            store.put_file(archive, artifact_path("interp", key, fmt), sha256=manifest["sha256"])
            store.put_text(manifest_path("interp", key), json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    return manifest


def step_interp(spec_path: Path, store_url: str, work: Path, receipt_out: Path, fmt: str, level: int) -> StageStatus:
    """Pipeline step (rule `interp`): the receipt has the shape of a publish receipt."""
    from minisandbox.pipeline.failures import failure_message, retrying

    spec = json.loads(Path(spec_path).read_text())
    key = spec["key"]
    log = Path(receipt_out).with_suffix(".log")
    # a transient failure (I/O, the store's network, a killed tool) is retried before it is
    # recorded; a recorded failure fails every environment of this interpreter
    manifest, exc, cause = retrying(
        "interp", key, log, lambda: pack_and_publish(spec, store_url, Path(work), fmt, level)
    )
    if exc is None:
        st = StageStatus(
            ok=True,
            stage="interp",
            key=key,
            data={"status": "ok", "manifest": manifest, "log": None, "store": store_url},
        )
    else:
        st = StageStatus(
            ok=False,
            stage="interp",
            key=key,
            error=failure_message("interp", exc, cause),
            log=str(log),
            data={"cause": cause},
        )
    write_status(receipt_out, st)
    return st
