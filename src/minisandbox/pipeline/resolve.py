"""Resolve an environment's dependency input to a fully pinned lock with uv.

Exact pin lists that are complete freezes (the SWE-smith official exports, the bundled
specs) are already a lock: they are kept as they are and installed with --no-deps,
because re-resolving a frozen environment can only move it away from the reference
image. SWE-bench pin lists are partial (e.g. only `tox==...` for sphinx), so they and
anything else go through `uv pip compile` for the spec's interpreter version.

As-of date (spec `exclude_newer`): compiles run with `--exclude-newer`. An exact pin of a
reference export can be newer than the date (the date is only a lower bound of the
export's; see scripts/gen_catalog.py): uv then names it and its upload time, and that
package alone gets its own cutoff a day after that upload (`--exclude-newer-package`; a
release's files are uploaded over minutes to hours, and uv reports the first), or none if
that is still too early, so everything else, build requirements of isolated builds
included, stays as of the date.
The lock records the date and these exemptions; the build applies both.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import hashlib
import platform
import re
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from minisandbox.catalog import EnvSpec
from minisandbox.errors import MinisandboxError
from minisandbox.pipeline.condaenv import CondaEnvError, pip_requirements
from minisandbox.pipeline.failures import one_line
from minisandbox.tools import uv_bin

_EXACT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(\[[A-Za-z0-9,._-]+\])?==[A-Za-z0-9.+!_-]+$")


#: A lock line that is a local path, not a package of the index: the repository itself
#: (`.`, `-e .`, `name @ file:///...`), which the spec's install commands install.
_LOCAL = re.compile(r"^(-e\s+)?(\.|/|file:)|^\S+\s*@\s*(\.|/|file:)")


#: A build backend without PEP 660's editable hook (setuptools before 64: pylint 2.15-2.17 pin
#: `setuptools~=62.6`), asked by uv for an editable requirement (`-e .[testutils]`).
_NO_EDITABLE_HOOK = re.compile(r"has no attribute 'build_editable'|missing the 'build_editable' hook")

#: An editable requirement line of a requirements file: `-e <path or URL>` / `--editable=...`.
_EDITABLE = re.compile(r"^\s*(?:-e|--editable)(?:\s+|\s*=\s*)(\S.*)$")

#: A line of a requirements file that includes another: `-r file`, `-c file` (long forms too).
_INCLUDE = re.compile(r"^\s*(-r|-c|--requirement|--constraint)(?:\s+|\s*=\s*)(\S+)\s*$")

#: uv's answer when the only releases that match a requirement are yanked.
_YANKED = re.compile(r"([A-Za-z0-9][A-Za-z0-9._-]*)==([A-Za-z0-9.+!_-]+) was yanked")


class ResolveError(MinisandboxError, RuntimeError):
    pass


@dataclass(frozen=True)
class Lock:
    text: str  # requirements.txt format, one pin per line
    no_deps: bool  # install exactly these, without resolving dependencies
    exclude_newer: str | None = None  # the spec's as-of date
    exempt: tuple[tuple[str, str], ...] = ()  # (package, own cutoff): pins newer than the date
    build_constraints: tuple[str, ...] = ()  # what the isolated builds of sdists may take (`build_constraints`)

    @property
    def sha256(self) -> str:
        dated = f"\n{self.exclude_newer}\n{sorted(self.exempt)}" if self.exclude_newer else ""
        built = f"\n{sorted(self.build_constraints)}" if self.build_constraints else ""
        return hashlib.sha256(f"{self.no_deps}\n{self.text}{dated}{built}".encode()).hexdigest()

    def uv_date_args(self) -> list[str]:
        """`uv pip install/compile` options that apply the as-of date (none without one)."""
        if not self.exclude_newer:
            return []
        args = ["--exclude-newer", self.exclude_newer]
        for name, cutoff in sorted(self.exempt):
            args += ["--exclude-newer-package", f"{name}={cutoff}"]
        return args


#: uv's answer when it could not build a source distribution (for its metadata at resolve time).
_BUILD_FAILED = re.compile(r"Failed to (?:download and )?build `([^`]+)`")

#: The oldest setuptools uv's isolated build of a project without pyproject.toml can use
#: (its fallback backend, `setuptools.build_meta:__legacy__`, asks for `setuptools>=40.8.0`).
LEGACY_BACKEND_SETUPTOOLS = (40, 8, 0)


def _release(version: str) -> tuple[int, ...]:
    """The leading numeric release of a version string ("38.2.4" -> (38, 2, 4))."""
    parts = []
    for part in version.split("."):
        digits = re.match(r"\d+", part)
        if digits is None:
            break
        parts.append(int(digits.group()))
    return tuple(parts)


#: The line of a Python traceback that names the exception (`ImportError: cannot import ...`).
_EXCEPTION_LINE = re.compile(r"^\s*(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception): .*$", re.M)


def _uv_error(proc: subprocess.CompletedProcess) -> str:
    """One line for a failed compile: for an sdist that did not build, its name and the
    exception its build raised (uv's last lines are a hint and a wrapped path)."""
    failed = _BUILD_FAILED.search(proc.stderr)
    if failed is None:
        return one_line(proc.stderr or proc.stdout)
    raised = _EXCEPTION_LINE.findall(proc.stderr)
    return f"building `{failed.group(1)}` failed: {one_line(raised[-1] if raised else proc.stderr)}"


def build_constraints(spec: EnvSpec) -> tuple[str, ...]:
    """The setuptools a spec's source distributions are built with: at most the one the spec
    pins (not older than `LEGACY_BACKEND_SETUPTOOLS`, the oldest uv can build with).

    Why: the harnesses' pip builds a project without pyproject.toml in the environment, with
    the spec's own setuptools, while uv builds it in isolation with the newest setuptools.
    Old sdists then fail to build here (astropy 1.3's `MarkupSafe==1.0` imports
    `setuptools.Feature`, removed in setuptools 46). Applied only when a resolve fails to
    build an sdist (`resolve`), so every lock that resolves without it stays as it was."""
    for req in spec.requirements:
        name, _, version = req.strip().partition("==")
        if name.strip().lower() == "setuptools" and _release(version):
            floor = ".".join(map(str, LEGACY_BACKEND_SETUPTOOLS))
            return (f"setuptools<={version if _release(version) >= LEGACY_BACKEND_SETUPTOOLS else floor}",)
    return ()


def _spec_interpreter(spec: EnvSpec) -> str | None:
    """The executable of the spec's interpreter on this host, or None: uv builds an sdist's
    metadata with the interpreter it is given (without one, with whichever it finds first: a
    Python 3.11 cannot run MarkupSafe 1.0's setup.py for a Python 3.6 spec)."""
    from minisandbox.sandbox.interpreters import InterpreterNotFound, find_interpreter

    try:
        return find_interpreter(spec.python_full or spec.python).executable
    except (InterpreterNotFound, ValueError):  # not on this host: the build step says so
        return None


#: uv's hint when an exact pin was uploaded after the --exclude-newer date.
_FILTERED = re.compile(
    r"`([A-Za-z0-9._-]+)` was filtered by `exclude-newer`.*?was published at "
    r"(\d{4}-\d{2}-\d{2}T[0-9:.]+Z)",
    re.S,
)


def _after(stamp: str) -> str:
    """A day after `stamp`, to the second: a release's later files (wheels uploaded after
    the first one) are then inside the package's own cutoff too."""
    t = _dt.datetime.fromisoformat(stamp.replace("Z", "+00:00")).replace(microsecond=0) + _dt.timedelta(days=1)
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def _compile(
    base: list[str], lock: Lock, log_lines: list[str], what: str, cwd: Path | None = None
) -> tuple[subprocess.CompletedProcess, Lock]:
    """Run `uv pip compile` as of the lock's date; each pin uv reports as newer than the
    date gets its own cutoff and the compile is retried (at most once per pin)."""
    for _ in range(500):
        cmd = [*base, *lock.uv_date_args()]
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd)
        log_lines.append(f"$ {' '.join(cmd)}\n{proc.stdout}{proc.stderr}")
        m = _FILTERED.search(proc.stderr) if proc.returncode != 0 and lock.exclude_newer else None
        if m is None:
            return proc, lock
        name, exempt = m.group(1).lower(), dict(lock.exempt)
        if exempt.get(name) == "false":
            return proc, lock
        # first a cutoff a day after the pin's upload; if that is still too early, none
        exempt[name] = "false" if name in exempt else _after(m.group(2))
        log_lines.append(f"# {m.group(1)} is pinned but newer than {lock.exclude_newer}: its own cutoff {exempt[name]}")
        lock = dataclasses.replace(lock, exempt=tuple(sorted(exempt.items())))
    raise ResolveError(f"uv could not resolve {what} as of {lock.exclude_newer}: too many pins newer than the date")


def _plain_copy(path: Path, tmp: Path, cwd: Path, done: dict[Path, Path]) -> Path:
    """A copy of requirements file `path` in `tmp` whose editable lines are plain requirements
    of the same path (a local path made absolute from `cwd`, where pip runs), and whose
    includes are copies made the same way.

    Why: pip installs `-e .` with `setup.py develop` when the backend has no editable hook,
    and the lock needs only the requirement's dependencies, which the plain (wheel) metadata
    gives as well; uv instead fails the whole resolve."""
    path = path.absolute()
    if path in done:
        return done[path]
    copy = tmp / f"plain-{len(done)}-{path.name}"
    done[path] = copy
    out = []
    for line in path.read_text().splitlines():
        if m := _INCLUDE.match(line):
            line = f"{m.group(1)} {_plain_copy(path.parent / m.group(2), tmp, cwd, done)}"
        elif m := _EDITABLE.match(line):
            target = m.group(1).strip()
            if target.startswith((".", "/")):  # a local path, with its extras: absolute from pip's directory
                target = str(cwd / target) if target.startswith(".") else target
            line = target
        out.append(line)
    copy.write_text("\n".join(out) + "\n")
    return copy


def is_exact(requirements: tuple[str, ...] | list[str]) -> bool:
    return all(_EXACT.match(r.strip()) for r in requirements)


def resolve(spec: EnvSpec, repo_dir: Path, log: Path) -> Lock:
    """Lock for `spec`; `repo_dir` is the build commit's snapshot (for requirements files)."""
    reqs = [r.strip() for r in spec.requirements if r.strip()]
    platform_args = [
        "--python-version",
        spec.python,
        "--python-platform",
        f"{platform.machine()}-manylinux_2_28",
        "--no-header",
        "--no-annotate",
        "--quiet",
    ]
    if spec.kind != "swebench" and not spec.requirements_files and is_exact(reqs):
        text = "".join(f"{r}\n" for r in sorted(reqs, key=str.lower))
        lock = Lock(text=text, no_deps=True, exclude_newer=spec.exclude_newer)
        lines = [f"{len(reqs)} exact pins: kept as the lock (installed with --no-deps)"]
        if spec.exclude_newer and reqs:
            # only to learn which pins are newer than the date (the lock stays the pins)
            with tempfile.TemporaryDirectory(prefix="msb-resolve-") as tmp:
                (Path(tmp) / "pins.in").write_text(text)
                base = [uv_bin(), "pip", "compile", str(Path(tmp) / "pins.in"), "--no-deps", *platform_args]
                proc, lock = _compile(base, lock, lines, spec.name)
            if proc.returncode != 0:
                log.write_text("\n".join(lines) + "\n")
                raise ResolveError(
                    f"uv could not find the pins of {spec.name} as of {spec.exclude_newer}: "
                    f"{one_line(proc.stderr or proc.stdout)}"
                )
        log.write_text("\n".join(lines) + "\n")
        return lock
    with tempfile.TemporaryDirectory(prefix="msb-resolve-") as tmp:
        req_in = Path(tmp) / "requirements.in"
        lines = list(reqs)
        for rel in spec.requirements_files:
            # absolute: uv reads `-r` paths relative to requirements.in (in tmp), and the
            # workflow passes the snapshot as a path relative to its working directory
            path = (Path(repo_dir) / rel).absolute()
            for alt in spec.extra.get("requirements_files_alternatives") or ():
                # SWE-bench takes the first of its candidate files that exists (xarray's
                # environment.yml moved to ci/requirements/)
                if not path.is_file():
                    path = (Path(repo_dir) / alt).absolute()
            if not path.is_file():
                raise ResolveError(f"requirements file {rel} not found in the snapshot of {spec.name}")
            if path.suffix in (".yml", ".yaml"):  # a conda environment file (SWE-bench's xarray)
                try:
                    translated = pip_requirements(path.read_text(), f"{rel} of {spec.name}")
                except CondaEnvError as exc:
                    raise ResolveError(str(exc)) from None
                path = Path(tmp) / f"conda-{len(lines)}.txt"
                path.write_text("".join(f"{r}\n" for r in translated))
            lines.append(f"-r {path}")
        req_in.write_text("\n".join(lines) + "\n")
        out = Path(tmp) / "lock.txt"
        base = [uv_bin(), "pip", "compile", str(req_in), "-o", str(out), *platform_args]
        pins = [r for r in reqs if _EXACT.match(r)]
        if spec.kind == "swebench" and spec.requirements_files and pins:
            # SWE-bench installs the requirements file, then its pip_packages with a second
            # pip install that replaces what the file pinned (flask 3.1: MarkupSafe==2.1.1
            # over the file's 3.0.2): a pin of the spec wins over the file's, as an override
            overrides = Path(tmp) / "overrides.txt"
            overrides.write_text("\n".join(pins) + "\n")
            base += ["--override", str(overrides)]
        lines: list[str] = []
        # from the snapshot, as pip runs in /testbed: a requirements file's local paths
        # (pylint's `.[testutils,spelling]`) name the repository
        proc, lock = _compile(base, Lock("", True, spec.exclude_newer), lines, spec.name, Path(repo_dir).absolute())
        for _ in range(20):
            # pip installs a yanked release when it is the only one that matches (with a
            # warning); uv only when pinned exactly: pin it, as the harness's pip gets it
            # (sqlfluff's requirements_dev.txt asks for types-pkg-resources, all yanked)
            m = _YANKED.search(proc.stderr) if proc.returncode != 0 and spec.kind == "swebench" else None
            if m is None:
                break
            pin = f"{m.group(1)}=={m.group(2)}"
            lines.append(f"# {pin} is yanked and the only match: pinned, as pip installs it")
            req_in.write_text(req_in.read_text() + pin + "\n")
            proc, lock = _compile(base, lock, lines, spec.name, Path(repo_dir).absolute())
        if proc.returncode != 0 and _NO_EDITABLE_HOOK.search(proc.stderr):
            lines.append("# the build backend has no editable hook: resolved with the editables as plain requirements")
            req_in.write_text(_plain_copy(req_in, Path(tmp), Path(repo_dir).absolute(), {}).read_text())
            proc, lock = _compile(base, lock, lines, spec.name, Path(repo_dir).absolute())
        if proc.returncode != 0 and _BUILD_FAILED.search(proc.stderr):
            proc, lock = _with_build_environment(spec, base, lock, lines, Path(tmp), proc, repo_dir)
        log.write_text("\n".join(lines) + "\n")
        if proc.returncode != 0:
            raise ResolveError(f"uv could not resolve {spec.name}: {_uv_error(proc)}")
        text = "".join(line + "\n" for line in out.read_text().splitlines() if not _LOCAL.match(line.strip()))
        return dataclasses.replace(lock, text=text, no_deps=True)


def _with_build_environment(
    spec: EnvSpec,
    base: list[str],
    lock: Lock,
    lines: list[str],
    tmp: Path,
    failure: subprocess.CompletedProcess,
    repo_dir: Path,
) -> tuple[subprocess.CompletedProcess, Lock]:
    """The compile again after uv failed to build a source distribution (`failure`), with the
    build environment the harness's pip would have used: the spec's interpreter and its
    setuptools as a build constraint (`build_constraints`). The lock records the
    constraint; the build applies it. Without either, `failure` stands."""
    constraints = build_constraints(spec)
    python = _spec_interpreter(spec)
    if not constraints and python is None:
        return failure, lock
    failed = _BUILD_FAILED.search(failure.stderr)
    failed = failed.group(1) if failed else "an sdist"
    extra: list[str] = []
    if constraints:
        path = tmp / "build-constraints.txt"
        path.write_text("".join(f"{c}\n" for c in constraints))
        extra += ["--build-constraints", str(path)]
    if python:
        extra += ["--python", python]
    lines.append(
        f"# {failed} did not build: again with the spec's interpreter ({python or 'not on this host'}) "
        f"and build constraints {list(constraints) or 'none'}"
    )
    return _compile(
        [*base, *extra],
        dataclasses.replace(lock, build_constraints=constraints),
        lines,
        spec.name,
        Path(repo_dir).absolute(),
    )
