"""Attack: take every pseudo-terminal of the node.

The kernel has one pool of ptys for every devpts instance but the host's first one
(`kernel.pty.max` 4096 minus `kernel.pty.reserve` 1024). Each sandbox mounts its own
instance, and one payload held 3,069 of them: another sandbox's `/dev/ptmx` then failed with
ENOSPC (as would any container's on the node). Each sandbox's instance is now capped
(`init_program.DEVPTS_MAX`), so one sandbox cannot empty the pool.
"""

from __future__ import annotations

import pytest

from minisandbox.sandbox.init_program import DEVPTS_MAX
from tests.security.conftest import MODES

HOG = """
import os, time
fds = []
try:
    while len(fds) < 4000:
        fds.append(os.open("/dev/ptmx", os.O_RDWR | os.O_NOCTTY))
except OSError:
    pass
with open("/tmp/held", "w") as fh:
    fh.write(str(len(fds)))
time.sleep(60)
"""

BODY = """
    probe = "import os; os.open('/dev/ptmx', os.O_RDWR | os.O_NOCTTY); print('pty')"
    with Sandbox([Layer(P["repo"], "/testbed")]) as a, Sandbox([Layer(P["repo"], "/testbed")]) as b:
        a.write_file("/tmp/hog.py", P["hog"])
        held = a.run(["bash", "-c", "python3 /tmp/hog.py >/dev/null 2>&1 & "
                      "for i in $(seq 300); do [ -s /tmp/held ] && break; sleep 0.1; done; cat /tmp/held"])
        out["held"] = held.output
        out["other"] = b.run(["python3", "-c", probe]).output
"""


@pytest.mark.parametrize("attack", MODES, indirect=True)
def test_one_sandbox_cannot_take_every_pty_of_the_node(attack) -> None:
    out = attack(BODY, hog=HOG)
    assert out["held"].strip().isdigit() and 0 < int(out["held"]) <= DEVPTS_MAX, out
    assert out["other"] == "pty\n", out
