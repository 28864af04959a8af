"""External tools every subsystem may call, found the same way everywhere.

Contract level: imports nothing from the subsystems.
"""

from __future__ import annotations

import shutil

from minisandbox.errors import MinisandboxError


class ToolMissing(MinisandboxError, FileNotFoundError):
    """An external tool a step needs is not installed."""


def uv_bin() -> str:
    """The uv executable that ships with the `uv` PyPI package (the `pipeline` extra), or
    `uv` on PATH. A core install (rollout nodes) has neither unless it builds environments."""
    try:
        from uv import find_uv_bin
    except ImportError:
        found = shutil.which("uv")
        if found:
            return found
        raise ToolMissing(
            "uv is not installed: building environments needs it; "
            "pip install 'minisandbox[pipeline]' (or put uv on PATH)"
        ) from None
    return find_uv_bin()
