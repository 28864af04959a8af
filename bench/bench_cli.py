#!/usr/bin/env python3
"""CLI latency bench: what one `minisandbox` process costs, against bubblewrap and a bare
interpreter start measured in the same run (a shared machine drifts; ratios do not).

Rows (median and p95 of --n runs, each a fresh process, warm node cache):
* BASELINE `bwrap --ro-bind / / --dev /dev --proc /proc --unshare-all --die-with-parent true`
  (bubblewrap one-shot) and `python -c pass` (the interpreter the CLI runs on);
* `minisandbox --version` (target: <= 2x `python -c pass`);
* `minisandbox run TASK -- true` (whole process) over a small published store (chunked
  squashfs images, no archives: the pipeline's default layout), ratio to bwrap + python;
* the same two with PYTHONDONTWRITEBYTECODE=1 (bytecode must have been compiled at set-up);
* --concurrent (64) `minisandbox run TASK -- true` processes started at once: time until
  all exited, against the same number of `bwrap ... true` + `python -c pass` pairs.

The store is the tests' `build_local_store` (a tiny env and repo whose interpreter is this
machine's /usr python3).

    python bench/bench_cli.py [--n 20] [--concurrent 64] [--json OUT]
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

BWRAP = ["bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-all",
         "--die-with-parent", "true"]
TASK = "bench__cli.0"


def timed(argv: list[str], n: int, env: dict) -> list[float]:
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        subprocess.run(argv, check=True, env=env, stdout=subprocess.DEVNULL)
        out.append(time.perf_counter() - t0)
    return out


def concurrent(argvs: list[list[str]], k: int, env: dict) -> float:
    """k copies of the chain `argvs` (each started when the previous one of its chain exits),
    all chains at once: seconds until the last exits."""
    chain = " && ".join(" ".join(map(_quote, a)) for a in argvs)
    t0 = time.perf_counter()
    procs = [subprocess.Popen(["/bin/sh", "-c", chain], env=env, stdout=subprocess.DEVNULL) for _ in range(k)]
    failed = sum(p.wait() != 0 for p in procs)
    if failed:
        raise SystemExit(f"{failed} of {k} concurrent runs of {chain!r} failed")
    return time.perf_counter() - t0


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
    ap.add_argument("--json", help="also write the rows to this JSON file (bench/report.py reads it)")
    a = ap.parse_args()
    if not shutil.which("bwrap"):
        raise SystemExit("bench_cli: bubblewrap (bwrap) is not installed: it is this bench's baseline "
                         "(apt-get install bubblewrap; scripts/setup.sh installs it)")
    exe = shutil.which("minisandbox", path=str(Path(sys.executable).parent)) or shutil.which("minisandbox")
    if not exe:
        raise SystemExit("bench_cli: no `minisandbox` command beside this interpreter or on PATH")
    work = Path(tempfile.mkdtemp(prefix="msb-bench-cli-", dir="/tmp"))
    cache = work / "cache"
    env = {"PATH": f"{Path(exe).parent}:/usr/bin:/bin", "MINISANDBOX_CACHE": str(cache), "HOME": str(work)}
    nobc = {**env, "PYTHONDONTWRITEBYTECODE": "1"}
    try:
        store = build_local_store(work, TASK)
        subprocess.run([exe, "fetch", "--store", store, TASK], check=True, env=env, stdout=subprocess.DEVNULL)
        run = [exe, "run", "--store", store, TASK, "--", "true"]
        timed(run, 2, env)  # warm the page cache and bytecode
        samples = {
            "bwrap": timed(BWRAP, a.n, env),
            "python": timed([sys.executable, "-c", "pass"], a.n, env),
            "version": timed([exe, "--version"], a.n, env),
            "run": timed(run, a.n, env),
            "version_nobc": timed([exe, "--version"], a.n, nobc),
            "run_nobc": timed(run, a.n, nobc),
        }
        med = {k: ms(v)[0] for k, v in samples.items()}
        anchor = med["bwrap"] + med["python"]
        rows = []

        def row(name: str, key: str, base: float | None, note: str = "") -> None:
            m, p95 = ms(samples[key])
            rows.append([name, len(samples[key]), round(m, 1), round(p95, 1),
                         round(m / base, 2) if base else "", note])

        row("BASELINE bwrap one-shot (`true`)", "bwrap", None)
        row("BASELINE `python -c pass`", "python", None)
        row("`minisandbox --version`", "version", med["python"], "ratio to python -c pass; target <= 2")
        row("`minisandbox run TASK -- true`", "run", anchor, "ratio to bwrap + python; target <= 4 (no helper)")
        row("`--version`, PYTHONDONTWRITEBYTECODE=1", "version_nobc", med["python"], "ratio to python -c pass")
        row("`run -- true`, PYTHONDONTWRITEBYTECODE=1", "run_nobc", anchor, "ratio to bwrap + python")
        print(tabulate(rows, headers=["what", "n", "median ms", "p95 ms", "ratio", "note"], tablefmt="github"))
        conc_rows = []
        if a.concurrent:
            k = a.concurrent
            base = concurrent([BWRAP, [sys.executable, "-c", "pass"]], k, env)
            cli = concurrent([run], k, env)
            conc_rows = [[f"BASELINE {k} x (bwrap one-shot + python -c pass)", k, round(base, 2), ""],
                         [f"{k} x `minisandbox run TASK -- true`", k, round(cli, 2), round(cli / base, 2)]]
            print()
            print(tabulate(conc_rows, headers=["what (all started at once)", "processes", "all done s",
                                               "ratio (target <= 2)"], tablefmt="github"))
        if a.json:
            Path(a.json).write_text(json.dumps({
                "machine": {"cores": os.cpu_count(), "python": sys.version.split()[0],
                            "load": os.getloadavg()[0]},
                "latency_rows": {"headers": ["what", "n", "median ms", "p95 ms", "ratio", "note"], "rows": rows},
                "concurrent_rows": {"headers": ["what", "processes", "all done s", "ratio"], "rows": conc_rows},
                "samples_s": samples,
            }, indent=1))
        return 0
    finally:
        subprocess.run([exe, "cache", "gc", "--max-bytes", "0"], env=env, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        with open("/proc/self/mounts") as fh:  # anything gc left mounted below the work dir
            left = [ln.split()[1] for ln in fh if ln.split()[1].startswith(str(work) + "/")]
        for target in sorted(left, reverse=True):
            subprocess.run(["umount", "-l", target], capture_output=True)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
