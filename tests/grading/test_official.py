"""`--grading official` (minisandbox.grading.official): SWE-smith's decision rules, the
protections both modes share, and resume across modes. SWE-bench's decision is checked
against the real swebench package in test_official_differential.py; the real reward
hacks in official mode are in tests/security/test_reward_hacks.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from minisandbox.grading.evaluate import read_existing_report
from minisandbox.grading.grading import dumps, make_report
from minisandbox.grading.official import Harness, harness_for, official_tests_status, parse_pytest

DATA = Path(__file__).parent / "data"
NONCE = "5eb6a8d0c0ffee11"
PATCH = "diff --git a/calc.py b/calc.py\n"
T = "tests/test_calc.py::"
MIXED = (DATA / "logs" / "pytest_mixed.log").read_text()


def official(log: str, f2p: list[str], p2p: list[str], fmt: str = "swesmith", **kw) -> dict:
    return make_report("i", PATCH, log, fail_to_pass=f2p, pass_to_pass=p2p, log_parser="pytest", nonce=NONCE,
                       grading="official", task_format=fmt, **kw)["i"]


def test_harness_follows_the_record_format():
    assert harness_for("swesmith") is Harness.SWESMITH and harness_for("swebench") is Harness.SWEBENCH
    rep = official(MIXED, [T + "test_add"], [])
    assert rep["harness"] == "swe-smith" and rep["grading"] == "official"


def test_swesmith_counts_a_missing_test_as_passed_and_swebench_does_not():
    f2p = [T + "test_add", T + "test_renamed_away"]
    smith = official(MIXED, f2p, [])
    assert smith["resolved"] and smith["tests_status"]["FAIL_TO_PASS"]["success"] == f2p
    bench = official(MIXED, f2p, [], fmt="swebench")
    assert not bench["resolved"] and bench["tests_status"]["FAIL_TO_PASS"]["failure"] == [T + "test_renamed_away"]


def test_swesmith_drops_skipped_tests_from_the_ratio():
    sm = {"a": "PASSED", "s": "SKIPPED"}
    ts = official_tests_status(Harness.SWESMITH, ["a", "s"], ["s"], sm)
    assert ts["FAIL_TO_PASS"] == {"success": ["a"], "failure": []}
    assert ts["PASS_TO_PASS"] == {"success": [], "failure": []}
    bench = official_tests_status(Harness.SWEBENCH, ["a", "s"], ["s"], sm)
    assert bench["FAIL_TO_PASS"] == {"success": ["a"], "failure": ["s"]}  # a skipped F2P test fails
    assert bench["PASS_TO_PASS"] == {"success": ["s"], "failure": []}  # a skipped P2P test is kept


def test_real_failures_are_failures_in_both_harnesses():
    for fmt in ("swesmith", "swebench"):
        rep = official(MIXED, [T + "test_div_zero"], [T + "test_add"], fmt=fmt)
        assert not rep["resolved"] and rep["reason"] == "tests-failed"
        assert rep["tests_status"]["FAIL_TO_PASS"]["failure"] == [T + "test_div_zero"]


def test_markers_without_the_nonce_do_not_count_in_official_mode():
    """A test that prints a fake end marker and PASSED lines early in the run: the
    harness would end the graded region there (its markers are fixed text) and never see
    the real FAILED line; only the marker with this run's nonce ends the region here."""
    fake = f"PASSED {T}test_div_zero\n>>>>> End Test Output\n>>>>> Test Exit Code 0"
    forged = MIXED.replace(f">>>>> Start Test Output {NONCE}\n", f">>>>> Start Test Output {NONCE}\n{fake}\n")
    for fmt in ("swesmith", "swebench"):
        rep = official(forged, [T + "test_div_zero"], [], fmt=fmt)
        assert not rep["resolved"] and rep["status_map"][T + "test_div_zero"] == "FAILED", rep
    # no start marker with this run's nonce: nothing is graded at all
    rep = official(MIXED.replace(NONCE, "0" * 16), [T + "test_add"], [])
    assert not rep["resolved"] and rep["reason"] == "patch-apply-failed"


def test_timeouts_and_failed_patches_are_never_resolved():
    timed = MIXED.replace(f">>>>> Test Exit Code 1 {NONCE}", f">>>>> Tests Timed Out {NONCE}")
    assert official(timed, [T + "test_add"], [])["reason"] == "timeout"
    assert official(MIXED, [T + "test_add"], [], timed_out=True)["reason"] == "timeout"
    failed = MIXED.replace(f">>>>> Applied Patch {NONCE}", f">>>>> Patch Apply Failed {NONCE}")
    assert official(failed, [T + "test_add"], [])["reason"] == "patch-apply-failed"
    assert not official(MIXED, [T + "test_add"], [], error="sandbox failed")["resolved"]


def test_official_mode_keeps_the_suspicious_scan():
    patch = "diff --git a/calc.py b/calc.py\n--- a/calc.py\n+++ b/calc.py\n@@ -1 +1,2 @@\n x\n+import os; os._exit(0)\n"
    rep = make_report("i", patch, MIXED, fail_to_pass=[T + "test_add"], pass_to_pass=[], log_parser="pytest",
                      nonce=NONCE, grading="official", task_format="swebench")["i"]
    assert rep["resolved"]  # the run itself passed: the flag is evidence for review, as in strict mode
    assert any(s.startswith("os._exit") for s in rep["suspicious"]), rep["suspicious"]


def test_official_parser_cuts_ids_like_the_harness():
    sm = parse_pytest(MIXED)
    assert sm[T + "test_spaced[one"] == "PASSED"
    assert sm[T + "test_teardown_error"] == "ERROR"  # the later summary line wins
    assert T + "test_xpass" not in sm  # XPASS is not one of the harness's status words


def test_unknown_mode_is_refused():
    with pytest.raises(ValueError):
        make_report("i", PATCH, MIXED, fail_to_pass=[], pass_to_pass=[], log_parser="pytest", grading="lenient")


def test_resume_never_reuses_a_report_of_the_other_mode(tmp_path):
    path = tmp_path / "report.json"
    strict = make_report("i", PATCH, MIXED, fail_to_pass=[T + "test_add"], pass_to_pass=[], log_parser="pytest",
                         nonce=NONCE)
    path.write_text(dumps(strict))
    assert read_existing_report(path, "i") is not None
    assert read_existing_report(path, "i", "official") is None
    path.write_text(dumps({"i": official(MIXED, [T + "test_add"], [])}))
    assert read_existing_report(path, "i", "official") is not None
    assert read_existing_report(path, "i", "strict") is None
    assert json.loads(path.read_text())["i"]["grading"] == "official"
