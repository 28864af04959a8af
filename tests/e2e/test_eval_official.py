"""End to end: every bundled task's gold patch is resolved by `minisandbox eval` in both
grading modes (strict and `--grading official`) in fresh sandboxes, the applied-tree scan
ran in the sandbox and found nothing in a gold patch, and a tree-level hack (a `.pth`
file with a correct fix) is `forbidden-change` in both modes."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from minisandbox.grading.evalscript import reverse_patch
from minisandbox.records import read_tasks
from tests.fixtures.evaluation import run_eval

# the first test builds the bundled store with the real workflow (minutes, more on a loaded machine)
pytestmark = [pytest.mark.slow, pytest.mark.root, pytest.mark.timeout(3600)]


def _gold(record) -> str:
    return reverse_patch(record.patch) if record.format == "swesmith" else record.patch


@pytest.mark.parametrize("mode", ["strict", "official"])
def test_every_bundled_gold_patch_resolves(root_eval_store, bundled_gold_eval, tmp_path, mode):
    recs = read_tasks(root_eval_store.tasks).records
    assert {r.format for r in recs} == {"swesmith", "swebench"}
    preds = [{"instance_id": r.instance_id, "model_patch": _gold(r), "model_name_or_path": "gold"} for r in recs]
    if mode == "strict":  # the default grading: the session's one strict gold run of these predictions
        assert bundled_gold_eval.preds == preds
        out, proc = bundled_gold_eval.out, bundled_gold_eval.proc
    else:
        out = tmp_path / mode
        proc = run_eval(root_eval_store, preds, out, "--grading", mode)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads((out / "gold.e2e.json").read_text())
    assert summary["resolved_instances"] == len(recs), (summary, proc.stderr[-3000:])
    for r in recs:
        entry = json.loads((out / "e2e" / "gold" / r.instance_id / "report.json").read_text())[r.instance_id]
        assert entry["resolved"] and entry["reason"] == "resolved", (r.instance_id, entry)
        assert entry["suspicious"] == [] and "forbidden" not in entry, (r.instance_id, entry["suspicious"])
        log = (out / "e2e" / "gold" / r.instance_id / "test_output.txt").read_text()
        assert ">>>>> Applied Diff " in log and " raw " in log, r.instance_id  # the tree was scanned in the sandbox
        if mode == "official":
            assert entry["grading"] == "official"
            assert entry["harness"] == ("swe-bench" if r.format == "swebench" else "swe-smith")
            if r.format == "swebench":  # the harness's own map read the run: every listed test, as PASSED
                for t in [*r.fail_to_pass, *r.pass_to_pass]:
                    assert entry["status_map"].get(t) == "PASSED", (r.instance_id, t)
                _same_as_swebench(r, entry, log, tmp_path)


def _same_as_swebench(record, entry: dict, log: str, tmp_path: Path) -> None:
    """The real `swebench` package grades the same sandbox log the same way (the
    differential test of tests/grading on a run of the bundled SWE-bench-form task)."""
    grading = pytest.importorskip("swebench.harness.grading", reason="the `test` extra installs swebench")
    from types import SimpleNamespace

    from swebench.harness.constants import TEST_EXIT_CODE

    path = tmp_path / f"{record.instance_id}.swebench.log"
    path.write_text(
        re.sub(rf"^{re.escape(TEST_EXIT_CODE)} (-?\d+) [0-9a-f]+$", rf"{TEST_EXIT_CODE}: \1", log, flags=re.M)
    )
    spec = SimpleNamespace(
        instance_id=record.instance_id,
        FAIL_TO_PASS=list(record.fail_to_pass),
        PASS_TO_PASS=list(record.pass_to_pass),
        eval_type="pass_and_fail",
        log_parser="parse_log_pytest",
    )
    their_map, found = grading.get_logs_eval(spec, str(path))
    assert found and their_map == entry["status_map"], record.instance_id
    pred = {"instance_id": record.instance_id, "model_patch": record.patch, "model_name_or_path": "gold"}
    theirs = grading.get_eval_report(spec, pred, str(path), include_tests_status=True)[record.instance_id]
    assert theirs["resolved"] is True
    for block in ("FAIL_TO_PASS", "PASS_TO_PASS"):
        assert theirs["tests_status"][block] == entry["tests_status"][block], (record.instance_id, block)


def test_a_pth_file_beside_a_correct_fix_is_forbidden_in_both_modes(root_eval_store, tmp_path):
    rec = next(r for r in read_tasks(root_eval_store.tasks).records if r.format == "swebench")
    pth = (
        "diff --git a/zz_hack.pth b/zz_hack.pth\nnew file mode 100644\n--- /dev/null\n+++ b/zz_hack.pth\n"
        "@@ -0,0 +1 @@\n+import os\n"
    )
    for mode in ("strict", "official"):
        out = tmp_path / f"pth-{mode}"
        proc = run_eval(
            root_eval_store,
            [{"instance_id": rec.instance_id, "model_patch": rec.patch + pth, "model_name_or_path": "adv"}],
            out,
            "--grading",
            mode,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        entry = json.loads((out / "e2e" / "adv" / rec.instance_id / "report.json").read_text())[rec.instance_id]
        assert entry["resolved"] is False and entry["reason"] == "forbidden-change", (mode, entry)
        assert any(f.startswith(".pth file: zz_hack.pth") for f in entry["forbidden"]), entry["forbidden"]
