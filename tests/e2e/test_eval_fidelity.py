"""Fidelity: the same tasks graded inside the sandbox and in a plain venv on the host
(no namespaces; same interpreter version, exact pins and install commands, the same tree)
give identical per-test results, for the task state (no patch) and for the gold patch."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from minisandbox.catalog import Catalog, spec_for
from minisandbox.grading.evaluate import SandboxExecutor, evaluate
from minisandbox.grading.validate import gold_run
from minisandbox.node.runtime import prepare
from minisandbox.paths import REPO_PATH
from minisandbox.records import read_tasks
from tests.fixtures.hostvenv import tree_digest

pytestmark = [pytest.mark.slow, pytest.mark.root]


def test_sandbox_and_host_venv_grade_identically(root_eval_store, bundled_host_grades):
    """The host side is the session's one host grading of the bundled tasks
    (`bundled_host_grades`, also read by tests/pipeline/test_bundled.py), graded on the
    pipeline's snapshot of each task's commit: the store's repository layer has the same
    tree (checked here), so both sides grade the same inputs. The sandbox side grades two
    tasks at a time, each in fresh sandboxes (as `minisandbox eval --workers 2` does)."""
    store, host = root_eval_store, bundled_host_grades
    catalog = Catalog.load([store.catalog])
    recs = read_tasks(store.tasks).records
    assert {r.instance_id for r in recs} == set(host.gold) == set(host.before)
    sandbox = SandboxExecutor(store=str(store.store))

    def in_sandbox(rec):
        """(the store's repo layer's tree digest, {"before": ..., "gold": ...} graded in sandboxes)."""
        spec = spec_for(catalog, rec)
        with prepare(rec.instance_id, str(store.store)) as pt:
            digest = tree_digest(pt.layers[REPO_PATH], skip=(".git",))
        patch, reverse = gold_run(rec)
        return digest, {
            "before": evaluate(rec, spec, None, sandbox, apply_patch=False),
            "gold": evaluate(rec, spec, patch, sandbox, reverse=reverse),
        }

    with ThreadPoolExecutor(max_workers=2) as pool:
        graded = list(pool.map(in_sandbox, recs))
    compared = 0
    for rec, (digest, in_box_runs) in zip(recs, graded):
        # the same tree (the snapshots' one-commit histories differ in their dates)
        assert digest == tree_digest(host.snapshots[rec.instance_id], skip=(".git",)), rec.instance_id
        for label, on_host in (("before", host.before[rec.instance_id]), ("gold", host.gold[rec.instance_id])):
            in_box = in_box_runs[label]
            assert in_box.status_map, (rec.instance_id, label, in_box.output[-2000:])
            assert in_box.status_map == on_host.status_map, (
                rec.instance_id,
                label,
                {
                    t: (in_box.status_map.get(t), on_host.status_map.get(t))
                    for t in set(in_box.status_map) | set(on_host.status_map)
                    if in_box.status_map.get(t) != on_host.status_map.get(t)
                },
            )
            assert in_box.reason == on_host.reason
            compared += 1
    assert compared == 2 * len(recs)
