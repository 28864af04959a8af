"""Install footprint: the core package imports and runs without the workflow's tools, and
the conda environment file stays in step with pyproject.toml."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import yaml
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]

#: Packages a rollout node must not need (slim installs: the core dependencies).
NOT_IN_CORE = ("snakemake", "pyarrow", "uv", "tabulate", "s3fs", "moto", "jsonschema")


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def _names(reqs: list[str]) -> set[str]:
    return {Requirement(r).name.lower() for r in reqs}


def test_core_dependencies_leave_out_workflow_and_test_tools() -> None:
    project = _pyproject()["project"]
    core = _names(project["dependencies"])
    assert not core & set(NOT_IN_CORE), core & set(NOT_IN_CORE)
    extras = project["optional-dependencies"]
    assert _names(extras["s3"]) == {"s3fs"}
    assert {"snakemake", "uv", "pyarrow"} <= _names(extras["pipeline"])
    assert "moto" in _names(extras["test"])
    assert "tabulate" in _names(extras["bench"])
    all_extras = Requirement(extras["all"][0]).extras
    assert all_extras == set(extras) - {"all"}


def test_conda_env_file_names_published_packages_matching_pyproject() -> None:
    env = yaml.safe_load((ROOT / "envs" / "minisandbox.yaml").read_text())
    assert env["name"] == "minisandbox"
    conda = [d for d in env["dependencies"] if isinstance(d, str)]
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    assert "python=3.11" in conda and "pip" in conda
    # No path to the checkout (Snakemake copies env files; a relative path breaks there).
    for line in pip:
        assert not line.startswith(("-e", ".", "/", "file:")), line
        Requirement(line)  # a plain requirement, parseable
    project = _pyproject()["project"]
    extras = project["optional-dependencies"]
    want = {str(Requirement(r)) for r in project["dependencies"] + extras["pipeline"] + extras["s3"] + extras["slurm"]}
    assert {str(Requirement(r)) for r in pip} == want


def test_core_modules_import_without_workflow_tools(tmp_path: Path) -> None:
    """Every module outside the workflow's steps imports, and the CLI answers --help, with
    snakemake, pyarrow, uv, tabulate, s3fs and moto made unimportable."""
    blocker = tmp_path / "sitecustomize.py"
    blocker.write_text(
        "import sys\n"
        "class _Block:\n"
        f"    names = {NOT_IN_CORE!r}\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in self.names:\n"
        "            raise ModuleNotFoundError(f'blocked for this test: {name}')\n"
        "        return None\n"
        "sys.meta_path.insert(0, _Block())\n"
    )
    code = (
        "import importlib, pkgutil, minisandbox\n"
        "skip = ('minisandbox.integrations',)\n"
        "for m in pkgutil.walk_packages(minisandbox.__path__, 'minisandbox.'):\n"
        "    if not m.name.startswith(skip) and not m.name.endswith('__main__'):\n"
        "        importlib.import_module(m.name)\n"
        "from minisandbox.cli import main\n"
        "raise SystemExit(main(['--help']))\n"
    )
    env = dict(os.environ, PYTHONPATH=f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "usage: minisandbox" in res.stdout


def test_uv_missing_is_one_line_naming_the_extra(monkeypatch, tmp_path: Path) -> None:
    import pytest

    from minisandbox.errors import MinisandboxError
    from minisandbox.tools import uv_bin

    monkeypatch.setitem(sys.modules, "uv", None)  # `import uv` raises ImportError
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(MinisandboxError, match=r"^uv is not installed: .*minisandbox\[pipeline\]"):
        uv_bin()
    (tmp_path / "uv").write_text("#!/bin/sh\n")
    (tmp_path / "uv").chmod(0o755)
    assert uv_bin() == str(tmp_path / "uv")  # a uv on PATH serves too


def test_parquet_without_pyarrow_is_an_invalid_file_naming_the_extra(monkeypatch, tmp_path: Path) -> None:
    from minisandbox.records import read_tasks

    monkeypatch.setitem(sys.modules, "pyarrow", None)
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    path = tmp_path / "tasks.parquet"
    path.write_bytes(b"PAR1")
    ing = read_tasks([path])
    assert ing.records == [] and len(ing.invalid) == 1
    bad = ing.invalid[0]
    assert (bad.file, bad.line, bad.field) == (str(path), 0, "<file>")
    assert "pip install 'minisandbox[parquet]'" in bad.error
