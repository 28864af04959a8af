"""Planning: task records -> unique repo snapshots and environment keys.

The DAG expands over keys, never over tasks (50k per-task jobs take ~90 s just to plan).
The plan is cached by the content of its inputs, so the many Snakefile parses of one run
(and of every cluster job) read a small JSON instead of re-reading 50k records.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from minisandbox import __version__
from minisandbox.catalog import Catalog, EnvSpec, require_catalog_files, spec_for, task_commit
from minisandbox.errors import MinisandboxError
from minisandbox.fsutil import atomic_write_text
from minisandbox.pipeline.interplayer import env_key_part, plan_for
from minisandbox.pipeline.keys import env_canonical, env_key, repo_key, source_id
from minisandbox.records import InvalidRecord, TaskFileMissing, read_tasks

PLAN_SCHEMA = 7


class PlanError(MinisandboxError, ValueError):
    """The task files give nothing to build (every record invalid, or none at all)."""


@dataclass
class Plan:
    """What the workflow builds. Small: one entry per source, repo and environment."""

    sources: dict[str, str] = field(default_factory=dict)  # source_id -> source url/path
    repos: dict[str, dict[str, Any]] = field(default_factory=dict)  # repo_key -> {source, source_id, commit}
    envs: dict[str, dict[str, Any]] = field(default_factory=dict)  # env_key -> {spec, canonical, repo_key}
    invalid: list[dict[str, Any]] = field(default_factory=list)
    n_tasks: int = 0
    tasks_file: str = ""  # JSONL of {instance_id, env_key, repo_key, spec_name, record}
    env_tasks: dict[str, str] = field(default_factory=dict)  # env_key -> digest of its task ids
    env_repos: dict[str, list[str]] = field(default_factory=dict)  # env_key -> its tasks' repo keys
    specs: dict[str, dict[str, Any]] = field(default_factory=dict)  # spec name -> spec (test command, parser, ...)
    interps: dict[str, dict[str, Any]] = field(default_factory=dict)  # interpreter key -> planned interpreter
    folded: dict[str, str] = field(default_factory=dict)  # repo_key -> the env key whose job publishes it
    fingerprint: str = ""  # identity of the inputs this plan was made from (the cache directory's name)

    def repo_jobs(self) -> list[str]:
        """Repo keys that get a workflow job of their own: every repo not folded into the
        job of the one environment that uses it (see `folded_repos`)."""
        return sorted(k for k in self.repos if k not in self.folded)

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": PLAN_SCHEMA,
            "sources": self.sources,
            "repos": self.repos,
            "envs": self.envs,
            "invalid": self.invalid,
            "n_tasks": self.n_tasks,
            "tasks_file": self.tasks_file,
            "env_tasks": self.env_tasks,
            "env_repos": self.env_repos,
            "specs": self.specs,
            "interps": self.interps,
            "folded": self.folded,
            "fingerprint": self.fingerprint,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Plan:
        return cls(
            sources=d["sources"],
            repos=d["repos"],
            envs=d["envs"],
            invalid=d["invalid"],
            n_tasks=d["n_tasks"],
            tasks_file=d["tasks_file"],
            env_tasks=d.get("env_tasks", {}),
            env_repos=d.get("env_repos", {}),
            specs=d.get("specs", {}),
            interps=d.get("interps", {}),
            folded=d.get("folded", {}),
            fingerprint=d.get("fingerprint", ""),
        )


def _fingerprint(task_files: list[Path], catalog_files: list[Path], workdir: Path) -> str:
    """Inputs' identity: task files by path/size/mtime (cheap at 50k), catalogs by content."""
    h = hashlib.sha256(f"{PLAN_SCHEMA}:{__version__}:{workdir}".encode())
    for p in task_files:
        st = p.stat()
        h.update(f"T:{p.resolve()}:{st.st_size}:{st.st_mtime_ns}\n".encode())
    for p in catalog_files:
        h.update(f"C:{p}\n".encode())
        h.update(p.read_bytes())
    # The interpreters an env key is computed from (another build -> other keys).
    h.update(interpreters_signature().encode())
    return h.hexdigest()[:16]


def interpreters_signature() -> str:
    """Cheap identity of this machine's interpreters (kind, version, prefix, executable
    size and mtime): a new or rebuilt interpreter re-plans."""
    from minisandbox.sandbox.interpreters import available

    parts = []
    for i in available():
        try:
            st = os.stat(i.executable)
            parts.append(f"{i.kind}:{i.version}:{i.prefix}:{st.st_size}:{st.st_mtime_ns}")
        except OSError:
            continue
    return "\n".join(sorted(parts))


def _source_for(spec: EnvSpec, workdir: Path) -> str:
    from minisandbox.pipeline.git import resolve_source

    return resolve_source(spec.source, workdir)


def build_plan(
    task_files: Iterable[str | Path], catalog: Catalog, workdir: Path, tasks_out: Path, *, label: bool = False
) -> Plan:
    """Expand tasks into unique keys; write the per-task mapping to `tasks_out` (JSONL).
    `label`: the task files hold labelling candidates (`records.normalize`)."""
    ingested = read_tasks(task_files, label=label)
    plan = Plan(invalid=[r.to_dict() for r in ingested.invalid], tasks_file=str(tasks_out))
    tasks_out.parent.mkdir(parents=True, exist_ok=True)
    tmp = tasks_out.with_name(tasks_out.name + f".tmp{os.getpid()}")
    env_keys: dict[tuple[str, str | None], str] = {}  # hashing a spec once, not once per task
    interps: dict[tuple[str, str | None], dict[str, Any]] = {}  # (python, python_full) -> planned, once each
    env_ids: dict[str, list[str]] = {}
    env_repos: dict[str, set[str]] = {}
    with tmp.open("w") as out:
        for rec in ingested.records:
            try:
                spec = spec_for(catalog, rec)
            except KeyError as exc:  # no spec for this record: name the record, not the catalog
                field_name = "repo" if rec.format == "swesmith" else "version"
                file, line = ingested.origins.get(rec.instance_id, ("<tasks>", 0))
                plan.invalid.append(
                    InvalidRecord(file, line, field_name, str(exc).strip("'\""), rec.instance_id).to_dict()
                )
                continue
            # Keys use the declared source (stable across checkouts); jobs use the resolved one.
            src = _source_for(spec, workdir)
            sid = source_id(spec.source)
            plan.sources[sid] = src
            build_repo = repo_key(spec.source, str(spec.commit))
            plan.repos.setdefault(build_repo, {"source": src, "source_id": sid, "commit": spec.commit})
            commit = task_commit(spec, rec)
            rkey = repo_key(spec.source, commit)
            plan.repos.setdefault(rkey, {"source": src, "source_id": sid, "commit": commit})
            want = (str(spec.python), getattr(spec, "python_full", None))
            interp = interps.get(want) or interps.setdefault(want, plan_for(*want))
            ipart = env_key_part(interp)
            ekey = env_keys.get((spec.name, spec.commit)) or env_keys.setdefault(
                (spec.name, spec.commit), env_key(spec, ipart)
            )
            if ekey not in plan.envs:
                sd = spec.to_dict()  # EnvSpec.to_dict is a deep asdict: once per environment, not twice
                plan.specs.setdefault(spec.name, sd)  # per task: test command, parser, timeout
                plan.envs[ekey] = {
                    "spec": sd,  # the first spec: builds the venv (same for all names)
                    "canonical": env_canonical(spec, ipart),
                    "repo_key": build_repo,
                    "interpreter": interp,
                }
                if interp.get("key"):
                    plan.interps.setdefault(interp["key"], interp)
            if spec.name not in plan.specs:
                plan.specs[spec.name] = spec.to_dict()  # per task: test command, parser, timeout
            env_ids.setdefault(ekey, []).append(rec.instance_id)
            env_repos.setdefault(ekey, set()).add(rkey)
            out.write(
                json.dumps(
                    {
                        "instance_id": rec.instance_id,
                        "env_key": ekey,
                        "repo_key": rkey,
                        "spec_name": spec.name,
                        "record": rec.to_dict(),
                    },
                    sort_keys=True,
                )
                + "\n"
            )
            plan.n_tasks += 1
    os.replace(tmp, tasks_out)
    plan.env_tasks = {
        k: hashlib.sha256("\n".join(sorted(ids)).encode()).hexdigest() for k, ids in sorted(env_ids.items())
    }
    plan.env_repos = {k: sorted(v) for k, v in sorted(env_repos.items())}
    plan.folded = folded_repos(plan.envs, plan.env_repos)
    return plan


def folded_repos(envs: dict[str, dict[str, Any]], env_repos: dict[str, list[str]]) -> dict[str, str]:
    """repo_key -> env_key for every repo snapshot that exactly one environment uses, as the
    commit it is built at (and, if any, the commit its tasks start from): that environment's
    workflow job mirrors, snapshots and publishes the repo itself. Snakemake plans ~1 ms per
    job (docs/pipeline.md, "Numbers"), and SWE-smith has one repo per environment, so this
    halves the jobs. A repo that another environment builds at, or that tasks of another
    environment start from, keeps a job of its own that both depend on (no job waits for
    another environment's build)."""
    users: dict[str, set[str]] = {}
    for ekey, entry in envs.items():
        users.setdefault(entry["repo_key"], set()).add(ekey)
    for ekey, rkeys in env_repos.items():
        for rkey in rkeys:
            users.setdefault(rkey, set()).add(ekey)
    return {
        rkey: next(iter(ekeys))
        for rkey, ekeys in sorted(users.items())
        if len(ekeys) == 1 and envs[next(iter(ekeys))]["repo_key"] == rkey
    }


def load_or_build_plan(
    task_files: Iterable[str | Path],
    catalog_files: Iterable[str | Path],
    workdir: Path,
    plan_dir: Path,
    *,
    label: bool = False,
) -> Plan:
    """Cached plan for these inputs (content-addressed under `plan_dir`); `label`: of
    labelling candidates (a plan of its own: other records are valid)."""
    task_paths = [Path(p) for p in task_files]
    catalog_paths = [Path(p) for p in catalog_files]
    for p in task_paths:
        if not p.exists():
            raise TaskFileMissing(f"task file {p} does not exist; check --config tasks=... or --tasks")
    require_catalog_files(catalog_paths)
    fp = _fingerprint(task_paths, catalog_paths, workdir) + ("-label" if label else "")
    plan_path = plan_dir / fp / "plan.json"
    if plan_path.exists():
        return Plan.from_dict(json.loads(plan_path.read_text()))
    catalog = Catalog.load(catalog_paths)
    plan = build_plan(task_paths, catalog, workdir, plan_dir / fp / "tasks.jsonl", label=label)
    plan.fingerprint = fp
    atomic_write_text(plan_path, plan_text(plan))
    return plan


def plan_text(plan: Plan) -> str:
    """The plan file's bytes: compact JSON with sorted keys. Not indented: json's indenting
    encoder is pure Python, ~10x slower than the compact one at 5k environments (and every
    spec file below likewise)."""
    return json.dumps(plan.to_dict(), sort_keys=True) + "\n"


#: How many invalid records a warning lists before pointing at the run report.
SHOWN_INVALID = 20


def format_invalid(rec: dict[str, Any]) -> str:
    """One invalid record as one line: file:line (instance id): field 'x': why."""
    return str(InvalidRecord(**rec))


def invalid_summary(plan: Plan, *, shown: int = SHOWN_INVALID) -> tuple[str | None, str | None]:
    """(warning, fatal) for the records a plan had to leave out.

    A plan with usable tasks and some invalid records is worth running (the report lists
    the rest): a multi-line warning naming each record by file, line and field. A plan with
    no usable task at all is an error: one line naming the first bad record.
    """
    bad = plan.invalid
    if plan.n_tasks == 0:
        if not bad:
            return None, "the task files hold no task record; check --config tasks=... or --tasks"
        return None, (
            f"no usable task in the task files ({len(bad)} invalid record(s)); first: {format_invalid(bad[0])}"
        )
    if not bad:
        return None, None
    lines = [f"minisandbox: warning: {len(bad)} task record(s) are invalid and left out ({plan.n_tasks} usable):"]
    lines += [f"  {format_invalid(r)}" for r in bad[:shown]]
    if len(bad) > shown:
        lines.append(f"  ... and {len(bad) - shown} more (all in results/report.txt)")
    return "\n".join(lines), None


def write_plan_files(plan: Plan, spec_dir: Path, current: Path) -> None:
    """The per-key spec files and the current plan (`write_key_specs`, `write_current`),
    skipped when the last plan written there was this one: a marker beside `current` holds
    that plan's fingerprint. Every parse of a run (and of every cluster job) takes this
    path; checking 5k environments' files one by one cost ~0.5 s per parse."""
    marker = current.with_name(current.name + ".fingerprint")
    if plan.fingerprint and marker.exists() and marker.read_text() == plan.fingerprint:
        return
    write_key_specs(plan, spec_dir)
    write_current(plan, current)
    if plan.fingerprint:
        atomic_write_text(marker, plan.fingerprint)


def write_current(plan: Plan, path: Path) -> None:
    """A stable path to the current plan (for rule params: a path that never changes)."""
    text = plan_text(plan)  # the bytes of the fingerprinted plan file
    if not path.exists() or path.read_text() != text:
        atomic_write_text(path, text)


def _write_new(path: str, text: str) -> None:
    """A small file readers see whole or not at all (temp name + rename), with the fewest
    system calls: at 5k environments planning writes ~20k of them, and their system time
    was most of a cold plan's CPU (`fsutil.atomic_write_text` also creates the parent and
    checks the temp file on every call)."""
    tmp = f"{path}.{os.getpid()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)
    os.rename(tmp, path)


def write_key_specs(plan: Plan, spec_dir: Path) -> None:
    """One immutable JSON per key (content never changes for a key), written once.

    Rules take these files as inputs instead of the plan, so adding tasks never touches
    the inputs of an existing environment's jobs.
    """
    for kind, entries in (("env", plan.envs), ("repo", plan.repos), ("interp", plan.interps)):
        d = spec_dir / kind
        d.mkdir(parents=True, exist_ok=True)
        present = {e.name for e in os.scandir(d)}
        for key, entry in entries.items():
            if f"{key}.json" not in present:
                _write_new(f"{d}/{key}.json", json.dumps({"key": key, **entry}, sort_keys=True) + "\n")
    # Per-environment task-set digests: rewritten only when that environment's tasks change,
    # so the environment's job (which validates its tasks) reruns for exactly those.
    d = spec_dir / "env-tasks"
    d.mkdir(parents=True, exist_ok=True)
    present = {e.name for e in os.scandir(d)}
    for key, digest in plan.env_tasks.items():
        path = f"{d}/{key}.json"
        # the indented form, as before: a changed byte would rerun every environment's job
        text = f'{{\n "env_key": {json.dumps(key)},\n "tasks_sha256": {json.dumps(digest)}\n}}\n'
        if f"{key}.json" not in present:
            _write_new(path, text)
        else:
            with open(path) as fh:
                if fh.read() != text:
                    _write_new(path, text)
    d = spec_dir / "source"
    d.mkdir(parents=True, exist_ok=True)
    for sid, src in plan.sources.items():
        path = d / f"{sid}.json"
        if not path.exists():
            _write_new(str(path), json.dumps({"source_id": sid, "source": src}, sort_keys=True) + "\n")
