"""`minisandbox eval`'s loud errors and machine-readable output (no sandbox is started:
every case here stops or is graded before a sandbox would be needed)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TASKS = ROOT / "config" / "bundled" / "tasks.jsonl"
#: A catalog with no spec for the bundled tasks: known tasks are graded as errors at once.
OTHER_CATALOG = ROOT / "config" / "catalog" / "swebench.yaml"


def _eval(tmp_path: Path, preds: list, *args: str) -> subprocess.CompletedProcess:
    path = tmp_path / "preds.jsonl"
    path.write_text("".join((p if isinstance(p, str) else json.dumps(p)) + "\n" for p in preds))
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "minisandbox.cli",
            "eval",
            "--predictions",
            str(path),
            "--out",
            str(tmp_path / "out"),
            *args,
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _known_id() -> str:
    return json.loads(TASKS.read_text().splitlines()[0])["instance_id"]


def test_prediction_without_model_name_is_an_error_naming_file_line_field(tmp_path: Path) -> None:
    iid = _known_id()
    res = _eval(
        tmp_path,
        [{"instance_id": iid, "model_patch": "", "model_name_or_path": "m"}, {"instance_id": iid, "model_patch": ""}],
        "--tasks",
        str(TASKS),
    )
    assert (res.returncode, res.stdout) == (1, "")
    assert res.stderr == (
        f"minisandbox eval: error: {tmp_path / 'preds.jsonl'}:2 ({iid}): field "
        f"'model_name_or_path' missing; SWE-bench predictions need instance_id, model_patch, "
        f"model_name_or_path\n"
    )
    assert not (tmp_path / "out").exists()


def test_bad_predictions_each_name_their_line_and_field(tmp_path: Path) -> None:
    iid = _known_id()
    cases = [
        ("{not json", ":1: invalid JSON"),
        ([1, 2], ":1: a prediction must be a JSON object, got list"),
        ({"model_patch": "", "model_name_or_path": "m"}, ":1: field 'instance_id' missing"),
        ({"instance_id": "../x", "model_patch": "", "model_name_or_path": "m"}, ":1: field 'instance_id': invalid"),
        ({"instance_id": iid, "model_name_or_path": "m"}, f":1 ({iid}): field 'model_patch' missing"),
        ({"instance_id": iid, "model_patch": 3, "model_name_or_path": "m"}, "field 'model_patch' must be a string"),
        ({"instance_id": iid, "model_patch": "", "model_name_or_path": ".."}, "field 'model_name_or_path': '..'"),
    ]
    for pred, message in cases:
        res = _eval(tmp_path, [pred], "--tasks", str(TASKS))
        assert res.returncode == 1 and res.stderr.count("\n") == 1, res.stderr
        assert message in res.stderr, (pred, res.stderr)


def test_predictions_for_unknown_tasks_fail_before_any_evaluation(tmp_path: Path) -> None:
    res = _eval(
        tmp_path,
        [{"instance_id": "nobody__nothing.1", "model_patch": "", "model_name_or_path": "m"}],
        "--tasks",
        str(TASKS),
    )
    assert (res.returncode, res.stdout) == (1, "")
    assert res.stderr == (
        f"minisandbox eval: error: 1 prediction(s) name no task in {TASKS}: nobody__nothing.1; "
        f"check --tasks/--store (list a store's tasks with `minisandbox tasks --store URL`)\n"
    )


def test_known_tasks_are_graded_then_unknown_ones_fail_the_run_json_alone_on_stdout(tmp_path: Path) -> None:
    iid = _known_id()
    patch = "diff --git a/x.py b/x.py\n--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a\n+b\n"
    res = _eval(
        tmp_path,
        [
            {"instance_id": iid, "model_patch": patch, "model_name_or_path": "m/x"},
            {"instance_id": "nobody__nothing.1", "model_patch": "", "model_name_or_path": "m/x"},
        ],
        "--tasks",
        str(TASKS),
        "--catalog",
        str(OTHER_CATALOG),
        "--json",
    )
    assert res.returncode == 1
    summary = json.loads(res.stdout)  # the summary alone, although the run fails
    assert summary["unknown_ids"] == ["nobody__nothing.1"]
    assert summary["submitted_ids"] == [iid] and summary["error_ids"] == [iid]
    assert Path(summary["report"]).is_file()
    assert (
        json.loads((tmp_path / "out" / "minisandbox" / "m__x" / iid / "report.json").read_text())[iid]["reason"]
        == "error"
    )
    assert res.stderr.splitlines()[-1].startswith("minisandbox eval: error: 1 prediction(s) name no task in")
    # progress went to stderr as plain lines (not a terminal)
    assert f"[1/1] {iid}: error" in res.stderr
