"""The bash script that evaluates one patch inside a fresh sandbox.

Steps (each prints a marker carrying the run's nonce, read by `minisandbox.grading.grading`):

1. write the candidate patch, the test patch and the reference test files into a private
   work directory (base64, so no content can end a heredoc early);
2. back up the test infrastructure that exists before the patch (every `conftest.py`,
   pytest/tox/setup config file, `sitecustomize.py`, plus the protected files the patch
   names) and drop a time stamp;
3. apply the candidate patch: `git apply -v`, then `patch --batch --fuzz=5 -p1` only if a
   dry run applies every hunk (SWE-bench also tries `git apply --reject`, which can leave a
   half-applied patch behind: we never do);
4. anti-tamper: every path the patch named or wrote (newer than the stamp) that is
   protected (`is_protected`) is put back as it was: restored from the backup, or deleted
   when the patch created it; `.pyc`/`.pyo` files the patch wrote are deleted;
5. restore the reference test files (SWE-smith: every file of FAIL_TO_PASS and PASS_TO_PASS
   from the clean snapshot; SWE-bench: the files the test patch touches, at the base
   commit) and apply the test patch;
6. run the test command between the markers under `timeout`, then print the exit code and,
   on overrun, the timeout marker. With a results channel (an executor sets `results_dir`
   and passes MINISANDBOX_RESULTS_SOCK) pytest first loads the results plugin
   (`minisandbox.grading.resultplugin`, see `minisandbox.grading.results`). The sandbox
   executor runs steps 1-5 (`render_prep`) and the test command (`test_argv`, in a pid
   namespace of its own) as two processes and adds the step-6 markers itself
   (`test_section`); `render()` is the equivalent single script.
"""

from __future__ import annotations

import base64
import hashlib
import posixpath
import re
import secrets
import shlex
from dataclasses import dataclass, field

from minisandbox.grading.grading import (
    APPLY_PATCH_FAIL,
    APPLY_PATCH_PASS,
    END_TEST_OUTPUT,
    RESET_FAILED,
    START_TEST_OUTPUT,
    TEST_EXIT_CODE,
    TESTS_TIMEOUT,
)
from minisandbox.grading.results import RESULTS_PLUGIN, RUNNER_VAR, SYMPY_STARTUP, UNITTEST_WARNOPTION
from minisandbox.grading.suspicious import tree_scan_end, tree_scan_lines
from minisandbox.paths import PYTEST_CONFIG_NAMES, REPO_PATH
from minisandbox.records import test_files_of  # noqa: F401  (re-exported: graders import it from here)

#: A test command that ends in pytest's `-k` and expects the selection after it (SWE-smith's
#: mypy profile: `pytest --color=no -rA -k`; its data-driven cases are selected by name).
_DANGLING_K = re.compile(r"\s-k\s*$")


def whole_suite_command(test_cmd: str) -> str:
    """`test_cmd` without a dangling `-k`: the command that runs the whole suite (labelling,
    a task without test ids); pytest refuses a `-k` with nothing after it."""
    return _DANGLING_K.sub("", test_cmd)


def keyword_selection(test_cmd: str, test_ids: list[str]) -> list[str] | None:
    """The arguments that select `test_ids` for a command ending in `-k`: one expression,
    the ids' last `::` parts joined by `or` (as SWE-smith's `get_test_cmd` for mypy builds it
    from FAIL_TO_PASS; here from every listed test, so PASS_TO_PASS runs too), each without
    its parameters (`[...]` may hold spaces, which `-k` cannot parse: the function's name
    selects all its cases, and the ids are graded exactly). None when the command does not
    end in `-k` (its tests are selected by file)."""
    if not _DANGLING_K.search(test_cmd) or not test_ids:
        return None
    return [" or ".join(dict.fromkeys(t.rsplit("::", 1)[-1].split("[", 1)[0] for t in test_ids))]


#: File names that configure pytest or run code at interpreter start-up.
INFRA_NAMES = ("conftest.py", *PYTEST_CONFIG_NAMES, "sitecustomize.py", "usercustomize.py")
#: Top-level names that would shadow the test runner or the results plugin when the
#: command is `python -m pytest` (the working directory comes first on sys.path; tox runs
#: that). `py` as a package too: `import pytest` imports `py` (pytest 9's `_pytest/compat.py`),
#: before any `-p` plugin. `_pytest.py` as a module too: it took the package's place and ran
#: before the results plugin's checks were installed.
SHADOW_ROOTS = (
    "pytest.py",
    "py.py",
    "pluggy.py",
    "_pytest.py",
    "_pytest",
    "pluggy",
    "pytest",
    "py",
    f"{RESULTS_PLUGIN}.py",
    RESULTS_PLUGIN,
)
#: Directory names whose content is test code (not `test/` or `testing/`: Django and
#: sympy ship library code there).
TEST_DIRS = ("tests",)
#: Directories and modules of test-support code that repositories ship as library code:
#: the helpers their tests assert with (xarray's `testing.py`, matplotlib's `testing/`,
#: Django's `django/test/`, SymPy's `sympy/testing/`, pylint's `testutils/`, modin's
#: `pandas/test/utils.py`), and the expected outputs tests compare with (`testdata/`). A
#: candidate may change them only where the task's own patch does (`EvalScript.editable`):
#: a no-op `assert_equal`, or golden files rewritten to the bug's output, pass the tests.
SUPPORT_DIRS = (
    "test",
    "testing",
    "_testing",
    "testutils",
    "testutil",
    "test_utils",
    "testdata",
    "test_data",
    "test-data",
    "_tests",
)
SUPPORT_FILES = ("testing.py", "_testing.py", "testutils.py", "testutil.py")
#: Test-support modules of known repositories whose names no rule above catches (werkzeug's
#: `test.py` is library code, scrapy's `utils/test.py` is not): SymPy's `raises` before 1.6,
#: dask's `assert_eq`, scrapy's test helpers, scikit-learn's estimator checks. mypy's
#: expected outputs are in `test-data/`, trio's helpers in `_tests/` (`SUPPORT_DIRS`).
SUPPORT_PATHS = (
    "sympy/utilities/pytest.py",
    "sympy/utilities/randtest.py",
    "dask/dataframe/utils.py",
    "dask/array/utils.py",
    "scrapy/utils/test.py",
    "sklearn/utils/estimator_checks.py",
)
#: SWE-bench's non-test extensions (files in a test patch that are not test modules).
NON_TEST_EXTS = (".json", ".png", "csv", ".txt", ".md", ".jpg", ".jpeg", ".pkl", ".yml", ".yaml", ".toml")

_ACTIVATE = re.compile(
    r"^\s*source\s+/opt/miniconda3/bin/activate\s*(?:;|&&)\s*conda\s+activate\s+testbed\s*(?:;|&&)\s*"
)


def is_protected(path: str) -> bool:
    """True for paths a candidate patch may not change: test infrastructure, test modules,
    files under a `tests/` directory, compiled bytecode, and top-level modules that would
    shadow pytest. Keep in sync with the bash patterns in `EvalScript._revert_lines`."""
    while path.startswith("./"):
        path = path[2:]
    parts = path.split("/")
    name = parts[-1]
    if name in INFRA_NAMES or name.endswith((".pyc", ".pyo")) or parts[0] in SHADOW_ROOTS:
        return True
    if name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py") or name == "tests.py"):
        return True
    return any(p in TEST_DIRS for p in parts[:-1])


def is_test_support(path: str) -> bool:
    """True for test-support code shipped as library code (`SUPPORT_DIRS`,
    `SUPPORT_FILES`): protected unless the task's own patch changes it (the bug may be
    there), see `EvalScript.editable`. Keep in sync with `EvalScript._revert_lines`."""
    while path.startswith("./"):
        path = path[2:]
    parts = path.split("/")
    return path in SUPPORT_PATHS or parts[-1] in SUPPORT_FILES or any(p in SUPPORT_DIRS for p in parts[:-1])


def support_paths(patch: str) -> list[str]:
    """The test-support paths (`is_test_support`, not otherwise protected) that `patch`
    names: those of a task's own patch stay open to the candidate."""
    return [p for p in patch_paths(patch) if is_test_support(p) and not is_protected(p)]


_DIFF_GIT = re.compile(r'^diff --git (?:"?a/(.+?)"?) (?:"?b/(.+?)"?)$')
_QUOTED = re.compile(r'"((?:[^"\\]|\\.)*)"')
#: a context diff's hunk range (`*** 1,2 ****`, `--- 0 ----`), not a file header
_CONTEXT_RANGE = re.compile(r"^(?:\*\*\*|---) \d+(?:,\d+)? (?:\*\*\*\*|----)$")
#: lines that name a path: git's extended headers, unified (`---`/`+++`) and context
#: (`***`/`---`) file headers, and `Index:` (GNU patch falls back to it)
_NAMING = ("diff --git ", "rename from ", "rename to ", "copy from ", "copy to ", "--- ", "+++ ", "*** ", "Index: ")


def _unquote(path: str) -> str:
    if "\\" in path:
        try:
            return path.encode("latin-1").decode("unicode_escape").encode("latin-1").decode("utf-8")
        except (UnicodeDecodeError, UnicodeEncodeError):
            return path
    return path


def _stripped(name: str) -> list[str]:
    """`name` as `git apply -p1` and `patch -p1` read it (the first component dropped,
    whatever it is: `git diff --src-prefix=x/` writes `x/`), and as written unless that
    component is the usual `a/`/`b/`."""
    if "/" not in name or name == "/dev/null":
        return [name]
    head, rest = name.split("/", 1)
    return [rest] if head in ("a", "b") else [name, rest]


def _git_header_names(rest: str) -> list[str]:
    """The names of a `diff --git <old> <new>` line: quoted ones, else the split of the
    line whose two halves name the same path once their first component is dropped (git's
    own rule), else every candidate split (a rename, whose `rename` lines name it too)."""
    quoted = [_unquote(q) for q in _QUOTED.findall(rest)]
    if quoted:
        unquoted = _QUOTED.sub("", rest).strip()
        return quoted + ([unquoted] if unquoted else [])
    splits = [(rest[:i], rest[i + 1 :]) for i, c in enumerate(rest) if c == " "]
    for old, new in splits:
        if "/" in old and "/" in new and old.split("/", 1)[1] == new.split("/", 1)[1]:
            return [old, new]
    return [half for split in splits for half in split]


def _header_names(rest: str) -> list[str]:
    """The name of a `---`/`+++`/`***`/`Index:`/`rename` line: quoted, or up to a tab,
    or up to the first blank (GNU patch reads a time stamp after one)."""
    m = _QUOTED.match(rest)
    if m:
        return [_unquote(m.group(1))]
    whole = rest.split("\t", 1)[0].rstrip()
    return list(dict.fromkeys([whole, whole.split(None, 1)[0] if whole.strip() else whole]))


def patch_paths(patch: str) -> list[str]:
    """Every repo-relative path a unified, context or git diff names (old and new sides,
    renames, copies), as `git apply -p1` or `patch -p1` may read it, without `/dev/null`.
    Used to know what to back up and to revert (a deleted file is in no other list: the
    script's time stamp catches only files written) and, in the results manifest, which
    files are the patch's. A superset on purpose: a path named here that the patch does
    not touch is restored to its own content."""
    out: list[str] = []
    for line in patch.splitlines():
        head = next((h for h in _NAMING if line.startswith(h)), None)
        if head is None or _CONTEXT_RANGE.match(line):
            continue
        rest = line[len(head) :]
        if head == "diff --git ":
            out.extend(n for name in _git_header_names(rest) for n in _stripped(name))
        elif head.startswith(("rename", "copy")):
            out.extend(_header_names(rest))
        else:
            out.extend(n for name in _header_names(rest) for n in _stripped(name))
    seen: dict[str, None] = {}
    for p in out:
        p = p.strip()
        if p and p != "/dev/null":
            seen[p] = None
    return list(seen)


def _swebench_name(rest: str) -> str:
    """A `---`/`+++` header's file as SWE-bench's unidiff reads it: the name read as
    `patch_paths` reads it (quoted, or up to a tab), without an `a/` or `b/` prefix."""
    name = _header_names(rest)[0]
    return name[2:] if name.startswith(("a/", "b/")) else name


def modified_and_new_files(patch: str) -> tuple[list[str], list[str]]:
    """(files the patch changes that exist before it, files it creates) - SWE-bench's
    get_modified_files / get_new_files. Names are read by `patch_paths`' header reader
    (one parser of header names for both)."""
    modified: list[str] = []
    new: list[str] = []
    old_path: str | None = None
    for line in patch.splitlines():
        if line.startswith("--- ") and not _CONTEXT_RANGE.match(line):
            old_path = _swebench_name(line[4:])
        elif line.startswith("+++ ") and old_path is not None:
            new_path = _swebench_name(line[4:])
            if old_path == "/dev/null" and new_path:
                new.append(new_path)
            elif old_path != "/dev/null":
                modified.append(old_path)
            old_path = None
    return list(dict.fromkeys(modified)), list(dict.fromkeys(new))


def swebench_test_directives(test_patch: str, repo: str) -> list[str]:
    """SWE-bench's `get_test_directives`: test files of the test patch (Django: modules)."""
    files = re.findall(r"^diff --git a/.* b/(.*)$", test_patch, flags=re.MULTILINE)
    files = [f for f in files if not any(f.endswith(ext) for ext in NON_TEST_EXTS)]
    if repo != "django/django":
        return files
    out = []
    for f in files:
        name = posixpath.basename(f)
        if not (name == "tests.py" or name.startswith("test_") or "/tests/" in f or "/test_" in f):
            continue
        f = f.removesuffix(".py")
        f = f.removeprefix("tests/")
        out.append(f.replace("/", "."))
    return out


def strip_conda_activation(test_cmd: str) -> str:
    """Drop the `source .../activate; conda activate testbed;` prefix (host-venv runs)."""
    return _ACTIVATE.sub("", test_cmd)


@dataclass
class EvalScript:
    """Everything one evaluation run needs; `render()` gives the bash text."""

    test_cmd: str
    timeout: int
    patch: str | None = None  # candidate patch; None = run the task state as is
    reverse: bool = False  # apply `patch` in reverse (SWE-smith gold = reverse of the bug)
    test_args: list[str] = field(default_factory=list)
    reference_files: dict[str, bytes | None] = field(default_factory=dict)  # None = must not exist
    test_patch: str = ""
    repo_dir: str = REPO_PATH
    prelude: str = ""  # shell lines run first (host-venv runs put the venv on PATH here)
    nonce: str = field(default_factory=lambda: secrets.token_hex(8))
    protect: bool = True  # anti-tamper step; on for every grading run
    scan_tree: bool = True  # print the applied diff for `suspicious` (off only to measure its cost)
    setup_patch: str = ""  # task start state from a clean snapshot (SWE-smith: the bug patch)
    setup_remove: list[str] = field(default_factory=list)  # ... and the F2P test files removed
    #: directory (as the test command sees it) holding the results plugin; set by an
    #: executor that passes a results channel (minisandbox.grading.results)
    results_dir: str = ""
    #: how the plugin reaches the test runner (`minisandbox.logformats.channel_runner`):
    #: "pytest" (`-p`), "unittest" (imported at interpreter start-up), "sympy" (imported
    #: as `sitecustomize`), "" (no channel)
    results_runner: str = "pytest"
    #: SymPy's runner: the PYTHONHASHSEED the test command gets when it sets none (random,
    #: as SymPy picks one), so that `sympy.test()` runs the tests in its own process, where
    #: the channel is, instead of in a child it starts with a seed of its own
    hash_seed: int = field(default_factory=lambda: secrets.randbelow(1 << 32))
    #: the environment's cache of assertion-rewritten test modules, as the script sees it
    #: (`minisandbox.pipeline.testpycs`; set by the sandbox executor); "" = none
    test_pycs: str = ""
    #: what the results plugin gets before the run (minisandbox.grading.gradedstate
    #: `GradedState.manifest`, without "root": `results_manifest()` adds `repo_dir`)
    graded_manifest: dict[str, object] = field(default_factory=dict)
    #: test-support paths (`is_test_support`) the candidate may change: those the task's
    #: own patch changes (`support_paths` of the gold fix or of the SWE-smith bug); every
    #: other one is reverted like `tests/`
    editable: list[str] = field(default_factory=list)

    def protected(self, path: str) -> bool:
        """`is_protected`, or test-support code this task's patch does not change."""
        path = path.removeprefix("./")
        return is_protected(path) or (is_test_support(path) and path not in self.editable)

    def results_manifest(self) -> dict[str, object]:
        """The manifest for this run's results channel, rooted at `repo_dir` as the
        test command sees it (set by the executor before it opens the channel)."""
        return {**self.graded_manifest, "root": self.repo_dir}

    def marker(self, text: str) -> str:
        return f"{text} {self.nonce}"

    def full_test_cmd(self) -> str:
        args = " ".join(shlex.quote(a) for a in self.test_args)
        return f"{self.test_cmd} {args}".rstrip()

    def render(self) -> str:
        """The whole evaluation as one bash script (host runs; the eval.sh artifact)."""
        return self._head_and_prep() + "\n".join(self._test_lines()) + "\n"

    def render_prep(self) -> str:
        """Steps 1-5 alone (everything before the test command), for executors that run
        the test command as a separate process (`test_argv`) and print the test
        markers themselves (`test_section`)."""
        return self._head_and_prep() + "exit 0\n"

    def test_argv(self) -> list[str]:
        """The test command as a process of its own: prelude, results plugin, the
        command under `timeout`. It contains no nonce: nothing a test can read from its
        own process tree helps it forge a marker."""
        lines = [
            self.prelude,
            *self._results_lines(),
            f"exec timeout -k 10 {int(self.timeout)} bash -c {shlex.quote(self.full_test_cmd())} < /dev/null 2>&1",
        ]
        return ["bash", "-c", "\n".join(line for line in lines if line)]

    def test_section(self, output: str, rc: int, seconds: float) -> str:
        """The text `render()` prints around the test command's output (markers, exit
        code), for the test command's `output`, exit code `rc` and run time."""
        out = [
            self.marker(START_TEST_OUTPUT),
            output.rstrip("\n") if output else None,
            "",
            self.marker(END_TEST_OUTPUT),
        ]
        if rc == 124 or (rc == 137 and seconds >= int(self.timeout)):
            out.append(self.marker(TESTS_TIMEOUT))
        out.append(f"{TEST_EXIT_CODE} {rc} {self.nonce}")
        return "\n".join(x for x in out if x is not None) + "\n"

    def _results_lines(self) -> list[str]:
        """Load the results plugin first (from `results_dir` put first on PYTHONPATH):
        a unittest runner by a `-W` category the interpreter imports at start-up
        (`UNITTEST_WARNOPTION`), pytest by the same option (the channel is opened then,
        before pytest imports any repository module) and `-p` (registered then), SymPy's runner as `sitecustomize` (its test command
        sets PYTHONWARNINGS itself; `SYMPY_STARTUP`), remembering PYTHONPATH/PYTEST_ADDOPTS/
        PYTHONWARNINGS so the plugin puts them back. Only when the executor passed a
        channel (MINISANDBOX_RESULTS_SOCK), the runner has one and the plugin is there: a
        hand re-run of eval.sh runs the tests as before."""
        if not self.results_dir:
            return []
        if not self.results_runner:
            return ["unset MINISANDBOX_RESULTS_SOCK"]
        d = shlex.quote(self.results_dir)
        plugin = shlex.quote(f"{self.results_dir}/{RESULTS_PLUGIN}.py")
        if self.results_runner == "sympy":
            d = shlex.quote(f"{self.results_dir}/{SYMPY_STARTUP}")
            plugin = shlex.quote(f"{self.results_dir}/{SYMPY_STARTUP}/sitecustomize.py")
            load = [f'  export PYTHONHASHSEED="${{PYTHONHASHSEED:-{int(self.hash_seed)}}}" {RUNNER_VAR}=sympy']
        elif self.results_runner == "unittest":
            load = [
                '  export MINISANDBOX_HAD_PYTHONWARNINGS="${PYTHONWARNINGS+1}" MINISANDBOX_OLD_PYTHONWARNINGS="${PYTHONWARNINGS-}"',
                f'  export PYTHONWARNINGS="{UNITTEST_WARNOPTION}${{PYTHONWARNINGS:+,$PYTHONWARNINGS}}" {RUNNER_VAR}=unittest',
            ]
        else:
            # pytest: the same start-up option, so that the plugin opens the channel before
            # pytest imports anything of the repository, and `-p` to register it
            load = [
                '  export MINISANDBOX_HAD_PYTEST_ADDOPTS="${PYTEST_ADDOPTS+1}" MINISANDBOX_OLD_PYTEST_ADDOPTS="${PYTEST_ADDOPTS-}"',
                f'  export PYTEST_ADDOPTS="-p {RESULTS_PLUGIN}${{PYTEST_ADDOPTS:+ $PYTEST_ADDOPTS}}"',
                '  export MINISANDBOX_HAD_PYTHONWARNINGS="${PYTHONWARNINGS+1}" MINISANDBOX_OLD_PYTHONWARNINGS="${PYTHONWARNINGS-}"',
                f'  export PYTHONWARNINGS="{UNITTEST_WARNOPTION}${{PYTHONWARNINGS:+,$PYTHONWARNINGS}}" {RUNNER_VAR}=pytest',
            ]
        return [
            f'if [ -n "${{MINISANDBOX_RESULTS_SOCK:-}}" ] && [ -f {plugin} ]; then',
            '  export MINISANDBOX_HAD_PYTHONPATH="${PYTHONPATH+1}" MINISANDBOX_OLD_PYTHONPATH="${PYTHONPATH-}"',
            f'  export PYTHONPATH={d}"${{PYTHONPATH:+:$PYTHONPATH}}"',
            *load,
            "else",
            "  unset MINISANDBOX_RESULTS_SOCK",
            "fi",
        ]

    def _head_and_prep(self) -> str:
        q = shlex.quote
        lines = [
            "#!/bin/bash",
            "# minisandbox evaluation script (generated; see minisandbox.grading.evalscript)",
            "set -uo pipefail",
            "umask 022",
            self.prelude,
            f"cd {q(self.repo_dir)} || {{ echo {q(self.marker(RESET_FAILED))}; exit 3; }}",
            'W=$(mktemp -d "${TMPDIR:-/tmp}/ms-eval.XXXXXXXX") || exit 3',
            "export GIT_CONFIG_NOSYSTEM=1 GIT_TERMINAL_PROMPT=0",
            'git config --global --add safe.directory "$PWD" >/dev/null 2>&1 || true',
            _b64_file("$W/model.patch", (self.patch or "").encode()),
            _b64_file("$W/test.patch", self.test_patch.encode()),
        ]
        if self.setup_patch.strip():
            lines += [
                _b64_file("$W/setup.patch", self.setup_patch.encode()),
                (
                    'git apply "$W/setup.patch" < /dev/null || '
                    'patch --batch -p1 --no-backup-if-mismatch -r - -i "$W/setup.patch" < /dev/null || '
                    f"{{ echo {q(self.marker(RESET_FAILED))} task set-up patch did not apply; exit 3; }}"
                ),
            ]
        for path in self.setup_remove:
            lines.append(f"rm -rf -- {q(path)}")
        names = " -o ".join(f"-name {q(n)}" for n in INFRA_NAMES)
        protected_named = [p for p in patch_paths(self.patch or "") if self.protected(p)]
        lines += [
            # 2. back up existing infrastructure and the protected files the patch names
            f'find . -path ./.git -prune -o \\( {names} \\) ! -type d -print0 > "$W/backup.list"',
        ]
        for p in protected_named:
            lines.append(f"[ -e {q(p)} ] && ! [ -d {q(p)} ] && printf '%s\\0' {q('./' + p)} >> \"$W/backup.list\"")
        lines += [
            'tar --null -T "$W/backup.list" -cf "$W/backup.tar" 2>/dev/null || tar -cf "$W/backup.tar" -T /dev/null',
            'touch "$W/stamp"; sleep 0.05',
        ]
        if self.patch is not None:
            rev = " -R" if self.reverse else ""
            named = patch_paths(self.patch)
            if self.scan_tree:  # the tree before the patch (suspicious scan)
                lines += tree_scan_lines(0, self.nonce, named)
            lines += [
                # 3. apply: git apply, else an all-or-nothing fuzzy patch
                f'if git apply -v{rev} "$W/model.patch" < /dev/null; then',
                f"  echo {q(self.marker(APPLY_PATCH_PASS))}",
                (
                    f'elif patch --batch --fuzz=5 -p1{rev} --dry-run -i "$W/model.patch" < /dev/null >/dev/null 2>&1 && '
                    f'patch --batch --fuzz=5 -p1{rev} --no-backup-if-mismatch -r - -i "$W/model.patch" < /dev/null; then'
                ),
                f"  echo {q(self.marker(APPLY_PATCH_PASS))}",
                "else",
                f"  echo {q(self.marker(APPLY_PATCH_FAIL))}",
                f"  {tree_scan_end(self.nonce)}" if self.scan_tree else "",
                "  exit 1",
                "fi",
            ]
            if self.scan_tree:  # ... and the tree it produced, before any revert
                lines += tree_scan_lines(1, self.nonce, named)
            if self.protect:
                lines += self._revert_lines(named)
        lines += self._reference_lines()
        if self.test_patch.strip():
            lines += [
                # git pointed at no repository: the repository's `.git/config` and
                # `.git/info/attributes` are the candidate's to write (the fuzzy `patch`
                # fallback), and a smudge filter there would run while the test files are
                # written, after the anti-tamper step
                'if ! GIT_DIR="$W/no-repository" git apply -v "$W/test.patch" < /dev/null; then',
                f"  echo {q(self.marker(RESET_FAILED))} test patch did not apply",
                "  exit 3",
                "fi",
            ]
        lines += self._test_pyc_lines()
        # the work directory goes before any test runs: it holds the test patch (the
        # expected values) and the candidate's, and a test process of the same user could
        # read them from /tmp (library code that globbed `ms-eval.*/test.patch` answered
        # from it and was resolved)
        lines.append('rm -rf "$W"')
        return "\n".join(line for line in lines if line) + "\n"

    def _test_pyc_lines(self) -> list[str]:
        """Last step of the preparation: the build's rewritten pycs (`test_pycs`) go in
        beside the files whose bytes are exactly those the build rewrote (sha256), only
        while the test command and every pytest configuration file of the tree are as the
        build saw them, and never into a `__pycache__` that is a symlink; each such source
        gets the mtime its pyc records. Nothing here runs code of the tree: `sha256sum`,
        `find`, `tar` and `touch` from the host. docs/grading.md "Cached rewritten test
        modules" has the threat analysis."""
        if not self.test_pycs:
            return []
        q = shlex.quote
        c = q(self.test_pycs)
        cmd = hashlib.sha256(self.test_cmd.encode()).hexdigest()
        names = " -o ".join(f"-name {q(n)}" for n in PYTEST_CONFIG_NAMES)
        config = (
            f"find . -path ./.git -prune -o \\( {names} \\) -type f -exec sha256sum -- {{}} + "
            "| LC_ALL=C sort | sha256sum"
        )
        return [
            f"if [ -f {c}/key ] && {{ read -r k_cmd; read -r k_cfg; read -r k_mtime; read -r k_tail; }} < {c}/key \\",
            f'  && [ "$k_cmd" = {cmd} ] && [ "$({config})" = "$k_cfg" ]; then',
            "  srcs=(); pycs=()",
            "  while IFS= read -r f; do",
            "    d=${f%/*}; b=${f##*/}",
            '    if [ -L "$d/__pycache__" ] || { [ -e "$d/__pycache__" ] && ! [ -d "$d/__pycache__" ]; }; then continue; fi',
            '    srcs+=("$f"); pycs+=("$d/__pycache__/${b%.py}$k_tail")',
            f"  done < <(sha256sum -c -- {c}/manifest 2>/dev/null | sed -n 's/: OK$//p')",
            "  if [ ${#srcs[@]} -gt 0 ]; then",
            f'    tar -C {c}/tree -cf - -- "${{pycs[@]}}" | tar -xf - --no-same-owner && touch -m -d "@$k_mtime" -- "${{srcs[@]}}"',
            "  fi",
            "fi",
        ]

    def _test_lines(self) -> list[str]:
        """Step 6: the test command between the markers (the whole-script form)."""
        q = shlex.quote
        return [
            line
            for line in [
                *self._results_lines(),
                f"echo {q(self.marker(START_TEST_OUTPUT))}",
                "SECONDS=0",
                f"timeout -k 10 {int(self.timeout)} bash -c {q(self.full_test_cmd())} < /dev/null 2>&1",
                "rc=$?",
                "elapsed=$SECONDS",
                f"echo; echo {q(self.marker(END_TEST_OUTPUT))}",  # a killed run may end mid-line
                (
                    f"if [ $rc -eq 124 ] || {{ [ $rc -eq 137 ] && [ $elapsed -ge {int(self.timeout)} ]; }}; then "
                    f"echo {q(self.marker(TESTS_TIMEOUT))}; fi"
                ),
                f'echo "{TEST_EXIT_CODE} $rc {self.nonce}"',
                "exit 0",
            ]
            if line
        ]

    def _revert_lines(self, named: list[str]) -> list[str]:
        """Anti-tamper: put back every protected path the patch named or wrote."""
        lines = [
            # everything written since the stamp, plus what the patch names
            'find . -path ./.git -prune -o -newer "$W/stamp" ! -type d -print0 > "$W/changed.list"',
        ]
        for p in named:
            lines.append(f"printf '%s\\0' {shlex.quote('./' + p)} >> \"$W/changed.list\"")
        protected_case = " | ".join(
            [f"*/{n}" for n in INFRA_NAMES]
            + ["*.pyc", "*.pyo", "*/test_*.py", "*_test.py", "*/tests.py"]
            + [f"*/{d}/*" for d in TEST_DIRS]
            + [f"./{r}" if r.endswith(".py") else f"./{r}/*" for r in SHADOW_ROOTS]
            + [f"*/{n}" for n in SUPPORT_FILES]
            + [f"*/{d}/*" for d in SUPPORT_DIRS]
            + [f"./{p}" for p in SUPPORT_PATHS]
        )
        # test-support paths this task's own patch changes stay the candidate's (matched
        # first, and never a path `is_protected` names)
        editable = [p for p in self.editable if is_test_support(p) and not is_protected(p)]
        keep = [f"    {' | '.join(shlex.quote('./' + p) for p in editable)}) ;;"] if editable else []
        lines += [
            'tar -tf "$W/backup.tar" > "$W/backup.names" 2>/dev/null || : > "$W/backup.names"',
            "reverted=0",
            'while IFS= read -r -d "" p; do',
            '  case "$p" in',
            *keep,
            f"    {protected_case})",
            '      rm -rf -- "$p"',
            '      if grep -Fxq -- "$p" "$W/backup.names" || grep -Fxq -- "${p#./}" "$W/backup.names"; then',
            '        tar -xf "$W/backup.tar" -- "$p" 2>/dev/null || tar -xf "$W/backup.tar" -- "${p#./}"',
            "      fi",
            '      echo "minisandbox: reverted protected path ${p#./}"; reverted=$((reverted+1));;',
            "  esac",
            'done < <(sort -zu "$W/changed.list")',
        ]
        return lines

    def _reference_lines(self) -> list[str]:
        lines: list[str] = []
        q = shlex.quote
        fail = f"{{ echo {q(self.marker(RESET_FAILED))} {{}}; exit 3; }}"
        for path, content in sorted(self.reference_files.items()):
            if path.startswith("/") or ".." in path.split("/"):
                raise ValueError(f"reference file {path!r} is not a repo-relative path; fix the task's test list")
            lines.append(f"rm -rf -- {q(path)}")
            if content is None:
                continue
            parent = posixpath.dirname(path)
            if parent:
                lines.append(f"mkdir -p -- {q(parent)} || " + fail.replace("{}", q("mkdir " + parent)))
            lines.append(_b64_file(q(path), content, on_error=fail.replace("{}", q("write " + path))))
        return lines


def _b64_file(target: str, content: bytes, on_error: str = "exit 3") -> str:
    """A command that writes `content` to `target` from a base64 heredoc."""
    data = base64.encodebytes(content).decode("ascii")
    tag = "MS_EOF_" + secrets.token_hex(6)
    return f"base64 -d > {target} <<'{tag}' || {on_error}\n{data}{tag}"


_HUNK = re.compile(r"^@@ -(\d+(?:,\d+)?) \+(\d+(?:,\d+)?) @@(.*)$")


def reverse_patch(patch: str) -> str:
    """The inverse of a unified/git diff as text (what `git apply -R` applies), so a
    SWE-smith gold patch (the bug reversed) can be written as a plain prediction."""
    out: list[str] = []
    lines = patch.splitlines(keepends=True)
    minus: list[str] = []  # pending change block: removed lines first, then added ones
    plus: list[str] = []
    last: list[str] | None = None

    def flush() -> None:
        nonlocal last
        out.extend(minus)
        out.extend(plus)
        minus.clear()
        plus.clear()
        last = None

    i = 0
    in_hunk = False
    while i < len(lines):
        line = lines[i]
        body = line.rstrip("\n")
        nl = line[len(body) :]
        if in_hunk and body[:1] == "+":
            minus.append("-" + line[1:])
            last = minus
        elif (
            in_hunk
            and body[:1] == "-"
            and not (body.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "))
        ):
            plus.append("+" + line[1:])
            last = plus
        elif in_hunk and body[:1] == "\\" and last is not None:
            last.append(line)  # "\ No newline at end of file" stays with its line
        elif in_hunk and body[:1] in (" ", "\\") or (in_hunk and body == ""):
            flush()
            out.append(line)
        else:
            flush()
            in_hunk = False
            if body.startswith("diff --git "):
                m = _DIFF_GIT.match(body)
                out.append(f"diff --git a/{m.group(2)} b/{m.group(1)}{nl}" if m else line)
            elif body.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
                nxt = lines[i + 1]
                old, new = body[4:], nxt.rstrip("\n")[4:]

                def side(path: str, prefix: str) -> str:
                    if path.startswith(("a/", "b/")):
                        return prefix + path[2:]
                    return path

                out.append(f"--- {side(new, 'a/')}{nl}")
                out.append(f"+++ {side(old, 'b/')}{nxt[len(nxt.rstrip(chr(10))) :]}")
                i += 1
            elif body.startswith("@@ "):
                m = _HUNK.match(body)
                out.append(f"@@ -{m.group(2)} +{m.group(1)} @@{m.group(3)}{nl}" if m else line)
                in_hunk = bool(m)
            else:
                for a, b in (
                    ("new file mode ", "deleted file mode "),
                    ("rename from ", "rename to "),
                    ("copy from ", "copy to "),
                    ("old mode ", "new mode "),
                ):
                    if body.startswith(a):
                        line = b + line[len(a) :]
                        break
                    if body.startswith(b):
                        line = a + line[len(b) :]
                        break
                else:
                    m = re.match(r"^index ([0-9a-f]+)\.\.([0-9a-f]+)(.*)$", body)
                    if m:
                        line = f"index {m.group(2)}..{m.group(1)}{m.group(3)}{nl}"
                out.append(line)
        i += 1
    flush()
    return "".join(out)
