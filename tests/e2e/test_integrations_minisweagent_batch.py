"""mini-swe-agent's SWE-bench batch loop over a task file with minisandbox environments
(`python -m minisandbox.integrations.minisweagent_batch`), with the real `mini-swe-agent`
package and a scripted model (named by dotted path, like DeterministicModel in
test_integrations_minisweagent.py): three bundled tasks of two repositories, two of whose
prompts carry the fix; the predictions file the run writes is then graded by
`minisandbox eval` in both grading modes."""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

os.environ.setdefault("MSWEA_SILENT_STARTUP", "1")
pytest.importorskip("minisweagent")

from minisweagent.models.test_models import DeterministicModel, make_output  # noqa: E402

from minisandbox.integrations.minisweagent_batch import ENVIRONMENT_CLASS, environment_config  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
MODEL_CLASS = "tests.e2e.test_integrations_minisweagent_batch.PromptScriptedModel"
FIXED = [
    "jpvanhal__inflection.09fb3146.func_pm_op_change__a021d67c",
    "pytoolz__toolz.d9ea0afb.func_pm_op_change__f034f3d8",
]
UNFIXED = "pytoolz__toolz.d9ea0afb.func_pm_remove_cond__e6776eea"


class PromptScriptedModel(DeterministicModel):
    """A deterministic model that reads its task: it lists the repo, applies the fix
    the prompt carries (`FIX-PATCH-B64: <base64 of the bug patch>`, reversed) if any, and
    submits `git diff`. One instance per task (the batch loop makes a model per instance)."""

    def query(self, messages: list[dict], **kwargs) -> dict:
        self.current_index += 1
        task = next(m["content"] for m in messages if m.get("role") == "user")
        steps = [("Look at the repository.", "ls; git status --porcelain | wc -l")]
        if m := re.search(r"FIX-PATCH-B64: (\S+)", task):
            steps.append(
                (
                    "Apply the fix.",
                    f"echo {m.group(1)} | base64 -d > /tmp/fix.patch && "
                    "git apply -R /tmp/fix.patch && rm /tmp/fix.patch",
                )
            )
        steps.append(("Submit.", "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git diff"))
        content, command = steps[min(self.current_index, len(steps) - 1)]
        return make_output(content, [{"command": command}], cost=0.0)


def test_environment_config_names_the_instance():
    cfg = {"environment": {"environment_class": "docker", "cwd": "/testbed", "timeout": 60, "env": {"PAGER": "cat"}}}
    env = environment_config(cfg, {"instance_id": "a__b.1"}, store="/s")
    assert env == {
        "environment_class": ENVIRONMENT_CLASS,
        "cwd": "/testbed",
        "timeout": 60,
        "env": {"PAGER": "cat"},
        "task_id": "a__b.1",
        "store": "/s",
    }
    mine = {"environment": {"environment_class": "my.pkg.Env", "store": "s3://b/store"}}
    env = environment_config(mine, {"instance_id": "x"}, store="/s")
    assert env["environment_class"] == "my.pkg.Env" and env["store"] == "s3://b/store" and env["task_id"] == "x"
    assert cfg["environment"]["environment_class"] == "docker"  # the run's config is not changed


@pytest.mark.slow
@pytest.mark.root
def test_batch_run_over_a_task_file_then_eval(bundled_store, tmp_path: Path) -> None:
    records = {}
    for line in (ROOT / "config" / "bundled" / "tasks.jsonl").read_text().splitlines():
        rec = json.loads(line)
        if rec["instance_id"] in [*FIXED, UNFIXED]:
            fix = base64.b64encode(rec["patch"].encode()).decode()
            rec["problem_statement"] = "Fix the bug." + (
                f"\nFIX-PATCH-B64: {fix}" if rec["instance_id"] in FIXED else ""
            )
            records[rec["instance_id"]] = rec
    assert len(records) == 3
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps(r) + "\n" for r in records.values()))
    model_cfg = tmp_path / "model.yaml"
    model_cfg.write_text(
        f"model:\n  model_class: {MODEL_CLASS}\n  model_name: scripted\n  outputs: []\n"
        f"environment:\n  cache: {tmp_path / 'cache'}\n"
    )
    out = tmp_path / "agent"
    from minisweagent.config import builtin_config_dir

    env = {**os.environ, "MSWEA_SILENT_STARTUP": "1", "PYTHONPATH": str(ROOT)}
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "minisandbox.integrations.minisweagent_batch",
            "--tasks",
            str(tasks),
            "--store",
            bundled_store.url,
            "-o",
            str(out),
            "-c",
            str(builtin_config_dir / "benchmarks" / "swebench.yaml"),
            "-c",
            str(model_cfg),
            "-w",
            "2",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    preds = json.loads((out / "preds.json").read_text())
    assert set(preds) == set(records)
    for iid in records:
        traj = json.loads((out / iid / f"{iid}.traj.json").read_text())
        assert traj["info"]["exit_status"] == "Submitted", traj["info"]
        assert traj["info"]["config"]["environment_type"] == ENVIRONMENT_CLASS
        first = next(m for m in traj["messages"] if m.get("role") == "user" and "extra" in m)
        package = "inflection" if iid.startswith("jpvanhal__inflection") else "toolz"
        assert package in first["extra"]["raw_output"].split(), first  # this instance's repo, not another's
        assert first["extra"]["raw_output"].split()[-1] == "0"  # clean start state
    for iid in FIXED:
        assert preds[iid]["model_patch"].startswith("diff --git"), preds[iid]
    assert preds[UNFIXED]["model_patch"].strip() == ""

    summaries = {}
    for mode in ("strict", "official"):
        ev = subprocess.run(
            [
                sys.executable,
                "-m",
                "minisandbox.cli",
                "eval",
                "--store",
                bundled_store.url,
                "--tasks",
                str(tasks),
                "--catalog",
                str(bundled_store.catalog),
                "--predictions",
                str(out / "preds.json"),
                "--out",
                str(tmp_path / f"eval-{mode}"),
                "--grading",
                mode,
                "--json",
            ],
            cwd=ROOT,
            env={**env, "MINISANDBOX_CACHE": str(tmp_path / "cache")},
            capture_output=True,
            text=True,
            timeout=900,
        )
        assert ev.returncode == 0, ev.stderr[-3000:]
        summaries[mode] = json.loads(ev.stdout)
    for mode, summary in summaries.items():
        assert summary["resolved_ids"] == sorted(FIXED), (mode, summary)
        assert summary["empty_patch_ids"] == [UNFIXED], (mode, summary)
    report = json.loads(
        (tmp_path / "eval-official" / "minisandbox" / "scripted" / FIXED[0] / "report.json").read_text()
    )
    assert report[FIXED[0]]["grading"] == "official" and report[FIXED[0]]["harness"] == "swe-smith"
