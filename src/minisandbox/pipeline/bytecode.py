"""Byte-compiling an environment so that the same source gives the same .pyc in every one.

Why: chunked images share bytes across environments only where files are identical
(docs/pipeline.md, "Store size"). `compileall` is not deterministic across environments:
frozenset constants are marshalled in hash order (random per process), and marshal marks
an object with FLAG_REF (a back-reference target) when its reference count is above one,
which for an interned string depends on whatever else the compiling process holds alive
(the files compiled before it, the `.pth` files `site` ran, a warning's registry). Measured
on 15 real SWE-smith layers: 848 of 7,747 (path, source) groups had two or more different
.pyc bodies.

The fix here: PYTHONHASHSEED=0, and the bytes marshal writes are made canonical before
py_compile writes them (`canonical` in the script): FLAG_REF is kept only on the objects a
later back-reference names, the back-references are renumbered, and the strings of zero or
one Latin-1 character (process-wide singletons, interned or not depending on what the
process did before) are marked interned exactly when they are one ASCII identifier
character. Why that is a proof: marshal writes an object graph depth-first, marking an
object on its first visit when its count is above one and writing a back-reference on
every later visit; an object visited twice is held twice, so it is always marked and
named, and an object visited once is never named. So after the rewrite the marks depend on
the graph only, not on reference counts; the graph (which objects are shared) is the
compiler's, the same for the same source; and the interned bit of every other string is
the compiler's too (it interns identifiers and identifier-like constants itself). The
rewritten bytes load to the same objects (a mark no back-reference names only adds a slot
to the loader's table; one-character strings are the same singletons either way), and the
script checks that each one loads to a code object equal to the compiled one (floats
compared by their bits: a folded NaN constant is never equal to itself); a failed check
stops the byte-compile, and so the build, with the file's name.

So every worker compiles its share in one process, on every version whose code-object
layout the script knows (3.6-3.13); a fork per file of a minimal process, which was the
way before, cost more than the compilation (7.9 against 3.2 CPU s for the 796 files of a
pytest venv) and was not deterministic either (a garbage collection at another point of a
child's compile changed one file's bytes in one of three runs on 3.10).
`MINISANDBOX_PYC_FORK_EACH=1` forks per file anyway (`tests/pipeline/test_bytecode.py`
compares both ways); an unknown version forks per file without the rewrite.
Timestamp-based .pyc files, as compileall writes them; `pipeline.pack.normalize_tree`
later restamps their headers.

The script runs with the environment's own interpreter (any CPython 3.6+), so it is kept
as source text and written next to the build script.
"""

from __future__ import annotations

#: Run as `PYTHONHASHSEED=0 python -S SCRIPT JOBS ROOT...`. Python 3.6 syntax on purpose.
SCRIPT = r"""
import os, sys, marshal, py_compile, struct
from importlib import _bootstrap_external as bootstrap

FLAG_REF = 0x80
#: marshal's code object per version: (int32 fields first, objects, objects after co_firstlineno)
CODE_LAYOUT = {(3, 6): (5, 8, 1), (3, 7): (5, 8, 1), (3, 8): (6, 8, 1), (3, 9): (6, 8, 1),
               (3, 10): (6, 8, 1), (3, 11): (5, 8, 2), (3, 12): (5, 8, 2), (3, 13): (5, 8, 2)}
LAYOUT = CODE_LAYOUT.get(sys.version_info[:2])
NAME_CHARS = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")
NOTHING = frozenset(b"0NFTS.")            # None, False, ... : the type byte only
FIXED = {ord("i"): 4, ord("I"): 8, ord("g"): 8, ord("y"): 16}
SEQUENCES = frozenset(b"[(<>")            # int32 count, then the items
LONG_STRINGS = frozenset(b"stuaA")       # int32 length, then the bytes
SHORT_STRINGS = frozenset(b"zZ")          # one byte length, then the bytes
INTERNED = {ord("z"): ord("Z"), ord("a"): ord("A"), ord("u"): ord("t")}
PLAIN = dict((v, k) for k, v in INTERNED.items())

INT32 = struct.Struct("<i").unpack_from
FLOAT = struct.Struct("<d").pack
CODE = type(compile("", "", "exec"))

class CanonicalError(Exception):
    pass

def scan(d, layout):
    # returns (refs, uses, singletons) for the marshal bytes d
    refs, uses, singletons = [], [], []
    first, middle, last = layout
    p, end = 0, len(d)
    stack = [1]
    while stack:
        k = stack[-1]
        if k <= 0:
            stack.pop()
            p -= k
            continue
        stack[-1] = k - 1
        t = d[p]
        if t & 0x80:
            refs.append(p)
            t &= 0x7F
        if t == 0x7A or t == 0x5A:  # z Z: short ascii
            n = d[p + 1]
            if n <= 1:
                singletons.append((p, n == 1 and d[p + 2] in NAME_CHARS))
            p += 2 + n
        elif t == 0x72:  # r
            uses.append((p + 1, INT32(d, p + 1)[0]))
            p += 5
        elif t == 0x29:  # ) small tuple
            stack.append(d[p + 1])
            p += 2
        elif t in NOTHING:
            p += 1
        elif t in LONG_STRINGS:  # s t u a A
            n = INT32(d, p + 1)[0]
            if n <= 2 and t != 0x73:
                s = d[p + 5:p + 5 + n].decode("utf-8", "surrogatepass")
                if len(s) <= 1 and (not s or ord(s) < 256):
                    singletons.append((p, bool(s) and ord(s) < 128 and ord(s) in NAME_CHARS))
            p += 5 + n
        elif t == 0x63:  # c
            p += 1 + 4 * first
            stack.append(last)
            stack.append(-4)
            stack.append(middle)
        elif t in FIXED:
            p += 1 + FIXED[t]
        elif t in SEQUENCES:
            stack.append(INT32(d, p + 1)[0])
            p += 5
        elif t == 0x6C:  # l
            p += 5 + 2 * abs(INT32(d, p + 1)[0])
        elif t == 0x66:  # f
            p += 2 + d[p + 1]
        elif t == 0x78:  # x
            q = p + 2 + d[p + 1]
            p = q + 1 + d[q]
        else:
            raise CanonicalError("marshal type %r at %d" % (chr(t), p))
    if p != end:
        raise CanonicalError("%d bytes after the object" % (end - p))
    return refs, uses, singletons

def canonical(data):
    # marshal's bytes with FLAG_REF only on objects a back-reference names, and the
    # process-wide 0/1-character strings marked interned by a fixed rule
    refs, uses, singletons = scan(data, LAYOUT)
    out = bytearray(data)
    named = set(i for _, i in uses)
    for i, p in enumerate(refs):
        if i not in named:
            out[p] &= 0x7F
    if uses:
        order = sorted(named)
        if order[-1] >= len(refs):
            raise CanonicalError("a back-reference past the objects")
        renumber = dict((old, new) for new, old in enumerate(order))
        for q, old in uses:
            out[q:q + 4] = renumber[old].to_bytes(4, "little", signed=True)
    for p, interned in singletons:
        c = out[p] & 0x7F
        out[p] = (out[p] & FLAG_REF) | (INTERNED.get(c, c) if interned else PLAIN.get(c, c))
    return bytes(out)

def same(a, b):
    # equal values, floats by their bits: a folded NaN constant is never == itself
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return FLOAT(a) == FLOAT(b)
    if isinstance(a, complex):
        return FLOAT(a.real) == FLOAT(b.real) and FLOAT(a.imag) == FLOAT(b.imag)
    if isinstance(a, tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, frozenset):
        return sorted(map(repr, a)) == sorted(map(repr, b))
    if isinstance(a, CODE):
        names = [n for n in dir(a) if n.startswith("co_") and n != "co_lnotab"]
        return all(callable(getattr(a, n)) or same(getattr(a, n), getattr(b, n)) for n in names)
    return a == b

def canonical_pycs():
    # py_compile writes what this returns: the same header, the canonical marshal body
    name = "_code_to_timestamp_pyc" if hasattr(bootstrap, "_code_to_timestamp_pyc") else "_code_to_bytecode"
    original = getattr(bootstrap, name)
    header = 16 if sys.version_info >= (3, 7) else 12
    def pyc(code, *args):
        data = original(code, *args)
        body = canonical(data[header:])
        loaded = marshal.loads(body)
        if loaded != code and not same(loaded, code):
            raise CanonicalError("canonical bytes load another code object")
        return data[:header] + body
    setattr(bootstrap, name, pyc)

def sources(roots):
    for root in roots:
        for d, dirs, files in os.walk(root):
            dirs[:] = sorted(x for x in dirs if x != "__pycache__" and not os.path.islink(os.path.join(d, x)))
            for f in sorted(files):
                p = os.path.join(d, f)
                if f.endswith(".py") and not os.path.islink(p):
                    yield p

def compile_here(path):
    try:
        py_compile.compile(path, doraise=True)
    except CanonicalError as e:
        sys.stderr.write("byte-compile: %s: %s\n" % (path, e))
        os._exit(4)
    except BaseException:
        return False
    return True

def compile_one(path):
    pid = os.fork()
    if pid == 0:
        os._exit(0 if compile_here(path) else 1)
    status = os.waitpid(pid, 0)[1]
    if status == 4 << 8:
        os._exit(4)
    return status == 0

def main():
    jobs, roots = max(1, int(sys.argv[1])), sys.argv[2:]
    os.environ.pop("SOURCE_DATE_EPOCH", None)  # else py_compile writes hash-based pycs
    if LAYOUT is not None:
        canonical_pycs()
    # one process per worker where the bytes are canonical; MINISANDBOX_PYC_FORK_EACH=1 forks
    # per file (the reference the tests compare); an unknown version keeps the fork per file
    batch = LAYOUT is not None and os.environ.get("MINISANDBOX_PYC_FORK_EACH") != "1"
    one = compile_here if batch else compile_one
    files = list(sources(roots))
    workers = []
    for n in range(min(jobs, len(files)) or 1):
        pid = os.fork()
        if pid == 0:
            failed = sum(1 for p in files[n::jobs] if not one(p))
            os._exit(0 if failed == 0 else 3)
        workers.append(pid)
    codes = [os.waitpid(pid, 0)[1] >> 8 for pid in workers]
    if 4 in codes:
        sys.exit("byte-compile: canonical .pyc bytes failed (a bug: see above)")
    bad = any(codes)
    sys.stdout.write("byte-compiled %d files%s\n" % (len(files), " (some did not compile)" if bad else ""))

if __name__ == "__main__":
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
