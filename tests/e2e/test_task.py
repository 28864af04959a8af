"""The agent-facing start state: bug applied, F2P tests removed, nothing in git reveals
the clean code or the fix."""

from __future__ import annotations

import json

import pytest

from minisandbox.grading import evalscript
from minisandbox.task import open_task

pytestmark = [pytest.mark.slow, pytest.mark.root]


def _first(path, fmt_key: str = "instance_id") -> dict:
    return json.loads(path.read_text().splitlines()[0])


def test_swesmith_start_state_is_leak_free(bundled_eval_store, tmp_path):
    rec = _first(bundled_eval_store.tasks[0])
    with open_task(rec["instance_id"], str(bundled_eval_store.store), cache=str(tmp_path / "cache")) as ts:
        sb = ts.sandbox
        out = sb.run(
            [
                "bash",
                "-c",
                "cd /testbed; git log --all --oneline | wc -l; git status --porcelain | wc -l;"
                " git rev-list --all --reflog | wc -l; git fsck --lost-found 2>&1 | grep -c 'dangling commit' || true",
            ]
        )
        assert out.output.split() == ["1", "0", "1", "0"], out.output  # one commit, however you look
        for f in evalscript.test_files_of(rec["FAIL_TO_PASS"]):
            assert sb.run(["test", "-e", f"/testbed/{f}"]).returncode == 1  # F2P test files removed
        # the bug is in the tree: its reverse (the gold patch) applies cleanly
        sb.write_file("/tmp/bug.patch", rec["patch"])
        assert sb.run(["git", "-C", "/testbed", "apply", "-R", "--check", "/tmp/bug.patch"]).returncode == 0
        assert sb.diff() == ""  # the agent's diff starts empty
        sb.run(["bash", "-c", "echo '# agent edit' >> /testbed/README.md || echo x > /testbed/NEW"])
        assert "agent edit" in sb.diff() or "NEW" in sb.diff()


def test_swebench_start_state_is_the_base_commit(bundled_eval_store, tmp_path):
    rec = _first(bundled_eval_store.tasks[1])
    with open_task(rec["instance_id"], str(bundled_eval_store.store), cache=str(tmp_path / "cache")) as ts:
        out = ts.sandbox.run(
            ["bash", "-c", "cd /testbed; git log --all --oneline | wc -l; git status --porcelain | wc -l"]
        )
        assert out.output.split() == ["1", "0"]
        ts.sandbox.write_file("/tmp/gold.patch", rec["patch"])
        assert ts.sandbox.run(["git", "-C", "/testbed", "apply", "--check", "/tmp/gold.patch"]).returncode == 0


def test_unknown_task_is_a_clear_error(bundled_eval_store, tmp_path):
    with pytest.raises(Exception, match="unknown task id 'nope__x-1'"):
        open_task("nope__x-1", str(bundled_eval_store.store), cache=str(tmp_path / "cache"))
