"""pipeline/build: the venv seed's setuptools and wheel are resolved as of the spec's date;
pip, the installer, is the newest for the venv's Python.

The seed is the one part of a build that nothing pins for a SWE-bench spec: built today,
its setuptools had no `pkg_resources` (docs/fidelity.md). Here uv seeds a venv from a
loopback index with two releases of each seed package, one before and one after the date.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from minisandbox.pipeline.build import OWN_UV, build_script, passthrough_env, seed_lines
from minisandbox.pipeline.resolve import Lock
from minisandbox.tools import uv_bin
from tests.fixtures.fidelity import AS_OF, NEW_RELEASE, OLD_RELEASE, FixtureIndex, wheel

SEED = ("pip", "setuptools", "wheel")


@pytest.fixture(scope="module")
def seed_index():
    """pip, setuptools and wheel 1.0 (uploaded 2020) and 2.0 (2030), each with a module, so
    the build's look-up of setuptools and wheel finds them; and pip 25.1 (2030), which the
    seed never takes (`build.PIP_SEED`: it has no legacy editable install)."""
    releases = {"pip": (("1.0", OLD_RELEASE), ("2.0", NEW_RELEASE), ("25.1", NEW_RELEASE))}
    dated = {
        name: [
            (*wheel(name, version, {f"{name}/__init__.py": f"VERSION = {version!r}\n".encode()}), uploaded)
            for version, uploaded in releases.get(name, (("1.0", OLD_RELEASE), ("2.0", NEW_RELEASE)))
        ]
        for name in SEED
    }
    index = FixtureIndex(dated=dated)
    yield index
    index.close()


def _uv_env(home: Path, index: FixtureIndex) -> dict[str, str]:
    """A bare environment for the build's uv lines: `home` as HOME with its own uv cache,
    packages from the fixture index, no interpreter downloads."""
    return {
        "PATH": f"{Path(uv_bin()).parent}:/usr/bin:/bin",
        "HOME": str(home),
        "UV_CACHE_DIR": str(home / "uv-cache"),
        "UV_DEFAULT_INDEX": index.url,
        "UV_PYTHON_DOWNLOADS": "never",
    }


def _seed(index: FixtureIndex, tmp_path: Path, lock: Lock) -> dict[str, str]:
    """Run the build's seed lines into a fresh venv; name -> installed version."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    venv = tmp_path / "venv"
    script = "set -euo pipefail\n" + "\n".join(seed_lines(sys.executable, str(venv), lock, uv="uv")) + "\n"
    env = {**_uv_env(tmp_path, index), "UV_NO_CONFIG": "1"}
    proc = subprocess.run(["bash", "-c", script], env=env, cwd=tmp_path, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    site = next((venv / "lib").glob("python3*/site-packages"))
    found = {}
    for info in site.glob("*.dist-info"):
        name, _, version = info.name.removesuffix(".dist-info").partition("-")
        found[name] = version
    return found


def test_the_seed_is_resolved_as_of_the_date(seed_index: FixtureIndex, tmp_path: Path) -> None:
    dated = _seed(seed_index, tmp_path / "dated", Lock("", True, AS_OF))
    # pip is not dated (one as of an old date cannot make PEP 660 editable installs), but
    # stays below 25.1 (no legacy editable install there)
    assert {n: dated.get(n) for n in SEED} == {"pip": "2.0", "setuptools": "1.0", "wheel": "1.0"}
    # without a date the newest release is seeded: the date is what made the difference
    today = _seed(seed_index, tmp_path / "today", Lock("", True))
    assert {n: today.get(n) for n in SEED} == {"pip": "2.0", "setuptools": "2.0", "wheel": "2.0"}


def test_a_pin_newer_than_the_date_keeps_its_own_cutoff_in_the_seed(seed_index: FixtureIndex, tmp_path: Path) -> None:
    """A lock's exemption (a pin newer than the date, `resolve._compile`) applies to the
    seed too: setuptools is exempt here, wheel stays as of the date."""
    lock = Lock("", True, AS_OF, (("setuptools", "2031-01-01T00:00:00Z"),))
    found = _seed(seed_index, tmp_path, lock)
    assert {n: found.get(n) for n in SEED} == {"pip": "2.0", "setuptools": "2.0", "wheel": "1.0"}


def _sdist(name: str, version: str, files: dict[str, str]) -> tuple[str, bytes]:
    """A source distribution (file name, bytes) holding `files` under `<name>-<version>/`."""
    import io
    import tarfile

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for path, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(f"{name}-{version}/{path}")
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return f"{name}-{version}.tar.gz", buf.getvalue()


def test_an_undeclared_build_requirement_comes_from_the_build_config(tmp_path: Path) -> None:
    """A package whose build imports a module it does not declare (fasttext's setup.py and
    pybind11) builds once `uv_config` names that module for it, and fails without it."""
    from minisandbox.pipeline.build import uv_config

    sdist = _sdist(
        "needsdep",
        "1.0",
        {
            "pyproject.toml": '[build-system]\nrequires = ["tinybackend"]\nbuild-backend = "needsdep_backend"\n'
            'backend-path = ["."]\n\n[project]\nname = "needsdep"\nversion = "1.0"\n',
            "needsdep_backend.py": "import helperdep  # not in [build-system] requires\nfrom tinybackend import *\n",
            "needsdep.py": "VALUE = 42\n",
        },
    )
    helper = wheel("helperdep", "1.0", {"helperdep.py": b"MARK = 1\n"})
    index = FixtureIndex(dated={"needsdep": [(*sdist, OLD_RELEASE)], "helperdep": [(*helper, OLD_RELEASE)]})
    uv = uv_bin()
    try:

        def install(name: str, config: str) -> subprocess.CompletedProcess:
            work = tmp_path / name
            work.mkdir()
            (work / "uv.toml").write_text(config)
            env = {
                "PATH": "/usr/bin:/bin",
                "HOME": str(work),
                "UV_CACHE_DIR": str(work / "cache"),  # (a wheel built in the other case is not reused)
                "UV_CONFIG_FILE": str(work / "uv.toml"),
                "UV_DEFAULT_INDEX": index.url,
                "UV_PYTHON_DOWNLOADS": "never",
            }
            subprocess.run([uv, "venv", "-q", "--python", sys.executable, str(work / "venv")], env=env, check=True)
            return subprocess.run(
                [uv, "pip", "install", "--python", str(work / "venv"), "needsdep"],
                env=env,
                capture_output=True,
                text=True,
            )

        without = install("without", uv_config({}))
        assert without.returncode != 0 and "helperdep" in without.stderr, without.stderr
        declared = install("declared", uv_config({"needsdep": ("helperdep",)}))
        assert declared.returncode == 0, declared.stderr
        site = next((tmp_path / "declared" / "venv" / "lib").glob("python3*/site-packages"))
        assert (site / "needsdep.py").read_text() == "VALUE = 42\n"
    finally:
        index.close()


def test_only_the_builds_own_uv_reads_its_config() -> None:
    """The build's uv.toml names settings an older uv refuses (`extra-build-dependencies`):
    pydantic's install runs `pipx install uv` (0.6.3) then `uv sync`, which failed on it while
    `UV_CONFIG_FILE` pointed there. The build's own uv commands get `--config-file`; the
    spec's commands run verbatim, and no host `UV_CONFIG_FILE` reaches them."""
    from minisandbox.catalog import EnvSpec

    spec = EnvSpec(
        name="p",
        kind="swesmith",
        source="x",
        commit="0" * 40,
        python="3.11",
        test_cmd="pytest",
        install=["uv sync --frozen"],
    )
    lines = build_script(spec, Lock(text="six==1.16.0\n", no_deps=True), "/usr/bin/python3").splitlines()
    own = [ln for ln in lines if ln.split(" ", 1)[0] == "uv" and not ln.startswith("uv sync")]
    assert own and all(ln.startswith(OWN_UV + " ") for ln in own), own
    assert "uv sync --frozen" in lines
    host = {"UV_CONFIG_FILE": "/etc/uv/site.toml", "UV_INDEX_URL": "http://mirror/simple", "HOME": "/root"}
    assert passthrough_env(host, {}) == {"UV_INDEX_URL": "http://mirror/simple"}


def test_a_sites_git_mirror_rules_reach_the_build(tmp_path: Path) -> None:
    """An offline site points GitHub URLs at its mirrors with git's `url.<dir>.insteadOf`;
    an install command that takes a dependency from a git URL (MONAI's requirements-dev.txt:
    `git+https://github.com/...`) needs those rules and the mirrors inside the build's
    private root, whose HOME has no `.gitconfig` and which shows the host system only."""
    from minisandbox.pipeline.build import git_mirror_binds
    from minisandbox.sandbox import rootfs

    host = {"GIT_CONFIG_GLOBAL": "/etc/site/gitconfig", "GIT_CONFIG_COUNT": "1", "GIT_DIR": "/x", "HOME": "/root"}
    assert passthrough_env(host, {}) == {"GIT_CONFIG_GLOBAL": "/etc/site/gitconfig", "GIT_CONFIG_COUNT": "1"}

    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    mirror = tmp_path / "mirrors" / "dep.git"
    src = tmp_path / "src"
    src.mkdir()
    (src / "dep.py").write_text("MARK = 7\n")
    subprocess.run([*git, "init", "-q", str(src)], check=True)
    subprocess.run([*git, "-C", str(src), "add", "."], check=True)
    subprocess.run([*git, "-C", str(src), "commit", "-qm", "dep"], check=True)
    subprocess.run(["git", "clone", "-q", "--bare", str(src), str(mirror)], check=True)
    config = tmp_path / "site" / "gitconfig"
    config.parent.mkdir()
    config.write_text(f'[url "{mirror}"]\n\tinsteadOf = https://github.com/example/dep.git\n[safe]\n\tdirectory = *\n')
    environ = {"GIT_CONFIG_GLOBAL": str(config)}
    binds = git_mirror_binds(environ)
    assert [(b.source, b.target, b.readonly) for b in binds] == [
        (str(config), str(config), True),
        (str(mirror), str(mirror), True),
    ]
    out = tmp_path / "out"
    out.mkdir()
    env = {"PATH": "/usr/bin:/bin", "HOME": "/root", "GIT_CONFIG_GLOBAL": str(config)}
    clone = ["git", "clone", "-q", "--filter=blob:none", "https://github.com/example/dep.git", "/work/dep"]
    log = tmp_path / "log"
    with log.open("w") as fh:
        rc = rootfs.run([rootfs.Bind(str(out), "/work", readonly=False), *binds], clone, env=env, stdout=fh, stderr=fh)
    assert rc == 0, log.read_text()
    assert (out / "dep" / "dep.py").read_text() == "MARK = 7\n"
    with log.open("w") as fh:  # without the binds the rule names paths the build cannot see
        rc = rootfs.run(
            [rootfs.Bind(str(out), "/work", readonly=False)], [*clone[:-1], "/work/dep2"], env=env, stdout=fh, stderr=fh
        )
    assert rc != 0 and not (out / "dep2" / "dep.py").exists()
    assert git_mirror_binds({}) == [] and git_mirror_binds({"GIT_CONFIG_GLOBAL": "relative"}) == []


def test_the_lock_is_installed_under_its_build_constraints(tmp_path: Path) -> None:
    """A lock that records build constraints (`resolve.build_constraints`: astropy 1.3's
    MarkupSafe 1.0 needs the spec's old setuptools) is installed under them: the build's
    own install line, run as the build runs it, builds the old sdist; without them it fails."""
    from minisandbox.catalog import EnvSpec
    from minisandbox.pipeline.build import BUILD_CONSTRAINTS, BUILD_DIR
    from tests.fixtures.fidelity import old_sdist_index

    spec = EnvSpec(name="p", kind="swebench", source="x", commit="0" * 40, python="3.11", test_cmd="pytest")
    index = old_sdist_index()
    try:
        for constraints in ((), ("setuptools<=40.8.0",)):
            work = tmp_path / f"with-{len(constraints)}"
            work.mkdir()
            lock = Lock(text="oldsdist==1.0\n", no_deps=True, build_constraints=constraints)
            (work / "lock.txt").write_text(lock.text)
            (work / BUILD_CONSTRAINTS).write_text("".join(f"{c}\n" for c in constraints))
            (work / "uv.toml").write_text("")
            [line] = [
                ln
                for ln in build_script(spec, lock, sys.executable).splitlines()
                if "lock.txt" in ln and ln.startswith("uv")
            ]
            assert ("--build-constraints" in line) == bool(constraints)
            env = _uv_env(work, index)
            subprocess.run(
                [uv_bin(), "venv", "-q", "--python", sys.executable, str(work / "venv")], env=env, check=True
            )
            proc = subprocess.run(
                ["bash", "-c", line.replace(f"{BUILD_DIR}/", f"{work}/")],
                env={**env, "VIRTUAL_ENV": str(work / "venv")},
                capture_output=True,
                text=True,
            )
            if constraints:
                assert proc.returncode == 0, proc.stderr
                assert list((work / "venv" / "lib").glob("python3*/site-packages/oldsdist-1.0.dist-info"))
            else:
                assert proc.returncode != 0 and "cannot import name 'Feature'" in proc.stderr, proc.stderr
    finally:
        index.close()
