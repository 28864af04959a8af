"""The bundled default task set: deterministic local repos, pinned commits, valid tasks."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from minisandbox.catalog import Catalog, spec_for, task_commit
from minisandbox.paths import project_root
from minisandbox.pipeline import bundled
from minisandbox.records import read_tasks

CONFIG = project_root() / "config"
CATALOG = CONFIG / "catalog" / "bundled.yaml"
SWESMITH = CONFIG / "bundled" / "tasks.jsonl"
SWEBENCH = CONFIG / "bundled" / "tasks_swebench.jsonl"
INVALID = CONFIG / "bundled" / "invalid_tasks.jsonl"


@pytest.fixture(scope="module")
def repos(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return bundled.materialize(tmp_path_factory.mktemp("bundled") / "repos")


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return Catalog.load([CATALOG])


def _repo_for(repos: dict[str, Path], spec_source: str) -> Path:
    return repos[Path(spec_source).name]


def _git_apply_check(repo: Path, commit: str, patch: str, *extra: str) -> subprocess.CompletedProcess:
    """`git apply --check` of `patch` against a fresh worktree of `commit`."""
    wt = repo.parent / f"wt-{commit[:8]}-{abs(hash(patch)) % 10**8}"
    if not wt.exists():
        subprocess.run(["git", "-C", str(repo), "worktree", "add", "-q", "--detach", str(wt), commit], check=True)
    return subprocess.run(
        ["git", "-C", str(wt), "apply", "--check", *extra, "-"], input=patch.encode(), capture_output=True
    )


def test_materialize_pins_every_bundled_spec(repos: dict[str, Path], catalog: Catalog) -> None:
    bundled_specs = [s for s in catalog.specs.values() if s.kind == "bundled"]
    assert len({Path(s.source).name for s in bundled_specs}) >= 3
    for spec in bundled_specs:
        assert spec.source.startswith(bundled.DEFAULT_DEST + "/"), spec.source
        repo = _repo_for(repos, spec.source)
        if spec.commit:
            assert bundled.git(repo, "rev-parse", "main") == spec.commit
            assert spec.name == f"{repo.name}.{spec.commit[:8]}"
        assert bundled.git(repo, "status", "--porcelain") == ""
    assert len({s.python for s in bundled_specs}) >= 2


def test_materialize_is_idempotent_and_leaves_repos_alone(repos: dict[str, Path]) -> None:
    dest = next(iter(repos.values())).parent
    marker = next(iter(repos.values())) / "untracked-marker"
    marker.write_text("still here")
    try:
        again = bundled.materialize(dest)
        assert again == repos
        assert marker.read_text() == "still here"  # not rebuilt
    finally:
        marker.unlink()


def test_materialize_is_deterministic_across_destinations(repos: dict[str, Path], tmp_path: Path) -> None:
    other = bundled.materialize(tmp_path / "elsewhere")
    for name, repo in repos.items():
        for ref in ("main", *(b.name for r in bundled.load_recipes() if r.name == name for b in r.branches)):
            assert bundled.git(other[name], "rev-parse", ref) == bundled.git(repo, "rev-parse", ref)


def test_materialize_rejects_a_repo_at_another_commit(tmp_path: Path) -> None:
    recipe = bundled.load_recipes()[0]
    target = tmp_path / recipe.name
    target.mkdir()
    bundled.git(target, "init", "-q", "-b", "main")
    (target / "x.txt").write_text("not the bundled project\n")
    bundled.git(target, "add", "x.txt")
    bundled.git(target, "commit", "-q", "-m", "other")
    with pytest.raises(bundled.BundledError, match="expected pinned"):
        bundled.materialize(tmp_path)


def test_materialize_rejects_a_non_repo_directory(tmp_path: Path) -> None:
    (tmp_path / bundled.load_recipes()[0].name / "junk").mkdir(parents=True)
    with pytest.raises(bundled.BundledError, match="not a git repo"):
        bundled.materialize(tmp_path)


def test_build_repo_refuses_a_modified_sdist(tmp_path: Path) -> None:
    recipe = bundled.load_recipes()[0]
    base = tmp_path / "bundled"
    shutil.copytree(bundled.bundled_dir() / "sources", base / "sources")
    with open(base / recipe.sdist, "ab") as fh:
        fh.write(b"tampered")
    with pytest.raises(bundled.BundledError, match="sha256 differs"):
        bundled.build_repo(recipe, tmp_path / "repo", base)


def test_bundled_task_files_are_all_valid_and_map_to_specs(catalog: Catalog) -> None:
    ingested = read_tasks([SWESMITH, SWEBENCH])
    assert ingested.invalid == []
    by_format = {f: [r for r in ingested.records if r.format == f] for f in ("swesmith", "swebench")}
    assert len(by_format["swesmith"]) >= 9 and len(by_format["swebench"]) >= 2
    for rec in ingested.records:
        spec = spec_for(catalog, rec)
        assert spec.kind == "bundled"
        assert rec.fail_to_pass and rec.pass_to_pass, rec.instance_id
        assert not set(rec.fail_to_pass) & set(rec.pass_to_pass), rec.instance_id
        if rec.format == "swesmith":
            assert re.fullmatch(rf"{re.escape(spec.name)}\.[a-z_]+__[0-9a-f]{{8}}", rec.instance_id)
            assert len(rec.pass_to_pass) <= 30
    # at least one task exercises parametrised ids with spaces and brackets
    assert any(" " in t and "[" in t for r in ingested.records for t in r.fail_to_pass)


def test_swebench_lists_are_json_strings_as_in_swebench() -> None:
    for raw in bundled.read_jsonl(SWEBENCH):
        assert isinstance(raw["FAIL_TO_PASS"], str) and isinstance(json.loads(raw["FAIL_TO_PASS"]), list)
        assert isinstance(raw["PASS_TO_PASS"], str)


def test_swesmith_bug_patches_apply_at_the_profile_commit(repos: dict[str, Path], catalog: Catalog) -> None:
    for rec in read_tasks([SWESMITH]).records:
        spec = spec_for(catalog, rec)
        repo = _repo_for(repos, spec.source)
        commit = task_commit(spec, rec)
        proc = _git_apply_check(repo, commit, rec.patch)
        assert proc.returncode == 0, f"{rec.instance_id}: {proc.stderr.decode()}"
        # the bug must not already be there: the reverse (the gold fix) must not apply
        assert _git_apply_check(repo, commit, rec.patch, "-R").returncode != 0, rec.instance_id


def test_swebench_patches_apply_at_base_commit(repos: dict[str, Path], catalog: Catalog) -> None:
    for rec in read_tasks([SWEBENCH]).records:
        spec = spec_for(catalog, rec)
        repo = _repo_for(repos, spec.source)
        assert spec.commit == bundled.git(repo, "rev-parse", "main")  # env built at the setup commit
        base = task_commit(spec, rec)
        assert base == rec.base_commit and base != spec.commit
        assert bundled.git(repo, "rev-parse", f"{base}^") == spec.commit
        both = rec.test_patch + rec.patch
        for patch in (rec.test_patch, rec.patch, both):
            proc = _git_apply_check(repo, base, patch)
            assert proc.returncode == 0, f"{rec.instance_id}: {proc.stderr.decode()}"
        # base + test_patch + patch is exactly the setup commit's tree
        wt = repo.parent / f"full-{rec.instance_id}"
        bundled.git(repo, "worktree", "add", "-q", "--detach", str(wt), base)
        subprocess.run(["git", "-C", str(wt), "apply", "-"], input=both.encode(), check=True)
        assert bundled.git(wt, "diff", "--stat", spec.commit) == ""


def test_invalid_tasks_are_all_rejected_with_a_field() -> None:
    ingested = read_tasks([INVALID])
    assert ingested.records == []
    lines = [line for line in INVALID.read_text().splitlines() if line.strip()]
    assert len(ingested.invalid) == len(lines) >= 5
    assert {"FAIL_TO_PASS", "patch", "instance_id", "base_commit", "repo", "<json>"} <= {
        i.field for i in ingested.invalid
    }


_RESULT = re.compile(r"^(\S.*?) (PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)(?: \(.*\))?(?: +\[ *\d+%\])?\s*$")


def _run_suite(repo: Path, venv: Path) -> dict[str, str]:
    proc = subprocess.run(
        [
            str(venv / "bin" / "pytest"),
            "--disable-warnings",
            "--color=no",
            "--tb=no",
            "--verbose",
            "-p",
            "no:cacheprovider",
        ],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=300,
    )
    return {m.group(1): m.group(2) for m in map(_RESULT.match, proc.stdout.splitlines()) if m}


def _interpreter(version: str) -> Path:
    root = Path(subprocess.check_output(["pyenv", "root"], text=True).strip()) / "versions"
    found = sorted(root.glob(f"{version}.*"))
    if not found:
        pytest.skip(f"no pyenv interpreter for Python {version}")
    return found[-1] / "bin" / "python"


@pytest.mark.slow
def test_f2p_fail_with_the_bug_and_pass_with_the_gold_patch(
    repos: dict[str, Path], catalog: Catalog, tmp_path: Path
) -> None:
    """Real venv (uv, pinned requirements), real suite: the labels hold for one task."""
    if not shutil.which("uv") or not shutil.which("pyenv"):
        pytest.skip("needs uv and pyenv")
    rec = next(r for r in read_tasks([SWESMITH]).records if any(" " in t for t in r.fail_to_pass))
    spec = spec_for(catalog, rec)
    work = tmp_path / "work"
    subprocess.run(["git", "clone", "-q", str(_repo_for(repos, spec.source)), str(work)], check=True)
    venv = tmp_path / "venv"
    env = {**os.environ, "UV_NO_PROGRESS": "1"}
    subprocess.run(["uv", "venv", "-q", "-p", str(_interpreter(spec.python)), str(venv)], check=True, env=env)
    subprocess.run(
        ["uv", "pip", "install", "-q", "--python", str(venv / "bin" / "python"), *spec.requirements, "-e", str(work)],
        check=True,
        env=env,
    )
    subprocess.run(["git", "-C", str(work), "apply", "-"], input=rec.patch.encode(), check=True)
    buggy = _run_suite(work, venv)
    assert all(buggy.get(t) in (None, "FAILED") for t in rec.fail_to_pass), rec.instance_id
    assert all(buggy.get(t) == "PASSED" for t in rec.pass_to_pass)
    subprocess.run(["git", "-C", str(work), "apply", "-R", "-"], input=rec.patch.encode(), check=True)
    gold = _run_suite(work, venv)
    assert all(gold.get(t) == "PASSED" for t in rec.fail_to_pass + rec.pass_to_pass), rec.instance_id


def test_docs_name_the_current_pins(catalog: Catalog) -> None:
    doc = (project_root() / "docs" / "bundled.md").read_text()
    for spec in catalog.specs.values():
        assert f"`{spec.name}`" in doc and (spec.commit is None or spec.commit in doc), spec.name


# ---------------------------------------------------------------- the generator's labelling logic


@pytest.fixture(scope="module")
def gen():
    import importlib.util

    path = project_root() / "scripts" / "make_bundled_tasks.py"
    spec = importlib.util.spec_from_file_location("make_bundled_tasks", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop(spec.name, None)


def test_generator_parses_verbose_ids_with_spaces_and_reasons(gen) -> None:
    log = (
        "t.py::test_a[x y-X Y] PASSED                                    [ 25%]\n"
        "t.py::C::test_b FAILED [ 50%]\n"
        "t.py::test_c SKIPPED (no network)                               [ 75%]\n"
        "t.py::test_d ERROR [100%]\n"
        "FAILED t.py::C::test_b - assert 1 == 2\n"
    )
    assert gen.parse_verbose(log) == {
        "t.py::test_a[x y-X Y]": "PASSED",
        "t.py::C::test_b": "FAILED",
        "t.py::test_c": "SKIPPED",
        "t.py::test_d": "ERROR",
    }


def test_generator_labels_with_the_swesmith_rule(gen) -> None:
    clean = {"a": "PASSED", "b": "PASSED", "c": "PASSED", "d": "PASSED", "e": "FAILED", "f": "SKIPPED"}
    buggy = {"a": "FAILED", "c": "ERROR", "d": "PASSED", "e": "PASSED", "f": "FAILED"}
    assert gen.label(clean, buggy) == (["a", "b"], ["d"])  # b missing -> F2P; c ERROR -> neither


def test_generator_removes_whole_test_functions(gen, tmp_path: Path) -> None:
    (tmp_path / "t.py").write_text(
        "import pytest\n\n\n@pytest.mark.parametrize('x', [1, 2])\ndef test_p(x):\n    assert x\n\n\n"
        "class TestC:\n    def test_m(self):\n        pass\n\n    def test_keep(self):\n        pass\n\n\n"
        "def test_other():\n    pass\n"
    )
    assert gen.remove_tests(tmp_path, ["t.py::test_p[1]", "t.py::TestC::test_m"]) == ["t.py"]
    left = (tmp_path / "t.py").read_text()
    assert "test_p" not in left and "parametrize" not in left and "test_m" not in left
    assert "def test_keep" in left and "def test_other" in left
    compile(left, "t.py", "exec")


@pytest.mark.slow
def test_every_task_gold_resolves_and_task_state_does_not(bundled_host_grades) -> None:
    """The project's grader (minisandbox.grading.evaluate, host venvs built like the pipeline's):
    each bundled task is resolved by its gold patch and not by its untouched start state
    (graded once per session: `bundled_host_grades`, which tests/e2e/test_eval_fidelity.py
    compares the sandbox's grades with)."""
    grades = bundled_host_grades
    recs = read_tasks([SWESMITH, SWEBENCH]).records
    assert set(grades.gold) == set(grades.before) == {r.instance_id for r in recs}
    failures = []
    for rec in recs:
        gold, start = grades.gold[rec.instance_id], grades.before[rec.instance_id]
        if not gold.resolved or start.resolved:
            failures.append(f"{rec.instance_id}: gold {gold.reason}, start state {start.reason}")
    assert failures == []
