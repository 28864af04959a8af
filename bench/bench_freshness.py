#!/usr/bin/env python3
"""Store freshness cost: seconds per index lookup on a node with a store public key, now
(catalog read, its signature and sequence checked, the shard checked against the
catalog's digest) vs before (the shard and its signature only: measured in the same run by
reading the shard without the catalog's digests) vs no key (the baseline: unsigned reads).

Publishes a local store of --tasks tasks over --envs environments with `publish_index`
and a throw-away ed25519 key (the catalog holds a manifest copy per environment, as the
pipeline's does, so its size grows with --envs), then times `published.lookup` on random
task ids. Needs `cryptography` and `openssl`.

Usage: .venv/bin/python bench/bench_freshness.py [--tasks 50000] [--envs 500] [--lookups 300] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tabulate import tabulate

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from minisandbox.index import shard_of  # noqa: E402
from minisandbox.node import published  # noqa: E402
from minisandbox.node.signing import Signer, Verifier  # noqa: E402
from minisandbox.node.store import Store  # noqa: E402


def _entry(iid: str, env: str) -> str:
    return json.dumps(
        {
            "instance_id": iid,
            "env_key": env,
            "repo_key": f"repo-{iid[-6:]}-00000000",
            "status": "ready",
            "record": {
                "instance_id": iid,
                "repo": "demo/proj",
                "format": "swesmith",
                "patch": "x" * 800,
                "fail_to_pass": ["t.py::a"] * 5,
                "pass_to_pass": ["t.py::b"] * 40,
            },
        },
        sort_keys=True,
    )


def _manifest(key: str) -> dict:
    return {
        "schema": 1,
        "key": key,
        "kind": "env",
        "format": "tar.zst",
        "artifact": f"{key}.tar.zst",
        "sha256": "0" * 64,
        "size": 1,
        "files": 1,
        "interpreter": {"version": "3.11.9", "prefix": "/usr"},
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--tasks", type=int, default=50_000)
    ap.add_argument("--envs", type=int, default=500)
    ap.add_argument("--lookups", type=int, default=300)
    ap.add_argument("--json", help="write the results as JSON here")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        os.environ["MINISANDBOX_STATE"] = str(tmp_path / "state")
        priv, pub = tmp_path / "k.pem", tmp_path / "k.pub.pem"
        subprocess.run(["openssl", "genpkey", "-algorithm", "ed25519", "-out", str(priv)], check=True)
        subprocess.run(["openssl", "pkey", "-in", str(priv), "-pubout", "-out", str(pub)], check=True)
        envs = [f"env-e{n}-{n:016x}" for n in range(a.envs)]
        ids = [f"demo__proj.{n:06d}" for n in range(a.tasks)]
        shards: dict[str, list[str]] = {}
        for n, iid in enumerate(ids):
            shards.setdefault(shard_of(iid), []).append(_entry(iid, envs[n % len(envs)]))
        catalog = {
            "schema": 1,
            "shards": 256,
            "repos": {},
            "counts": {"tasks": len(ids)},
            "envs": {k: {"status": "ok", "manifest": _manifest(k)} for k in envs},
        }
        for name, signer in (("unsigned", None), ("signed", Signer(priv))):
            published.publish_index(Store(tmp_path / name, signer=signer), catalog, shards)
        catalog_bytes = (tmp_path / "signed" / "index" / "catalog.json").stat().st_size
        unsigned = Store(tmp_path / "unsigned", verifier=None)
        signed = Store(tmp_path / "signed", verifier=Verifier(pub))
        picks = random.Random(1).choices(ids, k=a.lookups)

        def before(iid: str) -> None:  # what a signed lookup did before freshness: the shard alone
            next(e for e in published.iter_shard(signed, shard_of(iid)) if e["instance_id"] == iid)

        cases = {
            "no key (baseline)": lambda iid: published.lookup(unsigned, iid),
            "key, shard signature only (before)": before,
            "key, catalog + sequence + shard digest (now)": lambda iid: published.lookup(signed, iid),
        }
        times: dict[str, list[float]] = {name: [] for name in cases}
        for iid in picks:  # interleaved, so load on the machine hits every case alike
            for name, fn in cases.items():
                t0 = time.perf_counter()
                fn(iid)
                times[name].append(time.perf_counter() - t0)
    base = statistics.median(times["no key (baseline)"])
    rows = [
        [
            name,
            f"{statistics.median(t) * 1000:.2f}",
            f"{sorted(t)[int(len(t) * 0.9)] * 1000:.2f}",
            f"{statistics.median(t) / base:.2f}x",
        ]
        for name, t in times.items()
    ]
    print(
        f"{a.tasks} tasks, {a.envs} envs, catalog {catalog_bytes / 1024:.0f} KiB, {a.lookups} lookups each, local store"
    )
    print(tabulate(rows, headers=["lookup", "median ms", "p90 ms", "vs baseline"], tablefmt="github"))
    if a.json:
        Path(a.json).write_text(
            json.dumps({"tasks": a.tasks, "envs": a.envs, "catalog_bytes": catalog_bytes, "seconds": times}, indent=1)
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
