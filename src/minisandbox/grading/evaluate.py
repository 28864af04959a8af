"""Evaluate candidate patches: one fresh environment per evaluation, never the agent's.

An `Executor` runs the generated eval script (`minisandbox.grading.evalscript`) in a fresh copy of
the task's environment and returns the output; grading (`minisandbox.grading.grading`) turns the
output into a SWE-bench report. The executors:

* `SandboxExecutor` - the production path: a new `minisandbox.sandbox.sandbox` per evaluation,
  built from the restored layers of the published store (`minisandbox.node.runtime.prepare`);
* `LayerExecutor` - the same for a known pair of manifests (validation, before the index
  is published).

Tests and benches add a plain host venv without isolation and a sandbox over layers already
on the node (tests/fixtures/hostvenv.py), over the public `run_bash` and `SandboxEnv`.

`run_eval` evaluates a predictions file in parallel (a worker limit), writes a report per
instance and a SWE-bench run summary, resumes from existing reports and prints progress.
"""

from __future__ import annotations

import contextlib
import datetime
import functools
import hashlib
import json
import os
import shlex
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from minisandbox.catalog import EnvSpec
from minisandbox.errors import MinisandboxError
from minisandbox.fsutil import atomic_write_text
from minisandbox.grading.evalscript import (
    EvalScript,
    keyword_selection,
    modified_and_new_files,
    strip_conda_activation,
    support_paths,
    swebench_test_directives,
    test_files_of,
    whole_suite_command,
)
from minisandbox.grading.gradedstate import graded_state, read_snapshot_file
from minisandbox.grading.grading import Reason, dumps, make_report, make_run_summary, swebench_view
from minisandbox.grading.official import GradingMode, check_official
from minisandbox.grading.results import (
    RESULTS_PLUGIN,
    SANDBOX_CHANNEL_DIR,
    SANDBOX_RESULTS_DIR,
    SOCKET_VAR,
    SYMPY_STARTUP,
    ResultsChannel,
    plugin_file,
)
from minisandbox.logformats import channel_runner
from minisandbox.paths import REPO_PATH, TEST_PYCS_DIR, VENV_PATH
from minisandbox.progress import Progress
from minisandbox.records import INSTANCE_ID, TaskRecord, changed_by, task_test_files
from minisandbox.sandbox.sandbox import ExecResult


class EvalRun(ExecResult):
    """An eval script's run plus what the results plugin reported on its own channel
    (minisandbox.grading.results); `results_nonce` is "" when there was no channel."""

    def __init__(self, *args: Any, results: str = "", results_nonce: str = "", **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.results = results
        self.results_nonce = results_nonce


class Environment(Protocol):
    """One fresh environment for one evaluation (opened by an `Executor`)."""

    reference_dir: Path  # host dir with the clean snapshot (SWE-smith: profile commit; SWE-bench: base commit)

    def execute(self, script: EvalScript, timeout: float, stop: StopSignal | None = None) -> ExecResult:
        """Run `script` (after filling in repo_dir/prelude as this environment needs);
        give up after `timeout` seconds (timed_out=True). With `stop`, what runs is
        registered with it (`StopSignal.running`) so that stopping the run kills it."""
        ...


class Executor(Protocol):
    """Opens a fresh environment holding one task's repo and venv.

    `prepares_task_state`: True when the environment already starts in the task's start
    state (SWE-smith: bug applied, FAIL_TO_PASS test files removed); otherwise the eval
    script sets it up from the clean snapshot first.
    """

    prepares_task_state: bool

    def open(self, record: TaskRecord) -> AbstractContextManager[Environment]: ...


# --------------------------------------------------------------------------- planning


def _read_reference(ref: Path, rel: str) -> bytes | None:
    """`rel` of the snapshot, or None; never a host file outside it (`read_snapshot_file`:
    `rel` is the task record's, the layer's symlinks are the store's)."""
    return read_snapshot_file(ref, rel)


def plan_script(
    record: TaskRecord,
    spec: EnvSpec,
    patch: str | None,
    reference: Path,
    *,
    reverse: bool = False,
    setup_task_state: bool = False,
    select: list[str] | None = None,
) -> EvalScript:
    """The eval script for `patch` on `record` (patch None: the task state, untouched).

    SWE-smith/bundled: the reference test files are every file named by FAIL_TO_PASS and
    PASS_TO_PASS, taken from the clean snapshot, and the test command runs those files.
    SWE-bench: the files the test patch changes are reset to the base commit, files it
    creates are removed, then the test patch is applied; the command runs its directives.
    `select` (SWE-smith/bundled, pytest node ids): run exactly these tests, not their files.
    """
    tests = list(record.fail_to_pass) + list(record.pass_to_pass)
    script = EvalScript(test_cmd=spec.test_cmd, timeout=int(spec.timeout), patch=patch, reverse=reverse)
    script.results_runner = channel_runner(spec.log_parser)
    script.editable = support_paths(record.patch or "")
    eval_commands = spec.extra.get("eval_commands") or []
    if eval_commands:
        script.prelude = "\n".join(str(c) for c in eval_commands)
    if record.format == "swebench":
        modified, new = modified_and_new_files(record.test_patch)
        script.reference_files = {m: _read_reference(reference, m) for m in modified}
        script.reference_files.update({n: None for n in new})
        script.test_patch = record.test_patch
        script.test_args = swebench_test_directives(record.test_patch, record.repo)
        # SWE-bench's own P2P tests live in the test patch's files; records whose lists
        # name other files (e.g. labelled over the whole suite) get those files run too
        if tests and all("::" in t for t in tests):
            script.test_args += [f for f in test_files_of(tests) if f not in script.test_args]
    else:
        files = suite_order(test_files_of(tests), files_first=(spec.pinned_major("pytest") or 8) < 8)
        script.reference_files = {f: _read_reference(reference, f) for f in task_test_files(tests, record.patch)}
        if tests and all("::" in t for t in tests):
            script.test_args = keyword_selection(spec.test_cmd, tests) or list(select or files)
        else:
            script.test_cmd = whole_suite_command(spec.test_cmd)
        if setup_task_state:
            script.setup_patch = record.patch
            script.setup_remove = task_test_files(list(record.fail_to_pass), record.patch)
    return script


def suite_order(files: list[str], *, files_first: bool = False) -> list[str]:
    """`files` in the order pytest collects them from the whole suite, not the order the
    test lists name them: the task was labelled from a run of the whole suite, and a suite
    whose tests leave state behind (freezegun's `test_utils.py` reloads `freezegun.api`
    under a mocked interpreter) failed ten PASS_TO_PASS tests when the FAIL_TO_PASS files
    ran first. pytest 8 takes each directory's entries by name, files and subdirectories
    alike; pytest 7 and older (`files_first`) take a directory's files, then descend into
    its subdirectories."""
    if files_first:
        return sorted(files, key=lambda f: [(1, d) for d in f.split("/")[:-1]] + [(0, f.rsplit("/", 1)[-1])])
    return sorted(files, key=lambda f: f.split("/"))


# --------------------------------------------------------------------------- one evaluation


@dataclass
class Evaluation:
    """One graded run: the report, the raw output and the script that produced it."""

    instance_id: str
    report: dict[str, Any]
    output: str
    script: str
    seconds: float

    @property
    def entry(self) -> dict[str, Any]:
        return self.report[self.instance_id]

    @property
    def resolved(self) -> bool:
        return bool(self.entry["resolved"])

    @property
    def reason(self) -> str:
        return str(self.entry["reason"])

    @property
    def reward(self) -> float:
        """The RL reward: 1.0 only when resolved (no partial credit, see docs/grading.md)."""
        return 1.0 if self.resolved else 0.0

    @property
    def status_map(self) -> dict[str, str]:
        return dict(self.entry.get("status_map") or {})

    @property
    def critical(self) -> list[str]:
        """The results channel's critical findings (what makes a run `results-tampered`),
        also where the reason stayed another (a run with no FAIL_TO_PASS list)."""
        channel = self.entry.get("results_channel") or {}
        return [str(x) for x in channel.get("critical") or []]


def evaluate(
    record: TaskRecord,
    spec: EnvSpec,
    patch: str | None,
    executor: Executor,
    *,
    reverse: bool = False,
    apply_patch: bool = True,
    grading: str = "strict",
    stop: StopSignal | None = None,
    select: list[str] | None = None,
) -> Evaluation:
    """Evaluate `patch` for `record` in a fresh environment from `executor`.

    `apply_patch=False` runs the task state itself (validation's "before" run; `patch`
    is ignored). An empty or missing patch is reported without running anything.
    `grading`: "strict" (default) or "official" (minisandbox.grading.official).
    `stop`: a run's StopSignal; once stopped, nothing starts (`Cancelled`) and what runs
    is killed (the caller then discards the result). `select`: see `plan_script`.
    """
    mode = {"grading": grading, "task_format": record.format}
    iid = record.instance_id
    if grading == GradingMode.OFFICIAL.value:
        check_official([(record, spec)])  # a log the harness cannot read is refused, not graded unresolved
    if apply_patch and not (patch and patch.strip()):
        rep = make_report(
            iid,
            patch,
            "",
            fail_to_pass=record.fail_to_pass,
            pass_to_pass=record.pass_to_pass,
            log_parser=spec.log_parser,
            **mode,
        )
        return Evaluation(iid, rep, "", "", 0.0)
    t0 = time.monotonic()
    try:
        with executor.open(record) as env:
            if stop is not None:
                stop.check()
            script = plan_script(
                record,
                spec,
                patch if apply_patch else None,
                env.reference_dir,
                reverse=reverse,
                setup_task_state=not executor.prepares_task_state,
                select=select,
            )
            listed = [*record.fail_to_pass, *record.pass_to_pass]
            # (a file the task's patch changes is code under test, not a test file: its doctests' ids)
            tests = [t for t in listed if not changed_by(record.patch, t.split("::", 1)[0])]
            # its doctests are held to the snapshot's examples where the snapshot is the fixed
            # code (SWE-bench's gold patch may change them with the code)
            doctests = [t for t in listed if t not in tests] if record.format != "swebench" else []
            graded = graded_state(script, env.reference_dir, tests, doctests)
            script.graded_manifest = graded.manifest(script.repo_dir)
            # the script's own timeout guards the tests; this one guards set-up and a stuck sandbox
            if stop is not None:
                result = env.execute(script, timeout=script.timeout + 120, stop=stop)
            else:
                result = env.execute(script, timeout=script.timeout + 120)
            text = result.script or script.render()
    except Cancelled:
        raise
    except Exception as exc:  # a broken environment must not stop the other evaluations
        rep = make_report(
            iid,
            patch,
            "",
            fail_to_pass=record.fail_to_pass,
            pass_to_pass=record.pass_to_pass,
            log_parser=spec.log_parser,
            error=f"{type(exc).__name__}: {exc}",
            apply_patch=apply_patch,
            **mode,
        )
        return Evaluation(iid, rep, "", "", time.monotonic() - t0)

    def graded_report(native: dict[str, str] | None = None) -> dict[str, Any]:
        return make_report(
            iid,
            patch,
            result.output,
            fail_to_pass=record.fail_to_pass,
            pass_to_pass=record.pass_to_pass,
            log_parser=spec.log_parser,
            nonce=script.nonce,
            timed_out=result.timed_out,
            apply_patch=apply_patch,
            results=getattr(result, "results", None),
            results_nonce=getattr(result, "results_nonce", None) or None,
            xfail_marked=graded.xfail_marked,
            native=native,
            **mode,
        )

    rep = graded_report()
    forged = _forged_findings(rep[iid]) if apply_patch else {}
    if forged:  # rare outside libraries whose comparisons build expressions: no cost otherwise
        native = _native_comparisons(record, spec, executor, forged, stop)
        if native:
            rep = graded_report(native)
    if result.cause:  # a limit, a signal or a timeout ended the run (ExecResult.cause)
        rep[iid]["cause"] = result.cause
    return Evaluation(iid, rep, result.output, text, time.monotonic() - t0)


_FORGED = "runtime: tampered: forged comparison: "
REPROBE_MARKER = "MINISANDBOX-NATIVE-COMPARISON"  # resultplugin.NATIVE_MARKER
#: The re-probe: the results plugin's module (on PYTHONPATH through the executor's channel
#: set-up, its channel itself unused) probes the named classes again
REPROBE_CMD = 'env -u MINISANDBOX_RESULTS_SOCK "$(command -v python || command -v python3)" -c ' + shlex.quote(
    f"import sys, {RESULTS_PLUGIN}; {RESULTS_PLUGIN}.reprobe_main(sys.argv[1:])"
)


def _forged_findings(entry: dict[str, Any]) -> dict[str, str]:
    """{critical finding: the probe's answer} for the run's critical forged comparisons."""
    return {
        line[len("runtime: tampered: ") :]: line[len(_FORGED) :]
        for line in entry.get("suspicious", [])
        if line.startswith(_FORGED)
    }


def _native_comparisons(
    record: TaskRecord, spec: EnvSpec, executor: Executor, forged: dict[str, str], stop: StopSignal | None
) -> dict[str, str]:
    """{critical finding: the same kind of answer at the graded state without the
    candidate patch}: the flagged classes probed again in a fresh environment of the task
    (the task state, no patch, no tests run: no candidate code). A finding the task state
    gives too is the library's own comparison semantics (docs/grading.md, "Values that
    compare equal to anything"). An environment that fails gives no downgrade."""
    try:
        with executor.open(record) as env:
            script = plan_script(
                record, spec, None, env.reference_dir, setup_task_state=not executor.prepares_task_state
            )
            activation = script.test_cmd[: len(script.test_cmd) - len(strip_conda_activation(script.test_cmd))]
            script.test_cmd = activation + REPROBE_CMD  # the environment as the tests get it
            script.test_args, script.scan_tree = sorted(set(forged.values())), False
            if stop is not None:
                result = env.execute(script, timeout=script.timeout + 120, stop=stop)
            else:
                result = env.execute(script, timeout=script.timeout + 120)
    except Cancelled:
        raise
    except Exception:
        return {}
    answers: dict[str, str] = {}
    for line in result.output.splitlines():
        if line.startswith(REPROBE_MARKER + " "):
            with contextlib.suppress(ValueError):
                got = json.loads(line[len(REPROBE_MARKER) + 1 :])
                answers = got if isinstance(got, dict) else {}
    return {what: str(answers[why]) for what, why in forged.items() if answers.get(why)}


# --------------------------------------------------------------------------- host executor


def _kill_session(sid: int) -> None:
    """SIGKILL every process of session `sid` (the script's process group, and the groups
    `timeout` and shells make of their own inside it), read from /proc."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(sid, signal.SIGKILL)
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                fields = fh.read().rsplit(b")", 1)[1].split()
            if int(fields[3]) == sid:  # field 6 (session), counted after "pid (comm)"
                os.kill(int(entry), signal.SIGKILL)
        except (OSError, IndexError, ValueError):
            continue


def run_bash(
    script: str,
    *,
    cwd: str,
    env: dict[str, str],
    timeout: float,
    stop: StopSignal | None = None,
) -> ExecResult:
    """Run a bash script in its own process group; kill the whole group on overrun (or
    when `stop` is stopped). The script is read whole before it runs (`eval "$(cat)"`),
    so nothing it starts can read the rest of it from the shell's stdin."""
    t0 = time.monotonic()
    proc = subprocess.Popen(
        ["/bin/bash", "-c", 'eval "$(cat)"'],
        cwd=cwd,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    guard = stop.running(lambda: _kill_session(proc.pid)) if stop is not None else contextlib.nullcontext()
    try:
        with guard:
            out, _ = proc.communicate(script.encode(), timeout=timeout)
        timed_out = False
    except Cancelled:
        _kill_session(proc.pid)
        proc.communicate()
        raise
    except subprocess.TimeoutExpired:
        _kill_session(proc.pid)
        out, _ = proc.communicate()
        timed_out = True
    return ExecResult(out.decode(errors="replace"), proc.returncode, timed_out, seconds=time.monotonic() - t0)


# --------------------------------------------------------------------------- sandbox executor


@dataclass
class SandboxEnv:
    reference_dir: Path
    layers: list[Any]  # minisandbox.sandbox.sandbox.Layer, from node.runtime.sandbox_layers
    interpreter: dict[str, str]
    options: dict[str, Any]

    def execute(self, script: EvalScript, timeout: float, stop: StopSignal | None = None) -> ExecResult:
        """Steps 1-5 as one script, read whole from stdin before it runs (never a file
        or a pipe a test could read); then the test command as a process of its own in a
        fresh pid namespace, with the results socket's directory bound in: it sees no ancestor (not the
        script's shell, not init), and the markers around its output are added here, not
        by a process the tests could inspect. `eval.sh` is the equivalent single script."""
        from minisandbox.sandbox.rootfs import Bind
        from minisandbox.sandbox.sandbox import Sandbox

        layers = list(self.layers)
        interp = (self.interpreter["version"], self.interpreter["prefix"]) if self.interpreter else None
        t0 = time.monotonic()
        script.results_dir = SANDBOX_RESULTS_DIR
        if script.repo_dir == REPO_PATH:  # the build rewrote them at this path
            script.test_pycs = f"{VENV_PATH}/{TEST_PYCS_DIR}"
        options = dict(self.options)
        truncated = False
        with ResultsChannel(script.results_manifest()) as channel:
            options["binds"] = [
                *options.get("binds", []),
                Bind(str(plugin_file()), f"{SANDBOX_RESULTS_DIR}/{RESULTS_PLUGIN}.py", True),
                # SymPy's runner: the same module as sitecustomize (results.SYMPY_STARTUP)
                Bind(str(plugin_file()), f"{SANDBOX_RESULTS_DIR}/{SYMPY_STARTUP}/sitecustomize.py", True),
                Bind(channel.dir, SANDBOX_CHANNEL_DIR, True),
            ]
            with (
                Sandbox(layers, interpreter=interp, **options) as sb,
                stop.running(sb.abort) if stop is not None else contextlib.nullcontext(),
            ):
                prep = sb.run(["bash", "-c", 'eval "$(cat)"'], input=script.render_prep().encode(), timeout=timeout)
                output, code, timed_out, truncated = prep.output, prep.returncode, prep.timed_out, prep.truncated
                cause = prep.cause
                if code == 0 and not timed_out:
                    t1 = time.monotonic()
                    res = sb.run(
                        script.test_argv(),
                        cwd=script.repo_dir,
                        env={SOCKET_VAR: channel.socket_path(SANDBOX_CHANNEL_DIR)},
                        timeout=max(1.0, timeout - (t1 - t0)),
                        pidns=True,
                    )
                    output += script.test_section(res.output, res.returncode, time.monotonic() - t1)
                    timed_out, truncated = res.timed_out, truncated or res.truncated
                    cause = res.cause
            results = channel.collect()
        return EvalRun(
            output,
            code,
            timed_out,
            truncated,
            seconds=time.monotonic() - t0,
            script=script.render(),
            cause=cause,
            results=results,
            results_nonce=channel.nonce,
        )


@dataclass
class SandboxExecutor:
    """A new `minisandbox.sandbox.sandbox.Sandbox` per evaluation over the task's restored layers
    (`minisandbox.node.runtime.prepare`: the store's index names the task's env and repo).
    Network: none. `options` are SandboxConfig fields (limits=..., scratch_dir=...)."""

    store: str | None = None
    cache: Any = None  # minisandbox.node.cache.Cache
    options: dict[str, Any] = field(default_factory=lambda: {"network": "none"})
    prepares_task_state: bool = False

    def layer_digests(self, record: TaskRecord) -> list[str]:
        """The sha256s of the task's layers (repo, env, interpreter) as the store's index
        names them now (`eval_inputs`)."""
        from minisandbox.node.runtime import task_layer_names

        return [",".join(names) for names in task_layer_names(record.instance_id, self.store)]

    @contextlib.contextmanager
    def open(self, record: TaskRecord) -> Iterator[SandboxEnv]:
        from minisandbox.node.runtime import prepare
        from minisandbox.paths import REPO_PATH

        with prepare(record.instance_id, self.store, cache=self.cache) as pt:
            options = {"join_ns": pt.mount_ns, **self.options} if pt.mount_ns else dict(self.options)
            yield SandboxEnv(Path(pt.host_layers[REPO_PATH]), pt.sandbox_layers(), dict(pt.interpreter), options)


@dataclass
class LayerExecutor:
    """Like `SandboxExecutor`, for a known (env manifest, repo manifest) pair instead of an
    index lookup: validation runs before the index is published."""

    store: str
    env_manifest: dict[str, Any]
    repo_manifests: dict[str, dict[str, Any]]  # repo_key -> manifest
    repo_key_of: dict[str, str]  # instance_id -> repo_key
    cache: Any = None
    options: dict[str, Any] = field(default_factory=lambda: {"network": "none"})
    prepares_task_state: bool = False

    @contextlib.contextmanager
    def open(self, record: TaskRecord) -> Iterator[SandboxEnv]:
        from minisandbox.manifest import validate_manifest
        from minisandbox.node.cache import Cache, Lease
        from minisandbox.node.runtime import check_host, interpreter_manifest, ready_layer, sandbox_layers
        from minisandbox.node.store import open_store
        from minisandbox.paths import REPO_PATH, VENV_PATH
        from minisandbox.sandbox.hostlibs import check_host_libs

        st = open_store(self.store)
        cache = self.cache or Cache()
        repo_key = self.repo_key_of[record.instance_id]
        # the pipeline's manifests go through the same schema as a store's (they name host paths)
        repo_m = validate_manifest(self.repo_manifests[repo_key], where=f"repo manifest {repo_key}", kind="repo")
        validate_manifest(self.env_manifest, where=f"env manifest {self.env_manifest.get('key')}", kind="env")
        check_host(self.env_manifest, f"task {record.instance_id}")
        check_host_libs(self.env_manifest.get("host_libs"), f"environment {self.env_manifest.get('key')}")
        interp_m = interpreter_manifest(st, self.env_manifest)
        leases: list[Path] = []
        layers: dict[str, Path] = {}
        try:
            wanted = [(repo_m, REPO_PATH), (self.env_manifest, VENV_PATH)]
            for manifest, default in wanted + ([(interp_m, interp_m["mount_path"])] if interp_m else []):
                # unpacked, as before images existed: the archive, or the image where the store has none
                result, lease = ready_layer(cache, st, manifest, mount=False, owner=record.instance_id)
                leases.append(lease)
                layers[manifest.get("mount_path") or default] = result.path
            yield SandboxEnv(
                Path(layers[REPO_PATH]),
                sandbox_layers(layers, self.env_manifest, repo_m),
                dict(self.env_manifest.get("interpreter") or {}),
                dict(self.options),
            )
        finally:
            Lease(leases).release()


# --------------------------------------------------------------------------- batch evaluation


class PredictionsError(MinisandboxError, ValueError):
    """A predictions file is unusable; the message names the file, line and field."""


PREDICTION_FIELDS = ("instance_id", "model_patch", "model_name_or_path")


def _check_prediction(item: Any, where: str) -> dict[str, Any]:
    """One prediction, checked field by field (SWE-bench's harness reads all three keys).
    `instance_id` and `model_name_or_path` become directory names: they are checked too."""
    need = f"SWE-bench predictions need {', '.join(PREDICTION_FIELDS)}"
    if not isinstance(item, dict):
        raise PredictionsError(f"{where}: a prediction must be a JSON object, got {type(item).__name__}; {need}")
    iid = item.get("instance_id")
    if not isinstance(iid, str) or not iid:
        raise PredictionsError(f"{where}: field 'instance_id' missing or not a string; {need}")
    if not INSTANCE_ID.match(iid) or iid in (".", ".."):
        raise PredictionsError(f"{where}: field 'instance_id': invalid characters in {iid!r}")
    where = f"{where} ({iid})"
    if "model_patch" not in item:
        raise PredictionsError(f"{where}: field 'model_patch' missing (null or \"\" for no patch); {need}")
    if item["model_patch"] is not None and not isinstance(item["model_patch"], str):
        raise PredictionsError(
            f"{where}: field 'model_patch' must be a string or null, got {type(item['model_patch']).__name__}"
        )
    model = item.get("model_name_or_path")
    if model is None:
        raise PredictionsError(f"{where}: field 'model_name_or_path' missing; {need}")
    if (
        not isinstance(model, str)
        or not model.strip()
        or _safe(model) in (".", "..")
        or any(c in model for c in "\0\n\r")
    ):
        raise PredictionsError(f"{where}: field 'model_name_or_path': {model!r} is not a usable model name")
    return item


def load_predictions(path: str | Path) -> dict[str, dict[str, Any]]:
    """SWE-bench predictions: JSONL (or a JSON list/dict) of `instance_id, model_patch,
    model_name_or_path`. A later line for the same instance replaces an earlier one. Any
    bad prediction is a PredictionsError naming file, line (or position) and field."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise PredictionsError(f"predictions file {path} does not exist") from None
    except UnicodeDecodeError as exc:
        raise PredictionsError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    items: list[tuple[str, Any]] = []
    if path.suffix == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise PredictionsError(f"{path}:{exc.lineno}: invalid JSON ({exc.msg}); fix the predictions file") from None
        values = list(data.values()) if isinstance(data, dict) else data
        if not isinstance(values, list):
            raise PredictionsError(f"{path}: expected a list (or a mapping) of predictions")
        items = [(f"{path}: prediction {n}", v) for n, v in enumerate(values, 1)]
    else:
        for n, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:
                    items.append((f"{path}:{n}", json.loads(line)))
                except json.JSONDecodeError as exc:
                    raise PredictionsError(f"{path}:{n}: invalid JSON ({exc.msg}); fix the predictions file") from None
    out: dict[str, dict[str, Any]] = {}
    for where, item in items:
        pred = _check_prediction(item, where)
        out[pred["instance_id"]] = pred
    return out


def _safe(name: str) -> str:
    return name.replace("/", "__")


def instance_dir(out: Path, run_id: str, model: str, instance_id: str) -> Path:
    """SWE-bench's harness layout: `OUT/<run_id>/<model>/<instance_id>/` (OUT plays the role
    of its `logs/run_evaluation`), so two runs never share a report."""
    return Path(out) / run_id / _safe(model) / instance_id


# --------------------------------------------------------------------------- what a result rests on


def source_digest(root: Path) -> str:
    """sha256 over every `*.py` file under `root` (relative path and content, in path order)."""
    h = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        h.update(path.relative_to(root).as_posix().encode() + b"\0")
        h.update(path.read_bytes() + b"\0")
    return h.hexdigest()


@functools.lru_cache(maxsize=1)
def grader_version() -> str:
    """The package version plus a digest of every source file of the `minisandbox` package.
    Why a digest and not a constant: a grader change that nobody remembered to version must
    still invalidate every stored verdict. Why the whole package and not only
    `minisandbox.grading`: a verdict also rests on the executor (`minisandbox.sandbox`: what
    the test command can see and reach), the layers it runs on (`minisandbox.node`,
    `minisandbox.pipeline`), the spec and record readers and `minisandbox.logformats`; with
    only `grading` hashed, a report graded resolved before a fix in one of those was reused
    on resume after it (tests/grading/test_evaluate.py). Any change of the package
    therefore evaluates every instance again."""
    import minisandbox

    pkg = Path(minisandbox.__file__).resolve().parent
    return f"{minisandbox.__version__}+{source_digest(pkg)[:16]}"


def _digest(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()


def eval_inputs(patch: str | None, target: EvalTarget, grading: str) -> dict[str, Any] | None:
    """Everything an instance's verdict rests on, as digests (stored in its report as
    `eval_inputs`; a report is reused only when they are all equal): the patch, the grading
    mode, the grader's version, the task record, its spec (test command, parser, timeout,
    eval commands...; FAIL_TO_PASS/PASS_TO_PASS are in the record), the executor and its
    sandbox options, and the digests of the task's layers. None when the layers cannot be
    named (an executor without `layer_digests`, or a task whose lookup fails): such an
    instance is always evaluated again."""
    digests = getattr(target.executor, "layer_digests", None)
    if digests is None:
        return None
    try:
        layers = digests(target.record)
    except Exception:  # the evaluation itself reports why the task cannot be prepared
        return None
    if layers is None:
        return None
    return {
        "patch_sha256": None if patch is None else hashlib.sha256(patch.encode()).hexdigest(),
        "grading": grading,
        "grader_version": grader_version(),
        "task_sha256": _digest(target.record.to_dict()),
        "spec_sha256": _digest(target.spec.to_dict()),
        "executor": f"{type(target.executor).__name__}:{_digest(getattr(target.executor, 'options', None))[:16]}",
        "layers": layers,
    }


def read_existing_report(
    path: Path, instance_id: str, grading: str = "strict", inputs: dict[str, Any] | None = None
) -> dict[str, Any] | None:
    """A finished report from an earlier run (resume), or None if absent or unreadable, an
    error (retried), graded in another mode (`grading`: a strict report is never reused as
    official), or, with `inputs` (`eval_inputs`), made from anything else."""
    try:
        rep = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None
    entry = rep.get(instance_id) if isinstance(rep, dict) else None
    if not isinstance(entry, dict) or "resolved" not in entry or entry.get("reason") == Reason.ERROR.value:
        return None  # errors are retried on resume
    if entry.get("grading", "strict") != grading:
        return None
    if inputs is not None and entry.get("eval_inputs") != inputs:
        return None
    return rep


# --------------------------------------------------------------------------- stopping a run


class Cancelled(MinisandboxError, RuntimeError):
    """The run was stopped (Ctrl-C, SIGTERM) before this evaluation could finish."""


class EvalInterrupted(KeyboardInterrupt):
    """`run_eval` was stopped by a signal; the partial summary is written (`summary`,
    `path`). A KeyboardInterrupt, so callers that do not know it still stop."""

    def __init__(self, signal_name: str, summary: dict[str, Any], path: Path) -> None:
        super().__init__(signal_name)
        self.signal_name, self.summary, self.path = signal_name, summary, path


class StopSignal:
    """Stops an eval run: once `stop()` is called no environment starts, and every one
    running is killed (each registered its kill with `running`). Thread-safe; `stop` is
    called from the main thread, never from a signal handler."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._kills: dict[int, Callable[[], None]] = {}
        self._next = 0

    @property
    def stopped(self) -> bool:
        return self._event.is_set()

    def check(self) -> None:
        if self._event.is_set():
            raise Cancelled("the evaluation run was stopped")

    @contextlib.contextmanager
    def running(self, kill: Callable[[], None]) -> Iterator[None]:
        """Register `kill` (ends what is running) for the block; refuses to start when stopped."""
        with self._lock:
            self.check()
            self._next += 1
            token = self._next
            self._kills[token] = kill
        try:
            yield
        finally:
            with self._lock:
                self._kills.pop(token, None)

    def stop(self) -> None:
        with self._lock:
            self._event.set()
            kills = list(self._kills.values())
        for kill in kills:
            with contextlib.suppress(Exception):
                kill()


class _Signalled(KeyboardInterrupt):
    """SIGTERM, turned into what SIGINT raises, so both stop a run the same way."""


@contextlib.contextmanager
def _stop_on_signals() -> Iterator[None]:
    """SIGINT and SIGTERM raise KeyboardInterrupt in the main thread for the block (signal
    handlers can only be set there; elsewhere nothing changes)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def raise_it(signum: int, frame: Any) -> None:
        raise _Signalled(signal.Signals(signum).name)

    old = {s: signal.signal(s, raise_it) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)


# --------------------------------------------------------------------------- logs


class _Log:
    """An append-only log in SWE-bench's harness format (`asctime - LEVEL - message`)."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._fh = path.open("a", encoding="utf-8")
        self._lock = threading.Lock()

    def __call__(self, message: str, level: str = "INFO") -> None:
        now = datetime.datetime.now()
        stamp = now.strftime("%Y-%m-%d %H:%M:%S") + f",{now.microsecond // 1000:03d}"
        with self._lock:
            self._fh.write(f"{stamp} - {level} - {message}\n")
            self._fh.flush()

    def close(self) -> None:
        self._fh.close()


@dataclass
class EvalTarget:
    """What `run_eval` needs per instance: the record, its spec and an executor."""

    record: TaskRecord
    spec: EnvSpec
    executor: Executor


def _fingerprints(
    predictions: dict[str, dict[str, Any]], targets: dict[str, EvalTarget | Exception], ids: list[str], grading: str
) -> dict[str, dict[str, Any] | None]:
    """`eval_inputs` of every instance in `ids` (a store lookup each: done in parallel)."""

    def one(iid: str) -> dict[str, Any] | None:
        target = targets[iid]
        if isinstance(target, Exception):
            return None
        return eval_inputs(predictions[iid].get("model_patch"), target, grading)

    if len(ids) <= 1:
        return {iid: one(iid) for iid in ids}
    with ThreadPoolExecutor(max_workers=min(8, len(ids))) as pool:
        return dict(zip(ids, pool.map(one, ids), strict=True))


def _summary(
    targets: dict[str, Any], predictions: dict[str, dict[str, Any]], reports: dict[str, Any], not_run: set[str]
) -> dict[str, Any]:
    """The run summary over the reports this run used (resumed or new). Instances a stopped
    run never finished are `incomplete_ids` (no verdict), not errors."""
    used = {k: v for k, v in predictions.items() if k in targets and k not in not_run}
    summary = make_run_summary(list(targets), used, reports)
    submitted = sorted(set(predictions) & set(targets))
    summary["submitted_ids"], summary["submitted_instances"] = submitted, len(submitted)
    return summary


def run_eval(
    predictions: dict[str, dict[str, Any]],
    targets: dict[str, EvalTarget | Exception],
    out: Path,
    *,
    run_id: str = "minisandbox",
    workers: int = 2,
    resume: bool = True,
    progress: Callable[[str], None] | None = None,
    grading: str = "strict",
    stop: StopSignal | None = None,
) -> tuple[dict[str, Any], Path]:
    """Evaluate every prediction whose instance has a target; returns (summary, its path).

    Per instance `out/<run_id>/<model>/<instance_id>/` (SWE-bench's harness layout) gets
    `report.json` (SWE-bench format plus `reason` and `eval_inputs`), `test_output.txt`,
    `eval.sh`, `patch.diff` and `run_instance.log`; `out/<run_id>/run.log` logs the run;
    the summary is `out/<model>.<run_id>.json`. A report is reused (resume) only when its
    `eval_inputs` equal this run's (`eval_inputs`: patch, mode, grader, task, spec, layers).
    `targets[iid]` may be an exception (the task or its environment could not be
    prepared): the instance is reported as an error. `progress` receives one line per
    finished instance; by default they go to stderr with a progress bar on a terminal
    (`minisandbox.progress`). `grading`: "strict" (default) or "official".

    Ctrl-C or SIGTERM (in the main thread), or `stop.stop()` from another: no new
    evaluation starts, running sandboxes are killed (their instances get no report), the
    partial summary is written, then `EvalInterrupted` is raised.
    """
    out = Path(out)
    if grading == GradingMode.OFFICIAL.value:  # refuse up front, before anything runs
        check_official(
            [(t.record, t.spec) for iid, t in targets.items() if iid in predictions and isinstance(t, EvalTarget)]
        )
    stop = stop or StopSignal()
    run_dir = out / run_id
    runlog = _Log(run_dir / "run.log")
    ids = [iid for iid in predictions if iid in targets]
    runlog(
        f"run {run_id}: {len(ids)} instance(s), grading {grading}, workers {workers}, "
        f"resume {'on' if resume else 'off'}, grader {grader_version()}"
    )
    inputs = _fingerprints(predictions, targets, ids, grading)
    todo: list[str] = []
    reports: dict[str, dict[str, Any] | None] = {}
    for iid in ids:
        d = instance_dir(out, run_id, predictions[iid]["model_name_or_path"], iid)
        fp = inputs[iid]
        existing = read_existing_report(d / "report.json", iid, grading, fp) if resume and fp else None
        if existing is not None:
            reports[iid] = existing
        else:
            todo.append(iid)
    total = len(todo)
    # Default: a bar on a terminal (lines printed above it), periodic plain lines otherwise.
    meter = Progress("eval", total, unit="task") if progress is None else None
    say = meter.write if meter is not None else progress
    if reports:
        line = f"resuming: {len(reports)} instance(s) already evaluated with the same inputs, {total} to go"
        say(line)
        runlog(line)
    counter = {"done": 0, "resolved": 0}
    lock = threading.Lock()

    def one(iid: str) -> None:
        stop.check()
        pred = predictions[iid]
        d = instance_dir(out, run_id, pred["model_name_or_path"], iid)
        d.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            (d / "report.json").unlink()  # a stale verdict never survives beside new logs
        patch = pred.get("model_patch")
        (d / "patch.diff").write_text(patch or "", encoding="utf-8")
        log = _Log(d / "run_instance.log")
        try:
            log(f"Evaluating {iid} (run {run_id}, model {pred['model_name_or_path']}, grading {grading})")
            log(f"Inputs: {json.dumps(inputs[iid], sort_keys=True)}")
            log(f"Intermediate patch for {iid} written to {d / 'patch.diff'}, now applying in a fresh sandbox...")
            target = targets[iid]
            if isinstance(target, Exception):
                rep = make_report(
                    iid, patch, "", fail_to_pass=[], pass_to_pass=[], log_parser="pytest", error=str(target)
                )
                ev = Evaluation(iid, rep, "", "", 0.0)
            else:
                ev = evaluate(target.record, target.spec, patch, target.executor, grading=grading, stop=stop)
            if stop.stopped:  # killed or cut short: no verdict, evaluated again next time
                log("Stopped before the evaluation finished: no report written", "WARNING")
                raise Cancelled("the evaluation run was stopped")
            (d / "test_output.txt").write_text(ev.output, encoding="utf-8")
            if ev.script:
                (d / "eval.sh").write_text(ev.script, encoding="utf-8")
            if inputs[iid] is not None:
                ev.entry["eval_inputs"] = inputs[iid]
            log(f"Test runtime: {ev.seconds:.2f} seconds")
            if ev.entry.get("error"):
                log(f"Error: {ev.entry['error']}", "ERROR")
            if ev.entry.get("cause"):
                log(f"Cause: {ev.entry['cause']}", "WARNING")
            log(f"report: {json.dumps(swebench_view(ev.report))}")
            log(f"Result for {iid}: resolved: {ev.resolved} (reason {ev.reason})")
            atomic_write_text(d / "report.json", dumps(ev.report))
        finally:
            log.close()
        with lock:
            reports[iid] = ev.report
            counter["done"] += 1
            counter["resolved"] += int(ev.resolved)
            line = (
                f"[{counter['done']}/{total}] {iid}: {ev.reason} ({ev.seconds:.1f} s; "
                f"{counter['resolved']} resolved so far)"
            )
            say(line)
            runlog(line)
            if meter is not None:
                meter.update()

    interrupted = ""
    pool = ThreadPoolExecutor(max_workers=max(1, workers))
    try:
        with _stop_on_signals():
            try:
                futures = [pool.submit(one, iid) for iid in todo]
                for fut in as_completed(futures):
                    with contextlib.suppress(Cancelled):
                        fut.result()
            except KeyboardInterrupt as exc:
                interrupted = str(exc) if isinstance(exc, _Signalled) else "SIGINT"
                say(f"{interrupted}: stopping: no new evaluations, killing the running sandboxes")
                runlog(f"{interrupted}: stopping; running sandboxes killed", "WARNING")
                stop.stop()
                pool.shutdown(wait=False, cancel_futures=True)
                while True:  # the workers end as soon as their sandbox is gone
                    try:
                        pool.shutdown(wait=True)
                        break
                    except KeyboardInterrupt:
                        stop.stop()
    finally:
        pool.shutdown(wait=True)
        if meter is not None:
            meter.close()
    if stop.stopped and not interrupted:
        interrupted = "stop"  # StopSignal.stop() from another thread
    not_run = set(ids) - set(reports)
    summary = _summary(targets, predictions, reports, not_run if interrupted else set())
    if interrupted:
        summary["interrupted"] = interrupted
    models = sorted({p["model_name_or_path"] for p in predictions.values()}) or ["model"]
    path = out / f"{_safe(models[0])}.{run_id}.json"
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, dumps(summary))
    runlog(
        f"summary {path}: {summary['resolved_instances']} resolved, {summary['unresolved_instances']} "
        f"unresolved, {summary['empty_patch_instances']} empty patches, {summary['error_instances']} errors, "
        f"{len(summary['incomplete_ids'])} incomplete"
    )
    runlog.close()
    if interrupted:
        raise EvalInterrupted(interrupted, summary, path)
    return summary, path
