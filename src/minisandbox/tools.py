"""External tools every subsystem may call, found the same way everywhere.

Contract level: imports nothing from the subsystems.
"""

from __future__ import annotations


def uv_bin() -> str:
    """The uv executable that ships with the `uv` PyPI package (no separate install)."""
    from uv import find_uv_bin

    return find_uv_bin()
