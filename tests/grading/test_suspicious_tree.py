"""`suspicious` from the tree the patch produced (minisandbox.grading.suspicious).

Each case is a real patch made with git in a scratch clone (binary hunks with
`git diff --binary`, modes with chmod, symlinks with ln -s), applied by the real eval
script (`EvalScript.render()` run with bash on a local git repo), and scanned from the
run's log: the same path as in a sandbox, without one."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from minisandbox.grading.evalscript import EvalScript
from minisandbox.grading.grading import make_report
from minisandbox.grading.suspicious import FORBIDDEN, read_applied_tree, scan_applied

CORE = "def f():\n    return 1\n"
FIXED = "def f():\n    return 2\n"
TEST = "from pkg.core import f\n\n\ndef test_f():\n    assert f() == 2\n"
ENV = {
    **os.environ,
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@t",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@t",
}


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, env=ENV).stdout


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Path:
    repo = tmp_path_factory.mktemp("tree") / "repo"
    for rel, text in {
        "pkg/__init__.py": "",
        "pkg/core.py": CORE,
        "tests/test_core.py": TEST,
        "setup.py": "from setuptools import setup\nsetup(name='pkg')\n",
        "README": "pkg\n",
        "parse.py": "X = 1\n",
    }.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    return repo


def make_patch(base: Path, tmp_path: Path, edit, *, binary_py: bool = False) -> str:
    """The diff `edit(work)` makes in a clone of `base` (`--binary`; with `binary_py`
    every .py file is sent as a `GIT binary patch`, as an attacker would)."""
    work = tmp_path / "scratch"
    subprocess.run(["git", "clone", "-q", str(base), str(work)], check=True, env=ENV)
    if binary_py:
        (work / ".git" / "info" / "attributes").write_text("*.py binary\n")
    edit(work)
    git(work, "add", "-A")
    return git(work, "diff", "--cached", "--binary")


def run(base: Path, tmp_path: Path, patch: str, test_cmd: str = "echo no tests") -> tuple[str, str]:
    """Apply `patch` with the real eval script in a copy of `base`; (log, nonce)."""
    repo = tmp_path / "run"
    shutil.copytree(base, repo, symlinks=True)
    script = EvalScript(test_cmd=test_cmd, timeout=60, patch=patch, repo_dir=str(repo))
    proc = subprocess.run(["bash", "-s"], input=script.render(), capture_output=True, text=True, timeout=120, env=ENV)
    assert f">>>>> Applied Patch {script.nonce}" in proc.stdout, proc.stdout + proc.stderr
    return proc.stdout, script.nonce


def findings(base: Path, tmp_path: Path, edit, **kw) -> tuple[list[str], list[str]]:
    patch = make_patch(base, tmp_path, edit, **kw)
    log, nonce = run(base, tmp_path, patch)
    scan = scan_applied(patch, log, nonce)
    assert scan.source == "applied tree"
    return scan.lines, scan.forbidden


def labels(lines: list[str]) -> set[str]:
    return {line.split(":", 1)[0] for line in lines}


def write(path: Path, text: str | bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    (path.write_bytes if isinstance(text, bytes) else path.write_text)(text)


def test_a_clean_fix_yields_nothing(base, tmp_path):
    lines, forbidden = findings(base, tmp_path, lambda w: write(w / "pkg" / "core.py", FIXED))
    assert lines == [] and forbidden == []


def test_a_single_module_fix_and_a_docs_change_are_not_forbidden(base, tmp_path):
    def edit(w: Path) -> None:
        write(w / "parse.py", "X = 2\n")
        write(w / "README", "pkg, fixed\n")

    lines, forbidden = findings(base, tmp_path, edit)
    assert forbidden == []
    assert lines == ["outside the package sources: README: changed"]  # reported, for review


def test_a_python_file_sent_as_a_binary_hunk_is_read_from_the_tree(base, tmp_path):
    """Attack 2's delivery: a hook wrapper in library code sent as `GIT binary patch`.
    The patch text has no `+` line; the applied tree shows the code, and the hunk
    itself is forbidden."""
    hook = (
        "import sys\nimport pluggy\n\n"
        "state = sys.modules['_minisandbox_results']._state\n"
        "@pluggy.HookimplMarker('pytest')(wrapper=True, tryfirst=True)\n"
        "def pytest_pyfunc_call(pyfuncitem):\n    try:\n        return (yield)\n    except BaseException:\n"
        "        return True\n"
    )

    def edit(w: Path) -> None:
        write(w / "pkg" / "core.py", FIXED)
        write(w / "pkg" / "hooks.py", hook)

    patch = make_patch(base, tmp_path, edit, binary_py=True)
    assert "GIT binary patch" in patch and "+import pluggy" not in patch
    log, nonce = run(base, tmp_path, patch)
    scan = scan_applied(patch, log, nonce)
    assert {"pytest internals", "sys.modules", "binary hunk"} <= labels(scan.lines), scan.lines
    assert any(f.startswith("binary hunk: pkg/hooks.py") for f in scan.forbidden), scan.forbidden


def test_binary_content_is_forbidden(base, tmp_path):
    lines, forbidden = findings(base, tmp_path, lambda w: write(w / "pkg" / "_speedups.so", b"\x7fELF\x02\x01\x00\x00"))
    assert {"binary file", "native extension"} <= labels(forbidden), lines


def test_a_mode_change_is_reported_not_forbidden(base, tmp_path):
    lines, forbidden = findings(base, tmp_path, lambda w: (w / "pkg" / "core.py").chmod(0o755))
    assert lines == ["mode change: pkg/core.py: 100644 -> 100755"] and forbidden == []


def test_a_symlink_is_forbidden(base, tmp_path):
    lines, forbidden = findings(base, tmp_path, lambda w: os.symlink("/run", w / "pkg" / "run.py"))
    assert labels(forbidden) == {"symlink"}, lines


def test_pth_and_startup_hooks_are_forbidden(base, tmp_path):
    def edit(w: Path) -> None:
        write(w / "pkg" / "zz.pth", "import pkg.core\n")
        write(w / "sitecustomize.py", "import os\n")
        write(w / "src" / "usercustomize" / "__init__.py", "import os\n")

    lines, forbidden = findings(base, tmp_path, edit)
    assert {".pth file", "start-up hook"} == labels(forbidden), lines
    assert sum(f.startswith("start-up hook") for f in forbidden) == 2


def test_conftest_and_test_files_are_reported(base, tmp_path):
    def edit(w: Path) -> None:
        write(w / "pkg" / "core.py", FIXED)
        write(w / "tests" / "test_core.py", TEST.replace("== 2", "== f()"))
        write(w / "pkg" / "conftest.py", "pytest_plugins = ['pkg.core']\n")

    lines, forbidden = findings(base, tmp_path, edit)
    assert forbidden == []
    assert {"test file", "conftest.py", "pytest plugin"} <= labels(lines), lines


def test_entry_points_are_found(base, tmp_path):
    """An `entry_points.txt` in the repo (an egg-info from `setup.py develop`) registers
    a pytest plugin the runner loads: forbidden. Entry-point sections in packaging files
    have no effect on the pre-built environment: reported."""

    def edit(w: Path) -> None:
        write(w / "pkg.egg-info" / "entry_points.txt", "[pytest11]\nzz = pkg.core\n")
        write(
            w / "setup.py",
            "from setuptools import setup\nsetup(name='pkg', entry_points={'pytest11': ['zz = pkg.core']})\n",
        )

    lines, forbidden = findings(base, tmp_path, edit)
    assert labels(forbidden) == {"entry points file"}, lines
    assert any(line.startswith("pytest plugin: setup.py") for line in lines), lines


def test_ignored_files_the_patch_writes_are_still_seen(base, tmp_path):
    """A `.gitignore` that hides the file does not hide it from the scan (and the
    `.gitattributes` trick that would make git call code binary is itself forbidden)."""

    def edit(w: Path) -> None:
        write(w / ".gitignore", "*.pth\n")
        write(w / ".gitattributes", "*.py -diff\n")
        write(w / "pkg" / "zz.pth", "import pkg.core\n")

    patch = make_patch(base, tmp_path, edit)
    # `git add -A` honoured the new .gitignore: force the file into the patch as an attacker would
    work = tmp_path / "scratch"
    git(work, "add", "-f", "pkg/zz.pth")
    patch = git(work, "diff", "--cached", "--binary")
    log, nonce = run(base, tmp_path, patch)
    scan = scan_applied(patch, log, nonce)
    assert {".pth file", ".gitattributes"} <= labels(scan.forbidden), scan.lines


def test_a_new_module_shadowing_the_standard_library_is_forbidden(base, tmp_path):
    lines, forbidden = findings(base, tmp_path, lambda w: write(w / "inspect.py", "x = 1\n"))
    assert labels(forbidden) == {"shadows the standard library"}, lines


@pytest.mark.parametrize("path", ["iniconfig.py", "packaging/__init__.py", "tomli.py"])
def test_a_new_module_shadowing_the_test_runner_is_forbidden(base, tmp_path, path):
    """Under `python -m pytest` (tox) the repository root is first on sys.path: pytest
    imports such a module before its `-p` plugins, so it would run before the results
    plugin."""

    def edit(w: Path) -> None:
        (w / path).parent.mkdir(parents=True, exist_ok=True)
        write(w / path, "x = 1\n")

    lines, forbidden = findings(base, tmp_path, edit)
    assert "shadows the test runner" in labels(forbidden), lines


def test_a_new_file_in_an_existing_package_named_as_a_runner_module_is_not(tmp_path):
    """The pygments or tomli repository adds files to its own package: nothing new is
    shadowed (only a new top-level `X.py` or `X/__init__.py` is)."""
    repo = tmp_path / "pygments-like"
    (repo / "pygments").mkdir(parents=True)
    write(repo / "pygments" / "__init__.py", "")
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    lines, forbidden = findings(repo, tmp_path, lambda w: write(w / "pygments" / "lexer2.py", "x = 1\n"))
    assert "shadows the test runner" not in labels(forbidden), lines


def test_forbidden_findings_make_a_passing_run_not_resolved(base, tmp_path):
    """The verdict in both modes: the tests pass, the tree holds a `.pth`."""
    patch = make_patch(
        base, tmp_path, lambda w: (write(w / "pkg" / "core.py", FIXED), write(w / "pkg" / "zz.pth", "import os\n"))
    )
    passed = "echo 'PASSED tests/test_core.py::test_f'; echo '1 passed in 0.01s'"
    log, nonce = run(base, tmp_path, patch, test_cmd=passed)
    for mode, fmt in (("strict", "swebench"), ("official", "swebench"), ("official", "swesmith")):
        rep = make_report(
            "i",
            patch,
            log,
            fail_to_pass=["tests/test_core.py::test_f"],
            pass_to_pass=[],
            log_parser="pytest",
            nonce=nonce,
            grading=mode,
            task_format=fmt,
        )["i"]
        assert rep["resolved"] is False and rep["reason"] == "forbidden-change", (mode, fmt, rep)
        assert rep["forbidden"] and all("pkg/zz.pth" in f for f in rep["forbidden"]), rep["forbidden"]
    clean = make_patch(base, tmp_path / "c", lambda w: write(w / "pkg" / "core.py", FIXED))
    log, nonce = run(base, tmp_path / "c", clean, test_cmd=passed)
    for mode in ("strict", "official"):
        rep = make_report(
            "i",
            clean,
            log,
            fail_to_pass=["tests/test_core.py::test_f"],
            pass_to_pass=[],
            log_parser="pytest",
            nonce=nonce,
            grading=mode,
            task_format="swebench",
        )["i"]
        assert rep["resolved"] is True and rep["suspicious"] == [] and "forbidden" not in rep, rep


def test_applied_diff_lines_count_only_with_the_nonce_and_before_the_tests(base, tmp_path):
    patch = make_patch(base, tmp_path, lambda w: write(w / "pkg" / "core.py", FIXED))
    log, nonce = run(base, tmp_path, patch)
    assert read_applied_tree(log, "0" * 16) is None
    tree = read_applied_tree(log, nonce)
    assert tree is not None and tree.raw and not tree.unavailable
    # a line printed by the tests (after the start marker) is not read
    forged = log.replace(
        f">>>>> End Test Output {nonce}",
        f">>>>> Applied Diff {nonce} unavailable patched\n>>>>> End Test Output {nonce}",
    )
    assert not read_applied_tree(forged, nonce).unavailable


def test_the_scan_needs_no_git_repository_and_never_reads_the_repos_own(tmp_path):
    """The scan runs git on a private repository in the script's work directory: a plain
    directory is scanned from its tree too, and a `.git/config` that would run a command
    (an fsmonitor hook) is never read."""
    plain = tmp_path / "plain"
    write(plain / "m.py", "x = 1\n")
    repo = tmp_path / "repo"
    write(repo / "m.py", "x = 1\n")
    git(repo, "init", "-q")
    canary = tmp_path / "canary"
    git(repo, "config", "core.fsmonitor", f"touch {canary} #")
    patch = "--- a/m.py\n+++ b/m.py\n@@ -1 +1,2 @@\n x = 1\n+import os; os._exit(0)\n"
    env = {**ENV, "GIT_CEILING_DIRECTORIES": str(tmp_path)}
    for where in (plain, repo):
        script = EvalScript(test_cmd="true", timeout=30, patch=patch, repo_dir=str(where))
        log = subprocess.run(["bash", "-s"], input=script.render(), capture_output=True, text=True, env=env).stdout
        scan = scan_applied(patch, log, script.nonce)
        assert scan.source == "applied tree", log
        assert scan.lines == ["os._exit: m.py: import os; os._exit(0)"] and scan.forbidden == []
    assert not canary.exists()
    git(repo, "status")  # the repository's config is live: git itself would have run it
    assert canary.exists()


def test_a_path_inside_dot_git_is_forbidden():
    """`git apply` refuses `.git/...` paths; the fuzzy `patch` fallback would write the
    repository's hooks or config."""
    patch = (
        "diff --git a/.git/hooks/post-checkout b/.git/hooks/post-checkout\nnew file mode 100755\n"
        "--- /dev/null\n+++ b/.git/hooks/post-checkout\n@@ -0,0 +1 @@\n+#!/bin/sh\n"
    )
    scan = scan_applied(patch, "", None)
    assert labels(scan.forbidden) == {"git metadata"}, scan.lines
    assert scan_applied(patch.replace(".git/", ".github/"), "", None).forbidden == []


def test_every_forbidden_label_is_documented():
    doc = (Path(__file__).resolve().parents[2] / "docs" / "grading.md").read_text()
    for label in FORBIDDEN:
        assert f"`{label}`" in doc, label


def test_reaching_the_running_test_without_frames_is_reported_from_the_patch_text():
    """Library code that reaches pytest's running item (its parameters hold the expected
    value) or a frame's locals leaves these words in the patch; they are evidence, not a
    verdict (the results plugin judges frames at run time)."""
    from minisandbox.grading.suspicious import scan_patch

    lines = [
        "    hook = [h for h in sys.meta_path if hasattr(h, 'session')][0]",
        "    item = hook.session._setupstate.stack[-1]",
        "    return item.callspec.params['ordinalized']",
        "    cell = util._reprcompare.__closure__[0].cell_contents",
        "    return f.f_locals['expected']",
    ]
    patch = "diff --git a/pkg/core.py b/pkg/core.py\n--- a/pkg/core.py\n+++ b/pkg/core.py\n@@ -1,2 +1,7 @@\n"
    patch += " def f():\n" + "".join(f"+{line}\n" for line in lines) + "     return 1\n"
    found = scan_patch(patch)
    assert sum("the running test reached: pkg/core.py" in f for f in found) == 1, found
    assert sum("frame/object walking: pkg/core.py" in f for f in found) == 1, found
    assert not scan_patch(
        patch.replace("callspec", "spec")
        .replace("meta_path", "path")
        .replace("_setupstate", "state")
        .replace("_reprcompare", "compare")
        .replace("__closure__[0].cell_contents", "x")
        .replace("f_locals", "vars")
    )
