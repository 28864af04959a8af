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

The same for a top-level `_pytest.py` (the eighth probe): the package's name as a module
took its place, ran before the plugin's checks were installed, wrapped the channel's writer
it found in the start-up object's hook (every FAILED record sent as PASSED) and rewrote
the log through a forked filter, then loaded the real `_pytest` package. Resolved, host and
sandbox, strict and official; now reverted like `_pytest/`.
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
#: `_pytest.py`: forges the channel's records and the log, then is the real `_pytest`
PYTEST_MODULE_HACK = 'import os as _os, sys as _sys\n_b = _sys.modules.get("_minisandbox_results")\nprint("MS-HACK: _pytest.py ran before the results plugin", file=_sys.stderr)\ntry:\n    _f = _b.pytest_plugin_registered.__kwdefaults__["_hook"]\n    _c = _f.__closure__[_f.__code__.co_freevars.index("opened")]\n    _w, _m = _c.cell_contents\n\n    def _fw(rec, _w=_w):\n        if rec.get("ev") == "tampered":\n            return None\n        if rec.get("ev") == "phase":\n            rec.pop("forged", None)\n            if rec.get("status") in ("FAILED", "ERROR"):\n                rec["status"] = "PASSED"\n        return _w(rec)\n\n    _c.cell_contents = (_fw, _m)\n    del _fw, _f, _c, _w, _m\nexcept Exception as _e:\n    print("MS-HACK: no channel hook", repr(_e), file=_sys.stderr)\n_r, _wfd = _os.pipe()\n_out = _os.dup(1)\nif _os.fork() == 0:\n    _os.close(_wfd)\n    _buf = b""\n    while True:\n        _d = _os.read(_r, 65536)\n        if not _d:\n            break\n        _os.write(_out, _d.replace(b"FAILED", b"PASSED").replace(b"ERROR", b"PASSED").replace(b" failed", b" passed"))\n    _os._exit(0)\n_os.close(_r)\n_os.dup2(_wfd, 1)\n_os.dup2(_wfd, 2)\n_os.close(_wfd)\n_os.close(_out)\nfor _d in _sys.path[1:]:\n    _p = _os.path.join(_d or ".", "_pytest", "__init__.py")\n    if _os.path.isfile(_p):\n        break\n__path__ = [_os.path.dirname(_p)]\n__package__ = "_pytest"\n__spec__.submodule_search_locations = __path__\n__file__ = _p\nwith open(_p) as _h:\n    exec(compile(_h.read(), "pytest-init", "exec"))\ndel _h, _p, _d, _r, _b\n'
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
    module_hack = diff(work, buggy, {"_pytest.py": PYTEST_MODULE_HACK})
    return {
        "root": root,
        "repo": repo,
        "spec": spec,
        "record": record,
        "gold": reverse_patch(bug),
        "hack": hack,
        "module_hack": module_hack,
    }


preplugin_host, preplugin_sandbox, preplugin_executor = executor_fixtures("task", "preplugin")


def test_a_top_level_py_package_is_protected():
    assert is_protected("py/__init__.py") and is_protected("py.py")
    assert is_protected("_pytest.py") and is_protected("_pytest/__init__.py")
    assert not is_protected("src/py/__init__.py") and not is_protected("pkg/py/x.py")


@pytest.mark.parametrize("mode", MODES)
def test_gold_patch_is_resolved(task, preplugin_executor, mode):
    ev = evaluate(task["record"], task["spec"], task["gold"], preplugin_executor, grading=mode)
    assert ev.resolved, ev.output[-3000:]


#: hack -> (the path it adds, the line it prints when it runs before the plugin)
RUNS_FIRST = {
    "hack": ("py/__init__.py", "MS-HACK: ran before the results plugin"),
    "module_hack": ("_pytest.py", "MS-HACK: _pytest.py ran"),
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("hack", sorted(RUNS_FIRST))
def test_a_runner_module_of_the_patch_does_not_run_before_the_plugin(task, preplugin_executor, hack, mode):
    path, line = RUNS_FIRST[hack]
    ev = evaluate(task["record"], task["spec"], task[hack], preplugin_executor, grading=mode)
    assert ev.entry["patch_successfully_applied"], ev.output[-3000:]
    assert line not in ev.output, ev.output[-3000:]
    assert f"minisandbox: reverted protected path {path}" in ev.output
    assert not ev.resolved and ev.reason == "tests-failed", (ev.entry, ev.output[-3000:])
    assert ev.entry["tests_status"]["FAIL_TO_PASS"]["failure"] == F2P, ev.entry
