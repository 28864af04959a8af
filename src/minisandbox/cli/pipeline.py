"""Pipeline commands, one per Snakemake rule (rules stay thin and call these)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from . import pipeline


def _p(s: str) -> Path:
    return Path(s)


def _add(sub, name: str, help_text: str, func, args: list[tuple[str, dict]]) -> None:
    p = sub.add_parser(name, help=help_text, description=help_text)
    for flag, kw in args:
        p.add_argument(flag, **kw)
    p.set_defaults(func=func)


def _status_exit(st) -> int:
    # A recorded failure is a result, not an error: the rule succeeds and the index reports it.
    return 0


def cmd_plan(a: argparse.Namespace) -> int:
    from .plan import load_or_build_plan

    plan = load_or_build_plan(a.tasks, a.catalog, Path.cwd(), Path(a.plan_dir))
    print(json.dumps({"tasks": plan.n_tasks, "envs": len(plan.envs), "repos": len(plan.repos),
                      "sources": len(plan.sources), "invalid": len(plan.invalid)}, indent=1))
    for rec in plan.invalid:
        print(f"INVALID {rec['file']}:{rec['line']} {rec.get('instance_id') or ''} field {rec['field']}: {rec['error']}")
    return 0


def cmd_bundled(a: argparse.Namespace) -> int:
    from .bundled import materialize

    repos = materialize(Path(a.dest))
    Path(a.done).write_text(json.dumps({k: str(v) for k, v in sorted(repos.items())}, indent=1) + "\n")
    return 0


def register(sub) -> None:
    _add(sub, "plan", "Expand task files into unique repos and environments (prints counts).", cmd_plan, [
        ("--tasks", dict(nargs="+", required=True)),
        ("--catalog", dict(nargs="+", required=True)),
        ("--plan-dir", dict(default="results/work/plan")),
    ])
    _add(sub, "bundled", "Create the bundled task set's git repositories locally.", cmd_bundled, [
        ("--dest", dict(required=True)), ("--done", dict(required=True)),
    ])
    _add(sub, "mirror", "Clone or update the bare mirror of one source.", lambda a: _status_exit(
        pipeline.step_mirror(_p(a.spec), _p(a.mirror), _p(a.status), _p(a.log))), [
        ("--spec", dict(required=True)), ("--mirror", dict(required=True)),
        ("--status", dict(required=True)), ("--log", dict(required=True)),
    ])
    _add(sub, "snapshot", "Write a commit's tree as a fresh single-commit repository.", lambda a: _status_exit(
        pipeline.step_snapshot(_p(a.spec), _p(a.mirror), _p(a.mirror_status), _p(a.out), _p(a.status))), [
        ("--spec", dict(required=True)), ("--mirror", dict(required=True)),
        ("--mirror-status", dict(required=True)), ("--out", dict(required=True)), ("--status", dict(required=True)),
    ])
    _add(sub, "resolve", "Resolve an environment's dependency input to a pinned lock.", lambda a: _status_exit(
        pipeline.step_resolve(_p(a.spec), _p(a.repo), _p(a.repo_status), _p(a.out), _p(a.log))), [
        ("--spec", dict(required=True)), ("--repo", dict(required=True)),
        ("--repo-status", dict(required=True)), ("--out", dict(required=True)), ("--log", dict(required=True)),
    ])
    _add(sub, "build", "Build an environment's venv at the canonical path.", lambda a: _status_exit(
        pipeline.step_build(_p(a.spec), _p(a.lock), _p(a.repo), _p(a.out), _p(a.status), _p(a.log), a.timeout)), [
        ("--spec", dict(required=True)), ("--lock", dict(required=True)), ("--repo", dict(required=True)),
        ("--out", dict(required=True)), ("--status", dict(required=True)), ("--log", dict(required=True)),
        ("--timeout", dict(type=float, default=1800)),
    ])
    _add(sub, "pack", "Pack a tree into a deterministic archive.", lambda a: _status_exit(
        pipeline.step_pack(a.key, _p(a.tree), _p(a.upstream), _p(a.out), _p(a.status), a.format, a.level,
                           image=a.image)), [
        ("--key", dict(required=True)), ("--tree", dict(required=True)), ("--upstream", dict(required=True)),
        ("--out", dict(required=True)), ("--status", dict(required=True)),
        ("--format", dict(default="tar.zst", choices=["tar.zst", "tar.gz"])), ("--level", dict(type=int, default=3)),
        ("--image", dict(action="store_true", help="also build a squashfs image (root nodes mount it)")),
    ])
    _add(sub, "checksum", "Digest an archive and write its manifest.", lambda a: _status_exit(
        pipeline.step_checksum(a.kind, _p(a.spec), _p(a.archive), _p(a.pack_status), _p(a.upstream), _p(a.out))), [
        ("--kind", dict(required=True, choices=["env", "repo"])), ("--spec", dict(required=True)),
        ("--archive", dict(required=True)), ("--pack-status", dict(required=True)),
        ("--upstream", dict(required=True)), ("--out", dict(required=True)),
    ])
    _add(sub, "publish", "Upload an archive and its manifest (atomically) to a store.", lambda a: _status_exit(
        pipeline.step_publish(a.store, a.kind, a.key, _p(a.manifest), _p(a.archive),
                              _p(a.log) if a.log else None, _p(a.out))), [
        ("--store", dict(required=True)), ("--kind", dict(required=True, choices=["env", "repo"])),
        ("--key", dict(required=True)), ("--manifest", dict(required=True)), ("--archive", dict(required=True)),
        ("--log", dict(default=None)), ("--out", dict(required=True)),
    ])
    _add(sub, "index", "Write the store's index (all tasks -> artifacts) and the run report.", cmd_index, [
        ("--store", dict(required=True)), ("--plan", dict(required=True)), ("--receipts", dict(required=True)),
        ("--validation", dict(nargs="*", default=[])), ("--out", dict(required=True)),
        ("--report", dict(required=True)),
    ])


def cmd_index(a: argparse.Namespace) -> int:
    report = pipeline.step_index(a.store, _p(a.plan), _p(a.receipts), [_p(v) for v in a.validation],
                                 _p(a.out), _p(a.report))
    text = pipeline.format_report(report)
    Path(a.report).with_suffix(".txt").write_text(text + "\n")
    print(text)
    return 0
