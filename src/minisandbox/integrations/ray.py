"""Rollouts across a Ray cluster: a sandbox pool per node, the I/O budget as a Ray resource.

Why this shape: a rollout's environment must come from the
cache of the node it runs on (a layer in another node's cache is useless), and unpacking
many environments at once on one node makes every one of them late. So:

* every node that runs sandboxes advertises the custom resource `minisandbox_io` (its I/O
  budget, `minisandbox.node.iobudget.RAY_RESOURCE`): `ray start --resources
  '{"minisandbox_io": 2}'`;
* one `SandboxPool` actor per such node, pinned there with a hard
  `NodeAffinitySchedulingStrategy`, runs up to `pool_size` rollouts at a time, each in its
  own sandbox, from that node's cache (`$MINISANDBOX_CACHE` of the node's Ray processes,
  or a directory given per node);
* a layer missing from the node's cache is fetched by a small Ray task pinned to the same
  node that holds one unit of `minisandbox_io` while it downloads and unpacks, so Ray,
  not a lock file, bounds concurrent unpacks per node (the runtime's own budget is off:
  `io_slots=0`). A cache hit takes no unit, so it never queues behind a download.

    import ray
    from minisandbox.integrations.ray import RolloutCluster, ScriptedPolicy

    ray.init(address="auto")
    cluster = RolloutCluster("s3://bucket/store", pool_size=4, catalog="config/catalog/bundled.yaml")
    results = cluster.run([(task_id, ScriptedPolicy.gold(task_id)) for task_id in ids])

A rollout result is a plain dict (node, cache dir, fetch/run/grade seconds, exit codes
of the policy's steps, the patch and the grade), so it travels through the object store.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from minisandbox.task import RAY_RESOURCE, TaskSandbox, fetch_task, grade, make_cache, open_task, task_layer_names

__all__ = ["RAY_RESOURCE", "RolloutCluster", "SandboxPool", "ScriptedPolicy", "minisandbox_nodes", "node_resources"]


def node_resources(io_slots: int, **labels: float) -> dict[str, float]:
    """Resources for `ray start --resources` (as JSON) or `ray.init(resources=...)`."""
    return {RAY_RESOURCE: float(io_slots), **{k: float(v) for k, v in labels.items()}}


@dataclass(frozen=True)
class NodeInfo:
    node_id: str
    address: str
    io_slots: float


def minisandbox_nodes() -> list[NodeInfo]:
    """Alive nodes that advertise the `minisandbox_io` resource (the rollout nodes)."""
    out = []
    for n in ray.nodes():
        slots = n.get("Resources", {}).get(RAY_RESOURCE, 0)
        if n.get("Alive") and slots > 0:
            out.append(NodeInfo(n["NodeID"], n.get("NodeManagerAddress", ""), slots))
    return sorted(out, key=lambda n: n.node_id)


def pinned(node_id: str) -> NodeAffinitySchedulingStrategy:
    """Hard placement on one node (never spills elsewhere: the cache is node-local)."""
    return NodeAffinitySchedulingStrategy(node_id=node_id, soft=False)


# ------------------------------------------------------------------ policies


@dataclass
class ScriptedPolicy:
    """A deterministic policy: fixed shell commands run one by one in the task's sandbox
    (a stand-in for a model during tests, demos and throughput runs).

    `ScriptedPolicy.gold()` writes and applies the task's reference fix, as an agent
    would; `ScriptedPolicy.noop()` changes nothing."""

    commands: list[str]
    timeout: float = 120.0
    name: str = "scripted"

    def __call__(self, task: TaskSandbox) -> list[dict[str, Any]]:
        steps = []
        for cmd in self.commands:
            res = task.execute(cmd, timeout=self.timeout)
            steps.append(
                {
                    "command": cmd[:200],
                    "returncode": res.returncode,
                    "timed_out": res.timed_out,
                    "output": res.output[-2000:],
                }
            )
        return steps

    @classmethod
    def gold(cls, timeout: float = 120.0) -> GoldPolicy:
        """Commands that apply the task's reference fix (the reverse of a SWE-smith bug
        patch, the gold patch of a SWE-bench task), written as an agent would."""
        return GoldPolicy(timeout=timeout)

    @classmethod
    def noop(cls) -> ScriptedPolicy:
        return cls(["git status --porcelain"], name="noop")


@dataclass
class GoldPolicy:
    timeout: float = 120.0
    name: str = "gold"

    def __call__(self, task: TaskSandbox) -> list[dict[str, Any]]:
        rec = task.record
        patch, reverse = (rec.patch, True) if rec.format != "swebench" else (rec.patch, False)
        cmds = [
            "cat > /tmp/fix.patch <<'MINISANDBOX_PATCH_EOF'\n" + patch + "MINISANDBOX_PATCH_EOF",
            f"git apply {'-R ' if reverse else ''}/tmp/fix.patch && rm /tmp/fix.patch",
            "git status --porcelain",
        ]
        return ScriptedPolicy(cmds, self.timeout, self.name)(task)


# ------------------------------------------------------------------ per-node pieces


def _layer_names(store: str | None, task_id: str) -> list[tuple[str, ...]]:
    """Per layer of the task, the directory names it may have in any node cache (image or
    archive sha256: `task.task_layer_names`)."""
    return task_layer_names(task_id, store)


def fetch_on_this_node(task_id: str, store: str | None, cache_dir: str | None) -> dict[str, Any]:
    """Body of the fetch task: make the task's layers ready in this node's cache. Runs
    while holding one `minisandbox_io` unit, so the runtime's own budget is off."""
    t0 = time.time()
    downloaded = fetch_task(task_id, store, cache=cache_dir, io_slots=0)
    return {
        "task_id": task_id,
        "node_id": ray.get_runtime_context().get_node_id(),
        "pid": os.getpid(),
        "downloaded": downloaded,
        "start": t0,
        "end": time.time(),
    }


_fetch_task = ray.remote(num_cpus=0, max_retries=1)(fetch_on_this_node)


class SandboxPool:
    """Runs rollouts on one node (create it with `SandboxPool.start(node_id, ...)`): up to
    `pool_size` concurrent sandboxes, all from this node's cache."""

    def __init__(
        self, store: str | None, *, cache_dir: str | None = None, catalog: Any = None, grade: bool = True
    ) -> None:
        self.store = store
        self.node_id = ray.get_runtime_context().get_node_id()
        self.cache = make_cache(cache_dir, io_slots=0)
        self.catalog = catalog
        self.grade_results = grade
        self.fetches: list[dict[str, Any]] = []

    @classmethod
    def start(
        cls,
        node_id: str,
        store: str | None,
        *,
        pool_size: int = 2,
        cache_dir: str | None = None,
        catalog: Any = None,
        grade: bool = True,
    ):
        """The pool actor pinned to `node_id` (num_cpus=0: sandboxes, not Ray, use the CPUs)."""
        actor = ray.remote(cls).options(
            num_cpus=0,
            max_concurrency=max(1, pool_size),
            scheduling_strategy=pinned(node_id),
            name=f"minisandbox-pool-{node_id[:12]}-{os.getpid()}-{time.time_ns()}",
        )
        return actor.remote(store, cache_dir=cache_dir, catalog=catalog, grade=grade)

    def info(self) -> dict[str, Any]:
        return {"node_id": self.node_id, "cache_dir": str(self.cache.root), "pid": os.getpid()}

    def fetch_log(self) -> list[dict[str, Any]]:
        return list(self.fetches)

    def ensure_layers(self, task_id: str) -> bool:
        """True when the layers had to be fetched (by a Ray task holding `minisandbox_io`)."""
        if all(any((self.cache.layers / d).is_dir() for d in names) for names in _layer_names(self.store, task_id)):
            return False
        ref = _fetch_task.options(resources={RAY_RESOURCE: 1}, scheduling_strategy=pinned(self.node_id)).remote(
            task_id, self.store, str(self.cache.root)
        )
        info = ray.get(ref)
        self.fetches.append(info)
        return bool(info["downloaded"])

    def warm(self, task_ids: Sequence[str]) -> list[bool]:
        return [self.ensure_layers(t) for t in task_ids]

    def rollout(self, task_id: str, policy: Callable[[TaskSandbox], list[dict[str, Any]]]) -> dict[str, Any]:
        result: dict[str, Any] = {
            "task_id": task_id,
            "node_id": self.node_id,
            "cache_dir": str(self.cache.root),
            "policy": getattr(policy, "name", type(policy).__name__),
            "error": None,
        }
        t0 = time.monotonic()
        try:
            result["fetched"] = self.ensure_layers(task_id)
            t1 = time.monotonic()
            with open_task(task_id, self.store, cache=self.cache) as task:
                t2 = time.monotonic()
                steps = policy(task)
                patch = task.patch()
            t3 = time.monotonic()
            result.update(
                fetch_s=t1 - t0,
                sandbox_s=t2 - t1,
                run_s=t3 - t2,
                steps=steps,
                patch=patch,
                layers=[str(p) for p in task.prepared.layers.values()],
            )
            if self.grade_results:
                ev = grade(task_id, patch, self.store, catalog=self.catalog, cache=self.cache, record=task.record)
                result.update(resolved=ev.resolved, reason=ev.reason, grade_s=time.monotonic() - t3)
        except Exception as exc:  # one failed rollout is a result, not a crashed pool
            result.update(error=f"{type(exc).__name__}: {exc}", resolved=False, reason="error")
        result["total_s"] = time.monotonic() - t0
        return result


# ------------------------------------------------------------------ driver side


@dataclass
class RolloutCluster:
    """One `SandboxPool` per rollout node; rollouts go to the least busy node unless a node
    is named. `cache_dirs` (node id -> dir) overrides a node's $MINISANDBOX_CACHE."""

    store: str | None
    pool_size: int = 2
    catalog: Any = None
    grade: bool = True
    cache_dirs: dict[str, str] = field(default_factory=dict)
    nodes: list[NodeInfo] = field(default_factory=list)
    pools: dict[str, Any] = field(default_factory=dict)
    _inflight: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not ray.is_initialized():
            raise RuntimeError("Ray is not initialised; call ray.init(address=...) before RolloutCluster")
        if self.catalog is not None:
            from minisandbox.task import load_catalog

            self.catalog = load_catalog(self.catalog)  # loaded once, shipped to every pool
        self.nodes = self.nodes or minisandbox_nodes()
        if not self.nodes:
            raise RuntimeError(
                f"no alive Ray node advertises the {RAY_RESOURCE!r} resource; start nodes with "
                f"ray start --resources '{{\"{RAY_RESOURCE}\": 2}}'"
            )
        for n in self.nodes:
            self.pools[n.node_id] = SandboxPool.start(
                n.node_id,
                self.store,
                pool_size=self.pool_size,
                cache_dir=self.cache_dirs.get(n.node_id),
                catalog=self.catalog,
                grade=self.grade,
            )
            self._inflight[n.node_id] = 0

    def info(self) -> list[dict[str, Any]]:
        return ray.get([p.info.remote() for p in self.pools.values()])

    def submit(self, task_id: str, policy: Callable, node_id: str | None = None):
        """Start one rollout; returns (node_id, ObjectRef of the result dict)."""
        if node_id is None:
            node_id = min(self._inflight, key=lambda n: (self._inflight[n], n))
        elif node_id not in self.pools:
            raise KeyError(f"node {node_id} has no sandbox pool (not a {RAY_RESOURCE} node)")
        self._inflight[node_id] += 1
        return node_id, self.pools[node_id].rollout.remote(task_id, policy)

    def run(
        self,
        rollouts: Iterable[tuple[str, Callable] | tuple[str, Callable, str]],
        *,
        progress: Callable[[dict[str, Any]], None] | None = None,
    ) -> list[dict[str, Any]]:
        """Run rollouts concurrently (pool_size per node); results in input order.
        `progress` is called with each result as it completes."""
        refs = []
        for item in rollouts:
            node, ref = self.submit(*item)
            refs.append((node, ref))
        index = {ref: i for i, (_, ref) in enumerate(refs)}
        node_of = {ref: node for node, ref in refs}
        results: list[dict[str, Any] | None] = [None] * len(refs)
        pending = [ref for _, ref in refs]
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            for ref in done:
                res = ray.get(ref)
                self._inflight[node_of[ref]] -= 1
                results[index[ref]] = res
                if progress is not None:
                    progress(res)
        return [r for r in results if r is not None]

    def fetch_log(self) -> dict[str, list[dict[str, Any]]]:
        return dict(zip(self.pools, ray.get([p.fetch_log.remote() for p in self.pools.values()])))

    def shutdown(self) -> None:
        for p in self.pools.values():
            ray.kill(p)
        self.pools.clear()
