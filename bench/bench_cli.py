#!/usr/bin/env python3
"""CLI latency bench: what one `minisandbox` process costs, against bubblewrap and a bare
interpreter start measured in the same run (a shared machine drifts; ratios do not).

Rows (median and p95 wall time, median CPU time, of --n runs, each a fresh process, warm
node cache; the rows' samples are taken round-robin, and `--tree NAME=DIR` adds the rows of
another source tree, for before/after in one run):
* BASELINE `bwrap --ro-bind / / --dev /dev --proc /proc --unshare-all --die-with-parent true`
  (bubblewrap one-shot) and `python -c pass` (the interpreter the CLI runs on);
* `minisandbox --version` (target: <= 2x `python -c pass`);
* `minisandbox run TASK -- true` (whole process) over a small published store (chunked
  squashfs images, no archives: the pipeline's default layout), ratio to bwrap + python;
* `run` with PYTHONDONTWRITEBYTECODE=1 (bytecode must have been compiled at set-up), and
  never byte-compiled (also an empty PYTHONPYCACHEPREFIX: what a venv that `uv sync` did not
  compile pays where writing bytecode is off);
* the node-local helper (docs/sandbox.md): `run` with none (MINISANDBOX_HELPER=off: all
  in-process), with one already running (target <= 2x bwrap + python), and the first call
  when none runs (`auto`: in-process, and it starts one; stopped again before each sample).
  The CPU of a call through the helper counts the client, the helper and its children
  (worker, fork server, the sandbox's init) and the spare sandbox it opens for the next call;
* --concurrent (64) `minisandbox run TASK -- true` processes started at once, without and
  with a helper running: time until all exited, against the same number of `bwrap ... true`
  + `python -c pass` pairs; then, once the helper has opened the spares of that burst
  (docs/sandbox.md "The node-local helper"), the same burst again; with `--tree`, the first
  burst of each tree once more, each through a fresh helper of its own, one after another.

The CPU column counts every process a sample causes, at the kernel's precision: at start
the bench makes a cgroup of its own below its cgroup (v2 where it may write one, else v1
`cpuacct`; minisandbox.sandbox.limits finds the hierarchies) and moves itself into it, so the
CLI, the baselines, a helper and the sandboxes' processes (whose cgroups minisandbox makes
below the caller's) are all counted in its `cpu.stat` usage_usec (v1: `cpuacct.usage`). A
sample's CPU is the cgroup's usage from before the process starts until the cgroup is quiet
again after it exited (what it left running, e.g. a sandbox's init and fork server or the
spare sandbox a helper opens for the next call, has finished), minus the bench's own CPU
over that time; the wall time stops when the process exits, as before. Where no cgroup can
be written (or with --no-cgroup), the CPU column is what it was before: the process's
os.wait4 rusage (it and the children it waited for; a sandbox's init and fork server are
not) plus, through a helper, the helper tree's /proc utime/stime (clock ticks: 10 ms steps).
The table's first line says which was used. The cgroup is removed at exit.

The store is the tests' `build_local_store` (a tiny env and repo whose interpreter is this
machine's /usr python3).

    .venv/bin/python bench/bench_cli.py [--n 20] [--concurrent 64] [--json OUT] [--no-cgroup]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "src"))

from tabulate import tabulate  # noqa: E402

from minisandbox.sandbox.limits import (  # noqa: E402
    CommandCgroup,
    cgroup_parents,
    remove_cgroup_tree,
    v2_delegated,
    v2_writable,
)
from tests.fixtures.runtime import build_local_store  # noqa: E402  (the tests' tiny published store)

BWRAP = [
    "bwrap",
    "--ro-bind",
    "/",
    "/",
    "--dev",
    "/dev",
    "--proc",
    "/proc",
    "--unshare-all",
    "--die-with-parent",
    "true",
]
TASK = "bench__cli.0"


class CpuMeter:
    """A cgroup of the bench's own that every process it starts lands in (the bench moved
    itself into it first): its usage minus the bench's own CPU is what those processes spent,
    exited or not, at the kernel's precision (no clock ticks)."""

    def __init__(self, path: str, version: str, home: str) -> None:
        self.path = path
        self.version = version  # "v2" (cpu.stat usage_usec) | "v1" (cpuacct.usage, ns)
        self.home = home  # the cgroup the bench came from (it goes back there at the end)

    @classmethod
    def create(cls) -> tuple[CpuMeter | None, str]:
        """Make the cgroup and move this process into it, v2 first; (None, why) when no
        hierarchy lets us (then the CPU column falls back to rusage and /proc)."""
        parents = cgroup_parents()
        name = f"bench-cli-{os.getpid()}"
        tried = []
        for version, parent in (("v2", parents.get("v2")), ("v1", parents.get("cpuacct"))):
            if parent is None:
                continue
            writable = v2_writable(parent) if version == "v2" else os.access(parent, os.W_OK)
            tried.append(f"{parent} ({'writable' if writable else 'not writable'})")
            if not writable:
                continue
            path = os.path.join(parent, name)
            try:
                os.mkdir(path)
            except OSError:
                continue
            try:
                Path(path, "cgroup.procs").write_text(str(os.getpid()))
            except OSError:
                os.rmdir(path)
                continue
            meter = cls(path, version, parent)
            if meter.usage() is None:
                meter.close()
                continue
            return meter, meter.describe(delegated=version == "v2" and v2_delegated(parent))
        where = ", ".join(tried) or "no cgroup hierarchy found"
        return None, f"no cgroup could be written ({where})"

    def describe(self, delegated: bool = False) -> str:
        stat = "cpu.stat usage_usec" if self.version == "v2" else "cpuacct.usage"
        text = (
            f"cgroup {self.version} {self.path} {stat}: every process a sample caused, until quiet "
            "again after the process exited, minus the bench's own CPU"
        )
        if delegated:  # a cgroup holding processes cannot hand memory/pids down (v2)
            text += (
                "; the caller's cgroup hands memory and pids down, the bench's does not: the "
                "sandboxes fall back to v1 or rlimits for those limits here"
            )
        return text

    def usage(self) -> float | None:
        """CPU seconds of every process that ran in the cgroup or below it."""
        return CommandCgroup(self.path, self.version).usage()

    def others(self) -> float:
        """CPU seconds of the cgroup's processes but this one (own CPU read first: reading
        it also charges this process's running time to the cgroup)."""
        own = time.process_time()
        return (self.usage() or 0.0) - own

    def quiet(self, window: float = 0.05, tol: float = 0.0002, timeout: float = 5.0) -> float:
        """Wait (at most `timeout` s) until the other processes use less than `tol` CPU
        seconds in `window` s (an idle helper wakes twice a second for well under that);
        the seconds waited."""
        t0 = time.monotonic()
        last = self.others()
        while time.monotonic() - t0 < timeout:
            time.sleep(window)
            now = self.others()
            if now - last < tol:
                break
            last = now
        return time.monotonic() - t0

    def close(self) -> None:
        """Move back to where the bench came from and remove the cgroup (the sandboxes'
        cgroups below it are gone once their processes are; a busy one is named)."""
        try:
            Path(self.home, "cgroup.procs").write_text(str(os.getpid()))
        except OSError as exc:
            print(f"bench_cli: could not move back to {self.home}: {exc}", file=sys.stderr)
        if not remove_cgroup_tree(self.path, wait=5.0):
            print(f"bench_cli: cgroup {self.path} still busy: rmdir it once its processes exited", file=sys.stderr)


def sample(argv: list[str], env: dict, meter: CpuMeter | None) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one process. Wall: from its start until it exited. CPU
    with a `meter`: of every process the sample caused, until they are quiet again (a
    helper's worker and the spare it opens for the next call; a helper that `auto` started,
    up to its being ready). Without one: user + sys of it and of the children it waited for
    (a sandbox's init and the fork server are not its children: not counted), plus, when a
    node-local helper serves it, what the helper and its children spent (clock ticks)."""
    if env.get(PRE) == "stop-helper":
        subprocess.run([env["MSB_EXE"], "helper", "stop"], env=env, stdout=subprocess.DEVNULL, check=True)
    elif env.get(PRE) == "helper-running" and helper_pid(env) is None:
        # the steady state of "a helper is running": it runs, and served a call like this one before
        subprocess.run([env["MSB_EXE"], "helper", "start"], env=env, stdout=subprocess.DEVNULL, check=True)
        for _ in range(2):  # a repeated call: the helper keeps a spare sandbox for the next one
            subprocess.run(argv, env={k: v for k, v in env.items() if k != PRE}, stdout=subprocess.DEVNULL, check=True)
    helper = helper_pid(env) if meter is None and env.get("MINISANDBOX_HELPER") == "use" else None
    if meter is not None:
        meter.quiet()  # (a stopped helper's spares closing, the last sample's leftovers)
        before = meter.others()
    else:
        before = tree_cpu(helper) if helper else 0.0
    started = time.time()
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, env={k: v for k, v in env.items() if k != PRE}, stdout=subprocess.DEVNULL)
    _, status, ru = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"bench_cli: {' '.join(argv)} failed ({os.waitstatus_to_exitcode(status)})")
    if meter is not None:
        if env.get(PRE) == "stop-helper":  # the helper the call started: counted until it is ready
            _wait_started(env["MINISANDBOX_RUNTIME_DIR"], started)
        meter.quiet()
        cpu = meter.others() - before
    if env.get(PRE) == "stop-helper":  # the helper it started must not spend its start-up in other samples
        deadline = time.monotonic() + 20
        while meter is None and helper_pid(env) is None and time.monotonic() < deadline:
            time.sleep(0.05)
        subprocess.run([env["MSB_EXE"], "helper", "stop"], env=env, stdout=subprocess.DEVNULL, check=True)
    if meter is not None:
        return wall, cpu
    extra = 0.0
    if helper:
        time.sleep(0.01)  # the worker's exit reaches the helper's counters
        extra = tree_cpu(helper) - before
    return wall, ru.ru_utime + ru.ru_stime + extra


def _wait_started(runtime: str, since: float, timeout: float = 20.0) -> bool:
    """Wait until a helper started after `since` (time.time()) wrote its pid file in
    `runtime` (it does once it listens). Read here, not through a `minisandbox helper status`
    process or a connection, whose CPU the cgroup would count."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for pid_file in Path(runtime).glob("helper-*.sock.pid"):
            try:
                if pid_file.stat().st_mtime >= since:
                    return True
            except OSError:
                pass
        time.sleep(0.02)
    return False


PRE = "BENCH_CLI_PRE"  # in a case's env: what to do before each sample (not seen by the process: popped)
TICK = os.sysconf("SC_CLK_TCK")


def helper_pid(env: dict) -> int | None:
    out = subprocess.run([env["MSB_EXE"], "helper", "status"], env=env, capture_output=True, text=True)
    return int(out.stdout.split("pid ")[1].split(",")[0]) if out.returncode == 0 else None


def tree_cpu(pid: int) -> float:
    """CPU seconds of `pid`, of its reaped children and of its live children (the fork
    server, whose reaped children are the sandboxes' inits)."""

    def cpu(p: int) -> float:
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return 0.0
        return sum(int(x) for x in fields[11:15]) / TICK

    kids = [int(k) for t in Path(f"/proc/{pid}/task").glob("*") for k in (t / "children").read_text().split()]
    return cpu(pid) + sum(cpu(k) for k in kids)


def _descendants_cpu(root: int) -> float:
    """CPU seconds of the live processes under `root` (their own, not their reaped children's)."""
    parent, cpu = {}, {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            parent[int(entry)] = int(fields[1])
            cpu[int(entry)] = sum(int(x) for x in fields[11:13]) / TICK
    total = 0.0
    for pid in cpu:
        p = pid
        while p in parent and p != root:
            p = parent[p]
        if p == root:
            total += cpu[pid]
    return total


def _settle(helper: int | None, quiet: float = 0.02, timeout: float = 120.0) -> float:
    """Seconds until the helper's processes use less than `quiet` CPU seconds in a second
    (the spares it opens after a burst are ready)."""
    t0 = time.monotonic()
    if helper is None:
        return 0.0
    last = _descendants_cpu(helper)
    while time.monotonic() - t0 < timeout:
        time.sleep(1.0)
        now = _descendants_cpu(helper)
        if now - last < quiet:
            break
        last = now
    return time.monotonic() - t0


def interleaved(
    cases: dict[str, tuple[list[str], dict]], n: int, meter: CpuMeter | None
) -> dict[str, dict[str, list[float]]]:
    """n samples of every case, taken round-robin (load that drifts during the run hits every
    row alike): {case: {"wall": [...], "cpu": [...]}}."""
    out = {k: {"wall": [], "cpu": []} for k in cases}
    for _ in range(n):
        for key, (argv, env) in cases.items():
            wall, cpu = sample(argv, env, meter)
            out[key]["wall"].append(wall)
            out[key]["cpu"].append(cpu)
    return out


def concurrent(argvs: list[list[str]], k: int, env: dict) -> tuple[float, int, str, float]:
    """k copies of the chain `argvs` (each started when the previous one of its chain exits),
    all chains at once: (seconds until the last exits, failed chains, one failure's stderr,
    the load average when it started: a burst is CPU-bound, so a burst at another load does
    not compare with it)."""
    chain = " && ".join(" ".join(map(_quote, a)) for a in argvs)
    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    procs = [
        subprocess.Popen(
            ["/bin/sh", "-c", chain], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
        )
        for _ in range(k)
    ]
    errors = [err.strip() for p in procs for _, err in [p.communicate()] if p.returncode != 0]
    return time.perf_counter() - t0, len(errors), (errors[0][-300:] if errors else ""), load


def _quote(s: str) -> str:
    import shlex

    return shlex.quote(s)


def ms(samples: list[float]) -> tuple[float, float]:
    xs = sorted(s * 1000 for s in samples)
    return statistics.median(xs), xs[min(len(xs) - 1, round(0.95 * (len(xs) - 1)))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=20, help="samples per row")
    ap.add_argument("--concurrent", type=int, default=64, help="CLI processes started at once (0: skip)")
    ap.add_argument(
        "--tree",
        action="append",
        default=[],
        metavar="NAME=DIR",
        help="also measure the source tree DIR (e.g. `git archive` of another commit) as NAME, "
        "through PYTHONPATH=DIR/src (before/after in one run)",
    )
    ap.add_argument("--json", help="also write the rows to this JSON file (bench/report.py reads it)")
    ap.add_argument(
        "--no-cgroup",
        action="store_true",
        help="CPU column from os.wait4 rusage and /proc clock ticks, as where no cgroup can be written",
    )
    a = ap.parse_args()
    if not shutil.which("bwrap"):
        raise SystemExit(
            "bench_cli: bubblewrap (bwrap) is not installed: it is this bench's baseline "
            "(apt-get install bubblewrap; scripts/setup.sh installs it)"
        )
    exe = shutil.which("minisandbox", path=str(Path(sys.executable).parent)) or shutil.which("minisandbox")
    if not exe:
        raise SystemExit("bench_cli: no `minisandbox` command beside this interpreter or on PATH")
    work = Path(tempfile.mkdtemp(prefix="msb-bench-cli-", dir="/tmp"))
    cache = work / "cache"
    for rt in ("rt", "rt-auto"):  # the helper of the "first call" row is its own
        (work / rt).mkdir(mode=0o700)
    runtime = work / "rt"
    env = {
        "PATH": f"{Path(exe).parent}:/usr/bin:/bin",
        "MINISANDBOX_CACHE": str(cache),
        "HOME": str(work),
        "MINISANDBOX_RUNTIME_DIR": str(runtime),
        "MINISANDBOX_HELPER": "off",
        "MSB_EXE": exe,
    }
    trees = {"this checkout": None, **dict(t.split("=", 1) for t in a.tree)}
    # first of all: every process the bench starts from here on (a helper too) is in its cgroup
    meter, accounting = (None, "--no-cgroup") if a.no_cgroup else CpuMeter.create()
    if meter is None:
        accounting = (
            f"rusage (os.wait4: the process and the children it waited for) + the helper tree's /proc "
            f"clock ticks: {accounting}"
        )
    try:
        store = build_local_store(work, TASK)
        subprocess.run([exe, "fetch", "--store", store, TASK], check=True, env=env, stdout=subprocess.DEVNULL)
        run = [exe, "run", "--store", store, TASK, "--", "true"]
        cases: dict[str, tuple[list[str], dict]] = {
            "bwrap": (BWRAP, env),
            "python": ([sys.executable, "-c", "pass"], env),
        }
        for name, src in trees.items():
            tenv = env if src is None else {**env, "PYTHONPATH": str(Path(src) / "src")}
            cases[f"version {name}"] = ([exe, "--version"], tenv)
            cases[f"run {name}"] = (run, tenv)
            cases[f"run helper {name}"] = (run, {**tenv, "MINISANDBOX_HELPER": "use", PRE: "helper-running"})
            cases[f"run first auto {name}"] = (
                run,
                {
                    **tenv,
                    "MINISANDBOX_HELPER": "auto",
                    PRE: "stop-helper",
                    "MINISANDBOX_RUNTIME_DIR": str(work / "rt-auto"),
                },
            )
            cases[f"run nobc {name}"] = (run, {**tenv, "PYTHONDONTWRITEBYTECODE": "1"})
            cases[f"run never compiled {name}"] = (
                run,
                {**tenv, "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPYCACHEPREFIX": str(work / "no-pycache")},
            )
        for argv, cenv in cases.values():  # warm-up: page cache, bytecode, the verified-document markers
            sample(argv, cenv, meter)
        load_start = os.getloadavg()[0]
        samples = interleaved(cases, a.n, meter)
        load_end = os.getloadavg()[0]
        med = {k: {m: statistics.median(v[m]) for m in ("wall", "cpu")} for k, v in samples.items()}
        anchor = {m: med["bwrap"][m] + med["python"][m] for m in ("wall", "cpu")}
        rows = []

        def row(name: str, key: str, base: dict | None, note: str = "") -> None:
            wall_ms, p95 = ms(samples[key]["wall"])
            cpu_ms = med[key]["cpu"] * 1000
            rows.append(
                [
                    name,
                    len(samples[key]["wall"]),
                    round(wall_ms, 1),
                    round(p95, 1),
                    round(cpu_ms, 1),
                    round(med[key]["wall"] / base["wall"], 2) if base else "",
                    round(med[key]["cpu"] / base["cpu"], 2) if base else "",
                    note,
                ]
            )

        row("BASELINE bwrap one-shot (`true`)", "bwrap", None)
        row("BASELINE `python -c pass`", "python", None)
        if meter is not None:  # what each kind of row's CPU counts
            sandbox = "; CPU: the CLI and its sandbox's init, fork server and spawner"
            through = "; CPU: client, helper, worker, sandbox, and the spare it opens for the next call"
            first = "in-process + starting the helper; CPU: its start-up too, until it is ready"
        else:
            sandbox = "; CPU: the CLI and the children it waited for (not the sandbox's init, fork server)"
            through = "; CPU: client + helper + its children (helper's in clock ticks)"
            first = "in-process + starting the helper (its start-up CPU not counted)"
        for name in trees:
            row(f"`minisandbox --version` ({name})", f"version {name}", med["python"], "vs python -c pass; target <= 2")
            row(
                f"`minisandbox run TASK -- true`, no helper ({name})",
                f"run {name}",
                anchor,
                f"MINISANDBOX_HELPER=off; vs bwrap + python; target <= 4{sandbox}",
            )
            row(
                f"  same, a helper running ({name})",
                f"run helper {name}",
                anchor,
                f"vs bwrap + python; target <= 2{through}",
            )
            row(
                f"  same, first call: none running, `auto` starts one ({name})", f"run first auto {name}", anchor, first
            )
            row(
                f"  same, PYTHONDONTWRITEBYTECODE=1 ({name})",
                f"run nobc {name}",
                anchor,
                f"bytecode compiled at set-up{sandbox}",
            )
            row(
                f"  same, never byte-compiled ({name})",
                f"run never compiled {name}",
                anchor,
                f"empty PYTHONPYCACHEPREFIX: every module compiled on every call{sandbox}",
            )
        headers = ["what", "n", "median ms", "p95 ms", "CPU ms", "ratio (wall)", "ratio (CPU)", "note"]
        print(
            f"load average {load_start:.1f} at the start, {load_end:.1f} at the end, on {os.cpu_count()} CPUs; "
            "samples taken round-robin"
        )
        print(f"CPU column: {accounting}")
        print(tabulate(rows, headers=headers, tablefmt="github"))
        conc_rows = []
        if a.concurrent:
            k = a.concurrent
            base, base_failed, _, base_load = concurrent([BWRAP, [sys.executable, "-c", "pass"]], k, env)
            cli, cli_failed, error, cli_load = concurrent([run], k, env)
            henv = {**env, "MINISANDBOX_HELPER": "use"}
            subprocess.run([exe, "helper", "start"], env=henv, check=True, stdout=subprocess.DEVNULL)
            for _ in range(2):  # as in the steady state
                subprocess.run(run, env=henv, check=True, stdout=subprocess.DEVNULL)
            hcli, hcli_failed, herror, hcli_load = concurrent([run], k, henv)
            settled = _settle(helper_pid(henv))  # the helper fills its spares for the next such burst
            again, again_failed, aerror, again_load = concurrent([run], k, henv)
            error = error or herror or aerror
            paired = []  # the first burst of every tree, each with a fresh helper, one after another
            if len(trees) > 1:
                subprocess.run([exe, "helper", "stop"], env=henv, stdout=subprocess.DEVNULL)  # (its spares' CPU)
                for name, src in trees.items():
                    tenv = henv if src is None else {**henv, "PYTHONPATH": str(Path(src) / "src")}
                    subprocess.run([exe, "helper", "start"], env=tenv, check=True, stdout=subprocess.DEVNULL)
                    for _ in range(2):  # as in the steady state
                        subprocess.run(run, env=tenv, check=True, stdout=subprocess.DEVNULL)
                    took, failed, terror, tload = concurrent([run], k, tenv)
                    subprocess.run([exe, "helper", "stop"], env=tenv, stdout=subprocess.DEVNULL)
                    error = error or terror
                    paired.append(
                        [
                            f"  first burst, a fresh helper ({name})",
                            k,
                            round(took, 2),
                            failed,
                            round(took / base, 2),
                            round(tload, 1),
                        ]
                    )
            # the baseline once more: how far the machine's load moved the bursts between
            base2, base2_failed, _, base2_load = concurrent([BWRAP, [sys.executable, "-c", "pass"]], k, env)
            conc_rows = [
                [
                    f"BASELINE {k} x (bwrap one-shot + python -c pass)",
                    k,
                    round(base, 2),
                    base_failed,
                    "",
                    round(base_load, 1),
                ],
                [
                    f"{k} x `minisandbox run TASK -- true`, no helper",
                    k,
                    round(cli, 2),
                    cli_failed,
                    round(cli / base, 2),
                    round(cli_load, 1),
                ],
                [
                    f"{k} x `minisandbox run TASK -- true`, a helper running",
                    k,
                    round(hcli, 2),
                    hcli_failed,
                    round(hcli / base, 2),
                    round(hcli_load, 1),
                ],
                [
                    f"  same again: the helper served such a burst before (its spares open; filling "
                    f"them took {settled:.1f} s after the first)",
                    k,
                    round(again, 2),
                    again_failed,
                    round(again / base, 2),
                    round(again_load, 1),
                ],
                *paired,
                [
                    "BASELINE again, after the bursts above (not a ratio's base)",
                    k,
                    round(base2, 2),
                    base2_failed,
                    "",
                    round(base2_load, 1),
                ],
            ]
            print()
            print(
                tabulate(
                    conc_rows,
                    headers=[
                        "what (all started at once)",
                        "processes",
                        "all done s",
                        "failed",
                        "ratio (target <= 2)",
                        "load at start",
                    ],
                    tablefmt="github",
                )
            )
            if error:
                print(f"a failed run said: {error}")
        if a.json:
            Path(a.json).write_text(
                json.dumps(
                    {
                        "machine": {
                            "cores": os.cpu_count(),
                            "python": sys.version.split()[0],
                            "load": round(os.getloadavg()[0], 1),
                            "load_start": round(load_start, 1),
                            "load_latency_end": round(load_end, 1),
                        },
                        "latency_rows": {"headers": headers, "rows": rows},
                        "cpu_accounting": accounting,
                        "concurrent_rows": {
                            "headers": ["what", "processes", "all done s", "failed", "ratio", "load at start"],
                            "rows": conc_rows,
                        },
                        "samples_s": samples,
                    },
                    indent=1,
                )
            )
        return 0
    finally:
        for rt in ("rt", "rt-auto"):
            subprocess.run(
                [exe, "helper", "stop"],
                env={**env, "MINISANDBOX_RUNTIME_DIR": str(work / rt)},
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        subprocess.run(
            [exe, "cache", "gc", "--max-bytes", "0"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        with open("/proc/self/mounts") as fh:  # anything gc left mounted below the work dir
            left = [ln.split()[1] for ln in fh if ln.split()[1].startswith(str(work) + "/")]
        for target in sorted(left, reverse=True):
            subprocess.run(["umount", "-l", target], capture_output=True)
        shutil.rmtree(work, ignore_errors=True)
        if meter is not None:  # last: the helpers stopped, their sandboxes closed
            meter.close()


if __name__ == "__main__":
    sys.exit(main())
