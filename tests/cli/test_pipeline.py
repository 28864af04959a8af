"""`minisandbox plan` for a user and a script: counts on stdout (JSON alone with --json),
one INVALID line per bad record on stderr, exit 1 when no task is usable."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BUNDLED = ROOT / "config" / "bundled"
CATALOG = ROOT / "config" / "catalog" / "bundled.yaml"


def _plan(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "minisandbox.cli", "plan", *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_plan_json_alone_on_stdout_invalid_lines_on_stderr(tmp_path: Path) -> None:
    res = _plan(
        tmp_path,
        "--json",
        "--tasks",
        str(BUNDLED / "tasks.jsonl"),
        str(BUNDLED / "invalid_tasks.jsonl"),
        "--catalog",
        str(CATALOG),
    )
    assert res.returncode == 0, res.stderr
    plan = json.loads(res.stdout)
    assert (plan["tasks"], plan["envs"], plan["invalid"]) == (12, 3, 8)
    assert len(plan["invalid_records"]) == 8 and plan["invalid_records"][0]["field"] == "FAIL_TO_PASS"
    invalid = res.stderr.splitlines()
    assert len(invalid) == 8 and all(line.startswith(f"INVALID {BUNDLED / 'invalid_tasks.jsonl'}:") for line in invalid)
    assert invalid[0].endswith("field 'FAIL_TO_PASS': missing")


def test_plan_with_only_invalid_records_fails_with_one_line(tmp_path: Path) -> None:
    res = _plan(tmp_path, "--tasks", str(BUNDLED / "invalid_tasks.jsonl"), "--catalog", str(CATALOG))
    assert res.returncode == 1
    err = res.stderr.splitlines()
    assert err[-1] == (
        f"minisandbox plan: error: no usable task in the task files (8 invalid record(s)); first: "
        f"{BUNDLED / 'invalid_tasks.jsonl'}:1 (jpvanhal__inflection.09fb3146.func_pm_op_change__"
        f"a021d67c.missing_f2p): field 'FAIL_TO_PASS': missing"
    )
    assert res.stdout.startswith("0 tasks -> 0 environments")


def test_plan_names_the_record_that_matches_no_spec(tmp_path: Path) -> None:
    """A record with no environment spec is named by its own file and line, not the catalog's."""
    tasks = tmp_path / "t.jsonl"
    lines = (BUNDLED / "tasks.jsonl").read_text().splitlines()
    rec = json.loads(lines[0])
    rec["instance_id"] += ".other"
    rec["repo"] = "swesmith/nobody__nothing.12345678"
    tasks.write_text(lines[0] + "\n\n" + json.dumps(rec) + "\n")
    res = _plan(tmp_path, "--tasks", str(tasks), "--catalog", str(CATALOG))
    assert res.returncode == 0
    assert res.stderr == (
        f"INVALID {tasks}:3 ({rec['instance_id']}): field 'repo': no environment spec "
        f"'nobody__nothing.12345678' in the catalog (task {rec['instance_id']})\n"
    )


def test_plan_missing_catalog_or_task_file_is_one_line(tmp_path: Path) -> None:
    res = _plan(tmp_path, "--tasks", str(BUNDLED / "tasks.jsonl"), "--catalog", str(tmp_path / "nope.yaml"))
    assert (res.returncode, res.stdout) == (1, "")
    assert res.stderr == (
        f"minisandbox plan: error: catalog file {tmp_path / 'nope.yaml'} does not exist; check "
        f"--config catalog=... or --catalog (this checkout's catalogs: config/catalog/*.yaml)\n"
    )
    res = _plan(tmp_path, "--tasks", str(tmp_path / "nope.jsonl"), "--catalog", str(CATALOG))
    assert res.returncode == 1 and res.stderr.count("\n") == 1 and "task file" in res.stderr


def _env_args(*extra: str):
    from minisandbox.cli import build_parser

    return build_parser().parse_args(
        ["pipeline", "env", "--work", "w", "--store", "s", "--plan", "w/plan/current.json", *extra]
    )


def test_env_job_paths_from_the_key_are_the_workflow_rules_outputs() -> None:
    """The env rule passes only `--key`: the job's spec, receipt and result are the paths
    the rule declares (workflow/rules/common.smk: ENV_RECEIPT, ENV_RESULT; the spec the plan
    writes), in validation and in label mode; paths given one by one still win."""
    from minisandbox.cli.pipeline import _env_job_paths

    key = "env-foo-0123abcd"
    assert _env_job_paths(_env_args("--key", key), Path("w")) == (
        Path(f"w/specs/env/{key}.json"),
        Path(f"w/published/env/{key}.json"),
        Path(f"w/validation/{key}.json"),
    )
    assert _env_job_paths(_env_args("--key", key, "--label"), Path("w"))[2] == Path(f"w/labels/{key}.json")
    given = _env_args("--spec", "a.json", "--out", "b.json", "--validation", "c.json")
    assert _env_job_paths(given, Path("w")) == (Path("a.json"), Path("b.json"), Path("c.json"))
    common = (ROOT / "workflow" / "rules" / "common.smk").read_text()
    assert 'ENV_RECEIPT = f"{W}/published/env/{{env_key}}.json"' in common
    assert "ENV_RESULT = f\"{W}/{'labels' if LABEL else 'validation'}/{{env_key}}.json\"" in common


def test_env_job_without_key_or_paths_or_with_a_bad_key_is_one_line(tmp_path: Path) -> None:
    base = [sys.executable, "-m", "minisandbox.cli", "pipeline", "env", "--work", "w", "--store", "s", "--plan", "p"]
    for extra, want in (
        (["--spec", "a.json"], "pipeline env needs --key or --out, --validation"),
        (["--key", "env-x/../../etc"], "--key 'env-x/../../etc' is not an env key (env-...)"),
        (["--key", "repo-x"], "--key 'repo-x' is not an env key (env-...)"),
    ):
        res = subprocess.run(base + extra, cwd=tmp_path, capture_output=True, text=True, timeout=120)
        assert res.returncode != 0
        assert res.stderr.strip().splitlines()[-1].endswith(want), res.stderr
        assert "Traceback" not in res.stderr
