"""The workflow profile exists once (workflow/profiles/default) and Snakemake finds it for
every way of running the workflow: `snakemake` from the checkout root, `snakemake
--snakefile workflow/Snakefile`, and `-s /path/to/workflow/Snakefile` from another
directory. Snakemake 9 looks for `profiles/default` in the working directory, then next to
the Snakefile; the check reads the per-rule resources and the scheduler Snakemake's own
argument parsing took from the profile (no workflow run)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
PROFILE = ROOT / "workflow" / "profiles" / "default" / "config.yaml"

PROBE = """
import json, sys
from snakemake.cli import parse_args
_, args = parse_args(sys.argv[1:])
print(json.dumps({rule: sorted(res) for rule, res in (args.set_resources or {}).items()}))
print(json.dumps(args.scheduler))
"""


def test_one_default_workflow_profile() -> None:
    assert PROFILE.is_file() and not PROFILE.parent.is_symlink()
    assert not (ROOT / "profiles" / "default").exists(), "a second copy would drift from this one"


@pytest.mark.parametrize("how", ["checkout root", "--snakefile from the root", "-s from elsewhere"])
def test_snakemake_finds_the_workflow_profile(how: str, tmp_path: Path) -> None:
    pytest.importorskip("snakemake")
    argv, cwd = {
        "checkout root": ([], ROOT),
        "--snakefile from the root": (["--snakefile", "workflow/Snakefile"], ROOT),
        "-s from elsewhere": (["-s", str(ROOT / "workflow" / "Snakefile")], tmp_path),
    }[how]
    out = subprocess.run(
        [sys.executable, "-c", PROBE, "-n", "--cores", "1", *argv], cwd=cwd, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    want = {rule: sorted(res) for rule, res in yaml.safe_load(PROFILE.read_text())["set-resources"].items()}
    assert json.loads(out.stdout.splitlines()[-2]) == want
    assert json.loads(out.stdout.splitlines()[-1]) == yaml.safe_load(PROFILE.read_text())["scheduler"] == "greedy"
    assert "workflow specific profile" in out.stderr and "workflow/profiles/default" in out.stderr
