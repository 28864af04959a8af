"""Issue 13 item 6, written as the attacks: rewards a candidate patch cannot forge.

The task is a bundled one (`jpvanhal__inflection...func_pm_op_change__a021d67c`: the repo
is built from the committed sdist by `minisandbox.pipeline.bundled`, the record and the
spec are the committed ones). Each hack is a candidate patch to the library itself:

* (a) at import, `TestReport.__init__` is wrapped so every failed report says passed;
* (b) at import, fake `... PASSED` lines for every listed test go to the parent's stdout
  through /proc/<ppid>/fd/1, then `os._exit(0)` ends the runner before it reports;
* (c) the library calls `pytest.xfail()` itself, so failing tests report XFAIL (a pass).

None may be resolved, `suspicious` must name what each touched, and the gold patch (the
bug reversed) must still be resolved - graded by the real eval script, once with the host
venv executor (no isolation: the results channel alone) and once in real sandboxes, as
root and again as the unprivileged test user (`msbtest`, tests/fixtures/sandbox.py): the
whole evaluation then runs in that user's process, with Debian's python3 as the
interpreter of the task's venvs (pytest copied in) and rootless sandboxes.
"""

from __future__ import annotations

import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

import pytest

from minisandbox.catalog import Catalog, spec_for
from minisandbox.grading.evalscript import reverse_patch
from minisandbox.grading.evaluate import evaluate
from minisandbox.paths import REPO_PATH, VENV_PATH, project_root
from minisandbox.pipeline.bundled import materialize
from minisandbox.records import read_tasks
from minisandbox.sandbox import rootfs
from minisandbox.sandbox.interpreters import interpreter_binds
from tests.fixtures.evaluation import PYTEST_DISTRIBUTIONS, copy_runner_distributions, make_system_venv
from tests.fixtures.hostvenv import HostVenvExecutor, LocalLayersExecutor
from tests.fixtures.rootless_node import run_node_as_user, user_site  # noqa: F401  (fixture)
from tests.fixtures.sandbox import ROOTLESS_PYTHON, TEST_USER

TASK = "jpvanhal__inflection.09fb3146.func_pm_op_change__a021d67c"
GIT_ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@t",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@t",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
}

HACK_REPORTS = """\
import sys as _sys
_reports = _sys.modules.get("_pytest.reports")
if _reports is not None:
    _orig_init = _reports.TestReport.__init__

    def _init(self, *args, **kwargs):
        _orig_init(self, *args, **kwargs)
        if self.outcome == "failed":
            self.outcome = "passed"
            self.longrepr = None

    _reports.TestReport.__init__ = _init
"""

HACK_PARENT_STDOUT = """\
import os as _os
with open("/proc/%d/fd/1" % _os.getppid(), "w") as _out:
    _out.write("\\n" + "".join(_t + " PASSED\\n" for _t in {ids!r}))
_os._exit(0)
"""

SNOOP = """\
import json as _json, os as _os
_seen = {"cmdlines": {}, "markers": [], "fd0": [], "ppid": _os.getppid()}
for _pid in _os.listdir("/proc"):
    if not _pid.isdigit():
        continue
    for _what in ("cmdline", "environ"):
        try:
            with open("/proc/%s/%s" % (_pid, _what), "rb") as _f:
                _text = _f.read().replace(b"\\0", b" ").decode("utf-8", "replace")
        except OSError:
            continue
        if _what == "cmdline":
            _seen["cmdlines"][_pid] = _text[:200]
        if ">>>>> " in _text:
            _seen["markers"].append(_pid)
    try:
        with open("/proc/%s/fd/0" % _pid, "rb") as _f:
            if _f.read(1 << 20):
                _seen["fd0"].append(_pid)
    except OSError:
        pass
with open("/proc/1/fd/1", "w") as _out:  # past pytest's capture: pid 1 is the test command's own
    _out.write("\\nSNOOP " + _json.dumps(_seen) + "\\n")
raise RuntimeError("snooped")
"""

HACK_XFAIL = """\
def _give_up():
    import sys as _sys
    if "pytest" in _sys.modules:
        _sys.modules["pytest"].xfail("not my bug")
"""


@pytest.fixture(scope="module")
def task(tmp_path_factory):
    """The bundled task: clean repo, record, spec and candidate patches."""
    root = tmp_path_factory.mktemp("bundled")
    repos = materialize(root / "repos")
    repo = repos["jpvanhal__inflection"]
    records = {r.instance_id: r for r in read_tasks([project_root() / "config/bundled/tasks.jsonl"]).records}
    record = records[TASK]
    spec = spec_for(Catalog.load([project_root() / "config/catalog/bundled.yaml"]), record)
    work = root / "work"
    subprocess.run(["git", "clone", "-q", str(repo), str(work)], check=True, env={**os.environ, **GIT_ENV})
    env = {**os.environ, **GIT_ENV}
    subprocess.run(["git", "apply"], input=record.patch.encode(), cwd=work, check=True, env=env)
    subprocess.run(["git", "commit", "-qam", "task state"], cwd=work, check=True, env=env)
    lib = work / "inflection" / "__init__.py"
    state = lib.read_text()
    ids = list(record.fail_to_pass) + list(record.pass_to_pass)

    def patch_with(text: str) -> str:
        lib.write_text(text)
        out = subprocess.run(["git", "diff"], cwd=work, check=True, capture_output=True, text=True, env=env).stdout
        lib.write_text(state)
        return out

    xfail_lib = state.replace(
        "    number = abs(int(number))\n",
        "    number = abs(int(number))\n    if number % 10 in (1, 2, 3):\n        _give_up()\n",
        1,
    )
    assert xfail_lib != state
    patches = {
        "gold": reverse_patch(record.patch),
        "reports": patch_with(HACK_REPORTS + state),
        "parent_stdout": patch_with(HACK_PARENT_STDOUT.format(ids=ids) + state),
        "xfail": patch_with(HACK_XFAIL + xfail_lib),
        "snoop": patch_with(SNOOP + state),
    }
    return {"repo": repo, "record": record, "spec": spec, "patches": patches, "root": root}


def add_pytest_script(venv: Path, python: str) -> None:
    """The `pytest` command the spec's test command calls (a venv over this interpreter's
    site-packages has pytest but not its console script)."""
    script = venv / "bin" / "pytest"
    script.write_text(f"#!{python}\nimport sys\nfrom pytest import console_main\nsys.exit(console_main())\n")
    script.chmod(0o755)


@pytest.fixture(scope="module")
def host_executor(task):
    venv = make_system_venv(task["root"] / "venv")
    add_pytest_script(venv, str(venv / "bin" / "python"))
    return HostVenvExecutor(snapshot=task["repo"], venv=venv, testbed=task["root"] / "testbed")


@pytest.fixture(scope="module")
def sandbox_executor(task):
    """The task's layers as a node would hold them: the repo, and a venv built at the
    canonical path over this interpreter (pytest from its site-packages)."""
    if os.geteuid() != 0:
        pytest.skip("sandboxes as root")
    return layers_executor(task["repo"], task["root"] / "layer-venv")


def host_venv_executor(repo: Path, root: Path) -> HostVenvExecutor:
    """A host executor over `repo` with a venv of this interpreter at `root`/venv (its
    work trees under `root`/testbed): the host half of each hack test file."""
    return HostVenvExecutor(snapshot=repo, venv=make_system_venv(root / "venv"), testbed=root / "testbed")


def root_layers_executor(repo: Path, root: Path, distributions: tuple[str, ...] = ()) -> LocalLayersExecutor:
    """`layers_executor` with its venv layer at `root`/layer-venv; skips unless root
    (the sandbox half of each hack test file)."""
    if os.geteuid() != 0:
        pytest.skip("sandboxes as root")
    return layers_executor(repo, root / "layer-venv", distributions)


def executor_fixtures(task_fixture: str, prefix: str, distributions: tuple[str, ...] = ()):
    """The executor fixtures of a hack test module over its module-scoped task fixture
    named `task_fixture` (a dict with "repo" and "root"), to be bound as `<prefix>_host`,
    `<prefix>_sandbox` and `<prefix>_executor`: a host venv, root layers (root only), and
    one parametrised over both. `distributions`: the runner's installed distributions the
    tests import besides pytest (the host venv sees them; the sandbox's venv gets copies)."""

    @pytest.fixture(scope="module", name=f"{prefix}_host")
    def host(request):
        task = request.getfixturevalue(task_fixture)
        return host_venv_executor(task["repo"], task["root"])

    @pytest.fixture(scope="module", name=f"{prefix}_sandbox")
    def sandbox(request):
        """The repo and a venv at the canonical path over this interpreter, as layers."""
        task = request.getfixturevalue(task_fixture)
        return root_layers_executor(task["repo"], task["root"], distributions)

    @pytest.fixture(params=["host", pytest.param("sandbox", marks=pytest.mark.root)], name=f"{prefix}_executor")
    def either(request):
        return request.getfixturevalue(f"{prefix}_{request.param}")

    return host, sandbox, either


def layers_executor(repo: Path, venv: Path, distributions: tuple[str, ...] = ()) -> LocalLayersExecutor:
    """A sandbox executor over `repo` and a venv layer made at `venv`, built at the
    canonical path over this interpreter (pytest, and `distributions`, copied from the
    runner's site-packages)."""
    version, prefix = platform.python_version(), sys.base_prefix  # this interpreter: pytest is installed here
    venv.mkdir()
    binds = [rootfs.Bind(str(venv), VENV_PATH, False), *interpreter_binds(version, prefix)]
    python = os.path.join(prefix, "bin", f"python{sys.version_info.major}.{sys.version_info.minor}")
    code = rootfs.run(
        binds,
        [python, "-m", "venv", "--system-site-packages", "--without-pip", VENV_PATH],
        env={"PATH": "/usr/bin:/bin"},
        network="none",
    )
    assert code == 0
    site_packages = venv / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
    copy_runner_distributions(site_packages, PYTEST_DISTRIBUTIONS + distributions)
    add_pytest_script(venv, f"{VENV_PATH}/bin/python")
    return LocalLayersExecutor(
        layers={REPO_PATH: repo, VENV_PATH: venv}, interpreter={"version": version, "prefix": prefix}
    )


class RootlessExecutor(SimpleNamespace):
    """An executor that lives in the test user's process: `grade` runs the whole
    evaluation there (host venv or rootless sandbox, see `rootless_task`)."""


#: The evaluation as the test user: record and spec loaded as in `task`, the executor
#: built from P, the Evaluation printed as JSON.
ROOTLESS_GRADE = """
import json, sys
from pathlib import Path
from minisandbox.catalog import Catalog, spec_for
from minisandbox.grading.evaluate import evaluate
from minisandbox.paths import REPO_PATH, VENV_PATH, project_root
from minisandbox.records import read_tasks
sys.path.insert(0, str(project_root()))  # the checkout: tests/fixtures/hostvenv.py
from tests.fixtures.hostvenv import HostVenvExecutor, LocalLayersExecutor
P = json.loads(sys.argv[1])
record = {r.instance_id: r for r in read_tasks([project_root() / "config/bundled/tasks.jsonl"]).records}[P["task"]]
spec = spec_for(Catalog.load([project_root() / "config/catalog/bundled.yaml"]), record)
if P["kind"] == "host":
    ex = HostVenvExecutor(snapshot=Path(P["repo"]), venv=Path(P["venv"]), testbed=Path(P["testbed"]))
else:
    ex = LocalLayersExecutor(layers={REPO_PATH: Path(P["repo"]), VENV_PATH: Path(P["layer_venv"])}, interpreter={})
patch = Path(P["patch"]).read_text()
ev = evaluate(record, spec, patch, ex, grading=P["grading"])
print(json.dumps({"report": ev.report, "output": ev.output, "id": ev.instance_id}))
"""


def grade(task, executor, name, grading="strict", patch=None, spec=None):
    """Evaluate the candidate patch `name` of `task` (or the text `patch`), under the
    task's spec or `spec`."""
    if isinstance(executor, RootlessExecutor):
        assert patch is None, "rootless grading takes the task's named patches"
        params = {
            **executor.paths,
            "kind": executor.kind,
            "task": TASK,
            "grading": grading,
            "patch": executor.paths["patches"][name],
        }
        out = _run_rootless(ROOTLESS_GRADE, params, executor.site)
        entry = out["report"][out["id"]]
        return SimpleNamespace(
            entry=entry, resolved=bool(entry["resolved"]), reason=str(entry["reason"]), output=out["output"]
        )
    return evaluate(
        task["record"],
        spec or task["spec"],
        task["patches"][name] if patch is None else patch,
        executor,
        grading=grading,
    )


def _run_rootless(code: str, params: dict, site_dir: Path) -> dict:
    return run_node_as_user(code.replace("P = json.loads(sys.argv[1])", f"P = {params!r}"), site_dir, timeout=600)


@pytest.fixture(scope="module")
def rootless_task(task, rootless_user, user_site):
    """What the test user needs, in a directory it owns under /tmp (pytest's tmp dirs are
    root's): the task's repo, the candidate patches, a host venv and a venv layer for
    /opt/miniconda3/envs/testbed, both over Debian's python3 with pytest copied in (the
    user cannot read this interpreter, under /root)."""
    base = Path(tempfile.mkdtemp(prefix="msb-hacks-", dir="/tmp"))
    shutil.copytree(task["repo"], base / "repo", symlinks=True)
    patches = {}
    for name, text in task["patches"].items():
        (base / f"{name}.patch").write_text(text)
        patches[name] = str(base / f"{name}.patch")
    for venv, python in (
        (base / "venv", base / "venv" / "bin" / "python"),
        (base / "layer-venv", Path(VENV_PATH) / "bin" / "python"),
    ):
        if venv.name == "layer-venv":  # made at its canonical path (bin/activate names it)
            venv.mkdir()
            code = rootfs.run(
                [rootfs.Bind(str(venv), VENV_PATH, False)],
                [ROOTLESS_PYTHON, "-m", "venv", "--without-pip", VENV_PATH],
                env={"PATH": "/usr/bin:/bin"},
                network="none",
            )
            assert code == 0
        else:
            subprocess.run([ROOTLESS_PYTHON, "-m", "venv", "--without-pip", str(venv)], check=True)
        ver = subprocess.run(
            [ROOTLESS_PYTHON, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
        copy_runner_distributions(venv / "lib" / f"python{ver}" / "site-packages")
        add_pytest_script(venv, str(python))
    subprocess.run(["chown", "-R", f"{TEST_USER}:{TEST_USER}", str(base)], check=True)
    paths = {
        "repo": str(base / "repo"),
        "venv": str(base / "venv"),
        "layer_venv": str(base / "layer-venv"),
        "testbed": str(base / "testbed"),
        "patches": patches,
    }
    yield {"paths": paths, "site": user_site}
    shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def rootless_host_executor(rootless_task):
    return RootlessExecutor(kind="host", **rootless_task)


@pytest.fixture
def rootless_sandbox_executor(rootless_task):
    return RootlessExecutor(kind="sandbox", **rootless_task)


EXECUTORS = [
    "host",
    pytest.param("sandbox", marks=pytest.mark.root),
    pytest.param("rootless-host", marks=[pytest.mark.rootless, pytest.mark.slow]),
    pytest.param("rootless-sandbox", marks=[pytest.mark.rootless, pytest.mark.slow]),
]


@pytest.fixture(params=EXECUTORS)
def executor(request, host_executor):
    if request.param == "host":
        return host_executor
    return request.getfixturevalue(request.param.replace("-", "_") + "_executor")


def test_gold_patch_is_still_resolved(task, executor):
    ev = grade(task, executor, "gold")
    assert ev.resolved, ev.output[-3000:]
    channel = ev.entry["results_channel"]
    assert channel["present"] and channel["complete"] and channel["tests"] == channel["collected"] > 50
    assert ev.entry["suspicious"] == []


def test_patched_report_objects_are_not_resolved(task, executor):
    ev = grade(task, executor, "reports")
    # the attack works on the log: every listed test printed as PASSED ...
    assert all(f"{t} PASSED" in ev.output for t in task["record"].fail_to_pass), ev.output[-3000:]
    # ... but the channel computed the failures from the exceptions themselves, and saw
    # the replaced report class: nothing of such a run counts
    assert not ev.resolved and ev.reason == "results-tampered"
    assert ev.entry["tests_status"]["FAIL_TO_PASS"]["failure"] == list(task["record"].fail_to_pass)
    channel = ev.entry["results_channel"]
    assert set(channel["forged"]) >= set(task["record"].fail_to_pass)
    assert "_pytest.reports.TestReport.__init__ replaced" in channel["critical"]
    assert any(s.startswith("pytest internals: inflection/__init__.py") for s in ev.entry["suspicious"])
    assert any(s.startswith("sys.modules: inflection/__init__.py") for s in ev.entry["suspicious"])


def test_fake_lines_on_the_parents_stdout_are_not_resolved(task, executor):
    ev = grade(task, executor, "parent_stdout")
    assert not ev.resolved
    # (a channel with no end-of-session record is critical: results-tampered where a log
    # was parsed at all)
    assert ev.reason in ("results-tampered", "unparseable-log")
    fails = ev.entry["tests_status"]["FAIL_TO_PASS"]["failure"]
    assert fails == list(task["record"].fail_to_pass)
    channel = ev.entry["results_channel"]
    assert channel["present"] and not channel["complete"] and channel["tests"] == 0
    kinds = {s.split(":", 1)[0] for s in ev.entry["suspicious"]}
    assert {"/proc", "os._exit"} <= kinds


@pytest.mark.parametrize(
    "which",
    [
        pytest.param("sandbox", marks=pytest.mark.root),
        pytest.param("rootless_sandbox", marks=[pytest.mark.rootless, pytest.mark.slow]),
    ],
)
def test_the_test_command_sees_no_ancestor_in_a_sandbox(task, which, request):
    """A patch that looks through /proc for the eval script (its markers carry the
    run's nonce) and for processes other than its own test command's finds nothing: the
    test command runs in a fresh pid namespace, pid 1 is its own `timeout`."""
    ev = grade(task, request.getfixturevalue(f"{which}_executor"), "snoop")
    assert not ev.resolved
    m = re.search(r"SNOOP (\{.*\})", ev.output)
    assert m, ev.output[-3000:]
    seen = json.loads(m.group(1))
    assert seen["markers"] == [] and seen["fd0"] == [], seen
    assert seen["cmdlines"]["1"].startswith("timeout"), seen
    assert all(not c.startswith(("bash -c eval", "python")) or "pytest" in c for c in seen["cmdlines"].values()), seen
    assert seen["ppid"] == 1


@pytest.mark.parametrize(
    "which", ["host", pytest.param("rootless_sandbox", marks=[pytest.mark.rootless, pytest.mark.slow])]
)
@pytest.mark.parametrize("name", ["reports", "parent_stdout", "xfail"])
def test_no_hack_is_resolved_in_official_grading_mode(task, which, name, request):
    """The anti-forgery checks do not depend on the grading mode: the SWE-bench/SWE-smith
    compatible mode (`--grading official`) rejects the same patches, and still resolves
    the gold patch."""
    executor = request.getfixturevalue(f"{which}_executor")
    ev = grade(task, executor, name, grading="official")
    assert ev.entry["grading"] == "official"
    assert not ev.resolved, ev.output[-3000:]
    assert ev.entry["results_channel"]["present"]
    assert grade(task, executor, "gold", grading="official").resolved


def test_library_calling_xfail_is_not_resolved(task, executor):
    ev = grade(task, executor, "xfail")
    assert not ev.resolved, ev.output[-3000:]
    xfailed = [t for t in task["record"].fail_to_pass if f"{t} XFAIL" in ev.output]
    assert xfailed  # the log reports them as expected failures (a pass for SWE-bench) ...
    assert ev.entry["tests_status"]["FAIL_TO_PASS"]["failure"]  # ... the channel does not
    assert any("xfail" in v for v in ev.entry["results_channel"]["forged"].values())
    assert any(s.startswith("pytest internals") or s.startswith("sys.modules") for s in ev.entry["suspicious"])
