"""pipeline/bytecode.py: the same source gives the same .pyc whatever else the environment holds."""

from __future__ import annotations

import importlib.util
import os
import struct
import subprocess
import sys
from pathlib import Path

from minisandbox.pipeline import bytecode

#: A frozenset constant (marshalled in hash order) and names shared with the other module
#: (interned strings whose reference counts differ with what was compiled before).
MOD = """
def kind(x):
    if x in {"alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"}:
        return "greek"
    return "other"

NAMES = ("alpha", "beta", "shared_name", "another_shared_name")
"""
OTHER = "shared_name = 1\nanother_shared_name = shared_name\nalpha = beta = 2\n"


def _compile(root: Path, seed: str) -> None:
    script = root.parent / f"{root.name}-{bytecode.SCRIPT_NAME}"
    script.write_text(bytecode.SCRIPT)
    env = {**os.environ, "PYTHONHASHSEED": seed}
    out = subprocess.run(
        [sys.executable, "-S", str(script), "2", str(root)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert "byte-compiled" in out.stdout


def _pyc(source: Path) -> bytes:
    return Path(importlib.util.cache_from_source(str(source))).read_bytes()


def _env(root: Path, others: int) -> bytes:
    """Populate `root` (the one canonical venv path, as in every build) with pkg/mod.py and
    `others` more modules, byte-compile it, and return mod.py's .pyc."""
    import shutil

    shutil.rmtree(root, ignore_errors=True)
    pkg = root / "pkg"
    pkg.mkdir(parents=True)
    (pkg / "mod.py").write_text(MOD)
    os.utime(pkg / "mod.py", (1_600_000_000, 1_600_000_000))
    for n in range(others):  # compiled before and beside mod.py
        (pkg / f"aaa{n}.py").write_text(OTHER)
    _compile(root, "0")
    return _pyc(pkg / "mod.py")


def test_same_source_same_pyc_in_different_environments(tmp_path: Path) -> None:
    root = tmp_path / "venv"
    assert _env(root, 0) == _env(root, 20)
    assert "PYTHONHASHSEED=0 python -S" in bytecode.command("/opt/b", ["/opt/venv"])


def test_pycs_are_valid_timestamp_pycs_and_bad_files_are_skipped(tmp_path: Path) -> None:
    root = tmp_path / "venv"
    (root / "lib").mkdir(parents=True)
    good = root / "lib" / "good.py"
    good.write_text(MOD)
    (root / "lib" / "broken.py").write_text("def broken(:\n")
    (root / "lib" / "link.py").symlink_to(good)
    _compile(root, "0")
    data = _pyc(good)
    flags, mtime, size = struct.unpack("<III", data[4:16])
    assert data[:4] == importlib.util.MAGIC_NUMBER
    assert flags == 0 and mtime == int(good.stat().st_mtime) and size == good.stat().st_size
    assert not Path(importlib.util.cache_from_source(str(root / "lib" / "broken.py"))).exists()
    assert not Path(importlib.util.cache_from_source(str(root / "lib" / "link.py"))).exists()
