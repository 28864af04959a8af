"""Byte-compiling an environment so that the same source gives the same .pyc in every one.

Why: chunked images share bytes across environments only where files are identical
(docs/pipeline.md, "Store size"). `compileall` is not deterministic across environments:
frozenset constants are marshalled in hash order (random per process), and marshal marks
an interned string with FLAG_REF when its reference count is above one, which depends on
whatever else the compiling process holds alive (the files compiled before it, the `.pth`
files `site` ran). Measured on 15 real SWE-smith layers: 848 of 7,747 (path, source) groups
had two or more different .pyc bodies.

The fix here: each file is compiled in a fresh fork of a minimal process (no `site`, only
`os`, `sys` and `py_compile` imported) with PYTHONHASHSEED=0. Timestamp-based .pyc files,
as compileall writes them; `pipeline.pack.normalize_tree` later restamps their headers.

A fork per file costs more than the compilation (the first-touch page faults of a fresh
process: 7.9 against 3.2 CPU s for the 796 files of a pytest venv on 3.12). On CPython 3.12
each worker compiles its whole share in one process instead, because there the bytes cannot
depend on what was compiled before: every interned string is immortal (its reference
count is fixed, so marshal always marks it), every other object of a compiled module is
either new to that compilation (its count comes from the module alone) or an immortal
singleton (small ints, one-character strings, the empty tuple); the one thing that changes
in a 3.12 process as it compiles is which one-character strings are interned (marshal
writes that in the type byte), and compilation interns only identifier characters, which
it interns in every module that holds them. Other versions keep the fork: on 3.10 one
process gives other bytes for 21 of 807 files of a pytest venv (a compile warning keeps
`__warningregistry__` alive); on 3.6-3.11 and 3.13 interned strings can be mortal, so a
reference count depends on what else is alive. A checked batch for those versions (each
.pyc compared with what a fork of the fresh state holds) was built and measured (3.10
7.6 -> 5.5, 3.11 8.4 -> 5.1 CPU s) but not kept: a variant of the fresh state gave one
file in 807 other bytes that the check did not catch, so it is not a proof.
`MINISANDBOX_PYC_FORK_EACH=1` forces the fork; `tests/pipeline/test_bytecode.py` compares
both ways on 3.12.

The script runs with the environment's own interpreter (any CPython 3.6+), so it is kept
as source text and written next to the build script.
"""

from __future__ import annotations

#: Run as `PYTHONHASHSEED=0 python -S SCRIPT JOBS ROOT...`. Python 3.6 syntax on purpose.
SCRIPT = r"""
import os, sys, py_compile

def sources(roots):
    for root in roots:
        for d, dirs, files in os.walk(root):
            dirs[:] = sorted(x for x in dirs if x != "__pycache__" and not os.path.islink(os.path.join(d, x)))
            for f in sorted(files):
                p = os.path.join(d, f)
                if f.endswith(".py") and not os.path.islink(p):
                    yield p

def compile_one(path):
    pid = os.fork()
    if pid == 0:
        try:
            py_compile.compile(path, doraise=True)
        except BaseException:
            os._exit(1)
        os._exit(0)
    return os.waitpid(pid, 0)[1] == 0

def compile_here(path):
    try:
        py_compile.compile(path, doraise=True)
    except BaseException:
        return False
    return True

def main():
    jobs, roots = max(1, int(sys.argv[1])), sys.argv[2:]
    os.environ.pop("SOURCE_DATE_EPOCH", None)  # else py_compile writes hash-based pycs
    # the same bytes whatever was compiled before only where interned strings are immortal;
    # MINISANDBOX_PYC_FORK_EACH=1: the fork per file everywhere (the reference the tests compare)
    batch = sys.version_info[:2] == (3, 12) and os.environ.get("MINISANDBOX_PYC_FORK_EACH") != "1"
    one = compile_here if batch else compile_one
    files = list(sources(roots))
    workers = []
    for n in range(min(jobs, len(files)) or 1):
        pid = os.fork()
        if pid == 0:
            failed = sum(1 for p in files[n::jobs] if not one(p))
            os._exit(0 if failed == 0 else 3)
        workers.append(pid)
    bad = sum(1 for pid in workers if os.waitpid(pid, 0)[1] != 0)
    sys.stdout.write("byte-compiled %d files%s\n" % (len(files), " (some did not compile)" if bad else ""))

main()
"""

#: File name of the script in the build directory.
SCRIPT_NAME = "bytecode.py"


def command(build_dir: str, roots: list[str], jobs: str = "$(nproc)") -> str:
    """The bash line of the build script that byte-compiles `roots` deterministically.
    A file that does not compile (a Python 2 test fixture, say) is skipped, as compileall
    would: the build does not fail for it."""
    quoted = " ".join(roots)
    return f"PYTHONHASHSEED=0 python -S {build_dir}/{SCRIPT_NAME} {jobs} {quoted}"
