"""Store over fsspec: atomic puts, reads, clear errors, retries (local; S3 via moto_server)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from minisandbox.node.store import NotInStore, Store, StoreError, is_transient


def test_local_put_get_roundtrip(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    src = tmp_path / "blob"
    src.write_bytes(b"abc" * 1000)
    store.put_file(src, "artifacts/env/e.tar.zst")
    store.put_text("artifacts/env/e.manifest.json", '{"a": 1}')
    assert store.exists("artifacts/env/e.tar.zst")
    assert store.size("artifacts/env/e.tar.zst") == 3000
    assert store.read_text("artifacts/env/e.manifest.json") == '{"a": 1}'
    assert store.ls("artifacts/env") == ["artifacts/env/e.manifest.json", "artifacts/env/e.tar.zst"]
    assert store.ls("nothing/here") == []
    out = tmp_path / "dl" / "x"
    store.get_file("artifacts/env/e.tar.zst", out)
    assert out.read_bytes() == src.read_bytes()
    # no temporary objects left behind
    assert sorted(p.name for p in (tmp_path / "store" / "artifacts" / "env").iterdir()) == [
        "e.manifest.json",
        "e.tar.zst",
    ]
    store.delete("artifacts/env/e.tar.zst")
    assert not store.exists("artifacts/env/e.tar.zst")
    store.delete("artifacts/env/e.tar.zst")  # missing is fine


def test_file_url_and_str_equivalent(tmp_path: Path) -> None:
    Store(tmp_path).put_text("a/b.txt", "x")
    assert Store(f"file://{tmp_path}").read_text("a/b.txt") == "x"
    assert Store(f"file://{tmp_path}").url == f"file://{tmp_path}"


def test_put_file_rejects_wrong_digest_and_leaves_nothing(tmp_path: Path) -> None:
    store = Store(tmp_path / "s", attempts=2, backoff=0.01)
    src = tmp_path / "blob"
    src.write_bytes(b"hello")
    with pytest.raises(StoreError, match="sha256"):
        store.put_file(src, "x/blob", sha256="0" * 64)
    assert list((tmp_path / "s" / "x").iterdir()) == []


def test_missing_object_and_missing_store_errors(tmp_path: Path) -> None:
    store = Store(tmp_path)
    with pytest.raises(NotInStore, match=r"nope\.txt not found in store"):
        store.read_text("nope.txt")
    gone = Store(tmp_path / "does-not-exist")
    with pytest.raises(NotInStore, match="does not exist.*--store"):
        gone.read_text("index/catalog.json")


def test_keys_cannot_escape_the_root(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="must not contain"):
        Store(tmp_path).read_text("../etc/passwd")


def test_transient_errors_are_retried(tmp_path: Path) -> None:
    store = Store(tmp_path, attempts=3, backoff=0.01)
    calls = []

    def flaky() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise ConnectionResetError("reset by peer")
        return "ok"

    assert store._call("read", "x", flaky) == "ok"
    assert len(calls) == 3
    calls.clear()

    def always() -> str:
        calls.append(1)
        raise TimeoutError("timed out")

    with pytest.raises(StoreError, match=r"unreachable .*3 attempts.*check the path"):
        store._call("read", "x", always)
    assert len(calls) == 3
    assert not is_transient(FileNotFoundError("x")) and is_transient(TimeoutError())


def test_unreachable_s3_store_names_url_and_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("s3fs")
    import socket

    with socket.socket() as s:  # a loopback port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "x")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "x")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    store = Store(
        "s3://bucket/prefix",
        attempts=2,
        backoff=0.01,
        endpoint_url=f"http://127.0.0.1:{port}",
        config_kwargs={"connect_timeout": 1, "retries": {"max_attempts": 1}},
    )
    with pytest.raises(StoreError, match=r"store s3://bucket/prefix: cannot reach the S3 endpoint .*AWS_ENDPOINT_URL"):
        store.read_text("index/catalog.json")


@pytest.mark.s3
@pytest.mark.slow
def test_s3_store_roundtrip(store_s3: str, tmp_path: Path) -> None:
    store = Store("s3://minisandbox-test/store")
    src = tmp_path / "blob"
    src.write_bytes(os.urandom(300_000))
    store.put_file(src, "artifacts/repo/r.tar.zst")
    store.put_text("index/tasks/ab.jsonl", "{}\n")
    assert store.size("artifacts/repo/r.tar.zst") == 300_000
    assert store.read_text("index/tasks/ab.jsonl") == "{}\n"
    assert store.ls("artifacts/repo") == ["artifacts/repo/r.tar.zst"]  # no .tmp- leftovers
    out = tmp_path / "out"
    store.get_file("artifacts/repo/r.tar.zst", out)
    assert out.read_bytes() == src.read_bytes()
    with pytest.raises(NotInStore):
        store.read_text("index/tasks/zz.jsonl")
