"""Node commands as a user and a script see them: `tasks`, `fetch` (progress on stderr,
JSON alone on stdout), `cache ls|gc` on a cache that does not exist."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from minisandbox.cli import main


def _cli(argv: list[str], **env: str) -> subprocess.CompletedProcess:
    """The real command in a subprocess, stderr a pipe (not a terminal), as in CI or a job."""
    return subprocess.run(
        [sys.executable, "-m", "minisandbox.cli", *argv],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **env},
    )


# ------------------------------------------------------------------------------ tasks
def test_tasks_lists_every_task_with_status_and_environment(published_store, capsys) -> None:
    assert main(["tasks", "--store", published_store["url"]]) == 0
    out, err = capsys.readouterr()
    rows = [line.split("\t") for line in out.splitlines()]
    want = {t["instance_id"]: t for t in published_store["tasks"]}
    assert {r[0] for r in rows} == set(want)
    for iid, status, env_key, spec_name, validation in rows:
        assert (status, env_key, spec_name) == (want[iid]["status"], want[iid]["env_key"], want[iid]["spec_name"])
        assert validation == "-"
    assert err == f"4 of 4 tasks in {published_store['store'].url} (env-failed 1, ready 3)\n"


def test_tasks_json_and_status_filter(published_store, capsys) -> None:
    assert main(["tasks", "--store", published_store["url"], "--status", "env-failed", "--json"]) == 0
    out, _ = capsys.readouterr()
    rows = json.loads(out)  # stdout is the JSON document alone
    assert [(r["instance_id"], r["status"], r["env_key"]) for r in rows] == [
        ("demo__proj.broken", "env-failed", "env-broken-ffffffffffffffff")
    ]
    assert main(["tasks", "--store", published_store["url"], "--status", "ready", "--json"]) == 0
    assert sorted(r["instance_id"] for r in json.loads(capsys.readouterr().out)) == [
        "demo__proj.0000",
        "demo__proj.0001",
        "demo__proj.0002",
    ]


def test_tasks_reads_one_shard_at_a_time(published_store, monkeypatch, capsys) -> None:
    """The index is streamed: at most one shard's text is held at a time."""
    from minisandbox.node.store import Store

    reads: list[str] = []
    real = Store.read_bytes  # read_text goes through it too

    def spy(self, rel: str) -> bytes:
        reads.append(rel)
        return real(self, rel)

    monkeypatch.setattr(Store, "read_bytes", spy)
    assert main(["tasks", "--store", published_store["url"], "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)) == 4
    shards = [r for r in reads if r.startswith("index/tasks/")]
    assert len(shards) == len(set(shards)) == 4  # each non-empty shard once, nothing else re-read


def test_tasks_on_a_store_without_index_is_one_line(tmp_path: Path) -> None:
    res = _cli(["tasks", "--store", str(tmp_path)])
    assert res.returncode == 1 and res.stdout == ""
    assert res.stderr.count("\n") == 1 and "no index" in res.stderr


def test_unknown_task_id_points_to_tasks(published_store) -> None:
    res = _cli(
        [
            "fetch",
            "--store",
            published_store["url"],
            "--cache",
            str(Path(published_store["url"]).parent / "c"),
            "no_such__task.1",
        ]
    )
    assert res.returncode == 1
    assert f"`minisandbox tasks --store {published_store['store'].url}`" in res.stderr


# ------------------------------------------------------------------------------ fetch
def test_fetch_progress_lines_on_a_pipe_and_json_alone_on_stdout(published_store, tmp_path: Path) -> None:
    ids = [t["instance_id"] for t in published_store["tasks"] if t["status"] == "ready"]
    res = _cli(
        ["fetch", "--store", published_store["url"], "--cache", str(tmp_path / "cache"), "--json", *ids],
        MINISANDBOX_PROGRESS_INTERVAL="0",
    )
    assert res.returncode == 0, res.stderr
    rows = json.loads(res.stdout)
    assert [r["instance_id"] for r in rows] == ids and all(r["downloaded"] for r in rows)
    lines = [line for line in res.stderr.splitlines() if line.startswith("fetch: ")]
    assert lines, res.stderr
    total = sum(m["size"] for m in published_store["envs"]) + sum(
        json.loads((Path(published_store["url"]) / f"artifacts/repo/{t['repo_key']}.manifest.json").read_text())["size"]
        for t in published_store["tasks"]
        if t["status"] == "ready"
    )
    assert "(100%)" in lines[-1] and "B/s" in lines[-1]
    assert "\r" not in res.stderr  # plain lines, no bar redraws in a log
    # the bytes counted are exactly the archives downloaded
    from tqdm import tqdm

    assert lines[-1].startswith(f"fetch: {tqdm.format_sizeof(total, divisor=1024)}/")


def test_fetch_again_downloads_nothing_and_prints_no_progress(published_store, tmp_path: Path) -> None:
    ids = [t["instance_id"] for t in published_store["tasks"] if t["status"] == "ready"]
    args = ["fetch", "--store", published_store["url"], "--cache", str(tmp_path / "cache"), *ids]
    assert _cli(args, MINISANDBOX_PROGRESS_INTERVAL="0").returncode == 0
    again = _cli(args, MINISANDBOX_PROGRESS_INTERVAL="0")
    assert again.returncode == 0 and "fetch: " not in again.stderr
    assert all("\tcached\t" in line for line in again.stdout.splitlines())


# ------------------------------------------------------------------------------ cache
def test_cache_gc_json_reports_what_it_evicted(published_store, tmp_path: Path) -> None:
    ready = [t["instance_id"] for t in published_store["tasks"] if t["status"] == "ready"]
    cache = str(tmp_path / "cache")
    assert _cli(["fetch", "--store", published_store["url"], "--cache", cache, *ready]).returncode == 0
    listed = json.loads(_cli(["cache", "ls", "--cache", cache, "--json"]).stdout)
    res = _cli(["cache", "gc", "--cache", cache, "--max-bytes", "0", "--json"])
    assert res.returncode == 0, res.stderr
    report = json.loads(res.stdout)
    assert {e["digest"] for e in report["removed"]} == {e["digest"] for e in listed}
    assert report["freed"] > 0 and report["total_after"] == 0
    assert json.loads(_cli(["cache", "ls", "--cache", cache, "--json"]).stdout) == []


@pytest.mark.parametrize("argv", [["cache", "ls"], ["cache", "ls", "--json"], ["cache", "gc"]])
def test_cache_commands_never_create_a_missing_cache(tmp_path: Path, argv: list[str]) -> None:
    missing = tmp_path / "nonexistent"
    res = _cli([*argv, "--cache", str(missing)])
    assert res.returncode == 1 and res.stdout == ""
    assert res.stderr == (
        f"minisandbox cache: error: no cache at {missing}: the directory does not exist; "
        f"check --cache (default: $MINISANDBOX_CACHE or ~/.cache/minisandbox)\n"
    )
    assert not missing.exists()


def test_cache_ls_without_any_cache_yet(tmp_path: Path) -> None:
    res = _cli(["cache", "ls", "--json"], MINISANDBOX_CACHE=str(tmp_path / "fresh"))
    assert res.returncode == 0 and json.loads(res.stdout) == []
    assert not (tmp_path / "fresh").exists()
