"""Regenerate the recorded evaluation logs under tests/grading/data/logs/ (run by hand:
`.venv/bin/python tests/grading/data/make_logs.py`; the logs are committed, the tests only read them).

Each case is a small repository written to a temp dir whose tests really run under the
runner its harness uses: pytest with SWE-bench's options (`-rA`, SWE-bench's pytest
command), the Django test runner (real Django, `--verbosity 2`, the form SWE-bench's
django parser reads) and SymPy's own runner (`sympy.testing.runtests`, what `bin/test`
prints). The output is wrapped in the markers minisandbox's eval script prints (with a
nonce) and the exit-code line, so the same log feeds both graders
(tests/grading/test_official_differential.py). `cases.json` holds the task lists.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).parent
NONCE = "5eb6a8d0c0ffee11"
PYTEST = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--color=no", "--tb=no", "-rA"]

CALC = "def add(a, b):\n    return a + b\n\n\ndef div(a, b):\n    return a / b\n"
PYTEST_REPO = {
    "calc.py": CALC,
    "conftest.py": "",
    "tests/test_calc.py": """import pytest
from calc import add, div


def test_add():
    assert add(1, 2) == 3


def test_div_zero():
    assert div(1, 0) == 0


@pytest.mark.parametrize("a,b", [(1, 2), (3, 4)], ids=["one two", "three four"])
def test_spaced(a, b):
    assert add(a, b) == a + b


@pytest.mark.parametrize("text", ["x[1]", "a - b"])
def test_brackets(text):
    assert text


@pytest.mark.skip(reason="not on this platform")
def test_skipped():
    pass


@pytest.mark.xfail(reason="known")
def test_xfail():
    assert False


@pytest.mark.xfail(reason="known")
def test_xpass():
    assert True


@pytest.fixture
def broken_teardown():
    yield 1
    raise RuntimeError("teardown")


def test_teardown_error(broken_teardown):
    assert broken_teardown == 1


def test_fails_with_message():
    assert add(2, 2) == 5, "two plus two - wrong"
""",
}
OPTIONS_REPO = {
    "conftest.py": "",
    "tests/test_paths.py": """import os
import pytest

FILES = [os.path.abspath(__file__), os.path.join(os.path.dirname(os.path.abspath(__file__)), "data.txt")]


@pytest.mark.parametrize("path", FILES)
def test_path(path):
    assert path.endswith(".py")


def test_plain():
    assert True
""",
}
COLLECT_REPO = {
    "calc.py": "def add(a, b:\n    return a + b\n",
    "conftest.py": "",
    "tests/test_calc.py": "from calc import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n",
}
DJANGO_SETTINGS = """SECRET_KEY = "x"
INSTALLED_APPS = ["django.contrib.contenttypes", "django.contrib.auth", "shop"]
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}}
USE_TZ = True
"""
DJANGO_REPO = {
    "settings.py": DJANGO_SETTINGS,
    "shop/__init__.py": "",
    "shop/models.py": "",
    "shop/price.py": "def total(items):\n    return sum(items) * 2\n",
    "shop/tests.py": """import unittest

from django.test import SimpleTestCase

from shop.price import total


class PriceTests(SimpleTestCase):
    def test_empty(self):
        self.assertEqual(total([]), 0)

    def test_sum(self):
        self.assertEqual(total([1, 2]), 3)

    def test_error(self):
        total(None)

    @unittest.skip("needs a printer")
    def test_skipped(self):
        pass

    @unittest.expectedFailure
    def test_expected(self):
        self.assertEqual(1, 2)
""",
}
RUN_DJANGO = """import os, sys
os.environ["DJANGO_SETTINGS_MODULE"] = "settings"
sys.path.insert(0, os.getcwd())
import django
from django.conf import settings
from django.test.utils import get_runner
django.setup()
runner = get_runner(settings)(verbosity=2)
sys.exit(bool(runner.run_tests(["shop"])))
"""
SYMPY_TESTS = """from sympy import Rational, symbols

x = symbols("x")


def test_rational():
    assert Rational(1, 2) + Rational(1, 2) == 1


def test_expand():
    assert ((x + 1) ** 2).expand() == x**2 + 2 * x + 2


def test_raises():
    raise ZeroDivisionError("bug")
"""
RUN_SYMPY = """import sys
from sympy.testing.runtests import PyTestReporter, SymPyTests
import os
reporter = PyTestReporter(verbose=True)
reporter.root_dir(os.getcwd())
tests = SymPyTests(reporter)
tests._root_dir = os.getcwd()
tests._testfiles.append(os.path.join(os.getcwd(), "sympy/demo/tests/test_demo.py"))
sys.exit(0 if tests.test() else 1)
"""


def write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


def run(cmd: list[str], cwd: Path) -> tuple[str, int]:
    env = {**os.environ, "PYTHONHASHSEED": "0", "COLUMNS": "120"}
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=300, env=env)
    return proc.stdout + proc.stderr, proc.returncode


def wrap(output: str, code: int) -> str:
    """The eval script's frame around the test output (minisandbox.grading.evalscript)."""
    return (
        f"+ git apply -v /tmp/patch.diff\nChecking patch calc.py...\nApplied patch calc.py cleanly.\n"
        f">>>>> Applied Patch {NONCE}\n>>>>> Start Test Output {NONCE}\n{output.rstrip()}\n"
        f">>>>> End Test Output {NONCE}\n>>>>> Test Exit Code {code} {NONCE}\n"
    )


def main() -> None:
    out = HERE / "logs"
    out.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        jobs = {
            "pytest_mixed": (PYTEST_REPO, [*PYTEST, "tests/test_calc.py"]),
            "pytest_verbose": (PYTEST_REPO, [*PYTEST, "-v", "tests/test_calc.py"]),
            "pytest_options": (OPTIONS_REPO, [*PYTEST, "tests/test_paths.py"]),
            "pytest_collect_error": (COLLECT_REPO, [*PYTEST, "tests/test_calc.py"]),
            "django": (DJANGO_REPO, [sys.executable, "run_django.py"]),
            "sympy": ({"sympy/demo/tests/test_demo.py": SYMPY_TESTS}, [sys.executable, "run_sympy.py"]),
        }
        extra = {"django": {"run_django.py": RUN_DJANGO}, "sympy": {"run_sympy.py": RUN_SYMPY}}
        for name, (files, cmd) in jobs.items():
            root = base / name
            write(root, {**files, **extra.get(name, {})})
            text, code = run(cmd, root)
            text = text.replace(str(root), "/testbed")  # stable across machines, as inside a sandbox
            (out / f"{name}.log").write_text(wrap(text, code))
            print(f"{name}: exit {code}, {len(text)} chars")


if __name__ == "__main__":
    main()
