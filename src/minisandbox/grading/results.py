"""The results channel: per-test outcomes from the pytest plugin, cross-checked with the log.

Why: the test runner shares its process with the code under test, so whatever pytest
prints can be forged by a candidate patch (patch the report objects so failures print as
passes; print fake `PASSED` lines past pytest's capture and `os._exit(0)`). The plugin
`minisandbox.grading.resultplugin` is loaded before any repository code, computes each
test's status from the exception itself and writes it, tagged with a per-run nonce it
alone read, to a socket that is not the log. Grading then believes a pass only when the
log *and* the channel say so (`merge`): a test the channel does not list (the run was
cut short) fails, a status the channel saw as worse than the log wins.

Pytest-based parsers only: other runners (Django's, sympy's) print no channel and are
graded from the log alone (`Channel.present` False).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import tempfile
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from minisandbox.grading.logparsers import StatusMap, get_parser, record
from minisandbox.logformats import PYTEST_PARSERS  # the channel's ids are pytest node ids

#: The plugin's module name inside the environment under test (`-p` takes a module name).
RESULTS_PLUGIN = "_minisandbox_results"
#: Largest manifest sent to the plugin (the plugin reads at most this much).
MANIFEST_MAX = 8 << 20
#: Where a sandbox sees the plugin (a read-only bind of `plugin_file()`).
SANDBOX_RESULTS_DIR = "/run/minisandbox/results"


def plugin_file() -> Path:
    """The plugin's source (`minisandbox.grading.resultplugin`)."""
    return Path(__file__).with_name("resultplugin.py")


_plugin_dir: Path | None = None
_plugin_lock = threading.Lock()


def plugin_dir() -> Path:
    """A directory holding only the plugin, under its import name, for host runs (one
    per process; the test command gets it first on PYTHONPATH)."""
    global _plugin_dir
    with _plugin_lock:
        if _plugin_dir is None or not (_plugin_dir / f"{RESULTS_PLUGIN}.py").is_file():
            d = Path(tempfile.mkdtemp(prefix="minisandbox-results-"))
            shutil.copyfile(plugin_file(), d / f"{RESULTS_PLUGIN}.py")
            os.chmod(d, 0o755)
            _plugin_dir = d
        return _plugin_dir


class ResultsChannel:
    """The controller's end of one run's results socket.

    A stream socketpair: the nonce is written into it before the run, so the plugin reads
    (and consumes) it first; a thread then reads the plugin's records until every copy
    of the other end is closed. Pass `child_fd` to the test command, `release_child()`
    once it is started, `collect()` after the run.
    """

    def __init__(self, manifest: Mapping[str, object] | None = None) -> None:
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self.nonce = secrets.token_hex(16)
        # the manifest (minisandbox.grading.gradedstate.GradedState.manifest) follows the
        # nonce: the plugin reads both at import, before any repository code runs
        mine.sendall((self.nonce + "\n").encode())
        line = (json.dumps(dict(manifest or {}), sort_keys=True) + "\n").encode()
        if len(line) > MANIFEST_MAX:
            line = b"{}\n"  # the plugin then trusts no test file by content (checks by path remain)
        if len(line) <= 1 << 15:
            mine.sendall(line)
        else:  # more than a socket buffer holds before anyone reads: the plugin reads it at import
            threading.Thread(target=self._send, args=(mine, line), name="minisandbox-manifest", daemon=True).start()
        self._sock = mine
        self.child_fd: int | None = theirs.detach()
        self._chunks: list[bytes] = []
        self._thread = threading.Thread(target=self._read, name="minisandbox-results", daemon=True)
        self._thread.start()

    @staticmethod
    def _send(sock: socket.socket, data: bytes) -> None:
        try:
            sock.sendall(data)
        except OSError:
            pass

    def _read(self) -> None:
        try:
            while True:
                data = self._sock.recv(1 << 16)
                if not data:
                    return
                self._chunks.append(data)
        except OSError:
            return

    def release_child(self) -> None:
        """Close the controller's copy of the test command's end (then EOF means the
        test processes are gone)."""
        if self.child_fd is not None:
            os.close(self.child_fd)
            self.child_fd = None

    def collect(self, timeout: float = 10.0) -> str:
        """Everything the plugin wrote; waits up to `timeout` s for the writers to close."""
        self.release_child()
        self._thread.join(timeout)
        self._sock.shutdown(socket.SHUT_RDWR)
        self._thread.join(1.0)
        return b"".join(self._chunks).decode("utf-8", "replace")

    def close(self) -> None:
        self.release_child()
        self._sock.close()

    def __enter__(self) -> ResultsChannel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


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

    def summary(self) -> dict[str, object]:
        """The report's `results_channel` block."""
        out: dict[str, object] = {"present": self.present, "complete": self.complete}
        if self.present:
            out.update(tests=len(self.statuses), collected=self.collected, exit_status=self.exit_status)
        for key in ("forged", "tampered", "critical", "foreign", "worker_reports"):
            value = getattr(self, key)
            if value:
                out[key] = value
        return out


def parse_channel(text: str | None, nonce: str | None) -> Channel:
    """Read the plugin's JSON lines; only records carrying `nonce` count."""
    ch = Channel()
    if not text or not nonce:
        return ch
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
    return ch


def channel_status_map(ch: Channel, log_parser: str) -> StatusMap:
    """The channel's statuses with ids as `log_parser` would write them (the same id
    normalisation as the log, e.g. pytest_options' basename-only path parameters)."""
    text = "\n".join(f"{test_id} {status}" for test_id, status in ch.statuses.items())
    return get_parser(log_parser)(text)


def merge(log_map: Mapping[str, str], ch: Channel, log_parser: str) -> StatusMap:
    """Per test the worse of the log's and the channel's status; a test the log lists and
    the channel does not failed (the run ended before the plugin saw it, or the line was
    printed by something other than pytest)."""
    chan = channel_status_map(ch, log_parser)
    out: StatusMap = {}
    for test_id, status in log_map.items():
        record(out, test_id, status)
        record(out, test_id, chan.get(test_id, "FAILED"))
    for test_id, status in chan.items():
        record(out, test_id, status)
    return out


def applies(log_parser: str) -> bool:
    return log_parser in PYTEST_PARSERS
