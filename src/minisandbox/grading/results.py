"""The results channel: per-test outcomes from the pytest plugin, cross-checked with the log.

Why: the test runner shares its process with the code under test, so whatever pytest
prints can be forged by a candidate patch (patch the report objects so failures print as
passes; print fake `PASSED` lines past pytest's capture and `os._exit(0)`). The plugin
`minisandbox.grading.resultplugin` is loaded before any repository code, computes each
test's status from the exception itself and writes it, authenticated with a per-run key
it alone read (`verify_records`), to a socket that is not the log. Grading then believes a pass only when the
log *and* the channel say so (`merge`): a test the channel does not list (the run was
cut short) fails, a status the channel saw as worse than the log wins.

unittest-based runners (Django's `tests/runtests.py`, `python -m unittest`) get the same
plugin at interpreter start-up (`UNITTEST_WARNOPTION`), which records what
`unittest.case.TestCase.run` reports; their ids are unittest's descriptions, rendered as
the verbose log prints them before parsing (`channel_status_map`). SymPy's `bin/test` gets it
as `sitecustomize` (`SYMPY_STARTUP`), which records the test functions the runner calls
(ids `file.py:test_name`, rendered as the runner's `test_name ok` lines and failure headers).
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import socket
import tempfile
import threading
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from minisandbox.grading.logparsers import StatusMap, get_parser, record
from minisandbox.logformats import channel_runner

#: The plugin's module name inside the environment under test (`-p` takes a module name).
RESULTS_PLUGIN = "_minisandbox_results"
#: Largest manifest sent to the plugin (the plugin reads at most this much).
MANIFEST_MAX = 8 << 20
#: Most bytes of records the controller keeps from one run's channel (a record is a few
#: hundred bytes: this is ~200,000 of them). Code under test can write to the channel as
#: fast as the kernel takes it; past this the connection is cut and the run voided.
CHANNEL_MAX = 64 << 20
#: Where a sandbox sees the plugin (a read-only bind of `plugin_file()`).
SANDBOX_RESULTS_DIR = "/run/minisandbox/results"
#: How the plugin reaches a runner that is not pytest: the warnings module imports a `-W`
#: category's module while the interpreter starts (CPython 3.6-3.13: before `site` and the
#: main script, and through `#!/usr/bin/env python` scripts), so no `sitecustomize` or
#: `.pth` file is needed. The plugin then takes the option out of `sys.warnoptions`.
#: pytest runs get it too (with `-p`): the plugin opens the channel then, before pytest
#: imports any repository module, when pytest is the main program.
UNITTEST_WARNOPTION = f"ignore::{RESULTS_PLUGIN}.StartUp"
#: SymPy's runner: SWE-bench's test command sets PYTHONWARNINGS itself (`PYTHONWARNINGS=...
#: bin/test`), so the plugin comes as `sitecustomize` from this subdirectory of the
#: results directory (first on PYTHONPATH; it then runs the environment's own
#: sitecustomize). `site` imports it after the site directories' `.pth` files (the
#: environment's) and before the main script, so before any repository code.
SYMPY_STARTUP = "sympy"
#: The environment variable telling the plugin it was loaded for unittest.
RUNNER_VAR = "MINISANDBOX_RESULTS_RUNNER"


def plugin_file() -> Path:
    """The plugin's source (`minisandbox.grading.resultplugin`)."""
    return Path(__file__).with_name("resultplugin.py")


_plugin_dir: Path | None = None
_plugin_lock = threading.Lock()


def plugin_dir() -> Path:
    """A directory holding only the plugin, under its import name, for host runs (one
    per process, removed when it exits; the test command gets it first on PYTHONPATH)."""
    global _plugin_dir
    with _plugin_lock:
        if _plugin_dir is None or not (_plugin_dir / SYMPY_STARTUP / "sitecustomize.py").is_file():
            d = Path(tempfile.mkdtemp(prefix="minisandbox-results-"))
            import atexit

            atexit.register(_remove_dir, d, os.getpid())
            shutil.copyfile(plugin_file(), d / f"{RESULTS_PLUGIN}.py")
            (d / SYMPY_STARTUP).mkdir()
            shutil.copyfile(plugin_file(), d / SYMPY_STARTUP / "sitecustomize.py")
            os.chmod(d, 0o755)
            os.chmod(d / SYMPY_STARTUP, 0o755)
            _plugin_dir = d
        return _plugin_dir


def _remove_dir(path: Path, owner: int) -> None:
    """At exit: remove `path` if this is the process that made it (a fork inherits the
    exit handler, not the directory)."""
    if os.getpid() == owner:
        shutil.rmtree(path, ignore_errors=True)


#: Length of the record key (raw bytes, sent after the nonce; resultplugin.KEY_BYTES).
KEY_BYTES = 32
#: The environment variable that names the channel's socket for the plugin.
SOCKET_VAR = "MINISANDBOX_RESULTS_SOCK"
#: The socket's name in the channel's directory.
SOCKET_NAME = "results.sock"
#: Where a sandbox sees the channel's directory (a read-only bind: connecting to a socket
#: needs no write access to its mount).
SANDBOX_CHANNEL_DIR = "/run/minisandbox/channel"


class ResultsChannel:
    """The controller's end of one run's results channel.

    A listening Unix socket in a private directory (`dir`), not an inherited descriptor:
    a runner between the test command and pytest (tox starts `python -m pytest` with every
    descriptor but 0-2 closed) would cut an inherited one, and the run would be graded from
    its log alone. The first connection gets the nonce and the manifest; the listener is
    then closed and its path removed, so nothing that runs later (repository code, a
    nested pytest) can connect. The plugin connects at import, before any repository
    code runs. A thread reads the plugin's records until every copy of the connection is
    closed. Give the test command `socket_path(dir)`, `collect()` after the run.
    """

    def __init__(self, manifest: Mapping[str, object] | None = None) -> None:
        self.nonce = secrets.token_hex(16)
        # the key the plugin authenticates its records with (verify_records), raw bytes
        # after the nonce: read by the plugin at import, wiped there once its HMAC state
        # is made, never written back
        self._key = secrets.token_bytes(KEY_BYTES)
        # the manifest (minisandbox.grading.gradedstate.GradedState.manifest) follows:
        # the plugin reads all three at import, before any repository code runs
        line, self._unsent = _manifest_line(dict(manifest or {}))
        self._hello = (self.nonce + "\n").encode() + self._key + line
        base = tempfile.gettempdir()
        if len(base) > 60:  # a socket's path has at most 107 bytes
            base = "/tmp"
        self.dir = tempfile.mkdtemp(prefix="minisandbox-channel-", dir=base)
        os.chmod(self.dir, 0o755)  # a rootless sandbox's payload or a test user connects too
        self.path = os.path.join(self.dir, SOCKET_NAME)
        self._listener: socket.socket | None = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(self.path)
        os.chmod(self.path, 0o777)
        self._listener.listen(1)
        self._conn: socket.socket | None = None
        self._accepted = threading.Event()
        self._lock = threading.Lock()
        self._chunks: list[bytes] = []
        self._flooded = False  # more than CHANNEL_MAX bytes came: the rest was refused
        self._thread = threading.Thread(target=self._serve, name="minisandbox-results", daemon=True)
        self._thread.start()

    def socket_path(self, directory: str | None = None) -> str:
        """The socket's path as the test command sees it: here, or in `directory` where
        a sandbox binds `dir`."""
        return self.path if directory is None else f"{directory}/{SOCKET_NAME}"

    def _stop_listening(self) -> None:
        with self._lock:
            listener, self._listener = self._listener, None
        if listener is not None:
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)  # wakes the accept
            listener.close()
        with contextlib.suppress(OSError):
            os.unlink(self.path)

    def _serve(self) -> None:
        listener = self._listener
        if listener is None:
            return
        try:
            conn, _ = listener.accept()
        except OSError:  # closed before anyone connected
            return
        finally:
            self._stop_listening()
        self._conn = conn
        self._accepted.set()
        try:
            conn.sendall(self._hello)
            kept = 0
            while True:
                data = conn.recv(1 << 16)
                if not data:
                    return
                kept += len(data)
                if kept > CHANNEL_MAX:  # the writer gets EPIPE rather than blocking to its timeout
                    self._flooded = True
                    conn.shutdown(socket.SHUT_RDWR)
                    return
                self._chunks.append(data)
        except OSError:
            return

    def collect(self, timeout: float = 10.0) -> str:
        """The plugin's records, checked (`verify_records`) and tagged with the nonce, as
        JSON lines for `parse_channel`; waits up to `timeout` s for the writers to close
        (none when nobody connected: the test command has ended)."""
        self._stop_listening()
        if self._accepted.is_set():
            self._thread.join(timeout)
            with contextlib.suppress(OSError):
                if self._conn is not None:
                    self._conn.shutdown(socket.SHUT_RDWR)
        self._thread.join(1.0)
        out = verify_records(b"".join(self._chunks), self._key, self.nonce)
        if self._unsent:
            out += json.dumps({"ev": "tampered", "what": self._unsent, "critical": True, "n": self.nonce}) + "\n"
        if self._flooded:
            what = f"over {CHANNEL_MAX} bytes came on the results channel: the rest was refused"
            out += json.dumps({"ev": "tampered", "what": what, "critical": True, "n": self.nonce}) + "\n"
        return out

    def close(self) -> None:
        self._stop_listening()
        if self._conn is not None:
            self._conn.close()
        with contextlib.suppress(OSError):
            os.rmdir(self.dir)

    def __enter__(self) -> ResultsChannel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _manifest_line(manifest: dict[str, object]) -> tuple[bytes, str]:
    """The manifest as the plugin reads it (one JSON line of at most MANIFEST_MAX bytes),
    and what it could not carry that voids the run ("" when nothing). Too large, the
    graded files' digests go first: the plugin then trusts no test file by content
    (checks by path remain). The paths the patch names cannot go: without them the
    plugin takes the patch's code for the repository's (its hooks allowed, its classes
    never probed), so a patch that names megabytes of paths nothing has was resolved with
    a class that equals anything (tests/security/test_reward_hacks_patch_paths.py); such a
    run is `results-tampered` instead (collect adds the finding)."""
    line = (json.dumps(manifest, sort_keys=True) + "\n").encode()
    if len(line) <= MANIFEST_MAX:
        return line, ""
    line = (json.dumps({k: v for k, v in manifest.items() if k != "files"}, sort_keys=True) + "\n").encode()
    if len(line) <= MANIFEST_MAX:
        return line, ""
    return b"{}\n", (
        f"results manifest over {MANIFEST_MAX} bytes: the patch names {len(manifest.get('patched') or [])} "
        "paths, too many to tell the plugin which code is the patch's"
    )


def verify_records(raw: bytes, key: bytes, nonce: str) -> str:
    """The plugin's records as `parse_channel` reads them, each checked first.

    Code under test shares the plugin's process and can rewire its descriptors: dup2 a
    pipe over the channel and relay what the plugin writes, turning FAILED into PASSED
    (tests/security/test_channel_relay.py). It never sees the key (the plugin read it at
    import, before any repository code ran), so each record carries `<hmac> <json>`, and
    `p`/`q` (the writing process, its running count): a record that does not verify, or
    a count that skips, repeats or goes back (a record dropped, replayed or reordered),
    adds a critical `tampered` record. A process's first record may have any count (a
    fork, as pytest-forked makes, continues its parent's), except the first process's,
    which starts at 0. A last line without its newline (a writer killed mid-write) is
    dropped: a test without its teardown record does not pass (`parse_channel`)."""
    import hashlib
    import hmac

    out: list[str] = []
    bad: list[str] = []
    expect: dict[object, int] = {}
    lines = raw.split(b"\n")
    lines.pop()  # b"" after the last newline, or a record cut off mid-write
    for number, line in enumerate(lines, 1):
        mac, _, body = line.partition(b" ")
        want = hmac.new(key, body, hashlib.sha256).hexdigest().encode("ascii")
        try:
            rec = json.loads(body) if hmac.compare_digest(mac, want) else None
        except ValueError:
            rec = None
        if not isinstance(rec, dict) or not isinstance(rec.get("q"), int):
            bad.append(f"line {number} is not a record of the results plugin")
            continue
        pid, count = rec.get("p"), rec["q"]
        first = expect.get(pid, 0 if not expect else count)
        if count != first:
            bad.append(f"line {number}: record {count} of process {pid} where {first} was due")
        expect[pid] = count + 1
        out.append(json.dumps({**rec, "n": nonce}, sort_keys=True))
    if bad:
        what = f"results channel altered: {bad[0]}" + (f" ({len(bad)} such lines)" if len(bad) > 1 else "")
        out.append(json.dumps({"ev": "tampered", "what": what, "critical": True, "n": nonce}))
    return "".join(f"{line}\n" for line in out)


@dataclass
class Channel:
    """What the plugin reported for one run (records without this run's nonce ignored)."""

    present: bool = False  # the plugin said hello with this run's nonce
    complete: bool = False  # ... and reported the end of the session
    statuses: StatusMap = field(default_factory=dict)  # node id -> worst status over its phases
    exit_status: int | None = None
    collected: int | None = None
    forged: dict[str, str] = field(default_factory=dict)  # node id -> how the report lied
    tampered: list[str] = field(default_factory=list)  # what the plugin's checks found during the run
    critical: list[str] = field(default_factory=list)  # ... of those, the ones that void the verdict
    checks: dict[str, object] = field(default_factory=dict)  # what the plugin checked (its hello)
    foreign: int = 0  # lines that were not this run's records
    worker_reports: int = 0  # phases taken from pytest-xdist workers' reports (not recomputed)
    unfinished: list[str] = field(default_factory=list)  # tests with no teardown record (failed)

    def summary(self) -> dict[str, object]:
        """The report's `results_channel` block."""
        out: dict[str, object] = {"present": self.present, "complete": self.complete}
        if self.present:
            out.update(tests=len(self.statuses), collected=self.collected, exit_status=self.exit_status)
        for key in ("forged", "tampered", "critical", "foreign", "worker_reports", "unfinished"):
            value = getattr(self, key)
            if value:
                out[key] = value
        return out


def parse_channel(text: str | None, nonce: str | None) -> Channel:
    """Read the plugin's JSON lines; only records carrying `nonce` count."""
    ch = Channel()
    if not text or not nonce:
        return ch
    finished: set[str] = set()
    for line in text.splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            ch.foreign += 1
            continue
        if not isinstance(rec, dict) or rec.get("n") != nonce:
            ch.foreign += 1
            continue
        ev = rec.get("ev")
        if ev == "hello":
            ch.present = True
            if isinstance(rec.get("checks"), dict):
                ch.checks = rec["checks"]
        elif ev == "phase" and isinstance(rec.get("id"), str):
            status = rec.get("status")
            if isinstance(status, str):
                record(ch.statuses, rec["id"], status)
            if rec.get("when") == "teardown":
                finished.add(rec["id"])
            if rec.get("forged"):
                ch.forged.setdefault(rec["id"], str(rec["forged"]))
            if rec.get("worker"):
                ch.worker_reports += 1
        elif ev == "tampered" and isinstance(rec.get("what"), str):
            if rec["what"] not in ch.tampered:
                ch.tampered.append(rec["what"])
            if rec.get("critical") and rec["what"] not in ch.critical:
                ch.critical.append(rec["what"])
        elif ev == "end":
            ch.complete = True
            if isinstance(rec.get("exitstatus"), int):
                ch.exit_status = rec["exitstatus"]
            if isinstance(rec.get("collected"), int):
                ch.collected = rec["collected"]
    # a test passes only once its teardown was reported: a run cut short during its call
    # (os._exit, a kill) or a record lost on the way leaves only its setup's PASSED
    for test_id in ch.statuses:
        if test_id not in finished:
            record(ch.statuses, test_id, "FAILED")
            ch.unfinished.append(test_id)
    return ch


#: unittest's verbose result word per status (what `channel_status_map` prints).
_UNITTEST_WORDS = {
    "PASSED": "ok",
    "FAILED": "FAIL",
    "ERROR": "ERROR",
    "SKIPPED": "skipped",
    "XFAIL": "expected failure",
    "XPASS": "unexpected success",
}
_UNITTEST_HEADERS = {"FAILED": "FAIL", "ERROR": "ERROR"}
#: Ids the Django parser takes from text that is not a result line (SWE-bench's rule for
#: a test that prints argparse's message): the channel cannot confirm them, the log decides,
#: except for a test that must turn from failing to passing (`merge`'s `confirm`).
LOG_ONLY_IDS = frozenset({"--version is equivalent to version"})


#: SymPy's runner's verbose result word per status (what `channel_status_map` prints).
_SYMPY_WORDS = {"PASSED": "ok", "FAILED": "F", "ERROR": "E", "SKIPPED": "s", "XFAIL": "f", "XPASS": "X"}


def channel_status_map(ch: Channel, log_parser: str) -> StatusMap:
    """The channel's statuses with ids as `log_parser` would write them (the same id
    normalisation as the log, e.g. pytest_options' basename-only path parameters; for
    unittest, the description's docstring line when it has one; for SymPy, whose ids are
    `file.py:test_name`, the runner's `test_name ok` line and, for a failure, its
    `___ file.py:test_name ___` header)."""
    runner = channel_runner(log_parser)
    if runner == "sympy":
        lines = []
        for test_id, status in ch.statuses.items():
            name = test_id.rpartition(":")[2]
            lines.append(f"{name} {_SYMPY_WORDS.get(status, 'E')}")
            if status in ("FAILED", "ERROR", "XPASS"):
                lines.append(f"{'_' * 10} {test_id} {'_' * 10}")
    elif runner == "unittest":
        lines = [f"{test_id} ... {_UNITTEST_WORDS.get(status, 'ERROR')}" for test_id, status in ch.statuses.items()]
        # the failure section's headers, from which the parser takes ids too
        lines += [
            f"{_UNITTEST_HEADERS[status]}: {test_id}"
            for test_id, status in ch.statuses.items()
            if status in _UNITTEST_HEADERS
        ]
    else:
        lines = (f"{test_id} {status}" for test_id, status in ch.statuses.items())
    return get_parser(log_parser)("\n".join(lines))


def merge(log_map: Mapping[str, str], ch: Channel, log_parser: str, confirm: Collection[str] = ()) -> StatusMap:
    """Per test the worse of the log's and the channel's status; a test the log lists and
    the channel does not failed (the run ended before the plugin saw it, or the line was
    printed by something other than pytest). `confirm` (the FAIL_TO_PASS tests): ids the
    log alone never passes, LOG_ONLY_IDS included: any code can print a line, and a
    listed test that the log alone decided passed for a `print` in the patch."""
    chan = channel_status_map(ch, log_parser)
    out: StatusMap = {}
    for test_id, status in log_map.items():
        record(out, test_id, status)
        if test_id not in LOG_ONLY_IDS or test_id in confirm:
            record(out, test_id, chan.get(test_id, "FAILED"))
    for test_id, status in chan.items():
        record(out, test_id, status)
    return out


def applies(log_parser: str) -> bool:
    """True when runs of `log_parser`'s runner carry a results channel."""
    return bool(channel_runner(log_parser))
