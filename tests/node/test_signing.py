"""Publisher signatures (minisandbox.node.signing), written as the attacks: a store whose
documents were signed at publish is read by a node that has the publisher's public key; a
manifest changed afterwards, a signature removed, a document signed with another key, a
shard moved to another shard's place are refused with one line naming the file; the
untouched store is accepted; without a key, unsigned stores keep working. Through the
real store code (build_store publishes with `Store.put_text`, as the pipeline steps do),
the node's index and manifest reads, `minisandbox run`, `push`, and the real workflow."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from minisandbox.index import shard_of, shard_path
from minisandbox.node import published
from minisandbox.node.signing import PUBLIC_KEY_ENV, SIGNING_KEY_ENV, SigningKeyError, StoreSignatureError
from minisandbox.node.store import Store
from tests.fixtures.runtime import build_store
from tests.fixtures.sandbox import SRC

cryptography = pytest.importorskip("cryptography")


def make_keys(d: Path, name: str = "publisher") -> tuple[Path, Path]:
    """An ed25519 key pair as PEM files, made with openssl as docs/pipeline.md shows."""
    priv, pub = d / f"{name}.pem", d / f"{name}.pub.pem"
    subprocess.run(["openssl", "genpkey", "-algorithm", "ed25519", "-out", str(priv)], check=True, capture_output=True)
    subprocess.run(["openssl", "pkey", "-in", str(priv), "-pubout", "-out", str(pub)], check=True, capture_output=True)
    return priv, pub


@pytest.fixture(autouse=True)
def _node_state(tmp_path, monkeypatch):
    """This test's node state (where freshness records live), never the user's."""
    monkeypatch.setenv("MINISANDBOX_STATE", str(tmp_path / "node-state"))
    monkeypatch.delenv("MINISANDBOX_ACCEPT_OLDER_STORE", raising=False)
    return tmp_path / "node-state"


@pytest.fixture
def keys(tmp_path):
    return make_keys(tmp_path)


@pytest.fixture
def signed_store(tmp_path, keys, monkeypatch):
    """A published store (2 envs, 3 tasks) written with the signing key configured."""
    monkeypatch.setenv(SIGNING_KEY_ENV, str(keys[0]))
    info = build_store(tmp_path / "store", tmp_path / "work", n_envs=2, n_tasks=3)
    monkeypatch.delenv(SIGNING_KEY_ENV)
    return info


def node(url, pub: Path | None) -> Store:
    """A node's view of the store (public key as $MINISANDBOX_STORE_PUBLIC_KEY would give it)."""
    from minisandbox.node.signing import Verifier

    return Store(url, verifier=Verifier(pub) if pub else None)


def documents(root: Path) -> list[str]:
    return sorted(
        str(p.relative_to(root))
        for p in root.rglob("*")
        if p.is_file() and (p.name.endswith(".manifest.json") or p.name.endswith(".jsonl") or p.name == "catalog.json")
    )


def test_every_document_is_signed_and_a_node_with_the_key_reads_them(signed_store, keys):
    root = Path(signed_store["url"])
    docs = documents(root)
    shards = {shard_of(t["instance_id"]) for t in signed_store["tasks"]}
    assert len(docs) == 2 + 3 + len(shards) + 1  # env and repo manifests, shards, catalog
    for rel in docs:
        sig = (root / (rel + ".sig")).read_text()
        assert sig.startswith("ed25519 "), rel
    store = node(signed_store["url"], keys[1])
    published.read_catalog(store)
    for t in signed_store["tasks"][:3]:
        entry = published.lookup(store, t["instance_id"])
        assert published.read_manifest(store, "env", entry["env_key"])["key"] == entry["env_key"]
        assert published.read_manifest(store, "repo", entry["repo_key"])["key"] == entry["repo_key"]


def test_a_manifest_changed_after_signing_is_refused(signed_store, keys):
    env = signed_store["envs"][0]["key"]
    rel = f"artifacts/env/{env}.manifest.json"
    path = Path(signed_store["url"]) / rel
    m = json.loads(path.read_text())
    m["spec"] = {"note": "valid schema, not what the publisher wrote"}
    path.write_text(json.dumps(m, indent=1, sort_keys=True) + "\n")
    with pytest.raises(StoreSignatureError) as exc:
        published.read_manifest(node(signed_store["url"], keys[1]), "env", env)
    msg = str(exc.value)
    assert "\n" not in msg and rel in msg and "does not verify" in msg
    # without a key the (schema-valid) manifest is read as before: signatures are optional
    assert published.read_manifest(node(signed_store["url"], None), "env", env)["spec"] == m["spec"]


def test_a_missing_signature_is_refused_when_a_key_is_given(signed_store, keys):
    t = signed_store["tasks"][0]
    rel = shard_path(shard_of(t["instance_id"]))
    (Path(signed_store["url"]) / (rel + ".sig")).unlink()
    with pytest.raises(StoreSignatureError) as exc:
        published.lookup(node(signed_store["url"], keys[1]), t["instance_id"])
    msg = str(exc.value)
    assert "\n" not in msg and rel in msg and f"{rel}.sig is missing" in msg


def test_another_key_and_a_moved_document_are_refused(signed_store, keys, tmp_path):
    _, other_pub = make_keys(tmp_path, "other")
    with pytest.raises(StoreSignatureError, match="index/catalog.json"):
        published.read_catalog(node(signed_store["url"], other_pub))
    # shard A's signed content and signature served at shard B's place
    root = Path(signed_store["url"])
    shards = sorted({shard_of(t["instance_id"]) for t in signed_store["tasks"]})
    a, b = shard_path(shards[0]), shard_path(shards[1])
    for suffix in ("", ".sig"):
        (root / (b + suffix)).write_bytes((root / (a + suffix)).read_bytes())
    victim = next(t for t in signed_store["tasks"] if shard_of(t["instance_id"]) == shards[1])
    with pytest.raises(StoreSignatureError, match=b):
        published.lookup(node(signed_store["url"], keys[1]), victim["instance_id"])


def test_unsigned_store_works_without_a_key_and_is_refused_with_one(tmp_path, keys):
    info = build_store(tmp_path / "store", tmp_path / "work", n_envs=1, n_tasks=1)
    assert not list(Path(info["url"]).rglob("*.sig"))
    t = info["tasks"][0]
    assert published.lookup(node(info["url"], None), t["instance_id"])["env_key"] == t["env_key"]
    with pytest.raises(StoreSignatureError, match="is missing"):
        published.lookup(node(info["url"], keys[1]), t["instance_id"])


def test_bad_key_files_are_one_line_errors(tmp_path):
    from minisandbox.node.signing import Signer, Verifier

    (tmp_path / "junk.pem").write_text("not a key\n")
    for cls in (Signer, Verifier):
        with pytest.raises(SigningKeyError, match="junk.pem"):
            cls(tmp_path / "junk.pem")
        with pytest.raises(SigningKeyError, match="nope.pem"):
            cls(tmp_path / "nope.pem")


def test_push_keeps_the_publishers_signatures(signed_store, keys, tmp_path):
    """`minisandbox push` (node.sync.mirror) copies each document with its signature
    (this store's catalog lists no artifacts: the index part; the workflow test below
    pushes manifests too)."""
    from minisandbox.node.sync import mirror

    mirror(signed_store["url"], str(tmp_path / "copy"))
    copy = node(str(tmp_path / "copy"), keys[1])
    published.read_catalog(copy)
    for t in signed_store["tasks"]:
        assert published.lookup(copy, t["instance_id"])["env_key"] == t["env_key"]


def _cli(args: list[str], **env) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "minisandbox.cli", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={
            "PATH": os.environ["PATH"],
            "PYTHONPATH": SRC,
            "HOME": "/root",
            "MINISANDBOX_STATE": os.environ["MINISANDBOX_STATE"],
            **env,
        },
    )


def test_fetch_through_a_signed_local_store(signed_store, keys, tmp_path):
    """End to end on a node: `minisandbox --store-public-key PUB fetch` looks the task up,
    reads and checks its manifests and restores both layers; after the repo manifest is
    altered the same command stops with one line naming it, before restoring anything."""
    t = signed_store["tasks"][0]
    args = ["--store-public-key", str(keys[1]), "fetch", "--store", signed_store["url"]]
    ok = _cli(args + ["--cache", str(tmp_path / "cache"), t["instance_id"]])
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.startswith(f"{t['instance_id']}\tfetched") and "/testbed=" in ok.stdout
    rel = f"artifacts/repo/{t['repo_key']}.manifest.json"
    path = Path(signed_store["url"]) / rel
    m = json.loads(path.read_text())
    m["commit"] = "f" * 40
    path.write_text(json.dumps(m, indent=1, sort_keys=True) + "\n")
    bad = _cli(args + ["--cache", str(tmp_path / "cache2"), t["instance_id"]])
    assert bad.returncode == 1
    lines = bad.stderr.strip().splitlines()
    assert len(lines) == 1 and rel in lines[0] and "does not verify" in lines[0], bad.stderr
    assert not (tmp_path / "cache2" / "layers").exists() or not any((tmp_path / "cache2" / "layers").iterdir())
    # the environment variable is the same switch
    bad_env = _cli(args[2:] + ["--cache", str(tmp_path / "cache3"), t["instance_id"]], **{PUBLIC_KEY_ENV: str(keys[1])})
    assert bad_env.returncode == 1 and rel in bad_env.stderr


@pytest.mark.slow
@pytest.mark.root
def test_the_workflow_signs_what_it_publishes(pipeline_workspace, tmp_path):
    """The real workflow with `signing_key` set: every manifest, shard and the catalog it
    publishes has a signature that verifies with the public key."""
    priv, pub = make_keys(tmp_path)
    ws = pipeline_workspace
    ws.snakemake(config=(f"signing_key={priv}", "images=false"))
    docs = documents(ws.store)
    assert any(d.endswith(".manifest.json") for d in docs) and "index/catalog.json" in docs
    store = node(str(ws.store), pub)
    for rel in docs:
        store.read_bytes(rel)  # verifies
    cat = published.read_catalog(store)
    assert cat["counts"]["tasks"] >= 1
    # pushed elsewhere, every document still verifies (manifests included)
    from minisandbox.node.sync import mirror

    report = mirror(str(ws.store), str(tmp_path / "pushed"))
    assert report.copied
    pushed = node(str(tmp_path / "pushed"), pub)
    nonempty = [d for d in docs if not d.startswith("index/tasks/") or (ws.store / d).stat().st_size]
    assert documents(tmp_path / "pushed") == nonempty  # push skips empty shards (they read as empty)
    for rel in nonempty:
        pushed.read_bytes(rel)


def test_use_signing_key_checks_the_key_before_exporting_it(tmp_path, keys, monkeypatch):
    """What the workflow calls with `signing_key`: empty changes nothing, a bad file fails
    at once naming it, a good one is exported for the steps."""
    from minisandbox.node.signing import use_signing_key

    monkeypatch.setenv(SIGNING_KEY_ENV, "")  # recorded: the key exported below is undone afterwards
    monkeypatch.delenv(SIGNING_KEY_ENV)
    use_signing_key("")
    assert SIGNING_KEY_ENV not in os.environ
    with pytest.raises(SigningKeyError, match="missing.pem"):
        use_signing_key(tmp_path / "missing.pem")
    assert SIGNING_KEY_ENV not in os.environ
    use_signing_key(keys[0])
    assert os.environ[SIGNING_KEY_ENV] == str(keys[0].resolve())


# ------------------------------------------------------------------ freshness (rollback)


def _entry(iid: str) -> str:
    return json.dumps(
        {
            "instance_id": iid,
            "env_key": "env-a-0000000000000000",
            "repo_key": "repo-a-00000000",
            "status": "ready",
            "record": {
                "instance_id": iid,
                "repo": "demo/proj",
                "format": "swesmith",
                "patch": "",
                "fail_to_pass": [],
                "pass_to_pass": [],
            },
        },
        sort_keys=True,
    )


def _publish(url: str, priv: Path, ids: list[str]) -> dict:
    """Publish an index of `ids` with the signing key (publish_index, as the pipeline's
    index step does); returns the catalog as written."""
    from minisandbox.node.signing import Signer

    shards: dict[str, list[str]] = {}
    for iid in ids:
        shards.setdefault(shard_of(iid), []).append(_entry(iid))
    store = Store(url, signer=Signer(priv))
    published.publish_index(
        store, {"schema": 1, "shards": 256, "envs": {}, "repos": {}, "counts": {"tasks": len(ids)}}, shards
    )
    return json.loads((Path(url) / "index" / "catalog.json").read_text())


def _snapshot(root: Path, *rels: str) -> dict[str, bytes]:
    """The bytes of documents and their signatures, to serve them again later (the attack)."""
    return {r: (root / r).read_bytes() for rel in rels for r in (rel, rel + ".sig")}


def _restore(root: Path, saved: dict[str, bytes]) -> None:
    for rel, data in saved.items():
        (root / rel).write_bytes(data)


def test_the_catalog_carries_a_growing_sequence_and_every_shards_digest(tmp_path, keys):
    import hashlib

    url = str(tmp_path / "store")
    first = _publish(url, keys[0], ["demo__a-1"])
    second = _publish(url, keys[0], ["demo__a-1", "demo__a-2"])
    assert second["sequence"] > first["sequence"] > 1_600_000_000_000  # ms since the epoch, or previous + 1
    assert len(second["shards_sha256"]) == 256
    for shard, digest in second["shards_sha256"].items():
        data = (Path(url) / shard_path(shard)).read_bytes()
        assert hashlib.sha256(data).hexdigest() == digest
    from minisandbox.index import next_sequence

    assert next_sequence(10**15, now=1.0) == 10**15 + 1  # a clock behind the store still moves forward
    assert next_sequence(None, now=2.0) == 2000


def test_a_catalog_rolled_back_to_an_older_signed_one_is_refused(tmp_path, keys, _node_state):
    from minisandbox.node.freshness import StaleStoreError

    url, root = str(tmp_path / "store"), tmp_path / "store"
    old = _publish(url, keys[0], ["demo__a-1"])
    every_shard = [shard_path(f"{i:02x}") for i in range(256)]
    saved = _snapshot(root, "index/catalog.json", *every_shard)  # the whole old index, validly signed
    assert published.lookup(node(url, keys[1]), "demo__a-1")
    new = _publish(url, keys[0], ["demo__a-1", "demo__a-2"])
    assert published.lookup(node(url, keys[1]), "demo__a-2")
    _restore(root, saved)  # rolled back: every document still verifies
    for read in (
        lambda s: published.read_catalog(s),
        lambda s: published.lookup(s, "demo__a-1"),
        lambda s: list(published.iter_tasks(s)),
    ):
        with pytest.raises(StaleStoreError) as exc:
            read(node(url, keys[1]))
        msg = str(exc.value)
        assert "\n" not in msg and f"sequence {old['sequence']} is older than {new['sequence']}" in msg
        assert "--accept-older-store" in msg and "MINISANDBOX_ACCEPT_OLDER_STORE=1" in msg
    # without a public key nothing is checked (and nothing is recorded)
    assert published.read_catalog(node(url, None))["sequence"] == old["sequence"]
    # another node (its own state) has never seen the newer one: it accepts the old
    assert published.read_catalog(Store(url, verifier=None))  # no key: no record either
    record = json.loads((_node_state / "store-sequences.json").read_text())
    assert [v["sequence"] for v in record.values()] == [new["sequence"]]


def test_accepting_an_older_store_deliberately(tmp_path, keys, monkeypatch, _node_state):
    url, root = str(tmp_path / "store"), tmp_path / "store"
    old = _publish(url, keys[0], ["demo__a-1"])
    saved = _snapshot(root, "index/catalog.json", *[shard_path(f"{i:02x}") for i in range(256)])
    _publish(url, keys[0], ["demo__a-1", "demo__a-2"])
    published.read_catalog(node(url, keys[1]))
    _restore(root, saved)
    args = ["--store-public-key", str(keys[1]), "tasks", "--store", url]
    refused = _cli(args)
    assert refused.returncode == 1 and refused.stdout == ""
    assert len(refused.stderr.splitlines()) == 1 and "is older than" in refused.stderr, refused.stderr
    accepted = _cli(["--accept-older-store", *args])
    assert accepted.returncode == 0, accepted.stderr
    assert accepted.stdout.split("\t")[0] == "demo__a-1" and "accepting sequence" in accepted.stderr
    # accepted deliberately, it is now the newest this node accepted: no flag needed any more
    again = _cli(args)
    assert again.returncode == 0, again.stderr
    monkeypatch.setenv("MINISANDBOX_ACCEPT_OLDER_STORE", "1")  # the environment variable is the same switch
    assert published.read_catalog(node(url, keys[1]))["sequence"] == old["sequence"]


def test_a_single_shard_rolled_back_or_deleted_is_refused(tmp_path, keys):
    url, root = str(tmp_path / "store"), tmp_path / "store"
    victim = "demo__a-0"
    sibling = next(f"demo__b-{n}" for n in range(10_000) if shard_of(f"demo__b-{n}") == shard_of(victim))
    ids = [victim, *(f"demo__a-{n}" for n in range(1, 20))]
    _publish(url, keys[0], ids)
    rel = shard_path(shard_of(victim))
    saved = _snapshot(root, rel)
    ids.append(sibling)
    _publish(url, keys[0], ids)  # the victim's shard gains a task
    _restore(root, saved)  # the old shard, with its valid signature, under the new catalog
    with pytest.raises(published.StoreDataError) as exc:
        published.lookup(node(url, keys[1]), victim)
    msg = str(exc.value)
    assert "\n" not in msg and rel in msg and "not the one index/catalog.json names" in msg
    other = next(i for i in ids if shard_of(i) != shard_of(victim))
    assert published.lookup(node(url, keys[1]), other)["instance_id"] == other  # the others still work
    # a deleted shard (it would read as empty: its tasks gone) is refused the same way
    for suffix in ("", ".sig"):
        (root / (rel + suffix)).unlink()
    with pytest.raises(published.StoreDataError, match="or it is missing"):
        published.lookup(node(url, keys[1]), victim)
    # without a key the old shard/missing shard reads as before (no signatures, no freshness)
    with pytest.raises(published.UnknownTask):
        published.lookup(node(url, None), victim)


def test_verify_reports_a_shard_that_is_not_the_one_the_catalog_names(tmp_path, keys):
    """`minisandbox verify` (node.sync.verify) checks every shard against the catalog's
    digests too, with or without a key."""
    from minisandbox.node.sync import verify

    url, root = str(tmp_path / "store"), tmp_path / "store"
    _publish(url, keys[0], ["demo__a-1", "demo__a-2"])
    assert [p for p in verify(url).problems if p.what in ("mismatch", "missing")] == []
    rel = shard_path(shard_of("demo__a-1"))
    (root / rel).write_text(_entry("demo__a-1") + "\n" + _entry("demo__a-9") + "\n")
    problems = [(p.what, p.rel) for p in verify(url).problems]
    assert ("mismatch", rel) in problems
    (root / rel).unlink()  # deleted: it would read as empty
    assert ("missing", rel) in [(p.what, p.rel) for p in verify(url).problems]
