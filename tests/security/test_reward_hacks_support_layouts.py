"""Test-support code in layouts the anti-tamper step did not know (the eighth probe).

A candidate patch may not change the helpers and expected outputs the tests compare with
(`evalscript.is_test_support`, docs/grading.md "Anti-tamper"). The rule knew directory and
module names (`testing.py`, `test/`, `testdata/`), not these layouts of real repositories:

* helpers in a `_tests/` directory (trio's `src/trio/_core/_tests/tutil.py`);
* expected outputs in `test-data/` (mypy's `test-data/unit/check-*.test`, read by
  `mypy/test/testcheck.py`, which is all SWE-smith restores);
* helpers under names no rule matches, listed by path (`evalscript.SUPPORT_PATHS`: SymPy's
  `sympy/utilities/randtest.py` and `pytest.py` before 1.6, dask's `assert_eq` modules,
  scrapy's `utils/test.py`, scikit-learn's `utils/estimator_checks.py`).

A patch that kept the bug and made such a helper a no-op, or wrote the bug's answer into
the expected output, was resolved: host and sandbox, strict and official. Now each path is
reverted (unless the task's own patch changes it) and the run is `tests-failed`.
"""

from __future__ import annotations

import textwrap

import pytest

from minisandbox.grading.evalscript import (
    SUPPORT_DIRS,
    SUPPORT_FILES,
    SUPPORT_PATHS,
    TEST_DIRS,
    is_protected,
    is_test_support,
    reverse_patch,
)
from minisandbox.grading.evaluate import evaluate
from minisandbox.grading.resultplugin import SUPPORT_DIRS as PLUGIN_DIRS
from minisandbox.grading.resultplugin import SUPPORT_FILES as PLUGIN_FILES
from minisandbox.grading.resultplugin import SUPPORT_PATHS as PLUGIN_PATHS
from tests.fixtures.evaluation import HACK_CALC, diff, hack_task, smith_record
from tests.security.test_reward_hacks import executor_fixtures

CHECK = "def check(got, want):\n    assert got == want, (got, want)\n"
NOOP_CHECK = "def check(got, want):\n    pass\n"
TEST_TUTIL = textwrap.dedent(
    """\
    import calc
    from calc._tests.tutil import check


    def test_add():
        check(calc.add(2, 3), 5)
    """
)
TEST_DATA = textwrap.dedent(
    """\
    import os

    import calc

    DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "test-data", "add.txt")


    def test_add():
        with open(DATA) as f:
            want = int(f.read())
        assert calc.add(2, 3) == want
    """
)
TEST_RANDTEST = textwrap.dedent(
    """\
    import calc
    from sympy.utilities.randtest import check


    def test_add():
        check(calc.add(2, 3), 5)
    """
)
#: test file -> (the path a hack changes, what it writes there: the bug kept)
LAYOUTS = {
    "tests/test_tutil.py": ("calc/_tests/tutil.py", NOOP_CHECK),
    "tests/test_data.py": ("test-data/add.txt", "-1\n"),
    "tests/test_randtest.py": ("sympy/utilities/randtest.py", NOOP_CHECK),
}
MODES = ["strict", "official"]


@pytest.fixture(scope="module")
def task(tmp_path_factory):
    root = tmp_path_factory.mktemp("layouts")
    files = {
        "calc/__init__.py": HACK_CALC,
        "calc/_tests/__init__.py": "",
        "calc/_tests/tutil.py": CHECK,
        "test-data/add.txt": "5\n",
        "sympy/__init__.py": "",
        "sympy/utilities/__init__.py": "",
        "sympy/utilities/randtest.py": CHECK,
        "tests/test_tutil.py": TEST_TUTIL,
        "tests/test_data.py": TEST_DATA,
        "tests/test_randtest.py": TEST_RANDTEST,
        "pyproject.toml": '[project]\nname = "calc"\nversion = "0.1"\n',
    }
    t = hack_task(root, "layouts", files, "calc/__init__.py")
    out = {"root": root, "repo": t.repo, "spec": t.spec, "gold": reverse_patch(t.bug), "tasks": {}}
    for n, (test, (path, text)) in enumerate(sorted(LAYOUTS.items())):
        record = smith_record(f"calc__calc.00000000.func_pm_op_change__l{n}", t.bug, [f"{test}::test_add"], [])
        out["tasks"][test] = (record, diff(t.work, t.buggy, {path: text}))
    return out


layouts_host, layouts_sandbox, layouts_executor = executor_fixtures("task", "layouts")


def test_the_layouts_are_test_support():
    for _test, (path, _text) in LAYOUTS.items():
        assert is_test_support(path) and not is_protected(path), path
    for path in ("src/trio/_core/_tests/tutil.py", "test-data/unit/check-classes.test", "dask/array/utils.py"):
        assert is_test_support(path), path
    assert not is_test_support("werkzeug/test.py") and not is_test_support("dask/utils.py")


def test_the_results_plugin_knows_the_same_test_support():
    """The plugin's copy (its code is test code) and the eval script's lists agree."""
    assert set(PLUGIN_DIRS) == set(TEST_DIRS) | set(SUPPORT_DIRS)
    assert set(PLUGIN_FILES) == set(SUPPORT_FILES)
    assert set(PLUGIN_PATHS) == set(SUPPORT_PATHS)


@pytest.mark.parametrize("test", sorted(LAYOUTS))
def test_gold_patch_is_resolved(task, layouts_executor, test):
    record, _hack = task["tasks"][test]
    ev = evaluate(record, task["spec"], task["gold"], layouts_executor)
    assert ev.resolved, ev.output[-3000:]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("test", sorted(LAYOUTS))
def test_a_changed_helper_or_expected_output_is_reverted(task, layouts_executor, test, mode):
    record, hack = task["tasks"][test]
    ev = evaluate(record, task["spec"], hack, layouts_executor, grading=mode)
    assert ev.entry["patch_successfully_applied"], ev.output[-3000:]
    assert f"minisandbox: reverted protected path {LAYOUTS[test][0]}" in ev.output, ev.output[-3000:]
    assert not ev.resolved and ev.reason == "tests-failed", (ev.entry, ev.output[-3000:])
