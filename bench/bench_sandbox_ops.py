#!/usr/bin/env python3
"""The sandbox's hot path, operation by operation, for before/after comparisons of one
change: creation, `execute("true")`, a failing command (the cause lookup), `read_file`,
`write_file`, a command that leaves a background process (the CPU watcher) and close,
with every hardening feature on (default limits, seccomp, ptrace off); plus, as the
baseline measured in the same run, the bubblewrap one-shot
(`bwrap --ro-bind / / --dev /dev --proc /proc --unshare-all --die-with-parent true`).
The two `execute` rows and bwrap's also give their median CPU time (`cpu_seconds`: this
process and the sandbox's cgroup, or bwrap as a waited-for child).

Also: the memory an open sandbox costs (resident set of its init and command spawner, and
the controller's growth per open sandbox), and `--scale N` sandboxes created at once by
threads of one process (payload `true`): time until all are ready against N x the single
creation median. Targets (ratios to the bwrap one-shot): creation <= 0.5, `execute("true")`
<= 0.25, close <= 0.5; scale: all ready within 2x, no failure. Each of the N sandboxes is
created and runs its payload, so the scale is also compared with N x the median of the same
work done one sandbox at a time ("create + run true"): the cost of running them at once
rather than one after another, and with N bubblewrap one-shots started the same way (N
threads, each running one to its exit) in the same run: the C reference's own burst, with
the machine's CPU seconds (user + system, from /proc/stat) each burst took.

Run it on two source trees in alternation (`--src` of each, e.g. a `git worktree` of the
commit before) and compare the medians: the machine's load changes between runs, so
alternate several times and use the median of the medians.

Layer: a small git repo (200 files) at /testbed.

Usage: .venv/bin/python bench/bench_sandbox_ops.py [--n 40] [--scale 256] [--src DIR] [--json FILE]
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
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: The baseline: a bubblewrap one-shot with the host system read-only and every namespace new.
BWRAP = ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-all", "--die-with-parent", "true"]

#: Ratio targets to the bwrap one-shot, per row.
TARGETS = {"create": 0.5, "execute true": 0.25, "close": 0.5}


def rss_kb(pid: int) -> tuple[int, int]:
    """(resident, proportional) set size of `pid` in KiB (smaps_rollup), (0, 0) if gone."""
    rss = pss = 0
    try:
        with open(f"/proc/{pid}/smaps_rollup") as fh:
            for line in fh:
                if line.startswith("Rss:"):
                    rss = int(line.split()[1])
                elif line.startswith("Pss:"):
                    pss = int(line.split()[1])
    except OSError:
        pass
    return rss, pss


def children_of(pid: int) -> list[int]:
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat", "rb") as fh:
                    if int(fh.read().rsplit(b")", 1)[1].split()[1]) == pid:
                        out.append(int(name))
            except (OSError, ValueError, IndexError):
                pass
    return out


def memory(Sandbox, Layer, repo: Path, k: int = 8) -> dict:
    """Memory of `k` open sandboxes (each ran one command, so its spawner exists): per
    sandbox, init's and the spawner's RSS/PSS, and the controller's RSS growth."""
    own = rss_kb(os.getpid())[0]
    boxes = [Sandbox([Layer(str(repo), "/testbed")]) for _ in range(k)]
    for sb in boxes:
        sb.execute("true")
    grown = rss_kb(os.getpid())[0] - own
    init_rss, init_pss, sp_rss, sp_pss = [], [], [], []
    for sb in boxes:
        pid = sb._root.proc.pid
        r, p = rss_kb(pid)
        init_rss.append(r)
        init_pss.append(p)
        for child in children_of(pid):  # the spawner (the only child of an idle sandbox's init)
            r, p = rss_kb(child)
            sp_rss.append(r)
            sp_pss.append(p)
    for sb in boxes:
        sb.close()
    med = lambda xs: statistics.median(xs) if xs else 0  # noqa: E731
    return {
        "sandboxes": k,
        "init_rss_kb": med(init_rss),
        "init_pss_kb": med(init_pss),
        "spawner_rss_kb": med(sp_rss),
        "spawner_pss_kb": med(sp_pss),
        "controller_kb_per_sandbox": grown / k,
    }


def machine_cpu_s() -> float:
    """CPU seconds (user + nice + system + interrupts) all cores have spent since boot: the
    difference around a burst is what the burst cost the machine, every process and the
    kernel's deferred work included."""
    with open("/proc/stat") as fh:
        ticks = [int(x) for x in fh.readline().split()[1:8]]
    user, nice, system, _idle, _iowait, irq, softirq = ticks
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


def bwrap_burst(argv: list[str], n: int) -> dict:
    """`n` bubblewrap one-shots started at once by `n` threads of this process (each runs
    one to its exit), as `scale` starts its sandboxes: time until all have exited."""
    c0, t0 = machine_cpu_s(), time.perf_counter()
    with ThreadPoolExecutor(n) as pool:
        codes = list(pool.map(lambda _i: subprocess.run(argv).returncode, range(n)))
    return {
        "n": n,
        "all_done_s": time.perf_counter() - t0,
        "machine_cpu_s": machine_cpu_s() - c0,
        "failures": sum(code != 0 for code in codes),
    }


def scale(Sandbox, Layer, repo: Path, n: int) -> dict:
    """`n` sandboxes created at once by `n` threads of this process, each running `true`:
    time until all are ready, failures, then all closed."""

    def one(_i: int):
        sb = Sandbox([Layer(str(repo), "/testbed")])
        res = sb.run(["true"], _mark=False, timeout=300)
        return sb, res.returncode == 0

    c0 = machine_cpu_s()
    t0 = time.perf_counter()
    boxes, failures, errors = [], 0, []
    with ThreadPoolExecutor(n) as pool:
        for fut in [pool.submit(one, i) for i in range(n)]:
            try:
                sb, ok = fut.result()
                boxes.append(sb)
                failures += not ok
            except Exception as exc:  # counted and reported
                failures += 1
                errors.append(str(exc)[:200])
    ready = time.perf_counter() - t0
    ready_cpu = machine_cpu_s() - c0
    t1 = time.perf_counter()
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda b: b.close(), boxes))
    return {
        "n": n,
        "all_ready_s": ready,
        "machine_cpu_s": ready_cpu,
        "failures": failures,
        "close_all_s": time.perf_counter() - t1,
        "errors": errors[:3],
    }


def cpu_seconds(sb) -> float:
    """CPU seconds used so far by this process (every thread) and by `sb`'s every process
    (init, the command spawner, the commands: its cgroup); without `sb`, by this process and
    its waited-for children (bwrap; the kernel's deferred teardown of its namespaces is not
    in it). The difference around one operation is that operation's CPU."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    total = own.ru_utime + own.ru_stime
    if sb is None:
        kids = resource.getrusage(resource.RUSAGE_CHILDREN)
        return total + kids.ru_utime + kids.ru_stime
    return total + ((sb.limits.sandbox_usage() if sb.limits is not None else None) or 0.0)


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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=40)
    ap.add_argument("--src", default=str(ROOT / "src"), help="the source tree to measure (default: this one)")
    ap.add_argument("--scale", type=int, default=256, help="sandboxes created at once (0: skip)")
    ap.add_argument("--json", help="also write the medians to this file")
    args = ap.parse_args()
    sys.path.insert(0, args.src)
    from minisandbox.sandbox import rootfs
    from minisandbox.sandbox.sandbox import Layer, Sandbox

    rootfs.prestart()
    samples: dict[str, list[float]] = {
        k: []
        for k in (
            "create",
            "create + run true",
            "execute true",
            "execute false (exit 1)",
            "read_file",
            "write_file",
            "execute 'sleep 5 &'",
            "close",
            "baseline: bwrap one-shot true",
        )
    }
    #: CPU seconds per sample where they can be told apart (see `cpu_seconds`)
    cpu: dict[str, list[float]] = {
        k: [] for k in ("execute true", "execute false (exit 1)", "baseline: bwrap one-shot true")
    }
    bwrap = shutil.which("bwrap")
    bwrap_argv = [bwrap, *BWRAP] if bwrap else []
    with tempfile.TemporaryDirectory(prefix="bench-ops-") as tmp:
        repo = make_repo(Path(tmp) / "repo")
        for i in range(args.n + 2):
            t0 = time.perf_counter()
            sb = Sandbox([Layer(str(repo), "/testbed")])
            t1 = time.perf_counter()
            sb.execute("true")  # the start-state snapshot happens on the first command: not measured below
            t = {}
            c = cpu_seconds(sb)
            a = time.perf_counter()
            assert sb.execute("true").returncode == 0
            t["execute true"] = time.perf_counter() - a
            cpu["execute true"].append(cpu_seconds(sb) - c)
            c = cpu_seconds(sb)
            a = time.perf_counter()
            assert sb.execute("exit 1").returncode == 1
            t["execute false (exit 1)"] = time.perf_counter() - a
            cpu["execute false (exit 1)"].append(cpu_seconds(sb) - c)
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
            a = time.perf_counter()  # the scale's unit of work, one sandbox at a time
            one = Sandbox([Layer(str(repo), "/testbed")])
            assert one.run(["true"], _mark=False, timeout=300).returncode == 0
            t["create + run true"] = time.perf_counter() - a
            one.close()
            if bwrap:
                c = cpu_seconds(None)
                a = time.perf_counter()
                subprocess.run(bwrap_argv, check=True)
                t["baseline: bwrap one-shot true"] = time.perf_counter() - a
                cpu["baseline: bwrap one-shot true"].append(cpu_seconds(None) - c)
            if i < 2:  # warm-up
                for v in cpu.values():
                    v.clear()
            else:
                samples["create"].append(t1 - t0)
                for k, v in t.items():
                    samples[k].append(v)
        mem = memory(Sandbox, Layer, repo)
        sc = scale(Sandbox, Layer, repo, args.scale) if args.scale else None
        if sc and bwrap:
            time.sleep(1)  # (the closed sandboxes' namespaces are torn down by the kernel meanwhile)
            sc["bwrap"] = bwrap_burst(bwrap_argv, args.scale)
    medians = {k: statistics.median(v) * 1000 for k, v in samples.items() if v}
    cpu_medians = {k: statistics.median(v) * 1000 for k, v in cpu.items() if v}
    base = medians.get("baseline: bwrap one-shot true")
    print(f"{args.src}: {args.n} sandboxes, load {os.getloadavg()[0]:.1f}")
    rows = []
    for k, v in medians.items():
        ratio = v / base if base else None
        target = TARGETS.get(k)
        verdict = (
            "" if target is None or ratio is None else (" meets" if ratio <= target else " MISSES") + f" <= {target}"
        )
        c = cpu_medians.get(k)
        rows.append(
            [
                k,
                len(samples[k]),
                round(v, 2),
                "" if c is None else round(c, 2),
                round(ratio, 3) if ratio else "",
                verdict.strip(),
            ]
        )
        print(
            f"  {k:<30} {v:8.2f} ms median"
            + (f" ({c:.2f} ms CPU)" if c is not None else "")
            + (f"  {ratio:5.2f}x bwrap{verdict}" if ratio else "")
        )
    print(
        f"  memory per open sandbox: init RSS {mem['init_rss_kb'] / 1024:.1f} MiB (PSS {mem['init_pss_kb'] / 1024:.1f}), "
        f"spawner RSS {mem['spawner_rss_kb'] / 1024:.1f} MiB (PSS {mem['spawner_pss_kb'] / 1024:.1f}), "
        f"controller +{mem['controller_kb_per_sandbox'] / 1024:.2f} MiB"
    )
    if sc:
        budget = 2 * sc["n"] * medians["create"] / 1000
        sc["target_s"] = budget
        sequential = sc["n"] * medians["create + run true"] / 1000
        sc["one_at_a_time_s"] = sequential
        print(
            f"  {sc['n']} sandboxes at once (threads, payload true): all ready in {sc['all_ready_s']:.2f} s "
            f"(target <= 2 x {sc['n']} x create median = {budget:.2f} s: "
            f"{'meets' if sc['all_ready_s'] <= budget and not sc['failures'] else 'MISSES'}; "
            f"{sc['all_ready_s'] / sequential:.2f}x {sc['n']} x the create + run true median, {sequential:.2f} s), "
            f"{sc['failures']} failures, closed in {sc['close_all_s']:.2f} s; "
            f"{sc['machine_cpu_s']:.2f} s of the machine's CPU"
        )
        bw = sc.get("bwrap")
        if bw:
            print(
                f"  baseline: {bw['n']} bwrap one-shots at once (threads): all exited in {bw['all_done_s']:.2f} s "
                f"({sc['all_ready_s'] / bw['all_done_s']:.2f}x; target {budget / bw['all_done_s']:.2f}x), "
                f"{bw['failures']} failures, {bw['machine_cpu_s']:.2f} s of the machine's CPU"
            )
        for e in sc["errors"]:
            print("  error:", e)
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "src": args.src,
                    "n": args.n,
                    "median_ms": medians,
                    "load": os.getloadavg()[0],
                    "cores": os.cpu_count(),
                    "cpu_median_ms": cpu_medians,
                    "rows": {
                        "headers": ["what", "n", "median ms", "median CPU ms", "ratio to bwrap", "target"],
                        "rows": rows,
                    },
                    "memory": mem,
                    "scale": sc,
                },
                indent=1,
            )
        )


if __name__ == "__main__":
    main()
