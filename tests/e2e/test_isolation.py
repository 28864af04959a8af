"""Real escape attempts from inside a sandbox, as root and again rootless (as the
unprivileged user `msbtest`). Each attempt runs in a fresh Python process (root: this
interpreter; rootless: Debian's python3 via runuser) that builds the sandbox from a real
git repo layer and reports what happened as JSON; the host side is checked from here."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from pathlib import Path

import pytest

from tests.fixtures.sandbox import MODES, TEST_USER, payload_runner

pytestmark = pytest.mark.slow

PRELUDE = """
import json, os, sys, time
from minisandbox.sandbox.sandbox import Sandbox, Layer
from minisandbox.sandbox.limits import Limits
from minisandbox.sandbox.shell import session
P = json.loads(sys.argv[1])
out = {}
"""


CHROOT_ESCAPE = """
import os
os.makedirs("/tmp/jail", exist_ok=True)
try:
    os.chroot("/tmp/jail")
    for _ in range(64):
        os.chdir("..")
    os.chroot(".")
    print("ESCAPED", os.listdir("/"))
except OSError as e:
    print("blocked", e.errno, e.strerror)
"""

# 192.0.2.1 is TEST-NET-1 (RFC 5737): never routed, so even a broken sandbox reaches no host.
NET_PROBE = """
import socket, sys, time
res = []
for host, port in (("127.0.0.1", int(sys.argv[1])), ("192.0.2.1", 80)):
    t = time.monotonic()
    try:
        socket.create_connection((host, port), timeout=3).close()
        res.append("connected")
    except OSError as e:
        res.append(type(e).__name__ + ":" + str(e.errno))
    res.append(round(time.monotonic() - t, 2))
try:
    socket.getaddrinfo("pypi.org", 443)
    res.append("resolved")
except OSError:
    res.append("dns-failed")
print(res)
"""


# Forks sleeping children until the kernel says no; kills them; prints count and errno.
FLOOD = """
import os, time
pids, err = [], None
for _ in range(1000):
    try:
        pid = os.fork()
    except OSError as e:
        err = e.errno
        break
    if pid == 0:
        time.sleep(60)
        os._exit(0)
    pids.append(pid)
for p in pids:
    os.kill(p, 9)
print(len(pids), err)
"""


@pytest.fixture
def world(request):
    """A layer dir (real git repo) owned by the user the sandbox runs as, plus a host
    secret outside it. Yields a `probe(body, **params) -> dict` runner
    (tests.fixtures.sandbox.payload_runner)."""
    yield from payload_runner(request, "msb-iso-", PRELUDE, "isolation tests", secret=True)


def _sh(res: dict) -> str:
    return res["output"]


@pytest.mark.parametrize("world", MODES, indirect=True)
def test_cannot_read_or_write_outside(world):
    out = world("""
        with Sandbox([Layer(P["repo"], "/testbed")]) as sb:
            r = sb.execute("cat " + P["secret"] + "; ls /root; ls /work; cat /etc/shadow; ls /;"
                           "touch /etc/evil /usr/evil /evil " + P["base"] + "/evil; echo done")
            out = {"output": r.output}
    """)
    text = out["output"]
    assert "host secret" not in text
    assert "No such file or directory" in text
    assert sorted(text.split("done")[0].split("\n")) != []
    assert "Read-only file system" in text
    assert not Path("/etc/evil").exists() and not Path("/usr/evil").exists() and not Path("/evil").exists()
    assert not (Path(world.secret).parent / "evil").exists()
    root_listing = [
        x
        for x in text.splitlines()
        if x
        in (
            "bin",
            "dev",
            "etc",
            "lib",
            "lib64",
            "opt",
            "proc",
            "root",
            "sbin",
            "testbed",
            "tmp",
            "usr",
            "var",
            "work",
            "home",
        )
    ]
    assert "work" not in root_listing and "home" not in root_listing and "testbed" in root_listing


@pytest.mark.parametrize("world", MODES, indirect=True)
def test_read_only_layer_and_remount(world):
    before = (world.repo / "code.py").read_text()
    out = world("""
        with Sandbox([Layer(P["repo"], "/testbed", writable=False)]) as sb:
            r = sb.execute("echo x >> /testbed/code.py; mount -o remount,rw /testbed; mount -o remount,rw /usr;"
                           "mount -o remount,rw /; mount -t tmpfs none /testbed; umount /usr;"
                           "unshare -Urm sh -c 'mount -o remount,rw /usr && touch /usr/evil' ; echo rc=$?")
            out = {"output": r.output}
    """)
    text = out["output"]
    assert (world.repo / "code.py").read_text() == before
    assert text.count("Read-only file system") >= 1
    assert "permission denied" in text.lower()
    assert not Path("/usr/evil").exists()
    assert "rc=0" not in text


@pytest.mark.parametrize("world", MODES, indirect=True)
def test_chroot_escape(world):
    out = world(
        """
        with Sandbox([Layer(P["repo"], "/testbed")]) as sb:
            r = sb.run(["python3", "-c", P["escape"]])
            s = sb.execute("chroot / /bin/true; echo rc=$?; nsenter -t 1 -m -p true; echo ns=$?")
            out = {"output": r.output + s.output}
    """,
        escape=CHROOT_ESCAPE,
    )
    text = out["output"]
    assert "ESCAPED" not in text
    assert "blocked 1 Operation not permitted" in text
    assert "rc=0" not in text and "ns=0" not in text


@pytest.mark.parametrize("world", MODES, indirect=True)
def test_host_processes_invisible_and_unsignalable(world):
    # a host process of the very uid the sandbox runs as: the most exposed target
    argv = ["sleep", "300"]
    host = (
        subprocess.Popen(argv) if world.mode == "root" else subprocess.Popen(["runuser", "-u", TEST_USER, "--", *argv])
    )
    time.sleep(0.2)
    target = (
        host.pid
        if world.mode == "root"
        else int(subprocess.run(["pgrep", "-P", str(host.pid)], capture_output=True, text=True).stdout.split()[0])
    )
    try:
        out = world(
            """
            with Sandbox([Layer(P["repo"], "/testbed")]) as sb:
                r = sb.execute(f"ls /proc | grep -c '^[0-9]'; ls -d /proc/{P['pid']} ; kill -9 {P['pid']}; echo kill=$?;"
                               "kill -9 -1; echo killall=$?")
                alive = sb.execute("echo alive").output
                out = {"output": r.output, "alive": alive}
        """,
            pid=target,
        )
        text = out["output"]
        assert int(text.splitlines()[0]) < 10  # only the sandbox's own processes
        assert "No such file or directory" in text and "kill=1" in text
        time.sleep(0.2)
        assert Path(f"/proc/{target}").exists(), "host process was killed from inside the sandbox"
        assert os.waitpid(host.pid, os.WNOHANG) == (0, 0)
    finally:
        host.kill()
        subprocess.run(["pkill", "-KILL", "-P", str(host.pid)])
        host.wait()


@pytest.mark.parametrize("world", MODES, indirect=True)
def test_network_none_fails_fast_and_host_option_shares(world):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    port = server.getsockname()[1]
    try:
        out = world(
            """
            for net in ("none", "host"):
                with Sandbox([Layer(P["repo"], "/testbed")], network=net) as sb:
                    r = sb.run(["python3", "-c", P["probe"], str(P["port"])], timeout=60)
                    out[net] = r.output.strip()
                    out[net + "_ifaces"] = sb.execute("tail -n +3 /proc/net/dev | cut -d: -f1").output.split()
        """,
            port=port,
            probe=NET_PROBE,
        )
    finally:
        server.close()
    none = eval(out["none"])  # noqa: S307 - list literal printed by our probe
    assert none[0] == "ConnectionRefusedError:111"  # the sandbox's own, empty loopback
    assert none[2].startswith("OSError:101") and none[3] < 1.0  # no route: fails at once
    assert none[4] == "dns-failed"
    assert out["none_ifaces"] == ["lo"]
    host = eval(out["host"])  # noqa: S307
    assert host[0] == "connected"  # shared host network reaches the host's listener


@pytest.mark.parametrize("world", MODES, indirect=True)
def test_sandboxes_cannot_see_each_other(world):
    out = world("""
        with Sandbox([Layer(P["repo"], "/testbed")]) as a, Sandbox([Layer(P["repo"], "/testbed")]) as b:
            a.execute("echo a > /testbed/a_only; echo a > /tmp/a_tmp; echo a > /dev/shm/a_shm; sleep 777 &")
            r = b.execute("ls /testbed /tmp /dev/shm; ps ax -o args | grep -v grep")
            peek = b.execute("cat /testbed/a_only /tmp/a_tmp /dev/shm/a_shm")
            out = {"output": r.output, "peek": peek.output, "a": a.execute("cat /testbed/a_only /tmp/a_tmp").output}
    """)
    text = out["output"]
    assert out["a"] == "a\na\n"
    assert "a_only" not in text and "a_tmp" not in text and "a_shm" not in text
    assert out["peek"].count("No such file or directory") == 3
    assert "sleep 777" not in text
    assert not (world.repo / "a_only").exists()


@pytest.mark.parametrize("world", MODES, indirect=True)
def test_mknod_disk_device(world):
    out = world("""
        with Sandbox([Layer(P["repo"], "/testbed")]) as sb:
            r = sb.execute("find /dev -type b | wc -l; mknod /tmp/vda b 253 0; echo rc=$?; mknod /testbed/null c 1 3;"
                           "echo rc2=$?; python3 -c 'import os; os.mknod(\\"/dev/shm/sda\\", 0o600 | 0o060000, os.makedev(8, 0))'")
            out = {"output": r.output}
    """)
    text = out["output"]
    assert text.splitlines()[0] == "0"
    assert "rc=1" in text and "rc2=1" in text
    assert text.count("Operation not permitted") >= 3


@pytest.mark.parametrize("world", MODES, indirect=True)
def test_process_flood_contained(world):
    out = world(
        """
        with Sandbox([Layer(P["repo"], "/testbed")], limits=Limits(pids=64)) as sb:
            r = sb.run(["python3", "-c", P["flood"]], timeout=120)
            after = sb.execute("echo ok")
            out = {"output": r.output, "after": after.output, "mode": sb.limits_mode["pids"]}
    """,
        flood=FLOOD,
    )
    started, err = out["output"].split()
    assert 0 < int(started) < 64 and err == "11", out  # EAGAIN well before 1000
    assert out["after"] == "ok\n"
    if world.mode == "root" and os.access("/sys/fs/cgroup/pids", os.W_OK):
        assert out["mode"].startswith("cgroup"), out  # a real per-sandbox cgroup, not an rlimit


def _ns_members(ns: str) -> int:
    n = 0
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                n += os.readlink(f"/proc/{p}/ns/pid") == ns
            except OSError:
                pass
    return n


@pytest.mark.parametrize("world", MODES, indirect=True)
def test_fork_bomb_contained(world):
    """A real bash fork bomb for 3 s under pids=48: the sandbox never holds more than 48
    processes (sampled from the host), the host keeps working, close kills it all."""
    import threading

    result = {}
    pidfile = Path(world.secret).parent / "initpid"

    def run():
        result["out"] = world(
            """
            with Sandbox([Layer(P["repo"], "/testbed")], limits=Limits(pids=48)) as sb:
                open(P["pidfile"], "w").write(str(sb._root.proc.pid))
                r = sb.execute("bomb() { bomb | bomb & }; bomb; sleep 10", timeout=3)
                out = {"timed_out": r.timed_out, "mode": sb.limits_mode["pids"]}
                time.sleep(0.5)
                out["after"] = sb.execute("echo alive", timeout=30).output
        """,
            pidfile=str(pidfile),
        )

    t = threading.Thread(target=run)
    t.start()
    peak, ns = 0, None
    while t.is_alive():
        if ns is None and pidfile.exists() and pidfile.read_text():
            try:
                ns = os.readlink(f"/proc/{pidfile.read_text()}/ns/pid")
            except OSError:
                pass
        if ns:
            peak = max(peak, _ns_members(ns))
            assert subprocess.run(["true"]).returncode == 0  # the host can still fork
        time.sleep(0.05)
    t.join()
    out = result["out"]
    assert out["timed_out"] and out["after"] == "alive\n", out
    assert ns is not None and 5 < peak <= 48, (peak, out)
    if ns:
        assert _ns_members(ns) == 0


@pytest.mark.parametrize("world", MODES, indirect=True)
def test_memory_hog_contained(world):
    out = world("""
        hog = "x = bytearray(b'x') * (1536 << 20); print('allocated', len(x))"
        with Sandbox([Layer(P["repo"], "/testbed")], limits=Limits(memory_bytes=256 << 20)) as sb:
            r = sb.run(["python3", "-c", hog], timeout=120)
            ok = sb.execute("echo still-alive")
            out = {"rc": r.returncode, "output": r.output, "ok": ok.output, "mode": sb.limits_mode["memory"]}
    """)
    assert out["rc"] != 0 and "allocated" not in out["output"], out
    assert out["ok"] == "still-alive\n"
    assert ("MemoryError" in out["output"]) or out["rc"] == -9


@pytest.mark.parametrize("world", MODES, indirect=True)
def test_background_processes_killed_on_close(world):
    out = world("""
        sb = Sandbox([Layer(P["repo"], "/testbed")])
        sb.execute("nohup sleep 4242 >/dev/null 2>&1 & setsid sh -c 'sleep 4243 & :' &")
        session(sb).run("(trap '' TERM HUP; sleep 4244) &")
        time.sleep(0.3)
        seen = sb.execute("ps ax -o args").output
        sb.close()
        out = {"seen": seen}
    """)
    assert "sleep 4242" in out["seen"] and "sleep 4243" in out["seen"] and "sleep 4244" in out["seen"]
    time.sleep(0.2)
    left = subprocess.run(["pgrep", "-f", "sleep 424[234]"], capture_output=True, text=True).stdout.split()
    assert left == []


#: Host directories a sandbox's private root is mounted on (init_program._BASE_CANDIDATES), had
#: it leaked into the host's mount namespace.
ROOT_BASES = ("/mnt", "/media", "/srv", "/boot", "/run", "/var/empty", "/opt")


def _own_mounts(base: str) -> list[str]:
    """Host mounts the sandboxes under test could have left: on or under their layer and
    scratch directory `base`, from a source there, or on a private-root base. Other jobs'
    mounts on this shared machine (image layers in their node caches) are not counted."""
    own = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split()
        root, point = fields[3], fields[4]
        source = line.split(" - ", 1)[1].split()[1] if " - " in line else ""
        if any(x == base or x.startswith(base + "/") for x in (root, point, source)) or any(
            point == b or point.startswith(b + "/") for b in ROOT_BASES
        ):
            own.append(" ".join(fields[3:5]) + " " + line.split(" - ", 1)[-1])
    return sorted(own)


def _alive(pid: int, start: str) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2 :].split()[19] == start


def _in_session(sid: int) -> list[int]:
    out = []
    for p in os.listdir("/proc"):
        try:
            if p.isdigit():
                stat = Path(f"/proc/{p}/stat").read_text()
                if int(stat[stat.rindex(")") + 2 :].split()[3]) == sid:
                    out.append(int(p))
        except OSError:
            pass
    return out


@pytest.mark.parametrize("world", MODES, indirect=True)
def test_thousand_open_close_cycles_leave_nothing(world, tmp_path):
    """Everything the runner's 1,000 sandboxes made is gone afterwards: counted for this
    runner only (its cgroups, its fork server and sandbox inits by pid and start time, the
    processes of the fork server's session, mounts it could have left, its own payloads),
    so other jobs on the machine cannot make it pass or fail."""
    tag = f"1000.{os.getpid() % 10000:04d}{int(time.time() * 1000) % 10000:04d}"  # this test's own sleeps
    before = _own_mounts(str(world.repo.parent))
    out = world(
        """
        import tempfile
        from minisandbox.sandbox import rootfs

        def start_of(pid):
            stat = open(f"/proc/{pid}/stat").read()
            return stat[stat.rindex(")") + 2:].split()[19]

        scratch = tempfile.mkdtemp(dir=P["base"])
        t = time.monotonic()
        inits, cgroups = [], []
        for i in range(1000):
            with Sandbox([Layer(P["repo"], "/testbed")], limits=Limits(pids=256, memory_bytes=1 << 30),
                         scratch_dir=scratch if i % 2 else None) as sb:
                inits.append((sb._root.proc.pid, start_of(sb._root.proc.pid)))
                cgroups += sb.limits.dirs
                if i % 100 == 0:
                    assert sb.execute("sleep %s & echo $((1 + 1))" % P["tag"]).output == "2\\n"
        zygote = rootfs._Zygote._instance.proc.pid
        out = {"seconds": time.monotonic() - t, "scratch": os.listdir(scratch),
               "fds": len(os.listdir("/proc/self/fd")), "inits": inits, "cgroups": cgroups,
               "zygote": [zygote, start_of(zygote)], "pid": os.getpid()}
    """,
        timeout=900,
        tag=tag,
    )
    assert out["scratch"] == [] and out["fds"] < 20
    deadline = time.monotonic() + 10  # the fork server exits once the runner's socket closes
    while _alive(*out["zygote"]) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(*out["zygote"]) and _in_session(out["zygote"][0]) == []
    assert len(out["inits"]) == 1000 and [i for i in out["inits"] if _alive(*i)] == []
    if world.mode == "root":  # rootless: no writable cgroup on this machine, none made
        assert len(out["cgroups"]) >= 1000
    assert [c for c in out["cgroups"] if os.path.exists(c)] == []
    prefix = f"minisandbox-{out['pid']}-"
    assert [str(c) for c in Path("/sys/fs/cgroup").rglob(prefix + "*")] == []
    assert _own_mounts(str(world.repo.parent)) == before
    assert subprocess.run(["pgrep", "-f", f"sleep {tag}"], capture_output=True).stdout == b""
