"""Node runtime commands: `minisandbox fetch`, `minisandbox tasks` and `minisandbox cache ls|gc`."""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import sys
from pathlib import Path

from minisandbox.cli.options import add_selection_options, selection, size
from minisandbox.errors import MinisandboxError
from minisandbox.fsutil import human_size as human
from minisandbox.progress import Progress


class CacheMissing(MinisandboxError, FileNotFoundError):
    """`--cache DIR` names a directory that does not exist (commands that only read or
    clean a cache never create one)."""


def _cache(args: argparse.Namespace, *, create: bool = True, progress=None):
    """The node cache `--cache` names (or the default one). With create=False a missing
    `--cache DIR` is an error and a missing default cache is None (nothing cached yet)."""
    from minisandbox.node.cache import Cache
    from minisandbox.node.iobudget import IOBudget
    from minisandbox.paths import cache_dir

    root = Path(args.cache) if args.cache else None
    if not create and not (root or cache_dir()).is_dir():
        if root is not None:
            raise CacheMissing(
                f"no cache at {root}: the directory does not exist; check --cache "
                f"(default: $MINISANDBOX_CACHE or ~/.cache/minisandbox)"
            )
        return None
    budget = None
    if getattr(args, "io_slots", None) is not None:
        budget = IOBudget(args.io_slots, (root or cache_dir()) / "budget")
    return Cache(root, budget=budget, progress=progress)


def cmd_fetch(args: argparse.Namespace) -> int:
    from minisandbox.node.published import read_catalog
    from minisandbox.node.runtime import fetch, planned_bytes
    from minisandbox.node.store import open_store

    store = open_store(args.store)
    read_catalog(store)  # a wrong or missing store is one error, not one per task id
    if args.instance_ids is not None or args.repo:  # the same filter as `tasks` and `eval`
        from minisandbox.node.published import iter_selected
        from minisandbox.records import Selection

        picked = Selection.parse(
            [*args.task_ids, *(args.instance_ids or [])] if args.instance_ids is not None or args.task_ids else None,
            args.repo,
        )
        args.task_ids = [e["instance_id"] for e in iter_selected(store, picked)]
    if not args.task_ids:
        from minisandbox.records import SelectionError

        raise SelectionError("no task to fetch: give task ids, --instance-ids ID|@FILE or --repo OWNER/NAME")
    cache = _cache(args)
    # bytes to download, known before the first one moves: the bar's total never grows
    with Progress("fetch", planned_bytes(args.task_ids, store, cache=cache), fixed=True) as meter:
        cache.progress = meter
        results = fetch(args.task_ids, store, cache=cache)
        if not any(isinstance(r, BaseException) for r in results):
            meter.finish()
    failed = 0
    rows = []
    for tid, res in zip(args.task_ids, results, strict=True):
        if isinstance(res, BaseException):
            failed += 1
            print(f"minisandbox fetch: {tid}: {res}", file=sys.stderr)
            rows.append({"instance_id": tid, "error": str(res)})
            continue
        rows.append(
            {
                "instance_id": tid,
                "seconds": round(res.seconds, 3),
                "downloaded": res.downloaded,
                "layers": {k: str(v) for k, v in res.layers.items()},
                "interpreter": res.interpreter,
            }
        )
        if not args.json:
            how = "fetched" if res.downloaded else "cached"
            print(f"{tid}\t{how}\t{res.seconds:.2f}s\t" + "\t".join(f"{k}={v}" for k, v in res.layers.items()))
    if args.json:
        print(json.dumps(rows, indent=1))
    return 1 if failed else 0


def cmd_cache_ls(args: argparse.Namespace) -> int:
    from minisandbox.paths import cache_dir

    cache = _cache(args, create=False)
    entries = sorted(cache.entries(), key=lambda e: e.last_used, reverse=True) if cache else []
    if args.json:
        print(json.dumps([{**e._asdict(), "path": str(e.path)} for e in entries], indent=1))
        return 0
    print(
        f"cache {cache.root if cache else cache_dir()}: {len(entries)} entries, "
        f"{human(sum(e.layer_bytes + e.archive_bytes for e in entries))}"
    )
    for e in entries:
        when = _dt.datetime.fromtimestamp(e.last_used).strftime("%Y-%m-%d %H:%M:%S") if e.last_used else "-"
        print(
            f"{e.digest[:12]}  {e.kind:4}  {human(e.layer_bytes + e.archive_bytes):>7}  {when}  "
            f"leases={e.leases}  {e.key}"
        )
    return 0


def _print_leftovers(state: Path, lo) -> None:  # noqa: ANN001 - minisandbox.sandbox.leftovers.ReapReport
    """One line per crash-cleanup pass that found something (docs/sandbox.md)."""
    if lo.records or lo.errors:
        print(
            f"node state {state}: cleaned up after {lo.records} dead controller(s): "
            f"{len(lo.cgroups)} cgroup(s), {len(lo.scratch)} scratch dir(s), {len(lo.mounts)} mount(s) removed"
        )
    for err in lo.errors:
        print(f"node state {state}: {err}", file=sys.stderr)


def cmd_cache_gc(args: argparse.Namespace) -> int:
    cache = _cache(args, create=False)
    if cache is None:
        # no layers yet, but a controller may have died here: its cgroups/scratch dirs go
        from minisandbox.paths import state_dir
        from minisandbox.sandbox.leftovers import reap

        lo = reap(state_dir())
        print(
            json.dumps({"removed": [], "freed": 0, "leftovers": lo.__dict__})
            if args.json
            else "no cache on this node yet: nothing to clean"
        )
        if not args.json:
            _print_leftovers(state_dir(), lo)
        return 0
    report = cache.gc(args.max_bytes)
    if args.json:
        removed = [{**e._asdict(), "path": str(e.path)} for e in report.removed]
        print(
            json.dumps(
                {
                    "cache": str(cache.root),
                    "removed": removed,
                    "freed": report.freed,
                    "total_before": report.total_before,
                    "total_after": report.total_after,
                    "kept_leased": report.kept_leased,
                    "stale_removed": report.stale_removed,
                    "leftovers": report.leftovers.__dict__ if report.leftovers else None,
                },
                indent=1,
            )
        )
        return 0
    for e in report.removed:
        print(f"evicted {e.digest[:12]} {e.kind} {e.key} ({human(e.layer_bytes + e.archive_bytes)})")
    print(
        f"cache {cache.root}: {human(report.total_before)} -> {human(report.total_after)}, "
        f"freed {human(report.freed)}, {len(report.removed)} evicted, {report.kept_leased} leased kept, "
        f"{report.stale_removed} stale temp dirs removed"
    )
    if report.leftovers is not None:
        _print_leftovers(cache.state_dir(), report.leftovers)
    if args.max_bytes is not None and report.total_after > args.max_bytes:
        print(
            f"cache {cache.root}: still {human(report.total_after)} > {human(args.max_bytes)}: the rest is leased "
            f"by running sandboxes",
            file=sys.stderr,
        )
    return 0


STORE_HELP = (
    "store URL (default: $MINISANDBOX_STORE, else the store: of ./config/config.yaml, else "
    "./results/store; relative to the current directory)"
)


def cmd_cache_clear(args: argparse.Namespace) -> int:
    from minisandbox.node.cache import check_cache_dir
    from minisandbox.paths import cache_dir

    root = Path(args.cache) if args.cache else cache_dir()
    if root.is_dir():
        check_cache_dir(root)
    cache = _cache(args, create=False)
    if cache is None:
        print(json.dumps({"cache": None, "freed": 0}) if args.json else "no cache on this node yet: nothing to clear")
        return 0
    report = cache.clear(force=args.force)
    if args.json:
        print(
            json.dumps(
                {
                    "cache": str(report.root),
                    "entries": report.entries,
                    "freed": report.freed,
                    "unmounted": report.unmounted,
                    "ended": report.ended,
                    "leftovers": report.leftovers.__dict__ if report.leftovers else None,
                },
                indent=1,
            )
        )
        return 0
    for pid, owner in sorted(report.ended.items()):
        print(f"ended pid {pid}" + (f" ({owner})" if owner else ""))
    print(
        f"cache {report.root}: removed {report.entries} entries ({human(report.freed)}), "
        f"{report.unmounted} image layers unmounted"
    )
    return 0


CACHE_HELP = "cache dir (default: $MINISANDBOX_CACHE or ~/.cache/minisandbox)"
TASK_STATUSES = ("ready", "env-failed", "repo-failed")
VALIDATION_STATUSES = ("valid", "env-broken", "flaky", "timeout")


def _task_row(entry: dict) -> dict:
    """What `tasks` shows of an index entry (never the record: patches can be large)."""
    validation = entry.get("validation") or {}
    return {
        "instance_id": entry["instance_id"],
        "status": entry.get("status", "ready"),
        "env_key": entry.get("env_key"),
        "spec_name": entry.get("spec_name"),
        "repo_key": entry.get("repo_key"),
        "validation": validation.get("status"),
    }


TASK_COLUMNS = ("instance_id", "status", "env_key", "spec_name", "validation")


def cmd_tasks(args: argparse.Namespace) -> int:
    """The index is read shard by shard and only the few fields shown are kept (never the
    records: patches can be large), so 50k tasks list in a few MB; rows are sorted by
    instance id so two listings diff cleanly. Plain output is tab-separated with a header
    line only on a terminal (`--header`/`--no-header` force it), so `cut`/`sort`/`head`
    see rows alone."""
    from minisandbox.cli.options import note
    from minisandbox.node.published import iter_selected, read_catalog
    from minisandbox.node.store import open_store

    store = open_store(args.store)
    read_catalog(store)  # a store without an index is an error, not an empty list
    picked = selection(args)
    counts: dict[str, int] = {}
    rows = []
    for entry in iter_selected(store, picked):
        row = _task_row(entry)
        counts[row["status"]] = counts.get(row["status"], 0) + 1
        if (args.status and row["status"] not in args.status) or (
            args.validation and row["validation"] not in args.validation
        ):
            continue
        rows.append(row)
    rows.sort(key=lambda r: r["instance_id"])
    if args.json:
        print(json.dumps(rows, indent=1))
    else:
        header = args.header if args.header is not None else sys.stdout.isatty()
        lines = ["\t".join(c.upper() for c in TASK_COLUMNS)] if header else []
        lines += ["\t".join(str(row[k] or "-") for k in TASK_COLUMNS) for row in rows]
        if lines:
            sys.stdout.write("\n".join(lines) + "\n")
    total = sum(counts.values())
    by_status = ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "none"
    note(f"{len(rows)} of {total} tasks in {store.url} ({by_status})")
    return 0


def register(sub) -> None:
    p = sub.add_parser(
        "fetch",
        help="Make tasks' environments ready in this node's cache.",
        description="Resolve task ids in a published store and unpack their repo and env layers "
        "into the node cache (verified, once per node).",
    )
    p.add_argument("task_ids", nargs="*", metavar="TASK_ID")
    p.add_argument(
        "--store",
        help="store URL (local dir, file://, s3://bucket/prefix); default: "
        "$MINISANDBOX_STORE, else the store: of ./config/config.yaml, else "
        "./results/store (relative to the current directory)",
    )
    p.add_argument("--cache", help=CACHE_HELP)
    p.add_argument(
        "--io-slots",
        type=int,
        help="concurrent unpacks on this node (default: $MINISANDBOX_IO_SLOTS or half the cores, >= 2; 0 = unlimited)",
    )
    p.add_argument("--json", action="store_true", help="print results as JSON")
    add_selection_options(p, "tasks")
    p.set_defaults(func=cmd_fetch)

    t = sub.add_parser(
        "tasks",
        help="List the tasks of a published store.",
        description="The store's tasks from its sharded index, one tab-separated line each, "
        "sorted by instance id: instance id, status (ready, env-failed, "
        "repo-failed), environment key, environment spec, validation status. A "
        "header line is printed only when stdout is a terminal (--header/"
        "--no-header force it), so pipes see rows alone; a count by status goes "
        "to stderr.",
    )
    t.add_argument("--store", help=STORE_HELP)
    t.add_argument("--status", nargs="+", choices=TASK_STATUSES, help="only tasks with one of these statuses")
    t.add_argument(
        "--validation",
        nargs="+",
        choices=VALIDATION_STATUSES,
        help="only tasks whose validation status is one of these",
    )
    t.add_argument(
        "--header",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="print the column names first (default: only when stdout is a terminal)",
    )
    t.add_argument("--json", action="store_true", help="print a JSON list of the tasks (stdout holds only it)")
    add_selection_options(t, "tasks")
    t.set_defaults(func=cmd_tasks)

    c = sub.add_parser(
        "cache",
        help="Inspect or clean this node's layer cache.",
        description="The node cache holds restored layers and downloaded archives, shared by "
        "every sandbox on this machine.",
    )
    csub = c.add_subparsers(dest="cache_command", required=True, metavar="ls|gc|clear")
    ls = csub.add_parser(
        "ls",
        help="List cached layers (most recently used first).",
        description="One line per cached layer or archive, most recently used first: "
        "digest, kind (repo, env, ...), size on disk, last use, live leases "
        "(sandboxes using it), key. A missing --cache is an error; a missing "
        "default cache lists nothing.",
    )
    ls.add_argument("--cache", help=CACHE_HELP)
    ls.add_argument("--json", action="store_true", help="print the entries as JSON")
    ls.set_defaults(func=cmd_cache_ls)
    gc = csub.add_parser(
        "gc",
        help="Evict least-recently-used unleased layers.",
        description="Always removes stale temporary files and leases of dead processes, and "
        "the cgroups, scratch directories and mounts that dead sandbox controllers "
        "left. With --max-bytes N, also evicts least-recently-used layers until the "
        "cache holds at most N bytes; layers leased by a live sandbox are kept.",
    )
    gc.add_argument("--cache", help=CACHE_HELP)
    gc.add_argument(
        "--max-bytes",
        type=size,
        default=None,
        help="target cache size, e.g. 50G (default: only clean stale temp dirs and leases)",
    )
    gc.add_argument("--json", action="store_true", help="print what was evicted and freed as JSON")
    gc.set_defaults(func=cmd_cache_gc)
    cl = csub.add_parser(
        "clear",
        help="Unmount every layer and remove the whole cache.",
        description="Unmounts the cache's image layers (kernel or squashfuse mounts), "
        "cleans up after dead sandbox controllers, then removes the cache "
        "directory (`rm -rf` fails on mounted read-only layers). Refuses while "
        "a live process (a sandbox, an evaluation) leases a layer and names "
        "it; --force ends those processes first.",
    )
    cl.add_argument("--cache", help=CACHE_HELP)
    cl.add_argument(
        "--force",
        action="store_true",
        help="end the processes that lease layers (SIGTERM, then SIGKILL after 5 s) and clear",
    )
    cl.add_argument("--json", action="store_true", help="print what was removed as JSON")
    cl.set_defaults(func=cmd_cache_clear)
