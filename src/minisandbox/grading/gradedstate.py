"""The graded state, computed by the controller: the base tree plus the task's test files.

Why: two decisions of the grader must not rest on anything a candidate patch can reach.

* **Which tests may count XFAIL as a pass.** A patch can make a failing test *report*
  XFAIL (replace `builtins.AssertionError` with a class that builds pytest's XFailed, call
  `pytest.xfail()` from library code, ...). So an XFAIL counts only for a test that is
  marked xfail in the test sources of the graded state, read here, on the controller,
  from files the patch never touched (`xfail_marked`).
* **Which hook implementations may sit on the outcome path.** The results plugin accepts
  a hook from a test file or conftest only when the file still has the content it had at
  the graded state; the digests come from here and reach the plugin on the results
  socket before any patched code runs (`manifest`).

The graded state is the clean snapshot (SWE-bench: the base commit; SWE-smith: the profile
commit) with the task's test files: SWE-smith - every file the test lists name, from the
snapshot; SWE-bench - the files the test patch touches, at the base commit, with the test
patch applied. Every `conftest.py` of the snapshot is part of it (the eval script puts
back any the patch changes).

"Marked" is decided statically and generously (a conditional mark counts as marked): an
`xfail`/`expectedFailure` name anywhere in the test function's decorators (this covers
`pytest.param(..., marks=pytest.mark.xfail)` inside a `parametrize`) or body (an
imperative `pytest.xfail()`, `request.node.add_marker(pytest.mark.xfail)`), in an
enclosing class's decorators or `pytestmark`, in the module's `pytestmark`, in a
module-level or class-level name one of those decorators uses, or in a conftest on the
test file's path (conftests that add marks in a collection hook). A test a class inherits
is marked where the base of the module that defines it is (else where any definition of
its name is).
"""

from __future__ import annotations

import ast
import doctest
import hashlib
import os
import re
import stat
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from minisandbox.grading.evalscript import EvalScript, patch_paths, test_files_of

XFAIL_NAMES = frozenset({"xfail", "expectedFailure"})
#: Directories never searched for conftests (not part of a test run).
_SKIP_DIRS = frozenset(
    {
        ".git",
        ".hg",
        ".tox",
        ".nox",
        "node_modules",
        "__pycache__",
        ".venv",
        "venv",
        "build",
        ".eggs",
        ".mypy_cache",
        ".pytest_cache",
    }
)
_DJANGO_ID = re.compile(r"^(\w+) \(([\w.]+)\)")  # "test_x (app.tests.Class)"
_UNITTEST_ID = re.compile(r"^([\w.]+)\.(\w+)\.(\w+)$")  # "app.tests.Class.test_x"


def _mentions_xfail(node: ast.AST, names: frozenset[str] = frozenset()) -> bool:
    for n in ast.walk(node):
        if isinstance(n, ast.Attribute) and n.attr in XFAIL_NAMES:
            return True
        if isinstance(n, ast.Name) and (n.id in XFAIL_NAMES or n.id in names):
            return True
        if isinstance(n, ast.Constant) and n.value in XFAIL_NAMES:  # getattr(pytest.mark, "xfail")
            return True
    return False


def _xfail_names(body: list[ast.stmt], names: frozenset[str] = frozenset()) -> frozenset[str]:
    """The names a block binds by assignment to a value that mentions xfail."""
    return frozenset(
        t.id
        for s in body
        if isinstance(s, (ast.Assign, ast.AnnAssign)) and s.value is not None and _mentions_xfail(s.value, names)
        for t in (s.targets if isinstance(s, ast.Assign) else [s.target])
        if isinstance(t, ast.Name)
    )


def _assigns(stmt: ast.stmt, name: str) -> bool:
    targets = (
        stmt.targets
        if isinstance(stmt, ast.Assign)
        else ([stmt.target] if isinstance(stmt, (ast.AnnAssign, ast.AugAssign)) else [])
    )
    return any(isinstance(t, ast.Name) and t.id == name for t in targets)


@dataclass
class _Marks:
    """What one test module marks xfail: qualified names (class chain + function)."""

    module: bool = False
    marked: set[tuple[str, ...]] = field(default_factory=set)
    defined: set[tuple[str, ...]] = field(default_factory=set)
    bases: dict[tuple[str, ...], tuple[str, ...]] = field(default_factory=dict)  # class -> its base names

    def function_marked(self, qualname: tuple[str, ...], depth: int = 0) -> bool:
        """True when the function (or any enclosing class) is marked; `qualname` may omit
        classes (ids of runners that name the function only). A method the class does not
        define itself is inherited: a base of the module's that defines it decides, else
        any definition of its name does (cloudpickle's `Protocol2CloudPickleTest`
        inherits a test that calls `pytest.xfail()`)."""
        if self.module:
            return True
        if any(qualname[:i] in self.marked for i in range(1, len(qualname) + 1)):
            return True
        if len(qualname) == 1:  # function name only: any definition of it
            return any(
                q[-1] == qualname[0] and any(q[:i] in self.marked for i in range(1, len(q) + 1)) for q in self.defined
            )
        if qualname in self.defined or depth > 20:
            return False
        cls, func = qualname[:-1], qualname[-1]
        for base in self.bases.get(cls, ()):
            bq = cls[:-1] + (base,) if cls[:-1] + (base,) in self.defined else (base,)
            if bq in self.defined and (bq + (func,) in self.defined or bq in self.bases):
                return self.function_marked(bq + (func,), depth + 1)
        return self.function_marked((func,))


def scan_marks(source: str | bytes) -> _Marks:
    """The xfail marks of one test module, from its source (a module that does not parse
    marks nothing)."""
    out = _Marks()
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return out
    names = _xfail_names(tree.body)  # module-level names whose value mentions xfail (a mark alias, a parameter list)
    out.module = any(_assigns(s, "pytestmark") and _mentions_xfail(s) for s in tree.body)

    def visit(body: list[ast.stmt], prefix: tuple[str, ...], names: frozenset[str]) -> None:
        for stmt in body:
            if isinstance(stmt, ast.ClassDef):
                q = prefix + (stmt.name,)
                out.defined.add(q)
                out.bases[q] = tuple(b.id for b in stmt.bases if isinstance(b, ast.Name))
                if any(_mentions_xfail(d, names) for d in stmt.decorator_list) or any(
                    _assigns(s, "pytestmark") and _mentions_xfail(s, names) for s in stmt.body
                ):
                    out.marked.add(q)
                # class-level names whose value mentions xfail (typeguard's
                # `xfail_nested_protocol_checks = pytest.mark.xfail(...)`, used in `marks=`)
                visit(stmt.body, q, names | _xfail_names(stmt.body, names))
            elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                q = prefix + (stmt.name,)
                out.defined.add(q)
                if any(_mentions_xfail(d, names) for d in stmt.decorator_list) or any(
                    _mentions_xfail(s, names) for s in stmt.body
                ):
                    out.marked.add(q)

    visit(tree.body, (), names)
    return out


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


#: Symbolic links followed at most in one path of a snapshot (the kernel's own limit).
_MAX_LINKS = 40


def read_snapshot_file(root: Path | str, rel: str) -> bytes | None:
    """The bytes of the regular file `rel` of the snapshot `root`, read on the controller,
    or None: absent, not a regular file, itself a symlink, or a path that leaves `root`.

    Why not `(root / rel).read_bytes()`: `rel` comes from the task record (test ids, the
    test patch's headers), which the store's index or a task file supplies, and the layer
    may hold symlinks with any target (node.restore: they are meant to resolve inside the
    sandbox). Joined and followed on the host, an absolute or `..` path, or a directory
    linked to `/etc`, read (as root) any host file into the eval script, and a test patch
    header through such a link made `_apply_test_patch` write the layer's bytes to any host
    path. So: no absolute path and no `..` in `rel`; a symlinked directory is followed only
    when its target is relative and stays inside `root` (as the sandbox resolves it at the
    mount path); the last component is opened with O_NOFOLLOW and must be a regular file."""
    if not rel or rel.startswith("/") or "\0" in rel:
        return None
    todo = [p for p in rel.split("/") if p not in ("", ".")]
    if not todo or ".." in todo:
        return None
    done: list[str] = []  # components checked to be real directories of the snapshot
    links = 0
    while todo:
        name = todo.pop(0)
        if name == "..":  # from a link's target, resolved against directories already checked
            if not done:
                return None
            done.pop()
            continue
        path = os.path.join(root, *done, name)
        try:
            st = os.lstat(path)
        except OSError:
            return None
        if stat.S_ISLNK(st.st_mode):
            links += 1
            if not todo or links > _MAX_LINKS:  # the file itself is a link: not read (as before)
                return None
            try:
                target = os.readlink(path)
            except OSError:
                return None
            if target.startswith("/") or "\0" in target:
                return None
            todo = [p for p in target.split("/") if p not in ("", ".")] + todo
            continue
        if todo and not stat.S_ISDIR(st.st_mode):
            return None
        done.append(name)
    if not done:
        return None
    try:
        fd = os.open(os.path.join(root, *done), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        with os.fdopen(os.dup(fd), "rb") as fh:
            return fh.read()
    finally:
        os.close(fd)


def _conftests(reference: Path) -> dict[str, bytes]:
    """Every `conftest.py` of the snapshot (repo-relative path -> content)."""
    out: dict[str, bytes] = {}
    for top, dirs, files in os.walk(reference):
        dirs[:] = [d for d in dirs if d not in _SKIP_DIRS]
        if "conftest.py" in files:
            p = Path(top) / "conftest.py"
            if p.is_file() and not p.is_symlink():
                out[p.relative_to(reference).as_posix()] = p.read_bytes()
    return out


def _apply_test_patch(files: dict[str, bytes | None], test_patch: str) -> dict[str, bytes | None]:
    """`files` (base-commit content, None = absent) with the test patch applied, by `git
    apply` in a scratch directory; unchanged when it does not apply (the eval script then
    reports the set-up failure itself)."""
    with tempfile.TemporaryDirectory(prefix="minisandbox-graded-") as tmp:
        root = Path(tmp)
        for rel, content in files.items():
            # (a record's path is never joined to a host directory unchecked: read_snapshot_file)
            if content is not None and not rel.startswith("/") and ".." not in rel.split("/"):
                (root / rel).parent.mkdir(parents=True, exist_ok=True)
                (root / rel).write_bytes(content)
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "GIT_CONFIG_NOSYSTEM": "1",
            "HOME": tmp,
            "GIT_CEILING_DIRECTORIES": tmp,
        }
        res = subprocess.run(["git", "apply", "-"], input=test_patch.encode(), cwd=root, env=env, capture_output=True)
        if res.returncode != 0:
            return dict(files)
        out: dict[str, bytes | None] = {}
        for rel in files:
            out[rel] = read_snapshot_file(root, rel)  # (the test patch may make symlinks)
        return out


def _docstrings(tree: ast.Module) -> dict[str, str]:
    """Qualified name -> raw docstring of the module ("") and of every class, function and
    method it defines (at the top level, in class bodies, and under `if`/`try`/`with`),
    where doctest's finder looks for examples."""
    out: dict[str, str] = {}
    doc = ast.get_docstring(tree, clean=False)
    if doc is not None:
        out[""] = doc

    def walk(body: list[ast.stmt], prefix: str) -> None:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                doc = ast.get_docstring(node, clean=False)
                if doc is not None:
                    out.setdefault(prefix + node.name, doc)
                if isinstance(node, ast.ClassDef):
                    walk(node.body, prefix + node.name + ".")
            elif isinstance(node, (ast.If, ast.Try, ast.With)):
                for part in ("body", "orelse", "handlers", "finalbody"):
                    for sub in getattr(node, part, []):
                        walk([sub] if not isinstance(sub, ast.ExceptHandler) else sub.body, prefix)

    walk(tree.body, "")
    return out


def examples_digest(examples: list[tuple[str, str]]) -> str:
    """The digest of a doctest's examples as (source, expected output) pairs; the results
    plugin computes the same over the doctest pytest runs (resultplugin's `check_doctest`)."""
    h = hashlib.sha256()
    for source, want in examples:
        h.update((source + "\x01" + want + "\x00").encode("utf-8", "surrogatepass"))
    return h.hexdigest()


def doctest_digest(source: bytes, rel: str, name: str) -> str | None:
    """`examples_digest` of the doctest `name` (pytest's `<module>.<qualname>`) in the
    module `rel` whose text is `source`, read statically; None when it is not found there."""
    try:
        docs = _docstrings(ast.parse(source))
    except (SyntaxError, ValueError):
        return None
    named = [q for q in docs if q and name.endswith("." + q)]
    if named:
        doc = docs[max(named, key=len)]
    else:
        stem = Path(rel).stem if Path(rel).stem != "__init__" else Path(rel).parent.name
        if name.rsplit(".", 1)[-1] != stem or "" not in docs:
            return None
        doc = docs[""]
    try:
        examples = doctest.DocTestParser().get_examples(doc, name)
    except ValueError:
        return None
    return examples_digest([(ex.source, ex.want) for ex in examples]) if examples else None


#: Words of code that looks into the running program: reaches the call stack's frames or
#: what they hold, installs a tracer or a signal handler (handed the interrupted frame),
#: walks the heap or forks the process (a copy that may look at anything unseen)
#: (resultplugin's frame, signal and fork rules and its critical audit events)
INTROSPECTION_WORDS = re.compile(
    rb"_getframe|currentframe|_current_frames|\b(?:tb|gi|cr|ag)_frame\b|\bf_back\b|getouterframes|"
    rb"getinnerframes|\.(?:stack|trace)\s*\(|from\s+inspect\s+import[^\n]*\b(?:stack|trace)\b|walk_stack|walk_tb|"
    rb"extract_stack|format_stack|print_stack|settrace|setprofile|get_objects|get_referrers|get_referents|"
    rb"get_stack|getcoroutinelocals|getgeneratorlocals|\.signal\s*\(|from\s+signal\s+import[^\n]*\bsignal\b|"
    rb"\bfork\b|forkpty|multiprocessing|ProcessPoolExecutor|preexec_fn|fork_exec|addaudithook|pythonapi"
)


#: Words of code that starts processes (resultplugin's spawn rule: elsewhere a process the
#: patch's code starts is critical, since what it reads no check of the test process sees)
SPAWN_WORDS = re.compile(
    rb"subprocess|Popen|popen|\bsystem\s*\(|\bexec[lv]p?e?\s*\(|spawn|pexpect|plumbum|\bimport\s+sh\b|"
    rb"\bfrom\s+sh\s+import\b|\bfork|multiprocessing|ProcessPool"
)


#: Words of code that calls native code through ctypes or cffi (resultplugin's native rule:
#: elsewhere a ctypes look-up or memory read by address from the patch's code is critical)
NATIVE_WORDS = re.compile(rb"ctypes|cffi|\bCDLL\b|\bcdll\b|\bPyDLL\b|\bpydll\b|\bdlopen\b")


#: Words of code that works with git: runs it, or reads a repository's `.git` (resultplugin's
#: git rule: elsewhere a read of `.git` by the patch's code is critical, since the database
#: holds every test file's content)
GIT_WORDS = re.compile(rb"\bgit\b|\.git\b|dulwich|pygit2", re.IGNORECASE)


@dataclass
class GradedState:
    """Test files and conftests of the graded state (repo-relative path -> content), plus
    the snapshot to read any other test file from, and the paths the candidate patch names."""

    files: dict[str, bytes]
    reference: Path | None = None
    patched: list[str] = field(default_factory=list)
    #: doctest id -> `examples_digest` at the graded state, for the doctests of modules the
    #: task's bug changes (not restored from the snapshot, as test files are)
    doctests: dict[str, str] = field(default_factory=dict)
    _cache: dict[str, _Marks | None] = field(default_factory=dict, repr=False, compare=False)

    def digests(self) -> dict[str, str]:
        return {rel: sha256(data) for rel, data in sorted(self.files.items())}

    def manifest(self, root: str) -> dict[str, object]:
        """What the results plugin gets before the run (see resultplugin): the repo root as
        the test command sees it, the graded files' digests, the paths the patch names,
        and which of those already look into the running program at the graded state."""
        out: dict[str, object] = {"root": root, "files": self.digests(), "patched": list(self.patched)}
        native = self.introspecting()
        if native is not None:
            out["introspects"] = native
            out["git_readers"] = self.snapshot_matches(GIT_WORDS)
            out["spawners"] = self.snapshot_matches(SPAWN_WORDS)
            out["native_callers"] = self.snapshot_matches(NATIVE_WORDS)
        if self.doctests:
            out["doctests"] = dict(self.doctests)
        return out

    def introspecting(self) -> list[str] | None:
        """The paths the candidate patch names whose copy in the snapshot looks into the
        running program (`INTROSPECTION_WORDS`: frames, tracers, the heap). There such
        calls are the library's own (a tracer like PySnooper's, pydantic's and typeguard's
        frame lookups), and the results plugin only reports them; in any other file they
        are the patch's, and critical (resultplugin's `frame_reached` and audit hook). A
        gold patch that fixed another function of a file that calls `sys.settrace` was
        `results-tampered` before. None without a snapshot (the rules then judge every
        patched file as the patch's, as before frames were judged: frames off)."""
        if self.reference is None:
            return None
        return self.snapshot_matches(INTROSPECTION_WORDS)

    def snapshot_matches(self, words: re.Pattern[bytes]) -> list[str]:
        """The paths the candidate patch names whose copy in the snapshot matches `words`."""
        assert self.reference is not None
        out = []
        for rel in self.patched:
            src = read_snapshot_file(self.reference, rel)
            if src is not None and words.search(src):
                out.append(rel)
        return out

    def _source(self, rel: str) -> bytes | None:
        if rel in self.files:
            return self.files[rel]
        if self.reference is None:
            return None
        return read_snapshot_file(self.reference, rel)

    def _marks(self, rel: str) -> _Marks | None:
        if rel not in self._cache:
            src = self._source(rel)
            self._cache[rel] = scan_marks(src) if src is not None else None
        return self._cache[rel]

    def _conftest_marks(self, rel: str) -> bool:
        """A conftest on the path of `rel` that mentions xfail (marks added by a hook)."""
        parts = rel.split("/")[:-1]
        for i in range(len(parts) + 1):
            c = "/".join([*parts[:i], "conftest.py"])
            src = self._source(c)
            if src is not None and re.search(rb"\b(?:xfail|expectedFailure)\b", src):
                return True
        return False

    def _candidates(self, test_id: str) -> list[tuple[str, tuple[str, ...]]]:
        """(file, qualified name) the id may stand for."""
        if "::" in test_id:
            path, *names = test_id.split("::")
            names = [n.split("[", 1)[0] for n in names]
            return [(path, tuple(n for n in names if n and n != "()"))]
        m = _DJANGO_ID.match(test_id) or None
        if m:
            func, dotted = m.group(1), m.group(2)
            dotted = dotted.removesuffix("." + func)  # Python 3.11+: "test_x (app.tests.Class.test_x)"
            mod, _, cls = dotted.rpartition(".")
            return [(rel, (cls, func)) for rel in self._module_files(mod)] or [
                (rel, (cls, func)) for rel in self._all_files()
            ]
        m = _UNITTEST_ID.match(test_id)
        if m:
            return [(rel, (m.group(2), m.group(3))) for rel in self._module_files(m.group(1))]
        func = test_id.split("[", 1)[0].split(" ", 1)[0]
        return [(rel, (func,)) for rel in self._all_files()]

    def _all_files(self) -> list[str]:
        return [rel for rel in self.files if rel.endswith(".py") and not rel.endswith("conftest.py")]

    def _module_files(self, module: str) -> list[str]:
        tail = module.replace(".", "/")
        return [
            rel
            for rel in self._all_files()
            if rel[:-3] == tail or rel[:-3].endswith("/" + tail) or rel[:-3].endswith("/" + tail + "/__init__")
        ]

    def xfail_marked(self, test_id: str) -> bool:
        """True when the test is marked xfail at the graded state (module docstring)."""
        for rel, qual in self._candidates(test_id):
            marks = self._marks(rel)
            if marks is not None and qual and marks.function_marked(qual):
                return True
            if marks is not None and self._conftest_marks(rel):
                return True
        return False


def graded_state(
    script: EvalScript, reference: Path, tests: list[str], doctests: list[str] | None = None
) -> GradedState:
    """The graded state of `script`'s run over the snapshot `reference` (module docstring).
    `tests`: FAIL_TO_PASS + PASS_TO_PASS (their files are read from the snapshot when the
    script does not rewrite them). `doctests`: listed doctests of modules the task's bug
    changes, whose examples at the snapshot the results plugin holds the run to."""
    reference = Path(reference)
    files: dict[str, bytes | None] = dict(script.reference_files)
    if script.test_patch.strip():
        files = _apply_test_patch(files, script.test_patch)
    graded: dict[str, bytes] = {k: v for k, v in _conftests(reference).items()}
    for rel in test_files_of(tests):
        if rel not in files:
            content = read_snapshot_file(reference, rel)
            if content is not None:
                graded[rel] = content
    graded.update({k: v for k, v in files.items() if v is not None})
    for k, v in files.items():
        if v is None:
            graded.pop(k, None)
    digests: dict[str, str] = {}
    for test_id in doctests or []:
        rel, _, name = test_id.partition("::")
        src = read_snapshot_file(reference, rel) if rel.endswith(".py") and name else None
        got = doctest_digest(src, rel, name) if src is not None else None
        if got is not None:
            digests[test_id] = got
    return GradedState(graded, reference, patch_paths(script.patch or ""), digests)
