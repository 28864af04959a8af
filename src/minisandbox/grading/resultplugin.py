"""minisandbox's pytest results plugin: test outcomes on a channel the log cannot forge.

Loaded by the eval script with ``-p`` (through PYTEST_ADDOPTS, from a read-only directory
put first on PYTHONPATH), so pytest imports it before any conftest, entry-point plugin or
repository module. It runs inside the environment under test, with that environment's
Python and pytest, so it uses the standard library only and stays Python 3.5 compatible
(no f-strings, no annotations).

What it does (see docs/grading.md, "Results channel"):

* takes the results socket named by MINISANDBOX_RESULTS_FD, moves it to a close-on-exec
  descriptor and reads the run's nonce from it (the controller wrote it there before the
  run; whoever reads it first consumes it, so code that runs later cannot read it back);
* keeps references to pytest's outcome exceptions and a snapshot of the runner's
  internals at import time, before any repository code can patch them;
* for every test phase computes the status itself from ``call.excinfo`` (not from the
  report object, which repository code can patch), notes where the report disagrees, and
  writes one JSON line per phase; at the end of the session it writes the exit status,
  the number of tests collected and which runner internals changed during the run.

A run without the environment variable (someone re-running eval.sh by hand, a nested
pytest) leaves the plugin inert.
"""

import json
import os
import socket
import sys

FD_VAR = "MINISANDBOX_RESULTS_FD"
NONCE_BYTES = 33  # 32 hex characters and a newline
_RESTORE = ("PYTHONPATH", "PYTEST_ADDOPTS")

#: Runner internals whose replacement during a run means outcomes may be fabricated before
#: they reach this plugin (they produce `call.excinfo` or run the test function).
CRITICAL = (
    "_pytest.runner.CallInfo",
    "_pytest.runner.CallInfo.from_call",
    "_pytest.runner.call_runtest_hook",
    "_pytest.runner.call_and_report",
    "_pytest.runner.runtestprotocol",
    "_pytest.python.Function.runtest",
    "_pytest.python.pytest_pyfunc_call",
)
#: Report-level internals: patching them fools the log, not this plugin (it recomputes the
#: outcome), so a change is only reported.
WATCHED = CRITICAL + (
    "_pytest.reports.TestReport",
    "_pytest.reports.TestReport.__init__",
    "_pytest.reports.TestReport.from_item_and_call",
    "_pytest.reports.BaseReport.passed",
    "_pytest.reports.BaseReport.failed",
    "_pytest.reports.BaseReport.skipped",
    "_pytest.runner.pytest_runtest_makereport",
    "_pytest.skipping.pytest_runtest_makereport",
    "_pytest.terminal.TerminalReporter.pytest_runtest_logreport",
    "_pytest.main.pytest_runtestloop",
    "_pytest.main.Session.perform_collect",
)


def _lookup(dotted):
    """The object at `dotted` (module path, then attributes; class attributes from the
    class __dict__ so properties and classmethods compare by identity), or None."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        mod = sys.modules.get(".".join(parts[:cut]))
        if mod is None:
            continue
        obj = mod
        for name in parts[cut:]:
            if isinstance(obj, type):
                found = None
                for klass in obj.__mro__:
                    if name in klass.__dict__:
                        found = klass.__dict__[name]
                        break
                obj = found
            else:
                obj = getattr(obj, name, None)
            if obj is None:
                return None
        return obj
    return None


class _Channel(object):
    def __init__(self, fd, nonce):
        self.fd = fd
        self.nonce = nonce

    def write(self, record):
        record["n"] = self.nonce
        data = (json.dumps(record, sort_keys=True) + "\n").encode("utf-8", "replace")
        try:
            while data:
                data = data[os.write(self.fd, data):]
        except OSError:
            pass


def _restore_env():
    """Put PYTHONPATH and PYTEST_ADDOPTS back as the test command set them (pytest has
    read its options already), and take this plugin's directory off sys.path."""
    for name in _RESTORE:
        had = os.environ.pop("MINISANDBOX_HAD_" + name, None)
        old = os.environ.pop("MINISANDBOX_OLD_" + name, "")
        if had is None:
            continue
        if had == "1":
            os.environ[name] = old
        else:
            os.environ.pop(name, None)
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if not p or os.path.abspath(p) != here]


def _open_channel():
    fd_text = os.environ.pop(FD_VAR, None)
    _restore_env()
    if not fd_text or not fd_text.isdigit():
        return None
    import fcntl

    try:
        fd = fcntl.fcntl(int(fd_text), fcntl.F_DUPFD_CLOEXEC, 64)
    except OSError:
        return None
    try:
        os.close(int(fd_text))
    except OSError:
        pass
    try:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM, 0, os.dup(fd))
        try:
            nonce = sock.recv(NONCE_BYTES, socket.MSG_DONTWAIT)
        finally:
            sock.close()
    except OSError:  # BlockingIOError: another session consumed the nonce
        nonce = b""
    nonce = nonce.decode("ascii", "replace").strip()
    if len(nonce) != NONCE_BYTES - 1:
        os.close(fd)
        return None
    return _Channel(fd, nonce)


_channel = _open_channel()

if _channel is not None:
    import pytest

    _SKIP = pytest.skip.Exception
    _XFAIL = getattr(pytest.xfail, "Exception", ())
    _EXIT = getattr(pytest.exit, "Exception", ())
    _SNAPSHOT = dict((name, _lookup(name)) for name in WATCHED)
    _state = {"config": None, "collected": 0, "tampered": []}

    def _changed():
        out = []
        for name, obj in _SNAPSHOT.items():
            if _lookup(name) is not obj:
                out.append(name)
        return sorted(out)

    def _note_tampering():
        for name in _changed():
            if name not in _state["tampered"]:
                _state["tampered"].append(name)
                _channel.write({"ev": "tampered", "what": name, "critical": name in CRITICAL})

    def _has_xfail_mark(item):
        try:
            return any(True for _ in item.iter_markers(name="xfail"))
        except Exception:  # very old pytest
            return item.get_marker("xfail") is not None

    _PYTEST_DIRS = tuple(os.path.dirname(os.path.abspath(m.__file__)) + os.sep
                         for m in (sys.modules.get("_pytest"), sys.modules.get("pluggy")) if m is not None)

    def _outcome_caller(exc):
        """The file of the innermost frame outside pytest that led to the outcome
        exception (who called pytest.xfail())."""
        tb = getattr(exc, "tb", None) or getattr(exc, "_excinfo", (None, None, None))[2]
        files = []
        while tb is not None:
            files.append(os.path.abspath(tb.tb_frame.f_code.co_filename))
            tb = tb.tb_next
        for name in reversed(files):
            if not name.startswith(_PYTEST_DIRS):
                return name
        return None

    def _rootdir(item):
        return str(getattr(item.config, "rootpath", None) or item.config.rootdir)

    def _relative(item, path):
        rel = os.path.relpath(path, _rootdir(item))
        return path if rel.startswith(".." + os.sep) else rel

    def _test_code(item, path):
        """True for test code (allowed to call pytest.xfail()): the test's own module, a
        conftest, test modules and anything under a tests/testing directory, and code
        outside the repository (installed test helpers)."""
        rel = os.path.relpath(path, _rootdir(item))
        if rel.startswith(".." + os.sep):
            return True
        parts = rel.split(os.sep)
        name = parts[-1]
        if name == "conftest.py" or name.startswith("test_") or name.endswith("_test.py") or name == "tests.py":
            return True
        return any(p in ("tests", "test", "testing") for p in parts[:-1])

    def _status(item, call, rep):
        """(status, note) of one phase, from call.excinfo; the report only decides among
        the outcomes the exception allows (xfail, xpass, strict xpass)."""
        when = call.when
        outcome = getattr(rep, "outcome", None)
        if outcome == "rerun":
            return None, None  # pytest-rerunfailures: the attempt that counts comes later
        wasxfail = hasattr(rep, "wasxfail")
        exc = call.excinfo
        if exc is None:
            if when != "call":
                if outcome == "failed":
                    return "ERROR", None
                if outcome != "passed":
                    return "ERROR", "report says %s without an exception" % outcome
                return None, None
            if outcome == "failed":
                return "FAILED", None  # e.g. a strict xfail that passed
            if outcome != "passed":
                return "FAILED", "report says %s without an exception" % outcome
            return ("XPASS" if wasxfail else "PASSED"), None
        etype = exc.type
        if _EXIT and issubclass(etype, _EXIT):
            return "ERROR", None
        if issubclass(etype, _SKIP) and not (_XFAIL and issubclass(etype, _XFAIL)):
            if outcome != "skipped":
                return "SKIPPED", "report says %s for a skip" % outcome
            return "SKIPPED", None
        if _XFAIL and issubclass(etype, _XFAIL):
            if outcome != "skipped" or not wasxfail:
                return "FAILED", "report says %s for an xfail() call" % outcome
            caller = _outcome_caller(exc)
            if caller is not None and not _test_code(item, caller):
                return "FAILED", "xfail() called from library code %s" % _relative(item, caller)
            return "XFAIL", None
        # a real exception: a failure, or an expected failure of an xfail-marked test
        if outcome == "skipped" and wasxfail and _has_xfail_mark(item):
            return "XFAIL", None
        status = "FAILED" if when == "call" else "ERROR"
        if outcome != "failed":
            return status, "report says %s for %s" % (outcome, etype.__name__)
        return status, None

    @pytest.hookimpl(tryfirst=True)
    def pytest_configure(config):
        if _state["config"] is None:
            _state["config"] = config

    @pytest.hookimpl(hookwrapper=True, tryfirst=True)
    def pytest_runtest_makereport(item, call):
        result = yield
        if item.config is not _state["config"]:
            return  # a nested in-process session (pytester): not ours to report
        try:
            rep = result.get_result()
        except BaseException:
            rep = None
        _note_tampering()
        status, note = _status(item, call, rep)
        record = {"ev": "phase", "id": item.nodeid, "when": call.when, "status": status,
                  "report": getattr(rep, "outcome", None)}
        if note:
            record["forged"] = note
        _channel.write(record)

    def _report_status(report):
        """The status a report states (for reports made in another process)."""
        outcome = getattr(report, "outcome", None)
        if outcome == "passed":
            if report.when != "call":
                return None
            return "XPASS" if hasattr(report, "wasxfail") else "PASSED"
        if outcome == "skipped":
            return "XFAIL" if hasattr(report, "wasxfail") else "SKIPPED"
        if outcome == "failed":
            return "FAILED" if report.when == "call" else "ERROR"
        return None

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(report):
        """pytest-xdist: tests run in worker processes, which have no channel (the fd
        was taken out of the environment before they started); their reports reach this
        process and are recorded as they state themselves, marked as such."""
        if getattr(report, "node", None) is None or getattr(report, "outcome", None) == "rerun":
            return
        _channel.write({"ev": "phase", "id": report.nodeid, "when": report.when,
                        "status": _report_status(report), "report": report.outcome, "worker": True})

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(session, config, items):
        if config is _state["config"]:
            _state["collected"] = len(items)

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(session, exitstatus):
        if session.config is not _state["config"]:
            return
        _note_tampering()
        _channel.write({"ev": "end", "exitstatus": int(exitstatus), "collected": _state["collected"],
                        "tampered": list(_state["tampered"])})

    _channel.write({"ev": "hello", "pid": os.getpid(), "pytest": getattr(pytest, "__version__", "?"),
                    "python": sys.version.split()[0]})
