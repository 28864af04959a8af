"""The bundled task set built through a real Slurm (scripts/slurm-up.sh) with the README's
literal `snakemake --profile slurm -j 500` (the profile installed under its bare name by
scripts/install-profiles.sh, the workflow profile workflow/profiles/default applied) and published
to object storage (moto_server on loopback): every Snakemake job is submitted with sbatch
and accounted by slurmdbd, and the jobs reach the S3 endpoint through the standard AWS
variables that Slurm passes on."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from minisandbox.node.sync import verify
from tests.fixtures.s3 import S3

pytestmark = [pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
TASKS = [ROOT / "config" / "bundled" / "tasks.jsonl", ROOT / "config" / "bundled" / "tasks_swebench.jsonl"]
CATALOG = ROOT / "config" / "catalog" / "bundled.yaml"


def _literal_project(tmp_path: Path, store: str) -> tuple[Path, dict[str, str]]:
    """A checkout-like directory (workflow/ with its Snakefile, the workflow profile) whose
    config/config.yaml says what this test builds, and an environment whose user config
    dir has the `slurm` profile installed by scripts/install-profiles.sh: there the README's
    literal `snakemake --profile slurm -j 500` runs as a user would run it."""
    proj = tmp_path / "checkout"
    proj.mkdir()
    shutil.copytree(ROOT / "workflow", proj / "workflow")
    (proj / "config").mkdir()
    cfg = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    cfg.update(tasks=[str(t) for t in TASKS], catalog=[str(CATALOG)], store=store, workdir="work", validate=False)
    (proj / "config" / "config.yaml").write_text(yaml.safe_dump(cfg))
    # The workflow profile (loaded automatically, wins over --profile): ours, plus faster
    # polling for a test cluster that answers at once -- the documented way to override.
    wf = yaml.safe_load((ROOT / "workflow" / "profiles" / "default" / "config.yaml").read_text())
    wf.update({"slurm-init-seconds-before-status-checks": 5, "seconds-between-status-checks": 5, "latency-wait": 10})
    (proj / "workflow" / "profiles" / "default").mkdir(parents=True, exist_ok=True)  # copied above: replaced
    (proj / "workflow" / "profiles" / "default" / "config.yaml").write_text(yaml.safe_dump(wf))
    xdg = tmp_path / "xdg"
    env = {
        **os.environ,
        "XDG_CONFIG_HOME": str(xdg),
        "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""),
    }
    inst = subprocess.run(
        ["bash", str(ROOT / "scripts" / "install-profiles.sh")], capture_output=True, text=True, env=env, timeout=60
    )
    assert inst.returncode == 0, inst.stderr
    assert os.readlink(xdg / "snakemake" / "slurm") == str(ROOT / "profiles" / "slurm"), inst.stdout
    return proj, env


def _lines(cmd: list[str]) -> list[list[str]]:
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return [line.split("|") for line in out.splitlines() if line.strip()]


@pytest.mark.slurm
@pytest.mark.s3
@pytest.mark.root
def test_bundled_build_runs_under_slurm(slurm_cluster, s3: S3, tmp_path: Path) -> None:
    store = s3.url("cluster-store")
    run, env = _literal_project(tmp_path, store)
    started = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(time.time() - 60))
    cmd = ["snakemake", "--profile", "slurm", "-j", "500"]  # literally, from the checkout's root
    proc = subprocess.run(cmd, cwd=run, env=env, capture_output=True, text=True, timeout=3000)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-6000:]
    assert "Using profiles slurm and workflow specific profile workflow/profiles/default" in log, log[:2000]

    run_id = re.search(r"SLURM run ID: (\S+)", log).group(1)
    submitted = set(re.findall(r"has been submitted with SLURM jobid (\d+)", log))
    assert submitted, "no job was submitted to Slurm"
    # grouping: one Slurm job carries several rules (the repo and env jobs of up to 4 sources)
    n_rules = sum(1 for _ in re.finditer(r"^(?:\[.*\] )?rule (repo|env):", proc.stdout, re.M))
    assert len(submitted) < n_rules or n_rules == 0, (len(submitted), n_rules)

    # slurmdbd's accounting: every submitted job ran on the node and completed with exit 0
    acct = {
        row[0]: row
        for row in _lines(
            ["sacct", "-X", "-n", "-P", "-S", started, "--name", run_id, "-o", "JobID,JobName,State,ExitCode,NodeList"]
        )
    }
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
    assert counts["envs_failed"] == 0 and counts["repos_failed"] == 0 and counts["interps_failed"] == 0, counts
    report = verify(store)
    assert report.ok, [p.line for p in report.problems]
    # every environment, repository and interpreter layer (one per interpreter build)
    assert counts["interps_ok"] >= 1 and set(catalog["interps"]) == {
        e["manifest"]["interpreter"]["key"] for e in catalog["envs"].values()
    }, catalog["interps"]
    assert report.artifacts == counts["envs_ok"] + counts["repos_ok"] + counts["interps_ok"]

    # a rerun with nothing changed submits nothing
    again = subprocess.run(cmd, cwd=run, env=env, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "has been submitted with SLURM jobid" not in again.stdout + again.stderr


@pytest.mark.parametrize("profile", ["slurm", "local"])
def test_profiles_plan_the_bundled_set(profile: str, tmp_path: Path) -> None:
    """Both profiles parse against the real workflow; the Slurm one packs the bundled
    set's 3 build components into 1 build job of at most 4 (Snakemake's own dry-run
    grouping): each environment's job publishes the one repo only it uses and validates its
    tasks, and `parse`'s job (validation on by default) waits for the 2 SWE-bench snapshots
    its tasks start from, so those are in its component. The local profile does not group."""
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "snakemake",
            "--snakefile",
            str(ROOT / "workflow" / "Snakefile"),
            "--directory",
            str(tmp_path),
            "-n",
            "--profile",
            str(ROOT / "profiles" / profile),
            "--config",
            "tasks=" + ",".join(map(str, TASKS)),
            f"catalog={CATALOG}",
            "store=store",
            "workdir=work",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    groups = re.findall(r"Group job (\S+)", proc.stdout + proc.stderr)
    assert sorted(groups) == (["build"] if profile == "slurm" else []), groups
