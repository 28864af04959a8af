"""Attack: read the host's root-only files under /etc.

/etc is the host's, bound read-only. A root sandbox's payload runs as uid 0 without
capabilities: it cannot override a file's permissions, but it owns every root-owned file,
so each `root 0600` file under /etc was readable to it (found on the development host:
`/etc/mysql/debian.cnf`, `/etc/slurm/slurmdbd.conf`, with their passwords). Only
/etc/shadow, /etc/gshadow and /etc/ssh were masked. Now every file under /etc that other
users cannot read, and every directory they cannot enter, is masked as well.
"""

from __future__ import annotations

import os
import secrets
import shutil

import pytest

from tests.security.conftest import MODES

BODY = """
    with Sandbox([Layer(P["repo"], "/testbed")]) as sb:
        res = sb.run(["bash", "-c", f"id -u; cat {P['file']}; ls {P['dir']}; cat {P['dir']}/key; cat /etc/hostname"])
        out["output"] = res.output
"""


@pytest.mark.parametrize("attack", MODES, indirect=True)
def test_root_only_files_under_etc_are_masked(attack) -> None:
    if os.geteuid() != 0:
        pytest.skip("plants a root-only file in the host's /etc")
    tag, secret = secrets.token_hex(6), secrets.token_hex(8)  # the secret is in no path or message
    path, folder = f"/etc/msb-secret-{tag}", f"/etc/msb-private-{tag}"
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.write(fd, f"host secret {secret}\n".encode())
        os.close(fd)
        os.mkdir(folder, 0o700)
        with open(f"{folder}/key", "w") as fh:
            fh.write(f"host key {secret}\n")
        out = attack(BODY, file=path, dir=folder)
    finally:
        os.unlink(path)
        shutil.rmtree(folder)
    assert secret not in out["output"], out
    assert out["output"].splitlines()[0] == "0" and open("/etc/hostname").read() in out["output"], out
