#!/usr/bin/env python3
"""Sandbox benchmark: creation latency and 64 concurrent sandboxes of one env.

Layers: a real git checkout (a clone of this project) at /testbed and a real venv with
pip (built at the canonical path through `rootfs.run`, ~1k files) at
/opt/miniconda3/envs/testbed, the interpreter bound at its prefix.

Prints:
1. Creation latency (median, p95) of a sandbox, in-process (`Sandbox(...)` until its init
   answers) and through the command line (`minisandbox sandbox-exec ... -- true`, whole
   process), with baselines measured in the same run: the published method's per-sandbox
   full copy of the layers (`copy_layers=True`), and bare interpreter start-up for the CLI.
   Also first-command latency, close time, and rootless creation when run as root.
   Target: <= 50 ms median in-process creation.
2. 64 concurrent sandboxes of the one environment (threads in one process): time until
   all are ready (each ran `python -c "import pip"` in the venv), failures, close time.

Usage: .venv/bin/python bench/bench_sandbox.py [--n 50] [--concurrent 64] [--no-rootless]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tabulate import tabulate

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from minisandbox.paths import VENV_PATH  # noqa: E402
from minisandbox.sandbox import rootfs  # noqa: E402
from minisandbox.sandbox.interpreters import find_interpreter, interpreter_binds  # noqa: E402
from minisandbox.sandbox.sandbox import Layer, Sandbox  # noqa: E402


def stats(samples: list[float]) -> tuple[float, float]:
    """(median, p95) in milliseconds."""
    ms = sorted(s * 1000 for s in samples)
    p95 = ms[min(len(ms) - 1, int(round(0.95 * (len(ms) - 1))))]
    return statistics.median(ms), p95


def build_layers(work: Path, python: str, owner: tuple[int, int] | None = None) -> tuple[Path, Path, tuple[str, str]]:
    interp = find_interpreter(python)
    repo, venv = work / "repo", work / "venv"
    subprocess.run(["git", "clone", "-q", "--no-hardlinks", str(ROOT), str(repo)], check=True)
    venv.mkdir()
    rc = rootfs.run(
        [rootfs.Bind(str(venv), VENV_PATH, False), *interpreter_binds(interp.version, interp.prefix)],
        [interp.executable, "-m", "venv", VENV_PATH],
        env={"PATH": "/usr/bin:/bin"},
        stdout=subprocess.DEVNULL,
    )
    if rc != 0:
        raise SystemExit(f"building the bench venv with {interp.executable} failed ({rc})")
    if owner:
        subprocess.run(["chown", "-R", f"{owner[0]}:{owner[1]}", str(work)], check=True)
    return repo, venv, (interp.version, interp.prefix)


def files_and_bytes(path: Path) -> tuple[int, int]:
    n = size = 0
    for r, _ds, fs in os.walk(path):
        for f in fs:
            n += 1
            size += os.lstat(os.path.join(r, f)).st_size
    return n, size


def time_inprocess(layers: list[Layer], interp: tuple[str, str], n: int, **opts) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {"create": [], "first": [], "close": []}
    for _ in range(n):
        t0 = time.perf_counter()
        sb = Sandbox(layers, interpreter=interp, **opts)
        t1 = time.perf_counter()
        sb.run(["true"], _mark=False)
        t2 = time.perf_counter()
        sb.close()
        t3 = time.perf_counter()
        out["create"].append(t1 - t0)
        out["first"].append(t2 - t1)
        out["close"].append(t3 - t2)
    return out


def time_cli(argv: list[str], n: int) -> list[float]:
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT / "src")}
    samples = []
    for _ in range(n):
        t0 = time.perf_counter()
        subprocess.run(argv, check=True, env=env, stdout=subprocess.DEVNULL)
        samples.append(time.perf_counter() - t0)
    return samples


ROOTLESS_SNIPPET = """
import sys, time, json
sys.path.insert(0, sys.argv[1])
from minisandbox.sandbox.sandbox import Sandbox, Layer
layers = [Layer(sys.argv[2], "/testbed"), Layer(sys.argv[3], "/opt/miniconda3/envs/testbed")]
samples = []
for _ in range(int(sys.argv[4])):
    t = time.perf_counter()
    sb = Sandbox(layers)
    samples.append(time.perf_counter() - t)
    sb.close()
print(json.dumps(samples))
"""


def rootless_samples(n: int) -> list[float] | str:
    """Creation latency as the unprivileged user `msbtest` (Debian python3.11 layers)."""
    import json
    import pwd

    try:
        user = pwd.getpwnam("msbtest")
    except KeyError:
        return "no msbtest user (run the rootless tests once to create it)"
    work = Path(tempfile.mkdtemp(prefix="msb-bench-rl-", dir="/tmp"))
    try:
        repo, venv, _ = build_layers(work, "3.11.2" if _has("3.11.2") else "3.11", owner=(user.pw_uid, user.pw_gid))
        proc = subprocess.run(
            [
                "runuser",
                "-u",
                "msbtest",
                "--",
                "/usr/bin/python3",
                "-c",
                ROOTLESS_SNIPPET,
                str(ROOT / "src"),
                str(repo),
                str(venv),
                str(n),
            ],
            capture_output=True,
            text=True,
        )
        if proc.returncode != 0:
            return f"failed: {proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else proc.returncode}"
        return json.loads(proc.stdout)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _has(version: str) -> bool:
    try:
        return find_interpreter(version).prefix == "/usr"
    except LookupError:
        return False


def concurrent(layers: list[Layer], interp: tuple[str, str], k: int) -> dict:
    def one(_i: int):
        t0 = time.perf_counter()
        sb = Sandbox(layers, interpreter=interp)
        res = sb.run(
            [
                "bash",
                "-c",
                "source /opt/miniconda3/bin/activate; conda activate testbed; "
                "python -c 'import pip, sys; print(sys.prefix)'",
            ],
            _mark=False,
            timeout=300,
        )
        ok = res.returncode == 0 and res.output.strip() == VENV_PATH
        return sb, time.perf_counter() - t0, ok, res.output[-200:]

    t0 = time.perf_counter()
    boxes, ready, failures, errors = [], [], 0, []
    with ThreadPoolExecutor(k) as pool:
        for fut in [pool.submit(one, i) for i in range(k)]:
            try:
                sb, dt, ok, out = fut.result()
                boxes.append(sb)
                ready.append(dt)
                if not ok:
                    failures += 1
                    errors.append(out)
            except Exception as exc:  # counted, reported
                failures += 1
                errors.append(str(exc))
    all_ready = time.perf_counter() - t0
    alive = sum(1 for b in boxes if b.alive)
    t1 = time.perf_counter()
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda b: b.close(), boxes))
    return {
        "all_ready": all_ready,
        "ready": ready,
        "failures": failures,
        "alive": alive,
        "close_all": time.perf_counter() - t1,
        "errors": errors[:3],
    }


def concurrent_cli(repo: Path, venv: Path, interp: tuple[str, str], k: int) -> dict:
    """k separate `minisandbox sandbox-exec` processes at once (one per rollout worker)."""
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT / "src")}
    argv = [
        sys.executable,
        "-m",
        "minisandbox.cli",
        "sandbox-exec",
        "--layer",
        f"{repo}:/testbed",
        "--layer",
        f"{venv}:{VENV_PATH}",
        "--python",
        f"{interp[0]}:{interp[1]}",
        "--",
        "source /opt/miniconda3/bin/activate; conda activate testbed; python -c 'import pip, sys; print(sys.prefix)'",
    ]
    t0 = time.perf_counter()
    procs = [
        subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(k)
    ]
    ready, failures, errors = [], 0, []
    for p in procs:
        out, err = p.communicate(timeout=600)
        ready.append(time.perf_counter() - t0)
        if p.returncode != 0 or out.strip() != VENV_PATH:
            failures += 1
            errors.append((err or out)[-200:])
    return {"all_ready": time.perf_counter() - t0, "ready": ready, "failures": failures, "errors": errors[:3]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=50, help="samples per latency row")
    ap.add_argument("--concurrent", type=int, default=64)
    ap.add_argument("--python", default="3.10")
    ap.add_argument("--no-rootless", action="store_true")
    ap.add_argument("--json", help="also write the samples and tables to this JSON file (bench/report.py reads it)")
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("note: not root, so everything below is rootless", file=sys.stderr)

    work = Path(tempfile.mkdtemp(prefix="msb-bench-", dir="/tmp"))
    try:
        repo, venv, interp = build_layers(work, args.python)
        layers = [Layer(str(repo), "/testbed"), Layer(str(venv), VENV_PATH)]
        rf, rb = files_and_bytes(repo)
        vf, vb = files_and_bytes(venv)
        print(
            f"layers: repo {rf} files {rb / 1e6:.1f} MB, venv {vf} files {vb / 1e6:.1f} MB; "
            f"interpreter {interp[0]} at {interp[1]}; {os.cpu_count()} CPUs\n"
        )

        time_inprocess(layers, interp, 3)  # warm caches
        overlay = time_inprocess(layers, interp, args.n)
        copy = time_inprocess(layers, interp, max(5, args.n // 5), copy_layers=True)
        net_host = time_inprocess(layers, interp, args.n, network="host")
        cli_argv = [
            sys.executable,
            "-m",
            "minisandbox.cli",
            "sandbox-exec",
            "--layer",
            f"{repo}:/testbed",
            "--layer",
            f"{venv}:{VENV_PATH}",
            "--python",
            f"{interp[0]}:{interp[1]}",
            "--",
            "true",
        ]
        n_cli = max(5, args.n // 3)
        cli = time_cli(cli_argv, n_cli)
        py_start = time_cli([sys.executable, "-c", "pass"], n_cli)
        cli_import = time_cli([sys.executable, "-c", "import minisandbox.cli as c; c.build_parser()"], n_cli)

        base_med = stats(copy["create"])[0]
        rows = []

        def row(name, samples, baseline=None, note=""):
            med, p95 = stats(samples)
            rows.append(
                [name, len(samples), f"{med:.1f}", f"{p95:.1f}", f"{med / baseline:.3f}" if baseline else "", note]
            )

        row("in-process create (overlay, net none)", overlay["create"], base_med, "target <= 50 ms")
        row("in-process create (overlay, net host)", net_host["create"], base_med)
        row("BASELINE in-process create, full copy of layers", copy["create"], base_med, "published method")
        row("first command (`true`) after create", overlay["first"])
        row("close (kill all, unmount, rm)", overlay["close"])
        if not args.no_rootless and os.geteuid() == 0:
            rl = rootless_samples(args.n)
            if isinstance(rl, list):
                row("in-process create, rootless (msbtest)", rl, base_med)
            else:
                rows.append(["in-process create, rootless", 0, "-", "-", "", rl])
        cli_med = stats(py_start)[0]
        row("CLI `minisandbox sandbox-exec -- true`", cli, cli_med, "ratio vs interpreter start")
        row("BASELINE `python -c pass`", py_start, cli_med)
        row("  (import minisandbox.cli + parser)", cli_import, cli_med)
        print(tabulate(rows, headers=["what", "n", "median ms", "p95 ms", "ratio", "note"], tablefmt="github"))

        print(
            f"\n{args.concurrent} concurrent sandboxes of one environment ({os.cpu_count()} CPUs), each "
            "running `python -c 'import pip'` in the activated venv:"
        )
        c = concurrent(layers, interp, args.concurrent)
        cc = concurrent_cli(repo, venv, interp, args.concurrent)
        med, p95 = stats(c["ready"])
        cmed, cp95 = stats(cc["ready"])
        print(
            tabulate(
                [
                    [
                        "threads in one process",
                        args.concurrent,
                        f"{c['all_ready']:.2f}",
                        f"{med:.0f}",
                        f"{p95:.0f}",
                        c["failures"],
                        f"{c['close_all']:.2f}",
                    ],
                    [
                        "separate CLI processes",
                        args.concurrent,
                        f"{cc['all_ready']:.2f}",
                        f"{cmed:.0f}",
                        f"{cp95:.0f}",
                        cc["failures"],
                        "(in the above)",
                    ],
                ],
                headers=["how", "sandboxes", "all ready s", "ready median ms", "p95 ms", "failures", "close all s"],
                tablefmt="github",
            )
        )
        for e in c["errors"] + cc["errors"]:
            print("error:", e)
        if args.json:
            import json

            Path(args.json).write_text(
                json.dumps(
                    {
                        "machine": {"cores": os.cpu_count(), "python": sys.version.split()[0]},
                        "latency_rows": {
                            "headers": ["what", "n", "median ms", "p95 ms", "ratio", "note"],
                            "rows": rows,
                        },
                        "create_s": {
                            "overlay": overlay["create"],
                            "overlay_net_host": net_host["create"],
                            "full_copy": copy["create"],
                        },
                        "concurrent": {
                            "n": args.concurrent,
                            "threads_ready_s": c["ready"],
                            "cli_ready_s": cc["ready"],
                            "threads_all_ready_s": c["all_ready"],
                            "cli_all_ready_s": cc["all_ready"],
                        },
                    },
                    indent=1,
                )
            )
        target = stats(overlay["create"])[0] <= 50
        print(
            f"\nmedian in-process creation {stats(overlay['create'])[0]:.1f} ms: "
            f"{'meets' if target else 'MISSES'} the 50 ms target"
        )
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
