"""scripts/launcher.py, the `minisandbox` command scripts/setup.sh installs over the
installer's console script: the same CLI for every command, a `run` handed to a running
node-local helper before the interpreter imports `site`, and a fresh start where the
environment is no longer the one the launcher was written for.

Timing is measured in bench/bench_cli.py (its console-script rows), not here.
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

import minisandbox
from tests.fixtures.runtime import build_local_store

ROOT = Path(__file__).resolve().parents[2]
TASK = "launcher__task.0"


def _installer():
    spec = importlib.util.spec_from_file_location("install_launcher", ROOT / "scripts" / "install_launcher.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def launcher(tmp_path_factory) -> str:
    dest = tmp_path_factory.mktemp("launcher") / "minisandbox"
    _installer().install(sys.executable, str(dest))
    return str(dest)


def imported(stderr: str) -> set[str]:
    """Module names from PYTHONPROFILEIMPORTTIME's lines."""
    return {ln.split("|")[-1].strip() for ln in stderr.splitlines() if ln.startswith("import time:")} - {"package"}


def test_the_launcher_is_this_environment_s_cli(launcher) -> None:
    first = Path(launcher).read_text().splitlines()[0]
    assert first == f"#!{sys.executable} -S"
    package_parent = str(Path(minisandbox.__file__).resolve().parents[1])
    assert package_parent in _installer().site_paths(sys.executable), "the editable install's src/ is added by site"
    env = {"PATH": "/usr/bin:/bin", "HOME": "/nonexistent"}
    version = subprocess.run([launcher, "--version"], env=env, capture_output=True, text=True, timeout=60)
    assert (version.returncode, version.stdout) == (0, f"minisandbox {minisandbox.__version__}\n"), version.stderr
    usage = subprocess.run([launcher, "--help"], env=env, capture_output=True, text=True, timeout=60)
    assert usage.returncode == 0 and usage.stdout.startswith("usage: minisandbox "), usage.stderr
    bad = subprocess.run([launcher, "no-such-command"], env=env, capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "no-such-command" in bad.stderr


def test_a_launcher_of_another_environment_imports_the_package_afresh(tmp_path) -> None:
    """SITE_PATHS that `site` no longer adds (here: a directory with another `minisandbox`
    ahead of the real one): what was imported before `site` is dropped and the CLI that a
    full start finds answers."""
    fake = tmp_path / "elsewhere" / "minisandbox"
    (fake / "cli").mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "cli" / "__init__.py").write_text(
        "def _command_word(argv):\n    return None\n\ndef main(**kw):\n    print('the other package')\n    return 5\n"
    )
    installer = _installer()
    dest = tmp_path / "minisandbox"
    dest.write_text(installer.render(sys.executable, [str(fake.parent), *installer.site_paths(sys.executable)]))
    dest.chmod(0o755)
    out = subprocess.run([str(dest), "--version"], env={"PATH": "/usr/bin:/bin"}, capture_output=True, text=True)
    assert (out.returncode, out.stdout) == (0, f"minisandbox {minisandbox.__version__}\n"), out.stderr


@pytest.mark.root
def test_run_goes_to_the_helper_before_site_and_in_process_without_one(as_root, launcher, tmp_path) -> None:
    store = build_local_store(tmp_path / "work", TASK)
    runtime = tempfile.mkdtemp(prefix="msbl-", dir="/tmp")
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "MINISANDBOX_CACHE": str(tmp_path / "cache"),
        "MINISANDBOX_RUNTIME_DIR": runtime,
        "MINISANDBOX_HELPER": "use",
    }
    args = [launcher, "run", "--store", store, TASK, "--", "echo through"]
    try:
        fetched = subprocess.run([launcher, "fetch", "--store", store, TASK], env=env, capture_output=True, timeout=300)
        assert fetched.returncode == 0, fetched.stderr
        started = subprocess.run([launcher, "helper", "start"], env=env, capture_output=True, cwd="/", timeout=120)
        assert started.returncode == 0, started.stderr
        through = subprocess.run(
            args, env={**env, "PYTHONPROFILEIMPORTTIME": "1"}, capture_output=True, text=True, timeout=120
        )
        assert (through.returncode, through.stdout) == (0, "through\n"), through.stderr
        modules = imported(through.stderr)
        assert "minisandbox.cli.helperclient" in modules
        assert {"site", "argparse", "minisandbox.cli.sandboxcmds"} & modules == set(), "not served by the helper"
        off = {**env, "MINISANDBOX_HELPER": "off", "PYTHONPROFILEIMPORTTIME": "1"}
        alone = subprocess.run(args, env=off, capture_output=True, text=True, timeout=120)
        assert (alone.returncode, alone.stdout) == (0, "through\n"), alone.stderr
        assert {"site", "minisandbox.cli.sandboxcmds"} <= imported(alone.stderr)
    finally:
        subprocess.run([launcher, "helper", "stop"], env=env, capture_output=True, timeout=120)
        shutil.rmtree(runtime, ignore_errors=True)
