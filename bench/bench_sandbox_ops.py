#!/usr/bin/env python3
"""The sandbox's hot path, operation by operation, for before/after comparisons of one
change: creation, `execute("true")`, a failing command (the cause lookup), `read_file`,
`write_file`, and a command that leaves a background process (the CPU watcher), with
the default limits; plus, as the baseline measured in the same run, a bubblewrap one-shot
(`bwrap` with the host system read-only, new namespaces, `true`) when bwrap is installed.

Run it on two source trees in alternation (`--src` of each, e.g. a `git worktree` of the
commit before) and compare the medians: the machine's load changes between runs, so
alternate several times and use the median of the medians.

Layer: a small git repo (200 files) at /testbed.

Usage: .venv/bin/python bench/bench_sandbox_ops.py [--n 40] [--src DIR] [--json FILE]
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


def make_repo(path: Path) -> Path:
    path.mkdir(parents=True)
    for i in range(200):
        (path / f"m{i}.py").write_text(f"X = {i}\n")
    subprocess.run("git init -q && git add -A && git -c user.name=b -c user.email=b@b commit -qm init",
                   shell=True, cwd=path, check=True)
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=40)
    ap.add_argument("--src", default=str(ROOT / "src"), help="the source tree to measure (default: this one)")
    ap.add_argument("--json", help="also write the medians to this file")
    args = ap.parse_args()
    sys.path.insert(0, args.src)
    from minisandbox.sandbox import rootfs
    from minisandbox.sandbox.sandbox import Layer, Sandbox

    rootfs.prestart()
    samples: dict[str, list[float]] = {k: [] for k in ("create", "execute true", "execute false (exit 1)",
                                                       "read_file", "write_file", "execute 'sleep 5 &'",
                                                       "close", "baseline: bwrap one-shot true")}
    bwrap = shutil.which("bwrap")
    bwrap_argv = [bwrap, "--ro-bind", "/usr", "/usr", "--symlink", "usr/bin", "/bin", "--symlink", "usr/lib",
                  "/lib", "--symlink", "usr/lib64", "/lib64", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp",
                  "--unshare-all", "--die-with-parent", "--", "/usr/bin/true"] if bwrap else []
    with tempfile.TemporaryDirectory(prefix="bench-ops-") as tmp:
        repo = make_repo(Path(tmp) / "repo")
        for i in range(args.n + 2):
            t0 = time.perf_counter()
            sb = Sandbox([Layer(str(repo), "/testbed")])
            t1 = time.perf_counter()
            sb.execute("true")  # the start-state snapshot happens on the first command: not measured below
            t = {}
            a = time.perf_counter()
            assert sb.execute("true").returncode == 0
            t["execute true"] = time.perf_counter() - a
            a = time.perf_counter()
            assert sb.execute("exit 1").returncode == 1
            t["execute false (exit 1)"] = time.perf_counter() - a
            a = time.perf_counter()
            sb.read_file("/testbed/m1.py")
            t["read_file"] = time.perf_counter() - a
            a = time.perf_counter()
            sb.write_file("/tmp/x.py", "X = 1\n")
            t["write_file"] = time.perf_counter() - a
            a = time.perf_counter()
            sb.execute("sleep 5 &")
            t["execute 'sleep 5 &'"] = time.perf_counter() - a
            a = time.perf_counter()
            sb.close()
            t["close"] = time.perf_counter() - a
            if bwrap:
                a = time.perf_counter()
                subprocess.run(bwrap_argv, check=True)
                t["baseline: bwrap one-shot true"] = time.perf_counter() - a
            if i >= 2:  # warm-up
                samples["create"].append(t1 - t0)
                for k, v in t.items():
                    samples[k].append(v)
    medians = {k: statistics.median(v) * 1000 for k, v in samples.items() if v}
    base = medians.get("baseline: bwrap one-shot true")
    print(f"{args.src}: {args.n} sandboxes, load {os.getloadavg()[0]:.1f}")
    for k, v in medians.items():
        ratio = f"  {v / base:5.2f}x bwrap" if base else ""
        print(f"  {k:<30} {v:8.2f} ms median{ratio}")
    if args.json:
        Path(args.json).write_text(json.dumps({"src": args.src, "n": args.n, "median_ms": medians}))


if __name__ == "__main__":
    main()
