"""Collection errors in validation and grading, on real pytest output.

The logs are produced here by running the pytest of this test suite on small suites
written to a temp dir: a bug that breaks an import makes pytest stop at collection and
print no per-test line; with `addopts = -rxXs` (common in real repos) not even the
`ERROR <file>` summary line. Under SWE-bench/SWE-smith semantics every listed test has
failed then; only a log with no test-session output at all is `unparseable-log`.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from minisandbox.grading.evaluate import Evaluation
from minisandbox.grading.grading import (
    APPLY_PATCH_PASS,
    END_TEST_OUTPUT,
    START_TEST_OUTPUT,
    TEST_EXIT_CODE,
    Reason,
    make_report,
)
from minisandbox.grading.logparsers import collection_error, parse_log_pytest, session_seen
from minisandbox.grading.validate import classify
from minisandbox.records import TaskRecord

PYTEST = [
    sys.executable,
    "-m",
    "pytest",
    "-p",
    "no:cacheprovider",
    "--disable-warnings",
    "--color=no",
    "--tb=no",
    "--verbose",
]
TESTS = ["tests/test_calc.py::test_add", "tests/test_calc.py::test_sub"]
NONCE = "0123456789abcdef"


def run_pytest(root: Path, files: dict[str, str]) -> str:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    proc = subprocess.run([*PYTEST, "tests/test_calc.py"], cwd=root, capture_output=True, text=True, timeout=120)
    return proc.stdout + proc.stderr


SUITE = {
    "calc.py": "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n",
    "tests/test_calc.py": "from calc import add, sub\n\n\ndef test_add():\n    assert add(1, 2) == 3\n\n\n"
    "def test_sub():\n    assert sub(3, 2) == 1\n",
    "conftest.py": "",  # puts the root on sys.path
}
BROKEN = {"calc.py": "def add(a, b:\n    return a + b\n"}  # SyntaxError at import


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    out = {}
    for name, files in {
        "ok": SUITE,
        "collect_error": {**SUITE, **BROKEN},
        "collect_error_rxXs": {**SUITE, **BROKEN, "pytest.ini": "[pytest]\naddopts = -rxXs\n"},
    }.items():
        out[name] = run_pytest(tmp_path_factory.mktemp(name), files)
    return out


def wrap(test_output: str, *, patch: bool = False) -> str:
    """The test output between the eval script's markers, as the sandbox returns it."""
    head = f"{APPLY_PATCH_PASS} {NONCE}\n" if patch else ""
    return f"{head}{START_TEST_OUTPUT} {NONCE}\n{test_output}\n{END_TEST_OUTPUT} {NONCE}\n{TEST_EXIT_CODE} 2 {NONCE}\n"


def report(log: str, f2p: list[str], p2p: list[str], *, patch: str | None = None) -> dict:
    rep = make_report(
        "t1",
        patch,
        wrap(log, patch=patch is not None),
        fail_to_pass=f2p,
        pass_to_pass=p2p,
        log_parser="pytest",
        nonce=NONCE,
        apply_patch=patch is not None,
    )
    return rep["t1"]


def test_the_real_logs_look_as_the_issue_describes(logs: dict[str, str]) -> None:
    assert "Interrupted: 1 error during collection" in logs["collect_error_rxXs"]
    assert "ERROR tests/test_calc.py" in logs["collect_error"]
    assert "ERROR tests/test_calc.py" not in logs["collect_error_rxXs"]  # -r overridden
    assert parse_log_pytest(logs["collect_error_rxXs"]) == {}
    assert parse_log_pytest(logs["ok"]) == {t: "PASSED" for t in TESTS}


@pytest.mark.parametrize("name", ["collect_error", "collect_error_rxXs"])
def test_a_collection_error_fails_every_listed_test(logs: dict[str, str], name: str) -> None:
    log = logs[name]
    assert session_seen(log, "pytest") and collection_error(log)
    entry = report(log, TESTS[:1], TESTS[1:])
    assert entry["reason"] == Reason.TESTS_FAILED.value and entry["collection_error"] is True
    assert entry["tests_status"]["FAIL_TO_PASS"] == {"success": [], "failure": TESTS[:1]}
    assert entry["tests_status"]["PASS_TO_PASS"] == {"success": [], "failure": TESTS[1:]}


def test_a_gold_run_with_a_collection_error_is_still_a_failure(logs: dict[str, str]) -> None:
    entry = report(logs["collect_error_rxXs"], TESTS, [], patch="diff --git a/x b/x\n")
    assert entry["resolved"] is False and entry["reason"] == Reason.TESTS_FAILED.value


def test_a_passing_run_has_no_collection_error(logs: dict[str, str]) -> None:
    assert session_seen(logs["ok"], "pytest") and not collection_error(logs["ok"])
    entry = report(logs["ok"], TESTS, [], patch="diff --git a/x b/x\n")
    assert entry["resolved"] is True and "collection_error" not in entry


@pytest.mark.parametrize(
    "text",
    [
        "bash: line 1: pytest: command not found",
        "Traceback (most recent call last):\n  File \"<string>\", line 1\nModuleNotFoundError: No module named 'pytest'",
        "",
    ],
)
def test_unparseable_only_without_any_session_output(text: str) -> None:
    assert not session_seen(text, "pytest")
    assert report(text, TESTS, [])["reason"] == Reason.UNPARSEABLE_LOG.value


def test_unittest_session_markers() -> None:
    assert session_seen(
        "----------------------------------------------------------------------\nRan 0 tests in 0.000s\n\nOK",
        "unittest",
    )
    assert not session_seen("python: can't open file 'runtests.py'", "django")


def _evaluation(entry: dict, log: str) -> Evaluation:
    return Evaluation("t1", {"t1": entry}, log, "", 1.0)


def test_validation_accepts_a_start_state_that_breaks_collection(logs: dict[str, str]) -> None:
    """The official dataset's shape: FAIL_TO_PASS = the whole suite, PASS_TO_PASS empty."""
    rec = TaskRecord(
        instance_id="t1",
        format="swesmith",
        repo="swesmith/own__calc.0123abcd",
        patch="diff --git a/x b/x\n",
        fail_to_pass=list(TESTS),
        pass_to_pass=[],
    )
    before = _evaluation(report(logs["collect_error_rxXs"], TESTS, []), logs["collect_error_rxXs"])
    gold = _evaluation(report(logs["ok"], TESTS, [], patch="diff --git a/x b/x\n"), logs["ok"])
    assert classify(rec, [before], [gold])["status"] == "valid"
    # a gold run that cannot even collect is env-broken (F2P fail with the gold patch)
    bad_gold = _evaluation(report(logs["collect_error_rxXs"], TESTS, [], patch="diff --git a/x b/x\n"), "")
    res = classify(rec, [before], [bad_gold])
    assert res["status"] == "env-broken" and res["detail"]["f2p_failing_with_gold"] == sorted(TESTS)
