"""Grading command: `minisandbox eval` (predictions -> SWE-bench reports). The workflow's
validation steps are `minisandbox pipeline validate|validated-tasks` (cli/pipeline.py)."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from minisandbox.catalog import default_catalog_paths


def cmd_eval(a: argparse.Namespace) -> int:
    from minisandbox.catalog import Catalog, spec_for
    from minisandbox.grading.evaluate import EvalTarget, SandboxExecutor, load_predictions, run_eval
    from minisandbox.records import TaskRecord, read_tasks

    preds = load_predictions(a.predictions)
    if not preds:
        raise ValueError(f"{a.predictions} holds no predictions")
    catalogs = a.catalog or default_catalog_paths()
    if not catalogs:
        raise ValueError("no environment catalog found; pass --catalog config/catalog/<name>.yaml")
    catalog = Catalog.load(catalogs)
    records: dict[str, TaskRecord] = {}
    if a.tasks:
        ing = read_tasks(a.tasks)
        for bad in ing.invalid:
            print(f"minisandbox eval: skipping invalid record {bad}", file=sys.stderr)
        records = {r.instance_id: r for r in ing.records}
    else:  # the records the store's index holds
        from minisandbox.node.runtime import StoreIndexMissing, lookup_task
        from minisandbox.node.store import open_store

        st = open_store(a.store)
        for iid in preds:
            try:
                records[iid] = TaskRecord.from_dict(lookup_task(st, iid)["record"])
            except StoreIndexMissing:
                raise
            except Exception as exc:  # noqa: BLE001 - reported per instance, the others go on
                print(f"minisandbox eval: {iid}: {exc}", file=sys.stderr)
    executor = SandboxExecutor(store=a.store)
    targets: dict[str, Any] = {}
    for iid, rec in records.items():
        try:
            targets[iid] = EvalTarget(rec, spec_for(catalog, rec), executor)
        except KeyError as exc:
            targets[iid] = ValueError(str(exc).strip("'\""))
    missing = sorted(set(preds) - set(records))
    if missing:
        print(f"minisandbox eval: {len(missing)} prediction(s) name no known task, e.g. {missing[0]}",
              file=sys.stderr)
    t0 = time.monotonic()
    summary, path = run_eval(preds, targets, Path(a.out), run_id=a.run_id, workers=a.workers,
                             resume=not a.no_resume)
    print(f"evaluated {summary['completed_instances']} of {summary['total_instances']} instances in "
          f"{time.monotonic() - t0:.1f} s: {summary['resolved_instances']} resolved, "
          f"{summary['unresolved_instances']} unresolved, {summary['empty_patch_instances']} empty patches, "
          f"{summary['error_instances']} errors; reasons {summary['reasons']}")
    print(f"report: {path}")
    return 0


def register(sub) -> None:
    p = sub.add_parser(
        "eval", help="Grade predictions in fresh sandboxes (SWE-bench report format).",
        description="Evaluate SWE-bench-format predictions (instance_id, model_patch, model_name_or_path): "
                    "each patch in a fresh sandbox from the published store; writes "
                    "OUT/<model>/<instance_id>/report.json and the run summary OUT/<model>.<run_id>.json. "
                    "Re-running resumes: instances with a report are not evaluated again.")
    p.add_argument("--store", help="published store URL (default: $MINISANDBOX_STORE or the default config's)")
    p.add_argument("--tasks", nargs="+", help="task files (JSONL/JSON/Parquet); default: the records in the store's index")
    p.add_argument("--predictions", required=True, help="predictions JSONL (or JSON)")
    p.add_argument("--catalog", nargs="+", help="environment catalogs (default: those config/config.yaml names)")
    p.add_argument("--out", default="results/eval", help="report directory (default: results/eval)")
    p.add_argument("--run-id", default="minisandbox", help="names the summary file")
    p.add_argument("--workers", type=int, default=2, help="concurrent evaluations (default: 2)")
    p.add_argument("--no-resume", action="store_true", help="evaluate again even if a report exists")
    p.set_defaults(func=cmd_eval)
