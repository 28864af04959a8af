"""The per-environment workflow job (pipeline.envjob): it publishes the repo folded into it,
and a rerun reuses the build exactly when only the validation inputs changed.

The build steps themselves are replaced by recorders here (they are exercised for real by
tests/e2e/test_pipeline.py, which also checks the reuse end to end); what is under test is
which steps run and what the job writes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from minisandbox.pipeline import envjob, steps
from minisandbox.pipeline.envjob import EnvJobSettings, mark_validated, run_env_job
from minisandbox.status import StageStatus, read_status, write_status

KEY, REPO = "env-x-0123456789abcdef", "repo-x-aaaaaaaaaaaa-12345678"
SETTINGS = EnvJobSettings(store="/store", fmt="tar.zst", level=3, image=True, image_whole=False, timeout=60)


@pytest.fixture
def job(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    work = tmp_path / "work"
    (work / "specs" / "env").mkdir(parents=True)
    (work / "specs" / "env-tasks").mkdir()
    spec = work / "specs" / "env" / f"{KEY}.json"
    spec.write_text(json.dumps({"key": KEY, "repo_key": REPO, "interpreter": None, "spec": {"name": "x"}}))
    (work / "specs" / "env-tasks" / f"{KEY}.json").write_text('{"tasks_sha256": "1"}')
    plan = {"folded": {REPO: KEY}, "repos": {REPO: {"source_id": "x-1"}}, "env_repos": {KEY: [REPO]}}
    calls: list[str] = []
    outcome = {"ok": True}

    def job_repo(
        work_, store, repo_spec, source_spec, fmt, level, image, receipt_out, image_whole=False, with_archive=True
    ):
        calls.append("repo")
        write_status(receipt_out, StageStatus(ok=True, stage="publish", key=REPO, data={"status": "ok"}))

    def job_env(
        work_,
        store,
        env_spec,
        repo_dir,
        repo_status,
        fmt,
        level,
        image,
        timeout,
        receipt_out,
        image_whole=False,
        with_archive=True,
    ):
        calls.append("env")
        assert repo_dir == work / "repos" / REPO and repo_status == work / "repos" / f"{REPO}.status.json"
        data = {"status": "ok", "manifest": {"sha256": "s"}} if outcome["ok"] else {"status": "failed", "error": "x"}
        st = StageStatus(ok=True, stage="publish", key=KEY, data=data)
        write_status(receipt_out, st)
        return st

    monkeypatch.setattr(steps, "job_repo", job_repo)
    monkeypatch.setattr(steps, "job_env", job_env)
    receipt = work / "published" / "env" / f"{KEY}.json"

    def run(settings: EnvJobSettings = SETTINGS, validate: bool = True, **label):
        calls.clear()
        res = run_env_job(work, settings, spec, plan, receipt, validate=validate, repeats=1, **label)
        mark_validated(work, KEY, res.validation)  # as the CLI does once validation wrote its output
        return res, list(calls)

    return run, work, receipt, outcome


def test_first_run_publishes_the_folded_repo_then_builds(job) -> None:
    run, work, receipt, _ = job
    res, calls = run()
    assert calls == ["repo", "env"] and not res.reused and res.folded_repo == REPO
    assert read_status(work / "published" / "repo" / f"{REPO}.json").ok
    assert read_status(receipt).data["status"] == "ok"


def test_new_tasks_reuse_the_build(job) -> None:
    run, work, receipt, _ = job
    run()
    first = receipt.read_text()
    receipt.unlink()  # Snakemake removes a job's outputs before it reruns
    (work / "specs" / "env-tasks" / f"{KEY}.json").write_text('{"tasks_sha256": "2"}')
    res, calls = run()
    assert calls == [] and res.reused and receipt.read_text() == first


def test_validation_switched_on_reuses_the_build(job) -> None:
    run, _, _, _ = job
    run(validate=False)
    res, calls = run(validate=True)
    assert calls == [] and res.reused


def test_other_labelling_settings_label_again_on_the_same_build(job) -> None:
    """In label mode the number of resume passes decides the labels, so a rerun with another
    number labels again (the validation inputs differ) and reuses the build."""
    run, _, receipt, _ = job
    first, _ = run(label=True, max_f2p=5, resume_passes=2)
    receipt.unlink()
    res, calls = run(label=True, max_f2p=5, resume_passes=0)
    assert calls == [] and res.reused
    assert (first.validation["resume_passes"], res.validation["resume_passes"]) == (2, 0)


def test_a_forced_rerun_builds_again(job) -> None:
    """Same build and validation inputs: the job runs because it was forced (or its receipt
    deleted, or the rule changed), so it builds, as before the merge."""
    run, _, receipt, _ = job
    run()
    receipt.unlink()
    res, calls = run()
    assert calls == ["repo", "env"] and not res.reused


@pytest.mark.parametrize("change", ["level", "store", "image_whole", "timeout", "archive"])
def test_other_settings_build_again(job, change: str) -> None:
    run, work, _, _ = job
    run()
    (work / "specs" / "env-tasks" / f"{KEY}.json").write_text('{"tasks_sha256": "2"}')
    other = {"level": 9, "store": "/other", "image_whole": True, "timeout": 5, "archive": False}[change]
    res, calls = run(EnvJobSettings(**{**SETTINGS.__dict__, change: other}))
    assert calls == ["repo", "env"] and not res.reused


def test_a_failed_build_is_retried_not_reused(job) -> None:
    run, work, _, outcome = job
    outcome["ok"] = False
    run()
    (work / "specs" / "env-tasks" / f"{KEY}.json").write_text('{"tasks_sha256": "2"}')
    outcome["ok"] = True
    res, calls = run()
    assert calls == ["repo", "env"] and not res.reused


def test_a_missing_folded_repo_receipt_builds_again(job) -> None:
    run, work, _, _ = job
    run()
    (work / "published" / "repo" / f"{REPO}.json").unlink()
    (work / "specs" / "env-tasks" / f"{KEY}.json").write_text('{"tasks_sha256": "2"}')
    res, calls = run()
    assert calls == ["repo", "env"] and not res.reused


def test_an_interrupted_validation_reuses_the_build(job) -> None:
    """The build finished, the validation did not (no mark): the rerun only validates."""
    run, work, _, _ = job
    res = run_env_job(
        work,
        SETTINGS,
        work / "specs" / "env" / f"{KEY}.json",
        {"folded": {REPO: KEY}, "repos": {REPO: {"source_id": "x-1"}}, "env_repos": {KEY: [REPO]}},
        work / "published" / "env" / f"{KEY}.json",
        validate=True,
        repeats=1,
    )
    assert not res.reused and json.loads(envjob.record_path(work, KEY).read_text())["validation"] is None
    res, calls = run()
    assert calls == [] and res.reused
