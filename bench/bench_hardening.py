#!/usr/bin/env python3
"""What the sandbox hardening (docs/sandbox.md) costs, feature by feature: sandbox creation, a first command
and `execute("true")` with the seccomp filter only, the default limits only (their
cgroups, the CPU watcher, one tmpfs budget) and both (the default), each against the same
sandbox with the filter off and no limits (the baseline), measured alternately in the same
run; plus the cost of validating store data (one manifest, one 200-task shard). The parts
that are always on (non-dumpable init and helpers under init's filter, ptrace off,
openat2 file operations, fresh keyring) are in every row.

Layer: a small git repo (200 files) at /testbed. Root: limits are cgroups where writable.

Usage: .venv/bin/python bench/bench_hardening.py [--n 40]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tabulate import tabulate

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from minisandbox.index import parse_shard  # noqa: E402
from minisandbox.manifest import validate_manifest  # noqa: E402
from minisandbox.sandbox import rootfs  # noqa: E402
from minisandbox.sandbox.limits import Limits  # noqa: E402
from minisandbox.sandbox.sandbox import Layer, Sandbox  # noqa: E402


def ms(samples: list[float]) -> tuple[float, float]:
    xs = sorted(s * 1000 for s in samples)
    return statistics.median(xs), xs[min(len(xs) - 1, int(round(0.95 * (len(xs) - 1))))]


def make_repo(path: Path) -> Path:
    path.mkdir(parents=True)
    for i in range(200):
        (path / f"m{i}.py").write_text(f"X = {i}\n")
    subprocess.run(
        "git init -q && git add -A && git -c user.name=b -c user.email=b@b commit -qm init",
        shell=True,
        cwd=path,
        check=True,
    )
    return path


#: name -> Sandbox options; "baseline" has the filter off and no limits.
CONFIGS = {
    "baseline": {"seccomp": False, "limits": Limits.unlimited()},
    "seccomp only": {"limits": Limits.unlimited()},
    "limits only": {"seccomp": False},
    "hardened (default)": {},
}


def one(repo: Path, opts: dict) -> tuple[float, float, float]:
    t0 = time.perf_counter()
    sb = Sandbox([Layer(str(repo), "/testbed")], **opts)
    t1 = time.perf_counter()
    res = sb.run(["python3", "-c", "import threading, subprocess; subprocess.run(['true'])"], _mark=False)
    t2 = time.perf_counter()
    sb.run(["true"], _mark=False)
    t3 = time.perf_counter()
    sb.close()
    assert res.returncode == 0, res.output
    return t1 - t0, t2 - t1, t3 - t2


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=40)
    args = ap.parse_args()
    rootfs.prestart()
    with tempfile.TemporaryDirectory(prefix="bench-hardening-") as tmp:
        repo = make_repo(Path(tmp) / "repo")
        for opts in CONFIGS.values():  # warm-up
            one(repo, opts)
        samples: dict[str, tuple[list, list, list]] = {name: ([], [], []) for name in CONFIGS}
        for _ in range(args.n):
            for name, opts in CONFIGS.items():  # alternate: the same load for each
                # one unmeasured sandbox first: it leaves a warm sandbox of this configuration
                # (a process keeps one, for the limits it last used)
                one(repo, opts)
                for idx, value in enumerate(one(repo, opts)):
                    samples[name][idx].append(value)
    rows = []
    for what, idx in (
        ("create", 0),
        ("first command (python + thread + subprocess)", 1),
        ("execute `true` (a second command)", 2),
    ):
        base = ms(samples["baseline"][idx])
        for name in CONFIGS:
            med, p95 = ms(samples[name][idx])
            rows.append([what, name, f"{med:.1f}", f"{p95:.1f}", f"{med / base[0]:.2f}"])
    print(f"Sandbox, {args.n} runs each, alternating (uid {os.geteuid()}, load {os.getloadavg()[0]:.1f})")
    print(tabulate(rows, headers=["what", "configuration", "median ms", "p95 ms", "ratio to baseline"]))

    manifest = {
        "schema": 1,
        "kind": "env",
        "key": "env-demo-0123456789abcdef",
        "format": "tar.zst",
        "artifact": "env-demo-0123456789abcdef.tar.zst",
        "sha256": "0" * 64,
        "size": 1,
        "files": 1,
        "raw_bytes": 1,
        "mount_path": "/opt/miniconda3/envs/testbed",
        "interpreter": {"version": "3.10.13", "prefix": "/root/.pyenv/versions/3.10.13"},
        "spec": {},
    }
    shard = "".join(
        json.dumps(
            {
                "instance_id": f"o__r.{i}",
                "env_key": "env-a",
                "repo_key": "repo-b",
                "status": "ready",
                "record": {
                    "instance_id": f"o__r.{i}",
                    "format": "swesmith",
                    "repo": "o/r",
                    "patch": "x" * 4000,
                    "fail_to_pass": ["t::a"] * 5,
                    "pass_to_pass": ["t::b"] * 50,
                },
            }
        )
        + "\n"
        for i in range(200)
    ).encode()
    text = json.dumps(manifest)
    rows = []
    for what, fn, base in (
        (
            "parse + validate one manifest",
            lambda: validate_manifest(json.loads(text), where="m"),
            lambda: json.loads(text),
        ),
        (
            "parse + validate a 200-task shard",
            lambda: parse_shard(shard, where="s"),
            lambda: [json.loads(x) for x in shard.decode().splitlines()],
        ),
    ):
        for f in (fn, base):
            f()
        t = [0.0, 0.0]
        for _ in range(200):
            for j, f in enumerate((base, fn)):
                t0 = time.perf_counter()
                f()
                t[j] += time.perf_counter() - t0
        rows.append([what, f"{t[0] / 200 * 1e3:.3f}", f"{t[1] / 200 * 1e3:.3f}", f"{t[1] / t[0]:.2f}"])
    print()
    print(tabulate(rows, headers=["store data", "json only ms", "json + schema ms", "ratio"]))


if __name__ == "__main__":
    main()
