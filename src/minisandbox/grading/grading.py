"""Grading: from one evaluation log to a SWE-bench-format report, with no false positives.

The semantics are SWE-bench's (a test passes if PASSED or XFAIL; resolved = every
FAIL_TO_PASS and every PASS_TO_PASS test passes) with the holes a reward must not have
closed (see docs/grading.md, and its "Trust boundary"):

* an XFAIL counts only for a test marked xfail at the graded state (decided by the
  controller from the graded-state sources, `minisandbox.grading.gradedstate`), and a run
  whose results channel reports a critical finding is `results-tampered`, in every mode;

* an empty FAIL_TO_PASS list is never resolved (SWE-bench scores it 1.0);
* a test missing from the log fails, for both lists (SWE-smith assumes a missing test
  passed); SKIPPED and XPASS are failures too (SWE-bench keeps a SKIPPED P2P test and
  silently drops an XPASS F2P test from the ratio);
* ids match exactly; the only alias is the official SWE-smith truncation (an id cut at
  its first space), which must match *every* full id it could stand for;
* the script markers carry a per-run nonce, the test output is the text between the first
  start and the last end marker, and anything a test prints cannot turn a failure into a
  pass (worst status wins in `minisandbox.grading.logparsers`).

Every unresolved report says why (`Reason`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from minisandbox.grading.logparsers import StatusMap, TestStatus, collection_error, get_parser, session_seen
from minisandbox.grading.official import (
    GradingMode,
    harness_for,
    official_resolved,
    official_status_map,
    official_tests_status,
)
from minisandbox.grading.results import Channel, applies, merge, parse_channel
from minisandbox.grading.suspicious import scan_applied
from minisandbox.logformats import channel_runner

FAIL_TO_PASS = "FAIL_TO_PASS"
PASS_TO_PASS = "PASS_TO_PASS"
FAIL_TO_FAIL = "FAIL_TO_FAIL"
PASS_TO_FAIL = "PASS_TO_FAIL"

PASS_STATUSES = frozenset({TestStatus.PASSED.value, TestStatus.XFAIL.value})

# Script markers (SWE-bench's words; the eval script appends the run's nonce).
START_TEST_OUTPUT = ">>>>> Start Test Output"
END_TEST_OUTPUT = ">>>>> End Test Output"
APPLY_PATCH_PASS = ">>>>> Applied Patch"
APPLY_PATCH_FAIL = ">>>>> Patch Apply Failed"
RESET_FAILED = ">>>>> Reset Failed"
TESTS_TIMEOUT = ">>>>> Tests Timed Out"
TEST_EXIT_CODE = ">>>>> Test Exit Code"


class Reason(str, Enum):
    """Why an instance is (not) resolved; `resolved` only when it is."""

    RESOLVED = "resolved"
    EMPTY_PATCH = "empty-patch"
    PATCH_APPLY_FAILED = "patch-apply-failed"
    TEST_SETUP_FAILED = "test-setup-failed"  # restoring test files / applying the test patch failed
    TIMEOUT = "timeout"
    EMPTY_F2P = "empty-f2p"
    UNPARSEABLE_LOG = "unparseable-log"
    TESTS_FAILED = "tests-failed"
    RESULTS_TAMPERED = "results-tampered"  # an object or hook on the outcome path was not the graded state's
    FORBIDDEN_CHANGE = "forbidden-change"  # the applied tree holds what no fix needs (grading.suspicious)
    ERROR = "error"  # the evaluation itself failed (sandbox could not start, ...)


def is_pass(status: str | None) -> bool:
    return status in PASS_STATUSES


def lookup(test_id: str, status_map: Mapping[str, str]) -> str | None:
    """The status of `test_id`, exact match only, or None when the log lacks it.

    Compatibility with ids produced by the official SWE-smith parser, which cuts at the
    first space (`t.py::test_p[a b]` -> `t.py::test_p[a`): when `test_id` has no space
    and is not in the map, it stands for every full id whose first word it is; it then
    takes the worst status among them (so it passes only if all of them pass).
    """
    if test_id in status_map:
        return status_map[test_id]
    if " " in test_id:
        return None
    matches = [s for k, s in status_map.items() if " " in k and k.split(" ", 1)[0] == test_id]
    if not matches:
        return None
    if all(is_pass(s) for s in matches):
        return matches[0] if len(set(matches)) == 1 else TestStatus.PASSED.value
    return next(s for s in matches if not is_pass(s))


def split_results(tests: Iterable[str], status_map: Mapping[str, str]) -> dict[str, list[str]]:
    """`{"success": [...], "failure": [...]}`: every test lands in exactly one list."""
    out: dict[str, list[str]] = {"success": [], "failure": []}
    for t in tests:
        out["success" if is_pass(lookup(t, status_map)) else "failure"].append(t)
    return out


def tests_status(
    f2p: Iterable[str],
    p2p: Iterable[str],
    status_map: Mapping[str, str],
    f2f: Iterable[str] = (),
    p2f: Iterable[str] = (),
) -> dict[str, dict[str, list[str]]]:
    """SWE-bench's `tests_status` block."""
    return {
        FAIL_TO_PASS: split_results(f2p, status_map),
        PASS_TO_PASS: split_results(p2p, status_map),
        FAIL_TO_FAIL: split_results(f2f, status_map),
        PASS_TO_FAIL: split_results(p2f, status_map),
    }


@dataclass
class LogCheck:
    """What the eval script's markers say about one run."""

    patch_applied: bool | None = None  # None: no patch step in this run
    setup_failed: bool = False
    timed_out: bool = False
    test_output: str | None = None  # text between the markers; None when absent
    exit_code: int | None = None
    notes: list[str] = field(default_factory=list)


def _marker_lines(log: str, marker: str, nonce: str | None) -> list[int]:
    """Indices of lines that are exactly `marker` (+ ` nonce` when the run has one)."""
    want = f"{marker} {nonce}" if nonce else marker
    return [i for i, line in enumerate(log.splitlines()) if line.rstrip() == want]


def check_log(log: str, nonce: str | None = None, *, expect_patch: bool = True) -> LogCheck:
    """Read the script markers. Only markers carrying this run's nonce count, so a test
    cannot forge them without knowing the nonce; the test output is the text between the
    first start marker and the last end marker (the script prints both itself)."""
    lines = log.splitlines()
    chk = LogCheck()
    starts = _marker_lines(log, START_TEST_OUTPUT, nonce)
    ends = _marker_lines(log, END_TEST_OUTPUT, nonce)
    first_start = starts[0] if starts else len(lines)
    before = "\n".join(lines[:first_start])
    if expect_patch:
        if _marker_lines(before, APPLY_PATCH_FAIL, nonce):
            chk.patch_applied = False
        elif _marker_lines(before, APPLY_PATCH_PASS, nonce):
            chk.patch_applied = True
        else:
            chk.patch_applied = False
            chk.notes.append("no patch-applied marker")
    if _marker_lines(before, RESET_FAILED, nonce):
        chk.setup_failed = True
    if starts and ends and ends[-1] > first_start:
        chk.test_output = "\n".join(lines[first_start + 1 : ends[-1]])
        after = lines[ends[-1] + 1 :]
        tail = "\n".join(after)
        if _marker_lines(tail, TESTS_TIMEOUT, nonce):
            chk.timed_out = True
        prefix = TEST_EXIT_CODE + " "
        for line in after:
            if line.startswith(prefix):
                word = line[len(prefix) :].split(" ", 1)[0]
                if word.lstrip("-").isdigit():
                    chk.exit_code = int(word)
    elif starts:
        chk.notes.append("test output has no end marker")
    return chk


def make_report(
    instance_id: str,
    model_patch: str | None,
    log: str,
    *,
    fail_to_pass: list[str],
    pass_to_pass: list[str],
    log_parser: str,
    nonce: str | None = None,
    timed_out: bool = False,
    error: str | None = None,
    apply_patch: bool = True,
    results: str | None = None,
    results_nonce: str | None = None,
    grading: str = GradingMode.STRICT.value,
    task_format: str = "swebench",
    xfail_marked: Callable[[str], bool] | None = None,
    native: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """One instance's report in SWE-bench's format, `{instance_id: {...}}`, plus `reason`
    (a `Reason` value) and `status_map` (per-test statuses, for fidelity checks).

    `timed_out` is the executor's own verdict (the whole script overran), which counts
    in addition to the script's timeout marker. `apply_patch=False` grades a run that
    had no patch step (validation's "before" run).

    `results`/`results_nonce`: what the results plugin wrote on its own channel and the
    run's channel nonce (minisandbox.grading.results). With a channel, a test passes only
    if the log *and* the channel say so; `suspicious` lists what the patch touched
    (minisandbox.grading.suspicious) and what the channel saw at run time.

    `xfail_marked(test_id)`: whether the test is marked xfail at the graded state
    (`minisandbox.grading.gradedstate`, computed by the controller from the graded-state
    sources); an XFAIL counts as a pass only then, in every mode. None: no test is marked
    (an XFAIL never counts). A run whose results channel reports a critical finding (an
    object or hook on the outcome path that is not the graded state's) is
    `results-tampered`, in every mode. `native`: critical findings the task state without
    the candidate patch gives too (finding -> the re-probe's answer,
    `evaluate._native_comparisons`): the library's own comparison semantics, reported
    and not critical.

    `grading="official"` decides `resolved` as the task's own harness does
    (`minisandbox.grading.official`; `task_format` picks SWE-bench's or SWE-smith's);
    nonce markers, the channel and `results-tampered` apply in both modes.
    """
    mode = GradingMode(grading)
    entry: dict[str, Any] = {
        "patch_is_None": model_patch is None,
        "patch_exists": bool(model_patch and model_patch.strip()),
        "patch_successfully_applied": False,
        "resolved": False,
    }
    report = {instance_id: entry}
    scan = scan_applied(model_patch, log, nonce) if apply_patch else None
    entry["suspicious"] = list(scan.lines) if scan else []
    if scan and scan.forbidden:
        entry["forbidden"] = list(scan.forbidden)
    channel = parse_channel(results, results_nonce) if results_nonce else None
    if channel is not None and channel.present and not channel.complete:
        # every test's teardown record sent, then `os._exit` before the session's end: the
        # end-of-session checks (every live class's comparisons, every captured object)
        # never ran. A library that kept the bug forged its comparisons and left so,
        # resolved in every mode (a timeout is graded as one before this counts)
        channel.critical.append(INCOMPLETE_SESSION)
    if channel is not None and native:
        _downgrade_native(channel, native, entry["suspicious"])
    use_channel = channel is not None and channel.present and applies(log_parser)
    if channel is not None:
        entry["results_channel"] = channel.summary()
        entry["suspicious"] += _runtime_findings(channel)
        if not channel.present and _must_connect(log_parser):  # the runner dropped it, or the plugin never loaded
            entry["suspicious"].append(f"runtime: tampered: {NO_CHANNEL}")
        elif not channel.present and applies(log_parser):
            entry["suspicious"].append("runtime: no results channel: graded from the log alone")

    def statuses(test_output: str) -> StatusMap:
        """The log's statuses, cross-checked with the channel when there is one, XFAIL
        kept only for tests marked xfail at the graded state."""
        status_map = get_parser(log_parser)(test_output) if test_output else {}
        if use_channel and channel is not None:
            status_map = merge(status_map, channel, log_parser, confirm=frozenset(fail_to_pass))
        entry["suspicious"] += _unmarked_xfail(status_map, xfail_marked, noted)
        return status_map

    noted: set[str] = set()

    def done(reason: Reason, status_map: StatusMap | None = None) -> dict[str, Any]:
        entry["reason"] = reason.value
        entry["tests_status"] = tests_status(fail_to_pass, pass_to_pass, status_map or {})
        entry["status_map"] = dict(status_map or {})
        return report

    if error:
        entry["error"] = error
        return done(Reason.ERROR)
    if apply_patch and not entry["patch_exists"]:
        return done(Reason.EMPTY_PATCH)
    chk = check_log(log, nonce, expect_patch=apply_patch)
    if apply_patch and not chk.patch_applied:
        return done(Reason.PATCH_APPLY_FAILED)
    entry["patch_successfully_applied"] = bool(apply_patch)
    if chk.setup_failed:
        return done(Reason.TEST_SETUP_FAILED)
    if timed_out or chk.timed_out:
        return done(Reason.TIMEOUT, statuses(chk.test_output or ""))
    if chk.test_output is None:
        return done(Reason.UNPARSEABLE_LOG)
    if mode is GradingMode.OFFICIAL:
        _official(
            entry,
            report,
            chk,
            fail_to_pass,
            pass_to_pass,
            log_parser,
            task_format,
            channel if use_channel else None,
            statuses,
            xfail_marked,
            noted,
        )
        _unverified(channel, log_parser, report)
        return report
    status_map = statuses(chk.test_output)
    if not status_map and not session_seen(chk.test_output, log_parser):
        return done(Reason.UNPARSEABLE_LOG)  # the runner never started: nothing to grade
    if collection_error(chk.test_output):
        # tests that could not be collected are missing from the map, hence failed
        entry["collection_error"] = True
    done(Reason.TESTS_FAILED, status_map)
    if not fail_to_pass:
        entry["reason"] = Reason.EMPTY_F2P.value
        return report
    if use_channel and channel is not None and channel.critical:
        entry["reason"] = Reason.RESULTS_TAMPERED.value
        return report
    if _unverified(channel, log_parser, report):
        return report
    ts = entry["tests_status"]
    if not ts[FAIL_TO_PASS]["failure"] and not ts[PASS_TO_PASS]["failure"]:
        if entry.get("forbidden"):
            entry["reason"] = Reason.FORBIDDEN_CHANGE.value
            return report
        entry["resolved"] = True
        entry["reason"] = Reason.RESOLVED.value
    return report


def _official(
    entry: dict[str, Any],
    report: dict[str, Any],
    chk: LogCheck,
    fail_to_pass: list[str],
    pass_to_pass: list[str],
    log_parser: str,
    task_format: str,
    channel: Channel | None,
    checked: Any,
    xfail_marked: Callable[[str], bool] | None,
    noted: set[str],
) -> dict[str, Any]:
    """The rest of `make_report` in official mode (markers already checked)."""
    entry["grading"] = GradingMode.OFFICIAL.value
    harness = harness_for(task_format)
    entry["harness"] = harness.value
    test_output = chk.test_output or ""
    sm = official_status_map(harness, test_output, log_parser, chk.exit_code)
    if sm is None:
        entry["reason"] = Reason.UNPARSEABLE_LOG.value
        entry["tests_status"] = official_tests_status(harness, fail_to_pass, pass_to_pass, {})
        entry["status_map"] = {}
        return report
    entry["suspicious"] += _unmarked_xfail(sm, xfail_marked, noted)
    if channel is not None:  # a test the run saw fail cannot pass, whatever the log printed
        seen = checked(test_output)
        entry["suspicious"] += downgrade_forged(sm, seen)
        entry["suspicious"] += _fail_unconfirmed(sm, seen, [*fail_to_pass, *pass_to_pass])
    ts = official_tests_status(harness, fail_to_pass, pass_to_pass, sm)
    entry["tests_status"] = ts
    entry["status_map"] = dict(sm)
    entry["reason"] = Reason.TESTS_FAILED.value
    if channel is not None and channel.critical:
        entry["reason"] = Reason.RESULTS_TAMPERED.value
        return report
    if official_resolved(ts):
        if entry.get("forbidden"):
            entry["reason"] = Reason.FORBIDDEN_CHANGE.value
            return report
        entry["resolved"] = True
        entry["reason"] = Reason.RESOLVED.value
    return report


#: Why a pytest run whose results plugin never connected is not resolved.
NO_CHANNEL = (
    "no results channel: the results plugin never connected, so nothing checked the run (code that ran "
    "before it, such as a repository module pytest imports at start-up, or the runner, removed "
    "MINISANDBOX_RESULTS_SOCK or PYTEST_ADDOPTS); a runner that drops them must keep them (tox: --current-env)"
)


def _must_connect(log_parser: str) -> bool:
    """True when a run whose plugin never connected is `results-tampered`: pytest, which
    imports modules (the repository's own, for some tasks) before its `-p` plugins, and
    SymPy's `bin/test`, whose runner is repository code (the test command sets
    PYTHONWARNINGS itself, so the plugin comes as `sitecustomize`; an honest run always has
    it). A unittest runner loads the plugin at interpreter start-up, before any repository
    code, so a run without it is graded from its log and says so (docs/grading.md,
    "Runners without the channel")."""
    return channel_runner(log_parser) in ("pytest", "sympy")


def _unverified(channel: Channel | None, log_parser: str, report: dict[str, Any]) -> bool:
    """Make `report` `results-tampered` (and say so) when the run was given a results
    channel, its output is pytest's, and the plugin never said hello: the verdict would
    rest on the log alone, which the code under test can print
    (tests/security/test_runner_dependency.py)."""
    if channel is None or channel.present or not _must_connect(log_parser):
        return False
    for entry in report.values():
        entry["resolved"] = False
        entry["reason"] = Reason.RESULTS_TAMPERED.value
    return True


def downgrade_forged(sm: StatusMap, checked: Mapping[str, str]) -> list[str]:
    """Anti-forgery in official mode, for runs with a results channel. `checked` is the
    default mode's view of the same run (full ids, merged with the channel, which
    recomputed every outcome from the test's own exception): an id the harness's map
    passes but that view fails is set to the failing status. Returns one `suspicious`
    line per change."""
    changed = []
    for key, status in list(sm.items()):
        if not is_pass(status):
            continue
        seen = lookup(key, checked)
        if seen is not None and not is_pass(seen):
            sm[key] = seen
            changed.append(f"runtime: {key}: the log says {status}, the run says {seen}")
    return changed


def _fail_unconfirmed(sm: StatusMap, checked: Mapping[str, str], tests: list[str]) -> list[str]:
    """Anti-forgery for any grading mode: a listed test the results channel did not see
    pass (failed, or never ran: the runner was cut short) fails, even where the mode's own
    rules would pass it (the official SWE-smith rule counts a test missing from the log as
    passed). Only called when the run had a channel. Returns what changed."""
    changed = []
    for test_id in tests:
        seen = lookup(test_id, checked)
        if is_pass(seen):
            continue
        now = sm.get(test_id)
        if now is None or is_pass(now):
            sm[test_id] = seen or TestStatus.FAILED.value
            changed.append(f"runtime: {test_id}: the results channel did not see it pass ({seen or 'not run'})")
    return changed


def _unmarked_xfail(sm: StatusMap, xfail_marked: Callable[[str], bool] | None, noted: set[str]) -> list[str]:
    """An XFAIL counts only for a test marked xfail at the graded state: any other XFAIL
    in `sm` becomes FAILED (a patch can make a failing test raise pytest's XFailed).
    Returns one `suspicious` line per test changed (once per report, via `noted`)."""
    out = []
    for test_id, status in list(sm.items()):
        if status != TestStatus.XFAIL.value or (xfail_marked is not None and xfail_marked(test_id)):
            continue
        sm[test_id] = TestStatus.FAILED.value
        if test_id not in noted:
            noted.add(test_id)
            out.append(f"xfail: {test_id}: reported XFAIL but not marked xfail at the graded state")
    return out


def _downgrade_native(channel: Channel, native: Mapping[str, str], suspicious: list[str]) -> None:
    """A critical finding the graded state without the candidate patch gives too
    (`native`: finding -> the re-probe's answer; minisandbox.grading.evaluate) is the
    library's own comparison semantics, not the patch's: reported, not critical."""
    for what in list(channel.critical):
        if what in native:
            channel.critical.remove(what)
            suspicious.append(f"runtime: native comparison semantics at the graded state: {native[what]}")


#: a channel with no end-of-session record (critical: `make_report`)
INCOMPLETE_SESSION = "the test session ended before the runner finished (no end-of-session record)"


def _runtime_findings(channel: Channel) -> list[str]:
    """The channel's evidence, in `suspicious` form."""
    out = [f"runtime: {'tampered' if name in channel.critical else 'seen'}: {name}" for name in channel.tampered]
    out += [f"runtime: {test_id}: {how}" for test_id, how in list(channel.forged.items())[:20]]
    if channel.present and not channel.complete:
        out.append(f"runtime: {INCOMPLETE_SESSION}")
    if channel.unfinished:
        out.append(
            f"runtime: {len(channel.unfinished)} test(s) never reached their teardown, failed: "
            + ", ".join(channel.unfinished[:5])
        )
    if channel.worker_reports:
        out.append(
            f"runtime: {channel.worker_reports} result(s) from pytest-xdist workers' own reports (not recomputed)"
        )
    if channel.foreign:
        out.append(f"runtime: {channel.foreign} line(s) on the results channel without this run's nonce")
    return out


def swebench_view(report: Mapping[str, Any]) -> dict[str, Any]:
    """The report without our extra keys (byte-compatible with SWE-bench consumers)."""
    keep = ("patch_is_None", "patch_exists", "patch_successfully_applied", "resolved", "tests_status")
    return {iid: {k: v[k] for k in keep if k in v} for iid, v in report.items()}


def make_run_summary(
    dataset_ids: Iterable[str],
    predictions: Mapping[str, Mapping[str, Any]],
    reports: Mapping[str, Mapping[str, Any] | None],
) -> dict[str, Any]:
    """SWE-bench's run report (`swebench.harness.reporting.make_run_report`, schema 2),
    plus `reasons` (count per `Reason`).

    `reports[iid]` is the instance's `{iid: {...}}` report, or None when its evaluation
    did not produce one (an error).
    """
    dataset = list(dict.fromkeys(dataset_ids))
    ids = set(dataset)
    completed, resolved, unresolved, errors, incomplete, empty = (set() for _ in range(6))
    reasons: dict[str, int] = {}
    for iid in dataset:
        if iid not in predictions:
            incomplete.add(iid)
            continue
        if not (predictions[iid].get("model_patch") or "").strip():  # as `evaluate` decides empty-patch
            empty.add(iid)
            reasons[Reason.EMPTY_PATCH.value] = reasons.get(Reason.EMPTY_PATCH.value, 0) + 1
            continue
        rep = reports.get(iid)
        entry = rep.get(iid) if rep else None
        if not entry or entry.get("reason") == Reason.ERROR.value:
            errors.add(iid)
            reasons[Reason.ERROR.value] = reasons.get(Reason.ERROR.value, 0) + 1
            continue
        completed.add(iid)
        reason = entry.get("reason", Reason.RESOLVED.value if entry["resolved"] else Reason.TESTS_FAILED.value)
        reasons[reason] = reasons.get(reason, 0) + 1
        (resolved if entry["resolved"] else unresolved).add(iid)
    return {
        "total_instances": len(dataset),
        "submitted_instances": len(set(predictions) & ids),
        "completed_instances": len(completed),
        "resolved_instances": len(resolved),
        "unresolved_instances": len(unresolved),
        "empty_patch_instances": len(empty),
        "error_instances": len(errors),
        "completed_ids": sorted(completed),
        "incomplete_ids": sorted(incomplete),
        "empty_patch_ids": sorted(empty),
        "submitted_ids": sorted(set(predictions) & ids),
        "resolved_ids": sorted(resolved),
        "unresolved_ids": sorted(unresolved),
        "error_ids": sorted(errors),
        "reasons": dict(sorted(reasons.items())),
        "schema_version": 2,
    }


def dumps(obj: Any) -> str:
    return json.dumps(obj, indent=2, sort_keys=False, ensure_ascii=False) + "\n"
