"""A conda environment file as pip requirements (SWE-bench installs xarray from one)."""

from __future__ import annotations

import pytest

from minisandbox.pipeline.condaenv import CondaEnvError, conda_requirement, pip_requirements

ENV_YML = """\
name: xarray-tests
channels:
  - conda-forge
dependencies:
  - python=3.10
  - pip
  - hdf5
  - dask-core
  - matplotlib-base
  - conda-forge::numpy=1.23
  - pandas>=1.5,<2
  - scipy 1.11.*
  - h5netcdf=1.1.0=pyhd8ed1ab_0
  - pytest  # a comment
  - pip:
      - pint>=0.22
      - -e .
"""


def test_environment_file_becomes_pip_requirements():
    assert pip_requirements(ENV_YML, "environment.yml") == [
        "dask",  # conda-forge's split package, `dask` on PyPI
        "matplotlib",
        "numpy==1.23.*",  # conda's `=1.23` is a prefix match
        "pandas>=1.5,<2",
        "scipy==1.11.*",
        "h5netcdf==1.1.0.*",  # the build string is conda's alone
        "pytest",
        "pint>=0.22",  # the pip section as it is, without the repository's own `-e .`
    ]


def test_packages_without_a_pypi_distribution_are_left_out():
    assert [conda_requirement(d) for d in ("python=3.10", "pip", "hdf5", "libnetcdf", "iris")] == [
        None,
        None,
        None,
        None,
        "scitools-iris",
    ]


@pytest.mark.parametrize(
    "text, message",
    [
        ("name: x\n", "no `dependencies:` list"),
        ("dependencies: [1: 2: 3", "not a YAML conda environment file"),
        ("dependencies:\n  - {conda: [numpy]}\n", "neither a package spec nor a `pip:` list"),
    ],
)
def test_a_file_that_is_no_environment_file_is_one_clear_error(text, message):
    with pytest.raises(CondaEnvError, match=message) as err:
        pip_requirements(text, "ci/environment.yml of pydata/xarray@2024.05")
    assert str(err.value).startswith("ci/environment.yml of pydata/xarray@2024.05: ")
