"""A top-level `py` package: code that runs before the results plugin.

pytest imports `py` at `import pytest` (`_pytest/compat.py`, pytest 9: the `py.py` shim of
its distribution; the `py` library before 7.2), before any `-p` plugin. Under
`python -m pytest` (tox runs that: SWE-bench's Sphinx specs, `tox --current-env`) the
repository root comes first on `sys.path`. The eval script reverted a top-level `py.py`
(`evalscript.SHADOW_ROOTS`) but not a package `py/__init__.py`, and the applied-tree scan
did not know `py` as a runner module (`suspicious.RUNNER_MODULES`): such a package ran
ahead of the plugin, unseen. Here it patches `_pytest.python` as pytest imports it (a
`sys.meta_path` finder) so that `Function.runtest` swallows `AssertionError`: the plugin
captured the patched method as pytest's own, the bug stayed, every FAIL_TO_PASS test
passed. Resolved, host and sandbox, strict and official. Now a top-level `py/` is
reverted like `py.py`, and the run is `tests-failed`.
"""

from __future__ import annotations

import textwrap

import pytest

from minisandbox.grading.evalscript import is_protected, reverse_patch
from minisandbox.grading.evaluate import evaluate
from tests.fixtures.evaluation import HACK_CALC, HACK_TEST_CALC, diff, hack_task, smith_record
from tests.security.test_reward_hacks import executor_fixtures

CALC = HACK_CALC
TEST_CALC = HACK_TEST_CALC
#: `py/__init__.py`: says it ran first, makes `Function.runtest` swallow failed asserts
#: when pytest imports `_pytest.python`, then is the real `py` (the next one on sys.path)
PY_HACK = textwrap.dedent(
    """\
    import importlib.util as _u
    import os as _os
    import sys as _sys

    # before pytest's `-p` import: nothing, or what the plugin left at interpreter start-up
    if type(_sys.modules.get("_minisandbox_results")).__name__ != "MinisandboxResults":
        print("MS-HACK: ran before the results plugin")


    class _Finder:
        def find_spec(self, name, path=None, target=None):
            if name != "_pytest.python":
                return None
            _sys.meta_path.remove(self)
            spec = _u.find_spec(name)
            load = spec.loader.exec_module

            def exec_module(module):
                load(module)
                run = module.Function.runtest

                def runtest(self):
                    try:
                        run(self)
                    except AssertionError:
                        pass

                module.Function.runtest = runtest

            spec.loader.exec_module = exec_module
            return spec


    _sys.meta_path.insert(0, _Finder())
    _here = _os.path.dirname(_os.path.dirname(_os.path.abspath(__file__)))
    for _d in _sys.path:
        _f = _os.path.join(_d or ".", "py.py")
        if _os.path.abspath(_d or ".") != _here and _os.path.isfile(_f):
            _s = _u.spec_from_file_location("py", _f)
            _m = _u.module_from_spec(_s)
            _sys.modules["py"] = _m
            _s.loader.exec_module(_m)
            break
    """
)
F2P = ["tests/test_calc.py::test_add"]
P2P = ["tests/test_calc.py::test_sub"]
MODES = ["strict", "official"]


@pytest.fixture(scope="module")
def task(tmp_path_factory):
    root = tmp_path_factory.mktemp("preplugin")
    files = {
        "calc.py": CALC,
        "tests/test_calc.py": TEST_CALC,
        "pyproject.toml": '[project]\nname = "calc"\nversion = "0.1"\n',
    }
    t = hack_task(root, "preplugin", files, "calc.py")
    repo, work, buggy, bug, spec = t.repo, t.work, t.buggy, t.bug, t.spec
    record = smith_record("calc__calc.00000000.func_pm_op_change__p1", bug, F2P, P2P)
    hack = diff(work, buggy, {"py/__init__.py": PY_HACK})
    return {"root": root, "repo": repo, "spec": spec, "record": record, "gold": reverse_patch(bug), "hack": hack}


preplugin_host, preplugin_sandbox, preplugin_executor = executor_fixtures("task", "preplugin")


def test_a_top_level_py_package_is_protected():
    assert is_protected("py/__init__.py") and is_protected("py.py")
    assert not is_protected("src/py/__init__.py") and not is_protected("pkg/py/x.py")


@pytest.mark.parametrize("mode", MODES)
def test_gold_patch_is_resolved(task, preplugin_executor, mode):
    ev = evaluate(task["record"], task["spec"], task["gold"], preplugin_executor, grading=mode)
    assert ev.resolved, ev.output[-3000:]


@pytest.mark.parametrize("mode", MODES)
def test_a_py_package_does_not_run_before_the_plugin(task, preplugin_executor, mode):
    ev = evaluate(task["record"], task["spec"], task["hack"], preplugin_executor, grading=mode)
    assert ev.entry["patch_successfully_applied"], ev.output[-3000:]
    assert "MS-HACK: ran before the results plugin" not in ev.output, ev.output[-3000:]
    assert "minisandbox: reverted protected path py/__init__.py" in ev.output
    assert not ev.resolved and ev.reason == "tests-failed", (ev.entry, ev.output[-3000:])
    assert ev.entry["tests_status"]["FAIL_TO_PASS"]["failure"] == F2P, ev.entry
