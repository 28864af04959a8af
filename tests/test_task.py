"""Fast checks of the integration glue that need no sandbox or store."""

from __future__ import annotations

import asyncio
import shlex
from pathlib import Path

import pytest

from minisandbox.records import TaskRecord
from minisandbox.task import _setup_script, make_cache
from tests.fixtures.rootless_node import user_site  # noqa: F401  (fixture)

BUG = "diff --git a/m.py b/m.py\n--- a/m.py\n+++ b/m.py\n@@ -1 +1 @@\n-x = 1\n+x = 2\n"


def record(**over) -> TaskRecord:
    base = dict(
        instance_id="o__r.abc.x__1",
        format="swesmith",
        repo="swesmith/o__r.abc",
        patch=BUG,
        fail_to_pass=["tests/test_m.py::test_x", "tests/test_n.py::test_y[a b]"],
        pass_to_pass=["tests/test_keep.py::test_z"],
    )
    base.update(over)
    return TaskRecord(**base)


def test_swesmith_start_state_applies_the_bug_removes_f2p_files_and_reinits_git() -> None:
    script = _setup_script(record())
    assert "apply" in script and "/tmp/.minisandbox-task.patch" in script
    (rm,) = [ln for ln in script.splitlines() if ln.startswith("rm ")]  # one process removes all
    gone = ["tests/test_m.py", "tests/test_n.py", "/tmp/.minisandbox-task.patch", ".git"]
    assert shlex.split(rm) == ["rm", "-rf", "--", *gone]
    assert "test_keep.py" not in script  # P2P files stay
    assert script.index("apply") < script.index(rm) < script.index("git init") < script.index("commit")
    assert ".minisandbox-task.patch" not in _setup_script(record(patch=""))  # no patch: no patch file


def test_swebench_starts_from_the_snapshot_as_published() -> None:
    assert _setup_script(record(format="swebench", base_commit="a" * 40, test_patch=BUG)) is None


def test_make_cache_budget(tmp_path: Path) -> None:
    assert make_cache(tmp_path / "c", io_slots=0).budget.slots == 0  # Ray bounds unpacks
    c = make_cache(tmp_path / "d", io_slots=3)
    assert c.budget.slots == 3 and c.root == tmp_path / "d"
    assert make_cache(c) is c


def test_swerex_syntax_check_and_unstarted_deployment() -> None:
    pytest.importorskip("swerex")
    from swerex.exceptions import BashIncorrectSyntaxError, DeploymentNotStartedError

    from minisandbox.integrations.swerex import MinisandboxDeployment, check_bash_syntax

    check_bash_syntax("for i in 1 2; do echo $i; done\ncat <<'E'\nx\nE")
    with pytest.raises(BashIncorrectSyntaxError):
        check_bash_syntax("if true; then")
    d = MinisandboxDeployment("any__task.1", store="/nonexistent")
    assert not asyncio.run(d.is_alive())
    with pytest.raises(DeploymentNotStartedError):
        d.runtime
    asyncio.run(d.stop())  # stopping an unstarted deployment is fine


def test_ray_cluster_needs_ray_initialised() -> None:
    ray = pytest.importorskip("ray")
    from minisandbox.integrations.ray import RolloutCluster, node_resources

    assert node_resources(2, msb_node_a=1) == {"minisandbox_io": 2.0, "msb_node_a": 1.0}
    if ray.is_initialized():
        pytest.skip("a Ray session is already up in this process")
    with pytest.raises(RuntimeError, match="ray.init"):
        RolloutCluster("/nonexistent")


def test_the_facade_lists_names_and_prefetches_a_stores_tasks(tmp_path: Path, monkeypatch) -> None:
    """What integrations use instead of the node modules: the ready records, the layer
    directory names a scheduler looks for, and a prefetch that downloads once."""
    from minisandbox.task import fetch_task, task_ids, task_layer_names, task_records
    from tests.fixtures.runtime import build_local_store

    monkeypatch.setenv("MINISANDBOX_IMAGES", "0")  # unpack the images: nothing left mounted
    store = build_local_store(tmp_path / "work", "local__task.0")
    assert [r.instance_id for r in task_records(store)] == task_ids(store) == ["local__task.0"]
    assert task_records(store, status="env-failed") == []
    names = task_layer_names("local__task.0", store)
    assert len(names) == 2 and all(names)
    cache = tmp_path / "cache"
    assert fetch_task("local__task.0", store, cache=cache, io_slots=1) is True
    assert fetch_task("local__task.0", store, cache=cache, io_slots=1) is False  # already on the node
    layers = {p.name for p in (cache / "layers").iterdir() if not p.name.startswith(".")}
    assert all(set(n) & layers for n in names)


@pytest.mark.root
def test_open_task_without_diff_takes_no_start_snapshot(as_root, tmp_path: Path, monkeypatch) -> None:
    """`diff=False` (a one-shot `run` without --diff): the command runs in the same start
    state, and asking for the patch is an error (no start tree was recorded), not a
    wrong (empty or full) diff."""
    from minisandbox.sandbox.rootfs import SandboxError
    from minisandbox.task import open_task
    from tests.fixtures.runtime import build_local_store

    monkeypatch.setenv("MINISANDBOX_IMAGES", "0")
    store = build_local_store(tmp_path / "work", "local__task.0")
    with open_task("local__task.0", store, cache=tmp_path / "cache", diff=False) as ts:
        res = ts.execute("git log --oneline | wc -l; echo x > new.txt")
        assert (res.returncode, res.output.strip()) == (0, "1")  # the fresh root commit of the start state
        with pytest.raises(SandboxError, match="forgo_diff"):
            ts.patch()
    with open_task("local__task.0", store, cache=tmp_path / "cache") as ts:  # the default keeps the diff
        ts.execute("echo x > new.txt")
        assert "new.txt" in ts.patch()


# ------------------------------------------------------------------ the node's start-state layer
#: What a task's start state looks like from inside: git's view, every path, the patched file.
START_PROBE = (
    "git status --porcelain; git log --format='%H %T'; git ls-files -s; "
    "find . -path ./.git -prune -o -print | sort; cat src/mod.py; ls -a .git"
)
BUGGY = "diff --git a/src/mod.py b/src/mod.py\n--- a/src/mod.py\n+++ b/src/mod.py\n@@ -1,2 +1,2 @@\n def f():\n-    return 1\n+    return 2\n"


def _with_bug(store: str, task: str) -> None:
    """Re-publish `task` with a bug patch and a FAIL_TO_PASS test file to remove: its start
    state then changes a file, removes one and replaces .git (whiteouts, an opaque dir)."""
    import json

    from minisandbox.node.store import Store
    from tests.fixtures.runtime import shard_of, write_index

    entry = json.loads((Path(store) / f"index/tasks/{shard_of(task)}.jsonl").read_text().splitlines()[0])
    entry["record"].update(patch=BUGGY, fail_to_pass=["tests/test_mod.py::test_f"])
    write_index(Store(Path(store)), [entry])


def _tree_digest(path: Path) -> str:
    """Every entry under `path`: name, mode, extended attributes and content."""
    import hashlib
    import os

    h = hashlib.sha256()
    for root, dirs, files in sorted(os.walk(path)):
        for name in sorted(dirs + files):
            p = os.path.join(root, name)
            st = os.lstat(p)
            attrs = sorted(
                (a, os.getxattr(p, a, follow_symlinks=False)) for a in os.listxattr(p, follow_symlinks=False)
            )
            h.update(f"{p}\0{st.st_mode}\0{st.st_rdev}\0{attrs}\0".encode())
            if os.path.isfile(p) and not os.path.islink(p):
                h.update(Path(p).read_bytes())
    return h.hexdigest()


def _counted_setups(tmp_path: Path, monkeypatch) -> tuple[str, list[int]]:
    """A directory store of one task with its bug applied, and a list that grows by one each
    time a start state is set up (in place or in its own sandbox), so a test can tell a made
    start state from a stacked one."""
    import minisandbox.task as task_mod
    from tests.fixtures.runtime import build_local_store

    monkeypatch.setenv("MINISANDBOX_IMAGES", "0")
    store = build_local_store(tmp_path / "work", "local__task.0")
    _with_bug(store, "local__task.0")
    setups: list[int] = []
    real = task_mod._run_setup
    monkeypatch.setattr(task_mod, "_run_setup", lambda *a: setups.append(1) or real(*a))
    return store, setups


def _start_layers(cache: Path) -> list[Path]:
    import json

    return [
        p.with_suffix("")
        for p in (cache / "layers").glob("*.json")
        if json.loads(p.read_text()).get("kind") == "start" and p.with_suffix("").is_dir()
    ]


@pytest.mark.root
def test_the_start_state_is_made_once_per_node_and_never_written_again(as_root, tmp_path: Path, monkeypatch) -> None:
    """The start state's set-up runs once per node (in a sandbox of its own, no payload in
    it); later sandboxes stack what it made, read-only, and see exactly the tree the set-up
    makes in-place. What an agent does in one sandbox (rewrite a file, remove the tests and
    .git, add files) reaches neither the kept layer nor the next sandbox. GC removes the
    layer only once no sandbox leases it."""
    from minisandbox.node.cache import Cache
    from minisandbox.task import open_task

    store, setups = _counted_setups(tmp_path, monkeypatch)
    cache = tmp_path / "cache"

    def probe(**kw) -> str:
        with open_task("local__task.0", store, cache=cache, **kw) as ts:
            res = ts.execute(START_PROBE)
            assert res.returncode == 0, res.output
            return res.output

    in_place = probe(start_cache=False)
    assert "return 2" in in_place and "tests/test_mod.py" not in in_place  # the bug, no F2P file
    assert setups == [1] and _start_layers(cache) == []
    assert probe() == in_place
    assert setups == [1, 1]  # made once, in its own sandbox
    (layer,) = _start_layers(cache)
    kept = _tree_digest(layer)
    with open_task("local__task.0", store, cache=cache) as ts:
        assert setups == [1, 1]  # stacked: no set-up in this sandbox
        agent = "echo evil > src/mod.py; rm -rf tests .git; echo x > new.txt; mkdir -p .git; echo y > .git/HEAD"
        assert ts.execute(agent).returncode == 0
        assert ts.execute("cat src/mod.py; ls -a").output.split() == [
            "evil",
            ".",
            "..",
            ".git",
            "README.md",
            "new.txt",
            "src",
        ]
        assert Cache(cache).gc(max_bytes=0) is not None and layer.is_dir()  # leased: kept
    assert _tree_digest(layer) == kept
    assert probe(diff=False) == in_place and setups == [1, 1]
    Cache(cache).gc(max_bytes=0)
    assert not layer.exists()  # evicted like a restored layer once unleased
    assert probe() == in_place and setups == [1, 1, 1]  # made again when needed


@pytest.mark.root
def test_without_overlays_the_start_state_is_set_up_in_each_sandbox(as_root, tmp_path: Path, monkeypatch) -> None:
    """A copy of the layers (`copy_layers`, or a node whose cache cannot hold an overlay's
    upper directory, found once and remembered in the cache) would turn the kept layer's
    whiteouts into files: the set-up then runs in the sandbox itself, as before."""
    import minisandbox.task as task_mod
    from minisandbox.task import open_task

    store, setups = _counted_setups(tmp_path, monkeypatch)
    cache = tmp_path / "cache"
    outputs = []
    for kw in ({"copy_layers": True}, {}):
        with open_task("local__task.0", store, cache=cache, start_cache=False) as ts:
            reference = ts.execute(START_PROBE).output
        if not kw:  # as a node whose cache cannot hold an upper directory has it
            (cache / "tmp" / task_mod._NO_START_LAYERS).write_text("copy\n")
        with open_task("local__task.0", store, cache=cache, **kw) as ts:
            outputs.append((reference, ts.execute(START_PROBE).output))
    assert all(a == b and "return 2" in a for a, b in outputs)
    assert setups == [1] * 4 and _start_layers(cache) == []


def test_the_start_layer_name_covers_its_inputs() -> None:
    """A re-published patch, another stacked layer, other commands' environment or the
    other overlay mode (rootless whiteouts are other extended attributes) is another layer."""
    from minisandbox.sandbox.sandbox import Layer
    from minisandbox.task import _start_key

    repo = Layer("/c/layers/" + "a" * 64, "/testbed")
    key = _start_key("script", record(), repo, {"rootless": False})
    assert key == _start_key("script", record(), repo, {"rootless": False})
    assert (
        len(
            {
                key,
                _start_key("script", record(patch=""), repo, {"rootless": False}),
                _start_key("script 2", record(), repo, {"rootless": False}),
                _start_key(
                    "script", record(), repo._replace(over=("/c/layers/" + "b" * 64 + "/tb",)), {"rootless": False}
                ),
                _start_key("script", record(), repo, {"rootless": True}),
                _start_key("script", record(), repo, {"rootless": False, "env": {"GIT_CONFIG_COUNT": "1"}}),
            }
        )
        == 6
    )


@pytest.mark.slow
@pytest.mark.rootless
def test_the_start_state_layer_as_an_unprivileged_user(shared_tmp, user_site) -> None:
    """Rootless (a user namespace; overlays with `userxattr`, the layers as the user's
    squashfuse mounts where it has squashfuse): the kept start state gives the tree the
    set-up makes in place, and an agent's change stays in its own sandbox."""
    import os
    import pwd
    import subprocess

    from tests.fixtures.rootless_node import run_node_as_user
    from tests.fixtures.runtime import build_local_store
    from tests.fixtures.sandbox import TEST_USER

    user = pwd.getpwnam(TEST_USER)
    store = build_local_store(shared_tmp / "work", "local__task.0")
    _with_bug(store, "local__task.0")
    subprocess.run(["chown", "-R", f"{user.pw_uid}:{user.pw_gid}", str(shared_tmp)], check=True)
    code = f"""
import json
from minisandbox.task import open_task
out = []
for kw, agent in (({{"start_cache": False}}, ""), ({{}}, "echo evil > src/mod.py; rm -rf .git"), ({{}}, "")):
    with open_task("local__task.0", "{store}", cache="{shared_tmp}/cache", **kw) as ts:
        out.append(ts.execute({START_PROBE!r}).output)
        if agent:
            ts.execute(agent)
        joined = bool(ts.sandbox.config.join_ns)
print(json.dumps([out, joined]))
"""
    (in_place, first, second), joined = run_node_as_user(code, user_site, timeout=600)
    print("joined the mount holder's namespaces:", joined)
    assert "return 2" in in_place and "tests/test_mod.py" not in in_place
    assert first == in_place and second == in_place
    (layer,) = _start_layers(shared_tmp / "cache")
    assert os.listxattr(layer / ".git", follow_symlinks=False) == ["user.overlay.opaque"]  # userxattr's marker
