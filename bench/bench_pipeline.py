#!/usr/bin/env python3
"""Pipeline benchmark: planning cost at SWE-smith scale, and the bundled build.

Prints two tables:
1. `snakemake -n` wall time and peak RSS for synthetic SWE-smith-shaped task sets
   (5k and 50k tasks over the 133 real profiles; 50k tasks over 5k environments), cold
   (plan cache empty: reads every record) and warm (cached plan), with the baseline
   measured in the same run: the same 5k tasks planned as one Snakemake job per task.
   Targets (docs/pipeline.md): 50k tasks over 133 environments <= 3 s, over 5k environments
   <= 10 s (warm CPU seconds of the `snakemake -n` process; wall on a shared machine is
   mostly other people's load).
2. For the bundled set (run `snakemake --cores 2` first, or pass --build): build time
   per environment and raw venv bytes vs packed bytes (the archive, or the squashfs image
   when the store has no archives, config `archive: false`).

Usage: .venv/bin/python bench/bench_pipeline.py [--repeats 3] [--build] [--skip-baseline]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml
from tabulate import tabulate

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from minisandbox.catalog import Catalog  # noqa: E402

sys.path.insert(0, str(ROOT / "bench"))
from bench_scale import synth_tasks  # noqa: E402  (one synthetic SWE-smith task generator)


def synth_catalog(path: Path, n_envs: int) -> list[str]:
    specs = [{
        "name": f"bench__repo{i}.{i:08x}", "kind": "swesmith", "source": f"https://example.invalid/bench/repo{i}.git",
        "commit": f"{i:040x}", "python": "3.10", "requirements": ["pytest==8.3.3"],
    } for i in range(n_envs)]
    path.write_text(yaml.safe_dump({"specs": specs}))
    return [s["name"] for s in specs]


def dry_run(workdir: Path, tasks: Path, catalog: Path, *, snakefile: Path) -> tuple[float, float, int, float]:
    """Wall seconds, peak RSS MB, number of planned jobs and CPU seconds (user + sys) of one
    `snakemake -n`. CPU seconds are reported too because wall time on a shared machine is
    mostly other people's load."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    cmd = [
        sys.executable, "-m", "snakemake", "-n", "--snakefile", str(snakefile), "--directory", str(workdir),
        "--cores", "1", "--quiet", "rules",
        "--config", f"tasks={tasks}", f"catalog={catalog}", "store=store", "workdir=work", "bundled=false",
    ]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"snakemake -n failed ({proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    rss = after.ru_maxrss / 1024  # high-water mark so far
    total = 0
    for line in proc.stdout.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == "total" and parts[1].isdigit():
            total = int(parts[1])
    return wall, rss, total, cpu


PER_TASK_SNAKEFILE = """
import json
TASKS = [json.loads(l)["instance_id"] for l in open(config["tasks"])]
rule all:
    input: expand("out/{t}.done", t=TASKS)
rule per_task:
    output: "out/{t}.done"
    shell: "touch {output}"
"""


def planning_table(repeats: int, skip_baseline: bool) -> list[list]:
    real = Catalog.load([ROOT / "config/catalog/swesmith.yaml"])
    profiles = sorted(real.specs)
    rows = []
    with tempfile.TemporaryDirectory(prefix="msb-bench-") as tmp:
        tmp = Path(tmp)
        synth_cat = tmp / "synth.yaml"
        synth_names = synth_catalog(synth_cat, 5000)
        cases = [
            ("5k tasks / 133 envs", 5000, profiles, ROOT / "config/catalog/swesmith.yaml"),
            ("50k tasks / 133 envs", 50000, profiles, ROOT / "config/catalog/swesmith.yaml"),
            ("50k tasks / 5k envs", 50000, synth_names, synth_cat),
        ]
        baseline_5k = None
        if not skip_baseline:
            sf = tmp / "PerTask.smk"
            sf.write_text(PER_TASK_SNAKEFILE)
            tasks = tmp / "base5k.jsonl"
            synth_tasks(tasks, 5000, profiles)
            walls = []
            for r in range(repeats):
                wd = tmp / f"base-{r}"
                wd.mkdir()
                cmd = [sys.executable, "-m", "snakemake", "-n", "-s", str(sf), "-d", str(wd), "--cores", "1",
                       "--quiet", "rules", "--config", f"tasks={tasks}"]
                t0 = time.perf_counter()
                subprocess.run(cmd, capture_output=True, check=True)
                walls.append(time.perf_counter() - t0)
            baseline_5k = statistics.median(walls)
            rows.append(["baseline: 5k tasks, one job per task", "-", f"{baseline_5k:.2f}", "-", "-", "-", "5001", "1.00"])
        for name, n, profs, cat in cases:
            tasks = tmp / f"{n}-{len(profs)}.jsonl"
            synth_tasks(tasks, n, profs)
            cold, warm, cpu, rss, jobs = [], [], [], 0.0, 0
            for r in range(repeats):
                wd = tmp / f"wd-{n}-{len(profs)}-{r}"
                wd.mkdir()
                w, m, jobs, c = dry_run(wd, tasks, cat, snakefile=ROOT / "workflow" / "Snakefile")
                cold.append(w)
                w2, m2, _, c2 = dry_run(wd, tasks, cat, snakefile=ROOT / "workflow" / "Snakefile")
                warm.append(w2)
                cpu.append(c2)
                rss = max(rss, m, m2)
            ratio = f"{baseline_5k / statistics.median(cold):.1f}x faster" if baseline_5k and n == 5000 else "-"
            rows.append([name, len(profs), f"{statistics.median(cold):.2f}", f"{statistics.median(warm):.2f}",
                         f"{statistics.median(cpu):.2f}", f"{rss:.0f}", jobs, ratio])
    return rows


def bundled_table(build: bool) -> list[list]:
    if build:
        subprocess.run([sys.executable, "-m", "snakemake", "--cores", "2", "-F", "--quiet"], cwd=ROOT, check=True)
    report = ROOT / "results/store/index/catalog.json"
    if not report.exists():
        return []
    cat = json.loads(report.read_text())
    rows = []
    for key, e in sorted(cat["envs"].items()):
        if e["status"] != "ok":
            continue
        m = e["manifest"]
        secs = "-"  # build seconds: from the resolve status (written first) to the build status
        status = ROOT / "results/work/envs" / f"{key}.status.json"
        lock = ROOT / "results/work/locks" / f"{key}.json"
        if status.exists() and lock.exists():
            secs = f"{status.stat().st_mtime - lock.stat().st_mtime:.1f}"
        # the archive's size, or the image's when the store serves the layer as an image only
        # (config `archive: false`, the default: such a manifest has no `size`)
        packed = m.get("size") if m.get("size") is not None else (m.get("image") or {}).get("size", 0)
        rows.append([e["spec_name"], secs, f"{m['raw_bytes'] / 1e6:.1f}", f"{packed / 1e6:.1f}",
                     f"{m['raw_bytes'] / max(packed, 1):.1f}x", m["files"]])
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--build", action="store_true", help="rebuild the bundled set first (-F)")
    ap.add_argument("--skip-baseline", action="store_true")
    ap.add_argument("--skip-planning", action="store_true")
    ap.add_argument("--json", help="also write the tables to this JSON file (bench/report.py reads it)")
    a = ap.parse_args()
    saved: dict = {}
    if not a.skip_planning:
        rows = planning_table(a.repeats, a.skip_baseline)
        saved["planning"] = {"headers": ["task set", "envs", "cold s", "warm s", "warm CPU s", "peak RSS MB", "jobs",
                                         "vs baseline"], "rows": rows}
        print(f"\nPlanning (`snakemake -n`, median of {a.repeats}; targets: 50k/133 <= 3 s, 50k/5k <= 10 s)")
        print(tabulate(rows, headers=["task set", "envs", "cold s", "warm s", "warm CPU s", "peak RSS MB", "jobs",
                                      "vs baseline"]))
    rows = bundled_table(a.build)
    saved["bundled"] = {"headers": ["environment", "build s", "raw MB", "packed MB", "ratio", "files"], "rows": rows}
    if a.json:
        Path(a.json).write_text(json.dumps(saved, indent=1))
    if rows:
        print("\nBundled set: build time (resolve done -> build done) and packing")
        print(tabulate(rows, headers=["environment", "build s", "raw MB", "packed MB", "ratio", "files"]))
    else:
        print("\n(no bundled store at results/store: run `snakemake --cores 2` or pass --build)")


if __name__ == "__main__":
    main()
