#!/usr/bin/env python3
"""Generate the bundled default task set (kept for reproducibility).

For each project below (a real PyPI sdist committed under config/bundled/sources/) this
script:

1. builds the local git repo with `minisandbox.pipeline.bundled.build_repo` (deterministic hashes);
2. creates a uv venv on the pinned interpreter with the exact requirement pins plus an
   editable install of a work clone, and runs the real test suite with the SWE-smith test
   command (`pytest --disable-warnings --color=no --tb=no --verbose`; the SWE-bench-form spec
   gets SWE-bench's own `pytest --no-header -rA --tb=no -p no:cacheprovider`);
3. SWE-smith form: applies each bug, reruns the suite and labels tests with SWE-smith's rule
   (F2P = passes at the commit and fails or is missing with the
   bug; ERROR with the bug -> neither; P2P = passes at both, sampled to at most P2P_MAX);
4. SWE-bench form: makes a base commit = main + bug + the test functions that catch it
   removed; `test_patch` restores them, `patch` (gold) fixes the source; F2P/P2P come
   from running the test patch's files (as the SWE-bench harness does) at base+test_patch
   (before) and base+test_patch+patch (after);
5. writes config/bundled/{repos.yaml,patches/,tasks.jsonl,tasks_swebench.jsonl,
   invalid_tasks.jsonl} and config/catalog/bundled.yaml.

Run: `.venv/bin/python scripts/make_bundled_tasks.py` (needs uv, pyenv interpreters, PyPI access).
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import random
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from minisandbox.catalog import DEFAULT_TEST_CMD  # noqa: E402
from minisandbox.pipeline.bundled import Branch, RepoRecipe, build_repo, git  # noqa: E402

BUNDLED = ROOT / "config" / "bundled"
CATALOG = ROOT / "config" / "catalog" / "bundled.yaml"
SOURCE_PREFIX = "results/bundled/repos"
P2P_MAX = 30
PYTEST_ARGS = ["--disable-warnings", "--color=no", "--tb=no", "--verbose", "-p", "no:cacheprovider"]

# pytest 8.3.3 and its exact dependency pins as resolved from PyPI when the set was made.
PYTEST_PINS = ["pytest==8.3.3", "iniconfig==2.3.1", "packaging==26.4", "pluggy==1.7.0"]
PY310_EXTRA = ["exceptiongroup==1.3.2", "tomli==2.5.0", "typing-extensions==4.16.0"]


@dataclass(frozen=True)
class Bug:
    """One source edit: replace exactly one occurrence of `old` by `new` in `file`."""

    bugtype: str
    file: str
    old: str
    new: str
    statement: str


@dataclass(frozen=True)
class Project:
    name: str  # "<owner>__<repo>"
    upstream: str
    sdist: str
    python: str  # minor version for the spec
    interpreter: str  # full pyenv version used to compute the labels
    requirements: list[str]
    bugs: list[Bug]
    swebench: list[Bug] = field(default_factory=list)
    swebench_version: str = ""

    @property
    def owner_repo(self) -> str:
        return self.name.replace("__", "/", 1)


INFLECTION = Project(
    name="jpvanhal__inflection",
    upstream="https://github.com/jpvanhal/inflection",
    sdist="sources/inflection-0.5.1.tar.gz",
    python="3.10",
    interpreter="3.10.13",
    requirements=PYTEST_PINS + PY310_EXTRA,
    bugs=[
        Bug(
            "func_pm_op_change",
            "inflection/__init__.py",
            "    if number % 100 in (11, 12, 13):\n",
            "    if number % 10 in (11, 12, 13):\n",
            "ordinal() and ordinalize() give the wrong suffix for 11, 12 and 13: `ordinalize(11)` "
            "returns '11st' instead of '11th', and the same happens for 111, 1012 and friends.",
        ),
        Bug(
            "func_pm_remove_assign",
            "inflection/__init__.py",
            "    word = re.sub(r\"_id$\", \"\", word)\n    word = word.replace('_', ' ')\n",
            "    word = word.replace('_', ' ')\n",
            "humanize() no longer strips a trailing `_id`: `humanize('author_id')` returns 'Author id' "
            "instead of 'Author', which also changes titleize() for such words.",
        ),
        Bug(
            "func_pm_op_swap",
            "inflection/__init__.py",
            "    word = re.sub(r\"([A-Z]+)([A-Z][a-z])\", r'\\1_\\2', word)\n",
            "    word = re.sub(r\"([A-Z]+)([A-Z][a-z])\", r'\\2_\\1', word)\n",
            "underscore() scrambles acronyms followed by a word: `underscore('HTMLTidy')` should be "
            "'html_tidy'; titleize() and tableize() of such names are wrong too.",
        ),
        Bug(
            "func_pm_remove_cond",
            "inflection/__init__.py",
            "        # Remove leading/trailing separator.\n"
            "        string = re.sub(r\"(?i)^{sep}|{sep}$\".format(sep=re_sep), '', string)\n",
            "",
            "parameterize() keeps leading and trailing separators: `parameterize('Random text with "
            "*(bad)* characters')` ends with '-' instead of '...-bad-characters'.",
        ),
    ],
)

PARSE = Project(
    name="r1chardj0n3s__parse",
    upstream="https://github.com/r1chardj0n3s/parse",
    sdist="sources/parse-1.20.2.tar.gz",
    python="3.11",
    interpreter="3.11.7",
    requirements=PYTEST_PINS,
    bugs=[
        Bug(
            "func_pm_op_change_const",
            "parse.py",
            '        if am == "AM" and H == 12:\n',
            '        if am == "AM" and H == 11:\n',
            "Times like '12:15 AM' parse as 12:15 instead of 00:15, and '11:30 AM' comes out as half past midnight.",
        ),
        Bug(
            "func_pm_flip_operators",
            "parse.py",
            '            if sign == "-":\n                offset = -offset\n',
            '            if sign == "+":\n                offset = -offset\n',
            "Timezone offsets are parsed with the wrong sign: '+10:00' yields a tzinfo of "
            "UTC-10:00 and '-05:00' yields UTC+05:00.",
        ),
        Bug(
            "func_pm_op_change",
            "parse.py",
            "        spans.update((i, m.span(n + 1)) for i, n in enumerate(self._fixed_fields))\n",
            "        spans.update((i, m.span(n)) for i, n in enumerate(self._fixed_fields))\n",
            "Result.spans reports the wrong character ranges for positional fields: "
            "`parse('{} {}', 'a b').spans` does not give (0, 1) and (2, 3).",
        ),
        Bug(
            "func_pm_op_change_const",
            "parse.py",
            '                elif string[number_start + 1] in "oO":\n                    base = 8\n',
            '                elif string[number_start + 1] in "oO":\n                    base = 16\n',
            "Octal literals are read as hexadecimal: `parse('{:d}', '0o1000')` gives 4096 instead of 512.",
        ),
    ],
    swebench=[
        Bug(
            "swebench",
            "parse.py",
            "    return float(string[:-1]) / 100.0\n",
            "    return float(string[:-1]) / 10.0\n",
            "The `%` format type returns ten times the right value: `parse('{:%}', '50%')` gives 5.0 instead of 0.5.",
        ),
        Bug(
            "swebench",
            "parse.py",
            "                    k = subkey[1:-1]\n",
            "                    k = subkey[1:]\n",
            "Named fields with dictionary syntax are stored under the wrong key: "
            "`parse('{hello[world]}', 'x').named` gives {'hello': {'world]': 'x'}} instead of "
            "{'hello': {'world': 'x'}}.",
        ),
    ],
    swebench_version="1.20",
)

TOOLZ = Project(
    name="pytoolz__toolz",
    upstream="https://github.com/pytoolz/toolz",
    sdist="sources/toolz-1.0.0.tar.gz",
    python="3.12",
    interpreter="3.12.1",
    requirements=PYTEST_PINS,
    bugs=[
        Bug(
            "func_pm_remove_cond",
            "toolz/dicttoolz.py",
            "        remaining = set(d)\n        remaining.difference_update(keys)\n",
            "        remaining = set(d)\n",
            "dissoc() with many keys returns the dictionary unchanged: dissoc({'x': 1, 'y': 2}, 'y', 'x') "
            "should be {} but nothing is removed.",
        ),
        Bug(
            "func_pm_op_change",
            "toolz/itertoolz.py",
            "        return seq[-n:]\n",
            "        return seq[n:]\n",
            "tail(2, [10, 20, 30, 40, 50]) returns [30, 40, 50] instead of the last two elements.",
        ),
        Bug(
            "func_pm_op_change_const",
            "toolz/itertoolz.py",
            "    return zip(*(collections.deque(itertools.islice(it, i), 0) or it\n",
            "    return zip(*(collections.deque(itertools.islice(it, i + 1), 0) or it\n",
            "sliding_window() skips elements: sliding_window(2, [1, 2, 3, 4]) should give (1, 2), (2, 3), (3, 4).",
        ),
        Bug(
            "func_pm_aug_assign_swap",
            "toolz/itertoolz.py",
            "    for item in seq:\n        d[item] += 1\n    return dict(d)\n",
            "    for item in seq:\n        d[item] = 1\n    return dict(d)\n",
            "frequencies() reports 1 for every value: frequencies(['cat', 'cat', 'ox']) gives "
            "{'cat': 1, 'ox': 1} instead of {'cat': 2, 'ox': 1}; countby() is affected too.",
        ),
    ],
)

PROJECTS: list[Project] = [INFLECTION, PARSE, TOOLZ]


# ---------------------------------------------------------------- running the suite

_RESULT = re.compile(r"^(\S.*?) (PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)(?: \(.*\))?(?: +\[ *\d+%\])?\s*$")


def parse_verbose(log: str) -> dict[str, str]:
    """test id -> status from `pytest --verbose` output (ids may contain spaces)."""
    out: dict[str, str] = {}
    for line in log.splitlines():
        m = _RESULT.match(line)
        if m and "::" in m.group(1):
            out[m.group(1)] = m.group(2)
    return out


def make_venv(project: Project, workdir: Path, venv: Path) -> None:
    interp = Path(subprocess.check_output(["pyenv", "root"], text=True).strip()) / "versions" / project.interpreter
    subprocess.run(["uv", "venv", "-q", "-p", str(interp / "bin" / "python"), str(venv)], check=True)
    subprocess.run(
        [
            "uv",
            "pip",
            "install",
            "-q",
            "--python",
            str(venv / "bin" / "python"),
            *project.requirements,
            "-e",
            str(workdir),
        ],
        check=True,
    )


def run_suite(workdir: Path, venv: Path, paths: tuple[str, ...] = ()) -> dict[str, str]:
    """Run the suite (or only `paths`, as SWE-bench runs only the test patch's files)."""
    proc = subprocess.run(
        [str(venv / "bin" / "pytest"), *PYTEST_ARGS, *paths], cwd=workdir, capture_output=True, text=True, timeout=600
    )
    results = parse_verbose(proc.stdout)
    if not results:
        raise SystemExit(f"{workdir}: no test results parsed; pytest said:\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    return results


def label(clean: dict[str, str], buggy: dict[str, str]) -> tuple[list[str], list[str]]:
    """SWE-smith's labelling rule: F2P = passes clean, fails/missing buggy (ERROR -> neither)."""
    passed = {t for t, s in clean.items() if s in ("PASSED", "XFAIL")}
    f2p = sorted(t for t in passed if buggy.get(t) in (None, "FAILED"))
    p2p = sorted(t for t in passed if buggy.get(t) in ("PASSED", "XFAIL"))
    return f2p, p2p


def sample(tests: list[str], seed: str, limit: int = P2P_MAX) -> list[str]:
    if len(tests) <= limit:
        return tests
    return sorted(random.Random(seed).sample(tests, limit))


def apply_edit(workdir: Path, bug: Bug) -> None:
    path = workdir / bug.file
    text = path.read_text()
    if text.count(bug.old) != 1:
        raise SystemExit(f"{bug.file}: edit for {bug.bugtype} matches {text.count(bug.old)} times, need exactly 1")
    path.write_text(text.replace(bug.old, bug.new))


def reset(workdir: Path, ref: str = "main") -> None:
    git(workdir, "checkout", "-q", "-f", ref)
    git(workdir, "reset", "-q", "--hard", ref)
    git(workdir, "clean", "-q", "-fdx", "-e", "*.egg-info")


# ---------------------------------------------------------------- SWE-bench helpers


def remove_tests(workdir: Path, test_ids: list[str]) -> list[str]:
    """Delete the test functions (whole, with decorators) that the ids name; return files touched."""
    by_file: dict[str, set[tuple[str, ...]]] = {}
    for tid in test_ids:
        file, *names = tid.split("::")
        names[-1] = names[-1].split("[", 1)[0]
        by_file.setdefault(file, set()).add(tuple(names))
    for file, targets in by_file.items():
        path = workdir / file
        lines = path.read_text().splitlines(keepends=True)
        spans: list[tuple[int, int]] = []

        def visit(body: list[ast.stmt], prefix: tuple[str, ...]) -> None:
            for node in body:
                if isinstance(node, ast.ClassDef):
                    visit(node.body, prefix + (node.name,))
                elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and prefix + (node.name,) in targets:
                    start = min([node.lineno] + [d.lineno for d in node.decorator_list]) - 1
                    spans.append((start, node.end_lineno or node.lineno))

        visit(ast.parse("".join(lines)).body, ())
        if len(spans) != len(targets):
            raise SystemExit(f"{file}: found {len(spans)} of {len(targets)} test functions to remove")
        for start, end in sorted(spans, reverse=True):
            while end < len(lines) and not lines[end].strip():
                end += 1  # drop the blank lines after the function too
            del lines[start:end]
        path.write_text("".join(lines))
    return sorted(by_file)


# ---------------------------------------------------------------- generation


def sdist_sha(project: Project) -> str:
    return hashlib.sha256((BUNDLED / project.sdist).read_bytes()).hexdigest()


def recipe_for(project: Project, branches: tuple[Branch, ...] = (), head: str | None = None) -> RepoRecipe:
    version = Path(project.sdist).name.removesuffix(".tar.gz").rsplit("-", 1)[1]
    return RepoRecipe(
        name=project.name,
        upstream=project.upstream,
        sdist=project.sdist,
        sdist_sha256=sdist_sha(project),
        message=f"{project.owner_repo} {version} (source distribution from PyPI)",
        head=head,
        branches=branches,
    )


def swesmith_tasks(project: Project, commit: str, workdir: Path, venv: Path, clean: dict[str, str]) -> list[dict]:
    profile = f"{project.name}.{commit[:8]}"
    tasks = []
    for bug in project.bugs:
        reset(workdir)
        apply_edit(workdir, bug)
        patch = git(workdir, "diff", "main", raw=True)
        buggy = run_suite(workdir, venv)
        f2p, p2p = label(clean, buggy)
        iid = f"{profile}.{bug.bugtype}__{hashlib.sha256(patch.encode()).hexdigest()[:8]}"
        if not f2p or not p2p:
            raise SystemExit(f"{iid}: F2P ({len(f2p)}) and P2P ({len(p2p)}) must both be non-empty")
        print(f"  {iid}: F2P {len(f2p)}, P2P {len(p2p)} (of {len(clean)} tests)")
        tasks.append(
            {
                "instance_id": iid,
                "repo": f"swesmith/{profile}",
                "patch": patch,
                "FAIL_TO_PASS": f2p,
                "PASS_TO_PASS": sample(p2p, iid),
                "problem_statement": bug.statement,
            }
        )
    reset(workdir)
    return tasks


def swebench_branches(project: Project, workdir: Path, venv: Path, clean: dict[str, str]) -> tuple[Branch, ...]:
    """Create the base-commit patches (bug + catching tests removed) under config/bundled/patches."""
    branches = []
    for n, bug in enumerate(project.swebench, 1):
        reset(workdir)
        apply_edit(workdir, bug)
        f2p, _ = label(clean, run_suite(workdir, venv))
        if not f2p:
            raise SystemExit(f"{project.name} SWE-bench bug {n}: no test catches it")
        remove_tests(workdir, f2p)
        iid = f"{project.name}-{n}"
        rel = f"patches/{iid}.base.diff"
        (BUNDLED / rel).parent.mkdir(parents=True, exist_ok=True)
        (BUNDLED / rel).write_text(git(workdir, "diff", "main", raw=True))
        branches.append(Branch(name=f"swebench/{iid}", patch=rel, message=f"{iid}: base commit"))
    reset(workdir)
    return tuple(branches)


def swebench_tasks(project: Project, refs: dict[str, str], workdir: Path, venv: Path) -> list[dict]:
    tasks = []
    main = refs["main"]
    for n, bug in enumerate(project.swebench, 1):
        iid = f"{project.name}-{n}"
        base = refs[f"swebench/{iid}"]
        test_files = [f for f in git(workdir, "diff", "--name-only", base, main).splitlines() if f != bug.file]
        patch = git(workdir, "diff", base, main, "--", bug.file, raw=True)
        test_patch = git(workdir, "diff", base, main, "--", *test_files, raw=True)
        reset(workdir, base)
        git(workdir, "apply", "-", input=test_patch.encode())
        # like the SWE-bench harness: only the test files the test patch touches are run
        before = run_suite(workdir, venv, test_files)
        git(workdir, "apply", "-", input=patch.encode())
        after = run_suite(workdir, venv, test_files)
        f2p = sorted(t for t, s in after.items() if s == "PASSED" and before.get(t) in (None, "FAILED"))
        p2p = sorted(t for t, s in after.items() if s == "PASSED" and before.get(t) == "PASSED")
        if not f2p or not p2p:
            raise SystemExit(f"{iid}: F2P ({len(f2p)}) and P2P ({len(p2p)}) must both be non-empty")
        print(f"  {iid}: F2P {len(f2p)}, P2P {len(p2p)}")
        tasks.append(
            {
                "repo": project.owner_repo,
                "instance_id": iid,
                "base_commit": base,
                "patch": patch,
                "test_patch": test_patch,
                "problem_statement": bug.statement,
                "hints_text": "",
                "created_at": "2024-01-01T00:00:00Z",
                "version": project.swebench_version,
                "FAIL_TO_PASS": json.dumps(f2p),
                "PASS_TO_PASS": json.dumps(p2p),
                "environment_setup_commit": main,
            }
        )
    reset(workdir)
    return tasks


#: SWE-bench's own pytest command (swebench.harness.constants TEST_PYTEST) for the SWE-bench
#: form: its harness reads only `-rA` summary lines (`PASSED <id>`), so a spec without `-rA`
#: cannot be graded in `--grading official` mode.
SWEBENCH_TEST_CMD = (
    "source /opt/miniconda3/bin/activate; conda activate testbed; pytest --no-header -rA --tb=no -p no:cacheprovider"
)


def spec(project: Project, name: str, commit: str | None, test_cmd: str = DEFAULT_TEST_CMD) -> dict:
    return {
        "name": name,
        "kind": "bundled",
        "source": f"{SOURCE_PREFIX}/{project.name}",
        "commit": commit,
        "python": project.python,
        "requirements": project.requirements,
        "requirements_files": [],
        "pre_install": [],
        "install": ["python -m pip install -e ."],
        "test_cmd": test_cmd,
        "log_parser": "pytest",
        "timeout": 90,
    }


def invalid_lines(task: dict) -> list[str]:
    """Deliberately malformed records (one fault each) for ingestion tests and the run report."""

    def variant(**changes: object) -> str:
        rec = {**task, **changes}
        return json.dumps({k: v for k, v in rec.items() if v is not None}, ensure_ascii=False)

    iid = task["instance_id"]
    return [
        variant(instance_id=iid + ".missing_f2p", FAIL_TO_PASS=None),  # field FAIL_TO_PASS missing
        variant(instance_id=iid + ".not_a_diff", patch="please fix ordinal()"),  # patch not a diff
        variant(instance_id=iid + ".bad_list", PASS_TO_PASS='["unterminated'),  # list is not JSON
        variant(instance_id="bad id/with slash"),  # invalid instance id
        variant(instance_id=iid + ".bad_commit", base_commit="not-a-commit", version="0.5"),  # SWE-bench form
        variant(instance_id=iid + ".no_owner", repo="inflection"),  # repo without owner
        '{"instance_id": "truncated", "repo": ',  # invalid JSON
        '["a list", "not an object"]',
    ]


def write_jsonl(path: Path, records: list[dict]) -> None:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keep", action="store_true", help="keep the scratch directory")
    args = ap.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="bundled-gen-"))
    recipes, specs, tasks, sb_tasks = [], [], [], []
    try:
        for project in PROJECTS:
            print(f"{project.name}: building repo and venv")
            repo = scratch / "repos" / project.name
            commit = build_repo(recipe_for(project), repo, BUNDLED)["main"]
            workdir = scratch / "work" / project.name
            subprocess.run(["git", "clone", "-q", str(repo), str(workdir)], check=True)
            git(workdir, "checkout", "-q", "-B", "main", "origin/main")
            venv = scratch / "venvs" / project.name
            make_venv(project, workdir, venv)
            clean = run_suite(workdir, venv)
            print(f"  clean run: {sum(s == 'PASSED' for s in clean.values())} passed of {len(clean)}")
            tasks += swesmith_tasks(project, commit, workdir, venv, clean)
            specs.append(spec(project, f"{project.name}.{commit[:8]}", commit))
            branches: tuple[Branch, ...] = ()
            if project.swebench:
                branches = swebench_branches(project, workdir, venv, clean)
                shutil.rmtree(repo)
                refs = build_repo(recipe_for(project, branches), repo, BUNDLED)
                assert refs["main"] == commit
                git(workdir, "fetch", "-q", "origin", "+refs/heads/*:refs/remotes/origin/*")
                branches = tuple(Branch(b.name, b.patch, b.message, refs[b.name]) for b in branches)
                sb_tasks += swebench_tasks(project, refs, workdir, venv)
                specs.append(spec(project, f"{project.owner_repo}@{project.swebench_version}", None, SWEBENCH_TEST_CMD))
            recipes.append(recipe_for(project, branches, head=commit))
    finally:
        if not args.keep:
            shutil.rmtree(scratch, ignore_errors=True)
    header = "# Generated by scripts/make_bundled_tasks.py; do not edit by hand.\n"
    (BUNDLED / "repos.yaml").write_text(
        header + yaml.safe_dump({"repos": [r.to_dict() for r in recipes]}, sort_keys=False, width=120)
    )
    CATALOG.write_text(
        header
        + "# The bundled default set: local repos made by minisandbox.pipeline.bundled.materialize.\n"
        + yaml.safe_dump({"specs": specs}, sort_keys=False, width=120)
    )
    write_jsonl(BUNDLED / "tasks.jsonl", tasks)
    write_jsonl(BUNDLED / "tasks_swebench.jsonl", sb_tasks)
    (BUNDLED / "invalid_tasks.jsonl").write_text("\n".join(invalid_lines(tasks[0])) + "\n")
    print(f"wrote {len(recipes)} repos, {len(specs)} specs, {len(tasks)} SWE-smith and {len(sb_tasks)} SWE-bench tasks")
    return 0


if __name__ == "__main__":
    sys.exit(main())
