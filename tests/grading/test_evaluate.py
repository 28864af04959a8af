"""Evaluation end to end on a real local pytest project with the host-venv executor:
the eval script really runs (git apply, patch, timeout, pytest), only the sandbox is
replaced by a plain venv (the sandbox path is covered in tests/e2e/test_eval_sandbox.py)."""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import minisandbox
from minisandbox.grading.evalscript import (
    EvalScript,
    is_protected,
    is_test_support,
    modified_and_new_files,
    patch_paths,
    strip_conda_activation,
    swebench_test_directives,
)
from minisandbox.grading.evalscript import (
    test_files_of as files_of,
)
from minisandbox.grading.evaluate import (
    EvalTarget,
    evaluate,
    load_predictions,
    plan_script,
    run_eval,
)
from minisandbox.records import task_test_files
from tests.fixtures.evaluation import TEST_CMD, hack_task, smith_record
from tests.fixtures.hostvenv import HostVenvExecutor


@pytest.fixture
def host(eval_project, tmp_path):
    def make(snapshot=None):
        return HostVenvExecutor(
            snapshot=snapshot or eval_project.clean, venv=eval_project.venv, testbed=tmp_path / "testbed"
        )

    return make


def smith(eval_project, host, patch_name, *, record=None, **kw):
    rec = record or eval_project.swesmith
    patch = eval_project.patches[patch_name] if patch_name else None
    return evaluate(rec, eval_project.spec, patch, host(), **kw)


def test_gold_resolves_and_no_patch_does_not(eval_project, host):
    ev = smith(eval_project, host, "gold")
    assert ev.resolved and ev.reason == "resolved", ev.output
    assert ev.status_map["tests/test_calc.py::test_add_cases[two [plus] two]"] == "PASSED"
    before = smith(eval_project, host, None, apply_patch=False)
    assert not before.resolved
    assert before.entry["tests_status"]["FAIL_TO_PASS"]["failure"] == eval_project.swesmith.fail_to_pass
    assert before.entry["tests_status"]["PASS_TO_PASS"]["failure"] == []
    # SWE-smith gold is the reverse of the bug patch
    rev = smith(eval_project, host, "bug", reverse=True)
    assert rev.resolved, rev.output


def test_patch_that_does_not_apply(eval_project, host):
    ev = smith(eval_project, host, "not_applying")
    assert not ev.resolved and ev.reason == "patch-apply-failed"
    assert ev.entry["patch_successfully_applied"] is False


def test_fuzzy_fallback_applies_all_or_nothing(eval_project, host):
    ev = smith(eval_project, host, "gold_fuzzy")
    assert ev.resolved, ev.output
    assert "patch --batch" not in ev.output  # the command itself is not echoed ...
    assert "Hunk #1 succeeded" in ev.output or "patching file calc.py" in ev.output  # ... GNU patch ran


@pytest.mark.parametrize(
    "name", ["conftest_plant", "tests_conftest_plant", "test_file_edit", "pyproject_plugin", "sitecustomize"]
)
def test_tampering_patches_are_not_rewarded(eval_project, host, name):
    ev = smith(eval_project, host, name)
    assert not ev.resolved, ev.output
    assert ev.reason == "tests-failed"
    assert "minisandbox: reverted protected path" in ev.output
    fails = ev.entry["tests_status"]["FAIL_TO_PASS"]["failure"]
    assert "tests/test_calc.py::test_add" in fails


def test_tampering_does_not_work_without_the_guard(eval_project, host):
    """The adversarial patches are real: with the anti-tamper step off they do force passes."""
    rec, spec = eval_project.swesmith, eval_project.spec
    ex = host()
    for name in ("conftest_plant", "pyproject_plugin"):
        script = plan_script(rec, spec, eval_project.patches[name], eval_project.clean, setup_task_state=True)
        script.protect = False
        with ex.open(rec) as env:
            res = env.execute(script, timeout=120)
        from minisandbox.grading.grading import make_report

        rep = make_report(
            rec.instance_id,
            "x",
            res.output,
            fail_to_pass=rec.fail_to_pass,
            pass_to_pass=rec.pass_to_pass,
            log_parser="pytest",
            nonce=script.nonce,
        )
        assert rep[rec.instance_id]["resolved"] is True, (name, res.output)


def test_legit_fix_with_an_extra_conftest_still_resolves(eval_project, host):
    ev = smith(eval_project, host, "gold_plus_conftest")
    assert ev.resolved, ev.output


def test_planted_pytest_shadow_is_removed(eval_project, host):
    # the fixture's command is `python -m pytest`: a top-level pytest.py would replace pytest
    ev = smith(eval_project, host, "gold_plus_shadow")
    assert "reverted protected path pytest.py" in ev.output
    assert "reverted protected path _pytest/__init__.py" in ev.output
    assert ev.resolved, ev.output


def test_breaking_a_p2p_test_is_not_resolved(eval_project, host):
    ev = smith(eval_project, host, "break_p2p")
    assert not ev.resolved and ev.reason == "tests-failed"
    assert ev.entry["tests_status"]["PASS_TO_PASS"]["failure"] == ["tests/test_other.py::test_sub"]


def test_hanging_test_times_out(eval_project, host):
    spec = eval_project.spec.__class__(**{**eval_project.spec.to_dict(), "timeout": 3})
    ev = evaluate(eval_project.swesmith, spec, eval_project.patches["hang"], host())
    assert not ev.resolved and ev.reason == "timeout"
    assert ev.seconds < 60


def test_a_command_ending_in_k_selects_the_tests_by_name(eval_project, host):
    """SWE-smith's mypy profile runs `pytest --color=no -rA -k` and selects its data-driven
    cases by name: a file path after `-k` is no expression pytest can parse, so such a
    command gets one `-k` expression of the tests' names, and the whole suite without it."""
    spec = dataclasses.replace(eval_project.spec, test_cmd=eval_project.spec.test_cmd + " -k")
    rec = eval_project.swesmith
    ev = evaluate(rec, spec, eval_project.patches["gold"], host())
    assert ev.resolved and ev.reason == "resolved", ev.output
    before = evaluate(rec, spec, None, host(), apply_patch=False)
    assert before.entry["tests_status"]["FAIL_TO_PASS"]["failure"] == rec.fail_to_pass
    script = plan_script(rec, spec, None, eval_project.clean)
    names = dict.fromkeys(t.rsplit("::", 1)[-1].split("[", 1)[0] for t in [*rec.fail_to_pass, *rec.pass_to_pass])
    assert script.test_args == [" or ".join(names)] and "[" not in script.test_args[0]
    whole = plan_script(eval_project.record(fail_to_pass=[], pass_to_pass=[]), spec, None, eval_project.clean)
    assert whole.test_args == [] and not whole.full_test_cmd().endswith("-k")
    assert whole.full_test_cmd() == eval_project.spec.test_cmd


def test_a_selection_runs_exactly_those_tests_not_their_files(eval_project):
    """Labelling's resume pass selects the tests a killed run never reached: their node ids,
    in order (their whole files would run the slow tests before them again); a spec that
    selects by `-k` keeps its expression."""
    rec = eval_project.swesmith
    ids = [*rec.fail_to_pass, *rec.pass_to_pass][::-1]
    script = plan_script(rec, eval_project.spec, None, eval_project.clean, select=ids)
    assert script.test_args == ids
    files = plan_script(rec, eval_project.spec, None, eval_project.clean).test_args
    assert files != ids and all("::" not in f for f in files)
    assert files == sorted(files, key=lambda f: f.split("/"))  # the whole suite's order (suite_order)
    k = dataclasses.replace(eval_project.spec, test_cmd=eval_project.spec.test_cmd + " -k")
    assert plan_script(rec, k, None, eval_project.clean, select=ids).test_args[0].count(" or ") >= 1


def test_test_files_run_in_the_suites_order_not_the_lists():
    """A task is labelled from the whole suite; its files run in that order (each
    directory's entries by name), whatever order FAIL_TO_PASS and PASS_TO_PASS name them."""
    from minisandbox.grading.evaluate import suite_order

    named = ["tests/test_ticking.py", "tests/b/test_x.py", "tests/test_a.py", "tests/test_utils.py"]
    assert suite_order(named) == [
        "tests/b/test_x.py",
        "tests/test_a.py",
        "tests/test_ticking.py",
        "tests/test_utils.py",
    ]
    # pytest 7 and older took a directory's files before its subdirectories ("files and
    # directories are now collected in alphabetical order jointly" is pytest 8's change)
    assert suite_order(named, files_first=True) == [
        "tests/test_a.py",
        "tests/test_ticking.py",
        "tests/test_utils.py",
        "tests/b/test_x.py",
    ]


def test_the_suites_order_follows_the_pytest_the_spec_pins(eval_project):
    """A profile pinning pytest 7 runs its task's files in pytest 7's collection order."""
    rec = eval_project.swesmith._replace(
        fail_to_pass=["tests/a/test_deep.py::test_a"],
        pass_to_pass=["tests/test_top.py::test_b"],
    )
    order = {}
    for pin in ("pytest==7.4.4", "pytest==8.3.3"):
        others = tuple(r for r in eval_project.spec.requirements if not r.lower().startswith("pytest=="))
        spec = dataclasses.replace(eval_project.spec, requirements=(*others, pin))
        order[pin] = plan_script(rec, spec, None, eval_project.clean, select=None).test_args
    assert order["pytest==7.4.4"] == ["tests/test_top.py", "tests/a/test_deep.py"]
    assert order["pytest==8.3.3"] == ["tests/a/test_deep.py", "tests/test_top.py"]


def test_doctests_of_the_file_the_bug_is_in_grade_the_candidates_code(eval_project, tmp_path):
    """A suite run with `--doctest-modules` (tldextract's) lists doctests of the library
    module the bug is in as FAIL_TO_PASS (`calc.py::calc.add`). That file is code under
    test: the task state keeps it (removed, the suite could not import it) and grading
    does not put its bug-free reference back (which graded the fixed code whatever the
    candidate did: the run without a patch passed every test, and the gold patch found no
    file to apply to)."""
    doc_calc = 'def add(a, b):\n    """\n    >>> add(2, 3)\n    5\n    """\n    return a + b\n'
    files = {
        "calc.py": doc_calc,
        "tests/test_calc.py": "import calc\n\n\ndef test_add():\n    assert calc.add(2, 3) == 5\n",
    }
    t = hack_task(tmp_path, "doctests", files, "calc.py", test_cmd=TEST_CMD + " --doctest-modules")
    f2p = ["calc.py::calc.add", "tests/test_calc.py::test_add"]
    rec = smith_record("calc__calc.00000000.func_pm_op_change__doc", t.bug, f2p, [])
    assert task_test_files(f2p, rec.patch) == ["tests/test_calc.py"]

    def run(patch, **kw):
        ex = HostVenvExecutor(t.repo, eval_project.venv, tmp_path / f"tb-{len(list(tmp_path.iterdir()))}")
        return evaluate(rec, t.spec, patch, ex, **kw)

    before = run(None, apply_patch=False)
    assert not before.resolved and before.entry["tests_status"]["FAIL_TO_PASS"]["failure"] == f2p, before.output
    gold = run(t.bug, reverse=True)
    assert gold.resolved and gold.reason == "resolved", gold.output


def test_empty_f2p_list(eval_project, host):
    rec = eval_project.record(fail_to_pass=[])
    ev = evaluate(rec, eval_project.spec, eval_project.patches["gold"], host())
    assert not ev.resolved and ev.reason == "empty-f2p"


def test_empty_patch_is_not_run(eval_project, host):
    ev = evaluate(eval_project.swesmith, eval_project.spec, "", host())
    assert ev.reason == "empty-patch" and ev.output == ""


def test_swebench_record_with_test_patch(eval_project, host):
    rec = eval_project.swebench
    ex = host(eval_project.buggy_base)
    gold = evaluate(rec, eval_project.spec, rec.patch, ex)
    assert gold.resolved, gold.output
    none = evaluate(rec, eval_project.spec, None, ex, apply_patch=False)
    assert not none.resolved and none.entry["tests_status"]["PASS_TO_PASS"]["failure"] == []
    assert set(none.entry["tests_status"]["FAIL_TO_PASS"]["failure"]) == set(rec.fail_to_pass)
    tamper = evaluate(rec, eval_project.spec, eval_project.patches["test_file_edit"], ex)
    assert not tamper.resolved and tamper.reason == "tests-failed"


def test_run_eval_parallel_resume_and_summary(eval_project, tmp_path):
    rec = eval_project.swesmith
    recs = {
        "a": eval_project.record(instance_id="calc__calc.00000000.a__1"),
        "b": eval_project.record(instance_id="calc__calc.00000000.b__2"),
        "c": eval_project.record(instance_id="calc__calc.00000000.c__3"),
    }
    preds_file = tmp_path / "preds.jsonl"
    lines = [
        {
            "instance_id": recs["a"].instance_id,
            "model_patch": eval_project.patches["gold"],
            "model_name_or_path": "m/x",
        },
        {
            "instance_id": recs["b"].instance_id,
            "model_patch": eval_project.patches["conftest_plant"],
            "model_name_or_path": "m/x",
        },
        {"instance_id": recs["c"].instance_id, "model_patch": "", "model_name_or_path": "m/x"},
    ]
    preds_file.write_text("".join(json.dumps(x) + "\n" for x in lines))
    preds = load_predictions(preds_file)
    targets = {
        r.instance_id: EvalTarget(
            r, eval_project.spec, HostVenvExecutor(eval_project.clean, eval_project.venv, tmp_path / f"tb-{k}")
        )
        for k, r in recs.items()
    }
    seen: list[str] = []
    out = tmp_path / "out"
    summary, path = run_eval(preds, targets, out, run_id="r1", workers=2, progress=seen.append)
    assert path == out / "m__x.r1.json" and json.loads(path.read_text()) == summary
    assert summary["resolved_ids"] == [recs["a"].instance_id]
    assert summary["unresolved_ids"] == [recs["b"].instance_id]
    assert summary["empty_patch_ids"] == [recs["c"].instance_id]
    assert summary["reasons"] == {"empty-patch": 1, "resolved": 1, "tests-failed": 1}
    assert len([s for s in seen if s.startswith("[")]) == 3
    rep = json.loads((out / "r1" / "m__x" / recs["a"].instance_id / "report.json").read_text())
    assert rep[recs["a"].instance_id]["resolved"] is True
    assert (out / "r1" / "m__x" / recs["a"].instance_id / "eval.sh").exists()
    # resume: nothing is run again
    seen.clear()
    summary2, _ = run_eval(preds, targets, out, run_id="r1", workers=2, progress=seen.append)
    assert summary2 == summary
    assert seen and seen[0].startswith("resuming: 3 instance(s)") and not any(s.startswith("[") for s in seen)
    del rec


# ---------------------------------------------------------------- pure helpers


def test_patch_paths_and_new_files(eval_project):
    p = eval_project.patches
    assert patch_paths(p["conftest_plant"]) == ["conftest.py"]
    assert modified_and_new_files(p["test_patch"]) == ([], ["tests/test_calc.py"])
    assert modified_and_new_files(p["gold"]) == (["calc.py"], [])


def test_modified_and_new_files_read_names_as_patch_paths_does():
    """One reader of header names (`_header_names`) for both: quoted names unescaped, a
    tab's time stamp cut, `a/`/`b/` dropped (SWE-bench's unidiff), `/dev/null` sides."""
    quoted = '--- "a/t\\303\\251 s.py"\n+++ "b/t\\303\\251 s.py"\n@@ -1 +1 @@\n-a\n+b\n'
    assert modified_and_new_files(quoted) == (["té s.py"], [])
    stamped = "--- a/x y.py\t2020-01-01 00:00:00\n+++ b/x y.py\t2020-01-01\n@@ -1 +1 @@\n-a\n+b\n"
    assert modified_and_new_files(stamped) == (["x y.py"], [])
    both = "--- /dev/null\n+++ b/tests/new dir/t.py\n@@ -0,0 +1 @@\n+x\n--- a/d.py\n+++ /dev/null\n@@ -1 +0,0 @@\n-x\n"
    assert modified_and_new_files(both) == (["d.py"], ["tests/new dir/t.py"])
    assert modified_and_new_files("--- x.py\n+++ x.py\n@@ -1 +1 @@\n-a\n+b\n") == (["x.py"], [])
    for patch in (quoted, stamped, both):
        assert set(sum(modified_and_new_files(patch), [])) <= set(patch_paths(patch))
    rename = (
        "diff --git a/x.py b/tests/conftest.py\nsimilarity index 100%\nrename from x.py\nrename to tests/conftest.py\n"
    )
    assert set(patch_paths(rename)) == {"x.py", "tests/conftest.py"}


def test_is_protected():
    for p in (
        "conftest.py",
        "a/b/conftest.py",
        "tests/helpers.py",
        "pkg/tests/data.json",
        "test_x.py",
        "pkg/x_test.py",
        "setup.cfg",
        "tox.ini",
        "pytest.ini",
        "pyproject.toml",
        "sitecustomize.py",
        "./conftest.py",
        "x/__pycache__/y.cpython-310.pyc",
        ".pytest.ini",
        "pytest.py",
        "_pytest/x.py",
    ):
        assert is_protected(p), p
    for p in (
        "calc.py",
        "django/test/testcases.py",
        "sympy/testing/pytest.py",
        "src/pkg/core.py",
        "testing.py",
        "src/_pytest/python.py",
    ):
        assert not is_protected(p), p


def test_test_directives_and_files():
    tp = "diff --git a/tests/test_a.py b/tests/test_a.py\ndiff --git a/tests/data.json b/tests/data.json\n"
    assert swebench_test_directives(tp, "o/r") == ["tests/test_a.py"]
    dj = "diff --git a/tests/admin_views/tests.py b/tests/admin_views/tests.py\n"
    assert swebench_test_directives(dj, "django/django") == ["admin_views.tests"]
    assert files_of(["a.py::t", "a.py::u[x y]", "b.py::C::t", "no_colons"]) == ["a.py", "b.py"]
    assert (
        strip_conda_activation("source /opt/miniconda3/bin/activate; conda activate testbed; pytest -x") == "pytest -x"
    )


def test_script_embeds_content_safely():
    s = EvalScript(
        test_cmd="true",
        timeout=5,
        patch="EOF\n'EOF'\n$(rm -rf /)\n",
        reference_files={"tests/a b.py": b"x = '$(boom)'\n", "tests/gone.py": None},
    )
    text = s.render()
    assert "$(rm -rf /)" not in text and "$(boom)" not in text  # all content is base64
    assert f">>>>> Start Test Output {s.nonce}" in text
    with pytest.raises(ValueError, match="not a repo-relative path"):
        EvalScript(test_cmd="true", timeout=5, reference_files={"../x": b""}).render()


def test_reverse_patch_roundtrip_and_apply(eval_project, tmp_path):
    from minisandbox.grading.evalscript import reverse_patch

    p = eval_project.patches
    assert reverse_patch(p["bug"]) == p["gold"]
    assert reverse_patch(reverse_patch(p["test_patch"])) == p["test_patch"]
    assert "deleted file mode" in reverse_patch(p["test_patch"])
    # the reversed bug, applied as a plain prediction, resolves the SWE-smith task
    ex = HostVenvExecutor(eval_project.clean, eval_project.venv, tmp_path / "tb")
    ev = evaluate(eval_project.swesmith, eval_project.spec, reverse_patch(eval_project.swesmith.patch), ex)
    assert ev.resolved, ev.output


def test_bash_revert_patterns_match_is_protected(eval_project, host):
    """The script's case patterns and `is_protected` must name the same paths."""
    paths = [
        "conftest.py",
        "a/conftest.py",
        "tests/helper.py",
        "pkg/tests/data.json",
        "pkg/test_x.py",
        "pkg/x_test.py",
        "tox.ini",
        "pkg/setup.cfg",
        "pytest.py",
        "_pytest/y.py",
        "pluggy/z.py",
        "py/__init__.py",
        "src/py/__init__.py",
        "pkg/mod.py",
        "testing/util.py",
        "test/foo.py",
        "pkg/testing.py",
        "pkg/_testing/x.py",
        "pkg/testdata/expected.txt",
        "docs/tests.txt",
        "pkg/tests.py",
        "sitecustomize.py",
        "pkg/pytest.py",
        "x.pyc",
    ]
    patch = "".join(
        f"diff --git a/{p} b/{p}\nnew file mode 100644\n--- /dev/null\n+++ b/{p}\n@@ -0,0 +1 @@\n+x = 1\n"
        for p in paths
    )
    ev = evaluate(eval_project.swesmith, eval_project.spec, patch, host())
    assert ev.entry["patch_successfully_applied"], ev.output
    reverted = {
        line.split("reverted protected path ", 1)[1].strip()
        for line in ev.output.splitlines()
        if "reverted protected path " in line
    }
    # test-support code (`testing/`, `test/`) too: this task's own patch names none
    assert reverted == {p for p in paths if is_protected(p) or is_test_support(p)}, ev.output


# ---------------------------------------------------------------- results that cannot go stale


def _preds(tmp_path, items, name="preds.jsonl"):
    path = tmp_path / name
    path.write_text(
        "".join(json.dumps({"instance_id": i, "model_patch": p, "model_name_or_path": m}) + "\n" for i, p, m in items)
    )
    return load_predictions(path)


def test_resume_reuses_a_report_only_when_every_input_is_unchanged(eval_project, tmp_path):
    """A new checkpoint under the same model name (another patch), another run id, a changed
    spec or grading mode: evaluated again. Unchanged: reused."""

    from minisandbox.grading.evaluate import instance_dir

    rec = eval_project.swesmith
    iid = rec.instance_id
    ex = HostVenvExecutor(eval_project.clean, eval_project.venv, tmp_path / "tb")
    targets = {iid: EvalTarget(rec, eval_project.spec, ex)}
    out = tmp_path / "out"
    bad = _preds(tmp_path, [(iid, eval_project.patches["break_p2p"], "m/x")])
    gold = _preds(tmp_path, [(iid, eval_project.patches["gold"], "m/x")])

    def run(preds, run_id="r1", tgt=targets, grading="strict"):
        seen: list[str] = []
        summary, _ = run_eval(preds, tgt, out, run_id=run_id, progress=seen.append, grading=grading)
        return summary, [s for s in seen if s.startswith("[")]

    s1, ran = run(bad)
    assert s1["unresolved_ids"] == [iid] and len(ran) == 1
    d = instance_dir(out, "r1", "m/x", iid)
    assert d == out / "r1" / "m__x" / iid
    assert (d / "patch.diff").read_text() == eval_project.patches["break_p2p"]
    log = (d / "run_instance.log").read_text()
    assert f"Result for {iid}: resolved: False" in log and " - INFO - " in log
    inputs = json.loads((d / "report.json").read_text())[iid]["eval_inputs"]
    assert set(inputs) == {
        "patch_sha256",
        "grading",
        "grader_version",
        "task_sha256",
        "spec_sha256",
        "executor",
        "layers",
    }
    # unchanged: reused, nothing runs
    s2, ran = run(bad)
    assert (s2, ran) == (s1, [])
    # the same model name with another patch (a new checkpoint): evaluated again, the new verdict
    s3, ran = run(gold)
    assert s3["resolved_ids"] == [iid] and len(ran) == 1
    assert (d / "patch.diff").read_text() == eval_project.patches["gold"]
    # another run id: its own directory, evaluated there
    s4, ran = run(gold, run_id="r2")
    assert s4["resolved_ids"] == [iid] and len(ran) == 1 and (out / "r2" / "m__x" / iid / "report.json").is_file()
    # a changed spec (timeout) or the other grading mode: evaluated again
    spec2 = dataclasses.replace(eval_project.spec, timeout=eval_project.spec.timeout + 1)
    _, ran = run(gold, tgt={iid: EvalTarget(rec, spec2, ex)})
    assert len(ran) == 1
    _, ran = run(gold, tgt={iid: EvalTarget(rec, spec2, ex)})
    assert ran == []
    _, ran = run(gold, tgt={iid: EvalTarget(rec, spec2, ex)}, grading="official")
    assert len(ran) == 1
    # a changed task record (its PASS_TO_PASS list): evaluated again
    rec2 = rec._replace(pass_to_pass=rec.pass_to_pass[:1])
    _, ran = run(gold, tgt={iid: EvalTarget(rec2, spec2, ex)})
    assert len(ran) == 1
    # the run log holds every invocation
    assert (out / "r1" / "run.log").read_text().count("run r1: 1 instance(s)") == 7


def test_resume_with_changed_layers_or_unknown_layers_evaluates_again(eval_project, tmp_path):
    rec = eval_project.swesmith
    iid = rec.instance_id

    class Layers(HostVenvExecutor):
        digests: list[str] | None = ["layer-a"]

        def layer_digests(self, record):
            return self.digests

    ex = Layers(eval_project.clean, eval_project.venv, tmp_path / "tb")
    preds = _preds(tmp_path, [(iid, "", "m")])  # empty patch: nothing runs, but the report is kept
    out = tmp_path / "out"

    def ran() -> int:
        seen: list[str] = []
        run_eval(preds, {iid: EvalTarget(rec, eval_project.spec, ex)}, out, progress=seen.append)
        return len([s for s in seen if s.startswith("[")])

    assert ran() == 1 and ran() == 0
    ex.digests = ["layer-b"]  # the store re-published the task's environment
    assert ran() == 1 and ran() == 0
    ex.digests = None  # layers that cannot be named: never reused
    assert ran() == 1 and ran() == 1


def _grader_version_of(src: Path) -> str:
    """`grader_version()` of the package copy under `src`, in a fresh interpreter."""
    code = "from minisandbox.grading.evaluate import grader_version; print(grader_version())"
    out = subprocess.run(
        [sys.executable, "-c", code], env={"PYTHONPATH": str(src)}, capture_output=True, text=True, check=True
    )
    return out.stdout.strip()


def test_grader_version_changes_with_any_source_the_verdict_rests_on(tmp_path):
    """A resumed report is reused only under the same grader version. A fix in the executor
    (what the test command can see) must invalidate reports graded before it: with only
    `minisandbox.grading` hashed, a report graded resolved by a hack the fix stops was reused."""
    src = tmp_path / "src"
    shutil.copytree(
        Path(minisandbox.__file__).resolve().parent, src / "minisandbox", ignore=shutil.ignore_patterns("__pycache__")
    )
    before = _grader_version_of(src)
    for rel in ("sandbox/sandbox.py", "node/cache.py", "pipeline/__init__.py", "logformats.py", "catalog.py"):
        f = src / "minisandbox" / rel
        f.write_text(f.read_text() + "\n# a fix\n")
        after = _grader_version_of(src)
        assert after != before, rel
        before = after


def test_summary_counts_whitespace_patches_as_empty_on_every_run(eval_project, tmp_path):
    rec = eval_project.swesmith
    iid = rec.instance_id
    ex = HostVenvExecutor(eval_project.clean, eval_project.venv, tmp_path / "tb")
    preds = _preds(tmp_path, [(iid, "\n  \n", "m")])
    first, _ = run_eval(preds, {iid: EvalTarget(rec, eval_project.spec, ex)}, tmp_path / "o", progress=lambda s: None)
    again, _ = run_eval(preds, {iid: EvalTarget(rec, eval_project.spec, ex)}, tmp_path / "o", progress=lambda s: None)
    assert first == again
    assert first["empty_patch_ids"] == [iid] and first["completed_ids"] == [] and first["unresolved_ids"] == []
    assert first["reasons"] == {"empty-patch": 1}


def test_stopping_a_run_kills_what_runs_and_writes_the_partial_summary(eval_project, tmp_path):
    """StopSignal.stop() from another thread (what Ctrl-C does in the CLI's main thread): the
    hanging evaluation is killed at once, the queued ones never start, no report is written
    for them, and the summary lists them as incomplete; the next run evaluates them."""
    import threading
    import time

    from minisandbox.grading.evaluate import EvalInterrupted, StopSignal

    recs = [eval_project.record(instance_id=f"calc__calc.00000000.s__{n}") for n in range(3)]
    preds = _preds(tmp_path, [(r.instance_id, eval_project.patches["hang"], "m") for r in recs])
    spec = eval_project.spec.__class__(**{**eval_project.spec.to_dict(), "timeout": 600})
    targets = {
        r.instance_id: EvalTarget(r, spec, HostVenvExecutor(eval_project.clean, eval_project.venv, tmp_path / "tb"))
        for r in recs
    }
    stop = StopSignal()
    seen: list[str] = []
    out = tmp_path / "out"
    timer = threading.Timer(8.0, stop.stop)
    timer.start()
    t0 = time.monotonic()
    with pytest.raises(EvalInterrupted) as info:
        run_eval(preds, targets, out, workers=1, progress=seen.append, stop=stop)
    timer.cancel()
    assert time.monotonic() - t0 < 60  # not 600 s: the hanging test was killed
    summary = info.value.summary
    assert json.loads(info.value.path.read_text()) == summary
    assert summary["interrupted"] and summary["completed_ids"] == [] and summary["error_ids"] == []
    assert summary["incomplete_ids"] == sorted(preds) and summary["submitted_instances"] == 3
    assert not list(out.glob("minisandbox/m/*/report.json"))
    assert not any(s.startswith("[") for s in seen)
