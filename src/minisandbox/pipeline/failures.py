"""Failures of pipeline steps: classified (transient or permanent), retried, recorded.

A failed step is a *result*, not a Snakemake failure: the failure is recorded in the
step's status file (`minisandbox.status`: error + log + cause) and flows downstream to the
index, so one broken environment never stops the others and a rerun with nothing changed
runs zero jobs. This module decides what is worth retrying and words the one-line error.
"""

from __future__ import annotations

import contextlib
import errno
import re
import resource
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from minisandbox.status import StageStatus, read_status

T = TypeVar("T")


def first_failure(*paths: Path) -> StageStatus | None:
    """The first failed upstream status among `paths`, so a step can pass the failure on."""
    for p in paths:
        st = read_status(p)
        if not st.ok:
            return st
    return None


def one_line(text: str, limit: int = 300) -> str:
    """Last meaningful line of an error output, for the index and the run report (a tool's
    closing `hint:` is advice, not the error)."""
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    lines = [ln for ln in lines if not ln.startswith("hint:")] or lines
    if not lines:
        return "failed without output"
    line = lines[-1]
    return line if len(line) <= limit else line[: limit - 3] + "..."


#: Attempts of one step (the first and the retries) before a transient failure is recorded.
ATTEMPTS = 3
#: Seconds before the n-th retry: n x RETRY_DELAY (a flaky mirror or index gets time to recover).
RETRY_DELAY = 5.0

_TRANSIENT_ERRNOS = frozenset(
    {
        errno.EIO,
        errno.ECONNRESET,
        errno.ECONNREFUSED,
        errno.ECONNABORTED,
        errno.ETIMEDOUT,
        errno.EHOSTUNREACH,
        errno.ENETUNREACH,
        errno.ENETDOWN,
        errno.ENETRESET,
        errno.EPIPE,
        errno.EAGAIN,
        errno.ESTALE,
    }
)
#: Exception types of the object-store and HTTP clients that mean "the network failed".
_TRANSIENT_TYPES = (
    "EndpointConnectionError",
    "ConnectTimeoutError",
    "ReadTimeoutError",
    "ConnectionClosedError",
    "ClientConnectorError",
    "ServerDisconnectedError",
    "IncompleteRead",
    "RemoteDisconnected",
)
#: What tools print (and steps pass on in their one-line errors) when the network, the disk
#: or the kernel failed them, not the build itself: git, uv, curl, tar and the shell.
_TRANSIENT_TEXT = re.compile(
    r"connection (?:reset|refused|aborted|timed out|closed)|temporary failure in name resolution|"
    r"could not resolve (?:host|proxy)|network is unreachable|no route to host|remote end hung up|early eof|"
    r"rpc failed|error sending request|failed to fetch|request failed after|input/output error|"
    r"stale file handle|killed by signal|\bsignal (?:9|15)\b|\bsigkill\b|\(exit -(?:9|15)\)|\(exit 137\)|"
    r"\b50[234] (?:service unavailable|bad gateway|gateway time-?out)\b|too many requests|slowdown",
    re.IGNORECASE,
)


def transient_cause(exc: BaseException) -> str | None:
    """Why `exc` is worth retrying (a network error, an I/O error, a tool killed by a
    signal), or None when running the step again would fail the same way (a bad spec, a
    package that does not build, a missing commit)."""
    seen: set[int] = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, (ConnectionError, TimeoutError)) or type(e).__name__ in _TRANSIENT_TYPES:
            return f"network error ({type(e).__name__})"
        if isinstance(e, OSError) and e.errno in _TRANSIENT_ERRNOS:
            return f"I/O error ({errno.errorcode.get(e.errno or 0, e.errno)})"
        if isinstance(e, subprocess.CalledProcessError) and e.returncode < 0:
            return f"tool killed by signal {-e.returncode}"
        m = _TRANSIENT_TEXT.search(str(e))
        if m:
            return f"transient: {m.group(0)}"
        e = e.__cause__ or e.__context__
    return None


def _cpu_seconds() -> float:
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


@contextlib.contextmanager
def step_cpu(stage: str, key: str) -> Iterator[None]:
    """One line on stderr (the job's log) with the CPU seconds of this process and the
    tools it waited for while the step ran: where a job's CPU goes, step by step
    (`bench/bench_pipeline.py --main-job` adds them up; the rule's `benchmark:` has the
    job's total). Costs two getrusage calls."""
    cpu0, wall0 = _cpu_seconds(), time.monotonic()
    try:
        yield
    finally:
        print(
            f"# cpu {stage} {key}: {_cpu_seconds() - cpu0:.2f} s CPU, {time.monotonic() - wall0:.2f} s wall",
            file=sys.stderr,
            flush=True,
        )


def retrying(
    stage: str, key: str, log: Path | None, fn: Callable[[], T]
) -> tuple[T | None, BaseException | None, dict[str, Any]]:
    """Run `fn`, again after a transient failure (`transient_cause`), at most `ATTEMPTS`
    times. Returns (result, None, cause) or (None, the last exception, cause), where cause
    is `{"kind": "transient"|"permanent", "detail", "attempts"}` ({"attempts"} on success).
    Every failed attempt's traceback goes to `log`. Safe for the pipeline's steps: each one
    writes its output atomically, so a retry starts from a clean state."""
    for attempt in range(1, ATTEMPTS + 1):
        try:
            with step_cpu(stage, key):
                return fn(), None, {"attempts": attempt}
        except Exception as exc:  # classified below: retried or returned to be recorded
            cause = transient_cause(exc)
            last = attempt == ATTEMPTS or cause is None
            if log is not None:
                Path(log).parent.mkdir(parents=True, exist_ok=True)
                with Path(log).open("a") as fh:
                    fh.write(
                        f"\n# {stage} {key} failed (attempt {attempt}/{ATTEMPTS}"
                        f"{', ' + cause if cause else ', not transient'}"
                        f"{'' if last else f'; retrying in {RETRY_DELAY * attempt:g} s'})\n"
                        f"{traceback.format_exc()}"
                    )
            if last:
                return (
                    None,
                    exc,
                    {
                        "kind": "transient" if cause else "permanent",
                        "detail": cause or type(exc).__name__,
                        "attempts": attempt,
                    },
                )
            time.sleep(RETRY_DELAY * attempt)
    raise AssertionError("unreachable")  # pragma: no cover - the loop always returns


def failure_message(stage: str, exc: BaseException, cause: dict[str, Any]) -> str:
    """The one-line error of a failed step: what failed and, for a transient failure, that
    it was retried (so a reader knows a rerun with `retry_failed` may well succeed)."""
    msg = f"{stage}: {one_line(str(exc))}"
    if cause.get("kind") == "transient":
        msg += f" ({cause['detail']}; gave up after {cause['attempts']} attempts)"
    return msg
