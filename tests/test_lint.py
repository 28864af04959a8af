"""`ruff check` and `ruff format --check` over the code (configuration: pyproject.toml, [tool.ruff]). CI runs the test
suite, so this is how CI runs the linter and the formatter; ruff is in the `test` extra."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PATHS = ["src", "tests", "bench", "scripts", "examples"]


def test_ruff_check_passes() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--no-cache", "--output-format", "concise", *PATHS],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert "No module named ruff" not in proc.stderr, "ruff is in the test extra: uv sync --all-extras"
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]


def test_ruff_check_fails_on_a_finding(tmp_path: Path) -> None:
    """The same command with the project's configuration reports a real finding."""
    bad = tmp_path / "bad.py"
    bad.write_text("import os\n")
    proc = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--no-cache", "--config", str(ROOT / "pyproject.toml"), str(bad)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1 and "F401" in proc.stdout


def test_ruff_format_leaves_the_tree_unchanged() -> None:
    """The tree is as `ruff format` writes it (run `ruff format` before committing)."""
    proc = subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--check", "--no-cache", *PATHS],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
