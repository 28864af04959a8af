"""Official-compatible grading: the decision the task's own harness would make.

`--grading official` (docs/grading.md, "Official-compatible mode") scores a run the way
SWE-bench's harness does for SWE-bench tasks (`swebench.harness.grading.get_eval_report`,
swebench 5.0.x) and the way SWE-smith's harness does for SWE-smith tasks
(`swesmith.harness.grading.get_eval_report`), so scores compare with leaderboards. The
default mode (`minisandbox.grading.grading`) stays stricter, for RL rewards.

What is reproduced, per harness (our own implementation of the documented behaviour;
tests/grading/test_official_differential.py checks it against the `swebench` package):

* the harness's log parsers: a pytest id is the first word after the status word of a
  `-rA` summary line (cut at its first space), the last line for an id wins;
* SWE-bench: a test passes if PASSED/XFAIL; a FAIL_TO_PASS test that is SKIPPED fails, a
  PASS_TO_PASS test that is SKIPPED is kept; a test missing from the log fails; an id cut
  mid-parameter (more `[` than `]`) prefix-matches when all candidates agree; an empty
  status map with no sign that the suite ran, or a non-zero test exit code with no
  failure in the map, means "not graded"; resolved = every F2P and every P2P test in
  `success` (empty lists count as 1.0);
* SWE-smith: a test missing from the log passes, SKIPPED/XPASS land in neither list,
  empty lists count as 1.0.

What is not given up (the same as the default mode): only markers that carry the run's
nonce delimit the test output, the results channel is merged into the status map when
the run had one (a test the channel saw fail cannot pass), `results-tampered` is never
resolved, and `suspicious` is reported.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Iterable, Mapping
from enum import Enum
from typing import Protocol

from minisandbox.errors import MinisandboxError
from minisandbox.grading.logparsers import TestStatus
from minisandbox.logformats import PYTEST_PARSERS

StatusMap = dict[str, str]
OfficialParser = Callable[[str], StatusMap]


class GradingMode(str, Enum):
    """`strict` (the default, for rewards) or `official` (the task's harness decision)."""

    STRICT = "strict"
    OFFICIAL = "official"


class Harness(str, Enum):
    SWEBENCH = "swe-bench"
    SWESMITH = "swe-smith"


def harness_for(task_format: str) -> Harness:
    """The harness whose decision `official` mode reproduces, from the record's format."""
    return Harness.SWESMITH if task_format == "swesmith" else Harness.SWEBENCH


# The official harness knows these five words (no XPASS: an XPASS line is not a result).
_OFFICIAL_WORDS = ("FAILED", "PASSED", "SKIPPED", "ERROR", "XFAIL")
_SKIP_COUNT = re.compile(r"^\[\d+\]$")


def _status_line(line: str) -> list[str] | None:
    """The words of a `STATUS id ...` line as the harness splits them, or None."""
    if not line.startswith(_OFFICIAL_WORDS):
        return None
    if line.startswith("FAILED"):
        line = line.replace(" - ", " ")
    words = line.split()
    if len(words) <= 1:
        return None
    if words[0] == "SKIPPED" and _SKIP_COUNT.match(words[1]):
        return None  # `SKIPPED [2] file.py:3: reason` names no test
    return words


def parse_pytest(log: str) -> StatusMap:
    """SWE-bench/SWE-smith `parse_log_pytest`: `STATUS first-word` lines, last one wins."""
    out: StatusMap = {}
    for line in log.split("\n"):
        words = _status_line(line)
        if words:
            out[words[1]] = words[0]
    return out


_OPTION = re.compile(r"(.*?)\[(.*)\]")


_SWESMITH_WORDS = ("FAILED", "PASSED", "SKIPPED", "ERROR", "XFAIL")  # swebench's TestStatus, in its order


def parse_swesmith_pytest(log: str) -> StatusMap:
    """SWE-smith's pytest parsers: its default (`PythonProfile.log_parser`, `-v` lines:
    `^(\\S+)\\s+STATUS`, an id cut at its first space) and, on the same lines, its `-rA`
    one for repos whose command has no `-v` (`parse_log_paramiko`: `^STATUS\\s(\\S+)`);
    the last line for an id wins. Which of the two a repo uses is per profile in
    SWE-smith; reading both is a documented deviation (docs/grading.md)."""
    out: StatusMap = {}
    for line in log.split("\n"):
        for status in _SWESMITH_WORDS:
            m = re.match(rf"^(\S+)(\s+){status}", line)
            if m:
                out[m.group(1)] = status
            m = re.match(rf"^{status}\s(\S+)", line)
            if m and not _SKIP_COUNT.match(m.group(1)):
                out[m.group(1)] = status
    return out


def parse_pytest_options(log: str) -> StatusMap:
    """`parse_log_pytest_options`: an absolute-path parameter keeps only its basename."""
    out: StatusMap = {}
    for line in log.split("\n"):
        words = _status_line(line)
        if not words:
            continue
        name = words[1]
        m = _OPTION.search(name)
        if m:
            main, option = m.groups()
            if option.startswith("/") and not option.startswith("//") and "*" not in option:
                option = "/" + option.split("/")[-1]
            name = f"{main}[{option}]"
        out[name] = words[0]
    return out


_ESCAPES = str.maketrans("", "", "".join(chr(c) for c in range(1, 32)))
_COLOUR = re.compile(r"\[(\d+)m")


def parse_pytest_v2(log: str) -> StatusMap:
    """`parse_log_pytest_v2`: colour codes dropped; `STATUS id` (id = the rest of the line
    up to ` - `) or, for older pytest, `id STATUS`."""
    out: StatusMap = {}
    for line in log.split("\n"):
        line = _COLOUR.sub("", line).translate(_ESCAPES)
        if line.startswith(_OFFICIAL_WORDS):
            if line.startswith("FAILED"):
                line = line.split(" - ", 1)[0]
            words = line.split()
            if len(words) >= 2 and not (words[0] == "SKIPPED" and _SKIP_COUNT.match(words[1])):
                out[" ".join(words[1:])] = words[0]
        elif line.endswith(_OFFICIAL_WORDS):
            words = line.split()
            if len(words) >= 2:
                out[" ".join(words[:-1])] = words[-1]
    return out


def parse_matplotlib(log: str) -> StatusMap:
    """`parse_log_matplotlib`: pytest with MouseButton names replaced by their numbers."""
    return parse_pytest(log.replace("MouseButton.LEFT", "1").replace("MouseButton.RIGHT", "3"))


def parse_seaborn(log: str) -> StatusMap:
    """`parse_log_seaborn`: FAILED summary lines, `id PASSED ...` and `PASSED id` lines."""
    out: StatusMap = {}
    for line in log.split("\n"):
        words = line.split()
        if len(words) < 2:
            continue
        if line.startswith("FAILED"):
            out[words[1]] = "FAILED"
        elif " PASSED " in line:
            if words[1] == "PASSED":
                out[words[0]] = "PASSED"
        elif line.startswith("PASSED"):
            out[words[1]] = "PASSED"
    return out


_DJANGO_CONTINUED = (
    r"^(.*?)\s\.\.\.\sTesting\ against\ Django\ installed\ in\ ((?s:.*?))\ silenced\)\.\nok$",
    r"^(.*?)\s\.\.\.\sInternal\ Server\ Error:\ \/(.*)\/\nok$",
    r"^(.*?)\s\.\.\.\sSystem check identified no issues \(0 silenced\)\nok$",
)


def parse_django(log: str) -> StatusMap:
    """`parse_log_django`: `name (module.Class) ... ok|skipped|FAIL|ERROR`, `FAIL:`/`ERROR:`
    headers, `ok` on a later line for the last `...` line seen."""
    out: StatusMap = {}
    prev: str | None = None
    for line in log.split("\n"):
        line = line.strip()
        if "--version is equivalent to version" in line:
            out["--version is equivalent to version"] = "PASSED"
        if " ... " in line:
            prev = line.split(" ... ")[0]
        for suffix in (" ... ok", " ... OK", " ...  OK"):
            if line.endswith(suffix):
                if line.strip().startswith("Applying sites.0002_alter_domain_unique...test_no_migrations"):
                    line = line.split("...", 1)[-1].strip()
                out[line.rsplit(suffix, 1)[0]] = "PASSED"
                break
        if " ... skipped" in line:
            out[line.split(" ... skipped")[0]] = "SKIPPED"
        if line.endswith(" ... FAIL"):
            out[line.split(" ... FAIL")[0]] = "FAILED"
        if line.startswith("FAIL:"):
            out[line.split()[1].strip()] = "FAILED"
        if line.endswith(" ... ERROR"):
            out[line.split(" ... ERROR")[0]] = "ERROR"
        if line.startswith("ERROR:"):
            out[line.split()[1].strip()] = "ERROR"
        if line.lstrip().startswith("ok") and prev is not None:
            out[prev] = "PASSED"
    for pattern in _DJANGO_CONTINUED:
        for m in re.finditer(pattern, log, re.MULTILINE):
            out[m.group(1)] = "PASSED"
    return out


_SYMPY_HEADER = re.compile(r"(_*) (.*)\.py:(.*) (_*)")


def parse_sympy(log: str) -> StatusMap:
    """`parse_log_sympy`: `___ file.py:test ___` headers fail; `test_x ok|F|E` lines."""
    out: StatusMap = {}
    for m in _SYMPY_HEADER.findall(log):
        out[f"{m[1]}.py:{m[2]}"] = "FAILED"
    for line in log.split("\n"):
        line = line.strip()
        if not line.startswith("test_"):
            continue
        if line.endswith(" E"):
            out[line.split()[0]] = "ERROR"
        if line.endswith(" F"):
            out[line.split()[0]] = "FAILED"
        if line.endswith(" ok"):
            out[line.split()[0]] = "PASSED"
    return out


#: Our parser names (`minisandbox.logformats.LOG_PARSERS`) -> the official parser of the same format.
OFFICIAL_PARSERS: dict[str, OfficialParser] = {
    "pytest": parse_pytest,
    "pytest_v2": parse_pytest_v2,
    "pytest_options": parse_pytest_options,
    "matplotlib": parse_matplotlib,
    "seaborn": parse_seaborn,
    "django": parse_django,
    "unittest": parse_django,
    "sympy": parse_sympy,
}


def official_parser(name: str, harness: Harness = Harness.SWEBENCH) -> OfficialParser:
    """The official parser for `name` under `harness`; unknown names use the pytest one
    (what both harnesses fall back to; `official_refusal` refuses them up front)."""
    if harness is Harness.SWESMITH and name in PYTEST_PARSERS:  # SWE-smith reads all pytest output alike
        return parse_swesmith_pytest
    return OFFICIAL_PARSERS.get(name, parse_pytest)


# -------------------------------------------------------------- what official mode accepts

#: Parser name -> what the SWE-bench harness's parser needs in the log: "r" (`-rA`-style
#: summary lines naming passed tests), "rv" (those or `-v` lines), None (not pytest).
_SWEBENCH_NEEDS: dict[str, str | None] = {
    "pytest": "r",
    "pytest_options": "r",
    "matplotlib": "r",
    "pytest_v2": "rv",
    "seaborn": "rv",
    "django": None,
    "unittest": None,
    "sympy": None,
}
_VALUE_OPTS = "kmpcoWrn"  # pytest (and xdist) short options that take a value


def _pytest_args(test_cmd: str) -> list[str] | None:
    """The arguments after `pytest` / `py.test` / `python -m pytest` in a shell command,
    or None when the command does not run pytest itself (tox, a runner script)."""
    try:
        words = shlex.split(test_cmd.replace(";", " ; "), comments=False)
    except ValueError:
        words = test_cmd.split()
    for i, w in enumerate(words):
        if w.rsplit("/", 1)[-1] in ("pytest", "py.test"):
            return words[i + 1 :]
        if w in ("-m", "-mpytest") and (w == "-mpytest" or (i + 1 < len(words) and words[i + 1] == "pytest")):
            return words[i + (1 if w == "-mpytest" else 2) :]
    return None


def _report_flags(args: list[str]) -> tuple[str, bool]:
    """(the last `-r` chars, whether `-v` is on) of pytest arguments."""
    chars, verbose = "fE", False  # pytest's default -r
    i = 0
    while i < len(args):
        w = args[i]
        if w in (";", "&&", "||", "|"):
            break
        if w in ("--verbose",) or (
            w.startswith("--verbosity=") and w.split("=", 1)[1].lstrip("-").isdigit() and int(w.split("=", 1)[1]) > 0
        ):
            verbose = True
        elif w.startswith("-") and not w.startswith("--") and len(w) > 1:
            for j, ch in enumerate(w[1:], 1):
                if ch == "v":
                    verbose = True
                elif ch in _VALUE_OPTS:
                    value = w[j + 1 :]
                    if not value and i + 1 < len(args):
                        i += 1
                        value = args[i]
                    if ch == "r":
                        chars = value
                    break
        i += 1
    return chars, verbose


def official_refusal(test_cmd: str, log_parser: str, task_format: str) -> str | None:
    """Why the official harness could not read this task's log (what to do included), or
    None when it can. Decided from the spec alone, before anything runs."""
    if log_parser not in OFFICIAL_PARSERS:
        return (
            f"official mode knows no log parser {log_parser!r} (it has {', '.join(sorted(OFFICIAL_PARSERS))}); "
            "grade it with --grading strict"
        )
    harness = harness_for(task_format)
    need = "rv" if harness is Harness.SWESMITH and log_parser in PYTEST_PARSERS else _SWEBENCH_NEEDS[log_parser]
    if need is None:
        return None
    args = _pytest_args(test_cmd)
    if args is None:
        return None  # pytest runs under another command (tox -- -v ...): its options are not visible here
    chars, verbose = _report_flags(args)
    passes = any(c in chars for c in "ApP") and "N" not in chars
    if passes or (verbose and "v" in need):
        return None
    what = "`-rA` summary lines (`PASSED <test>`)" if need == "r" else "`-rA` summary lines or `-v` result lines"
    return (
        f"{harness.value}'s {log_parser!r} log parser reads only {what}, which the test command "
        f"{test_cmd!r} does not print; add `-rA` to the spec's test_cmd, or grade with --grading strict"
    )


class OfficialGradingRefused(MinisandboxError, ValueError):
    """`--grading official` on a task whose log the official harness cannot read."""


class _Record(Protocol):
    instance_id: str
    format: str


class _Spec(Protocol):
    name: str
    test_cmd: str
    log_parser: str


def check_official(tasks: Iterable[tuple[_Record, _Spec]]) -> None:
    """Refuse, before anything runs, every task official mode cannot grade: one line per
    task (the first five named in full), naming the task, its spec and what to do."""
    lines = []
    for record, spec in tasks:
        why = official_refusal(spec.test_cmd, spec.log_parser, record.format)
        if why:
            lines.append(f"--grading official refuses {record.instance_id} (spec {spec.name}): {why}")
    if lines:
        more = f"\n... and {len(lines) - 5} more task(s) refused for the same kind of reason" if len(lines) > 5 else ""
        raise OfficialGradingRefused("\n".join(lines[:5]) + more)


# Evidence that a runner executed when the map is empty (swebench.harness.grading.SUITE_RAN).
SUITE_RAN = re.compile(
    r"Executed [1-9]\d* of \d+|TOTAL: [1-9]\d* (?:SUCCESS|FAILED)|[1-9]\d* passing|Tests:\s+[1-9]\d*"
    r"|Test Suites:\s+(?:\d+ \w+, )*[1-9]\d* total|^# tests [1-9]\d*|[1-9]\d* specs?, \d+ failures?|': ok$",
    re.M,
)

_PASS = frozenset({TestStatus.PASSED.value, TestStatus.XFAIL.value})
_FAIL_SWEBENCH = frozenset({TestStatus.FAILED.value, TestStatus.ERROR.value, TestStatus.SKIPPED.value})
_FAIL_SWESMITH = frozenset({TestStatus.FAILED.value, TestStatus.ERROR.value})


def official_status_map(harness: Harness, test_output: str, parser: str, exit_code: int | None) -> StatusMap | None:
    """The harness's status map of a run whose markers were found, or None when the
    harness would not grade it (SWE-bench: nothing parsed and no sign the suite ran, or a
    non-zero test exit code with no failure in the map)."""
    parse = official_parser(parser, harness)
    sm = parse(test_output)
    if harness is Harness.SWESMITH:
        return sm
    # SWE-bench re-parses the whole log when the region yields nothing; here only the
    # region between this run's nonce markers is test output (anything after the end
    # marker may come from a process the tests left behind), so there is no fallback.
    if not sm and not SUITE_RAN.search(test_output):
        return None
    if exit_code not in (None, 0) and sm and not any(s in ("FAILED", "ERROR") for s in sm.values()):
        return None
    return sm


def _resolve_swebench(case: str, sm: Mapping[str, str]) -> str | None:
    """The map key for `case`; an id cut mid-parameter prefix-matches when every
    candidate agrees on pass vs fail (swebench's `_resolve_case`)."""
    if case in sm:
        return case
    if case.count("[") > case.count("]"):
        keys = [k for k in sm if k.startswith(case)]
        if keys and len({sm[k] in _PASS for k in keys}) == 1:
            return keys[0]
    return None


def _classify(harness: Harness, case: str, sm: Mapping[str, str], *, p2p: bool) -> str | None:
    """ "success", "failure" or None (neither list) for one listed test."""
    if harness is Harness.SWESMITH:
        if case not in sm or sm[case] in _PASS:
            return "success"
        return "failure" if sm[case] in _FAIL_SWESMITH else None
    key = _resolve_swebench(case, sm)
    status = sm[key] if key is not None else None
    if status in _PASS or (p2p and status == TestStatus.SKIPPED.value):
        return "success"
    if status is None or status in _FAIL_SWEBENCH:
        return "failure"
    return None


def official_tests_status(
    harness: Harness, f2p: Iterable[str], p2p: Iterable[str], sm: Mapping[str, str]
) -> dict[str, dict[str, list[str]]]:
    """The harness's `tests_status` block (F2F/P2F empty, as with calculate_to_fail=False)."""
    out: dict[str, dict[str, list[str]]] = {}
    for name, tests, is_p2p in (("FAIL_TO_PASS", f2p, False), ("PASS_TO_PASS", p2p, True)):
        block: dict[str, list[str]] = {"success": [], "failure": []}
        for t in tests:
            where = _classify(harness, t, sm, p2p=is_p2p)
            if where:
                block[where].append(t)
        out[name] = block
    out["FAIL_TO_FAIL"] = {"success": [], "failure": []}
    out["PASS_TO_FAIL"] = {"success": [], "failure": []}
    return out


def _ratio(block: Mapping[str, list[str]]) -> float:
    total = len(block["success"]) + len(block["failure"])
    return 1.0 if total == 0 else len(block["success"]) / total


def official_resolved(tests_status: Mapping[str, Mapping[str, list[str]]]) -> bool:
    """`get_resolution_status(...) == RESOLVED_FULL`: both ratios are 1 (an empty list is 1)."""
    return _ratio(tests_status["FAIL_TO_PASS"]) == 1 and _ratio(tests_status["PASS_TO_PASS"]) == 1
