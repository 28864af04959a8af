"""minisandbox.sandbox.sandbox: overlays over shared layers, one-shot commands, files, diff, shim,
limits and clean close (real namespaces, as root; rootless variants are in
tests/e2e/test_isolation.py)."""

from __future__ import annotations

import contextlib
import hashlib
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from minisandbox.paths import VENV_PATH
from minisandbox.sandbox import rootfs
from minisandbox.sandbox import sandbox as sandbox_module
from minisandbox.sandbox.interpreters import find_interpreter, interpreter_binds
from minisandbox.sandbox.limits import Limits
from minisandbox.sandbox.sandbox import Layer, Sandbox
from minisandbox.sandbox.shell import session

pytestmark = pytest.mark.root

GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}


def make_repo(path: Path) -> Path:
    """A real git repo with a tracked file, a .gitignore and one commit."""
    path.mkdir(parents=True)
    (path / "pkg").mkdir()
    (path / "pkg" / "mod.py").write_text("def f():\n    return 1\n")
    (path / ".gitignore").write_text("*.pyc\n__pycache__/\n")
    env = {**os.environ, **GIT_ENV}
    subprocess.run(["git", "init", "-q", str(path)], check=True, env=env)
    subprocess.run(["git", "-C", str(path), "add", "-A"], check=True, env=env)
    subprocess.run(["git", "-C", str(path), "commit", "-qm", "init"], check=True, env=env)
    return path


def tree_digest(path: Path) -> str:
    """Digest of names, modes and contents of a tree (to prove it was not modified)."""
    h = hashlib.sha256()
    for root, dirs, files in sorted(os.walk(path)):
        dirs.sort()
        for name in sorted(files + dirs):
            p = Path(root) / name
            st = p.lstat()
            h.update(f"{p.relative_to(path)} {st.st_mode} {st.st_size}\n".encode())
            if p.is_file() and not p.is_symlink():
                h.update(p.read_bytes())
    return h.hexdigest()


@pytest.fixture
def repo(as_root, tmp_path):
    return make_repo(tmp_path / "repo")


@pytest.mark.parametrize("copy", [False, True], ids=["overlay", "copy-fallback"])
def test_writes_never_reach_the_shared_layer(repo, copy):
    before = tree_digest(repo)
    with Sandbox([Layer(str(repo), "/testbed")], copy_layers=copy) as sb:
        assert sb.layer_methods == {"/testbed": "copy" if copy else "overlay"}
        res = sb.execute(
            "echo changed >> pkg/mod.py && rm .gitignore && mkdir new && echo x > new/f && git status --short"
        )
        assert res.returncode == 0, res.output
        assert "M pkg/mod.py" in res.output and "?? new/" in res.output
        assert sb.read_file("/testbed/pkg/mod.py").endswith(b"changed\n")
    assert tree_digest(repo) == before


def test_execute_output_exit_code_cwd_and_env(repo):
    with Sandbox([Layer(str(repo), "/testbed")], env={"FOO": "bar"}) as sb:
        res = sb.execute("pwd; echo $FOO; echo err >&2; exit 3")
        assert (res.output, res.returncode, res.timed_out) == ("/testbed\nbar\nerr\n", 3, False)
        assert sb.execute("pwd", cwd="/tmp").output == "/tmp\n"
        assert sb.execute("kill -9 $$").returncode == -9
        assert sb.execute("exec /nonexistent-binary").returncode == 127


def test_timeout_kills_the_whole_tree(repo):
    with Sandbox([Layer(str(repo), "/testbed")]) as sb:
        start = time.monotonic()
        res = sb.execute("(sleep 3; touch /tmp/child-survived) & sleep 30", timeout=0.5)
        assert res.timed_out and res.returncode == -9
        assert time.monotonic() - start < 5
        # Wait for the tree to be gone rather than for the child's 3 s: once no process of the
        # command is left (its shells carry the command line, the sleeps their own), nothing
        # can touch the file later, so an empty /tmp then is final.
        deadline = time.monotonic() + 10
        while (left := _command_processes(sb)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert left == []
        assert sb.execute("ls /tmp").output == ""
        assert "sleep" not in sb.execute("ps ax -o comm").output


def _command_processes(sb: Sandbox) -> list[str]:
    """The sandbox's processes left from test_timeout_kills_the_whole_tree's command (its
    shell and subshell, whose command line names the marker file, and their sleeps)."""
    lines = sb.execute("ps ax -o args=").output.splitlines()
    return [a for a in lines if "child-survived" in a or a.startswith("sleep ")]


def test_kill_leftovers_returns_once_they_are_gone(repo):
    """A one-shot `minisandbox run` ends its command's leftovers with `kill_leftovers`: when
    it returns they are gone, not only signalled (a SIGKILL takes effect when its target
    next runs, and the dead stay in the process table until init reaps them: a command run
    right after saw them on a loaded machine)."""
    with Sandbox([Layer(str(repo), "/testbed")]) as sb:
        res = sb.run(["bash", "-c", "for i in $(seq 100); do sleep 1000 & setsid sleep 1001 & done; echo started"])
        assert res.output == "started\n", res.output
        sb.kill_leftovers()
        assert sb._live().stat()["procs"] == 0


def test_plain_commands_run_as_bash_would_run_them_without_bash(repo):
    """execute() execs a command of plain words itself (bash's start is half of a trivial
    command's cost): the program gets the argv, working directory, environment and exit
    code that `bash -c` gives it; builtins, shell syntax, a program that is missing or that
    the kernel cannot exec still go through bash (a `bash` first in PATH logs each start)."""
    spy = "/tmp/spy"
    path = f"{spy}:{sandbox_module.DEFAULT_ENV['PATH']}"
    with Sandbox([Layer(str(repo), "/testbed")]) as sb:
        sb.write_file(
            f"{spy}/bash", '#!/usr/bin/bash\necho started >> /tmp/spy.log\nexec -a bash /usr/bin/bash "$@"\n', 0o755
        )
        sb.write_file("/tmp/noexec", "echo no\n", 0o644)
        sb.write_file("/tmp/script", "echo script $0\n", 0o755)

        def run(command: str, cwd: str = "/testbed") -> tuple[int, str, bool]:
            before = sb.run(["cat", "/tmp/spy.log"]).output.count("started")
            res = sb.execute(command, cwd=cwd, env={"PATH": path})
            return res.returncode, res.output, sb.run(["cat", "/tmp/spy.log"]).output.count("started") > before

        for cwd in ("/testbed", "/tmp"):
            code, out, bash = run("printenv", cwd)
            want = sb.run(["bash", "-c", "printenv"], cwd=cwd).output  # bash, with the usual PATH
            assert (code, bash) == (0, False)
            want = [f"PATH={path}" if line.startswith("PATH=") else line for line in want.splitlines()]
            assert sorted(out.splitlines()) == sorted(want)
            assert f"PWD={cwd}" in out.splitlines() and "SHLVL=0" in out.splitlines()
        assert run("printenv _") == (0, "/usr/bin/printenv\n", False)
        assert run("true") == (0, "", False)
        assert run("false") == (1, "", False)
        assert run("ls -d /testbed src") == (2, "ls: cannot access 'src': No such file or directory\n/testbed\n", False)
        assert run("/tmp/script") == (0, "script /tmp/script\n", True)  # no #!: bash runs it as a script
        assert run("/tmp/noexec") == (126, "bash: line 1: /tmp/noexec: Permission denied\n", True)
        assert run("no-such-program") == (127, "bash: line 1: no-such-program: command not found\n", True)
        assert run("exit 3") == (3, "", True)
        assert run("true --version") == (0, "", True)
        assert run("echo $SHLVL") == (0, "1\n", True)  # (the spy's bash counts too)


def test_background_output_does_not_block(repo):
    with Sandbox([Layer(str(repo), "/testbed")]) as sb:
        start = time.monotonic()
        res = sb.execute("sleep 20 & echo started")
        assert res.output == "started\n" and res.returncode == 0
        assert time.monotonic() - start < 2


def test_files_upload_and_stdin(repo, tmp_path):
    src = tmp_path / "upload"
    (src / "sub").mkdir(parents=True)
    (src / "sub" / "data.txt").write_text("payload\n")
    (tmp_path / "single.sh").write_text("echo single\n")
    (tmp_path / "single.sh").chmod(0o755)
    with Sandbox([Layer(str(repo), "/testbed")]) as sb:
        sb.write_file("/testbed/deep/dir/new.py", "x = 1\n")
        assert sb.read_file("/testbed/deep/dir/new.py") == b"x = 1\n"
        sb.upload(str(src), "/tmp/up")
        assert sb.read_file("/tmp/up/sub/data.txt") == b"payload\n"
        sb.upload(str(tmp_path / "single.sh"), "/tmp/single.sh")
        assert sb.execute("/tmp/single.sh").output == "single\n"
        assert sb.run(["cat"], input=b"from stdin").output == "from stdin"
        with pytest.raises(OSError, match="/nope/file"):
            sb.read_file("/nope/file")
        with pytest.raises(OSError, match="Read-only file system"):
            sb.write_file("/usr/evil", "x")
    assert not os.path.exists("/usr/evil")


def test_a_file_opened_for_writing_is_not_held_open_by_init(repo):
    """When `open` returns a writable fd, init has closed the copy it forwarded, so a file
    written through it can be executed at once (CI saw "Text file busy" under load). The
    controller's thread runs real-time on init's CPU: woken by init's reply, it preempts
    init at once, before init's close unless `open` waits for it. (init is not starved
    instead, as with SCHED_IDLE: beside a CPU hog that took seconds per request.)"""
    with Sandbox([Layer(str(repo), "/testbed")]) as sb:
        init = sb._root.proc.pid
        cpu = {min(os.sched_getaffinity(0))}
        mine = os.sched_getaffinity(0)
        os.sched_setaffinity(init, cpu)
        os.sched_setaffinity(0, cpu)
        os.sched_setscheduler(0, os.SCHED_FIFO | os.SCHED_RESET_ON_FORK, os.sched_param(1))
        try:
            for i in range(10):
                fd = sb._root.open(f"/tmp/f{i}", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o755)
                ours = os.fstat(fd)
                held = []
                for name in os.listdir(f"/proc/{init}/fd"):
                    with contextlib.suppress(OSError):
                        st = os.stat(f"/proc/{init}/fd/{name}")
                        if (st.st_dev, st.st_ino) == (ours.st_dev, ours.st_ino):
                            held.append(name)
                os.close(fd)
                assert not held, f"init still holds /tmp/f{i} open for writing (fd {held})"
        finally:
            os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
            os.sched_setaffinity(0, mine)
        sb.write_file("/tmp/run.sh", "echo ran\n", mode=0o755)
        assert sb.execute("/tmp/run.sh").output == "ran\n"


def test_diff_since_start_includes_untracked_not_ignored(repo):
    with Sandbox([Layer(str(repo), "/testbed")]) as sb:
        assert sb.diff() == ""
        sb.execute("sed -i 's/return 1/return 2/' pkg/mod.py; echo new > added.txt; touch pkg/mod.pyc")
        d = sb.diff()
        assert "-    return 1\n+    return 2" in d
        assert "diff --git a/added.txt b/added.txt\nnew file mode 100644" in d
        assert ".pyc" not in d
        assert sb.execute("git status --short").output.splitlines() == [" M pkg/mod.py", "?? added.txt"]
        # the patch applies to the original tree and reproduces the change
        check = sb.execute("git stash -u -q && git apply --check - <<'EOF'\n" + d + "EOF\n")
        assert check.returncode == 0, check.output


def test_mark_start_moves_the_start_state(repo):
    with Sandbox([Layer(str(repo), "/testbed")]) as sb:
        sb.execute("echo 'BUG = True' >> pkg/mod.py")  # e.g. the task's bug patch
        sb.mark_start()
        assert sb.diff() == ""
        sb.write_file("/testbed/fix.txt", "fix\n")
        d = sb.diff()
        assert "fix.txt" in d and "BUG" not in d


def test_a_diff_over_the_output_limit_is_refused_not_cut(repo):
    """The diff comes back as a command's output: over the output limit it was cut
    silently (a 1 MiB prefix, the last hunk broken and every later file missing) and
    returned as the patch."""
    with Sandbox([Layer(str(repo), "/testbed")], limits=Limits.default().with_settings("output=1M")) as sb:
        sb.execute("seq 1 300000 > big.txt; echo last > z.txt")
        with pytest.raises(rootfs.SandboxError, match="output limit"):
            sb.diff()
        sb.execute("rm big.txt")
        assert "z.txt" in sb.diff()


def test_diff_without_git_dir(tmp_path, as_root):
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "a.txt").write_text("a\n")
    with Sandbox([Layer(str(plain), "/testbed")]) as sb:
        sb.execute(
            "echo b >> a.txt; mkdir -p __pycache__ .pytest_cache; touch __pycache__/a.cpython-311.pyc .pytest_cache/x"
        )
        d = sb.diff()
        assert "+b" in d and "a/a.txt" in d
        assert "pycache" not in d and "pytest_cache" not in d  # by-products, though nothing ignores them
        assert not (plain / ".git").exists()


@pytest.fixture(scope="module")
def venv_layer(tmp_path_factory):
    """A real venv built at the canonical path through rootfs.run (the build's way)."""
    if os.geteuid() != 0:
        pytest.skip("needs root")
    interp = find_interpreter("3.10")
    venv = tmp_path_factory.mktemp("venvlayer") / "venv"
    venv.mkdir()
    rc = rootfs.run(
        [rootfs.Bind(str(venv), VENV_PATH, False), *interpreter_binds(interp.version, interp.prefix)],
        [interp.executable, "-m", "venv", "--without-pip", VENV_PATH],
        env={"PATH": "/usr/bin:/bin"},
    )
    assert rc == 0
    return venv, interp


def test_conda_activate_shim_runs_the_venv(repo, venv_layer):
    venv, interp = venv_layer
    with Sandbox(
        [Layer(str(repo), "/testbed"), Layer(str(venv), VENV_PATH)], interpreter=(interp.version, interp.prefix)
    ) as sb:
        res = sb.execute(
            "source /opt/miniconda3/bin/activate; conda activate testbed; "
            "python -c 'import sys; print(sys.prefix, sys.version_info[:2])'; "
            "echo $VIRTUAL_ENV $CONDA_DEFAULT_ENV; which python"
        )
        assert res.returncode == 0, res.output
        assert res.output.splitlines() == [f"{VENV_PATH} (3, 10)", f"{VENV_PATH} testbed", f"{VENV_PATH}/bin/python"]
        res = sb.execute("conda run -n testbed python -c 'import sys; print(sys.prefix)'")
        assert res.output.strip() == VENV_PATH


def test_a_symlink_to_the_activated_venvs_python_sees_its_packages(repo, venv_layer):
    """tox-current-env links `.tox/<env>/bin/python` to `sys.executable`; a symlink to a
    venv's python runs the bare base interpreter (no pyvenv.cfg beside the link), which in a
    conda environment (the official images) would still see the packages. Activation sets
    PYTHONUSERBASE so the base interpreter takes the venv's site-packages (and its .pth
    files) as its user site; the venv's own python is unchanged."""
    venv, interp = venv_layer
    site = venv / "lib" / f"python{interp.minor}" / "site-packages"
    (site / "symlinkprobe.py").write_text("WHERE = 'venv'\n")
    (site / "symlinkprobe_editable.pth").write_text("/testbed\n")  # an editable install's path entry
    with Sandbox(
        [Layer(str(repo), "/testbed"), Layer(str(venv), VENV_PATH)], interpreter=(interp.version, interp.prefix)
    ) as sb:
        link = (
            "mkdir -p /tmp/tox/bin && ln -sf \"$(python -c 'import sys; print(sys.executable)')\" /tmp/tox/bin/python"
        )
        probe = "-c 'import symlinkprobe, pkg.mod; print(symlinkprobe.WHERE, pkg.mod.f())'"
        res = sb.execute(
            f"source /opt/miniconda3/bin/activate; conda activate testbed; {link}; /tmp/tox/bin/python {probe}"
        )
        assert res.returncode == 0, res.output
        assert res.output.strip() == "venv 1"
        # the venv's own python: the user site stays off, sys.path as without the variable
        paths = sb.execute(
            "source /opt/miniconda3/bin/activate; conda activate testbed; "
            "python -c 'import site, sys; print(site.ENABLE_USER_SITE, len(sys.path))'; "
            "PYTHONUSERBASE= python -c 'import sys; print(len(sys.path))'"
        ).output.split()
        assert paths[0] == "False" and paths[1] == paths[2], paths
        # deactivated: the link is the bare base interpreter again
        res = sb.execute(
            "source /opt/miniconda3/bin/activate; conda activate testbed; conda deactivate; "
            f'echo "[$PYTHONUSERBASE]"; /tmp/tox/bin/python {probe}'
        )
        assert res.output.splitlines()[0] == "[]"
        assert res.returncode != 0 and "No module named 'symlinkprobe'" in res.output
        # `conda run` sets it as well
        res = sb.execute(f"conda run -n testbed /tmp/tox/bin/python {probe}")
        assert res.returncode == 0 and res.output.strip() == "venv 1", res.output


def test_limits_are_applied_and_reported(repo):
    with Sandbox(
        [Layer(str(repo), "/testbed")],
        limits=Limits(memory_bytes=512 << 20, pids=128, cpu_seconds=30, file_size_bytes=1 << 20),
    ) as sb:
        mode = sb.limits_mode
        # CPU: a total per command where a cgroup counts it (root here), else RLIMIT_CPU per
        # process; RLIMIT_CPU is set in both cases (the backstop; `ulimit -t` below)
        assert mode["cpu_seconds"].startswith("cgroup" if sb.limits.cpu_leaf else "rlimit RLIMIT_CPU")
        assert mode["file_size_bytes"].startswith("rlimit")
        assert set(mode) == {"memory", "pids", "cpu_seconds", "file_size_bytes"}
        out = sb.execute("ulimit -t; ulimit -f").output.split()
        assert out == ["30", str((1 << 20) // 1024)]
        big = sb.execute("head -c 2000000 /dev/zero > /tmp/big; echo $?; stat -c %s /tmp/big")
        assert big.output.split()[-1] == str(1 << 20)
        if mode["pids"].startswith("cgroup"):
            cg = next(d for d in sb.limits.dirs if "/pids/" in d or "pids.max" in os.listdir(d))
            assert Path(cg, "pids.max").read_text().strip() == "128"
            dirs = list(sb.limits.dirs)
    if mode["pids"].startswith("cgroup"):
        assert not any(os.path.exists(d) for d in dirs)


def _host_mounts() -> set[str]:
    return {line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()}


def test_close_leaves_no_processes_mounts_or_dirs(repo, tmp_path):
    mounts_before = _host_mounts()
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    sb = Sandbox([Layer(str(repo), "/testbed")], scratch_dir=str(scratch))
    assert list(scratch.iterdir())  # on-disk upper layer
    sb.execute("sleep 1000 & sleep 1001 &")
    s = session(sb, "x")
    s.run("sleep 1002 &")
    helper = sb._root.proc.pid
    sb.close()
    assert sb._root.proc.poll() is not None
    time.sleep(0.1)
    leftovers = [
        p
        for p in os.listdir("/proc")
        if p.isdigit()
        and Path(f"/proc/{p}/cmdline").exists()
        and any(
            x in Path(f"/proc/{p}/cmdline").read_bytes() for x in (b"sleep\x001000", b"sleep\x001001", b"sleep\x001002")
        )
    ]
    assert leftovers == []
    assert not Path(f"/proc/{helper}").exists()
    assert _host_mounts() == mounts_before
    assert list(scratch.iterdir()) == []
    with pytest.raises(rootfs.SandboxError, match="closed"):
        sb.execute("true")


def test_missing_layer_and_bad_interpreter_are_one_line_errors(tmp_path, as_root):
    with pytest.raises(rootfs.SandboxError, match="restore the task's layers first"):
        Sandbox([Layer(str(tmp_path / "missing"), "/testbed")])
    with pytest.raises(LookupError, match="no CPython 3.1.99"):
        Sandbox([], interpreter=("3.1.99", "/opt/python/3.1.99"))


def test_controller_crash_kills_its_sandboxes(repo):
    """Sandboxes live exactly as long as their control sockets: SIGKILL the controlling
    process and every process inside every one of its sandboxes goes too."""
    code = (
        f"import os, signal\nfrom minisandbox.sandbox.sandbox import Sandbox, Layer\n"
        f"boxes = [Sandbox([Layer({str(repo)!r}, '/testbed')]) for _ in range(3)]\n"
        f"for b in boxes: b.execute('setsid sleep 5151 > /dev/null 2>&1 &')\n"
        f"print('ready', flush=True)\nos.kill(os.getpid(), signal.SIGKILL)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(Path(rootfs.__file__).parents[2])},
    )
    assert proc.stdout == "ready\n" and proc.returncode == -9, proc.stderr
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        left = subprocess.run(["pgrep", "-f", "sleep 5151"], capture_output=True, text=True).stdout.split()
        if not left:
            break
        time.sleep(0.1)
    assert left == []


def test_forked_caller_gets_its_own_fork_server(repo):
    with Sandbox([Layer(str(repo), "/testbed")]) as sb:
        sb.execute("true")
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # a multiprocessing-style forked worker
        try:
            with Sandbox([Layer(str(repo), "/testbed")]) as sb:
                ok = sb.execute("cat pkg/mod.py").output == "def f():\n    return 1\n"
            os.write(w, b"ok" if ok else b"bad")
        finally:
            os._exit(0)
    os.close(w)
    assert os.read(r, 10) == b"ok"
    os.waitpid(pid, 0)


@pytest.mark.rootless
def test_rootless_sandbox_features(shared_tmp, rootless_user):
    """Overlay, files, diff, sessions and rlimits as the unprivileged test user."""
    from tests.fixtures.sandbox import run_json_as_user

    repo = make_repo(shared_tmp / "repo")
    subprocess.run(["chown", "-R", f"{rootless_user.pw_uid}:{rootless_user.pw_gid}", str(repo)], check=True)
    before = tree_digest(repo)
    res = run_json_as_user(f"""
import json
from minisandbox.sandbox.sandbox import Sandbox, Layer
from minisandbox.sandbox.limits import Limits
from minisandbox.sandbox.shell import session
with Sandbox([Layer({str(repo)!r}, "/testbed")], limits=Limits(pids=200, memory_bytes=2 << 30)) as sb:
    s = session(sb)
    s.run("cd pkg && export K=v")
    sess = s.run("pwd; echo $K").output
    sb.write_file("/testbed/new.txt", "n\\n")
    sb.execute("echo more >> pkg/mod.py")
    print(json.dumps({{"sess": sess, "diff": sb.diff(), "mode": sb.limits_mode, "rootless": sb.rootless,
                      "layers": sb.layer_methods, "ulimit": sb.execute("ulimit -u").output}}))
""")
    assert res["rootless"] is True and res["layers"] == {"/testbed": "overlay"}
    assert res["sess"] == "/testbed/pkg\nv\n"
    assert "+more" in res["diff"] and "new.txt" in res["diff"]
    assert res["mode"]["pids"].startswith("rlimit") and res["ulimit"].strip() == "200"
    assert tree_digest(repo) == before


@pytest.mark.rootless
def test_rootless_refuses_layers_of_other_owners(shared_tmp, rootless_user):
    from tests.fixtures.sandbox import run_as_user

    repo = make_repo(shared_tmp / "rootowned")  # owned by root, readable by all
    proc = run_as_user(
        f"from minisandbox.sandbox.sandbox import Sandbox, Layer\nSandbox([Layer({str(repo)!r}, '/testbed')])"
    )
    assert proc.returncode != 0
    assert "can only write layers owned by its user" in proc.stderr.strip().splitlines()[-1]


def test_large_commands_and_environments(repo):
    """Requests larger than a socket message (an inline patch, a big env) still work."""
    big = "x" * 500_000
    env_value = "y" * 100_000  # one environment string may not exceed 128 KiB (kernel limit)
    with Sandbox([Layer(str(repo), "/testbed")], env={"BIG": env_value}) as sb:
        res = sb.execute(f"cat > /tmp/p <<'EOF'\n{big}\nEOF\nwc -c < /tmp/p; echo ${{#BIG}}")
        assert res.output.split() == [str(len(big) + 1), str(len(env_value))]
        assert session(sb).run(f"echo {big} | wc -c").output.strip() == str(len(big) + 1)


def test_works_with_fds_above_select_limit(repo):
    """A controller with hundreds of sandboxes holds fds > 1024 (select's limit)."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1200:
        pytest.skip(f"hard fd limit {hard} too low")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1200), hard))
    null = os.open(os.devnull, os.O_RDONLY)
    held = [os.dup(null) for _ in range(1100)]
    try:
        # the first takes this process's warm sandbox, whose socket was made before the fds
        # above were; closing it frees low fds, which are taken again, so that whatever the
        # next sandbox opens (warm, or cold when the host's mount table changed meanwhile)
        # is above select's limit
        # The warmer prepares the next warm sandbox in a thread after this creation; it must
        # have finished before the close, or its socket takes one of the low fds freed below.
        first = Sandbox([Layer(str(repo), "/testbed")])
        assert sandbox_module._warmer.wait_idle(60)
        first.close()
        while (fd := os.dup(null)) < 1100:
            held.append(fd)
        os.close(fd)
        with Sandbox([Layer(str(repo), "/testbed")]) as sb:
            assert sb._root.fileno() > 1024
            assert sb.execute("echo hi", timeout=30).output == "hi\n"
            assert session(sb).run("echo there", timeout=30).output == "there\n"
    finally:
        for fd in held + [null]:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


class _LateClock:
    """`time` for minisandbox.sandbox.sandbox whose monotonic() moves 50 ms per call: the
    controller thread preempted between every two lines, as on a loaded machine."""

    def __init__(self) -> None:
        self.calls = 0

    def monotonic(self) -> float:
        self.calls += 1
        return time.monotonic() + 0.05 * self.calls

    def __getattr__(self, name: str):
        return getattr(time, name)


def test_output_written_before_exit_is_kept_when_the_reader_runs_late(repo, monkeypatch):
    """What a command wrote before it exited is in the pipe when its exit is seen; a reader
    that gets the CPU only after the command has exited, and then later than the 20 ms
    drain window, still reads all of it (under load a start snapshot came back rc 0 with
    no output: `git snapshot of /testbed failed (0)`)."""
    import minisandbox.sandbox.sandbox as sandbox_mod

    with Sandbox([Layer(str(repo), "/testbed")]) as sb:
        start = sb.mark_start()
        root = sb._root
        real_poll = root.poll
        late = []

        def poll_after_the_exit(cid):  # the reader's first look comes once the exit is in
            while cid not in root._exits:
                with root._lock:
                    root._pump(0.5)
            late.append(cid)
            return real_poll(cid)

        monkeypatch.setattr(root, "poll", poll_after_the_exit)
        monkeypatch.setattr(sandbox_mod, "time", _LateClock())
        big = sb.run(["bash", "-c", "head -c 50000 /dev/zero | tr '\\0' x; echo; echo end"])
        assert big.returncode == 0 and big.output == "x" * 50000 + "\nend\n", big.output[-100:]
        assert sb.mark_start() == start  # the start snapshot: rc 0 and its tree hash
        assert len(late) >= 2


def test_a_payload_cannot_stall_or_lose_the_command_spawner(repo):
    """Ordinary commands are started by the sandbox's command spawner (a process a payload
    can signal): stopped, init resumes it at once (it reports the exits); killed, its
    running command counts as killed and its process tree goes with it, and the next
    command gets a new spawner."""
    with Sandbox([Layer(str(repo), "/testbed")]) as sb:
        sb.execute("true")
        spawner = int(sb.execute("echo $PPID").output)
        res = sb.execute("kill -STOP $PPID; echo stopped it", timeout=30)
        assert (res.returncode, res.output, res.timed_out) == (0, "stopped it\n", False)
        assert sb.execute("echo $PPID", timeout=30).output == f"{spawner}\n"  # the same one, running
        res = sb.execute("kill -KILL $PPID; sleep 30; echo never", timeout=30)
        assert res.returncode == -9 and "never" not in res.output and not res.timed_out, res
        assert sb.execute("pgrep -f 'slee[p] 30' || echo none", timeout=30).output == "none\n"
        res = sb.execute("echo $PPID", timeout=30)
        assert res.returncode == 0 and int(res.output) != spawner


def test_a_short_command_reaches_the_controller_as_one_message(repo, monkeypatch):
    """The command spawner holds a command's start reply until the command exits (within
    `init_program.EXIT_HOLD`): its pid and exit status come in one message, so the controller
    wakes once per short command (not for the start reply, the pipe's end and the exit event
    apart). Counted structurally: the messages the controller receives per `execute("true")`
    (some run may go past the hold on a loaded machine; one of twenty must not)."""
    with Sandbox([Layer(str(repo), "/testbed")]) as sb:
        sb.execute("true")
        received = []
        real_recv = rootfs._recv

        def counting_recv(sock, *args, **kw):
            msg, fds = real_recv(sock, *args, **kw)
            received.append(msg)
            return msg, fds

        monkeypatch.setattr(rootfs, "_recv", counting_recv)
        counts = []
        for _ in range(20):
            received.clear()
            assert sb.execute("true").returncode == 0
            counts.append(len(received))
            if received and "status" in received[0]:
                assert len(received) == 1, received  # no exit event after the combined reply
        assert min(counts) == 1, counts


def test_only_a_command_nobody_feeds_has_its_start_reply_held(repo, monkeypatch):
    """The spawner holds a start reply only when asked (`hold`): `run` without input asks,
    a command fed on stdin (its feeding starts with the reply) and `spawn` (its caller may
    write to it first) do not, so they are not slowed by the hold."""
    with Sandbox([Layer(str(repo), "/testbed")]) as sb:
        sb.execute("true")
        sent = []
        real_send = rootfs._send

        def recording_send(sock, msg, *args, **kw):
            if msg.get("op") == "spawn":
                sent.append(msg)
            return real_send(sock, msg, *args, **kw)

        monkeypatch.setattr(rootfs, "_send", recording_send)
        assert sb.execute("true").returncode == 0
        assert sb.run(["cat"], input=b"fed\n").output == "fed\n"
        assert spawn_and_collect(sb, ["true"]) == 0
        assert [bool(m.get("hold")) for m in sent] == [True, False, False], sent


def spawn_and_collect(sb: Sandbox, argv: list[str]) -> int:
    """`argv` started with `spawn` (its output to a pipe of ours) and collected: its exit."""
    out_r, out_w = os.pipe2(os.O_CLOEXEC)
    cid = sb.spawn(argv, stdout=out_w, stderr=out_w)
    os.close(out_w)
    try:
        return sb.collect(cid, [out_r], timeout=30)[1]
    finally:
        os.close(out_r)


def test_collected_commands_leave_nothing_behind_in_the_controller(repo):
    """An open sandbox runs tens of thousands of commands: once a command has been collected
    (`run`, `execute`, `collect`, `wait`), the controller keeps neither its exit status nor
    its pid (`poll`, which `run` reads the exit through, kept every status before)."""
    with Sandbox([Layer(str(repo), "/testbed")]) as sb:
        for _ in range(20):
            assert sb.execute("true").returncode == 0
        assert sb.execute("exit 3").returncode == 3
        assert sb.run(["cat"], input=b"x").output == "x"
        assert spawn_and_collect(sb, ["true"]) == 0
        assert sb.wait(sb.spawn(["true"]), timeout=30) == 0
        assert (sb._root._exits, sb._root.pids) == ({}, {})


def test_commands_past_the_spawners_hold_report_as_before(repo):
    """Exit status, output and its streams, signals and timeouts, for commands that end
    within the spawner's reply hold (one message) and after it (start reply, then exit
    event), through `run` and through `collect` (stdout and stderr on pipes apart)."""
    with Sandbox([Layer(str(repo), "/testbed")]) as sb:
        for delay in ("", "sleep 0.1; "):  # within the hold / after it
            res = sb.execute(f"{delay}echo out; echo err >&2; exit 3")
            assert (res.returncode, res.output, res.timed_out) == (3, "out\nerr\n", False), res
            res = sb.execute(f"{delay}kill -TERM $$")
            assert res.returncode == -15, res
            big = sb.execute(f"{delay}head -c 300000 /dev/zero | tr '\\0' y")
            assert big.returncode == 0 and big.output == "y" * 300000
            out_r, out_w = os.pipe2(os.O_CLOEXEC)
            err_r, err_w = os.pipe2(os.O_CLOEXEC)
            cid = sb.spawn(["bash", "-c", f"{delay}echo to-out; echo to-err >&2; exit 5"], stdout=out_w, stderr=err_w)
            os.close(out_w)
            os.close(err_w)
            try:
                outs, code, timed_out = sb.collect(cid, [out_r, err_r], timeout=30)
            finally:
                os.close(out_r)
                os.close(err_r)
            assert (outs, code, timed_out) == ([b"to-out\n", b"to-err\n"], 5, False)
        res = sb.execute("echo started; sleep 30", timeout=0.5)
        assert res.timed_out and res.output.startswith("started"), res
        assert sb.execute("echo after").output == "after\n"


def test_sandboxes_created_at_once_get_their_own_mapped_namespaces_and_no_other_fds(repo):
    """The fork server maps a root sandbox's user namespace once its starter has made it,
    serving other requests meanwhile, and each creation brings its own reply socket: eight
    sandboxes started at once by threads each get the identity map under an owner of their
    own, and their inits hold the same descriptors as one started alone (no other starter's
    pipe, no other creation's socket)."""
    from concurrent.futures import ThreadPoolExecutor

    def fds_of(sb: Sandbox) -> list[str]:
        pid = sb._root.proc.pid
        return sorted(os.readlink(f"/proc/{pid}/fd/{fd}").split(":")[0] for fd in os.listdir(f"/proc/{pid}/fd"))

    def owner(sb: Sandbox) -> int:
        import fcntl
        import struct

        fd = os.open(f"/proc/{sb._root.proc.pid}/ns/user", os.O_RDONLY)
        try:
            return struct.unpack("I", fcntl.ioctl(fd, 0xB704, b"\0" * 4))[0]  # NS_GET_OWNER_UID
        finally:
            os.close(fd)

    with Sandbox([Layer(str(repo), "/testbed")]) as alone:
        alone.execute("true")  # (init serving, its spawner started: as the eight below are when looked at)
        alone_fds = fds_of(alone)
    with ThreadPoolExecutor(8) as pool:
        boxes = list(pool.map(lambda _i: Sandbox([Layer(str(repo), "/testbed")]), range(8)))
    try:
        for sb in boxes:
            assert sb.execute("cat /proc/self/uid_map").output.split() == ["0", "0", "4294967295"]
            assert fds_of(sb) == alone_fds
        if rootfs.userns_base({"rootless": False}) is not None:
            assert len({owner(sb) for sb in boxes}) == 8
    finally:
        for sb in boxes:
            sb.close()


def test_a_layer_mounted_after_the_warm_sandbox_started_is_seen(tmp_path, as_root):
    """A warm sandbox copied the host's mount table when it was started: a layer that is a
    mount made after that (an image mounted for the next task) must not show up empty."""
    first = tmp_path / "first"
    first.mkdir()
    (first / "f").write_text("first")
    for _ in range(3):  # from the second creation on, this process keeps a warm sandbox ready
        with Sandbox([Layer(str(first), "/work")]) as sb:
            assert sb.execute("cat /work/f").output.strip() == "first"
    later = tmp_path / "later"
    later.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "tmpfs", str(later)], check=True)
    try:
        (later / "f").write_text("later")
        with Sandbox([Layer(str(later), "/work")]) as sb:
            assert sb.execute("cat /work/f").output.strip() == "later"
    finally:
        subprocess.run(["umount", "-l", str(later)], check=True)
