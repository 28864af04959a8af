"""Store commands: `minisandbox push SRC DST`, `pull SRC DST`, `verify STORE`.

push and pull are the same verified, resumable mirror (`minisandbox.node.sync.mirror`); the
two names only say which way the data goes (local -> object storage to publish, object
storage -> local to prefetch a node or a cluster's shared disk). Any two store URLs work:
local directories, file://, s3://bucket/prefix (endpoint and credentials from the AWS
environment variables / config files, e.g. AWS_ENDPOINT_URL for MinIO or moto).
"""

from __future__ import annotations

import argparse
import json

from minisandbox.progress import Progress


def _mb(n: float) -> str:
    return f"{n / 1e6:.1f} MB"


def cmd_mirror(args: argparse.Namespace) -> int:
    from minisandbox.cli.options import note
    from minisandbox.node.sync import mirror

    if args.create_bucket:
        from minisandbox.node.store import Store

        dst = Store(args.dst)
        if dst.bucket is None:
            note(f"{args.command}: --create-bucket: {args.dst} is not in object storage: nothing to create")
        elif dst.create_bucket():
            note(f"{args.command}: created bucket {dst.bucket} at {dst.endpoint()}")

    # bytes to copy, a total mirror fixes once planned; a bar on a terminal, else lines
    with Progress(args.command, 0) as meter:

        def per_artifact(key: str, status: str) -> None:
            if args.verbose:
                meter.write(f"{status}\t{key}")

        report = mirror(args.src, args.dst, workers=args.workers, on_artifact=per_artifact, progress=meter)
        meter.finish()  # objects another writer put in place meanwhile were planned but not copied
    if args.json:
        print(
            json.dumps(
                {
                    "src": report.src,
                    "dst": report.dst,
                    "copied": report.copied,
                    "skipped": report.skipped,
                    "files": report.files,
                    "bytes": report.bytes,
                    "chunks": report.chunks,
                    "seconds": round(report.seconds, 3),
                    "stale_tmp_removed": report.stale_tmp_removed,
                },
                indent=1,
            )
        )
    else:
        print(
            f"{args.command} {report.src} -> {report.dst}: {len(report.copied)} artifacts copied, "
            f"{len(report.skipped)} already there, {report.files} objects written"
            + (f" ({report.chunks} chunk packs or chunk objects)" if report.chunks else "")
            + f", {_mb(report.bytes)} "
            f"in {report.seconds:.1f}s ({report.mb_per_s:.1f} MB/s)"
            + (f", {report.stale_tmp_removed} stale temp objects removed" if report.stale_tmp_removed else "")
        )
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    from minisandbox.node.store import Store
    from minisandbox.node.sync import verify

    with Progress("verify", 0, unit="file" if args.quick else "B") as meter:  # verify fixes the total first
        report = verify(args.store, quick=args.quick, workers=args.workers, progress=meter)
    store = Store(args.store)
    if args.json:
        print(
            json.dumps(
                {
                    "store": report.store,
                    "ok": report.ok,
                    "artifacts": report.artifacts,
                    "blobs": report.blobs,
                    "chunks": report.chunks,
                    "tasks": report.tasks,
                    "bytes": report.bytes,
                    "problems": [p.__dict__ for p in report.problems],
                },
                indent=1,
            )
        )
    else:
        for p in report.problems:
            print(p.line(store))
        missing = sum(1 for p in report.problems if p.what == "missing")
        corrupt = sum(1 for p in report.problems if p.what == "corrupt")
        other = len(report.problems) - missing - corrupt
        checked = "sizes" if args.quick else "sha256"
        verdict = "OK" if report.ok else f"FAILED: {missing} missing, {corrupt} corrupt, {other} other"
        chunks = f" + {report.chunks} image chunks" if report.chunks else ""
        print(
            f"verify {report.store}: {report.artifacts} artifacts ({report.blobs} files{chunks}, {checked} checked, "
            f"{_mb(report.bytes)} read), {report.tasks} tasks: {verdict}"
        )
    return 0 if report.ok else 1


def register(sub) -> None:
    for name, text in (
        ("push", "Publish a store to another location (e.g. local -> s3://bucket/prefix)."),
        ("pull", "Fetch a published store from another location (e.g. s3://... -> local)."),
    ):
        p = sub.add_parser(
            name,
            help=text,
            description=text + " Every archive is checked against its "
            "manifest's sha256; an interrupted run resumes where it stopped (complete "
            "artifacts are skipped); the index is written last.",
        )
        p.add_argument("src", metavar="SRC", help="source store URL")
        p.add_argument("dst", metavar="DST", help="destination store URL")
        p.add_argument("--workers", type=int, default=4, help="parallel transfers (default 4)")
        p.add_argument("--json", action="store_true", help="print the report as JSON")
        p.add_argument("-v", "--verbose", action="store_true", help="one line per artifact on stderr")
        p.add_argument(
            "--create-bucket",
            action="store_true",
            help="create DST's bucket first if it does not exist (s3://BUCKET/...; without it a "
            "missing bucket is an error naming it)",
        )
        p.set_defaults(func=cmd_mirror)

    v = sub.add_parser(
        "verify",
        help="Check every artifact of a store against its index (exit 1 on problems).",
        description="Reads the index, then checks each archive/image (present, size, sha256), "
        "each manifest (present, equal to the index), logs and index shards. "
        "Prints one line per missing or corrupt object.",
    )
    v.add_argument("store", metavar="STORE", help="store URL (local dir, file://, s3://bucket/prefix)")
    v.add_argument("--quick", action="store_true", help="compare sizes only (no download on S3)")
    v.add_argument("--workers", type=int, default=4, help="parallel checks (default 4)")
    v.add_argument("--json", action="store_true", help="print the report as JSON")
    v.set_defaults(func=cmd_verify)
