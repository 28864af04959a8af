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
from minisandbox.grading.official import (
    Harness,
    harness_for,
    official_refusal,
    official_tests_status,
    parse_pytest,
    parse_swesmith_pytest,
)

DATA = Path(__file__).parent / "data"
NONCE = "5eb6a8d0c0ffee11"
PATCH = "diff --git a/calc.py b/calc.py\n"
T = "tests/test_calc.py::"
MIXED = (DATA / "logs" / "pytest_mixed.log").read_text()


def official(log: str, f2p: list[str], p2p: list[str], fmt: str = "swesmith", **kw) -> dict:
    return make_report(
        "i",
        PATCH,
        log,
        fail_to_pass=f2p,
        pass_to_pass=p2p,
        log_parser="pytest",
        nonce=NONCE,
        grading="official",
        task_format=fmt,
        **kw,
    )["i"]


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
    rep = make_report(
        "i",
        patch,
        MIXED,
        fail_to_pass=[T + "test_add"],
        pass_to_pass=[],
        log_parser="pytest",
        nonce=NONCE,
        grading="official",
        task_format="swebench",
    )["i"]
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
    strict = make_report(
        "i", PATCH, MIXED, fail_to_pass=[T + "test_add"], pass_to_pass=[], log_parser="pytest", nonce=NONCE
    )
    path.write_text(dumps(strict))
    assert read_existing_report(path, "i") is not None
    assert read_existing_report(path, "i", "official") is None
    path.write_text(dumps({"i": official(MIXED, [T + "test_add"], [])}))
    assert read_existing_report(path, "i", "official") is not None
    assert read_existing_report(path, "i", "strict") is None
    assert json.loads(path.read_text())["i"]["grading"] == "official"


# ------------------------------------------------------------------ what official mode accepts

ACTIVATE = "source /opt/miniconda3/bin/activate; conda activate testbed; "


@pytest.mark.parametrize(
    "cmd,parser,fmt,refused",
    [
        (ACTIVATE + "pytest --disable-warnings --color=no --tb=no --verbose", "pytest", "swebench", True),
        (ACTIVATE + "pytest --no-header -rA --tb=no -p no:cacheprovider", "pytest", "swebench", False),
        ("python -m pytest -vrA tests", "pytest_options", "swebench", False),
        ("pytest -r a", "pytest", "swebench", True),  # `a`: all but the passes
        ("pytest -k rA", "matplotlib", "swebench", True),  # `rA` is -k's value here
        ("pytest -v", "pytest_v2", "swebench", False),  # pytest_v2 and seaborn also read `-v` lines
        ("pytest -v", "seaborn", "swebench", False),
        ("tox --current-env -epy39 -v --", "pytest_v2", "swebench", False),  # pytest's options are not visible
        ("./tests/runtests.py --verbosity 2", "django", "swebench", False),
        (ACTIVATE + "pytest --disable-warnings --color=no --tb=no --verbose", "pytest", "swesmith", False),
        ("pytest -rA --color=no", "pytest", "swesmith", False),
        ("pytest --color=no", "pytest", "swesmith", True),
        ("pytest -rA", "junit", "swebench", True),  # a parser official mode does not know
    ],
)
def test_official_mode_refuses_what_the_harness_cannot_read(cmd, parser, fmt, refused):
    why = official_refusal(cmd, parser, fmt)
    assert (why is not None) is refused, why
    if why:
        assert "\n" not in why and ("-rA" in why or "--grading strict" in why)


def test_every_catalog_spec_is_accepted():
    """The shipped catalogs (SWE-bench with its own commands, SWE-smith, the bundled set
    whose SWE-bench-form spec now runs SWE-bench's `pytest -rA`) are all gradable."""
    import yaml

    from minisandbox.catalog import DEFAULT_TEST_CMD

    root = Path(__file__).resolve().parents[2] / "config" / "catalog"
    seen = 0
    for name in ("swebench.yaml", "swesmith.yaml", "bundled.yaml"):
        for spec in yaml.safe_load((root / name).read_text())["specs"]:
            fmt = "swebench" if name == "swebench.yaml" or "@" in spec["name"] else "swesmith"
            assert (
                official_refusal(spec.get("test_cmd", DEFAULT_TEST_CMD), spec.get("log_parser", "pytest"), fmt) is None
            ), spec["name"]
            seen += 1
    assert seen > 300


class _NeverOpened:
    """An executor that fails the test if an evaluation reaches it."""

    prepares_task_state = False

    def open(self, record):
        raise AssertionError(f"{record.instance_id} was run although official mode refuses it")


def test_a_task_official_mode_cannot_read_is_refused_before_it_runs(eval_project, tmp_path):
    from minisandbox.grading.evaluate import EvalTarget, evaluate, run_eval
    from minisandbox.grading.official import OfficialGradingRefused

    rec = eval_project.swebench
    spec = eval_project.spec  # `pytest ... --verbose`-style command, no -rA
    assert official_refusal(spec.test_cmd, spec.log_parser, rec.format)
    with pytest.raises(OfficialGradingRefused) as err:
        evaluate(rec, spec, rec.patch, _NeverOpened(), grading="official")
    msg = str(err.value)
    assert msg.count("\n") == 0 and rec.instance_id in msg and spec.name in msg and "-rA" in msg
    preds = {rec.instance_id: {"instance_id": rec.instance_id, "model_patch": rec.patch, "model_name_or_path": "m"}}
    with pytest.raises(OfficialGradingRefused):
        run_eval(
            preds,
            {rec.instance_id: EvalTarget(rec, spec, _NeverOpened())},
            tmp_path / "out",
            grading="official",
            progress=lambda line: None,
        )
    assert not (tmp_path / "out").exists()
    # the same task in the default mode goes on to the executor (strict reads the `-v` lines)
    ev = evaluate(rec, spec, rec.patch, _NeverOpened())
    assert ev.reason == "error" and "was run" in ev.entry["error"]


def test_swesmith_harness_reads_verbose_lines_like_swesmith():
    log = (
        "tests/t.py::test_a PASSED                                   [ 33%]\n"
        "tests/t.py::test_b FAILED                                   [ 66%]\n"
        "tests/t.py::test_c SKIPPED (why)                            [100%]\n"
        "FAILED tests/t.py::test_b - assert 1 == 2\n"
        "SKIPPED [1] tests/t.py:9: why\n"
    )
    assert parse_swesmith_pytest(log) == {
        "tests/t.py::test_a": "PASSED",
        "tests/t.py::test_b": "FAILED",
        "tests/t.py::test_c": "SKIPPED",
    }
    assert parse_pytest(log) == {"tests/t.py::test_b": "FAILED"}  # SWE-bench's parser sees no pass here
