"""Benchmark report: the benches' saved JSON -> docs/benchmarks.md with PNG plots.

    .venv/bin/python bench/report.py --data results/bench              # read saved output
    .venv/bin/python bench/report.py --data results/bench --run-quick  # run the benches (--quick sizes) first

Reads, from `--data` (each written by the bench's own `--json OUT`):

* bench_runtime.json   restore time by method (cold/warm, root and unprivileged), store size
                       by format, concurrency curves (ready time vs concurrent requests)
* bench_sandbox.json   sandbox creation distribution, concurrent sandboxes
* bench_sandbox_ops.json  the in-process sandbox's operations (create, execute, close...) vs the bubblewrap
                       one-shot of the same run, memory per open sandbox, N sandboxes at once
* bench_pipeline.json  planning time vs task count (`snakemake -n`, cold and warm CPU, parse alone); with
                       --main-job the bundled main job's CPU (snakemake + children), per command and step,
                       and with --main-job-profile per process (kernel process accounting)
* bench_scale*.json    planning time of the Slurm-profile dry run at its task count (one file per count)
* bench_dedup.json     store and node-cache bytes per layout (needs downloaded wheels: not run by --run-quick)
* bench_eval_checks.json  grading time per task with and without the trust-boundary checks
* bench_fetch.json     cold fetch and publish of a chunked image through a latency proxy in front of moto_server,
                       vs the same bytes as one object (not run by --run-quick: minutes)
* bench_cli.json       CLI start-up: `--version`, `run TASK -- true` (no helper, a node-local helper
                       running, first call; without bytecode), 64 `run`s at once (without and with helper),
                       vs bubblewrap one-shot and `python -c pass` measured in the same run

A missing file leaves its section saying so (with the command that produces it). Plots are
PNGs (matplotlib, Agg backend, small) under docs/benchmarks/; the numbers are tables too.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DPI = 80
SIZE = (6.0, 3.4)

QUICK_RUNS = {
    "bench_runtime.json": ["bench/bench_runtime.py", "--quick", "--reps", "2", "--warm-reps", "5"],
    "bench_sandbox.json": ["bench/bench_sandbox.py", "--n", "15", "--concurrent", "8"],
    "bench_pipeline.json": ["bench/bench_pipeline.py", "--repeats", "1", "--skip-baseline"],
    "bench_cli.json": ["bench/bench_cli.py", "--n", "5", "--concurrent", "16"],
}


def run_quick(data: Path) -> None:
    """Run the cheap benches with small sizes, each writing its JSON into `data`."""
    data.mkdir(parents=True, exist_ok=True)
    for name, argv in QUICK_RUNS.items():
        print(f"running {' '.join(argv)}", file=sys.stderr, flush=True)
        proc = subprocess.run([sys.executable, *argv, "--json", str(data / name)], cwd=ROOT)
        if proc.returncode != 0:
            print(f"{argv[0]} failed (exit {proc.returncode}); its section stays empty", file=sys.stderr)


def load(path: Path) -> Any | None:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None


def med(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def table(headers: list[str], rows: list[list[Any]]) -> str:
    out = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def save(fig: Any, out: Path) -> str:
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(out, dpi=DPI)
    plt.close(fig)
    return f"![{out.stem}](benchmarks/{out.name})"


# ------------------------------------------------------------------ sections


def restore_section(rt: dict, img: Path) -> list[str]:
    single = rt.get("single") or {}
    cold, warm, user = single.get("cold", {}), single.get("warm", {}), single.get("user") or {}
    labels, c_med, w_med = [], [], []
    for name in ("published", "tar.zst", "squashfs"):
        if cold.get(name):
            labels.append(f"root\n{name}")
            c_med.append(med(cold[name]))
            w_med.append(med(warm.get(name, [])))
    for name, key in (("published", "published"), ("tar.zst", "unpack"), ("squashfs", "image")):
        if (user.get(key) or {}).get("cold"):
            labels.append(f"user\n{name}")
            c_med.append(med(user[key]["cold"]))
            w_med.append(med(user[key].get("warm", [])))
    if not labels:
        return ["No restore data in bench_runtime.json."]
    fig, ax = plt.subplots(figsize=SIZE)
    x = range(len(labels))
    ax.bar([i - 0.2 for i in x], c_med, 0.4, label="cold (download + unpack/mount)")
    ax.bar([i + 0.2 for i in x], w_med, 0.4, label="warm (cached)")
    ax.set_xticks(list(x), labels, fontsize=7)
    ax.set_yscale("log")
    ax.set_ylabel("ready s (median, log)")
    ax.set_title("Restore time by method (one environment + repo)")
    ax.legend(fontsize=7)
    link = save(fig, img / "restore_by_method.png")
    base = c_med[0] if c_med else 1
    rows = [
        [lab.replace("\n", " "), f"{c:.3f}", f"{w:.4f}", f"{base / c:.1f}x"] for lab, c, w in zip(labels, c_med, w_med)
    ]
    out = [link, "", table(["method", "cold s", "warm s", "cold speed-up vs root published"], rows)]
    cm = rt.get("concurrent_methods") or {}
    if cm.get("times"):
        names = list(cm["times"])
        all_ready = [med([r[-1] for r in cm["times"][k]]) for k in names]
        fig, ax = plt.subplots(figsize=SIZE)
        ax.bar([k.replace("/", "\n") for k in names], all_ready, color="tab:orange")
        ax.set_yscale("log")
        ax.set_ylabel("all ready s (median, log)")
        ax.set_title(f"{cm['n']} distinct environments restored at once, by method")
        ax.tick_params(axis="x", labelsize=7)
        out += [
            "",
            save(fig, img / "restore_concurrent_by_method.png"),
            "",
            table(["method", f"all {cm['n']} ready s (median)"], [[k, f"{v:.2f}"] for k, v in zip(names, all_ready)]),
        ]
    return out


def size_section(rt: dict, dedup: dict | None, img: Path) -> list[str]:
    out: list[str] = []
    sizes = (rt.get("single") or {}).get("sizes") or {}
    if sizes:
        names = list(sizes)
        fig, ax = plt.subplots(figsize=SIZE)
        ax.bar(names, [sizes[n] / 1e6 for n in names], color="tab:green")
        ax.set_ylabel("MB in the store")
        ax.set_title("Store size by format (bench_runtime's environment + repo)")
        out += [
            save(fig, img / "store_size_by_format.png"),
            "",
            table(
                ["format", "MB", "ratio vs tar.gz"],
                [[n, f"{sizes[n] / 1e6:.1f}", f"{sizes[n] / sizes.get('tar.gz', sizes[n]):.2f}"] for n in names],
            ),
            "",
            "tar.gz: gzip-9 tarball (the published method); tar.zst: zstd tarball; squashfs: the image "
            "stored beside the tar.zst (a store with images holds both).",
        ]
    if dedup:
        rows = dedup.get("rows", {})
        out += [
            "",
            "Store bytes per layout over the SWE-smith profiles' pinned wheels (bench_dedup):",
            "",
            table(
                ["wheels", "envs", "tar.gz-9 GB", "tar.zst-3 GB", "objects + lists GB", "+ images GB"],
                [
                    [
                        g,
                        r["envs"],
                        f"{r['tar_gz9'] / 1e9:.2f}",
                        f"{r['tar_zst3'] / 1e9:.2f}",
                        f"{r['cas_total'] / 1e9:.2f}",
                        f"{r['cas_plus_images'] / 1e9:.2f}",
                    ]
                    for g, r in rows.items()
                ],
            ),
        ]
    else:
        out += [
            "",
            "bench_dedup.json absent (it needs the profiles' wheels downloaded: "
            "`.venv/bin/python bench/bench_dedup.py --wheels DIR --download --json results/bench/bench_dedup.json`).",
        ]
    return out or ["No size data."]


def creation_section(sb: dict, img: Path) -> list[str]:
    create = {k: [x * 1000 for x in v] for k, v in (sb.get("create_s") or {}).items() if v}
    if not create:
        return ["No sandbox creation samples."]
    fig, ax = plt.subplots(figsize=SIZE)
    top = max(max(v) for v in create.values())
    bins = [top * i / 40 for i in range(41)]
    for name, xs in create.items():
        ax.hist(xs, bins=bins, alpha=0.6, label=f"{name} (median {med(xs):.1f} ms, n={len(xs)})")
    ax.set_xlabel("in-process sandbox creation, ms")
    ax.set_ylabel("count")
    ax.set_title("Sandbox creation distribution")
    ax.legend(fontsize=7)
    out = [save(fig, img / "sandbox_creation.png"), ""]
    lat = sb.get("latency_rows")
    if lat:
        out.append(table(lat["headers"], lat["rows"]))
    return out


def ops_section(ops: dict) -> list[str]:
    """bench_sandbox_ops: each operation's median and ratio to the same run's bwrap one-shot."""
    out = [
        f"Load average {ops.get('load', 0):.1f} on {ops.get('cores', '?')} cores during the run; "
        f"{ops.get('n')} sandboxes.",
        "",
    ]
    rows = ops.get("rows") or {}
    if rows.get("rows"):
        out += [table(rows["headers"], rows["rows"]), ""]
    mem = ops.get("memory")
    if mem:
        out.append(
            f"Memory per open sandbox ({mem['sandboxes']} open, each after one command): init RSS "
            f"{mem['init_rss_kb'] / 1024:.1f} MiB (PSS {mem['init_pss_kb'] / 1024:.1f} MiB), command spawner "
            f"RSS {mem['spawner_rss_kb'] / 1024:.1f} MiB (PSS {mem['spawner_pss_kb'] / 1024:.1f} MiB), "
            f"controller +{mem['controller_kb_per_sandbox'] / 1024:.2f} MiB."
        )
    sc = ops.get("scale")
    if sc:
        out += [
            "",
            f"{sc['n']} sandboxes created at once by threads of one process (payload `true`): all ready in "
            f"{sc['all_ready_s']:.2f} s against {sc['target_s']:.2f} s (2 x {sc['n']} x the creation "
            f"median), {sc['failures']} failures, all closed in {sc['close_all_s']:.2f} s.",
        ]
        bw = sc.get("bwrap")
        if bw:
            out.append(
                f"The same number of bubblewrap one-shots started the same way: all exited in "
                f"{bw['all_done_s']:.2f} s ({bw['failures']} failures; the burst took "
                f"{sc['all_ready_s'] / bw['all_done_s']:.2f}x that, its target {sc['target_s'] / bw['all_done_s']:.2f}x)."
            )
    return out


def concurrency_section(rt: dict, sb: dict | None, img: Path) -> list[str]:
    conc = rt.get("concurrent") or {}
    if not conc:
        return ["No concurrency data in bench_runtime.json."]
    curves: dict[str, list[tuple[int, float, float]]] = {}
    for key, times in conc.items():
        n, label = key.split("/", 1)
        curves.setdefault(label, []).append((int(n), med(times), max(times)))
    fig, ax = plt.subplots(figsize=SIZE)
    rows = []
    for label, pts in curves.items():
        pts.sort()
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=f"{label}: median ready")
        ax.plot([p[0] for p in pts], [p[2] for p in pts], marker="x", linestyle="--", label=f"{label}: all ready")
        rows += [[n, label, f"{m:.2f}", f"{a:.2f}"] for n, m, a in pts]
    ax.set_xscale("log", base=2)
    ax.set_xlabel("concurrent task requests (distinct environments)")
    ax.set_ylabel("s")
    ax.set_title("Concurrency: restore on one node")
    ax.legend(fontsize=7)
    out = [
        save(fig, img / "concurrency.png"),
        "",
        table(["requests", "I/O budget", "median ready s", "all ready s"], rows),
    ]
    if sb and sb.get("concurrent"):
        c = sb["concurrent"]
        out += [
            "",
            f"{c['n']} concurrent sandboxes of one environment (bench_sandbox): threads in one process "
            f"all ready in {c['threads_all_ready_s']:.2f} s (median {med(c['threads_ready_s']):.2f} s), "
            f"separate CLI processes in {c['cli_all_ready_s']:.2f} s.",
        ]
    return out


def cli_section(cli: dict) -> list[str]:
    """The CLI bench's own tables (ratios to the same run's bubblewrap and interpreter start)."""
    machine = cli.get("machine", {})
    if "load_start" in machine:  # (older files have only the load at the end)
        load = (
            f"Load average {machine['load_start']} when the latency rows' sampling started, "
            f"{machine.get('load_latency_end', '?')} when it ended, {machine.get('load', '?')} at the end of the run."
        )
    else:
        load = f"Load average {machine.get('load', '?')} during the run."
    out = [load, ""]
    lat = cli.get("latency_rows") or {}
    if lat.get("rows"):
        out += [table(lat["headers"], lat["rows"]), ""]
    conc = cli.get("concurrent_rows") or {}
    if conc.get("rows"):
        out += [table(conc["headers"], conc["rows"])]
    return out


def fetch_section(fetch: dict) -> list[str]:
    """Per image size: time-to-ready and publish of the packed layout (and the per-chunk
    layout before it) as ratios to the same bytes as one object, measured in the same run."""
    out = [f"Proxy: {fetch.get('delay_ms')} ms per request, {fetch.get('mbit')} Mbit/s shared link.", ""]
    rows = []
    for r in fetch.get("results", []):
        m = r["median"]
        f1, p1 = m["fetch_one"], m["publish_one"]
        label = f"{r['mb']:.0f} MB, {r['chunks']} chunks"
        rows.append([label, "fetch: one object (baseline)", f"{f1:.2f}", "1.00x"])
        rows.append(
            [
                label,
                "**fetch: packed chunks (time-to-ready before mount)**",
                f"{m['fetch_packed']:.2f}",
                f"**{m['fetch_packed'] / f1:.2f}x**",
            ]
        )
        for key, what in (
            ("fetch_old8", "fetch: one object per chunk, 8 in flight (before packs)"),
            ("fetch_old32", "fetch: one object per chunk, 32 in flight (older stores)"),
        ):
            if key in m:
                rows.append([label, what, f"{m[key]:.2f}", f"{m[key] / f1:.2f}x"])
        rows.append([label, "publish: one object (baseline)", f"{p1:.2f}", "1.00x"])
        rows.append(
            [
                label,
                "**publish: packed chunks, empty store**",
                f"{m['publish_packed']:.2f}",
                f"**{m['publish_packed'] / p1:.2f}x**",
            ]
        )
    return out + [
        table(
            [
                "image",
                "what",
                f"median s (of {fetch['results'][0]['reps'] if fetch.get('results') else '?'})",
                "vs one object",
            ],
            rows,
        )
    ]


def checks_section(checks: dict) -> list[str]:
    """Gold-patch grading with the trust-boundary checks vs without them (same run)."""
    rows = [
        [
            r[0],
            r[1],
            f"{r[2]:.2f}",
            f"{r[3]:.2f}",
            f"**{r[4]:.2f}x**" if r[0].startswith("ALL") else f"{r[4]:.2f}x",
            f"{r[5]:.1f}",
            *(f"{x:.2f}" for x in r[6:8]),
            f"{r[8]:.2f}x",
        ]
        for r in checks.get("rows", [])
    ]
    return [
        table(
            [
                "task",
                "tests",
                "with checks s",
                "without s (baseline)",
                "ratio",
                "graded state ms",
                "with checks CPU s",
                "without CPU s",
                "CPU ratio",
            ],
            rows,
        ),
        "",
        f"Median of {checks.get('repeats', '?')} alternated repeats per task.",
    ]


def _num(x: Any) -> float | None:
    try:
        return float(str(x).split()[0].rstrip("kx"))
    except ValueError:
        return None


def planning_section(pipe: dict | None, scales: list[dict], img: Path) -> list[str]:
    pts: dict[str, list[tuple[int, float]]] = {}
    out_rows = []
    if pipe and pipe.get("planning"):
        for r in pipe["planning"]["rows"]:
            name = str(r[0])
            if name.startswith("baseline") or " @ " in name:  # the per-task baseline, a baseline ref's tree
                continue
            n = int(float(name.split("k", 1)[0]) * 1000) if "k tasks" in name else None
            cold, warm, cpu = _num(r[2]), _num(r[3]), _num(r[4])
            envs = r[1]
            if n is None or cold is None:
                continue
            pts.setdefault(f"cold wall, {envs} envs", []).append((n, cold))
            if cpu is not None:
                pts.setdefault(f"warm CPU, {envs} envs", []).append((n, cpu))
            out_rows.append([n, envs, cold, warm, cpu, "bench_pipeline"])
    for sc in scales:
        for r in (sc.get("planning") or {}).get("rows", []):
            w = _num(r[1])
            if w is not None:
                label = "Slurm profile -n" if "profile" in str(r[0]) else "local -n"
                pts.setdefault(f"{label} (bench_scale)", []).append((int(sc["tasks"]), w))
                out_rows.append([sc["tasks"], "133", w, "-", "-", f"bench_scale: {r[0]}"])
    if not pts:
        return ["No planning data (bench_pipeline.json / bench_scale*.json)."]
    fig, ax = plt.subplots(figsize=SIZE)
    for label, p in sorted(pts.items()):
        p.sort()
        ax.plot([a for a, _ in p], [b for _, b in p], marker="o", label=label)
    ax.set_xscale("log")
    ax.set_xlabel("tasks")
    ax.set_ylabel("snakemake -n, s")
    ax.set_title("Planning time vs task count")
    ax.legend(fontsize=7)
    return [
        save(fig, img / "planning.png"),
        "",
        table(
            ["tasks", "envs", "cold wall s", "warm wall s", "warm CPU s", "source"],
            sorted(out_rows, key=lambda r: (r[0], str(r[1]))),
        ),
        "",
        "Wall time on a shared machine includes waiting for the CPU; the CPU seconds of the warm "
        "run are the planner's own cost.",
    ]


def _rel(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


def machine_line(*docs: dict | None) -> str:
    for d in docs:
        if d and d.get("machine"):
            m = d["machine"]
            return f"Machine: {m.get('cores')} cores (shared), Python {m.get('python')}."
    return ""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=ROOT / "results" / "bench", help="folder of the benches' JSON")
    ap.add_argument("--run-quick", action="store_true", help="run the cheap benches (quick sizes) into --data first")
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "benchmarks.md")
    a = ap.parse_args(argv)
    if a.run_quick:
        run_quick(a.data)
    if not a.data.is_dir():
        print(
            f"report: no data folder {a.data}; run the benches with --json into it, or pass --run-quick",
            file=sys.stderr,
        )
        return 1
    img = a.out.parent / "benchmarks"
    rt = load(a.data / "bench_runtime.json")
    sb = load(a.data / "bench_sandbox.json")
    pipe = load(a.data / "bench_pipeline.json")
    dedup = load(a.data / "bench_dedup.json")
    fetch = load(a.data / "bench_fetch.json")
    cli = load(a.data / "bench_cli.json")
    scales = [d for p in sorted(a.data.glob("bench_scale*.json")) if (d := load(p)) and "tasks" in d]
    missing = [
        n
        for n, d in (("bench_runtime.json", rt), ("bench_sandbox.json", sb), ("bench_pipeline.json", pipe))
        if d is None
    ]
    lines = [
        "# Benchmarks",
        "",
        "Generated by `bench/report.py` from the benches' saved JSON (`--json OUT` on each bench; "
        "`.venv/bin/python bench/report.py --data DIR [--run-quick]`). Do not edit by hand: re-run it.",
        "",
        "These numbers come from **quick runs** (small trees, few repetitions, 2 cores shared with other "
        "work) unless the data folder held full runs: read them as shapes and ratios, not as targets. "
        "The full-size tables are in docs/runtime.md, docs/sandbox.md, docs/pipeline.md and docs/design.md.",
        "",
        machine_line(rt, sb),
        "",
        f"Data: `{_rel(a.data)}` ({', '.join(sorted(p.name for p in a.data.glob('*.json')))}).",
        "",
    ]
    if missing:
        lines += [f"Missing input (section left empty): {', '.join(missing)}.", ""]
    lines += [
        "## Restore time by method",
        "",
        "`bench/bench_runtime.py`: one environment + repo from a local store, cold (download, verify, "
        "unpack or mount) and warm (already in the node cache).",
        "",
    ]
    lines += restore_section(rt, img) if rt else ["bench_runtime.json absent."]
    lines += [
        "",
        "## Sandbox creation distribution",
        "",
        "`bench/bench_sandbox.py`: in-process creation of a sandbox over restored layers (overlay; "
        "baseline: a full copy of the layers).",
        "",
    ]
    lines += creation_section(sb, img) if sb else ["bench_sandbox.json absent."]
    ops = load(a.data / "bench_sandbox_ops.json")
    lines += [
        "",
        "## Sandbox operations",
        "",
        "`bench/bench_sandbox_ops.py`: in-process sandbox with every hardening feature on (default limits, "
        "seccomp, ptrace off), operation by operation, against the bubblewrap one-shot "
        "(`bwrap --ro-bind / / --dev /dev --proc /proc --unshare-all --die-with-parent true`) of the same "
        "run.",
        "",
    ]
    lines += (
        ops_section(ops)
        if ops
        else [
            "bench_sandbox_ops.json absent (`.venv/bin/python bench/bench_sandbox_ops.py --json "
            "results/bench/bench_sandbox_ops.json`)."
        ]
    )
    lines += [
        "",
        "## Concurrency curves",
        "",
        "`bench/bench_runtime.py` (concurrency part): N task requests for N distinct environments at once, "
        "with and without the node's I/O budget.",
        "",
    ]
    lines += concurrency_section(rt, sb, img) if rt else ["bench_runtime.json absent."]
    lines += [
        "",
        "## Planning time vs task count",
        "",
        "`bench/bench_pipeline.py` (synthetic SWE-smith-shaped task sets over the real catalog) and "
        "`bench/bench_scale.py` (`--json`, one file per `--tasks`).",
        "",
    ]
    lines += planning_section(pipe, scales, img)
    lines += [
        "",
        "## The bundled main job",
        "",
        "`bench/bench_pipeline.py --skip-planning --main-job [--main-job-baseline REF]`: `snakemake --cores 2` "
        "on a fresh clone, CPU seconds of snakemake and all its children, per command and per step "
        "(target: at most 60 CPU s).",
        "",
    ]
    lines += (
        [table(pipe["main_job"]["headers"], pipe["main_job"]["rows"])]
        if pipe and pipe.get("main_job")
        else ["No main-job data (bench_pipeline.json without `main_job`: run it with --main-job)."]
    )
    if pipe and pipe.get("main_job_profile"):
        lines += [
            "",
            "Where that CPU goes, by process (`--main-job-profile`: kernel process accounting, grouped by the "
            "process's, its parent's and grandparent's command names; CPU s and process counts):",
            "",
            table(pipe["main_job_profile"]["headers"], pipe["main_job_profile"]["rows"]),
        ]
    lines += [
        "",
        "## CLI start-up",
        "",
        "`bench/bench_cli.py`: whole `minisandbox` processes over a warm node cache; ratios to bubblewrap "
        "one-shot and `python -c pass` from the same run (CPU ratios are the comparable ones on a busy "
        "machine).",
        "",
    ]
    lines += (
        cli_section(cli)
        if cli
        else ["bench_cli.json absent (`.venv/bin/python bench/bench_cli.py --json results/bench/bench_cli.json`)."]
    )
    lines += [
        "",
        "## Cold fetch and publish against object-store latency",
        "",
        "`bench/bench_fetch.py`: a chunked image published to and fetched from `moto_server` through "
        "`tests/fixtures/latency_proxy.py`, against the same bytes as one object in the same run.",
        "",
    ]
    lines += (
        fetch_section(fetch)
        if fetch
        else [
            "bench_fetch.json absent (`.venv/bin/python bench/bench_fetch.py --json results/bench/bench_fetch.json`)."
        ]
    )
    checks = load(a.data / "bench_eval_checks.json")
    lines += [
        "",
        "## Grading: cost of the trust-boundary checks",
        "",
        "`bench/bench_eval.py --checks`: seconds per gold-patch evaluation (host venv) with the graded "
        "state and the results plugin's end-of-test checks and audit hooks, against the same plugin with "
        "its checks off, alternated in the same run.",
        "",
    ]
    lines += (
        checks_section(checks)
        if checks
        else [
            "bench_eval_checks.json absent (`.venv/bin/python bench/bench_eval.py --checks --json "
            "results/bench/bench_eval_checks.json`)."
        ]
    )
    lines += ["", "## Store size by format", ""]
    lines += size_section(rt, dedup, img) if rt else ["bench_runtime.json absent."]
    a.out.write_text("\n".join(lines).rstrip() + "\n")
    print(f"wrote {a.out} and {len(list(img.glob('*.png')))} plot(s) in {img}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
