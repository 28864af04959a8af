"""The pipeline steps the Snakemake rules call, one function per rule.

Each step reads the JSON spec of its key (written at planning time), reads its upstream
status, does its work and writes its own status. A failure anywhere is recorded and
passed on, never raised to Snakemake: the index reports it and the other keys go on.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from minisandbox.catalog import EnvSpec
from minisandbox.fsutil import atomic_write_json, file_digest
from minisandbox.manifest import artifact_path, has_archive, log_path, make_manifest, manifest_path
from minisandbox.pipeline.failures import failure_message, first_failure, retrying
from minisandbox.status import StageStatus, read_status, write_status


def _load(path: Path) -> dict[str, Any]:
    return json.loads(Path(path).read_text())


def _guard(stage: str, key: str, status_out: Path, log: Path | None, fn: Callable[[], dict[str, Any]]) -> StageStatus:
    """Run one step (`retrying` transient failures); turn any exception into a failed
    status with a one-line error and its cause."""
    data, exc, cause = retrying(stage, key, log, fn)
    if exc is None:
        st = StageStatus(ok=True, stage=stage, key=key, log=str(log) if log else None, data=data or {})
    else:  # recorded, not raised: one bad key must not stop the others
        st = StageStatus(
            ok=False,
            stage=stage,
            key=key,
            error=failure_message(stage, exc, cause),
            log=str(log) if log else None,
            data={"cause": cause},
        )
    write_status(status_out, st)
    return st


def _failed_upstream(stage: str, key: str, status_out: Path, *upstream: Path) -> bool:
    bad = first_failure(*upstream)
    if bad is None:
        return False
    write_status(
        status_out,
        StageStatus(
            ok=False,
            stage=stage,
            key=key,
            error=bad.error,
            log=bad.log,
            data={"cause": bad.data.get("cause")} if bad.data.get("cause") else {},
        ),
    )
    return True


# -- mirror / snapshot ------------------------------------------------------------------


def step_mirror(source_spec: Path, mirror_dir: Path, status_out: Path, log: Path) -> StageStatus:
    spec = _load(source_spec)
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text(f"# mirror {spec['source']}\n")

    def work() -> dict[str, Any]:
        from minisandbox.pipeline.git import ensure_mirror

        ensure_mirror(spec["source"], mirror_dir)
        return {"source": spec["source"], "mirror": str(mirror_dir)}

    return _guard("mirror", spec["source_id"], status_out, log, work)


def step_snapshot(
    repo_spec: Path, mirror_dir: Path, mirror_status: Path, out_dir: Path, status_out: Path
) -> StageStatus:
    spec = _load(repo_spec)
    key = spec["key"]
    if _failed_upstream("snapshot", key, status_out, mirror_status):
        out_dir.mkdir(parents=True, exist_ok=True)
        return read_status(status_out)

    def work() -> dict[str, Any]:
        from minisandbox.pipeline.git import make_snapshot

        head = make_snapshot(mirror_dir, spec["commit"], out_dir, source=spec["source"])
        return {"commit": spec["commit"], "snapshot_commit": head, "source": spec["source"]}

    st = _guard("snapshot", key, status_out, None, work)
    out_dir.mkdir(parents=True, exist_ok=True)  # the declared output exists even on failure
    return st


# -- resolve / build --------------------------------------------------------------------


def step_resolve(env_spec: Path, repo_dir: Path, repo_status: Path, lock_out: Path, log: Path) -> StageStatus:
    spec_entry = _load(env_spec)
    key = spec_entry["key"]
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text("")
    if _failed_upstream("resolve", key, lock_out, repo_status):
        return read_status(lock_out)
    spec = EnvSpec.from_dict(spec_entry["spec"])

    def work() -> dict[str, Any]:
        from minisandbox.pipeline.resolve import resolve

        lock = resolve(spec, repo_dir, log)
        return {
            "lock": lock.text,
            "no_deps": lock.no_deps,
            "lock_sha256": lock.sha256,
            "exclude_newer": lock.exclude_newer,
            "exempt": [list(e) for e in lock.exempt],
            **({"build_constraints": list(lock.build_constraints)} if lock.build_constraints else {}),
        }

    return _guard("resolve", key, lock_out, log, work)


def step_build(
    env_spec: Path, lock_status: Path, repo_dir: Path, out_dir: Path, status_out: Path, log: Path, timeout: float
) -> StageStatus:
    spec_entry = _load(env_spec)
    key = spec_entry["key"]
    log.parent.mkdir(parents=True, exist_ok=True)
    if _failed_upstream("build", key, status_out, lock_status):
        out_dir.mkdir(parents=True, exist_ok=True)
        return read_status(status_out)
    spec = EnvSpec.from_dict(spec_entry["spec"])
    lock_data = read_status(lock_status).data

    def work() -> dict[str, Any]:
        from minisandbox.pipeline.build import build_env
        from minisandbox.pipeline.resolve import Lock

        lock = Lock(
            text=lock_data["lock"],
            no_deps=lock_data["no_deps"],
            exclude_newer=lock_data.get("exclude_newer"),
            exempt=tuple((str(n), str(c)) for n, c in lock_data.get("exempt") or ()),
            build_constraints=tuple(str(c) for c in lock_data.get("build_constraints") or ()),
        )
        res = build_env(spec, lock, repo_dir, out_dir, log, timeout=timeout, interpreter=spec_entry.get("interpreter"))
        data = {
            "interpreter": res.interpreter,
            "raw_bytes": res.raw_bytes,
            "lock_sha256": lock.sha256,
            "host_libs": res.host_libs or [],
        }
        # fidelity keys (docs/design.md "Environment fidelity"): additive manifest keys, only when set
        if lock.exclude_newer:
            data["exclude_newer"] = lock.exclude_newer
            if lock.exempt:
                data["exclude_newer_exempt"] = dict(lock.exempt)
        if spec.system_packages:
            data["system_packages"] = list(spec.system_packages)
        if res.testbed:
            data["testbed"] = {**res.testbed, "commit": spec.commit}
        if res.home:
            data["home"] = res.home
        return data

    st = _guard("build", key, status_out, log, work)
    out_dir.mkdir(parents=True, exist_ok=True)
    return st


# -- pack / checksum / publish ----------------------------------------------------------

#: Build results copied into the env manifest when present (the fidelity keys; additive).
ENV_FIDELITY_KEYS = ("exclude_newer", "exclude_newer_exempt", "system_packages", "testbed", "home")


def image_path(archive: Path, key: str) -> Path:
    """Where pack puts the optional squashfs image: beside the archive, named by key."""
    return Path(archive).parent / f"{key}.squashfs"


def step_pack(
    key: str,
    tree: Path,
    upstream: Path,
    archive: Path,
    status_out: Path,
    fmt: str,
    level: int,
    image: bool = False,
    with_archive: bool = True,
) -> StageStatus:
    """Archive the tree; with `image`, also a squashfs image nodes mount instead of unpacking
    (bench/bench_runtime.py: 54x faster cold restore than the published method), cut into
    chunks. `with_archive` False (config `archive: false`) writes no archive when there is an
    image: the store then serves the layer as chunks only (docs/pipeline.md, "Store size")."""
    if _failed_upstream("pack", key, status_out, upstream):
        archive.parent.mkdir(parents=True, exist_ok=True)
        archive.write_bytes(b"")  # placeholder for the declared output; never published
        return read_status(status_out)

    def work() -> dict[str, Any]:
        from minisandbox.pipeline.pack import normalize_tree, pack_tree

        normalize_tree(tree)  # before archive and image: same package, same bytes in every env
        keep = with_archive or not image
        stats = pack_tree(tree, archive, fmt=fmt, level=level) if keep else None
        if not keep:
            archive.unlink(missing_ok=True)  # an earlier run's archive is not this layer's
        data: dict[str, Any] = {"format": fmt, "archive": keep}
        if image:
            from minisandbox.pipeline.chunking import write_chunk_list
            from minisandbox.pipeline.pack import pack_image

            image_stats = pack_image(tree, image_path(archive, key))
            stats = stats or image_stats  # the same tree: count its files once
            data["image"] = "squashfs"
            # the store's default representation of the image: chunks shared across envs
            write_chunk_list(image_path(archive, key), key)
            data["chunks"] = True
        assert stats is not None  # keep is True without an image
        data.update(files=stats.files, raw_bytes=stats.raw_bytes)
        return data

    st = _guard("pack", key, status_out, None, work)
    if not st.ok and not archive.exists():
        archive.write_bytes(b"")
    return st


def step_checksum(
    kind: str, key_spec: Path, archive: Path, pack_status: Path, upstream: Path, manifest_out: Path
) -> StageStatus:
    """Manifest for a packed artifact; `upstream` is the snapshot (repo) or build (env) status."""
    entry = _load(key_spec)
    key = entry["key"]
    if _failed_upstream("checksum", key, manifest_out, pack_status):
        return read_status(manifest_out)
    pack = read_status(pack_status).data
    up = read_status(upstream).data
    if kind == "env":
        extra = {
            "interpreter": up["interpreter"],
            "lock_sha256": up["lock_sha256"],
            "host_libs": up.get("host_libs", []),
            **{k: up[k] for k in ENV_FIDELITY_KEYS if k in up},
        }
        spec = entry["canonical"]
    else:
        extra = {"commit": entry["commit"], "source": entry["source"], "snapshot_commit": up["snapshot_commit"]}
        spec = {"source": entry["source"], "commit": entry["commit"]}

    def work() -> dict[str, Any]:
        if pack.get("image"):
            sha, size = file_digest(image_path(archive, key))
            extra["image"] = {
                "format": pack["image"],
                "artifact": image_path(archive, key).name,
                "sha256": sha,
                "size": size,
            }
            if pack.get("chunks"):
                extra["image"]["chunks"] = chunks_entry(image_path(archive, key), key)
        return make_manifest(
            kind=kind,
            key=key,
            fmt=pack["format"],
            archive=archive if pack.get("archive", True) else None,
            files=pack["files"],
            raw_bytes=pack["raw_bytes"],
            spec=spec,
            extra=extra,
        )

    return _guard("checksum", key, manifest_out, None, work)


def _with_interpreter(st: StageStatus, key: str, receipt_out: Path) -> StageStatus:
    """An environment is published only after its interpreter layer (rule `interp`, whose
    receipt lies beside the env receipts: <receipts>/interp/<ikey>.json); if that failed,
    the environment is recorded as failed with its error (docs/interpreters.md)."""
    ikey = (st.data.get("interpreter") or {}).get("key")
    if not ikey:
        return st
    receipt = receipt_out.parent.parent / "interp" / f"{ikey}.json"
    ist = read_status(receipt) if receipt.exists() else None
    if ist is not None and ist.ok and ist.data.get("status") == "ok":
        return st
    error = (
        ist.error
        if ist is not None and ist.error
        else f"publish: interpreter layer {ikey} was not published (no receipt {receipt}); run rule interp"
    )
    cause = ist.data.get("cause") if ist is not None else None
    return StageStatus(
        ok=False, stage="publish", key=key, log=st.log, error=error, data={"cause": cause} if cause else {}
    )


def chunks_entry(image: Path, key: str) -> dict[str, Any]:
    """The manifest's `image.chunks` for the chunk list packing wrote beside `image`."""
    from minisandbox.manifest import chunk_list_name
    from minisandbox.pipeline.chunking import chunk_list_path

    lst = chunk_list_path(image, key)
    sha, size = file_digest(lst)
    return {
        "artifact": chunk_list_name(key),
        "sha256": sha,
        "size": size,
        "count": len(json.loads(lst.read_bytes())["chunks"]),
    }


def publish_image(store: Any, kind: str, key: str, image: dict[str, Any], local_image: Path, whole: bool) -> bool:
    """Upload a manifest's image in its store representation: the chunks the store lacks (in
    packs), then the chunk list, then (if `whole`, or when the image has no chunks) the image
    file. The store's chunk list says in which pack each chunk lies, which depends on what the
    store held, so `image["chunks"]` is updated to it here (the manifest is written after).
    Returns whether the whole image was uploaded. Chunks are content-addressed, so chunks
    another publisher packs at the same moment are the same bytes (at worst stored twice)."""
    import hashlib

    from minisandbox.node.chunks import upload_image_packs
    from minisandbox.pipeline.chunking import chunk_list_path

    chunks = image.get("chunks")
    if chunks:
        lst = chunk_list_path(local_image, key)
        cut = [(d, n) for d, n in json.loads(lst.read_bytes())["chunks"]]
        done = upload_image_packs(store, local_image, image["sha256"], cut)
        store.put_object(f"artifacts/{kind}/{chunks['artifact']}", done.document)
        image["chunks"] = {
            **chunks,
            "sha256": hashlib.sha256(done.document).hexdigest(),
            "size": len(done.document),
            "count": len(cut),
        }
    if whole or not chunks:
        store.put_file(local_image, f"artifacts/{kind}/{image['artifact']}", sha256=image["sha256"])
        return True
    return False


def step_publish(
    store_url: str,
    kind: str,
    key: str,
    manifest_status: Path,
    archive: Path,
    log: Path | None,
    receipt_out: Path,
    image_whole: bool = False,
) -> StageStatus:
    """Image parts first (missing chunks, chunk list, the whole image only with
    `image_whole`), then the archive (if packing wrote one), then the manifest: a visible
    manifest always has all its parts (docs/pipeline.md, "Atomicity")."""
    from minisandbox.node.store import Store

    st = read_status(manifest_status)
    if st.ok and kind == "env":
        st = _with_interpreter(st, key, Path(receipt_out))
    store = Store(store_url)

    def upload_log() -> str | None:
        if log is not None and Path(log).exists():
            store.put_file(Path(log), log_path(kind, key))
            return log_path(kind, key)
        return None

    if not st.ok:

        def failed() -> dict[str, Any]:
            return {
                "status": "failed",
                "error": st.error,
                "cause": st.data.get("cause") or {"kind": "permanent"},
                "log": upload_log(),
                "store": store_url,
            }

        res = _guard("publish", key, receipt_out, None, failed)
        return res

    def work() -> dict[str, Any]:
        manifest = dict(st.data)
        if manifest.get("image"):
            img = dict(manifest["image"])
            if img.get("chunks") and not image_whole:
                img["whole"] = False  # only the chunks: nodes assemble the image
            publish_image(store, kind, key, img, image_path(archive, key), bool(image_whole))
            manifest["image"] = img
        if has_archive(manifest):
            store.put_file(archive, artifact_path(kind, key, manifest["format"]), sha256=manifest["sha256"])
        store.put_text(manifest_path(kind, key), json.dumps(manifest, indent=1, sort_keys=True) + "\n")
        return {"status": "ok", "manifest": manifest, "log": upload_log(), "store": store_url}

    return _guard("publish", key, receipt_out, None, work)


# -- merged per-key jobs: one Snakemake job per repo key and one per env key --------------
# Why: Snakemake spends ~1.5 ms planning each job, so 11 jobs per repo+env pair made 50k
# tasks over 5k environments plan in 81 s (docs/pipeline.md). The steps, their status files
# and their failure handling are unchanged; one process now runs them in sequence (which
# also saves a Python start-up per step on every build).


@dataclass(frozen=True)
class WorkPaths:
    """Where the steps of one key keep their files under the workflow's work dir."""

    work: Path
    ext: str  # archive extension, e.g. "tar.zst"

    def mirror(self, sid: str) -> Path:
        return self.work / "mirrors" / f"{sid}.git"

    def mirror_status(self, sid: str) -> Path:
        return self.work / "mirrors" / f"{sid}.status.json"

    def tree(self, kind: str, key: str) -> Path:
        return self.work / ("repos" if kind == "repo" else "envs") / key

    def tree_status(self, kind: str, key: str) -> Path:
        return self.work / ("repos" if kind == "repo" else "envs") / f"{key}.status.json"

    def archive(self, kind: str, key: str) -> Path:
        return self.work / "packed" / kind / f"{key}.{self.ext}"

    def pack_status(self, kind: str, key: str) -> Path:
        return self.work / "packed" / kind / f"{key}.pack.json"

    def manifest(self, kind: str, key: str) -> Path:
        return self.work / "manifests" / kind / f"{key}.json"

    def lock(self, key: str) -> Path:
        return self.work / "locks" / f"{key}.json"

    def log(self, stage: str, key: str) -> Path:
        return self.work / "logs" / stage / f"{key}.log"


def job_repo(
    work: Path,
    store_url: str,
    repo_spec: Path,
    source_spec: Path,
    fmt: str,
    level: int,
    image: bool,
    receipt_out: Path,
    image_whole: bool = False,
    with_archive: bool = True,
) -> StageStatus:
    """mirror (once per source, under a lock) -> snapshot -> pack -> checksum -> publish."""
    from minisandbox.fsutil import FileLock
    from minisandbox.manifest import FORMATS

    spec = _load(repo_spec)
    key, sid = spec["key"], spec["source_id"]
    p = WorkPaths(Path(work), FORMATS[fmt].lstrip("."))
    p.mirror(sid).parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(p.work / "mirrors" / f"{sid}.lock")):
        # A mirror made for another commit is reused: the snapshot fetches a missing commit.
        mirror_ok = p.mirror_status(sid).exists() and read_status(p.mirror_status(sid)).ok
        if not mirror_ok:
            step_mirror(source_spec, p.mirror(sid), p.mirror_status(sid), p.log("mirror", sid))
        step_snapshot(repo_spec, p.mirror(sid), p.mirror_status(sid), p.tree("repo", key), p.tree_status("repo", key))
    step_pack(
        key,
        p.tree("repo", key),
        p.tree_status("repo", key),
        p.archive("repo", key),
        p.pack_status("repo", key),
        fmt,
        level,
        image=image,
        with_archive=with_archive,
    )
    step_checksum(
        "repo",
        repo_spec,
        p.archive("repo", key),
        p.pack_status("repo", key),
        p.tree_status("repo", key),
        p.manifest("repo", key),
    )
    return step_publish(
        store_url,
        "repo",
        key,
        p.manifest("repo", key),
        p.archive("repo", key),
        None,
        receipt_out,
        image_whole=image_whole,
    )


def job_env(
    work: Path,
    store_url: str,
    env_spec: Path,
    repo_dir: Path,
    repo_status: Path,
    fmt: str,
    level: int,
    image: bool,
    timeout: float,
    receipt_out: Path,
    image_whole: bool = False,
    with_archive: bool = True,
) -> StageStatus:
    """resolve -> build -> pack -> checksum -> publish (with the build log); the built tree
    is removed once packed (it was a `temp()` output when these were separate rules)."""
    from minisandbox.manifest import FORMATS
    from minisandbox.node.restore import remove_tree

    key = _load(env_spec)["key"]
    p = WorkPaths(Path(work), FORMATS[fmt].lstrip("."))
    tree, status = p.tree("env", key), p.tree_status("env", key)
    try:
        step_resolve(env_spec, repo_dir, repo_status, p.lock(key), p.log("resolve", key))
        step_build(env_spec, p.lock(key), repo_dir, tree, status, p.log("build", key), timeout)
        step_pack(
            key,
            tree,
            status,
            p.archive("env", key),
            p.pack_status("env", key),
            fmt,
            level,
            image=image,
            with_archive=with_archive,
        )
    finally:
        remove_tree(tree)  # venvs may hold read-only files
    step_checksum("env", env_spec, p.archive("env", key), p.pack_status("env", key), status, p.manifest("env", key))
    return step_publish(
        store_url,
        "env",
        key,
        p.manifest("env", key),
        p.archive("env", key),
        p.log("build", key),
        receipt_out,
        image_whole=image_whole,
    )


# -- rebuilding what failed ---------------------------------------------------------------


def failed_receipts(receipts: Path, keys: dict[str, Any]) -> list[Path]:
    """The publish receipts (`<receipts>/<kind>/<key>.json`, kind env, repo or interp) that
    record a failure, for `keys` (kind -> keys with a job of their own). A missing receipt
    is not listed: its job runs anyway. The workflow's `retry_failed` option forces exactly
    these jobs (and what depends on them, which failed with them) to run again; a plain
    rerun leaves every recorded failure as it is."""
    out: list[Path] = []
    for kind, ks in keys.items():
        for key in ks:
            path = Path(receipts) / kind / f"{key}.json"
            try:
                st = read_status(path)
            except FileNotFoundError:
                continue
            except (ValueError, TypeError):  # a torn or foreign file: rebuilding it is the fix
                out.append(path)
                continue
            if not st.ok or st.data.get("status") != "ok":
                out.append(path)
    return out


def set_aside(receipts: list[Path], dest: Path) -> list[Path]:
    """Move each failed receipt `<receipts>/<kind>/<key>.json` to `<dest>/<kind>/<key>.json`
    (kept for reference), so that its job's output is missing and Snakemake runs it again.
    Returns the new paths. Why not Snakemake's own means: `--forcerun` cannot be set from
    the workflow, and an mtime mark is ignored for inputs whose checksum is unchanged."""
    out: list[Path] = []
    for path in receipts:
        target = Path(dest) / path.parent.name / path.name
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(path, target)
        out.append(target)
    return out


# -- index --------------------------------------------------------------------------------


def _entry_from_receipt(receipt: Path, spec_name: str | None = None) -> dict[str, Any]:
    if not receipt.exists():  # e.g. a repo receipt an env job writes beside its own (pipeline.envjob)
        st = StageStatus(
            ok=False,
            stage="publish",
            key=receipt.stem,
            error=f"no publish receipt {receipt}: the job that publishes it did not run; rerun the "
            f"workflow (or --forcerun the environment that uses it)",
        )
    else:
        st = read_status(receipt)
    if st.ok and st.data.get("status") == "ok":
        entry = {"status": "ok", "error": None, "manifest": st.data["manifest"], "log": st.data.get("log")}
    else:
        error = st.data.get("error") if st.ok else st.error
        entry = {"status": "failed", "error": error, "manifest": None, "log": st.data.get("log") if st.ok else None}
    if spec_name is not None:
        entry["spec_name"] = spec_name
    return entry


def step_index(
    store_url: str,
    plan_path: Path,
    receipts_dir: Path,
    validation_files: list[Path],
    receipt_out: Path,
    report_out: Path,
) -> dict[str, Any]:
    from minisandbox.index import build_index, load_jsonl
    from minisandbox.node.published import publish_index
    from minisandbox.node.store import Store
    from minisandbox.pipeline.plan import Plan

    plan = Plan.from_dict(_load(plan_path))
    interps = {k: _entry_from_receipt(receipts_dir / "interp" / f"{k}.json") for k in plan.interps}
    envs = {k: _entry_from_receipt(receipts_dir / "env" / f"{k}.json", v["spec"]["name"]) for k, v in plan.envs.items()}
    repos = {k: _entry_from_receipt(receipts_dir / "repo" / f"{k}.json") for k in plan.repos}
    validation: dict[str, dict[str, Any]] = {}
    for vf in validation_files:
        data = _load(vf)
        for iid, res in data.get("tasks", {}).items():
            validation[iid] = res
    catalog, shards = build_index(load_jsonl(Path(plan.tasks_file)), envs, repos, plan.invalid, validation or None)
    catalog["interps"] = interps  # the interpreter layers (node/sync.py mirrors and verifies them)
    catalog["counts"] = dict(
        sorted(
            {
                **catalog["counts"],
                "interps_ok": sum(1 for e in interps.values() if e.get("status") == "ok"),
                "interps_failed": sum(1 for e in interps.values() if e.get("status") != "ok"),
            }.items()
        )
    )
    publish_index(Store(store_url), catalog, shards)
    report = {
        "store": store_url,
        "counts": catalog["counts"],
        "failed_envs": {k: e["error"] for k, e in envs.items() if e["status"] != "ok"},
        "failed_repos": {k: e["error"] for k, e in repos.items() if e["status"] != "ok"},
        "invalid_records": plan.invalid,
    }
    atomic_write_json(report_out, report)
    atomic_write_json(receipt_out, {"store": store_url, "counts": catalog["counts"], "generated": catalog["generated"]})
    return report


def format_report(report: dict[str, Any]) -> str:
    """Human summary printed at the end of a run."""
    c = report["counts"]
    lines = [
        f"minisandbox: published to {report['store']}",
        f"  tasks: {c.get('tasks', 0)} ({c.get('tasks_ready', 0)} ready, "
        f"{c.get('tasks_env_failed', 0)} env-failed, {c.get('tasks_repo_failed', 0)} repo-failed)",
        f"  environments: {c.get('envs_ok', 0)} ok, {c.get('envs_failed', 0)} failed; "
        f"repos: {c.get('repos_ok', 0)} ok, {c.get('repos_failed', 0)} failed; "
        f"interpreter layers: {c.get('interps_ok', 0)} ok, {c.get('interps_failed', 0)} failed",
        f"  invalid records: {c.get('invalid_records', 0)}",
    ]
    vkeys = sorted(k for k in c if k.startswith("validation_"))
    if vkeys:
        lines.append("  validation: " + ", ".join(f"{k.removeprefix('validation_')} {c[k]}" for k in vkeys))
    for k, err in report["failed_envs"].items():
        lines.append(f"  FAILED env {k}: {err}")
    for k, err in report["failed_repos"].items():
        lines.append(f"  FAILED repo {k}: {err}")
    for rec in report["invalid_records"]:
        lines.append(
            f"  INVALID {rec['file']}:{rec['line']} {rec.get('instance_id') or ''} field {rec['field']}: {rec['error']}"
        )
    return "\n".join(lines)
