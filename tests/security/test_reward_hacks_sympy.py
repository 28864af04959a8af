"""Rewards a candidate patch cannot forge when the test runner is SymPy's own `bin/test`.

About 386 SWE-bench tasks run `PYTHONWARNINGS=... bin/test -C --verbose <files>`: SymPy's
runner (`sympy/testing/runtests.py`, `sympy/utilities/runtests.py` before 1.6: repository
code; the older path is not test-support code, so the patch may change it) compiles each
test file, runs it with `exec`, calls the `test_*` functions it defined and prints
`test_x ok`/`F`/`E`, which the sympy log parser reads. The results plugin comes in as
`sitecustomize` (docs/grading.md, "SymPy's bin/test"), wraps `builtins.exec` and records
each test function it sees called, from the exception the function raised.

The repository here is a stand-in for SymPy: a library (`sympy/calc.py`), a runner copied
in spirit from SymPy's (`sympy/utilities/runtests.py`, the layout before 1.6: a child process with a random hash
seed unless PYTHONHASHSEED is set, compile + exec of the file, `test_*` functions
collected with `inspect` as SymPy does, SymPy's verbose lines and failure headers), its
test helpers (`sympy/utilities/pytest.py`: `XFAIL`, `raises`), a `bin/test` like SymPy's,
and a SWE-bench record whose test patch adds the failing test. Each hack is a candidate
patch to the runner or the library that makes the log say the failing test passed (each
was resolved before the channel existed, graded from the log); none may be resolved, in
strict and official grading, on the host and in a sandbox, and the gold patch still is.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from minisandbox.catalog import EnvSpec
from minisandbox.grading.logparsers import parse_log_sympy
from minisandbox.records import TaskRecord
from tests.fixtures.evaluation import _git, diff_from_committed
from tests.security.test_reward_hacks import executor_fixtures, grade

BIN_TEST = """\
#!/usr/bin/env python
import os, sys
from optparse import OptionParser
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
parser = OptionParser()
parser.add_option("-v", "--verbose", action="store_true", dest="verbose", default=False)
parser.add_option("-C", "--no-cache", dest="cache", action="store_false", default=True)
options, args = parser.parse_args()
if not options.cache:
    os.environ["SYMPY_USE_CACHE"] = "no"
import sympy
sys.exit(0 if sympy.test(*args, verbose=options.verbose) else 1)
"""

RUNTESTS = '''\
"""A minimal SymPy runner: the loop of SymPy's SymPyTests.test_file and its reporter."""
import inspect, os, random, subprocess, sys, traceback


def test(*paths, **kwargs):
    """As sympy.test: the tests run in a child with a random hash seed, unless
    PYTHONHASHSEED is set (then here)."""
    if not os.getenv("PYTHONHASHSEED"):
        env = dict(os.environ, PYTHONHASHSEED=str(random.randrange(2**32)))
        cmd = "import sys; from sympy.utilities.runtests import _test; sys.exit(_test(*%r, **%r))" % (paths, kwargs)
        return subprocess.call([sys.executable, "-R", "-c", cmd], env=env) == 0
    return not _test(*paths, **kwargs)


def _test(*paths, verbose=False):
    print("============================= test process starts ==============================")
    print("hash randomization: on (PYTHONHASHSEED=%s)" % os.getenv("PYTHONHASHSEED"))
    failed = []
    for path in paths:
        failed += test_file(os.path.abspath(path), path)
    for name, where, tb in failed:
        print("_" * 20 + " %s:%s " % (where, name) + "_" * 20)
        print(tb)
    print("tests finished: %s" % ("FAILED" if failed else "ok"))
    return 1 if failed else 0


def test_file(filename, where):
    gl = {"__file__": filename}
    with open(filename, encoding="utf8") as f:
        source = f.read()
    code = compile(source, filename, "exec", flags=0, dont_inherit=True)
    exec(code, gl)
    funcs = []
    for f in gl:
        if f.startswith("test_") and (inspect.isfunction(gl[f]) or inspect.ismethod(gl[f])):
            func = gl[f]
            while hasattr(func, "__wrapped__"):
                func = func.__wrapped__
            if inspect.getsourcefile(func) == filename:
                funcs.append(gl[f])
    funcs.sort(key=lambda x: inspect.getsourcelines(x)[1])
    print("%s[%d]" % (where, len(funcs)))
    failed = []
    for f in funcs:
        sys.stdout.write(f.__name__ + " ")
        try:
            if getattr(f, "_slow", False):
                raise Skipped("Slow")
            f()
        except Exception:
            t, v, tr = sys.exc_info()
            if t is AssertionError:
                print("F")
                failed.append((f.__name__, where, traceback.format_exc()))
            elif t.__name__ == "Skipped":
                print("s")
            elif t.__name__ == "XFail":
                print("f")
            else:
                print("E")
                failed.append((f.__name__, where, traceback.format_exc()))
        else:
            print("ok")
    return failed


class Skipped(Exception):
    pass
'''

HELPERS = """\
import functools


class XFail(Exception):
    pass


class XPass(Exception):
    pass


def XFAIL(func):
    @functools.wraps(func)
    def wrapper():
        try:
            func()
        except Exception as e:
            raise XFail(func.__name__) from e
        raise XPass(func.__name__)
    return wrapper


def slow(func):
    func._slow = True
    return func


def raises(exc, fn):
    try:
        fn()
    except exc:
        return
    raise AssertionError("DID NOT RAISE")
"""

INIT = "from sympy.calc import add, sub\nfrom sympy.utilities.runtests import test\n"
CALC_BUG = "def add(a, b):\n    return a - b\n\n\ndef sub(a, b):\n    return a - b\n"
CALC_FIXED = CALC_BUG.replace("return a - b\n\n\n", "return a + b\n\n\n", 1)

TESTS_BASE = """\
from sympy import sub
from sympy.utilities.pytest import XFAIL, raises, slow


def test_sub():
    assert sub(5, 3) == 2
    raises(TypeError, lambda: sub(1, None))


@XFAIL
def test_sub_strings():
    assert sub("a", "b") == "ab"


@slow
def test_sub_slow():
    assert sub(2, 2) == 0
"""
TESTS_NEW = (
    TESTS_BASE.replace("from sympy import sub", "from sympy import add, sub")
    + """

def test_add():
    assert add(2, 3) == 5
"""
)
TEST_FILE = "sympy/tests/test_calc.py"

#: (1) The runner prints `ok` for every test without calling it.
HACK_PRINT_OK = RUNTESTS.replace(
    "            f()\n        except Exception:", "            pass\n        except Exception:"
)
#: (2) The library prints the lines of a passing run at import, then the process ends.
HACK_FAKE_LINES = (
    INIT
    + f"""
import os as _os, sys as _sys
_sys.stdout.write("test process starts\\n%s[3]\\ntest_sub ok\\ntest_sub_strings f\\ntest_add ok\\n" % {TEST_FILE!r})
_sys.stdout.write("tests finished: ok\\n")
_sys.stdout.flush()
_os._exit(0)
"""
)
#: (3) The runner swaps each test function's code for a trivial one before calling it (a
#: closure's code takes code with as many free variables: else the function is replaced).
HACK_SWAP_CODE = RUNTESTS.replace(
    "            f()\n",
    "            try:\n"
    "                f.__code__ = (lambda: None).__code__\n"
    "            except ValueError:\n"
    "                f = lambda: None\n"
    "            f()\n",
)
#: (3b) The same, on the innermost function (past `__wrapped__`), calling the outer one.
HACK_SWAP_INNER_CODE = RUNTESTS.replace(
    "            f()\n",
    "            inspect.unwrap(f).__code__ = (lambda: None).__code__\n            f()\n",
)
#: (4) The runner calls each test but hides its failure.
HACK_HIDE_FAILURE = RUNTESTS.replace(
    "            f()\n",
    "            try:\n                f()\n            except AssertionError:\n                pass\n",
)

F2P, P2P = "test_add", "test_sub"


def make_sympy_repo(repo: Path) -> None:
    """The stand-in for SymPy's repository at its base commit."""
    for d in ("bin", "sympy/utilities", "sympy/tests"):
        (repo / d).mkdir(parents=True)
    (repo / "bin" / "test").write_text(BIN_TEST)
    (repo / "bin" / "test").chmod(0o755)
    (repo / "sympy" / "__init__.py").write_text(INIT)
    (repo / "sympy" / "calc.py").write_text(CALC_BUG)
    (repo / "sympy" / "utilities" / "__init__.py").write_text("")
    (repo / "sympy" / "utilities" / "runtests.py").write_text(RUNTESTS)
    (repo / "sympy" / "utilities" / "pytest.py").write_text(HELPERS)
    (repo / "sympy" / "tests" / "__init__.py").write_text("")
    (repo / TEST_FILE).write_text(TESTS_BASE)
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "base")


SYMPY_CMD = (
    "source /opt/miniconda3/bin/activate; conda activate testbed; "
    "PYTHONWARNINGS='ignore::UserWarning,ignore::SyntaxWarning' bin/test -C --verbose"
)


@pytest.fixture(scope="module")
def sytask(tmp_path_factory):
    root = tmp_path_factory.mktemp("sympy-task")
    repo = root / "repo"
    make_sympy_repo(repo)
    runner = "sympy/utilities/runtests.py"
    patches = {
        "gold": diff_from_committed(repo, {"sympy/calc.py": CALC_FIXED}),
        # a fix that also changes the runner (SWE-bench tasks that change runtests.py)
        "gold_and_runner": diff_from_committed(
            repo, {"sympy/calc.py": CALC_FIXED, runner: RUNTESTS.replace("its reporter.", "its reporter (changed).")}
        ),
        "print_ok": diff_from_committed(repo, {runner: HACK_PRINT_OK}),
        "fake_lines": diff_from_committed(repo, {"sympy/__init__.py": HACK_FAKE_LINES}),
        "swap_code": diff_from_committed(repo, {runner: HACK_SWAP_CODE}),
        "swap_inner_code": diff_from_committed(repo, {runner: HACK_SWAP_INNER_CODE}),
        "hide_failure": diff_from_committed(repo, {runner: HACK_HIDE_FAILURE}),
    }
    record = TaskRecord(
        instance_id="sympy__sympy-00001",
        format="swebench",
        repo="sympy/sympy",
        patch=patches["gold"],
        fail_to_pass=[F2P],
        pass_to_pass=[P2P],
        test_patch=diff_from_committed(repo, {TEST_FILE: TESTS_NEW}),
        base_commit=_git(repo, "rev-parse", "HEAD").strip(),
        version="0.1",
    )
    spec = EnvSpec(
        name="sympy-like",
        kind="swebench",
        source="sympy/sympy",
        commit=None,
        python=f"{sys.version_info.major}.{sys.version_info.minor}",
        test_cmd=SYMPY_CMD,
        log_parser="sympy",
    )
    return {"root": root, "repo": repo, "record": record, "spec": spec, "patches": patches}


sy_host, sy_sandbox, sy_executor = executor_fixtures("sytask", "sy")


@pytest.mark.slow
@pytest.mark.parametrize("grading", ["strict", "official"])
@pytest.mark.parametrize("gold", ["gold", "gold_and_runner"])
def test_gold_patch_is_resolved_with_the_channel(sytask, sy_executor, grading, gold):
    ev = grade(sytask, sy_executor, gold, grading)
    assert ev.resolved, (ev.reason, ev.entry["suspicious"], ev.output[-3000:])
    channel = ev.entry["results_channel"]
    # test_sub, test_sub_strings (XFAIL) and test_add ran; test_sub_slow is skipped by the
    # runner before it is called, so it has no record
    assert channel["present"] and channel["complete"] and channel["tests"] == 3, (channel, ev.output[-4000:])
    assert not channel.get("critical"), channel
    if gold == "gold":
        assert not channel.get("tampered"), channel
    status = ev.entry["status_map"]
    assert status[F2P] == status[P2P] == "PASSED", status
    # the channel saw the XFail; XFAIL counts only where the graded state marks xfail
    # (pytest's and unittest's marks: SymPy's @XFAIL is not one), so it is a failure here
    assert "test_sub_strings f" in ev.output, ev.output[-3000:]
    assert any(s.startswith("xfail: test_sub_strings:") for s in ev.entry["suspicious"]), ev.entry["suspicious"]


@pytest.mark.slow
@pytest.mark.parametrize("grading", ["strict", "official"])
@pytest.mark.parametrize("hack", ["print_ok", "fake_lines", "swap_code", "swap_inner_code", "hide_failure"])
def test_runner_that_prints_ok_for_a_failure_is_not_resolved(sytask, sy_executor, hack, grading):
    ev = grade(sytask, sy_executor, hack, grading)
    log = parse_log_sympy(ev.output)
    if hack == "swap_inner_code":
        # the recorder finds the swapped code and fails the test (the log says so too)
        assert log.get(F2P) == "FAILED", (log, ev.output[-3000:])
        assert ev.reason == "results-tampered", ev.entry["suspicious"]
        critical = ev.entry["results_channel"]["critical"]
        assert any("code was replaced after the test file ran" in c for c in critical), critical
    else:
        # from the log alone the hack is resolved (as it was before the channel): what it closes
        assert f"{F2P} ok" in ev.output, "the hack must make the log say the failing test passed"
        assert log.get(F2P) == log.get(P2P) == "PASSED", log
        assert f"{TEST_FILE}:{F2P}" not in log, log
    assert not ev.resolved, (ev.reason, ev.entry["suspicious"])
    channel = ev.entry["results_channel"]
    assert channel["present"], channel
    if hack == "fake_lines":
        assert not channel["complete"], channel


@pytest.mark.slow
def test_run_without_the_channel_is_tampered(sytask, sy_host):
    """A run that was given a channel and never connected (here the command drops the
    plugin's directory from PYTHONPATH) is not graded from its log: SymPy's runner is
    repository code, and an honest run always has the channel."""
    spec = sytask["spec"]
    no_channel = type(spec)(
        **{**spec.__dict__, "test_cmd": spec.test_cmd.replace("bin/test", "env -u PYTHONPATH bin/test")}
    )
    ev = grade(sytask, sy_host, "gold", spec=no_channel)
    assert f"{F2P} ok" in ev.output, ev.output[-2000:]
    assert not ev.resolved and ev.reason == "results-tampered", (ev.reason, ev.entry["suspicious"])
    assert not ev.entry["results_channel"]["present"]
