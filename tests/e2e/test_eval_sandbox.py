"""End to end: the bundled tasks built and published by the real workflow, validated per
environment in sandboxes, then graded with `minisandbox eval` in fresh sandboxes."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from minisandbox.grading.evalscript import reverse_patch
from minisandbox.records import read_tasks
from tests.fixtures.evaluation import eval_command, run_eval
from tests.fixtures.signals import default_signals

pytestmark = [pytest.mark.slow, pytest.mark.root]


def records(store):
    return read_tasks(store.tasks).records


def test_validation_stage_marks_every_bundled_task_valid(root_eval_store):
    files = sorted((root_eval_store.workdir / "validation").glob("env-*.json"))
    # one job per environment, not per task: 4 specs, 3 environments (parse's SWE-smith
    # profile and its SWE-bench version define the same venv and share one)
    assert len(files) == 3
    statuses: dict[str, str] = {}
    for f in files:
        data = json.loads(f.read_text())
        assert data["repeats"] == 2
        for iid, t in data["tasks"].items():
            statuses[iid] = t["status"]
            assert len(t["runs"]) == 4 and all((root_eval_store.path / r["log"]).exists() for r in t["runs"])
    ids = {r.instance_id for r in records(root_eval_store)}
    assert set(statuses) == ids
    assert set(statuses.values()) == {"valid"}, statuses
    report = json.loads((root_eval_store.path / "results" / "report.json").read_text())
    assert report["counts"]["validation_valid"] == len(ids)
    valid = [
        json.loads(x) for x in (root_eval_store.path / "results" / "validated_tasks.jsonl").read_text().splitlines()
    ]
    assert {v["instance_id"] for v in valid} == ids
    # the validated list is itself a valid task file
    assert len(read_tasks([root_eval_store.path / "results" / "validated_tasks.jsonl"]).records) == len(ids)


def _eval(store, preds: list[dict], out: Path, *extra: str) -> subprocess.CompletedProcess:
    proc = run_eval(store, preds, out, *extra)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def test_eval_gold_and_adversarial_predictions(root_eval_store, bundled_gold_eval, tmp_path):
    recs = records(root_eval_store)
    smith = [r for r in recs if r.format == "swesmith"]
    bench = [r for r in recs if r.format == "swebench"]
    assert smith and bench
    # gold for every task (SWE-smith gold is the bug patch reversed), default grading: the
    # session's one run of it (the fixture's command is `_eval`'s)
    preds, out, proc = bundled_gold_eval.preds, bundled_gold_eval.out, bundled_gold_eval.proc
    assert [p["instance_id"] for p in preds] == [r.instance_id for r in recs]
    assert all(
        p["model_patch"] == (reverse_patch(r.patch) if r.format == "swesmith" else r.patch) for p, r in zip(preds, recs)
    )
    summary = json.loads((out / "gold.e2e.json").read_text())
    assert summary["resolved_instances"] == len(recs), (summary, proc.stderr[-3000:])
    assert summary["error_ids"] == [] and summary["schema_version"] == 2
    assert proc.stderr.count("resolved so far") == len(recs)  # progress lines

    # adversarial predictions on one SWE-smith task
    target = smith[0]
    f2p_file = target.fail_to_pass[0].split("::")[0]
    plant = (
        "diff --git a/conftest.py b/conftest.py\nnew file mode 100644\n--- /dev/null\n+++ b/conftest.py\n"
        "@@ -0,0 +1,7 @@\n+import pytest\n+\n+\n+@pytest.hookimpl(hookwrapper=True)\n"
        "+def pytest_runtest_makereport(item, call):\n+    outcome = yield\n+    outcome.get_result().outcome = 'passed'\n"
    )
    skip_all = (  # a test file (missing in the task state) that only skips: restored from the reference
        f"diff --git a/{f2p_file} b/{f2p_file}\nnew file mode 100644\n--- /dev/null\n+++ b/{f2p_file}\n"
        "@@ -0,0 +1,2 @@\n+import pytest\n+pytestmark = pytest.mark.skip\n"
    )
    bad = "diff --git a/nope.py b/nope.py\n--- a/nope.py\n+++ b/nope.py\n@@ -1 +1 @@\n-x\n+y\n"
    adv = [
        {"instance_id": target.instance_id, "model_patch": plant, "model_name_or_path": "adv"},
    ]
    out2 = tmp_path / "adv"
    _eval(root_eval_store, adv, out2)
    rep = json.loads((out2 / "e2e" / "adv" / target.instance_id / "report.json").read_text())[target.instance_id]
    assert rep["resolved"] is False and rep["reason"] == "tests-failed"
    output = (out2 / "e2e" / "adv" / target.instance_id / "test_output.txt").read_text()
    assert "reverted protected path conftest.py" in output

    for name, patch, reason in (
        ("skip", skip_all, "tests-failed"),
        ("bad", bad, "patch-apply-failed"),
        ("empty", "", "empty-patch"),
    ):
        o = tmp_path / name
        _eval(
            root_eval_store, [{"instance_id": target.instance_id, "model_patch": patch, "model_name_or_path": name}], o
        )
        s = json.loads((o / f"{name}.e2e.json").read_text())
        assert s["resolved_instances"] == 0, (name, s)
        if name != "empty":
            r = json.loads((o / "e2e" / name / target.instance_id / "report.json").read_text())[target.instance_id]
            assert r["reason"] == reason, (name, r["reason"])
        else:
            assert s["empty_patch_ids"] == [target.instance_id]

    # resume: the gold run is not evaluated again
    proc = _eval(root_eval_store, preds, out)
    assert f"resuming: {len(recs)} instance(s)" in proc.stderr
    assert "resolved so far" not in proc.stderr


def test_eval_with_task_files(root_eval_store, tmp_path):
    """With --tasks the records come from the given files (otherwise from the index)."""
    r = next(r for r in records(root_eval_store) if r.format == "swebench")
    out = tmp_path / "idx"
    _eval(
        root_eval_store,
        [{"instance_id": r.instance_id, "model_patch": r.patch, "model_name_or_path": "m"}],
        out,
        "--tasks",
        *map(str, root_eval_store.tasks),
    )
    s = json.loads((out / "m.e2e.json").read_text())
    assert s["resolved_ids"] == [r.instance_id]


def test_hanging_patch_times_out_in_the_sandbox(root_eval_store, tmp_path):
    """A patch whose import never returns: the spec's timeout ends the run, not resolved."""
    import dataclasses
    import difflib
    import shutil

    from minisandbox.catalog import Catalog, spec_for
    from minisandbox.grading.evaluate import SandboxExecutor, evaluate
    from minisandbox.node.runtime import prepare
    from minisandbox.paths import REPO_PATH

    rec = next(r for r in records(root_eval_store) if r.instance_id.startswith("jpvanhal__inflection"))
    spec = dataclasses.replace(spec_for(Catalog.load([root_eval_store.catalog]), rec), timeout=5)
    with prepare(rec.instance_id, str(root_eval_store.store)) as pt:
        work = tmp_path / "state"
        shutil.copytree(pt.layers[REPO_PATH], work, symlinks=True)
    subprocess.run(["git", "apply", "-"], input=rec.patch, text=True, cwd=work, check=True)
    rel = "inflection/__init__.py"
    before = (work / rel).read_text().splitlines(keepends=True)
    after = [*before, "import time\n", "time.sleep(3600)\n"]
    hang = f"diff --git a/{rel} b/{rel}\n" + "".join(difflib.unified_diff(before, after, f"a/{rel}", f"b/{rel}"))
    ev = evaluate(rec, spec, hang, SandboxExecutor(store=str(root_eval_store.store)))
    assert ev.reason == "timeout" and not ev.resolved, ev.output[-2000:]
    assert ev.seconds < 60


def _hang_patch(store, rec, marker: int) -> str:
    """A patch whose import starts `sleep <marker>` (a process to look for afterwards) and
    never returns: a test run that only the spec's timeout (90 s) would end."""
    import difflib
    import shutil

    from minisandbox.node.runtime import prepare
    from minisandbox.paths import REPO_PATH

    with prepare(rec.instance_id, str(store.store)) as pt:
        work = Path(store.path) / f"state-{rec.instance_id}"
        if not work.exists():
            shutil.copytree(pt.layers[REPO_PATH], work, symlinks=True)
            subprocess.run(["git", "apply", "-"], input=rec.patch, text=True, cwd=work, check=True)
    rel = "inflection/__init__.py"
    before = (work / rel).read_text().splitlines(keepends=True)
    after = [*before, "import subprocess, time\n", f"subprocess.Popen(['sleep', '{marker}'])\n", "time.sleep(3600)\n"]
    return f"diff --git a/{rel} b/{rel}\n" + "".join(difflib.unified_diff(before, after, f"a/{rel}", f"b/{rel}"))


def _processes(argv: list[str]) -> list[int]:
    want = ("\0".join(argv) + "\0").encode()
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if Path(f"/proc/{entry}/cmdline").read_bytes() == want:
                    found.append(int(entry))
            except OSError:
                continue
    return found


@pytest.mark.parametrize("signame", ["SIGINT", "SIGTERM"])
def test_an_interrupted_eval_kills_its_sandboxes_and_writes_the_partial_summary(root_eval_store, tmp_path, signame):
    """Ctrl-C (or SIGTERM) on a real `minisandbox eval` with two hanging evaluations running and
    two queued: it exits 130 within seconds (not after the 90 s timeouts), every sandbox
    process is gone, no report is written for what did not finish, the partial summary lists
    all four as incomplete; re-running the command does not reuse anything of it."""
    import signal
    import time

    recs = [r for r in records(root_eval_store) if r.instance_id.startswith("jpvanhal__inflection")]
    assert len(recs) >= 4
    marker = 3000 + os.getpid() % 500 + (7 if signame == "SIGTERM" else 0)
    preds = [
        {
            "instance_id": r.instance_id,
            "model_patch": _hang_patch(root_eval_store, r, marker),
            "model_name_or_path": "hang",
        }
        for r in recs[:4]
    ]
    out = tmp_path / "out"
    cmd = eval_command(root_eval_store, preds, out, "--json", run_id="int")
    proc = subprocess.Popen(
        cmd,
        cwd=root_eval_store.path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=default_signals,
    )
    try:
        deadline = time.monotonic() + 120
        while len(_processes(["sleep", str(marker)])) < 2:  # both running evaluations are inside the tests
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[1][-3000:]
            time.sleep(0.2)
        t0 = time.monotonic()
        proc.send_signal(getattr(signal, signame))
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, stderr[-3000:]
    assert time.monotonic() - t0 < 30
    assert _processes(["sleep", str(marker)]) == []  # nothing of the sandboxes is left
    summary = json.loads(stdout)
    assert summary["interrupted"] == signame
    assert summary["incomplete_ids"] == sorted(p["instance_id"] for p in preds)
    assert summary["completed_ids"] == [] and summary["error_ids"] == [] and summary["submitted_instances"] == 4
    assert json.loads((out / "hang.int.json").read_text()) == {
        k: v for k, v in summary.items() if k not in ("report", "unknown_ids")
    }
    assert not list(out.glob("int/hang/*/report.json"))
    assert f"minisandbox eval: stopped by {signame}: 4 instance(s) not evaluated" in stderr
    assert f"{signame}: stopping" in (out / "int" / "run.log").read_text()
    assert "resolved so far" not in stderr
