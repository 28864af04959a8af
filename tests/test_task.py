"""Fast checks of the integration glue that need no sandbox or store."""

from __future__ import annotations

import asyncio
import shlex
from pathlib import Path

import pytest

from minisandbox.records import TaskRecord
from minisandbox.task import _setup_script, make_cache

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
