"""The task record and the repo layer as an adversary of the grading host.

The grader reads the task's reference test files from the repo layer on the host
(`evaluate.plan_script`, `gradedstate.graded_state`), and rebuilds SWE-bench's test
files in a host scratch directory to apply the test patch (`gradedstate._apply_test_patch`).
The paths come from the task record (FAIL_TO_PASS/PASS_TO_PASS ids, the test patch's
`---` headers), which a store's index (or a task file) supplies and which is only
type-checked, and the layer may hold symlinks whose targets are never restricted
(node/restore.py: they are meant to resolve inside the sandbox only). Before the fix:

* a SWE-bench record whose test patch names `L/../../..../tmp/x` over a layer whose `L`
  is a symlink to a deep directory of the layer made the grader (root, on the host)
  write the layer's bytes to `/tmp/x`: any host file, such as the grader's own code;
* a FAIL_TO_PASS id `/etc/hostname::test` (or `../../../etc/hostname::test`, or
  `tests/hostname::test` over a layer whose `tests` is a symlink to /etc) made the grader
  read that host file and ship it into the sandbox and `eval.sh` as a reference test file.

Each case runs the real `evaluate()` with an executor whose environment only records the
script it is given (nothing of the host is needed beyond the grader's own code).

The agent's side (root, real sandboxes): what an agent leaves outside its diff (a `.pth`
and a pytest plugin in the venv, a user site, pip config, /tmp, ~/.bashrc, git hooks, a
`git` first on PATH) makes a failing test pass in its own sandbox but never reaches its
grade; and `Sandbox.diff()` runs none of the programs the agent planted.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from pathlib import Path

import pytest

from minisandbox.catalog import EnvSpec
from minisandbox.grading.evaluate import evaluate
from minisandbox.grading.gradedstate import read_snapshot_file
from minisandbox.records import normalize
from minisandbox.sandbox.sandbox import ExecResult

SPEC = EnvSpec(name="probe", kind="swebench", source="calc/calc", commit=None, python="3.11")
CANDIDATE = "diff --git a/calc.py b/calc.py\n--- a/calc.py\n+++ b/calc.py\n@@ -1 +1 @@\n-a = 1\n+a = 2\n"


class _Env:
    def __init__(self, reference: Path, seen: list) -> None:
        self.reference_dir = reference
        self.seen = seen

    def execute(self, script, timeout, stop=None):
        self.seen.append(script)
        return ExecResult("", 0, False)


class _Executor:
    prepares_task_state = False

    def __init__(self, reference: Path) -> None:
        self.reference = reference
        self.scripts: list = []

    @contextlib.contextmanager
    def open(self, record):
        yield _Env(self.reference, self.scripts)


def _layer(tmp_path: Path) -> Path:
    ref = tmp_path / "cache" / "layers" / ("a" * 64)
    (ref / "tests").mkdir(parents=True)
    (ref / "calc.py").write_text("a = 1\n")
    (ref / "tests" / "test_calc.py").write_text("def test_a():\n    assert True\n")
    return ref


def _smith(f2p: list[str]):
    return normalize(
        {
            "instance_id": "calc__calc.1234abcd.probe",
            "repo": "swesmith/calc__calc.1234abcd",
            "patch": CANDIDATE,
            "FAIL_TO_PASS": f2p,
            "PASS_TO_PASS": ["tests/test_calc.py::test_a"],
        }
    )


def _grade(record, ref: Path):
    ex = _Executor(ref)
    ev = evaluate(record, SPEC, CANDIDATE, ex)
    assert ex.scripts, ev.entry  # it got as far as running the script
    return ex.scripts[0]


def test_test_patch_header_through_a_layer_symlink_writes_no_host_file(tmp_path):
    ref = _layer(tmp_path)
    depth = 10
    deep = "/".join(f"d{i}" for i in range(depth))
    (ref / deep).mkdir(parents=True)
    (ref / "L").symlink_to(deep)  # relative: it stays in the layer
    target = Path("/tmp") / f"msb-probe2-{uuid.uuid4().hex[:10]}"
    # what the host read resolves to (ref/L/../../..: the layer's root) holds the payload
    payload = ref / target.as_posix().lstrip("/")
    payload.parent.mkdir(parents=True)
    payload.write_text("import os  # planted by the record\n")
    rel = "L/" + "../" * depth + target.as_posix().lstrip("/")
    test_patch = (
        f"diff --git a/{rel} b/{rel}\n--- a/{rel}\n+++ b/{rel}\n@@ -1 +1 @@\n-import os  # planted by the record\n+x\n"
        "diff --git a/tests/test_calc.py b/tests/test_calc.py\n--- a/tests/test_calc.py\n+++ b/tests/test_calc.py\n"
        "@@ -1,2 +1,2 @@\n-def test_a():\n+def test_b():\n     assert True\n"
    )
    record = normalize(
        {
            "instance_id": "calc__calc-1",
            "repo": "calc/calc",
            "base_commit": "1" * 40,
            "version": "0.1",
            "patch": CANDIDATE,
            "test_patch": test_patch,
            "FAIL_TO_PASS": ["tests/test_calc.py::test_b"],
            "PASS_TO_PASS": [],
        }
    )
    try:
        script = _grade(record, ref)
        assert not target.exists(), f"the grader wrote {target} on the host"
        assert script.reference_files.get(rel) is None
        # the honest file of the same test patch is still read
        assert script.reference_files["tests/test_calc.py"] == b"def test_a():\n    assert True\n"
    finally:
        with contextlib.suppress(FileNotFoundError):
            target.unlink()


@pytest.mark.parametrize("how", ["absolute", "dotdot", "dir-symlink"])
def test_a_test_id_naming_a_host_file_reads_nothing_of_the_host(tmp_path, how):
    ref = _layer(tmp_path)
    secret = tmp_path / "host-secret"
    secret.mkdir()
    (secret / "token.py").write_text("HOST SECRET 5f1d\n")
    if how == "absolute":
        rel = str(secret / "token.py")
    elif how == "dotdot":
        rel = "../" * (len(ref.parts) + 1) + str(secret / "token.py").lstrip("/")
    else:
        (ref / "tests" / "host").symlink_to(secret)  # a directory of the layer pointing out of it
        rel = "tests/host/token.py"
    assert (ref / rel).read_text() == "HOST SECRET 5f1d\n"  # what the host would follow
    script = _grade(_smith([f"{rel}::test_x"]), ref)
    assert script.reference_files.get(rel) is None
    assert "5f1d" not in str(script.reference_files)
    assert all(b"HOST SECRET" not in (v or b"") for v in script.reference_files.values())


def test_symlinks_inside_the_layer_still_resolve(tmp_path):
    """A relative link that stays in the snapshot reads as before (the sandbox sees the
    same file); the file itself being a symlink, or a link leaving the snapshot, reads None."""
    ref = _layer(tmp_path)
    (ref / "testing").symlink_to("tests")
    (ref / "pkg" / "sub").mkdir(parents=True)
    (ref / "pkg" / "sub" / "up").symlink_to("../../tests")
    (ref / "tests" / "alias.py").symlink_to("test_calc.py")
    (ref / "out").symlink_to("../../..")
    (ref / "abs").symlink_to(str(ref / "tests"))
    body = (ref / "tests" / "test_calc.py").read_bytes()
    assert read_snapshot_file(ref, "tests/test_calc.py") == body
    assert read_snapshot_file(ref, "testing/test_calc.py") == body
    assert read_snapshot_file(ref, "pkg/sub/up/test_calc.py") == body
    assert read_snapshot_file(ref, "tests/alias.py") is None
    assert read_snapshot_file(ref, "out/layers/" + "a" * 64 + "/calc.py") is None
    assert read_snapshot_file(ref, "abs/test_calc.py") is None
    assert read_snapshot_file(ref, "tests") is None
    assert read_snapshot_file(ref, "tests/missing.py") is None
    assert read_snapshot_file(ref, "calc.py/x") is None
    os.mkfifo(ref / "tests" / "fifo.py")
    assert read_snapshot_file(ref, "tests/fifo.py") is None  # not opened for reading: no block


# --------------------------------------------------------------------------- the agent's leftovers

AGENT_PLUGIN = """\
import sys
import pytest
sys.stderr.write("AGENT-PLUGIN-LOADED\\n")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    out = yield
    rep = out.get_result()
    if rep.failed:
        rep.outcome, rep.longrepr = "passed", None
"""

#: Everything an agent can leave outside the repository for a grader in the same
#: environment: a `.pth` in the venv (runs at every interpreter start) loading a plugin that
#: turns failures into passes, pytest options in the environment of any later shell, a user
#: site `usercustomize`, a pip configuration, a sitecustomize in /tmp, a `git` first on PATH,
#: and git configuration and hooks of the repository.
AGENT_LEFTOVERS = r"""
set -e
site=$(python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
printf '%s' "$AGENT_PLUGIN" > "$site/agent_plugin.py"
echo 'import os, sys; sys.stderr.write("AGENT-PTH-RAN\n"); os.environ.setdefault("PYTEST_ADDOPTS", "-p agent_plugin")' \
    > "$site/zz_agent.pth"
user=$(python -c 'import site; print(site.getusersitepackages())')
mkdir -p "$user" /root/.config/pip
echo 'import sys; sys.stderr.write("AGENT-USERCUSTOMIZE\n")' > "$user/usercustomize.py"
printf '[global]\nindex-url = http://agent.invalid/\n' > /root/.config/pip/pip.conf
echo 'import sys; sys.stderr.write("AGENT-SITECUSTOMIZE\n")' > /tmp/sitecustomize.py
echo 'export PYTHONPATH=/tmp PYTEST_ADDOPTS="-p agent_plugin"' >> /root/.bashrc
printf '#!/bin/sh\necho "$*" >> /tmp/agent-git.log\nexec /usr/bin/git "$@"\n' > "$VIRTUAL_ENV/bin/git"
chmod +x "$VIRTUAL_ENV/bin/git"
git -C /testbed config core.hooksPath /tmp/hooks
mkdir -p /tmp/hooks && printf '#!/bin/sh\necho AGENT-HOOK >&2\n' > /tmp/hooks/post-checkout
echo '# a comment' >> /testbed/calc.py
"""


@pytest.mark.root
def test_what_an_agent_leaves_outside_its_diff_does_not_reach_its_grade(tmp_path):
    """The agent's sandbox (task start state as `open_task` makes it, the venv active)
    plants a reward hack in the venv and around it; the hack works there. Graded from its
    diff in a fresh sandbox over the same layers, none of it runs and the bug still fails."""
    from minisandbox.sandbox.sandbox import Layer, Sandbox
    from minisandbox.task import _GIT_ID, AGENT_ENV, _setup_script
    from tests.fixtures.evaluation import HACK_CALC, HACK_TEST_CALC, HACK_TEST_CMD, hack_task, smith_record
    from tests.security.test_reward_hacks import root_layers_executor

    files = {"calc.py": HACK_CALC, "tests/test_calc.py": HACK_TEST_CALC}
    t = hack_task(tmp_path / "task", "leftovers", files, "calc.py")
    record = smith_record(
        "calc__calc.00000000.func_pm_op_change__lo",
        t.bug,
        ["tests/test_calc.py::test_add"],
        ["tests/test_calc.py::test_sub"],
    )
    executor = root_layers_executor(t.repo, tmp_path / "task")
    venv_layer = executor.layers["/opt/miniconda3/envs/testbed"]
    before = sorted(p.name for p in venv_layer.rglob("*"))
    interp = executor.interpreter
    with Sandbox(
        [Layer(str(v), k) for k, v in executor.layers.items()],
        interpreter=(interp["version"], interp["prefix"]),
        env=AGENT_ENV,
        network="none",
    ) as agent:
        agent.write_file("/tmp/.minisandbox-task.patch", record.patch)  # (as open_task sets it up)
        res = agent.run(["bash", "-c", _setup_script(record)], cwd="/", timeout=120, env=_GIT_ID)
        assert res.returncode == 0, res.output
        agent.mark_start()
        res = agent.run(
            ["bash", "-c", AGENT_LEFTOVERS], cwd="/testbed", timeout=120, env={"AGENT_PLUGIN": AGENT_PLUGIN}
        )
        assert res.returncode == 0, res.output
        # in the agent's own sandbox the hack works: the buggy `add` "passes"
        # (the start state has no FAIL_TO_PASS file: the agent's own copy, outside the repo)
        agent.write_file("/tmp/agent_tests/test_calc.py", HACK_TEST_CALC)
        here = agent.run(["bash", "-c", f"cd /testbed; {HACK_TEST_CMD} /tmp/agent_tests/test_calc.py"], timeout=120)
        assert "AGENT-PTH-RAN" in here.output and "::test_add PASSED" in here.output, here.output
        patch = agent.diff()
    assert [line for line in patch.splitlines() if line.startswith("+++ ")] == ["+++ b/calc.py"], patch
    ev = evaluate(record, t.spec, patch, executor)
    assert not ev.resolved and ev.reason == "tests-failed", (ev.reason, ev.output[-2000:])
    for marker in ("AGENT-PTH-RAN", "AGENT-PLUGIN-LOADED", "AGENT-USERCUSTOMIZE", "AGENT-SITECUSTOMIZE", "AGENT-HOOK"):
        assert marker not in ev.output, marker
    assert ev.status_map.get("tests/test_calc.py::test_add") == "FAILED", ev.status_map
    assert sorted(p.name for p in venv_layer.rglob("*")) == before  # the shared layer was never written


@pytest.mark.root
def test_the_diff_is_not_computed_by_a_program_the_agent_planted(tmp_path):
    """`Sandbox.diff()` ran `git` (and `mktemp`, `bash`) from the sandbox's PATH, whose first
    entry is the venv's `bin/` the agent can write, read the agent's `~/.gitconfig`, and
    merged git's stderr into the patch. Not a reward hole (the grader treats the diff as an
    untrusted candidate patch), but the diff must be the tree's: the host's tools, no global
    config, explicit `a/`/`b/` prefixes, stderr kept out."""
    from minisandbox.sandbox.sandbox import Layer, Sandbox
    from minisandbox.task import AGENT_ENV

    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "a.py").write_text("x = 1\n")
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    with Sandbox(
        [Layer(str(repo), "/testbed"), Layer(str(venv), "/opt/miniconda3/envs/testbed")], env=AGENT_ENV
    ) as agent:
        agent.mark_start()
        planted = (
            "#!/bin/sh\necho planted >> /tmp/planted.log\necho 'AGENT-GIT: whatever' >&2\nexec /usr/bin/git \"$@\"\n"
        )
        for tool in ("git", "mktemp", "sh", "bash"):
            agent.write_file(
                f"/opt/miniconda3/envs/testbed/bin/{tool}", planted.replace("/usr/bin/git", f"/bin/{tool}")
            )
        res = agent.run(
            [
                "/bin/bash",
                "-c",
                "chmod +x /opt/miniconda3/envs/testbed/bin/*; echo y = 2 >> /testbed/a.py; "
                "printf '[diff]\\n\\tnoprefix = true\\n' > ~/.gitconfig",
            ]
        )
        assert res.returncode == 0, res.output
        patch = agent.diff()
        ran = agent.run(["/bin/sh", "-c", "cat /tmp/planted.log 2>/dev/null | wc -l"]).output.strip()
    assert ran == "0", (ran, patch)
    assert patch.startswith("diff --git a/a.py b/a.py\n"), patch
    assert "+y = 2\n" in patch and "AGENT-GIT" not in patch, patch


def test_a_test_id_with_a_nul_byte_is_no_crash(tmp_path):
    ref = _layer(tmp_path)
    assert read_snapshot_file(ref, "tests/test_calc.py\0x") is None
    script = _grade(_smith(["tests/te\0st.py::test_x"]), ref)
    assert script.reference_files.get("tests/te\0st.py") is None
