"""Object-store mistakes a user makes, against a real S3 (moto_server on loopback): a
bucket that does not exist is named (and `push --create-bucket` creates it), an endpoint
that does not answer is reported within seconds naming it, the client's attempts and
timeouts come from MINISANDBOX_S3_*."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from minisandbox.node.store import Store, StoreError
from tests.fixtures.s3 import free_port

pytestmark = pytest.mark.s3


def _cli(argv: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "minisandbox.cli", *argv],
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ),
    )


def test_a_missing_bucket_is_named_on_read_and_on_push(s3, published_store) -> None:
    url = f"s3://{s3.bucket}-absent/store"
    with pytest.raises(StoreError) as exc:
        Store(url).exists("index/catalog.json")
    msg = str(exc.value)
    assert f"bucket '{s3.bucket}-absent' does not exist at {s3.endpoint}" in msg and "--create-bucket" in msg
    pushed = _cli(["push", published_store["url"], url])
    assert pushed.returncode == 1 and "Traceback" not in pushed.stderr
    assert pushed.stderr.count("\n") == 1 and f"bucket '{s3.bucket}-absent' does not exist" in pushed.stderr
    listed = _cli(["tasks", "--store", url])
    assert listed.returncode == 1 and f"bucket '{s3.bucket}-absent' does not exist" in listed.stderr


def test_push_create_bucket_creates_it_and_publishes(s3, published_store) -> None:
    url = f"s3://{s3.bucket}-new/store"
    pushed = _cli(["push", "--create-bucket", published_store["url"], url])
    assert pushed.returncode == 0, pushed.stderr
    assert f"created bucket {s3.bucket}-new at {s3.endpoint}" in pushed.stderr
    listed = _cli(["-q", "tasks", "--store", url])
    assert listed.returncode == 0 and len(listed.stdout.splitlines()) == len(published_store["tasks"])
    again = _cli(["push", "--create-bucket", published_store["url"], url])  # exists now: nothing to create
    assert again.returncode == 0 and "created bucket" not in again.stderr


def test_a_missing_object_in_an_existing_bucket_is_still_just_missing(s3) -> None:
    store = Store(s3.url())
    assert store.exists("index/catalog.json") is False  # the bucket is there: no bucket error
    with pytest.raises(FileNotFoundError, match=r"not found in store"):
        store.read_bytes("index/catalog.json")


def test_an_unreachable_endpoint_is_reported_quickly_naming_it(monkeypatch) -> None:
    port = free_port()  # nothing listens there: connection refused
    endpoint = f"http://127.0.0.1:{port}"
    for k, v in {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": "x",
        "AWS_SECRET_ACCESS_KEY": "x",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_CONFIG_FILE": os.devnull,
        "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
    }.items():
        monkeypatch.setenv(k, v)
    store = Store("s3://any-bucket/store")
    t0 = time.monotonic()
    with pytest.raises(StoreError) as exc:
        store.exists("index/catalog.json")
    seconds = time.monotonic() - t0
    assert f"cannot reach the S3 endpoint {endpoint}" in str(exc.value)
    assert "3 attempts" in str(exc.value) and "$MINISANDBOX_S3_ATTEMPTS" in str(exc.value)
    # 3 attempts with standard backoff (< 1 s + < 2 s): seconds, not the 35-50 s of nested retry loops
    assert seconds < 15, seconds


def test_attempts_and_timeouts_come_from_the_environment(monkeypatch) -> None:
    monkeypatch.setenv("MINISANDBOX_S3_ATTEMPTS", "1")
    monkeypatch.setenv("MINISANDBOX_S3_CONNECT_TIMEOUT", "0.5")
    for k, v in {
        "AWS_ENDPOINT_URL": f"http://127.0.0.1:{free_port()}",
        "AWS_ACCESS_KEY_ID": "x",
        "AWS_SECRET_ACCESS_KEY": "x",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_CONFIG_FILE": os.devnull,
        "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
    }.items():
        monkeypatch.setenv(k, v)
    store = Store("s3://b-env/store", skip_instance_cache=True)
    assert store.fs.config_kwargs["connect_timeout"] == 0.5
    assert store.fs.retries == 1
    with pytest.raises(StoreError, match=r"1 attempts, 0.5 s connect timeout"):
        store.exists("x")
    monkeypatch.setenv("MINISANDBOX_S3_ATTEMPTS", "zero")
    with pytest.raises(StoreError, match=r"MINISANDBOX_S3_ATTEMPTS='zero': expected a positive number"):
        Store("s3://b-env2/store")


def test_missing_credentials_fail_once_with_a_hint(monkeypatch) -> None:
    for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", os.devnull)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{free_port()}")
    with pytest.raises(StoreError) as exc:
        Store("s3://b-creds/store", skip_instance_cache=True).exists("x")
    assert "NoCredentialsError" in str(exc.value) and "credentials" in str(exc.value).split(";")[-1]
    assert "attempts" not in str(exc.value)  # not retried: no attempt would find them


def test_a_local_store_has_no_bucket(tmp_path: Path) -> None:
    store = Store(tmp_path)
    assert store.bucket is None and store.bucket_missing() is False and store.exists("x") is False
