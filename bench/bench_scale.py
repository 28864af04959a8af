#!/usr/bin/env python3
"""Scale-out benchmark: a synthetic 50k-task SWE-smith-shaped set over the 133
real profiles (config/catalog/swesmith.yaml).

Tables (medians of --repeats, baselines measured in the same run):
1. Planning with profiles/slurm: `snakemake -n` wall time and the child's peak RSS, and the
   number of Slurm submissions a full build would make (group jobs + ungrouped remote
   jobs, read from Snakemake's own dry-run grouping) vs one submission per rule job.
2. Incremental: after a full build of 50k tasks (outputs made up to date with Snakemake's
   touch executor), adding 1,000 tasks of already-built repos: which jobs would run.
3. Index lookup of one task in a 50k-task published index (one shard read) vs loading
   all records, local and on S3 (moto_server): latency and peak Python memory.
4. Store throughput: publish (push local -> S3) and fetch (pull S3 -> local) vs a
   local -> local copy, same artifacts, verified digests in every case.

Usage: .venv/bin/python bench/bench_scale.py [--tasks 50000] [--repeats 3] [--skip-planning]
Needs: snakemake, snakemake-executor-plugin-slurm, s3fs, moto[server].
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

from tabulate import tabulate

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))

from minisandbox.catalog import Catalog  # noqa: E402

PATCH = "diff --git a/x.py b/x.py\n--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a = 1\n+a = 2\n"
SWESMITH = ROOT / "config" / "catalog" / "swesmith.yaml"


def synth_tasks(path: Path, n: int, profiles: list[str], start: int = 0) -> None:
    """SWE-smith-shaped records, round-robin over the profiles (ids `<profile>.bench__<hex>`)."""
    with path.open("w") as fh:
        for i in range(start, start + n):
            prof = profiles[i % len(profiles)]
            fh.write(
                json.dumps(
                    {
                        "instance_id": f"{prof}.bench__{i:08x}",
                        "repo": f"swesmith/{prof}",
                        "patch": PATCH,
                        "FAIL_TO_PASS": [f"tests/test_x.py::test_{i}"],
                        "PASS_TO_PASS": ["tests/test_x.py::test_ok"],
                        "image_name": "",
                        "problem_statement": "bench",
                    }
                )
                + "\n"
            )


def run_measured(cmd: list[str], cwd: Path) -> tuple[float, float, str]:
    """Wall seconds, the process's own peak RSS (MB, via wait4), combined output."""
    t0 = time.perf_counter()
    with tempfile.TemporaryFile() as out:
        proc = subprocess.Popen(
            cmd, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONPATH": str(ROOT / "src")}
        )
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        out.seek(0)
        text = out.read().decode(errors="replace")
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        raise SystemExit(f"{' '.join(cmd[:6])} ... failed ({code}):\n{text[-3000:]}")
    return wall, usage.ru_maxrss / 1024, text


def snakemake_cmd(workdir: Path, tasks: str, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "snakemake",
        "--snakefile",
        str(ROOT / "workflow" / "Snakefile"),
        "--directory",
        str(workdir),
        *extra,
        "--config",
        f"tasks={tasks}",
        f"catalog={SWESMITH}",
        "store=store",
        "workdir=work",
        "bundled=false",
    ]


_GROUP = re.compile(r"^(?:\[[^\]]*\] )?Group job (\S+)", re.M)
_RULE = re.compile(r"^(?:\[[^\]]*\] )?(local)?rule (\S+):", re.M)


def local_rules() -> set[str]:
    """Rules the workflow runs on the submit host (`localrules:` in workflow/rules), plus `all`.
    A dry-run prints them as plain `rule X:` blocks, so they are named here."""
    names = {"all"}
    for smk in (ROOT / "workflow" / "rules").glob("*.smk"):
        # one line (`localrules: a, b`) or snakefmt's layout (one indented name per line)
        for m in re.finditer(r"^localrules:[ \t]*(.*(?:\n[ \t]+\S.*)*)", smk.read_text(), re.M):
            names |= {n for n in re.split(r"[,\s]+", m.group(1)) if n}
    return names


def submissions(dry_run_output: str) -> tuple[int, int, dict[str, int]]:
    """(Slurm jobs with the profile's grouping, without grouping, group jobs per group).
    Top-level `rule X:` blocks are ungrouped remote jobs; group members are indented."""
    groups: dict[str, int] = {}
    for g in _GROUP.findall(dry_run_output):
        groups[g] = groups.get(g, 0) + 1
    ungrouped = sum(1 for local, rule in _RULE.findall(dry_run_output) if not local and rule not in local_rules())
    member_jobs = len(re.findall(r"^\s+rule \S+:", dry_run_output, re.M))
    return sum(groups.values()) + ungrouped, member_jobs + ungrouped, groups


def planning(tmp: Path, n_tasks: int, repeats: int, profiles: list[str]) -> tuple[list[list], list[list]]:
    tasks = tmp / "tasks.jsonl"
    synth_tasks(tasks, n_tasks, profiles)
    rows = []
    walls, rsss, subs = [], [], None
    plain_walls = []
    for r in range(repeats):
        wd = tmp / f"plan-{r}"
        wd.mkdir()
        # baseline: the same DAG planned without the Slurm profile (local, no grouping)
        w0, _, _ = run_measured(snakemake_cmd(wd, str(tasks), "-n", "--cores", "1", "--quiet", "rules"), wd)
        plain_walls.append(w0)
        shutil.rmtree(wd / "work", ignore_errors=True)  # cold again: plan cache dropped
        w, rss, out = run_measured(snakemake_cmd(wd, str(tasks), "-n", "--profile", str(ROOT / "profiles/slurm")), wd)
        walls.append(w)
        rsss.append(rss)
        subs = submissions(out)
    grouped, ungrouped, per_group = subs
    rows.append(
        [
            f"{n_tasks} tasks / {len(profiles)} profiles, local -n (baseline)",
            f"{statistics.median(plain_walls):.2f}",
            "-",
            "1.00",
        ]
    )
    rows.append(
        [
            f"{n_tasks} tasks / {len(profiles)} profiles, --profile profiles/slurm -n",
            f"{statistics.median(walls):.2f}",
            f"{max(rsss):.0f}",
            f"{statistics.median(walls) / statistics.median(plain_walls):.2f}",
        ]
    )
    sub_rows = [
        ["one Slurm job per rule job (no grouping, baseline)", ungrouped, "1.00"],
        [
            f"profiles/slurm grouping ({', '.join(f'{g}: {n}' for g, n in sorted(per_group.items()))})",
            grouped,
            f"{grouped / max(ungrouped, 1):.3f}",
        ],
    ]
    return rows, sub_rows


def incremental(tmp: Path, n_tasks: int, profiles: list[str]) -> list[list]:
    """Touch a full build up to date, add 1,000 tasks of built repos, dry-run: what runs?"""
    wd = tmp / "incr"
    wd.mkdir()
    base = tmp / "incr-base.jsonl"
    synth_tasks(base, n_tasks, profiles)
    # Stand in for a finished build: create every output Snakemake lists for the full DAG
    # (directories for the snapshot/build trees), then let --touch order their mtimes.
    _, _, summary = run_measured(snakemake_cmd(wd, str(base), "--cores", "1", "--summary"), wd)
    for line in summary.splitlines():
        cols = line.split("\t")
        if len(cols) < 5 or cols[0] == "output_file" or cols[4] != "missing":
            continue
        out = wd / cols[0]
        if cols[2] in ("snapshot", "build") and not cols[0].endswith(".json"):
            out.mkdir(parents=True, exist_ok=True)
        else:
            out.parent.mkdir(parents=True, exist_ok=True)
            out.touch()
    run_measured(snakemake_cmd(wd, str(base), "--cores", "1", "--touch", "--quiet", "all"), wd)
    _, _, check = run_measured(snakemake_cmd(wd, str(base), "-n", "--cores", "1", "--quiet", "rules"), wd)
    if "Nothing to be done" not in check and "total" in check:
        print("warning: the stand-in build is not up to date:\n" + check[-1500:], file=sys.stderr)
    extra = tmp / "incr-extra.jsonl"
    synth_tasks(extra, 1000, profiles, start=n_tasks)
    w, rss, out = run_measured(snakemake_cmd(wd, f"{base},{extra}", "-n", "--cores", "1", "--quiet", "rules"), wd)
    counts = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].isdigit() and parts[0] not in ("total", "count"):
            counts[parts[0]] = int(parts[1])
    # env jobs rerun to validate the new tasks; the build itself is reused (pipeline.envjob)
    built = {k: v for k, v in counts.items() if k in ("repo", "env")}
    return [
        [
            f"+1000 tasks on {n_tasks} (repos already built)",
            json.dumps(counts, sort_keys=True),
            sum(built.values()),
            f"{w:.2f}",
            f"{rss:.0f}",
        ]
    ]


# ---------------------------------------------------------------------------------- index
def build_big_index(store_url: str, n_tasks: int, profiles: list[str]) -> list[str]:
    from minisandbox.index import build_index
    from minisandbox.node.published import publish_index
    from minisandbox.node.store import Store

    envs = {f"env-{p[:30].lower()}-{i:016x}": {"status": "ok", "manifest": None} for i, p in enumerate(profiles)}
    repos = {
        f"repo-{p[:30].lower()}-{i:012x}-{i:08x}": {"status": "ok", "manifest": None} for i, p in enumerate(profiles)
    }
    ekeys, rkeys = list(envs), list(repos)
    tasks = []
    for i in range(n_tasks):
        p = i % len(profiles)
        iid = f"{profiles[p]}.bench__{i:08x}"
        tasks.append(
            {
                "instance_id": iid,
                "env_key": ekeys[p],
                "repo_key": rkeys[p],
                "spec_name": profiles[p],
                "record": {
                    "instance_id": iid,
                    "format": "swesmith",
                    "repo": f"swesmith/{profiles[p]}",
                    "patch": PATCH,
                    "fail_to_pass": [f"tests/test_x.py::test_{i}"],
                    "pass_to_pass": ["tests/test_x.py::test_ok"],
                    "problem_statement": "bench " * 20,
                },
            }
        )
    catalog, shards = build_index(tasks, envs, repos, [])
    publish_index(Store(store_url), catalog, shards)
    return [t["instance_id"] for t in tasks]


def lookup_rows(label: str, store_url: str, ids: list[str], repeats: int) -> list[list]:
    from minisandbox.node.published import iter_tasks, lookup
    from minisandbox.node.store import Store

    store = Store(store_url)
    sample = random.Random(7).sample(ids, 30)
    lookup(store, sample[0])  # connection warm-up
    times = []
    tracemalloc.start()
    for tid in sample:
        t0 = time.perf_counter()
        assert lookup(store, tid)["instance_id"] == tid
        times.append(time.perf_counter() - t0)
    _, peak_one = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    full = []
    tracemalloc.start()
    for tid in sample[: max(1, repeats)]:
        t0 = time.perf_counter()
        found = next(t for t in list(iter_tasks(store)) if t["instance_id"] == tid)  # load all, then search
        assert found["instance_id"] == tid
        full.append(time.perf_counter() - t0)
    _, peak_all = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    m1, m2 = statistics.median(times), statistics.median(full)
    return [
        [f"{label}: load all {len(ids)} records (baseline)", f"{m2 * 1000:.1f}", f"{peak_all / 1e6:.1f}", "1.0"],
        [
            f"{label}: lookup one task (one shard)",
            f"{m1 * 1000:.2f}",
            f"{peak_one / 1e6:.2f}",
            f"{m2 / m1:.0f}x faster",
        ],
    ]


# ---------------------------------------------------------------------------------- S3
def start_moto() -> tuple[subprocess.Popen, str]:
    from tests.fixtures.s3 import free_port

    exe = shutil.which("moto_server")
    if not exe:
        raise SystemExit("moto_server not found: pip install 'moto[server]'")
    port = free_port()
    proc = subprocess.Popen(
        [exe, "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    import urllib.request

    for _ in range(300):
        try:
            urllib.request.urlopen(url + "/moto-api/", timeout=1)
            break
        except OSError:
            time.sleep(0.1)
    os.environ.update(
        {
            "AWS_ENDPOINT_URL": url,
            "AWS_ACCESS_KEY_ID": "bench",
            "AWS_SECRET_ACCESS_KEY": "bench",
            "AWS_DEFAULT_REGION": "us-east-1",
        }
    )
    return proc, url


def throughput_rows(tmp: Path, repeats: int, n_artifacts: int, mb: int) -> list[list]:
    import s3fs

    from minisandbox.node.sync import mirror
    from tests.fixtures.s3 import publish_synthetic_store

    src = tmp / "tp-src"
    publish_synthetic_store(
        str(src),
        tmp / "tp-work",
        n_envs=n_artifacts // 2,
        n_repos=n_artifacts - n_artifacts // 2,
        payload=mb * 1_000_000,
        failed_env=False,
    )
    fs = s3fs.S3FileSystem(endpoint_url=os.environ["AWS_ENDPOINT_URL"], skip_instance_cache=True)
    results: dict[str, list[float]] = {"local": [], "push": [], "pull": []}
    total = 0
    for r in range(repeats):
        bucket = f"bench-{r}-{os.getpid()}"
        fs.mkdir(bucket)
        rep = mirror(str(src), str(tmp / f"tp-local-{r}"))
        results["local"].append(rep.mb_per_s)
        rep = mirror(str(src), f"s3://{bucket}/store")
        results["push"].append(rep.mb_per_s)
        total = rep.bytes
        rep = mirror(f"s3://{bucket}/store", str(tmp / f"tp-pulled-{r}"))
        results["pull"].append(rep.mb_per_s)
        shutil.rmtree(tmp / f"tp-local-{r}")
        shutil.rmtree(tmp / f"tp-pulled-{r}")
        fs.rm(bucket, recursive=True)
    base = statistics.median(results["local"])
    label = f"{n_artifacts} artifacts, {total / 1e6:.0f} MB"
    return [
        [f"local -> local copy (baseline), {label}", f"{base:.1f}", "1.00"],
        [
            f"publish: push local -> S3 (moto_server), {label}",
            f"{statistics.median(results['push']):.1f}",
            f"{statistics.median(results['push']) / base:.2f}",
        ],
        [
            f"fetch: pull S3 -> local, {label}",
            f"{statistics.median(results['pull']):.1f}",
            f"{statistics.median(results['pull']) / base:.2f}",
        ],
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", type=int, default=50_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--skip-planning", action="store_true", help="skip tables 1 and 2 (the snakemake runs)")
    ap.add_argument("--artifacts", type=int, default=8, help="artifacts in the throughput store")
    ap.add_argument("--mb", type=int, default=8, help="payload MB per artifact (random, incompressible)")
    ap.add_argument("--json", help="also write the tables to this JSON file (bench/report.py reads it)")
    a = ap.parse_args()
    saved: dict = {"tasks": a.tasks}
    profiles = sorted(Catalog.load([SWESMITH]).specs)
    with tempfile.TemporaryDirectory(prefix="msb-bench-scale-") as tmp_s:
        tmp = Path(tmp_s)
        if not a.skip_planning:
            plan_rows, sub_rows = planning(tmp, a.tasks, a.repeats, profiles)
            saved["planning"] = {"headers": ["case", "wall s", "peak RSS MB", "ratio vs baseline"], "rows": plan_rows}
            print(f"\n1a. Planning (`snakemake -n`, median of {a.repeats}, cold plan cache)")
            print(tabulate(plan_rows, headers=["case", "wall s", "peak RSS MB", "ratio vs baseline"]))
            print("\n1b. Slurm submissions for a full build (from Snakemake's dry-run grouping)")
            print(tabulate(sub_rows, headers=["case", "sbatch calls", "ratio"]))
            print("\n2. Incremental: jobs that would run after adding tasks for built repos")
            print(
                tabulate(
                    incremental(tmp, a.tasks, profiles),
                    headers=["case", "jobs by rule", "env/repo jobs (env: validate only)", "dry-run s", "peak RSS MB"],
                )
            )
        moto, _ = start_moto()
        try:
            import s3fs

            s3fs.S3FileSystem(endpoint_url=os.environ["AWS_ENDPOINT_URL"], skip_instance_cache=True).mkdir(
                "bench-index"
            )
            local_ids = build_big_index(str(tmp / "index-store"), a.tasks, profiles)
            build_big_index("s3://bench-index/store", a.tasks, profiles)
            rows = lookup_rows("local", str(tmp / "index-store"), local_ids, a.repeats)
            rows += lookup_rows("S3", "s3://bench-index/store", local_ids, a.repeats)
            print(f"\n3. Index lookup, {a.tasks} tasks in 256 shards (median of 30 lookups / {a.repeats} full loads)")
            print(tabulate(rows, headers=["case", "ms", "peak Python MB", "ratio"]))
            print(f"\n4. Store throughput (MB/s, digests verified, median of {a.repeats})")
            tp_rows = throughput_rows(tmp, a.repeats, a.artifacts, a.mb)
            print(tabulate(tp_rows, headers=["case", "MB/s", "ratio vs local"]))
            saved["lookup"] = {"headers": ["case", "ms", "peak Python MB", "ratio"], "rows": rows}
            saved["throughput"] = {"headers": ["case", "MB/s", "ratio vs local"], "rows": tp_rows}
        finally:
            moto.terminate()
            moto.wait(timeout=10)
    if a.json:
        Path(a.json).write_text(json.dumps(saved, indent=1))


if __name__ == "__main__":
    main()
