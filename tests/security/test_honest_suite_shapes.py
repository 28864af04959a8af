"""Honest shapes of real suites that the results plugin took for tampering.

Each was found by running the checks over real SWE-smith environments (docs/grading.md,
"Checked on real suites"): no candidate code is involved, so every task of such an
environment was dropped at labelling (`fixed-broken`) and every honest fix graded
`results-tampered`. Local fixtures reproduce each shape.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import pytest

from minisandbox.grading.results import (
    ResultsChannel,
    parse_channel,
)
from tests.grading.test_results_unittest import unittest_env
from tests.security.test_installed_plugins import install_wrapping_plugin, site_packages
from tests.security.test_results_plugin_honest_shapes import honest_task
from tests.security.test_reward_hacks import (  # noqa: F401
    add_pytest_script,
    grade,
    host_venv_executor,
    root_layers_executor,
    task,
)
from tests.security.test_reward_hacks_swapped_code import CALC, MODES, _assert_gold_resolved


def run_unittest(python: str, repo: Path, manifest: dict, module: str) -> tuple[subprocess.CompletedProcess, object]:
    """`python -m unittest -v module` in `repo` with the results plugin in unittest mode."""
    with ResultsChannel(manifest) as ch:
        env = unittest_env(ch)
        proc = subprocess.run(
            [python, "-m", "unittest", "-v", module], cwd=repo, env=env, capture_output=True, text=True
        )
        channel = parse_channel(ch.collect(), ch.nonce)
    return proc, channel


#: setuptools' namespace-package line, as `sphinxcontrib_jsmath-1.0.1-py3.7-nspkg.pth` has it
#: (installed with sphinx in tornado's environment)
NSPKG = (
    "import sys, types, os;has_mfs = sys.version_info > (3, 5);"
    "p = os.path.join(sys._getframe(1).f_locals['sitedir'], *('sphinxcontrib',));"
    "m = sys.modules.setdefault('sphinxcontrib', types.ModuleType('sphinxcontrib'));"
    "mp = (m or []) and m.__dict__.setdefault('__path__',[]);(p not in mp) and mp.append(p)\n"
)
CALC_TEST = (
    "import unittest, calc\n\n\nclass T(unittest.TestCase):\n"
    "    def test_add(self):\n        self.assertEqual(calc.add(2, 3), 5)\n"
)


def test_a_pth_line_that_site_runs_at_start_up_is_no_code_of_the_patch(tmp_path):
    """In unittest mode the plugin is loaded at interpreter start-up, before `site` runs the
    `.pth` lines (an `exec` of a string): a `sys._getframe` there was "code the patch
    brought" (tornado's environment, every run)."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    py = str(venv / "bin" / "python")
    purelib = subprocess.run(
        [py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    Path(purelib, "sphinxcontrib_jsmath-1.0.1-py3.7-nspkg.pth").write_text(NSPKG)
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    (repo / "test_calc.py").write_text(CALC_TEST)
    manifest = {"root": str(repo), "patched": ["calc.py"], "introspects": [], "files": {}}
    proc, channel = run_unittest(py, repo, manifest, "test_calc")
    assert "OK" in proc.stderr, proc.stderr
    assert not channel.critical, channel.critical


ABSTRACT_BASE = """import unittest


def abstract_base_test(cls):
    class AbstractBaseWrapper(cls):
        @classmethod
        def setUpClass(cls):
            if cls is AbstractBaseWrapper:
                raise unittest.SkipTest("abstract base")
            super(AbstractBaseWrapper, cls).setUpClass()

    return AbstractBaseWrapper
"""
MIXIN_TEST = """import unittest

import calc
from helper import abstract_base_test


@abstract_base_test
class CalcMixin(unittest.TestCase):
    def test_add(self):
        self.assertEqual(calc.add(2, 3), 5)


class CalcTest(CalcMixin):
    pass
"""


def test_tests_of_a_class_a_decorator_rebound_to_a_subclass_are_the_modules_own(tmp_path):
    """tornado's `abstract_base_test` binds a test module's mixin name to a subclass defined
    in a helper module; the tests' functions are then only reachable through its base:
    "code claiming test_calc.py:9 is not defined by that file's module" for each of them."""
    repo = tmp_path
    (repo / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    (repo / "helper.py").write_text(ABSTRACT_BASE)
    (repo / "test_calc.py").write_text(MIXIN_TEST)
    files = {n: hashlib.sha256((repo / n).read_bytes()).hexdigest() for n in ("test_calc.py", "helper.py")}
    manifest = {"root": str(repo), "patched": ["calc.py"], "introspects": [], "files": files}
    proc, channel = run_unittest(sys.executable, repo, manifest, "test_calc")
    assert "OK" in proc.stderr, proc.stderr
    assert not channel.critical, channel.critical


#: pytest-django 4.10's `_django_setup_unittest`, minus the Django checks (it runs for every class here)
PYTEST_DJANGO = """
import pytest


@pytest.fixture(autouse=True, scope="class")
def _django_setup_unittest(request):
    from _pytest.unittest import TestCaseFunction

    original_runtest = TestCaseFunction.runtest

    def non_debugging_runtest(self) -> None:
        self._testcase(result=self)

    try:
        TestCaseFunction.runtest = non_debugging_runtest
        yield
    finally:
        TestCaseFunction.runtest = original_runtest
"""


#: the same fixture as pytest before 8.4 keeps it: the module holds a wrapper whose
#: `__pytest_wrapped__` keeps the function (pytest-django 4.8 with pytest 8.2)
PYTEST_DJANGO_OLD_WRAPPER = (
    PYTEST_DJANGO.replace('@pytest.fixture(autouse=True, scope="class")\ndef _django_setup_unittest(', "def _setup(")
    + """

import functools


class _PytestWrapper:  # (pytest's own before 8.4: it keeps the wrapped function as `obj`)
    def __init__(self, obj):
        self.obj = obj


def _wrap(fn):
    @functools.wraps(fn)
    def _wrapper(request):
        yield from fn(request)

    _wrapper.__pytest_wrapped__ = _PytestWrapper(fn)
    return _wrapper


_django_setup_unittest = pytest.fixture(autouse=True, scope="class", name="_django_setup_unittest")(_wrap(_setup))
del _setup
"""
)


@pytest.fixture(scope="module", params=["host", pytest.param("sandbox", marks=pytest.mark.root)])
def django_like_executor(request, task, tmp_path_factory):
    root = tmp_path_factory.mktemp(f"dj-{request.param}")
    if request.param == "host":
        ex = host_venv_executor(task["repo"], root)
        add_pytest_script(ex.venv, str(ex.venv / "bin" / "python"))
        install_wrapping_plugin(site_packages(ex.venv), "pytest_django_like", "_pytest_django_like", PYTEST_DJANGO)
    else:
        ex = root_layers_executor(task["repo"], root)
        install_wrapping_plugin(
            site_packages(root / "layer-venv"), "pytest_django_like", "_pytest_django_like", PYTEST_DJANGO
        )
    return ex


def test_pytest_django_s_own_runtest_for_django_test_cases_is_accepted(task, django_like_executor) -> None:
    """pytest-django puts a `TestCaseFunction.runtest` of its own in place for each Django
    test class (it runs the case directly) and puts the original back: every
    pytest-django environment with a Django `TestCase` was `results-tampered`."""
    ev = grade(task, django_like_executor, "gold")
    assert ev.resolved, (ev.reason, ev.entry.get("suspicious"), ev.output[-2000:])
    assert not ev.entry["results_channel"].get("critical"), ev.entry["results_channel"]


@pytest.fixture(scope="module")
def django_old_wrapper_executor(task, tmp_path_factory):
    ex = host_venv_executor(task["repo"], tmp_path_factory.mktemp("dj-old"))
    add_pytest_script(ex.venv, str(ex.venv / "bin" / "python"))
    install_wrapping_plugin(
        site_packages(ex.venv), "pytest_django_like", "_pytest_django_like", PYTEST_DJANGO_OLD_WRAPPER
    )
    return ex


def test_pytest_django_s_runtest_nested_in_an_old_pytest_fixture_wrapper_is_accepted(
    task, django_old_wrapper_executor
) -> None:
    """Before pytest 8.4 a fixture's module holds pytest's wrapper, not the function: the
    runtest nested in it was not found in its module (drf-nested-routers, pytest-django
    4.8 with pytest 8.2: every task `fixed-broken`)."""
    ev = grade(task, django_old_wrapper_executor, "gold")
    assert ev.resolved, (ev.reason, ev.entry.get("suspicious"), ev.output[-2000:])


CALC_DECORATOR = (
    CALC
    + '''

def frozen(fn):
    """Run `fn` with the library's state set (as freezegun's freeze_time does)."""
    import functools

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs)

    return wrapper
'''
)
TEST_DECORATED = (
    "import calc\n\n\n@calc.frozen\ndef test_add():\n    assert calc.add(2, 3) == 5\n\n\n"
    "@calc.frozen\ndef test_sub():\n    assert calc.sub(5, 3) == 2\n"
)

task_deco, deco_host, deco_sandbox, deco_executor = honest_task("deco", CALC_DECORATOR, TEST_DECORATED, 41)


@pytest.mark.xfail(
    strict=True,
    reason="open: a wrapper of the patched file around a test decides its outcome (freezegun's @freeze_time); "
    "docs/grading.md, 'Again with the checks of the eighteenth and nineteenth sessions'",
)
@pytest.mark.parametrize("mode", MODES)
def test_gold_patch_of_a_library_whose_decorator_wraps_tests_is_resolved(task_deco, deco_executor, mode):
    _assert_gold_resolved(task_deco, deco_executor, mode)


#: a library that compiles a snippet under its own file name (for its tracebacks), in a
#: file whose graded copy looks into nothing (the compile rule judges it)
CALC_OWN_SNIPPET = (
    CALC
    + """

def twice(x):
    namespace = {}
    exec(compile("def _twice(x):\\n    return 2 * x\\n", __file__, "exec"), namespace)
    return namespace["_twice"](x)
"""
)
TEST_SNIPPET = (
    "import calc\n\n\ndef test_add():\n    assert calc.add(2, 3) == 5\n\n\n"
    "def test_sub():\n    assert calc.sub(5, 3) == 2 and calc.twice(4) == 8\n"
)

task_snippet, snippet_host, snippet_sandbox, snippet_executor = honest_task(
    "snippet", CALC_OWN_SNIPPET, TEST_SNIPPET, 43
)


@pytest.mark.parametrize("mode", MODES)
def test_gold_patch_of_a_library_compiling_under_its_own_name_is_resolved(task_snippet, snippet_executor, mode):
    _assert_gold_resolved(task_snippet, snippet_executor, mode)


#: a library that works with git at the graded state (its version from `git describe`, as
#: setuptools_scm-like helpers do) in the file the gold patch fixes: the git rule leaves it be
CALC_RUNS_GIT = (
    CALC
    + """

def revision():
    import subprocess

    proc = subprocess.run(["git", "--version"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    return proc.returncode
"""
)
TEST_RUNS_GIT = (
    "import calc\n\n\ndef test_add():\n    assert calc.add(2, 3) == 5\n\n\n"
    "def test_sub():\n    assert calc.sub(5, 3) == 2 and calc.revision() in (0, 1, 127)\n"
)

task_git, git_host, git_sandbox, git_executor = honest_task("git", CALC_RUNS_GIT, TEST_RUNS_GIT, 45)


@pytest.mark.parametrize("mode", MODES)
def test_gold_patch_of_a_library_that_runs_git_itself_is_resolved(task_git, git_executor, mode):
    _assert_gold_resolved(task_git, git_executor, mode)
