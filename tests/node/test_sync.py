"""push / pull / verify: mirrors between local directories and a real S3 (moto_server),
digest checks, resuming after an interruption, and verify's report of damaged stores."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from minisandbox.cli import main
from minisandbox.index import CATALOG
from minisandbox.manifest import artifact_path, manifest_path
from minisandbox.node.published import lookup
from minisandbox.node.store import Store
from minisandbox.node.sync import SyncError, artifacts_of, mirror, remove_stale_tmp, verify
from tests.fixtures.s3 import S3, publish_synthetic_store

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def src(tmp_path: Path) -> dict:
    return publish_synthetic_store(str(tmp_path / "src"), tmp_path / "work")


def all_keys(info: dict) -> set[str]:
    return set(info["envs"]) | set(info["repos"])


def test_local_mirror_copies_everything_then_nothing(src: dict, tmp_path: Path) -> None:
    dst = str(tmp_path / "dst")
    first = mirror(src["store"], dst)
    assert set(first.copied) == all_keys(src) and first.skipped == []
    assert first.bytes == sum(m["size"] for m in [*src["envs"].values(), *src["repos"].values()])
    report = verify(dst)
    assert report.ok, report.problems
    assert report.artifacts == len(all_keys(src)) and report.tasks == len(src["tasks"])
    # failed env's log travels too; the index is byte-identical
    assert Store(dst).read_text("logs/env/env-broken-ffffffffffffffff.log").startswith("ERROR")
    assert Store(dst).read_bytes(CATALOG) == src["store"].read_bytes(CATALOG)
    second = mirror(src["store"], dst)
    assert second.copied == [] and set(second.skipped) == all_keys(src) and second.bytes == 0


@pytest.mark.s3
def test_push_to_s3_and_pull_back(src: dict, s3: S3, tmp_path: Path, capsys) -> None:
    url = s3.url("stores/v1")
    assert main(["push", src["store"].url, url]) == 0
    out = capsys.readouterr().out
    assert f"{len(all_keys(src))} artifacts copied, 0 already there" in out
    # what landed in the bucket: every archive with the manifest's exact size
    fs = s3.fs()
    for key, m in src["envs"].items():
        assert fs.size(f"{s3.bucket}/stores/v1/{artifact_path('env', key, 'tar.zst')}") == m["size"]
    assert not [p for p in fs.find(f"{s3.bucket}/stores/v1") if ".tmp-" in p]
    assert main(["verify", url]) == 0
    assert "OK" in capsys.readouterr().out

    local = str(tmp_path / "node")
    assert main(["pull", url, local]) == 0
    for kind, metas in (("env", src["envs"]), ("repo", src["repos"])):
        for key in metas:
            rel = artifact_path(kind, key, "tar.zst")
            assert Path(local, rel).read_bytes() == Path(src["store"].path(rel)).read_bytes()
    tid = src["tasks"][0]["instance_id"]
    assert lookup(Store(local), tid)["repo_key"] == src["tasks"][0]["repo_key"]
    assert verify(local).ok


class Interrupt(Exception):
    pass


@pytest.mark.s3
def test_interrupted_push_resumes_with_only_the_missing_artifacts(src: dict, s3: S3) -> None:
    url = s3.url()
    done: list[str] = []

    def stop_after_two(key: str, status: str) -> None:
        done.append(key)
        if len(done) == 2:
            raise Interrupt

    with pytest.raises(Interrupt):
        mirror(src["store"], url, workers=1, on_artifact=stop_after_two)
    dst = Store(url)
    assert not dst.exists(CATALOG), "the index must only appear when the mirror is complete"
    resumed = mirror(src["store"], url, workers=2)
    assert sorted(resumed.skipped) == sorted(done)
    assert set(resumed.copied) == all_keys(src) - set(done)
    assert verify(url).ok


@pytest.mark.s3
def test_killed_push_process_resumes(s3: S3, tmp_path: Path) -> None:
    """A real `minisandbox push` process killed with SIGKILL mid-transfer, then rerun."""
    info = publish_synthetic_store(
        str(tmp_path / "src"), tmp_path / "work", n_envs=4, n_repos=4, payload=3_000_000, failed_env=False
    )
    url = s3.url()
    env = {**os.environ, **s3.env(), "PYTHONPATH": str(ROOT / "src")}
    cmd = [sys.executable, "-m", "minisandbox.cli", "push", info["store"].url, url, "--workers", "1", "--json"]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    fs = s3.fs()
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None:
        fs.invalidate_cache()
        if fs.exists(f"{s3.bucket}/store/artifacts") and any(
            p.endswith(".manifest.json") for p in fs.find(f"{s3.bucket}/store/artifacts")
        ):
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert len(report["skipped"]) >= 1, "the first push had placed at least one artifact"
    assert sorted(report["copied"] + report["skipped"]) == sorted(all_keys(info))
    assert verify(url).ok
    # whatever temp objects the kill left in the bucket: gone once declared stale (S3 listing dates)
    remove_stale_tmp(Store(url), older_than=0)
    fs.invalidate_cache()
    assert not [p for p in fs.find(f"{s3.bucket}/store") if ".tmp-" in p]


def test_verify_reports_missing_and_corrupt_artifacts(src: dict, capsys) -> None:
    store = src["store"]
    env_key = sorted(src["envs"])[0]
    repo_key = sorted(src["repos"])[1]
    corrupt = Path(store.path(artifact_path("env", env_key, "tar.zst")))
    data = bytearray(corrupt.read_bytes())
    data[len(data) // 2] ^= 0xFF  # same size, different bytes: only a digest check sees it
    corrupt.write_bytes(bytes(data))
    Path(store.path(artifact_path("repo", repo_key, "tar.zst"))).unlink()

    assert main(["verify", store.url]) == 1
    out = capsys.readouterr().out.splitlines()
    assert any(line.startswith("corrupt:") and env_key in line and "sha256" in line for line in out), out
    assert any(line.startswith("missing:") and repo_key in line for line in out), out
    assert out[-1].endswith("FAILED: 1 missing, 1 corrupt, 0 other")

    # --quick (sizes only) sees the missing archive but not the same-size corruption
    assert main(["verify", "--quick", "--json", store.url]) == 1
    problems = json.loads(capsys.readouterr().out)["problems"]
    assert [(p["what"], repo_key in p["rel"]) for p in problems] == [("missing", True)]


@pytest.mark.s3
def test_verify_on_s3_finds_a_corrupt_object(src: dict, s3: S3, capsys) -> None:
    url = s3.url()
    mirror(src["store"], url)
    key = sorted(src["repos"])[0]
    rel = f"{s3.bucket}/store/{artifact_path('repo', key, 'tar.zst')}"
    fs = s3.fs()
    blob = bytearray(fs.cat_file(rel))
    blob[10] ^= 0x01
    fs.pipe_file(rel, bytes(blob))
    fs.rm_file(f"{s3.bucket}/store/{manifest_path('env', sorted(src['envs'])[0])}")
    assert main(["verify", url]) == 1
    out = capsys.readouterr().out
    assert f"corrupt: {url}/{artifact_path('repo', key, 'tar.zst')}" in out
    assert f"missing: {url}/{manifest_path('env', sorted(src['envs'])[0])}" in out


def test_mirror_refuses_a_damaged_source(src: dict, tmp_path: Path) -> None:
    key = sorted(src["repos"])[0]
    path = Path(src["store"].path(artifact_path("repo", key, "tar.zst")))
    path.write_bytes(path.read_bytes()[:-100] + b"x" * 100)
    dst = tmp_path / "dst"
    with pytest.raises(SyncError, match=rf"{key}.*does not match its manifest.*re-publish"):
        mirror(src["store"], str(dst), workers=1)
    assert not (dst / artifact_path("repo", key, "tar.zst")).exists()
    assert not (dst / CATALOG).exists()


def test_verify_finds_a_missing_shard_and_a_bad_line(src: dict) -> None:
    store = src["store"]
    shards = sorted(p for p in Path(store.path("index/tasks")).iterdir() if p.stat().st_size)
    shards[0].unlink()
    shards[1].write_text(shards[1].read_text() + "{not json\n")
    report = verify(store)
    whats = sorted((p.what, Path(p.rel).name) for p in report.problems)
    assert whats == sorted(
        [
            ("missing", shards[0].name),
            ("corrupt", shards[1].name),
            ("mismatch", shards[1].name),  # not the bytes the catalog's digest names
            ("inconsistent", "catalog.json"),
        ]
    )


def test_push_of_a_store_without_index_says_what_is_wrong(tmp_path: Path, capsys) -> None:
    (tmp_path / "empty").mkdir()
    assert main(["push", str(tmp_path / "empty"), str(tmp_path / "dst")]) == 1
    err = capsys.readouterr().err
    assert "index/catalog.json not found" in err and "not a published store" in err


def test_artifacts_of_skips_failed_keys(src: dict) -> None:
    catalog = json.loads(src["store"].read_text(CATALOG))
    keys = {a.key for a in artifacts_of(catalog)}
    assert keys == all_keys(src) and "env-broken-ffffffffffffffff" not in keys


@pytest.mark.s3
def test_endpoint_and_credentials_from_aws_config_files(src: dict, s3: S3, tmp_path: Path, monkeypatch) -> None:
    """No AWS_* endpoint/credential variables: the standard config files are enough."""
    config, creds = tmp_path / "aws-config", tmp_path / "aws-credentials"
    config.write_text(f"[default]\nregion = us-east-1\nendpoint_url = {s3.endpoint}\n")
    creds.write_text("[default]\naws_access_key_id = testing\naws_secret_access_key = testing\n")
    for k in ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(creds))
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("AWS_") or k in ("AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE")
    }
    env["PYTHONPATH"] = str(ROOT / "src")
    url = s3.url("from-config")
    out = subprocess.run(
        [sys.executable, "-m", "minisandbox.cli", "push", src["store"].url, url],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    assert s3.fs().exists(f"{s3.bucket}/from-config/{CATALOG}")


@pytest.mark.skipif(not shutil.which("mksquashfs"), reason="mksquashfs not installed (apt-get install squashfs-tools)")
def test_images_travel_with_their_archives_and_are_verified(tmp_path: Path) -> None:
    info = publish_synthetic_store(
        str(tmp_path / "src"), tmp_path / "work", n_envs=2, n_repos=1, failed_env=False, images=True
    )
    dst = tmp_path / "dst"
    report = mirror(info["store"], str(dst))
    for m in info["envs"].values():
        img = dst / "artifacts" / "env" / m["image"]["artifact"]
        assert img.read_bytes() == Path(info["store"].path(f"artifacts/env/{m['image']['artifact']}")).read_bytes()
    assert report.bytes == sum(
        m["size"] + m.get("image", {}).get("size", 0) for m in [*info["envs"].values(), *info["repos"].values()]
    )
    # an image lost at the destination is named by verify and brought back by the next pull
    key, m = sorted(info["envs"].items())[0]
    (dst / "artifacts" / "env" / m["image"]["artifact"]).unlink()
    problems = verify(str(dst)).problems
    assert [(p.what, Path(p.rel).name) for p in problems] == [("missing", m["image"]["artifact"])]
    again = mirror(info["store"], str(dst))
    assert again.copied == [key] and verify(str(dst)).ok


def test_complete_mirror_removes_stale_temp_objects_only(src: dict, tmp_path: Path) -> None:
    """What a killed writer leaves (`*.tmp-<uuid>`) is removed once old; fresh ones may be
    uploads in flight by another writer and stay."""
    dst = tmp_path / "dst"
    mirror(src["store"], str(dst))
    stale = dst / "artifacts" / "env" / "env-demo0-0000000000000000.tar.zst.tmp-0123abcd"
    fresh = dst / "artifacts" / "repo" / "repo-x.tar.zst.tmp-4567ef01"
    for f in (stale, fresh):
        f.write_bytes(b"partial upload")
    old = time.time() - 7 * 3600
    os.utime(stale, (old, old))
    report = mirror(src["store"], str(dst))
    assert report.stale_tmp_removed == 1 and not stale.exists() and fresh.exists()


# ------------------------------------------------------------------ progress
def _progress_lines(err: str, what: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith(f"{what}: ")]


def test_push_and_verify_report_progress_on_a_pipe_json_alone_on_stdout(
    src: dict, tmp_path: Path, monkeypatch, capsys
) -> None:
    """Not a terminal (capsys): plain lines with bytes done/total, rate and ETA; stdout is
    the JSON report alone."""
    monkeypatch.setenv("MINISANDBOX_PROGRESS_INTERVAL", "0")
    total = sum(m["size"] for m in [*src["envs"].values(), *src["repos"].values()])
    dst = str(tmp_path / "dst")
    assert main(["push", "--json", src["store"].url, dst]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["bytes"] == total
    lines = _progress_lines(err, "push")
    assert lines and "(100%)" in lines[-1] and "B/s" in lines[-1]
    from tqdm import tqdm

    assert lines[-1].startswith(f"push: {tqdm.format_sizeof(total, divisor=1024)}/")

    assert main(["verify", "--json", dst]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["ok"] is True
    assert _progress_lines(err, "verify")[-1].startswith(f"verify: {tqdm.format_sizeof(total, divisor=1024)}/")
    assert main(["pull", dst, str(tmp_path / "again")]) == 0
    assert "(100%)" in _progress_lines(capsys.readouterr().err, "pull")[-1]
    # nothing left to copy: no progress at all
    assert main(["pull", dst, str(tmp_path / "again")]) == 0
    assert _progress_lines(capsys.readouterr().err, "pull") == []


@pytest.mark.s3
def test_pull_from_s3_counts_downloaded_bytes(src: dict, s3: S3, tmp_path: Path, monkeypatch, capsys) -> None:
    """From object storage the bytes are counted as they arrive (fsspec callbacks)."""
    url = s3.url("stores/progress")
    assert main(["push", src["store"].url, url]) == 0
    capsys.readouterr()
    monkeypatch.setenv("MINISANDBOX_PROGRESS_INTERVAL", "0")
    assert main(["pull", url, str(tmp_path / "node")]) == 0
    lines = _progress_lines(capsys.readouterr().err, "pull")
    total = sum(m["size"] for m in [*src["envs"].values(), *src["repos"].values()])
    from tqdm import tqdm

    # bytes counted as they arrive: at least one line per artifact (these are smaller than
    # one read block), each showing more bytes than the last (the final line is not repeated)
    assert len(lines) >= len(all_keys(src))
    done = [line.removeprefix("pull: ").split("/")[0] for line in lines]
    assert len(set(done)) == len(done)
    assert lines[-1].startswith(f"pull: {tqdm.format_sizeof(total, divisor=1024)}/")


def _done_and_totals(lines: list[str], what: str) -> list[tuple[str, str]]:
    pairs = []
    for line in lines:
        done, _, rest = line.removeprefix(f"{what}: ").partition("/")
        pairs.append((done, rest.split(" ", 1)[0]))
    return pairs


@pytest.mark.skipif(not shutil.which("mksquashfs"), reason="mksquashfs not installed (apt-get install squashfs-tools)")
def test_push_pull_and_verify_plan_their_total_before_the_first_byte(tmp_path: Path, monkeypatch, capsys) -> None:
    """Chunked images (chunks shared between envs) and archives: every progress line shows
    the same total, the one the finished run reports, and no line is printed twice."""
    info = publish_synthetic_store(
        str(tmp_path / "src"), tmp_path / "work", n_envs=3, n_repos=2, failed_env=False, images=True, chunked=True
    )
    monkeypatch.setenv("MINISANDBOX_PROGRESS_INTERVAL", "0")
    from tqdm import tqdm

    def run(*argv: str, what: str) -> tuple[dict, list[tuple[str, str]]]:
        assert main([argv[0], "--json", "--workers", "2", *argv[1:]]) in (0, 1)
        out, err = capsys.readouterr()
        lines = _progress_lines(err, what)
        assert len(lines) == len(set(lines)), lines  # the final line is printed once
        return json.loads(out), _done_and_totals(lines, what)

    def check(pairs: list[tuple[str, str]], total: int) -> None:
        assert len(pairs) >= 2, pairs
        want = tqdm.format_sizeof(total, divisor=1024)
        assert {t for _, t in pairs} == {want}, pairs  # never changes, from the first line on
        assert pairs[-1][0] == want

    dst = tmp_path / "dst"
    report, pairs = run("push", info["store"].url, str(dst), what="push")
    assert report["chunks"] > 0
    check(pairs, report["bytes"])

    report, pairs = run("verify", str(dst), what="verify")
    assert report["ok"] is True
    check(pairs, report["bytes"])

    # a pull that finds part of the work done plans only the rest
    node = tmp_path / "node"
    run("pull", str(dst), str(node), what="pull")
    key, m = sorted(info["envs"].items())[0]
    for objects in ("chunks", "packs"):  # the images' chunk objects or packs (the repos keep theirs)
        shutil.rmtree(node / objects, ignore_errors=True)
    (node / manifest_path("env", key)).unlink()
    report, pairs = run("pull", str(dst), str(node), what="pull")
    assert report["copied"] and len(report["copied"]) < len(all_keys(info))
    check(pairs, report["bytes"])
    assert verify(str(node)).ok
