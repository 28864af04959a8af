#!/usr/bin/env python3
"""N concurrent scripted rollouts across a Ray cluster, each graded in a fresh sandbox.

Every Ray node that should run sandboxes advertises its I/O budget:

    MINISANDBOX_CACHE=/var/cache/minisandbox ray start --head --resources '{"minisandbox_io": 2}'
    MINISANDBOX_CACHE=/var/cache/minisandbox ray start --address HEAD:6379 --resources '{"minisandbox_io": 2}'

then:

    .venv/bin/python examples/ray_rollouts.py --address auto --store results/store -n 8

Without --address a single-node local Ray is started for the run and stopped at the end.
What it leaves behind: nothing in your home (Ray would otherwise write its authentication
token to ~/.ray/auth_token, which later local clusters and `ray start` pick up; the run
uses a fresh token in RAY_AUTH_TOKEN instead, unless you configured one) and Ray's session
logs under /tmp/ray (Ray's default; --temp-dir moves them, e.g. into a directory you then
remove). Rollouts alternate a
"gold" policy (writes and applies the task's reference fix, like an agent would) and a
"noop" policy (changes nothing), so the summary shows both outcomes; --policy picks one.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--address", help="Ray address (e.g. auto or HOST:PORT); default: start a local Ray")
    p.add_argument("--store", help="published store URL (default: $MINISANDBOX_STORE or results/store)")
    p.add_argument("--catalog", nargs="+", help="environment catalogs (default: those config/config.yaml names)")
    p.add_argument("-n", "--rollouts", type=int, default=8, help="number of rollouts (default 8)")
    p.add_argument("--pool-size", type=int, default=2, help="concurrent sandboxes per node (default 2)")
    p.add_argument("--io-slots", type=int, default=2, help="minisandbox_io of the local Ray (no --address)")
    p.add_argument("--temp-dir", help="Ray's session directory for the local Ray (no --address; default /tmp/ray)")
    p.add_argument("--policy", choices=["mixed", "gold", "noop"], default="mixed")
    p.add_argument("--json", help="write the per-rollout results here")
    return p.parse_args(argv)


def progress_bar(total: int):
    """tqdm when installed, else one line per finished rollout."""
    try:
        from tqdm import tqdm

        return tqdm(total=total, unit="rollout", dynamic_ncols=True, file=sys.stderr)
    except ImportError:

        class Plain:
            n = 0

            def update(self, k: int = 1) -> None:
                self.n += k

            def set_postfix_str(self, text: str) -> None:
                print(f"[{self.n}/{total}] {text}", file=sys.stderr, flush=True)

            def close(self) -> None:
                pass

        return Plain()


def _run_token() -> None:
    """A local cluster's token for this run only, so Ray writes none to ~/.ray/auth_token
    (a user who set RAY_AUTH_MODE, RAY_AUTH_TOKEN(_PATH) or has a token file keeps theirs)."""
    import os
    import secrets

    if any(k in os.environ for k in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")):
        return
    if (Path.home() / ".ray" / "auth_token").exists():
        return
    # Ray's default for a new local cluster (token mode) then finds this token and writes none
    os.environ["RAY_AUTH_TOKEN"] = secrets.token_hex(32)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if not args.address:
        _run_token()  # before `import ray`, which reads its authentication settings
    import ray
    from tabulate import tabulate

    from minisandbox.integrations import task_ids
    from minisandbox.integrations.ray import RolloutCluster, ScriptedPolicy, node_resources
    from minisandbox.paths import default_store

    store = args.store or default_store()
    if args.address:
        ray.init(address=args.address, logging_level="ERROR")
    else:
        ray.init(resources=node_resources(args.io_slots), logging_level="ERROR", _temp_dir=args.temp_dir)
    ids = task_ids(store)
    if not ids:
        print(f"no ready tasks in {store}", file=sys.stderr)
        return 1
    policies = {"gold": ScriptedPolicy.gold(), "noop": ScriptedPolicy.noop()}
    plan = []
    for i in range(args.rollouts):
        name = args.policy if args.policy != "mixed" else ("noop" if i % 4 == 3 else "gold")
        plan.append((ids[i % len(ids)], policies[name]))

    t0 = time.monotonic()
    cluster = RolloutCluster(store, pool_size=args.pool_size, catalog=args.catalog)
    bar = progress_bar(len(plan))
    resolved = 0

    def on_result(r: dict) -> None:
        nonlocal resolved
        resolved += bool(r.get("resolved"))
        bar.update(1)
        bar.set_postfix_str(f"{resolved} resolved; last {r['task_id'][:40]} on {r['node_id'][:8]}: {r.get('reason')}")

    try:
        results = cluster.run(plan, progress=on_result)
    finally:
        bar.close()
        cluster.shutdown()
    wall = time.monotonic() - t0

    rows = [
        [
            r["task_id"][:48],
            r["policy"],
            r["node_id"][:8],
            "yes" if r.get("fetched") else "",
            f"{r.get('fetch_s', 0):.2f}",
            f"{r.get('sandbox_s', 0):.2f}",
            f"{r.get('run_s', 0):.2f}",
            f"{r.get('grade_s', 0):.2f}",
            r.get("reason") or "",
            r["error"] or "",
        ]
        for r in results
    ]
    print(
        tabulate(
            rows,
            headers=[
                "task",
                "policy",
                "node",
                "fetched",
                "fetch s",
                "sandbox s",
                "run s",
                "grade s",
                "reason",
                "error",
            ],
        )
    )
    print()
    by_node: dict[str, list[dict]] = {}
    for r in results:
        by_node.setdefault(r["node_id"], []).append(r)
    summary = [
        [
            node[:8],
            len(rs),
            sum(bool(r.get("fetched")) for r in rs),
            sum(bool(r.get("resolved")) for r in rs),
            f"{statistics.median(r['total_s'] for r in rs):.2f}",
            rs[0]["cache_dir"],
        ]
        for node, rs in sorted(by_node.items())
    ]
    print(tabulate(summary, headers=["node", "rollouts", "fetched", "resolved", "median s", "cache"]))
    errors = sum(1 for r in results if r["error"])
    print(
        f"\n{len(results)} rollouts on {len(by_node)} node(s) in {wall:.1f} s: "
        f"{resolved} resolved, {len(results) - resolved - errors} unresolved, {errors} errors"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    ray.shutdown()
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
