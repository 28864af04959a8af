"""Resolve an environment's dependency input to a fully pinned lock with uv.

Exact pin lists that are complete freezes (the SWE-smith official exports, the bundled
specs) are already a lock: they are kept as they are and installed with --no-deps,
because re-resolving a frozen environment can only move it away from the reference
image. SWE-bench pin lists are partial (e.g. only `tox==...` for sphinx), so they and
anything else go through `uv pip compile` for the spec's interpreter version.
"""

from __future__ import annotations

import hashlib
import platform
import re
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from minisandbox.catalog import EnvSpec
from minisandbox.pipeline.stage import one_line
from minisandbox.tools import uv_bin
from minisandbox.errors import MinisandboxError

_EXACT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(\[[A-Za-z0-9,._-]+\])?==[A-Za-z0-9.+!_-]+$")


class ResolveError(MinisandboxError, RuntimeError):
    pass


@dataclass(frozen=True)
class Lock:
    text: str  # requirements.txt format, one pin per line
    no_deps: bool  # install exactly these, without resolving dependencies

    @property
    def sha256(self) -> str:
        return hashlib.sha256(f"{self.no_deps}\n{self.text}".encode()).hexdigest()


def is_exact(requirements: tuple[str, ...] | list[str]) -> bool:
    return all(_EXACT.match(r.strip()) for r in requirements)


def resolve(spec: EnvSpec, repo_dir: Path, log: Path) -> Lock:
    """Lock for `spec`; `repo_dir` is the build commit's snapshot (for requirements files)."""
    reqs = [r.strip() for r in spec.requirements if r.strip()]
    if spec.kind != "swebench" and not spec.requirements_files and is_exact(reqs):
        text = "".join(f"{r}\n" for r in sorted(reqs, key=str.lower))
        log.write_text(f"{len(reqs)} exact pins: kept as the lock (installed with --no-deps)\n")
        return Lock(text=text, no_deps=True)
    with tempfile.TemporaryDirectory(prefix="msb-resolve-") as tmp:
        req_in = Path(tmp) / "requirements.in"
        lines = list(reqs)
        for rel in spec.requirements_files:
            path = repo_dir / rel
            if not path.is_file():
                raise ResolveError(f"requirements file {rel} not found in the snapshot of {spec.name}")
            lines.append(f"-r {path}")
        req_in.write_text("\n".join(lines) + "\n")
        out = Path(tmp) / "lock.txt"
        cmd = [
            uv_bin(), "pip", "compile", str(req_in), "-o", str(out), "--quiet",
            "--python-version", spec.python, "--python-platform", f"{platform.machine()}-manylinux_2_28",
            "--no-header", "--no-annotate",
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        log.write_text(f"$ {' '.join(cmd)}\n{proc.stdout}{proc.stderr}")
        if proc.returncode != 0:
            raise ResolveError(f"uv could not resolve {spec.name}: {one_line(proc.stderr or proc.stdout)}")
        return Lock(text=out.read_text(), no_deps=True)
