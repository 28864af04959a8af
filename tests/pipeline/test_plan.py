"""Planning expands tasks into unique keys, reports unmatched tasks, and caches itself."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from minisandbox.catalog import Catalog
from minisandbox.pipeline.plan import build_plan, folded_repos, load_or_build_plan, write_key_specs, write_plan_files
from tests.fixtures.pipeline import BUG_PATCH, spec, task

C1 = "a" * 40
C2 = "b" * 40


def _swebench(iid: str, base: str, version: str = "1.0") -> dict:
    return {
        "instance_id": iid,
        "repo": "acme/widget",
        "base_commit": base,
        "version": version,
        "environment_setup_commit": C1,
        "patch": BUG_PATCH,
        "test_patch": "",
        "FAIL_TO_PASS": json.dumps(["t::a"]),
        "PASS_TO_PASS": "[]",
    }


def _catalog(tmp: Path) -> Path:
    specs = [
        spec("acme__lib.aaaaaaaa", "https://example.invalid/acme/lib.git", C1),
        {**spec("acme/widget@1.0", "https://example.invalid/acme/widget.git", C1), "commit": None, "kind": "swebench"},
    ]
    p = tmp / "cat.yaml"
    p.write_text(yaml.safe_dump({"specs": specs}))
    return p


def _tasks(tmp: Path, records: list[dict]) -> Path:
    p = tmp / "tasks.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in records))
    return p


def test_tasks_sharing_a_profile_share_one_env_and_repo(tmp_path):
    recs = [task(f"acme__lib.aaaaaaaa.x__{i:08d}", "acme__lib.aaaaaaaa") for i in range(50)]
    plan = build_plan([_tasks(tmp_path, recs)], Catalog.load([_catalog(tmp_path)]), tmp_path, tmp_path / "t.jsonl")
    assert plan.n_tasks == 50 and len(plan.envs) == 1 and len(plan.repos) == 1 and len(plan.sources) == 1
    lines = (tmp_path / "t.jsonl").read_text().splitlines()
    assert len(lines) == 50 and len({json.loads(x)["env_key"] for x in lines}) == 1


def test_swebench_tasks_share_env_but_not_snapshot(tmp_path):
    recs = [_swebench("acme__widget-1", C1), _swebench("acme__widget-2", C2)]
    plan = build_plan([_tasks(tmp_path, recs)], Catalog.load([_catalog(tmp_path)]), tmp_path, tmp_path / "t.jsonl")
    assert len(plan.envs) == 1
    # base commits C1 (== env setup commit) and C2: two snapshots
    assert sorted(r["commit"] for r in plan.repos.values()) == [C1, C2]
    ((key, env),) = plan.envs.items()
    assert plan.repos[env["repo_key"]]["commit"] == C1
    assert plan.env_repos[key] == sorted(plan.repos)  # the per-env jobs wait for exactly these


def test_task_without_spec_is_reported_not_dropped(tmp_path):
    recs = [task("nope__x.12345678.a__00000001", "nope__x.12345678"), _swebench("acme__widget-9", C1, version="9.9")]
    plan = build_plan([_tasks(tmp_path, recs)], Catalog.load([_catalog(tmp_path)]), tmp_path, tmp_path / "t.jsonl")
    assert plan.n_tasks == 0
    assert {(r["instance_id"], r["field"]) for r in plan.invalid} == {
        ("nope__x.12345678.a__00000001", "repo"),
        ("acme__widget-9", "version"),
    }
    assert all("no environment spec" in r["error"] for r in plan.invalid)


def test_plan_is_cached_by_input_content(tmp_path):
    tasks = _tasks(tmp_path, [task("acme__lib.aaaaaaaa.x__00000001", "acme__lib.aaaaaaaa")])
    cat = _catalog(tmp_path)
    p1 = load_or_build_plan([tasks], [cat], tmp_path, tmp_path / "plans")
    p2 = load_or_build_plan([tasks], [cat], tmp_path, tmp_path / "plans")
    assert p1.tasks_file == p2.tasks_file
    assert len(list((tmp_path / "plans").iterdir())) == 1
    # a catalog change is a new plan
    cat.write_text(cat.read_text().replace("python -m pip install -e .", "python -m pip install ."))
    p3 = load_or_build_plan([tasks], [cat], tmp_path, tmp_path / "plans")
    assert p3.tasks_file != p1.tasks_file and set(p3.envs) != set(p1.envs)


def test_key_spec_files_are_write_once(tmp_path):
    tasks = _tasks(tmp_path, [task("acme__lib.aaaaaaaa.x__00000001", "acme__lib.aaaaaaaa")])
    plan = load_or_build_plan([tasks], [_catalog(tmp_path)], tmp_path, tmp_path / "plans")
    write_key_specs(plan, tmp_path / "specs")
    (env_file,) = (tmp_path / "specs" / "env").iterdir()
    before = env_file.stat().st_mtime_ns
    write_key_specs(plan, tmp_path / "specs")
    assert env_file.stat().st_mtime_ns == before  # untouched: no spurious reruns
    assert json.loads(env_file.read_text())["spec"]["name"] == "acme__lib.aaaaaaaa"


def test_a_repo_only_its_environment_uses_is_folded_into_that_environments_job(tmp_path):
    """SWE-smith: the env's build commit is its tasks' commit and nothing else uses it ->
    no repo job. SWE-bench: the build commit C1 is also a task's base commit of the same
    env (folded); C2 only a task's base commit (a repo job, which the env job waits for)."""
    recs = [
        task("acme__lib.aaaaaaaa.x__00000001", "acme__lib.aaaaaaaa"),
        _swebench("acme__widget-1", C1),
        _swebench("acme__widget-2", C2),
    ]
    plan = build_plan([_tasks(tmp_path, recs)], Catalog.load([_catalog(tmp_path)]), tmp_path, tmp_path / "t.jsonl")
    by_commit = {(v["source"].rsplit("/", 1)[-1], v["commit"]): k for k, v in plan.repos.items()}
    env_of = {v["spec"]["name"]: k for k, v in plan.envs.items()}
    assert plan.folded == {
        by_commit["lib.git", C1]: env_of["acme__lib.aaaaaaaa"],
        by_commit["widget.git", C1]: env_of["acme/widget@1.0"],
    }
    assert plan.repo_jobs() == [by_commit["widget.git", C2]]


def test_a_repo_two_environments_use_keeps_its_own_job() -> None:
    envs = {"env-a": {"repo_key": "repo-x"}, "env-b": {"repo_key": "repo-x"}, "env-c": {"repo_key": "repo-y"}}
    assert folded_repos(envs, {}) == {"repo-y": "env-c"}
    # a task of env-a starting from env-c's build commit: repo-y has two users now
    assert folded_repos(envs, {"env-a": ["repo-x", "repo-y"]}) == {}


def test_plan_files_are_skipped_when_the_last_plan_written_is_this_one(tmp_path):
    tasks = _tasks(tmp_path, [task("acme__lib.aaaaaaaa.x__00000001", "acme__lib.aaaaaaaa")])
    plan = load_or_build_plan([tasks], [_catalog(tmp_path)], tmp_path, tmp_path / "plans")
    current = tmp_path / "plans" / "current.json"
    write_plan_files(plan, tmp_path / "specs", current)
    assert json.loads(current.read_text()) == plan.to_dict() and plan.fingerprint
    (digest,) = (tmp_path / "specs" / "env-tasks").iterdir()
    digest.write_text("{}")  # only a write could repair this: the fast path does not look
    write_plan_files(plan, tmp_path / "specs", current)
    assert digest.read_text() == "{}"
    # another plan (one more task) rewrites what changed, then going back rewrites it again
    more = _tasks(
        tmp_path,
        [
            task("acme__lib.aaaaaaaa.x__00000001", "acme__lib.aaaaaaaa"),
            task("acme__lib.aaaaaaaa.x__00000002", "acme__lib.aaaaaaaa"),
        ],
    )
    plan2 = load_or_build_plan([more], [_catalog(tmp_path)], tmp_path, tmp_path / "plans")
    write_plan_files(plan2, tmp_path / "specs", current)
    assert json.loads(digest.read_text())["tasks_sha256"] == plan2.env_tasks[digest.stem]
    assert json.loads(current.read_text())["fingerprint"] == plan2.fingerprint != plan.fingerprint


# ------------------------------------------------------------------ loud errors
def test_invalid_summary_warns_with_every_record_up_to_a_limit_and_fails_when_nothing_is_usable() -> None:
    from minisandbox.pipeline.plan import Plan, invalid_summary

    bad = [
        {"file": "t.jsonl", "line": n, "field": "patch", "error": "missing", "instance_id": f"x.{n}"}
        for n in range(1, 26)
    ]
    warning, fatal = invalid_summary(Plan(invalid=bad, n_tasks=3))
    lines = warning.splitlines()
    assert fatal is None
    assert lines[0] == "minisandbox: warning: 25 task record(s) are invalid and left out (3 usable):"
    assert lines[1] == "  t.jsonl:1 (x.1): field 'patch': missing"
    assert len(lines) == 1 + 20 + 1 and lines[-1] == "  ... and 5 more (all in results/report.txt)"
    assert invalid_summary(Plan(invalid=[], n_tasks=3)) == (None, None)
    warning, fatal = invalid_summary(Plan(invalid=bad, n_tasks=0))
    assert warning is None and fatal == (
        "no usable task in the task files (25 invalid record(s)); first: t.jsonl:1 (x.1): field 'patch': missing"
    )
    assert invalid_summary(Plan())[1] == "the task files hold no task record; check --config tasks=... or --tasks"
