"""The workflow's env job as the CLI runs it (`minisandbox.workflowjobs.env_job`): build and
publish, then the validation result, then the record of which validation inputs that
result is for. The build steps are the recorders of tests/pipeline/test_envjob.py (the real
ones run in tests/e2e/test_pipeline.py)."""

from __future__ import annotations

import json
from pathlib import Path

from minisandbox.pipeline.envjob import record_path
from minisandbox.workflowjobs import EnvJobRequest, env_job
from tests.pipeline.test_envjob import KEY, REPO, SETTINGS, job  # noqa: F401 (the fixture)


def test_env_job_publishes_then_writes_the_not_validated_result_then_records_it(job, tmp_path: Path) -> None:
    _, work, receipt, _ = job
    plan = tmp_path / "plan.json"
    plan.write_text(
        json.dumps(
            {
                "folded": {REPO: KEY},
                "repos": {REPO: {"source_id": "x-1"}},
                "env_repos": {KEY: [REPO]},
                "envs": {KEY: {"spec": {"name": "x"}}},
            }
        )
    )
    out = tmp_path / "validation" / f"{KEY}.json"
    request = EnvJobRequest(
        work=work, spec=work / "specs" / "env" / f"{KEY}.json", plan=plan, receipt=receipt, output=out, validate=False
    )
    report = env_job(SETTINGS, request)
    assert report.key == KEY
    assert report.lines == [
        f"repo {REPO}: published by this job (no other environment or task uses it)",
        f"env {KEY}: ok",
    ]
    result = json.loads(out.read_text())
    assert result["validated"] is False and result["env_key"] == KEY
    assert json.loads(record_path(work, KEY).read_text())["validation"] == {"validate": False}
    again = env_job(SETTINGS, request)  # same inputs: a forced rerun builds again, and says so plainly
    assert again.lines[-1] == f"env {KEY}: ok"
