"""Rewards a candidate patch cannot forge when pytest is not the test command itself.

34 SWE-bench specs (sphinx) run `tox --current-env ... --`: tox starts `python -m pytest`
as a child process, closing every inherited descriptor but 0-2, with the repository root
first on `sys.path` (the working directory, `-m`). The results channel must reach the
plugin through such a runner, and a module at the repository root must not be able to take
the plugin's place or run before it.

The runner here is a stand-in for tox (`toxlike`: `subprocess.call` of `python -m pytest`,
which closes inherited descriptors as tox does), installed in the task's venv like the
`pytest` script of `test_reward_hacks`; the task, the executors and the hacks are theirs.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
from pathlib import Path

import pytest

from minisandbox.grading.evaluate import evaluate
from minisandbox.paths import VENV_PATH
from tests.security.test_reward_hacks import (  # noqa: F401  (fixtures)
    GIT_ENV,
    HACK_REPORTS,
    host_executor,
    sandbox_executor,
    task,
)

TOXLIKE = """\
import subprocess, sys
sys.exit(subprocess.call([sys.executable, "-m", "pytest", *sys.argv[1:]]))
"""

#: A module at the repository root named as the results plugin: first on sys.path under
#: `python -m pytest`, so `-p` would import it instead of the plugin. It does nothing (the
#: run would have no channel); the library forges the reports as HACK_REPORTS does.
SHADOW_PLUGIN = "import inflection  # noqa\n"


def _add_runner(venv: Path, python: str) -> None:
    script = venv / "bin" / "toxlike"
    script.write_text(f"#!{python}\n{TOXLIKE}")
    script.chmod(0o755)


def _toxlike_spec(spec):
    assert " pytest " in spec.test_cmd
    return dataclasses.replace(spec, test_cmd=spec.test_cmd.replace(" pytest ", " toxlike ", 1))


@pytest.fixture(params=["host", pytest.param("sandbox", marks=pytest.mark.root)])
def runner_executor(request, task, host_executor):
    if request.param == "host":
        _add_runner(host_executor.venv, str(host_executor.venv / "bin" / "python"))
        return host_executor
    ex = request.getfixturevalue("sandbox_executor")
    _add_runner(ex.layers[VENV_PATH], f"{VENV_PATH}/bin/python")
    return ex


def _patch_adding(task, files: dict[str, str]) -> str:
    """A candidate patch made with git in a clone of the task's work tree."""
    work = task["root"] / "work"
    env = {**os.environ, **GIT_ENV}
    for name, text in files.items():
        (work / name).write_text(text)
    subprocess.run(["git", "add", "-A"], cwd=work, check=True, env=env)
    out = subprocess.run(["git", "diff", "--cached"], cwd=work, check=True, capture_output=True, text=True, env=env)
    subprocess.run(["git", "reset", "-q", "--hard"], cwd=work, check=True, env=env)  # back to the task state
    return out.stdout


def _grade(task, executor, patch: str):
    return evaluate(task["record"], _toxlike_spec(task["spec"]), patch, executor)


def test_gold_patch_through_a_runner_has_the_channel(task, runner_executor):
    ev = _grade(task, runner_executor, task["patches"]["gold"])
    assert ev.resolved, ev.output[-3000:]
    channel = ev.entry["results_channel"]
    assert channel["present"] and channel["complete"] and channel["tests"] == channel["collected"] > 50


def test_forged_reports_through_a_runner_are_not_resolved(task, runner_executor):
    ev = _grade(task, runner_executor, task["patches"]["reports"])
    assert all(f"{t} PASSED" in ev.output for t in task["record"].fail_to_pass), ev.output[-3000:]
    assert not ev.resolved and ev.reason == "results-tampered", ev.entry
    assert "_pytest.reports.TestReport.__init__ replaced" in ev.entry["results_channel"]["critical"]


def test_a_root_module_named_as_the_plugin_is_not_resolved(task, runner_executor):
    """A top-level module named as pytest's own dependencies is forbidden
    (tests/grading/test_suspicious_tree.py); one named as the plugin is deleted."""
    lib = (task["root"] / "work" / "inflection" / "__init__.py").read_text()
    patch = _patch_adding(
        task, {"_minisandbox_results.py": SHADOW_PLUGIN, "inflection/__init__.py": HACK_REPORTS + lib}
    )
    ev = _grade(task, runner_executor, patch)
    assert not ev.resolved, ev.entry
    # deleted before the tests ran: the plugin itself loaded, and saw the forged reports
    assert "minisandbox: reverted protected path _minisandbox_results.py" in ev.output
    assert ev.entry["results_channel"]["present"], ev.entry
    assert "_pytest.reports.TestReport.__init__ replaced" in ev.entry["results_channel"]["critical"]
