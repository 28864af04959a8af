"""The mini-swe-agent environment with the real `mini-swe-agent` package: named by dotted
path in the environment config, driven by its DefaultAgent and a scripted
DeterministicModel (named by dotted path too) through a bundled task: the model's
commands fix the bug, submit the diff, and the submission is graded in a fresh sandbox.
Also the 2.x and 1.x (SkyRL) `execute` forms."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

os.environ.setdefault("MSWEA_SILENT_STARTUP", "1")
pytest.importorskip("minisweagent")

import yaml  # noqa: E402
from minisweagent.agents.default import DefaultAgent  # noqa: E402
from minisweagent.config import builtin_config_dir  # noqa: E402
from minisweagent.environments import get_environment  # noqa: E402
from minisweagent.exceptions import Submitted  # noqa: E402
from minisweagent.models import get_model  # noqa: E402
from minisweagent.models.test_models import make_output  # noqa: E402

from minisandbox.integrations import grade  # noqa: E402
from minisandbox.integrations.minisweagent import MinisandboxEnvironment  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.root]

CLASS = "minisandbox.integrations.minisweagent.MinisandboxEnvironment"
TASK = "pytoolz__toolz.d9ea0afb.func_pm_op_change__f034f3d8"


def env_config(store, cache: Path, task_id: str = TASK, **extra) -> dict:
    return {
        "environment_class": CLASS,
        "task_id": task_id,
        "store": store.url,
        "cache": str(cache),
        "catalog": [str(store.catalog)],
        **extra,
    }


def reverse_of_bug(environment: MinisandboxEnvironment) -> str:
    """The scripted fix: the inverse of the task's bug patch, as a shell command."""
    return (
        "cat > /tmp/fix.patch <<'PATCH_EOF'\n" + environment.task.record.patch + "PATCH_EOF\n"
        "git apply -R /tmp/fix.patch && rm /tmp/fix.patch"
    )


def test_agent_fixes_a_bundled_task_and_it_is_graded(bundled_store, tmp_path: Path) -> None:
    assert TASK in bundled_store.task_ids
    environment = get_environment(env_config(bundled_store, tmp_path / "cache"))
    assert type(environment) is MinisandboxEnvironment
    try:
        outputs = [
            make_output(
                "Look at the repo first.", [{"command": "git status --porcelain; git log --oneline | wc -l; ls"}]
            ),
            make_output("Apply the fix.", [{"command": reverse_of_bug(environment)}]),
            make_output(
                "Check the package still imports and the tests I have pass.",
                [
                    {
                        "command": "python -c 'import toolz' && python -m pytest -q -p no:cacheprovider toolz "
                        "2>&1 | tail -1"
                    }
                ],
            ),
            make_output("Submit.", [{"command": "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git diff"}]),
        ]
        model = get_model(
            config={
                "model_class": "minisweagent.models.test_models.DeterministicModel",
                "model_name": "scripted",
                "outputs": outputs,
            }
        )
        agent_cfg = yaml.safe_load((builtin_config_dir / "default.yaml").read_text())["agent"]
        agent = DefaultAgent(model, environment, **{**agent_cfg, "step_limit": 10})
        result = agent.run("Fix the bug in toolz.")
        assert result["exit_status"] == "Submitted", result
        observations = [m for m in agent.messages if m.get("role") == "user" and "extra" in m]
        first = observations[0]["extra"]
        assert first["returncode"] == 0
        assert first["raw_output"].splitlines()[0].strip() == "1"  # clean tree, one root commit
        assert observations[1]["extra"]["returncode"] == 0
        assert " passed" in observations[2]["extra"]["raw_output"]
        submission = result["submission"]
        assert submission.startswith("diff --git") and submission == environment.patch()
        traj = agent.save(tmp_path / "traj.json")
        assert traj["info"]["config"]["environment_type"] == CLASS
    finally:
        environment.close()
    evaluation = grade(TASK, submission, bundled_store.url, catalog=bundled_store.catalog, cache=tmp_path / "cache")
    assert evaluation.resolved, evaluation.report
    assert not grade(TASK, "", bundled_store.url, catalog=bundled_store.catalog, cache=tmp_path / "cache").resolved


def test_agent_that_breaks_things_is_not_resolved(bundled_store, tmp_path: Path) -> None:
    environment = get_environment(env_config(bundled_store, tmp_path / "cache"))
    try:
        outputs = [
            make_output("Delete a module.", [{"command": "rm toolz/itertoolz.py"}]),
            make_output("Submit.", [{"command": "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"}]),
        ]
        model = get_model(config={"model_class": "deterministic", "model_name": "scripted", "outputs": outputs})
        agent_cfg = yaml.safe_load((builtin_config_dir / "default.yaml").read_text())["agent"]
        result = DefaultAgent(model, environment, **agent_cfg).run("Fix the bug.")
        assert result["exit_status"] == "Submitted"
        evaluation = environment.grade()  # the current diff, in a fresh sandbox
    finally:
        environment.close()
    assert not evaluation.resolved


def test_execute_forms(bundled_store, tmp_path: Path) -> None:
    environment = MinisandboxEnvironment(
        task_id=TASK, store=bundled_store.url, cache=str(tmp_path / "cache"), env={"MY_VAR": "v1"}, timeout=20
    )
    try:
        # 2.x: dict action; fresh shell per command; cwd; config env; venv active
        out = environment.execute({"command": "export GONE=1; cd /tmp; pwd"})
        assert out == {"output": "/tmp\n", "returncode": 0, "exception_info": ""}
        out = environment.execute({"command": "echo ${GONE:-unset} $MY_VAR; pwd; which python"})
        assert out["output"].split() == ["unset", "v1", "/testbed", "/opt/miniconda3/envs/testbed/bin/python"]
        assert environment.execute({"command": "ls"}, cwd="/testbed/toolz")["output"].split().count("itertoolz.py") == 1
        assert environment.execute({"command": "exit 4"})["returncode"] == 4
        t0 = time.monotonic()
        out = environment.execute({"command": "echo partial; sleep 60"}, timeout=1)
        assert time.monotonic() - t0 < 10
        assert out["returncode"] == -1 and "timed out" in out["exception_info"] and out["output"] == "partial\n"
        assert out["extra"]["exception_type"] == "TimeoutExpired"
        with pytest.raises(Submitted) as sub:
            environment.execute({"command": "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT; echo the-answer"})
        assert sub.value.messages[0]["extra"]["submission"] == "the-answer\n"
        # no submission on a failing exit code
        assert environment.execute({"command": "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT; false"})["returncode"] == 1
        # 1.x (SkyRL): execute(command, cwd, timeout) -> {"output", "returncode"}
        assert environment.execute("pwd", "/tmp", 5) == {"output": "/tmp\n", "returncode": 0}
        assert environment.execute("echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT")["returncode"] == 0  # no raise
        with pytest.raises(subprocess.TimeoutExpired) as exc:
            environment.execute("echo early; sleep 60", timeout=1)
        assert exc.value.output == "early\n"
        # network is off by default: a download fails fast instead of hanging
        t0 = time.monotonic()
        out = environment.execute(
            {"command": "python -c \"import urllib.request as u; u.urlopen('http://pypi.org', timeout=20)\""}
        )
        assert out["returncode"] != 0 and time.monotonic() - t0 < 15
        tv = environment.get_template_vars()
        assert tv["task_id"] == TASK and tv["cwd"] == "/testbed" and "system" in tv
        assert environment.serialize()["info"]["config"]["environment_type"] == CLASS
    finally:
        environment.close()
    with pytest.raises(RuntimeError, match="closed"):
        environment.execute("true")
    assert environment.execute({"command": "true"})["returncode"] == -1  # 2.x reports, does not raise


def test_unknown_task_is_a_one_line_error(bundled_store, tmp_path: Path) -> None:
    with pytest.raises(Exception, match="unknown task id 'no__such.task'"):
        get_environment(env_config(bundled_store, tmp_path / "cache", task_id="no__such.task"))
