"""The workflow's one job per environment key (rule `env`, `minisandbox pipeline env`).

Snakemake plans ~1 ms of CPU per job (docs/pipeline.md, "Numbers"), so 50k tasks over
5k environments only plan in seconds with about one job per environment. This job runs,
in one process:

1. the repo snapshot the environment is built at, when no other environment or task uses
   it (`Plan.folded`; `steps.job_repo`, receipt `published/repo/<repo_key>.json` as for a
   `repo` job); any other repo has a `repo` job of its own that this job waits for;
2. resolve, build, pack, checksum and publish (`steps.job_env`);
3. then the caller validates the environment's tasks (`minisandbox.grading.validate`), or
   in label mode labels its candidates (`minisandbox.grading.label`); the CLI glues them,
   since pipeline code must not import grading.

A job that reruns only because its validation inputs changed (tasks added to the
environment, a task's repo republished, validation switched on) must not rebuild: a
record under `<work>/jobs/env/<key>.json` holds what the last build depended on and its
publish receipt. The build is reused when that record says the build succeeded with
exactly the current build inputs and the validation inputs differ; in every other case
(forced rerun, deleted receipt, changed settings or interpreter or repo, a failed build)
the environment is built again, as before the merge.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from minisandbox.fsutil import atomic_write_json, atomic_write_text
from minisandbox.status import StageStatus, read_status

#: Bump when the record's meaning changes (an old record is then never reused).
RECORD_SCHEMA = 1


@dataclass(frozen=True)
class EnvJobSettings:
    """The settings that shape a published environment (besides its key)."""

    store: str
    fmt: str
    level: int
    image: bool
    image_whole: bool
    timeout: float
    #: publish a tar archive per layer besides the image's chunks (config `archive`)
    archive: bool = True


@dataclass(frozen=True)
class EnvJobResult:
    status: StageStatus  # the publish receipt's status
    key: str
    reused: bool  # the build of an earlier run was reused (only validation inputs changed)
    folded_repo: str | None  # the repo key this job published too, if any
    validation: dict[str, Any]  # the validation inputs (`validation_inputs`), for `mark_validated`


def _digest(path: Path) -> str | None:
    """sha256 of a small file's bytes, None when it does not exist."""
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except FileNotFoundError:
        return None


def record_path(work: Path, key: str) -> Path:
    return Path(work) / "jobs" / "env" / f"{key}.json"


def _receipts(receipt_out: Path) -> Path:
    """`<work>/published`, from this job's receipt `<work>/published/env/<key>.json`."""
    return Path(receipt_out).parent.parent


def build_inputs(settings: EnvJobSettings, entry: dict[str, Any], folded: bool, receipts: Path) -> dict[str, Any]:
    """Everything a rebuild of this key would depend on that its key does not pin: the
    settings, the interpreter layer's receipt and, for a repo built by a `repo` job, that
    job's receipt (a republished snapshot rebuilds, as when they were separate rules)."""
    ikey = (entry.get("interpreter") or {}).get("key")
    return {
        "schema": RECORD_SCHEMA,
        "key": entry["key"],
        "settings": asdict(settings),
        "interp": _digest(receipts / "interp" / f"{ikey}.json") if ikey else None,
        "repo": "folded" if folded else _digest(receipts / "repo" / f"{entry['repo_key']}.json"),
    }


def validation_inputs(
    plan: dict[str, Any],
    key: str,
    work: Path,
    receipts: Path,
    *,
    validate: bool,
    repeats: int,
    label: bool = False,
    max_f2p: int = 0,
    resume_passes: int = 2,
) -> dict[str, Any]:
    """What the validation (or, in label mode, the labelling) of this environment depends
    on beyond its build: its task set (the digest file the rule takes as input), the
    receipts of the repos its tasks start from (except the one this job publishes) and the
    settings."""
    if not validate:
        return {"validate": False}
    mine = {r for r, e in plan.get("folded", {}).items() if e == key}
    return {
        "validate": True,
        **({"label": True, "max_f2p": max_f2p, "resume_passes": resume_passes} if label else {}),
        "repeats": repeats,
        "tasks": _digest(Path(work) / "specs" / "env-tasks" / f"{key}.json"),
        "repos": {
            r: _digest(receipts / "repo" / f"{r}.json") for r in plan.get("env_repos", {}).get(key, []) if r not in mine
        },
    }


def _reusable(
    record: dict[str, Any] | None,
    build: dict[str, Any],
    validation: dict[str, Any],
    receipts: Path,
    folded_repo: str | None,
) -> bool:
    if not record or record.get("build") != build or record.get("validation") == validation:
        return False  # no record, other build inputs, or nothing but a forced rerun: build
    receipt = record.get("receipt") or {}
    if not receipt.get("ok") or (receipt.get("data") or {}).get("status") != "ok":
        return False  # failures are retried whenever the job runs
    return folded_repo is None or (receipts / "repo" / f"{folded_repo}.json").exists()


def _read_record(path: Path) -> dict[str, Any] | None:
    try:
        rec = json.loads(path.read_text())
    except (FileNotFoundError, ValueError):
        return None
    return rec if isinstance(rec, dict) else None


def run_env_job(
    work: Path,
    settings: EnvJobSettings,
    env_spec: Path,
    plan: dict[str, Any],
    receipt_out: Path,
    *,
    validate: bool,
    repeats: int,
    label: bool = False,
    max_f2p: int = 0,
    resume_passes: int = 2,
) -> EnvJobResult:
    """Steps 1-2 of the module docstring; writes the receipt and the record."""
    from minisandbox.manifest import FORMATS
    from minisandbox.pipeline.steps import WorkPaths, job_env, job_repo

    work, receipt_out = Path(work), Path(receipt_out)
    entry = json.loads(Path(env_spec).read_text())
    key, rkey = entry["key"], entry["repo_key"]
    folded_repo = rkey if plan.get("folded", {}).get(rkey) == key else None
    receipts = _receipts(receipt_out)
    build = build_inputs(settings, entry, folded_repo is not None, receipts)
    validation = validation_inputs(
        plan,
        key,
        work,
        receipts,
        validate=validate,
        repeats=repeats,
        label=label,
        max_f2p=max_f2p,
        resume_passes=resume_passes,
    )
    rec_path = record_path(work, key)
    record = _read_record(rec_path)
    if _reusable(record, build, validation, receipts, folded_repo):
        assert record is not None
        atomic_write_json(receipt_out, record["receipt"])
        return EnvJobResult(read_status(receipt_out), key, True, folded_repo, validation)

    p = WorkPaths(work, FORMATS[settings.fmt].lstrip("."))
    if folded_repo is not None:
        repo = plan["repos"][rkey]
        job_repo(
            work,
            settings.store,
            work / "specs" / "repo" / f"{rkey}.json",
            work / "specs" / "source" / f"{repo['source_id']}.json",
            settings.fmt,
            settings.level,
            settings.image,
            receipts / "repo" / f"{rkey}.json",
            image_whole=settings.image_whole,
            with_archive=settings.archive,
        )
    st = job_env(
        work,
        settings.store,
        Path(env_spec),
        p.tree("repo", rkey),
        p.tree_status("repo", rkey),
        settings.fmt,
        settings.level,
        settings.image,
        settings.timeout,
        receipt_out,
        image_whole=settings.image_whole,
        with_archive=settings.archive,
    )
    atomic_write_json(rec_path, {"build": build, "validation": None, "receipt": json.loads(receipt_out.read_text())})
    return EnvJobResult(st, key, False, folded_repo, validation)


def mark_validated(work: Path, key: str, validation: dict[str, Any]) -> None:
    """After the validation output is written: the record's validation inputs are these
    (a later rerun with other validation inputs reuses the build)."""
    path = record_path(work, key)
    record = _read_record(path)
    if record is not None:
        record["validation"] = validation
        atomic_write_text(path, json.dumps(record, indent=1, sort_keys=True) + "\n")
