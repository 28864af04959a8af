"""No closure of the results plugin is reachable without an audit event.

A function's `__closure__` and a cell's `cell_contents` are read, and a cell rebound, with
no audit event. Each of the plugin's closures leads to the others (the cells of one
`_install` call are shared), so one reachable closure is all of the plugin's state: a
library module that walked `unittest.TestCase._callTestMethod.__closure__` (the check
before the body, wrapped in pytest mode too) rebound the plugin's `report_tampered` to a
no-op, then registered a hook wrapper that swallowed every failure: resolved in strict
and official mode. What the plugin puts where other code can reach it must be a seal
(`seal` in resultplugin: no closure, the implementation a keyword-only default whose read
raises an event).

Each test runs the plugin in one of its modes (pytest, unittest, SymPy's runner) and,
from a test, walks everything reachable from the loaded modules, the builtins and the
test's own namespace and objects by reads that raise no event (module and class
dictionaries, instance dictionaries, closures, bound methods, containers), listing every
function of the plugin's module that has a closure.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

from minisandbox.grading.results import (
    RESULTS_PLUGIN,
    RUNNER_VAR,
    SOCKET_VAR,
    SYMPY_STARTUP,
    UNITTEST_WARNOPTION,
    ResultsChannel,
    parse_channel,
    plugin_dir,
)
from tests.security.test_reward_hacks_sympy import TEST_FILE, TESTS_NEW, make_sympy_repo

#: The walk (test code; it reads nothing an audit hook sees). `roots` are extra objects.
WALK = """
def plugin_closures(roots, out):
    import builtins, json, sys, types
    plugin_modules = ("_minisandbox_results", "sitecustomize")
    FT, MT, CT = types.FunctionType, types.MethodType, type
    # (object, the first function with a closure on the way to it, or None)
    todo = [(o, None) for o in list(sys.modules.values()) + [builtins] + list(roots)]
    seen, found = set(), set()
    while todo and len(seen) < 400000:
        o, via = todo.pop()
        if id(o) in seen:
            continue
        seen.add(id(o))
        t = type(o)
        more = []
        try:
            if t is FT:
                clo = o.__closure__
                if clo and o.__module__ in plugin_modules:
                    found.add(via or o.__qualname__)
                    continue  # what its cells hold is the plugin's state
                if clo and via is None:
                    via = "%s.%s" % (o.__module__, o.__qualname__)
                for c in clo or ():
                    try:
                        more.append(c.cell_contents)
                    except ValueError:
                        pass
                more.extend(v for v in (getattr(o, "__wrapped__", None), o.__dict__) if v is not None)
            elif t is MT:
                more.extend((o.__func__, o.__self__))
            elif t is types.ModuleType:
                more.extend(vars(o).values())
            elif isinstance(o, CT):
                more.extend(vars(o).values())
                more.extend(o.__mro__)
            elif t in (dict, types.MappingProxyType):
                more.extend(o.values())
                more.extend(k for k in o.keys() if not isinstance(k, str))
            elif t in (list, tuple, set, frozenset):
                if len(o) < 10000:
                    more.extend(o)
            elif t in (staticmethod, classmethod):
                more.append(o.__func__)
            elif t is property:
                more.extend((o.fget, o.fset, o.fdel))
            elif not isinstance(o, (str, bytes, int, float, complex, type(None))):
                more.append(t)
                d = getattr(o, "__dict__", None)
                if type(d) is dict:
                    more.extend(d.values())
                slots = getattr(t, "__slots__", ())
                for s in slots if isinstance(slots, tuple) else ():
                    v = getattr(o, s, None)
                    if v is not None:
                        more.append(v)
        except Exception:
            pass
        todo.extend((m, via) for m in more if m is not None)
    with open(out, "w") as f:
        json.dump(sorted(found), f)
"""

PYTEST_TEST = (
    WALK
    + """

def test_walk(request):
    import os
    plugin_closures([request, request.node, request.config, request.session], os.environ["SEEN"])
"""
)

UNITTEST_TEST = (
    WALK
    + """
import os, unittest


class T(unittest.TestCase):
    def test_walk(self):
        plugin_closures([self, self._outcome, getattr(self._outcome, "result", None)], os.environ["SEEN"])
"""
)

SYMPY_TEST_ADD = (
    WALK.replace("\ndef plugin_closures", "\ndef _plugin_closures")
    + """

def test_walk():
    import os
    _plugin_closures([globals()], os.environ["SEEN"])
"""
)


def _closures_found(cmd: list[str], cwd: Path, manifest: dict, env: dict[str, str], seen: Path) -> list[str]:
    """Run `cmd` (a test run in one of the plugin's modes, whose test walks) with a results
    channel, and return what the walk found."""
    with ResultsChannel(manifest) as ch:
        base = {
            "PATH": os.environ["PATH"],
            SOCKET_VAR: ch.socket_path(),
            "SEEN": str(seen),
            "MINISANDBOX_HAD_PYTHONPATH": "",
            "MINISANDBOX_HAD_PYTHONWARNINGS": "",
        }
        proc = subprocess.run(cmd, cwd=cwd, env={**base, **env}, capture_output=True, text=True)
        channel = parse_channel(ch.collect(), ch.nonce)
    out = proc.stdout[-2000:] + proc.stderr[-2000:]
    assert channel.present, (channel.summary(), out)
    assert seen.is_file(), out
    return json.loads(seen.read_text())


def test_no_plugin_closure_is_reachable_under_pytest(tmp_path):
    (tmp_path / "test_walk.py").write_text(PYTEST_TEST)
    env = {
        "PYTHONPATH": str(plugin_dir()),
        "PYTEST_ADDOPTS": f"-p {RESULTS_PLUGIN}",
        "MINISANDBOX_HAD_PYTEST_ADDOPTS": "",
        "PYTHONWARNINGS": UNITTEST_WARNOPTION,
        RUNNER_VAR: "pytest",
    }
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_walk.py"]
    found = _closures_found(cmd, tmp_path, {"root": str(tmp_path)}, env, tmp_path / "seen.json")
    assert found == [], found


def test_no_plugin_closure_is_reachable_under_unittest(tmp_path):
    (tmp_path / "test_walk.py").write_text(UNITTEST_TEST)
    env = {"PYTHONPATH": str(plugin_dir()), "PYTHONWARNINGS": UNITTEST_WARNOPTION, RUNNER_VAR: "unittest"}
    cmd = [sys.executable, "-m", "unittest", "-v", "test_walk"]
    found = _closures_found(cmd, tmp_path, {"root": str(tmp_path)}, env, tmp_path / "seen.json")
    assert found == [], found


def test_no_plugin_closure_is_reachable_under_sympys_runner(tmp_path):
    repo = tmp_path / "repo"
    make_sympy_repo(repo)
    (repo / TEST_FILE).write_text(TESTS_NEW + SYMPY_TEST_ADD)
    digest = hashlib.sha256((repo / TEST_FILE).read_bytes()).hexdigest()
    env = {
        "PYTHONPATH": str(plugin_dir() / SYMPY_STARTUP),
        "PYTHONWARNINGS": "ignore::UserWarning,ignore::SyntaxWarning",
        "PYTHONHASHSEED": "7",
        RUNNER_VAR: "sympy",
    }
    cmd = [sys.executable, "bin/test", "-C", "--verbose", TEST_FILE]
    manifest = {"root": str(repo), "files": {TEST_FILE: digest}}
    found = _closures_found(cmd, repo, manifest, env, tmp_path / "seen.json")
    assert found == [], found
