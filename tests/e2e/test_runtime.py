"""Node runtime end to end: real local stores (and S3 via moto_server), several processes,
a process killed mid-unpack, the fetch/cache CLI and its errors."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from minisandbox.node.cache import Cache
from minisandbox.node.iobudget import IOBudget
from minisandbox.node.runtime import StoreIndexMissing, TaskNotReady, prepare
from minisandbox.paths import REPO_PATH, VENV_PATH
from tests.fixtures.runtime import build_store

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def run_cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    full = {**os.environ, "PYTHONPATH": str(ROOT / "src"), **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "minisandbox.cli", *args], capture_output=True, text=True, env=full, timeout=120
    )


def test_prepare_gives_layers_interpreter_record_and_lease(published_store: dict, tmp_path: Path) -> None:
    cache = Cache(tmp_path / "cache", budget=IOBudget(2, tmp_path / "cache" / "budget"))
    task = published_store["tasks"][1]
    with prepare(task["instance_id"], published_store["url"], cache=cache) as p:
        assert set(p.layers) == {REPO_PATH, VENV_PATH}
        assert (p.layers[REPO_PATH] / "src" / "mod.py").is_file()
        assert (p.layers[VENV_PATH] / "pyvenv.cfg").is_file()
        assert p.interpreter == {"version": "3.11.9", "prefix": "/usr"}
        assert p.record["instance_id"] == task["instance_id"] and p.task["env_key"] == task["env_key"]
        assert p.env_manifest["key"] == task["env_key"] and p.repo_manifest["key"] == task["repo_key"]
        assert p.downloaded
        digests = [r.digest for r in p.results]
        assert all(cache.live_leases(d) for d in digests)
        assert cache.gc(max_bytes=0).removed == []  # leased: GC keeps them
    assert not any(cache.live_leases(d) for d in digests)  # released on exit
    warm = prepare(task["instance_id"], published_store["url"], cache=cache)
    assert not warm.downloaded and warm.layers == p.layers
    warm.release()


def test_unknown_task_failed_task_and_missing_store(published_store: dict, tmp_path: Path) -> None:
    cache = Cache(tmp_path / "cache")
    with pytest.raises(KeyError, match="unknown task id 'nope__nope.1'"):
        prepare("nope__nope.1", published_store["url"], cache=cache)
    with pytest.raises(TaskNotReady, match=r"demo__proj.broken is not ready.*env-failed.*logs/env/env-broken"):
        prepare("demo__proj.broken", published_store["url"], cache=cache)
    with pytest.raises(StoreIndexMissing, match="no index at .*--store"):
        prepare("demo__proj.0000", tmp_path / "no-store", cache=cache)


FETCHER = textwrap.dedent("""
    import json, os, sys, time
    from pathlib import Path
    from minisandbox.node.cache import Cache
    from minisandbox.node.iobudget import IOBudget
    from minisandbox.node.runtime import prepare
    from minisandbox.node.store import Store

    store_url, cache_dir, task, go, counter = sys.argv[1:6]

    class CountingStore(Store):
        def open(self, rel, mode="rb", **kw):
            with open(counter, "a") as f:  # O_APPEND: one line per transfer, across processes
                f.write(rel + "\\n")
            return super().open(rel, mode, **kw)

    open(f"{go}.ready.{os.getpid()}", "w").close()  # imported: on the start line
    while not os.path.exists(go):
        time.sleep(0.002)
    p = prepare(task, CountingStore(store_url), cache=Cache(Path(cache_dir), IOBudget(2, Path(cache_dir) / "budget")))
    print(json.dumps({"downloaded": [r.downloaded for r in p.results],
                      "layers": {k: str(v) for k, v in p.layers.items()}}))
""")


def test_many_processes_same_artifact_download_once(tmp_path: Path) -> None:
    info = build_store(tmp_path / "store", tmp_path / "work", n_envs=1, n_tasks=1, payload=8 << 20)
    task = info["tasks"][0]["instance_id"]
    go, counter, cache_dir = tmp_path / "go", tmp_path / "opens", tmp_path / "cache"
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}:{ROOT}"}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", FETCHER, info["url"], str(cache_dir), task, str(go), str(counter)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for _ in range(6)
    ]
    deadline = time.monotonic() + 120
    while len(list(tmp_path.glob("go.ready.*"))) < len(procs) and time.monotonic() < deadline:
        assert all(p.poll() is None for p in procs), "a fetcher exited before the start"
        time.sleep(0.01)
    go.touch()  # all 6 imported and spinning on the start line
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        outs.append(json.loads(out))
    transfers = counter.read_text().splitlines()
    assert sorted(transfers) == sorted(
        [f"artifacts/env/{info['envs'][0]['artifact']}", f"artifacts/repo/{info['tasks'][0]['repo_key']}.tar.zst"]
    )
    assert sum(o["downloaded"][0] for o in outs) == 1 and sum(o["downloaded"][1] for o in outs) == 1
    assert len({json.dumps(o["layers"], sort_keys=True) for o in outs}) == 1
    blob = Path(outs[0]["layers"][VENV_PATH]) / "lib" / "python3.11" / "site-packages" / "pkg0" / "blob.bin"
    assert blob.stat().st_size == 8 << 20
    assert len(Cache(cache_dir).live_leases(info["envs"][0]["sha256"])) == 0  # all 6 processes exited


KILLED = textwrap.dedent("""
    import os, sys, time
    from pathlib import Path
    import minisandbox.node.restore as restore
    from minisandbox.node.cache import Cache
    from minisandbox.node.iobudget import IOBudget
    from minisandbox.node.runtime import prepare

    store_url, cache_dir, task, mid = sys.argv[1:5]
    real = restore.checked_stream

    def stalling(chunks, archive):  # feed tar some members, then hang until killed
        sent = 0
        for piece in real(chunks, archive):
            yield piece
            sent += len(piece)
            if sent > (1 << 20) and "/env/" in archive:
                Path(mid).touch()
                time.sleep(3600)

    restore.checked_stream = stalling
    prepare(task, store_url, cache=Cache(Path(cache_dir), IOBudget(2, Path(cache_dir) / "budget")))
""")


def test_process_killed_during_unpack_then_retry_succeeds(tmp_path: Path) -> None:
    info = build_store(tmp_path / "store", tmp_path / "work", n_envs=1, n_tasks=1, payload=4 << 20)
    task = info["tasks"][0]["instance_id"]
    cache_dir, mid = tmp_path / "cache", tmp_path / "mid"
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}:{ROOT}"}
    proc = subprocess.Popen(
        [sys.executable, "-c", KILLED, info["url"], str(cache_dir), task, str(mid)],
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.time() + 60
    while not mid.exists():
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        assert time.time() < deadline
        time.sleep(0.01)
    env_digest = info["envs"][0]["sha256"]
    layers = cache_dir / "layers"
    assert list(layers.glob(f".tmp-{env_digest}-*"))  # unpack in progress
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not (layers / env_digest).exists()  # a killed unpack never looks complete
    cache = Cache(cache_dir, budget=IOBudget(2, cache_dir / "budget"))
    assert env_digest not in [e.digest for e in cache.entries() if e.layer_bytes]
    with prepare(task, info["url"], cache=cache) as p:
        assert p.results[1].downloaded and p.results[1].digest == env_digest
        blob = p.layers[VENV_PATH] / "lib" / "python3.11" / "site-packages" / "pkg0" / "blob.bin"
        assert blob.stat().st_size == 4 << 20
    assert not list(layers.glob(".tmp-*"))  # the dead attempt's temp dir is gone


def test_cli_fetch_ls_gc(published_store: dict, tmp_path: Path) -> None:
    env = {"MINISANDBOX_CACHE": str(tmp_path / "cache")}
    ids = [t["instance_id"] for t in published_store["tasks"] if t["status"] == "ready"]
    r = run_cli("fetch", "--store", published_store["url"], "--json", *ids, env=env)
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)
    assert [row["instance_id"] for row in rows] == ids and all(row["downloaded"] for row in rows[:1])
    assert all(Path(p).is_dir() for row in rows for p in row["layers"].values())
    r = run_cli("fetch", "--store", published_store["url"], ids[0], env=env)
    assert r.returncode == 0 and "\tcached\t" in r.stdout
    r = run_cli("cache", "ls", env=env)
    assert r.returncode == 0 and "5 entries" in r.stdout and "leases=0" in r.stdout  # 3 repos + 2 envs
    r = run_cli("cache", "gc", "--max-bytes", "0", env=env)
    assert r.returncode == 0 and "5 evicted" in r.stdout, r.stdout
    assert not [p for p in (tmp_path / "cache" / "layers").iterdir()]


def test_cli_errors_are_one_line(published_store: dict, tmp_path: Path) -> None:
    env = {"MINISANDBOX_CACHE": str(tmp_path / "cache")}
    r = run_cli("fetch", "--store", published_store["url"], "no__such.task", env=env)
    assert r.returncode == 1 and "unknown task id 'no__such.task'" in r.stderr
    r = run_cli("fetch", "--store", str(tmp_path / "missing"), "x", env=env)
    assert r.returncode == 1 and "no index at" in r.stderr and "--store" in r.stderr
    pytest.importorskip("s3fs")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    r = run_cli(
        "fetch",
        "--store",
        "s3://nobucket/store",
        "x",
        env={
            **env,
            "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}",
            "AWS_ACCESS_KEY_ID": "x",
            "AWS_SECRET_ACCESS_KEY": "x",
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_MAX_ATTEMPTS": "1",
            "MINISANDBOX_STORE_ATTEMPTS": "2",
        },
    )
    assert r.returncode == 1
    # the store, the endpoint it could not reach and the setting to check, in one line
    assert "store s3://nobucket/store" in r.stderr
    assert f"cannot reach the S3 endpoint http://127.0.0.1:{port}" in r.stderr
    assert "AWS_ENDPOINT_URL" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


@pytest.mark.s3
def test_prepare_from_s3_store(store_s3: str, tmp_path: Path) -> None:
    info = build_store("s3://minisandbox-test/store", tmp_path / "work", n_envs=1, n_tasks=2)
    cache = Cache(tmp_path / "cache", budget=IOBudget(2, tmp_path / "cache" / "budget"))
    with prepare(info["tasks"][0]["instance_id"], "s3://minisandbox-test/store", cache=cache) as p:
        assert p.downloaded and (p.layers[REPO_PATH] / "README.md").read_text() == "# demo0\n"
    with prepare(info["tasks"][1]["instance_id"], "s3://minisandbox-test/store", cache=cache) as p:
        assert [r.downloaded for r in p.results] == [True, False]  # shared env already on the node


def test_fetch_threads_share_downloads(tmp_path: Path) -> None:
    from minisandbox.node.runtime import fetch

    info = build_store(tmp_path / "store", tmp_path / "work", n_envs=1, n_tasks=2, payload=2 << 20)
    cache = Cache(tmp_path / "cache", budget=IOBudget(2, tmp_path / "cache" / "budget"))
    a, b = info["tasks"][0]["instance_id"], info["tasks"][1]["instance_id"]
    results = fetch([a, b, a, b, a, b, "missing__task.1"], info["url"], cache=cache, workers=7)
    assert isinstance(results[-1], KeyError)
    done = results[:-1]
    assert all(not isinstance(r, BaseException) for r in done)
    downloads = sum(r.downloaded for p in done for r in p.results)
    assert downloads == 3  # repo a, repo b, the shared env: once each
    assert not any(cache.live_leases(r.digest) for p in done for r in p.results)  # fetch releases


def test_index_ttl_reuses_reads_only_when_asked(
    published_store: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = Cache(tmp_path / "cache", budget=IOBudget(2, tmp_path / "cache" / "budget"))
    task = published_store["tasks"][0]
    manifest = Path(published_store["url"]) / "artifacts" / "env" / f"{task['env_key']}.manifest.json"
    monkeypatch.setenv("MINISANDBOX_INDEX_TTL", "600")
    prepare(task["instance_id"], published_store["url"], cache=cache).release()
    saved = manifest.read_text()
    manifest.unlink()
    prepare(task["instance_id"], published_store["url"], cache=cache).release()  # served from memory
    monkeypatch.setenv("MINISANDBOX_INDEX_TTL", "0")
    with pytest.raises(FileNotFoundError, match="env manifest .* is missing although the index lists it"):
        prepare(task["instance_id"], published_store["url"], cache=cache)
    manifest.write_text(saved)
