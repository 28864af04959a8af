"""Task validation, batched per environment: does the rebuilt environment reproduce the
reference behaviour before anyone trains on it?

For every task of one environment, in fresh sandboxes:

* **before** - the task state with no patch: every FAIL_TO_PASS test must not pass (fail,
  or be missing because the run was killed) and every PASS_TO_PASS test must pass;
* **gold** - the gold patch (SWE-smith: the reverse of the bug patch; SWE-bench: `patch`)
  through the same eval script a candidate gets (anti-tamper step included): every
  FAIL_TO_PASS and PASS_TO_PASS test must pass.

With `repeats > 1` each run is repeated; a test whose pass/fail outcome changes between
repetitions of the same run marks the task `flaky`. Statuses:

* `valid` - both expectations hold in every repetition. As in SWE-smith, a before run that
  is killed at the timeout while the gold run completes reproduces the bug (a bug that
  hangs): its FAIL_TO_PASS tests count as not passed, its PASS_TO_PASS tests must still
  have passed before it was killed;
* `timeout` - a gold run hit the spec's timeout (or the sandbox's);
* `flaky` - outcomes differ between repetitions;
* `env-broken` - an expectation fails (details name the tests), the gold patch does not
  apply, the FAIL_TO_PASS list is empty, or the environment did not build.

Output (`write_result`): one JSON per environment, `{W}/validation/<env_key>.json`,
whose `tasks` map is merged into the index by `minisandbox index --validation` (see
docs/grading.md for the format), plus every run's log under the log directory.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from minisandbox.catalog import EnvSpec
from minisandbox.fsutil import atomic_write_text
from minisandbox.grading.evaluate import Evaluation, Executor, evaluate
from minisandbox.grading.grading import Reason, is_pass, lookup
from minisandbox.manifest import content_id
from minisandbox.records import TaskRecord

STATUSES = ("valid", "env-broken", "flaky", "timeout")
SCHEMA = 1
MAX_LISTED = 20  # tests named per problem in a task's detail


def gold_run(record: TaskRecord) -> tuple[str, bool]:
    """(patch, reverse) of the reference solution."""
    return (record.patch, True) if record.format != "swebench" else (record.patch, False)


def _outcomes(ev: Evaluation, tests: Iterable[str]) -> dict[str, bool]:
    sm = ev.status_map
    return {t: is_pass(lookup(t, sm)) for t in tests}


def classify(record: TaskRecord, before: list[Evaluation], gold: list[Evaluation]) -> dict[str, Any]:
    """The task's status from its runs (pure: see the module docstring for the rules)."""
    f2p, p2p = list(record.fail_to_pass), list(record.pass_to_pass)
    runs = [("before", i, ev) for i, ev in enumerate(before)] + [("gold", i, ev) for i, ev in enumerate(gold)]
    detail: dict[str, list[str]] = {}

    def note(key: str, tests: Iterable[str]) -> None:
        tests = sorted(set(tests))
        if tests:
            detail[key] = tests[:MAX_LISTED] + (
                [f"... {len(tests) - MAX_LISTED} more"] if len(tests) > MAX_LISTED else []
            )

    def result(status: str, reason: str) -> dict[str, Any]:
        return {
            "status": status,
            "reason": reason,
            "detail": detail,
            "runs": [
                {"phase": ph, "repeat": i, "reason": ev.reason, "seconds": round(ev.seconds, 2)} for ph, i, ev in runs
            ],
        }

    if not f2p:
        return result("env-broken", Reason.EMPTY_F2P.value)
    errors = [ev for _, _, ev in runs if ev.reason == Reason.ERROR.value]
    if errors:
        return result("env-broken", f"evaluation error: {errors[0].entry.get('error', '?')}")
    if any(ev.reason == Reason.TIMEOUT.value for ev in gold):
        return result("timeout", "a gold run exceeded the spec's timeout")
    if any(ev.reason == Reason.PATCH_APPLY_FAILED.value for ev in gold):
        return result("env-broken", "gold patch does not apply to the task state")
    judged = [ev for ev in gold if ev.critical]
    if judged:
        # the reference fix itself is judged tampering: no fix of this task could be rewarded
        # (an installed plugin or the environment trips a check; see docs/grading.md)
        note("gold_graded_tampered", judged[0].critical)
        return result(
            "env-broken",
            "the gold patch is graded results-tampered, so no fix could be rewarded: " + judged[0].critical[0],
        )
    bad_setup = [
        ev.reason for _, _, ev in runs if ev.reason in (Reason.TEST_SETUP_FAILED.value, Reason.UNPARSEABLE_LOG.value)
    ]
    if bad_setup:
        return result("env-broken", f"a run ended with {bad_setup[0]}")
    # flakiness: one test, one phase, different outcomes across repetitions
    flaky: set[str] = set()
    for phase in (before, gold):
        if len(phase) > 1:
            outs = [_outcomes(ev, f2p + p2p) for ev in phase]
            flaky |= {t for t in f2p + p2p if len({o[t] for o in outs}) > 1}
    if flaky:
        note("flaky_tests", flaky)
        return result("flaky", "test outcomes differ between repeated runs")
    f2p_pass_before = {t for ev in before for t, ok in _outcomes(ev, f2p).items() if ok}
    p2p_fail_before = {t for ev in before for t, ok in _outcomes(ev, p2p).items() if not ok}
    f2p_fail_gold = {t for ev in gold for t, ok in _outcomes(ev, f2p).items() if not ok}
    p2p_fail_gold = {t for ev in gold for t, ok in _outcomes(ev, p2p).items() if not ok}
    note("f2p_passing_without_patch", f2p_pass_before)
    note("p2p_failing_without_patch", p2p_fail_before)
    note("f2p_failing_with_gold", f2p_fail_gold)
    note("p2p_failing_with_gold", p2p_fail_gold)
    if detail:
        return result(
            "env-broken",
            "the environment does not reproduce the reference results: "
            + ", ".join(f"{k} ({len(v)})" for k, v in detail.items()),
        )
    if any(ev.reason == Reason.TIMEOUT.value for ev in before):
        return result(
            "valid",
            "no patch: the run hangs (killed at the timeout) with no F2P test passed and "
            "every P2P test passed; gold: all pass",
        )
    return result("valid", "no patch: F2P fail and P2P pass; gold: all pass")


def validate_task(
    record: TaskRecord, spec: EnvSpec, executor: Executor, *, repeats: int = 1, log_dir: Path | None = None
) -> dict[str, Any]:
    """Run before/gold `repeats` times each and classify; logs go to `log_dir/<iid>/`."""
    if not record.fail_to_pass:  # nothing to check: do not spend sandbox time on it
        return classify(record, [], [])
    before = [evaluate(record, spec, None, executor, apply_patch=False) for _ in range(repeats)]
    patch, reverse = gold_run(record)
    gold = [evaluate(record, spec, patch, executor, reverse=reverse) for _ in range(repeats)]
    res = classify(record, before, gold)
    if log_dir is not None:
        d = Path(log_dir) / record.instance_id
        d.mkdir(parents=True, exist_ok=True)
        for phase, evs in (("before", before), ("gold", gold)):
            for i, ev in enumerate(evs):
                p = d / f"{phase}-{i}.log"
                p.write_text(ev.output or f"(no output) {ev.entry.get('error', '')}\n", encoding="utf-8")
                res["runs"][(0 if phase == "before" else repeats) + i]["log"] = str(p)
        res["log_dir"] = str(d)
    return res


def status_counts(tasks: Iterable[dict[str, Any]], statuses: Iterable[str]) -> dict[str, int]:
    """How many results have each status: every known status present (0 when none), plus
    any other status a result carries. Validation and labelling reports both use it."""
    out = {s: 0 for s in statuses}
    for t in tasks:
        out[t["status"]] = out.get(t["status"], 0) + 1
    return out


@dataclass
class EnvValidation:
    env_key: str
    spec_name: str
    tasks: dict[str, dict[str, Any]]
    repeats: int
    seconds: float

    def counts(self) -> dict[str, int]:
        return status_counts(self.tasks.values(), STATUSES)

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "env_key": self.env_key,
            "spec_name": self.spec_name,
            "repeats": self.repeats,
            "seconds": round(self.seconds, 2),
            "counts": self.counts(),
            "valid_ids": sorted(i for i, t in self.tasks.items() if t["status"] == "valid"),
            "tasks": dict(sorted(self.tasks.items())),
        }


def validate_env(
    env_key: str,
    spec: EnvSpec,
    records: list[TaskRecord],
    executor: Executor | None,
    *,
    repeats: int = 1,
    workers: int = 2,
    log_dir: Path | None = None,
    env_error: str | None = None,
    spec_of: dict[str, EnvSpec] | None = None,
) -> EnvValidation:
    """Validate all tasks of one environment (one workflow job per environment).

    `env_error`: the environment (or its repo) failed to build; every task is then
    `env-broken` with that error and nothing runs. `spec_of`: instance id -> the task's own
    spec (test command, parser, timeout) where specs sharing this environment differ."""
    t0 = time.monotonic()
    tasks: dict[str, dict[str, Any]] = {}
    if env_error is not None or executor is None:
        for r in records:
            tasks[r.instance_id] = {
                "status": "env-broken",
                "reason": f"environment not built: {env_error}",
                "detail": {},
                "runs": [],
            }
        return EnvValidation(env_key, spec.name, tasks, repeats, time.monotonic() - t0)

    def one(r: TaskRecord) -> tuple[str, dict[str, Any]]:
        try:
            task_spec = (spec_of or {}).get(r.instance_id, spec)
            return r.instance_id, validate_task(r, task_spec, executor, repeats=repeats, log_dir=log_dir)
        except Exception as exc:  # one task's failure never hides the others' results
            return r.instance_id, {
                "status": "env-broken",
                "reason": f"validation error: {exc}",
                "detail": {},
                "runs": [],
            }

    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        for iid, res in pool.map(one, records):
            tasks[iid] = res
    return EnvValidation(env_key, spec.name, tasks, repeats, time.monotonic() - t0)


def write_result(result: EnvValidation, out: Path) -> None:
    atomic_write_text(out, json.dumps(result.to_dict(), indent=2, ensure_ascii=False) + "\n")


def write_not_validated(env_key: str, spec_name: str, out: Path) -> None:
    """The validation output of an environment job run with `validate: false`: the same
    format with no task results and `validated: false` (the job's declared output exists
    either way; the index reads validation results only when validation is on)."""
    doc = {**EnvValidation(env_key, spec_name, {}, 0, 0.0).to_dict(), "validated": False}
    atomic_write_text(out, json.dumps(doc, indent=2, ensure_ascii=False) + "\n")


def validated_ids(files: Iterable[Path]) -> list[str]:
    """Instance ids whose validation status is `valid`, over several env files."""
    out: set[str] = set()
    for f in files:
        data = json.loads(Path(f).read_text())
        out.update(i for i, t in data.get("tasks", {}).items() if t.get("status") == "valid")
    return sorted(out)


# --------------------------------------------------------------------------- workflow step


@dataclass
class EnvTasks:
    """One environment job's tasks and how to run them (`load_env_tasks`): what validation
    and labelling share."""

    spec: EnvSpec  # the environment's spec
    records: list[TaskRecord]
    repo_key_of: dict[str, str]  # instance id -> the repo key its task starts from
    spec_of: dict[str, EnvSpec]  # instance id -> the task's own spec (test command, parser, timeout)
    executor: Executor | None  # None when the environment or a repo did not publish
    error: str | None  # why there is no executor
    env_manifest: dict[str, Any] | None
    repo_manifests: dict[str, dict[str, Any]]


def load_env_tasks(plan_path: Path, env_key: str, receipts: Path, store: str) -> EnvTasks:
    """The tasks of `env_key` and their spec from the plan, and an executor over the layers
    the publish receipts name (the index does not exist yet while the workflow runs)."""
    from minisandbox.grading.evaluate import LayerExecutor
    from minisandbox.status import read_status

    plan = json.loads(Path(plan_path).read_text())
    env = plan["envs"][env_key]
    spec = EnvSpec.from_dict(env["spec"], origin=str(plan_path))
    records: list[TaskRecord] = []
    repo_key_of: dict[str, str] = {}
    spec_of: dict[str, EnvSpec] = {}
    specs = {name: EnvSpec.from_dict(d, origin=str(plan_path)) for name, d in plan.get("specs", {}).items()}
    with open(plan["tasks_file"], encoding="utf-8") as fh:
        for line in fh:
            t = json.loads(line)
            if t.get("env_key") != env_key:
                continue
            records.append(TaskRecord.from_dict(t["record"]))
            repo_key_of[t["instance_id"]] = t["repo_key"]
            if t.get("spec_name") in specs:
                spec_of[t["instance_id"]] = specs[t["spec_name"]]

    def manifest(kind: str, key: str) -> tuple[dict[str, Any] | None, str | None]:
        path = Path(receipts) / kind / f"{key}.json"
        try:
            st = read_status(path)
        except FileNotFoundError:
            return None, f"no publish receipt {path}"
        if not st.ok or st.data.get("status") != "ok":
            return None, f"{kind} {key}: {st.error or st.data.get('error') or 'failed'}"
        return st.data["manifest"], None

    env_m, error = manifest("env", env_key)
    repo_ms: dict[str, dict[str, Any]] = {}
    for rk in sorted(set(repo_key_of.values())):
        m, err = manifest("repo", rk)
        if m is None:
            error = error or err
        else:
            repo_ms[rk] = m
    executor = None
    if error is None and env_m is not None:
        executor = LayerExecutor(store=store, env_manifest=env_m, repo_manifests=repo_ms, repo_key_of=repo_key_of)
    return EnvTasks(spec, records, repo_key_of, spec_of, executor, error, env_m, repo_ms)


def step_validate(
    plan_path: Path,
    env_key: str,
    receipts: Path,
    store: str,
    out: Path,
    log_dir: Path,
    *,
    repeats: int = 1,
    workers: int = 2,
) -> EnvValidation:
    """The workflow's validation job for one environment: tasks and spec from the plan,
    layers from the publish receipts (the index does not exist yet)."""
    from minisandbox.fsutil import atomic_write_json

    job = load_env_tasks(plan_path, env_key, receipts, store)
    spec, records, spec_of, executor = job.spec, job.records, job.spec_of, job.executor
    # Per-task results are kept by what determines them, so adding tasks to a built
    # environment validates only the new (or changed) ones.
    memo = Path(out).parent / "memo" / env_key
    keys = (
        {
            r.instance_id: _memo_key(
                r,
                spec_of.get(r.instance_id, spec),
                job.env_manifest,
                job.repo_manifests.get(job.repo_key_of[r.instance_id]),
                repeats,
            )
            for r in records
        }
        if executor is not None
        else {}
    )
    reused = {
        iid: json.loads((memo / f"{k}.json").read_text()) for iid, k in keys.items() if (memo / f"{k}.json").exists()
    }
    todo = [r for r in records if r.instance_id not in reused]
    result = validate_env(
        env_key,
        spec,
        todo,
        executor,
        repeats=repeats,
        workers=workers,
        log_dir=log_dir,
        env_error=job.error,
        spec_of=spec_of,
    )
    for iid, res in result.tasks.items():
        if iid in keys and res["status"] != "env-broken":  # env errors are worth retrying
            atomic_write_json(memo / f"{keys[iid]}.json", res)
    result.tasks.update({iid: {**res, "reused": True} for iid, res in reused.items()})
    write_result(result, out)
    return result


def _memo_key(
    record: TaskRecord, spec: EnvSpec, env_m: dict[str, Any] | None, repo_m: dict[str, Any] | None, repeats: int
) -> str:
    """Everything a task's validation outcome depends on: the record, how it is tested,
    the exact environment and snapshot bytes, and the number of repeats."""
    doc = {
        "record": record.to_dict(),
        "test": [spec.test_cmd, spec.log_parser, spec.timeout],
        # archive and image digests: a layer published without an archive has only the latter
        "env": list(content_id(env_m or {})),
        "repo": list(content_id(repo_m or {})),
        "repeats": repeats,
        "schema": SCHEMA,
    }
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:32]
