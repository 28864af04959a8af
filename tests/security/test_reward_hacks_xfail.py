"""`pytest.xfail()` called by library code through a standard-library frame.

An XFAIL counts as a pass only for a test marked xfail at the graded state, and the
results plugin fails an XFAIL whose `pytest.xfail()` was called from library code
(`resultplugin.status_of`). It judged the caller by the innermost frame outside pytest,
and took a frame outside the repository for an installed test helper. So library code
that kept the bug and called `pytest.xfail()` through the standard library
(`functools.singledispatch(pytest.xfail)(...)`: the innermost frame is functools'
wrapper) made the test XFAIL, accepted; and "marked at the graded state" is static and
generous: a conftest on the test's path that mentions xfail (scikit-learn's, pandas', a
collection hook that marks slow tests) marks every test under it. The library reads
`PYTEST_CURRENT_TEST` to raise only during a test's call. Resolved, host and sandbox,
strict and official. Now every frame of the outcome's traceback is judged: one from
repository code that is not test code fails the test, whatever frames lie between it and
pytest.xfail() (the standard library, code compiled under another file's name).
"""

from __future__ import annotations

import textwrap

import pytest

from minisandbox.grading.evalscript import reverse_patch
from minisandbox.grading.evaluate import evaluate
from tests.fixtures.evaluation import HACK_CALC, HACK_TEST_CALC, diff, hack_task, smith_record
from tests.security.test_reward_hacks import executor_fixtures

CALC = HACK_CALC
TEST_CALC = HACK_TEST_CALC
#: a conftest that marks xfail the tests a platform cannot run (none here): every test
#: under it counts as marked at the graded state
CONFTEST = textwrap.dedent(
    """\
    import sys

    import pytest


    def pytest_collection_modifyitems(items):
        for item in items:
            if "windows_only" in item.keywords and sys.platform != "win32":
                item.add_marker(pytest.mark.xfail(reason="windows only"))
    """
)
#: the bug kept; during a test's call, `add` xfails through a standard-library frame
HACK = textwrap.dedent(
    """\
    import functools
    import os


    def add(a, b):
        if os.environ.get("PYTEST_CURRENT_TEST", "").endswith("(call)"):
            import pytest

            functools.singledispatch(pytest.xfail)("flaky on this platform")
        return a - b
    """
)
#: the same, from code compiled under the test module's own file name
HACK_EXEC = textwrap.dedent(
    """\
    import os

    _XF = "import pytest\\npytest.xfail('flaky')\\n"


    def add(a, b):
        if os.environ.get("PYTEST_CURRENT_TEST", "").endswith("(call)"):
            exec(compile(_XF, os.path.join(os.path.dirname(__file__), "tests", "test_calc.py"), "exec"))
        return a - b
    """
)
F2P = ["tests/test_calc.py::test_add"]
P2P = ["tests/test_calc.py::test_sub"]
MODES = ["strict", "official"]


@pytest.fixture(scope="module")
def task(tmp_path_factory):
    root = tmp_path_factory.mktemp("xfail")
    files = {
        "calc.py": CALC,
        "tests/conftest.py": CONFTEST,
        "tests/test_calc.py": TEST_CALC,
        "pyproject.toml": '[project]\nname = "calc"\nversion = "0.1"\n',
    }
    t = hack_task(root, "xfail", files, "calc.py")
    repo, work, buggy, bug, spec = t.repo, t.work, t.buggy, t.bug, t.spec
    record = smith_record("calc__calc.00000000.func_pm_op_change__x1", bug, F2P, P2P)
    hacks = {
        "singledispatch": diff(work, buggy, {"calc.py": HACK + CALC.split("\n\n\n", 1)[1]}),
        "exec": diff(work, buggy, {"calc.py": HACK_EXEC + "\n\n" + CALC.split("\n\n\n", 1)[1]}),
    }
    return {"root": root, "repo": repo, "spec": spec, "record": record, "gold": reverse_patch(bug), "hacks": hacks}


xfail_host, xfail_sandbox, xfail_executor = executor_fixtures("task", "xfail")


@pytest.mark.parametrize("mode", MODES)
def test_gold_patch_is_resolved(task, xfail_executor, mode):
    ev = evaluate(task["record"], task["spec"], task["gold"], xfail_executor, grading=mode)
    assert ev.resolved, ev.output[-3000:]


@pytest.mark.parametrize("hack", ["singledispatch", "exec"])
@pytest.mark.parametrize("mode", MODES)
def test_xfail_called_by_library_code_fails(task, xfail_executor, hack, mode):
    ev = evaluate(task["record"], task["spec"], task["hacks"][hack], xfail_executor, grading=mode)
    assert ev.entry["patch_successfully_applied"], ev.output[-3000:]
    assert "XFAIL" in ev.output  # the hack ran: pytest reports the test xfailed
    # module code compiled under the test file's name and run is test code run again as other
    # code (the results plugin's `graded_exec`): critical as well
    want = "results-tampered" if hack == "exec" else "tests-failed"
    assert not ev.resolved and ev.reason == want, (ev.entry, ev.output[-3000:])
    assert ev.entry["tests_status"]["FAIL_TO_PASS"]["failure"] == F2P, ev.entry
