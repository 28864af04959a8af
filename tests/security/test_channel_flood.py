"""Attack: flood the results channel.

The code under test shares the results plugin's process (or connects first) and can
write to the channel's socket as fast as the kernel takes it. The controller's reader
thread kept every byte: 300 MiB from a sandbox with a 64 MiB memory limit sat in the
controller, outside every sandbox limit, and nothing bounded it but the test command's
time. It now keeps at most `results.CHANNEL_MAX` bytes, cuts the connection past it, and
the run's records end with a critical `tampered` record, so the run is not graded from a
cut channel.
"""

from __future__ import annotations

import json

import pytest

from minisandbox.grading.results import CHANNEL_MAX
from tests.security.conftest import MODES

FLOOD = """
    from minisandbox.grading.results import ResultsChannel, SANDBOX_CHANNEL_DIR
    from minisandbox.sandbox.rootfs import Bind
    lim = Limits.default().with_settings("memory=64M,tmpfs=16M,output=1M")
    with ResultsChannel({}) as ch:
        binds = [Bind(ch.dir, SANDBOX_CHANNEL_DIR, True)]
        with Sandbox([Layer(P["repo"], "/testbed")], limits=lim, binds=binds) as sb:
            code = (
                "import socket, sys\\n"
                "s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.recv(64)\\n"
                "block, sent = b'x' * (1 << 20), 0\\n"
                "try:\\n"
                "    for _ in range(int(sys.argv[2])): sent += s.send(block)\\n"
                "except OSError as exc: print('cut', sent)\\n"
            )
            res = sb.run(["python3", "-c", code, ch.socket_path(SANDBOX_CHANNEL_DIR), str(P["mib"])], timeout=120)
            out["payload"] = [res.returncode, res.output, res.timed_out]
        records = ch.collect()
        out["held"] = sum(map(len, ch._chunks))
        out["records"] = records.splitlines()[-1:]
"""


@pytest.mark.parametrize("attack", MODES, indirect=True)
def test_results_channel_keeps_a_bounded_amount_and_voids_a_flooded_run(attack) -> None:
    mib = (CHANNEL_MAX >> 20) + 32
    out = attack(FLOOD, mib=mib)
    assert out["held"] <= CHANNEL_MAX, out["held"]
    code, output, timed_out = out["payload"]
    assert not timed_out and output.startswith("cut "), out["payload"]  # cut off, not left blocked
    last = json.loads(out["records"][0])
    assert last["ev"] == "tampered" and last["critical"] and "channel" in last["what"], last
