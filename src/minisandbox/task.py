"""A task's sandbox in its start state, and grading of what an agent left in it.

`minisandbox run/shell` and every integration (SWE-ReX, mini-swe-agent, Ray rollouts)
need the same three steps, so they live here once:

1. `open_task`: resolve the task in a published store (`minisandbox.node.runtime.prepare`:
   node cache, I/O budget, lease), start a `Sandbox` over its layers with the task's venv
   first on PATH (as `conda activate testbed` in the SWE-bench images does), and put the
   repo in the task's start state.
2. The agent works in the sandbox.
3. `TaskSandbox.patch()` is the agent's change since the start state, and `grade()`
   evaluates it in a *fresh* sandbox (`minisandbox.grading.evaluate`), never in the agent's.

Start state (docs/design.md "Task records"): SWE-bench tasks start from the snapshot as
published. SWE-smith tasks get the bug patch applied and the FAIL_TO_PASS test files
removed; the repo's git metadata is then replaced by one fresh root commit of that
state, so `git diff` inside the sandbox shows exactly the agent's edits and neither the
history nor dangling objects hold the clean (fixed) tree.
"""

from __future__ import annotations

import os
import shlex
import time
from pathlib import Path

from minisandbox.errors import MinisandboxError
from minisandbox.node.cache import Cache
from minisandbox.node.iobudget import RAY_RESOURCE, IOBudget
from minisandbox.node.runtime import PreparedTask, prepare
from minisandbox.paths import REPO_PATH, VENV_PATH, cache_dir
from minisandbox.records import TaskRecord, task_test_files
from minisandbox.sandbox.sandbox import DEFAULT_ENV, ExecResult, Sandbox

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a warm `run` does not)
if TYPE_CHECKING:
    from typing import Any

#: Environment of every command: the task's venv is active, like in the SWE-bench images.
AGENT_ENV = {
    "PATH": f"{VENV_PATH}/bin:{DEFAULT_ENV['PATH']}",
    "VIRTUAL_ENV": VENV_PATH,
    "CONDA_DEFAULT_ENV": "testbed",
    "PAGER": "cat",
    "GIT_PAGER": "cat",
}

_GIT_ID = {
    "GIT_AUTHOR_NAME": "minisandbox",
    "GIT_AUTHOR_EMAIL": "minisandbox@localhost",
    "GIT_COMMITTER_NAME": "minisandbox",
    "GIT_COMMITTER_EMAIL": "minisandbox@localhost",
    "GIT_AUTHOR_DATE": "2000-01-01T00:00:00+0000",
    "GIT_COMMITTER_DATE": "2000-01-01T00:00:00+0000",
}


class TaskSetupError(MinisandboxError, RuntimeError):
    """The task's start state could not be created in its sandbox."""


def make_cache(cache: Cache | str | os.PathLike[str] | None = None, io_slots: int | None = None) -> Cache:
    """A Cache from a Cache, a directory or None ($MINISANDBOX_CACHE); `io_slots=0` means
    the caller bounds unpacks itself (Ray's `minisandbox_io` resource)."""
    if isinstance(cache, Cache):
        return cache
    root = Path(cache) if cache is not None else cache_dir()
    budget = IOBudget.unlimited() if io_slots == 0 else IOBudget(io_slots, root / "budget")
    return Cache(root, budget=budget)


class TaskSandbox:
    """One task's sandbox and the lease on its layers; close() ends both."""

    def __init__(
        self,
        prepared: PreparedTask,
        sandbox: Sandbox,
        record: TaskRecord,
        setup_seconds: float = 0.0,
        info: dict[str, Any] | None = None,
        cache: Cache | None = None,
    ) -> None:
        self.prepared = prepared
        self.sandbox = sandbox
        self.record = record
        self.setup_seconds = setup_seconds
        self.info = info if info is not None else {}
        self.cache = cache  # the node cache the layers came from (grading reuses it)

    @property
    def task_id(self) -> str:
        return self.prepared.instance_id

    def execute(
        self, command: str, *, cwd: str | None = None, timeout: float | None = None, env: dict[str, str] | None = None
    ) -> ExecResult:
        """A fresh `bash -c command` in the sandbox (no state carried over)."""
        return self.sandbox.execute(command, cwd=cwd or REPO_PATH, timeout=timeout, env=env)

    def patch(self) -> str:
        """The agent's changes since the start state (binary git diff, new files included)."""
        return self.sandbox.diff()

    def close(self) -> None:
        try:
            self.sandbox.close()
        finally:
            self.prepared.release()

    def __enter__(self) -> TaskSandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _hide_residue_lines(testbed: dict[str, Any] | None) -> list[str]:
    """Shell lines that keep the environment's install residue (generated version files,
    egg-info, fetched data: docs/design.md "Environment fidelity") out of git: new paths
    go to `.git/info/exclude`, tracked files the install rewrote are marked skip-worktree.
    So `git status` is clean and neither `git diff` nor `git add -A` ever carries residue
    into the agent's patch (the grader's fresh sandbox has the same residue)."""
    if not testbed:
        return []
    q = shlex.quote
    lines = ["mkdir -p .git/info"]
    if testbed.get("new"):
        text = "# install residue of the environment (minisandbox)\n" + "".join(f"{p}\n" for p in testbed["new"])
        lines.append(f"printf '%s' {q(text)} >> .git/info/exclude")
    for path in testbed.get("modified") or []:
        lines.append(f"git -c safe.directory='*' update-index --skip-worktree -- {q(path)} 2>/dev/null || true")
    return lines


def _setup_script(record: TaskRecord, testbed: dict[str, Any] | None = None) -> str | None:
    """Shell commands turning the published snapshot into the task's start state (None:
    the snapshot already is it). `testbed`: the env's install residue stacked at /testbed."""
    if record.format == "swebench":
        hide = _hide_residue_lines(testbed)
        return "\n".join(["set -eu", f"cd {REPO_PATH}", *hide]) + "\n" if hide else None
    q = shlex.quote
    lines = ["set -eu", f"cd {REPO_PATH}"]
    if record.patch.strip():
        lines.append(
            "git -c safe.directory='*' apply --whitespace=nowarn /tmp/.minisandbox-task.patch "
            "|| patch --batch -p1 --no-backup-if-mismatch -r - -i /tmp/.minisandbox-task.patch"
        )
    # one `rm` (a process each costs the start state of every call): the task's test files,
    # its patch file, and the snapshot's .git (one fresh root commit: no history, no
    # objects of the clean tree)
    gone = [q(path) for path in task_test_files(list(record.fail_to_pass), record.patch)]
    if record.patch.strip():
        gone.append("/tmp/.minisandbox-task.patch")
    lines += [
        f"rm -rf -- {' '.join([*gone, '.git'])}",
        # no template: git's sample hooks and description are copied on every start otherwise
        "git init -q --template= -b main 2>/dev/null || git init -q --template=",
        *[ln for ln in _hide_residue_lines(testbed) if "update-index" not in ln],  # residue never committed
        "git -c safe.directory='*' add -A",
        # (no automatic maintenance: commit would start `git maintenance run --auto` after it)
        "git -c safe.directory='*' -c commit.gpgsign=false -c maintenance.auto=false -c gc.auto=0 "
        "commit -q --no-verify -m 'Initial commit'",
    ]
    return "\n".join(lines) + "\n"


def _run_setup(sandbox: Sandbox, script: str, record: TaskRecord, prepared: PreparedTask) -> None:
    """Run the start state's set-up script in `sandbox` (TaskSetupError when it fails)."""
    if record.patch.strip():
        sandbox.write_file("/tmp/.minisandbox-task.patch", record.patch)
    res = sandbox.run(["bash", "-c", script], cwd="/", timeout=600, env=_GIT_ID, _mark=False)
    if res.returncode != 0:
        raise TaskSetupError(
            f"task {prepared.instance_id}: setting up the start state in {REPO_PATH} failed "
            f"({res.returncode}): {res.output.strip()[-300:]}; check the task's patch "
            f"against its snapshot in {prepared.store_url}"
        )


#: Bump when what the start state's set-up makes changes in a way its inputs do not show.
_START_FORMAT = "minisandbox start state 1"


class _NoStartCache(Exception):
    """The start state cannot be kept on this node (no overlay): set it up per sandbox."""


#: not empty once this process found it cannot keep start states (it stops trying)
_no_start_cache: list[bool] = []
#: in the node cache's tmp/: its file system holds no overlay upper directory (found once)
_NO_START_LAYERS = "no-start-layers"


def _start_key(script: str, record: TaskRecord, repo: Any, options: dict[str, Any]) -> str:
    """The start-state layer's name: a digest of everything its content depends on (the
    set-up script, the patch, the repo layer and what is stacked on it, both content-
    addressed, the commands' environment, the host's git, rootless or not: whiteouts and
    opaque directories are recorded in other extended attributes)."""
    import json

    from minisandbox.fsutil import sha256

    rootless = options.get("rootless")
    try:
        st = os.stat("/usr/bin/git")
        git = [st.st_ino, st.st_size, st.st_mtime_ns]
    except OSError:
        git = []
    doc = {
        "format": _START_FORMAT,
        "script": script,
        "patch": record.patch,
        "repo": [repo.lower, *repo.over],
        "env": {**DEFAULT_ENV, **options.get("env", {}), **_GIT_ID},
        "git": git,
        "rootless": bool(os.geteuid() != 0 if rootless is None else rootless),
    }
    return sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()


def _start_layer(
    node_cache: Cache,
    prepared: PreparedTask,
    record: TaskRecord,
    script: str,
    layers: list[Any],
    interpreter: tuple[str, str] | None,
    options: dict[str, Any],
) -> list[Any]:
    """`layers` with the task's start state stacked on the repo layer, made once per node.

    The set-up script runs in a sandbox of its own whose /testbed changes go to disk; once
    it has closed (every process gone), its overlay's upper directory becomes a layer of the
    node cache, leased with the task's other layers, and every later sandbox of the task
    stacks it read-only under its own writable upper: the bash, rm, git init, add and commit
    of each call (and their fork of the command spawner) are gone. No payload ever runs in
    the set-up sandbox and the layer is never written again, so one sandbox's commands can
    neither see nor change another's state. Raises _NoStartCache where overlays are not
    used (the copy fallback would copy whiteouts as files)."""
    from minisandbox.sandbox.rootfs import SandboxError
    from minisandbox.sandbox.sandbox import Layer

    repo = next((layer for layer in layers if layer.mount_path == REPO_PATH and layer.writable), None)
    unsupported = node_cache.tmp / _NO_START_LAYERS
    if repo is None or options.get("copy_layers") or unsupported.exists():
        raise _NoStartCache()
    key = _start_key(script, record, repo, options)

    def build(tmp: Path) -> None:
        made = {**options, "scratch_dir": str(node_cache.tmp), "network": "none", "warm_next": False}
        sandbox = Sandbox(layers, interpreter=interpreter, **made)
        try:
            _run_setup(sandbox, script, record, prepared)
            if sandbox.layer_methods.get(REPO_PATH) != "overlay":
                # (no overlay with its upper in this cache: remembered, so that no later
                # process, such as each of a helper's workers, tries again)
                unsupported.write_text(f"{sandbox.layer_methods.get(REPO_PATH)}\n")
                raise _NoStartCache()
            try:
                sandbox.close_keeping(REPO_PATH, str(tmp))
            except (SandboxError, OSError):  # not kept (init outlived its kill?): set up in place
                raise _NoStartCache() from None
        finally:
            sandbox.close()

    meta = {"key": record.instance_id, "kind": "start", "repo": repo.lower}
    path, lease, _ = node_cache.made_layer(key, build, meta, owner=record.instance_id)
    prepared.lease.files.append(lease)
    return [
        Layer(layer.lower, layer.mount_path, layer.writable, (str(path), *layer.over)) if layer is repo else layer
        for layer in layers
    ]


def open_task(
    task_id: str,
    store: str | os.PathLike[str] | None = None,
    *,
    cache: Cache | str | os.PathLike[str] | None = None,
    io_slots: int | None = None,
    env: dict[str, str] | None = None,
    diff: bool = True,
    start_cache: bool = True,
    **sandbox_options: Any,
) -> TaskSandbox:
    """Prepare `task_id` from `store` on this node and open its sandbox in the start state.

    `cache`: a Cache or cache directory (default $MINISANDBOX_CACHE). `io_slots`: the
    node's I/O budget (default $MINISANDBOX_IO_SLOTS; 0 = unbounded here, e.g. when Ray's
    `minisandbox_io` resource bounds it). `sandbox_options`: SandboxConfig fields
    (network defaults to "none", limits=..., scratch_dir=...). `diff=False`: `patch()` will
    not be asked for (a one-shot command), so the start state is not snapshotted.
    `start_cache=False`: set the start state up in this sandbox rather than stack the node's
    copy of it (docs/sandbox.md, "Start state and `diff()`")."""
    t0 = time.monotonic()
    node_cache = make_cache(cache, io_slots)
    prepared = prepare(task_id, store, cache=node_cache)
    try:
        record = TaskRecord.from_dict(prepared.record)
        options = {"network": "none", **sandbox_options}
        if prepared.mount_ns:  # rootless image layers: the sandbox joins the mount holder's namespaces
            options.setdefault("join_ns", prepared.mount_ns)
        options["env"] = {**AGENT_ENV, **options.get("env", {}), **(env or {})}
        interp = prepared.interpreter
        interpreter = (interp["version"], interp["prefix"]) if interp else None
        layers = prepared.sandbox_layers()
        script = _setup_script(record, prepared.testbed)
        stacked: list[Any] | None = None
        if script is not None and start_cache and not _no_start_cache:
            try:
                stacked = _start_layer(node_cache, prepared, record, script, layers, interpreter, options)
            except _NoStartCache:
                _no_start_cache.append(True)
        sandbox = Sandbox(stacked or layers, interpreter=interpreter, **options)
        if stacked and sandbox.layer_methods.get(REPO_PATH) != "overlay":
            # copied instead of stacked: the start layer's whiteouts would be files here
            sandbox.close()
            sandbox = Sandbox(layers, interpreter=interpreter, **options)
        elif stacked:
            script = None
    except BaseException:
        prepared.release()
        raise
    try:
        if script is not None:
            _run_setup(sandbox, script, record, prepared)
        if diff:
            sandbox.mark_start()
        else:
            sandbox.forgo_diff()
    except BaseException:
        sandbox.close()
        prepared.release()
        raise
    return TaskSandbox(
        prepared,
        sandbox,
        record,
        time.monotonic() - t0,
        {"downloaded": prepared.downloaded, "prepare_seconds": prepared.seconds},
        node_cache,
    )


def load_catalog(catalog: Any = None):
    """A `minisandbox.catalog.Catalog` from a Catalog, one path, several paths, or None
    (the catalogs config/config.yaml names)."""
    from minisandbox.catalog import Catalog, CatalogError, default_catalog_paths

    if isinstance(catalog, Catalog):
        return catalog
    if catalog is None:
        paths = default_catalog_paths()
        if not paths:
            raise CatalogError("no environment catalog found; pass catalog=config/catalog/<name>.yaml")
    elif isinstance(catalog, (str, os.PathLike)):
        paths = [catalog]
    else:
        paths = list(catalog)
    return Catalog.load(paths)


def grade(
    task_id: str,
    patch: str,
    store: str | os.PathLike[str] | None = None,
    *,
    catalog: Any = None,
    cache: Cache | str | os.PathLike[str] | None = None,
    io_slots: int | None = None,
    record: TaskRecord | None = None,
    grading: str = "strict",
):
    """Grade `patch` (relative to the task's start state) in a fresh sandbox; returns a
    `minisandbox.grading.evaluate.Evaluation` (`.resolved`, `.reason`, `.report`).
    `grading="official"` reproduces the task's own harness decision (docs/grading.md)."""
    from minisandbox.catalog import spec_for
    from minisandbox.grading.evaluate import SandboxExecutor, evaluate
    from minisandbox.node.runtime import lookup_task
    from minisandbox.node.store import open_store

    st = open_store(store)
    if record is None:
        record = TaskRecord.from_dict(lookup_task(st, task_id)["record"])
    spec = spec_for(load_catalog(catalog), record)
    executor = SandboxExecutor(store=st.url, cache=make_cache(cache, io_slots))
    return evaluate(record, spec, patch, executor, grading=grading)


def task_ids(store: str | os.PathLike[str] | None = None, *, status: str = "ready") -> list[str]:
    """Instance ids of a published store's index with `status` ("ready"), sorted."""
    from minisandbox.node.published import iter_tasks
    from minisandbox.node.store import open_store

    return sorted(e["instance_id"] for e in iter_tasks(open_store(store)) if e.get("status", "ready") == status)


# ------------------------------------------------------------------ what integrations need besides
# open_task and grade: they reach the node and the sandbox only through these, so this module
# stays the one surface they depend on (tests/test_architecture.py). Each imports lazily:
# `minisandbox run` imports this module and needs none of them.


def task_records(store: str | os.PathLike[str] | None = None, *, status: str = "ready") -> list[TaskRecord]:
    """The task records of a published store's index with `status` ("ready"), in index order."""
    from minisandbox.node.published import iter_tasks
    from minisandbox.node.store import open_store

    return [
        TaskRecord.from_dict(e["record"])
        for e in iter_tasks(open_store(store))
        if e.get("status", "ready") == status and "record" in e
    ]


def task_layer_names(task_id: str, store: str | os.PathLike[str] | None = None) -> list[tuple[str, ...]]:
    """Per layer of the task, the directory names it may have in any node cache (a scheduler
    asking "are this task's layers here?": `minisandbox.node.runtime.task_layer_names`)."""
    from minisandbox.node.runtime import task_layer_names as names

    return names(task_id, store)


def fetch_task(
    task_id: str,
    store: str | os.PathLike[str] | None = None,
    *,
    cache: Cache | str | os.PathLike[str] | None = None,
    io_slots: int | None = None,
) -> bool:
    """Make the task's layers ready in the node cache without opening a sandbox (prefetch);
    True if anything was downloaded. `io_slots=0`: the caller bounds unpacks itself."""
    prepared = prepare(task_id, store, cache=make_cache(cache, io_slots))
    prepared.release()
    return bool(prepared.downloaded)


def shell_session(sandbox: Sandbox, name: str = "default", **options: Any):
    """The persistent bash session `name` of `sandbox`, created on first use
    (`minisandbox.sandbox.shell.session`; `options`: cwd, env, startup)."""
    from minisandbox.sandbox.shell import session

    return session(sandbox, name, **options)


__all__ = [
    "AGENT_ENV",
    "Cache",
    "ExecResult",
    "PreparedTask",
    "RAY_RESOURCE",
    "Sandbox",
    "TaskSandbox",
    "TaskSetupError",
    "fetch_task",
    "grade",
    "load_catalog",
    "make_cache",
    "open_task",
    "shell_session",
    "task_ids",
    "task_layer_names",
    "task_records",
]
