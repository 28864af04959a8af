"""The commands the README and the docs show exist as written, and the cheap ones run.

Every `minisandbox ...` and `snakemake ...` line in a code block or an inline code span of
README.md, config/README.md and docs/**/*.md is checked against the real parsers: the
subcommand exists, every `--option` it uses exists, every `--config key=...` is a key of
the workflow's schema, every `--profile` names a profile of this checkout. Then the cheap
commands are run for real: every command's --help, `plan` on the bundled set (whose
numbers the README states), `tasks` on a small store, `cache ls`, and a dry run of the
workflow.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from minisandbox.cli import build_parser, main

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", ROOT / "config" / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
SCHEMA = yaml.safe_load((ROOT / "workflow" / "schemas" / "config.schema.yaml").read_text())


def _mentions() -> list[tuple[str, str]]:
    """(where, command line) for every command the docs show."""
    out: list[tuple[str, str]] = []
    for doc in DOCS:
        lines = doc.read_text().splitlines()
        block = False
        for n, line in enumerate(lines, 1):
            where = f"{doc.relative_to(ROOT)}:{n}"
            if line.strip().startswith("```"):
                block = not block
                continue
            text = line.strip()
            if block or line.startswith("    "):
                if re.match(r"(minisandbox|snakemake) ", text):
                    # a trailing backslash continues on the next line
                    while text.endswith("\\") and n < len(lines):
                        text = text[:-1] + " " + lines[n].strip()
                        n += 1
                    out.append((where, text))
                continue
            for span in re.findall(r"`((?:minisandbox|snakemake) [^`]+)`", line):
                out.append((where, span))
    return out


MENTIONS = _mentions()


def _words(command: str) -> list[str]:
    command = re.sub(r"\s+#.*$", "", command)  # shell comment
    return shlex.split(command.replace("[", " ").replace("]", " ").replace("|", " "))


def _subparser(parser: argparse.ArgumentParser, words: list[str]) -> tuple[argparse.ArgumentParser, list[str]]:
    """Walk subcommands (`cache ls`, `pipeline index`); return the last parser and its path."""
    path: list[str] = []
    for w in words:
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not subs or w not in subs[0].choices:
            break
        parser = subs[0].choices[w]
        path.append(w)
    return parser, path


def test_the_docs_show_commands() -> None:
    assert len([m for m in MENTIONS if m[1].startswith("minisandbox ")]) >= 15
    assert len([m for m in MENTIONS if m[1].startswith("snakemake ")]) >= 5


@pytest.mark.parametrize(
    "where,command",
    [m for m in MENTIONS if m[1].startswith("minisandbox ")],
    ids=[m[0] for m in MENTIONS if m[1].startswith("minisandbox ")],
)
def test_minisandbox_commands_in_the_docs_exist(where: str, command: str) -> None:
    words = _words(command)[1:]
    parser, path = _subparser(build_parser(), words)
    assert path or words[0].startswith("-"), f"{where}: `{command}`: no such minisandbox command"
    options = {s for a in parser._actions for s in a.option_strings}
    for w in words[len(path) :]:
        if w == "--":
            break
        if w.startswith("--"):
            assert w.split("=")[0] in options, f"{where}: `{command}`: minisandbox {' '.join(path)} has no {w}"


def _profiles() -> set[str]:
    names = {p.name for p in (ROOT / "profiles").iterdir() if p.is_dir()}
    return names | {f"profiles/{n}" for n in names}


@pytest.mark.parametrize(
    "where,command",
    [m for m in MENTIONS if m[1].startswith("snakemake ")],
    ids=[m[0] for m in MENTIONS if m[1].startswith("snakemake ")],
)
def test_snakemake_commands_in_the_docs_use_real_config_keys_and_profiles(where: str, command: str) -> None:
    words = _words(command)[1:]
    keys = set(SCHEMA["properties"])
    for i, w in enumerate(words):
        if w == "--profile":
            assert words[i + 1] in _profiles(), f"{where}: no profile {words[i + 1]}"
        if w == "--config":
            for kv in words[i + 1 :]:
                if kv.startswith("-") or "=" not in kv:
                    break
                assert kv.split("=")[0] in keys, f"{where}: --config {kv}: not a workflow config key"


# ----------------------------------------------------------------------- cheap commands, run
USER_COMMANDS = ["fetch", "tasks", "cache", "run", "shell", "sandbox-exec", "eval", "push", "pull", "verify", "plan"]


@pytest.mark.parametrize("argv", [["--help"], *([c, "--help"] for c in USER_COMMANDS)], ids=" ".join)
def test_help(argv: list[str], capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 0
    assert "usage: minisandbox" in capsys.readouterr().out


def _run(argv: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "minisandbox.cli", *argv], cwd=cwd, capture_output=True, text=True, timeout=300
    )


def test_plan_on_the_bundled_set_gives_the_readme_numbers(tmp_path: Path) -> None:
    catalogs = sorted(str(p) for p in (ROOT / "config" / "catalog").glob("*.yaml"))
    tasks = [str(ROOT / "config" / "bundled" / n) for n in ("tasks.jsonl", "tasks_swebench.jsonl")]
    res = _run(["plan", "--json", "--tasks", *tasks, "--catalog", *catalogs], tmp_path)
    assert res.returncode == 0, res.stderr
    plan = json.loads(res.stdout)
    assert (plan["tasks"], plan["envs"], plan["invalid"]) == (14, 3, 0)
    readme = (ROOT / "README.md").read_text()
    assert "14\ntasks" in readme or "14 tasks" in readme
    assert "3 environments" in readme


def test_tasks_on_a_small_store_as_documented(published_store, tmp_path: Path) -> None:
    res = _run(["tasks", "--store", published_store["url"]], tmp_path)
    assert res.returncode == 0, res.stderr
    assert len(res.stdout.splitlines()) == len(published_store["tasks"])
    res = _run(["tasks", "--store", published_store["url"], "--status", "ready", "--json"], tmp_path)
    assert {r["status"] for r in json.loads(res.stdout)} == {"ready"}


def test_cache_ls_as_documented(tmp_path: Path) -> None:
    res = _run(["cache", "ls", "--cache", str(tmp_path)], tmp_path)
    assert res.returncode == 0 and res.stdout.startswith(f"cache {tmp_path}: 0 entries")


def test_readme_build_command_plans(tmp_path: Path) -> None:
    """`snakemake --cores 8 --config tasks=... store=s3://bucket/prefix` (README), as a dry run."""
    tasks = ",".join(str(ROOT / "config" / "bundled" / n) for n in ("tasks.jsonl", "tasks_swebench.jsonl"))
    cmd = [
        sys.executable,
        "-m",
        "snakemake",
        "--snakefile",
        str(ROOT / "workflow" / "Snakefile"),
        "--directory",
        str(tmp_path),
        "-n",
        "--cores",
        "8",
        "--config",
        f"tasks={tasks}",
        "store=s3://bucket/prefix",
        f"catalog={ROOT / 'config' / 'catalog' / 'bundled.yaml'}",
    ]
    res = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    # one job per environment builds, publishes and validates it (validation is on by default)
    assert re.search(r"^env\s+3$", res.stdout, re.M) and re.search(r"^validated_tasks\s+1$", res.stdout, re.M)


def test_ci_runs_the_readme_test_command_with_the_slowest_tests_listed() -> None:
    """CI (`.ci/run`) runs README's test command as written, and that command lists the
    slowest tests (`--durations`), so every CI log shows where the suite's time goes."""
    readme = (ROOT / "README.md").read_text()
    block = readme.split("```bash\n", 1)[1].split("```", 1)[0]
    commands = [re.sub(r"\s+#.*$", "", line).strip() for line in block.splitlines() if line.strip()]
    assert len(commands) == 2, commands
    test_cmd = commands[1]
    assert test_cmd.startswith(".venv/bin/python -m pytest") and "--durations=" in test_cmd, test_cmd
    ci = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert test_cmd in ci, f".ci/run does not run README's test command `{test_cmd}`"
    assert commands[0] in ci, f".ci/run does not run README's set-up command `{commands[0]}`"


# ----------------------------------------------------------------------- every shell command, as written
#: Programs the docs run through the project's environment. Debian has no `python` and its
#: `python3` lacks the dependencies, so a project file run with either fails on a fresh
#: clone after the README's set-up: the docs use `.venv/bin/python` (or `uv run`).
PROJECT_DIRS = ("bench/", "scripts/", "examples/", "tests/")

#: How each documented project program is checked without running it for hours, needing a
#: model, or fetched repositories/wheels: its `--help` must succeed and list every option
#: the docs pass to it. (The runs themselves are the benches' and e2e tests' business.)
HELP_ONLY = {
    "bench/bench_fetch.py": "minutes against a throttled moto_server",
    "bench/bench_scale.py": "plans 50,000 tasks; minutes",
    "bench/report.py": "renders saved bench output; --run-quick runs the benches",
    "bench/bench_dedup.py": "needs every profile's wheels downloaded",
    "bench/bench_fidelity.py": "clones and builds real repositories; hours",
    "bench/complete_mirror.py": "needs a fetched snapshot and release sdists (tests/test_bench_fidelity.py runs it on a local one)",
    "bench/bench_runtime.py": "10-45 minutes",
    "bench/bench_pipeline.py": "real workflow runs; minutes",
    "bench/bench_eval.py": "minutes of real evaluations (a published store; --checks builds the bundled repos)",
    "bench/bench_cli.py": "minutes of whole CLI processes and 64 concurrent sandboxes (bench/report.py --run-quick runs it)",
    "scripts/gen_catalog.py": "needs the shared data directory (docs/catalog.md); --check runs when it is there",
    "examples/ray_rollouts.py": "a Ray cluster and a store (tests/e2e/test_integrations_ray.py runs it)",
    "tests/fixtures/latency_proxy.py": "a long-running proxy",
}


def _shell_commands() -> list[tuple[str, str]]:
    """(where, command) for every documented command line that runs a program of this
    checkout or a console script: code blocks, indented blocks and inline code spans."""
    starts = re.compile(r"^(?:[A-Z_]+=\S+ )*(\.venv/bin/python|uv run|python3?|minisandbox-mini-batch)\s")
    out: list[tuple[str, str]] = []
    for doc in DOCS:
        lines = doc.read_text().splitlines()
        block = False
        for n, line in enumerate(lines, 1):
            where = f"{doc.relative_to(ROOT)}:{n}"
            if line.strip().startswith("```"):
                block = not block
                continue
            text = line.strip()
            candidates = [text] if block or line.startswith("    ") else re.findall(r"`([^`]+)`", line)
            for cand in candidates:
                if starts.match(cand):
                    while cand.endswith("\\") and n < len(lines):
                        cand = cand[:-1] + " " + lines[n].strip()
                        n += 1
                    out.append((where, cand))
    return out


SHELL = _shell_commands()


def test_docs_run_project_programs_through_the_project_environment() -> None:
    """`python bench/x.py` fails on Debian (no `python`; `python3` lacks the deps)."""
    assert len(SHELL) >= 10
    bare = [
        (w, c)
        for w, c in SHELL
        if re.match(r"^(?:[A-Z_]+=\S+ )*python3? ", c) and any(d in c.split()[1] for d in PROJECT_DIRS)
    ]
    assert bare == [], f"use .venv/bin/python: {bare}"
    for doc in DOCS:  # a command substitution runs Debian's python too, and captures banners
        assert "$(python" not in doc.read_text(), f"{doc.relative_to(ROOT)}: $(python ...) in a command"


def _program(command: str) -> tuple[str, list[str]] | None:
    words = _words(command)
    while words and re.match(r"^[A-Z_]+=", words[0]):
        words = words[1:]
    if words[:2] == ["uv", "run"]:
        words = ["python", *words[2:]] if words[2:3] != ["python"] else words[2:]
    if words and words[0].endswith("python") and len(words) > 1 and words[1].startswith(PROJECT_DIRS):
        return words[1], words[2:]
    return None


@pytest.mark.parametrize("program", sorted({p[0] for _w, c in SHELL if (p := _program(c))}))
def test_documented_project_programs_take_the_documented_options(program: str) -> None:
    assert program in HELP_ONLY, f"{program}: add it to HELP_ONLY with why it is not run here, or run it"
    assert (ROOT / program).is_file(), f"{program} does not exist"
    res = subprocess.run(
        [str(Path(sys.executable)), str(ROOT / program), "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0 and "usage:" in res.stdout, res.stderr[-2000:]
    for where, command in SHELL:
        p = _program(command)
        if p is None or p[0] != program:
            continue
        for w in p[1]:
            if w.startswith("--"):
                assert re.search(rf"(?<![\w-]){re.escape(w.split('=')[0])}(?![\w-])", res.stdout), (
                    f"{where}: `{command}`: {program} has no {w}"
                )


def test_gen_catalog_check_runs_where_its_data_is() -> None:
    """The documented `--check` (docs/catalog.md): with the shared data directory beside
    the checkout it must pass; without it, one line naming the missing input (exit 2)."""
    res = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen_catalog.py"), "--check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if (ROOT.parent / "shared" / "data").is_dir():
        assert res.returncode == 0, res.stdout + res.stderr
    else:
        assert res.returncode == 2 and res.stderr.count("\n") == 1 and "Traceback" not in res.stderr, res.stderr


def test_mini_batch_console_command_as_documented() -> None:
    """`minisandbox-mini-batch` is installed with the package ([project.scripts]) and takes
    every option the docs show."""
    import tomllib

    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["minisandbox-mini-batch"] == "minisandbox.integrations.minisweagent_batch:main"
    exe = Path(sys.executable).parent / "minisandbox-mini-batch"
    # an environment installed before the script was added lacks it until `uv sync`: run the
    # same entry point then (the declaration above is what a fresh install follows)
    argv = (
        [str(exe)]
        if exe.is_file()
        else [
            sys.executable,
            "-c",
            "import sys; sys.argv[0] = "
            "'minisandbox-mini-batch'; from minisandbox.integrations."
            "minisweagent_batch import main; sys.exit(main())",
        ]
    )
    res = subprocess.run([*argv, "--help"], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0 and res.stdout.startswith("usage: minisandbox-mini-batch"), res.stderr
    shown = [c for _w, c in SHELL if c.startswith("minisandbox-mini-batch ")]
    assert shown
    for command in shown:
        for w in _words(command)[1:]:
            if w.startswith("-") and w != "-":
                assert re.search(rf"(?<![\w-]){re.escape(w)}(?![\w-])", res.stdout), f"`{command}`: no {w}"
