"""Locks: complete freezes are kept verbatim; partial pins are resolved by uv."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from minisandbox.catalog import EnvSpec
from minisandbox.pipeline.resolve import ResolveError, is_exact, resolve


def _spec(**kw) -> EnvSpec:
    base = dict(
        name="x",
        kind="swesmith",
        source="s",
        commit="c" * 40,
        python="3.11",
        requirements=["pytest==8.3.3", "pluggy==1.5.0"],
    )
    base.update(kw)
    return EnvSpec.from_dict(base)


def test_exact_freeze_is_the_lock(tmp_path):
    lock = resolve(_spec(), tmp_path, tmp_path / "log")
    assert lock.no_deps and lock.text == "pluggy==1.5.0\npytest==8.3.3\n"
    assert is_exact(["a==1", "b[x]==2.0"]) and not is_exact(["a>=1"])


@pytest.mark.slow
def test_partial_pins_are_resolved_with_uv(tmp_path):
    """SWE-bench pin lists are partial: uv must add the dependencies (needs PyPI)."""
    lock = resolve(_spec(kind="swebench", requirements=["pytest==8.3.3"]), tmp_path, tmp_path / "log")
    names = {line.split("==")[0].lower() for line in lock.text.splitlines() if "==" in line}
    assert {"pytest", "pluggy", "iniconfig", "packaging"} <= names


def test_missing_requirements_file_is_a_clear_error(tmp_path):
    with pytest.raises(ResolveError, match="requirements.txt not found"):
        resolve(_spec(requirements_files=["requirements.txt"]), tmp_path, tmp_path / "log")


def _resolve_file_in_workdir(tmp_path: Path, monkeypatch, requirements_file: str):
    """Resolve a SWE-bench spec whose only input is `requirements_file` of the snapshot
    `work/repos/r`, named relative to `tmp_path` as the workflow names it, on the fixture index."""
    from tests.fixtures.fidelity import FixtureIndex

    monkeypatch.chdir(tmp_path)
    index = FixtureIndex()
    try:
        monkeypatch.setenv("UV_DEFAULT_INDEX", index.url)
        return resolve(
            _spec(kind="swebench", requirements=[], requirements_files=[requirements_file]),
            Path("work/repos/r"),
            tmp_path / "log",
        )
    finally:
        index.close()


def test_requirements_file_of_a_snapshot_given_as_a_relative_path(tmp_path, monkeypatch):
    """The workflow passes the snapshot relative to its directory (`work/repos/<key>`); the
    file and the files it includes (`-r tests.txt`) are read from there, not from uv's
    temporary directory (flask's `requirements/dev.txt` failed so)."""

    reqs = tmp_path / "work" / "repos" / "r" / "requirements"
    reqs.mkdir(parents=True)
    (reqs / "dev.txt").write_text("-r tests.txt\n")
    (reqs / "tests.txt").write_text("tinybackend==2.0\n")
    lock = _resolve_file_in_workdir(tmp_path, monkeypatch, "requirements/dev.txt")
    assert "tinybackend==2.0" in lock.text.splitlines()


def test_swebench_pins_replace_the_requirements_files_pins(tmp_path, monkeypatch):
    """SWE-bench pip-installs a spec's packages after its requirements file, replacing the
    file's pin of the same package: the spec's exact pin wins (one resolve would find the
    two pins unsatisfiable). SWE-smith specs are not changed."""
    from tests.fixtures.fidelity import FixtureIndex

    (tmp_path / "requirements").mkdir()
    (tmp_path / "requirements" / "dev.txt").write_text("tinybackend==2.0\n")
    index = FixtureIndex()
    try:
        monkeypatch.setenv("UV_DEFAULT_INDEX", index.url)
        lock = resolve(
            _spec(kind="swebench", requirements=["tinybackend==1.0"], requirements_files=["requirements/dev.txt"]),
            tmp_path,
            tmp_path / "log",
        )
        assert "tinybackend==1.0" in lock.text.splitlines()
        with pytest.raises(ResolveError, match="unsatisfiable|No solution"):
            resolve(
                _spec(kind="swesmith", requirements=["tinybackend==1.0"], requirements_files=["requirements/dev.txt"]),
                tmp_path,
                tmp_path / "log",
            )
    finally:
        index.close()


# -- as-of date -----------------------------------------------------------------------------


def test_exact_pins_newer_than_the_date_get_their_own_cutoff(tmp_path, monkeypatch) -> None:
    """The date is only a lower bound of the export's: a pin uploaded after it is kept
    exactly (its own cutoff just after its upload), and nothing else moves."""
    from minisandbox.pipeline.resolve import Lock
    from tests.fixtures.fidelity import AS_OF, FixtureIndex

    index = FixtureIndex()
    try:
        monkeypatch.setenv("UV_DEFAULT_INDEX", index.url)
        spec = EnvSpec(
            name="dated",
            kind="swesmith",
            source="x",
            commit="c" * 40,
            python="3.11",
            requirements=("tinybackend==2.0",),
            exclude_newer=AS_OF,
        )
        lock = resolve(spec, tmp_path, tmp_path / "resolve.log")
    finally:
        index.close()
    assert lock.no_deps and lock.text == "tinybackend==2.0\n"
    assert lock.exclude_newer == AS_OF and lock.exempt == (("tinybackend", "2030-01-02T00:00:00Z"),)
    assert lock.uv_date_args() == [
        "--exclude-newer",
        AS_OF,
        "--exclude-newer-package",
        "tinybackend=2030-01-02T00:00:00Z",
    ]
    assert "newer than" in (tmp_path / "resolve.log").read_text()
    undated = Lock(lock.text, True)
    assert undated.uv_date_args() == [] and undated.sha256 != lock.sha256


def test_swebench_conda_environment_file_is_resolved_from_pypi(tmp_path, monkeypatch):
    """xarray's spec installs `ci/requirements/environment.yml` (older releases: the
    alternative `environment.yml`): its conda packages are resolved as pip requirements,
    the interpreter and C libraries left out, and the spec's pins still win."""
    from tests.fixtures.fidelity import FixtureIndex

    (tmp_path / "environment.yml").write_text(
        "name: t\nchannels: [conda-forge]\ndependencies:\n  - python=3.10\n  - pip\n  - hdf5\n  - tinybackend=2\n"
    )
    spec = _spec(
        kind="swebench",
        requirements=[],
        requirements_files=["ci/requirements/environment.yml"],
        extra={"requirements_files_alternatives": ["environment.yml"]},
    )
    index = FixtureIndex()
    try:
        monkeypatch.setenv("UV_DEFAULT_INDEX", index.url)
        lock = resolve(spec, tmp_path, tmp_path / "log")
        assert lock.text.splitlines() == ["tinybackend==2.0"]
        pinned = _spec(**{**spec.__dict__, "requirements": ["tinybackend==1.0"]})
        assert "tinybackend==1.0" in resolve(pinned, tmp_path, tmp_path / "log").text.splitlines()
    finally:
        index.close()
    (tmp_path / "environment.yml").write_text("name: t\n")
    with pytest.raises(ResolveError, match="environment.yml of x: no `dependencies:` list"):
        resolve(spec, tmp_path, tmp_path / "log")


def test_local_paths_of_a_requirements_file_name_the_repository(tmp_path, monkeypatch):
    """pylint's requirements_test_min.txt holds `.[testutils]`: pip, run in /testbed, reads
    it as the repository with an extra, so its dependencies are resolved from the snapshot
    (not from the workflow's directory), and the repository itself stays out of the lock
    (the spec's install commands install it)."""

    repo = tmp_path / "work" / "repos" / "r"
    repo.mkdir(parents=True)
    (repo / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["tinybackend"]\nbuild-backend = "tinybackend"\n\n'
        '[project]\nname = "localpkg"\nversion = "0.1"\n'
        '[project.optional-dependencies]\ntestutils = ["tinybackend==1.0"]\n'
    )
    (repo / "requirements_test.txt").write_text(".[testutils]\n")
    lock = _resolve_file_in_workdir(tmp_path, monkeypatch, "requirements_test.txt")
    assert lock.text.splitlines() == ["tinybackend==1.0"]


#: An in-tree build backend as old setuptools is: wheels and their metadata, no PEP 660 hook.
_NO_EDITABLE_BACKEND = """
import base64, hashlib, os, zipfile
META = "Metadata-Version: 2.1\\nName: oldpkg\\nVersion: 0.1\\nProvides-Extra: testutils\\n" \\
    "Requires-Dist: tinybackend==1.0; extra == 'testutils'\\n"
def get_requires_for_build_wheel(config_settings=None):
    return []
def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    info = os.path.join(metadata_directory, "oldpkg-0.1.dist-info")
    os.makedirs(info)
    with open(os.path.join(info, "METADATA"), "w") as f:
        f.write(META)
    return "oldpkg-0.1.dist-info"
def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    name = "oldpkg-0.1-py3-none-any.whl"
    files = {"oldpkg-0.1.dist-info/METADATA": META.encode(),
             "oldpkg-0.1.dist-info/WHEEL": b"Wheel-Version: 1.0\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n"}
    record = []
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w") as z:
        for n, d in files.items():
            z.writestr(n, d)
            h = base64.urlsafe_b64encode(hashlib.sha256(d).digest()).rstrip(b"=").decode()
            record.append(f"{n},sha256={h},{len(d)}")
        z.writestr("oldpkg-0.1.dist-info/RECORD", "\\n".join(record + ["oldpkg-0.1.dist-info/RECORD,,"]) + "\\n")
    return name
"""


def test_an_editable_requirement_whose_backend_has_no_editable_hook_is_resolved_as_a_plain_one(tmp_path, monkeypatch):
    """pylint 2.15-2.17 pin `setuptools~=62.6` (no PEP 660 `build_editable`) and their
    requirements_test_min.txt (included by requirements_test.txt) holds
    `-e .[testutils,spelling]`: pip installs that with `setup.py develop`, uv fails the
    resolve. The lock needs only the extra's dependencies, which the plain metadata gives."""
    repo = tmp_path / "work" / "repos" / "r"
    repo.mkdir(parents=True)
    (repo / "oldbackend.py").write_text(_NO_EDITABLE_BACKEND)
    (repo / "pyproject.toml").write_text(
        '[build-system]\nrequires = []\nbuild-backend = "oldbackend"\nbackend-path = ["."]\n'
    )
    (repo / "requirements_test_min.txt").write_text("-e .[testutils]\n")
    (repo / "requirements_test.txt").write_text("-r requirements_test_min.txt\n")
    lock = _resolve_file_in_workdir(tmp_path, monkeypatch, "requirements_test.txt")
    assert lock.text.splitlines() == ["tinybackend==1.0"]
    log = (tmp_path / "log").read_text()
    assert "has no attribute 'build_editable'" in log  # (the first compile failed as pylint's did)
    assert "editables as plain requirements" in log
    assert (repo / "requirements_test_min.txt").read_text() == "-e .[testutils]\n"  # the snapshot untouched


def test_swebench_requirement_whose_only_releases_are_yanked_is_pinned_as_pip_installs_it(tmp_path, monkeypatch):
    """pip installs a yanked release when nothing else matches (sqlfluff's requirements_dev.txt
    asks for types-pkg-resources, whose only release is yanked); uv does only for an exact
    pin: the resolve pins it and resolves again."""
    from tests.fixtures.fidelity import FixtureIndex, wheel

    fn, data = wheel("oldtypes", "0.1.3", {"oldtypes/__init__.py": b""})
    (tmp_path / "requirements_dev.txt").write_text("oldtypes\n")
    server = FixtureIndex(extra={"oldtypes": [(fn, data, "use x")]})
    try:
        monkeypatch.setenv("UV_DEFAULT_INDEX", server.url)
        lock = resolve(
            _spec(kind="swebench", requirements=[], requirements_files=["requirements_dev.txt"]),
            tmp_path,
            tmp_path / "log",
        )
        assert lock.text.splitlines() == ["oldtypes==0.1.3"]
        assert "oldtypes==0.1.3 is yanked and the only match" in (tmp_path / "log").read_text()
        with pytest.raises(ResolveError, match="unsatisfiable"):  # SWE-smith specs are not changed
            resolve(
                _spec(kind="swesmith", requirements=[], requirements_files=["requirements_dev.txt"]),
                tmp_path,
                tmp_path / "log",
            )
    finally:
        server.close()


# -- build constraints for old source distributions -----------------------------------------


def test_an_old_sdist_is_built_with_the_setuptools_the_spec_pins(tmp_path, monkeypatch):
    """astropy 0.1-1.3 pin `setuptools==38.2.4` and `MarkupSafe==1.0`, an sdist whose setup.py
    imports `setuptools.Feature`: the harness's pip builds it with the environment's
    setuptools, uv in isolation with the newest, where it fails. The resolve tries again with
    the spec's setuptools (raised to the oldest uv's legacy backend takes) as a build
    constraint, and the lock carries that constraint to the build."""
    from minisandbox.pipeline.resolve import build_constraints
    from tests.fixtures.fidelity import old_sdist_index

    index = old_sdist_index()
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))  # no build of another run reused
    try:
        monkeypatch.setenv("UV_DEFAULT_INDEX", index.url)
        spec = _spec(kind="swebench", requirements=["setuptools==40.8.0", "oldsdist==1.0"])
        lock = resolve(spec, tmp_path, tmp_path / "log")
        log = (tmp_path / "log").read_text()
        assert "cannot import name 'Feature'" in log  # the first compile failed as astropy 1.3's did
        assert "oldsdist==1.0 did not build: again with" in log
        assert lock.text.splitlines() == ["oldsdist==1.0", "setuptools==40.8.0"]
        assert lock.build_constraints == ("setuptools<=40.8.0",)
        assert lock.sha256 != dataclasses.replace(lock, build_constraints=()).sha256
        unpinned = _spec(kind="swebench", requirements=["oldsdist==1.0"])
        assert build_constraints(unpinned) == ()
        monkeypatch.setattr("minisandbox.pipeline.resolve._spec_interpreter", lambda spec: None)
        with pytest.raises(
            ResolveError, match="building `oldsdist==1.0` failed: .*cannot import name 'Feature'"
        ):  # nothing to try again with
            resolve(unpinned, tmp_path, tmp_path / "log")
    finally:
        index.close()


def test_build_constraints_follow_the_spec_setuptools_pin():
    """The constraint is the spec's own setuptools, or the oldest uv's legacy builds take."""
    from minisandbox.pipeline.resolve import build_constraints

    assert build_constraints(_spec(requirements=["setuptools==68.0.0", "x==1"])) == ("setuptools<=68.0.0",)
    assert build_constraints(_spec(requirements=["SetupTools==38.2.4"])) == ("setuptools<=40.8.0",)
    assert build_constraints(_spec(requirements=["setuptools>=40", "setuptools-scm==8.0"])) == ()
