"""Labelling new tasks: the pure rules, then real runs on a local project with a planted
bug, a bug that hangs, a flaky test, a fixture error and a collection error."""

from __future__ import annotations

import dataclasses
import json
import textwrap
from pathlib import Path

import pytest

from minisandbox.catalog import EnvSpec
from minisandbox.grading.evaluate import Evaluation
from minisandbox.grading.label import (
    STATUSES,
    label_env,
    label_from,
    read_results,
    unreached,
    write_labelled,
    write_result,
)
from minisandbox.records import normalize, read_tasks
from tests.fixtures.evaluation import TEST_CMD, _git, diff, write_tree
from tests.fixtures.hostvenv import HostVenvExecutor


def ev(reason: str, sm: dict[str, str], **extra) -> Evaluation:
    entry = {"resolved": False, "reason": reason, "status_map": sm, **extra}
    return Evaluation("x", {"x": entry}, "", "", 0.1)


FIXED = {"t::a": "PASSED", "t::b": "PASSED", "t::c": "PASSED", "t::d": "PASSED", "t::skip": "SKIPPED"}


def test_a_reference_run_graded_tampered_is_fixed_broken():
    """The clean snapshot holds no candidate code: critical findings there mean the checks
    misjudge the environment (its reason stays empty-f2p: it has no FAIL_TO_PASS list)."""
    channel = {"present": True, "critical": ["_pytest.fixtures.FixtureFunctionMarker.__call__ replaced"]}
    r = label_from([ev("empty-f2p", FIXED, results_channel=channel)], [ev("empty-f2p", {"t::a": "FAILED"})])
    assert r["status"] == "fixed-broken" and "graded results-tampered" in r["reason"], r
    assert "FixtureFunctionMarker" in r["reason"]


def test_lists_follow_swesmith_rules():
    bug = {"t::a": "FAILED", "t::b": "PASSED", "t::c": "ERROR"}  # t::d missing: never reported
    r = label_from([ev("empty-f2p", FIXED)], [ev("empty-f2p", bug)])
    assert r["status"] == "labelled" and r["FAIL_TO_PASS"] == ["t::a", "t::d"] and r["PASS_TO_PASS"] == ["t::b"]
    assert r["detail"] == {"error_with_bug": ["t::c"]}  # an ERROR with the bug counts as neither
    assert label_from([ev("empty-f2p", FIXED)], [ev("empty-f2p", FIXED)])["status"] == "no-f2p"
    r = label_from([ev("empty-f2p", FIXED)], [ev("empty-f2p", bug)], max_f2p=1)
    assert r["status"] == "too-broad" and r["detail"]["fail_to_pass"] == ["t::a", "t::d"]


def test_flaky_tests_are_left_out_and_reported():
    flip = {**FIXED, "t::b": "FAILED"}
    bug = {"t::a": "FAILED", "t::b": "PASSED", "t::c": "PASSED", "t::d": "PASSED"}
    r = label_from([ev("empty-f2p", FIXED), ev("tests-failed", flip)], [ev("empty-f2p", bug)] * 2)
    assert r["status"] == "labelled" and r["FAIL_TO_PASS"] == ["t::a"] and r["PASS_TO_PASS"] == ["t::c", "t::d"]
    assert r["detail"]["flaky_tests"] == ["t::b"] and r["counts"]["flaky"] == 1
    # a test that flips in the bug runs only is flaky too
    r = label_from([ev("empty-f2p", FIXED)], [ev("empty-f2p", bug), ev("empty-f2p", {**bug, "t::c": "FAILED"})])
    assert r["detail"]["flaky_tests"] == ["t::c"] and "t::c" not in r["FAIL_TO_PASS"] + r["PASS_TO_PASS"]


def test_hangs_and_broken_runs():
    r = label_from([ev("empty-f2p", FIXED)], [ev("timeout", {})])
    assert r["status"] == "hangs" and "before any test result" in r["reason"]
    r = label_from([ev("empty-f2p", FIXED)], [ev("timeout", {"t::a": "PASSED", "t::b": "PASSED"})])
    assert r["status"] == "labelled" and r["FAIL_TO_PASS"] == ["t::c", "t::d"] and r["bug_timed_out"]
    assert label_from([ev("timeout", FIXED)], [])["status"] == "fixed-broken"
    assert label_from([ev("empty-f2p", FIXED)], [ev("test-setup-failed", {})])["status"] == "bug-broken"
    assert label_from([ev("error", {}, error="no layer")], [])["status"] == "env-broken"


def test_a_resume_pass_decides_what_a_killed_bug_run_never_reached():
    """A bug run killed at the timeout after t::a: t::c passes in the resume pass (a slow
    stretch, not the bug: in neither list, reported), t::d fails there (FAIL_TO_PASS), t::b
    no pass reaches (FAIL_TO_PASS: SWE-smith's rule for a hang)."""
    fixed, bug = [ev("empty-f2p", FIXED)], [ev("timeout", {"t::a": "PASSED"})]
    assert unreached(fixed, bug) == ["t::b", "t::c", "t::d"]  # in the suite's order
    resumed = [ev("timeout", {"t::c": "PASSED", "t::d": "FAILED"})]
    r = label_from(fixed, bug, resumed=resumed)
    assert r["status"] == "labelled" and r["FAIL_TO_PASS"] == ["t::b", "t::d"] and r["PASS_TO_PASS"] == ["t::a"]
    assert r["detail"]["passed_past_kill"] == ["t::c"] and r["counts"]["passed_past_kill"] == 1
    assert "1 passed in a resume pass" in r["reason"]
    assert [x["phase"] for x in r["runs"]] == ["fixed", "bug", "resume"]
    # without the pass, SWE-smith's labels: everything past the kill is FAIL_TO_PASS
    assert label_from(fixed, bug)["FAIL_TO_PASS"] == ["t::b", "t::c", "t::d"]
    # a resume pass that errs or is graded tampered decides nothing
    for bad in ("error", "results-tampered"):
        assert label_from(fixed, bug, resumed=[ev(bad, {"t::c": "PASSED"})])["FAIL_TO_PASS"] == ["t::b", "t::c", "t::d"]
    # nothing to resume: no run killed, or ids that select no file
    assert unreached(fixed, [ev("tests-failed", {"t::a": "PASSED"})]) == []
    assert unreached([ev("empty-f2p", {"a": "PASSED", "b": "PASSED"})], [ev("timeout", {"a": "PASSED"})]) == []


# -- real runs on a local project -----------------------------------------------------------

LAB = textwrap.dedent(
    """\
    import time


    def add(a, b):
        return a + b


    def value():
        return 1


    def wait():
        return True
    """
)
EXTRA = "from lab import add\n\n\ndef twice(x):\n    return add(x, x)\n"


def lab_files(counter: Path) -> dict[str, str]:
    return {
        "lab.py": LAB,
        "lab_extra.py": EXTRA,
        "pyproject.toml": '[project]\nname = "lab"\nversion = "0.1"\n\n[tool.pytest.ini_options]\naddopts = "-p no:randomly"\n',
        "tests/test_extra.py": "import lab_extra\n\n\ndef test_twice():\n    assert lab_extra.twice(2) == 4\n",
        "tests/test_fixture.py": textwrap.dedent(
            """\
            import pytest

            import lab


            @pytest.fixture
            def one():
                assert lab.value() == 1
                return 1


            def test_uses_fixture(one):
                assert one == 1
            """
        ),
        # passes and fails on alternate runs (a counter outside the fresh testbed)
        "tests/test_flaky.py": textwrap.dedent(
            f"""\
            from pathlib import Path

            COUNTER = Path({str(counter)!r})


            def test_coin():
                n = int(COUNTER.read_text()) if COUNTER.exists() else 0
                COUNTER.write_text(str(n + 1))
                assert n % 2 == 0
            """
        ),
        "tests/test_lab.py": textwrap.dedent(
            """\
            import lab


            def test_add():
                assert lab.add(2, 3) == 5


            def test_value():
                assert lab.value() == 1


            def test_wait():
                assert lab.wait()
            """
        ),
    }


@pytest.fixture
def lab(tmp_path: Path, eval_project):
    """The project's clean tree, an executor over the evaluation fixture's venv (pytest), a
    spec with a short timeout, and labelling candidates (bug patches on the clean tree)."""
    files = lab_files(tmp_path / "coin-counter")
    clean = tmp_path / "clean"
    write_tree(clean, files)
    work = tmp_path / "work"
    work.mkdir()
    _git(work, "init", "-q")
    bugs = {
        "planted": {"lab.py": LAB.replace("return a + b", "return a - b")},
        "hang_late": {"lab.py": LAB.replace("    return True", "    while True:\n        time.sleep(1)")},
        "hang_early": {"lab.py": LAB + "\nwhile True:\n    time.sleep(1)\n"},
        "fixture": {"lab.py": LAB.replace("return 1", "return 2")},
        "harmless": {"lab.py": LAB.replace("import time", "import time  # harmless")},
        "collection": {"lab_extra.py": EXTRA.replace("def twice(x):", "def twice(x)")},
    }
    cands = tmp_path / "candidates.jsonl"
    cands.write_text(
        "".join(
            json.dumps(
                {
                    "instance_id": f"lab__lab.00000000.{name}__1",
                    "repo": "swesmith/lab__lab.00000000",
                    "patch": diff(work, files, change),
                }
            )
            + "\n"
            for name, change in bugs.items()
        )
    )
    spec = EnvSpec(
        name="lab.0000",
        kind="bundled",
        source=str(clean),
        commit="0" * 40,
        python="3.11",
        test_cmd=TEST_CMD,
        log_parser="pytest",
        timeout=10,
    )  # ample for a loaded machine
    ex = HostVenvExecutor(clean, eval_project.venv, tmp_path / "tb")
    return spec, ex, cands


def test_labelling_a_local_project(lab, tmp_path):
    spec, ex, cands = lab
    ing = read_tasks([cands], label=True)
    assert not ing.invalid and len(ing.records) == 6
    assert len(read_tasks([cands]).invalid) == 6  # outside label mode they are invalid records
    res = label_env("env-lab", spec, ing.records, ex, repeats=2, workers=1, max_f2p=4, log_dir=tmp_path / "logs")
    t = {iid.split(".")[-1].split("__")[0]: r for iid, r in res.tasks.items()}
    planted = t["planted"]
    assert planted["status"] == "labelled", planted
    assert planted["FAIL_TO_PASS"] == ["tests/test_extra.py::test_twice", "tests/test_lab.py::test_add"]
    assert planted["PASS_TO_PASS"] == [
        "tests/test_fixture.py::test_uses_fixture",
        "tests/test_lab.py::test_value",
        "tests/test_lab.py::test_wait",
    ]
    # the flaky test flipped between the two reference runs: in neither list, reported
    assert planted["detail"]["flaky_tests"] == ["tests/test_flaky.py::test_coin"]
    # the bug hangs in test_wait: killed, the test never reported, so it is FAIL_TO_PASS
    late = t["hang_late"]
    assert late["status"] == "labelled" and late["bug_timed_out"], late
    assert late["FAIL_TO_PASS"] == ["tests/test_lab.py::test_wait"]
    assert "tests/test_lab.py::test_add" in late["PASS_TO_PASS"]
    assert t["hang_early"]["status"] == "hangs"  # hangs at import: no test result at all
    fx = t["fixture"]  # the fixture errors with the bug: neither list; test_value fails
    assert fx["status"] == "labelled" and fx["FAIL_TO_PASS"] == ["tests/test_lab.py::test_value"]
    assert fx["detail"]["error_with_bug"] == ["tests/test_fixture.py::test_uses_fixture"]
    assert t["harmless"]["status"] == "no-f2p"
    # a collection error stops pytest before any test runs: every test is missing, so all
    # are FAIL_TO_PASS (as SWE-smith labels it); the maximum drops such a bug
    col = t["collection"]
    assert col["status"] == "too-broad" and col["counts"]["fail_to_pass"] == 5, col
    # one reference (fixed) run pair for the whole environment, not one per candidate
    assert [r["phase"] for r in planted["runs"]] == ["fixed", "fixed", "bug", "bug"]
    assert len(res.references) == 1
    out = tmp_path / "labels" / "env-lab.json"
    write_result(res, out)
    data = json.loads(out.read_text())
    assert set(data["counts"]) == set(STATUSES) and data["counts"]["labelled"] == 3
    # the labelled records are SWE-smith records the rest of the pipeline accepts
    tasks_out = tmp_path / "labelled.jsonl"
    report = write_labelled(ing.records, read_results([out]), tasks_out, tmp_path / "report.json")
    assert report["labelled"] == 3 and set(report["dropped"]) == {
        r.instance_id
        for r in ing.records
        if r.instance_id.split(".")[-1].split("__")[0] in ("hang_early", "harmless", "collection")
    }
    again = read_tasks([tasks_out])
    assert not again.invalid and [r.fail_to_pass for r in again.records][0] == planted["FAIL_TO_PASS"]
    rec = normalize(json.loads(tasks_out.read_text().splitlines()[0]))
    assert rec.pass_to_pass == planted["PASS_TO_PASS"]


@pytest.mark.slow
def test_a_slow_stretch_is_not_labelled_as_the_bug(lab, tmp_path):
    """The bug makes `add` take 10 s: the whole suite's bug run (twice, then add) is killed
    at the 16 s timeout inside test_add, so test_add, test_value and test_wait never report.
    The resume pass runs only tests/test_lab.py and gets through it: all three pass with the
    bug, so none is FAIL_TO_PASS (SWE-smith's labels would name all three, and validation
    at a quieter moment would then find them passing without the fix)."""
    spec, ex, _ = lab
    files = lab_files(tmp_path / "coin-counter-2")
    work = tmp_path / "work-slow"
    work.mkdir()
    _git(work, "init", "-q")
    slow = {"lab.py": LAB.replace("    return a + b", "    time.sleep(10)\n    return a + b")}
    cand = tmp_path / "slow.jsonl"
    iid = "lab__lab.00000000.slow__1"
    cand.write_text(
        json.dumps({"instance_id": iid, "repo": "swesmith/lab__lab.00000000", "patch": diff(work, files, slow)}) + "\n"
    )
    spec = dataclasses.replace(spec, timeout=16)
    res = label_env("env-lab", spec, read_tasks([cand], label=True).records, ex, workers=1)
    r = res.tasks[iid]
    lab_tests = ["tests/test_lab.py::test_add", "tests/test_lab.py::test_value", "tests/test_lab.py::test_wait"]
    assert r["bug_timed_out"] and [x["phase"] for x in r["runs"]] == ["fixed", "bug", "resume"], r
    assert r["detail"]["passed_past_kill"] == lab_tests, r
    assert not set(lab_tests) & set(r["FAIL_TO_PASS"] + r["PASS_TO_PASS"])
    assert "tests/test_extra.py::test_twice" in r["PASS_TO_PASS"]  # slow, but done before the kill
