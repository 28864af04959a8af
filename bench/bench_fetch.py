"""Cold fetch and publish of a chunked image against an object store with realistic latency.

A real `moto_server` on loopback, behind tests/fixtures/latency_proxy.py (its own process):
every request waits --delay-ms (default 25, an object store's round trip) and all bytes
share a --mbit link (default 1000). No handshake delay: moto closes every connection after
its answer, which a real store does not do. Per image size
(--sizes, MB; default a typical 31 MB environment and a 256 MB large one), median of --reps:

* baseline, the same bytes as ONE object through the same proxy, in the same run:
  publish = `Store.put_file` (what publishing a whole image does); fetch = the faster of
  the node's whole-image path (`Cache.fetch_archive` of an image without chunks: stream,
  sha256, place) and s3fs `get_file` + sha256;
* packed (the store layout now, chunk list schema 2): publish = `publish_image` into an
  empty prefix (one LIST of packs/, the new chunks as ~16 MiB packs + indexes, the chunk
  list); fetch = `Cache.fetch_archive` on an empty node (chunk list, coalesced ranged reads,
  every chunk's sha256, the image's sha256), i.e. time-to-ready before the mount;
* per-chunk objects (the layout before packs, schema 1; still read for older stores), on
  the smallest size only: fetch at 8 requests in flight (as before) and at WORKERS (now).

The image is random bytes (squashfs data is compressed: FastCDC cuts it into ~64 KiB chunks
as it does real images). The torch profile's 2.9 GB image has 44,059 chunks; the large
size here is a scaled copy (256 MB: ~3.9k chunks, 1/11 of it): with packs both the
one-object time and the packed time grow linearly with the bytes (requests per byte are
fixed: 4 MiB ranges, 16 MiB packs), so their ratio carries over; what does not scale down
is moto itself, a single Python process that moves ~10-50 MB/s on a busy 2-core machine,
far below the 1 Gbit/s link, so the large rows measure moto's throughput more than the link.

    .venv/bin/python bench/bench_fetch.py                       # 31 MB and 256 MB, 3 reps (~10 min)
    .venv/bin/python bench/bench_fetch.py --sizes 31 --reps 3   # quick
    .venv/bin/python bench/bench_fetch.py --json results/bench/bench_fetch.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from tabulate import tabulate  # noqa: E402

from minisandbox.fsutil import file_digest  # noqa: E402
from minisandbox.node import chunks as chunkmod  # noqa: E402
from minisandbox.node.cache import Artifact, Cache  # noqa: E402
from minisandbox.node.iobudget import IOBudget  # noqa: E402
from minisandbox.node.store import Store  # noqa: E402
from minisandbox.pipeline.chunking import write_chunk_list  # noqa: E402
from minisandbox.pipeline.steps import chunks_entry, publish_image  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_services(work: Path, delay_ms: float, mbit: float) -> tuple[list[subprocess.Popen], str, str]:
    """moto_server and the latency proxy in front of it: (processes, moto URL, proxy URL)."""
    exe = shutil.which("moto_server")
    if not exe:
        sys.exit("moto_server not found: pip install 'moto[server]' (minisandbox[s3])")
    port = free_port()
    moto = subprocess.Popen(
        [exe, "-H", "127.0.0.1", "-p", str(port)],
        stdout=open(work / "moto.log", "wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            with urllib.request.urlopen(url + "/moto-api/", timeout=1):
                break
        except OSError:
            time.sleep(0.1)
    proxy = subprocess.Popen(
        [
            sys.executable,
            str(ROOT / "tests" / "fixtures" / "latency_proxy.py"),
            "--upstream",
            f"127.0.0.1:{port}",
            "--delay-ms",
            str(delay_ms),
            "--mbit",
            str(mbit),
        ],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    line = proxy.stdout.readline().split()
    return [moto, proxy], url, f"http://{line[1]}"


def stop(procs: list[subprocess.Popen]) -> str:
    out = ""
    for p in procs:
        p.terminate()
        try:
            got, _ = p.communicate(timeout=10)
            out += got or ""
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    return out.strip()


def timed(fn: Callable[[], Any]) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def fresh(store: Store) -> Store:
    store.fs.invalidate_cache()
    return store


def make_image(path: Path, mb: float) -> None:
    """Random bytes, written in 8 MiB pieces (compressed squashfs data looks like this to FastCDC)."""
    left = int(mb * 1e6)
    with open(path, "wb") as f:
        while left:
            n = min(left, 8 << 20)
            f.write(os.urandom(n))
            left -= n


def old_layout(store: Store, img: Path, key: str, cut: list[tuple[str, int]], sha: str) -> dict:
    """Publish `img` as schema 1 (one object per chunk), as stores written before packs hold it."""
    from minisandbox.manifest import chunk_list_document, chunk_path

    fd = os.open(img, os.O_RDONLY)
    try:
        offsets, at = {}, 0
        for d, n in cut:
            offsets.setdefault(d, (at, n))
            at += n
        chunkmod._pool_map(
            lambda d: store.put_object(chunk_path(d), os.pread(fd, offsets[d][1], offsets[d][0])), list(offsets), 32
        )
    finally:
        os.close(fd)
    doc = chunk_list_document(sha, at, cut)
    store.put_object(f"artifacts/env/{key}.chunks.json", doc)
    return {
        "artifact": f"{key}.chunks.json",
        "sha256": hashlib.sha256(doc).hexdigest(),
        "size": len(doc),
        "count": len(cut),
    }


def bench_size(mb: float, reps: int, work: Path, moto: str, proxy: str, old: bool) -> dict[str, Any]:
    key = f"env-bench{int(mb)}-{uuid.uuid4().hex[:16]}"
    img = work / f"{key}.squashfs"
    make_image(img, mb)
    lst, cutting = write_chunk_list(img, key)
    sha, size = file_digest(img)
    cut = list(cutting.chunks)
    print(f"image {size / 1e6:.0f} MB, {len(cut)} chunks", flush=True)
    bucket = "bench"
    direct = Store(f"s3://{bucket}", endpoint_url=moto)
    if not direct.fs.exists(bucket):
        direct.fs.mkdir(bucket)
    rows: dict[str, list[float]] = {
        k: []
        for k in (
            "publish_one",
            "publish_packed",
            "fetch_one_node",
            "fetch_one_get",
            "fetch_packed",
            "fetch_old8",
            "fetch_old32",
        )
    }
    stored: dict[str, int] = {}

    def cache() -> Cache:
        root = work / f"cache-{uuid.uuid4().hex[:8]}"
        return Cache(root, budget=IOBudget(4, root / "budget"))

    for rep in range(reps):
        prefix = f"s3://{bucket}/r{rep}-{uuid.uuid4().hex[:6]}"
        store = Store(prefix, endpoint_url=proxy)
        # baseline publish: the whole image as one object
        rows["publish_one"].append(timed(lambda: fresh(store).put_file(img, f"artifacts/env/{img.name}", sha256=sha)))
        # packed publish into an empty prefix
        image = {
            "format": "squashfs",
            "artifact": img.name,
            "sha256": sha,
            "size": size,
            "chunks": chunks_entry(img, key),
            "whole": False,
        }
        rows["publish_packed"].append(timed(lambda: publish_image(fresh(store), "env", key, image, img, False)))
        if rep == 0:
            listed = chunkmod._listing(direct, f"{prefix.split('/', 3)[3]}/packs")
            stored = {
                "packs": sum(n for r, n in listed.items() if not r.endswith(".idx")),
                "indexes": sum(n for r, n in listed.items() if r.endswith(".idx")),
                "list": image["chunks"]["size"],
                "npacks": sum(1 for r in listed if not r.endswith(".idx")),
            }
        whole = {
            "kind": "env",
            "key": key,
            "image": {"format": "squashfs", "artifact": img.name, "sha256": sha, "size": size},
        }
        packed = {"kind": "env", "key": key, "image": image}
        c = cache()
        rows["fetch_one_node"].append(
            timed(lambda: c.fetch_archive(fresh(store), Artifact.image_from_manifest(store, whole)))
        )
        shutil.rmtree(c.root)
        out = work / "one.bin"

        def get_one() -> None:
            fresh(store).get_file(f"artifacts/env/{img.name}", out)
            assert file_digest(out) == (sha, size)
            out.unlink()

        rows["fetch_one_get"].append(timed(get_one))
        c = cache()
        rows["fetch_packed"].append(
            timed(lambda: c.fetch_archive(fresh(store), Artifact.image_from_manifest(store, packed)))
        )
        assert file_digest(c.archives / sha) == (sha, size)
        shutil.rmtree(c.root)
        if old:
            ostore = Store(prefix + "-old", endpoint_url=proxy)
            info = old_layout(Store(prefix + "-old", endpoint_url=moto), img, key, cut, sha)
            oman = {"kind": "env", "key": key, "image": {**image, "chunks": info}}
            for workers, name in ((8, "fetch_old8"), (chunkmod.WORKERS, "fetch_old32")):
                saved, chunkmod.WORKERS = chunkmod.WORKERS, workers
                try:
                    c = cache()
                    fn = c.fetch_archive
                    rows[name].append(timed(lambda: fn(fresh(ostore), Artifact.image_from_manifest(ostore, oman))))
                    shutil.rmtree(c.root)
                finally:
                    chunkmod.WORKERS = saved
        direct.fs.rm(prefix.removeprefix("s3://"), recursive=True)
        if old:
            direct.fs.rm(prefix.removeprefix("s3://") + "-old", recursive=True)
        print(f"  rep {rep + 1}/{reps}: " + ", ".join(f"{k} {v[-1]:.2f}s" for k, v in rows.items() if v), flush=True)
    img.unlink()
    lst.unlink()
    med = {k: statistics.median(v) for k, v in rows.items() if v}
    med["fetch_one"] = min(med["fetch_one_node"], med["fetch_one_get"])
    return {"mb": size / 1e6, "chunks": len(cut), "reps": reps, "runs": rows, "median": med, "stored": stored}


def table(results: list[dict[str, Any]], delay_ms: float, mbit: float) -> str:
    out = []
    for r in results:
        m = r["median"]
        base_f, base_p = m["fetch_one"], m["publish_one"]
        rows = [
            ["fetch: one object (baseline: faster of node path / get_file)", f"{base_f:.2f}", "1.00x"],
            [
                "fetch: one object, node whole-image path",
                f"{m['fetch_one_node']:.2f}",
                f"{m['fetch_one_node'] / base_f:.2f}x",
            ],
            [
                "fetch: one object, s3fs get_file + sha256",
                f"{m['fetch_one_get']:.2f}",
                f"{m['fetch_one_get'] / base_f:.2f}x",
            ],
            [
                "**fetch: packed chunks (now), time-to-ready before mount**",
                f"{m['fetch_packed']:.2f}",
                f"**{m['fetch_packed'] / base_f:.2f}x**",
            ],
        ]
        if "fetch_old8" in m:
            rows += [
                [
                    "fetch: one object per chunk, 8 in flight (before)",
                    f"{m['fetch_old8']:.2f}",
                    f"{m['fetch_old8'] / base_f:.2f}x",
                ],
                [
                    f"fetch: one object per chunk, {chunkmod.WORKERS} in flight (older stores now)",
                    f"{m['fetch_old32']:.2f}",
                    f"{m['fetch_old32'] / base_f:.2f}x",
                ],
            ]
        rows += [
            ["publish: one object (baseline, `put_file`)", f"{base_p:.2f}", "1.00x"],
            [
                "**publish: packed chunks (now), empty store**",
                f"{m['publish_packed']:.2f}",
                f"**{m['publish_packed'] / base_p:.2f}x**",
            ],
        ]
        s = r["stored"]
        out.append(
            f"{r['mb']:.0f} MB image, {r['chunks']} chunks, {s.get('npacks', 0)} packs "
            f"(stored: packs {s.get('packs', 0) / 1e6:.1f} MB + indexes {s.get('indexes', 0) / 1e3:.0f} KB + "
            f"list {s.get('list', 0) / 1e3:.0f} KB); proxy {delay_ms:g} ms/request, {mbit:g} Mbit/s; "
            f"median of {r['reps']}\n\n"
            + tabulate(rows, headers=["what", "seconds", "vs one object"], tablefmt="github")
        )
    return "\n\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=float, nargs="+", default=[31, 256], help="image sizes in MB")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--delay-ms", type=float, default=25.0)
    ap.add_argument("--mbit", type=float, default=1000.0)
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()
    for k, v in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        os.environ.setdefault(k, v)
    with tempfile.TemporaryDirectory(prefix="bench-fetch-") as tmp:
        work = Path(tmp)
        os.environ["MINISANDBOX_CACHE"] = str(work / "node-cache")  # kept pack indexes stay in the run
        procs, moto, proxy = start_services(work, a.delay_ms, a.mbit)
        results: list[dict[str, Any]] = []
        try:
            for mb in a.sizes:  # each size's table as soon as it is measured
                results.append(bench_size(mb, a.reps, work, moto, proxy, old=(mb == min(a.sizes))))
                print(table(results[-1:], a.delay_ms, a.mbit), flush=True)
                if a.json:
                    a.json.parent.mkdir(parents=True, exist_ok=True)
                    a.json.write_text(
                        json.dumps({"delay_ms": a.delay_ms, "mbit": a.mbit, "results": results}, indent=1)
                    )
        finally:
            print(stop(procs), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
