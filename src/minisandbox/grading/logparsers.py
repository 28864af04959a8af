"""Test-log parsers: turn the text a test runner printed into `{test id: status}`.

A spec names its parser (`EnvSpec.log_parser`); SWE-bench repos map to the parser the
official harness uses (`parser_for_repo`). The semantics follow SWE-bench's
`swebench.harness.log_parsers` but the implementation is our own and stricter in two ways
that matter for a reward signal:

* **Whole test ids.** The official SWE-smith pytest parser cuts an id at its first space,
  so `test_p[a b]` becomes `test_p[a`. We keep the full id (spaces, brackets, ` - ` and
  `::` inside parameters included) by anchoring the status word at the end of a verbose
  line and by checking that the id's square brackets balance. Datasets labelled with the
  truncated ids still grade correctly: see `minisandbox.grading.grading.lookup`.
* **Worst status wins.** When one id is reported more than once (a test that PASSED and
  then ERRORed in teardown, the verbose line plus the `-rA` summary line, or output a
  test printed itself to imitate a result line) the most severe status is kept, so
  printing a fake `PASSED` line can never hide a real failure.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from enum import Enum


class TestStatus(str, Enum):
    """SWE-bench's status words (values are what pytest prints)."""

    __test__ = False  # not a pytest test class

    PASSED = "PASSED"
    FAILED = "FAILED"
    SKIPPED = "SKIPPED"
    ERROR = "ERROR"
    XFAIL = "XFAIL"
    XPASS = "XPASS"


StatusMap = dict[str, str]
Parser = Callable[[str], StatusMap]

#: Severity used when one id is reported several times: higher wins.
_SEVERITY = {
    TestStatus.PASSED.value: 0,
    TestStatus.XFAIL.value: 1,
    TestStatus.SKIPPED.value: 2,
    TestStatus.XPASS.value: 3,
    TestStatus.FAILED.value: 4,
    TestStatus.ERROR.value: 5,
}

_STATUS_WORDS = "|".join(s.value for s in TestStatus)
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]|\[\d+m")
_CONTROL = str.maketrans("", "", "".join(chr(c) for c in range(1, 32) if c != 9))
# " STATUS" followed by an optional "(reason)" and an optional "[ 42%]" progress field.
_VERBOSE_TAIL = re.compile(r"^(?: \(.*\))?(?:\s+\[\s*\d+%\])?\s*$")
_STATUS_TOKEN = re.compile(rf" ({_STATUS_WORDS})(?=$|\s)")
_STATUS_FIRST = re.compile(rf"^({_STATUS_WORDS}) (.+)$")
_XDIST_PREFIX = re.compile(r"^\[gw\d+\]\s+(?:\[\s*\d+%\]\s+)?")
_SKIP_COUNT = re.compile(r"^\[\d+\] ")


def record(status_map: StatusMap, test_id: str, status: str) -> None:
    """Add one observation; the more severe status wins (see module docstring)."""
    old = status_map.get(test_id)
    if old is None or _SEVERITY.get(status, 0) > _SEVERITY.get(old, 0):
        status_map[test_id] = status


def brackets_balance(text: str) -> bool:
    """True when every `[` in a pytest id has its `]` (parameter ids may nest them)."""
    depth = 0
    for ch in text:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
            if depth < 0:
                return False
    return depth == 0


def _clean(line: str) -> str:
    return _ANSI.sub("", line).translate(_CONTROL).rstrip()


def parse_verbose_line(line: str) -> tuple[str, str] | None:
    """`<id> STATUS [(reason)] [ NN%]` (pytest -v), or None.

    The status word is searched from the right and must be followed only by an optional
    reason and progress field; the id before it must contain `::` and balanced brackets.
    That keeps ids such as `test_p[PASSED x]` or `test_p[e - f]` whole.
    """
    line = _XDIST_PREFIX.sub("", line)
    for m in reversed(list(_STATUS_TOKEN.finditer(line))):
        test_id = line[: m.start()]
        if "::" not in test_id or not test_id.strip() or test_id[0].isspace():
            continue
        if not _VERBOSE_TAIL.match(line[m.end() :]):
            continue
        if not brackets_balance(test_id):
            continue
        return test_id, m.group(1)
    return None


def parse_summary_line(line: str, known: set[str] | frozenset[str] = frozenset()) -> tuple[str, str] | None:
    """`STATUS <id>[ - message]` (pytest -rA short summary, xdist lines), or None.

    `SKIPPED [1] file.py:12: reason` lines name no test and are ignored. The message
    separator ` - ` may also occur inside a parameter id: an id already seen in a verbose
    line wins, otherwise the first split whose brackets balance.
    """
    line = _XDIST_PREFIX.sub("", line)
    m = _STATUS_FIRST.match(line)
    if not m:
        return None
    status, rest = m.group(1), m.group(2)
    if _SKIP_COUNT.match(rest):
        return None
    candidates = [rest]
    start = 0
    while (pos := rest.find(" - ", start)) != -1:
        candidates.append(rest[:pos])
        start = pos + 1
    # prefer an id we know, longest first; then the shortest balanced prefix
    for cand in sorted(candidates, key=len, reverse=True):
        if cand in known:
            return cand, status
    for cand in sorted(candidates, key=len):
        cand = cand.rstrip()
        if cand and brackets_balance(cand) and not cand[0].isspace():
            # old pytest prints `XPASS id reason` without a dash: keep a verbose id if any
            return cand, status
    return None


def parse_log_pytest(log: str) -> StatusMap:
    """pytest `-v` result lines and `-rA` summary lines (both may be present)."""
    status_map: StatusMap = {}
    summary: list[str] = []
    for raw in log.splitlines():
        line = _clean(raw)
        if not line:
            continue
        if _STATUS_FIRST.match(_XDIST_PREFIX.sub("", line)):
            summary.append(line)  # ids never start with a status word; parse after the verbose lines
            continue
        parsed = parse_verbose_line(line)
        if parsed is not None:
            record(status_map, *parsed)
    known = set(status_map)
    for line in summary:
        parsed = parse_summary_line(line, known)
        if parsed is not None:
            record(status_map, *parsed)
    return status_map


def parse_log_pytest_v2(log: str) -> StatusMap:
    """SWE-bench `pytest_v2`: the same after stripping colour codes (done for all here)."""
    return parse_log_pytest(log)


_OPTION = re.compile(r"^(.*?)\[(.*)\]$")


def normalize_option_id(test_id: str) -> str:
    """SWE-bench `pytest_options`: a parameter that is an absolute path keeps only its
    basename (`test_x[/tmp/abc/file.txt]` -> `test_x[/file.txt]`), because temp paths
    differ between runs."""
    m = _OPTION.match(test_id)
    if not m:
        return test_id
    main, option = m.groups()
    if option.startswith("/") and not option.startswith("//") and "*" not in option:
        option = "/" + option.split("/")[-1]
    return f"{main}[{option}]"


def parse_log_pytest_options(log: str) -> StatusMap:
    out: StatusMap = {}
    for test_id, status in parse_log_pytest(log).items():
        record(out, normalize_option_id(test_id), status)
    return out


def parse_log_matplotlib(log: str) -> StatusMap:
    """matplotlib ids print enum reprs that differ across versions; SWE-bench maps them."""
    log = log.replace("MouseButton.LEFT", "1").replace("MouseButton.RIGHT", "3")
    return parse_log_pytest(log)


_UNITTEST_SUFFIXES = (
    (" ... ok", TestStatus.PASSED),
    (" ... OK", TestStatus.PASSED),
    (" ...  OK", TestStatus.PASSED),
    (" ... FAIL", TestStatus.FAILED),
    (" ... ERROR", TestStatus.ERROR),
    (" ... expected failure", TestStatus.XFAIL),
    (" ... unexpected success", TestStatus.FAILED),
)
_UNITTEST_HEADER = re.compile(r"^(FAIL|ERROR): (.+)$")
_DJANGO_INTERRUPTED = (
    re.compile(r"^(.*?) \.\.\. Testing against Django installed in (?s:.*?) silenced\)\.\nok$", re.MULTILINE),
    re.compile(r"^(.*?) \.\.\. Internal Server Error: /(.*)/\nok$", re.MULTILINE),
    re.compile(r"^(.*?) \.\.\. System check identified no issues \(0 silenced\)\nok$", re.MULTILINE),
)


def parse_log_django(log: str) -> StatusMap:
    """unittest / Django runner at verbosity 2: `name (module.Class) ... ok|FAIL|ERROR|skipped`.

    `FAIL: name (module.Class)` headers of the failure section mark failures too. Output a
    test prints between `...` and `ok` moves `ok` to a later line; it is credited to the
    last test that started. Django's runner prints a few known multi-line messages in the
    middle of a result line (handled as SWE-bench does).
    """
    status_map: StatusMap = {}
    prev: str | None = None
    for raw in log.splitlines():
        line = _clean(raw).strip()
        if not line:
            continue
        if "--version is equivalent to version" in line:
            record(status_map, "--version is equivalent to version", TestStatus.PASSED.value)
        if " ... " in line:
            prev = line.split(" ... ", 1)[0]
        matched = False
        for suffix, status in _UNITTEST_SUFFIXES:
            if line.endswith(suffix):
                name = line[: -len(suffix)]
                if name.startswith("Applying sites.0002_alter_domain_unique...test_no_migrations"):
                    name = name.split("...", 1)[-1].strip()
                record(status_map, name, status.value)
                matched = True
                break
        if not matched and " ... skipped" in line:
            record(status_map, line.split(" ... skipped", 1)[0], TestStatus.SKIPPED.value)
            matched = True
        header = _UNITTEST_HEADER.match(line)
        if header:
            status = TestStatus.FAILED if header.group(1) == "FAIL" else TestStatus.ERROR
            record(status_map, header.group(2).strip(), status.value)
            # SWE-bench also records the first word only (old ids without the class)
            record(status_map, header.group(2).split()[0], status.value)
            matched = True
        if not matched and prev is not None and line == "ok":
            record(status_map, prev, TestStatus.PASSED.value)
    for pattern in _DJANGO_INTERRUPTED:
        for m in pattern.finditer(log):
            record(status_map, m.group(1).strip(), TestStatus.PASSED.value)
    return status_map


parse_log_unittest = parse_log_django

_SYMPY_FAILURE = re.compile(r"^_+ (\S+\.py):(\S+) _+$")


def parse_log_sympy(log: str) -> StatusMap:
    """sympy's `bin/test`: `test_name ok|F|E` per line, failures as `___ file.py:test ___`."""
    status_map: StatusMap = {}
    for raw in log.splitlines():
        line = _clean(raw).strip()
        m = _SYMPY_FAILURE.match(line)
        if m:
            record(status_map, f"{m.group(1)}:{m.group(2)}", TestStatus.FAILED.value)
            continue
        if not line.startswith("test_"):
            continue
        name = line.split()[0]
        if line.endswith(" E"):
            record(status_map, name, TestStatus.ERROR.value)
        elif line.endswith(" F"):
            record(status_map, name, TestStatus.FAILED.value)
        elif line.endswith(" ok"):
            record(status_map, name, TestStatus.PASSED.value)
        elif line.endswith(" f"):
            record(status_map, name, TestStatus.XFAIL.value)
        elif line.endswith(" s"):
            record(status_map, name, TestStatus.SKIPPED.value)
    return status_map


#: Parser name (`minisandbox.logformats.LOG_PARSERS`, the one list) -> the project's parser.
PARSERS: dict[str, Parser] = {
    "pytest": parse_log_pytest,
    "pytest_v2": parse_log_pytest_v2,
    "pytest_options": parse_log_pytest_options,
    "matplotlib": parse_log_matplotlib,
    "seaborn": parse_log_pytest,
    "django": parse_log_django,
    "unittest": parse_log_unittest,
    "sympy": parse_log_sympy,
}

#: SWE-bench repo -> parser name (same choices as the official harness).
SWEBENCH_REPO_PARSERS: dict[str, str] = {
    "astropy/astropy": "pytest_v2",
    "django/django": "django",
    "marshmallow-code/marshmallow": "pytest",
    "matplotlib/matplotlib": "matplotlib",
    "mwaskom/seaborn": "seaborn",
    "pallets/flask": "pytest",
    "psf/requests": "pytest_options",
    "pvlib/pvlib-python": "pytest",
    "pydata/xarray": "pytest",
    "pydicom/pydicom": "pytest_options",
    "pylint-dev/astroid": "pytest",
    "pylint-dev/pylint": "pytest_options",
    "pytest-dev/pytest": "pytest",
    "pyvista/pyvista": "pytest",
    "scikit-learn/scikit-learn": "pytest_v2",
    "sqlfluff/sqlfluff": "pytest",
    "sphinx-doc/sphinx": "pytest_v2",
    "sympy/sympy": "sympy",
}


# -- did a test session run at all? ---------------------------------------------------------
#
# A run whose log has no per-test line is not necessarily unparseable: when a bug breaks
# an import, pytest stops at collection ("Interrupted: N errors during collection") and,
# with `-r` overridden by the repo's config (`addopts = "-rxXs"`), prints no `ERROR <file>`
# line either. Under SWE-bench/SWE-smith semantics every listed test has then failed (a
# missing test is a failure), and the official datasets hold such tasks. Only a log with
# no test-session output at all (the runner did not start) is unparseable.

_PYTEST_SESSION = re.compile(
    r"^=+ test session starts =+$"
    r"|^collect(?:ed|ing) .*\d+ (?:items?|errors?)"
    r"|Interrupted: \d+ errors? during collection"
    r"|^=*\s*(?:\d+ (?:passed|failed|errors?|skipped|xfailed|xpassed|warnings?|deselected|rerun)(?:, )?)+ in [\d.]+s"
    r"|^=*\s*no tests ran in [\d.]+s",
    re.MULTILINE,
)
_UNITTEST_SESSION = re.compile(r"^Ran \d+ tests? in [\d.]+s$", re.MULTILINE)
_SYMPY_SESSION = re.compile(r"test process starts", re.MULTILINE)
_COLLECTION_ERROR = re.compile(
    r"Interrupted: \d+ errors? during collection"
    r"|^_+ ERROR collecting .+ _+$"
    r"|^collect(?:ed|ing) .*\d+ items? / \d+ errors?"
    r"|^ERROR: \S+ \(unittest\.loader\._FailedTest",
    re.MULTILINE,
)
#: parser name -> the session marker of its runner
_SESSION_OF: dict[str, re.Pattern[str]] = {
    "pytest": _PYTEST_SESSION,
    "pytest_v2": _PYTEST_SESSION,
    "pytest_options": _PYTEST_SESSION,
    "matplotlib": _PYTEST_SESSION,
    "seaborn": _PYTEST_SESSION,
    "django": _UNITTEST_SESSION,
    "unittest": _UNITTEST_SESSION,
    "sympy": _SYMPY_SESSION,
}


def session_seen(log: str, parser: str) -> bool:
    """True when the runner's output shows that a test session ran (even one that stopped
    at collection); False when the runner never started (command not found, crash on
    start-up, empty output)."""
    text = "\n".join(_clean(line) for line in log.splitlines())
    pattern = _SESSION_OF.get(parser, _PYTEST_SESSION)
    return bool(pattern.search(text))


def collection_error(log: str) -> bool:
    """True when the log shows that collecting (importing) tests failed."""
    return bool(_COLLECTION_ERROR.search("\n".join(_clean(line) for line in log.splitlines())))


def get_parser(name: str) -> Parser:
    """The parser a spec names; unknown names are a configuration error."""
    try:
        return PARSERS[name]
    except KeyError:
        raise KeyError(
            f"unknown log parser {name!r}; use one of {', '.join(sorted(PARSERS))} in the spec's log_parser"
        ) from None


def parser_name_for_repo(repo: str, default: str = "pytest") -> str:
    """The SWE-bench harness's parser for `owner/name`, else `default`."""
    return SWEBENCH_REPO_PARSERS.get(repo, default)
