"""Attacks on the cached rewritten test modules (docs/grading.md, "Cached rewritten test
modules"): a candidate patch or code run during the test run tries to make pytest execute
a pyc that is not the build's rewrite of the graded bytes. Each attack targets the failing
test `test_b`; none may make it pass unnoticed. Real repository, pytest, eval script,
results plugin and channel (helpers in tests/grading/test_testpycs.py)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from minisandbox.grading.evalscript import EvalScript
from tests.grading.test_testpycs import LIB, TEST_B, Built, build, cached_code, git

B = "tests/test_b.py::test_b"


@pytest.fixture
def built(tmp_path: Path) -> Built:
    return build(tmp_path)


def patch_of(built: Built, files: dict[str, bytes]) -> str:
    """A candidate patch (git diff --binary) that writes `files`."""
    for name, data in files.items():
        (built.repo / name).parent.mkdir(parents=True, exist_ok=True)
        (built.repo / name).write_bytes(data)
    git(built.repo, "add", "-f", "-A")
    diff = git(built.repo, "diff", "--cached", "--binary")
    git(built.repo, "reset", "-q", "--hard")
    git(built.repo, "clean", "-qfdx")
    return diff


def forged_pyc(built: Built) -> bytes:
    """test_b's cached pyc with code in which its assert holds (valid header for its source)."""
    import marshal

    data = cached_code(built, "test_b")
    src = str(built.repo / "tests/test_b.py")
    return data[:16] + marshal.dumps(compile(TEST_B.replace("== 3", "== 2"), src, "exec"))


def pyc_name(built: Built, stem: str) -> str:
    return f"tests/__pycache__/{stem}" + (built.cache / "key").read_text().splitlines()[3]


# library code the candidate patch installs: it runs when test_a imports pkg, before test_b
PLANT = """
import importlib.util, marshal, os
_here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_src = os.path.join(_here, "tests", "test_b.py")
_pyc = os.path.join(_here, {pyc!r})
with open(_src, "rb") as f:
    _data = f.read()
_code = compile(_data.replace(b"== 3", b"== 2"), _src, "exec")
with open(_pyc, "rb") as f:
    _head = f.read(16)
with open(_pyc + ".new", "wb") as f:
    f.write(_head + marshal.dumps(_code))
os.replace(_pyc + ".new", _pyc)
"""

# ... or that leaves the pyc alone and swaps what pytest's reader returns after it read it
SWAP = """
import marshal, os
import _pytest.assertion.rewrite as _rw
_real = _rw._read_pyc
def _read_pyc(source, pyc, trace=lambda x: None):
    co = _real(source, pyc, trace)
    if co is not None and str(source).endswith("test_b.py"):
        data = open(str(source), "rb").read().replace(b"== 3", b"== 2")
        co = compile(data, str(source), "exec")
    return co
_rw._read_pyc = _read_pyc
"""

# ... or that rewrites test_b.py itself (same size) and gives it back the mtime the
# cached pyc records, so that a timestamp check would take the old pyc for new bytes
RESTAMP = """
import os
_here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_src = os.path.join(_here, "tests", "test_b.py")
_st = os.stat(_src)
with open(_src, "rb") as f:
    _data = f.read()
with open(_src, "wb") as f:
    f.write(_data.replace(b"== 3", b"== 2"))
os.utime(_src, ns=(_st.st_atime_ns, _st.st_mtime_ns))
"""


def test_a_forged_pyc_in_the_patch_is_reverted(built: Built) -> None:
    """The patch ships a pyc for test_b (a `GIT binary patch` hunk): the eval script
    deletes it (protected path) and the only pyc left is the build's."""
    patch = patch_of(built, {pyc_name(built, "test_b"): forged_pyc(built)})
    assert "GIT binary patch" in patch
    out, statuses, _ = built.run(built.script(patch))
    assert f"reverted protected path {pyc_name(built, 'test_b')}" in out
    assert statuses[B] == "FAILED"
    assert built.pycs()[pyc_name(built, "test_b")] == cached_code(built, "test_b")


def test_a_conftest_changed_to_the_same_size_is_reverted_and_not_cached(built: Built) -> None:
    """A conftest the patch adds next to the tests is reverted before any pyc goes in;
    a conftest's pyc is only ever the build's."""
    patch = patch_of(built, {"tests/conftest.py": b"import pytest\n"})
    out, statuses, _ = built.run(built.script(patch))
    assert "reverted protected path tests/conftest.py" in out
    assert statuses[B] == "FAILED"
    assert not (built.repo / "tests/conftest.py").exists()


@pytest.mark.parametrize("checks", [True, False])
def test_a_pyc_planted_during_the_run_is_refused(built: Built, checks: bool) -> None:
    """Library code replaces test_b's cached pyc before pytest imports test_b. With the
    results plugin's checks the pyc is refused (test_b is rewritten from its source and
    fails); without them (the same run with the checks off) the attack works, so the
    check is what stops it."""
    patch = patch_of(built, {"pkg/__init__.py": (LIB + PLANT.format(pyc=pyc_name(built, "test_b"))).encode()})
    script = built.script(patch)
    if not checks:
        script.graded_manifest = {"checks": False}
    _, statuses, _ = built.run(script)
    assert statuses[B] == ("FAILED" if checks else "PASSED")


def test_a_pyc_swapped_after_it_was_checked_is_critical(built: Built) -> None:
    """Code that makes pytest run other code than the pyc it read for test_b (what a
    swap between the plugin's read and pytest's would do) is caught when the module's
    code is executed: critical, and test_b does not pass."""
    patch = patch_of(built, {"pkg/__init__.py": (LIB + SWAP).encode()})
    _, statuses, tampered = built.run(built.script(patch))
    assert statuses.get(B) != "PASSED"
    assert any("tests/test_b.py is not the pyc read for it" in t for t in tampered), tampered


def test_a_test_file_rewritten_with_its_old_mtime_is_critical(built: Built) -> None:
    """Library code changes test_b.py (same size) and restores its mtime before pytest
    imports it: whatever pytest then runs, the test function's file was written during
    the run (critical)."""
    patch = patch_of(built, {"pkg/__init__.py": (LIB + RESTAMP).encode()})
    _, statuses, tampered = built.run(built.script(patch))
    assert any("tests/test_b.py was written during the test run" in t for t in tampered), (statuses, tampered)


#: library code that reads test_b's rewritten pyc from the build's cache (in an environment
#: `<venv>/.minisandbox/test-pycs`, which the test process can read) and takes the expected
#: value from its constants: `inc` then answers it
READ_CACHE = """
import os as _os

_HIT = []
for _d, _, _fs in _os.walk({cache!r}):
    for _f in _fs:
        if _f.startswith("test_b.") and _f.endswith(".pyc"):
            with open(_os.path.join(_d, _f), "rb") as _fh:
                _HIT.append(b"\\xe9\\x03\\x00\\x00\\x00" in _fh.read() or b"i\\x03\\x00\\x00\\x00" in _fh.read())


def inc(x):
    return x + (2 if any(_HIT) else 1)
"""


def test_a_read_of_the_builds_cache_is_critical(built: Built) -> None:
    """The eleventh probe: library code read test_b's rewritten module from the build's
    cache of them (outside the repository, in the venv's layer) and answered the expected
    value: resolved with no finding. A pyc named as a graded file is judged wherever it
    lies now."""
    import hashlib

    graded = {
        p: hashlib.sha256((built.repo / p).read_bytes()).hexdigest() for p in ("tests/test_a.py", "tests/test_b.py")
    }
    patch = patch_of(built, {"pkg/__init__.py": (LIB + READ_CACHE.format(cache=str(built.cache))).encode()})
    script = built.script(patch)
    script.graded_manifest = {"files": graded, "patched": ["pkg/__init__.py"]}
    _, statuses, tampered = built.run(script)
    assert statuses[B] == "PASSED"  # the oracle worked: only the finding stops it
    assert any("reads the graded test file tests/test_b.py" in t for t in tampered), tampered


def test_the_cache_step_never_writes_through_a_symlinked_pycache(built: Built, tmp_path: Path) -> None:
    """A `__pycache__` that is a symlink (a patch cannot add one under tests/: protected;
    elsewhere it is a forbidden finding) gets nothing written through it."""
    outside = tmp_path / "outside"
    outside.mkdir()
    script: EvalScript = built.script()
    (built.repo / "tests/__pycache__").symlink_to(outside)
    built.prep(script)
    assert list(outside.iterdir()) == []
    subprocess.run(["rm", "-f", str(built.repo / "tests/__pycache__")], check=True)
