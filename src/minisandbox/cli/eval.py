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
from minisandbox.errors import MinisandboxError


class UnknownPredictions(MinisandboxError, KeyError):
    """Predictions name instances that are not among the tasks (wrong --tasks or --store?)."""

    def __str__(self) -> str:  # KeyError quotes its message; we want one plain line
        return str(self.args[0])


def _unknown(ids: list[str], source: str) -> str:
    shown = ", ".join(ids[:5]) + (f" and {len(ids) - 5} more" if len(ids) > 5 else "")
    return (f"{len(ids)} prediction(s) name no task in {source}: {shown}; check --tasks/--store "
            f"(list a store's tasks with `minisandbox tasks --store URL`)")


def cmd_eval(a: argparse.Namespace) -> int:
    from minisandbox.catalog import Catalog, CatalogError, spec_for
    from minisandbox.grading.evaluate import (
        EvalTarget,
        PredictionsError,
        SandboxExecutor,
        load_predictions,
        run_eval,
    )
    from minisandbox.index import UnknownTask
    from minisandbox.records import TaskRecord, read_tasks

    preds = load_predictions(a.predictions)
    if not preds:
        raise PredictionsError(f"{a.predictions} holds no predictions")
    catalogs = a.catalog or default_catalog_paths()
    if not catalogs:
        raise CatalogError("no environment catalog found; pass --catalog config/catalog/<name>.yaml")
    catalog = Catalog.load(catalogs)
    records: dict[str, TaskRecord] = {}
    targets: dict[str, Any] = {}  # instance -> EvalTarget, or the exception that stops it
    if a.tasks:
        ing = read_tasks(a.tasks)
        for bad in ing.invalid:
            print(f"minisandbox eval: skipping invalid record {bad}", file=sys.stderr)
        records = {r.instance_id: r for r in ing.records}
        source = " ".join(a.tasks)
    else:  # the records the store's index holds
        from minisandbox.node.runtime import TaskNotReady, lookup_task
        from minisandbox.node.store import open_store

        st = open_store(a.store)
        source = f"store {st.url}"
        for iid in preds:
            try:
                records[iid] = TaskRecord.from_dict(lookup_task(st, iid)["record"])
            except UnknownTask:
                continue  # counted below with the others
            except TaskNotReady as exc:  # its build failed: graded as an error, named in the report
                targets[iid] = exc
    unknown = sorted(set(preds) - set(records) - set(targets))
    if len(unknown) == len(preds):
        raise UnknownPredictions(_unknown(unknown, source))
    executor = SandboxExecutor(store=a.store)
    for iid, rec in records.items():
        try:
            targets[iid] = EvalTarget(rec, spec_for(catalog, rec), executor)
        except KeyError as exc:
            targets[iid] = ValueError(str(exc).strip("'\""))
    t0 = time.monotonic()
    summary, path = run_eval(preds, targets, Path(a.out), run_id=a.run_id, workers=a.workers,
                             resume=not a.no_resume, grading=a.grading)
    if a.json:
        print(json.dumps({**summary, "report": str(path), "unknown_ids": unknown}, indent=1))
    else:
        print(f"evaluated {summary['completed_instances']} of {summary['total_instances']} instances in "
              f"{time.monotonic() - t0:.1f} s: {summary['resolved_instances']} resolved, "
              f"{summary['unresolved_instances']} unresolved, {summary['empty_patch_instances']} empty patches, "
              f"{summary['error_instances']} errors; reasons {summary['reasons']}")
        print(f"report: {path}")
    if unknown:  # the known ones are graded; the run still fails loudly
        raise UnknownPredictions(_unknown(unknown, source))
    return 0


def register(sub) -> None:
    p = sub.add_parser(
        "eval", help="Grade predictions in fresh sandboxes (SWE-bench report format).",
        description="Evaluate SWE-bench-format predictions (instance_id, model_patch, model_name_or_path): "
                    "each patch in a fresh sandbox from the published store; writes "
                    "OUT/<model>/<instance_id>/report.json and the run summary OUT/<model>.<run_id>.json. "
                    "Re-running resumes: instances with a report are not evaluated again. Exits 1 when a "
                    "prediction names no known task (the others are graded).")
    p.add_argument("--store", help="published store URL (default: $MINISANDBOX_STORE or the default config's)")
    p.add_argument("--tasks", nargs="+", help="task files (JSONL/JSON/Parquet); default: the records in the store's index")
    p.add_argument("--predictions", required=True, help="predictions JSONL (or JSON)")
    p.add_argument("--catalog", nargs="+", help="environment catalogs (default: those config/config.yaml names)")
    p.add_argument("--out", default="results/eval", help="report directory (default: results/eval)")
    p.add_argument("--run-id", default="minisandbox", help="names the summary file")
    p.add_argument("--workers", type=int, default=2, help="concurrent evaluations (default: 2)")
    p.add_argument("--no-resume", action="store_true", help="evaluate again even if a report exists")
    p.add_argument("--json", action="store_true", help="print the run summary as JSON (progress stays on stderr)")
    p.add_argument("--grading", choices=("strict", "official"), default="strict",
                   help="strict (default: no false positives, for rewards) or official (the decision of the task's "
                        "own harness, SWE-bench's or SWE-smith's, to compare with leaderboards); docs/grading.md")
    p.set_defaults(func=cmd_eval)
