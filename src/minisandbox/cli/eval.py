"""Grading command: `minisandbox eval` (predictions -> SWE-bench reports). The workflow's
validation steps are `minisandbox pipeline validate|validated-tasks` (cli/pipeline.py)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from minisandbox.catalog import default_catalog_paths
from minisandbox.cli.options import add_selection_options, selection
from minisandbox.errors import MinisandboxError


class UnknownPredictions(MinisandboxError, KeyError):
    """Predictions name instances that are not among the tasks (wrong --tasks or --store?)."""

    def __str__(self) -> str:  # KeyError quotes its message; we want one plain line
        return str(self.args[0])


def _unknown(ids: list[str], source: str) -> str:
    shown = ", ".join(ids[:5]) + (f" and {len(ids) - 5} more" if len(ids) > 5 else "")
    return (
        f"{len(ids)} prediction(s) name no task in {source}: {shown}; check --tasks/--store "
        f"(list a store's tasks with `minisandbox tasks --store URL`)"
    )


def cmd_eval(args: argparse.Namespace) -> int:
    from minisandbox.catalog import Catalog, CatalogError, spec_for
    from minisandbox.grading.evaluate import (
        EvalInterrupted,
        EvalTarget,
        PredictionsError,
        SandboxExecutor,
        load_predictions,
        run_eval,
    )
    from minisandbox.index import UnknownTask
    from minisandbox.records import TaskRecord, read_tasks

    preds = load_predictions(args.predictions)
    if not preds:
        raise PredictionsError(f"{args.predictions} holds no predictions")
    sel = selection(args)
    if sel.ids is not None:  # a subset of the predictions file: only those are graded
        sel.check_ids(preds, f"the predictions file {args.predictions}")
        preds = {iid: p for iid, p in preds.items() if sel.matches(iid, None)}
    catalogs = args.catalog or default_catalog_paths()
    if not catalogs:
        raise CatalogError("no environment catalog found; pass --catalog config/catalog/<name>.yaml")
    catalog = Catalog.load(catalogs)
    records: dict[str, TaskRecord] = {}
    targets: dict[str, Any] = {}  # instance -> EvalTarget, or the exception that stops it
    repo_of: dict[str, str] = {}  # instance -> its record's repo (for --repo)
    if args.tasks:
        ing = read_tasks(args.tasks)
        for bad in ing.invalid:
            print(f"minisandbox eval: skipping invalid record {bad}", file=sys.stderr)
        records = {r.instance_id: r for r in ing.records if r.instance_id in preds}
        source = " ".join(args.tasks)
    else:  # the records the store's index holds
        from minisandbox.node.published import lookup
        from minisandbox.node.runtime import TaskNotReady, lookup_task
        from minisandbox.node.store import open_store

        st = open_store(args.store)
        source = f"store {st.url}"
        for iid in preds:
            try:
                records[iid] = TaskRecord.from_dict(lookup_task(st, iid)["record"])
            except UnknownTask:
                continue  # counted below with the others
            except TaskNotReady as exc:  # its build failed: graded as an error, named in the report
                targets[iid] = exc
                repo_of[iid] = str(lookup(st, iid)["record"].get("repo", ""))
    repo_of.update({iid: r.repo for iid, r in records.items()})
    if sel.repos:  # only the predictions for tasks of these repositories
        sel.check_repos(repo_of.values(), f"the tasks of {args.predictions} ({source})")
        keep = {iid for iid, repo in repo_of.items() if sel.matches(iid, repo)}
        preds = {iid: p for iid, p in preds.items() if iid in keep}
        records = {iid: r for iid, r in records.items() if iid in keep}
        targets = {iid: t for iid, t in targets.items() if iid in keep}
    unknown = sorted(set(preds) - set(records) - set(targets))
    if len(unknown) == len(preds):
        raise UnknownPredictions(_unknown(unknown, source))
    executor = SandboxExecutor(store=args.store)
    for iid, rec in records.items():
        try:
            targets[iid] = EvalTarget(rec, spec_for(catalog, rec), executor)
        except KeyError as exc:
            targets[iid] = ValueError(str(exc).strip("'\""))
    t0 = time.monotonic()
    try:
        summary, path = run_eval(
            preds,
            targets,
            Path(args.out),
            run_id=args.run_id,
            workers=args.workers,
            resume=not args.no_resume,
            grading=args.grading,
        )
        interrupted = ""
    except EvalInterrupted as stopped:
        summary, path, interrupted = stopped.summary, stopped.path, stopped.signal_name
    if args.json:
        print(json.dumps({**summary, "report": str(path), "unknown_ids": unknown}, indent=1))
    else:
        print(
            f"evaluated {summary['completed_instances']} of {summary['total_instances']} instances in "
            f"{time.monotonic() - t0:.1f} s: {summary['resolved_instances']} resolved, "
            f"{summary['unresolved_instances']} unresolved, {summary['empty_patch_instances']} empty patches, "
            f"{summary['error_instances']} errors; reasons {summary['reasons']}"
        )
        print(f"report: {path}")
    if interrupted:
        print(
            f"minisandbox eval: stopped by {interrupted}: {len(summary['incomplete_ids'])} instance(s) not "
            f"evaluated (the same command resumes); partial summary {path}",
            file=sys.stderr,
        )
        return 130
    if unknown:  # the known ones are graded; the run still fails loudly
        raise UnknownPredictions(_unknown(unknown, source))
    return 0


def register(sub) -> None:
    p = sub.add_parser(
        "eval",
        help="Grade predictions in fresh sandboxes (SWE-bench report format).",
        description="Evaluate SWE-bench-format predictions (instance_id, model_patch, model_name_or_path): "
        "each patch in a fresh sandbox from the published store; writes "
        "OUT/<run_id>/<model>/<instance_id>/ (report.json, patch.diff, run_instance.log, "
        "test_output.txt, eval.sh; SWE-bench's harness layout), OUT/<run_id>/run.log and the run "
        "summary OUT/<model>.<run_id>.json. Re-running resumes: a report is reused only when the "
        "patch, grading mode, grader, task record, spec and layers are all unchanged. Ctrl-C or "
        "SIGTERM stops: running sandboxes are killed, the partial summary is written, exit 130. "
        "Exits 1 when a prediction names no known task (the others are graded).",
    )
    p.add_argument("--store", help="published store URL (default: $MINISANDBOX_STORE or the default config's)")
    p.add_argument(
        "--tasks", nargs="+", help="task files (JSONL/JSON/Parquet); default: the records in the store's index"
    )
    p.add_argument("--predictions", required=True, help="predictions JSONL (or JSON)")
    p.add_argument("--catalog", nargs="+", help="environment catalogs (default: those config/config.yaml names)")
    p.add_argument("--out", default="results/eval", help="report directory (default: results/eval)")
    p.add_argument(
        "--run-id",
        default="minisandbox",
        help="names the run: its directory OUT/<run_id>/ and the summary file (default: minisandbox)",
    )
    p.add_argument("--workers", type=int, default=2, help="concurrent evaluations (default: 2)")
    p.add_argument("--no-resume", action="store_true", help="evaluate again even if an up-to-date report exists")
    add_selection_options(p, "predictions")
    p.add_argument("--json", action="store_true", help="print the run summary as JSON (progress stays on stderr)")
    p.add_argument(
        "--grading",
        choices=("strict", "official"),
        default="strict",
        help="strict (default: no false positives, for rewards) or official (the decision of the task's "
        "own harness, SWE-bench's or SWE-smith's, to compare with leaderboards); docs/grading.md",
    )
    p.set_defaults(func=cmd_eval)
