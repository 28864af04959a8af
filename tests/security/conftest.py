"""Shared set-up of the attack tests: a payload runner as root and as the unprivileged
test user (`msbtest`, see tests/fixtures/sandbox.py), each attack in a fresh Python process
that builds a real sandbox and prints one JSON document."""

from __future__ import annotations

import pytest

from tests.fixtures.sandbox import MODES, payload_runner

__all__ = ["MODES", "PRELUDE", "attack"]

PRELUDE = """
import json, os, sys
from minisandbox.sandbox.sandbox import Sandbox, Layer
from minisandbox.sandbox.limits import Limits
P = json.loads(sys.argv[1])
out = {}
"""


@pytest.fixture
def attack(request):
    """`attack(body, **params) -> dict`: run `body` (Python; fills `out`) as root or as the
    test user, with a small git repo layer at P["repo"] owned by whoever runs it
    (tests.fixtures.sandbox.payload_runner)."""
    yield from payload_runner(request, "msb-sec-", PRELUDE, "the attack tests")
