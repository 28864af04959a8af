"""The bundled task set built through a real Slurm (scripts/slurm-up.sh) with
profiles/slurm and published to object storage (moto_server on loopback): every
Snakemake job is submitted with sbatch and accounted by slurmdbd, and the jobs reach the
S3 endpoint through the standard AWS variables that Slurm passes on."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from minisandbox.node.sync import verify
from tests.fixtures.s3 import S3

pytestmark = [pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
TASKS = [ROOT / "config" / "bundled" / "tasks.jsonl", ROOT / "config" / "bundled" / "tasks_swebench.jsonl"]
CATALOG = ROOT / "config" / "catalog" / "bundled.yaml"


def _lines(cmd: list[str]) -> list[list[str]]:
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return [line.split("|") for line in out.splitlines() if line.strip()]


@pytest.mark.slurm
@pytest.mark.s3
@pytest.mark.root
def test_bundled_build_runs_under_slurm(slurm_cluster, s3: S3, tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    store = s3.url("cluster-store")
    started = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(time.time() - 60))
    cmd = [
        sys.executable, "-m", "snakemake", "--snakefile", str(ROOT / "Snakefile"), "--directory", str(run),
        "--profile", str(ROOT / "profiles" / "slurm"),
        # a test cluster answers at once: poll sooner than the profile's cluster-friendly defaults
        "--slurm-init-seconds-before-status-checks", "5", "--seconds-between-status-checks", "5",
        "--latency-wait", "10",
        "--config", "tasks=" + ",".join(map(str, TASKS)), f"catalog={CATALOG}", f"store={store}",
        "workdir=work", "validate=false",
    ]
    proc = subprocess.run(cmd, cwd=run, capture_output=True, text=True, timeout=3000)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-6000:]

    run_id = re.search(r"SLURM run ID: (\S+)", log).group(1)
    submitted = set(re.findall(r"has been submitted with SLURM jobid (\d+)", log))
    assert submitted, "no job was submitted to Slurm"
    # grouping: one Slurm job carries several rules (the repo and env jobs of up to 4 sources)
    n_rules = sum(1 for _ in re.finditer(r"^(?:\[.*\] )?rule (repo|env):", proc.stdout, re.M))
    assert len(submitted) < n_rules or n_rules == 0, (len(submitted), n_rules)

    # slurmdbd's accounting: every submitted job ran on the node and completed with exit 0
    acct = {row[0]: row for row in _lines(["sacct", "-X", "-n", "-P", "-S", started, "--name", run_id,
                                           "-o", "JobID,JobName,State,ExitCode,NodeList"])}
    assert set(acct) == submitted, (acct, submitted)
    for job_id, (_, name, state, exit_code, node) in acct.items():
        assert (name, state, exit_code, node) == (run_id, "COMPLETED", "0:0", slurm_cluster.node), acct[job_id]
    # slurmctld still lists them (MinJobAge=600), the way the profile's squeue fallback sees them
    queue = {row[0]: row[1] for row in _lines(["squeue", "-h", "-t", "all", "-n", run_id, "-o", "%i|%T"])}
    assert set(queue) == submitted and set(queue.values()) == {"COMPLETED"}, queue

    # and the result is a complete, verified store
    catalog = json.loads(s3.fs().cat_file(f"{s3.bucket}/cluster-store/index/catalog.json"))
    counts = catalog["counts"]
    assert counts["tasks"] > 0 and counts["tasks_ready"] == counts["tasks"], counts
    assert counts["envs_failed"] == 0 and counts["repos_failed"] == 0, counts
    report = verify(store)
    assert report.ok, [p.line for p in report.problems]
    assert report.artifacts == counts["envs_ok"] + counts["repos_ok"]

    # a rerun with nothing changed submits nothing
    again = subprocess.run(cmd, cwd=run, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "has been submitted with SLURM jobid" not in again.stdout + again.stderr


@pytest.mark.parametrize("profile", ["slurm", "local"])
def test_profiles_plan_the_bundled_set(profile: str, tmp_path: Path) -> None:
    """Both profiles parse against the real workflow; the Slurm one groups the bundled
    set's 3 sources into one build job and its 4 environments into one validation job
    (Snakemake's own dry-run grouping), the local one does not group."""
    proc = subprocess.run(
        [sys.executable, "-m", "snakemake", "--snakefile", str(ROOT / "Snakefile"), "--directory", str(tmp_path),
         "-n", "--profile", str(ROOT / "profiles" / profile),
         "--config", "tasks=" + ",".join(map(str, TASKS)), f"catalog={CATALOG}", "store=store", "workdir=work"],
        cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    groups = re.findall(r"Group job (\S+)", proc.stdout + proc.stderr)
    assert sorted(groups) == (["build", "validate"] if profile == "slurm" else []), groups
