"""Node runtime commands: `minisandbox fetch`, `minisandbox tasks` and `minisandbox cache ls|gc`."""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import sys
from pathlib import Path

from minisandbox.cli.options import size
from minisandbox.fsutil import human_size as human


def _cache(a: argparse.Namespace):
    from minisandbox.node.cache import Cache
    from minisandbox.node.iobudget import IOBudget

    root = Path(a.cache) if a.cache else None
    budget = None
    if getattr(a, "io_slots", None) is not None:
        from minisandbox.paths import cache_dir

        budget = IOBudget(a.io_slots, (root or cache_dir()) / "budget")
    return Cache(root, budget=budget)


def cmd_fetch(a: argparse.Namespace) -> int:
    from minisandbox.paths import default_store
    from minisandbox.node.runtime import fetch
    from minisandbox.node.store import Store

    store = Store(a.store or default_store())
    cache = _cache(a)
    results = fetch(a.task_ids, store, cache=cache)
    failed = 0
    rows = []
    for tid, res in zip(a.task_ids, results, strict=True):
        if isinstance(res, BaseException):
            failed += 1
            print(f"minisandbox fetch: {tid}: {res}", file=sys.stderr)
            rows.append({"instance_id": tid, "error": str(res)})
            continue
        rows.append({"instance_id": tid, "seconds": round(res.seconds, 3), "downloaded": res.downloaded,
                     "layers": {k: str(v) for k, v in res.layers.items()}, "interpreter": res.interpreter})
        if not a.json:
            how = "fetched" if res.downloaded else "cached"
            print(f"{tid}\t{how}\t{res.seconds:.2f}s\t" + "\t".join(f"{k}={v}" for k, v in res.layers.items()))
    if a.json:
        print(json.dumps(rows, indent=1))
    return 1 if failed else 0


def cmd_cache_ls(a: argparse.Namespace) -> int:
    cache = _cache(a)
    entries = sorted(cache.entries(), key=lambda e: e.last_used, reverse=True)
    if a.json:
        print(json.dumps([{**e.__dict__, "path": str(e.path)} for e in entries], indent=1))
        return 0
    print(f"cache {cache.root}: {len(entries)} entries, "
          f"{human(sum(e.layer_bytes + e.archive_bytes for e in entries))}")
    for e in entries:
        when = _dt.datetime.fromtimestamp(e.last_used).strftime("%Y-%m-%d %H:%M:%S") if e.last_used else "-"
        print(f"{e.digest[:12]}  {e.kind:4}  {human(e.layer_bytes + e.archive_bytes):>7}  {when}  "
              f"leases={e.leases}  {e.key}")
    return 0


def cmd_cache_gc(a: argparse.Namespace) -> int:
    cache = _cache(a)
    report = cache.gc(a.max_bytes)
    for e in report.removed:
        print(f"evicted {e.digest[:12]} {e.kind} {e.key} ({human(e.layer_bytes + e.archive_bytes)})")
    print(f"cache {cache.root}: {human(report.total_before)} -> {human(report.total_after)}, "
          f"freed {human(report.freed)}, {len(report.removed)} evicted, {report.kept_leased} leased kept, "
          f"{report.stale_removed} stale temp dirs removed")
    if a.max_bytes is not None and report.total_after > a.max_bytes:
        print(f"cache {cache.root}: still {human(report.total_after)} > {human(a.max_bytes)}: the rest is leased "
              f"by running sandboxes", file=sys.stderr)
    return 0


def cmd_tasks(a: argparse.Namespace) -> int:
    from minisandbox.node.published import iter_tasks, read_catalog
    from minisandbox.node.store import open_store

    store = open_store(a.store)
    read_catalog(store)  # a store without an index is an error, not an empty list
    rows = sorted((e["instance_id"], e.get("status", "ready")) for e in iter_tasks(store))
    if a.status:
        rows = [r for r in rows if r[1] == a.status]
    if a.json:
        print(json.dumps([{"instance_id": i, "status": s} for i, s in rows], indent=1))
    else:
        for iid, status in rows:
            print(f"{iid}\t{status}")
    return 0


def register(sub) -> None:
    p = sub.add_parser("fetch", help="Make tasks' environments ready in this node's cache.",
                       description="Resolve task ids in a published store and unpack their repo and env layers "
                                   "into the node cache (verified, once per node).")
    p.add_argument("task_ids", nargs="+", metavar="TASK_ID")
    p.add_argument("--store", help="store URL (local dir, file://, s3://bucket/prefix); default: "
                                   "$MINISANDBOX_STORE or the default config's store")
    p.add_argument("--cache", help="cache dir (default: $MINISANDBOX_CACHE or ~/.cache/minisandbox)")
    p.add_argument("--io-slots", type=int, help="concurrent unpacks on this node (default: "
                                                "$MINISANDBOX_IO_SLOTS or half the cores, >= 2; 0 = unlimited)")
    p.add_argument("--json", action="store_true", help="print results as JSON")
    p.set_defaults(func=cmd_fetch)

    t = sub.add_parser("tasks", help="List the tasks of a published store.",
                       description="Instance ids from the store's index, one per line with their status "
                                   "(ready, env-failed, repo-failed); --status filters.")
    t.add_argument("--store", help="store URL (default: $MINISANDBOX_STORE or the default config's store)")
    t.add_argument("--status", help="only tasks with this status, e.g. ready")
    t.add_argument("--json", action="store_true", help="print the index entries' ids and statuses as JSON")
    t.set_defaults(func=cmd_tasks)

    c = sub.add_parser("cache", help="Inspect or clean this node's layer cache.",
                       description="The node cache holds restored layers and downloaded archives, shared by "
                                   "every sandbox on this machine.")
    csub = c.add_subparsers(dest="cache_command", required=True, metavar="ls|gc")
    ls = csub.add_parser("ls", help="List cached layers (most recently used first).")
    ls.add_argument("--cache", help="cache dir (default: $MINISANDBOX_CACHE or ~/.cache/minisandbox)")
    ls.add_argument("--json", action="store_true", help="print the entries as JSON")
    ls.set_defaults(func=cmd_cache_ls)
    gc = csub.add_parser("gc", help="Evict least-recently-used unleased layers.")
    gc.add_argument("--cache", help="cache dir (default: $MINISANDBOX_CACHE or ~/.cache/minisandbox)")
    gc.add_argument("--max-bytes", type=size, default=None,
                    help="target cache size, e.g. 50G (default: only clean stale temp dirs and leases)")
    gc.set_defaults(func=cmd_cache_gc)
