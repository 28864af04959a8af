"""The workflow's jobs that span building and grading: one environment key's job (rule
`env`, `minisandbox pipeline env`) builds and publishes the environment
(`minisandbox.pipeline.envjob`), then validates its tasks (`minisandbox.grading.validate`)
or, in label mode, labels its candidates (`minisandbox.grading.label`).

Why a layer of its own: `pipeline` may not import `grading` (nodes grade without the build
tools; the build never grades), so the composition lives above both, beside `task`, and
the CLI only parses arguments and prints what this returns.

May import: the contracts, `sandbox`, `node`, `pipeline` and `grading`; imported by the CLI.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from minisandbox.pipeline.envjob import EnvJobSettings


@dataclass(frozen=True)
class EnvJobRequest:
    """One environment job: where its inputs are and what to do after the build."""

    work: Path  # the workflow's workdir
    spec: Path  # the key's spec file (written at planning time)
    plan: Path  # the plan (specs, tasks per key)
    receipt: Path  # the publish receipt this job writes
    output: Path  # the validation (or labelling) result this job writes
    validate: bool
    label: bool = False
    repeats: int = 1
    workers: int = 2
    max_f2p: int = 0
    resume_passes: int = 2


@dataclass
class EnvJobReport:
    """What the job did, as the lines the CLI prints."""

    key: str
    lines: list[str] = field(default_factory=list)


def _summary(status) -> str:
    return f"{status.key}: {'ok' if status.ok else 'FAILED ' + (status.error or '')}"


def env_job(settings: EnvJobSettings, job: EnvJobRequest) -> EnvJobReport:
    """The build and publish (reused when only validation inputs changed), then the
    validation of its tasks, their labelling, or a `validated: false` result; finally the
    record of which validation inputs the result is for."""
    from minisandbox.grading.validate import step_validate, write_not_validated
    from minisandbox.pipeline.envjob import mark_validated
    from minisandbox.pipeline.envjob import run_env_job as build_and_publish

    plan = json.loads(job.plan.read_text())
    res = build_and_publish(
        job.work,
        settings,
        job.spec,
        plan,
        job.receipt,
        validate=job.validate or job.label,
        repeats=job.repeats,
        label=job.label,
        max_f2p=job.max_f2p,
        resume_passes=job.resume_passes,
    )
    report = EnvJobReport(res.key)
    if res.folded_repo:
        report.lines.append(f"repo {res.folded_repo}: published by this job (no other environment or task uses it)")
    report.lines.append(
        f"env {_summary(res.status)}" + (" (build reused: only its validation inputs changed)" if res.reused else "")
    )
    receipts, out = job.receipt.parent.parent, job.output
    logs = out.parent / "logs" / res.key
    if job.label:
        from minisandbox.grading.label import step_label

        lab = step_label(
            job.plan,
            res.key,
            receipts,
            settings.store,
            out,
            logs,
            repeats=job.repeats,
            workers=job.workers,
            max_f2p=job.max_f2p,
            passes=job.resume_passes,
        )
        report.lines.append(
            f"labelled {len(lab.tasks)} candidate(s) of {res.key} in {lab.seconds:.1f} s: "
            + ", ".join(f"{k} {v}" for k, v in lab.counts().items())
        )
    elif job.validate:
        val = step_validate(
            job.plan, res.key, receipts, settings.store, out, logs, repeats=job.repeats, workers=job.workers
        )
        report.lines.append(
            f"validated {len(val.tasks)} task(s) of {res.key} in {val.seconds:.1f} s: "
            + ", ".join(f"{k} {v}" for k, v in val.counts().items())
        )
    else:
        write_not_validated(res.key, plan["envs"][res.key]["spec"]["name"], out)
    mark_validated(job.work, res.key, res.validation)
    return report
