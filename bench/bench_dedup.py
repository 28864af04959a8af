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

GPU wheels (torch, torchvision, triton, nvidia-*) are huge and shared by few profiles; they
are reported in their own rows (wheel bytes stand in for both compressed forms: they are
deflate archives of mostly incompressible binaries), and the headline ratio is given with
and without them.

    python bench/bench_dedup.py --wheels /tmp/perf-wheels [--gpu-wheels DIR] [--download]
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import json
import re
import subprocess
import sys
import tarfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import yaml
import zstandard
from tabulate import tabulate

ROOT = Path(__file__).resolve().parents[1]
SWESMITH = ROOT / "config" / "catalog" / "swesmith.yaml"
GPU = re.compile(r"^(torch|torchvision|torchaudio|triton|nvidia-[a-z0-9-]+)$")
#: Files at most this big are stored inside the file list instead of as objects.
INLINE_MAX = 256
#: Wheels bigger than this (torch, nvidia-*) are measured without building their tar in memory.
LIGHT_ABOVE = 200_000_000


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
    base = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--python-version", "3.10",
            "--implementation", "cp", "--platform", "manylinux_2_28_x86_64", "--platform", "manylinux2014_x86_64",
            "--platform", "linux_x86_64", "-d", str(dest), "-q"]
    for n, v in sorted(pins_):
        subprocess.run(base + [f"{n}=={v}"], capture_output=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--wheels", type=Path, required=True, help="directory of downloaded wheels")
    ap.add_argument("--gpu-wheels", type=Path, help="directory of the GPU wheels (optional)")
    ap.add_argument("--download", action="store_true", help="pip download missing pins into --wheels first")
    ap.add_argument("--cache", type=Path, default=None, help="per-wheel stats cache (JSON)")
    ap.add_argument("--image-ratio", type=float, default=1.14,
                    help="squashfs image bytes / tar.zst bytes of the same tree (bench_runtime measures it)")
    ap.add_argument("--gz-sample", type=int, default=8, help="exact gzip-9 on one wheel in N (default: %(default)s)")
    ap.add_argument("--json", type=Path, help="write the results here too")
    a = ap.parse_args()
    specs = yaml.safe_load(SWESMITH.read_text())["specs"]
    wanted = {p for s in specs for p in pins(s)}
    if a.download:
        download(wanted, a.wheels)
    idx = wheel_index([a.wheels] + ([a.gpu_wheels] if a.gpu_wheels else []))
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
            for path, (size, sha, zsize) in files.items():
                if size <= INLINE_MAX:
                    inline += size  # stored in the list (raw upper bound; compressed with it)
                else:
                    objects[sha] = (size, zsize)
        obj_bytes = sum(z for _, z in objects.values())
        uniq_raw = sum(r for r, _ in objects.values())
        cas = obj_bytes + lists + inline
        rows[group] = {"k": k, "envs": n_envs, "tar_gz9": gz, "tar_zst3": zst, "cas_objects": obj_bytes, "cas_lists": lists + inline,
                       "cas_total": cas, "objects": len(objects), "cas_plus_images": cas + a.image_ratio * zst,
                       "node_unpacked": raw_layers, "node_cas": uniq_raw + inline}
    tbl = []
    for group, label in (("cpu", "without GPU wheels"), ("gpu", "GPU wheels only (torch, triton, nvidia-*)"),
                         ("all", "all pinned wheels")):
        r = rows[group]
        base = r["tar_gz9"] or 1
        tbl.append([f"{label}: tar.gz-9 per env (published method, baseline)", r["envs"], f"{r['tar_gz9'] / 1e9:.2f}", "1.00"])
        tbl.append([f"{label}: tar.zst-3 per env", r["envs"], f"{r['tar_zst3'] / 1e9:.2f}", f"{r['tar_zst3'] / base:.2f}"])
        tbl.append([f"{label}: content-addressed objects ({r['objects']}) + file lists", r["envs"],
                    f"{r['cas_total'] / 1e9:.2f}", f"{r['cas_total'] / base:.2f}"])
        tbl.append([f"{label}: objects + file lists + squashfs image per env", r["envs"],
                    f"{r['cas_plus_images'] / 1e9:.2f}", f"{r['cas_plus_images'] / base:.2f}"])
        tbl.append([f"{label}: node cache, unpacked layers (baseline)", r["envs"], f"{r['node_unpacked'] / 1e9:.2f}", "1.00"])
        tbl.append([f"{label}: node cache, hard-linked layers over objects", r["envs"], f"{r['node_cas'] / 1e9:.2f}",
                    f"{r['node_cas'] / max(r['node_unpacked'], 1):.2f}"])
    print(f"{len(wanted)} distinct pins over {len(specs)} profiles; wheels found for {len(stats)}; "
          f"missing (sdist-only or no cp310 manylinux wheel): {len(missing)}")
    print(tabulate(tbl, headers=["layout", "envs", "GB", "ratio vs baseline"]))
    if a.json:
        a.json.write_text(json.dumps({"rows": rows, "missing": [f"{n}=={v}" for n, v in missing]}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
