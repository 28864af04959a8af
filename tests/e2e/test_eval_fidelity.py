"""Fidelity: the same tasks graded inside the sandbox and in a plain venv on the host
(no namespaces; same interpreter version, exact pins and install commands) give identical
per-test results, for the task state (no patch) and for the gold patch."""

from __future__ import annotations

import pytest

from minisandbox.catalog import Catalog, spec_for
from minisandbox.grading.evaluate import SandboxExecutor, evaluate
from minisandbox.grading.validate import gold_run
from minisandbox.node.runtime import prepare
from minisandbox.paths import REPO_PATH
from minisandbox.records import read_tasks
from tests.fixtures.hostvenv import make_host_venv

pytestmark = [pytest.mark.slow, pytest.mark.root]


def test_sandbox_and_host_venv_grade_identically(root_eval_store, tmp_path):
    store = root_eval_store
    catalog = Catalog.load([store.catalog])
    recs = read_tasks(store.tasks).records
    sandbox = SandboxExecutor(store=str(store.store))
    host_envs: dict[str, object] = {}
    compared = 0
    for rec in recs:
        spec = spec_for(catalog, rec)
        with prepare(rec.instance_id, str(store.store)) as pt:
            snapshot = pt.layers[REPO_PATH]
            key = pt.task["env_key"]
            if key not in host_envs:  # one host venv per environment, like the store
                host_envs[key] = make_host_venv(spec, snapshot, tmp_path / key, log=tmp_path / f"{key}.log")
            host = host_envs[key]
            host.snapshot = snapshot  # SWE-bench tasks of one env start from different commits
            patch, reverse = gold_run(rec)
            for label, kw in (
                ("before", {"patch": None, "apply_patch": False}),
                ("gold", {"patch": patch, "reverse": reverse}),
            ):
                p = kw.pop("patch")
                in_box = evaluate(rec, spec, p, sandbox, **kw)
                on_host = evaluate(rec, spec, p, host, **kw)
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
