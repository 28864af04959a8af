"""The test modules' assertion-rewritten pycs, kept from the build for the eval script.

pytest rewrites the asserts of every test module and conftest it imports (parse, rewrite,
compile: about 60% of a short validation run's CPU) and caches the result beside the
source as `__pycache__/<name>.<tag>-pytest-<version>.pyc`. Every evaluation starts from a
fresh sandbox, so without help it does that again each time. The build's collection
warm-up (`EnvSpec.warmup_commands`, trusted code run before any agent) leaves those pycs
in its /testbed; `harvest` keeps the ones that are valid for their source, with the
sha256 of each source, inside the venv (`paths.TEST_PYCS_DIR`), where the env's layer
carries them. The eval script (`minisandbox.grading.evalscript`, after the candidate
patch, the anti-tamper revert, the reference files and the test patch) copies a pyc in
only for a file whose bytes have that very digest, when the pytest configuration files
and the test command are those the build saw. docs/grading.md "Cached rewritten test
modules" has the threat analysis.

Layout of the cache directory:
* `key`: four lines: sha256 of the test command; the configuration digest (what
  `sha256sum` prints for the sorted `sha256sum` lines of every `paths.PYTEST_CONFIG_NAMES`
  file of the tree, as the eval script computes it with `find`); the mtime (seconds)
  the eval script gives a matching source; pytest's pyc name tail;
* `manifest`: `<sha256>  ./<path>` lines (`sha256sum -c` input), one per source;
* `tree/<dir>/__pycache__/<name><tail>`: the pycs. A timestamp-based pyc's header gets
  that mtime (and its source that mtime in the sandbox); a hash-based one (pytest 9) is
  kept as it is.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import shutil
import stat
import struct
from collections import Counter
from pathlib import Path

from minisandbox.paths import PYTEST_CONFIG_NAMES

#: Source mtime the eval script sets on a matching source (a timestamp-based pyc's header
#: holds it): the images' own file time (`pipeline.pack.EPOCH`).
MTIME = 1577836800
#: Paths the eval script can handle with plain `sha256sum -c` and shell words.
_SAFE = re.compile(r"[A-Za-z0-9_+-][A-Za-z0-9._+-]*(?:/[A-Za-z0-9_+-][A-Za-z0-9._+-]*)*\Z")
_TIMESTAMP, _HASHED = b"\x00\x00\x00\x00", b"\x03\x00\x00\x00"


def config_digest(tree: Path) -> str | None:
    """What the eval script's `find . -path ./.git -prune -o \\( -name ... \\) -type f -exec
    sha256sum -- {} + | LC_ALL=C sort | sha256sum` prints for `tree` (None when a name
    would be escaped by sha256sum: no cache then)."""
    lines = []
    for root, dirs, names in os.walk(tree):
        if root == str(tree):
            dirs[:] = [d for d in dirs if d != ".git"]
        for name in names:
            if name not in PYTEST_CONFIG_NAMES:
                continue
            path = os.path.join(root, name)
            if not stat.S_ISREG(os.lstat(path).st_mode):
                continue
            rel = "./" + os.path.relpath(path, tree)
            if "\\" in rel or "\n" in rel:
                return None
            with open(path, "rb") as f:
                lines.append(f"{hashlib.sha256(f.read()).hexdigest()}  {rel}\n".encode())
    return hashlib.sha256(b"".join(sorted(lines))).hexdigest() + "  -"


def _valid_pyc(data: bytes, source: bytes, sst: os.stat_result) -> bytes | None:
    """`data` as the cache keeps it when it is a pytest pyc valid for `source` (what
    pytest's `_read_pyc` checks), else None."""
    if len(data) < 17:
        return None
    flags = data[4:8]
    if flags == _TIMESTAMP:
        if struct.unpack("<II", data[8:16]) != (int(sst.st_mtime) & 0xFFFFFFFF, sst.st_size & 0xFFFFFFFF):
            return None
        return data[:8] + struct.pack("<I", MTIME) + data[12:]
    if flags == _HASHED:
        # checked here when this interpreter writes the same format (another one's
        # `importlib.util.source_hash` may differ); pytest checks it again when reading
        if data[:4] == importlib.util.MAGIC_NUMBER and importlib.util.source_hash(source)[:8] != data[8:16]:
            return None
        return data
    return None


def harvest(testbed: Path, dest: Path, test_cmd: str) -> int:
    """Keep the pytest-rewritten pycs of `testbed` (after the build and its warm-up) that
    are valid for their source in `dest`; returns how many. Trusted input (the build's
    own tree), still read without following a symlink."""
    testbed = Path(testbed)
    found: list[tuple[str, str, str, bytes]] = []  # (source rel, tail, sha256, pyc bytes)
    for root, dirs, names in os.walk(testbed):
        if root == str(testbed):
            dirs[:] = [d for d in dirs if d != ".git"]
        if os.path.basename(root) != "__pycache__":
            continue
        parent = os.path.dirname(root)
        for name in names:
            if "-pytest-" not in name or not name.endswith(".pyc"):
                continue
            stem = name.split(".", 1)[0]
            src = os.path.join(parent, stem + ".py")
            rel = os.path.relpath(src, testbed)
            if not _SAFE.match(rel):
                continue
            try:
                sst = os.lstat(src)
                if not stat.S_ISREG(sst.st_mode) or not stat.S_ISREG(os.lstat(os.path.join(root, name)).st_mode):
                    continue
                source = Path(src).read_bytes()
                data = Path(root, name).read_bytes()
            except OSError:
                continue
            kept = _valid_pyc(data, source, sst)
            if kept is not None:
                found.append((rel, name[len(stem) :], hashlib.sha256(source).hexdigest(), kept))
    cfg = config_digest(testbed)
    if not found or cfg is None:
        return 0
    tail = Counter(t for _, t, _, _ in found).most_common(1)[0][0]  # one pytest per env
    found = sorted(f for f in found if f[1] == tail)
    dest = Path(dest)
    if dest.exists():
        shutil.rmtree(dest)
    for rel, _, _, data in found:
        pyc = dest / "tree" / os.path.dirname(rel) / "__pycache__" / (os.path.basename(rel)[:-3] + tail)
        pyc.parent.mkdir(parents=True, exist_ok=True)
        pyc.write_bytes(data)
    (dest / "manifest").write_text("".join(f"{digest}  ./{rel}\n" for rel, _, digest, _ in found))
    cmd = hashlib.sha256(test_cmd.encode()).hexdigest()
    (dest / "key").write_text(f"{cmd}\n{cfg}\n{MTIME}\n{tail}\n")
    return len(found)
