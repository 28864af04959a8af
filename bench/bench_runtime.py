"""Node runtime bench: time-to-ready of an environment, ours vs the published method, and
1/8/32/64 concurrent requests for distinct environments with and without the I/O budget.

One run, side by side on the same trees, same machine, same store directory:

* published method: Python `tarfile` gzip level 9 archives; cold = extract the env and
  repo archives, then a full copy of both for the sandbox; warm = the full copy only.
* ours: `tar.zst` store; cold = `runtime.prepare` with an empty node cache (stream, verify,
  unpack into layers, lease); warm = `runtime.prepare` when the layers are on the node
  (the sandbox then mounts an overlay, ~2 ms).

The env tree is a venv-shaped copy of packages from this interpreter's site-packages
(numpy, pandas, scipy, ... ~400 MB); the repo is a source tree
with many small files. The store is a local directory, so "cold" means not on the node;
store files may be in the page cache for both methods alike.

    python bench/bench_runtime.py                 # full run (~5-10 min on 2 cores)
    python bench/bench_runtime.py --quick         # small trees, 1/8 concurrency
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import site
import statistics
import subprocess
import sys
import tarfile
import tempfile
import textwrap
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from tabulate import tabulate  # noqa: E402

from minisandbox.node.cache import Cache  # noqa: E402
from minisandbox.index import shard_of  # noqa: E402
from minisandbox.node.iobudget import IOBudget, default_slots  # noqa: E402
from minisandbox.fsutil import file_digest  # noqa: E402
from minisandbox.pipeline.pack import pack_image, pack_tree  # noqa: E402
from minisandbox.paths import REPO_PATH, VENV_PATH  # noqa: E402
from minisandbox.node.restore import can_mount_images  # noqa: E402
from minisandbox.node.runtime import prepare  # noqa: E402
from minisandbox.node.store import Store  # noqa: E402

ENV_PACKAGES = ["numpy", "numpy.libs", "pandas", "scipy", "scipy.libs", "sympy", "mpmath", "pip", "setuptools",
                "dateutil", "pytz", "six.py", "packaging", "pluggy", "_pytest", "pytest", "iniconfig"]
REPO_PACKAGE = "jedi"  # many small files, like a repository checkout
SMALL_ENV_PACKAGES = ["networkx"]


def site_packages() -> Path:
    return Path(site.getsitepackages()[0])


def make_env(dest: Path, packages: list[str], marker: str = "") -> Path:
    sp = dest / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
    sp.mkdir(parents=True)
    (dest / "bin").mkdir()
    os.symlink(os.path.realpath(sys.executable), dest / "bin" / "python")
    (dest / "pyvenv.cfg").write_text(f"home = {Path(sys.executable).parent}\n")
    for name in packages:
        src = site_packages() / name
        if src.is_dir():
            shutil.copytree(src, sp / name, symlinks=True)
        elif src.is_file():
            shutil.copy2(src, sp / name)
    if marker:
        (dest / "env-id.txt").write_text(marker)
    return dest


def make_repo(dest: Path, package: str | None, marker: str = "") -> Path:
    dest.mkdir(parents=True)
    if package:
        shutil.copytree(site_packages() / package, dest / package, symlinks=True)
    (dest / "README.md").write_text(f"# bench repo {marker}\n")
    return dest


def du(path: Path) -> tuple[int, int]:
    files = size = 0
    for root, dirs, names in os.walk(path):
        for n in names:
            files += 1
            size += os.lstat(os.path.join(root, n)).st_size
    return files, size


def publish(store: Store, kind: str, key: str, tree: Path, fmt: str, work: Path) -> tuple[dict, float]:
    """Pack and publish one artifact; fmt "squashfs" publishes tar.zst plus a squashfs image."""
    image = fmt == "squashfs"
    fmt = "tar.zst" if image else fmt
    archive = work / f"{key}.{fmt}"
    t = time.perf_counter()
    stats = pack_tree(tree, archive, fmt)
    pack_s = time.perf_counter() - t
    sha, size = file_digest(archive)
    manifest = {"schema": 1, "kind": kind, "key": key, "format": fmt, "artifact": archive.name, "sha256": sha,
                "size": size, "files": stats.files, "raw_bytes": stats.raw_bytes,
                "mount_path": VENV_PATH if kind == "env" else REPO_PATH, "spec": {},
                "created": "2026-11-30T00:00:00Z", "tool_version": "bench"}
    if kind == "env":
        manifest["interpreter"] = {"version": sys.version.split()[0], "prefix": sys.prefix}
    store.put_file(archive, f"artifacts/{kind}/{archive.name}", sha256=sha)
    if image:
        img = work / f"{key}.squashfs"
        t = time.perf_counter()
        pack_image(tree, img)
        pack_s = time.perf_counter() - t
        isha, isize = file_digest(img)
        manifest["image"] = {"format": "squashfs", "artifact": img.name, "sha256": isha, "size": isize}
        store.put_file(img, f"artifacts/{kind}/{img.name}", sha256=isha)
        img.unlink()
    store.put_text(f"artifacts/{kind}/{key}.manifest.json", json.dumps(manifest))
    archive.unlink()
    return manifest, pack_s


def write_index(store: Store, tasks: list[dict]) -> None:
    shards: dict[str, list[str]] = {}
    for t in tasks:
        shards.setdefault(shard_of(t["instance_id"]), []).append(json.dumps(t))
    for xx, lines in shards.items():
        store.put_text(f"index/tasks/{xx}.jsonl", "\n".join(lines) + "\n")
    store.put_text("index/catalog.json", json.dumps({"schema": 1, "shards": 256, "counts": {"tasks": len(tasks)}}))


def task_entry(iid: str, env_key: str, repo_key: str) -> dict:
    return {"instance_id": iid, "env_key": env_key, "repo_key": repo_key, "spec_name": "bench",
            "status": "ready", "record": {"instance_id": iid}}


def rmtree(p: Path) -> None:
    shutil.rmtree(p, ignore_errors=True)


# -- the published method ---------------------------------------------------------------------
def published_cold(store_dir: Path, env_key: str, repo_key: str, node: Path) -> float:
    """Extract both tar.gz archives with Python tarfile, then full copies for the sandbox."""
    t = time.perf_counter()
    for kind, key in (("env", env_key), ("repo", repo_key)):
        with tarfile.open(store_dir / "artifacts" / kind / f"{key}.tar.gz", "r:gz") as tf:
            tf.extractall(node / "extracted" / kind)  # the published method uses no filter
    for kind in ("env", "repo"):
        shutil.copytree(node / "extracted" / kind, node / "sandbox" / kind, symlinks=True)
    return time.perf_counter() - t


def published_warm(node: Path, i: int) -> float:
    t = time.perf_counter()
    for kind in ("env", "repo"):
        shutil.copytree(node / "extracted" / kind, node / f"sandbox{i}" / kind, symlinks=True)
    return time.perf_counter() - t


# -- concurrency ------------------------------------------------------------------------------
WORKER = textwrap.dedent("""
    import json, sys, time
    from pathlib import Path
    sys.path.insert(0, sys.argv[5])
    from minisandbox.node.cache import Cache
    from minisandbox.node.iobudget import IOBudget
    from minisandbox.node.runtime import prepare
    store, cache_dir, task, slots = sys.argv[1], Path(sys.argv[2]), sys.argv[3], int(sys.argv[4])
    cache = Cache(cache_dir, budget=IOBudget(slots, cache_dir / "budget"))
    sys.stdout.write("ready\\n"); sys.stdout.flush()
    sys.stdin.readline()  # the start signal
    p = prepare(task, store, cache=cache)
    print(json.dumps({"ready_at": time.time(), "waited": sum(r.waited_budget for r in p.results)}), flush=True)
""")


def concurrent(store_url: str, tasks: list[str], slots: int, cache_dir: Path) -> list[float]:
    src = str(Path(__file__).resolve().parents[1] / "src")
    procs = [subprocess.Popen([sys.executable, "-c", WORKER, store_url, str(cache_dir), t, str(slots), src],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) for t in tasks]
    for p in procs:  # all imported and waiting
        assert p.stdout is not None and p.stdout.readline().strip() == "ready"
    t0 = time.time()
    for p in procs:
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.flush()
    out = []
    for p in procs:
        line = p.stdout.readline()  # type: ignore[union-attr]
        if p.wait() != 0 or not line:
            raise SystemExit(f"concurrent worker failed (exit {p.returncode})")
        out.append(json.loads(line)["ready_at"] - t0)
    return sorted(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workdir", default=None, help="scratch dir (default: a temp dir, removed at the end)")
    ap.add_argument("--reps", type=int, default=3, help="cold repetitions (median reported)")
    ap.add_argument("--warm-reps", type=int, default=20)
    ap.add_argument("--concurrency", default="1,8,32,64")
    ap.add_argument("--quick", action="store_true", help="small trees and 1,8 concurrency (smoke run)")
    ap.add_argument("--json", help="also write the results to this JSON file")
    ap.add_argument("--only", choices=["single", "concurrency"], help="run one part only")
    a = ap.parse_args()
    env_pkgs = ["numpy", "numpy.libs", "pip"] if a.quick else ENV_PACKAGES
    levels = [1, 8] if a.quick else [int(x) for x in a.concurrency.split(",")]
    work = Path(a.workdir or tempfile.mkdtemp(prefix="bench-runtime-"))
    work.mkdir(parents=True, exist_ok=True)
    results: dict = {"machine": {"cores": os.cpu_count(), "python": sys.version.split()[0]}}
    try:
        # ---- 1. one environment, cold and warm ------------------------------------------------
        if a.only != "concurrency":
            single(a, work, env_pkgs, results)
        # ---- 2. concurrent requests for distinct environments ----------------------------------
        if a.only != "single":
            concurrency(work, levels, results)
    finally:
        if not a.workdir:
            rmtree(work)
    if a.json:
        Path(a.json).write_text(json.dumps(results, indent=1))
    return 0


def single(a: argparse.Namespace, work: Path, env_pkgs: list[str], results: dict) -> None:
    env_tree = make_env(work / "trees" / "env", env_pkgs)
    repo_tree = make_repo(work / "trees" / "repo", REPO_PACKAGE)
    ef, eb = du(env_tree)
    rf, rb = du(repo_tree)
    print(f"env tree: {ef} files, {eb / 1e6:.0f} MB; repo tree: {rf} files, {rb / 1e6:.0f} MB", flush=True)
    images = can_mount_images() and shutil.which("mksquashfs") is not None
    stores = {"tar.zst": work / "store-zst", "tar.gz": work / "store-gz"}
    if images:
        stores["squashfs"] = work / "store-img"
    pack_s = {}
    sizes = {}
    manifests = {}
    for fmt, d in stores.items():
        st = Store(d)
        em, ep = publish(st, "env", "env-bench-0000000000000000", env_tree, fmt, work)
        rm, rp = publish(st, "repo", "repo-bench-000000000000-00000000", repo_tree, fmt, work)
        write_index(st, [task_entry("bench__one", em["key"], rm["key"])])
        pack_s[fmt] = ep + rp
        sizes[fmt] = sum((m.get("image") or m)["size"] for m in (em, rm))
        manifests[fmt] = (em, rm)
        print(f"packed {fmt}: {pack_s[fmt]:.1f} s, {sizes[fmt] / 1e6:.0f} MB", flush=True)

    node = work / "node"
    cold: dict[str, list[float]] = {k: [] for k in ("published", "tar.zst", "tar.gz", "squashfs")}
    warm: dict[str, list[float]] = {k: [] for k in ("published", "tar.zst", "squashfs")}
    for i in range(a.reps):
        rmtree(node)
        cold["published"].append(published_cold(stores["tar.gz"], manifests["tar.gz"][0]["key"],
                                                manifests["tar.gz"][1]["key"], node / "pub"))
        for j in range(min(a.reps, 3)):
            warm["published"].append(published_warm(node / "pub", j))
        rmtree(node)
        for fmt in stores:
            cache = Cache(node / f"cache-{fmt}", budget=IOBudget(0, node / "unused"))
            mount = fmt == "squashfs"
            t = time.perf_counter()
            p = prepare("bench__one", str(stores[fmt]), cache=cache, images=mount)
            cold[fmt].append(time.perf_counter() - t)
            assert p.downloaded
            p.release()
            if fmt in warm:
                for _ in range(a.warm_reps // a.reps + 1):
                    t = time.perf_counter()
                    w = prepare("bench__one", str(stores[fmt]), cache=cache, images=mount)
                    warm[fmt].append(time.perf_counter() - t)
                    assert not w.downloaded
                    w.release()
            cache.gc(max_bytes=0)  # unmounts images, removes layers
        rmtree(node)
        print(f"rep {i + 1}/{a.reps}: " + ", ".join(f"{k} cold {v[-1]:.2f} s" for k, v in cold.items() if v),
              flush=True)
    med = statistics.median
    base_c, base_w = med(cold["published"]), med(warm["published"])
    rows = [["published method (tarfile gz-9 + full copy)", f"{pack_s['tar.gz']:.1f}",
             f"{sizes['tar.gz'] / 1e6:.0f}", f"{base_c:.3f}", f"{base_w:.3f}", "1.0x", "1.0x"]]
    labels = {"tar.zst": "ours: tar.zst, streamed + unpacked into layers",
              "tar.gz": "ours: published tar.gz store, streamed + unpacked",
              "squashfs": "ours: squashfs image, verified + loop-mounted (root)"}
    for fmt, label in labels.items():
        if not cold[fmt]:
            continue
        w = f"{med(warm[fmt]):.4f}" if warm.get(fmt) else "-"
        ws = f"{base_w / med(warm[fmt]):.0f}x" if warm.get(fmt) else "-"
        rows.append([label, f"{pack_s[fmt]:.1f}" if fmt != "tar.gz" else "(same)",
                     f"{sizes[fmt] / 1e6:.0f}", f"{med(cold[fmt]):.3f}", w, f"{base_c / med(cold[fmt]):.1f}x", ws])
    print()
    print(tabulate(rows, headers=["method", "pack s", "MB", "cold ready s (median)", "warm ready s (median)",
                                  "cold speed-up", "warm speed-up"]))
    best = "squashfs" if cold["squashfs"] else "tar.zst"
    print(f"targets: warm <= 0.1 s: {'MET' if med(warm[best]) <= 0.1 else 'MISSED'} ({med(warm[best]):.4f} s); "
          f"cold >= 5x faster: {'MET' if base_c / med(cold[best]) >= 5 else 'MISSED'} "
          f"({base_c / med(cold[best]):.1f}x with {best}; {base_c / med(cold['tar.zst']):.1f}x unpacking tar.zst)",
          flush=True)
    results["single"] = {"cold": cold, "warm": warm, "pack_s": pack_s, "sizes": sizes,
                         "env_files": ef, "env_bytes": eb, "repo_files": rf, "repo_bytes": rb}
    rmtree(work / "store-gz")
    rmtree(work / "trees")


def concurrency(work: Path, levels: list[int], results: dict) -> None:
    med = statistics.median
    n_max = max(levels)
    cstore = Store(work / "store-conc")
    small = SMALL_ENV_PACKAGES
    tasks = []
    t = time.perf_counter()
    for i in range(n_max):
        tree = make_env(work / "trees" / f"cenv{i}", small, marker=f"env {i}")
        em, _ = publish(cstore, "env", f"env-conc-{i:016x}", tree, "tar.zst", work)
        rtree = make_repo(work / "trees" / f"crepo{i}", None, marker=str(i))
        rm, _ = publish(cstore, "repo", f"repo-conc-{i:012x}-{i:08x}", rtree, "tar.zst", work)
        tasks.append(task_entry(f"conc__task.{i}", em["key"], rm["key"]))
        rmtree(tree)
        rmtree(rtree)
    write_index(cstore, tasks)
    cf, cb = du(make_env(work / "trees" / "probe", small))
    print(f"\nconcurrency: {n_max} distinct envs of {cf} files, {cb / 1e6:.0f} MB each "
          f"(published in {time.perf_counter() - t:.0f} s)", flush=True)
    slots = default_slots()
    crow = []
    results["concurrent"] = {}
    for n in levels:
        for label, s in (("unbounded", 0), (f"budget {slots}", slots)):
            cache_dir = work / f"cache-conc-{n}-{s}"
            times = concurrent(str(cstore.root), [tasks[i]["instance_id"] for i in range(n)], s, cache_dir)
            rmtree(cache_dir)
            crow.append([n, label, f"{times[0]:.2f}", f"{med(times):.2f}", f"{times[-1]:.2f}"])
            results["concurrent"][f"{n}/{label}"] = times
            print(f"  {n:3d} {label:10s} first {times[0]:.2f} s, median {med(times):.2f} s, "
                  f"all {times[-1]:.2f} s", flush=True)
    print()
    print(tabulate(crow, headers=["concurrent requests", "I/O budget", "first ready s", "median ready s",
                                  "all ready s"]))


if __name__ == "__main__":
    sys.exit(main())
