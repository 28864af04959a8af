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
    return subprocess.run([sys.executable, "-m", "minisandbox.cli", *args], capture_output=True, text=True,
                          timeout=timeout)


def test_build_publish_to_s3_then_fetch_on_a_clean_node(s3: S3, tmp_path: Path) -> None:
    url = s3.url("stores/bundled")
    run = tmp_path / "run"
    run.mkdir()
    proc = subprocess.run(
        [sys.executable, "-m", "snakemake", "--snakefile", str(ROOT / "workflow" / "Snakefile"), "--directory", str(run),
         "--cores", "2", "--config", f"tasks={TASKS},{SWEBENCH}", f"catalog={CATALOG}", f"store={url}",
         "workdir=work", "validate=false"],
        cwd=run, capture_output=True, text=True, timeout=3000)
    assert proc.returncode == 0, (proc.stdout[-3000:] + proc.stderr[-5000:])

    # everything landed in the bucket, nothing on the local disk but scratch
    assert not (run / "results" / "store").exists()
    catalog = json.loads(s3.fs().cat_file(f"{s3.bucket}/stores/bundled/index/catalog.json"))
    assert catalog["counts"]["tasks_ready"] == catalog["counts"]["tasks"] > 0, catalog["counts"]
    check = msb("verify", url)
    assert check.returncode == 0 and "OK" in check.stdout, check.stdout + check.stderr

    # a task whose PASS_TO_PASS tests live outside the F2P files (those are removed in the start state)
    rec, p2p = next((r, ids) for r in map(json.loads, TASKS.read_text().splitlines())
                    if (ids := [t for t in r["PASS_TO_PASS"] if t.split("::")[0] not in
                                set(evalscript.test_files_of(r["FAIL_TO_PASS"]))]))
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
