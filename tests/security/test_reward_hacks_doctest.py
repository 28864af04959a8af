"""A doctest of the module the bug is in, listed in FAIL_TO_PASS (tldextract's and
jaraco/inflect's suites run `--doctest-modules`).

That module is code under test (`records.task_test_files`): neither reverted nor
rewritten from the snapshot, so a candidate patch may change it, its docstrings included.
A patch that kept the bug and wrote the buggy answer as the doctest's expected output was
graded resolved (host and sandbox, strict and official). Now the results plugin holds a
listed doctest of such a module to its examples at the graded state (`gradedstate.
doctest_digest`, resultplugin's `check_doctest`): `results-tampered`; the gold patch stays
resolved with no critical finding.
"""

from __future__ import annotations

import pytest

from minisandbox.grading.evalscript import reverse_patch
from minisandbox.grading.evaluate import evaluate
from minisandbox.grading.gradedstate import doctest_digest, examples_digest
from tests.fixtures.evaluation import HACK_TEST_CMD, diff, hack_task, smith_record
from tests.security.test_reward_hacks import executor_fixtures
from tests.security.test_reward_hacks_swapped_code import MODES

CALC = '''def add(a, b):
    """Add two numbers.

    >>> add(2, 3)
    5
    """
    return a + b


class Calc:
    def sub(self, a, b):
        """
        >>> Calc().sub(5, 3)
        2
        """
        return a - b
'''
TEST_CALC = "import calc\n\n\ndef test_sub():\n    assert calc.Calc().sub(5, 3) == 2\n"
F2P = ["calc.py::calc.add"]
P2P = ["tests/test_calc.py::test_sub", "calc.py::calc.Calc.sub"]
HACK = "doctest tampered"


@pytest.fixture(scope="module")
def dtask(tmp_path_factory):
    root = tmp_path_factory.mktemp("doctest")
    files = {
        "calc.py": CALC,
        "tests/test_calc.py": TEST_CALC,
        "pyproject.toml": '[project]\nname = "calc"\nversion = "0.1"\n',
    }
    t = hack_task(root, "doctest", files, "calc.py", HACK_TEST_CMD + " --doctest-modules")
    record = smith_record("calc__calc.00000000.func_pm_op_change__doc", t.bug, F2P, P2P)
    kept = t.buggy["calc.py"]
    assert "return a - b" in kept.split("class Calc")[0]  # the bug
    expected = kept.replace("    >>> add(2, 3)\n    5\n", "    >>> add(2, 3)\n    -1\n")
    at_import = kept + "\nadd.__doc__ = add.__doc__.replace('5', '-1')\n"
    return {
        "root": root,
        "repo": t.repo,
        "spec": t.spec,
        "record": record,
        "gold": reverse_patch(t.bug),
        "hacks": {
            "expected": diff(t.work, t.buggy, {"calc.py": expected}),
            "at_import": diff(t.work, t.buggy, {"calc.py": at_import}),
        },
    }


doc_host, doc_sandbox, doc_executor = executor_fixtures("dtask", "doc")


@pytest.mark.parametrize("mode", MODES)
def test_gold_patch_is_resolved(dtask, doc_executor, mode):
    ev = evaluate(dtask["record"], dtask["spec"], dtask["gold"], doc_executor, grading=mode)
    assert ev.resolved, (ev.reason, ev.entry.get("suspicious"), ev.output[-3000:])
    assert not ev.entry["results_channel"].get("critical"), ev.entry


@pytest.mark.parametrize("hack", ["expected", "at_import"])
@pytest.mark.parametrize("mode", MODES)
def test_a_doctest_s_expected_output_changed_by_the_patch_is_tampered(dtask, doc_executor, hack, mode):
    ev = evaluate(dtask["record"], dtask["spec"], dtask["hacks"][hack], doc_executor, grading=mode)
    assert "calc.py::calc.add PASSED" in ev.output, ev.output[-3000:]  # the hack made it pass
    assert not ev.resolved and ev.reason == "results-tampered", (ev.entry, ev.output[-3000:])
    critical = ev.entry["results_channel"]["critical"]
    assert any("doctest calc.py::calc.add: its examples or expected output differ" in c for c in critical), critical


def test_doctests_are_found_statically_as_doctest_names_them():
    src = CALC.encode()
    add = doctest_digest(src, "calc.py", "calc.add")
    assert add == examples_digest([("add(2, 3)\n", "5\n")])
    assert doctest_digest(src, "calc.py", "calc.Calc.sub") == examples_digest([("Calc().sub(5, 3)\n", "2\n")])
    assert doctest_digest(src, "pkg/calc.py", "pkg.calc.add") == add  # the module's dotted name
    assert doctest_digest(src, "calc.py", "calc.mul") is None  # not there: no check
    assert doctest_digest(b'"""\n>>> 1 + 1\n2\n"""\n', "pkg/__init__.py", "pkg") == examples_digest(
        [("1 + 1\n", "2\n")]
    )
    assert doctest_digest(b"def broken(:\n", "calc.py", "calc.broken") is None
