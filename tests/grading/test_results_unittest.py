"""The results channel for unittest runners (minisandbox.grading.results, resultplugin's
unittest mode): loaded at interpreter start-up by a `-W` category, ids as the verbose
runner prints them, the cross-check with Django's log parser, and what the test process
and its children see of the plugin afterwards."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from minisandbox.grading.logparsers import parse_log_django
from minisandbox.grading.results import (
    RUNNER_VAR,
    SOCKET_VAR,
    UNITTEST_WARNOPTION,
    Channel,
    ResultsChannel,
    channel_status_map,
    merge,
    parse_channel,
    plugin_dir,
)

MODULE = '''\
import doctest, functools, os, platform, subprocess, sys, unittest


def logged(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs)

    return wrapper


def square(x):
    """A doctest (doctest.DocTestCase's __str__ is object.__str__, a C slot).

    >>> square(3)
    9
    """
    return x * x


def check_square():
    assert square(2) == 4


def load_tests(loader, tests, ignore):
    tests.addTests(doctest.DocTestSuite(sys.modules[__name__]))
    tests.addTest(unittest.FunctionTestCase(check_square))  # a test function of the repository's
    return tests


class T(unittest.TestCase):
    def test_ok(self):
        self.assertEqual(1, 1)

    def test_fail(self):
        """A failing test with a docstring."""
        self.assertEqual(1, 2)

    def test_error(self):
        raise KeyError("x")

    @unittest.skip("not here")
    def test_skip(self):
        pass

    @unittest.expectedFailure
    def test_xfail(self):
        self.assertTrue(False)

    def test_subtests(self):
        for i in range(2):
            with self.subTest(i=i):
                self.assertEqual(i, 0)

    def test_stdlib_class_made_after_start_up(self):
        """platform.uname_result, made when platform is first imported (after the plugin's
        start-up) and holding a cached property, is the standard library's."""
        self.assertEqual(len(platform.uname()), 5)

    @logged
    def test_wrapped(self):
        """A decorated test's id has its own docstring line (through `__wrapped__`)."""

    def test_runs_a_test_of_its_own(self):
        """A test of a test runner (Django's test_runner tests run suites inside tests):
        the inner run is the outer test's business, recorded as nothing."""
        result = unittest.TestResult()
        unittest.FunctionTestCase(lambda: None, description="inner").run(result)
        self.assertTrue(result.wasSuccessful() and result.testsRun == 1)

    def test_environment(self):
        """What the test process and a child of it see."""
        child = subprocess.run([sys.executable, "-c", "import sys; print(sys.warnoptions)"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
        with open(os.environ["SEEN"], "w") as f:
            f.write(repr((sys.warnoptions, os.environ.get("PYTHONWARNINGS"), os.environ.get("PYTHONPATH"),
                          "MINISANDBOX_RESULTS_SOCK" in os.environ, child.stdout.strip(), child.stderr)))
'''


def unittest_env(channel: ResultsChannel) -> dict[str, str]:
    """The environment of a unittest-mode run with the results plugin, as the eval script
    gives it (PYTHONPATH and PYTHONWARNINGS unset before)."""
    return {
        "PATH": os.environ["PATH"],
        "PYTHONPATH": str(plugin_dir()),
        "PYTHONWARNINGS": UNITTEST_WARNOPTION,
        RUNNER_VAR: "unittest",
        SOCKET_VAR: channel.socket_path(),
        "MINISANDBOX_HAD_PYTHONPATH": "",
        "MINISANDBOX_HAD_PYTHONWARNINGS": "",
    }


def _run(tmp_path: Path, python: str) -> tuple[str, Channel, tuple]:
    (tmp_path / "test_mod.py").write_text(MODULE)
    seen = tmp_path / "seen"
    with ResultsChannel({"root": str(tmp_path)}) as ch:
        env = {**unittest_env(ch), "SEEN": str(seen)}
        proc = subprocess.run(
            [python, "-m", "unittest", "-v", "test_mod"], cwd=tmp_path, env=env, capture_output=True, text=True
        )
        channel = parse_channel(ch.collect(), ch.nonce)
    return proc.stderr, channel, eval(seen.read_text())  # noqa: S307  (our own repr)


def test_channel_has_what_unittest_reported_with_the_logs_ids(tmp_path):
    log, channel, _ = _run(tmp_path, sys.executable)
    assert channel.present and channel.complete and not channel.tampered, channel.summary()
    chan = channel_status_map(channel, "django")
    logged = parse_log_django(log)
    for test_id, status in logged.items():
        if "(i=1)" in test_id:  # unittest prints the failing subtest on a line of its own
            continue
        assert chan.get(test_id) == status, (test_id, status, chan)
    assert chan["A failing test with a docstring."] == "FAILED"
    assert chan["test_error (test_mod.T.test_error)"] == "ERROR"
    assert chan["test_xfail (test_mod.T.test_xfail)"] == "XFAIL"
    assert chan["test_subtests (test_mod.T.test_subtests)"] == "FAILED"
    assert chan["Doctest: test_mod.square"] == "PASSED"
    assert chan["unittest.case.FunctionTestCase (check_square)"] == "PASSED"
    assert chan["A test of a test runner (Django's test_runner tests run suites inside tests):"] == "PASSED"
    assert not any("inner" in test_id for test_id in channel.statuses), channel.statuses
    assert chan["A decorated test's id has its own docstring line (through `__wrapped__`)."] == "PASSED"
    assert channel.collected == 12


def test_the_process_and_its_children_do_not_keep_the_start_up_option(tmp_path):
    _, _, seen = _run(tmp_path, sys.executable)
    warnoptions, pythonwarnings, pythonpath, has_sock, child_options, child_err = seen
    assert warnoptions == [] and pythonwarnings is None and pythonpath is None and not has_sock, seen
    assert child_options == "[]" and "Invalid -W option" not in child_err, seen


@pytest.mark.parametrize("version", ["3.6", "3.8", "3.13"])
def test_old_and_new_interpreters_load_it_at_start_up(tmp_path, version):
    """The `-W` import happens before `site` on every CPython a spec may name."""
    pythons = sorted(Path.home().glob(f".pyenv/versions/{version}.*/bin/python{version}"))
    if not pythons:
        pytest.skip(f"no CPython {version} here")
    _, channel, _ = _run(tmp_path, str(pythons[-1]))
    assert channel.present and channel.complete and not channel.tampered, channel.summary()
    assert (
        channel.statuses.get("test_ok (test_mod.T)", channel.statuses.get("test_ok (test_mod.T.test_ok)")) == "PASSED"
    )


def test_merge_fails_what_the_channel_did_not_see_pass():
    channel = Channel(present=True, complete=True)
    channel.statuses = {"test_a (m.C.test_a)": "FAILED", "test_b (m.C.test_b)\nDoc of b.": "PASSED"}
    log = {"test_a (m.C.test_a)": "PASSED", "Doc of b.": "PASSED", "test_c (m.C.test_c)": "PASSED"}
    log["--version is equivalent to version"] = "PASSED"  # SWE-bench's id from printed text
    merged = merge(log, channel, "django")
    assert merged["test_a (m.C.test_a)"] == "FAILED"  # the log said ok, unittest said FAIL
    assert merged["Doc of b."] == "PASSED"  # docstring ids as the log parser makes them
    assert merged["test_c (m.C.test_c)"] == "FAILED"  # printed, never run
    assert merged["--version is equivalent to version"] == "PASSED"
    # a FAIL_TO_PASS test is never passed by a printed line alone: a patch can print it
    confirmed = merge(log, channel, "django", confirm={"--version is equivalent to version"})
    assert confirmed["--version is equivalent to version"] == "FAILED"


def test_the_plugin_directory_goes_with_the_process_that_made_it(tmp_path) -> None:
    """One directory per process (host runs), removed at its exit; a fork that exits first
    (a worker, a fork server) leaves it to its parent."""
    script = (
        "import os, sys\n"
        "from minisandbox.grading.results import plugin_dir\n"
        "d = plugin_dir()\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    sys.exit(0)\n"
        "os.waitpid(pid, 0)\n"
        "print(d, (d / 'sympy' / 'sitecustomize.py').is_file())\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True)
    made, there_after_the_fork = out.stdout.split()
    assert there_after_the_fork == "True"
    assert Path(made).name.startswith("minisandbox-results-")
    assert not Path(made).exists()


#: a test whose body swaps TestCase's `_baseAssertEqual` for `assertIsNot` and puts it back
#: from a `__del__` right after assertEqual returned (the failing comparison passes), and an
#: honest test that writes its class's attribute in the body and puts the same object back
#: in a cleanup (Django's `DatabaseAliasTests` does so with `databases`)
SWAPPED = """\
import unittest

_TC = unittest.TestCase
_ORIG = _TC.__dict__["_baseAssertEqual"]


class _Sum(int):
    def __del__(self):
        _TC._baseAssertEqual = _ORIG


def add(a, b):
    _TC._baseAssertEqual = _TC.assertIsNot
    return _Sum(a - b)


class T(unittest.TestCase):
    databases = frozenset({"default"})

    def test_swapped(self):
        self.assertEqual(add(2, 3), 5)

    def test_put_back_in_a_cleanup(self):
        self.addCleanup(setattr, self.__class__, "databases", self.databases)
        self.__class__.databases = {"other"}
        self.assertEqual(self.databases, {"other"})
"""


@pytest.mark.parametrize("version", ["3.6", "3.11"])
def test_a_class_attribute_put_back_within_the_body_is_critical(tmp_path, version):
    """`written_back`, on an interpreter with `_callTestMethod` (3.11) and on one without
    (3.6: the window is the part of `run` that runs the method): the swap put back within
    the body is critical, the honest write put back by a cleanup after the body is not."""
    pythons = sorted(Path.home().glob(f".pyenv/versions/{version}.*/bin/python{version}"))
    if not pythons:
        pytest.skip(f"no CPython {version} here")
    (tmp_path / "test_swapped.py").write_text(SWAPPED)
    with ResultsChannel({"root": str(tmp_path)}) as ch:
        proc = subprocess.run(
            [str(pythons[-1]), "-m", "unittest", "-v", "test_swapped"],
            cwd=tmp_path,
            env=unittest_env(ch),
            capture_output=True,
            text=True,
        )
        channel = parse_channel(ch.collect(), ch.nonce)
    assert "test_swapped" in proc.stderr and channel.present and channel.complete, (proc.stderr, channel.summary())
    found = [c for c in channel.critical if "was written while it ran and put back" in c]
    assert len(found) == 1 and found[0].startswith("test T.test_swapped: an attribute of class "), channel.critical
    assert "unittest.case.TestCase" in found[0]
