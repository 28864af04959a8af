"""Node runtime bench: time-to-ready of an environment per method, as root and as an
unprivileged user, against the published method measured in the same run.

1. One realistic environment (~400 MB, ~11.7k files: numpy, pandas, scipy, sympy, ...) plus
   a repository of many small files, cold (nothing on the node) and warm (layers already on
   the node), median of --reps / --warm-reps:
   * published method: Python `tarfile` gzip-9 archives; cold = extract env and repo, then a
     full copy of both for the sandbox; warm = the full copy only (the baseline);
   * tar.zst: `runtime.prepare(images=False)`: stream, verify, unpack into layers;
   * whole squashfs image (the default before chunking): `runtime.prepare()`: download, check
     the image's sha256 against the manifest, then a kernel loop mount (root) or squashfuse
     in the cache's mount-holder namespace (unprivileged user `msbtest`, run through runuser);
   * chunked image (the default): the image published as chunks only; the node assembles it
     (reusing chunks of images it holds), checks its sha256, mounts it as above; cold on an
     empty node, and "sibling": the node already holds the images of a task whose env has
     one package less (SIBLING_EXTRA) and whose repo has another README;
   * chunks only, no archive (the pipeline's default store now, config `archive: false`),
     prepared with `images=False`: `runtime.ready_layer` assembles and verifies the image,
     then unpacks it with unsquashfs into layers (`Cache.image_tree_layer`): the path of a
     node that can mount the image neither with the kernel nor with squashfuse;
   the unprivileged rows repeat the published method as that user for their baseline.
2. --distinct (8) distinct ~100 MB environments prepared at the same time, one process each,
   per method (chunked and chunks-only/unsquashfs included), as root and unprivileged
   (--root-only: root): median and all-ready seconds.
3. 1/8/32/64 concurrent requests for distinct small environments, with and without the
   node's I/O budget.

The store is a local directory, so "cold" means not on the node; store files may be in the
page cache for all methods alike.

    .venv/bin/python bench/bench_runtime.py                 # full run (~10-15 min on 2 cores)
    .venv/bin/python bench/bench_runtime.py --quick         # small trees, 1/8 concurrency
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
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.fixtures: the rootless set-up

from tabulate import tabulate  # noqa: E402

from minisandbox.fsutil import file_digest  # noqa: E402
from minisandbox.index import shard_of  # noqa: E402
from minisandbox.node.cache import Cache  # noqa: E402
from minisandbox.node.iobudget import IOBudget, default_slots  # noqa: E402
from minisandbox.node.restore import can_mount_images  # noqa: E402
from minisandbox.node.runtime import prepare  # noqa: E402
from minisandbox.node.store import Store  # noqa: E402
from minisandbox.paths import REPO_PATH, VENV_PATH  # noqa: E402
from minisandbox.pipeline.chunking import write_chunk_list  # noqa: E402
from minisandbox.pipeline.pack import normalize_tree, pack_image, pack_tree, tree_stats  # noqa: E402
from minisandbox.pipeline.steps import chunks_entry, publish_image  # noqa: E402
from tests.fixtures.rootless_node import copy_runtime_modules, user_python, user_python_matches  # noqa: E402
from tests.fixtures.sandbox import ROOTLESS_PYTHON, TEST_USER, ensure_user  # noqa: E402

ENV_PACKAGES = [
    "numpy",
    "numpy.libs",
    "pandas",
    "scipy",
    "scipy.libs",
    "sympy",
    "mpmath",
    "pip",
    "setuptools",
    "dateutil",
    "pytz",
    "six.py",
    "packaging",
    "pluggy",
    "_pytest",
    "pytest",
    "iniconfig",
]
REPO_PACKAGE = "jedi"  # many small files, like a repository checkout
SMALL_ENV_PACKAGES = ["networkx"]
#: The distinct environments prepared at the same time (~100 MB, ~4k files each).
CONC_ENV_PACKAGES = ["numpy", "numpy.libs", "pip", "setuptools", "networkx"]
#: What the sibling environment has in addition to the realistic one (a different image
#: that shares most chunks with it, as environments of one project family do).
SIBLING_EXTRA = "networkx"


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


def dir_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def du(path: Path) -> tuple[int, int]:
    files = size = 0
    for root, _dirs, names in os.walk(path):
        for n in names:
            files += 1
            size += os.lstat(os.path.join(root, n)).st_size
    return files, size


def publish(
    store: Store, kind: str, key: str, tree: Path, fmt: str, work: Path, archive: bool = True
) -> tuple[dict, float]:
    """Pack and publish one artifact; fmt "squashfs" publishes tar.zst plus a whole squashfs
    image (as before chunking), "chunked" tar.zst plus the image as chunks only (the package's
    normalize_tree, pack_image, write_chunk_list and publish_image). `archive` False (with an
    image): no tar.zst at all, only the image's chunks, as the pipeline now publishes by
    default (config `archive: false`; the manifest has no artifact/sha256/size)."""
    chunked = fmt == "chunked"
    image = fmt in ("squashfs", "chunked")
    fmt = "tar.zst" if image else fmt
    archive = archive or not image
    if chunked:
        normalize_tree(tree)
    packed = work / f"{key}.{fmt}"
    t = time.perf_counter()
    stats = pack_tree(tree, packed, fmt) if archive else tree_stats(tree)
    pack_s = time.perf_counter() - t
    manifest = {
        "schema": 1,
        "kind": kind,
        "key": key,
        "format": fmt,
        "files": stats.files,
        "raw_bytes": stats.raw_bytes,
        "mount_path": VENV_PATH if kind == "env" else REPO_PATH,
        "spec": {},
        "created": "2026-11-30T00:00:00Z",
        "tool_version": "bench",
    }
    if archive:
        sha, size = file_digest(packed)
        manifest.update(artifact=packed.name, sha256=sha, size=size)
    if kind == "env":
        manifest["interpreter"] = {"version": sys.version.split()[0], "prefix": sys.prefix}
    if image:
        img = work / f"{key}.squashfs"
        t = time.perf_counter()
        pack_image(tree, img)  # at the package's IMAGE_LEVEL
        pack_s += time.perf_counter() - t  # archive (if any) + image: both are published
        isha, isize = file_digest(img)
        manifest["image"] = {"format": "squashfs", "artifact": img.name, "sha256": isha, "size": isize}
        if chunked:
            t = time.perf_counter()
            lst, _ = write_chunk_list(img, key)
            pack_s += time.perf_counter() - t
            manifest["image"].update(chunks=chunks_entry(img, key), whole=False)
            publish_image(store, kind, key, manifest["image"], img, whole=False)
            lst.unlink()
        else:
            store.put_file(img, f"artifacts/{kind}/{img.name}", sha256=isha)
        img.unlink()
    if archive:  # after the image's parts, before the manifest (docs/pipeline.md, "Atomicity")
        store.put_file(packed, f"artifacts/{kind}/{packed.name}", sha256=manifest["sha256"])
        packed.unlink()
    store.put_text(f"artifacts/{kind}/{key}.manifest.json", json.dumps(manifest))
    return manifest, pack_s


def write_index(store: Store, tasks: list[dict]) -> None:
    shards: dict[str, list[str]] = {}
    for t in tasks:
        shards.setdefault(shard_of(t["instance_id"]), []).append(json.dumps(t))
    for xx, lines in shards.items():
        store.put_text(f"index/tasks/{xx}.jsonl", "\n".join(lines) + "\n")
    store.put_text("index/catalog.json", json.dumps({"schema": 1, "shards": 256, "counts": {"tasks": len(tasks)}}))


def task_entry(iid: str, env_key: str, repo_key: str) -> dict:
    return {
        "instance_id": iid,
        "env_key": env_key,
        "repo_key": repo_key,
        "spec_name": "bench",
        "status": "ready",
        "record": {
            "instance_id": iid,
            "format": "swesmith",
            "repo": "bench/bench",
            "patch": "",
            "fail_to_pass": [],
            "pass_to_pass": [],
        },
    }


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


# -- running as an unprivileged user ------------------------------------------------------------
# The rootless tests' user and set-up (tests/fixtures/sandbox.py, tests/fixtures/rootless_node.py).
BENCH_USER = TEST_USER


def user_runner(work: Path) -> list[str] | None:
    """argv prefix that runs Python as the unprivileged bench user with minisandbox importable,
    or None (not root, no such user and cannot create it, different Python minor)."""
    if os.geteuid() != 0 or not shutil.which("runuser") or not os.path.exists(ROOTLESS_PYTHON):
        return None
    if not user_python_matches():
        return None  # compiled modules (zstandard, pydantic_core) would not load
    ensure_user()
    sp = work / "user-site"
    if not sp.exists():
        copy_runtime_modules(sp)
    return user_python(sp, {"MINISANDBOX_IO_SLOTS": "0"})


def user_dir(path: Path) -> Path:
    """A directory the bench user owns (and every parent traversable)."""
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["chown", "-R", BENCH_USER, str(path)], check=True)
    return path


USER_SINGLE = textwrap.dedent("""
    import json, shutil, statistics, sys, tarfile, time
    from pathlib import Path
    from minisandbox.node.cache import Cache
    from minisandbox.node.iobudget import IOBudget
    from minisandbox.node.runtime import prepare
    cfg = json.loads(sys.argv[1])
    out = {}
    node = Path(cfg["node"])
    # published method as this user
    cold, warm = [], []
    for i in range(cfg["reps"]):
        d = node / f"pub{i}"
        t = time.perf_counter()
        for kind, key in (("env", cfg["env_key"]), ("repo", cfg["repo_key"])):
            with tarfile.open(Path(cfg["gz_store"]) / "artifacts" / kind / f"{key}.tar.gz", "r:gz") as tf:
                tf.extractall(d / "extracted" / kind)
        for kind in ("env", "repo"):
            shutil.copytree(d / "extracted" / kind, d / "sandbox" / kind, symlinks=True)
        cold.append(time.perf_counter() - t)
        t = time.perf_counter()
        for kind in ("env", "repo"):
            shutil.copytree(d / "extracted" / kind, d / "sandbox2" / kind, symlinks=True)
        warm.append(time.perf_counter() - t)
        shutil.rmtree(d)
    out["published"] = {"cold": cold, "warm": warm}
    for name, images, store in (("unpack", False, cfg["store"]), ("image", True, cfg["store"]),
                                ("chunked", True, cfg["chunked_store"]), ("unsquash", False, cfg["noarc_store"])):
        cold, warm, sibling, how = [], [], [], ""
        for i in range(cfg["reps"]):
            cache = Cache(node / f"cache-{name}-{i}", budget=IOBudget(0, node / "unused"))
            t = time.perf_counter()
            p = prepare(cfg["task"], store, cache=cache, images=images)
            cold.append(time.perf_counter() - t)
            how = "fuse" if p.mount_ns else "unpacked"
            p.release()
            for _ in range(cfg["warm_reps"]):
                t = time.perf_counter()
                w = prepare(cfg["task"], store, cache=cache, images=images)
                warm.append(time.perf_counter() - t)
                w.release()
            if name == "chunked":
                t = time.perf_counter()
                p = prepare(cfg["sibling"], store, cache=cache, images=True)
                sibling.append(time.perf_counter() - t)
                p.release()
            cache.gc(max_bytes=0)
            cache.stop_mounts()
            shutil.rmtree(node / f"cache-{name}-{i}", ignore_errors=True)
        out[name] = {"cold": cold, "warm": warm, "sibling": sibling, "how": how}
    print(json.dumps(out))
""")


def single(a: argparse.Namespace, work: Path, env_pkgs: list[str], results: dict) -> None:
    """One realistic environment (+ repo), cold and warm, every method side by side."""
    env_tree = make_env(work / "trees" / "env", env_pkgs)
    repo_tree = make_repo(work / "trees" / "repo", REPO_PACKAGE)
    for tree in (env_tree, repo_tree):
        normalize_tree(tree)  # as the pipeline does before packing
    ef, eb = du(env_tree)
    rf, rb = du(repo_tree)
    print(f"env tree: {ef} files, {eb / 1e6:.0f} MB; repo tree: {rf} files, {rb / 1e6:.0f} MB", flush=True)
    # store-img: tar.zst + whole image (as published before chunking); store-noarc: the image
    # as chunks and no archive (the pipeline's default now, config `archive: false`);
    # store-chunk: tar.zst + image as chunks, plus a sibling task whose env has one package
    # more and whose repo has another README: its images share most chunks with the first
    # task's (last: the sibling changes the trees).
    stores = {
        "tar.gz": work / "store-gz",
        "squashfs": work / "store-img",
        "unsquash": work / "store-noarc",
        "chunked": work / "store-chunk",
    }
    pack_s, sizes, keys = {}, {}, {}
    for name, d in stores.items():
        st = Store(d)
        fmt = "chunked" if name == "unsquash" else name
        em, ep = publish(st, "env", "env-bench-0000000000000000", env_tree, fmt, work, archive=name != "unsquash")
        rm, rp = publish(
            st, "repo", "repo-bench-000000000000-00000000", repo_tree, fmt, work, archive=name != "unsquash"
        )
        tasks = [task_entry("bench__one", em["key"], rm["key"])]
        pack_s[name] = ep + rp
        if name == "unsquash":
            sizes[name] = dir_bytes(d / "packs")
        else:
            sizes[name] = sum(m["size"] for m in (em, rm))
        if name == "squashfs":
            sizes["tar.zst"] = sizes[name]
            sizes["squashfs"] = sum(m["image"]["size"] for m in (em, rm))
        if name == "chunked":
            sizes["chunked"] = dir_bytes(d / "packs")
            shutil.copytree(
                site_packages() / SIBLING_EXTRA,
                next(env_tree.glob("lib/python*/site-packages")) / SIBLING_EXTRA,
                symlinks=True,
            )
            (repo_tree / "README.md").write_text("# bench repo, sibling\n")
            for tree in (env_tree, repo_tree):
                normalize_tree(tree)
            es, _ = publish(st, "env", "env-bench-5151515151515151", env_tree, fmt, work)
            rs, _ = publish(st, "repo", "repo-bench-515151515151-51515151", repo_tree, fmt, work)
            tasks.append(task_entry("bench__sibling", es["key"], rs["key"]))
            sizes["sibling"] = sum(m["image"]["size"] for m in (es, rs))
            sizes["sibling_new"] = dir_bytes(d / "packs") - sizes["chunked"]
            print(
                f"sibling images {sizes['sibling'] / 1e6:.0f} MB, of which in chunks the first task's images "
                f"lack: {sizes['sibling_new'] / 1e6:.1f} MB",
                flush=True,
            )
        write_index(st, tasks)
        keys = {"env": em["key"], "repo": rm["key"]}
        print(f"packed {name}: {pack_s[name]:.1f} s", flush=True)
    rmtree(work / "trees")
    node = work / "node"
    kernel = can_mount_images()
    names = ("published", "tar.zst", "squashfs", "chunked", "sibling", "unsquash")
    cold: dict[str, list[float]] = {k: [] for k in names}
    warm: dict[str, list[float]] = {k: [] for k in names}
    for i in range(a.reps):
        rmtree(node)
        cold["published"].append(published_cold(stores["tar.gz"], keys["env"], keys["repo"], node / "pub"))
        for j in range(min(a.reps, 3)):
            warm["published"].append(published_warm(node / "pub", j))
        rmtree(node)
        # "unsquash": images=False on a store without archives: ready_layer assembles and
        # verifies the image, then unpacks it with unsquashfs (Cache.image_tree_layer)
        for name, images in (("tar.zst", False), ("squashfs", True), ("chunked", True), ("unsquash", False)):
            if images and not kernel:
                continue
            store_dir = str(stores["squashfs" if name == "tar.zst" else name])
            cache = Cache(node / f"cache-{name}", budget=IOBudget(0, node / "unused"))
            t = time.perf_counter()
            p = prepare("bench__one", store_dir, cache=cache, images=images)
            cold[name].append(time.perf_counter() - t)
            assert p.downloaded
            p.release()
            for _ in range(a.warm_reps // a.reps + 1):
                t = time.perf_counter()
                w = prepare("bench__one", store_dir, cache=cache, images=images)
                warm[name].append(time.perf_counter() - t)
                assert not w.downloaded
                w.release()
            if name == "chunked":  # the node holds the first task's images: the sibling reuses their chunks
                t = time.perf_counter()
                p = prepare("bench__sibling", store_dir, cache=cache, images=True)
                cold["sibling"].append(time.perf_counter() - t)
                assert p.downloaded
                p.release()
            cache.gc(max_bytes=0)  # unmounts images, removes layers
        rmtree(node)
        print(
            f"rep {i + 1}/{a.reps}: " + ", ".join(f"{k} cold {v[-1]:.2f} s" for k, v in cold.items() if v), flush=True
        )
    user: dict = {}
    runner = user_runner(work)
    if runner:
        for d in stores.values():
            subprocess.run(["chmod", "-R", "a+rX", str(d)], check=True)
        os.chmod(work, 0o755)
        cfg = {
            "node": str(user_dir(work / "user-node")),
            "reps": a.reps,
            "warm_reps": a.warm_reps // a.reps + 1,
            "task": "bench__one",
            "store": str(stores["squashfs"]),
            "gz_store": str(stores["tar.gz"]),
            "chunked_store": str(stores["chunked"]),
            "noarc_store": str(stores["unsquash"]),
            "sibling": "bench__sibling",
            "env_key": keys["env"],
            "repo_key": keys["repo"],
        }
        proc = subprocess.run(runner + ["-c", USER_SINGLE, json.dumps(cfg)], capture_output=True, text=True, cwd="/tmp")
        if proc.returncode != 0:
            print(f"unprivileged run failed: {proc.stderr[-2000:]}", file=sys.stderr)
        else:
            user = json.loads(proc.stdout.strip().splitlines()[-1])
        rmtree(work / "user-node")
    med = statistics.median

    def row(label: str, c: list[float], w: list[float], base: tuple[float, float], pack: str, mb: str) -> list:
        if not c:
            return [label, pack, mb, "-", "-", "-", "-"]
        if not w:
            return [label, pack, mb, f"{med(c):.3f}", "-", f"{base[0] / med(c):.1f}x", "-"]
        return [
            label,
            pack,
            mb,
            f"{med(c):.3f}",
            f"{med(w):.4f}",
            f"{base[0] / med(c):.1f}x",
            f"{base[1] / med(w):.0f}x",
        ]

    base = (med(cold["published"]), med(warm["published"]))
    mb = {k: f"{v / 1e6:.0f}" for k, v in sizes.items()}
    rows = [
        row(
            "root: published method (tarfile gz-9 + full copy), baseline",
            cold["published"],
            warm["published"],
            base,
            f"{pack_s['tar.gz']:.1f}",
            mb["tar.gz"],
        ),
        row(
            "root: tar.zst, streamed + unpacked into layers",
            cold["tar.zst"],
            warm["tar.zst"],
            base,
            "(below)",
            mb["tar.zst"],
        ),
        row(
            "root: whole squashfs image, downloaded + sha256 + kernel mount (before chunking)",
            cold["squashfs"],
            warm["squashfs"],
            base,
            f"{pack_s['squashfs']:.1f} (tar.zst + image)",
            mb["squashfs"],
        ),
        row(
            "root: chunked image, empty node: assembled from chunks + sha256 + kernel mount (default)",
            cold["chunked"],
            warm["chunked"],
            base,
            f"{pack_s['chunked']:.1f} (tar.zst + image + chunks)",
            f"{mb['chunked']} (chunks)",
        ),
        row(
            "root: chunked image, sibling on the node (another env's images share chunks)",
            cold["sibling"],
            [],
            base,
            "",
            f"{mb['sibling_new']} new of {mb['sibling']}",
        ),
        row(
            "root: chunks only, no archive: assembled + sha256 + unsquashfs into layers (images=False)",
            cold["unsquash"],
            warm["unsquash"],
            base,
            f"{pack_s['unsquash']:.1f} (image + chunks)",
            f"{mb['unsquash']} (chunks)",
        ),
    ]
    if user:
        ubase = (med(user["published"]["cold"]), med(user["published"]["warm"]))
        rows += [
            row(
                "unprivileged: published method, baseline",
                user["published"]["cold"],
                user["published"]["warm"],
                ubase,
                "",
                mb["tar.gz"],
            ),
            row(
                "unprivileged: tar.zst, streamed + unpacked (fallback)",
                user["unpack"]["cold"],
                user["unpack"]["warm"],
                ubase,
                "",
                mb["tar.zst"],
            ),
            row(
                f"unprivileged: whole squashfs image, downloaded + sha256 + squashfuse ({user['image']['how']})",
                user["image"]["cold"],
                user["image"]["warm"],
                ubase,
                "",
                mb["squashfs"],
            ),
            row(
                f"unprivileged: chunked image, empty node: assembled + sha256 + squashfuse "
                f"({user['chunked']['how']}) (default)",
                user["chunked"]["cold"],
                user["chunked"]["warm"],
                ubase,
                "",
                f"{mb['chunked']} (chunks)",
            ),
            row(
                "unprivileged: chunked image, sibling on the node",
                user["chunked"]["sibling"],
                [],
                ubase,
                "",
                f"{mb['sibling_new']} new of {mb['sibling']}",
            ),
            row(
                f"unprivileged: chunks only, no archive: assembled + sha256 + unsquashfs "
                f"({user['unsquash']['how']}) (images=False)",
                user["unsquash"]["cold"],
                user["unsquash"]["warm"],
                ubase,
                "",
                f"{mb['unsquash']} (chunks)",
            ),
        ]
    print()
    print(
        tabulate(
            rows,
            headers=[
                "method",
                "pack s",
                "MB",
                "cold ready s (median)",
                "warm ready s (median)",
                "cold speed-up",
                "warm speed-up",
            ],
        )
    )
    results["single"] = {
        "cold": cold,
        "warm": warm,
        "user": user,
        "pack_s": pack_s,
        "sizes": sizes,
        "env_files": ef,
        "env_bytes": eb,
        "repo_files": rf,
        "repo_bytes": rb,
    }
    rmtree(work / "store-gz")
    rmtree(work / "store-chunk")
    rmtree(work / "store-noarc")


# -- 8 concurrent distinct environments, per method ---------------------------------------------
CONC_WORKER = textwrap.dedent("""
    import json, shutil, sys, tarfile, time
    from pathlib import Path
    cfg = json.loads(sys.argv[1])
    if cfg["method"] != "published":
        from minisandbox.node.cache import Cache
        from minisandbox.node.iobudget import IOBudget
        from minisandbox.node.runtime import prepare
        cache = Cache(Path(cfg["cache"]), budget=IOBudget(0, Path(cfg["cache"]) / "budget"))
    sys.stdout.write("ready\\n"); sys.stdout.flush()
    sys.stdin.readline()  # the start signal
    if cfg["method"] == "published":
        d = Path(cfg["node"])
        for kind, key in (("env", cfg["env_key"]), ("repo", cfg["repo_key"])):
            with tarfile.open(Path(cfg["gz_store"]) / "artifacts" / kind / f"{key}.tar.gz", "r:gz") as tf:
                tf.extractall(d / "extracted" / kind)
        for kind in ("env", "repo"):
            shutil.copytree(d / "extracted" / kind, d / "sandbox" / kind, symlinks=True)
    else:
        p = prepare(cfg["task"], cfg["store"], cache=cache, images=cfg["method"] in ("image", "chunked"))
        assert p.downloaded
    print(json.dumps({"ready_at": time.time()}), flush=True)
""")


def run_concurrent(argv_prefix: list[str], cfgs: list[dict]) -> list[float]:
    """Start one worker per config, release them at once, return sorted seconds to ready."""
    procs = [
        subprocess.Popen(
            argv_prefix + ["-c", CONC_WORKER, json.dumps(c)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd="/tmp",
        )
        for c in cfgs
    ]
    for p in procs:
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


def concurrent_methods(a: argparse.Namespace, work: Path, n: int, env_pkgs: list[str], results: dict) -> None:
    """n distinct environments prepared at the same time, cold, per method (median of reps)."""
    store = Store(work / "store-cm")
    chunk_store = Store(work / "store-cm-chunk")
    noarc_store = Store(work / "store-cm-noarc")  # chunks only, no archive (the default now)
    gz = Store(work / "store-cm-gz")
    tasks = []
    base_tree = make_env(work / "trees" / "cm-base", env_pkgs)
    cf, cb = du(base_tree)
    repo_tree = make_repo(work / "trees" / "cm-repo", None, marker="cm")
    normalize_tree(base_tree)
    normalize_tree(repo_tree)
    gz_env, _ = publish(gz, "env", "env-cm-gz-000000000000", base_tree, "tar.gz", work)
    gz_repo, _ = publish(gz, "repo", "repo-cm-gz-00000000000-00000000", repo_tree, "tar.gz", work)
    for i in range(n):
        (base_tree / "env-id.txt").write_text(f"env {i}")  # a distinct digest per environment
        normalize_tree(base_tree)
        for st, fmt, archive in (
            (store, "squashfs", True),
            (chunk_store, "chunked", True),
            (noarc_store, "chunked", False),
        ):
            em, _ = publish(st, "env", f"env-cm-{i:016x}", base_tree, fmt, work, archive=archive)
            rm, _ = publish(st, "repo", f"repo-cm-{i:012x}-{i:08x}", repo_tree, fmt, work, archive=archive)
        tasks.append(task_entry(f"cm__task.{i}", em["key"], rm["key"]))
    for st in (store, chunk_store, noarc_store):
        write_index(st, tasks)
    rmtree(work / "trees")
    print(f"\n{n} concurrent distinct envs of {cf} files, {cb / 1e6:.0f} MB each", flush=True)
    me = [sys.executable]
    runner = user_runner(work)
    if runner:
        subprocess.run(
            ["chmod", "-R", "a+rX", str(store.root), str(chunk_store.root), str(noarc_store.root), str(gz.root)],
            check=True,
        )
        os.chmod(work, 0o755)
    # "unsquash": the chunks-only store prepared with images=False (assemble, verify, unsquashfs)
    methods = [("root", "published", me), ("root", "unpack", me), ("root", "unsquash", me)]
    if can_mount_images():
        methods += [("root", "image", me), ("root", "chunked", me)]
    if runner and not a.root_only:
        methods += [
            ("unprivileged", "published", runner),
            ("unprivileged", "unpack", runner),
            ("unprivileged", "unsquash", runner),
            ("unprivileged", "image", runner),
            ("unprivileged", "chunked", runner),
        ]
    stores = {"chunked": chunk_store, "unsquash": noarc_store}
    times: dict[str, list[list[float]]] = {}
    for rep in range(a.reps):
        for who, method, prefix in methods:
            node = work / f"cm-node-{who}-{method}"
            rmtree(node)
            node.mkdir(parents=True)
            if who == "unprivileged":
                user_dir(node)
            cfgs = [
                {
                    "method": method,
                    "node": str(node / f"n{i}"),
                    "cache": str(node / "cache"),
                    "task": t["instance_id"],
                    "store": str(stores.get(method, store).root),
                    "gz_store": str(gz.root),
                    "env_key": gz_env["key"],
                    "repo_key": gz_repo["key"],
                }
                for i, t in enumerate(tasks)
            ]
            env = dict(os.environ)
            ready = run_concurrent(prefix, cfgs)
            times.setdefault(f"{who}/{method}", []).append(ready)
            if method != "published":
                stop = (
                    "from minisandbox.node.cache import Cache; import sys; c = Cache(sys.argv[1]); "
                    "c.gc(max_bytes=0); c.stop_mounts()"
                )
                subprocess.run(prefix + ["-c", stop, str(node / "cache")], check=True, cwd="/tmp", env=env)
            rmtree(node)
            print(f"  rep {rep + 1}: {who} {method}: all ready {ready[-1]:.2f} s", flush=True)
    med = statistics.median
    rows = []
    for who in ("root", "unprivileged"):
        key = f"{who}/published"
        if key not in times:
            continue
        base_all = med(r[-1] for r in times[key])
        for method, label in (
            ("published", "published method (baseline)"),
            ("unpack", "tar.zst unpack"),
            ("image", "whole squashfs image: download + sha256 + mount (before chunking)"),
            ("chunked", "chunked image: assembled + sha256 + mount (default)"),
            ("unsquash", "chunks only, no archive: assembled + sha256 + unsquashfs (images=False)"),
        ):
            k = f"{who}/{method}"
            if k not in times:
                continue
            all_ready = med(r[-1] for r in times[k])
            rows.append(
                [
                    f"{who}: {label}",
                    f"{med(med(r) for r in times[k]):.2f}",
                    f"{all_ready:.2f}",
                    f"{base_all / all_ready:.1f}x",
                ]
            )
    print()
    print(tabulate(rows, headers=["method", f"median ready s ({n} envs)", "all ready s", "speed-up (all ready)"]))
    results["concurrent_methods"] = {"n": n, "env_files": cf, "env_bytes": cb, "times": times}
    rmtree(work / "store-cm")
    rmtree(work / "store-cm-chunk")
    rmtree(work / "store-cm-noarc")
    rmtree(work / "store-cm-gz")


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
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, store_url, str(cache_dir), t, str(slots), src],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for t in tasks
    ]
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
    ap.add_argument("--only", choices=["single", "methods", "concurrency"], help="run one part only")
    ap.add_argument("--distinct", type=int, default=8, help="concurrent distinct environments per method")
    ap.add_argument("--root-only", action="store_true", help="the concurrent-methods part as root only")
    a = ap.parse_args()
    env_pkgs = ["numpy", "numpy.libs", "pip"] if a.quick else ENV_PACKAGES
    conc_pkgs = ["pip", "setuptools"] if a.quick else CONC_ENV_PACKAGES
    levels = [1, 8] if a.quick else [int(x) for x in a.concurrency.split(",")]
    # not under a 0700 temp dir: the unprivileged part reads the stores
    work = Path(a.workdir or tempfile.mkdtemp(prefix="bench-runtime-", dir="/var/tmp"))
    work.mkdir(parents=True, exist_ok=True)
    results: dict = {"machine": {"cores": os.cpu_count(), "python": sys.version.split()[0]}}
    try:
        # ---- 1. one environment, cold and warm ------------------------------------------------
        if a.only in (None, "single"):
            single(a, work, env_pkgs, results)
        # ---- 2. n distinct environments at once, per method ------------------------------------
        if a.only in (None, "methods"):
            concurrent_methods(a, work, a.distinct, conc_pkgs, results)
        # ---- 3. 1..64 concurrent requests with and without the I/O budget -----------------------
        if a.only in (None, "concurrency"):
            concurrency(work, levels, results)
    finally:
        if not a.workdir:
            rmtree(work)
    if a.json:
        Path(a.json).write_text(json.dumps(results, indent=1))
    return 0


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
    print(
        f"\nconcurrency: {n_max} distinct envs of {cf} files, {cb / 1e6:.0f} MB each "
        f"(published in {time.perf_counter() - t:.0f} s)",
        flush=True,
    )
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
            print(
                f"  {n:3d} {label:10s} first {times[0]:.2f} s, median {med(times):.2f} s, all {times[-1]:.2f} s",
                flush=True,
            )
    print()
    print(
        tabulate(crow, headers=["concurrent requests", "I/O budget", "first ready s", "median ready s", "all ready s"])
    )


if __name__ == "__main__":
    sys.exit(main())
