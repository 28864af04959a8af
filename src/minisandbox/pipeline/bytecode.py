"""Byte-compiling an environment so that the same source gives the same .pyc in every one.

Why: chunked images share bytes across environments only where files are identical
(docs/pipeline.md, "Store size"). `compileall` is not deterministic across environments:
frozenset constants are marshalled in hash order (random per process), and marshal marks
an interned string with FLAG_REF when its reference count is above one, which depends on
whatever else the compiling process holds alive (the files compiled before it, the `.pth`
files `site` ran). Measured on 15 real SWE-smith layers: 848 of 7,747 (path, source) groups
had two or more different .pyc bodies.

The reference way: each file compiled in a fresh fork of a minimal process (no `site`, only
`os`, `sys` and `py_compile` imported, this script's own functions defined) with
PYTHONHASHSEED=0. Timestamp-based .pyc files, as compileall writes them;
`pipeline.pack.normalize_tree` later restamps their headers.

A fork per file costs more than the compilation (the first-touch page faults of a fresh
process: 7.9 against 3.2 CPU s for the 796 files of a pytest venv on 3.12), so each worker
compiles its share in one process and gets the reference bytes another way:
* CPython 3.12: as is. Every interned string is immortal (its reference count is fixed, so
  marshal always marks it), and every other object of a compiled module is either new to
  that compilation (its count comes from the module alone) or an immortal singleton (small
  ints, one-character strings, the empty tuple): what was compiled before cannot matter.
* 3.6-3.11 and 3.13: checked. There it can matter (on 3.10, after a compile warning keeps
  `__warningregistry__` alive, 21 of 807 files of that venv differ; on 3.11 the AST
  module's field names stay alive after the first compile). The only bits that can depend
  on the process are the FLAG_REF bits of interned strings written once and never referred
  back to (any object written twice is marked either way; other objects are new or cached
  singletons). The worker reads those strings out of the .pyc it wrote and asks an oracle,
  a fork of the fresh state made before anything was compiled, which of them that state
  holds; the .pyc stays if the worker, now that the module is gone, holds exactly the same
  ones and marks every one the fresh state holds. Otherwise the oracle compiles the file
  in a fresh fork of itself, the reference way (about 5% of files).
  3.10 / 3.11 on the same venvs: 7.6 -> 5.5 and 8.4 -> 5.1 CPU s.
* Other versions: the reference way.
`MINISANDBOX_PYC_FORK_EACH=1` forces the reference way; `tests/pipeline/test_bytecode.py`
compares both on every local CPython from 3.6 to 3.13. The .pyc of a module that names one
of this script's own identifiers exactly once depends on the script's text, as it always
did (the fresh state holds them); it is the same in every environment.

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

# code object layout in marshal: (ints, objects, ints, objects) around co_firstlineno
CODE = {6: (5, 8, 1, 1), 7: (5, 8, 1, 1), 8: (6, 8, 1, 1), 9: (6, 8, 1, 1), 10: (6, 8, 1, 1), 11: (5, 8, 1, 2), 13: (5, 8, 1, 2)}

def loose_strings(data, minor):
    # The interned strings of a marshalled module that are written once and never referred
    # back to, each with its FLAG_REF bit: marshal sets that bit when the string's reference
    # count is above one, so for these alone it depends on what else the process holds.
    a, b, c, d = CODE[minor]
    st = {"pos": 0, "count": 0}
    refs, found = set(), []
    def word():
        p = st["pos"]
        st["pos"] = p + 4
        return int.from_bytes(data[p:p + 4], "little", signed=True)
    def one():
        p = st["pos"]
        op = data[p]
        st["pos"] = p + 1
        t, idx = op & 0x7F, -1
        if op & 0x80:
            idx = st["count"]
            st["count"] = idx + 1
        if t in b"NFTS.":
            return
        if t == 0x69:  # i
            st["pos"] += 4
        elif t in b"Zz":
            k = data[p + 1]
            st["pos"] = p + 2 + k
            if t == 0x5A:
                found.append((data[p + 2:p + 2 + k], idx))
        elif t in b"tAsua":
            k = word()
            if t in b"tA":
                found.append((data[p + 5:p + 5 + k], idx))
            st["pos"] += k
        elif t == 0x29:  # small tuple
            st["pos"] += 1
            for _ in range(data[p + 1]):
                one()
        elif t in b"(>":  # tuple, frozenset
            for _ in range(word()):
                one()
        elif t == 0x72:  # r
            refs.add(word())
        elif t == 0x63:  # c
            st["pos"] += 4 * a
            for _ in range(b):
                one()
            st["pos"] += 4 * c
            for _ in range(d):
                one()
        elif t in b"gI":
            st["pos"] += 8
        elif t == 0x79:  # y
            st["pos"] += 16
        elif t == 0x66:  # f
            st["pos"] += 1 + data[p + 1]
        elif t == 0x78:  # x
            st["pos"] += 1 + data[p + 1]
            st["pos"] += 1 + data[st["pos"]]
        elif t == 0x6C:  # l
            k = abs(word())
            st["pos"] += 2 * k
        else:
            raise ValueError("marshal type %d" % t)
    one()
    if st["pos"] != len(data):
        raise ValueError("marshal length")
    out = [(x.decode(), i >= 0) for x, i in found if i not in refs]
    return [(x, f) for x, f in out if len(x) > 1 or x and ord(x) > 255]  # the others are cached

def held(name):
    # Whether this process holds an interned string `name` (an interned string exists only
    # while something refers to it); `name` itself is a new string.
    return sys.intern(name) is not name

def read(fd, k):
    out = b""
    while len(out) < k:
        chunk = os.read(fd, k - len(out))
        if not chunk:
            break
        out += chunk
    return out

def send(fd, data):
    data = b"%08x" % len(data) + data
    while data:
        data = data[os.write(fd, data):]

def answer(kind, body):
    if kind == b"q":
        return b"".join([b"1" if held(x) else b"0" for x in body.decode().split("\n")])
    return b"1" if compile_one(os.fsdecode(body)) else b"0"

def oracle(rq, an):
    # A fork of the state every fresh per-file process starts from: says which interned
    # strings that state holds, and compiles a file in a fresh fork of it.
    while True:
        head = read(rq, 9)
        if len(head) < 9:
            os._exit(0)
        send(an, answer(head[:1], read(rq, int(head[1:], 16))))

def checked(paths):
    # Compile in this process; keep a .pyc only where every string whose FLAG_REF bit can
    # depend on the process is held by this process (outside the module) exactly when the
    # fresh state holds it, and is marked wherever the fresh state holds it; else compile
    # the file again in a fresh fork (from the oracle, which is that fresh state).
    rq_r, rq_w = os.pipe()
    an_r, an_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(rq_w)
        os.close(an_r)
        oracle(rq_r, an_w)
    os.close(rq_r)
    os.close(an_w)
    failed = 0
    for path in paths:
        ok = compile_here(path)
        if ok:
            try:
                with open(py_compile.importlib.util.cache_from_source(path), "rb") as fh:
                    data = fh.read()
                loose = loose_strings(data[16 if sys.version_info[1] >= 7 else 12:], sys.version_info[1])
                body = "\n".join([x for x, _ in loose]).encode()
                same = all("\n" not in x for x, _ in loose)
                if same and loose:
                    os.write(rq_w, b"q")
                    send(rq_w, body)
                    fresh = read(an_r, int(read(an_r, 8), 16))
                    here = answer(b"q", body)  # what this process holds now that the module is gone
                    same = fresh == here and all(f or g != 0x31 for g, (_, f) in zip(fresh, loose))
            except Exception:
                same = False
            if not same:
                os.write(rq_w, b"c")
                send(rq_w, os.fsencode(path))
                ok = read(an_r, int(read(an_r, 8), 16)) == b"1"
        failed += not ok
    os.close(rq_w)
    os.waitpid(pid, 0)
    return failed

def main():
    jobs, roots = max(1, int(sys.argv[1])), sys.argv[2:]
    os.environ.pop("SOURCE_DATE_EPOCH", None)  # else py_compile writes hash-based pycs
    minor = sys.version_info[1] if sys.version_info[0] == 3 else 0
    if os.environ.get("MINISANDBOX_PYC_FORK_EACH") == "1":  # the reference way (tests compare)
        minor = 0
    files = list(sources(roots))
    workers = []
    for n in range(min(jobs, len(files)) or 1):
        pid = os.fork()
        if pid == 0:
            share = files[n::jobs]
            if minor == 12:  # interned strings are immortal: the bytes cannot depend on the process
                failed = sum(1 for p in share if not compile_here(p))
            elif minor in CODE:
                failed = checked(share)
            else:
                failed = sum(1 for p in share if not compile_one(p))
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
