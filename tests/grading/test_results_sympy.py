"""The results channel for SymPy's runner (`bin/test`; resultplugin's sympy mode): loaded as
`sitecustomize`, the environment's own sitecustomize still run, `exec` kept as it was
for everything but a graded test file, ids rendered as the sympy log parser reads them,
and the findings for a runner that runs other code under a graded test file's name or a
test whose decorator comes from the patch."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from minisandbox.grading.logparsers import parse_log_sympy
from minisandbox.grading.results import (
    RUNNER_VAR,
    SOCKET_VAR,
    SYMPY_STARTUP,
    Channel,
    ResultsChannel,
    channel_status_map,
    merge,
    parse_channel,
    plugin_dir,
)
from tests.security.test_reward_hacks_sympy import RUNTESTS, TEST_FILE, TESTS_NEW, make_sympy_repo

ENV_SITECUSTOMIZE = """\
import os, sys
with open(os.environ["SEEN"], "w") as f:
    f.write(repr((os.environ.get("PYTHONPATH"), any("minisandbox-results" in p for p in sys.path),
                  os.environ.get("PYTHONHASHSEED"), "MINISANDBOX_RESULTS_SOCK" in os.environ)))
"""

EXEC_DEFAULTS = """\
exec("a = 1")
assert a == 1


def f():
    exec("b = 2")
    return locals()["b"]


assert f() == 2
ns = {}
exec("c = 3", ns)
assert ns["c"] == 3
exec(compile("d = 4", "<string>", "exec"), ns, ns)
assert ns["d"] == 4
print("exec ok")
"""


def _repo(tmp_path: Path, runner: str | None = None) -> Path:
    repo = tmp_path / "repo"
    make_sympy_repo(repo)
    (repo / TEST_FILE).write_text(TESTS_NEW)
    if runner is not None:
        (repo / "sympy" / "utilities" / "runtests.py").write_text(runner)
    return repo


def _run(
    repo: Path, python: str = sys.executable, patched: tuple[str, ...] = (), argv: list[str] | None = None
) -> tuple[str, Channel, tuple]:
    """Run `bin/test` (or `argv`) as the eval script does for a sympy spec."""
    site = repo.parent / "envsite"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(ENV_SITECUSTOMIZE)
    seen = repo.parent / "seen"
    digest = hashlib.sha256((repo / TEST_FILE).read_bytes()).hexdigest()
    with ResultsChannel({"root": str(repo), "files": {TEST_FILE: digest}, "patched": list(patched)}) as ch:
        env = {
            "PATH": f"{Path(python).parent}:{os.environ['PATH']}",
            "PYTHONPATH": f"{plugin_dir() / SYMPY_STARTUP}:{site}",
            "PYTHONWARNINGS": "ignore::UserWarning,ignore::SyntaxWarning",  # SWE-bench's command sets it
            "PYTHONHASHSEED": "7",
            RUNNER_VAR: "sympy",
            SOCKET_VAR: ch.socket_path(),
            "SEEN": str(seen),
            # as the eval script has it: the environment's own PYTHONPATH before ours
            "MINISANDBOX_HAD_PYTHONPATH": "1",
            "MINISANDBOX_OLD_PYTHONPATH": str(site),
        }
        cmd = argv or [python, "bin/test", "-C", "--verbose", TEST_FILE]
        proc = subprocess.run(cmd, cwd=repo, env=env, capture_output=True, text=True)
        channel = parse_channel(ch.collect(), ch.nonce)
    return proc.stdout + proc.stderr, channel, eval(seen.read_text())  # noqa: S307  (our own repr)


@pytest.mark.parametrize("version", ["3.9", "current"])
def test_channel_has_each_tests_status_with_the_logs_ids(tmp_path, version):
    """SWE-bench's SymPy specs run Python 3.9 (and later for newer releases)."""
    python = sys.executable
    if version != "current":
        pythons = sorted(Path.home().glob(f".pyenv/versions/{version}.*/bin/python{version}"))
        if not pythons:
            pytest.skip(f"no CPython {version} here")
        python = str(pythons[-1])
    log, channel, seen = _run(_repo(tmp_path), python)
    assert channel.present and channel.complete and not channel.tampered, (channel.summary(), log)
    logged = parse_log_sympy(log)
    chan = channel_status_map(channel, "sympy")
    assert logged == {
        "test_sub": "PASSED",
        "test_sub_strings": "XFAIL",
        "test_sub_slow": "SKIPPED",
        "test_add": "FAILED",
        f"{TEST_FILE}:test_add": "FAILED",
    }, log
    for test_id, status in logged.items():
        if test_id != "test_sub_slow":  # skipped by the runner before it is called: no record
            assert chan.get(test_id) == status, (test_id, status, chan)
    assert merge(logged, channel, "sympy")["test_sub_slow"] == "FAILED"
    assert channel.statuses == {
        f"{TEST_FILE}:test_sub": "PASSED",
        f"{TEST_FILE}:test_sub_strings": "XFAIL",
        f"{TEST_FILE}:test_add": "FAILED",
    }
    # the environment's sitecustomize ran, after the plugin put PYTHONPATH back
    pythonpath, ours_on_path, hash_seed, has_sock = seen
    assert pythonpath == str(tmp_path / "envsite") and not ours_on_path and not has_sock, seen
    assert hash_seed == "7", seen


def test_exec_keeps_its_default_namespaces(tmp_path):
    repo = _repo(tmp_path)
    (repo / "run_exec.py").write_text(EXEC_DEFAULTS)
    log, channel, _ = _run(repo, argv=[sys.executable, "run_exec.py"])
    assert "exec ok" in log, log
    assert channel.present and channel.complete and not channel.tampered, channel.summary()


def test_other_code_run_under_a_graded_test_files_name_is_critical(tmp_path):
    """A runner that compiles something else than the file's content under its name (here
    the failing assert dropped) gets no records for it and voids the run."""
    runner = RUNTESTS.replace(
        "    code = compile(source,",
        '    source = source.replace("assert add(2, 3) == 5", "pass")\n    code = compile(source,',
    )
    log, channel, _ = _run(_repo(tmp_path, runner))
    assert parse_log_sympy(log)["test_add"] == "PASSED", log
    assert any("is not compiled from its content" in c for c in channel.critical), channel.summary()
    assert f"{TEST_FILE}:test_add" not in channel.statuses, channel.statuses


def test_a_decorator_from_the_patch_is_critical(tmp_path):
    """SymPy's XFAIL decorator (sympy/utilities/pytest.py, as before 1.6) decides the
    outcome its wrapper reports: a patched one could pass a failing test."""
    _, channel, _ = _run(_repo(tmp_path), patched=("sympy/utilities/pytest.py",))
    assert any(
        "test_sub_strings: its decorator" in c and "changed by the candidate patch" in c for c in channel.critical
    ), channel.summary()


def test_a_name_of_the_test_module_rebound_by_the_runner_is_critical(tmp_path):
    """The runner holds the test module's namespace: one that swaps the function a test
    imports before calling the test (here a correct `add`) voids the run."""
    runner = RUNTESTS.replace(
        "    funcs = []\n    for f in gl:",
        '    gl["add"] = lambda a, b: a + b\n    funcs = []\n    for f in gl:',
    )
    log, channel, _ = _run(_repo(tmp_path, runner))
    assert parse_log_sympy(log)["test_add"] == "FAILED", log  # the recorder fails it
    assert any("names of its module rebound after the test file ran: add" in c for c in channel.critical), (
        channel.summary()
    )


HELPER_CLASS = """

class NonBasic:
    '''A test's own helper with a comparison nothing honest gives (as SymPy's
    core/tests/test_expr.py has): the test file's code, not the patch's.'''

    def __lt__(self, other):
        return True

    def __ge__(self, other):
        return True


def test_helper():
    assert NonBasic() < NonBasic()
"""


def test_a_test_files_own_helper_class_is_not_probed(tmp_path):
    """SymPy's runner runs the file in a dict without `__name__`, so its classes claim the
    module `builtins`; their code is the graded file's, which the recorder verified."""
    repo = _repo(tmp_path)
    (repo / TEST_FILE).write_text(TESTS_NEW + HELPER_CLASS)
    log, channel, _ = _run(repo)
    assert parse_log_sympy(log)["test_helper"] == "PASSED", log
    assert channel.present and channel.complete and not channel.tampered, channel.summary()


def test_a_test_calling_another_test_with_a_name_rebound_is_not_a_finding(tmp_path):
    """SymPy's test_Permutation_subclassing rebinds `Permutation` in its module, calls
    test_Permutation, and restores it: the inner call is the outer test's."""
    repo = _repo(tmp_path)
    outer = (
        "\n\ndef test_sub_again():\n"
        "    globals()['_sub'] = globals()['sub']\n"
        "    globals()['sub'] = lambda a, b: a - b\n"
        "    test_sub()\n"
        "    globals()['sub'] = globals()['_sub']\n"
    )
    (repo / TEST_FILE).write_text(TESTS_NEW + outer)
    log, channel, _ = _run(repo)
    assert parse_log_sympy(log)["test_sub_again"] == "PASSED", log
    assert channel.present and channel.complete and not channel.tampered, channel.summary()
    assert channel.statuses[f"{TEST_FILE}:test_sub_again"] == "PASSED", channel.statuses


LAZY_EQ = """

class Val:
    '''Honest equality that imports a module on first use (as SymPy's classes do).'''

    def __eq__(self, other):
        import sympy.lazy  # noqa: F401

        return isinstance(other, Val) and self.__dict__ == other.__dict__

    __hash__ = object.__hash__
"""


def test_a_lazy_import_in_a_probed_comparison_is_not_a_finding(tmp_path):
    """The comparison probe counted the plugin's own frame access (its check of the pyc
    the import looks for) against the class: every class of a patched sympy/sets/sets.py
    was critical on sympy 1.12."""
    repo = _repo(tmp_path)
    (repo / "sympy" / "calc.py").write_text((repo / "sympy" / "calc.py").read_text() + LAZY_EQ)
    (repo / "sympy" / "lazy.py").write_text("X = 1\n")
    (repo / TEST_FILE).write_text(
        TESTS_NEW + "\n\ndef test_val():\n    from sympy.calc import Val\n    assert Val() == Val()\n"
    )
    log, channel, _ = _run(repo, patched=("sympy/calc.py",))
    assert parse_log_sympy(log)["test_val"] == "PASSED", log
    assert channel.present and channel.complete, channel.summary()
    assert not any("inspects its caller" in t for t in channel.tampered), channel.summary()
