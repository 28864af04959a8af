"""Cache: verified streaming into layers, corrupt/truncated downloads, leases and LRU GC."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

from minisandbox.node.cache import Artifact, ArtifactCorruptError, Cache
from minisandbox.node.iobudget import IOBudget
from minisandbox.node.restore import UnsafeArchiveError
from minisandbox.node.store import Store
from tests.fixtures.runtime import build_store, publish_tree


def env_artifact(info: dict, i: int = 0) -> Artifact:
    return Artifact.from_manifest(info["store"], info["envs"][i])


def new_cache(tmp_path: Path) -> Cache:
    return Cache(tmp_path / "cache", budget=IOBudget(2, tmp_path / "cache" / "budget"))


def test_layer_is_fetched_once_then_warm(published_store: dict, tmp_path: Path) -> None:
    cache = new_cache(tmp_path)
    art = env_artifact(published_store)
    first, lease1 = cache.layer(published_store["store"], art)
    assert first.downloaded and first.attempts == 1
    assert (
        first.path / "lib" / "python3.11" / "site-packages" / "pkg0" / "__init__.py"
    ).read_text() == "NAME = 'pkg0'\n"
    second, lease2 = cache.layer(published_store["store"], art)
    assert not second.downloaded and second.path == first.path
    assert len(cache.live_leases(art.sha256)) == 2
    assert not list(cache.tmp.iterdir()) and not list(cache.layers.glob(".tmp-*"))


class TruncatingStore(Store):
    """A real local store whose first `n` transfers are cut short (a dropped connection)."""

    def __init__(self, url: str, cut: int) -> None:
        super().__init__(url)
        self.cut = cut
        self.opens = 0

    def open(self, rel: str, mode: str = "rb", **kw):
        self.opens += 1
        f = super().open(rel, mode, **kw)
        if self.opens <= self.cut:
            data = f.read()
            f.close()
            return io.BytesIO(data[: len(data) * 2 // 3])
        return f


def test_truncated_download_is_fetched_once_more(published_store: dict, tmp_path: Path) -> None:
    store = TruncatingStore(published_store["url"], cut=1)
    result, _ = new_cache(tmp_path).layer(store, env_artifact(published_store))
    assert result.attempts == 2 and store.opens == 2
    assert (result.path / "pyvenv.cfg").is_file()


def test_twice_truncated_download_names_the_artifact(published_store: dict, tmp_path: Path) -> None:
    store = TruncatingStore(published_store["url"], cut=5)
    art = env_artifact(published_store)
    cache = new_cache(tmp_path)
    with pytest.raises(ArtifactCorruptError, match=rf"artifact .*{art.rel}.*{art.key}.*2 downloads.*re-publish"):
        cache.layer(store, art)
    assert store.opens == 2
    assert list(cache.layers.iterdir()) == []


def test_corrupt_artifact_in_store(published_store: dict, tmp_path: Path) -> None:
    art = env_artifact(published_store)
    path = Path(published_store["url"]) / art.rel
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x55  # same size, one flipped byte
    path.write_bytes(bytes(data))
    cache = new_cache(tmp_path)
    with pytest.raises(ArtifactCorruptError, match=f"{art.key}.*sha256"):
        cache.layer(published_store["store"], art)
    assert list(cache.layers.iterdir()) == [] and not (cache.layers / art.sha256).exists()
    # repo artifacts are unaffected
    repo = Artifact.from_manifest(
        published_store["store"],
        json.loads(
            published_store["store"].read_text(
                f"artifacts/repo/{published_store['tasks'][0]['repo_key']}.manifest.json"
            )
        ),
    )
    assert cache.layer(published_store["store"], repo)[0].downloaded


class FlakyStore(Store):
    def __init__(self, url: str, failures: int) -> None:
        super().__init__(url, attempts=4, backoff=0.01)
        self.failures = failures

    def open(self, rel: str, mode: str = "rb", **kw):
        if self.failures:
            self.failures -= 1
            raise ConnectionResetError("connection reset by peer")
        return super().open(rel, mode, **kw)


def test_transient_store_errors_are_retried(published_store: dict, tmp_path: Path) -> None:
    store = FlakyStore(published_store["url"], failures=2)
    result, _ = new_cache(tmp_path).layer(store, env_artifact(published_store))
    assert result.downloaded and result.attempts == 1 and store.failures == 0


def test_unsafe_published_archive_is_not_retried(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        ti = tarfile.TarInfo("../../escape.txt")
        ti.size = 3
        tf.addfile(ti, io.BytesIO(b"bad"))
    import zstandard

    from minisandbox.fsutil import file_digest

    archive = tmp_path / "evil.tar.zst"
    archive.write_bytes(zstandard.ZstdCompressor().compress(buf.getvalue()))
    sha, size = file_digest(archive)
    store.put_file(archive, "artifacts/env/env-evil.tar.zst")
    art = Artifact(store.url, "artifacts/env/env-evil.tar.zst", sha, size, "tar.zst", "env-evil", "env")
    with pytest.raises(UnsafeArchiveError, match=r"contains '\.\.'"):
        new_cache(tmp_path).layer(store, art)
    assert not (tmp_path / "escape.txt").exists() and not (tmp_path.parent / "escape.txt").exists()


def test_published_method_tar_gz_store(tmp_path: Path) -> None:
    info = build_store(tmp_path / "store", tmp_path / "work", n_envs=1, n_tasks=1, fmt="tar.gz")
    result, _ = new_cache(tmp_path).layer(info["store"], env_artifact(info))
    assert result.downloaded and os.path.islink(result.path / "bin" / "python")


def test_gc_evicts_lru_unleased_and_never_a_leased_layer(tmp_path: Path) -> None:
    info = build_store(tmp_path / "store", tmp_path / "work", n_envs=3, n_tasks=3, payload=100_000)
    cache = new_cache(tmp_path)
    arts = [env_artifact(info, i) for i in range(3)]
    results = []
    for i, art in enumerate(arts):
        r, lease = cache.layer(info["store"], art)
        results.append((r, lease))
        os.utime(cache.layers / f"{art.sha256}.json", (1000 + i, 1000 + i))  # 0 oldest, 2 newest
    # env 0 (the oldest) stays leased by this process; 1 and 2 are released
    for _, lease in results[1:]:
        lease.unlink()
    report = cache.gc(max_bytes=0)
    assert [e.digest for e in report.removed] == [arts[1].sha256, arts[2].sha256]  # LRU order
    assert (cache.layers / arts[0].sha256).is_dir()
    assert report.kept_leased == 1 and report.total_after > 0
    # a lease held by a dead process does not protect the layer
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    lease_file = results[0][1]
    data = json.loads(lease_file.read_text())
    data["pid"] = int(dead.stdout)
    lease_file.write_text(json.dumps(data))
    report = cache.gc(max_bytes=0)
    assert [e.digest for e in report.removed] == [arts[0].sha256]
    assert report.total_after == 0 and not any(cache.layers.iterdir())


def test_gc_keeps_within_budget_and_cleans_dead_temp_dirs(tmp_path: Path) -> None:
    info = build_store(tmp_path / "store", tmp_path / "work", n_envs=2, n_tasks=2, payload=100_000)
    cache = new_cache(tmp_path)
    for i in range(2):
        _, lease = cache.layer(info["store"], env_artifact(info, i))
        lease.unlink()
        time.sleep(0.02)
    dead = cache.layers / f".tmp-{'f' * 64}-deadbeef"
    (dead / "x").mkdir(parents=True)
    entries = cache.entries()
    one = max(e.layer_bytes for e in entries)
    report = cache.gc(max_bytes=one)
    assert report.stale_removed == 1 and not dead.exists()
    assert [e.digest for e in report.removed] == [env_artifact(info, 0).sha256]  # older one goes
    assert [e.digest for e in cache.entries()] == [env_artifact(info, 1).sha256]


def test_manifest_without_fields_is_a_clear_error(tmp_path: Path) -> None:
    store = Store(tmp_path)
    with pytest.raises(Exception, match="lacks 'sha256'.*re-run the publish step"):
        Artifact.from_manifest(store, {"kind": "env", "key": "env-x", "artifact": "env-x.tar.zst"})


def test_publish_helper_matches_design(tmp_path: Path) -> None:
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "f").write_text("1")
    m = publish_tree(Store(tmp_path / "s"), "repo", "repo-a-b-c", tmp_path / "t", tmp_path)
    assert m["mount_path"] == "/testbed" and (tmp_path / "s" / "artifacts" / "repo" / "repo-a-b-c.tar.zst").is_file()
