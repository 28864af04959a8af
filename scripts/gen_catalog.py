#!/usr/bin/env python3
"""Generate the SWE-smith and SWE-bench environment-spec catalogs under config/catalog/.

    .venv/bin/python scripts/gen_catalog.py --shared ../shared/data --out config/catalog
    .venv/bin/python scripts/gen_catalog.py --check     # exit 1 if the committed catalog is stale

Only this script reads the shared data directory; the project reads the committed YAML.
The output is deterministic (sorted specs, fixed field order, no timestamps): running it
twice gives the same bytes, and the header records a digest of every input file.

Inputs (see docs/catalog.md):
* `swesmith_python_profiles.json`: the 133 SWE-smith Python profiles (swesmith 0.0.9).
* `swesmith-envs/<name>/sweenv_<name>.yml`: the conda export each official image was
  created from; its `pip:` section gives the exact pins. `setup_env.sh` is the script the
  image ran (its steps after the env is activated are the install commands).
* `swebench_python_specs.json`: SWE-bench's MAP_REPO_VERSION_TO_SPECS for Python.
* `config/catalog/pypi-release-dates.json` (committed, next to the output): first-upload
  dates on PyPI of the few anchor pins that date an export (see `as_of_date`), and the
  newest final release of each SWE-bench series with its first upload (see
  `swebench_as_of`). The generator never touches the network unless `--refresh-dates` is
  given, which looks up once what the file lacks (one request per project: PyPI's simple
  JSON API with PEP 700 upload times for the anchors, its JSON API for the series) and
  adds it to that file.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import hashlib
import json
import re
import shlex
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_SHARED = ROOT.parent / "shared" / "data"
DEFAULT_OUT = ROOT / "config" / "catalog"

ACTIVATE = "source /opt/miniconda3/bin/activate; conda activate testbed; "
SWEBENCH_TIMEOUT = 1800  # SWE-bench harness default per-instance timeout (seconds)

#: Field order in the YAML (docs/design.md "Environment specs"); `extra` is informational.
FIELDS = (
    "name",
    "kind",
    "source",
    "commit",
    "python",
    "python_full",
    "exclude_newer",
    "requirements",
    "requirements_files",
    "system_packages",
    "pre_install",
    "install",
    "test_cmd",
    "log_parser",
    "timeout",
    "extra",
)

# --------------------------------------------------------------------------------------
# Facts copied from upstream, so the generator needs no network.
# --------------------------------------------------------------------------------------

#: SWE-bench's repo -> log parser map lives with the parsers (one copy, used here to
#: fill each spec's `log_parser`).
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
from minisandbox.grading.logparsers import SWEBENCH_REPO_PARSERS as SWEBENCH_PARSERS  # noqa: E402

#: SWE-bench 4.x constants/python.py MAP_REPO_TO_REQS_PATHS: candidate paths, the harness
#: uses the first that exists at the environment_setup_commit.
SWEBENCH_REQS_PATHS = {
    "dbt-labs/dbt-core": ["dev-requirements.txt", "dev_requirements.txt"],
    "django/django": ["tests/requirements/py3.txt"],
    "matplotlib/matplotlib": ["requirements/dev/dev-requirements.txt", "requirements/testing/travis_all.txt"],
    "pallets/flask": ["requirements/dev.txt"],
    "pylint-dev/pylint": ["requirements_test.txt"],
    "pyvista/pyvista": ["requirements_test.txt", "requirements.txt"],
    "sqlfluff/sqlfluff": ["requirements_dev.txt"],
    "sympy/sympy": ["requirements-dev.txt", "requirements-test.txt"],
}

#: SWE-bench 4.x MAP_REPO_TO_ENV_YML_PATHS (same first-existing rule).
SWEBENCH_ENV_YML_PATHS = {
    "matplotlib/matplotlib": ["environment.yml"],
    "pydata/xarray": ["ci/requirements/environment.yml", "environment.yml"],
}

#: SWE-bench repos that are not git repositories (seq2seq benchmarks): no spec.
SWEBENCH_NOT_GIT = {"swe-bench/humaneval"}

#: Distribution names that differ from the repository name (the project's own package
#: must not be pinned: it is installed from the snapshot by the install commands).
OWN_DIST_ALIASES = {
    "facebookresearch__hydra.0f03eb60": ("hydra-core",),
}

#: Pins that cannot be installed on the profile's interpreter. The official image created
#: the env with the exported interpreter, then ran `conda install python=<profile>`, so the
#: tests run on the profile's version; these exports were made on a newer Python and a few
#: pins require it (checked with `uv pip compile --python-version 3.10`). The install
#: commands (`pip install -U -r requirements-dev.txt`) install a compatible version.
PIN_DROPS = {
    "Project-MONAI__MONAI.a09c1f08": {
        "numcodecs": "requires Python>=3.11; the profile runs on 3.10",
        "zarr": "requires Python>=3.11; the profile runs on 3.10",
    },
}

#: Conda packages every exported env has (the Miniconda python base); others are recorded.
BASE_CONDA = frozenset(
    """_libgcc_mutex _openmp_mutex bzip2 ca-certificates expat ld_impl_linux-64 libffi libgcc
    libgcc-ng libgomp libmpdec libstdcxx libstdcxx-ng libuuid libxcb libzlib ncurses openssl
    pip pthread-stubs python readline setuptools sqlite tk tzdata wheel xz zlib""".split()
)

#: Conda packages of an export that are the *same project* on PyPI (conda name -> PyPI
#: name). Only these are carried into `requirements`: many conda names are unrelated
#: projects on PyPI (`tk`, `xz`, `readline`, `openssl`, `sqlite`, `tzdata` (conda: the IANA
#: data, PyPI: a Python package with its own versions), `libblas`, ...), so the list is
#: explicit and anything else stays information in `extra.conda_packages`.
CONDA_ON_PYPI = {
    "pip": "pip",
    "setuptools": "setuptools",
    "wheel": "wheel",
    "pybind11": "pybind11",
    "pybind11-global": "pybind11-global",
    "fasttext": "fasttext",
}

#: Pins that date an export: their first upload to PyPI is a lower bound of the export's
#: date. A small fixed set (looked up once, committed in RELEASE_DATES_FILE): the conda
#: section's pip/setuptools/wheel and the test stack most exports share; `hypothesis`
#: releases almost daily, so it dates an export closely where present.
DATE_ANCHORS = ("pip", "setuptools", "wheel", "pytest", "pluggy", "packaging", "coverage", "hypothesis")
RELEASE_DATES_FILE = "pypi-release-dates.json"
#: Calendar-versioned packages whose version is their release date (YYYY.M.D).
CALVER_DATED = ("ca-certificates", "certifi")

#: PyPI project of each SWE-bench repository: its releases date the repository's specs
#: (`swebench_as_of`). A repository missing here falls back to the floor, said in the header.
SWEBENCH_PYPI = {
    "astropy/astropy": "astropy",
    "dbt-labs/dbt-core": "dbt-core",
    "django/django": "django",
    "marshmallow-code/marshmallow": "marshmallow",
    "matplotlib/matplotlib": "matplotlib",
    "mwaskom/seaborn": "seaborn",
    "pallets/flask": "flask",
    "psf/requests": "requests",
    "pvlib/pvlib-python": "pvlib",
    "pydata/xarray": "xarray",
    "pydicom/pydicom": "pydicom",
    "pylint-dev/astroid": "astroid",
    "pylint-dev/pylint": "pylint",
    "pytest-dev/pytest": "pytest",
    "pyvista/pyvista": "pyvista",
    "scikit-learn/scikit-learn": "scikit-learn",
    "sphinx-doc/sphinx": "sphinx",
    "sqlfluff/sqlfluff": "sqlfluff",
    "sympy/sympy": "sympy",
}

#: No SWE-bench spec is dated before this day. SWE-bench's containerized harness was
#: released on 2024-06-27 (its README's news; the report is docs/20240627_docker in the
#: SWE-bench repository) and SWE-bench Verified, validated in it, on 2024-08-13. Its images
#: create the conda env and pip-install the spec's packages when they are built, so no
#: official image resolved before that day, and an older date would deny a spec's Python
#: (often newer than the series) the wheels the image got.
SWEBENCH_FLOOR = _dt.date(2024, 6, 27)
#: Days after the newest release of a series that still belong to it: the rest of its
#: files and the releases made with it (Flask and Werkzeug, Sphinx and its extensions).
SERIES_MARGIN_DAYS = 7
#: CPython X.Y final releases (python.org). A spec is never dated before its Python's
#: release plus `PYTHON_WHEEL_LAG_DAYS`, by when the compiled dependencies had wheels for
#: it (numpy, scipy, lxml publish them within weeks to a few months).
PYTHON_RELEASES = {
    "3.5": _dt.date(2015, 9, 13),
    "3.6": _dt.date(2016, 12, 23),
    "3.7": _dt.date(2018, 6, 27),
    "3.8": _dt.date(2019, 10, 14),
    "3.9": _dt.date(2020, 10, 5),
    "3.10": _dt.date(2021, 10, 4),
    "3.11": _dt.date(2022, 10, 24),
    "3.12": _dt.date(2023, 10, 2),
    "3.13": _dt.date(2024, 10, 7),
    "3.14": _dt.date(2025, 10, 7),
}
PYTHON_WHEEL_LAG_DAYS = 182

_EXACT_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(\[[A-Za-z0-9,._-]+\])?==([^\s;@]+)$")
_CONDA_EQ = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)=([^=<>!~\s]+)$")
_REQ_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*")
_APT_INSTALL = re.compile(r"apt-get\s+(?:-\S+\s+)*install\s+([^&;|]*)")


class InputError(RuntimeError):
    """The shared data is not what the generator expects; the message names the file."""


# --------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------


def canon(name: str) -> str:
    """Distribution name compared loosely: case, '-', '_' and '.' do not matter."""
    return re.sub(r"[-_.]+", "", name).lower()


def own_names(profile: dict[str, Any]) -> set[str]:
    """Names under which the profile's own project may appear in its pip export."""
    repo = str(profile["repo"])
    names = {repo, repo.removeprefix("python-"), repo.removesuffix("-python")}
    names.update(OWN_DIST_ALIASES.get(profile["name"], ()))
    return {canon(n) for n in names if n}


def is_system_command(cmd: str) -> bool:
    """Commands that change the host system (packages, locales, /etc): not part of a venv."""
    return bool(re.search(r"\bapt-get\b|\blocale-gen\b|>\s*/etc/", cmd))


def apt_packages(cmd: str) -> list[str]:
    """Package names from `apt-get install ...` (options dropped)."""
    out: list[str] = []
    for match in _APT_INSTALL.finditer(cmd):
        out += [t for t in shlex.split(match.group(1)) if not t.startswith("-")]
    return out


def split_system(commands: Iterable[str]) -> tuple[list[str], list[str], list[str]]:
    """(commands kept, system commands moved out, apt packages those need)."""
    kept: list[str] = []
    system: list[str] = []
    packages: list[str] = []
    for cmd in commands:
        if is_system_command(cmd):
            system.append(cmd)
            packages += [p for p in apt_packages(cmd) if p not in packages]
        else:
            kept.append(cmd)
    return kept, system, packages


def version_key(version: str) -> tuple[Any, ...]:
    """Natural order for versions like '0.20' < '2022.03' < 'v5.3'."""
    parts = re.findall(r"\d+|[A-Za-z]+", version)
    return tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in parts)


def sha256_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def tree_digest(root: Path) -> tuple[str, int]:
    """sha256 over (relative path, content digest) of every file under root; file count."""
    h = hashlib.sha256()
    files = sorted(p for p in root.rglob("*") if p.is_file())
    for p in files:
        h.update(f"{p.relative_to(root).as_posix()}\0{sha256_file(p)}\n".encode())
    return h.hexdigest(), len(files)


def _load_yaml(path: Path) -> Any:
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        return yaml.load(path.read_text(encoding="utf-8"), Loader=loader)
    except yaml.YAMLError as exc:
        raise InputError(f"{path}: invalid YAML ({str(exc).splitlines()[0]})") from None


def _load_json(path: Path) -> Any:
    if not path.is_file():
        raise InputError(f"{path} does not exist; pass --shared DIR with the shared data directory")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: invalid JSON at line {exc.lineno}: {exc.msg}") from None


# --------------------------------------------------------------------------------------
# SWE-smith
# --------------------------------------------------------------------------------------


def read_env_export(path: Path) -> tuple[str, dict[str, str], list[str]]:
    """(conda python version, every other conda package name -> version, pip lines)."""
    data = _load_yaml(path)
    if not isinstance(data, dict) or not isinstance(data.get("dependencies"), list):
        raise InputError(f"{path}: not a conda environment export (no dependencies list)")
    python = ""
    conda: dict[str, str] = {}
    pip: list[str] = []
    for dep in data["dependencies"]:
        if isinstance(dep, dict):
            pip += [str(x).strip() for x in dep.get("pip") or []]
        elif isinstance(dep, str):
            name, _, rest = dep.partition("=")
            version = rest.split("=", 1)[0]
            if name == "python":
                python = version
            elif version:
                conda[name] = version
    if not python:
        raise InputError(f"{path}: no python=<version> among the conda dependencies")
    return python, conda, pip


def conda_pins(conda: dict[str, str], pip_pins: list[str]) -> list[str]:
    """`name==version` for the conda packages that are the same project on PyPI
    (`CONDA_ON_PYPI`), unless the pip section pins that name too: the image installed the
    pip section after the conda one, so its version is the one the tests saw."""
    pinned = {canon(p.split("==", 1)[0].split("[", 1)[0]) for p in pip_pins}
    out = []
    for name, version in sorted(conda.items()):
        pypi = CONDA_ON_PYPI.get(name)
        if pypi and canon(pypi) not in pinned:
            out.append(f"{pypi}=={version}")
    return out


_CALVER = re.compile(r"^(\d{4})\.(\d{1,2})\.(\d{1,2})$")


def as_of_date(conda: dict[str, str], pins: list[str], release_dates: dict[str, str]) -> tuple[str | None, str]:
    """(exclude_newer, how it was found) for one export.

    The export records no date. Every package in it was released before the export was
    made, so the newest known release among them is a lower bound of the export's date;
    the as-of date is the next UTC midnight after it. Known releases: calendar versions
    (`ca-certificates=2024.11.26`, `certifi==2024.8.30`) and the first PyPI upload of the
    `DATE_ANCHORS` pins in `release_dates` (`name==version` -> ISO date-time). Pins newer
    than the date are installed exactly anyway (the build exempts them from the date)."""
    found: list[tuple[str, str]] = []
    versions = dict(conda)
    for pin in pins:
        name, _, version = pin.partition("==")
        versions[canon(name.split("[", 1)[0])] = version
    for name in CALVER_DATED:
        m = _CALVER.match(versions.get(canon(name), versions.get(name, "")) or "")
        if m:
            found.append((f"{int(m.group(1)):04d}-{int(m.group(2)):02d}-{int(m.group(3)):02d}", f"{name} {m.group(0)}"))
    for name in DATE_ANCHORS:
        version = versions.get(canon(name))
        stamp = release_dates.get(f"{name}=={version}") if version else None
        if stamp:
            found.append((stamp[:10], f"{name}=={version} uploaded {stamp[:10]}"))
    if not found:
        return None, "no dated package in the export"
    day, why = max(found)
    nxt = _dt.date.fromisoformat(day) + _dt.timedelta(days=1)
    return f"{nxt.isoformat()}T00:00:00Z", f"the day after the newest dated package: {why}"


def anchor_pins(conda: dict[str, str], pins: list[str]) -> list[str]:
    """The `name==version` anchors of one export whose release date dates it."""
    versions = {canon(k): v for k, v in conda.items()}
    for pin in pins:
        name, _, version = pin.partition("==")
        versions[canon(name.split("[", 1)[0])] = version
    return [f"{n}=={versions[canon(n)]}" for n in DATE_ANCHORS if canon(n) in versions]


def install_steps(script: Path) -> list[str] | None:
    """The commands setup_env.sh runs after activating the env (None if the file is absent)."""
    if not script.is_file():
        return None
    text = script.read_text(encoding="utf-8")
    _, sep, tail = text.partition("\nEOF_59812759871\n")
    if not sep:
        raise InputError(f"{script}: no environment heredoc (EOF_59812759871) found")
    lines = [line for line in tail.splitlines() if line.strip()]
    for i, line in enumerate(lines):
        if line.startswith('echo "Current environment'):
            return lines[i + 1 :]
    raise InputError(f"{script}: no 'echo \"Current environment' line after the env creation")


def filter_pins(profile: dict[str, Any], pip_lines: list[str]) -> tuple[list[str], list[str]]:
    """(exact pins kept, 'line: reason' dropped). Keeps only `name==version` lines."""
    own = own_names(profile)
    drops = PIN_DROPS.get(profile["name"], {})
    kept: list[str] = []
    dropped: list[str] = []
    for line in pip_lines:
        if not line or line.startswith("#"):
            continue
        lowered = line.lower()
        if line.startswith("-e") or "git+" in lowered or "file://" in lowered or " @ " in line:
            dropped.append(f"{line}: editable/VCS/local install (the project itself)")
            continue
        match = _EXACT_PIN.match(line)
        if not match:
            dropped.append(f"{line}: not an exact pin")
            continue
        name = match.group(1)
        if canon(name) in own:
            dropped.append(f"{line}: the project itself (installed from the snapshot)")
        elif name.lower() in drops:
            dropped.append(f"{line}: {drops[name.lower()]}")
        else:
            kept.append(line)
    return sorted(kept, key=str.lower), dropped


def swesmith_log_parser(profile: dict[str, Any]) -> str:
    """pytest, except profiles whose test command runs unittest (tornado, python-slugify)."""
    cmd = str(profile["test_cmd"])
    return "pytest" if "pytest" in cmd else "unittest"


def swesmith_spec(profile: dict[str, Any], envs: Path, release_dates: dict[str, str] | None = None) -> dict[str, Any]:
    name = profile["name"]
    env_dir = envs / name
    yml = env_dir / f"sweenv_{name}.yml"
    if not yml.is_file():
        raise InputError(f"{yml} does not exist: profile {name} has no environment export")
    python_conda, conda_all, pip_lines = read_env_export(yml)
    conda_pkgs = [f"{k}=={v}" for k, v in conda_all.items() if k not in BASE_CONDA]
    pins, dropped = filter_pins(profile, pip_lines)
    from_conda = conda_pins(conda_all, pins)
    exclude_newer, date_note = as_of_date(conda_all, pins, release_dates or {})
    pins = sorted(pins + from_conda, key=str.lower)
    profile_install = [str(c) for c in profile["install_cmds"]]
    script_install = install_steps(env_dir / "setup_env.sh")
    install = script_install if script_install is not None else profile_install
    install, system_cmds, system_pkgs = split_system(install)

    extra: dict[str, Any] = {
        "mirror": profile.get("mirror_name", f"swesmith/{name}"),
        "image_name": profile.get("image_name", ""),
        "python_conda": python_conda,
    }
    if not python_conda.startswith(f"{profile['python_version']}."):
        extra["python_note"] = (
            f"the export ran on {python_conda}; the image then ran `conda install "
            f"python={profile['python_version']}`, so tests run on {profile['python_version']}"
        )
    if conda_pkgs:
        extra["conda_packages"] = sorted(conda_pkgs, key=str.lower)
    if from_conda:
        extra["conda_pins"] = from_conda
    extra["exclude_newer_source"] = date_note
    if dropped:
        extra["dropped_pins"] = dropped
    if system_cmds:
        extra["system_commands"] = system_cmds
    if script_install is not None and script_install != profile_install:
        extra["profile_install_cmds"] = profile_install
    if profile.get("overridden_methods"):
        extra["swesmith_overrides"] = list(profile["overridden_methods"])
    spec: dict[str, Any] = {
        "name": name,
        "kind": "swesmith",
        "source": f"https://github.com/{profile['owner']}/{profile['repo']}.git",
        "commit": profile["commit"],
        "python": str(profile["python_version"]),
    }
    if python_conda.startswith(f"{profile['python_version']}."):
        spec["python_full"] = python_conda
    if exclude_newer:
        spec["exclude_newer"] = exclude_newer
    spec.update(
        {
            "requirements": pins,
            "requirements_files": [],
            **({"system_packages": system_pkgs} if system_pkgs else {}),
            "pre_install": [],
            "install": install,
            "test_cmd": str(profile["test_cmd"]),
            "log_parser": swesmith_log_parser(profile),
            "timeout": int(profile["timeout"]),
            "extra": extra,
        }
    )
    return spec


def _load_dates_doc(path: Path) -> dict[str, Any]:
    """The committed release-date file as it is (empty if absent)."""
    if not path.is_file():
        return {}
    data = _load_json(path)
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected an object with 'dates' and 'swebench_series'")
    return data


def load_release_dates(path: Path) -> dict[str, str]:
    """The committed `name==version` -> first-upload date-time table (empty if absent)."""
    dates = _load_dates_doc(path).get("dates", {})
    if not isinstance(dates, dict) or not all(isinstance(v, str) for v in dates.values()):
        raise InputError(f'{path}: expected {{"dates": {{"name==version": "ISO date-time"}}}}')
    return dict(dates)


def load_swebench_series(path: Path) -> dict[str, Any]:
    """The committed `repo@X.Y` -> {project, release, uploaded, next_release, next_uploaded,
    retrieved} table (empty if absent); a series without a final release has nulls."""
    series = _load_dates_doc(path).get("swebench_series", {})
    ok = isinstance(series, dict) and all(
        isinstance(v, dict) and isinstance(v.get("retrieved"), str) and (not v.get("release") or v.get("uploaded"))
        for v in series.values()
    )
    if not ok:
        raise InputError(
            f'{path}: expected "swebench_series": {{"repo@X.Y": {{"project", "release", "uploaded", "retrieved"}}}}'
        )
    return dict(series)


def pypi_releases(project: str) -> dict[str, list[dict[str, Any]]]:
    """version -> its files (`upload_time_iso_8601`, `yanked`, ...) from PyPI's JSON API:
    one request per project. Only `--refresh-dates` calls this."""
    import urllib.error
    import urllib.request

    url = f"https://pypi.org/pypi/{project}/json"
    try:
        with urllib.request.urlopen(url, timeout=60) as resp:  # noqa: S310 (fixed https URL)
            data = json.load(resp)
    except urllib.error.HTTPError as exc:
        raise InputError(f"{url}: HTTP {exc.code}; retry later") from None
    releases = data.get("releases") if isinstance(data, dict) else None
    if not isinstance(releases, dict):
        raise InputError(f"{url}: no 'releases' in the answer")
    return releases


def refresh_swebench_series(
    shared: Path, series: dict[str, Any], today: _dt.date, fetch: Any = pypi_releases
) -> dict[str, Any]:
    """`series` plus an entry for every SWE-bench spec it lacks: the newest final release
    of the spec's series and the first release of a later series, each with its first
    upload (`newest_in_series`, `first_after_series`), from one `fetch` per PyPI project.
    Entries already there are kept, so their dates (and env keys) stay."""
    _path, data = _swebench_data(shared)
    missing: dict[str, list[tuple[str, tuple[int, int]]]] = {}
    for repo, version, _raw, why in _swebench_entries(data):
        name, key = f"{repo}@{version}", series_of(version)
        if why is None and name not in series and repo in SWEBENCH_PYPI and key is not None:
            missing.setdefault(SWEBENCH_PYPI[repo], []).append((name, key))
    out = dict(series)
    for project, wanted in sorted(missing.items()):
        releases = fetch(project)
        for name, key in wanted:
            found, after = newest_in_series(releases, key), first_after_series(releases, key)
            out[name] = {
                "project": project,
                "release": found[0] if found else None,
                "uploaded": found[1] if found else None,
                "next_release": after[0] if after else None,
                "next_uploaded": after[1] if after else None,
                "retrieved": today.isoformat(),
            }
    return dict(sorted(out.items(), key=lambda kv: kv[0].lower()))


def pypi_upload_dates(project: str) -> dict[str, str]:
    """version -> earliest `upload-time` of its files, from PyPI's simple JSON API (PEP 691
    and PEP 700): one request per project. Only `--refresh-dates` calls this."""
    import urllib.error
    import urllib.request

    from packaging.utils import parse_sdist_filename, parse_wheel_filename

    url = f"https://pypi.org/simple/{project}/"
    req = urllib.request.Request(url, headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:  # noqa: S310 (fixed https URL)
            data = json.load(resp)
    except urllib.error.HTTPError as exc:
        raise InputError(f"{url}: HTTP {exc.code}; retry later") from None
    out: dict[str, str] = {}
    for f in data.get("files") or []:
        name, stamp = f.get("filename", ""), f.get("upload-time")
        if not stamp:
            continue
        try:
            version = str(parse_wheel_filename(name)[1] if name.endswith(".whl") else parse_sdist_filename(name)[1])
        except Exception:  # noqa: BLE001 (eggs, exe installers: not needed to date an export)
            continue
        stamp = re.sub(r"\.\d+Z$", "Z", stamp)
        if version not in out or stamp < out[version]:
            out[version] = stamp
    return out


def refresh_release_dates(shared: Path, path: Path) -> int:
    """Look up what `path` lacks once (the anchors of every export, the series of every
    SWE-bench spec) and add it; returns how many entries were added."""
    dates = load_release_dates(path)
    series = load_swebench_series(path)
    wanted: set[str] = set()
    for yml in sorted((shared / "swesmith-envs").glob("*/sweenv_*.yml")):
        _python, conda, pip_lines = read_env_export(yml)
        exact = [ln for ln in pip_lines if _EXACT_PIN.match(ln)]
        wanted.update(anchor_pins(conda, exact))
    missing = sorted(wanted - set(dates))
    by_project: dict[str, list[str]] = {}
    for pin in missing:
        by_project.setdefault(pin.split("==", 1)[0], []).append(pin)
    for project, project_pins in sorted(by_project.items()):
        uploads = pypi_upload_dates(project)
        for pin in project_pins:
            stamp = uploads.get(pin.split("==", 1)[1])
            if stamp:
                dates[pin] = stamp
    new_series = refresh_swebench_series(shared, series, _dt.datetime.now(_dt.UTC).date())
    doc = {
        "source": "https://pypi.org/simple/<name>/ (PEP 691 JSON), earliest upload-time of the release's files",
        "anchors": list(DATE_ANCHORS),
        "dates": dict(sorted(dates.items(), key=lambda kv: kv[0].lower())),
        "swebench_source": (
            "https://pypi.org/pypi/<project>/json: for each SWE-bench spec repo@X.Y, the newest final "
            "X.Y.* release of the repository's PyPI project (SWEBENCH_PYPI) and the first final release "
            "of a later series (next_), each with the earliest upload_time of its files; retrieved: "
            "the day it was looked up"
        ),
        "swebench_series": new_series,
    }
    path.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    return len(missing) + len(new_series) - len(series)


def swesmith_specs(
    shared: Path, release_dates: dict[str, str] | None = None
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    path = shared / "swesmith_python_profiles.json"
    data = _load_json(path)
    profiles = data.get("python_profiles") if isinstance(data, dict) else None
    if not isinstance(profiles, list):
        raise InputError(f"{path}: expected an object with a 'python_profiles' list")
    envs = shared / "swesmith-envs"
    if not envs.is_dir():
        raise InputError(f"{envs} does not exist; it holds the sweenv_<name>.yml exports")
    specs = [swesmith_spec(p, envs, release_dates) for p in profiles]
    specs.sort(key=lambda s: s["name"].lower())
    env_digest, env_files = tree_digest(envs)
    meta = (data.get("_meta") or {}) if isinstance(data, dict) else {}
    inputs = {
        "swesmith_python_profiles.json": f"sha256:{sha256_file(path)}",
        "swesmith-envs/": f"{env_files} files, sha256:{env_digest}",
        "profiles source": meta.get("source", "unknown"),
    }
    return specs, inputs


# --------------------------------------------------------------------------------------
# SWE-bench
# --------------------------------------------------------------------------------------


def conda_to_pip(spec: str) -> str:
    """`numpy=1.19` (conda: 1.19.*) -> `numpy==1.19.*`; pip-style specs pass through."""
    match = _CONDA_EQ.match(spec)
    return f"{match.group(1)}=={match.group(2)}.*" if match else spec


def swebench_requirements(raw: dict[str, Any]) -> tuple[list[str], str | None]:
    """(requirements, 'requirements.txt' | 'environment.yml' | None) from packages/pip_packages."""
    files_kind = None
    packages = str(raw.get("packages") or "").strip()
    conda: list[str] = []
    if packages in ("requirements.txt", "environment.yml"):
        files_kind = packages
    elif packages:
        conda = [conda_to_pip(p) for p in shlex.split(packages)]
    pip = [str(p).strip() for p in raw.get("pip_packages") or [] if str(p).strip()]
    # The harness installs the conda list first, then `pip install <pip_packages>`: a
    # versioned pip entry replaces the conda one; a bare name keeps what is installed.
    by_name: dict[str, str] = {}
    for req in conda + pip:
        key = canon(_REQ_NAME.match(req).group(0)) if _REQ_NAME.match(req) else req
        if key not in by_name or req != _REQ_NAME.match(req).group(0):
            by_name[key] = req
    return list(by_name.values()), files_kind


def _midnight_after(day: _dt.date) -> str:
    """The as-of date that takes in everything uploaded up to the end of `day` (UTC)."""
    return f"{(day + _dt.timedelta(days=1)).isoformat()}T00:00:00Z"


def series_of(version: str) -> tuple[int, int] | None:
    """(X, Y) of a SWE-bench version: '3.0' -> (3, 0), '2022.09' -> (2022, 9), 'v5.3' -> (5, 3)."""
    parts = version.lstrip("vV").split(".")
    if len(parts) != 2 or not all(p.isdigit() for p in parts):
        return None
    return int(parts[0]), int(parts[1])


def _finals(releases: dict[str, list[dict[str, Any]]]) -> Iterable[tuple[Any, str, str]]:
    """(Version, PyPI's version text, first upload) of every final release in the `releases`
    of PyPI's JSON API (version -> its files, each with `upload_time_iso_8601` and
    `yanked`). Pre-releases, dev releases, yanked files and releases without files do not
    count: the official images resolved final releases."""
    from packaging.version import InvalidVersion, Version

    for text, files in releases.items():
        try:
            version = Version(text)
        except InvalidVersion:
            continue
        stamps = [f["upload_time_iso_8601"] for f in files if not f.get("yanked") and f.get("upload_time_iso_8601")]
        if stamps and not (version.is_prerelease or version.is_devrelease):
            yield version, text, re.sub(r"\.\d+Z$", "Z", min(stamps))


def newest_in_series(releases: dict[str, list[dict[str, Any]]], series: tuple[int, int]) -> tuple[str, str] | None:
    """(version, first upload) of the newest final release `X.Y.*` (see `_finals`); None
    when the series has none."""
    found = [(v, text, stamp) for v, text, stamp in _finals(releases) if (*v.release, 0)[:2] == series]
    return max(found)[1:] if found else None


def first_after_series(releases: dict[str, list[dict[str, Any]]], series: tuple[int, int]) -> tuple[str, str] | None:
    """(version, first upload) of the earliest uploaded final release of a later series
    (X.Y+1.0, X+1.0.0, ...): from then on X.Y only had backports. None if there is none."""
    found = [(stamp, text) for v, text, stamp in _finals(releases) if (*v.release, 0)[:2] > series]
    return min(found)[::-1] if found else None


def swebench_as_of(repo: str, version: str, python: str, entry: dict[str, Any] | None) -> tuple[str, str, str | None]:
    """(exclude_newer, how it was found, why it fell back to the floor or None) of one spec.

    The as-of date is the latest of: the floor (`SWEBENCH_FLOOR`: no official image resolved
    earlier); the end of the series plus `SERIES_MARGIN_DAYS`; and the spec's Python release
    plus `PYTHON_WHEEL_LAG_DAYS`. The end of the series is its newest final release on
    PyPI, or the first release of a later series when that came earlier (a long-term
    series such as Django 4.2 gets security releases for years after its development
    moved on), and never later than the day before it was looked up. `entry` is the
    series' record in the release-date file (`project`, `release`, `uploaded`,
    `next_release`, `next_uploaded`, `retrieved`); None when it was not looked up."""
    floor = (SWEBENCH_FLOOR, f"the floor {SWEBENCH_FLOOR} (SWE-bench's Docker harness; its images resolve when built)")
    candidates = [floor]
    project = SWEBENCH_PYPI.get(repo)
    fallback: str | None = None
    end_note = ""
    if project is None:
        fallback = f"no PyPI project known for {repo} (SWEBENCH_PYPI in scripts/gen_catalog.py)"
    elif entry is None:
        fallback = f"{repo}@{version} not in {RELEASE_DATES_FILE} (run with --refresh-dates)"
    elif not entry.get("release"):
        fallback = f"no final {version} release of {project} on PyPI"
    else:
        end = _dt.date.fromisoformat(str(entry["uploaded"])[:10])
        end_note = f"{project} {entry['release']}, the newest final {version} release on PyPI, uploaded {end}"
        if entry.get("next_uploaded") and str(entry["next_uploaded"]) < str(entry["uploaded"]):
            end = _dt.date.fromisoformat(str(entry["next_uploaded"])[:10])
            end_note = (
                f"{project} {entry['next_release']}, the first release after the {version} series, uploaded {end} "
                f"({entry['release']}, the newest final {version} release, came {str(entry['uploaded'])[:10]})"
            )
        day = end + _dt.timedelta(days=SERIES_MARGIN_DAYS)
        why = f"{end_note}, + {SERIES_MARGIN_DAYS} days"
        cap = _dt.date.fromisoformat(str(entry["retrieved"])) - _dt.timedelta(days=1)
        if day > cap:
            day, why = cap, f"{why}, capped at the day before its lookup ({entry['retrieved']})"
        candidates.append((day, why))
    if python not in PYTHON_RELEASES:
        raise InputError(
            f"SWE-bench spec {repo}@{version}: Python {python} is not in PYTHON_RELEASES; add its release date"
        )
    released = PYTHON_RELEASES[python]
    candidates.append(
        (
            released + _dt.timedelta(days=PYTHON_WHEEL_LAG_DAYS),
            f"Python {python} (released {released}) + {PYTHON_WHEEL_LAG_DAYS} days, for its wheels",
        )
    )
    day, why = max(candidates, key=lambda c: c[0])  # the first of equal dates wins
    if fallback:
        why = f"{why}; {fallback}"
    elif end_note and not why.startswith(end_note):
        why = f"{why}; {end_note}"
    return _midnight_after(day), why, fallback


def swebench_spec(repo: str, version: str, raw: dict[str, Any], series: dict[str, Any] | None = None) -> dict[str, Any]:
    """One SWE-bench spec; `series` is the release-date file's `swebench_series` table."""
    reqs, files_kind = swebench_requirements(raw)
    req_files: list[str] = []
    extra: dict[str, Any] = {}
    if files_kind:
        table = SWEBENCH_REQS_PATHS if files_kind == "requirements.txt" else SWEBENCH_ENV_YML_PATHS
        if repo not in table:
            raise InputError(f"SWE-bench spec {repo}@{version}: packages={files_kind} but no known path for {repo}")
        candidates = table[repo]
        req_files = [candidates[0]]
        if len(candidates) > 1:
            extra["requirements_files_alternatives"] = list(candidates[1:])
        if files_kind == "environment.yml":
            extra["requirements_files_format"] = "conda environment.yml"
    if raw.get("packages"):
        extra["swebench_packages"] = str(raw["packages"])
    pre_install, system_pre, pkgs_pre = split_system(str(c) for c in raw.get("pre_install") or [])
    eval_cmds, system_eval, pkgs_eval = split_system(str(c) for c in raw.get("eval_commands") or [])
    system_cmds = system_pre + system_eval
    if system_cmds:
        extra["system_commands"] = system_cmds
    system_pkgs = list(dict.fromkeys(pkgs_pre + pkgs_eval))
    install = [str(raw["install"])] if raw.get("install") else []
    if install:
        # The harness reruns the install right before the tests (picks up the model patch
        # for non-editable installs such as `python setup.py install`).
        extra["eval_install"] = install[0]
    for key in ("execute_test_as_nonroot", "no_use_env", "nano_cpus"):
        if key in raw:
            extra[key] = raw[key]
    test_cmd = ACTIVATE + "".join(f"{c}; " for c in eval_cmds) + str(raw["test_cmd"])
    name = f"{repo}@{version}"
    exclude_newer, date_note, _ = swebench_as_of(repo, version, str(raw["python"]), (series or {}).get(name))
    extra["exclude_newer_source"] = date_note
    return {
        "name": name,
        "kind": "swebench",
        "source": f"https://github.com/{repo}.git",
        "commit": None,
        "python": str(raw["python"]),
        "exclude_newer": exclude_newer,
        "requirements": reqs,
        "requirements_files": req_files,
        **({"system_packages": system_pkgs} if system_pkgs else {}),
        "pre_install": pre_install,
        "install": install,
        "test_cmd": test_cmd,
        "log_parser": SWEBENCH_PARSERS.get(repo, "pytest"),
        "timeout": SWEBENCH_TIMEOUT,
        "extra": extra,
    }


def _swebench_data(shared: Path) -> tuple[Path, dict[str, Any]]:
    path = shared / "swebench_python_specs.json"
    data = _load_json(path)
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected an object repo -> version -> spec")
    return path, data


def _swebench_entries(data: dict[str, Any]) -> Iterable[tuple[str, str, dict[str, Any], str | None]]:
    """(repo, version, raw spec, why it is skipped or None), in catalog order."""
    for repo in sorted(data, key=str.lower):
        if repo.startswith("_"):
            continue
        versions = data[repo]
        for version in sorted(versions, key=version_key):
            raw = versions[version]
            if repo in SWEBENCH_NOT_GIT:
                why = "not a git repository"
            elif not raw.get("test_cmd"):
                why = "no test_cmd (the harness cannot run it)"
            elif not raw.get("python"):
                why = "no python version"
            else:
                why = None
            yield repo, version, raw, why


def swebench_specs(
    shared: Path, series: dict[str, Any] | None = None
) -> tuple[list[dict[str, Any]], dict[str, Any], list[str], list[str]]:
    """(specs, inputs, skipped specs, specs dated by the floor for want of a release)."""
    path, data = _swebench_data(shared)
    specs: list[dict[str, Any]] = []
    skipped: list[str] = []
    fallbacks: list[str] = []
    for repo, version, raw, why in _swebench_entries(data):
        name = f"{repo}@{version}"
        if why:
            skipped.append(f"{name}: {why}")
            continue
        specs.append(swebench_spec(repo, version, raw, series))
        _, _, fallback = swebench_as_of(repo, version, str(raw["python"]), (series or {}).get(name))
        if fallback:
            fallbacks.append(f"{name}: {fallback}")
    inputs = {"swebench_python_specs.json": f"sha256:{sha256_file(path)}"}
    return specs, inputs, skipped, fallbacks


# --------------------------------------------------------------------------------------
# Output
# --------------------------------------------------------------------------------------


class _Dumper(yaml.SafeDumper):
    """Block style, lists indented under their key, long lines never folded."""

    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:  # noqa: D102
        super().increase_indent(flow, False)


def render(specs: list[dict[str, Any]], *, title: str, inputs: dict[str, str], notes: list[str]) -> str:
    ordered = [{k: s[k] for k in FIELDS if k in s and (k != "extra" or s[k])} for s in specs]
    body = yaml.dump(
        {"specs": ordered},
        Dumper=_Dumper,
        sort_keys=False,
        default_flow_style=False,
        allow_unicode=True,
        width=1 << 16,
    )
    header = [
        f"# {title}",
        "# Generated by scripts/gen_catalog.py; do not edit by hand. Regenerate with:",
        "#   .venv/bin/python scripts/gen_catalog.py --shared ../shared/data --out config/catalog",
        "# Inputs:",
        *(f"#   {k}: {v}" for k, v in inputs.items()),
        f"# Specs: {len(specs)}",
        *(f"# {n}" for n in notes),
    ]
    return "\n".join(header) + "\n" + body


def series_digest(series: dict[str, Any]) -> str:
    """sha256 of the SWE-bench release-date table, as canonical JSON (for the header)."""
    text = json.dumps(series, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def swebench_notes(skipped: list[str], fallbacks: list[str]) -> list[str]:
    """The SWE-bench catalog's header notes: the date rule, its fallbacks, skipped specs."""
    notes = [
        f"As-of dates (exclude_newer, docs/catalog.md): the latest of the floor {SWEBENCH_FLOOR}; the newest",
        "  final release of the spec's series on PyPI, or the first release of a later series if earlier,",
        f"  + {SERIES_MARGIN_DAYS} days; and the spec's Python release + {PYTHON_WHEEL_LAG_DAYS} days.",
    ]
    if fallbacks:
        notes += ["Dated by the floor for want of a release date:", *(f"  {f}" for f in fallbacks)]
    if skipped:
        notes += ["Skipped:", *(f"  {s}" for s in skipped)]
    return notes


def generate(
    shared: Path, release_dates: dict[str, str] | None = None, series: dict[str, Any] | None = None
) -> dict[str, str]:
    """File name -> YAML text, for every generated catalog. `series`: the SWE-bench
    release-date table (`load_swebench_series`)."""
    smith, smith_inputs = swesmith_specs(shared, release_dates)
    bench, bench_inputs, skipped, fallbacks = swebench_specs(shared, series)
    bench_inputs[f"{RELEASE_DATES_FILE} swebench_series"] = (
        f"{len(series or {})} series, sha256:{series_digest(series or {})}"
    )
    return {
        "swesmith.yaml": render(
            smith,
            title="SWE-smith environment specs (one per Python profile).",
            inputs=smith_inputs,
            notes=[],
        ),
        "swebench.yaml": render(
            bench,
            title="SWE-bench environment specs (one per repo@version; commit = the task's environment_setup_commit).",
            inputs=bench_inputs,
            notes=swebench_notes(skipped, fallbacks),
        ),
    }


def _count(text: str) -> int:
    return len(re.findall(r"^  - name: ", text, flags=re.MULTILINE))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--shared", type=Path, default=DEFAULT_SHARED, help=f"shared data dir (default {DEFAULT_SHARED})"
    )
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"output dir (default {DEFAULT_OUT})")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if --out is stale")
    parser.add_argument(
        "--dates", type=Path, default=None, help=f"release-date table (default {DEFAULT_OUT / RELEASE_DATES_FILE})"
    )
    parser.add_argument(
        "--refresh-dates",
        action="store_true",
        help="look what --dates lacks up once on PyPI (anchor pins, SWE-bench series) and add it",
    )
    args = parser.parse_args(argv)
    dates_path = args.dates or DEFAULT_OUT / RELEASE_DATES_FILE
    try:
        if args.refresh_dates:
            n = refresh_release_dates(args.shared, dates_path)
            print(f"{dates_path}: looked up {n} release(s)")
        outputs = generate(args.shared, load_release_dates(dates_path), load_swebench_series(dates_path))
    except InputError as exc:
        print(f"gen_catalog: {exc}", file=sys.stderr)
        return 2
    stale = []
    for name, text in outputs.items():
        path = args.out / name
        current = path.read_text(encoding="utf-8") if path.is_file() else None
        if current == text:
            print(f"{path}: up to date ({_count(text)} specs)")
            continue
        if args.check:
            stale.append(str(path))
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)
        print(f"{path}: written ({_count(text)} specs)")
    if stale:
        print(f"gen_catalog: stale: {', '.join(stale)}; rerun without --check", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
