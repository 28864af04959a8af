"""Labelling new tasks as SWE-smith does: FAIL_TO_PASS and PASS_TO_PASS from two runs of
the whole test suite, the fixed code and the bug.

Input: SWE-smith-form records whose `patch` is a candidate bug and whose lists are absent
or empty (`records.read_tasks(label=True)`). For one environment (one workflow job, as
validation), in fresh sandboxes over the published layers:

* **fixed** - the clean snapshot (the bug patch applied, then reversed: what the gold run
  of validation runs), the whole suite. Run once per environment and test command, not
  once per candidate: every candidate of a SWE-smith environment starts from the same
  snapshot, so one reference serves them all (SWE-smith also runs its reference once per
  repository), which halves the cost of labelling;
* **bug** - each candidate's task state (its bug applied), the whole suite.

With `repeats > 1` each run is repeated; a test whose pass/fail outcome differs between
repeats of one run is flaky: left out of both lists and reported. Then, for every test
that passed in the fixed run:

* FAIL_TO_PASS - failed with the bug, or missing from its log (the bug broke its collection,
  or the run was killed because the bug hangs);
* PASS_TO_PASS - passed with the bug;
* neither - an ERROR with the bug (a broken fixture is not the bug's test).

A bug run killed at the spec's timeout leaves the tests it never reached undecided, and
how far it got depends on the machine's load: a slow stretch (a bug that makes some tests
slower, not stuck) stopped one run at its 40th test and a quieter one at its 78th, so the
same candidate's labels differed, and the labels made under load then failed validation
(tests labelled FAIL_TO_PASS passed with the bug). So such tests get a **resume pass**:
the bug again, only those tests, at most `RESUME_PASSES` times while a pass makes
progress. A test that passes there passes with the bug: it leaves FAIL_TO_PASS (it is in
neither list, as the full before-run of validation may not reach it either) and is
reported; one that fails there is FAIL_TO_PASS; one no pass reaches stays FAIL_TO_PASS
(SWE-smith's rule for a bug that hangs). SWE-smith has no such pass: its labels count
every test past the kill.

Statuses (`STATUSES`): `labelled`; dropped: `no-f2p` (nothing fails with the bug),
`too-broad` (more FAIL_TO_PASS tests than `max_f2p`), `hangs` (the bug run was killed
before any test reported a result), `bug-broken` (the bug does not apply, or its run's
output cannot be read), `fixed-broken` (the reference run of the fixed code failed:
timeout, unreadable output), `env-broken` (the environment did not build, or a sandbox
could not start).

Output (`write_result`): one JSON per environment, `{W}/labels/<env_key>.json`, and every
run's log under the log directory; `labelled_records` reads the labelled records back.
docs/labelling.md has the formats and the commands.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from minisandbox.catalog import EnvSpec
from minisandbox.fsutil import atomic_write_text
from minisandbox.grading.evaluate import Evaluation, Executor, evaluate
from minisandbox.grading.grading import Reason, TestStatus, is_pass
from minisandbox.grading.validate import status_counts
from minisandbox.records import TaskRecord, to_raw

STATUSES = ("labelled", "no-f2p", "too-broad", "hangs", "bug-broken", "fixed-broken", "env-broken")
SCHEMA = 1
MAX_LISTED = 20  # tests named per problem in a candidate's detail
REFERENCE_TRIES = 3  # candidates tried for an environment's reference run
#: Resume passes after a bug run killed at the timeout (module docstring); each costs at
#: most the spec's timeout, and only candidates whose bug run was killed pay them
RESUME_PASSES = 2

#: Reasons of a run that completed and whose log was read (the lists are empty, so a
#: finished run reports `empty-f2p`).
_COMPLETED = {Reason.EMPTY_F2P.value, Reason.TESTS_FAILED.value, Reason.RESOLVED.value}


def candidate(record: TaskRecord) -> TaskRecord:
    """The record as a labelling candidate: no lists, so the eval script runs the whole
    suite and restores or removes no test file."""
    return record._replace(fail_to_pass=[], pass_to_pass=[])


def _listed(tests: Iterable[str]) -> list[str]:
    tests = sorted(set(tests))
    return tests[:MAX_LISTED] + ([f"... {len(tests) - MAX_LISTED} more"] if len(tests) > MAX_LISTED else [])


def _runs(phase: str, evs: list[Evaluation]) -> list[dict[str, Any]]:
    return [
        {
            "phase": phase,
            "repeat": i,
            "reason": ev.reason,
            "seconds": round(ev.seconds, 2),
            "results": len(ev.status_map),
        }
        for i, ev in enumerate(evs)
    ]


def _flaky(evs: list[Evaluation]) -> set[str]:
    """Tests whose pass/fail outcome differs between repeats of one run (missing = not passed)."""
    if len(evs) < 2:
        return set()
    names = set().union(*(ev.status_map for ev in evs))
    return {t for t in names if len({is_pass(ev.status_map.get(t)) for ev in evs}) > 1}


def reference_problem(fixed: list[Evaluation]) -> tuple[str, str] | None:
    """(status, reason) when the fixed code's reference runs cannot serve as a reference."""
    if not fixed:
        return "fixed-broken", "no reference run"
    for ev in fixed:
        if ev.reason == Reason.ERROR.value:
            return "env-broken", f"evaluation error: {ev.entry.get('error', '?')}"
        if ev.reason == Reason.TIMEOUT.value:
            return "fixed-broken", "the fixed code's test run exceeded the spec's timeout"
        if ev.reason not in _COMPLETED:
            return "fixed-broken", f"the fixed code's test run ended with {ev.reason}"
        if ev.critical:  # no candidate code in it: the checks misjudge this environment
            return "fixed-broken", f"the fixed code's test run is graded results-tampered: {ev.critical[0]}"
        if not any(is_pass(s) for s in ev.status_map.values()):
            return "fixed-broken", "no test passes with the fixed code"
    return None


def passed_in_fixed(fixed: list[Evaluation], flaky: set[str]) -> list[str]:
    """Tests that passed in every reference run, in the first run's order (the suite's)."""
    return [t for t in fixed[0].status_map if all(is_pass(ev.status_map.get(t)) for ev in fixed) and t not in flaky]


def unreached(fixed: list[Evaluation], bug: list[Evaluation]) -> list[str]:
    """Tests a killed bug run left undecided: passed with the fixed code, reported by no
    bug run, and some bug run timed out (in the suite's order). Empty when no bug run was
    killed, or when the ids are not pytest node ids (a resume pass selects files)."""
    if not fixed or not any(ev.reason == Reason.TIMEOUT.value for ev in bug):
        return []
    if any(ev.reason != Reason.TIMEOUT.value and ev.reason not in _COMPLETED for ev in bug):
        return []
    flaky = _flaky(fixed) | _flaky(bug)
    out = [t for t in passed_in_fixed(fixed, flaky) if all(t not in ev.status_map for ev in bug)]
    return out if all("::" in t for t in out) else []


def label_from(
    fixed: list[Evaluation], bug: list[Evaluation], *, max_f2p: int = 0, resumed: list[Evaluation] | None = None
) -> dict[str, Any]:
    """A candidate's labels and status from the fixed (reference) and bug runs, and the
    resume passes over what a killed bug run never reached (pure: the rules are in the
    module docstring). `max_f2p` 0: no limit."""
    runs = _runs("fixed", fixed) + _runs("bug", bug) + _runs("resume", resumed or [])
    # (a resume pass that errs, or whose results are not to be trusted, decides nothing)
    resumed = [ev for ev in resumed or [] if ev.reason == Reason.TIMEOUT.value or ev.reason in _COMPLETED]
    out: dict[str, Any] = {"FAIL_TO_PASS": [], "PASS_TO_PASS": [], "detail": {}, "runs": runs}

    def result(status: str, reason: str) -> dict[str, Any]:
        return {"status": status, "reason": reason, **out}

    problem = reference_problem(fixed)
    if problem:
        return result(*problem)
    errors = [ev for ev in bug if ev.reason == Reason.ERROR.value]
    if errors:
        return result("env-broken", f"evaluation error: {errors[0].entry.get('error', '?')}")
    if any(ev.reason in (Reason.TEST_SETUP_FAILED.value, Reason.PATCH_APPLY_FAILED.value) for ev in bug):
        return result("bug-broken", "the bug patch does not apply to the snapshot")
    if any(ev.reason == Reason.UNPARSEABLE_LOG.value for ev in bug):
        return result("bug-broken", "the bug run's output has no test results (the test runner did not start)")
    tampered = [ev.reason for ev in bug if ev.reason in (Reason.RESULTS_TAMPERED.value, Reason.FORBIDDEN_CHANGE.value)]
    if tampered:  # a bug that rewrites how outcomes are made is no bug to train on
        return result("bug-broken", f"the bug run ended with {tampered[0]}")
    timed_out = [ev for ev in bug if ev.reason == Reason.TIMEOUT.value]
    if timed_out and all(not ev.status_map for ev in timed_out):
        return result("hangs", "the bug hangs before any test result (the run was killed at the spec's timeout)")
    flaky = _flaky(fixed) | _flaky(bug)
    passed_fixed = set(passed_in_fixed(fixed, flaky))
    f2p, p2p, errored, past_kill = [], [], [], []
    for t in sorted(passed_fixed):
        got = [ev.status_map.get(t) for ev in bug]
        if all(s is None for s in got):  # never reached (killed) or not collected with the bug
            got = [s for ev in resumed if (s := ev.status_map.get(t)) is not None] or got
            if any(is_pass(s) for s in got):
                past_kill.append(t)  # passes with the bug: no run may show it failing
                continue
        if any(s == TestStatus.ERROR.value for s in got):
            errored.append(t)
        elif all(is_pass(s) for s in got):
            p2p.append(t)
        elif not any(is_pass(s) for s in got):
            f2p.append(t)
    out.update(FAIL_TO_PASS=f2p, PASS_TO_PASS=p2p)
    out["counts"] = {
        "fail_to_pass": len(f2p),
        "pass_to_pass": len(p2p),
        "flaky": len(flaky),
        "error_with_bug": len(errored),
        "passed_fixed": len(passed_fixed),
        **({"passed_past_kill": len(past_kill)} if resumed else {}),
    }
    if flaky:
        out["detail"]["flaky_tests"] = _listed(flaky)
    if errored:
        out["detail"]["error_with_bug"] = _listed(errored)
    if past_kill:
        out["detail"]["passed_past_kill"] = _listed(past_kill)
    if timed_out:
        out["bug_timed_out"] = True
    if not f2p:
        return result("no-f2p", "no test that passes with the fixed code fails with the bug")
    if max_f2p and len(f2p) > max_f2p:
        out["detail"]["fail_to_pass"] = _listed(f2p)
        return result("too-broad", f"{len(f2p)} FAIL_TO_PASS tests, more than the maximum {max_f2p}")
    how = ""
    if timed_out:
        how = " (the bug run was killed at the timeout; tests no run reached count as failing"
        how += f", {len(past_kill)} passed in a resume pass)" if past_kill else ")"
    return result("labelled", f"{len(f2p)} FAIL_TO_PASS, {len(p2p)} PASS_TO_PASS{how}")


def resume_passes(
    cand: TaskRecord, spec: EnvSpec, executor: Executor, left: list[str], passes: int
) -> list[Evaluation]:
    """Runs of the bug over exactly the tests of `left` (a killed bug run never reached them),
    while a pass is killed again but reached some of them: what it reached is decided, the
    rest goes to the next pass. A pass that reaches none of them stops: the first hangs.
    (Not their whole files: on a real suite a pass spent its time again on the slow tests
    before them and reached none.)"""
    out: list[Evaluation] = []
    while left and len(out) < passes:
        rec = cand._replace(fail_to_pass=left, pass_to_pass=[])
        ev = evaluate(rec, spec, None, executor, apply_patch=False, select=left)
        out.append(ev)
        reached = [t for t in left if t in ev.status_map]
        if ev.reason != Reason.TIMEOUT.value or not reached:
            break
        left = [t for t in left if t not in ev.status_map]
    return out


def _write_logs(
    log_dir: Path | None, name: str, phase: str, evs: list[Evaluation], res: dict[str, Any], offset: int
) -> None:
    if log_dir is None:
        return
    d = Path(log_dir) / name
    d.mkdir(parents=True, exist_ok=True)
    for i, ev in enumerate(evs):
        p = d / f"{phase}-{i}.log"
        p.write_text(ev.output or f"(no output) {ev.entry.get('error', '')}\n", encoding="utf-8")
        if offset + i < len(res["runs"]):
            res["runs"][offset + i]["log"] = str(p)


@dataclass
class EnvLabels:
    env_key: str
    spec_name: str
    tasks: dict[str, dict[str, Any]]
    repeats: int
    max_f2p: int
    seconds: float
    references: dict[str, dict[str, Any]]  # group (test command) -> its reference runs
    resume_passes: int = RESUME_PASSES

    def counts(self) -> dict[str, int]:
        return status_counts(self.tasks.values(), STATUSES)

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "env_key": self.env_key,
            "spec_name": self.spec_name,
            "repeats": self.repeats,
            "max_f2p": self.max_f2p,
            "resume_passes": self.resume_passes,
            "seconds": round(self.seconds, 2),
            "counts": self.counts(),
            "labelled_ids": sorted(i for i, t in self.tasks.items() if t["status"] == "labelled"),
            "references": self.references,
            "tasks": dict(sorted(self.tasks.items())),
        }


def _groups(
    records: list[TaskRecord], spec: EnvSpec, spec_of: dict[str, EnvSpec], repo_key_of: dict[str, str] | None
) -> Iterator[tuple[str, EnvSpec, list[TaskRecord]]]:
    """Candidates that share a reference: same snapshot, same test command, parser, timeout."""
    groups: dict[tuple[str, str, str, float, str], list[TaskRecord]] = {}
    specs: dict[tuple[str, str, str, float, str], EnvSpec] = {}
    for r in records:
        s = spec_of.get(r.instance_id, spec)
        k = (s.name, s.test_cmd, s.log_parser, float(s.timeout), (repo_key_of or {}).get(r.instance_id, ""))
        groups.setdefault(k, []).append(r)
        specs.setdefault(k, s)
    for i, (k, rs) in enumerate(groups.items()):
        yield f"{k[0]}.{i}", specs[k], rs


def label_env(
    env_key: str,
    spec: EnvSpec,
    records: list[TaskRecord],
    executor: Executor | None,
    *,
    repeats: int = 1,
    workers: int = 2,
    max_f2p: int = 0,
    log_dir: Path | None = None,
    env_error: str | None = None,
    spec_of: dict[str, EnvSpec] | None = None,
    repo_key_of: dict[str, str] | None = None,
    passes: int = RESUME_PASSES,
) -> EnvLabels:
    """Label every candidate of one environment: one reference (fixed) run per group of
    candidates (`_groups`), then each candidate's bug run, `workers` at a time, and its
    resume passes when the bug run was killed (`passes` 0: none, SWE-smith's labels)."""
    t0 = time.monotonic()
    tasks: dict[str, dict[str, Any]] = {}
    refs: dict[str, dict[str, Any]] = {}
    if env_error is not None or executor is None:
        for r in records:
            tasks[r.instance_id] = {
                "status": "env-broken",
                "reason": f"environment not built: {env_error}",
                "FAIL_TO_PASS": [],
                "PASS_TO_PASS": [],
                "detail": {},
                "runs": [],
            }
        return EnvLabels(env_key, spec.name, tasks, repeats, max_f2p, time.monotonic() - t0, refs, passes)
    ex = executor
    for group, gspec, rs in _groups(records, spec, spec_of or {}, repo_key_of):
        cands = [candidate(r) for r in rs]
        # the fixed state is the snapshot: any candidate's bug reversed on its own bug state.
        # A candidate whose bug does not apply (or whose reversal the grading refuses) cannot
        # give the reference: try the next, at most REFERENCE_TRIES (an environment whose
        # suite itself fails would otherwise cost a run per candidate)
        fixed: list[Evaluation] = []
        via = cands[0]
        for via in cands[:REFERENCE_TRIES]:
            fixed = [evaluate(via, gspec, via.patch, ex, reverse=True) for _ in range(repeats)]
            if reference_problem(fixed) is None:
                break
        ref = {"via": via.instance_id, "runs": _runs("fixed", fixed)}
        _write_logs(log_dir, f"_reference.{group}", "fixed", fixed, ref, 0)
        refs[group] = ref

        def one(c: TaskRecord, fixed: list[Evaluation] = fixed, gspec: EnvSpec = gspec) -> tuple[str, dict[str, Any]]:
            try:
                bug = (
                    []
                    if reference_problem(fixed)
                    else [evaluate(c, gspec, None, ex, apply_patch=False) for _ in range(repeats)]
                )
                resumed = resume_passes(c, gspec, ex, unreached(fixed, bug), passes)
                res = label_from(fixed, bug, max_f2p=max_f2p, resumed=resumed)
                _write_logs(log_dir, c.instance_id, "bug", bug, res, len(fixed))
                _write_logs(log_dir, c.instance_id, "resume", resumed, res, len(fixed) + len(bug))
                return c.instance_id, res
            except Exception as exc:  # one candidate's failure never hides the others' results
                return c.instance_id, {
                    "status": "env-broken",
                    "reason": f"labelling error: {exc}",
                    "FAIL_TO_PASS": [],
                    "PASS_TO_PASS": [],
                    "detail": {},
                    "runs": [],
                }

        with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
            for iid, res in pool.map(one, cands):
                tasks[iid] = res
    return EnvLabels(env_key, spec.name, tasks, repeats, max_f2p, time.monotonic() - t0, refs, passes)


def write_result(result: EnvLabels, out: Path) -> None:
    atomic_write_text(out, json.dumps(result.to_dict(), indent=2, ensure_ascii=False) + "\n")


def labelled_records(records: Iterable[TaskRecord], results: dict[str, dict[str, Any]]) -> list[TaskRecord]:
    """The records labelled (status `labelled`), with their computed lists, in input order."""
    out = []
    for r in records:
        res = results.get(r.instance_id)
        if res and res.get("status") == "labelled":
            out.append(r._replace(fail_to_pass=list(res["FAIL_TO_PASS"]), pass_to_pass=list(res["PASS_TO_PASS"])))
    return out


def write_labelled(
    records: Iterable[TaskRecord], results: dict[str, dict[str, Any]], out: Path, report: Path | None = None
) -> dict[str, Any]:
    """`out`: the labelled records in SWE-smith form (JSONL, what `--config tasks=` takes);
    `report`: counts and every dropped candidate with its status and reason."""
    records = list(records)
    good = labelled_records(records, results)
    atomic_write_text(out, "".join(json.dumps(to_raw(r), ensure_ascii=False) + "\n" for r in good))
    counts = {s: 0 for s in STATUSES}
    dropped: dict[str, dict[str, Any]] = {}
    for r in records:
        res = results.get(r.instance_id) or {"status": "env-broken", "reason": "not labelled (no result)"}
        counts[res["status"]] = counts.get(res["status"], 0) + 1
        if res["status"] != "labelled":
            dropped[r.instance_id] = {
                "status": res["status"],
                "reason": res.get("reason", ""),
                **({"detail": res["detail"]} if res.get("detail") else {}),
            }
    doc = {"candidates": len(records), "labelled": len(good), "counts": counts, "dropped": dropped}
    if report is not None:
        atomic_write_text(report, json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
    return doc


# --------------------------------------------------------------------------- workflow step


def step_label(
    plan_path: Path,
    env_key: str,
    receipts: Path,
    store: str,
    out: Path,
    log_dir: Path,
    *,
    repeats: int = 1,
    workers: int = 2,
    max_f2p: int = 0,
    passes: int = RESUME_PASSES,
) -> EnvLabels:
    """The workflow's labelling for one environment (the env job in label mode): candidates
    and spec from the plan, layers from the publish receipts."""
    from minisandbox.grading.validate import load_env_tasks

    job = load_env_tasks(plan_path, env_key, receipts, store)
    result = label_env(
        env_key,
        job.spec,
        job.records,
        job.executor,
        repeats=repeats,
        workers=workers,
        max_f2p=max_f2p,
        log_dir=log_dir,
        env_error=job.error,
        passes=passes,
        spec_of=job.spec_of,
        repo_key_of=job.repo_key_of,
    )
    write_result(result, out)
    return result


def read_results(files: Iterable[Path]) -> dict[str, dict[str, Any]]:
    """instance id -> labelling result, over several environments' files."""
    out: dict[str, dict[str, Any]] = {}
    for f in files:
        out.update(json.loads(Path(f).read_text()).get("tasks", {}))
    return out
