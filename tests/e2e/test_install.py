"""A rollout node's install: the core package alone (`pip install .`, no extras) in a fresh
venv has no snakemake, pyarrow or uv, and still fetches a task from a published store,
runs a command in its sandbox and grades a prediction."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from minisandbox.grading.evalscript import reverse_patch
from minisandbox.records import read_tasks

pytestmark = [pytest.mark.slow, pytest.mark.root]

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def core_venv(tmp_path_factory) -> Path:
    """`uv venv` + `uv pip install <checkout>` (a regular, non-editable install)."""
    uv = shutil.which("uv")
    if uv is None:
        from minisandbox.tools import uv_bin

        uv = uv_bin()
    venv = tmp_path_factory.mktemp("core") / "venv"
    subprocess.run([uv, "venv", "--quiet", "--python", sys.executable, str(venv)], check=True, timeout=300)
    res = subprocess.run(
        [uv, "pip", "install", "--quiet", "--python", str(venv / "bin" / "python"), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    return venv


def test_core_install_leaves_out_the_workflow_tools(core_venv: Path) -> None:
    code = (
        "import importlib.util as u, json; print(json.dumps({m: u.find_spec(m) is not None for m in "
        "('minisandbox', 'tqdm', 'snakemake', 'pyarrow', 'uv', 'tabulate', 's3fs', 'moto')}))"
    )
    found = json.loads(
        subprocess.run(
            [str(core_venv / "bin" / "python"), "-c", code], capture_output=True, text=True, check=True, cwd="/"
        ).stdout
    )
    assert found == {
        "minisandbox": True,
        "tqdm": True,
        "snakemake": False,
        "pyarrow": False,
        "uv": False,
        "tabulate": False,
        "s3fs": False,
        "moto": False,
    }


@pytest.fixture
def core_cache(tmp_path: Path):
    """The node cache of the core install; image layers it mounted are unmounted after."""
    cache = tmp_path / "cache"
    yield cache
    from minisandbox.node.restore import is_mounted, unmount

    for layer in sorted((cache / "layers").glob("*")) if (cache / "layers").is_dir() else []:
        if is_mounted(layer):
            assert unmount(layer), f"{layer} is still busy"


def test_core_install_fetches_runs_and_grades(
    core_venv: Path, bundled_eval_store, core_cache: Path, tmp_path: Path
) -> None:
    if os.geteuid() != 0:
        pytest.skip("sandboxes as root")
    store = bundled_eval_store
    rec = next(r for r in read_tasks(store.tasks).records if r.format == "swesmith")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(MINISANDBOX_CACHE=str(core_cache), PATH=f"{core_venv / 'bin'}:{env.get('PATH', '')}")
    cli = str(core_venv / "bin" / "minisandbox")

    def run(*argv: str) -> subprocess.CompletedProcess:
        return subprocess.run([cli, *argv], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=1800)

    fetched = run("fetch", "--store", str(store.store), "--json", rec.instance_id)
    assert fetched.returncode == 0, fetched.stderr[-3000:]
    assert json.loads(fetched.stdout)[0]["downloaded"] is True

    ran = run(
        "run",
        "--store",
        str(store.store),
        rec.instance_id,
        "--",
        "bash",
        "-c",
        "cd /testbed && git status --porcelain | wc -l && python -c 'import sys; print(sys.prefix)'",
    )
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert ran.stdout.split() == ["0", "/opt/miniconda3/envs/testbed"]

    preds = tmp_path / "preds.jsonl"
    preds.write_text(
        json.dumps(
            {"instance_id": rec.instance_id, "model_patch": reverse_patch(rec.patch), "model_name_or_path": "gold"}
        )
        + "\n"
    )
    graded = run(
        "eval",
        "--store",
        str(store.store),
        "--predictions",
        str(preds),
        "--catalog",
        str(store.catalog),
        "--out",
        str(tmp_path / "eval"),
        "--json",
    )
    assert graded.returncode == 0, graded.stderr[-3000:]
    summary = json.loads(graded.stdout)
    assert summary["resolved_ids"] == [rec.instance_id]
