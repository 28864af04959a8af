"""minisandbox.sandbox.rootfs: the private-root runner, as root and rootless (real namespaces)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from minisandbox.sandbox import interpreters, rootfs
from tests.fixtures.sandbox import MODES, SRC, run_json_as_user, run_json_in

ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}


def _run(binds, script, tmp_path, **kw) -> tuple[int, str]:
    out = tmp_path / "out.txt"
    with open(out, "w") as fh:
        rc = rootfs.run(binds, ["sh", "-c", script], env=ENV, stdout=fh, stderr=fh, **kw)
    return rc, out.read_text()


@pytest.mark.root
def test_binds_system_dirs_readonly_and_writable_targets(as_root, tmp_path):
    repo, venv = tmp_path / "repo", tmp_path / "venv"
    repo.mkdir()
    venv.mkdir()
    (repo / "a.txt").write_text("hello\n")
    binds = [rootfs.Bind(str(repo), "/testbed", False), rootfs.Bind(str(venv), "/opt/miniconda3/envs/testbed", False)]
    rc, out = _run(
        binds,
        "cat /testbed/a.txt; echo new > /testbed/b.txt; mkdir /opt/miniconda3/envs/testbed/bin;"
        " touch /usr/evil 2>/dev/null || echo usr-ro; ls /; pwd",
        tmp_path,
        cwd="/testbed",
    )
    assert rc == 0, out
    assert "hello" in out and "usr-ro" in out and out.strip().endswith("/testbed")
    assert sorted(out.split("usr-ro\n")[1].split()[:-1]) == [
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
    ]
    assert (repo / "b.txt").read_text() == "new\n"
    assert (venv / "bin").is_dir()
    assert not os.path.exists("/usr/evil")


@pytest.mark.root
def test_readonly_bind_and_exit_code(as_root, tmp_path):
    src = tmp_path / "ro"
    src.mkdir()
    rc, out = _run([rootfs.Bind(str(src), "/data")], "touch /data/x 2>&1; exit 7", tmp_path)
    assert rc == 7
    assert "Read-only file system" in out
    assert list(src.iterdir()) == []


@pytest.mark.root
def test_payload_has_no_capabilities_and_cannot_remount(as_root, tmp_path):
    rc, out = _run(
        [],
        "grep -E '^Cap(Eff|Prm|Bnd)' /proc/self/status; mount -o remount,rw /usr 2>&1;"
        " mknod /tmp/disk b 8 0 2>&1; echo 1 > /proc/sys/vm/overcommit_memory 2>&1; echo end",
        tmp_path,
    )
    assert rc == 0
    assert out.count("0000000000000000") == 3, out
    assert "permission denied" in out.lower() and "Operation not permitted" in out
    assert "Read-only file system" in out


@pytest.mark.root
def test_network_none_has_only_loopback(as_root, tmp_path):
    rc, out = _run([], "cat /proc/net/dev | tail -n +3 | cut -d: -f1", tmp_path, network="none")
    assert rc == 0 and out.split() == ["lo"]
    rc, out = _run([], "cat /proc/net/dev | tail -n +3 | wc -l", tmp_path, network="host")
    assert rc == 0 and int(out) >= 1


@pytest.mark.root
def test_pid_1_and_root_in_a_nested_user_namespace(as_root, tmp_path):
    """As root the fork server forks init itself in a new pid namespace and then returns to
    its own; root of a nested user namespace whose pid namespace belongs to the parent
    (`unshare -Ur`) may not return, so its sandboxes keep the starter (with no such check
    the fork server exited at the first sandbox)."""
    code = textwrap.dedent(
        """
        import sys
        from minisandbox.sandbox import rootfs
        env = {"PATH": "/usr/bin:/bin"}
        for _ in range(2):
            rc = rootfs.run([], ["sh", "-c", "echo pid=$$ uid=$(id -u); test $$ -lt 10"], env=env)
            print("rc", rc, flush=True)
        """
    )
    for prefix in ([], ["unshare", "-Ur"]):
        proc = subprocess.run(
            [*prefix, sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=os.getcwd()
        )
        assert proc.returncode == 0, (prefix, proc.stdout, proc.stderr)
        assert proc.stdout.count("rc 0") == 2 and proc.stdout.count("uid=0") == 2, (prefix, proc.stdout, proc.stderr)


@pytest.mark.root
def test_timeout_raises_and_kills(as_root, tmp_path):
    marker = tmp_path / "m"
    with pytest.raises(subprocess.TimeoutExpired):
        rootfs.run(
            [rootfs.Bind(str(tmp_path), "/w", False)], ["sh", "-c", "sleep 30; touch /w/m"], env=ENV, timeout=0.5
        )
    assert not marker.exists()


def test_devnull_is_subprocess_devnull():
    """rootfs.DEVNULL stands for subprocess.DEVNULL (the run path does not import subprocess);
    callers pass either to spawn."""
    assert rootfs.DEVNULL == subprocess.DEVNULL


@pytest.mark.root
def test_the_cached_host_mount_table_follows_mounts_and_unmounts(as_root, tmp_path):
    """`_host_mounts` (what decides whether the warm sandbox may be taken) keeps the table
    and reads it again only when the kernel flags a change: a mount and an unmount made
    after it was read are both seen, in this thread and in another."""
    import threading

    def fresh() -> bytes:
        with open("/proc/self/mountinfo", "rb") as fh:
            return fh.read()

    before = rootfs._host_mounts()
    assert rootfs._host_mounts() == before == fresh()
    subprocess.run(["mount", "-t", "tmpfs", "tmpfs", str(tmp_path)], check=True)
    try:
        seen: list[bytes] = []
        thread = threading.Thread(target=lambda: seen.append(rootfs._host_mounts()))
        thread.start()
        thread.join()
        assert str(tmp_path).encode() in seen[0] and seen[0] == fresh()
        assert rootfs._host_mounts() == seen[0]
    finally:
        subprocess.run(["umount", str(tmp_path)], check=True)
    assert rootfs._host_mounts() == before == fresh()


@pytest.mark.root
def test_missing_bind_source_is_one_line_error(as_root, tmp_path):
    with pytest.raises(rootfs.SandboxError, match="bind source .*does-not-exist does not exist"):
        rootfs.run([rootfs.Bind(str(tmp_path / "does-not-exist"), "/x")], ["true"], env=ENV)


@pytest.mark.root
def test_venv_built_at_canonical_path_with_pyenv_interpreter(as_root, tmp_path):
    interp = interpreters.find_interpreter("3.10")
    venv = tmp_path / "venv"
    venv.mkdir()
    binds = [
        rootfs.Bind(str(venv), "/opt/miniconda3/envs/testbed", False),
        *interpreters.interpreter_binds(interp.version, interp.prefix),
    ]
    rc, out = _run(
        binds,
        f"{interp.executable} -m venv --without-pip /opt/miniconda3/envs/testbed && "
        "/opt/miniconda3/envs/testbed/bin/python -c 'import sys; print(sys.prefix, sys.version_info[:2])'",
        tmp_path,
    )
    assert rc == 0, out
    assert "/opt/miniconda3/envs/testbed (3, 10)" in out
    assert f"home = {interp.prefix}/bin" in (venv / "pyvenv.cfg").read_text()


@pytest.mark.rootless
def test_rootless_run(shared_tmp):
    work = shared_tmp / "w"
    code = textwrap.dedent(f"""
        import json, subprocess
        from minisandbox.sandbox import rootfs
        import os
        os.mkdir({str(work)!r})
        out = {str(shared_tmp)!r} + "/out"
        with open(out, "w") as fh:
            rc = rootfs.run([rootfs.Bind({str(work)!r}, "/testbed", False)],
                ["sh", "-c", "id -u; echo hi > /testbed/f; touch /usr/x 2>&1; mount -o remount,rw /usr 2>&1;"
                             "grep CapEff /proc/self/status; cat /proc/net/dev | tail -n +3 | cut -d: -f1"],
                env={{"PATH": "/usr/bin:/bin"}}, network="none", stdout=fh, stderr=fh)
        print(json.dumps({{"rc": rc, "out": open(out).read(), "file": open({str(work)!r} + "/f").read(),
                          "owner": os.stat({str(work)!r} + "/f").st_uid, "me": os.getuid()}}))
    """)
    res = run_json_as_user(code)
    assert res["rc"] == 0, res
    out = res["out"]
    assert out.splitlines()[0] == "0"  # root inside the user namespace ...
    assert res["owner"] == res["me"] != 0  # ... that is the unprivileged user outside
    assert res["file"] == "hi\n"
    assert "Read-only file system" in out and "permission denied" in out.lower()
    assert "CapEff:\t0000000000000000" in out
    assert out.split()[-1] == "lo"


def test_interpreter_lookup_errors_name_version():
    with pytest.raises(interpreters.InterpreterNotFound, match=r"no CPython 3\.1\.99 .*have:"):
        interpreters.find_interpreter("3.1.99")
    with pytest.raises(ValueError):
        interpreters.find_prefix("3.10")


def test_find_interpreter_picks_newest_patch():
    found = interpreters.available()
    assert found, "no interpreter found at all"
    minor = found[0].version.rsplit(".", 1)[0]
    best = interpreters.find_interpreter(minor)
    assert best.version == max(
        (i.version for i in found if i.version.startswith(minor + ".")), key=lambda v: tuple(map(int, v.split(".")))
    )
    assert interpreters.find_prefix(best.version) == best.prefix
    assert os.access(best.executable, os.X_OK)


@pytest.mark.rootless
def test_rootless_interpreter_lookup(rootless_user):
    """An unprivileged user cannot read /root/.pyenv (mode 0700 here): the lookup says so
    and still finds the system interpreters."""
    res = run_json_as_user(
        textwrap.dedent("""
        import json
        from minisandbox.sandbox import interpreters
        out = {"have": [i.prefix for i in interpreters.available()]}
        try:
            interpreters.find_interpreter("3.1.99")
        except LookupError as e:
            out["error"] = str(e)
        print(json.dumps(out))
    """)
    )
    assert "/usr" in res["have"]
    assert res["error"].startswith("no CPython 3.1.99 on this machine (have: ")
    if not os.access("/root", os.X_OK, effective_ids=False) or (os.stat("/root").st_mode & 0o001) == 0:
        assert "unreadable: /root/.pyenv/versions" in res["error"]
        assert not any(p.startswith("/root/") for p in res["have"])


PIDNS = """
import json, os, tempfile
from minisandbox.sandbox import rootfs
r, w = os.pipe()
os.write(w, b"through fd 3\\n")
os.close(w)
with rootfs.PrivateRoot(rootfs.build_spec([], network="none")) as root:
    out_r, out_w = os.pipe()
    # the process count by bash itself (a glob, no child): `ls /proc | grep -c` raced,
    # ls could list /proc before bash had forked grep (2 entries instead of 3 under load)
    cid = root.spawn(["bash", "-c", "echo $$ $PPID; n=0; for p in /proc/[0-9]*; do n=$((n+1)); done; echo $n; cat <&3; "
                      "echo x 2>&1 > /proc/sys/kernel/hostname | head -1; exit 7"],
                     env={"PATH": "/usr/bin:/bin"}, stdin=r, stdout=out_w, stderr=out_w, pass_fds={3: r}, pidns=True)
    os.close(out_w)
    code = root.wait(cid, 30)
    print(json.dumps({"code": code, "out": os.read(out_r, 65536).decode()}))
"""


@pytest.mark.parametrize("mode", MODES)
def test_pidns_payload_sees_no_ancestor_and_gets_its_extra_fd(mode, request):
    """spawn(pidns=True): pid 1 of its own pid namespace with its own /proc (1 entry:
    bash itself), /proc/sys still read-only, the exit code passed through; pass_fds
    puts a descriptor at fd 3."""
    request.getfixturevalue("as_root" if mode == "root" else "rootless_user")
    res = run_json_in(mode, PIDNS)
    lines = res["out"].splitlines()
    assert res["code"] == 7
    assert lines[0] == "1 0" and lines[1] == "1" and lines[2] == "through fd 3", res
    assert "Read-only file system" in lines[3], res


SHARED_FORK_SERVER = r"""
import json, os, signal, socket, subprocess, sys
from minisandbox.sandbox import rootfs
lock = sys.argv[1]
rootfs.prestart()  # a fresh fork server, as the node-local helper has
kids = {}
for n in range(13):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            assert rootfs.share_fork_server(lock)
            if n == 0:  # a requester killed before it reads its answer
                z = rootfs._Zygote._instance
                mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
                ctl, other = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
                spec = rootfs.build_spec([], network="none")
                rootfs._send(z.sock, {"spec": spec, "reply": True}, [other.fileno(), theirs.fileno()])
                os.kill(os.getpid(), signal.SIGKILL)
            root = rootfs.PrivateRoot(rootfs.build_spec([], network="none"))
            rfd, wfd = os.pipe()
            cid = root.spawn(["sh", "-c", "echo served"], env={"PATH": "/usr/bin:/bin"}, stdout=wfd, stderr=wfd)
            os.close(wfd)
            rc = root.wait(cid, 60)
            text = os.read(rfd, 100).decode()
            root.close()
            os.write(w, json.dumps([rc, text, root.proc.pid if root.proc else 0]).encode())
        finally:
            os._exit(0)
    os.close(w)
    kids[pid] = r
out = {}
for pid, r in kids.items():
    data = b""
    while chunk := os.read(r, 1000):
        data += chunk
    os.waitpid(pid, 0)
    out[pid] = json.loads(data) if data else None
print(json.dumps({"kids": list(out.values()), "after": rootfs.run([], ["true"], env={}, network="none")}))
"""


@pytest.mark.root
def test_processes_sharing_a_fork_server_each_get_their_own_answer(as_root, tmp_path):
    """A helper's workers share its fork server (`share_fork_server`) and each request
    brings its own reply socket, without a lock: 12 forked processes asking at once each
    get their own sandbox (its own init, its command run), and one killed after its
    request and before the answer leaves the server serving the others and its owner."""
    import json

    proc = subprocess.run(
        [sys.executable, "-c", SHARED_FORK_SERVER, str(tmp_path / "fork.lock")],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(SRC)},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    killed, *served = out["kids"]
    assert killed is None and len(served) == 12
    assert all(rc == 0 and text == "served\n" for rc, text, _init in served), served
    assert len({init for *_, init in served}) == 12  # twelve sandboxes, one init each
    assert out["after"] == 0


@pytest.mark.root
def test_userns_base_refuses_a_range_an_account_has(as_root, monkeypatch):
    """Root sandboxes' user namespaces belong to uids of a range (docs/sandbox.md, "Per-user
    kernel counters"): a host process running as one would hold every capability over a
    sandbox, so a range where an account lives is refused, naming the setting to change."""
    import pwd

    monkeypatch.delenv("MINISANDBOX_USERNS_BASE", raising=False)
    monkeypatch.setattr(rootfs, "_base_checked", {})
    assert rootfs.userns_base({"rootless": False}) == rootfs.USERNS_BASE
    assert rootfs.userns_base({"rootless": True}) is None
    assert rootfs.userns_base({"rootless": False, "join_ns": {"pid": 1, "start": 1}}) is None
    monkeypatch.setenv("MINISANDBOX_USERNS_BASE", "off")
    assert rootfs.userns_base({"rootless": False}) is None
    monkeypatch.setenv("MINISANDBOX_USERNS_BASE", "lots")
    with pytest.raises(rootfs.SandboxError, match="MINISANDBOX_USERNS_BASE='lots' is not a uid"):
        rootfs.userns_base({"rootless": False})
    fields = list(pwd.getpwuid(0))
    fields[0], fields[2] = "squatter", rootfs.USERNS_BASE + 7  # pw_name, pw_uid
    taken = pwd.struct_passwd(fields)
    monkeypatch.setattr(pwd, "getpwall", lambda: [pwd.getpwuid(0), taken])
    monkeypatch.delenv("MINISANDBOX_USERNS_BASE")
    monkeypatch.setattr(rootfs, "_base_checked", {})
    with pytest.raises(rootfs.SandboxError, match=r"squatter \(2130706439\).*MINISANDBOX_USERNS_BASE"):
        rootfs.userns_base({"rootless": False})
