"""Attack: read the caller's session-keyring secret from inside, and plant a key the host's
uid sees. Root and rootless. Every sandbox starts with a fresh session keyring and the
seccomp filter denies the keyring calls."""

from __future__ import annotations

import pytest

from tests.security.conftest import MODES

pytestmark = pytest.mark.slow

PAYLOAD = r"""
import ctypes, errno, json, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
serial = int(sys.argv[1])
buf = ctypes.create_string_buffer(64)
res = {}
ctypes.set_errno(0)
n = libc.syscall(250, 11, ctypes.c_long(serial), buf, 64)   # KEYCTL_READ the caller's key
res["read"] = buf.raw[:n].decode() if n > 0 else errno.errorcode.get(ctypes.get_errno())
ctypes.set_errno(0)
r = libc.syscall(250, 10, ctypes.c_long(-3), b"user", b"msb-secret", 0)  # KEYCTL_SEARCH in @s
res["search"] = r if r > 0 else errno.errorcode.get(ctypes.get_errno())
ctypes.set_errno(0)
r = libc.syscall(248, b"user", b"msb-planted", b"x", 1, ctypes.c_long(-4))  # add_key to @u
res["plant"] = r if r > 0 else errno.errorcode.get(ctypes.get_errno())
ctypes.set_errno(0)
r = libc.syscall(250, 0, ctypes.c_long(-3), 0)  # KEYCTL_GET_KEYRING_ID @s
res["session"] = r if r > 0 else errno.errorcode.get(ctypes.get_errno())
res["proc_keys"] = open("/proc/keys").read()
print(json.dumps(res))
"""


@pytest.mark.parametrize("seccomp", [True, False], ids=["seccomp", "debug-no-seccomp"])
@pytest.mark.parametrize("attack", MODES, indirect=True)
def test_caller_keyring_unreachable(attack, seccomp):
    out = attack(
        """
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        libc.syscall.restype = ctypes.c_long
        libc.syscall(250, 1, None)  # the runner's own session keyring (KEYCTL_JOIN_SESSION_KEYRING)
        serial = libc.syscall(248, b"user", b"msb-secret", b"hunter2", 7, ctypes.c_long(-3))
        assert serial > 0, ctypes.get_errno()
        session = libc.syscall(250, 0, ctypes.c_long(-3), 0)
        with Sandbox([Layer(P["repo"], "/testbed")], seccomp=P["seccomp"]) as sb:
            r = sb.run(["python3", "-c", P["payload"], str(serial)])
            out = {"res": json.loads(r.output.strip().splitlines()[-1]), "caller_session": session,
                   "info": sb._root.info.get("keyring")}
        buf = ctypes.create_string_buffer(64)
        n = libc.syscall(250, 11, ctypes.c_long(serial), buf, 64)
        out["caller_reads"] = buf.raw[:n].decode()
        planted = libc.syscall(250, 10, ctypes.c_long(-4), b"user", b"msb-planted", 0)
        out["planted_in_caller_user_keyring"] = planted > 0
        if planted > 0:  # seccomp off, as root: uid 0's user keyring is shared; leave nothing behind
            libc.syscall(250, 9, ctypes.c_long(planted), ctypes.c_long(-4))  # KEYCTL_UNLINK
    """,
        payload=PAYLOAD,
        seccomp=seccomp,
    )
    res = out["res"]
    assert out["caller_reads"] == "hunter2"  # the legitimate owner still reads its key
    assert res["read"] != "hunter2" and res["search"] in ("EPERM", "ENOKEY", "EACCES")
    assert "msb-secret" not in res["proc_keys"]  # masked like Docker's /proc/keys
    # (without the filter too: user keyrings are per user namespace, and a root sandbox has
    # one of its own; in the host's namespace, MINISANDBOX_USERNS_BASE=off, this fails)
    assert not out["planted_in_caller_user_keyring"]
    if seccomp:
        assert res["read"] == res["search"] == res["plant"] == res["session"] == "EPERM"
    else:  # the fresh session keyring alone keeps the caller's out of reach
        assert out["info"] == "fresh session keyring"
        assert isinstance(res["session"], int) and res["session"] != out["caller_session"]
        assert res["read"] in ("EACCES", "EPERM", "ENOKEY")
