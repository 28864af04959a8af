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
  (worker, fork server, the sandbox's init): more than the in-process rows count;
* --concurrent (64) `minisandbox run TASK -- true` processes started at once, without and
  with a helper running: time until all exited, against the same number of `bwrap ... true`
  + `python -c pass` pairs; then, once the helper has opened the spares of that burst
  (docs/sandbox.md "The node-local helper"), the same burst again; with `--tree`, the first
  burst of each tree once more, each through a fresh helper of its own, one after another.

The store is the tests' `build_local_store` (a tiny env and repo whose interpreter is this
machine's /usr python3).

    .venv/bin/python bench/bench_cli.py [--n 20] [--concurrent 64] [--json OUT]
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


def sample(argv: list[str], env: dict) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one process: user + sys of it and of the children it
    waited for (a sandbox's init and the fork server are not its children: not counted),
    plus, when a node-local helper serves it, what the helper and its children spent."""
    if env.get(PRE) == "stop-helper":
        subprocess.run([env["MSB_EXE"], "helper", "stop"], env=env, stdout=subprocess.DEVNULL, check=True)
    elif env.get(PRE) == "helper-running" and helper_pid(env) is None:
        # the steady state of "a helper is running": it runs, and served a call like this one before
        subprocess.run([env["MSB_EXE"], "helper", "start"], env=env, stdout=subprocess.DEVNULL, check=True)
        for _ in range(2):  # a repeated call: the helper keeps a spare sandbox for the next one
            subprocess.run(argv, env={k: v for k, v in env.items() if k != PRE}, stdout=subprocess.DEVNULL, check=True)
    helper = helper_pid(env) if env.get("MINISANDBOX_HELPER") == "use" else None
    before = tree_cpu(helper) if helper else 0.0
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, env={k: v for k, v in env.items() if k != PRE}, stdout=subprocess.DEVNULL)
    _, status, ru = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"bench_cli: {' '.join(argv)} failed ({os.waitstatus_to_exitcode(status)})")
    if env.get(PRE) == "stop-helper":  # the helper it started must not spend its start-up in other samples
        deadline = time.monotonic() + 20
        while helper_pid(env) is None and time.monotonic() < deadline:
            time.sleep(0.05)
        subprocess.run([env["MSB_EXE"], "helper", "stop"], env=env, stdout=subprocess.DEVNULL, check=True)
    extra = 0.0
    if helper:
        time.sleep(0.01)  # the worker's exit reaches the helper's counters
        extra = tree_cpu(helper) - before
    return wall, ru.ru_utime + ru.ru_stime + extra


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


def interleaved(cases: dict[str, tuple[list[str], dict]], n: int) -> dict[str, dict[str, list[float]]]:
    """n samples of every case, taken round-robin (load that drifts during the run hits every
    row alike): {case: {"wall": [...], "cpu": [...]}}."""
    out = {k: {"wall": [], "cpu": []} for k in cases}
    for _ in range(n):
        for key, (argv, env) in cases.items():
            wall, cpu = sample(argv, env)
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
            sample(argv, cenv)
        load_start = os.getloadavg()[0]
        samples = interleaved(cases, a.n)
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
        for name in trees:
            row(f"`minisandbox --version` ({name})", f"version {name}", med["python"], "vs python -c pass; target <= 2")
            row(
                f"`minisandbox run TASK -- true`, no helper ({name})",
                f"run {name}",
                anchor,
                "MINISANDBOX_HELPER=off; vs bwrap + python; target <= 4",
            )
            row(
                f"  same, a helper running ({name})",
                f"run helper {name}",
                anchor,
                "vs bwrap + python; target <= 2; CPU: client + helper + its children",
            )
            row(
                f"  same, first call: none running, `auto` starts one ({name})",
                f"run first auto {name}",
                anchor,
                "in-process + starting the helper (its start-up CPU not counted)",
            )
            row(
                f"  same, PYTHONDONTWRITEBYTECODE=1 ({name})", f"run nobc {name}", anchor, "bytecode compiled at set-up"
            )
            row(
                f"  same, never byte-compiled ({name})",
                f"run never compiled {name}",
                anchor,
                "empty PYTHONPYCACHEPREFIX: every module compiled on every call",
            )
        headers = ["what", "n", "median ms", "p95 ms", "CPU ms", "ratio (wall)", "ratio (CPU)", "note"]
        print(
            f"load average {load_start:.1f} at the start, {load_end:.1f} at the end, on {os.cpu_count()} CPUs; "
            "samples taken round-robin"
        )
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


if __name__ == "__main__":
    sys.exit(main())
