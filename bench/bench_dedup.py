#!/usr/bin/env python3
"""Store and node-cache bytes of the 133 SWE-smith profiles' dependency sets, per layout.

Each environment is modelled by the files of its pinned wheels (config/catalog/swesmith.yaml,
`requirements`), unpacked as an installer would lay them out in site-packages. Wheels come
from a directory filled by `pip download --no-deps --only-binary=:all:` (see --download).
Per environment and layout the bytes the store needs to serve it:

* tar.gz-9 per environment (the published method; the baseline): per wheel, the deflate
  bytes of its members (read from the wheel's zip directory) times k, summed over the
  environment's wheels; k = gzip-9 size of the wheel's tar stream / its deflate bytes,
  measured exactly on --gz-sample wheels (gzip-9 of all 1,400 wheels would take hours on
  2 cores; a tar.gz of a whole venv is the concatenation of these streams to within gzip's
  32 KiB window);
* tar.zst-3 per environment (this project's archive): the same with zstd level 3;
* content-addressed objects (minisandbox's dedup layout): one zstd-3 object per distinct
  file content (sha256), stored once for all environments, plus one zstd-compressed file
  list per environment (path, mode, size, digest);
* the same plus one squashfs image per environment (fast mount path), estimated as
  tar.zst x the image/tar.zst ratio measured on a real tree (--image-ratio).

Node-cache bytes for a node that has every environment: unpacked layers (raw bytes per
environment) vs hard-linked layers over one object per distinct content.

With --images (the default store layout: chunked images, docs/pipeline.md), every
environment is also materialised as an installed tree: each wheel unpacked once as an
installer lays it out (site-packages, `.data/scripts` -> bin, ...) with a .pyc compiled for
every module by a Python 3.10 (`--python`, found in pyenv if not given; without one the pycs
are left out and the table says so) deterministically: PYTHONHASHSEED=0, one fresh fork of a
minimal parent per file, co_filename under the venv path (the same source then gives the
same pyc bytes in every environment, as the builds must; compileall's pool workers and hash
randomisation do not: docs/pipeline.md, "Measured: store and node-cache bytes of chunked
images"), times at EPOCH. --also-avg adds rows cut with other FastCDC averages. Per environment the tree is
hard-linked from those wheel trees, normalised by `minisandbox.pipeline.pack.normalize_tree`,
imaged by `pack_image` and cut by `minisandbox.pipeline.chunking.cut`: the package's own
functions, nothing re-implemented. Rows: unique chunk bytes + chunk lists (the store's
default representation), the whole image per environment, and the node cache (the node
keeps one assembled image per environment). With --images the archives are measured on
the same installed trees (pycs included): tar.zst-3 exactly per wheel tree, tar.gz-9 as
k x tar.zst-3 with k measured exactly (gzip -9 of the tar stream) on one wheel in
--gz-sample.

The images are packed at `--image-level` (default: pack_image's IMAGE_LEVEL). The headline
row is the chunked images alone (the store's default representation); a tar.zst archive per
layer is an optional extra (config `archive: true`) and its row is not counted.

GPU wheels (torch, torchvision, triton, nvidia-*) are huge and shared by few profiles; they
are reported in their own rows (without --images wheel bytes stand in for both compressed
forms: they are deflate archives of mostly incompressible binaries; with --images their
trees are imaged too, tar.gz-9 exact on sampled GPU wheels up to GPU_EXACT_MAX and k x
zstd-3 for the others), and the headline ratio is given with and without them.

--levels IMAGE... (no wheels needed) unpacks existing squashfs images (e.g. a store's
artifacts/env/*.squashfs), packs each again with pack_image at every --level-list zstd level
and reports image bytes, mksquashfs CPU seconds, the cold read of the loop-mounted image
(root: page cache dropped, `tar -cf - -C mnt . | cat > /dev/null`) and the unique FastCDC
chunk bytes over all the images vs gzip -9 of the trees' tar streams.

    .venv/bin/python bench/bench_dedup.py --wheels /tmp/perf-wheels [--gpu-wheels DIR] [--download]
    .venv/bin/python bench/bench_dedup.py --wheels /tmp/perf-wheels --gpu-wheels DIR --images --work /var/tmp/dd
    .venv/bin/python bench/bench_dedup.py --levels STORE/artifacts/env/*.squashfs [--level-list 3,15]
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tarfile
import time
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import yaml
import zstandard
from tabulate import tabulate

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from minisandbox.paths import VENV_PATH  # noqa: E402
from minisandbox.pipeline.pack import EPOCH, IMAGE_LEVEL, normalize_tree, pack_image  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SWESMITH = ROOT / "config" / "catalog" / "swesmith.yaml"
GPU = re.compile(r"^(torch|torchvision|torchaudio|triton|nvidia-[a-z0-9-]+)$")
#: Files at most this big are stored inside the file list instead of as objects.
INLINE_MAX = 256
#: Wheels bigger than this (torch, nvidia-*) are measured without building their tar in memory.
LIGHT_ABOVE = 200_000_000
#: --images: sampled GPU wheels at most this big (.whl bytes) get an exact gzip-9 of their tree.
GPU_EXACT_MAX = 400_000_000


def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pins(spec: dict) -> list[tuple[str, str]]:
    out = []
    for r in spec.get("requirements") or []:
        if "==" in r:
            n, v = r.split("==", 1)
            out.append((norm(n), v.strip()))
    return out


def wheel_index(dirs: list[Path]) -> dict[tuple[str, str], Path]:
    idx: dict[tuple[str, str], Path] = {}
    for d in dirs:
        for whl in sorted(d.glob("*.whl")):
            parts = whl.name.split("-")
            idx.setdefault((norm(parts[0]), parts[1]), whl)
    return idx


@dataclass
class WheelStats:
    gz9: int = 0  # exact gzip-9 of the tar stream, only for sampled wheels (else 0)
    deflate: int = 0  # sum of the zip members' compressed sizes
    zst3: int = 0
    raw: int = 0
    files: list[tuple[str, int, str, int]] = field(default_factory=list)  # path, size, sha256, zst size


@dataclass
class ChunkTally:
    """Chunked images added up, as the store holds them: each unique chunk once, plus one
    chunk list per image. One per table row (`images_mode`) or per level (`levels_mode`)."""

    images: int = 0  # bytes of the whole images
    lists: int = 0  # bytes of their chunk lists
    counts: list[int] = field(default_factory=list)  # chunks per image
    chunks: dict[str, int] = field(default_factory=dict)  # unique chunk sha -> bytes

    def add(self, image: int, listing: int, chunks) -> None:  # noqa: ANN001 - (sha, bytes) pairs
        chunks = [tuple(c) for c in chunks]
        self.images += image
        self.lists += listing
        self.counts.append(len(chunks))
        self.chunks.update(chunks)

    @property
    def unique_bytes(self) -> int:
        return sum(self.chunks.values())


def sampled(whl: Path, one_in: int) -> bool:
    return int(hashlib.sha256(whl.name.encode()).hexdigest()[:8], 16) % one_in == 0


def wheel_stats(whl: Path, cache: dict, exact_gz: bool) -> WheelStats:
    key = f"{whl.name}:{whl.stat().st_size}"
    d = cache.get(key)
    if d and "deflate" in d and (d["gz9"] or not exact_gz):
        return WheelStats(d["gz9"], d["deflate"], d["zst3"], d["raw"], [tuple(f) for f in d["files"]])
    st = WheelStats()
    cctx = zstandard.ZstdCompressor(level=3)
    if whl.stat().st_size > LIGHT_ABOVE:
        # Huge (GPU) wheels: stream and hash each member; the deflate size stands in for
        # every compressed form (their bulk is already-compressed machine code).
        with zipfile.ZipFile(whl) as zf:
            for info in zf.infolist():
                if info.is_dir():
                    continue
                h = hashlib.sha256()
                with zf.open(info) as fh:
                    while chunk := fh.read(1 << 20):
                        h.update(chunk)
                st.raw += info.file_size
                st.deflate += info.compress_size
                st.files.append((info.filename, info.file_size, h.hexdigest(), info.compress_size))
        st.zst3 = st.deflate
        cache[key] = {"gz9": 0, "deflate": st.deflate, "zst3": st.zst3, "raw": st.raw, "files": st.files}
        return st
    buf = io.BytesIO()
    with zipfile.ZipFile(whl) as zf, tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for info in sorted(zf.infolist(), key=lambda i: i.filename):
            if info.is_dir():
                continue
            data = zf.read(info)
            st.deflate += info.compress_size
            ti = tarfile.TarInfo(info.filename)
            ti.size = len(data)
            ti.mode = 0o755 if (info.external_attr >> 16) & 0o111 else 0o644
            tar.addfile(ti, io.BytesIO(data))
            st.raw += len(data)
            zsize = len(data) if len(data) <= INLINE_MAX else len(cctx.compress(data))
            st.files.append((info.filename, len(data), hashlib.sha256(data).hexdigest(), zsize))
    raw_tar = buf.getvalue()
    st.gz9 = len(gzip.compress(raw_tar, compresslevel=9, mtime=0)) if exact_gz else 0
    st.zst3 = len(cctx.compress(raw_tar))
    cache[key] = {"gz9": st.gz9, "deflate": st.deflate, "zst3": st.zst3, "raw": st.raw, "files": st.files}
    return st


def download(pins_: set[tuple[str, str]], dest: Path) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    base = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--python-version",
        "3.10",
        "--implementation",
        "cp",
        "--platform",
        "manylinux_2_28_x86_64",
        "--platform",
        "manylinux2014_x86_64",
        "--platform",
        "linux_x86_64",
        "-d",
        str(dest),
        "-q",
    ]
    for n, v in sorted(pins_):
        subprocess.run(base + [f"{n}=={v}"], capture_output=True)


# ---------------------------------------------------------------------------------------
# --images: installed trees, chunked images (the package's normalize_tree/pack_image/cut)
# ---------------------------------------------------------------------------------------

PY = "python3.10"
SITE = f"lib/{PY}/site-packages"
#: Compiles one file per line (src, cfile, dfile) in a fresh fork of this minimal parent:
#: marshal's output depends on what the compiling process holds alive (FLAG_REF follows
#: refcounts) and on the hash seed, so a long-lived compiler gives different pycs for one source.
_PYC_SERVER = r"""
import os, sys, py_compile
rd, wr = sys.stdin.buffer, sys.stdout.buffer
for line in iter(rd.readline, b""):
    pid = os.fork()
    if pid == 0:
        src, cfile, dfile = line.decode().rstrip("\n").split("\t")
        try:
            py_compile.compile(src, cfile=cfile, dfile=dfile, doraise=True)
        except BaseException:
            os._exit(1)
        os._exit(0)
    wr.write(b"0\n" if os.waitpid(pid, 0)[1] == 0 else b"1\n")
    wr.flush()
"""


def find_python310(given: str | None) -> str | None:
    """`given`, else the newest pyenv 3.10, else python3.10 on PATH; only one that runs as 3.10."""
    cands = (
        [given]
        if given
        else [
            *map(
                str,
                sorted(
                    Path.home().glob(".pyenv/versions/3.10.*/bin/python3.10"),
                    reverse=True,
                    key=lambda p: [int(x) for x in p.parts[-3].split(".") if x.isdigit()],
                ),
            ),
            shutil.which(PY),
        ]
    )
    for c in filter(None, cands):
        ok = subprocess.run([c, "-c", "import sys; assert sys.version_info[:2] == (3, 10)"], capture_output=True)
        if ok.returncode == 0:
            return c
    if given:
        raise SystemExit(f"--python {given}: not a working Python 3.10")
    return None


class PycCompiler:
    """One python3.10 fork server (PYTHONHASHSEED=0) for the whole run."""

    def __init__(self, python: str) -> None:
        self.proc = subprocess.Popen(
            [python, "-S", "-s", "-c", _PYC_SERVER],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env={"PYTHONHASHSEED": "0", "PATH": "/usr/bin:/bin"},
        )
        self.failed = 0

    def compile_tree(self, tree: Path) -> int:
        n = 0
        site = tree / SITE
        for root, dirs, names in os.walk(site):
            dirs.sort()
            for name in sorted(names):
                if not name.endswith(".py") or root.endswith("__pycache__"):
                    continue
                src = os.path.join(root, name)
                cache = os.path.join(root, "__pycache__")
                os.makedirs(cache, exist_ok=True)
                cfile = os.path.join(cache, f"{name[:-3]}.cpython-310.pyc")
                dfile = f"{VENV_PATH}/{os.path.relpath(src, tree)}"
                assert self.proc.stdin and self.proc.stdout
                self.proc.stdin.write(f"{src}\t{cfile}\t{dfile}\n".encode())
                self.proc.stdin.flush()
                if self.proc.stdout.readline() == b"0\n":
                    n += 1
                else:
                    self.failed += 1  # not Python 3.10 syntax: compileall skips it too
        return n

    def close(self) -> None:
        assert self.proc.stdin
        self.proc.stdin.close()
        self.proc.wait()


def wheel_target(member: str, dist: str) -> str | None:
    """Where an installer puts a wheel member, relative to the environment prefix."""
    parts = member.split("/")
    if member.startswith("/") or ".." in parts or not parts[-1]:
        return None
    if parts[0].endswith(".data") and len(parts) > 2:
        rest = "/".join(parts[2:])
        return {
            "purelib": f"{SITE}/{rest}",
            "platlib": f"{SITE}/{rest}",
            "scripts": f"bin/{rest}",
            "headers": f"include/site/{PY}/{dist}/{rest}",
            "data": rest,
        }.get(parts[1])
    return f"{SITE}/{member}"


def set_times(tree: Path) -> None:
    for root, dirs, names in os.walk(tree):
        for name in names + dirs:
            os.utime(os.path.join(root, name), (EPOCH, EPOCH), follow_symlinks=False)
    os.utime(tree, (EPOCH, EPOCH))


def install_wheel(whl: Path, dest: Path, compiler: PycCompiler | None) -> None:
    """Unpack `whl` as installed files under `dest` (a prefix), pycs compiled, times EPOCH."""
    tmp = dest.with_name(dest.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    dist = whl.name.split("-")[0]
    with zipfile.ZipFile(whl) as zf:
        for info in zf.infolist():
            rel = None if info.is_dir() else wheel_target(info.filename, dist)
            if rel is None:
                continue
            out = tmp / rel
            out.parent.mkdir(parents=True, exist_ok=True)
            with zf.open(info) as src, open(out, "wb") as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
            os.chmod(out, 0o755 if (info.external_attr >> 16) & 0o111 else 0o644)
    set_times(tmp)  # before compiling: the pyc headers record the sources' mtime (EPOCH)
    if compiler:
        compiler.compile_tree(tmp)
        set_times(tmp)
    os.replace(tmp, dest)


def tree_stats_exact(tree: Path, exact_gz: bool, light: bool = False) -> WheelStats:
    """Files (path, size, sha256, zstd-3 size) and the tar stream's zstd-3 (and gzip-9) bytes.
    `light` (GPU wheels): the tar stream's zstd-3 is taken as the sum of the files' (their
    bulk is machine code; a second pass over 10 GB would double the run)."""
    st = WheelStats()
    cctx = zstandard.ZstdCompressor(level=3)
    for root, dirs, names in os.walk(tree):
        dirs.sort()
        for name in sorted(names):
            path = os.path.join(root, name)
            h, zobj, size, zsize = hashlib.sha256(), cctx.compressobj(), 0, 0
            with open(path, "rb") as f:
                while block := f.read(1 << 24):
                    h.update(block)
                    size += len(block)
                    zsize += len(zobj.compress(block))
            zsize = size if size <= INLINE_MAX else zsize + len(zobj.flush())
            st.files.append((os.path.relpath(path, tree), size, h.hexdigest(), zsize))
            st.raw += size
    if light:
        st.zst3 = sum(f[3] for f in st.files)
        return st
    tar = subprocess.Popen(
        [
            "tar",
            "--sort=name",
            "--format=gnu",
            f"--mtime=@{EPOCH}",
            "--owner=0",
            "--group=0",
            "--numeric-owner",
            "-C",
            str(tree),
            "-cf",
            "-",
            ".",
        ],
        stdout=subprocess.PIPE,
    )
    zobj = cctx.compressobj()
    gz = zlib.compressobj(9, zlib.DEFLATED, 31) if exact_gz else None
    assert tar.stdout
    while block := tar.stdout.read(1 << 20):
        st.zst3 += len(zobj.compress(block))
        if gz:
            st.gz9 += len(gz.compress(block))
    st.zst3 += len(zobj.flush())
    if gz:
        st.gz9 += len(gz.flush())
    if tar.wait() != 0:
        raise SystemExit(f"tar of {tree} failed")
    return st


def link_tree(src: Path, dst: Path) -> None:
    """Hard-link the files of `src` into `dst` (a later wheel's file replaces an earlier one)."""
    for root, _dirs, names in os.walk(src):
        rel = os.path.relpath(root, src)
        base = dst if rel == "." else dst / rel
        base.mkdir(parents=True, exist_ok=True)
        for name in names:
            target = base / name
            if target.exists():
                target.unlink()
            os.link(os.path.join(root, name), target)


def env_image(wheel_dirs: list[Path], work: Path, also_avg: list[int], level: int) -> dict:
    """Normalise, image and chunk one environment's installed tree with the package's functions
    (and, for comparison, with other average chunk sizes: min avg/4, max avg*4)."""
    from minisandbox.pipeline.chunking import cut

    tree, img = work / "tree", work / "image.squashfs"
    shutil.rmtree(tree, ignore_errors=True)
    tree.mkdir(parents=True)
    for d in wheel_dirs:
        link_tree(d, tree)
    normalize_tree(tree)
    pack_image(tree, img, level=level)
    ch = cut(img)
    out = {"image": ch.size, "list": len(ch.document()), "chunks": [list(c) for c in ch.chunks], "alt": {}}
    for avg in also_avg:
        alt = cut(img, min_size=avg // 4, avg_size=avg, max_size=avg * 4)
        out["alt"][str(avg)] = {"list": len(alt.document()), "chunks": [list(c) for c in alt.chunks]}
    img.unlink()
    shutil.rmtree(tree)
    return out


def images_mode(a, specs, idx) -> int:
    from minisandbox.pipeline.chunking import CHUNK_AVG, CHUNK_MAX, CHUNK_MIN

    work: Path = a.work
    work.mkdir(parents=True, exist_ok=True)
    level = a.image_level
    python = find_python310(a.python)
    compiler = PycCompiler(python) if python else None
    print(f"images: squashfs zstd level {level} (pack_image's IMAGE_LEVEL is {IMAGE_LEVEL})")
    print(f"pycs: {'compiled by ' + python + ' (deterministic)' if python else 'LEFT OUT (no python3.10 found)'}")
    trees = work / "wheels"
    trees.mkdir(exist_ok=True)
    cache_path = work / "wheel-trees.json"
    cache = json.loads(cache_path.read_text()) if cache_path.exists() else {}
    if a.profiles:
        specs = specs[: a.profiles]
    wanted = sorted({p for s in specs for p in pins(s)})
    stats: dict[tuple[str, str], WheelStats] = {}
    dirs: dict[tuple[str, str], Path] = {}
    installed = 0
    for i, p in enumerate(wanted):
        if p not in idx:
            continue
        whl = idx[p]
        d = trees / whl.name
        key = f"{whl.name}:{whl.stat().st_size}:{'pyc' if compiler else 'nopyc'}"
        if not d.is_dir():
            install_wheel(whl, d, compiler)
            installed += 1
            cache.pop(key, None)
        gpu = bool(GPU.match(p[0]))
        # GPU wheels: exact gzip-9 only on sampled wheels small enough to stream twice in
        # reasonable time; the others are counted per file (see tree_stats_exact's `light`).
        exact = sampled(whl, a.gz_sample) and (not gpu or whl.stat().st_size <= GPU_EXACT_MAX)
        if key not in cache:
            w = tree_stats_exact(d, exact, light=gpu and not exact)
            cache[key] = {"gz9": w.gz9, "zst3": w.zst3, "raw": w.raw, "files": w.files}
        c = cache[key]
        stats[p] = WheelStats(c["gz9"], 0, c["zst3"], c["raw"], [tuple(f) for f in c["files"]])
        dirs[p] = d
        if i % 50 == 0:
            cache_path.write_text(json.dumps(cache))
            print(f"  wheel trees {i}/{len(wanted)}", flush=True)
    cache_path.write_text(json.dumps(cache))
    if compiler:
        compiler.close()
        print(
            f"  pycs: {compiler.failed} modules of the {installed} wheels installed in this run did not compile "
            "under 3.10 (left without pyc, as compileall would)"
        )
    exact = [w for p, w in stats.items() if w.gz9 and not GPU.match(p[0])]
    if not exact:
        raise SystemExit("no wheel was sampled for the exact gzip-9 (k): use a smaller --gz-sample")
    k = sum(w.gz9 for w in exact) / sum(w.zst3 for w in exact)
    print(f"tar.gz-9 / tar.zst-3 of the installed wheel trees, exact on {len(exact)} wheels: k = {k:.3f}")
    exact_gpu = [w for p, w in stats.items() if w.gz9 and GPU.match(p[0])]
    k_gpu = sum(w.gz9 for w in exact_gpu) / sum(w.zst3 for w in exact_gpu) if exact_gpu else 1.0
    if any(GPU.match(p[0]) for p in stats):
        print(
            f"GPU wheel trees: k = {k_gpu:.3f} "
            + (f"exact on {len(exact_gpu)} wheels" if exact_gpu else "(none sampled: tar.gz-9 taken = zstd-3)")
        )

    def gz9(p: tuple[str, str], w: WheelStats) -> float:
        if not GPU.match(p[0]):
            return w.zst3 * k
        return w.gz9 or w.zst3 * k_gpu

    env_path = work / "env-images.json"
    done = json.loads(env_path.read_text()) if env_path.exists() else {}
    cctx = zstandard.ZstdCompressor(level=3)
    rows = {}
    gpu_names = {s["name"] for s in specs if any(GPU.match(p[0]) for p in pins(s) if p in stats)}
    groups = [
        ("cpu", "without GPU wheels", False, False),
        ("all", "all pinned wheels (GPU included)", True, False),
        ("gpu", f"the {len(gpu_names)} GPU profiles with their GPU wheels", True, True),
        ("gpu-cpu", f"the {len(gpu_names)} GPU profiles without GPU wheels", False, True),
    ]
    if not gpu_names:
        groups = groups[:1]  # no GPU wheels given (--gpu-wheels): the other rows would repeat these
    for group, _, with_gpu, only_gpu_profiles in groups:
        r = dict(
            gz9=0.0,
            zst3=0,
            raw=0,
            lists=0,
            inline=0,
            envs=0,
        )
        objects: dict[str, tuple[int, int]] = {}
        default = ChunkTally()
        alts = {str(v): ChunkTally() for v in a.also_avg}
        for s in specs:
            if only_gpu_profiles and s["name"] not in gpu_names:
                continue
            ps = [p for p in pins(s) if p in stats and (with_gpu or not GPU.match(p[0]))]
            if not ps:
                continue
            r["envs"] += 1
            files = {}
            for p in ps:
                w = stats[p]
                r["gz9"] += gz9(p, w)
                r["zst3"] += w.zst3
                r["raw"] += w.raw
                for path, size, sha, zsize in w.files:
                    files[path] = (size, sha, zsize)
            listing = "".join(f"{path}\t{size}\t{sha}\n" for path, (size, sha, _) in sorted(files.items()))
            r["lists"] += len(cctx.compress(listing.encode()))
            for size, sha, zsize in files.values():
                if size <= INLINE_MAX:
                    r["inline"] += size
                else:
                    objects[sha] = (size, zsize)
            ekey = (
                hashlib.sha256("\n".join(dirs[p].name for p in ps).encode()).hexdigest()[:16]
                + (":pyc" if python else ":nopyc")
                + f":zstd{level}"
            )
            if ekey not in done or any(str(v) not in done[ekey].get("alt", {}) for v in a.also_avg):
                t0 = time.monotonic()
                done[ekey] = env_image([dirs[p] for p in ps], work, a.also_avg, level)
                env_path.write_text(json.dumps(done))
                print(
                    f"  {group} {s['name']}: image {done[ekey]['image'] / 1e6:.1f} MB, "
                    f"{len(done[ekey]['chunks'])} chunks, {time.monotonic() - t0:.1f} s",
                    flush=True,
                )
            e = done[ekey]
            default.add(e["image"], e["list"], e["chunks"])
            for v, alt in alts.items():
                alt.add(e["image"], e["alt"][v]["list"], e["alt"][v]["chunks"])
        r["objects"] = len(objects)
        r["cas"] = sum(z for _, z in objects.values()) + r["lists"] + r["inline"]
        r["node_cas"] = sum(raw for raw, _ in objects.values()) + r["inline"]
        r.update(
            images=default.images,
            chunk_lists=default.lists,
            counts=default.counts,
            chunk_bytes=default.unique_bytes,
            nchunks=len(default.chunks),
            alt={
                v: {"list": alt.lists, "counts": alt.counts, "n": len(alt.chunks), "bytes": alt.unique_bytes}
                for v, alt in alts.items()
            },
        )
        rows[group] = r
    tbl = []
    for group, label, _, _ in groups:
        r = rows[group]
        base = r["gz9"] or 1
        chunked = r["chunk_bytes"] + r["chunk_lists"]

        def row(text, value, baseline=base):
            tbl.append([f"{label}: {text}", r["envs"], f"{value / 1e9:.2f}", f"{value / baseline:.3f}"])

        row("tar.gz-9 per env (published method, baseline)", r["gz9"])
        row("tar.zst-3 per env", r["zst3"])
        row(f"per-file zstd objects ({r['objects']}) + file lists (not built, for comparison)", r["cas"])
        row(f"whole squashfs image per env (zstd {level})", r["images"])
        row(f"**chunked images (default store representation)**: {r['nchunks']} unique chunks + chunk lists", chunked)
        for v, alt in r["alt"].items():
            row(
                f"chunked images, FastCDC avg {int(v) // 1024} KiB (not the default): {alt['n']} chunks "
                f"+ lists; per env median {statistics.median(alt['counts']):.0f}, max {max(alt['counts'])}",
                alt["bytes"] + alt["list"],
            )
        row(
            "optional extra, not counted: chunked images + a tar.zst archive per env (config `archive: true`)",
            chunked + r["zst3"],
        )
        row("node cache: unpacked layers (baseline)", r["raw"], r["raw"] or 1)
        row("node cache: assembled images, one per env", r["images"], r["raw"] or 1)
        row("node cache: hard-linked layers over per-file objects (not built)", r["node_cas"], r["raw"] or 1)
        c = r["counts"]
        print(
            f"{label}: chunks per env (GETs on an empty node): median {statistics.median(c):.0f}, "
            f"max {max(c)}, total {sum(c)}"
        )
    print(
        f"\nStore and node-cache bytes, squashfs images at zstd level {level}, FastCDC "
        f"{CHUNK_MIN // 1024}/{CHUNK_AVG // 1024}/{CHUNK_MAX // 1024} KiB"
    )
    print(tabulate(tbl, headers=["layout", "envs", "GB", "ratio vs baseline"]))
    if a.json:
        a.json.write_text(
            json.dumps(
                {
                    "k": k,
                    "k_gpu": k_gpu,
                    "exact_gpu": len(exact_gpu),
                    "python": python,
                    "image_level": level,
                    "gpu_profiles": sorted(gpu_names),
                    "labels": {g: lbl for g, lbl, _, _ in groups},
                    "rows": {g: {x: y for x, y in r.items()} for g, r in rows.items()},
                },
                indent=1,
            )
        )
    return 0


def _tar_gz9(tree: Path) -> int:
    """gzip -9 bytes of the tree's tar stream (the archive settings of tree_stats_exact)."""
    tar = subprocess.Popen(
        [
            "tar",
            "--sort=name",
            "--format=gnu",
            f"--mtime=@{EPOCH}",
            "--owner=0",
            "--group=0",
            "--numeric-owner",
            "-C",
            str(tree),
            "-cf",
            "-",
            ".",
        ],
        stdout=subprocess.PIPE,
    )
    gz, n = zlib.compressobj(9, zlib.DEFLATED, 31), 0
    assert tar.stdout
    while block := tar.stdout.read(1 << 20):
        n += len(gz.compress(block))
    if tar.wait() != 0:
        raise SystemExit(f"tar of {tree} failed")
    return n + len(gz.flush())


def _cold_read(image: Path, mnt: Path) -> float | None:
    """Seconds to read every file of the loop-mounted image with an empty page cache (root only)."""
    if os.geteuid() != 0:
        return None
    mnt.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "squashfs", "-o", "loop,ro", str(image), str(mnt)], check=True)
    try:
        subprocess.run(["sync"], check=True)
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
        t0 = time.monotonic()
        subprocess.run(
            ["bash", "-c", 'set -o pipefail; tar -cf - -C "$1" . | cat > /dev/null', "-", str(mnt)], check=True
        )
        return time.monotonic() - t0
    finally:
        subprocess.run(["umount", str(mnt)], check=True)


def levels_mode(a) -> int:
    """Existing squashfs images (e.g. a store's artifacts/env/*.squashfs) unpacked and packed again
    by pack_image at each --level-list level: image bytes, mksquashfs CPU seconds, cold read of the
    mounted image, and the unique FastCDC chunk bytes over all the images (the store's bytes)."""
    from minisandbox.pipeline.chunking import cut

    images = sorted(a.levels, key=lambda p: p.stat().st_size, reverse=True)
    work = a.work / "levels"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    per: dict[int, dict] = {lv: {"image": [], "cpu": [], "read": []} for lv in a.level_list}
    tally = {lv: ChunkTally() for lv in a.level_list}
    raw_total = gz_total = 0
    for img in images:
        tree = work / "tree"
        subprocess.run(["unsquashfs", "-q", "-n", "-d", str(tree), str(img)], check=True, stdout=subprocess.DEVNULL)
        raw = sum(os.lstat(os.path.join(r, n)).st_size for r, _, ns in os.walk(tree) for n in ns)
        gz = _tar_gz9(tree)
        raw_total, gz_total = raw_total + raw, gz_total + gz
        line = [f"{img.name}: raw {raw / 1e6:.1f} MB, tar.gz-9 {gz / 1e6:.1f} MB"]
        for lv in a.level_list:
            out = work / f"L{lv}.squashfs"
            r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            pack_image(tree, out, level=lv)
            r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
            read = _cold_read(out, work / "mnt")
            ch = cut(out)
            d = per[lv]
            d["image"].append(ch.size)
            d["cpu"].append(cpu)
            d["read"].append(read)
            tally[lv].add(ch.size, len(ch.document()), ch.chunks)
            line.append(f"L{lv} {ch.size / 1e6:.1f} MB {cpu:.1f} CPU s read {read or 0:.2f} s")
            out.unlink()
        shutil.rmtree(tree)
        print("  " + "; ".join(line), flush=True)
    base = per[a.level_list[0]]
    tbl = []
    for lv, d in per.items():
        rel = [x / y for x, y in zip(d["image"], base["image"])]
        reads = [x for x in d["read"] if x is not None]
        t = tally[lv]
        uniq = t.unique_bytes + t.lists
        tbl.append(
            [
                lv,
                f"{sum(d['image']) / 1e6:.1f}",
                f"{sum(d['image']) / sum(base['image']):.3f}",
                f"{statistics.median(rel):.3f}",
                f"{sum(d['cpu']):.1f}",
                f"{statistics.median(d['cpu']):.2f}",
                f"{sum(reads):.2f}" if reads else "n/a",
                f"{statistics.median(reads):.3f}" if reads else "n/a",
                f"{uniq / 1e6:.1f}",
                f"{uniq / gz_total:.3f}",
                f"{statistics.median(t.counts):.0f} / {max(t.counts)}",
            ]
        )
    print(
        f"\n{len(images)} images, {raw_total / 1e6:.1f} MB raw, tar.gz-9 of the trees {gz_total / 1e6:.1f} MB; "
        f"pack_image at each level; "
        f"ratios vs level {a.level_list[0]} and vs tar.gz-9"
    )
    print(
        tabulate(
            tbl,
            headers=[
                "level",
                "images MB",
                "vs first",
                "median per image",
                "CPU s total",
                "CPU s median",
                "cold read s total",
                "cold read s median",
                "unique chunks+lists MB",
                "vs tar.gz-9",
                "chunks/env median / max",
            ],
        )
    )
    if a.json:
        a.json.write_text(
            json.dumps(
                {
                    "images": [str(p) for p in images],
                    "raw": raw_total,
                    "gz9": gz_total,
                    "levels": {
                        lv: {
                            "image": d["image"],
                            "cpu": d["cpu"],
                            "read": d["read"],
                            "counts": tally[lv].counts,
                            "lists": tally[lv].lists,
                            "unique_chunk_bytes": tally[lv].unique_bytes,
                        }
                        for lv, d in per.items()
                    },
                },
                indent=1,
            )
        )
    shutil.rmtree(work)
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--wheels", type=Path, help="directory of downloaded wheels (required but with --levels)")
    ap.add_argument("--gpu-wheels", type=Path, help="directory of the GPU wheels (optional)")
    ap.add_argument("--download", action="store_true", help="pip download missing pins into --wheels first")
    ap.add_argument("--cache", type=Path, default=None, help="per-wheel stats cache (JSON)")
    ap.add_argument(
        "--image-ratio",
        type=float,
        default=1.14,
        help="squashfs image bytes / tar.zst bytes of the same tree (bench_runtime measures it)",
    )
    ap.add_argument("--gz-sample", type=int, default=8, help="exact gzip-9 on one wheel in N (default: %(default)s)")
    ap.add_argument("--json", type=Path, help="write the results here too")
    ap.add_argument(
        "--images",
        action="store_true",
        help="also installed trees per env -> squashfs (pack_image) -> chunks (the default layout)",
    )
    ap.add_argument(
        "--work",
        type=Path,
        default=Path("/var/tmp/bench-dedup"),
        help="scratch for --images: installed wheel trees, one env tree at a time (default: %(default)s)",
    )
    ap.add_argument(
        "--also-avg",
        type=lambda v: [int(x) * 1024 for x in v.split(",")],
        default=[],
        help="--images: also cut with these FastCDC average sizes in KiB, e.g. 16,32 (comparison rows)",
    )
    ap.add_argument("--profiles", type=int, default=0, help="--images on the first N profiles only (a quick check)")
    ap.add_argument("--python", help="Python 3.10 that compiles the pycs for --images (default: found on PATH/pyenv)")
    ap.add_argument(
        "--image-level",
        type=int,
        default=IMAGE_LEVEL,
        help="--images: zstd level of the squashfs images (default: pack_image's, %(default)s)",
    )
    ap.add_argument(
        "--levels",
        type=Path,
        nargs="+",
        metavar="IMAGE",
        help="instead: repack these squashfs images at each --level-list level (unsquashfs, pack_image), "
        "cold-read each mounted (root) and cut it into chunks; needs no wheels",
    )
    ap.add_argument(
        "--level-list",
        type=lambda v: [int(x) for x in v.split(",")],
        default=[3, 9, 12, 15, 19],
        help="--levels: zstd levels, the first is the reference (default: 3,9,12,15,19)",
    )
    a = ap.parse_args()
    if a.levels:
        return levels_mode(a)
    if not a.wheels:
        ap.error("--wheels is required (except with --levels)")
    specs = yaml.safe_load(SWESMITH.read_text())["specs"]
    wanted = {p for s in specs for p in pins(s)}
    if a.download:
        download(wanted, a.wheels)
    idx = wheel_index([a.wheels] + ([a.gpu_wheels] if a.gpu_wheels else []))
    if a.images:
        return images_mode(a, specs, idx)
    cache_path = a.cache or (a.wheels / ".bench_dedup_cache.json")
    cache = json.loads(cache_path.read_text()) if cache_path.exists() else {}
    stats: dict[tuple[str, str], WheelStats] = {}
    for i, p in enumerate(sorted(wanted)):
        if p in idx:
            stats[p] = wheel_stats(idx[p], cache, exact_gz=sampled(idx[p], a.gz_sample) and not GPU.match(p[0]))
        if i % 100 == 0:
            cache_path.write_text(json.dumps(cache))
    cache_path.write_text(json.dumps(cache))
    missing = sorted(p for p in wanted if p not in stats)

    exact = [w for w in stats.values() if w.gz9]
    k = sum(w.gz9 for w in exact) / max(1, sum(w.deflate for w in exact))
    print(f"tar.gz-9 / zip deflate bytes, measured on {len(exact)} wheels: k = {k:.3f}")
    cctx = zstandard.ZstdCompressor(level=3)
    rows = {}
    for group in ("cpu", "gpu", "all"):
        gz = zst = raw_layers = lists = 0
        objects: dict[str, tuple[int, int]] = {}  # sha -> (raw, zst)
        inline = 0
        n_envs = 0
        for s in specs:
            files = {}
            for p in pins(s):
                if p not in stats or (group == "cpu" and GPU.match(p[0])) or (group == "gpu" and not GPU.match(p[0])):
                    continue
                w = stats[p]
                gz += w.deflate if GPU.match(p[0]) else w.deflate * k
                zst += w.zst3
                raw_layers += w.raw
                for path, size, sha, zsize in w.files:
                    files[path] = (size, sha, zsize)
            if not files:
                continue
            n_envs += 1
            listing = "".join(f"{path}\t{size}\t{sha}\n" for path, (size, sha, _) in sorted(files.items()))
            lists += len(cctx.compress(listing.encode()))
            for size, sha, zsize in files.values():
                if size <= INLINE_MAX:
                    inline += size  # stored in the list (raw upper bound; compressed with it)
                else:
                    objects[sha] = (size, zsize)
        obj_bytes = sum(z for _, z in objects.values())
        uniq_raw = sum(r for r, _ in objects.values())
        cas = obj_bytes + lists + inline
        rows[group] = {
            "k": k,
            "envs": n_envs,
            "tar_gz9": gz,
            "tar_zst3": zst,
            "cas_objects": obj_bytes,
            "cas_lists": lists + inline,
            "cas_total": cas,
            "objects": len(objects),
            "cas_plus_images": cas + a.image_ratio * zst,
            "node_unpacked": raw_layers,
            "node_cas": uniq_raw + inline,
        }
    tbl = []
    for group, label in (
        ("cpu", "without GPU wheels"),
        ("gpu", "GPU wheels only (torch, triton, nvidia-*)"),
        ("all", "all pinned wheels"),
    ):
        r = rows[group]
        base = r["tar_gz9"] or 1
        tbl.append(
            [f"{label}: tar.gz-9 per env (published method, baseline)", r["envs"], f"{r['tar_gz9'] / 1e9:.2f}", "1.00"]
        )
        tbl.append(
            [f"{label}: tar.zst-3 per env", r["envs"], f"{r['tar_zst3'] / 1e9:.2f}", f"{r['tar_zst3'] / base:.2f}"]
        )
        tbl.append(
            [
                f"{label}: content-addressed objects ({r['objects']}) + file lists",
                r["envs"],
                f"{r['cas_total'] / 1e9:.2f}",
                f"{r['cas_total'] / base:.2f}",
            ]
        )
        tbl.append(
            [
                f"{label}: objects + file lists + squashfs image per env",
                r["envs"],
                f"{r['cas_plus_images'] / 1e9:.2f}",
                f"{r['cas_plus_images'] / base:.2f}",
            ]
        )
        tbl.append(
            [f"{label}: node cache, unpacked layers (baseline)", r["envs"], f"{r['node_unpacked'] / 1e9:.2f}", "1.00"]
        )
        tbl.append(
            [
                f"{label}: node cache, hard-linked layers over objects",
                r["envs"],
                f"{r['node_cas'] / 1e9:.2f}",
                f"{r['node_cas'] / max(r['node_unpacked'], 1):.2f}",
            ]
        )
    print(
        f"{len(wanted)} distinct pins over {len(specs)} profiles; wheels found for {len(stats)}; "
        f"missing (sdist-only or no cp310 manylinux wheel): {len(missing)}"
    )
    print(tabulate(tbl, headers=["layout", "envs", "GB", "ratio vs baseline"]))
    if a.json:
        a.json.write_text(json.dumps({"rows": rows, "missing": [f"{n}=={v}" for n, v in missing]}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
