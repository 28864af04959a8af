"""Attack: a tampered store. Each test publishes a real local store (tests/fixtures/runtime),
then edits one object the way someone with write access to the bucket would, and checks
that (1) the node refuses it with one line naming the object and the field, before any host
path is built from it, and (2) an untampered task of the same store still works."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from minisandbox.index import CATALOG, shard_of, shard_path
from minisandbox.manifest import StoreDataError
from minisandbox.node.cache import Artifact, Cache
from minisandbox.node.published import read_catalog
from minisandbox.node.runtime import prepare
from minisandbox.node.store import Store
from tests.fixtures.runtime import build_store
from tests.fixtures.sandbox import SRC


@pytest.fixture
def store(tmp_path):
    built = build_store(tmp_path / "store", tmp_path / "work", n_envs=2, n_tasks=2)
    built["cache"] = Cache(tmp_path / "cache")
    built["tmp"] = tmp_path
    return built


def _tamper_manifest(built: dict, where: str, name: str, **changes) -> Path:
    path = Path(built["url"]) / "artifacts" / where / f"{name}.manifest.json"
    data = json.loads(path.read_text())
    data.update(changes)
    path.write_text(json.dumps(data))
    return path


def _task(built: dict, n: int) -> dict:
    return built["tasks"][n]


def _legit_path_works(built: dict, n: int = 1) -> None:
    with prepare(_task(built, n)["instance_id"], built["url"], cache=built["cache"]) as pt:
        assert all(p.is_dir() for p in pt.layers.values())


def test_digest_naming_a_host_directory_is_refused(store):
    """sha256 = ../../<host dir>: formerly the host dir was mounted as a layer and a lock
    file created beside it."""
    host = store["tmp"] / "host-secrets"
    host.mkdir()
    (host / "id_rsa").write_text("PRIVATE\n")
    os.chmod(host / "id_rsa", 0o600)
    task = _task(store, 0)
    evil = os.path.relpath(host, store["cache"].layers)
    _tamper_manifest(store, "repo", task["repo_key"], sha256=evil)
    with pytest.raises(StoreDataError) as exc:
        prepare(task["instance_id"], store["url"], cache=store["cache"])
    msg = str(exc.value)
    assert "'sha256'" in msg and f"artifacts/repo/{task['repo_key']}.manifest.json" in msg and "\n" not in msg
    assert sorted(os.listdir(host)) == ["id_rsa"]  # no lock or lease file planted next to it
    assert not list(store["cache"].locks.iterdir()) or all(len(p.stem) == 64 for p in store["cache"].locks.iterdir())
    _legit_path_works(store)


def test_mount_path_outside_the_allow_list_is_refused(store):
    task = _task(store, 0)
    target = store["tmp"] / "created-by-attacker"
    for bad in ("/testbed/../" + str(target).lstrip("/"), "/opt/miniconda3", "/etc", "testbed"):
        _tamper_manifest(store, "repo", task["repo_key"], mount_path=bad)
        with pytest.raises(StoreDataError, match="'mount_path'"):
            prepare(task["instance_id"], store["url"], cache=store["cache"])
    assert not target.exists()
    _legit_path_works(store)


def test_interpreter_prefix_outside_the_pattern_is_refused(store):
    task = _task(store, 0)
    for bad in ("/etc", "/root/.ssh", "/root/.pyenv/versions/3.11.9/../../../etc", "relative/versions/3.11.9"):
        _tamper_manifest(store, "env", task["env_key"], interpreter={"version": "3.11.9", "prefix": bad})
        with pytest.raises(StoreDataError, match="interpreter"):
            prepare(task["instance_id"], store["url"], cache=store["cache"])
    _tamper_manifest(store, "env", task["env_key"], interpreter={"version": "3.11.9", "prefix": "/usr"})
    _legit_path_works(store, 0)


def test_artifact_names_kinds_formats_and_sizes_are_checked(store):
    task = _task(store, 0)
    key = task["repo_key"]
    for changes, field in (
        ({"artifact": "../../../etc/passwd"}, "artifact"),
        ({"kind": "../x"}, "kind"),
        ({"kind": "env", "mount_path": "/opt/miniconda3/envs/testbed"}, "kind"),
        ({"key": "other-key"}, "key"),
        ({"format": "zip"}, "format"),
        ({"size": "12"}, "size"),
        ({"size": -1}, "size"),
        ({"sha256": "F" * 64}, "sha256"),
        (
            {"image": {"format": "squashfs", "artifact": "../x.squashfs", "sha256": "0" * 64, "size": 1}},
            "image.artifact",
        ),
    ):
        path = Path(store["url"]) / "artifacts" / "repo" / f"{key}.manifest.json"
        original = path.read_text()
        _tamper_manifest(store, "repo", key, **changes)
        with pytest.raises(StoreDataError, match=f"'{field}'"):
            prepare(task["instance_id"], store["url"], cache=store["cache"])
        path.write_text(original)
    _legit_path_works(store, 0)


def test_index_entry_keys_are_plain_names(store):
    task = _task(store, 0)
    rel = shard_path(shard_of(task["instance_id"]))
    path = Path(store["url"]) / rel
    lines = path.read_text().splitlines()
    entry = json.loads(lines[0])
    entry["env_key"] = "../../../../tmp/evil"
    path.write_text("\n".join([json.dumps(entry)] + lines[1:]) + "\n")
    with pytest.raises(StoreDataError) as exc:
        prepare(entry["instance_id"], store["url"], cache=store["cache"])
    assert rel in str(exc.value) and "'env_key'" in str(exc.value)


def test_index_record_lacking_a_field_is_an_error_naming_it(store):
    """A record without `patch` used to reach TaskRecord(**record) and die with a TypeError."""
    task = _task(store, 0)
    rel = shard_path(shard_of(task["instance_id"]))
    path = Path(store["url"]) / rel
    original = path.read_text()
    lines = original.splitlines()
    entry = json.loads(lines[0])
    del entry["record"]["patch"]
    path.write_text("\n".join([json.dumps(entry)] + lines[1:]) + "\n")
    with pytest.raises(StoreDataError) as exc:
        prepare(entry["instance_id"], store["url"], cache=store["cache"])
    assert rel in str(exc.value) and "lacks field 'patch'" in str(exc.value) and "\n" not in str(exc.value)
    path.write_text(original)
    _legit_path_works(store, 0)


def test_garbage_shard_is_an_error_naming_the_shard(store):
    task = _task(store, 0)
    rel = shard_path(shard_of(task["instance_id"]))
    (Path(store["url"]) / rel).write_bytes(b"\x00\xffnot json at all\n")
    with pytest.raises(StoreDataError) as exc:
        prepare(task["instance_id"], store["url"], cache=store["cache"])
    assert rel in str(exc.value) and "\n" not in str(exc.value)
    (Path(store["url"]) / rel).write_text('{"instance_id": 1}\n')
    with pytest.raises(StoreDataError, match=f"{rel} line 1: field 'instance_id'"):
        prepare(task["instance_id"], store["url"], cache=store["cache"])
    other = _task(store, 1)
    if shard_of(other["instance_id"]) != shard_of(task["instance_id"]):
        _legit_path_works(store, 1)


def test_tampered_catalog_is_refused(store):
    cat_path = Path(store["url"]) / CATALOG
    cat = json.loads(cat_path.read_text())
    good = Store(store["url"])
    read_catalog(good)  # the legitimate catalog passes
    for changes in (
        {"shards": 10**9},
        {"envs": {"../x": {"status": "ok"}}},
        {"repos": {"k": {"status": "ok", "log": "../../etc/passwd"}}},
    ):
        cat_path.write_text(json.dumps({**cat, **changes}))
        with pytest.raises(StoreDataError, match="index/catalog.json"):
            read_catalog(good)


def test_cache_refuses_a_digest_that_is_not_hex(store):
    """Defence in depth below the schema: the node cache never builds a path from a bad digest."""
    with pytest.raises(StoreDataError, match="sha256"):
        Artifact(store["url"], "artifacts/repo/x.tar.zst", "../../etc", 1, "tar.zst", "x", "repo")
    with pytest.raises(StoreDataError):
        store["cache"].lock("../../../tmp/x")


@pytest.mark.root
def test_run_on_a_tampered_store_fails_in_one_line(store):
    """The same through `minisandbox run`: exit 1 with one line."""
    task = _task(store, 0)
    _tamper_manifest(store, "env", task["env_key"], mount_path="/opt/miniconda3")
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": SRC, "MINISANDBOX_CACHE": str(store["cache"].root)}
    res = subprocess.run(
        [sys.executable, "-m", "minisandbox.cli", "run", "--store", store["url"], task["instance_id"], "--", "true"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert res.returncode == 1
    assert res.stderr.count("\n") == 1 and "'mount_path'" in res.stderr
    _legit_path_works(store, 1)  # the other task (other env) of the same store still prepares
