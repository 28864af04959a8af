"""Object storage end to end against a real S3 server on loopback (moto_server): the
workflow publishes the bundled set straight to s3://, a node with an empty cache fetches
from there, and a task's tests run in a sandbox over the fetched layers."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from minisandbox.grading import evalscript
from tests.fixtures.s3 import S3

pytestmark = [pytest.mark.slow, pytest.mark.s3, pytest.mark.root]

ROOT = Path(__file__).resolve().parents[2]
TASKS = ROOT / "config" / "bundled" / "tasks.jsonl"
SWEBENCH = ROOT / "config" / "bundled" / "tasks_swebench.jsonl"
CATALOG = ROOT / "config" / "catalog" / "bundled.yaml"


def msb(*args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "minisandbox.cli", *args], capture_output=True, text=True, timeout=timeout
    )


def test_build_publish_to_s3_then_fetch_on_a_clean_node(s3: S3, tmp_path: Path) -> None:
    url = s3.url("stores/bundled")
    run = tmp_path / "run"
    run.mkdir()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "snakemake",
            "--snakefile",
            str(ROOT / "workflow" / "Snakefile"),
            "--directory",
            str(run),
            "--cores",
            "2",
            "--config",
            f"tasks={TASKS},{SWEBENCH}",
            f"catalog={CATALOG}",
            f"store={url}",
            "workdir=work",
            "validate=false",
        ],
        cwd=run,
        capture_output=True,
        text=True,
        timeout=3000,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]

    # everything landed in the bucket, nothing on the local disk but scratch
    assert not (run / "results" / "store").exists()
    catalog = json.loads(s3.fs().cat_file(f"{s3.bucket}/stores/bundled/index/catalog.json"))
    assert catalog["counts"]["tasks_ready"] == catalog["counts"]["tasks"] > 0, catalog["counts"]
    check = msb("verify", url)
    assert check.returncode == 0 and "OK" in check.stdout, check.stdout + check.stderr

    # a task whose PASS_TO_PASS tests live outside the F2P files (those are removed in the start state)
    rec, p2p = next(
        (r, ids)
        for r in map(json.loads, TASKS.read_text().splitlines())
        if (
            ids := [
                t for t in r["PASS_TO_PASS"] if t.split("::")[0] not in set(evalscript.test_files_of(r["FAIL_TO_PASS"]))
            ]
        )
    )
    tid = rec["instance_id"]
    cache = tmp_path / "node-cache"
    first = msb("fetch", "--store", url, "--cache", str(cache), "--json", tid)
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout)[0]["downloaded"] is True

    # wipe the node cache (its layers may be mounted images: evict them the supported way,
    # which unmounts them, then remove what is left): the next fetch must come from S3 again
    wiped = msb("cache", "gc", "--cache", str(cache), "--max-bytes", "0", "--json")
    assert wiped.returncode == 0, wiped.stderr
    shutil.rmtree(cache)
    again = msb("fetch", "--store", url, "--cache", str(cache), "--json", tid)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)[0]["downloaded"] is True
    assert not msb("fetch", "--store", url, "--cache", str(cache), "--json", tid).stdout.count('"downloaded": true')

    # the task's PASS_TO_PASS tests pass in its start state, inside a sandbox (network off)
    tests = " ".join(shlex.quote(t) for t in p2p[:5])
    script = f"source /opt/miniconda3/bin/activate; conda activate testbed; cd /testbed; python -m pytest -q {tests}"
    ran = msb("run", "--store", url, "--cache", str(cache), tid, "--", script)
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
    assert f"{len(p2p[:5])} passed" in ran.stdout


# -- an object store's latency, simulated: tests/fixtures/latency_proxy.py in front of moto ----
def _through(proxy_endpoint: str):
    import s3fs

    return s3fs.S3FileSystem(endpoint_url=proxy_endpoint, key="testing", secret="testing", skip_instance_cache=True)


def test_latency_proxy_delays_every_request_and_caps_bandwidth(s3: S3) -> None:
    """The proxy the fetch bench measures through does what it claims: each request waits
    its delay (a lower bound: load only makes it slower), and a body crosses at the capped
    rate; the requests are counted."""
    import time
    from urllib.parse import urlparse

    from tests.fixtures.latency_proxy import LatencyProxy

    payload = bytes(range(256)) * 2048  # 512 KiB
    s3.fs().pipe_file(f"{s3.bucket}/obj", payload)
    up = urlparse(s3.endpoint)
    with LatencyProxy(up.hostname, up.port, delay=0.1) as proxy:
        fs = _through(proxy.endpoint)
        t = time.perf_counter()
        for _ in range(3):
            assert fs.info(f"{s3.bucket}/obj", refresh=True)["size"] == len(payload)
            fs.invalidate_cache()
        assert time.perf_counter() - t >= 3 * 0.1 and proxy.requests >= 3
    with LatencyProxy(up.hostname, up.port, delay=0.0, mbit=8) as proxy:  # 1 MB/s
        fs = _through(proxy.endpoint)
        t = time.perf_counter()
        assert fs.cat_file(f"{s3.bucket}/obj") == payload
        assert time.perf_counter() - t >= 0.9 * len(payload) / 1e6 and proxy.down.bytes >= len(payload)


def test_packed_image_is_published_and_fetched_in_few_requests_through_latency(s3: S3, tmp_path: Path) -> None:
    """Publishing and a cold fetch of a chunked image through the proxy make a handful of
    requests, not one per chunk (the layout that makes an object store's latency bearable:
    docs/s3.md, "Latency"); the image arrives whole and checked."""
    import random
    from urllib.parse import urlparse

    from minisandbox.fsutil import file_digest
    from minisandbox.node.cache import Artifact, Cache
    from minisandbox.node.iobudget import IOBudget
    from minisandbox.node.store import Store
    from minisandbox.pipeline.chunking import write_chunk_list
    from minisandbox.pipeline.pack import pack_image
    from minisandbox.pipeline.steps import chunks_entry, publish_image
    from tests.fixtures.latency_proxy import LatencyProxy

    tree = tmp_path / "tree"
    for i in range(40):
        (tree / "lib" / f"m{i}.bin").parent.mkdir(parents=True, exist_ok=True)
        (tree / "lib" / f"m{i}.bin").write_bytes(random.Random(i).randbytes(100_000))
    img = tmp_path / "env-lat-0000000000000000.squashfs"
    pack_image(tree, img)
    _, cutting = write_chunk_list(img, "env-lat-0000000000000000")
    sha, size = file_digest(img)
    image = {
        "format": "squashfs",
        "artifact": img.name,
        "sha256": sha,
        "size": size,
        "chunks": chunks_entry(img, "env-lat-0000000000000000"),
        "whole": False,
    }
    up = urlparse(s3.endpoint)
    with LatencyProxy(up.hostname, up.port, delay=0.002) as proxy:
        store = Store(s3.url("lat"), endpoint_url=proxy.endpoint)
        publish_image(store, "env", "env-lat-0000000000000000", image, img, False)
        published = proxy.requests
        manifest = {"kind": "env", "key": "env-lat-0000000000000000", "image": image}
        cache = Cache(tmp_path / "cache", budget=IOBudget(2, tmp_path / "cache" / "budget"))
        before = proxy.requests
        path, made = cache.fetch_archive(store, Artifact.image_from_manifest(store, manifest))
        fetched = proxy.requests - before
    assert made and file_digest(path) == (sha, size)
    n = len(cutting.chunks)
    assert n > 40 and published <= 10 and fetched <= 1 + -(-size // (4 << 20)) + 2, (n, published, fetched)
