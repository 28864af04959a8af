"""Attack: hand the controller's file operations something other than a file.

`read_file`, `write_file` and `upload` (and the SWE-ReX adapter, which passes agent-chosen
paths to them) used to open whatever the path named, following every link: a FIFO blocked
the controller for 30 s, and a magic link (/proc/PID/root, /proc/PID/fd/N) could lead out
of the sandbox's root. Now a FIFO, socket or device is refused at once, every symlink
resolves inside the sandbox's root, magic links are not followed, and none of it blocks.
"""

from __future__ import annotations

import pytest

from tests.security.conftest import MODES

BODY = """
    import time
    with Sandbox([Layer(P["repo"], "/testbed")]) as sb:
        setup = sb.run(["bash", "-c",
            "mkfifo /tmp/fifo && "
            "python3 -c 'import socket; socket.socket(socket.AF_UNIX).bind(\\"/tmp/sock\\")' && "
            "ln -s /proc/1/root/etc/hostname /tmp/magic && ln -s /proc/self/fd/0 /tmp/self0 && "
            "ln -s /etc/hostname /tmp/abs && ln -s ../../../../../../etc/hostname /testbed/up && "
            "ln -s /tmp/fifo /tmp/to_fifo && echo inside > /tmp/target && ln -s /tmp/target /testbed/in"])
        assert setup.returncode == 0, setup.output
        ops = {}
        for path in ("/tmp/fifo", "/tmp/to_fifo", "/tmp/sock", "/dev/null", "/dev/tty", "/tmp/magic", "/tmp/self0",
                     "/proc/1/root/etc/hostname", "/tmp/abs", "/testbed/up", "/testbed/in", "/tmp"):
            for op in ("read", "write"):
                t = time.monotonic()
                try:
                    if op == "read":
                        got = sb.read_file(path).decode()
                    else:
                        sb.write_file(path, "written\\n")
                        got = "written"
                except OSError as exc:
                    got = "error: " + str(exc)
                ops[f"{op} {path}"] = [got, time.monotonic() - t]
        out["ops"] = ops
        out["hostname"] = sb.run(["cat", "/etc/hostname"]).output
        out["target"] = sb.run(["cat", "/tmp/target"]).output
"""


@pytest.mark.parametrize("attack", MODES, indirect=True)
def test_controller_file_ops_refuse_special_files_and_links_out(attack) -> None:
    host_hostname = open("/etc/hostname").read()
    out = attack(BODY)
    ops = out["ops"]
    for key, (got, seconds) in ops.items():
        assert seconds < 1.0, f"{key} took {seconds:.2f} s: {got}"
    for path in ("/tmp/fifo", "/tmp/to_fifo"):
        for op in ("read", "write"):
            assert ops[f"{op} {path}"][0].endswith(
                "is a FIFO: only regular files and directories are read or written"
            ), ops
    for op in ("read", "write"):
        assert "is a socket" in ops[f"{op} /tmp/sock"][0], ops
        assert "is a character device" in ops[f"{op} /dev/null"][0], ops
        for path in ("/tmp/magic", "/tmp/self0", "/proc/1/root/etc/hostname"):  # magic links: never followed
            assert ops[f"{op} {path}"][0].startswith("error: "), (path, ops)
    assert ops["read /tmp"][0].startswith("error: ") and "directory" in ops["read /tmp"][0], ops
    # ordinary links resolve inside the sandbox's root: /etc there is the host's, read-only
    assert ops["read /tmp/abs"][0] == host_hostname and ops["read /testbed/up"][0] == host_hostname, ops
    assert ops["write /tmp/abs"][0].startswith("error: ") and "Read-only" in ops["write /tmp/abs"][0], ops
    assert ops["read /testbed/in"][0] == "inside\n" and ops["write /testbed/in"][0] == "written", ops
    assert out["target"] == "written\n" and out["hostname"] == host_hostname, out
    assert open("/etc/hostname").read() == host_hostname


SPARSE = """
    lim = Limits.default().with_settings("memory=64M,tmpfs=16M,output=1M")
    with Sandbox([Layer(P["repo"], "/testbed")], limits=lim) as sb:
        made = sb.run(["bash", "-c", "truncate -s 256M /tmp/big && head -c 1048576 /dev/zero > /tmp/fits"])
        assert made.returncode == 0, made.output
        try:
            out["big"] = len(sb.read_file("/tmp/big"))
        except OSError as exc:
            out["big"] = "error: " + str(exc)
        out["fits"] = len(sb.read_file("/tmp/fits"))
"""


@pytest.mark.parametrize("attack", MODES, indirect=True)
def test_read_file_refuses_a_sparse_file_over_the_output_limit(attack) -> None:
    """A sparse file costs the payload no tmpfs budget and no memory, whatever its size: the
    controller reading it whole used to hold all of it (256 MiB here, against a 64 MiB memory
    limit, a 16 MiB tmpfs and a 1 MiB output limit; nothing stops 1 TiB). It keeps at most
    the output limit, as of a command's output, and says so."""
    out = attack(SPARSE)
    assert str(out["big"]).startswith("error: ") and "output limit" in out["big"] and "/tmp/big" in out["big"], out
    assert out["fits"] == 1 << 20, out
