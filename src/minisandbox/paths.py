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

#: Default store the default config publishes to (relative to the project workdir).
DEFAULT_STORE = "results/store"


def project_root() -> Path:
    """The checkout root, found from this file (src layout), for locating config/."""
    return Path(__file__).resolve().parents[2]


def default_store() -> str:
    """`--store` default: $MINISANDBOX_STORE or the default config's local store."""
    env = os.environ.get("MINISANDBOX_STORE")
    if env:
        return env
    return str(project_root() / DEFAULT_STORE)


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
