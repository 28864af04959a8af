#!/usr/bin/env python3
"""Cost of the applied-tree scan (minisandbox.grading.suspicious): the eval script's
set-up (write the patch, back up, apply, revert, a trivial test command) with and without
the scan's two git snapshots and diff, on a real git repository, baseline measured in the
same run, interleaved. The scan does not depend on the sandbox (it is git and bash where
the patch is applied), so this runs on the host.

Usage: .venv/bin/python bench/bench_tree_scan.py [--repo PATH] [--files 3] [--repeats 15] [--json OUT]
(default repo: a clone of this checkout; --repo any git repository, e.g. a SWE-bench one).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tabulate import tabulate

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from minisandbox.grading.evalscript import EvalScript  # noqa: E402


def make_patch(repo: Path, files: int) -> str:
    """A patch that appends a line to the first `files` tracked .py files."""
    tracked = [
        p
        for p in subprocess.run(
            ["git", "-C", str(repo), "ls-files", "*.py"], capture_output=True, text=True, check=True
        ).stdout.split()
        if p
    ][:files]
    for rel in tracked:
        with open(repo / rel, "a") as fh:
            fh.write("\nBENCH_TREE_SCAN = 1\n")
    patch = subprocess.run(["git", "-C", str(repo), "diff"], capture_output=True, text=True, check=True).stdout
    subprocess.run(["git", "-C", str(repo), "checkout", "-q", "--", "."], check=True)
    return patch


def _cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def once(repo: Path, patch: str, scan: bool) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the script and everything it ran)."""
    script = EvalScript(test_cmd="true", timeout=60, patch=patch, repo_dir=str(repo), scan_tree=scan)
    c, t = _cpu(), time.perf_counter()
    out = subprocess.run(["bash", "-s"], input=script.render(), capture_output=True, text=True)
    dt, dc = time.perf_counter() - t, _cpu() - c
    if f">>>>> Applied Patch {script.nonce}" not in out.stdout or (">>>>> Applied Diff" in out.stdout) != scan:
        raise SystemExit(f"the eval script did not run as expected:\n{out.stdout[-2000:]}{out.stderr[-2000:]}")
    subprocess.run(["git", "-C", str(repo), "checkout", "-q", "--", "."], check=True)
    return dt, dc


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repo", default=None, help="a git repository (default: a clone of this checkout)")
    ap.add_argument("--files", type=int, default=3, help="files the patch changes")
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-tree-"))
    try:
        repo = tmp / "repo"
        subprocess.run(["git", "clone", "-q", a.repo or str(ROOT), str(repo)], check=True)
        patch = make_patch(repo, a.files)
        runs: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
        for _ in range(a.repeats):
            for scan in (False, True):
                runs[scan].append(once(repo, patch, scan))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    rows = []
    for i, what in ((0, "wall ms"), (1, "CPU ms")):
        base = statistics.median(r[i] for r in runs[False])
        scan = statistics.median(r[i] for r in runs[True])
        rows.append(
            [what, f"{base * 1000:.1f}", f"{scan * 1000:.1f}", f"{(scan - base) * 1000:.1f}", f"{scan / base:.2f}"]
        )
    print(
        f"eval script set-up + trivial test, {a.files} file(s) patched, median of {a.repeats} (load "
        f"{os.getloadavg()[0]:.1f}):"
    )
    print(
        tabulate(
            rows, headers=["", "without the scan (baseline)", "with the scan", "difference", "ratio"], tablefmt="github"
        )
    )
    if a.json:
        Path(a.json).write_text(
            json.dumps({"files": a.files, "repeats": a.repeats, "base": runs[False], "scan": runs[True]}, indent=1)
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
