"""The default store follows the user: ./results/store under the current directory unless
--store, MINISANDBOX_STORE or the workflow config in the current directory say otherwise,
also for a non-editable install (never a path inside site-packages)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from minisandbox.errors import MinisandboxError
from minisandbox.paths import default_store

ROOT = Path(__file__).resolve().parents[1]


def test_default_store_is_under_the_current_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MINISANDBOX_STORE", raising=False)
    monkeypatch.chdir(tmp_path)
    assert default_store() == str(tmp_path / "results" / "store")


def test_environment_and_workflow_config_win(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MINISANDBOX_STORE", raising=False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "config.yaml").write_text("tasks: t.jsonl\nstore: shared/store\n")
    assert default_store() == str(tmp_path / "shared" / "store")
    (tmp_path / "config" / "config.yaml").write_text("store: s3://bucket/prefix\n")
    assert default_store() == "s3://bucket/prefix"
    monkeypatch.setenv("MINISANDBOX_STORE", "s3://other/x")
    assert default_store() == "s3://other/x"


def test_bad_workflow_config_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MINISANDBOX_STORE", raising=False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "config.yaml").write_text("store: [1, 2\n")
    with pytest.raises(MinisandboxError, match=r"config/config.yaml.*store"):
        default_store()
    (tmp_path / "config" / "config.yaml").write_text("store: 7\n")
    with pytest.raises(MinisandboxError, match=r"config/config.yaml: field store"):
        default_store()


def test_cli_default_from_another_directory(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "MINISANDBOX_STORE"}
    env["PYTHONPATH"] = str(ROOT / "src")
    proc = subprocess.run(
        [sys.executable, "-m", "minisandbox.cli", "fetch", "no__such.task"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=120,
    )
    assert proc.returncode != 0
    assert str(tmp_path / "results" / "store") in proc.stderr, proc.stderr


@pytest.mark.slow
def test_non_editable_install(tmp_path: Path) -> None:
    """A wheel install (what `pip install minisandbox` gives) defaults to the user's
    directory, not to a path computed from site-packages."""
    from minisandbox.tools import uv_bin

    venv = tmp_path / "venv"
    env = {k: v for k, v in os.environ.items() if k not in ("MINISANDBOX_STORE", "VIRTUAL_ENV", "PYTHONPATH")}
    subprocess.run([uv_bin(), "venv", "-q", "--python", sys.executable, str(venv)], check=True, env=env, timeout=300)
    src = tmp_path / "src-copy"
    shutil.copytree(
        ROOT,
        src,
        ignore=shutil.ignore_patterns(
            ".git", ".venv", "results", "*.egg-info", "build", "__pycache__", ".snakemake", "tests", "bench"
        ),
    )
    proc = subprocess.run(
        [uv_bin(), "pip", "install", "-q", "--no-deps", "--python", str(venv / "bin" / "python"), str(src)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    if proc.returncode != 0 and ("Failed to fetch" in proc.stderr or "connect" in proc.stderr.lower()):
        pytest.skip(f"cannot build the wheel here (no package index): {proc.stderr.strip().splitlines()[-1]}")
    assert proc.returncode == 0, proc.stderr
    shutil.rmtree(src)
    work = tmp_path / "elsewhere"
    work.mkdir()
    out = subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-c",
            "import minisandbox, minisandbox.paths as p; print(minisandbox.__file__); print(p.default_store())",
        ],
        capture_output=True,
        text=True,
        cwd=work,
        env=env,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    installed, store = out.stdout.split()
    assert "site-packages" in installed and not installed.startswith(str(ROOT))
    assert store == str(work / "results" / "store")
