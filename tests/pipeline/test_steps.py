"""Pipeline steps: failures flow downstream as results; concurrent publishers never
corrupt an artifact."""

from __future__ import annotations

import json
import multiprocessing as mp
from pathlib import Path

from minisandbox.fsutil import file_digest
from minisandbox.pipeline import steps as pipeline
from minisandbox.status import StageStatus, read_status, write_status


def _tree(root: Path) -> Path:
    (root / "pkg").mkdir(parents=True)
    for i in range(50):
        (root / "pkg" / f"m{i}.py").write_text(f"X = {i}\n" * 200)
    return root


def _spec_file(tmp: Path) -> Path:
    p = tmp / "spec.json"
    p.write_text(json.dumps({"key": "repo-x-1", "source": "s", "commit": "c" * 40, "source_id": "x"}))
    return p


def test_failure_flows_to_publish_and_log_is_published(tmp_path):
    up = tmp_path / "build.json"
    log = tmp_path / "build.log"
    log.write_text("pip says no\n")
    write_status(up, StageStatus(ok=False, stage="build", key="env-x", error="build: exit 3", log=str(log)))
    archive = tmp_path / "a.tar.zst"
    st = pipeline.step_pack("env-x", tmp_path / "nonexistent", up, archive, tmp_path / "pack.json", "tar.zst", 3)
    assert not st.ok and st.error == "build: exit 3" and archive.read_bytes() == b""
    m = pipeline.step_checksum("env", _spec_file(tmp_path), archive, tmp_path / "pack.json", up, tmp_path / "m.json")
    assert not m.ok and m.error == "build: exit 3"
    store = tmp_path / "store"
    r = pipeline.step_publish(str(store), "env", "env-x", tmp_path / "m.json", archive, log, tmp_path / "r.json")
    assert r.ok and r.data["status"] == "failed" and r.data["error"] == "build: exit 3"
    assert (store / "logs/env/env-x.log").read_text() == "pip says no\n"
    assert not (store / "artifacts").exists()  # nothing of a failed build is published


def _publish(args: tuple[str, str, str, str]) -> str:
    store, manifest, archive, receipt = args
    st = pipeline.step_publish(store, "repo", "repo-x-1", Path(manifest), Path(archive), None, Path(receipt))
    return st.data.get("status", st.error or "")


def test_concurrent_publishers_of_one_key(tmp_path):
    tree = _tree(tmp_path / "tree")
    up = tmp_path / "snap.json"
    write_status(up, StageStatus(ok=True, stage="snapshot", key="repo-x-1", data={"snapshot_commit": "d" * 40}))
    archive = tmp_path / "a.tar.zst"
    assert pipeline.step_pack("repo-x-1", tree, up, archive, tmp_path / "pack.json", "tar.zst", 3).ok
    assert pipeline.step_checksum(
        "repo", _spec_file(tmp_path), archive, tmp_path / "pack.json", up, tmp_path / "m.json"
    ).ok
    store = tmp_path / "store"
    jobs = [(str(store), str(tmp_path / "m.json"), str(archive), str(tmp_path / f"r{i}.json")) for i in range(6)]
    with mp.get_context("spawn").Pool(6) as pool:
        results = pool.map(_publish, jobs)
    assert results == ["ok"] * 6
    manifest = read_status(tmp_path / "m.json").data
    published = store / "artifacts/repo" / manifest["artifact"]
    assert file_digest(published) == (manifest["sha256"], manifest["size"])
    assert not [p for p in store.rglob("*") if ".tmp" in p.name]


def _packed(tmp_path: Path, *, image: bool, with_archive: bool) -> tuple[Path, Path]:
    """step_pack of a repo tree after a successful snapshot: (archive path, snapshot status)."""
    tree = _tree(tmp_path / "tree")
    up = tmp_path / "snap.json"
    write_status(up, StageStatus(ok=True, stage="snapshot", key="repo-x-1", data={"snapshot_commit": "d" * 40}))
    archive = tmp_path / "packed" / "repo-x-1.tar.zst"
    assert pipeline.step_pack(
        "repo-x-1", tree, up, archive, tmp_path / "pack.json", "tar.zst", 3, image=image, with_archive=with_archive
    ).ok
    return archive, up


def _packed_with_image(tmp_path: Path, with_archive: bool = True) -> tuple[Path, Path]:
    """pack (with image and chunk list) and checksum a repo tree, as job_repo does."""
    import shutil

    import pytest

    if not shutil.which("mksquashfs"):
        pytest.skip("squashfs-tools not installed (apt-get install squashfs-tools)")
    archive, up = _packed(tmp_path, image=True, with_archive=with_archive)
    assert pipeline.step_checksum(
        "repo", _spec_file(tmp_path), archive, tmp_path / "pack.json", up, tmp_path / "m.json"
    ).ok
    return archive, tmp_path / "m.json"


def test_publish_order_chunks_list_archive_manifest_and_no_whole_image_by_default(tmp_path, monkeypatch):
    """docs/pipeline.md "Atomicity": a reader never sees a manifest whose parts are missing."""
    from minisandbox.manifest import validate_manifest
    from minisandbox.node.store import Store

    archive, manifest_status = _packed_with_image(tmp_path)
    m = read_status(manifest_status).data
    chunks = m["image"]["chunks"]
    assert chunks["artifact"] == "repo-x-1.chunks.json" and chunks["count"] >= 1
    order: list[str] = []
    real_file, real_bytes, real_object = Store.put_file, Store.put_bytes, Store.put_object
    monkeypatch.setattr(
        Store, "put_file", lambda self, local, rel, **kw: (order.append(rel), real_file(self, local, rel, **kw))
    )
    monkeypatch.setattr(Store, "put_bytes", lambda self, rel, data: (order.append(rel), real_bytes(self, rel, data)))
    monkeypatch.setattr(Store, "put_object", lambda self, rel, data: (order.append(rel), real_object(self, rel, data)))
    store = tmp_path / "store"
    st = pipeline.step_publish(str(store), "repo", "repo-x-1", manifest_status, archive, None, tmp_path / "r.json")
    assert st.ok and st.data["status"] == "ok"
    # the image's chunks in packs, each pack before its index, then the list, archive, manifest
    packs = order[:-3]
    assert packs and len(packs) % 2 == 0 and all(r.startswith("packs/") for r in packs)
    assert all(packs[i + 1] == packs[i] + ".idx" for i in range(0, len(packs), 2))
    assert order[-3:] == [
        "artifacts/repo/repo-x-1.chunks.json",
        "artifacts/repo/repo-x-1.tar.zst",
        "artifacts/repo/repo-x-1.manifest.json",
    ]
    published = json.loads((store / "artifacts/repo/repo-x-1.manifest.json").read_text())
    assert published["image"]["whole"] is False and published == st.data["manifest"]
    validate_manifest(published, where="t", kind="repo", key="repo-x-1")
    assert not (store / "artifacts/repo/repo-x-1.squashfs").exists()
    # again: every chunk is there already, nothing but list, archive and manifest is written
    order.clear()
    assert pipeline.step_publish(str(store), "repo", "repo-x-1", manifest_status, archive, None, tmp_path / "r.json").ok
    assert order == [
        "artifacts/repo/repo-x-1.chunks.json",
        "artifacts/repo/repo-x-1.tar.zst",
        "artifacts/repo/repo-x-1.manifest.json",
    ]


def test_image_whole_uploads_the_image_too(tmp_path):
    archive, manifest_status = _packed_with_image(tmp_path)
    store = tmp_path / "store"
    st = pipeline.step_publish(
        str(store), "repo", "repo-x-1", manifest_status, archive, None, tmp_path / "r.json", image_whole=True
    )
    img = st.data["manifest"]["image"]
    assert img.get("whole", True) is True and img["chunks"]
    assert file_digest(store / "artifacts/repo/repo-x-1.squashfs") == (img["sha256"], img["size"])
    assert (store / "artifacts/repo/repo-x-1.chunks.json").is_file()


def test_without_archive_only_chunks_list_and_manifest_are_published(tmp_path, monkeypatch):
    """config `archive: false` (the default with images): no archive is packed or published;
    the manifest names none and still passes the store schema."""
    from minisandbox.manifest import validate_manifest
    from minisandbox.node.store import Store

    archive, manifest_status = _packed_with_image(tmp_path, with_archive=False)
    assert not archive.exists()
    m = read_status(manifest_status).data
    assert not {"artifact", "sha256", "size"} & set(m) and m["image"]["chunks"]["count"] >= 1
    assert m["files"] == 50 and m["raw_bytes"] > 0
    order: list[str] = []
    real_file, real_object = Store.put_file, Store.put_object
    monkeypatch.setattr(
        Store, "put_file", lambda self, local, rel, **kw: (order.append(rel), real_file(self, local, rel, **kw))
    )
    monkeypatch.setattr(Store, "put_object", lambda self, rel, data: (order.append(rel), real_object(self, rel, data)))
    store = tmp_path / "store"
    st = pipeline.step_publish(str(store), "repo", "repo-x-1", manifest_status, archive, None, tmp_path / "r.json")
    assert st.ok and st.data["status"] == "ok"
    assert [r for r in order if not r.startswith("packs/")] == ["artifacts/repo/repo-x-1.chunks.json"]
    assert sorted(p.name for p in (store / "artifacts/repo").iterdir()) == [
        "repo-x-1.chunks.json",
        "repo-x-1.manifest.json",
    ]
    validate_manifest(
        json.loads((store / "artifacts/repo/repo-x-1.manifest.json").read_text()),
        where="t",
        kind="repo",
        key="repo-x-1",
    )


def test_without_archive_and_without_image_the_archive_is_kept(tmp_path):
    """`archive: false` only drops the archive when there is an image to serve the layer."""
    archive, _ = _packed(tmp_path, image=False, with_archive=False)
    assert archive.stat().st_size > 0 and read_status(tmp_path / "pack.json").data["archive"] is True


# -- transient failures are retried, every failure is recorded with its cause -------------


def test_transient_failures_are_retried_then_recorded_with_their_cause(tmp_path, monkeypatch):
    import errno
    import subprocess

    from minisandbox.pipeline import failures

    monkeypatch.setattr(failures, "RETRY_DELAY", 0.0)
    calls: list[int] = []

    def flaky() -> dict:
        calls.append(1)
        if len(calls) < 3:
            raise ConnectionResetError(errno.ECONNRESET, "Connection reset by peer")
        return {"fine": True}

    log = tmp_path / "step.log"
    st = pipeline._guard("mirror", "src-x", tmp_path / "s.json", log, flaky)
    assert st.ok and st.data == {"fine": True} and len(calls) == 3
    assert log.read_text().count("network error (ConnectionResetError)") == 2

    def always(exc: Exception):
        def fn() -> dict:
            calls.append(1)
            raise exc

        return fn

    calls.clear()  # a tool killed by a signal: retried ATTEMPTS times, then recorded as transient
    st = pipeline._guard(
        "build", "env-x", tmp_path / "b.json", None, always(subprocess.CalledProcessError(-9, ["uv", "pip", "install"]))
    )
    assert not st.ok and len(calls) == failures.ATTEMPTS
    assert st.data["cause"] == {"kind": "transient", "detail": "tool killed by signal 9", "attempts": 3}
    assert "gave up after 3 attempts" in st.error
    assert read_status(tmp_path / "b.json").data["cause"]["kind"] == "transient"

    calls.clear()  # what a rerun cannot fix is recorded at once
    st = pipeline._guard(
        "build",
        "env-x",
        tmp_path / "c.json",
        None,
        always(RuntimeError("build of x failed (exit 3): no matching distribution")),
    )
    assert not st.ok and len(calls) == 1
    assert st.data["cause"] == {"kind": "permanent", "detail": "RuntimeError", "attempts": 1}
    # the cause reaches the publish receipt (the one the index and retry_failed read)
    pipeline.step_publish(
        str(tmp_path / "store"), "env", "env-x", tmp_path / "b.json", tmp_path / "a.tar.zst", None, tmp_path / "r.json"
    )
    r = read_status(tmp_path / "r.json")
    assert r.data["status"] == "failed" and r.data["cause"]["detail"] == "tool killed by signal 9"


def test_transient_cause_reads_tool_messages_and_io_errors():
    import errno

    from minisandbox.pipeline.failures import transient_cause as t

    assert t(RuntimeError("git fetch: fatal: unable to access: Could not resolve host: github.com"))
    assert t(RuntimeError("uv: error sending request for url (https://pypi.org/simple/x/)"))
    assert t(OSError(errno.EIO, "Input/output error")) == "I/O error (EIO)"
    assert t(RuntimeError("tar of /x failed (exit -9): ")) is not None
    wrapped = RuntimeError("publish failed")
    wrapped.__cause__ = TimeoutError("read timed out")
    assert t(wrapped) == "network error (TimeoutError)"
    assert t(RuntimeError("build of x timed out after 1800 s")) is None  # a slow build stays slow
    assert t(RuntimeError("commit abc not found in /src; check the spec's commit")) is None
    assert t(OSError(errno.ENOENT, "No such file or directory")) is None


def test_failed_receipts_lists_exactly_the_recorded_failures(tmp_path):
    rec = tmp_path / "published"
    ok = {"status": "ok", "manifest": {}}
    write_status(rec / "env" / "env-a.json", StageStatus(ok=True, stage="publish", key="env-a", data=ok))
    write_status(
        rec / "env" / "env-b.json",
        StageStatus(ok=True, stage="publish", key="env-b", data={"status": "failed", "error": "build: exit 3"}),
    )
    write_status(
        rec / "interp" / "cpython-1.json",
        StageStatus(ok=False, stage="interp", key="cpython-1", error="interp: tar failed"),
    )
    write_status(rec / "repo" / "repo-a.json", StageStatus(ok=True, stage="publish", key="repo-a", data=ok))
    got = pipeline.failed_receipts(
        rec, {"env": ["env-a", "env-b", "env-never-run"], "repo": ["repo-a"], "interp": ["cpython-1"]}
    )
    assert sorted(p.relative_to(rec).as_posix() for p in got) == ["env/env-b.json", "interp/cpython-1.json"]
