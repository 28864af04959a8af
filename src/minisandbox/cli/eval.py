"""Grading commands: `eval` (predictions -> SWE-bench reports), `validate` (one
environment's tasks, a workflow job) and `validated-tasks` (the list of valid tasks)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from .paths import project_root


def _default_catalogs() -> list[str]:
    """The catalogs the default config names, found in the working dir or the checkout."""
    import yaml

    for base in (Path.cwd(), project_root()):
        cfg = base / "config" / "config.yaml"
        if cfg.exists():
            names = (yaml.safe_load(cfg.read_text()) or {}).get("catalog") or []
            names = [names] if isinstance(names, str) else names
            found = [str(base / n) for n in names if (base / n).exists()]
            if found:
                return found
    return []


def to_raw(record) -> dict[str, Any]:
    """A TaskRecord back in its source format (SWE-smith or SWE-bench field names)."""
    raw: dict[str, Any] = {
        "instance_id": record.instance_id,
        "repo": record.repo,
        "patch": record.patch,
        "FAIL_TO_PASS": list(record.fail_to_pass),
        "PASS_TO_PASS": list(record.pass_to_pass),
        "problem_statement": record.problem_statement,
    }
    if record.format == "swebench":
        raw.update(base_commit=record.base_commit, version=record.version, test_patch=record.test_patch,
                   environment_setup_commit=record.environment_setup_commit,
                   FAIL_TO_PASS=json.dumps(list(record.fail_to_pass)),
                   PASS_TO_PASS=json.dumps(list(record.pass_to_pass)))
    else:
        raw["image_name"] = record.image_name
    return raw


def cmd_eval(a: argparse.Namespace) -> int:
    from .catalog import Catalog, spec_for
    from .evaluate import EvalTarget, SandboxExecutor, load_predictions, run_eval
    from .records import TaskRecord, read_tasks

    preds = load_predictions(a.predictions)
    if not preds:
        raise ValueError(f"{a.predictions} holds no predictions")
    catalogs = a.catalog or _default_catalogs()
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
        from .runtime import StoreIndexMissing, lookup_task
        from .store import open_store

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


def cmd_validate(a: argparse.Namespace) -> int:
    from .validate import step_validate

    res = step_validate(Path(a.plan), a.env_key, Path(a.receipts), a.store, Path(a.out), Path(a.logs),
                        repeats=a.repeats, workers=a.workers)
    counts = res.counts()
    print(f"validated {len(res.tasks)} task(s) of {a.env_key} in {res.seconds:.1f} s: "
          + ", ".join(f"{k} {v}" for k, v in counts.items()))
    return 0


def cmd_validated_tasks(a: argparse.Namespace) -> int:
    from .records import TaskRecord
    from .validate import validated_ids

    valid = set(validated_ids(Path(v) for v in a.validation))
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    tmp = out.with_name(f".{out.name}.tmp")
    with open(a.tasks, encoding="utf-8") as src, tmp.open("w", encoding="utf-8") as dst:
        for line in src:
            t = json.loads(line)
            if t.get("instance_id") in valid:
                dst.write(json.dumps(to_raw(TaskRecord.from_dict(t["record"])), ensure_ascii=False) + "\n")
                n += 1
    tmp.replace(out)
    print(f"{n} valid task(s) written to {out}")
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

    v = sub.add_parser("validate", help="Validate one environment's tasks (workflow job).",
                       description="For every task of one environment: without a patch F2P fails and P2P "
                                   "passes; with the gold patch all pass. Writes the per-task statuses "
                                   "(valid, env-broken, flaky, timeout) as JSON plus run logs.")
    v.add_argument("--plan", required=True)
    v.add_argument("--env-key", required=True)
    v.add_argument("--receipts", required=True, help="publish receipts dir (holds env/ and repo/)")
    v.add_argument("--store", required=True)
    v.add_argument("--out", required=True)
    v.add_argument("--logs", required=True)
    v.add_argument("--repeats", type=int, default=1, help="runs per phase; >1 detects flaky tests")
    v.add_argument("--workers", type=int, default=2)
    v.set_defaults(func=cmd_validate)

    t = sub.add_parser("validated-tasks", help="Write the tasks whose validation status is valid.")
    t.add_argument("--validation", nargs="*", default=[], help="validation JSON files")
    t.add_argument("--tasks", required=True, help="the plan's tasks.jsonl")
    t.add_argument("--out", required=True)
    t.set_defaults(func=cmd_validated_tasks)
