"""A conda `environment.yml` as pip requirements.

SWE-bench installs some repositories (xarray) from a conda environment file: it creates
the env with the spec's Python, then `conda env update -f environment.yml` from
conda-forge, then pip-installs the spec's packages over it. Environments here are built
with uv from PyPI, so the file's packages are translated: conda-forge names that differ
on PyPI are renamed, packages that are not Python distributions (C libraries that the
wheels bundle, the interpreter, pip itself) are left out, conda's version syntax becomes
PEP 440 (`numpy=1.23` is conda's "1.23.*"), and the `pip:` section is taken as it is.
"""

from __future__ import annotations

import re

import yaml

from minisandbox.errors import MinisandboxError
from minisandbox.pipeline.failures import one_line

#: conda-forge package -> its PyPI distribution, where the names differ.
CONDA_TO_PYPI = {
    "dask-core": "dask",
    "matplotlib-base": "matplotlib",
    "iris": "scitools-iris",
    "pytorch": "torch",
    "pytables": "tables",
    "msgpack-python": "msgpack",
    "python-graphviz": "graphviz",
    "pyqt": "PyQt5",
}

#: conda-forge packages that are no Python distribution (or are the installer itself):
#: the interpreter comes from the spec, the C libraries ship inside the PyPI wheels.
NOT_ON_PYPI = frozenset(
    {
        "python",
        "pip",
        "hdf5",
        "libnetcdf",
        "netcdf-c",
        "gdal",
        "libgdal",
        "geos",
        "proj",
        "graphviz",
        "zlib",
        "blas",
        "mkl",
        "openblas",
        "cudatoolkit",
        "compilers",
        "c-compiler",
        "cxx-compiler",
        "fortran-compiler",
        "make",
    }
)

_MATCH = re.compile(r"^(?:[\w.-]+::)?([A-Za-z0-9_.-]+)\s*(.*)$")


class CondaEnvError(MinisandboxError, ValueError):
    pass


def conda_requirement(dep: str) -> str | None:
    """One conda match spec as a pip requirement, or None when it has no PyPI counterpart."""
    m = _MATCH.match(dep.strip())
    if m is None:
        raise CondaEnvError(f"not a conda package spec: {dep!r}")
    name, version = m.group(1), m.group(2).replace(" ", "")
    if name.lower() in NOT_ON_PYPI:
        return None
    name = CONDA_TO_PYPI.get(name.lower(), name)
    if not version:
        return name
    if version[0] == "=" and not version.startswith("=="):
        version = version[1:].split("=")[0]  # `=1.2=py_0`: the version, without the build
    if version[0].isdigit():  # `=1.2` / `numpy 1.23`: conda's fuzzy match, a prefix
        return f"{name}=={version}" if version.endswith("*") else f"{name}=={version}.*"
    return f"{name}{version}"


def pip_requirements(text: str, what: str) -> list[str]:
    """The pip requirements of a conda environment file's text (`what` names it in errors)."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise CondaEnvError(f"{what}: not a YAML conda environment file ({one_line(str(exc))})") from None
    deps = data.get("dependencies") if isinstance(data, dict) else None
    if not isinstance(deps, list):
        raise CondaEnvError(f"{what}: no `dependencies:` list (is it a conda environment file?)")
    out: list[str] = []
    for dep in deps:
        if isinstance(dep, dict) and set(dep) == {"pip"} and isinstance(dep["pip"], list):
            # pip options and local paths (`-e .`, `-r file`) are relative to the file: the
            # install commands of the spec install the repository itself
            out += [str(r).strip() for r in dep["pip"] if not str(r).strip().startswith(("-", "."))]
        elif isinstance(dep, str):
            if (req := conda_requirement(dep)) is not None:
                out.append(req)
        else:
            raise CondaEnvError(f"{what}: dependency {dep!r} is neither a package spec nor a `pip:` list")
    return out
