"""Argument types shared by the command modules (one parser per kind of value)."""

from __future__ import annotations

import argparse

from minisandbox.errors import SizeError
from minisandbox.fsutil import parse_size


def size(text: str) -> int:
    """argparse type for sizes (`512M`, `2G`, a byte count): `fsutil.parse_size`, with its
    message shown by argparse."""
    try:
        return parse_size(text)
    except SizeError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
