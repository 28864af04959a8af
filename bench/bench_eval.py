#!/usr/bin/env python3
"""Grading benchmark: seconds per evaluation of a gold patch, in a fresh
sandbox (the production path) vs a plain venv on the host (the baseline, measured in the
same run on the same tasks), and the validation cost per task.

Needs a published store of the bundled set (`snakemake --cores 2` in the checkout, or
pass --store/--catalog/--tasks). Host venvs are built once under --work (not timed).

With `--checks`: the cost of the grader's trust-boundary checks (docs/grading.md, "Trust
boundary"): seconds per gold evaluation with the checks (graded state computed by the
controller, the results plugin's end-of-test checks and audit hooks) and without them
(the same plugin with its checks off, no graded state), one task per bundled repo, in a
plain venv over this interpreter (its pytest), built from the committed bundled sources:
needs no store. `--baseline-plugin FILE` makes the baseline arm run the same checks with
another results-plugin file (the cost of a plugin change, both measured in one run).

Usage: .venv/bin/python bench/bench_eval.py [--store results/store] [--repeats 3]
       .venv/bin/python bench/bench_eval.py --checks [--repeats 5] [--json OUT]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from tabulate import tabulate

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))  # tests/fixtures/hostvenv.py: the host-venv executor (tests and benches only)

from minisandbox.catalog import Catalog, spec_for
from minisandbox.grading.evaluate import SandboxExecutor, evaluate
from minisandbox.grading.validate import gold_run
from minisandbox.node.runtime import prepare
from minisandbox.paths import REPO_PATH
from minisandbox.records import read_tasks
from tests.fixtures.hostvenv import make_host_venv


def _children_cpu() -> float:
    """CPU seconds of this process's finished children (the test commands): steadier than
    wall time on a shared machine."""
    import resource

    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _runner_venv(path: Path, sources: list[Path]) -> Path:
    """A venv over this interpreter that sees its site-packages (pytest) and the repos'
    sources (`sources`: what the task environments install), with a `pytest` command
    (the bundled specs call it)."""
    import site
    import subprocess

    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(path)], check=True)
    py = path / "bin" / "python"
    purelib = subprocess.run(
        [str(py), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    dirs = [p for p in site.getsitepackages() if Path(p).is_dir()] + [str(p) for p in sources]
    (Path(purelib) / "_bench_runner_site.pth").write_text("".join(f"{d}\n" for d in dirs))
    (path / "bin" / "pytest").write_text(f"#!{py}\nimport sys\nimport pytest\nsys.exit(pytest.main())\n")
    (path / "bin" / "pytest").chmod(0o755)
    return path


def bench_checks(a: argparse.Namespace) -> int:
    """Gold evaluations with and without the trust-boundary checks (module docstring)."""
    import json
    from unittest import mock

    from minisandbox.grading import evaluate as evaluate_mod
    from minisandbox.grading import results as results_mod
    from minisandbox.grading.gradedstate import GradedState, graded_state
    from minisandbox.pipeline.bundled import materialize
    from tests.fixtures import hostvenv as hostvenv_mod
    from tests.fixtures.hostvenv import HostVenvExecutor

    catalog = Catalog.load(a.catalog)
    work = Path(a.work or tempfile.mkdtemp(prefix="bench-checks-"))
    repos = materialize(work / "repos")
    recs, seen = [], set()
    for rec in read_tasks(a.tasks[:1]).records:  # SWE-smith bundled: one task per repo
        if rec.repo not in seen:
            seen.add(rec.repo)
            recs.append(rec)

    def repo_name(rec) -> str:
        return rec.repo.split("/", 1)[-1].rsplit(".", 1)[0]

    venv = _runner_venv(work / "venv", [work / f"testbed-{repo_name(r)}" for r in recs])
    baseline_dir = None
    if a.baseline_plugin:  # "without" = checks on, with this plugin file (a plugin change's cost)
        baseline_dir = work / "baseline-plugin"
        baseline_dir.mkdir(exist_ok=True)
        shutil.copyfile(a.baseline_plugin, baseline_dir / f"{results_mod.RESULTS_PLUGIN}.py")

    class Unchecked(GradedState):
        def manifest(self, root: str) -> dict[str, object]:
            return {"root": root, "checks": False}

    def no_state(script, reference, tests):
        return Unchecked({})

    def xfail_everywhere(test_id: str) -> bool:
        return True

    rows, on_all, off_all, state_all, on_cpu, off_cpu = [], [], [], [], [], []
    for rec in recs:
        spec = spec_for(catalog, rec)
        name = repo_name(rec)
        host = HostVenvExecutor(snapshot=repos[name], venv=venv, testbed=work / f"testbed-{name}")
        patch, reverse = gold_run(rec)
        on_t, off_t, st_t, on_c, off_c = [], [], [], [], []
        for _ in range(a.repeats):
            for checks in (True, False):
                c0 = _children_cpu()
                t0 = time.perf_counter()
                if checks:
                    ev = evaluate(rec, spec, patch, host, reverse=reverse)
                elif baseline_dir is not None:  # the same checks, with the baseline plugin
                    with mock.patch.object(hostvenv_mod, "plugin_dir", lambda: baseline_dir):
                        ev = evaluate(rec, spec, patch, host, reverse=reverse)
                else:
                    with (
                        mock.patch.object(evaluate_mod, "graded_state", no_state),
                        mock.patch.object(GradedState, "xfail_marked", staticmethod(xfail_everywhere)),
                    ):
                        ev = evaluate(rec, spec, patch, host, reverse=reverse)
                (on_t if checks else off_t).append(time.perf_counter() - t0)
                (on_c if checks else off_c).append(_children_cpu() - c0)
                assert ev.resolved, (rec.instance_id, checks, ev.reason, ev.entry.get("suspicious"))
                ch = ev.entry["results_channel"]
                assert ch["present"] and ch["complete"], ch
            with host.open(rec) as env:
                script = evaluate_mod.plan_script(
                    rec, spec, patch, env.reference_dir, reverse=reverse, setup_task_state=True
                )
                t0 = time.perf_counter()
                graded_state(script, env.reference_dir, [*rec.fail_to_pass, *rec.pass_to_pass])
                st_t.append(time.perf_counter() - t0)
        on_all += on_t
        off_all += off_t
        state_all += st_t
        on_cpu += on_c
        off_cpu += off_c
        rows.append(
            [
                rec.instance_id[:48],
                ev.entry["results_channel"]["tests"],
                statistics.median(on_t),
                statistics.median(off_t),
                statistics.median(on_t) / statistics.median(off_t),
                1000 * statistics.median(st_t),
                statistics.median(on_c),
                statistics.median(off_c),
                statistics.median(on_c) / statistics.median(off_c),
            ]
        )
    rows.append(
        [
            "ALL (median)",
            "",
            statistics.median(on_all),
            statistics.median(off_all),
            statistics.median(on_all) / statistics.median(off_all),
            1000 * statistics.median(state_all),
            statistics.median(on_cpu),
            statistics.median(off_cpu),
            statistics.median(on_cpu) / statistics.median(off_cpu),
        ]
    )
    headers = [
        "task",
        "tests",
        "with checks s",
        "without s (baseline)",
        "ratio",
        "graded state ms",
        "with checks CPU s",
        "without CPU s",
        "CPU ratio",
    ]
    against = f"this plugin / {a.baseline_plugin}" if a.baseline_plugin else "checks on/off"
    print(f"gold-patch evaluation in a host venv, {a.repeats} repeats, {against} alternated")
    print(tabulate(rows, headers=headers, floatfmt=".3f"))
    if a.json:
        Path(a.json).write_text(json.dumps({"repeats": a.repeats, "headers": headers, "rows": rows}, indent=1))
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--store", default=str(ROOT / "results" / "store"))
    ap.add_argument("--catalog", nargs="+", default=[str(ROOT / "config" / "catalog" / "bundled.yaml")])
    ap.add_argument(
        "--tasks",
        nargs="+",
        default=[
            str(ROOT / "config" / "bundled" / "tasks.jsonl"),
            str(ROOT / "config" / "bundled" / "tasks_swebench.jsonl"),
        ],
    )
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--work", default=None, help="host venv dir (default: a temp dir)")
    ap.add_argument("--checks", action="store_true", help="cost of the trust-boundary checks (no store needed)")
    ap.add_argument("--json", default=None, help="with --checks: write the table here as JSON")
    ap.add_argument(
        "--baseline-plugin",
        default=None,
        help="with --checks: the baseline arm runs the checks with this results-plugin file instead of none "
        "(e.g. `git show main:src/minisandbox/grading/resultplugin.py > /tmp/old.py`)",
    )
    a = ap.parse_args()
    if a.checks:
        return bench_checks(a)
    catalog = Catalog.load(a.catalog)
    recs = read_tasks(a.tasks).records
    work = Path(a.work or tempfile.mkdtemp(prefix="bench-eval-"))
    sandbox = SandboxExecutor(store=a.store)
    hosts: dict[str, object] = {}
    rows = []
    box_all: list[float] = []
    host_all: list[float] = []
    for rec in recs:
        spec = spec_for(catalog, rec)
        with prepare(rec.instance_id, a.store) as pt:
            key = pt.task["env_key"]
            if key not in hosts:
                hosts[key] = make_host_venv(spec, pt.layers[REPO_PATH], work / key)
            host = hosts[key]
            host.snapshot = pt.layers[REPO_PATH]
        patch, reverse = gold_run(rec)
        box_t, host_t = [], []
        for _ in range(a.repeats):
            t0 = time.perf_counter()
            ev = evaluate(rec, spec, patch, sandbox, reverse=reverse)
            box_t.append(time.perf_counter() - t0)
            assert ev.resolved, (rec.instance_id, ev.reason)
            t0 = time.perf_counter()
            ev = evaluate(rec, spec, patch, host, reverse=reverse)
            host_t.append(time.perf_counter() - t0)
            assert ev.resolved, (rec.instance_id, ev.reason)
        box_all += box_t
        host_all += host_t
        rows.append(
            [
                rec.instance_id[:48],
                rec.format,
                statistics.median(box_t),
                statistics.median(host_t),
                statistics.median(box_t) / statistics.median(host_t),
            ]
        )
    rows.append(
        [
            "ALL (median)",
            "",
            statistics.median(box_all),
            statistics.median(host_all),
            statistics.median(box_all) / statistics.median(host_all),
        ]
    )
    print(f"gold-patch evaluation, {a.repeats} repeats per task, fresh environment each time")
    print(tabulate(rows, headers=["task", "format", "sandbox s", "host venv s (baseline)", "ratio"], floatfmt=".2f"))
    print(f"validation of one task = 2 evaluations per repeat: ~{2 * statistics.median(box_all):.1f} s in the sandbox")
    return 0


if __name__ == "__main__":
    sys.exit(main())
