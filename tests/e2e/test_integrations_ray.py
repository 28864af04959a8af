"""Rollouts across a real local Ray cluster (a head and a second node started with
`ray start`, each with its own MINISANDBOX_CACHE and `minisandbox_io` budget): one pool
per node, rollouts use their node's cache, unpacks bounded by the Ray resource, graded."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")

from minisandbox.integrations.ray import (  # noqa: E402
    RolloutCluster,
    ScriptedPolicy,
    minisandbox_nodes,
)

pytestmark = [pytest.mark.slow, pytest.mark.ray, pytest.mark.root]

ROOT = Path(__file__).resolve().parents[2]


def layer_names(store: str, task_id: str) -> list[tuple[str, ...]]:
    """Per layer of the task, the names its cache dir may have (image or archive sha256)."""
    from minisandbox.integrations.ray import _layer_names

    return _layer_names(store, task_id)


def cached(cache: Path, store: str, task_id: str) -> bool:
    """Every layer of the task is in this node's cache (under one of its names)."""
    present = {p.name for p in (cache / "layers").iterdir() if p.is_dir()}
    return all(set(names) & present for names in layer_names(store, task_id))


def any_cached(cache: Path, store: str, task_id: str) -> bool:
    """Some layer of the task is in this node's cache."""
    present = {p.name for p in (cache / "layers").iterdir() if p.is_dir()}
    return any(set(names) & present for names in layer_names(store, task_id))


def overlaps(intervals: list[tuple[float, float]]) -> int:
    """Most intervals open at one time."""
    events = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals])
    now = peak = 0
    for _, d in events:
        now += d
        peak = max(peak, now)
    return peak


@pytest.fixture(scope="module")
def cluster(ray_cluster, bundled_store):
    ray.init(address=ray_cluster.address, logging_level="ERROR")
    nodes = {n.node_id: n for n in minisandbox_nodes()}
    label_of = {}
    for n in ray.nodes():
        if n["Alive"] and n["NodeID"] in nodes:
            label_of[n["NodeID"]] = "a" if "msb_node_a" in n["Resources"] else "b"
    rc = RolloutCluster(bundled_store.url, pool_size=2, catalog=bundled_store.catalog)
    yield rc, label_of
    rc.shutdown()
    ray.shutdown()


def test_one_pool_per_node_with_its_own_cache(cluster, ray_cluster) -> None:
    rc, label_of = cluster
    assert sorted(label_of.values()) == ["a", "b"]
    slots = {label_of[n.node_id]: n.io_slots for n in rc.nodes}
    assert slots == {"a": 2.0, "b": 1.0}
    info = {label_of[i["node_id"]]: i for i in rc.info()}
    assert info["a"]["cache_dir"] == str(ray_cluster.caches["a"])
    assert info["b"]["cache_dir"] == str(ray_cluster.caches["b"])
    assert info["a"]["pid"] != info["b"]["pid"]


def test_rollouts_use_their_nodes_cache_and_are_graded(cluster, ray_cluster, bundled_store) -> None:
    rc, label_of = cluster
    node = {v: k for k, v in label_of.items()}
    inflection = bundled_store.swesmith_ids("jpvanhal__inflection")
    toolz = bundled_store.swesmith_ids("pytoolz__toolz")
    plan = [
        (inflection[0], ScriptedPolicy.gold(), node["a"]),
        (inflection[1], ScriptedPolicy.gold(), node["a"]),
        (inflection[2], ScriptedPolicy.noop(), node["a"]),
        (toolz[0], ScriptedPolicy.gold(), node["b"]),
        (toolz[1], ScriptedPolicy.gold(), node["b"]),
        (toolz[2], ScriptedPolicy.gold(), node["b"]),
    ]
    seen = []
    results = rc.run(plan, progress=seen.append)
    assert len(seen) == len(results) == len(plan)
    assert [r["error"] for r in results] == [None] * len(plan)
    for (task_id, policy, node_id), r in zip(plan, results):
        assert r["task_id"] == task_id and r["node_id"] == node_id
        cache = ray_cluster.caches[label_of[node_id]]
        assert r["cache_dir"] == str(cache)
        assert all(Path(p).parent == cache / "layers" for p in r["layers"])
        assert cached(cache, bundled_store.url, task_id)
        assert r["resolved"] is (policy.name == "gold"), r
    # node b never ran an inflection rollout: its cache holds none of their layers
    assert not any_cached(ray_cluster.caches["b"], bundled_store.url, inflection[0])
    assert not any_cached(ray_cluster.caches["a"], bundled_store.url, toolz[0])
    # a second round on the same node is served from its cache: no fetch task at all
    again = rc.run([(toolz[0], ScriptedPolicy.gold(), node["b"])])[0]
    assert again["fetched"] is False and again["resolved"]


def test_unpacks_are_bounded_by_the_nodes_ray_resource(cluster, bundled_store, tmp_path: Path) -> None:
    """Real unpacks (each into a fresh cache dir, so each downloads) submitted at once:
    node b (1 slot) runs them one at a time, node a (2 slots) at most two at a time."""
    import time

    from minisandbox.integrations.ray import RAY_RESOURCE, _fetch_task, pinned

    rc, label_of = cluster
    node = {v: k for k, v in label_of.items()}
    task = bundled_store.swesmith_ids("r1chardj0n3s__parse")[0]
    refs = {
        label: [
            _fetch_task.options(resources={RAY_RESOURCE: 1}, scheduling_strategy=pinned(node[label])).remote(
                task, bundled_store.url, str(tmp_path / f"{label}{i}")
            )
            for i in range(n)
        ]
        for label, n in (("a", 4), ("b", 3))
    }
    got = {label: ray.get(r, timeout=600) for label, r in refs.items()}
    for label, infos in got.items():
        assert all(i["downloaded"] and i["node_id"] == node[label] for i in infos)
    assert overlaps([(i["start"], i["end"]) for i in got["b"]]) == 1
    assert overlaps([(i["start"], i["end"]) for i in got["a"]]) <= 2
    # the pool's own fetches hold the resource too, and it is all free again afterwards
    rc.run([(task, ScriptedPolicy.noop(), node["b"])])
    assert any(f["task_id"] == task for f in rc.fetch_log()[node["b"]])
    deadline = time.time() + 30
    while ray.available_resources().get(RAY_RESOURCE, 0) != 3.0 and time.time() < deadline:
        time.sleep(0.2)
    assert ray.available_resources().get(RAY_RESOURCE, 0) == 3.0


def test_example_script(ray_cluster, bundled_store, tmp_path: Path) -> None:
    out = subprocess.run(
        [
            sys.executable,
            str(ROOT / "examples" / "ray_rollouts.py"),
            "--address",
            ray_cluster.address,
            "--store",
            bundled_store.url,
            "--catalog",
            str(bundled_store.catalog),
            "-n",
            "4",
            "--pool-size",
            "2",
            "--json",
            str(tmp_path / "results.json"),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert "resolved" in out.stdout and "node" in out.stdout
    rows = json.loads((tmp_path / "results.json").read_text())
    assert len(rows) == 4 and all(r["error"] is None for r in rows)
    assert sum(r["resolved"] for r in rows) == sum(r["policy"] == "gold" for r in rows) >= 2
    assert len({r["node_id"] for r in rows}) == 2


def test_example_with_a_local_ray_leaves_nothing_in_home(bundled_store, tmp_path: Path) -> None:
    """Without --address the example starts its own Ray: a token cluster would write
    ~/.ray/auth_token (then picked up by every later local cluster and `ray start`); the
    example gives it a run-only token instead (or uses the one the user has)."""
    import os
    import shutil
    import tempfile

    def ray_home() -> dict[str, bytes]:
        d = Path.home() / ".ray"
        return {str(p.relative_to(d)): p.read_bytes() for p in d.rglob("*") if p.is_file()} if d.is_dir() else {}

    before = ray_home()
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_AUTH")}
    env.update(MINISANDBOX_CACHE=str(tmp_path / "cache"), RAY_USAGE_STATS_ENABLED="0")
    temp_dir = tempfile.mkdtemp(prefix="msbray-", dir="/tmp")  # short: Ray's socket paths are limited
    out = subprocess.run(
        [
            sys.executable,
            str(ROOT / "examples" / "ray_rollouts.py"),
            "--store",
            bundled_store.url,
            "--catalog",
            str(bundled_store.catalog),
            "-n",
            "1",
            "--pool-size",
            "1",
            "--policy",
            "gold",
            "--temp-dir",
            temp_dir,
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    try:
        assert out.returncode == 0, out.stderr[-3000:]
        assert "1 resolved" in out.stdout
        assert ray_home() == before, "the example changed ~/.ray"
    finally:
        from minisandbox.node.cache import Cache

        shutil.rmtree(temp_dir, ignore_errors=True)
        if (tmp_path / "cache").exists():  # its images are kernel-mounted: release them
            Cache(tmp_path / "cache").clear(force=False)
