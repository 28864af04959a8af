"""The log parsers a spec may name (`EnvSpec.log_parser`): the one list of their names.

Grading implements each name twice, as the project's parser
(`minisandbox.grading.logparsers.PARSERS`) and as the official harness's
(`minisandbox.grading.official.OFFICIAL_PARSERS`); both tables cover exactly these names
(tests/grading/test_logparsers.py). The list lives below grading because the catalog checks
a spec's `log_parser` when it is loaded and the build asks whether a spec's tests print
pytest output (its collection warm-up), and neither may import grading.
"""

from __future__ import annotations

#: parser name -> does it read pytest output (pytest node ids; the results channel and the
#: build's collection warm-up apply only to these).
LOG_PARSERS: dict[str, bool] = {
    "pytest": True,
    "pytest_v2": True,
    "pytest_options": True,
    "matplotlib": True,
    "seaborn": True,
    "django": False,
    "unittest": False,
    "sympy": False,
}

#: The parsers that read pytest output.
PYTEST_PARSERS = frozenset(name for name, pytest in LOG_PARSERS.items() if pytest)
#: The parsers that read unittest's verbose output (Django's runner, `python -m unittest`):
#: the results channel reaches these runners too (loaded at interpreter start-up).
UNITTEST_PARSERS = frozenset({"django", "unittest"})
#: The parser of SymPy's own runner (`bin/test`): the channel is loaded at interpreter
#: start-up too, and records the test functions the runner calls.
SYMPY_PARSERS = frozenset({"sympy"})


def channel_runner(log_parser: str) -> str:
    """How the results channel reaches a spec's test runner: "pytest" (a `-p` plugin),
    "unittest" (a module imported at interpreter start-up), "sympy" (the same module as
    `sitecustomize`, wrapping `exec`), or "" (none)."""
    if log_parser in PYTEST_PARSERS:
        return "pytest"
    if log_parser in UNITTEST_PARSERS:
        return "unittest"
    return "sympy" if log_parser in SYMPY_PARSERS else ""
