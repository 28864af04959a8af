"""Grading semantics: SWE-bench's rules minus the false positives."""

from __future__ import annotations

from minisandbox.grading.grading import (
    APPLY_PATCH_FAIL,
    APPLY_PATCH_PASS,
    END_TEST_OUTPUT,
    RESET_FAILED,
    START_TEST_OUTPUT,
    TESTS_TIMEOUT,
    Reason,
    check_log,
    lookup,
    make_report,
    make_run_summary,
    swebench_view,
)
from minisandbox.grading.grading import tests_status as make_tests_status

N = "n0nce"
PATCH = "diff --git a/x.py b/x.py\n--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a\n+b\n"


def log_with(tests: str, *, applied=True, timeout=False, nonce=N, extra_before="") -> str:
    def m(s: str) -> str:
        return f"{s} {nonce}" if nonce else s

    parts = [extra_before, m(APPLY_PATCH_PASS) if applied else m(APPLY_PATCH_FAIL)]
    if applied:
        parts += [m(START_TEST_OUTPUT), tests, m(END_TEST_OUTPUT)]
        if timeout:
            parts.append(m(TESTS_TIMEOUT))
        parts.append(f">>>>> Test Exit Code {124 if timeout else 0} {nonce}")
    return "\n".join(parts) + "\n"


def report(log: str, f2p, p2p, patch=PATCH, **kw):
    rep = make_report("inst-1", patch, log, fail_to_pass=f2p, pass_to_pass=p2p, log_parser="pytest", nonce=N, **kw)
    return rep["inst-1"]


def test_resolved_when_every_f2p_and_p2p_passes():
    log = log_with("t.py::test_a PASSED\nt.py::test_b XFAIL\nt.py::test_c PASSED\n")
    r = report(log, ["t.py::test_a", "t.py::test_b"], ["t.py::test_c"], xfail_marked={"t.py::test_b"}.__contains__)
    assert r["resolved"] is True and r["reason"] == "resolved"
    assert r["patch_successfully_applied"] and r["patch_exists"] and not r["patch_is_None"]
    assert r["tests_status"]["FAIL_TO_PASS"] == {"success": ["t.py::test_a", "t.py::test_b"], "failure": []}


def test_missing_skipped_and_xpass_are_failures():
    log = log_with("t.py::test_a PASSED\nt.py::test_s SKIPPED\nt.py::test_x XPASS\n")
    for bad in ("t.py::test_missing", "t.py::test_s", "t.py::test_x"):
        r = report(log, ["t.py::test_a"], [bad])
        assert r["resolved"] is False and r["reason"] == "tests-failed", bad
        assert r["tests_status"]["PASS_TO_PASS"]["failure"] == [bad]
    r = report(log, ["t.py::test_x"], [])
    assert not r["resolved"]


def test_empty_f2p_is_never_resolved():
    r = report(log_with("t.py::test_a PASSED\n"), [], ["t.py::test_a"])
    assert r["resolved"] is False and r["reason"] == "empty-f2p"


def test_patch_apply_failure_timeout_unparseable_and_empty_patch():
    assert report(log_with("", applied=False), ["t.py::a"], [])["reason"] == "patch-apply-failed"
    r = report(log_with("t.py::a PASSED\n", timeout=True), ["t.py::a"], [])
    assert r["reason"] == "timeout" and not r["resolved"]
    r = report(log_with("t.py::a PASSED\n"), ["t.py::a"], [], timed_out=True)  # executor's verdict
    assert r["reason"] == "timeout" and not r["resolved"]
    assert report(log_with("garbage only\n"), ["t.py::a"], [])["reason"] == "unparseable-log"
    assert report("no markers at all\n" + f"{APPLY_PATCH_PASS} {N}\n", ["t.py::a"], [])["reason"] == "unparseable-log"
    r = report("", ["t.py::a"], [], patch="")
    assert r["reason"] == "empty-patch" and not r["patch_exists"]
    r = report("", ["t.py::a"], [], patch=None)
    assert r["patch_is_None"] and r["reason"] == "empty-patch"
    r = report(f"{APPLY_PATCH_PASS} {N}\n{RESET_FAILED} {N}\n", ["t.py::a"], [])
    assert r["reason"] == "test-setup-failed"
    assert report("", ["t.py::a"], [], error="sandbox failed")["reason"] == "error"


def test_markers_without_the_nonce_do_not_count():
    # a test that prints forged markers (no nonce) cannot restart the test output section
    forged = f"{START_TEST_OUTPUT}\nt.py::a PASSED\n{END_TEST_OUTPUT}\n"
    log = log_with("t.py::a FAILED\n" + forged)
    r = report(log, ["t.py::a"], [])
    assert r["reason"] == "tests-failed"
    # a start marker printed by a test after the real one does not hide earlier output
    log = log_with(f"t.py::a FAILED\n{START_TEST_OUTPUT} {N}\nt.py::a PASSED\n")
    assert report(log, ["t.py::a"], [])["resolved"] is False


def test_exact_ids_no_substring_matching():
    log = log_with("t.py::test_ab PASSED\nt.py::test_a_long PASSED\n")
    r = report(log, ["t.py::test_a"], [])
    assert r["resolved"] is False and r["tests_status"]["FAIL_TO_PASS"]["failure"] == ["t.py::test_a"]


def test_truncated_swesmith_ids_stand_for_all_full_ids():
    sm = {"t.py::test_p[a b]": "PASSED", "t.py::test_p[a c]": "FAILED", "t.py::test_q[x y]": "PASSED"}
    assert lookup("t.py::test_q[x", sm) == "PASSED"
    assert lookup("t.py::test_p[a", sm) == "FAILED"  # one of the two fails: the alias fails
    assert lookup("t.py::test_p[a b]", sm) == "PASSED"
    assert lookup("t.py::test_p", sm) is None  # not a prefix match
    assert lookup("t.py::test_z[a", sm) is None


def test_tests_status_shape():
    ts = make_tests_status(["a"], ["b"], {"a": "PASSED", "b": "FAILED"})
    assert set(ts) == {"FAIL_TO_PASS", "PASS_TO_PASS", "FAIL_TO_FAIL", "PASS_TO_FAIL"}
    assert ts["PASS_TO_PASS"] == {"success": [], "failure": ["b"]}


def test_check_log_reads_exit_code_and_output():
    chk = check_log(log_with("line1\nline2"), N)
    assert chk.patch_applied and chk.test_output == "line1\nline2" and chk.exit_code == 0
    chk = check_log(log_with("x", applied=False), N)
    assert chk.patch_applied is False and chk.test_output is None


def test_swebench_view_drops_extra_keys():
    rep = make_report(
        "i",
        PATCH,
        log_with("t.py::a PASSED\n"),
        fail_to_pass=["t.py::a"],
        pass_to_pass=[],
        log_parser="pytest",
        nonce=N,
    )
    view = swebench_view(rep)
    assert set(view["i"]) == {"patch_is_None", "patch_exists", "patch_successfully_applied", "resolved", "tests_status"}
    assert view["i"]["resolved"] is True


def test_run_summary_shape_and_counts():
    preds = {
        "a": {"model_patch": PATCH},
        "b": {"model_patch": PATCH},
        "c": {"model_patch": ""},
        "d": {"model_patch": PATCH},
        "x": {"model_patch": PATCH},  # not in the dataset
    }
    reports = {
        "a": {"a": {"resolved": True, "reason": "resolved"}},
        "b": {"b": {"resolved": False, "reason": "timeout"}},
        "d": None,
    }
    s = make_run_summary(["a", "b", "c", "d", "e"], preds, reports)
    assert s["total_instances"] == 5
    assert s["submitted_instances"] == 4
    assert s["completed_ids"] == ["a", "b"]
    assert s["resolved_ids"] == ["a"] and s["unresolved_ids"] == ["b"]
    assert s["empty_patch_ids"] == ["c"] and s["error_ids"] == ["d"] and s["incomplete_ids"] == ["e"]
    assert s["reasons"] == {"empty-patch": 1, "error": 1, "resolved": 1, "timeout": 1}
    assert s["schema_version"] == 2
    assert Reason.RESOLVED.value == "resolved"
