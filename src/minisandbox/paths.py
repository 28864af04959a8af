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
