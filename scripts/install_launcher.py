"""Write scripts/launcher.py as an environment's `minisandbox` command (scripts/setup.sh
runs this after `uv sync`, over the console script uv made; launcher.py says why).

    PYTHON scripts/install_launcher.py PYTHON DEST

PYTHON: the environment's interpreter (e.g. .venv/bin/python); DEST: the command to write
(e.g. .venv/bin/minisandbox). The entries `site` adds to sys.path are measured from PYTHON
itself (with and without `site`, environment variables ignored) and written into the copy.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

LAUNCHER = Path(__file__).resolve().with_name("launcher.py")
PRINT_PATH = "import json, sys; print(json.dumps(sys.path))"


def site_paths(python: str) -> list[str]:
    """The sys.path entries `site` adds for `python`, in order."""

    def path(*flags: str) -> list[str]:
        out = subprocess.run([python, *flags, "-c", PRINT_PATH], capture_output=True, text=True, check=True, cwd="/")
        return json.loads(out.stdout)

    without = set(path("-E", "-S"))
    return [p for p in path("-E") if p not in without]


def render(python: str, paths: list[str]) -> str:
    """launcher.py with `python -S` as its interpreter and `paths` as its SITE_PATHS."""
    head, _doc, body = LAUNCHER.read_text().split('"""', 2)  # its docstring: compiled on every call, needed by none
    lines = (head + "# scripts/launcher.py (its docstring says why)" + body).splitlines(keepends=True)
    lines[0] = f"#!{python} -S\n"
    marker = "SITE_PATHS: list[str] = []\n"
    if marker not in lines:
        raise SystemExit(f"install_launcher: {LAUNCHER} has no line {marker.strip()!r} to fill in; restore it")
    lines[lines.index(marker)] = f"SITE_PATHS: list[str] = {paths!r}\n"
    return "".join(lines)


def install(python: str, dest: str) -> None:
    """Write the launcher for `python` to `dest` (mode 0755; replaced in one rename)."""
    tmp = f"{dest}.tmp-{os.getpid()}"
    with open(tmp, "w") as fh:
        fh.write(render(python, site_paths(python)))
    os.chmod(tmp, 0o755)
    os.replace(tmp, dest)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    install(sys.argv[1], sys.argv[2])
