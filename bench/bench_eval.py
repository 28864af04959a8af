#!/usr/bin/env python3
"""Grading benchmark: seconds per evaluation of a gold patch, in a fresh
sandbox (the production path) vs a plain venv on the host (the baseline, measured in the
same run on the same tasks), and the validation cost per task.

Needs a published store of the bundled set (`snakemake --cores 2` in the checkout, or
pass --store/--catalog/--tasks). Host venvs are built once under --work (not timed).

Usage: python bench/bench_eval.py [--store results/store] [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from tabulate import tabulate

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from minisandbox.catalog import Catalog, spec_for
from minisandbox.grading.evaluate import SandboxExecutor, evaluate, make_host_venv
from minisandbox.paths import REPO_PATH
from minisandbox.records import read_tasks
from minisandbox.node.runtime import prepare
from minisandbox.grading.validate import gold_run


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--store", default=str(ROOT / "results" / "store"))
    ap.add_argument("--catalog", nargs="+", default=[str(ROOT / "config" / "catalog" / "bundled.yaml")])
    ap.add_argument("--tasks", nargs="+", default=[str(ROOT / "config" / "bundled" / "tasks.jsonl"),
                                                   str(ROOT / "config" / "bundled" / "tasks_swebench.jsonl")])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--work", default=None, help="host venv dir (default: a temp dir)")
    a = ap.parse_args()
    catalog = Catalog.load(a.catalog)
    recs = read_tasks(a.tasks).records
    work = Path(a.work or tempfile.mkdtemp(prefix="bench-eval-"))
    sandbox = SandboxExecutor(store=a.store)
    hosts: dict[str, object] = {}
    rows = []
    box_all: list[float] = []
    host_all: list[float] = []
    for rec in recs:
        spec = spec_for(catalog, rec)
        with prepare(rec.instance_id, a.store) as pt:
            key = pt.task["env_key"]
            if key not in hosts:
                hosts[key] = make_host_venv(spec, pt.layers[REPO_PATH], work / key)
            host = hosts[key]
            host.snapshot = pt.layers[REPO_PATH]
        patch, reverse = gold_run(rec)
        box_t, host_t = [], []
        for _ in range(a.repeats):
            t0 = time.perf_counter()
            ev = evaluate(rec, spec, patch, sandbox, reverse=reverse)
            box_t.append(time.perf_counter() - t0)
            assert ev.resolved, (rec.instance_id, ev.reason)
            t0 = time.perf_counter()
            ev = evaluate(rec, spec, patch, host, reverse=reverse)
            host_t.append(time.perf_counter() - t0)
            assert ev.resolved, (rec.instance_id, ev.reason)
        box_all += box_t
        host_all += host_t
        rows.append([rec.instance_id[:48], rec.format, statistics.median(box_t), statistics.median(host_t),
                     statistics.median(box_t) / statistics.median(host_t)])
    rows.append(["ALL (median)", "", statistics.median(box_all), statistics.median(host_all),
                 statistics.median(box_all) / statistics.median(host_all)])
    print(f"gold-patch evaluation, {a.repeats} repeats per task, fresh environment each time")
    print(tabulate(rows, headers=["task", "format", "sandbox s", "host venv s (baseline)", "ratio"],
                   floatfmt=".2f"))
    print(f"validation of one task = 2 evaluations per repeat: ~{2 * statistics.median(box_all):.1f} s in the sandbox")
    return 0


if __name__ == "__main__":
    sys.exit(main())
