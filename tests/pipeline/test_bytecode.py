"""pipeline/bytecode.py: the same source gives the same .pyc whatever else the environment holds."""

from __future__ import annotations

import importlib.util
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from minisandbox.pipeline import bytecode

#: A frozenset constant (marshalled in hash order) and names shared with the other module
#: (interned strings whose reference counts differ with what was compiled before).
MOD = """
def kind(x):
    if x in {"alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"}:
        return "greek"
    return "other"

NAMES = ("alpha", "beta", "shared_name", "another_shared_name")
"""
OTHER = "shared_name = 1\nanother_shared_name = shared_name\nalpha = beta = 2\n"


def _compile(root: Path, seed: str) -> None:
    script = root.parent / f"{root.name}-{bytecode.SCRIPT_NAME}"
    script.write_text(bytecode.SCRIPT)
    env = {**os.environ, "PYTHONHASHSEED": seed}
    out = subprocess.run(
        [sys.executable, "-S", str(script), "2", str(root)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert "byte-compiled" in out.stdout


def _pyc(source: Path) -> bytes:
    return Path(importlib.util.cache_from_source(str(source))).read_bytes()


def _env(root: Path, others: int) -> bytes:
    """Populate `root` (the one canonical venv path, as in every build) with pkg/mod.py and
    `others` more modules, byte-compile it, and return mod.py's .pyc."""
    import shutil

    shutil.rmtree(root, ignore_errors=True)
    pkg = root / "pkg"
    pkg.mkdir(parents=True)
    (pkg / "mod.py").write_text(MOD)
    os.utime(pkg / "mod.py", (1_600_000_000, 1_600_000_000))
    for n in range(others):  # compiled before and beside mod.py
        (pkg / f"aaa{n}.py").write_text(OTHER)
    _compile(root, "0")
    return _pyc(pkg / "mod.py")


def test_same_source_same_pyc_in_different_environments(tmp_path: Path) -> None:
    root = tmp_path / "venv"
    assert _env(root, 0) == _env(root, 20)
    assert "PYTHONHASHSEED=0 python -S" in bytecode.command("/opt/b", ["/opt/venv"])


def test_pycs_are_valid_timestamp_pycs_and_bad_files_are_skipped(tmp_path: Path) -> None:
    root = tmp_path / "venv"
    (root / "lib").mkdir(parents=True)
    good = root / "lib" / "good.py"
    good.write_text(MOD)
    (root / "lib" / "broken.py").write_text("def broken(:\n")
    (root / "lib" / "link.py").symlink_to(good)
    _compile(root, "0")
    data = _pyc(good)
    flags, mtime, size = struct.unpack("<III", data[4:16])
    assert data[:4] == importlib.util.MAGIC_NUMBER
    assert flags == 0 and mtime == int(good.stat().st_mtime) and size == good.stat().st_size
    assert not Path(importlib.util.cache_from_source(str(root / "lib" / "broken.py"))).exists()
    assert not Path(importlib.util.cache_from_source(str(root / "lib" / "link.py"))).exists()


#: A module whose compilation warns (SyntaxWarning from 3.8), and one naming
#: `__warningregistry__` once: on 3.10 a warning shown while compiling can keep that interned
#: string alive and so change the .pyc of modules compiled after it in the same process.
WARNS = "def one(x):\n    return x is 1\n"
USES_REGISTRY = "def f(module):\n    return module.__warningregistry__\n"


@pytest.mark.parametrize("version", ["3.6", "3.8", "3.10", "3.11", "3.12", "3.13"])
def test_one_process_per_worker_gives_the_bytes_of_a_fresh_fork_per_file(tmp_path: Path, version: str) -> None:
    """Workers compile their whole share in one process (see the module docstring): every
    .pyc must equal what a fresh fork per file writes, whatever was compiled before it, and
    load to the code object the interpreter compiles from the source."""
    from minisandbox.sandbox.interpreters import find_interpreter

    try:
        interp = find_interpreter(version)
    except Exception:
        pytest.skip(f"no CPython {version} on this machine")
    python = interp.executable
    out = subprocess.run(
        [
            python,
            "-S",
            "-c",
            "import sysconfig, sys; print(sysconfig.get_paths()['stdlib']); print(sys.implementation.cache_tag)",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    stdlib, tag = out.stdout.split()
    root = tmp_path / "venv"
    for pkg in ("email", "json", "asyncio"):  # ~70 real modules: classes, frozensets, docstrings
        shutil.copytree(Path(stdlib) / pkg, root / pkg, ignore=shutil.ignore_patterns("__pycache__"))
    (root / "aaa").mkdir()
    (root / "aaa" / "a_warns.py").write_text(WARNS)  # compiled first (sorted walk)
    (root / "aaa" / "mod.py").write_text(MOD)
    (root / "aaa" / "registry.py").write_text(USES_REGISTRY)
    (root / "aaa" / "singletons.py").write_text(SINGLETONS, encoding="utf-8")
    (root / "aaa" / "floats.py").write_text(FLOATS)
    script = tmp_path / bytecode.SCRIPT_NAME
    script.write_text(bytecode.SCRIPT)
    sources = sorted(root.rglob("*.py"))

    def pycs(**extra: str) -> dict[Path, bytes]:
        env = {k: v for k, v in os.environ.items() if k != "SOURCE_DATE_EPOCH"}
        env.update(PYTHONHASHSEED="0", **extra)
        for d in root.rglob("__pycache__"):
            shutil.rmtree(d)
        subprocess.run(
            [python, "-S", str(script), "2", str(root)], env=env, check=True, capture_output=True, timeout=300
        )
        return {p: (p.parent / "__pycache__" / f"{p.stem}.{tag}.pyc").read_bytes() for p in sources}

    batched = pycs()
    reference = pycs(MINISANDBOX_PYC_FORK_EACH="1")
    assert len(reference) > 60
    assert [str(p.relative_to(root)) for p in sources if batched[p] != reference[p]] == []
    # what the interpreter itself compiles from each source is what each .pyc loads to
    check = (  # code objects compare their constants with ==, and a NaN is never == itself
        "import marshal, struct, sys\n"
        "def bits(c):\n"
        "    if isinstance(c, float):\n"
        "        return ('float', struct.pack('<d', c))\n"
        "    if isinstance(c, complex):\n"
        "        return ('complex', bits(c.real), bits(c.imag))\n"
        "    if isinstance(c, (tuple, frozenset)):\n"
        "        return (type(c).__name__, sorted(map(repr, map(bits, c))))\n"
        "    if hasattr(c, 'co_consts'):\n"
        "        return (c.co_code, bits(c.co_consts), c.co_names, c.co_varnames, c.co_name, c.co_firstlineno)\n"
        "    return c\n"
        "bad = []\n"
        "for src in sys.argv[1:]:\n"
        "    pyc = src.replace('.py', '.pyc-copy')\n"
        "    code = compile(open(src, 'rb').read(), src, 'exec', dont_inherit=True)\n"
        "    loaded = marshal.loads(open(pyc, 'rb').read()[16 if sys.version_info >= (3, 7) else 12:])\n"
        "    if loaded != code and bits(loaded) != bits(code):\n"
        "        bad.append(src)\n"
        "print(len(bad))\n"
    )
    for p in sources:
        p.with_suffix(".pyc-copy").write_bytes(batched[p])
    out = subprocess.run([python, "-S", "-c", check, *map(str, sources)], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "0"


#: Folded NaN constants (never == themselves, so a compiled module is never == its own
#: marshal round trip) and a negative zero.
FLOATS = "NAN = 1e999 * 0\nZ = -0.0\nC = 1e999j * 0\n\ndef f(x):\n    return x in {1e999 * 0, 1.5, -0.0}\n"

#: Strings of one Latin-1 character are process-wide singletons, interned or not by whatever
#: ran before: the canonical form marks them by a fixed rule.
SINGLETONS = 'é = "é"\nx = "-" + "" + "x" + "é" + "_"\n'


def _script() -> dict:
    namespace: dict = {"__name__": "bytecode_script"}
    exec(bytecode.SCRIPT, namespace)
    return namespace


def test_canonical_bytes_do_not_depend_on_reference_counts() -> None:
    """Marshal marks an object with more than one reference as a back-reference target: an
    outside reference to a constant changes the raw bytes, never the canonical ones."""
    import marshal

    script = _script()
    code = compile("A = 'not an identifier'\nB = ('x', 'y z')\n", "/venv/mod.py", "exec")
    alone = marshal.dumps(code)
    held = list(code.co_consts)  # one more reference to each constant
    shared = marshal.dumps(code)
    assert alone != shared
    assert script["canonical"](alone) == script["canonical"](shared)
    assert marshal.loads(script["canonical"](shared)) == code
    del held


def test_canonical_refuses_bytes_it_does_not_understand() -> None:
    script = _script()
    with pytest.raises(script["CanonicalError"]):
        script["canonical"](b"r\x05\x00\x00\x00")  # a back-reference to nothing
    with pytest.raises(script["CanonicalError"]):
        script["canonical"](b"?")  # an unknown type
    with pytest.raises(script["CanonicalError"]):
        script["canonical"](b"NN")  # bytes after the object
