"""The workflow follows Snakemake's conventions (the workflow catalog's quality checks):
`snakefmt --check` is clean, `snakemake --lint` reports nothing but the one finding
justified in workflow/rules/common.smk, every rule has a docstring, a log and (heavy
rules) a benchmark, and the catalog's standardized-usage files are there."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
SNAKEFILE = ROOT / "workflow" / "Snakefile"
#: The one lint finding kept on purpose (see the comment at the top of common.smk).
ALLOWED_LINT = "Specify a conda environment or container for each rule."
BENCHMARKED = {"env", "repo"}  # validation runs inside the env job (rules/envs.smk)


def _snakemake(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    """Snakemake on the real workflow, on the bundled task set, in a scratch directory."""
    cmd = [
        sys.executable,
        "-m",
        "snakemake",
        "--snakefile",
        str(SNAKEFILE),
        "--directory",
        str(cwd),
        "--config",
        f"tasks={ROOT / 'config/bundled/tasks.jsonl'}",
        f"catalog={ROOT / 'config/catalog/bundled.yaml'}",
        *args,
    ]
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=600)


def test_snakefmt_check_is_clean() -> None:
    res = subprocess.run(
        [sys.executable, "-m", "snakefmt", "--check", "--diff", "workflow"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, f"run `snakefmt workflow`:\n{res.stdout[-3000:]}{res.stderr[-3000:]}"


def _lints(text: str) -> list[tuple[str, str]]:
    """(item, title) pairs from `snakemake --lint`'s text report (its JSON mode is not
    reachable from the command line in Snakemake 9)."""
    found, item = [], None
    for line in text.splitlines():
        m = re.match(r"Lints for (.+):$", line)
        if m:
            item = m.group(1)
            continue
        m = re.match(r"    \* (.+):$", line)
        if m and item:
            found.append((item, m.group(1)))
    return found


def test_lint_reports_only_the_justified_finding(tmp_path: Path) -> None:
    res = _snakemake(["--lint"], tmp_path)
    lints = _lints(res.stdout + res.stderr)
    assert lints, res.stderr[-3000:]  # the justified finding is there, so the report was parsed
    other = [f"{item}: {title}" for item, title in lints if title != ALLOWED_LINT]
    assert not other, "\n".join(other)
    # one per rule that runs a command
    assert {item.split(" (")[0] for item, _ in lints} >= {f"rule {r}" for r in BENCHMARKED}


def test_every_rule_has_a_docstring_log_and_the_heavy_ones_a_benchmark(tmp_path: Path) -> None:
    res = _snakemake(["--list-rules"], tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    rules = [line for line in res.stdout.splitlines() if re.match(r"^\w+", line)]
    assert len(rules) >= 7
    for line in rules:
        assert re.match(r"^\w+ \(.+", line), f"rule without a docstring: {line}"
    text = "\n".join(p.read_text() for p in sorted((ROOT / "workflow" / "rules").glob("*.smk")))
    for rule in BENCHMARKED:
        body = re.search(rf"^rule {rule}:\n((?:    .*\n|\n)+)", text, re.M)
        assert body and "    benchmark:" in body.group(1), f"rule {rule} has no benchmark"


def test_catalog_standardized_usage_files() -> None:
    """workflow/Snakefile, config/README.md and .snakemake-workflow-catalog.yml (the
    Snakemake workflow catalog's 'standardized usage')."""
    assert SNAKEFILE.is_file()
    readme = (ROOT / "config" / "README.md").read_text()
    schema = yaml.safe_load((ROOT / "workflow" / "schemas" / "config.schema.yaml").read_text())
    for key in schema["properties"]:
        assert f"`{key}`" in readme, f"config/README.md does not describe `{key}`"
        assert schema["properties"][key].get("description"), f"schema: `{key}` has no description"
    defaults = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    for key, prop in schema["properties"].items():
        if "default" in prop and key in defaults:
            assert prop["default"] == defaults[key], f"schema default of {key} differs from config.yaml"
    usage = yaml.safe_load((ROOT / ".snakemake-workflow-catalog.yml").read_text())["usage"]
    assert set(usage["software-stack-deployment"]) == {"conda", "apptainer", "apptainer+conda"}
    assert usage["mandatory-flags"]["desc"]


def test_one_snakefile_and_its_workflow_profile_next_to_it() -> None:
    """workflow/Snakefile is the only entry point (Snakemake finds it from the checkout
    root); the one workflow profile sits next to it, found from the root and from anywhere
    else (tests/test_profiles.py runs Snakemake's lookup)."""
    assert not (ROOT / "Snakefile").exists()
    assert not (ROOT / "profiles" / "default").exists()
    assert (ROOT / "workflow" / "profiles" / "default" / "config.yaml").is_file()


@pytest.mark.parametrize("rules_file", sorted(p.name for p in (ROOT / "workflow" / "rules").glob("*.smk")))
def test_shell_commands_read_no_config_or_globals(rules_file: str) -> None:
    """Belt and braces for the lint: no `{config[...]}` or bare upper-case globals in a
    shell string (they belong in params, so provenance tracking sees them)."""
    text = (ROOT / "workflow" / "rules" / rules_file).read_text()
    for m in re.finditer(r'(?<![fr])"[^"\n]*\{(config\[|[A-Z_]+\})[^"\n]*"', text):
        pytest.fail(f"{rules_file}: {m.group(0)}")


# ------------------------------------------------------------------ loud errors at parse time
BUNDLED = ROOT / "config" / "bundled"


def _dry_run(tmp_path: Path, tasks: str, catalog: str) -> subprocess.CompletedProcess:
    cmd = [
        sys.executable,
        "-m",
        "snakemake",
        "--snakefile",
        str(SNAKEFILE),
        "--directory",
        str(tmp_path),
        "-n",
        "--config",
        f"tasks={tasks}",
        f"catalog={catalog}",
    ]
    return subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=600)


def test_broken_task_file_stops_the_dry_run_with_one_line(tmp_path: Path) -> None:
    res = _dry_run(tmp_path, str(BUNDLED / "invalid_tasks.jsonl"), str(ROOT / "config/catalog/bundled.yaml"))
    assert res.returncode == 1
    last = res.stderr.strip().splitlines()[-1]
    assert last == (
        f"minisandbox: no usable task in the task files (8 invalid record(s)); first: "
        f"{BUNDLED / 'invalid_tasks.jsonl'}:1 (jpvanhal__inflection.09fb3146.func_pm_op_change__"
        f"a021d67c.missing_f2p): field 'FAIL_TO_PASS': missing"
    )
    assert "Traceback" not in res.stderr and "File " not in res.stderr


def test_some_invalid_records_warn_loudly_and_the_rest_plans(tmp_path: Path) -> None:
    res = _dry_run(
        tmp_path,
        f"{BUNDLED / 'tasks.jsonl'},{BUNDLED / 'invalid_tasks.jsonl'}",
        str(ROOT / "config/catalog/bundled.yaml"),
    )
    assert res.returncode == 0, res.stderr[-3000:]
    err = res.stderr.splitlines()
    start = err.index("minisandbox: warning: 8 task record(s) are invalid and left out (12 usable):")
    named = err[start + 1 : start + 9]
    assert all(line.startswith(f"  {BUNDLED / 'invalid_tasks.jsonl'}:") for line in named), named
    assert "field 'patch': not a unified diff" in named[1]
    assert "Job stats" in res.stdout


def test_missing_catalog_is_one_line_inside_snakemake(tmp_path: Path) -> None:
    res = _dry_run(tmp_path, str(BUNDLED / "tasks.jsonl"), str(tmp_path / "nope.yaml"))
    assert res.returncode == 1
    assert res.stderr.strip().splitlines()[-1] == (
        f"minisandbox: catalog file {tmp_path / 'nope.yaml'} does not exist; check --config catalog=... or "
        f"--catalog (this checkout's catalogs: config/catalog/*.yaml)"
    )
    assert "Traceback" not in res.stderr and "FileNotFoundError" not in res.stderr
