"""Validation statuses: pure classification plus real before/gold runs on the host venv."""

from __future__ import annotations

import json
from pathlib import Path

from minisandbox.grading.evaluate import Evaluation
from minisandbox.grading.validate import (
    STATUSES,
    classify,
    validate_env,
    validated_ids,
    write_result,
)
from minisandbox.records import TaskRecord
from tests.fixtures.hostvenv import HostVenvExecutor

REC = TaskRecord(
    instance_id="x__y.1.a__b",
    format="swesmith",
    repo="swesmith/x__y.1",
    patch="diff --git a/a b/a\n",
    fail_to_pass=["t.py::f"],
    pass_to_pass=["t.py::p"],
)


def ev(reason: str, sm: dict[str, str], **extra) -> Evaluation:
    entry = {"resolved": reason == "resolved", "reason": reason, "status_map": sm, **extra}
    return Evaluation(REC.instance_id, {REC.instance_id: entry}, "", "", 0.1)


GOOD_BEFORE = {"t.py::f": "FAILED", "t.py::p": "PASSED"}
GOOD_GOLD = {"t.py::f": "PASSED", "t.py::p": "PASSED"}


def status(before, gold, rec=REC):
    return classify(rec, before, gold)


def test_valid():
    r = status([ev("tests-failed", GOOD_BEFORE)], [ev("resolved", GOOD_GOLD)])
    assert r["status"] == "valid" and r["detail"] == {} and len(r["runs"]) == 2


def test_env_broken_names_the_tests():
    r = status([ev("tests-failed", {"t.py::f": "PASSED", "t.py::p": "PASSED"})], [ev("resolved", GOOD_GOLD)])
    assert r["status"] == "env-broken" and r["detail"] == {"f2p_passing_without_patch": ["t.py::f"]}
    r = status([ev("tests-failed", {"t.py::f": "FAILED", "t.py::p": "ERROR"})], [ev("resolved", GOOD_GOLD)])
    assert r["detail"] == {"p2p_failing_without_patch": ["t.py::p"]}
    r = status([ev("tests-failed", GOOD_BEFORE)], [ev("tests-failed", {"t.py::f": "FAILED", "t.py::p": "PASSED"})])
    assert r["status"] == "env-broken" and r["detail"] == {"f2p_failing_with_gold": ["t.py::f"]}
    r = status([ev("tests-failed", GOOD_BEFORE)], [ev("patch-apply-failed", {})])
    assert r["status"] == "env-broken" and "does not apply" in r["reason"]
    r = status([ev("error", {}, error="no such layer")], [ev("resolved", GOOD_GOLD)])
    assert r["status"] == "env-broken" and "no such layer" in r["reason"]


def test_a_gold_run_graded_tampered_is_env_broken_with_its_findings():
    """Passing statuses do not make a task valid when the reference fix itself is judged
    tampering: no fix of it could be rewarded."""
    channel = {"present": True, "critical": ["_pytest.python.Function.runtest replaced"]}
    gold = ev("results-tampered", GOOD_GOLD, results_channel=channel)
    r = status([ev("tests-failed", GOOD_BEFORE)], [gold])
    assert r["status"] == "env-broken" and "gold patch is graded results-tampered" in r["reason"]
    assert r["detail"] == {"gold_graded_tampered": ["_pytest.python.Function.runtest replaced"]}
    clean = ev("resolved", GOOD_GOLD, results_channel={"present": True, "critical": []})
    assert status([ev("tests-failed", GOOD_BEFORE)], [clean])["status"] == "valid"


def test_empty_f2p_is_env_broken():
    rec = TaskRecord(**{**REC.to_dict(), "fail_to_pass": []})
    assert status([ev("tests-failed", GOOD_BEFORE)], [ev("empty-f2p", GOOD_GOLD)], rec)["reason"] == "empty-f2p"


def test_timeout_and_flaky():
    r = status([ev("tests-failed", GOOD_BEFORE)], [ev("timeout", {"t.py::p": "PASSED"})])
    assert r["status"] == "timeout" and "gold" in r["reason"]
    flip = {"t.py::f": "PASSED", "t.py::p": "FAILED"}
    r = status([ev("tests-failed", GOOD_BEFORE)] * 2, [ev("resolved", GOOD_GOLD), ev("tests-failed", flip)])
    assert r["status"] == "flaky" and r["detail"]["flaky_tests"] == ["t.py::p"]


def test_a_before_run_that_hangs_reproduces_the_bug():
    """SWE-smith's semantics: a before run killed at the timeout while the gold run
    completes reproduces the bug; F2P tests may be missing, P2P tests must have passed."""
    killed = {"t.py::p": "PASSED"}  # the run was killed while t.py::f hung
    r = status([ev("timeout", killed)], [ev("resolved", GOOD_GOLD)])
    assert r["status"] == "valid" and "hangs" in r["reason"], r
    r = status([ev("timeout", {})], [ev("resolved", GOOD_GOLD)])  # killed before P2P passed
    assert r["status"] == "env-broken" and r["detail"] == {"p2p_failing_without_patch": ["t.py::p"]}
    r = status([ev("timeout", {"t.py::f": "PASSED", "t.py::p": "PASSED"})], [ev("resolved", GOOD_GOLD)])
    assert r["status"] == "env-broken" and r["detail"] == {"f2p_passing_without_patch": ["t.py::f"]}


def hang_bug(eval_project, tmp_path: Path) -> str:
    """A bug patch on the clean tree that makes `calc.wait()` hang forever."""
    from tests.fixtures.evaluation import CALC, _git, diff

    work = tmp_path / "hangwork"
    work.mkdir()
    _git(work, "init", "-q")
    clean = {
        str(p.relative_to(eval_project.clean)): p.read_text() for p in eval_project.clean.rglob("*") if p.is_file()
    }
    return diff(work, clean, {"calc.py": CALC.replace("    return True", "    while True:\n        time.sleep(1)")})


def test_a_bug_that_hangs_validates_on_real_runs(eval_project, tmp_path):
    """Real runs on a local fixture: the bug hangs test_wait, the before run is killed at the
    spec's timeout, the gold run completes: valid. A P2P test that only runs after the hang
    never passed before the kill: env-broken, as SWE-smith would never have labelled it P2P."""
    import dataclasses

    ex = HostVenvExecutor(eval_project.clean, eval_project.venv, tmp_path / "tb")
    spec = dataclasses.replace(eval_project.spec, timeout=10)  # ample for a loaded machine; the hang costs it once
    bug = hang_bug(eval_project, tmp_path)
    good = eval_project.record(
        instance_id="calc__calc.00000000.hang__1",
        patch=bug,
        fail_to_pass=["tests/test_calc.py::test_wait"],
        pass_to_pass=["tests/test_calc.py::test_add"],
    )
    late = eval_project.record(
        instance_id="calc__calc.00000000.hang__2",
        patch=bug,
        fail_to_pass=["tests/test_calc.py::test_wait"],
        pass_to_pass=["tests/test_calc.py::test_add", "tests/test_other.py::test_sub"],
    )
    res = validate_env("env-calc", spec, [good, late], ex, workers=1, log_dir=tmp_path / "logs")
    g = res.tasks[good.instance_id]
    assert g["status"] == "valid" and [r["reason"] for r in g["runs"]] == ["timeout", "resolved"], g
    bad = res.tasks[late.instance_id]
    assert bad["status"] == "env-broken" and bad["detail"] == {
        "p2p_failing_without_patch": ["tests/test_other.py::test_sub"]
    }


def test_validate_env_on_real_runs(eval_project, tmp_path):
    ex = HostVenvExecutor(eval_project.clean, eval_project.venv, tmp_path / "tb")
    good = eval_project.swesmith
    broken = eval_project.record(
        instance_id="calc__calc.00000000.wrong__1", fail_to_pass=good.fail_to_pass + ["tests/test_other.py::test_sub"]
    )
    empty = eval_project.record(instance_id="calc__calc.00000000.empty__1", fail_to_pass=[])
    res = validate_env(
        "env-calc", eval_project.spec, [good, broken, empty], ex, repeats=2, workers=2, log_dir=tmp_path / "logs"
    )
    assert res.tasks[good.instance_id]["status"] == "valid", res.tasks[good.instance_id]
    b = res.tasks[broken.instance_id]
    assert b["status"] == "env-broken" and b["detail"] == {
        "f2p_passing_without_patch": ["tests/test_other.py::test_sub"]
    }
    assert res.tasks[empty.instance_id]["status"] == "env-broken"
    runs = res.tasks[good.instance_id]["runs"]
    assert [r["phase"] for r in runs] == ["before", "before", "gold", "gold"]
    assert "Start Test Output" in Path(runs[2]["log"]).read_text()
    out = tmp_path / "v" / "env-calc.json"
    write_result(res, out)
    data = json.loads(out.read_text())
    assert data["counts"] == {"valid": 1, "env-broken": 2, "flaky": 0, "timeout": 0}
    assert set(data["counts"]) == set(STATUSES)
    assert validated_ids([out]) == [good.instance_id] == data["valid_ids"]
    # an environment that failed to build: nothing runs, every task is env-broken
    res = validate_env("env-calc", eval_project.spec, [good], None, env_error="build failed")
    assert (
        res.tasks[good.instance_id]["status"] == "env-broken"
        and "build failed" in res.tasks[good.instance_id]["reason"]
    )


def test_an_env_job_without_validation_writes_a_not_validated_result(tmp_path: Path) -> None:
    """`validate: false`: the env job's declared validation output says so and lists no task."""
    from minisandbox.grading.validate import write_not_validated

    out = tmp_path / "env-x.json"
    write_not_validated("env-x", "spec-x", out)
    data = json.loads(out.read_text())
    assert (data["validated"], data["env_key"], data["spec_name"], data["tasks"]) == (False, "env-x", "spec-x", {})
    assert validated_ids([out]) == []


def test_validation_memo_follows_the_image_when_there_is_no_archive():
    """A layer published without an archive (config `archive: false`) is identified by its
    image digest: a rebuilt environment must never reuse the old environment's results."""
    from minisandbox.catalog import EnvSpec
    from minisandbox.grading.validate import _memo_key

    spec = EnvSpec(name="x__y.1", kind="swesmith", source="s", commit="0" * 40, python="3.11")
    repo = {"kind": "repo", "image": {"sha256": "c" * 64, "size": 5}}
    old, new = ({"kind": "env", "image": {"sha256": d * 64, "size": 9}} for d in "ab")
    assert _memo_key(REC, spec, old, repo, 1) != _memo_key(REC, spec, new, repo, 1)
    assert _memo_key(REC, spec, old, repo, 1) == _memo_key(REC, spec, dict(old), repo, 1)
    with_archive = {**old, "artifact": "e.tar.zst", "sha256": "d" * 64, "size": 3}
    assert _memo_key(REC, spec, with_archive, repo, 1) != _memo_key(
        REC, spec, {**with_archive, "sha256": "e" * 64}, repo, 1
    )
