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
   The cold run's CPU seconds and the cold/warm CPU ratio are reported too (target: cold
   at most 2x warm), and each warm run's CPU over the per-task baseline's (5,001 jobs of
   the simplest rule, no code of this repository): a machine-independent figure of what
   this workflow adds per job, comparable across machines and restarts where CPU seconds
   are not.
2. For the bundled set (run `snakemake --cores 2` first, or pass --build): build time
   per environment and raw venv bytes vs packed bytes (the archive, or the squashfs image
   when the store has no archives, config `archive: false`).
3. With --main-job: the bundled main job (`snakemake --cores 2`, README's first command
   after scripts/setup.sh) on a fresh clone of this checkout's HEAD in a temp dir (its
   store, work dir and results there too), as CPU seconds of snakemake and all its children
   (os.wait4's rusage; where the kernel allows it, also the CPU of a cgroup the run is
   started in, which also counts processes that left the tree: the sandboxes' fork server
   is never waited for, so wait4 misses it and what it reaps, builds and validation runs
   included; read the cgroup figure). Target: at most 60 CPU s.
   Where the CPU goes: each `minisandbox` process the rules start is timed (a wrapper
   first on PATH runs it under /usr/bin/time), and each pipeline step writes its CPU
   seconds to its job's log (`# cpu <stage> <key>: ...`, minisandbox.pipeline.failures);
   "snakemake itself" is the total minus every timed process. `--main-job-baseline REF`
   runs the same job on a clone at REF first, in the same run. `--main-job-profile` also
   turns on the kernel's process accounting (BSD acct v3; root) for the run, with the bench
   a child subreaper (so the fork servers' orphans stay in its tree), and lists the CPU of
   every process of the run by command and its parent's and grandparent's commands
   (`pytest < timeout < python`: the validation runs in sandboxes), with process counts.
   acct counts each process's CPU in whole 10 ms ticks, rounded down: the thousands of
   short processes (byte-compilation, the eval scripts' tools) are in the cgroup total only.

Usage: .venv/bin/python bench/bench_pipeline.py [--repeats 3] [--build] [--skip-baseline] [--only '5k envs'] [--planning-baseline REF]
       .venv/bin/python bench/bench_pipeline.py --skip-planning --main-job [--main-job-baseline REF]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import statistics
import subprocess
import sys
import sysconfig
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
    specs = [
        {
            "name": f"bench__repo{i}.{i:08x}",
            "kind": "swesmith",
            "source": f"https://example.invalid/bench/repo{i}.git",
            "commit": f"{i:040x}",
            "python": "3.10",
            "requirements": ["pytest==8.3.3"],
        }
        for i in range(n_envs)
    ]
    path.write_text(yaml.safe_dump({"specs": specs}))
    return [s["name"] for s in specs]


def dry_run(
    workdir: Path, tasks: Path, catalog: Path, *, tree: Path = ROOT, mode: str = "-n"
) -> tuple[float, float, int, float]:
    """Wall seconds, peak RSS MB, number of planned jobs and CPU seconds (user + sys) of one
    `snakemake -n` of `tree`'s workflow with `tree`'s package (this checkout, or a baseline
    ref's copy). CPU seconds are reported too because wall time on a shared machine is
    mostly other people's load. `mode="--list-rules"`: start-up and parse only (no DAG),
    what every cluster job pays before its one job."""
    snakefile = tree / "workflow" / "Snakefile"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    cmd = [
        sys.executable,
        "-m",
        "snakemake",
        mode,
        "--snakefile",
        str(snakefile),
        "--directory",
        str(workdir),
        "--cores",
        "1",
        "--quiet",
        "rules",
        "--config",
        f"tasks={tasks}",
        f"catalog={catalog}",
        "store=store",
        "workdir=work",
        "bundled=false",
    ]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(tree / "src")})
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


def baseline_tree(ref: str, dest: Path) -> Path:
    """The workflow, package and config of `ref` (`git archive`), to plan with beside this
    checkout in the same run (same interpreter and installed packages; each tree's own
    `src` on PYTHONPATH)."""
    dest.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", ref, "workflow", "src", "config"], capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", "-j", "0", str(dest / "src")], stdout=subprocess.DEVNULL, check=False
    )
    return dest


def planning_table(
    repeats: int, skip_baseline: bool, only: str | None = None, baseline_ref: str | None = None
) -> list[list]:
    """Rows of the planning table; `only`: just the task sets whose name contains it.
    `baseline_ref`: each task set is planned by that ref's tree too, interleaved with this
    checkout's runs (ref, now, ref, now, ...: an A/B pair per repeat, in the same minutes),
    one row per tree and the now/ref ratio of the warm CPU medians in the last column."""
    real = Catalog.load([ROOT / "config/catalog/swesmith.yaml"])
    profiles = sorted(real.specs)
    rows = []
    with tempfile.TemporaryDirectory(prefix="msb-bench-") as tmp:
        tmp = Path(tmp)
        synth_cat = tmp / "synth.yaml"
        synth_names = synth_catalog(synth_cat, 5000)
        trees = [("", ROOT)]
        if baseline_ref:
            trees.insert(0, (f" @ {baseline_ref}", baseline_tree(baseline_ref, tmp / "baseline-tree")))
        cases = [
            ("5k tasks / 133 envs", 5000, profiles, ROOT / "config/catalog/swesmith.yaml"),
            ("50k tasks / 133 envs", 50000, profiles, ROOT / "config/catalog/swesmith.yaml"),
            ("50k tasks / 5k envs", 50000, synth_names, synth_cat),
        ]
        if only:
            cases = [c for c in cases if only in c[0]]
        baseline_5k = baseline_cpu = None
        # Snakemake's own start (imports, plugins), measured in the same run: what every
        # `snakemake` process pays before it reads the workflow
        start = []
        for _ in range(repeats):
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            subprocess.run([sys.executable, "-m", "snakemake", "--version"], capture_output=True, check=True)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            start.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
        start_cpu = statistics.median(start)
        if not skip_baseline:
            sf = tmp / "PerTask.smk"
            sf.write_text(PER_TASK_SNAKEFILE)
            tasks = tmp / "base5k.jsonl"
            synth_tasks(tasks, 5000, profiles)
            walls, cpus = [], []
            for r in range(repeats):
                wd = tmp / f"base-{r}"
                wd.mkdir()
                cmd = [
                    sys.executable,
                    "-m",
                    "snakemake",
                    "-n",
                    "-s",
                    str(sf),
                    "-d",
                    str(wd),
                    "--cores",
                    "1",
                    "--quiet",
                    "rules",
                    "--config",
                    f"tasks={tasks}",
                ]
                before = resource.getrusage(resource.RUSAGE_CHILDREN)
                t0 = time.perf_counter()
                subprocess.run(cmd, capture_output=True, check=True)
                walls.append(time.perf_counter() - t0)
                after = resource.getrusage(resource.RUSAGE_CHILDREN)
                cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
            baseline_5k = statistics.median(walls)
            baseline_cpu = statistics.median(cpus)
            rows.append(
                [
                    "baseline: 5k tasks, one job per task",
                    "-",
                    f"{baseline_5k:.2f}",
                    "-",
                    f"{baseline_cpu:.2f}",
                    "-",
                    "5001",
                    "1.00",
                    "-",
                    "-",
                    "-",
                    "-",
                    f"{os.getloadavg()[0]:.1f}",
                    "1.00",
                    "-",
                ]
            )
        for name, n, profs, cat in cases:
            tasks = tmp / f"{n}-{len(profs)}.jsonl"
            synth_tasks(tasks, n, profs)
            runs = {
                label: {"cold": [], "warm": [], "cpu": [], "cold_cpu": [], "parse": [], "rss": 0.0, "loads": []}
                for label, _ in trees
            }
            jobs = 0
            for r in range(repeats):
                for t, (label, tree) in enumerate(trees):
                    m = runs[label]
                    wd = tmp / f"wd-{n}-{len(profs)}-{r}-{t}"
                    wd.mkdir()
                    w, rss, jobs, c = dry_run(wd, tasks, cat, tree=tree)
                    m["cold"].append(w)
                    m["cold_cpu"].append(c)
                    m["loads"].append(os.getloadavg()[0])
                    w2, rss2, _, c2 = dry_run(wd, tasks, cat, tree=tree)
                    m["loads"].append(os.getloadavg()[0])
                    m["warm"].append(w2)
                    m["cpu"].append(c2)
                    m["rss"] = max(m["rss"], rss, rss2)
                    m["parse"].append(dry_run(wd, tasks, cat, tree=tree, mode="--list-rules")[3])
            for label, _ in trees:
                m = runs[label]
                med = {k: statistics.median(m[k]) for k in ("cold", "warm", "cpu", "cold_cpu", "parse")}
                ratio = f"{baseline_5k / med['cold']:.1f}x faster" if baseline_5k and n == 5000 else "-"
                ab = "-"
                if len(trees) > 1:
                    ab = f"{med['cpu'] / statistics.median(runs[trees[0][0]]['cpu']):.2f}"
                    pairs = " ".join(f"{a:.2f}/{b:.2f}" for a, b in zip(runs[trees[0][0]]["cpu"], m["cpu"]))
                    if label == "":
                        print(f"{name}: warm CPU s per A/B pair ({baseline_ref} / now): {pairs}", file=sys.stderr)
                rows.append(
                    [
                        name + label,
                        len(profs),
                        f"{med['cold']:.2f}",
                        f"{med['warm']:.2f}",
                        f"{med['cpu']:.2f}",
                        f"{m['rss']:.0f}",
                        jobs,
                        ratio,
                        f"{med['cold_cpu']:.2f}",
                        f"{med['cold_cpu'] / med['cpu']:.2f}",
                        f"{med['parse']:.2f}",
                        f"{start_cpu:.2f}",
                        f"{min(m['loads']):.1f}-{max(m['loads']):.1f}",
                        f"{med['cpu'] / baseline_cpu:.2f}" if baseline_cpu else "-",
                        ab,
                    ]
                )
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
        rows.append(
            [
                e["spec_name"],
                secs,
                f"{m['raw_bytes'] / 1e6:.1f}",
                f"{packed / 1e6:.1f}",
                f"{m['raw_bytes'] / max(packed, 1):.1f}x",
                m["files"],
            ]
        )
    return rows


# ----------------------------------------------------------------- the bundled main job
MAIN_JOB_TARGET = 60.0  # CPU seconds of snakemake and all its children

WRAPPER = """#!/bin/sh
exec /usr/bin/time -a -o "$MSB_BENCH_TIMES" -f "%U %S %e $1 $2" {real} "$@"
"""


def _clone(ref: str, dest: Path) -> str:
    """A fresh clone of this repository at `ref` in `dest`, its src byte-compiled as
    scripts/setup.sh does; returns the commit."""
    subprocess.run(["git", "clone", "-q", "--shared", "--no-checkout", str(ROOT), str(dest)], check=True)
    subprocess.run(["git", "-C", str(dest), "checkout", "-q", "--detach", ref], check=True)
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", "-j", "0", str(dest / "src")], check=True, stdout=subprocess.DEVNULL
    )
    return subprocess.run(
        ["git", "-C", str(dest), "rev-parse", "--short", "HEAD"], check=True, capture_output=True, text=True
    ).stdout.strip()


def _cgroup(name: str) -> Path | None:
    """A fresh cpuacct cgroup (v1) or cgroup (v2) to start the run in, when writable (root):
    its CPU also counts processes that left the run's process tree. None otherwise."""
    for base, stat in ((Path("/sys/fs/cgroup/cpuacct"), "cpuacct.usage"), (Path("/sys/fs/cgroup"), "cpu.stat")):
        if (base / stat).exists() or (base / "cgroup.controllers").exists():
            path = base / name
            try:
                path.mkdir()
            except OSError:
                return None
            return path
    return None


def _cgroup_cpu(path: Path) -> float:
    if (path / "cpuacct.usage").exists():
        return int((path / "cpuacct.usage").read_text()) / 1e9
    for line in (path / "cpu.stat").read_text().splitlines():
        if line.startswith("usage_usec "):
            return int(line.split()[1]) / 1e6
    return float("nan")


# Process accounting (acct(2), struct acct_v3 of <linux/acct.h>): 64-byte records.
PR_SET_CHILD_SUBREAPER = 36
ACCT_HZ = 100


def _comp_t(v: int) -> int:
    """acct's comp_t: 13-bit mantissa, 3-bit base-8 exponent."""
    return (v & 0x1FFF) << (3 * (v >> 13))


class ProcessAccounting:
    """The kernel's process accounting into `path` while the context is open (root and
    CONFIG_BSD_PROCESS_ACCT; `ok` False otherwise). This process becomes a child subreaper:
    processes orphaned in the run (the sandboxes' fork servers outlive their jobs) are
    reparented here, so their records name a parent in the run's tree; they are reaped on exit."""

    def __init__(self, path: Path) -> None:
        import ctypes

        self.path = path
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.ok = False

    def __enter__(self) -> ProcessAccounting:
        self.path.write_bytes(b"")
        if self.libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0:
            self.ok = self.libc.acct(str(self.path).encode()) == 0
        return self

    def reap(self, timeout: float = 30.0) -> None:
        """Wait for the orphans reparented here (until none is left or `timeout`)."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                time.sleep(0.1)

    def __exit__(self, *exc) -> None:
        if self.ok:
            self.libc.acct(None)

    def records(self) -> list[dict]:
        import struct

        data = self.path.read_bytes()
        out = []
        for off in range(0, len(data) - 63, 64):
            rec = data[off : off + 64]
            pid, ppid = struct.unpack_from("<II", rec, 16)
            utime, stime = struct.unpack_from("<HH", rec, 32)
            comm = rec[48:64].split(b"\0")[0].decode(errors="replace")
            out.append({"pid": pid, "ppid": ppid, "cpu": (_comp_t(utime) + _comp_t(stime)) / ACCT_HZ, "comm": comm})
        return out


def profile_groups(records: list[dict], root: int, depth: int = 3) -> dict[str, list[float]]:
    """CPU seconds and process counts of the processes under `root`, grouped by the command
    names of the process, its parent and grandparent ("pytest < timeout < python"). The
    direct children of `root` are named "snakemake" (its last thread's name is a library's).

    `records` are in exit order. A record's parent is the *next* record of its parent's pid:
    the parent named in a record was alive when the child exited, so it exits later, and no
    other process had that pid meanwhile (a pid is reused only after its process is gone;
    thousands of processes per run on a busy machine do reuse pids)."""
    parent: list[int | None] = [None] * len(records)
    latest: dict[int, int] = {}
    for i in range(len(records) - 1, -1, -1):
        parent[i] = latest.get(records[i]["ppid"])
        if records[i]["pid"] != root:  # switching accounting off writes a record of that process (kernel/acct.c)
            latest[records[i]["pid"]] = i
    groups: dict[str, list[float]] = {}
    for i, r in enumerate(records):
        if r["pid"] == root:
            continue
        chain, j, hops = [], i, 0
        while j is not None and hops < 64:
            rec = records[j]
            under_root = parent[j] is None and rec["ppid"] == root
            chain.append("snakemake" if under_root else rec["comm"])
            if under_root:
                break
            j, hops = parent[j], hops + 1
        if j is None or records[j]["ppid"] != root or parent[j] is not None:
            continue
        g = groups.setdefault(" < ".join(chain[:depth]), [0.0, 0])
        g[0] += r["cpu"]
        g[1] += 1
    return groups


def run_main_job(ref: str, tmp: Path, name: str, profile: bool = False) -> dict:
    """`snakemake --cores 2` in a fresh clone at `ref`: CPU (wait4), cgroup CPU, wall, and
    the CPU of every `minisandbox` process and pipeline step (with `profile`: of every process,
    from process accounting)."""
    clone = tmp / name
    commit = _clone(ref, clone)
    venv_bin = Path(sys.executable).parent
    wrap = tmp / f"{name}-bin"
    wrap.mkdir()
    (wrap / "minisandbox").write_text(WRAPPER.format(real=venv_bin / "minisandbox"))
    (wrap / "minisandbox").chmod(0o755)
    times = tmp / f"{name}.times"
    env = {
        **os.environ,
        "PATH": f"{wrap}:{venv_bin}:{os.environ.get('PATH', '')}",
        "PYTHONPATH": str(clone / "src"),
        "MSB_BENCH_TIMES": str(times),
    }
    cg = _cgroup(f"msb-bench-{os.getpid()}-{name}")

    def join() -> None:
        if cg is not None:
            (cg / "cgroup.procs").write_text("0")

    log = (tmp / f"{name}.out").open("w")
    acct = ProcessAccounting(tmp / f"{name}.acct") if profile else None
    with acct if acct is not None else contextlib.nullcontext():
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            [str(venv_bin / "snakemake"), "--cores", "2"],
            cwd=clone,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            preexec_fn=join,
        )
        _, status, ru = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        wall = time.perf_counter() - t0
        if acct is not None:
            acct.reap()
    log.close()
    cg_cpu = None
    if cg is not None:
        cg_cpu = _cgroup_cpu(cg)
        with contextlib.suppress(OSError):
            cg.rmdir()
    if proc.returncode != 0:
        raise SystemExit(f"main job at {ref} failed ({proc.returncode}): see {tmp / f'{name}.out'}")
    procs: dict[str, float] = {}
    for line in times.read_text().splitlines():
        parts = line.split()
        if len(parts) >= 5 and parts[3] == "pipeline":
            procs[parts[4]] = procs.get(parts[4], 0.0) + float(parts[0]) + float(parts[1])
    steps: dict[str, float] = {}
    for logf in (clone / "results/work/logs").rglob("*.log"):
        for line in logf.read_text(errors="replace").splitlines():
            if line.startswith("# cpu "):
                stage = line.split()[2]
                steps[stage] = steps.get(stage, 0.0) + float(line.split(": ", 1)[1].split()[0])
    groups = None
    if acct is not None and acct.ok:
        records = acct.records()
        # accounting is one switch per machine: another acct(2) user (a second profile) ends ours
        if not any(r["pid"] == proc.pid for r in records):
            print(
                f"profile of {name}: no record of snakemake itself (accounting switched by another process?)",
                file=sys.stderr,
            )
        groups = profile_groups(records, os.getpid())
    return {
        "ref": ref,
        "commit": commit,
        "cpu": ru.ru_utime + ru.ru_stime,
        "cgroup_cpu": cg_cpu,
        "wall": wall,
        "procs": procs,
        "steps": steps,
        "groups": groups,
    }


#: Groups of the process-accounting profile listed by name (the rest are summed).
PROFILE_ROWS = 16


def profile_table(runs: list[dict]) -> list[list]:
    """Rows: CPU s and process count per group for each run (largest groups of the last run
    first), the rest summed, the accounted total, and the cgroup total minus it."""
    cur = runs[-1]["groups"] or {}
    names = sorted(cur, key=lambda k: -cur[k][0])
    shown = names[:PROFILE_ROWS]
    rows = []
    for k in shown:
        rows.append([k] + [_cell((r["groups"] or {}).get(k)) for r in runs])
    rest = []
    for r in runs:
        g = r["groups"] or {}
        rest.append(
            [sum(v[0] for k, v in g.items() if k not in shown), sum(v[1] for k, v in g.items() if k not in shown)]
        )
    rows.append(["(all other groups)"] + [_cell(v) for v in rest])
    totals = [
        [sum(v[0] for v in (r["groups"] or {}).values()), sum(v[1] for v in (r["groups"] or {}).values())] for r in runs
    ]
    rows.append(["accounted, all processes of the run"] + [_cell(v) for v in totals])
    rows.append(
        ["cgroup - accounted (CPU under a 10 ms tick per process)"]
        + [f"{r['cgroup_cpu'] - t[0]:.1f}" if r["cgroup_cpu"] is not None else "-" for r, t in zip(runs, totals)]
    )
    return rows


def _cell(v) -> str:
    return f"{v[0]:.1f} ({int(v[1])})" if v else "-"


def compile_environment() -> None:
    """Byte-compile the environment this bench runs from and this checkout's package, as
    scripts/setup.sh does (uv sync --compile-bytecode): in a venv made without it, where
    PYTHONDONTWRITEBYTECODE is set, every snakemake start compiles ~1,200 modules of
    snakemake, its plugins and minisandbox again (~3 CPU s per start), which is not
    planning's cost."""
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", "-j", "0", sysconfig.get_paths()["purelib"], str(ROOT / "src")],
        stdout=subprocess.DEVNULL,
        check=False,
    )


def load_note() -> str:
    """The load average and core count, printed and stored beside every table: CPU seconds
    on a shared machine grow with other people's load (docs/pipeline.md, "Numbers")."""
    one, five, _ = os.getloadavg()
    return f"load average {one:.1f} (5 min {five:.1f}) on {os.cpu_count()} cores"


def machine_note() -> str:
    """The interpreter the bench runs Snakemake with and when the machine booted, stored
    beside the planning table: the same tree's CPU seconds changed ~1.7x across a restart of
    this (virtual) machine (docs/pipeline.md, "Numbers"), so a comparison across runs starts
    by checking these, and the ratio to the per-task baseline measured in the same run."""
    booted = "?"
    with contextlib.suppress(OSError, ValueError, StopIteration):
        with open("/proc/stat") as fh:
            btime = int(next(line for line in fh if line.startswith("btime ")).split()[1])
        booted = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(btime))
    return f"Python {sys.version.split()[0]} ({os.path.realpath(sys.executable)}), machine up since {booted}"


def main_job_table(baseline_ref: str | None, ref: str = "HEAD", profile: bool = False) -> tuple[list[list], list[list]]:
    """Rows: total CPU (wait4 and cgroup), wall, then per rule and per step, for the
    baseline ref (if any) and `ref`, with the ratio to the baseline; and the profile's rows
    (`profile_table`, empty without `profile`)."""
    compile_environment()
    with tempfile.TemporaryDirectory(prefix="msb-mainjob-", dir=os.environ.get("TMPDIR", "/var/tmp")) as tmp:
        runs = []
        if baseline_ref:
            runs.append(run_main_job(baseline_ref, Path(tmp), "baseline", profile))
        runs.append(run_main_job(ref, Path(tmp), "now", profile))
    base = runs[0] if baseline_ref else None
    cur = runs[-1]

    def row(what: str, get) -> list:
        vals = [get(r) for r in runs]
        out = [what] + [f"{v:.1f}" if v is not None else "-" for v in vals]
        if base is not None:
            b, c = vals[0], vals[-1]
            out.append(f"{c / b:.2f}" if b and c is not None else "-")
        return out

    rows = [
        row("total CPU s, snakemake + children (wait4)", lambda r: r["cpu"]),
        row("total CPU s, the run's cgroup", lambda r: r["cgroup_cpu"]),
        row("wall s", lambda r: r["wall"]),
    ]
    rules = sorted({k for r in runs for k in r["procs"]})
    for k in rules:
        rows.append(row(f"  rule/command `minisandbox pipeline {k}` (all its jobs)", lambda r, k=k: r["procs"].get(k)))
    rows.append(row("  snakemake itself (total - the commands above)", lambda r: r["cpu"] - sum(r["procs"].values())))
    for k in sorted({k for r in runs for k in r["steps"]}):
        rows.append(row(f"    step {k} (from the jobs' logs)", lambda r, k=k: r["steps"].get(k)))
    rows.append(
        row(
            "    env job - its steps (validation, start-up)",
            lambda r: r["procs"].get("env", 0.0) - sum(v for k, v in r["steps"].items() if k != "interp"),
        )
    )
    # judged on the cgroup where there is one: wait4 misses the fork servers' sandboxes
    judged, how = (cur["cgroup_cpu"], "the run's cgroup") if cur["cgroup_cpu"] is not None else (cur["cpu"], "wait4")
    print(
        f"main job at {cur['commit']}: {judged:.1f} CPU s, {how} (target <= {MAIN_JOB_TARGET:.0f}: "
        f"{'met' if judged <= MAIN_JOB_TARGET else 'NOT met'})",
        file=sys.stderr,
    )
    return rows, (profile_table(runs) if all(r["groups"] is not None for r in runs) else [])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--build", action="store_true", help="rebuild the bundled set first (-F)")
    ap.add_argument("--skip-baseline", action="store_true")
    ap.add_argument("--skip-planning", action="store_true")
    ap.add_argument("--only", metavar="TEXT", help="plan only the task sets whose name contains TEXT, e.g. '5k envs'")
    ap.add_argument(
        "--planning-baseline",
        metavar="REF",
        help="also plan every task set with REF's workflow and package, interleaved with this checkout's runs "
        "(A/B pairs in the same minutes)",
    )
    ap.add_argument(
        "--main-job", action="store_true", help="measure the bundled main job's CPU on a fresh clone of HEAD (minutes)"
    )
    ap.add_argument(
        "--main-job-baseline",
        metavar="REF",
        help="with --main-job: the same job on a clone at REF first, as the baseline",
    )
    ap.add_argument(
        "--main-job-profile",
        action="store_true",
        help="with --main-job: also the CPU of every process of the run, from process accounting (root)",
    )
    ap.add_argument(
        "--json",
        help="also write the tables to this JSON file (bench/report.py reads it); the tables this run did "
        "not make are kept from the file",
    )
    a = ap.parse_args()
    saved: dict = json.loads(Path(a.json).read_text()) if a.json and Path(a.json).exists() else {}
    if not a.skip_planning:
        compile_environment()
        load_before = load_note()
        rows = planning_table(a.repeats, a.skip_baseline, a.only, a.planning_baseline)
        headers = [
            "task set",
            "envs",
            "cold s",
            "warm s",
            "warm CPU s",
            "peak RSS MB",
            "jobs",
            "vs baseline",
            "cold CPU s",
            "cold/warm CPU",
            "parse CPU s (--list-rules, warm)",
            "snakemake --version CPU s",
            "load average (1 min) around the warm runs",
            "warm CPU / baseline CPU",
            "warm CPU / baseline ref's (A/B)",
        ]
        load_after = load_note()
        machine = machine_note()
        saved["planning"] = {
            "headers": headers,
            "rows": rows,
            "load_before": load_before,
            "load_after": load_after,
            "machine": machine,
        }
        print(
            f"\nPlanning (`snakemake -n`, median of {a.repeats}; targets: warm CPU 50k/133 <= 3 s, "
            f"50k/5k <= 10 s; cold at most 2x warm). Before: {load_before}; after: {load_after}; {machine}"
        )
        print(tabulate(rows, headers=headers))
    if a.main_job:
        rows, prof = main_job_table(a.main_job_baseline, profile=a.main_job_profile)
        headers = ["bundled main job (`snakemake --cores 2`, fresh clone)"] + (
            [f"baseline {a.main_job_baseline}", "now", "now / baseline"] if a.main_job_baseline else ["now"]
        )
        saved["main_job"] = {
            "headers": headers,
            "rows": rows,
            "target_cpu_s": MAIN_JOB_TARGET,
            "load": os.getloadavg(),
        }
        print(f"\nBundled main job (target: <= {MAIN_JOB_TARGET:.0f} CPU s for snakemake and all its children)")
        print(tabulate(rows, headers=headers))
        if prof:
            pheaders = ["process < parent < grandparent (acct)"] + (
                [f"baseline {a.main_job_baseline}: CPU s (processes)", "now"]
                if a.main_job_baseline
                else ["CPU s (processes)"]
            )
            saved["main_job_profile"] = {"headers": pheaders, "rows": prof}
            print("\nWhere the main job's CPU goes, by process (kernel process accounting)")
            print(tabulate(prof, headers=pheaders))
    rows = bundled_table(a.build)
    if rows or "bundled" not in saved:
        saved["bundled"] = {
            "headers": ["environment", "build s", "raw MB", "packed MB", "ratio", "files"],
            "rows": rows,
        }
    if a.json:
        Path(a.json).write_text(json.dumps(saved, indent=1))
    if rows:
        print("\nBundled set: build time (resolve done -> build done) and packing")
        print(tabulate(rows, headers=["environment", "build s", "raw MB", "packed MB", "ratio", "files"]))
    else:
        print("\n(no bundled store at results/store: run `snakemake --cores 2` or pass --build)")


if __name__ == "__main__":
    main()
