"""Canonical paths: where things live inside every build namespace and sandbox.

Environments are built and run at these fixed paths (bound by a mount namespace), so a
venv never has to be relocated; see docs/design.md.
"""

from __future__ import annotations

import os
from pathlib import Path

REPO_PATH = "/testbed"
VENV_PATH = "/opt/miniconda3/envs/testbed"
CONDA_ROOT = "/opt/miniconda3"
#: HOME in every build and sandbox (as in the reference images): what a build leaves there
#: (caches a suite fills when collected) is packed with the environment.
HOME_PATH = "/root"
#: Inside an environment's venv: the test modules' assertion-rewritten pycs the build's
#: collection warm-up made, for the eval script (`minisandbox.pipeline.testpycs`).
TEST_PYCS_DIR = ".minisandbox/test-pycs"
#: The files whose content decides how pytest rewrites asserts (its ini options): the cached
#: pycs are used only while every such file of the tree is as the build saw it.
PYTEST_CONFIG_NAMES = (
    "pytest.ini",
    ".pytest.ini",
    "pytest.toml",
    ".pytest.toml",
    "tox.ini",
    "setup.cfg",
    "pyproject.toml",
)

#: Default store the default config publishes to (relative to the project workdir).
DEFAULT_STORE = "results/store"


def project_root() -> Path:
    """The checkout root, found from this file (src layout), for locating config/."""
    return Path(__file__).resolve().parents[2]


def default_store(cwd: Path | None = None) -> str:
    """`--store` default, which follows the user and never the install location:
    $MINISANDBOX_STORE, else the `store:` of the workflow config in the current directory
    (`config/config.yaml`, as `snakemake` there would publish to; relative to that
    directory), else `./results/store`."""
    env = os.environ.get("MINISANDBOX_STORE")
    if env:
        return env
    cwd = Path.cwd() if cwd is None else Path(cwd)
    store = _workflow_config_store(cwd / "config" / "config.yaml")
    if store:
        return store if "://" in store else str(cwd / store)
    return str(cwd / DEFAULT_STORE)


def default_store_origin(cwd: Path | None = None) -> tuple[str, str]:
    """`default_store()` and where it came from, in words, for error messages: the default
    follows the current directory, so a command that works in the checkout fails elsewhere."""
    if os.environ.get("MINISANDBOX_STORE"):
        return os.environ["MINISANDBOX_STORE"], "from $MINISANDBOX_STORE"
    cwd = Path.cwd() if cwd is None else Path(cwd)
    store = default_store(cwd)
    config = cwd / "config" / "config.yaml"
    if _workflow_config_store(config):
        return store, f"the store: of {config}"
    return store, f"the default ./{DEFAULT_STORE} under the current directory"


def _workflow_config_store(path: Path) -> str | None:
    """The `store:` of a workflow config file, None when there is no file or no field."""
    if not path.is_file():
        return None
    import yaml  # lazily: most callers never get here

    from minisandbox.errors import MinisandboxError

    try:
        doc = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise MinisandboxError(
            f"{path}: cannot read the workflow config for its store field "
            f"({str(exc).splitlines()[0]}): fix it or pass --store"
        ) from None
    if not isinstance(doc, dict) or doc.get("store") is None:
        return None
    if not isinstance(doc["store"], str) or not doc["store"].strip():
        raise MinisandboxError(
            f"{path}: field store must be a path or URL, not {doc['store']!r}: fix it or pass --store"
        )
    return doc["store"].strip()


def cache_dir() -> Path:
    """Node-local cache root: $MINISANDBOX_CACHE or ~/.cache/minisandbox."""
    env = os.environ.get("MINISANDBOX_CACHE")
    if env:
        return Path(env)
    return Path(os.path.expanduser("~/.cache/minisandbox"))


def state_dir() -> Path:
    """Node state (crash cleanup records, minisandbox.sandbox.leftovers):
    $MINISANDBOX_STATE or <cache_dir()>/state."""
    env = os.environ.get("MINISANDBOX_STATE")
    if env:
        return Path(env)
    return cache_dir() / "state"
