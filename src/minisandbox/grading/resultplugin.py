"""minisandbox's pytest results plugin: test outcomes on a channel the log cannot forge.

Loaded by the eval script with ``-p`` (through PYTEST_ADDOPTS, from a read-only directory
put first on PYTHONPATH), so pytest imports it before any conftest, entry-point plugin or
repository module. It runs inside the environment under test, with that environment's
Python and pytest, so it uses the standard library only and stays Python 3.5 compatible
(no f-strings, no annotations).

What it does (see docs/grading.md, "Results channel" and "Trust boundary"):

* connects to the results socket named by MINISANDBOX_RESULTS_SOCK (a path: a runner
  such as tox closes inherited descriptors), keeps the connection on a close-on-exec
  descriptor and reads the run's nonce and the controller's manifest from it (the repo
  root, the digests of the graded state's test files and conftests, the paths the
  candidate patch names); the controller accepts one connection only, so whoever
  connects first (this plugin, at import) is the only one to get them;
* at import, before any repository code runs, captures the objects outcomes depend on:
  the builtins (exception classes and functions), every function and class of pytest,
  pluggy and unittest.case (with their methods), and a creation stamp for files;
* for every test phase computes the status itself from ``call.excinfo`` (not from the
  report object, which repository code can patch), notes where the report disagrees, and
  writes one JSON line per phase, authenticated with the controller's key (raw bytes after
  the nonce, wiped once the HMAC state is made, never written back) and numbered, so that a process that rewires the
  descriptors can forward records but not change, drop or add one;
* at the end of every test (after its teardown) checks that none of the captured objects
  was replaced, that every hook implementation of the plugin manager comes from pytest or
  pluggy, this plugin, an installed plugin that was there before the run, a repository
  file the patch did not change, or a test file/conftest with its graded-state content
  (judged by the file its code lives in), that the test function itself comes from such a
  file, and that no trace/profile function from elsewhere is installed; any difference
  is written as a critical ``tampered`` record (the grader then resolves nothing);
* with audit hooks (Python 3.8+), which cannot be removed once added, records
  ``sys.settrace``/``sys.setprofile`` and heap walks (``gc.get_objects``/``get_referrers``/
  ``get_referents``) by untrusted code (critical) and frame walks (reported), and, as
  critical, memory read or written by address through ctypes and processes started by code
  the patch brought where its file's graded-state copy does neither;
* around every test method reads the version tags of its class and bases: an attribute
  written and put back while it ran is critical (``written_back``);
* at the end of the session writes the exit status and the number of tests collected.

Its state lives in closures only: the module replaces itself in ``sys.modules`` by the
plugin object, and removes that entry once pytest has registered it. Code in the same
process can still reach it through the plugin manager or by walking the heap; that is
what the audit hooks and the checks above are for (docs/grading.md, "Trust boundary").

A run without the environment variable (someone re-running eval.sh by hand, a nested
pytest) leaves the plugin inert.

pytest runs also get the start-up option below (with MINISANDBOX_RESULTS_RUNNER=pytest):
when the main program is pytest, the channel is opened, and the key made into the record
signer, while the interpreter starts, before pytest imports any repository module (a
repository pytest imports first, `iniconfig`, could otherwise put a copy of this module
with its checks off under its name); what pytest's `-p` import then finds is an object
that builds the plugin when pytest registers it (`_bootstrap`).

unittest runners (Django's tests/runtests.py, `python -m unittest`): the eval script loads
this module at interpreter start-up instead (a `-W ignore::_minisandbox_results.StartUp`
option in PYTHONWARNINGS: the warnings module imports the category's module before `site`
and the main script) with MINISANDBOX_RESULTS_RUNNER=unittest. The same snapshot and
checks then cover all of unittest, `unittest.case.TestCase.run` is wrapped so each test
reports to a recorder that writes the outcome unittest computed and forwards it to the
real result object, the end-of-test check runs after each test and the end record is
written at exit (`wrap_unittest`; docs/grading.md, "unittest runners").

SymPy's runner (`bin/test`, whose SWE-bench command sets PYTHONWARNINGS itself): the eval
script puts a copy of this module, named `sitecustomize`, first on PYTHONPATH with
MINISANDBOX_RESULTS_RUNNER=sympy; it runs the environment's own sitecustomize after it.
`builtins.exec` is wrapped: a graded test file's code must be its graded content
compiled, and each `test_*` function it defines is replaced by a recorder that writes
the outcome from the exception the function raised (`wrap_sympy`; docs/grading.md,
"SymPy's bin/test").
"""

import json
import os
import socket
import sys
from _json import encode_basestring_ascii as _c_encode_str  # (C: bound before repository code too)
from _json import make_encoder as _c_make_encoder
from hashlib import sha256 as _sha256  # bound before any repository code runs


def _c_dumps():
    """`json.dumps(obj, sort_keys=True)` made of `_json`'s C encoder alone. Why: json's
    Python layer looks up `JSONEncoder.iterencode`, `c_make_encoder` and the string encoder
    on its class and module at every call, so library code that replaced one saw every
    record before it was signed and forged it (a FAILED phase made PASSED, the findings
    emptied): the plugin then signed the forgery itself. The C encoder, its string encoder
    and `str.join` are bound here, before any repository code runs."""

    def default(o):
        raise TypeError("%r is not JSON serializable" % (type(o).__name__,))

    encode = _c_make_encoder(None, default, _c_encode_str, None, ": ", ", ", True, False, True)
    join = "".join

    def dumps(obj):
        return join(encode(obj, 0))

    return dumps

SOCK_VAR = "MINISANDBOX_RESULTS_SOCK"  # results.SOCKET_VAR
NONCE_BYTES = 33  # 32 hex characters and a newline
KEY_BYTES = 32  # results.KEY_BYTES: the record key, raw, after the nonce
MANIFEST_MAX = 8 << 20
RUNNER_VAR = "MINISANDBOX_RESULTS_RUNNER"  # "unittest", "sympy": loaded at start-up (results.py)
_RESTORE = ("PYTHONPATH", "PYTEST_ADDOPTS", "PYTHONWARNINGS")
#: Modules whose functions and classes (and their methods) are captured at import and
#: must be the same objects at the end of every test.
CAPTURED_PREFIXES = ("_pytest.", "pluggy.")
CAPTURED_MODULES = ("pytest", "_pytest", "pluggy", "unittest.case", "unittest.util")
#: Modules whose functions and classes (with their methods) are compared at the end of
#: every test (the outcome path: running a test, making and judging its report, fixtures,
#: marks, approx/raises, hook dispatch, unittest's assertions); those of the other
#: captured modules are compared at the end of the session. Builtins: every test.
HOT_MODULES = ("pytest", "_pytest.runner", "_pytest.reports", "_pytest.outcomes", "_pytest.python",
                     "_pytest.python_api", "_pytest.raises", "_pytest.approx", "_pytest.skipping",
                     "_pytest.unittest", "_pytest.fixtures", "_pytest.nodes", "_pytest.main",
                     "_pytest.mark.structures", "pluggy._hooks", "pluggy._callers", "pluggy._result",
                     "pluggy._manager", "unittest.case")
#: Test-support directories and modules (`minisandbox.grading.evalscript.TEST_DIRS`,
#: `SUPPORT_DIRS`, `SUPPORT_FILES`, `SUPPORT_PATHS`): their code is test code.
SUPPORT_DIRS = ("tests", "test", "testing", "_testing", "testutils", "testutil", "test_utils", "testdata", "test_data",
                "test-data", "_tests")
SUPPORT_FILES = ("testing.py", "_testing.py", "testutils.py", "testutil.py")
SUPPORT_PATHS = ("sympy/utilities/pytest.py", "sympy/utilities/randtest.py", "dask/dataframe/utils.py",
                 "dask/array/utils.py", "scrapy/utils/test.py", "sklearn/utils/estimator_checks.py")
#: Installed packages that are test helpers as a whole: every module of theirs is checked
#: as `numpy.testing` is (`installed_support`). Library code that rebound
#: `hypothesis.strategies.integers` to a strategy of one value kept the bug, and a `@given`
#: test that a single value does not fail was resolved.
SUPPORT_PACKAGES = ("hypothesis",)
#: hypothesis' own defaults, for the settings that decide how hard a `@given` test looks
#: for a failing example (the same in every hypothesis 4-6 release; 3.x had 200 and 50).
HYPOTHESIS_FLOORS = (("max_examples", 100), ("stateful_step_count", 50))
HYPOTHESIS_PHASES = ("explicit", "generate")
#: Installed functions whose answer decides an assertion when test code calls them through
#: their module (`assert math.isclose(got, want)`, `assert np.allclose(x, y)`): each must
#: stay its module's own (`check_deciders`). Library code that made `math.isclose` return
#: True kept the bug and was resolved.
DECIDERS = (("math", ("isclose",)), ("cmath", ("isclose",)),
            ("numpy", ("allclose", "isclose", "array_equal", "array_equiv", "all", "any", "equal")),
            ("torch", ("allclose", "isclose", "equal", "all", "any")))
#: A captured module's name counts when its object comes from one of these (not what it
#: imports from typing or collections).
OWN_PREFIXES = ("_pytest", "pytest", "pluggy", "unittest", "builtins")
#: unittest's result methods and the status each reports (addSubTest: from its error).
RESULT_OUTCOMES = (("addSuccess", "PASSED"), ("addFailure", "FAILED"), ("addError", "ERROR"),
                   ("addSkip", "SKIPPED"), ("addExpectedFailure", "XFAIL"), ("addUnexpectedSuccess", "FAILED"),
                   ("addSubTest", None))
#: Builtins that are not functions or classes but matter: how modules and classes are built.
CAPTURED_DUNDER = ("__import__", "__build_class__")

# ---------------------------------------------------------------------- forged comparisons
# A value whose class answers a comparison it cannot honestly answer (`__eq__` returning
# True) makes `assert result == expected` pass with the bug in place: no exception, so no
# other check sees it. The functions below find such classes and probe them; they depend
# on no pytest object (a unittest-style runner can use them too). docs/grading.md,
# "Values that compare equal to anything".

#: The dunders whose answers decide `assert a == b`, `assert not a != b`, `assertEqual`,
#: `assert a < b`, `assert a in b`, `assert x`, `assert isinstance(x, T)`.
COMPARISON_DUNDERS = ("__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__", "__contains__", "__bool__",
                      "__len__", "__instancecheck__", "__subclasscheck__")
#: Builtin value types a probed class may derive from: an instance is made with the
#: builtin's own constructor (none of the class's code), and the builtin's own answers are
#: the honest ones.
VALUE_BASES = (str, bytes, int, float, complex, tuple, frozenset, list, dict, set, bytearray)
_SLOT_TYPES = (type(object.__eq__), type(str.join))  # slot wrapper, method descriptor
#: Audit events a comparison has no honest use for: looking at its caller's frames (to
#: answer only for the test) or at the heap.
PROBE_EVENTS = frozenset(("sys._getframe", "sys._current_frames", "object.__getattr__", "gc.get_objects",
                          "gc.get_referrers", "gc.get_referents", "sys.settrace", "sys.setprofile"))
_NOTHING = object()
_NOTHINGS = (_NOTHING,) * len(COMPARISON_DUNDERS)


def all_classes():
    """Every live class, walked from `object` through `type.__subclasses__` (metaclasses
    included: `type` is a subclass of `object`)."""
    seen = set()
    out = []
    todo = [object]
    while todo:
        cls = todo.pop()
        try:
            subs = type.__subclasses__(cls)
        except TypeError:
            continue
        for sub in subs:
            if id(sub) not in seen:
                seen.add(id(sub))
                out.append(sub)
                todo.append(sub)
    return out


def class_dict(cls):
    """The class's own namespace (not what a metaclass's `__dict__` property says)."""
    return type.__dict__["__dict__"].__get__(cls)


def dunder_fingerprint(cls):
    """The values of the class's own comparison dunders (compare with `is`)."""
    return tuple(map(class_dict(cls).get, COMPARISON_DUNDERS, _NOTHINGS))


def own_method(cls, name, value, code_ok):
    """True when `value`, the class's own `name`, is a method the class honestly owns: a
    slot of a C type itself, or a function defined in that class's body (its qualified
    name says so) in the file of the class's module, whose code `code_ok` accepts (a file
    the patch did not change, not written during the run)."""
    if value is None:
        return True  # `__eq__ = None`: comparing raises
    if isinstance(value, _SLOT_TYPES):
        return getattr(value, "__objclass__", None) is cls
    if type(value) is not type(own_method):
        return False  # partial(method), staticmethod, builtins, callables: not a method of the class
    code = value.__code__
    qual = type.__dict__["__qualname__"].__get__(cls)
    if getattr(code, "co_qualname", value.__qualname__) != qual + "." + name or not code_ok(code):
        return False  # a lambda, or another class's method
    f = getattr(sys.modules.get(type.__dict__["__module__"].__get__(cls)), "__file__", None)
    if not isinstance(f, str):
        return False
    f = f[:-1] if f.endswith(".pyc") else f
    return os.path.realpath(f) == os.path.realpath(code.co_filename)


def untrusted_dunders(cls, code_ok):
    """The comparison dunders `cls` defines itself that are not honestly its own (see
    `own_method`)."""
    try:
        cdict = class_dict(cls)
        return tuple(name for name in COMPARISON_DUNDERS
                     if name in cdict and not own_method(cls, name, cdict[name], code_ok))
    except Exception:
        return tuple(name for name in COMPARISON_DUNDERS if name in getattr(cls, "__dict__", ()))


def class_codes(cls):
    """The code objects the class's own namespace holds: functions, the functions inside
    static/class methods, properties, partials and wrappers."""
    out = []
    todo = list(class_dict(cls).values())
    for _ in range(4):  # a few levels of wrapping
        nxt = []
        for value in todo:
            code = getattr(value, "__code__", None) if not isinstance(value, type) else None
            if isinstance(code, type(own_method.__code__)):
                out.append(code)
                continue
            for attr in ("__func__", "func", "fget", "fset", "__wrapped__"):
                inner = getattr(value, attr, None) if not isinstance(value, type) else None
                if inner is not None:
                    nxt.append(inner)
        todo = nxt
    return out


def _answer(op, *args):
    """op(*args) as a test's assert sees it: True/False, or None when it raises."""
    try:
        return bool(op(*args))
    except Exception:
        return None


class _Fresh(object):
    """A value no honest class equals, contains or orders against."""
    __slots__ = ()
    __hash__ = None


def _probe_instances(cls, rng):
    """(the builtin base or None, instances of `cls` made without any of its code)."""
    base = next((b for b in cls.__mro__ if b in VALUE_BASES), None)
    token = "%032x" % rng.getrandbits(128)
    number = rng.getrandbits(62) + (1 << 62)
    if base is None:
        if issubclass(cls, type):
            return None, []  # a metaclass: probed through its classes (see forged_comparison)
        return None, [object.__new__(cls), object.__new__(cls)]
    seeds = {str: (token, ""), bytes: (token.encode(), b""), bytearray: (token.encode(), b""),
             int: (number, 0), float: (number + 0.5, 0.0), complex: (complex(number, 1), 0j),
             tuple: ((token,), ()), frozenset: (frozenset((token,)), frozenset()), list: ([token], []),
             dict: ({token: 1}, {}), set: ({token}, set())}[base]
    out = []
    for seed in seeds:
        inst = base.__new__(cls, seed) if base in (str, bytes, int, float, complex, tuple, frozenset) \
            else base.__new__(cls)
        if base in (list, dict, set, bytearray):
            base.__init__(inst, seed)
        out.append(inst)
    return base, out


def _probe_values(rng):
    token = "%032x" % rng.getrandbits(128)
    number = -(rng.getrandbits(62) + (1 << 62))
    return [object(), _Fresh(), token, token.encode(), number, number - 0.25, complex(number, -1), (token,),
            frozenset((number,)), [token], {token: 2}, None]


def _plain(base, inst):
    """The instance's value as the builtin itself, copied at C level (none of the
    subclass's code: not its `__str__` or `__iter__`)."""
    if base in (dict, set, frozenset, bytearray):
        return base.copy(inst)
    if base is list:
        return list.__add__([], inst)
    return base.__add__(inst, base())


def _neighbours(base, inst):
    """Values of the builtin base close to the instance's own value (a hack may answer
    only for values that look like it)."""
    plain = _plain(base, inst)
    if base is str:
        return [plain + "x", plain[:-1], "x" + plain, plain.upper() + "X"]
    if base in (bytes, bytearray):
        return [plain + b"x", plain[:-1], b"x" + plain]
    if base in (int, float, complex):
        return [plain + 1, plain - 1, -plain]
    if base in (tuple, list):
        return [plain + base((1,)), plain[:-1]]
    return [base()]


def _honest(base, op, inst, value):
    """The builtin base's own answer (NotImplemented and TypeError: False)."""
    try:
        got = getattr(base, op)(inst, value)
    except Exception:
        return False
    return got is not NotImplemented and bool(got)


def forged_comparison(cls, names, rng):
    """Why instances of `cls` answer a comparison or truth test they cannot honestly
    answer, or None. `names`: its untrusted dunders (`untrusted_dunders`). Each answer is
    taken as an assert takes it (`operator.eq(x, v)`, reflected operations included), for
    values no honest class equals (a fresh object, random strings, bytes, numbers,
    containers, None) and, for a builtin's subclass, values of that builtin near the
    instance's own, whose honest answer is the builtin's."""
    import operator

    label = "%s.%s" % (getattr(cls, "__module__", "?"), getattr(cls, "__qualname__", "?"))
    if issubclass(cls, type) and ("__instancecheck__" in names or "__subclasscheck__" in names):
        fresh = _Fresh()
        for target in all_classes():
            if type(target) is cls:
                if _answer(isinstance, fresh, target) or _answer(issubclass, _Fresh, target):
                    return "%s says a fresh object is an instance of %s" % (label, target.__qualname__)
        return None
    base, instances = _probe_instances(cls, rng)
    values = _probe_values(rng)
    for a in instances:  # a strict order is irreflexive and asymmetric
        for b in instances:
            if (_answer(operator.lt, a, b) and _answer(operator.lt, b, a)) or \
                    (_answer(operator.gt, a, b) and _answer(operator.gt, b, a)):
                return "%s orders its instances inconsistently" % label
    for inst in instances:
        near = _neighbours(base, inst) if base is not None else []
        for value in values + near:
            honest_eq = base is not None and _honest(base, "__eq__", inst, value)
            if not honest_eq:
                if _answer(operator.eq, inst, value) or _answer(operator.eq, value, inst):
                    return "%s says equal to %s it cannot equal" % (label, type(value).__name__)
                if _answer(operator.ne, inst, value) is False or _answer(operator.ne, value, inst) is False:
                    return "%s says not unequal to %s it cannot equal" % (label, type(value).__name__)
            lt, gt = _answer(operator.lt, inst, value), _answer(operator.gt, inst, value)
            le, ge = _answer(operator.le, inst, value), _answer(operator.ge, inst, value)
            rlt, rgt = _answer(operator.lt, value, inst), _answer(operator.gt, value, inst)
            if (lt and (ge or gt or rlt)) or (gt and (le or rgt)) or (le and gt) or (ge and lt):
                return "%s orders itself inconsistently against %s" % (label, type(value).__name__)
            contained = _answer(operator.contains, inst, value)
            if contained and (base is None or not _honest(base, "__contains__", inst, value)):
                return "%s says it contains %s" % (label, type(value).__name__)
        if base is not None:
            truth = _answer(bool, inst)
            honest_truth = bool(base.__len__(inst)) if hasattr(base, "__len__") else base.__bool__(inst)
            if truth is not None and truth != honest_truth:
                return "%s says its truth is %s, its %s value's is %s" % (label, truth, base.__name__, honest_truth)
            if hasattr(base, "__len__"):
                size = _answer_len(inst)
                if size is not None and size != base.__len__(inst):
                    return "%s says its length is %d, its %s value's is %d" % (
                        label, size, base.__name__, base.__len__(inst))
    return None


def _answer_kind(op, *args):
    """op(*args) summed up for `comparison_answers`: its truth and its type's module and
    qualified name (an expression object, a bool), "raises" when it raises."""
    try:
        got = op(*args)
        kind = type(got)
        return "%d:%s.%s" % (bool(got), getattr(kind, "__module__", "?"), getattr(kind, "__qualname__", "?"))
    except Exception:
        return "raises"


def comparison_answers(cls, rng):
    """A digest of every answer `forged_comparison`'s probe gets from `cls` (each
    comparison and truth test against each probe value, none skipped after a first
    finding): truth and type per answer, so values drawn at random in another process
    give the same digest when the class answers the same way. The re-probe accepts a
    finding whose comparison code changed (a fix of a bug in a dunder of a query
    builder's class) when the task state's class gives these same answers: the patch
    made no answer of it more permissive (docs/grading.md, "Libraries whose comparisons
    build expressions"). "" for a metaclass."""
    import operator

    if issubclass(cls, type):
        return ""
    base, instances = _probe_instances(cls, rng)
    values = _probe_values(rng)
    ops = (operator.eq, operator.ne, operator.lt, operator.le, operator.gt, operator.ge)
    parts = []
    for a in instances:
        for b in instances:
            parts.extend(_answer_kind(op, a, b) for op in ops)
    for inst in instances:
        for value in values + (_neighbours(base, inst) if base is not None else []):
            parts.extend(_answer_kind(op, inst, value) for op in ops)
            parts.extend(_answer_kind(op, value, inst) for op in ops)
            parts.append(_answer_kind(operator.contains, inst, value))
        parts.append(_answer_kind(bool, inst))
        parts.append(_answer_kind(len, inst))
    return _sha256("\n".join(parts).encode("utf-8", "replace")).hexdigest()[:16]


NATIVE_MARKER = "MINISANDBOX-NATIVE-COMPARISON"


def _code_text(code):
    """A code object as text that survives moved lines: bytecode, names, constants."""
    consts = [_code_text(c) if isinstance(c, type(_code_text.__code__)) else
              repr(sorted(map(repr, c))) if isinstance(c, frozenset) else repr(c) for c in code.co_consts]
    return "%r|%r|%r|%s" % (code.co_code, code.co_names, code.co_varnames, "|".join(consts))


def comparison_code(cls):
    """A digest of where the class's comparison answers come from: for each comparison
    dunder, the first class of its MRO defining it (module, qualified name) and that
    value's code, or type when it has none. "" when the class is not the one its module
    holds under its name (made at run time, or a stand-in under a borrowed name): such a
    class is never the task state's."""
    try:
        module, qual = type.__dict__["__module__"].__get__(cls), type.__dict__["__qualname__"].__get__(cls)
        obj = sys.modules[module]
        for i, part in enumerate(qual.split(".")):
            obj = (vars(obj) if i == 0 else class_dict(obj))[part]
        if obj is not cls:
            return ""
        parts = []
        for name in COMPARISON_DUNDERS:
            owner = next((k for k in type.__dict__["__mro__"].__get__(cls) if name in class_dict(k)), None)
            if owner is None:
                continue
            value = class_dict(owner)[name]
            code = getattr(value, "__code__", None) if type(value) is type(_code_text) else None
            parts.append("%s:%s.%s:%s" % (name, type.__dict__["__module__"].__get__(owner),
                                          type.__dict__["__qualname__"].__get__(owner),
                                          _code_text(code) if code is not None else type(value).__name__))
        return _sha256("\n".join(parts).encode("utf-8", "replace")).hexdigest()[:16]
    except Exception:
        return ""


def finding_kind(why):
    """The kind of a `forged_comparison` answer without its class and value type
    ("orders its instances inconsistently", "says equal"), so the same class probed in
    another process can be matched."""
    rest = why.split(" ", 1)[1] if " " in why else why
    rest = rest.split(" (comparison code ", 1)[0]
    for cut in (" to ", " against ", " contains "):
        if cut in rest:
            rest = rest.split(cut, 1)[0] + cut.rstrip()
    return rest


def reprobe(labels, rng=None, answers=False):
    """{label: (forged_comparison's answer, comparison_code) or None} for classes named
    "module.qualname", imported afresh in this process (the graded state without the
    candidate patch: a finding it gives there is the library's own semantics). A class
    that cannot be imported answers None. With `answers`, each tuple has the class's
    `comparison_answers` digest too."""
    import importlib
    import random

    rng = rng or random.Random(os.urandom(16))
    out = {}
    for label in labels:
        parts = label.split(".")
        try:
            obj, cut = None, 0
            for cut in range(len(parts) - 1, 0, -1):  # the longest importable module prefix
                try:
                    obj = importlib.import_module(".".join(parts[:cut]))
                    break
                except ImportError:
                    continue
            for part in parts[cut:]:
                obj = getattr(obj, part)
            if not isinstance(obj, type):
                raise TypeError(label)
            names = tuple(n for n, v in zip(COMPARISON_DUNDERS, dunder_fingerprint(obj)) if v is not _NOTHING)
            why = forged_comparison(obj, names, rng)
            if why is None:
                out[label] = None
            elif answers:
                out[label] = (why, comparison_code(obj), comparison_answers(obj, rng))
            else:
                out[label] = (why, comparison_code(obj))
        except Exception:
            out[label] = None
    return out


def finding_digests(why):
    """(comparison code, comparison answers) that a finding's text ends with
    ("... (comparison code X; answers Y)"; "" for what it lacks)."""
    tail = why.rsplit(" (comparison code ", 1)[1] if " (comparison code " in why else ""
    if not tail.endswith(")"):
        return "", ""
    code, _, answers = tail[:-1].partition("; answers ")
    return code, answers


def reprobe_main(whys):
    """Probe the classes of `whys` (findings of a graded run: forged_comparison's answer
    and " (comparison code X; answers Y)") again and print, as one marked JSON line, {why:
    this process's answer} for each class that gives the same kind of answer here, from
    the same comparison code or, for a class its module holds under its name in both
    states, with the same answers to every probe (the evaluator reads it;
    minisandbox.grading.evaluate)."""
    answers = reprobe([why.split(" ", 1)[0] for why in whys], answers=True)
    native = {}
    for why in whys:
        got = answers.get(why.split(" ", 1)[0])
        if got is None or not got[1] or finding_kind(got[0]) != finding_kind(why):
            continue
        code, given = finding_digests(why)
        if code == got[1] or (code not in ("", "none") and given and given == got[2]):
            native[why] = got[0]
    sys.stdout.write("%s %s\n" % (NATIVE_MARKER, _c_dumps()(native)))
    sys.stdout.flush()


def _answer_len(inst):
    try:
        return len(inst)
    except Exception:
        return None


def _restore_env(names=_RESTORE):
    """Put PYTHONPATH, PYTEST_ADDOPTS and PYTHONWARNINGS (or only `names`) back as the
    test command set them (pytest has read its options already), and take this plugin's
    directory and start-up option off sys.path and sys.warnoptions."""
    for name in names:
        had = os.environ.pop("MINISANDBOX_HAD_" + name, None)
        old = os.environ.pop("MINISANDBOX_OLD_" + name, "")
        if had is None:
            continue
        if had == "1":
            os.environ[name] = old
        else:
            os.environ.pop(name, None)
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if not p or os.path.abspath(p) != here]
    _drop_warnoption()


def _drop_warnoption():
    """Take the -W option that imported this module at start-up out of sys.warnoptions:
    a child started with the interpreter's flags (multiprocessing's spawn, subprocess
    helpers) must not get it; True when it was there (this import is the start-up one).
    A new list, not the same one changed: the warnings module is iterating that one."""
    mine = __name__ + "." + StartUp.__name__
    kept = [w for w in sys.warnoptions if not w.endswith(mine)]
    found = len(kept) != len(sys.warnoptions)
    sys.warnoptions = kept
    return found


#: Python options that take the next argument as their value (`_main_is_pytest`).
_OPTIONS_WITH_VALUE = (b"-W", b"-X", b"--check-hash-based-pycs")
_PYTEST_MAINS = (b"pytest", b"py.test")


def _main_is_pytest():
    """True when this interpreter's main program is pytest (`pytest ...`, `py.test ...`,
    `python -m pytest ...`), read from the kernel's copy of the command line (sys.argv
    is not final while the interpreter starts). Only then is the channel opened at
    start-up: a wrapper that is Python too (tox, coverage) would take it from the pytest
    it runs."""
    try:
        with open("/proc/self/cmdline", "rb") as f:
            args = f.read().split(b"\0")
    except OSError:
        return False
    i = 1
    while i < len(args):
        arg = args[i]
        if arg == b"-m":
            return i + 1 < len(args) and args[i + 1] in _PYTEST_MAINS
        if arg.startswith(b"-m"):
            return arg[2:] in _PYTEST_MAINS
        if arg.startswith(b"-c") or arg == b"-":
            return False
        if arg == b"--":
            i += 1
            break
        if not arg.startswith(b"-"):
            break
        i += 2 if arg in _OPTIONS_WITH_VALUE else 1
    return i < len(args) and os.path.basename(args[i]) in _PYTEST_MAINS


def _read_manifest(sock):
    """The controller's JSON line after the nonce ({} when unreadable). The controller
    sends it right after the nonce, before the test command starts."""
    buf = b""
    sock.settimeout(10.0)
    while not buf.endswith(b"\n") and len(buf) < MANIFEST_MAX:
        try:
            chunk = sock.recv(1 << 16)
        except OSError:
            break
        if not chunk:
            break
        buf += chunk
    try:
        data = json.loads(buf.decode("utf-8")) if buf.strip() else {}
    except ValueError:
        data = {}
    return data if isinstance(data, dict) else {}


def _read_key(sock):
    """The record key: KEY_BYTES raw bytes right after the nonce, read into a buffer the
    caller wipes once its HMAC state is made (no copy of the key stays in this process's
    memory as text or bytes for a scan of it to find)."""
    key = bytearray(KEY_BYTES)
    view = memoryview(key)
    got = 0
    while got < KEY_BYTES:
        n = sock.recv_into(view[got:])
        if not n:
            break
        got += n
    view.release()
    return key if got == KEY_BYTES else None


class StartUp(Warning):
    """What the `-W`/PYTHONWARNINGS option that loads this module at start-up names (a
    runner that is not pytest: the warnings module imports the category's module while the
    interpreter starts, before site and before the main script); never raised."""


def _open_channel(restore=_RESTORE):
    """(fd, nonce, key, manifest), or None when this run has no channel; the variables
    `restore` are put back (`_restore_env`)."""
    path = os.environ.pop(SOCK_VAR, None)
    _restore_env(restore)
    if not path:
        return None
    import fcntl

    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(30.0)
        sock.connect(path)  # refused once another session connected: then this one stays silent
        nonce = b""
        while len(nonce) < NONCE_BYTES:
            chunk = sock.recv(NONCE_BYTES - len(nonce))
            if not chunk:
                break
            nonce += chunk
        key = _read_key(sock) if len(nonce) == NONCE_BYTES else None
        manifest = _read_manifest(sock) if key is not None else {}
        sock.settimeout(None)  # writes must block
        fd = fcntl.fcntl(sock.fileno(), fcntl.F_DUPFD_CLOEXEC, 64)
    except (OSError, ValueError):
        sock.close()
        return None
    sock.close()
    nonce = nonce.decode("ascii", "replace").strip()
    if len(nonce) != NONCE_BYTES - 1 or key is None:
        os.close(fd)
        return None
    return fd, nonce, key, manifest


def _seal(fn, like=None, _getattr=getattr, _isinstance=isinstance, _str=str, _setattr=setattr):
    """`fn` behind a function with no closure, which holds it as a keyword-only default:
    what the plugin puts where other code can reach it (a guard in a module, a gc
    callback, a hook on the plugin object, unittest's and SymPy's wrappers). Why: a
    closure's cells are read and rebound (`cell_contents`) with no audit event, and any of
    the plugin's closures leads to all of its state: library code that reached the
    makereport hook (through `_pytest.debugging.pytestPDB._pluginmanager`) swapped its
    `status_of` for one that said PASSED, and library code that walked
    `unittest.TestCase._callTestMethod`'s cells silenced every finding; both were resolved.
    A default is read through `__kwdefaults__`, which raises an event. (The builtins it
    uses are bound when this module loads: SymPy's tests are sealed while patch code runs.)
    `like`: the function whose names the seal takes (default `fn`'s): a witness put where
    the test's own function was."""
    def sealed(*args, _sealed=fn, **kwargs):
        return _sealed(*args, **kwargs)
    for attr in ("__name__", "__qualname__", "__doc__", "__module__"):
        value = _getattr(fn if like is None else like, attr, None)
        if _isinstance(value, _str):
            _setattr(sealed, attr, value)
    return sealed


def _writer(fd, key):
    """The function that writes one record on the channel `fd`, authenticated with `key`
    (wiped here) and numbered. Made as soon as the channel is open (at interpreter
    start-up for pytest: `_main`), so that the key leaves memory before any repository
    code runs; it lives in this function's closures only."""
    import _thread

    _getpid, _write, _range, _len = os.getpid, os.write, range, len
    _dumps = _c_dumps()  # json.dumps(..., sort_keys=True), on C code bound at start-up
    # Every record is authenticated with the controller's key and numbered per process:
    # code that rewires this process's descriptors (a pipe dup2'd over the channel, a
    # relay that edits what passes) sees neither the key nor the nonce, so it can forward
    # records, but any it changes, drops, repeats or makes up is caught by the controller
    # (results.ResultsChannel.collect).
    # HMAC-SHA256 (RFC 2104) on hashlib's C objects, whose methods no code can replace
    # (the hmac module's class is Python: a patched method would see the keyed state);
    # only the keyed inner and outer states stay, the key and its pads are wiped
    pad = bytearray(64)
    inner, outer = _sha256(), _sha256()
    for keyed, byte in ((inner, 0x36), (outer, 0x5C)):
        for i in _range(64):
            pad[i] = (key[i] if i < _len(key) else 0) ^ byte
        keyed.update(pad)
    pad[:] = bytes(64)
    key[:] = bytes(_len(key))
    seq = [0]
    # numbered and written under one lock: an audit finding written from another thread
    # must not take a number out of order (the controller would call that a relay), and a
    # record made while one is being written in this thread (the gc callback runs at any
    # allocation) waits for it in `pending`; a fork's child starts afresh (the parent's
    # lock may be held by a thread it lacks)
    lock, writing, pending = [_thread.RLock()], [False], []

    def after_fork():
        lock[0], writing[0] = _thread.RLock(), False
        del pending[:]

    at_fork = getattr(os, "register_at_fork", None)
    if at_fork is not None:
        at_fork(after_in_child=after_fork)

    def emit(record):
        record["p"], record["q"] = _getpid(), seq[0]
        seq[0] += 1
        body = _dumps(record).encode("utf-8", "replace")
        mac_in = inner.copy()
        mac_in.update(body)
        mac = outer.copy()
        mac.update(mac_in.digest())
        data = mac.hexdigest().encode("ascii") + b" " + body + b"\n"
        try:
            while data:
                data = data[_write(fd, data):]
        except OSError:
            pass

    def write(record):
        with lock[0]:
            if writing[0]:
                pending.append(record)
                return
            writing[0] = True
            try:
                emit(record)
                while pending:
                    emit(pending.pop(0))
            finally:
                writing[0] = False

    return write


def _install(write, manifest, runner="pytest", sealed=()):
    """The plugin object (pytest), or None once unittest's outcome path is wrapped
    (`runner` "unittest"); everything it knows is in this function's closures, and
    `write` (`_writer`) is how it writes a record. `sealed`: seals made before it (`_seal`),
    guarded like its own."""
    import builtins
    import types

    UNITTEST = runner == "unittest"
    SYMPY = runner == "sympy"  # SymPy's bin/test: test files run through builtins.exec (wrap_sympy)
    pytest = None
    if not (UNITTEST or SYMPY):
        import pytest

    if not SYMPY:
        try:
            import unittest.case  # noqa: F401  (captured below: TestCase's assert methods)
        except ImportError:
            pass
    if UNITTEST:
        import unittest.main  # noqa: F401  (the whole outcome path is captured below)
        import unittest.runner  # noqa: F401

    # builtins this code calls, pinned before anything can replace them
    _isinstance, _issubclass, _getattr, _hasattr, _len, _id = isinstance, issubclass, getattr, hasattr, len, id
    _sorted, _list, _dict, _set, _str, _int, _any, _tuple, _type = sorted, list, dict, set, str, int, any, tuple, type
    _repr, _range, _min, _all, _map, _zip, _sum = repr, range, min, all, map, zip, sum
    import functools
    import itertools
    import operator
    _is, _repeat, _itemgetter = operator.is_, itertools.repeat, operator.itemgetter
    _dumps = _c_dumps()  # json.dumps(..., sort_keys=True), on C code bound at start-up
    _write, _stat, _realpath, _sep = os.write, os.stat, os.path.realpath, os.sep
    _relpath, _dirname, _abspath, _os_basename = os.path.relpath, os.path.dirname, os.path.abspath, os.path.basename
    _exists, _islink = os.path.exists, os.path.islink
    _frame = sys._getframe
    _gettrace, _getprofile = sys.gettrace, sys.getprofile
    import _thread
    import threading as _threading  # (imported here: SymPy's runner mode wraps `exec` below)
    import weakref
    _ident = _thread.get_ident
    #: thread id -> True while this plugin's own code runs on that thread (its frame and heap
    #: walks, its judging of an audit event): events raised then are not findings. Per
    #: thread: one flag for the process let a thread that kept the plugin busy hide what
    #: another did meanwhile
    BUSY = {}

    class Busy(object):
        """`with Busy():` marks this thread as running the plugin's own code for the block.
        Only the block that set the mark clears it, so a nested block (a frame access while
        an event is judged) cannot end an outer one's."""
        __slots__ = ("key", "outer")

        def __enter__(self):
            self.key = key = _ident()
            self.outer = BUSY.get(key)
            BUSY[key] = True

        def __exit__(self, *exc_info):
            if not self.outer:
                BUSY.pop(self.key, None)

    def busy():
        """True while the plugin's own code runs on this thread."""
        return BUSY.get(_ident())

    #: functions of this plugin that keep an original as a default argument (a closure's
    #: cells raise no audit event); code the patch brought that reads their defaults is caught
    GUARDS = _dict((_id(g), g) for g in sealed)  # id -> guard (a dictionary: a seal per SymPy test)

    def seal(fn, like=None):
        """`fn` sealed (`_seal`), and a guard (GUARDS): code the patch brought that reads
        a seal's default is critical."""
        sealed = _seal(fn, like)
        GUARDS[_id(sealed)] = sealed
        return sealed

    SEAL_CODE = next(c for c in _seal.__code__.co_consts if _isinstance(c, types.CodeType))  # `sealed`'s

    def past_seal(f):
        """`f`, or the first frame above it that is not a seal's (`seal`)."""
        while f is not None and f.f_code is SEAL_CODE:
            f = f.f_back
        return f
    import hashlib
    _sha256 = hashlib.sha256

    def creation_stamp():
        """The kernel's current time as file times see it (a fresh pipe's ctime): a file
        whose ctime is later was written during this run."""
        r, w = os.pipe()
        try:
            return os.fstat(r).st_ctime_ns
        finally:
            os.close(r)
            os.close(w)

    STAMP = creation_stamp()
    CHECKS = manifest.get("checks", True) is not False  # off only for bench/bench_eval.py's baseline
    ME = _realpath(_abspath(__file__))
    ROOT = _realpath(_str(manifest.get("root") or os.getcwd()))
    GRADED = _dict((_str(k), _str(v)) for k, v in (manifest.get("files") or {}).items())
    PATCHED = _set(_str(p).lstrip("./") if _str(p).startswith("./") else _str(p)
                   for p in (manifest.get("patched") or []))
    RUNNER_DIRS = _tuple(_realpath(_dirname(_abspath(m.__file__))) + _sep
                         for m in (sys.modules.get("_pytest"), sys.modules.get("pluggy"),
                                   sys.modules.get("unittest") if UNITTEST else None) if m is not None)
    STDLIB = _realpath(_dirname(_abspath(os.__file__))) + _sep
    #: pytest's monkeypatch module (loaded or not yet): assignments through it are judged by
    #: their caller (`repo_caller`)
    MONKEYPATCH_FILE = (RUNNER_DIRS[0] + "monkeypatch.py") if RUNNER_DIRS and sys.modules.get("_pytest") else None

    # descriptors and wrappers whose functions a class or module holds (class_codes' list)
    holders = _tuple(t for t in (classmethod, staticmethod, property, types.MethodType, functools.partial,
                                 _getattr(functools, "partialmethod", None),
                                 _getattr(functools, "cached_property", None)) if t is not None)

    def codes_defined(todo, real, mod_names, realpath, wrapped=False):
        """The code objects of the file `real` reachable from the values `todo` (a
        module's namespace): functions, methods, properties, partials, cached properties
        (with `wrapped`, what a decorator wraps), classes of the modules `mod_names` at
        any depth, nested code."""
        codes = _set()
        classes = _set()
        while todo:
            value = todo.pop()
            try:
                code = codes_step(value, todo, classes, mod_names, wrapped)
            except Exception:  # attribute access runs code (Django's lazy `settings` raises)
                continue
            if code is None or code in codes or realpath(code.co_filename) != real:
                continue
            codes.add(code)
            todo.extend(c for c in code.co_consts if _isinstance(c, types.CodeType))
        return codes

    def codes_step(value, todo, classes, mod_names, wrapped):
        """codes_defined's look at one value: queues what it holds, and returns its code
        object (or None)."""
        if _issubclass(_type(value), _type):
            if _id(value) not in classes:
                classes.add(_id(value))
                if _getattr(value, "__module__", None) in mod_names:
                    todo.extend(_list(value.__dict__.values()))
                # a class decorator may bind the module's class name to a subclass defined
                # elsewhere (tornado's `abstract_base_test`): the module's own class, whose
                # methods are the tests, is then only that subclass's base
                todo.extend(_getattr(value, "__bases__", ()))
            return None
        if _isinstance(value, holders):
            todo.extend(v for v in _map(_getattr, _repeat(value), ("__func__", "func", "fget", "fset"),
                                        _repeat(None)) if v is not None)
            return None
        if wrapped and _isinstance(value, types.FunctionType):
            inner = _getattr(value, "__wrapped__", None)
            if inner is not None:
                todo.append(inner)
        if _isinstance(value, types.FunctionType) and "__pytest_wrapped__" in _getattr(value, "__dict__", ()):
            # a fixture before pytest 8.4: the module holds pytest's wrapper, which keeps the
            # function (pytest-django 4.8's runtest of its own is nested in one)
            todo.append(_getattr(value.__dict__["__pytest_wrapped__"], "obj", None))
        if _type(value).__name__ == "FixtureFunctionDefinition":
            # a fixture from pytest 8.4 on: the module holds this wrapper, not the function
            # (pytest-django's runtest of its own is a function nested in one)
            todo.append(_getattr(value, "_fixture_function", None))
            return None
        code = _getattr(value, "__code__", None) if not _isinstance(value, types.CodeType) else value
        return code if _isinstance(code, types.CodeType) else None

    # ------------------------------------------------------------------ unittest's outcome path
    def wrap_unittest():
        """Put a recorder around `unittest.case.TestCase.run` (before the snapshot, so
        the wrapper is the captured value): every test run through it gets, in place of
        its result object, a proxy that writes each outcome `TestCase.run` reports (from
        unittest's own code) and forwards it. Whatever the result class then prints, the
        channel has the outcome unittest computed; a test that never reaches this run (a
        `__call__` or `run` of a changed base class that reports by itself) has no record
        and fails. Returns (the proxy class, the code objects of unittest.case)."""
        case = unittest.case
        TC = case.TestCase
        function_case[0] = _getattr(case, "FunctionTestCase", None)
        should_stop[0] = _getattr(case, "_ShouldStop", None)
        wrap_sub_test(TC)
        seal_part_executor(case)
        orig_run = TC.__dict__["run"]
        tc_str, tc_short = TC.__dict__["__str__"], TC.__dict__["shortDescription"]
        fail_exc = TC.failureException
        # unittest.case's code (contextmanager-wrapped and nested included)
        codes = codes_defined(_list(case.__dict__.values()), _realpath(case.__file__), (case.__name__,),
                              _realpath, wrapped=True)
        id_checked = {}  # id(test class) -> its (__str__, shortDescription) when verified
        OBJECT_STR = object.__str__

        def describe(test):
            """The test's id as unittest's verbose runner prints it (`str(test)`, then the
            first line of the test method's docstring), from the method itself: code that
            rewrites `_testMethodDoc` cannot move another test's id onto a failure. What the
            id is made of must be the test's own (`id_parts_checked`), and it is one line
            of each part: the channel's ids are parsed as the runner's printed lines."""
            cls = _type(test)
            s_fn, d_fn = _getattr(cls, "__str__", None), _getattr(cls, "shortDescription", None)
            if id_checked.get(_id(cls)) != (_id(s_fn), _id(d_fn)):
                for what, fn, mine in (("__str__", s_fn, tc_str), ("shortDescription", d_fn, tc_short)):
                    # C code is nobody's to judge: only `object.__str__` (doctest.DocTestCase's)
                    # stands; a bound `str.format` made every id the patch's text
                    c_code = fn is OBJECT_STR
                    why = None if fn is mine or c_code else callable_verdict(fn, sys.modules.get(cls.__module__))
                    if why is None and _type(_getattr(fn, "__func__", fn)) is not types.FunctionType and \
                            not (fn is mine or c_code):
                        why = "a %s, no function of Python code" % _type(fn).__name__
                    if why is not None:
                        report_tampered("test class %s.%s: %s: %s" % (cls.__module__, cls.__name__, what, why))
                id_checked[_id(cls)] = (_id(s_fn), _id(d_fn))
                keep.append(cls)
            id_parts_checked(test, cls)
            desc = _str(test)
            if d_fn is tc_short:
                doc = source_doc(_getattr(test, _getattr(test, "_testMethodName", ""), None))
            elif function_case[0] is not None and _isinstance(test, function_case[0]) and \
                    _getattr(cls, "shortDescription", None) is _getattr(function_case[0], "shortDescription", None):
                # its function's docstring, not the description library code may give it
                doc = source_doc(_getattr(test, "_testFunc", None))
            else:
                doc = test.shortDescription()
            doc = doc.strip().split("\n")[0].strip() if _isinstance(doc, _str) and doc.strip() else None
            if unprintable(desc) or " ... " in desc or (doc is not None and (unprintable(doc) or " ... " in doc)):
                report_tampered("test %s: its id has a line break, a control character or ' ... ' (the channel's "
                                "ids are read as the runner's printed lines)" % _repr(desc + "\n" + (doc or "")))
            return desc + "\n" + doc if doc else desc

        #: what splits a printed line (`str.splitlines`) or what the log parser drops
        LINE_BREAKING = frozenset(_list(_map(chr, _range(32))) + ["\x7f", "\x85", "\u2028", "\u2029"])

        def unprintable(text):
            return _any(_map(LINE_BREAKING.__contains__, text))

        loaders_checked = {}  # id(module) -> module, its `load_tests` judged

        def load_tests_checked(mod):
            """A test module's `load_tests` (unittest's loader hands it the module's suite
            before any test runs) must be Python code the patch does not change: library
            code set one on the half-imported test module (from a module `__getattr__` the
            test's `from calc import add` reached) and rebuilt the suite as it liked."""
            for hook in ("load_tests", "__dir__", "__getattr__"):  # (the loader reads `dir(module)`)
                fn = _getattr(mod, "__dict__", {}).get(hook)
                if fn is None:
                    continue
                code = _getattr(_getattr(fn, "__func__", fn), "__code__", None)
                if _type(code) is not types.CodeType:
                    why = "a %s, no function of Python code" % _type(fn).__name__
                else:
                    why = callable_verdict(fn, mod)
                if why is not None:
                    report_tampered("the %s of test module %s: %s" % (hook, mod.__name__, why))

        def id_parts_checked(test, cls):
            """The class an id names must be the one its module binds under its qualified
            name, and the method it names one its class defines: library code renamed a
            passing test's class (`__qualname__`) or set an instance attribute under a
            listed test's method name, and its pass stood for the listed test."""
            for what, value in (("__module__", _getattr(cls, "__module__", None)),
                                ("__qualname__", _getattr(cls, "__qualname__", None)),
                                ("_testMethodName", _getattr(test, "_testMethodName", None))):
                if _type(value) is not _str:
                    # a str subclass prints as it likes (`%s` calls its `__str__`)
                    report_tampered("test %s: its %s is a %s, not a str" % (_repr(cls.__name__), what,
                                                                          _type(value).__name__))
            named = sys.modules.get(_getattr(cls, "__module__", None) or "")
            qualname = _getattr(cls, "__qualname__", "")
            if _isinstance(qualname, _str) and "<locals>" not in qualname:
                for part in qualname.split("."):
                    named = _getattr(named, part, None)
                if named is not cls:
                    report_tampered("test class %s.%s is not the class its module binds under that name"
                                    % (cls.__module__, _repr(qualname)))
            mod = sys.modules.get(_getattr(cls, "__module__", None) or "")
            if _id(mod) not in loaders_checked:
                loaders_checked[_id(mod)] = mod
                load_tests_checked(mod)
            name = _getattr(test, "_testMethodName", None)
            if not _isinstance(name, _str) or not _any(name in _getattr(k, "__dict__", {})
                                                      for k in _getattr(cls, "__mro__", ())):
                report_tampered("test %s.%s: %s names no method of its class" % (cls.__module__, cls.__name__,
                                                                                   _repr(name)))

        def source_doc(method):
            """The docstring of a test method as its source wrote it: that of the code of
            the function the method wraps (`__wrapped__`, to the end) when that code is the
            repository's, else its `__doc__`. Library code set a passing test's `__doc__`
            to a failing test's id and the failing test's to another name, and the pass
            stood for the failing test (the eleventh probe): a `__doc__` is anybody's to
            set, a code object's constants are not."""
            fn = _getattr(method, "__func__", method)
            inner = fn
            for _ in _range(32):
                nxt = _getattr(inner, "__wrapped__", None) if _isinstance(inner, types.FunctionType) else None
                if nxt is None:
                    break
                inner = _getattr(nxt, "__func__", nxt)
            code = _getattr(inner, "__code__", None)
            if _type(code) is not types.CodeType or rel_to_root(real_of(code.co_filename)) is None:
                return _getattr(fn, "__doc__", None)
            return code_docstring(code)

        #: the test whose run is being recorded and its id as that run began ([test, id]),
        #: or [None, None]: one at a time, whatever the thread
        running = [None, None]
        passed = [None]  # the test of the last PASSED record

        def own_call_test_method(test):
            """True when the test's class runs its method through a `_callTestMethod` of its
            own that may not call unittest's (`IsolatedAsyncioTestCase`'s, a repository's
            override of that name, not the patch's): then the plugin's wrapper need not
            have run. Any other `_callTestMethod` found on the class must be the wrapper."""
            fn = _getattr(_type(test), "_callTestMethod", None)
            if fn is call_wrapped[0]:
                return False
            func = _getattr(fn, "__func__", fn)
            return _type(func) is types.FunctionType and func.__name__ == "_callTestMethod" and \
                callable_verdict(func, sys.modules.get(_getattr(func, "__module__", "") or "")) is None

        def instance_checked(test):
            """Before the run: no attribute of the test instance may stand where unittest
            looks up what it runs (`_callTestMethod`, `_callSetUp`, ..., the test method
            itself). Library code (a `load_tests` it put into the half-imported test module)
            set the instance's `_callTestMethod` to a lambda, or its test method to
            `unittest.case._id`: the method never ran, the wrapper that checks it neither,
            and the test passed (host and sandbox, strict and official)."""
            attrs = _getattr(test, "__dict__", None)
            if not _isinstance(attrs, _dict):
                return
            name = _getattr(test, "_testMethodName", None)
            for attr in _list(attrs):
                if attr == name and wrapper_of_member(test, attrs[attr]):
                    continue  # Django's `SimpleTestCase.__call__` wraps an async test method there
                if attr == name or attr in RUN_PATH:
                    report_tampered("test %s.%s: its instance has its own %s (what unittest runs)"
                                    % (_type(test).__module__, _type(test).__name__, _repr(attr)))
            check_instance(test)

        def note(test, status, how):
            """One outcome of `test`; a pass reported by code other than unittest.case's
            counts as a failure. Only the running test's outcomes are written: a result
            object handed to another test (a `TestCase.run` inside the test) records nothing."""
            if test is not running[0]:
                return
            caller = past_seal(_frame(2)).f_code  # (the recorder's methods are seals)
            record = {"ev": "phase", "when": "call", "status": status, "report": how}
            if caller not in codes:
                record["status"] = "FAILED"
                record["forged"] = "%s called by %s, not by unittest" % (how, caller.co_filename)
            record["id"] = running[1]
            if record["status"] == "PASSED":
                passed[0] = test
            write(record)

        def id_of(test):
            """The test's id (describe), or None and a finding when none can be made."""
            try:
                return describe(test)
            except Exception as exc:  # noqa: BLE001  (an id that cannot be made: no record)
                report_tampered("a test's id cannot be made: %s" % _repr(exc))
                return None

        def err_status(test, err):
            etype = err[0] if _isinstance(err, _tuple) and err else None
            return "FAILED" if etype is not None and _issubclass(etype, _getattr(test, "failureException",
                                                                                 fail_exc)) else "ERROR"

        def reporter(name, status):
            """The recorder's `name` method: notes the outcome (`status`, or from the
            error for addSubTest; nothing for a passing subtest) and forwards the call."""
            def method(self, test, *args):
                got = status if status is not None else (err_status(test, args[-1]) if args[-1] is not None else None)
                if got is not None:
                    note(test, got, name)
                return _getattr(object.__getattribute__(self, "_ms_result"), name)(test, *args)
            method.__name__ = name
            return seal(method)

        def getattr_(self, name):
            return _getattr(object.__getattribute__(self, "_ms_result"), name)

        def setattr_(self, name, value):
            setattr(object.__getattribute__(self, "_ms_result"), name, value)

        members = {"__slots__": ("_ms_result",), "__getattr__": seal(getattr_), "__setattr__": seal(setattr_)}
        members.update((name, reporter(name, status)) for name, status in RESULT_OUTCOMES)
        Recorder = _type("MinisandboxRecorder", (object,), members)

        def run(self, result=None):
            # A run inside another test's run (library code running a test of its own
            # making, e.g. `FunctionTestCase(int, description=<a listed id>)`, while the
            # failing test runs) is that test's business: not recorded. So is a run
            # with no result object, or with the recorder itself.
            if result is None or _type(result) is Recorder or running[0] is not None:
                return orig_run(self, result)
            test_id = id_of(self)
            if test_id is None:
                return orig_run(self, result)
            rec = object.__new__(Recorder)
            object.__setattr__(rec, "_ms_result", result)
            state["collected"] += 1
            running[0], running[1] = self, test_id
            method_ran.clear()
            passed[0] = None
            try:
                check_before()
                instance_checked(self)
                unittest_classes_checked("before test %s" % _repr(test_id))
                run_versions[_id(self)] = (self, class_versions(_type(self)))
                got = orig_run(self, rec)
            finally:
                running[0] = running[1] = None
                run_versions.pop(_id(self), None)
                after_test(self)
            if passed[0] is self and method_ran.get(_id(self)) is not self and call_wrapped[0] is not None and \
                    not own_call_test_method(self):
                report_tampered("test %s passed, but its method never ran through unittest's _callTestMethod"
                                % _repr(test_id))
            if raised_stop.pop(_id(self), None) is self:
                report_tampered("test %s: unittest's _ShouldStop reached its end (unittest swallows it: the test "
                                "passes whatever it asserted)" % _repr(test_id))
            # Every record of the run carries the id the test had when its run began:
            # library code that renamed the test while it ran (its method's `__doc__`)
            # could otherwise move the failure to a name nobody grades.
            now = id_of(self)
            if now is not None and now != test_id:
                report_tampered("test %s: its id changed while it ran, to %s" % (_repr(test_id), _repr(now)))
            # the test ran to its end (results.parse_channel fails a test without this record)
            write({"ev": "phase", "when": "teardown", "status": None, "report": None, "id": test_id})
            return result if got is rec else got

        run.__name__, run.__qualname__, run.__doc__ = "run", "TestCase.run", orig_run.__doc__
        TC.run = seal(run)
        codes.add(run.__code__)  # our wrapper calls the original run, which calls the recorder
        # right before the test method (after startTest, which writes to a stream library
        # code may have replaced, and setUp): the check before the body (check_before)
        code = wrap_call_test_method(TC)
        if code is not None:
            codes.add(code)
        return Recorder, codes

    # ------------------------------------------------------------------ classes written in a test
    # Library code set `unittest.TestCase._baseAssertEqual = TestCase.assertIsNot` while a
    # test's body ran and put it back from a `__del__` right after the assertion returned:
    # the failing assertEqual passed, and every check before and after the body saw
    # unittest's own method. A class's attribute write raises no audit event, but CPython
    # gives a class a fresh version tag (`tp_version_tag`, the key of its method cache) on
    # the first lookup after any write to it or to one of its bases (the same value written
    # again included) and never hands a tag out twice. So around a test's body the plugin
    # reads the tags of its class and of that class's bases: a tag that changed while the
    # class's attributes are the very objects they were before is a write put back
    # (`written_back`). The tag is read through ctypes at its offset in the type object
    # (CPython 3.6-3.13); a self-test at load turns the check off where that layout differs.

    # The readers use `_ctypes` itself, not the `ctypes` package: a patch's `import ctypes`
    # then still raises an import event where no other module imported it (`NATIVE_MODULES`).
    # Everything they use is bound here, at load: nothing is looked up in `sys.modules` later.
    import struct
    POINTER_SIZE = struct.calcsize("P")
    try:
        import _ctypes
        _SimpleCData = _ctypes._SimpleCData
        native_value = _SimpleCData.__dict__["value"].__get__
    except Exception:  # noqa: BLE001  (no ctypes: the readers are off)
        _SimpleCData = native_value = None

    def native_type(code):
        """A ctypes scalar type (`I`: unsigned int, `Q`: uint64) made from `_ctypes`."""
        return _type("minisandbox_" + code, (_SimpleCData,), {"_type_": code})

    def field_reader(code, offset, probe, write, ready=None, nonzero=False):
        """A function giving the unsigned field (`code`: `I` or `Q`) at `offset` in an object
        (after `ready(obj)`), or None unless `probe`'s field reads the same twice and
        changes when `write(probe)` runs (`nonzero`: and is never 0): the interpreter's
        layout is the one the checks expect."""
        try:
            at = native_type(code).from_address
        except Exception:  # noqa: BLE001  (no ctypes: the check is off)
            return None

        def read(obj):
            if ready is not None:
                ready(obj)
            return native_value(at(_id(obj) + offset))

        try:
            first, again = read(probe), read(probe)
            write(probe)
            written = read(probe)
        except Exception:  # noqa: BLE001
            return None
        return read if first == again and written != first and (not nonzero or (first and written)) else None

    lookup = _type.__getattribute__  # (not the class's metaclass's: no code of anybody's runs)

    def give_tag(cls):
        """A lookup gives a class without a version tag one."""
        try:
            lookup(cls, "_minisandbox_version_probe")
        except AttributeError:
            pass

    with Busy():
        # a class's `tp_version_tag`, after 48 pointer-sized fields (0: none can be given);
        # a dict's `ma_version_tag` (PEP 509: changed by every write that changes a value,
        # 3.6-3.13), after the refcount, the type and `ma_used`
        TYPE_TAG = field_reader("I", 48 * POINTER_SIZE, _type("MinisandboxVersionProbe", (object,), {}),
                                lambda probe: setattr(probe, "attr", None), give_tag, True) if CHECKS else None
        DICT_VERSION = field_reader("Q", 3 * POINTER_SIZE, {"attr": None}, lambda probe: probe.update(attr=probe)) \
            if TYPE_TAG is not None else None
    _type_flags = _type.__dict__["__flags__"].__get__
    _class_dict, _class_mro = _type.__dict__["__dict__"].__get__, _type.__dict__["__mro__"].__get__
    _class_module, _class_qualname = _type.__dict__["__module__"].__get__, _type.__dict__["__qualname__"].__get__
    #: id(class) -> (class, version tag, its attributes at that tag): a class's attributes
    #: cannot change while its tag stays, so each tag's snapshot is taken once
    TAGGED = {}

    def class_versions(cls):
        """Before a test's body: [(class, tag, attributes)] for `cls` and its bases that
        Python code can write (not the built-in types); None where the check is off."""
        if TYPE_TAG is None or not _isinstance(cls, _type):
            return None
        out = []
        with Busy():
            for klass in _class_mro(cls):
                if not _type_flags(klass) & (1 << 9):  # Py_TPFLAGS_HEAPTYPE: a class Python code made
                    continue
                tag = TYPE_TAG(klass)
                hit = TAGGED.get(_id(klass))
                if hit is None or hit[0] is not klass or hit[1] != tag or not tag:
                    hit = TAGGED[_id(klass)] = (klass, tag, _dict(_class_dict(klass)))
                out.append(hit)
        return out

    def same_attrs(now, was):
        """Whether two snapshots of a class's attributes hold the same names for the very
        same objects."""
        return _len(now) == _len(was) and all(was.get(k, MISSING) is v for k, v in now.items())

    #: unittest.TestCase's attribute names a test may set on its own class, whatever
    #: the window (data its messages read; unittest's own bookkeeping)
    BENIGN_CASE_NAMES = frozenset(("maxDiff", "longMessage", "_classSetupFailed", "_class_cleanups",
                                   "tearDown_exceptions", "__slotnames__"))

    def unittest_names_changed(now, was):
        """The names unittest's TestCase defines (its methods, `failureException`...) whose
        value differs between two snapshots of a class's attributes, sorted. A test's body
        set `AddTests._baseAssertEqual = TestCase.assertIsNot` on its own class and the
        runner's `addSuccess` deleted it after the body: the failing assertEqual passed."""
        names = case_names()
        return _sorted(k for k in _set(now) | _set(was)
                       if k in names and k not in BENIGN_CASE_NAMES and now.get(k, MISSING) is not was.get(k, MISSING))

    def case_names():
        """Every attribute name of unittest.case.TestCase and its bases (once)."""
        if not CASE_NAMES:
            case = _getattr(sys.modules.get("unittest.case"), "TestCase", None)
            CASE_NAMES.update(k for klass in (_class_mro(case) if case is not None else ()) for k in _class_dict(klass)
                              if not (k.startswith("__") and k.endswith("__")))
        return CASE_NAMES

    CASE_NAMES = _set()

    def case_names_written(before, after, what):
        """Before the body: the names unittest's TestCase defines that the set-up (a
        runner's `startTest`, `setUp`'s library calls) changed on the test's class or its
        bases are critical, whatever puts them back later (after the body, where no window
        sees it)."""
        if not before or not after:
            return
        for (klass, tag, was), (same, now_tag, now) in _zip(before, after):
            if same is not klass or now_tag == tag:
                continue
            changed = unittest_names_changed(now, was)
            if changed:
                report_tampered("%s: its set-up changed %s of class %s.%s, which unittest's TestCase defines (what "
                                "runs the test and its assertions)" % (what, ", ".join(changed), _class_module(klass),
                                                                       _class_qualname(klass)))

    #: unittest's own classes as last seen ([(class, tag, attributes)] of each: `class_versions`)
    unittest_seen = []

    def unittest_classes_checked(what):
        """As a test begins: unittest's own classes (TestCase, the suites, the loader, the
        results and the runner) written and put back since the last look are critical. A
        patch swapped `TestCase.addTypeEqualityFunc` at import for a spy that kept each
        test instance (and put itself back as it was called): with the instance it swapped
        the instance's assertion table, or its class, for the body only."""
        if TYPE_TAG is None:
            return
        if what is None:  # at load, before any test module is imported
            for name, attr in UNITTEST_CLASSES:
                klass = _getattr(sys.modules.get(name), attr, None)
                if _isinstance(klass, _type):
                    unittest_seen.append(class_versions(klass))
            return
        for i, versions in _list(enumerate(unittest_seen)):
            # (what stays changed is judged by who changed it: the captured objects' check)
            written_back(versions, what, names=False, explained=True)
            unittest_seen[i] = class_versions(versions[0][0]) if versions else versions

    #: (not FunctionTestCase: a test class itself, on which unittest's suite writes
    #: `_classSetupFailed = False` before each of its tests, the same value again)
    UNITTEST_CLASSES = (("unittest.case", "TestCase"), ("unittest.case", "_Outcome"), ("unittest.suite", "TestSuite"),
                        ("unittest.loader", "TestLoader"), ("unittest.result", "TestResult"),
                        ("unittest.runner", "TextTestResult"), ("unittest.runner", "TextTestRunner"))

    def table_versions(test):
        """Before the body: the test instance's assertEqual table (`_type_equality_funcs`)
        with its dict version and entries, or None."""
        funcs = _getattr(test, "__dict__", {}).get("_type_equality_funcs")
        if DICT_VERSION is None or _type(funcs) is not _dict:
            return None
        with Busy():
            return funcs, DICT_VERSION(funcs), _dict(funcs)

    def table_written_back(before, what):
        """After the body: the assertEqual table written and put back while it ran is
        critical (the body's library call mapped `int` to a function that passes and takes
        itself out again when called: `type_equality_checked` before the body saw unittest's
        table)."""
        if before is None:
            return
        funcs, version, was = before
        with Busy():
            if DICT_VERSION(funcs) != version and same_attrs(funcs, was):
                report_tampered("%s: its assertEqual table (_type_equality_funcs) was written while it ran and put "
                                "back" % what)

    def written_back(before, what, between=None, names=True, explained=False):
        """After the body: a class of `before` whose version tag changed while its
        attributes are the objects they were then had an attribute written and put back
        (critical: `what` ran with something else in its place for a while). With
        `between` (the versions as the body began; `before` as the run began): only when
        they differed as the body began, i.e. written in the set-up and put back in the
        body. A class without a tag (3.12 and later give one at most a thousand) cannot
        be judged: critical too."""
        if not before:
            return
        put_back = None  # the base furthest up whose write was put back (a write to a class
        # gives its subclasses new tags too: the base is the one written)
        kept = []  # classes written and not put back: with `explained`, their subclasses' new
        # tags are theirs (the plugin's own wrappers of TestCase, put in place after load)
        with Busy():
            for klass, tag, was in _list(reversed(before)) if explained else before:
                now = TYPE_TAG(klass)
                if now == tag and now:
                    continue
                hit = TAGGED.get(_id(klass))
                if hit is None or hit[0] is not klass or hit[1] != now or not now:
                    hit = TAGGED[_id(klass)] = (klass, now, _dict(_class_dict(klass)))
                name = "%s.%s" % (_class_module(klass), _class_qualname(klass))
                if not now:
                    report_tampered("%s: class %s has no version tag left (written over a thousand times), so what "
                                    "is written to it while a test runs cannot be judged" % (what, name))
                    continue
                if not same_attrs(hit[2], was):
                    kept.append(klass)
                    if between is None and names:  # (the body's window: what it changed and left)
                        changed = unittest_names_changed(hit[2], was)
                        if changed:
                            report_tampered("%s: it changed %s of class %s, which unittest's TestCase defines (what "
                                            "runs the test and its assertions)" % (what, ", ".join(changed), name))
                    continue
                if between is not None:
                    mid = next((entry for entry in between if entry[0] is klass), None)
                    if mid is None or same_attrs(mid[2], was):
                        continue
                if explained and _any(_issubclass(klass, base) for base in kept):
                    continue
                put_back = name if put_back is None or not explained else put_back
        if put_back is not None:
            report_tampered("%s: an attribute of class %s was written while it ran and put back (what it looked up "
                            "there was something else for a while)" % (what, put_back))

    # pytest mode: whether each unittest-style test's method raised, as the wrapper of
    # `_callTestMethod` saw it (id(test case) -> (the case, raised)): a pass of a method
    # that raised is refused (a tear-down of the patch's that cleared the failure pytest
    # collected, `_excinfo`, would pass it), which lets set-up and tear-down wrappers of a
    # patched library stand (`fixture_wrapper`: freezegun's `@freeze_time` on a TestCase)
    method_raised = {}
    #: id(test case) -> (the case, its class's versions as its run began: `class_versions`),
    #: for the `_callTestMethod` wrapper (unittest mode: `TestCase.run`; pytest mode: its
    #: set-up report, before the run that calls `setUp`)
    run_versions = {}

    def wrap_call_test_method(TC):
        """The check before the body (and the test instance's own attributes) right
        before the test method, in a wrapper of `TC._callTestMethod`; returns the
        wrapper's code, or None where the class has no such method (before 3.8)."""
        orig_call = TC.__dict__.get("_callTestMethod") if TC is not None else None
        if orig_call is None:
            return None

        def call_test_method(self, method):
            check_before()
            check_instance(self)
            what = "test %s.%s" % (_type(self).__name__, _getattr(self, "_testMethodName", "?"))
            since = run_versions.get(_id(self))
            since_run = since[1] if since is not None and since[0] is self else None
            type_equality_checked(self)
            if UNITTEST:
                method_checked(self)
                method_bound_checked(self, method)
                method_ran[_id(self)] = self
                versions, table = class_versions(_type(self)), table_versions(self)
                case_names_written(since_run, versions, what)
                try:
                    return orig_call(self, method)
                except BaseException as exc:
                    if should_stop[0] is not None and _isinstance(exc, should_stop[0]):
                        raised_stop[_id(self)] = self
                    raise
                finally:
                    written_back(versions, what)
                    written_back(since_run, what, versions)  # (written in its set-up, put back in its body)
                    table_written_back(table, what)
            if setup_left:
                setup_changed(self)
            versions, table = class_versions(_type(self)), table_versions(self)
            case_names_written(since_run, versions, what)
            try:
                got = orig_call(self, method)
            except BaseException:
                method_raised[_id(self)] = (self, True)
                raise
            finally:
                written_back(versions, what)
                written_back(since_run, what, versions)
                table_written_back(table, what)
            hit = method_raised.get(_id(self))
            if hit is None or hit[0] is not self:  # (a raise stays: a tear-down that calls again cannot undo it)
                method_raised[_id(self)] = (self, False)
            return got

        call_test_method.__name__ = "_callTestMethod"
        call_test_method.__qualname__ = "TestCase._callTestMethod"
        TC._callTestMethod = call_wrapped[0] = seal(call_test_method)
        return call_test_method.__code__

    def wrap_sub_test(TC):
        """unittest mode: a `_ShouldStop` that leaves a subTest's block is noted (see
        `should_stop`), put in place before the snapshot."""
        orig = TC.__dict__.get("subTest")
        if orig is None or should_stop[0] is None:
            return
        import contextlib

        sentinel = _getattr(case_module(), "_subtest_msg_sentinel", None)

        @contextlib.contextmanager
        def subTest(self, msg=sentinel, **params):
            with orig(self, msg, **params) if sentinel is not None else orig(self, **params):
                try:
                    yield
                except BaseException as exc:
                    if _isinstance(exc, should_stop[0]):
                        raised_stop[_id(self)] = self
                    raise

        subTest.__qualname__ = "TestCase.subTest"
        subTest.__doc__ = orig.__doc__
        TC.subTest = seal(subTest)  # (no closure where others reach it)

    def case_module():
        return sys.modules.get("unittest.case")

    def seal_part_executor(case):
        """unittest mode: `_Outcome.testPartExecutor` decides a test part's outcome from the
        exception it catches, looking `_ShouldStop` and `SkipTest` up in unittest.case's
        globals when the exception arrives. Library code set `unittest.case._ShouldStop =
        AssertionError` for the test's body only (put back from a `__del__` before any
        check): the failure was swallowed. The executor runs here on a copy of those
        globals taken at load (put in place before the snapshot)."""
        outcome = _getattr(case, "_Outcome", None)
        orig = _getattr(outcome, "__dict__", {}).get("testPartExecutor")
        inner = _getattr(orig, "__wrapped__", None)
        if _type(inner) is not types.FunctionType:
            return
        import contextlib
        frozen = _dict(case.__dict__)
        fn = types.FunctionType(inner.__code__, frozen, inner.__name__, inner.__defaults__, inner.__closure__)
        fn.__qualname__, fn.__doc__, fn.__kwdefaults__ = inner.__qualname__, inner.__doc__, inner.__kwdefaults__
        frozen_executor = contextlib.contextmanager(fn)
        if "_callTestMethod" in case.TestCase.__dict__:
            outcome.testPartExecutor = frozen_executor
            return

        # before 3.8 the test method runs in `run` itself, in the part marked `isTest`: that
        # part is the body's window of `written_back` (as `_callTestMethod`'s is from 3.8)
        def body_part(self, test_case, isTest=False):
            if not isTest:
                with frozen_executor(self, test_case, isTest):
                    yield
                return
            versions, table = class_versions(_type(test_case)), table_versions(test_case)
            since = run_versions.get(_id(test_case))
            since_run = since[1] if since is not None and since[0] is test_case else None
            what = "test %s.%s" % (_type(test_case).__name__, _getattr(test_case, "_testMethodName", "?"))
            case_names_written(since_run, versions, what)
            try:
                with frozen_executor(self, test_case, isTest):
                    yield
            finally:
                written_back(versions, what)
                written_back(since_run, what, versions)
                table_written_back(table, what)

        body_part.__qualname__ = inner.__qualname__
        outcome.testPartExecutor = contextlib.contextmanager(seal(body_part))

    #: what `TestCase.__init__` maps types to for assertEqual (names of its methods)
    TYPE_EQUALITY = {dict: "assertDictEqual", list: "assertListEqual", tuple: "assertTupleEqual",
                     set: "assertSetEqual", frozenset: "assertSetEqual", _str: "assertMultiLineEqual"}

    def type_equality_checked(test):
        """unittest mode, before the method: `assertEqual` dispatches by the operands' type
        through the instance's `_type_equality_funcs`, a name or a function each. The
        runner (repository code the patch may change) mapped `int` to "assertIsNot" for the
        failing test: no code of the patch's on the outcome path, resolved. The standard
        entries must be unittest's, any other a function of test code."""
        funcs = _getattr(test, "__dict__", {}).get("_type_equality_funcs")
        if not _isinstance(funcs, _dict):
            return
        mod = sys.modules.get(_getattr(_type(test), "__module__", None) or "")
        f = _getattr(mod, "__file__", None)
        real = real_of(f) if _isinstance(f, _str) else None
        for key, value in _list(funcs.items()):
            want = TYPE_EQUALITY.get(key)
            if want is not None:
                why = None if value == want else "%r, not %r" % (value, want)
            elif _isinstance(value, _str):
                why = "the method name %r" % (value,)
            else:
                why = stand_in(value, "assertEqual", real) if real is not None else None
            if why is not None:
                report_tampered("test %s.%s: assertEqual of %s runs %s" % (
                    _type(test).__module__, _type(test).__name__, _getattr(key, "__name__", "?"), why))

    def class_member(test, name):
        for owner in _getattr(_type(test), "__mro__", ()):
            d = _getattr(owner, "__dict__", {})
            if _isinstance(name, _str) and name in d:
                return d[name]
        return None

    def wrapper_of_member(test, value):
        """True when `value`, found on the test instance under its method's name, wraps the
        method its class defines (its `__wrapped__` chain reaches it, or the `awaitable` of
        an installed asgiref's `AsyncToSync`, which has no `__wrapped__`: Django's
        `SimpleTestCase.__call__` puts `async_to_sync(method)` there) and is no stand-in
        of the patch's own (`stand_in`)."""
        member = class_member(test, _getattr(test, "_testMethodName", None))
        if _type(member) is not types.FunctionType:
            return False
        fn, depth = value, 0
        while fn is not None and depth < 20:
            if _getattr(fn, "__func__", fn) is member:
                mod = sys.modules.get(_getattr(_type(test), "__module__", None) or "")
                f = _getattr(mod, "__file__", None)
                return stand_in(value, member.__name__, real_of(f) if _isinstance(f, _str) else None) is None
            nxt = _getattr(fn, "__wrapped__", None)
            if nxt is None and async_to_sync(fn):
                nxt = _getattr(fn, "awaitable", None)
            fn, depth = nxt, depth + 1
        return False

    def async_to_sync(obj):
        """Whether `obj` is an `asgiref.sync.AsyncToSync` of an installed asgiref."""
        cls = _type(obj)
        if cls.__name__ != "AsyncToSync" or _class_module(cls) != "asgiref.sync":
            return False
        f = _getattr(sys.modules.get("asgiref.sync"), "__file__", None)
        return _isinstance(f, _str) and installed(real_of(f)) and \
            _getattr(sys.modules["asgiref.sync"], "AsyncToSync", None) is cls

    def method_bound_checked(test, method):
        """unittest mode: what `_callTestMethod` is handed must be the test's method as its
        class holds it, bound to the test."""
        name = _getattr(test, "_testMethodName", None)
        member = None
        for owner in _getattr(_type(test), "__mro__", ()):
            d = _getattr(owner, "__dict__", {})
            if _isinstance(name, _str) and name in d:
                member = d[name]
                break
        if _type(member) is not types.FunctionType:
            return  # (a staticmethod, a wrapper object: judged by method_checked)
        if (_type(method) is not types.MethodType or method.__func__ is not member or method.__self__ is not test) \
                and not wrapper_of_member(test, method):
            report_tampered("test %s.%s: the method run is not its class's %s" % (
                _type(test).__module__, _type(test).__name__, _repr(name)))

    method_raised_watch = [False]  # wrap_call_test_method wrapped TestCase in pytest mode

    # ------------------------------------------------------------------ parametrize marks
    # The cases a graded test file's `parametrize` marks give, as the marks were stored
    # (pytest's `store_mark`, wrapped before the snapshot): (real file, qualified name) ->
    # [(argnames, {ids of a case's values: the values}, or None when the values are not a
    # list or tuple: a range, an array, of which pytest makes new objects)]. Library code
    # that rewrote the marks of the half-imported test module (from a gc callback, no
    # event) made each expected value the bug's answer and was resolved: a collected
    # test's parameters must be one of its marks' cases (`params_rewritten_check`).
    mark_values = {}

    def wrap_store_mark():
        structures = sys.modules.get("_pytest.mark.structures")
        orig_store = _getattr(structures, "store_mark", None)
        if not _isinstance(orig_store, types.FunctionType) or not GRADED:
            return

        def store_mark(obj, mark, *args, **kwargs):
            if _getattr(mark, "name", None) == "parametrize":
                with Busy():
                    try:
                        if graded_place(obj) is not None:
                            rel = mark_stored_by_patch()
                            if rel is not None:
                                report_tampered("%s stores a parametrize mark on the graded test %s" % (
                                    rel, _getattr(obj, "__qualname__", "?")))
                        note_mark_values(obj, mark)
                    except Exception:
                        pass
            return orig_store(obj, mark, *args, **kwargs)

        store_mark.__name__, store_mark.__qualname__ = "store_mark", "store_mark"
        structures.store_mark = seal(store_mark)

    def graded_place(obj):
        """(real file, qualified name) of a function (the end of its `__wrapped__` chain) or
        class of a graded test file, or None."""
        for _ in _range(16):
            inner = _getattr(obj, "__wrapped__", None) if _type(obj) is types.FunctionType else None
            if inner is None:
                break
            obj = inner
        code = _getattr(obj, "__code__", None)
        if _type(code) is types.CodeType:
            real = real_of(code.co_filename)
        else:
            f = _getattr(sys.modules.get(_getattr(obj, "__module__", None) or ""), "__file__", None)
            real = real_of(f) if _isinstance(f, _str) else None
        if real is None or rel_to_root(real) not in GRADED:
            return None
        return real, _getattr(obj, "__qualname__", None)

    def note_mark_values(obj, mark):
        """Keep the rows of a graded file's `parametrize` mark as pytest stores it: its
        argnames and, for each case, its values (`case_value`; `mark_values`)."""
        place = graded_place(obj)
        if place is None:
            return
        args, kwargs = _tuple(mark.args), _dict(mark.kwargs)
        names = args[0] if args else kwargs.get("argnames")
        values = args[1] if _len(args) > 1 else kwargs.get("argvalues")
        whole = False  # one name in a string: each value is the parameter itself (pytest's force_tuple)
        if _isinstance(names, _str):
            names = [n.strip() for n in names.split(",") if n.strip()]
            whole = _len(names) == 1
        if not _isinstance(names, (_list, _tuple)) or not names:
            return
        names = _tuple(_str(n) for n in names)
        if not _isinstance(values, (_list, _tuple)) or not values:  # (none: pytest's NOTSET stand-in)
            rows = None  # not checked
        else:
            rows = {}
            for value in values:
                inner = _getattr(value, "values", None) if _type(value).__name__ == "ParameterSet" else None
                row = inner if _isinstance(inner, _tuple) else value
                if whole and inner is None:
                    row = (row,)
                if _isinstance(row, (_list, _tuple)) and _len(row) == _len(names):
                    key = _tuple(_map(case_value, row))
                    rows[key] = (_tuple(row), rows[key][1] + 1 if key in rows else 1)  # (values, how many cases)
        mark_values.setdefault(place, []).append((names, rows))

    SCALARS = (_str, bytes, _int, float, bool)

    def case_value(value):
        """A parameter's value as the case check compares it: a str, bytes or number by
        type and value (a plugin may rebuild one; NaN as itself), anything else by identity.
        Keyed by identity alone, a failing case given a passing case's values as new but
        equal strings (`(s + ".")[:-1]`) was counted as a case of its own and passed."""
        t = _type(value)
        if t in SCALARS:
            return t, (value if value == value else "nan")
        return None, _id(value)

    def mark_stored_by_patch():
        """The file of the code (past pytest's own) that stores a mark on a graded test,
        when the patch brought it: a graded file's marks are the file's own (library code
        that re-marked the half-imported test module's functions from a gc callback, with
        values pytest does not check, passed every case)."""
        f = past_seal(_frame(2))
        while f is not None and real_of(f.f_code.co_filename).startswith(RUNNER_DIRS):
            f = f.f_back
        if f is None or rel_to_root(real_of(f.f_code.co_filename)) in GRADED:
            return None  # a graded file's own code (restored from the task, whatever the patch named)
        return brought_by_patch(f, None, [])

    def params_rewritten_check(items):
        """Each collected test's parameters that a graded mark gives must be one of that
        mark's cases as stored, all its argnames together (a case whose values were taken
        from different cases, each value honest, passed the failing ones), and no case may
        serve more tests than the marks made of it (a failing case given a passing case's
        values, its id kept, passed)."""
        if not mark_values:
            return
        uses = {}  # (class, function, every parameter's id) -> tests collected with them
        for item in items:
            params = _getattr(_getattr(item, "callspec", None), "params", None)
            if not _isinstance(params, _dict) or not params:
                continue
            allowed, checked = 1, False
            for obj in (_getattr(item, "function", None), _getattr(item, "cls", None)):
                place = graded_place(obj) if obj is not None else None
                for names, rows in (mark_values.get(place) or ()) if place else ():
                    if rows is None or not _all(n in params for n in names):
                        continue
                    checked = True
                    hit = rows.get(_tuple(case_value(params[n]) for n in names))
                    if hit is not None:
                        allowed *= hit[1]
                        continue
                    report_tampered("test %s: its parameters %s are no case its parametrize mark gave when the "
                                    "test file stored it" % (item.nodeid, ", ".join(names)))
            if not checked:
                continue
            key = (_id(_getattr(item, "cls", None)), _id(_getattr(item, "function", None)),
                   _tuple(_sorted((_str(n), case_value(v)) for n, v in params.items())))
            uses[key] = uses.get(key, 0) + 1
            if uses[key] > allowed:
                report_tampered("test %s: its parameters are those of another of its cases, more often than its "
                                "parametrize marks give them" % item.nodeid)

    def wrap_unittest_in_pytest():
        """pytest runs a `unittest.TestCase` test's `setUp` and method inside its call
        phase, after the check before the body: the same check right before the test
        method (wrap_call_test_method), put in place before the snapshot."""
        code = wrap_call_test_method(_getattr(sys.modules.get("unittest.case"), "TestCase", None))
        method_raised_watch[0] = code is not None

    function_case = [None]  # unittest.case.FunctionTestCase, as wrap_unittest found it
    #: unittest.case._ShouldStop, which `_Outcome.testPartExecutor` swallows (the test
    #: passes): raised by library code from the test method or a subTest's block, the bug
    #: kept was resolved. Only unittest raises it, under `failfast`, which grading never sets.
    should_stop = [None]
    raised_stop = {}  # id(test) -> test, when _ShouldStop left its method or one of its subTests
    method_ran = {}  # unittest mode: id(test) -> test, for tests whose method `call_test_method` ran
    call_wrapped = [None]  # unittest mode: TestCase._callTestMethod, this plugin's wrapper
    #: the methods `TestCase.run` looks up on the test to run it
    RUN_PATH = frozenset(("run", "__call__", "debug", "_callSetUp", "_callTestMethod", "_callTearDown",
                          "_callCleanup", "doCleanups", "setUp", "tearDown", "_addSkip", "_feedErrorsToResult",
                          "defaultTestResult", "shortDescription", "id", "subTest"))

    def _with_doc():
        """d"""

    def _without_doc():
        pass

    #: CO_HAS_DOCSTRING (3.14), found by comparing two functions' flags: 0 before 3.14
    DOC_FLAG = _with_doc.__code__.co_flags & ~_without_doc.__code__.co_flags if sys.version_info >= (3, 14) else 0

    def code_docstring(code):
        """The docstring compiled into a function's code: its first constant when that is
        a str (CPython 3.6-3.13 put the docstring, or None, first), or, from 3.14, when
        the code is flagged as having one."""
        consts = code.co_consts
        if not consts or not _isinstance(consts[0], _str) or (DOC_FLAG and not code.co_flags & DOC_FLAG):
            return None
        return consts[0]

    def after_test(test):
        """The end-of-test check (outcome path: everything captured) and the test
        method's origin."""
        if not CHECKS:
            return
        check(None, False)
        if function_case[0] is not None and _isinstance(test, function_case[0]):
            function_case_checked(test)
        try:
            fn = _getattr(test, test._testMethodName, None)
        except Exception:
            fn = None
        code = _getattr(_getattr(fn, "__func__", fn), "__code__", None)
        plain_checked(test, _getattr(fn, "__func__", fn), sys.modules.get(_type(test).__module__),
                      _getattr(test, "_testMethodName", None), _type(test), _str(test).split("\n")[0])
        wrapped_checked(test, _getattr(fn, "__func__", fn), sys.modules.get(_type(test).__module__),
                        _getattr(test, "_testMethodName", None), _type(test), _str(test).split("\n")[0])
        if fn is not None and _id(code) not in ok_callables:
            why = callable_verdict(fn, sys.modules.get(_type(test).__module__))
            if why is not None:
                report_tampered("test %s: its function: %s" % (_str(test).split("\n")[0], why))
            elif code is not None:
                ok_callables[_id(code)] = code

    def function_case_checked(test):
        """A `unittest.FunctionTestCase` runs `_testFunc`, not a method: that function must
        be repository code the patch does not change. Library code ran
        `FunctionTestCase(int, description=<a listed test's id>)` as a test of its own,
        and its pass stood for the listed test (`int`'s code is nobody's, and the
        method that ran, `FunctionTestCase.runTest`, is unittest's)."""
        func = _getattr(test, "_testFunc", None)
        code = _getattr(_getattr(func, "__func__", func), "__code__", None)
        label = _str(test).split("\n")[0]
        if _type(code) is not types.CodeType or rel_to_root(real_of(code.co_filename)) is None:
            why = "a %s, no function of the repository's" % (_type(func).__name__,)
        else:
            why = callable_verdict(func, sys.modules.get(_getattr(func, "__module__", "") or ""))
        if why is not None:
            report_tampered("test %s: its function: %s" % (label, why))

    # ------------------------------------------------------------------ SymPy's bin/test
    def wrap_sympy():
        """Put a recorder around `builtins.exec` (before the snapshot, so the wrapper is
        the captured value). SymPy's runner (`SymPyTests.test_file`, repository code the
        patch may change) compiles a test file and runs it with `exec` (older releases
        through `exec_`, which is `exec`), then calls the `test_*` functions it defined.
        When the code run is a graded test file's (its `co_filename`), it must be that
        file's graded content compiled (else critical), and every module-level `test_*`
        function it defined is replaced in the namespace by a recorder (`sympy_test`)
        that keeps what the runner reads (`__name__`, `_slow`, `__wrapped__` for
        `inspect`) and writes the test's outcome from the exception the function raised.
        A runner that runs the file another way, or calls a test without the recorder,
        leaves no record: the test fails (results.merge). Returns the wrapper."""
        orig_exec, _compile, _open = builtins.exec, compile, open
        graded_real = _dict((_realpath(os.path.join(ROOT, rel)), rel) for rel in GRADED)
        import __future__
        future_mask = 0
        for fname in __future__.all_feature_names:
            future_mask |= _getattr(__future__, fname).compiler_flag
        CO_GENERATOR = 0x20
        _AssertionError, _BaseException, _Exception = AssertionError, BaseException, Exception

        def caller_namespaces(globals_, locals_):
            """exec's defaults: its caller's namespaces (the frame above the wrapper)."""
            if globals_ is not None:
                return globals_, locals_
            with Busy():  # our own frame access: not a finding
                f = past_seal(_frame(2))  # (exec is a seal)
            return f.f_globals, (f.f_locals if locals_ is None else locals_)

        def exec_(source, globals=None, locals=None, *args, **kwargs):  # noqa: A002  (exec's own names)
            rel = None
            if _type(source) is types.CodeType and graded_real:
                rel = graded_real.get(real_of(source.co_filename))
            globals, locals = caller_namespaces(globals, locals)
            if rel is None:
                return orig_exec(source, globals, locals, *args, **kwargs)
            module_codes_ok = graded_code(source, rel)
            try:
                return orig_exec(source, globals, locals, *args, **kwargs)
            finally:
                # SymPy's runner collects the tests even when the module's code raised
                if module_codes_ok is not None:
                    wrap_tests(locals if locals is not None else globals, rel, source.co_filename, module_codes_ok)

        exec_.__name__, exec_.__qualname__, exec_.__doc__ = "exec", "exec", orig_exec.__doc__

        def graded_code(code, rel):
            """The code objects `code` defines when it is `rel`'s graded content compiled
            (as the runner compiles it: no inherited flags but its own `__future__` ones),
            else None and a critical finding (a runner that compiles other source under the
            test file's name)."""
            why = file_verdict(code.co_filename)
            mine = None
            if why is None:
                try:
                    with _open(code.co_filename, "rb") as f:
                        data = f.read()
                    if _sha256(data).hexdigest() != GRADED[rel]:
                        why = "%s differs from the graded state" % rel
                    else:
                        mine = _compile(data, code.co_filename, "exec", code.co_flags & future_mask, True)
                except (OSError, SyntaxError, ValueError) as exc:
                    why = "%s cannot be compiled here (%r)" % (rel, exc)
            if why is None and mine != code:
                why = "the code run as %s is not compiled from its content" % rel
            if why is not None:
                report_tampered("graded test file %s run through exec: %s" % (rel, why))
                return None
            codes = _set()
            todo = [code]
            while todo:
                c = todo.pop()
                if c not in codes:
                    codes.add(c)
                    todo.extend(k for k in c.co_consts if _type(k) is types.CodeType)
            # the file's own code: its helper classes are a test's, not the patch's (the
            # comparison probe leaves them alone; their module is not in sys.modules)
            test_file_codes.update(codes)
            verified.update(codes)
            return codes

        def wrap_tests(ns, rel, filename, codes):
            """Replace each module-level `test_*` function of the file (its innermost
            `__wrapped__` is code of the file) by a recorder."""
            if not _isinstance(ns, _dict):
                return
            for name, value in _list(ns.items()):
                if not (_type(name) is _str and name.startswith("test_") and _type(value) is types.FunctionType):
                    continue
                chain = [value]
                while _len(chain) < 32:
                    inner = _getattr(chain[-1], "__wrapped__", None)
                    if inner is None:
                        break
                    chain.append(inner)
                codes_now = _tuple(_getattr(f, "__code__", None) for f in chain)
                if codes_now[-1] not in codes or codes_now[-1].co_flags & CO_GENERATOR:
                    continue  # imported from elsewhere, or a generator of tests: no record
                tid = "%s:%s" % (rel, name)
                for f, c in _zip(chain[:-1], codes_now[:-1]):
                    why = "not Python code" if c is None else code_verdict(c)
                    if why is not None:  # a decorator of the patch's: it decides the outcome
                        report_tampered("test %s: its decorator %s: %s" % (tid, _getattr(f, "__qualname__", "?"), why))
                ns[name] = sympy_test(value, chain, codes_now, tid, ns)
            bound[_id(ns)] = (ns, _tuple(ns.items()))  # what the file's code bound (see sympy_test)

        bound = {}  # id(namespace) -> (namespace, its items when the file's code had run)
        running = [False]  # a recorded test is running
        gone = object()

        def rebound(ns):
            """The names of the test file's namespace bound to another object since its code
            ran (a runner that swaps a helper or an imported function before a test)."""
            items = bound.get(_id(ns), (None, ()))[1]
            return [k for k, v in items if ns.get(k, gone) is not v]

        def sympy_test(fn, chain, codes_now, tid, ns):
            """The recorder the runner calls in place of the test function `fn`. A test
            that calls another test (SymPy's test_Permutation_subclassing calls
            test_Permutation with a name of its module rebound) runs it unrecorded: the
            outer test's outcome holds it."""
            def test(*args, **kwargs):
                if running[0]:
                    return fn(*args, **kwargs)
                running[0] = True
                try:
                    return record_test(*args, **kwargs)
                finally:
                    running[0] = False

            def record_test(*args, **kwargs):
                write({"ev": "phase", "id": tid, "when": "setup", "status": "PASSED", "report": None})
                status = "ERROR"
                try:
                    if not _all(_map(_is, _map(_getattr, chain, _repeat("__code__"), _repeat(None)), codes_now)):
                        report_tampered("test %s: its function's code was replaced after the test file ran" % tid)
                        status = "FAILED"
                        raise _AssertionError("minisandbox: the code of %s was replaced" % tid)
                    names = rebound(ns)
                    if names:
                        report_tampered("test %s: names of its module rebound after the test file ran: %s" % (
                            tid, ", ".join(_sorted(_str(n) for n in names)[:5])))
                        status = "FAILED"
                        raise _AssertionError("minisandbox: the namespace of %s was changed" % tid)
                    got = fn(*args, **kwargs)
                    status = "PASSED"
                    return got
                except _BaseException as exc:
                    if status == "ERROR":
                        status = exc_status(exc)
                    raise
                finally:
                    write({"ev": "phase", "id": tid, "when": "call", "status": status, "report": None})
                    try:
                        after_sympy_test()
                    finally:
                        write({"ev": "phase", "id": tid, "when": "teardown", "status": None, "report": None})

            test = seal(test)  # in the test file's namespace: its cells would be all of the plugin's
            test.__dict__.update(fn.__dict__)  # _slow and the other marks the runner reads
            test.__name__, test.__qualname__ = fn.__name__, fn.__qualname__
            test.__module__, test.__doc__, test.__wrapped__ = fn.__module__, fn.__doc__, fn
            return test

        def exc_status(exc):
            """The status SymPy's runner gives an exception (by class name for its own
            XFail/XPass/Skipped, `t is AssertionError` for a failure)."""
            cls = _type(exc)
            if cls is _AssertionError:
                return "FAILED"
            name = _getattr(cls, "__name__", "")
            if name == "XFail":
                return "XFAIL"
            if name == "Skipped":
                return "SKIPPED"
            if name == "XPass":
                return "XPASS"
            return "ERROR"

        def after_sympy_test():
            state["collected"] += 1
            if CHECKS:
                check(None, False)

        builtins.exec = sealed_exec = seal(exec_)
        return sealed_exec

    _SKIP = pytest.skip.Exception if pytest is not None else ()
    _XFAIL = _getattr(_getattr(pytest, "xfail", None), "Exception", ())
    _EXIT = _getattr(_getattr(pytest, "exit", None), "Exception", ())
    if UNITTEST:  # wrapped before the snapshot: the wrapper is what must stay in place
        unittest_outcomes = wrap_unittest()
    elif not SYMPY:
        wrap_unittest_in_pytest()
        wrap_store_mark()
    test_file_codes = _set()  # code of the graded test files run through the wrapped exec
    sympy_exec = wrap_sympy() if SYMPY else None  # the same: builtins.exec is the wrapper from here on

    # ------------------------------------------------------------------ graded doctests
    DOCTESTS = _dict((_str(k), _str(v)) for k, v in (manifest.get("doctests") or {}).items())

    def check_doctest(item):
        """A listed doctest of a module the task's bug changes runs from that module, which
        the candidate patch may change: its examples (source and expected output) must be
        the graded state's (`gradedstate.examples_digest`, same construction). A patch that
        kept the bug and wrote the buggy answer as the expected output was resolved (host
        and sandbox, strict and official)."""
        want = DOCTESTS.get(item.nodeid)
        examples = _getattr(_getattr(item, "dtest", None), "examples", None)
        if want is None or examples is None:
            return
        h = _sha256()
        for ex in examples:
            h.update((_str(ex.source) + "\x01" + _str(ex.want) + "\x00").encode("utf-8", "surrogatepass"))
        if h.hexdigest() != want:
            report_tampered("doctest %s: its examples or expected output differ from the graded state" % item.nodeid)

    # ------------------------------------------------------------------ the test id pytest shows
    def without_params(nodeid):
        """A test id without its parameter part (`t.py::test_x[11-11th]` -> `t.py::test_x`)."""
        cut = nodeid.find("[", nodeid.find("::"))
        return nodeid[:cut] if cut > 0 and nodeid.endswith("]") else nodeid

    runner_module = sys.modules.get("_pytest.runner")
    update_var = None if UNITTEST or SYMPY else _getattr(runner_module, "_update_current_test_var", None)
    if _isinstance(update_var, types.FunctionType):

        def _update_current_test_var(item, when):
            """pytest's own, with the parameters left out of the id. pytest sets
            PYTEST_CURRENT_TEST to the test's id and phase; a parametrised test's id holds
            its parameters, the expected value among them (`test_ordinal[-11--11th]`):
            library code that kept the bug decoded the answer from it and was resolved (host
            and sandbox, strict and official). The file, the test's name and the phase stay,
            as tests and libraries use them. Captured below as the runner's own function.
            pytest's own is not called: it writes the whole id first, and what `os.environ`
            calls on the way (its `encodevalue`, an audit hook's `os.putenv` event) saw it
            with the parameters (library code that kept the bug read it there, resolved)."""
            env = os.environ  # (looked up now, as pytest does: a mapping put there sees the write)
            if when:
                env["PYTEST_CURRENT_TEST"] = ("%s (%s)" % (without_params(item.nodeid), when)).replace(
                    "\x00", "(null)")
            else:
                env.pop("PYTEST_CURRENT_TEST", None)

        _update_current_test_var.__module__ = "_pytest.runner"
        runner_module._update_current_test_var = seal(_update_current_test_var)

    # ------------------------------------------------------------------ the snapshot
    kinds = (types.FunctionType, types.BuiltinFunctionType, _type, classmethod, staticmethod, property,
             types.MethodType)
    captured = []  # (label, live mapping, name, object)
    captured_modules = []  # (name, module): sys.modules must still name the same module
    trusted_codes = _set()  # code objects of captured runner functions

    def capture(label, mapping, name, value, hot=True):
        captured.append((label, mapping, name, value, hot))
        fn = _getattr(value, "__func__", value)
        code = _getattr(fn, "__code__", None)
        if code is not None:
            trusted_codes.add(code)

    for name, value in _list(builtins.__dict__.items()):
        if _isinstance(value, (_type, types.BuiltinFunctionType)) or name in CAPTURED_DUNDER:
            capture("builtins." + name, builtins.__dict__, name, value)
    for modname in _sorted(sys.modules):
        if UNITTEST and (modname == "unittest" or modname.startswith("unittest.")):
            pass  # the whole of unittest is the outcome path
        elif UNITTEST or SYMPY or not (modname in CAPTURED_MODULES or modname.startswith(CAPTURED_PREFIXES)):
            continue
        mod = sys.modules.get(modname)
        mdict = _getattr(mod, "__dict__", None)
        if not _isinstance(mdict, _dict):
            continue
        captured_modules.append((modname, mod))
        for name, value in _list(mdict.items()):
            if not _isinstance(value, kinds):
                continue
            if not _str(_getattr(value, "__module__", None) or "").startswith(OWN_PREFIXES):
                continue  # typing, collections, ... imported by name: not the runner's
            capture(modname + "." + name, mdict, name, value, UNITTEST or modname in HOT_MODULES)
            if _isinstance(value, _type) and _getattr(value, "__module__", None) == modname:
                cdict = value.__dict__
                hot = UNITTEST or modname in HOT_MODULES
                for attr, member in _list(cdict.items()):
                    if _isinstance(member, kinds):
                        capture(modname + "." + name + "." + attr, cdict, attr, member, hot)

    # Python before 3.12 raises no audit event when a thread starts: threading's and
    # _thread's start function are wrapped to record who starts each thread (`thread_verdict`),
    # and captured like the runner's functions (putting the original back is critical)
    THREAD_EVENTS = frozenset(("_thread.start_new_thread", "_thread.start_joinable_thread"))
    thread_idents = {}  # thread id -> (why, name, patched file) of the code that started it

    def trampoline(function, verdict):
        """What a guarded new thread runs first: its starter's verdict under its thread id
        (any function, a builtin too: `deque.extend` over `map(operator.call, ...)` runs
        no Python frame the walks could name)."""
        def run(*a, **k):
            thread_idents[_ident()] = verdict
            try:
                return function(*a, **k)
            finally:
                thread_idents.pop(_ident(), None)
        return run

    TRAMPOLINE = trampoline(None, None).__code__

    def make_thread_guard(original):
        def thread_start_guard(function, args, kwargs=None, _start=original):
            verdict = None
            if not plugins_event():
                with Busy():
                    try:
                        verdict = thread_verdict(past_seal(_frame(1)))
                    except Exception:
                        pass
            if verdict is not None and (verdict[0] is not None or verdict[2] is not None):
                function = trampoline(function, verdict)
            return _start(function, args) if kwargs is None else _start(function, args, kwargs)
        return thread_start_guard

    if CHECKS and sys.version_info < (3, 12):
        # (`_thread.start_new`, the old name, is another builtin object before 3.12)
        for attr in ("start_new_thread", "start_new"):
            original = _getattr(_thread, attr, None)
            if original is None:
                continue
            guard = seal(make_thread_guard(original))
            for mod, name in ((_threading, "_start_new_thread"), (_thread, attr)):
                if _getattr(mod, name, None) is original:
                    mod.__dict__[name] = guard
                    capture(mod.__name__ + "." + name, mod.__dict__, name, guard)

    # `_posixsubprocess.fork_exec`, what subprocess forks and runs a command with, raises no
    # audit event of its own (subprocess raises `subprocess.Popen` before it): library code
    # that kept the bug called it directly to `cat` the test file, unseen. Called by anything
    # but subprocess, its command is judged as `spawned` judges one, and its fork as a fork.
    try:
        import _posixsubprocess
    except ImportError:
        _posixsubprocess = None
    fork_exec = _getattr(_posixsubprocess, "fork_exec", None)
    fork_exec_guard = None
    if CHECKS and fork_exec is not None:
        def fork_exec_guard(*args, _fork_exec=fork_exec):
            if not plugins_event():
                with Busy():
                    try:
                        caller = past_seal(_frame(1))
                        if caller.f_code.co_name != "_execute_child" or \
                                real_of(caller.f_code.co_filename) != STDLIB + "subprocess.py":
                            spawned(args[:1])
                            rel = brought_by_patch(caller, None, [])
                            if rel is not None:
                                report_tampered("%s forks the test process (_posixsubprocess.fork_exec), which its "
                                                "code at the graded state never does" % rel)
                    except Exception:
                        pass
            return _fork_exec(*args)

        fork_exec_guard = seal(fork_exec_guard)
        _posixsubprocess.fork_exec = fork_exec_guard
        capture("_posixsubprocess.fork_exec", _posixsubprocess.__dict__, "fork_exec", fork_exec_guard)

    # `_imp._fix_co_filename` renames a code object (and the code it holds) in place, with no
    # audit event: library code that kept the bug compiled a frame walk under a made-up name
    # and renamed it `os.py` (directly, or through importlib's `_compile_bytecode`), and
    # the walk passed as the standard library's. Called by anything but importlib loading
    # a pyc, the caller is judged as a compile under an installed name is.
    import _imp
    fix_co_filename = _getattr(_imp, "_fix_co_filename", None)
    if CHECKS and _isinstance(fix_co_filename, types.BuiltinFunctionType):
        def fix_co_filename_guard(code, path, _fix=fix_co_filename):
            if not plugins_event():
                with Busy():
                    try:
                        f = past_pyc_loading(past_seal(_frame(1)))
                        rel = brought_by_patch(f, None, []) if f is not None else None
                        if rel is not None:
                            report_tampered("%s renames code to %s (_imp._fix_co_filename), which then passes for "
                                            "that file's code" % (rel, path))
                    except Exception:
                        pass
            return _fix(code, path)

        fix_co_filename_guard = seal(fix_co_filename_guard)
        _imp._fix_co_filename = fix_co_filename_guard
        capture("_imp._fix_co_filename", _imp.__dict__, "_fix_co_filename", fix_co_filename_guard)

    captured_fns = {}  # id(function) -> label: the captured functions, and those captured methods hold
    for cap in captured:
        for cap_fn in (_getattr(cap[3], "__func__", cap[3]), _getattr(cap[3], "fget", None),
                       _getattr(cap[3], "fset", None)):
            if _isinstance(cap_fn, types.FunctionType):
                captured_fns[_id(cap_fn)] = cap[0]
    if UNITTEST:
        Recorder, unittest_codes = unittest_outcomes
        trusted_codes.update(unittest_codes)
        for attr, member in _list(Recorder.__dict__.items()):
            if _isinstance(member, kinds):
                capture("minisandbox.recorder." + attr, Recorder.__dict__, attr, member)
    if SYMPY:  # a Python function: the builtins loop above does not take it
        capture("builtins.exec", builtins.__dict__, "exec", sympy_exec)
    MISSING = object()
    groups = {}
    for label, mapping, name, value, hot in captured:
        g = groups.get(_id(mapping))
        if g is None:
            g = groups[_id(mapping)] = (mapping, [], [], [], hot)
        g[1].append(name)
        g[2].append(value)
        g[3].append(label)
    baseline = {}  # (id(mapping), name) -> the value now expected, where it legitimately changed

    def regroup():
        """(mapping, names, values, labels, hot, getter): `getter(mapping)` is the tuple of
        the names' current values, in one C call (operator.itemgetter)."""
        return [(m, _tuple(n), _tuple(baseline.get((_id(m), x), y) for x, y in _zip(n, v)), _tuple(lb), hot,
                 _itemgetter(*(_tuple(n) * 2 if _len(n) == 1 else _tuple(n))))
                for m, n, v, lb, hot in groups.values()]

    captured_groups = regroup()
    BUILTINS_DICT = builtins.__dict__
    fixture_set = {}  # (id(mapping), name) -> the value a fixture of test code set there
    fixture_verdicts = {}  # a fixture function's code -> is it test code's (test_fixture)
    _partial, _chain, _call = functools.partial, itertools.chain.from_iterable, operator.methodcaller("__call__")

    def hot_snapshot():
        """The end-of-test comparison of the outcome path's groups as one C-level pass:
        (one call per hot group giving its names' current values, the values expected in
        the same order). A lone name's getter gives it twice (see regroup)."""
        calls, expected = [], []
        for mapping, _names, values, _labels, hot, getter in captured_groups:
            if hot:
                calls.append(_partial(getter, mapping))
                expected.extend(values * 2 if _len(values) == 1 else values)
        return _tuple(calls), _tuple(expected)

    hot_fast = [hot_snapshot()]
    ok_callables = {}  # id -> hook or test function whose origin was verified (kept alive here)
    dispatch_attrs = {}  # id(hook caller) -> its attributes holding dispatch functions
    impl_seen = {}  # id(hook caller) -> ids of its implementations' functions at the last check
    _fn_of = operator.attrgetter("function")

    def callable_key(value):
        """Identity of a function, or of a bound method's (function, instance): each
        attribute access makes a new bound-method object."""
        if _isinstance(value, types.MethodType):
            return (_id(value.__func__), _id(value.__self__))
        return _id(value)
    state = {"config": None, "pm": None, "collected": 0, "reported": _set(), "hookexec": _set(),
             "digests": {}, "memo": None}

    def report_tampered(what, critical=True):
        if what in state["reported"]:
            return
        state["reported"].add(what)
        write({"ev": "tampered", "what": what, "critical": critical})

    # ------------------------------------------------------------------ where code comes from
    real_cache = {}

    def real_of(name):
        got = real_cache.get(name)
        if got is None:
            got = real_cache[name] = _realpath(name)
        return got

    def rel_to_root(path):
        rel = _relpath(path, ROOT)
        return None if rel == ".." or rel.startswith(".." + _sep) else rel.replace(_sep, "/")

    def file_verdict(filename):
        """None when code from `filename` may sit on the outcome path, else why not
        (remembered for the duration of one `check`: one stat per file and check)."""
        memo = state["memo"]
        if memo is not None:
            if filename not in memo:
                memo[filename] = file_verdict_now(filename)
            return memo[filename]
        return file_verdict_now(filename)

    loaded_files = [-1, _set()]  # len(sys.modules) when listed, the real files of its modules
    # the main script's own code (the bottom of the stack when the plugin is made: pytest's
    # console script): other code under its name is the patch's (compiled under
    # `__main__.__file__`, a frame walk passed as the script's)
    _bottom = _frame(0)
    while _bottom.f_back is not None:
        _bottom = _bottom.f_back
    MAIN_CODE = _bottom.f_code
    del _bottom

    def installed(real):
        """Is the real path `real` installed code: the standard library, the runner's, a
        `*-packages` directory?"""
        return real.startswith(STDLIB) or real.startswith(RUNNER_DIRS) or "-packages" + _sep in real

    def loaded_or_installed(real):
        """Is `real` (a file outside the repository that code names) installed code
        (`installed`) or a loaded module's file? Code compiled under another existing name
        (`/`, `/etc/hosts`) walked the frames and read a seal's default as installed code
        would."""
        if installed(real):
            return True
        if loaded_files[0] != _len(sys.modules):
            files = _set()
            for name, mod in _list(sys.modules.items()):
                f = _getattr(mod, "__file__", None)
                if _isinstance(f, _str) and name != "__main__":  # (a console script: MAIN_CODE)
                    files.add(real_of(f))
            loaded_files[0], loaded_files[1] = _len(sys.modules), files
        return real in loaded_files[1]

    def made_during_run(filename):
        """True when `filename` names no file that existed before the run: none at all, or
        one written during it (library code that wrote a module and imported it; the same
        test as `file_verdict_now`'s)."""
        real = real_of(filename)
        if real == ME:
            return False
        try:
            return _stat(real).st_ctime_ns > STAMP
        except OSError:
            return True

    def file_verdict_now(filename):
        if not filename or filename.startswith("<"):
            return "code not from a file (%s)" % filename
        real = real_of(filename)
        if real == ME:
            return None
        try:
            st = _stat(real)
        except OSError:
            return "code from a file that does not exist (%s)" % filename
        rel = rel_to_root(real)
        where = rel if rel is not None else real
        if st.st_ctime_ns > STAMP:
            return "%s was written during the test run" % where
        if real.startswith(RUNNER_DIRS) or rel is None:
            return None  # pytest/pluggy, or installed before the run
        want = GRADED.get(rel)
        if want is None and rel in PATCHED:
            return "%s is changed by the candidate patch" % rel
        if want is not None:  # a test file or conftest: its graded-state content decides
            key = (real, st.st_ctime_ns, st.st_size)
            got = state["digests"].get(key)
            if got is None:
                try:
                    with open(real, "rb") as f:
                        got = _sha256(f.read()).hexdigest()
                except OSError:
                    got = "?"
                state["digests"][key] = got
            if got != want:
                return "%s differs from the graded state" % rel
        return None

    module_codes = {}  # real file -> every code object its loaded module defines

    def codes_of_module(real, hint):
        """Code objects of the functions and classes (methods, nested functions and
        classes included) of the module loaded from `real`: `hint` (the registered plugin
        object, or its class's module) first, then any sys.modules entry of that file."""
        got = module_codes.get(real)
        if got is not None:
            return got
        mods = []
        if _isinstance(hint, types.ModuleType):
            mods.append(hint)
        elif hint is not None:
            mods.append(sys.modules.get(_getattr(_type(hint), "__module__", "") or ""))
        for mod in _list(sys.modules.values()):
            f = _getattr(mod, "__file__", None)
            if _isinstance(f, _str) and f.endswith((".py", ".pyc")) and \
                    real_of(f[:-1] if f.endswith(".pyc") else f) == real:
                mods.append(mod)
        todo = []
        mod_names = _set(_getattr(m, "__name__", None) for m in mods)
        for mod in mods:
            f = _getattr(mod, "__file__", None)
            if not _isinstance(f, _str) or real_of(f[:-1] if f.endswith(".pyc") else f) != real:
                continue
            for value in _list(_getattr(mod, "__dict__", {}).values()):
                todo.append(value)
                if _issubclass(_type(value), _type):  # a module-level class's members, whatever its __module__
                    todo.extend(_list(value.__dict__.values()))
        codes = codes_defined(todo, real, mod_names, real_of)
        module_codes[real] = codes
        return codes

    verified = _set()  # code objects found in their own file's module

    def own_codes():
        """Every code object of this plugin's module (nested ones included): code that
        merely names the plugin's file is not the plugin's. Library code that kept the bug
        compiled a swallowing hook under this file's name (from a syntax tree, whose compile
        event carries no name, or through marshal, which raises none) and every test
        passed."""
        found, todo = _set(), []
        for value in _list(globals().values()):
            if _isinstance(value, types.FunctionType):
                todo.append(value.__code__)
            elif _isinstance(value, _type) and _getattr(value, "__module__", None) == __name__:
                for member in _list(value.__dict__.values()):
                    fn = _getattr(member, "__func__", member)
                    if _isinstance(fn, types.FunctionType):
                        todo.append(fn.__code__)
        while todo:
            code = todo.pop()
            if code not in found:
                found.add(code)
                todo.extend(c for c in code.co_consts if _isinstance(c, types.CodeType))
        return frozenset(found)

    PLUGIN_CODES = own_codes()

    LOOKING = {}  # thread id -> True while `plugins_event` looks at that thread's frames

    def plugins_event():
        """True when what is being judged (an audit event, called by the audit hook; a
        guarded function's call, by the guard) is this plugin's own doing: its thread
        is busy and the first frame there outside the standard library is the plugin's code.
        Why not `busy()` alone: library code that the plugin runs while busy (an `os.fspath`
        replaced on the module, which `realpath` looks up at every call; a path-like's
        `__fspath__`) walked the test's frames unjudged."""
        key = _ident()
        if not BUSY.get(key):
            return False
        if LOOKING.get(key):
            return True  # the frame access below raises an event of its own
        LOOKING[key] = True
        try:
            f = _frame(2)  # (the hook's or guard's caller: the code that raised the event or called)
            while f is not None:
                code = f.f_code
                if code is SEAL_CODE:
                    f = f.f_back
                    continue
                if code in PLUGIN_CODES:
                    return True
                name = code.co_filename
                if not (name.startswith("<frozen") or (name.startswith(STDLIB) and "-packages" + _sep not in name)):
                    return False
                f = f.f_back
            return False
        except ValueError:  # no Python frame there (an event of the interpreter's own)
            return True
        finally:
            LOOKING.pop(key, None)
    NOT_MINE = "code claiming the results plugin's file is not its code (%s)"

    def code_verdict(code, plugin=None):
        """file_verdict, plus: the code must be defined by the module loaded from the file
        it names (code compiled under another file's name is not), or be one of the
        functions captured at import."""
        filename = code.co_filename
        bad = file_verdict(filename)
        if bad is not None or code in trusted_codes or code in verified:
            return bad
        real = real_of(filename)
        if real == ME:
            return None if code in PLUGIN_CODES else NOT_MINE % code.co_name
        if code in codes_of_module(real, plugin):
            verified.add(code)
            return None
        module_codes.pop(real, None)  # defined since the module was scanned? look once more
        if code in codes_of_module(real, plugin):
            verified.add(code)
            return None
        return "code claiming %s:%d is not defined by that file's module" % (
            rel_to_root(real) or filename, code.co_firstlineno)

    def dist_location(dist):
        """Where an entry point's distribution is: importlib.metadata's metadata directory
        (`_path`), pkg_resources' `location` (old pluggy), else `locate_file`; None when
        none says."""
        loc = _getattr(dist, "_path", None)
        if loc is None:
            loc = _getattr(dist, "location", None)
        if loc is None:
            try:
                loc = _str(dist.locate_file(""))
            except Exception:
                return None
        return _str(loc)

    def installed_plugin_wrapper(fn, replaced, depth=4):
        """Is `fn`, which replaced `replaced` on pytest's outcome path, a wrapper that an
        installed plugin put there? Hypothesis' pytest11 plugin wraps
        `FixtureFunctionMarker.__call__` when it is imported (`_ban_given_call`), and an
        environment with hypothesis installed would otherwise be `results-tampered` on
        every run. Accepted only when all hold: `fn` is a function of the module of a
        plugin that pytest loaded from a `pytest11` entry point, that module and its
        distribution sit outside the repository and were not written during the run,
        `fn`'s globals are that module's, its code is defined there, and it refers to the
        value it replaced, by a global name it uses or in its closure (a wrapper that keeps
        the original, as hypothesis' `_orig_call`, not a stand-in: a no-op
        function of an installed module, or one of a distribution the patch adds to the
        repository, stays a finding)."""
        if not _isinstance(fn, types.FunctionType):
            return False
        code = fn.__code__
        held = [fn.__globals__.get(name) for name in code.co_names]
        for cell in _getattr(fn, "__closure__", None) or ():
            try:
                held.append(cell.cell_contents)
            except ValueError:  # an empty cell
                pass
        if not _any(_map(_is, held, _repeat(replaced))) and not (depth > 1 and _any(
                installed_plugin_wrapper(h, replaced, depth - 1) for h in held
                if _isinstance(h, types.FunctionType) and h is not fn)):
            return False  # neither the replaced value nor a wrapper of it (several plugins in turn)
        return installed_plugin_function(fn)

    def installed_plugin_function(fn):
        """`fn` is a function of the module of a plugin that pytest loaded from a `pytest11`
        entry point, that module and its distribution outside the repository and not written
        during the run, `fn`'s globals that module's and its code defined there."""
        code = fn.__code__
        real = real_of(code.co_filename)
        if rel_to_root(real) is not None or code_verdict(code) is not None:
            return False
        lister = _getattr(state["pm"], "list_plugin_distinfo", None)
        if lister is None:
            return False
        try:
            loaded = _list(lister())
        except Exception:
            return False
        for plugin, dist in loaded:
            f = _getattr(plugin, "__file__", None)
            if not f or real_of(f) != real or fn.__globals__ is not _getattr(plugin, "__dict__", None):
                continue
            loc = dist_location(dist)
            if loc is not None and rel_to_root(real_of(loc)) is None and file_verdict(loc) is None:
                return True
        return False

    def installed_case_runner(fn):
        """pytest-django runs Django's test cases with a `TestCaseFunction.runtest` of its own
        (`non_debugging_runtest`: the unittest case is run directly, not through the replaced
        method), put there by an autouse class fixture and put back after the class: every
        pytest-django environment whose suite has a Django `TestCase` was `results-tampered`.
        Accepted when `fn` runs the test case itself (its code reads `_testcase`) and comes
        from an installed plugin as `installed_plugin_wrapper` requires."""
        if not _isinstance(fn, types.FunctionType) or "_testcase" not in fn.__code__.co_names:
            return False
        return installed_plugin_function(fn)

    def callable_verdict(obj, plugin=None):
        fn = _getattr(obj, "__func__", obj)
        code = _getattr(fn, "__code__", None)
        if code is not None:
            return code_verdict(code, plugin)
        mod = sys.modules.get(_getattr(_type(obj), "__module__", "") or "")
        f = _getattr(mod, "__file__", None)
        if f is None:
            return "%r is not Python code from a file" % (_type(obj).__name__,)
        return file_verdict(f)

    def borrowed_hook(impl, hook_name):
        """Why a hook implementation is a function defined for something else, or None: it
        must have Python code of its own, named as the hook (`def pytest_pyfunc_call`), or
        be a function its plugin defines (`plugins_own`) under pluggy's `specname` or
        another name of its class body. Library code
        registered an object whose `pytest_pyfunc_call` was `platform.system` (no
        arguments, returns "Linux"): pytest took it as the call's result and no test
        function ran; every check passed, since the code was the standard library's own."""
        fn = _getattr(impl, "function", None)
        func = _getattr(fn, "__func__", fn)
        code = _getattr(func, "__code__", None)
        if _type(code) is not types.CodeType:
            # a wrapper in C (`functools.lru_cache(platform.system)`) hides whose code runs
            return "%s (%s), a hook with no Python code of its own" % (
                _getattr(fn, "__qualname__", "?"), _type(fn).__name__)
        if code.co_name == hook_name or code is SEAL_CODE or code in PLUGIN_CODES:
            return None
        opts = _getattr(impl, "opts", None)
        specname = opts.get("specname") if _isinstance(opts, _dict) else None
        if (specname == hook_name or fn is not func) and plugins_own(func, code, _getattr(impl, "plugin", None)):
            # pluggy's specname on the plugin's own function; or a method its class body
            # binds under another name as well (pytest's Session:
            # `pytest_collectreport = pytest_runtest_logreport`)
            return None
        return "%s.%s (%s), a function that is no %s hook" % (
            _getattr(fn, "__module__", "?"), code.co_name, code.co_filename, hook_name)

    def plugins_own(func, code, plugin):
        """Is `func` (its `code`) defined by `plugin` itself: a module plugin's file, or a
        class of the plugin (or the plugin's class) whose body holds it, in that class's
        module's file? An installed function with pluggy's `specname` put on a class of the
        patch's (`_pytest.config.get_config`, which takes no argument) ran no test."""
        real = real_of(code.co_filename)
        if _isinstance(plugin, types.ModuleType):
            f = _getattr(plugin, "__file__", None)
            return _isinstance(f, _str) and real_of(f) == real and \
                _any(_getattr(v, "__func__", v) is func for v in _list(plugin.__dict__.values()))
        cls = plugin if _isinstance(plugin, _type) else _type(plugin)
        for klass in _getattr(cls, "__mro__", ()):
            if _any(_getattr(v, "__func__", v) is func for v in _list(klass.__dict__.values())):
                f = _getattr(sys.modules.get(_getattr(klass, "__module__", "") or ""), "__file__", None)
                if _isinstance(f, _str) and real_of(f) == real:
                    return True
        return False

    def hook_impls(hook_caller):
        get = _getattr(hook_caller, "get_hookimpls", None)
        if get is not None:
            return get()
        return _list(_getattr(hook_caller, "_nonwrappers", [])) + _list(_getattr(hook_caller, "_wrappers", []))

    # ------------------------------------------------------------------ audit hooks
    def untrusted_caller(skip_stdlib, past_runner=False):
        """(file_verdict, file) of the code that raised the current audit event (frames of
        this plugin and, with skip_stdlib, of the standard library and importlib skipped;
        with past_runner, of pytest, pluggy and unittest too: library code that called
        pytest's `_rewrite_test` on the test file read it through pytest), and the base
        names of the files skipped."""
        f = _frame(2)
        passed = []
        bottom = None
        while f is not None:
            name = f.f_code.co_filename
            real = real_of(name) if not name.startswith("<") else name
            if real == ME:
                if f.f_code not in PLUGIN_CODES:
                    return NOT_MINE % f.f_code.co_name, name, passed
                f = f.f_back
                continue
            if skip_stdlib and (name.startswith("<frozen") or (real.startswith(STDLIB) and "-packages" + _sep not in real)
                                or runner_forwarder(f.f_code, real) or (past_runner and real.startswith(RUNNER_DIRS))):
                passed.append(_os_basename(real))
                bottom, f = f, f.f_back
                continue
            if name == "<string>" and site_startup(f):
                # a `.pth` line that `site` runs at start-up (setuptools' `*-nspkg.pth` calls
                # `sys._getframe`: "seen" in every run of tornado's suite, no candidate code)
                return None, None, passed
            if past_runner and name == "<string>" and f.f_back is None and f.f_code.co_name == "<module>":
                # the bottom of the main thread: the test command's own `python -c` program
                # that called pytest (`sys.exit(pytest.main())`), no code of the patch's
                return None, None, passed
            return file_verdict(name), name, passed
        # nothing but the standard library on this thread: the code that started it answers
        # (a pool's worker thread running `Path.read_text` for library code that kept the bug)
        started = thread_starter(bottom) if skip_stdlib else None
        if started is not None and started[0] is not None:
            return started[0], started[1], passed
        return None, None, passed

    # ------------------------------------------------------------------ threads
    # Code on a thread of its own has only the standard library below it (threading's
    # bootstrap, a pool's worker, then `Path.read_text` or `sys._current_frames`), so the
    # walks above find no culprit there: library code that kept the bug handed its reads to
    # `ThreadPoolExecutor(1).submit` and was resolved, host and sandbox, strict and official,
    # with no finding. Each thread's start records what the walks say of the code that
    # started it (`thread_verdict`): before 3.12 the start guard hands it to the new thread
    # through `trampoline` (by thread id), from 3.12 the start events file it by the thread
    # object or code (`thread_started`); a walk that reaches the bottom of a thread's stack
    # takes it (`thread_starter`). (A thread started earlier by other code and fed work
    # later, a pool that honest code made, still answers for that code.)
    _weakref = weakref.ref
    thread_starts = {}  # id(key) -> (a reference to the key, (why, name, patched file or None))

    def thread_key(fn):
        """What names a new thread: its `threading.Thread` (the bootstrap's `self`), else the
        code it runs."""
        owner = _getattr(fn, "__self__", None)
        if _isinstance(owner, THREAD):
            return owner
        return _getattr(_getattr(fn, "__func__", fn), "__code__", None)

    def thread_verdict(caller):
        """What the walks say of `caller`, code that starts a thread: (why, name, patched file)."""
        why, name, _passed = untrusted_caller(skip_stdlib=True)
        rel = brought_by_patch(caller, None, []) if INTROSPECTS is not None else None
        return why, name, rel

    def thread_started(fn, caller):
        """Record `thread_verdict(caller)` for the thread that runs `fn` (the audit events of
        3.12 and later, which cannot wrap what the thread runs)."""
        key = thread_key(fn)
        if key is None:
            return
        why, name, rel = thread_verdict(caller)
        try:
            ref = _weakref(key)
        except TypeError:
            ref = (lambda k: lambda: k)(key)
        thread_starts[_id(key)] = (ref, (why, name, rel))

    def thread_starter(bottom):
        """(why, name, patched file) of the code that started the thread whose stack's
        bottom frame is `bottom`, if a start was seen (None on the main thread)."""
        if _ident() == MAIN_THREAD:
            return None
        hit = thread_idents.get(_ident())
        if hit is not None:
            return hit
        if bottom is None or not thread_starts:
            return None
        code = bottom.f_code
        keys = [code]
        if code.co_name == "_bootstrap":
            try:
                keys.insert(0, bottom.f_locals.get("self"))
            except Exception:
                pass
        for key in keys:
            hit = thread_starts.get(_id(key))
            if hit is not None and key is not None and hit[0]() is key:
                return hit[1]
        return None

    MAIN_THREAD = _ident()
    THREAD = _threading.Thread

    # ------------------------------------------------------------------ frames reached
    #: Patched files whose graded-state copy already looks into the running program
    #: (frames, tracers, the heap: the manifest's `introspects`, see
    #: minisandbox.grading.gradedstate.INTROSPECTION_WORDS); None: the frame rule is off
    INTROSPECTS = manifest.get("introspects")
    INTROSPECTS = None if INTROSPECTS is None else _set(_str(p) for p in INTROSPECTS)
    #: the patched files whose graded-state copy works with git (the manifest's
    #: `git_readers`, see minisandbox.grading.gradedstate); None: the git rule is off
    GIT_READERS = manifest.get("git_readers")
    GIT_READERS = None if GIT_READERS is None else _set(_str(p) for p in GIT_READERS)
    #: the patched files whose graded-state copy starts processes (the manifest's
    #: `spawners`); None: the spawn rule is off
    SPAWNERS = manifest.get("spawners")
    SPAWNERS = None if SPAWNERS is None else _set(_str(p) for p in SPAWNERS)
    #: the patched files whose graded-state copy calls native code through ctypes or cffi
    #: (the manifest's `native_callers`); None: judged as INTROSPECTS says
    NATIVE_CALLERS = manifest.get("native_callers")
    NATIVE_CALLERS = None if NATIVE_CALLERS is None else _set(_str(p) for p in NATIVE_CALLERS)
    #: the attribute reads that hand out a frame (object.__getattr__ events)
    FRAME_ATTRS = frozenset(("tb_frame", "gi_frame", "cr_frame", "ag_frame"))
    #: standard-library functions that hand their caller frames or what frames hold (the
    #: frame objects, the source lines of the callers, their locals): a frame reached
    #: through them is reached by their caller. Any other standard-library function that
    #: looks at frames (logging's findCaller, namedtuple's module name) keeps them.
    FRAME_HANDERS = frozenset(("currentframe", "stack", "trace", "getouterframes", "getinnerframes",
                               "walk_stack", "walk_tb", "extract_stack", "format_stack", "print_stack",
                               "extract", "_extract_from_extended_frame_gen", "get_stack", "_task_get_stack",
                               "_task_print_stack", "getcoroutinelocals", "getgeneratorlocals"))

    #: standard-library code that only calls what it is given and hands back what that
    #: returns (functools' dispatchers and wrappers, a thread's bootstrap, a pool's worker, a
    #: lambda such as logging's `currentframe`): passed through like the handers. Library code
    #: that kept the bug got the test's frame from `functools.singledispatch(sys._getframe)(0)`
    #: and from `logging.currentframe()`, and from `sys._current_frames()` on a pool's thread
    FORWARDERS = _tuple(STDLIB + p for p in ("functools.py", "threading.py", "concurrent/futures/thread.py",
                                             "weakref.py", "contextlib.py", "sched.py", "asyncio/events.py"))

    SITE = STDLIB + "site.py"

    def site_startup(f):
        """True for a `.pth` file's line that `site` runs at interpreter start-up (only
        site.py and its import below it): setuptools' `*-nspkg.pth` lines call `sys._getframe`, and the
        plugin is already loaded there in unittest mode (every run of tornado's suite was
        `results-tampered` with no candidate code). `site.addsitedir` called later by other
        code has that code below it."""
        b = f.f_back
        if b is None or b.f_code.co_name != "addpackage" or _ident() != MAIN_THREAD:
            return False
        while b is not None:
            name = b.f_code.co_filename
            # (site is frozen from 3.11; below it, the import of site)
            if name != "<frozen site>" and not importlib_file(name) and (name.startswith("<") or real_of(name) != SITE):
                return False
            b = b.f_back
        return True

    #: pytest's own functions that call what they are given and hand back its result
    #: (`CallInfo.from_call(sys._getframe, "call").result` gave library code that kept the
    #: bug a frame, the heap or the test file with pytest's `runner.py` as the caller): passed
    #: through like the standard library's forwarders
    RUNNER_FORWARDERS = frozenset((("runner.py", "from_call"), ("recwarn.py", "warns"),
                                   ("recwarn.py", "deprecated_call")))

    def runner_forwarder(code, real):
        return (_os_basename(real), code.co_name) in RUNNER_FORWARDERS and real.startswith(RUNNER_DIRS)

    def brought_by_patch(f, handers, through, native=None):
        """The file (repo-relative, or a `<...>` name) of the code at `f` or, past standard
        library frames that are all `handers` or forwarders (`FORWARDERS`, lambdas; with
        `handers` None: any; their names appended to `through`), above it, when the
        candidate patch brought that code: a file the patch changes whose graded-state copy
        looks into the running program nowhere (INTROSPECTS, or the files `native` names),
        or code compiled from a
        string (doctests excepted). At the bottom of a thread's stack, the code that
        started the thread. None otherwise: any other standard library function on the way
        does it for itself."""
        bottom = None
        while f is not None:
            name = f.f_code.co_filename
            if name.startswith("<") and not name.startswith("<frozen"):
                return None if name.startswith("<doctest ") or not PATCHED or site_startup(f) else name
            real = real_of(name)
            if real == ME:
                if f.f_code is TRAMPOLINE:  # a guarded thread's bottom: its starter answers
                    break
                return None if f.f_code in PLUGIN_CODES else name
            if name.startswith("<frozen") or (real.startswith(STDLIB) and "-packages" + _sep not in real):
                if handers is not None and f.f_code.co_name not in handers and \
                        f.f_code.co_name != "<lambda>" and real not in FORWARDERS:
                    return None
                through.append(f.f_code.co_name)
                bottom, f = f, f.f_back
                continue
            if runner_forwarder(f.f_code, real):
                through.append(f.f_code.co_name)
                f = f.f_back
                continue
            rel = rel_to_root(real)
            if rel is None or rel not in PATCHED:
                # not a file the patch changes: brought by it all the same when the file did
                # not exist before the run (written by library code, or a made-up name a
                # compile gave code: `/opt/x/_peek.py`), or, outside the repository, when no
                # module was loaded from it and it is not installed (a compile gave code the
                # name of a directory, `/`), else installed or unchanged code
                if made_during_run(name):
                    return rel or name
                if rel is None and f.f_code is not MAIN_CODE and not loaded_or_installed(real):
                    return name
                return None
            allowed = INTROSPECTS if native is None else native
            return None if allowed is not None and rel in allowed else rel
        started = thread_starter(bottom)
        return started[2] if started is not None else None

    def frame_reached(event):
        """Library code that the candidate patch changed, reaching the call stack's frames
        (`sys._getframe`, `inspect.currentframe`/`stack`, a traceback's, generator's or
        task's frame), where that file's graded-state copy never does: critical. From a
        frame, `f_back` leads to the test's, whose locals hold the expected value (a
        parametrised test's) and whose code its constants; library code that kept the bug
        returned them and was resolved, host and sandbox, strict and official, with no
        finding (`inspect.currentframe` runs in the standard library, and reading `f_back`
        or `f_locals` raises no audit event)."""
        through = []
        rel = brought_by_patch(_frame(2), FRAME_HANDERS, through)
        if rel is not None:
            report_tampered("%s reaches the call stack's frames (%s%s), which its code at the graded state "
                            "never does" % (rel, event, " through " + ", ".join(through) if through else ""))

    def signal_handler_set(handler):
        """A Python signal handler is called with the frame the signal interrupted: library
        code that set one and raised the signal walked from that frame to the test's, with
        no audit event at all (host and sandbox, strict and official). A handler set by
        code the patch brought (as `frame_reached` judges it) is critical. `_signal.signal`
        is this guard from the plugin's start; the original is its default argument,
        whose read by such code is critical too (the `__defaults__` audit event)."""
        if INTROSPECTS is None or busy() or not _is_callable(handler):
            return
        with Busy():
            rel = brought_by_patch(_frame(2), ("signal",), [])
            if rel is not None:
                report_tampered("%s sets a signal handler (it is handed the interrupted frame), which its code "
                                "at the graded state never does" % rel)

    _is_callable = callable
    try:
        import _signal as c_signal
    except ImportError:  # (no signals on this platform)
        c_signal = None
    signal_guard = None
    if CHECKS and _is_callable(_getattr(c_signal, "signal", None)):
        def signal_guard(signalnum, handler, _set_handler=c_signal.signal, _judge=signal_handler_set):
            _judge(handler)
            return _set_handler(signalnum, handler)

        c_signal.signal = signal_guard
        GUARDS[_id(signal_guard)] = signal_guard

    # ------------------------------------------------------------------ forks
    # A forked child is a copy of the test process in which the patch's code may do what
    # it likes after pointing the results channel at /dev/null: library code that kept the
    # bug forked, walked the frames in the child, piped the answer back and was resolved
    # (host and sandbox, strict and official). A fork by code the patch brought (as
    # `frame_reached` judges it, past any standard-library frame: multiprocessing, a
    # `preexec_fn`) in a file whose graded-state copy never forks is critical, judged in the
    # parent (the `os.fork` event) and in the child before the fork returns to its caller
    # (subprocess's `preexec_fn` forks without that event).
    FORK_EVENTS = frozenset(("os.fork", "os.forkpty"))

    def fork_judged(where):
        if INTROSPECTS is None:
            return
        caller = _frame(2)
        if caller is not None and caller.f_code.co_name == "_execute_child":
            # subprocess's `preexec_fn`: a builtin (`os.setsid`), or a partial of one, runs
            # no Python code in the child (an honest library's). Anything else may: a
            # `functools.partial` of the patch's function ran the fork oracle in the child.
            # (Judged by type alone: reading attributes of the caller's object runs its code.)
            pre = caller.f_locals.get("preexec_fn")
            if _type(pre) is functools.partial:
                pre = functools.partial.__dict__["func"].__get__(pre)
            if _type(pre) is types.BuiltinFunctionType and \
                    _any(pre.__self__ is sys.modules.get(m) for m in ("posix", "_signal", "signal")):
                return  # (`exec` or `operator.call` are builtins too, and run Python code)
        rel = brought_by_patch(caller, None, [])
        if rel is not None:
            report_tampered("%s forks the test process (%s), which its code at the graded state never does"
                            % (rel, where))

    def fork_child():
        if busy():
            return
        with Busy():
            try:
                fork_judged("in the child")
            except Exception:
                pass

    _at_fork = _getattr(os, "register_at_fork", None)
    if CHECKS and _at_fork is not None:
        _at_fork(after_in_child=fork_child)

    # ------------------------------------------------------------------ borrowed names
    # Code compiled under another file's name passes every check that trusts a frame by
    # its file: library code that kept the bug compiled a hook that swallowed every failure
    # under this plugin's own file name and registered it on pytest's plugin manager (every
    # test passed), walked the heap from code named `_pytest/python.py`, and walked the
    # frames from code named `<doctest ...>` (exempt from the frame rule), each resolved
    # with no critical finding. A compile (or a code object made or renamed) under this
    # plugin's file, an installed or standard-library file, a doctest's or a frozen
    # module's name, asked for by code the patch brought (as the fork rule judges it), is
    # critical, unless it compiles that file's own content (an import, `runpy`).
    def borrowed_name(filename):
        """What `filename`, given to `compile`, borrows, or None."""
        if filename.startswith("<"):
            if filename.startswith("<doctest "):
                return "a doctest's name"
            return "a frozen module's name" if filename.startswith("<frozen") else None
        real = real_of(filename)
        if real == ME:
            return "the results plugin's file name"
        if installed(real):
            return "an installed file's name"
        rel = rel_to_root(real)
        if rel is not None and rel not in PATCHED:
            # (a file the patch changes is not borrowed: code under its name is judged as the
            # patch's anyway, and a library may compile a snippet under its own file name).
            # Any file: code compiled under `pyproject.toml` passed for an unchanged file's
            # code, which every rule that asks whose code runs trusts
            return "a repository module's name" if real.endswith(".py") else "a repository file's name"
        return None

    def same_source(source, filename):
        """True when `source` is the content of the file `filename` (an import compiles it)."""
        if _type(source) is not bytes and _type(source) is not _str:
            return False  # a syntax tree: rewritten code
        try:
            with open(filename, "rb") as f:
                data = f.read()
        except OSError:
            return False
        return source == data if _type(source) is bytes else source.encode("utf-8", "replace") == data

    #: what `borrowed_name` says of a name that is an existing file's
    BORROWED_FILES = ("an installed file's name", "a repository module's name", "a repository file's name")

    def compiled_under(args, event):
        filename = args[1] if _len(args) > 1 else None
        if _type(filename) is bytes:
            filename = _fsdecode(filename)
        if _type(filename) is not _str:
            return
        why = borrowed_name(filename)
        caller = _frame(2) if why is not None else None
        if caller is None:
            return
        here = caller.f_code.co_filename
        here = here if here.startswith("<") else real_of(here)
        if event == "code.__new__":
            if why in BORROWED_FILES:
                # cloudpickle rebuilds functions by value under their own file names, for
                # itself; the patch's own call (`code.replace(co_filename=...)`) is judged
                rel = brought_by_patch(caller, (), [])
                if rel is not None:
                    report_tampered("%s makes code under %s (%s), which then passes for that file's code"
                                    % (rel, why, filename))
                return
        elif caller.f_code.co_name == "parse" and here == STDLIB + "ast.py":
            return  # a syntax tree, no code
        elif why in BORROWED_FILES and same_source(args[0], filename):
            return
        rel = brought_by_patch(caller, None, [])
        if rel is not None:
            report_tampered("%s compiles code under %s (%s), which then passes for that file's code"
                            % (rel, why, filename))

    INSTALLED_MARKS = _tuple(m.encode("utf-8", "surrogateescape") for m in
                             (STDLIB,) + RUNNER_DIRS + ("-packages" + _sep,))

    IMPORT_MACHINERY = (STDLIB + "importlib" + _sep, "<frozen importlib.", "<frozen zipimport>")

    def import_machinery(code):
        name = code.co_filename
        return name.startswith(IMPORT_MACHINERY) or real_of(name).startswith(IMPORT_MACHINERY[0])

    def past_pyc_loading(f):
        """`f`, or past importlib's `_compile_bytecode` when it is `f`: the code that had it
        load a pyc's data, None when that is importlib itself (an import)."""
        if f is not None and f.f_code.co_name == "_compile_bytecode" and import_machinery(f.f_code):
            f = f.f_back
            if f is None or import_machinery(f.f_code):
                return None
        return f

    def marshal_loaded(args):
        """Code unmarshalled by the patch's own call (importlib's loading of a pyc is not:
        its frames come first) whose data names an installed file: code under an installed
        name passes for that file's code (a frame walk so made was resolved)."""
        data = args[0] if args else None
        if _type(data) is not bytes or not _any(m in data for m in INSTALLED_MARKS):
            return
        f = past_pyc_loading(_frame(2))  # (the caller of marshal.loads; 1 is the audit hook)
        rel = brought_by_patch(f, (), []) if f is not None else None
        if rel is not None:
            report_tampered("%s unmarshals code under an installed file's name, which then passes for that "
                            "file's code" % rel)

    def hook_added():
        """An audit hook of library code sees every event (the running test's id in
        `os.putenv`, every file opened) and runs inside this plugin's own judging, where
        nothing is judged: library code that kept the bug read the test's id with its
        parameters, and walked the frames, from one. Critical when the patch brought it."""
        f = _frame(2)
        while f is not None:  # (anywhere below: installed code that calls what it is given forwards it)
            rel = brought_by_patch(f, None, [])
            if rel is not None:
                report_tampered("%s adds an audit hook, which its code at the graded state never does" % rel)
                return
            f = f.f_back

    #: the interpreter's C API that hands out frames, threads' states and objects by their
    #: address (not `PyCapsule_*` and the like, which C-extension interop uses honestly)
    C_API_REACH = ("PyThreadState", "PyEval_Get", "PyFrame", "PyInterpreterState", "PyGILState_GetThisThreadState",
                   "PyObject_GC", "PyGC", "PySys_GetObject", "PyImport_GetModuleDict", "PyObject_GetAttr")

    def interpreter_symbol(name):
        """The interpreter's C API through ctypes (`pythonapi.PyThreadState_GetFrame`, an
        object by its address) hands out frames and the heap with no other audit event:
        library code that kept the bug walked to the test's frame so. Critical when the
        patch brought it."""
        rel = brought_by_patch(_frame(2), None, [])
        if rel is not None:
            report_tampered("%s calls the interpreter's C API through ctypes (%s), which its code at the graded "
                            "state never does" % (rel, name))

    #: ctypes reading or writing the process's memory at an address: an object at its
    #: address (`from_address`), bytes at an address. (Its pointers, `cast` and `memmove`
    #: raise no audit event at all: not seen.)
    MEMORY_EVENTS = ("ctypes.cdata", "ctypes.string_at", "ctypes.wstring_at")
    def patch_did(f, native, what, *args):
        """A critical finding, `what % (file, *args)`, when code the patch brought raised the
        event at `f` (`brought_by_patch`, past any standard-library frame; `native`: the
        patched files whose graded-state copy does it too)."""
        rel = brought_by_patch(f, None, [], native)
        if rel is not None:
            report_tampered(what % ((rel,) + args))

    def memory_by_address(event):
        """Code the patch brought that reads or writes memory at an address through ctypes
        or `/proc/<pid>/mem` (an object's fields by `id()`: a class's attributes without
        the version tag's change, see `written_back`, a frame's locals) is critical:
        nothing at the graded state does it."""
        patch_did(_frame(2), NATIVE_CALLERS, "%s reads or writes the process's memory by address (%s), which its code "
                  "at the graded state never does", event)

    #: modules that call C code (ctypes' pointers and `cast` read and write memory with no
    #: audit event: their import by the patch's code is judged, where it is the first)
    NATIVE_MODULES = frozenset(("ctypes", "_ctypes", "cffi", "_cffi_backend"))

    def native_symbol(name):
        """Code the patch brought that looks a C function up through ctypes (libc's `open`
        and `read` read the test file with no audit event; `memmove` writes memory) is
        critical where its file's graded-state copy calls no native code
        (NATIVE_CALLERS)."""
        patch_did(_frame(2), NATIVE_CALLERS, "%s calls C functions through ctypes (%s), which its code at the graded "
                  "state never does (they read and write what no audit event reports)", name)

    PROC_DEV = []  # procfs's device number, once asked

    def proc_mem_opened(args):
        """An open that reaches a process's `mem` file (`/proc/self/mem`, a link to it):
        `memory_by_address`."""
        path = args[0] if args else None
        if _type(path) is not _str:
            return
        try:
            dev = _stat(path).st_dev
            if not PROC_DEV:
                PROC_DEV.append(_stat("/proc").st_dev)
        except (OSError, ValueError):
            return
        if dev != PROC_DEV[0]:
            return
        parts = _realpath(path).split("/")
        if parts[-1] == "mem" and _len(parts) in (4, 6) and parts[1] == "proc":
            patch_did(_frame(2), None, "%s reads or writes the process's memory by address (opens %s), which its code "
                      "at the graded state never does", path)

    WATCH = {"sys.settrace": True, "sys.setprofile": True, "gc.get_objects": True,
             "gc.get_referrers": True, "gc.get_referents": True, "sys._getframe": False,
             "sys._current_frames": False}

    # ------------------------------------------------------------------ pycs read during the run
    # pytest's assertion rewriter and the import system trust a pyc whose header matches its
    # source (mtime and size, or a 64-bit hash); code run during the test run could plant
    # one for a test module not yet imported. Every pytest-rewritten pyc and every pyc under
    # the repository root that the importer opens (pytest's _read_pyc, importlib's get_data)
    # is read here first: one written during the run (ctime not before STAMP), not a regular
    # file, not valid for its source or whose body is not code is refused (the open fails,
    # so the module is compiled from its source); a valid one is
    # remembered, and the module code then run for that source must be the code it holds
    # (a pyc swapped between this read and the importer's is critical). This is what makes
    # the build's cached rewritten pycs (docs/grading.md, "Cached rewritten test modules")
    # safe against code run during the test run.
    import importlib.util
    import marshal
    _loads, _osopen, _osread, _osclose, _fstat = marshal.loads, os.open, os.read, os.close, os.fstat
    _fspath = _getattr(os, "fspath", None)  # 3.6+ (no audit hooks before 3.8 anyway)
    import pathlib
    #: the standard library's path classes, whose `__fspath__` is their own (exact types: a
    #: subclass may define another)
    PATH_TYPES = frozenset(v for v in _list(_getattr(pathlib, "__dict__", {}).values())
                           if _isinstance(v, _type) and _issubclass(v, pathlib.PurePath))
    _type_mro, _type_dict = _type.__dict__["__mro__"].__get__, _type.__dict__["__dict__"].__get__

    def class_attr(cls, name):
        """`name` as the class `cls` or a base defines it, read from the class dicts: no
        descriptor, metaclass hook or `__getattr__` of other code runs."""
        for k in _type_mro(cls):
            d = _type_dict(k)
            if name in d:
                return d[name]
        return None

    def plain_path(path):
        """(`path` as a str, None) for a str, bytes or standard-library path; (None, the
        class's own `__fspath__`) for any other path-like, which is not called: it may name
        one file to the opener and another to this plugin (`io.FileIO` passes the object to
        the open event; library code that kept the bug read the test file so), and it
        would run inside the plugin's busy window, where nothing is judged."""
        t = _type(path)
        if t is _str:
            return path, None
        if t is bytes:
            return _fsdecode(path), None
        if _issubclass(t, _str):  # (the OS gets a subclass's data: a subclass hid the name)
            return _str.__str__(path), None
        if _issubclass(t, bytes):
            return _fsdecode(bytes.__getitem__(path, slice(None))), None
        if t in PATH_TYPES:
            got = _fspath(path)
            return (got if _type(got) is _str else None), None
        return None, class_attr(t, "__fspath__")

    def sequence_items(value):
        """The items of a list or tuple (subclasses included) read as the base type stores
        them (an overridden `__iter__` or `__getitem__` is code of the caller's), else the
        value alone."""
        for base in (_list, _tuple):
            if _issubclass(_type(value), base):
                get = base.__getitem__
                return [get(value, i) for i in _range(base.__len__(value))]
        return (value,)

    def paths_formatted(args):
        """`args` with the standard library's path objects (top level, or items of a list or
        tuple) formatted here, before the plugin's busy window: formatting runs whatever
        the path's parts are (a str subclass's `__add__` set on a path walked the frames
        while the plugin judged nothing); here such code is judged like any other."""
        out, changed = [], False
        try:
            for arg in args:
                if _type(arg) in PATH_TYPES:
                    arg, changed = _fspath(arg), True
                elif (_issubclass(_type(arg), _list) or _issubclass(_type(arg), _tuple)) and \
                        _any(_type(i) in PATH_TYPES for i in sequence_items(arg)):
                    arg, changed = [_fspath(i) if _type(i) in PATH_TYPES else i for i in sequence_items(arg)], True
                out.append(arg)
        except Exception:  # (a path the operation itself will refuse)
            return args
        return _tuple(out) if changed else args

    def own_path_like(fspath):
        """The file of a path-like's `__fspath__` when that is code from a disallowed file
        (the candidate patch's), else None."""
        code = _getattr(fspath, "__code__", None) if _type(fspath) is types.FunctionType else None
        if code is None or file_verdict(code.co_filename) is None:
            return None
        return rel_to_root(real_of(code.co_filename)) or code.co_filename
    _S_ISREG = __import__("stat").S_ISREG
    MAGIC = importlib.util.MAGIC_NUMBER
    _source_hash = _getattr(importlib.util, "source_hash", None)
    O_PYC = os.O_RDONLY | _getattr(os, "O_CLOEXEC", 0) | _getattr(os, "O_NOFOLLOW", 0)
    ROOT_SEP = ROOT.rstrip(_sep) + _sep
    pyc_pending = {}  # source path -> the code object of the pyc checked at open

    def refuse(path, why):
        raise OSError(13, "minisandbox: pyc refused (%s)" % why, path)

    def pyc_code_offset(name, data, source):
        """Where the code starts in a pyc valid for `source` (its header checked as the
        importer checks it), else None."""
        if _len(data) < 17 or data[:4] != MAGIC:
            return None
        flags = data[4:8]
        if flags == b"\x01\x00\x00\x00" and "-pytest-" not in name:
            return 16  # an unchecked-hash pyc: the importer does not look at the source
        if flags == b"\x03\x00\x00\x00":
            if _source_hash is None:
                return None
            with open(source, "rb") as f:
                return 16 if _source_hash(f.read())[:8] == data[8:16] else None
        st = _stat(source)
        stamp = ((_int(st.st_mtime) & 0xFFFFFFFF).to_bytes(4, "little") +
                 (st.st_size & 0xFFFFFFFF).to_bytes(4, "little"))
        if flags == b"\x00\x00\x00\x00":
            return 16 if data[8:16] == stamp else None
        if "-pytest-" in name and data[4:12] == stamp:
            return 12  # pytest before 5 (magic, mtime, size)
        return None

    def importer_code(code):
        """True for the code that reads a pyc to import it: pytest's assertion rewriter
        (`_read_pyc`) or importlib's `FileLoader.get_data`."""
        name, filename = code.co_name, code.co_filename
        if name == "_read_pyc":
            return real_of(filename).startswith(RUNNER_DIRS)
        return name == "get_data" and importlib_file(filename)

    def importlib_file(filename):
        return filename.startswith("<frozen importlib") or filename.endswith(
            _sep + "importlib" + _sep + "_bootstrap_external.py")

    def pyc_open(args):
        path = args[0]
        if _type(path) is not _str:
            path = plain_path(path)[0]
            if path is None:
                return
        mode = args[1]
        if not path.endswith(".pyc") or _type(mode) is not _str or mode[:1] != "r" or "+" in mode:
            return
        head, name = os.path.split(path)
        if "-pytest-" not in name and not _abspath(path).startswith(ROOT_SEP):
            return
        if not importer_code(_frame(2).f_code):
            return  # a pyc read as data (a test of bytecode tools): not the importer's
        stem = name.split(".", 1)[0]
        prefix = _getattr(sys, "pycache_prefix", None)
        if _os_basename(head) == "__pycache__":
            source = os.path.join(_dirname(head), stem + ".py")
        elif prefix and _abspath(head).startswith(_abspath(prefix)):
            source = _sep + _relpath(_abspath(head), _abspath(prefix)) + _sep + stem + ".py"
        else:
            refuse(path, "not in a __pycache__ directory")
        try:
            fd = _osopen(path, O_PYC)
        except OSError as exc:
            refuse(path, "cannot be read: %s" % exc)
        try:
            st = _fstat(fd)
            if not _S_ISREG(st.st_mode):
                refuse(path, "not a regular file")
            if st.st_ctime_ns >= STAMP:
                refuse(path, "written during the test run")
            chunks = []
            while True:
                chunk = _osread(fd, 1 << 20)
                if not chunk:
                    break
                chunks.append(chunk)
        finally:
            _osclose(fd)
        data = b"".join(chunks)
        try:
            offset = pyc_code_offset(name, data, source)
        except OSError:
            offset = None
        if offset is None:
            refuse(path, "not valid for its source")
        try:  # what the importer will load from it (it compiles the source when it cannot)
            code = _loads(data[offset:])
        except Exception:
            code = None
        if not _isinstance(code, types.CodeType):
            refuse(path, "not a code object")
        pyc_pending[source] = code

    def pyc_exec(args):
        """True when the module code executed is that of the pyc checked at its open."""
        code = args[0] if args else None
        want = pyc_pending.pop(_getattr(code, "co_filename", None), None)
        if want is None:
            return False
        try:
            same = want == code
        except Exception:
            same = False
        if not same:
            report_tampered("module code for %s is not the pyc read for it (swapped while read)" % (
                rel_to_root(real_of(code.co_filename)) or code.co_filename))
            raise ImportError("minisandbox: the pyc of %s changed while it was read" % code.co_filename)
        return True

    # ------------------------------------------------------------------ forged comparisons
    # Classes whose comparison dunders are not honestly their own, or that hold code from a
    # disallowed file, are probed (forged_comparison) when first seen: at the start of
    # every garbage collection (the young generation holds every object made since the
    # last one, so a class made and collected within a test is seen before it dies), at
    # every end-of-test check, and, at the end of the session, every live class whose
    # dunders changed since it was examined. docs/grading.md, "Values that compare equal
    # to anything".
    import gc
    import random
    import weakref
    _ref, _gc_objects, _gc_callbacks, _environ = weakref.ref, gc.get_objects, gc.callbacks, os.environ
    _gc_isenabled, _gc_get_debug = gc.isenabled, gc.get_debug
    SAVEALL_AT_START = gc.get_debug() & gc.DEBUG_SAVEALL
    _compress = itertools.compress
    _freeze_count = _getattr(gc, "get_freeze_count", None)
    _fingerprint, _untrusted, _codes, _forged, _classes = (dunder_fingerprint, untrusted_dunders, class_codes,
                                                          forged_comparison, all_classes)
    _answers = comparison_answers
    YOUNG = sys.version_info >= (3, 8)  # gc.get_objects(generation=0)
    _rng = random.Random(os.urandom(16))
    class_seen = {}  # id(class) -> (weak reference, its dunder fingerprint when examined)
    pending = {}  # id(class) -> weak reference: classes found half made, to examine again
    probe = {"events": None, "examining": False, "freeze": 0, "probed": 0, "last": None, "judging": False}

    def code_ok(code):
        return code_verdict(code) is None

    TP_READY = 1 << 12  # Py_TPFLAGS_READY

    def unfinished_ok(cls):
        """False for a class a garbage collection found half made (not ready yet, or its
        module still being imported: its code is not in the module's namespace yet);
        probing one crashed the interpreter (a class of doctest, imported by a test
        module, under the unittest channel)."""
        if not _getattr(cls, "__flags__", 0) & TP_READY:
            return False
        spec = _getattr(sys.modules.get(_getattr(cls, "__module__", None) or ""), "__spec__", None)
        return not _getattr(spec, "_initializing", False)

    def examine(classes, nodeid=None):
        """Probe each class not examined yet, or whose own comparison dunders changed."""
        if probe["examining"]:
            return
        probe["examining"] = True
        try:
            for cls in classes:
                try:
                    if not unfinished_ok(cls):
                        # looked at again at every end of a test (`examine_classes`): left
                        # for the end-of-session walk, a class of the patch's lost its forged
                        # dunders before it (deleted from a function pytest calls first)
                        pending[_id(cls)] = _ref(cls)
                        continue
                    fp = _fingerprint(cls)
                    prev = class_seen.get(_id(cls))
                    old = prev is not None and prev[0]() is cls
                    if old and _all(_map(_is, prev[1], fp)):
                        continue
                    baseline = old and prev[2]
                    class_seen[_id(cls)] = (_ref(cls), fp, baseline)
                except Exception:
                    continue
                if not _all(_map(_is, fp, _repeat(_NOTHING))):
                    examine_class(cls, fp, nodeid, baseline)
        finally:
            probe["examining"] = False

    def examine_class(cls, fp, nodeid, baseline):
        """Probe a class the patch may have made or changed: one holding code from a
        disallowed file, one whose module's file is disallowed (or that has none), or a
        class of the baseline (pytest, the standard library) whose dunders changed. Other
        classes (unchanged code: a test's helper, a mock's per-instance class) are not
        probed. Every forged answer of a probed class is critical."""
        label = "%s.%s" % (_getattr(cls, "__module__", "?"), _getattr(cls, "__qualname__", "?"))
        try:
            if test_file_codes and not baseline:
                own = _list(_codes(cls))
                if own and _all(c in test_file_codes for c in own):
                    return  # a SymPy test file's own helper class
            bad = None
            for code in _codes(cls):
                bad = code_verdict(code)
                if bad is not None:
                    break
            if bad is None and not baseline:
                where = _getattr(sys.modules.get(_getattr(cls, "__module__", None) or ""), "__file__", None)
                if _isinstance(where, _str) and file_verdict(where[:-1] if where.endswith(".pyc") else where) is None:
                    return
            if bad is not None:  # the patch's class: every comparison dunder it has
                names = _tuple(n for n, v in _zip(COMPARISON_DUNDERS, fp) if v is not _NOTHING)
            else:
                names = _untrusted(cls, code_ok)
            if not names:
                return
            probe["probed"] += 1
            why, events, answers = run_probe(cls, names, nodeid)
        except Exception:
            return
        if events:
            report_tampered("comparison code of %s inspects its caller during a comparison (%s)" % (
                label, ", ".join(_sorted(_set(events)))))
        if why is not None:
            report_tampered("forged comparison: %s (comparison code %s; answers %s)" % (
                why, comparison_code(cls) or "none", answers or "none"))

    def run_probe(cls, names, nodeid):
        """(forged_comparison's answer, the audit events the probed code raised, the
        class's comparison_answers when there is a finding); with a test id (the
        end-of-session walk: the last test's), PYTEST_CURRENT_TEST says that test's call
        phase, as during the test."""
        old = _environ.get("PYTEST_CURRENT_TEST")
        if nodeid is not None:
            _environ["PYTEST_CURRENT_TEST"] = "%s (call)" % without_params(nodeid)
        events = probe["events"] = []
        try:
            why = _forged(cls, names, _rng)
            return why, events, (_answers(cls, _rng) if why is not None else "")
        finally:
            probe["events"] = None
            if nodeid is not None:
                if old is None:
                    _environ.pop("PYTEST_CURRENT_TEST", None)
                else:
                    _environ["PYTEST_CURRENT_TEST"] = old

    def new_classes():
        """The classes of the young generation, plus every live class when gc.freeze()
        moved objects out of the generations since the last look."""
        with Busy():  # our own heap walk: not a finding
            young = _gc_objects(0)
        # isinstance: a class cannot hide from it (an object that claims to be one is
        # skipped by the fingerprint); compress/map: one C-level pass
        found = _list(_compress(young, _map(_isinstance, young, _repeat(_type))))
        frozen = _freeze_count() if _freeze_count is not None else 0
        if frozen != probe["freeze"]:
            probe["freeze"] = frozen
            found.extend(_classes())
        return found

    gc_running = {}  # thread id -> True between a collection's start and stop (graded_open)

    def foreign_gc_callbacks():
        """A gc callback that is no Python function (a `functools.partial` of `getattr` on
        an object whose property is a `partial` of C functions): put before the plugin's,
        it ran at a collection's start before `gc_running` was set, or after it at the
        stop, and read the test file with no code of anybody's on the stack. Critical."""
        for cb in _list(_gc_callbacks):
            if cb is sealed_on_gc:
                continue
            fn = _getattr(cb, "__func__", cb)
            if _type(fn) is not types.FunctionType:
                report_tampered("a gc callback with no Python code of its own (%s): what it runs at a collection "
                                "has no code of anybody's on the stack" % _type(cb).__name__)

    def on_gc(phase, info):
        if _len(_gc_callbacks) > 1:
            foreign_gc_callbacks()
        if phase != "start":
            gc_running.pop(_ident(), None)
            return
        if not (busy() or probe["examining"] or probe["events"] is not None):
            try:
                examine(new_classes())
            except Exception:
                pass
        # (set after the probe above, whose comparisons run library and test code: a test
        # module it imports is read then, no finalizer's doing)
        gc_running[_ident()] = True

    sealed_on_gc = seal(on_gc)

    def examine_classes(item, everything):
        """The end-of-test part of `check` (the gc callback still there) and the
        end-of-session one (every live class). A class dies only in a garbage collection
        (its `__mro__` refers to it), whose start the callback sees: every class is probed
        there or in the final walk."""
        if item is not None:
            probe["last"] = item.nodeid
        if YOUNG and not _any(_map(_is, _list(_gc_callbacks), _repeat(sealed_on_gc))):
            report_tampered("the results plugin's gc callback was removed from gc.callbacks")
        if _len(_gc_callbacks) > 1:
            foreign_gc_callbacks()
        if everything:
            examine(_classes(), probe["last"])
            return
        if pending:
            again = [c for c in (r() for r in _list(pending.values())) if c is not None]
            pending.clear()
            examine(again, probe["last"])
        if not _gc_isenabled():
            # no collection starts, so the callback sees no new class: look here
            examine(new_classes(), probe["last"])

    GRADED_NAMES = _set(_os_basename(k) for k in GRADED)
    _fsdecode = os.fsdecode

    def compiling_import(frame):
        """True when `frame` is importlib's `get_data` called by its `get_code`, itself
        called by the import system (`exec_module`) or runpy: a module's source read to be
        compiled and run (unittest's loader importing a test module for Django's runner,
        which a candidate patch may change). Library code that called
        `SourceFileLoader(name, test_file).get_code(name)` itself read the expected values
        from the code's constants, resolved with no finding."""
        back = frame.f_back
        if not (frame.f_code.co_name == "get_data" and importer_code(frame.f_code) and back is not None and
                back.f_code.co_name == "get_code" and importlib_file(back.f_code.co_filename)):
            return False
        caller = back.f_back
        name = caller.f_code.co_filename if caller is not None else ""
        return importlib_file(name) or name.startswith("<frozen runpy") or name.endswith(_sep + "runpy.py")

    _normpath = os.path.normpath

    def graded_rel(path):
        """The graded file (repo-relative) that an open of `path` reads, or None: by the
        file the path reaches (its inode: a symbolic link on the way, `..` after one, a
        directory renamed for the read and back), by its name (a compiled copy of a graded
        file, wherever it lies: beside it, in a renamed `__pycache__`, in the build's cache
        of rewritten test modules in the venv, `paths.TEST_PYCS_DIR`), or, for a relative
        graded name that nothing by that path from the working directory is, by that name
        (relative to a directory descriptor: `os.open(name, dir_fd=fd)`, whose directory
        the event does not carry)."""
        rel = graded_inode(path)
        if rel is not None:
            return rel
        base = _os_basename(_normpath(path))
        names = (base, _os_basename(_realpath(path))) if _islink(path) else (base,)
        for name in names:
            if name not in GRADED_NAMES and name.endswith(".pyc"):
                # a compiled copy (pytest's rewritten pyc, the importer's): its constants hold
                # every expected value (the importer and pytest read it too: not findings)
                source = name.split(".", 1)[0] + ".py"
                if source in GRADED_NAMES:
                    beside = rel_to_root(_dirname(_dirname(_realpath(path))) + _sep + source)
                    return beside if beside in GRADED else graded_named(source)
        if base in GRADED_NAMES and not path.startswith(_sep) and not _exists(_abspath(path)):
            return "%s (by name, relative to another directory)" % base
        return None

    def graded_named(name):
        """The first graded file called `name` (a base name), or None."""
        for rel in _sorted(GRADED):
            if _os_basename(rel) == name:
                return rel
        return None

    graded_inodes = {}  # (st_dev, st_ino) -> graded file, filled at the first look

    def graded_inode(path):
        """The graded file that `path` is (the same inode, as the kernel resolves the
        path), or None."""
        if not GRADED:
            return None
        if not graded_inodes:
            for rel in GRADED:
                try:
                    st = _stat(ROOT_SEP + rel)
                except OSError:
                    continue
                graded_inodes[(st.st_dev, st.st_ino)] = rel
            graded_inodes[None] = None  # (looked once)
        try:
            st = _stat(path)
        except (OSError, TypeError, ValueError):
            return None
        return graded_inodes.get((st.st_dev, st.st_ino))

    def graded_renamed(args):
        """`os.rename`/`os.replace` by code the patch brought of a graded file, of a
        directory that holds one (its `__pycache__` too), or of a compiled copy of one: a
        `__pycache__` moved, read there and moved back left no open of a graded path and
        no new ctime on the pyc (host and sandbox, strict and official). Critical."""
        writer = _frame(2)
        if writer is not None and writer.f_code.co_name in ("_write_atomic", "_write_pyc") and (
                importlib_file(writer.f_code.co_filename) or real_of(writer.f_code.co_filename).startswith(RUNNER_DIRS)):
            return  # the import system or pytest putting a pyc it wrote in place
        for path in args[:2]:
            path, _ = (path, None) if _type(path) is _str else plain_path(path)
            if _type(path) is not _str:
                continue
            path = _normpath(path)
            base = _os_basename(path)
            rel = rel_to_root(real_of(_abspath(path)))
            hit = base.endswith(".pyc") and base.split(".", 1)[0] + ".py" in GRADED_NAMES
            if rel is not None and not hit:
                hit = rel in GRADED or rel == "." or _any(
                    g.startswith(rel + "/") or (base == "__pycache__" and _dirname(g) == _dirname(rel))
                    for g in GRADED)
            if not hit:
                continue
            why, name, _ = untrusted_caller(skip_stdlib=True)
            if why is not None:
                who = rel_to_root(real_of(name)) if not name.startswith("<") else name
                report_tampered("%s renames %s, a graded test file or what holds it (%s)" % (who or name, path, why))
            return

    #: standard-library modules that read source files to format frames, tracebacks and
    #: warnings for display; a graded file read through one of them (above `linecache`) is
    #: reported, not critical
    FORMATTERS = ("traceback.py", "inspect.py", "warnings.py", "doctest.py", "pdb.py", "bdb.py")

    def graded_open(args, verb="reads", opener=None):
        """Code from a disallowed file that opens a graded test file or conftest (or makes a
        hard link to one: `verb` "links") reads the answers the tests expect (a lookup
        table): critical, unless the read goes through a formatter (`FORMATTERS`: a
        traceback formatted, `inspect.getsource`): reported."""
        path = args[0] if args else None
        if _type(path) is not _str:
            path, fspath = plain_path(path)
            if path is None:
                own = own_path_like(fspath)
                if own is not None:
                    report_tampered("%s opens a file through a path-like object of its own (its __fspath__ "
                                    "may name one file to the opener and another to this check)" % own)
                return
        if GIT_READERS is not None and _abspath(path).startswith(GIT_DIRS):
            git_used("reads the repository's .git (%s)" % path, _frame(2))
            return
        rel = graded_rel(path)
        if rel is None:
            return
        if gc_running.get(_ident()):
            # a finalizer or weakref callback that a collection ran: no code of anybody's
            # need be on the stack (a class's `__del__` a `functools.partial` of
            # `list.extend` over a lazy `map(linecache.getlines, ...)`: the walk below found
            # only the standard library over pytest's frames, resolved)
            report_tampered("the graded test file %s is read during a garbage collection (by a finalizer or a "
                            "weakref callback)" % rel)
            return
        opener = opener or _frame(2)
        if opener.f_code in PLUGIN_CODES or compiling_import(opener):
            # this plugin hashing the file for its checks (called from a test's end, the
            # runner's code is further up); the import system compiling the module (a
            # runner importing its tests)
            return
        why, name, passed = untrusted_caller(skip_stdlib=True, past_runner=True)
        if why is None:
            return
        who = rel_to_root(real_of(name)) if not name.startswith("<") else name
        # (`linecache.getlines(test file)` called by the patch's code itself is no formatter:
        # library code that kept the bug read the expected values that way, resolved)
        through = _any(p in FORMATTERS for p in passed)
        # SymPy's runner reads the file it runs (SymPyTests.test_file, repository code a
        # patch may change): reported; what it then runs must be that file's content
        runner = SYMPY and not passed and opener.f_code.co_name == "test_file"
        # a tracer or debugger whose graded-state copy looks at frames reads the source of
        # the code it traces (PySnooper's tracer.py: its gold patches were results-tampered)
        tracer = INTROSPECTS is not None and who in INTROSPECTS
        report_tampered("%s %s the graded test file %s (%s)%s" % (
            who or name, verb, rel, why, " through a formatter (%s)" % ", ".join(passed) if through else " in the runner" if runner else
            " (it looks at frames at the graded state)" if tracer else ""),
            not (through or runner or tracer))

    GRADED_DIRS = _tuple(_set(k.rsplit("/", 1)[0] + "/" for k in GRADED if "/" in k))
    SPAWN_EVENTS = frozenset(("subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn"))

    def runs_git(text):
        """Whether a command line has a word that runs git (`git`, `/usr/bin/git`, in a
        shell string too)."""
        for separator in ";&|()`$":
            text = text.replace(separator, " ")
        return _any(_os_basename(w) == "git" for w in text.split())
    GIT_DIRS = _tuple(_set((ROOT_SEP + ".git" + _sep, real_of(ROOT_SEP + ".git") + _sep)))

    def git_used(what, frame):
        """The repository's git database holds every test file's content at the graded
        commit: library code that kept the bug read the test file's blob with
        `git cat-file --batch-all-objects` (no graded file named) and was resolved, host and
        sandbox, strict and official. Critical when the patch's code reads `.git` or runs
        git where its file's graded-state copy never works with git (`GIT_READERS`)."""
        who = brought_by_patch(frame, None, [])
        if who is not None and who not in GIT_READERS:
            report_tampered("%s %s: the repository's git database holds the graded test files, and its code "
                            "at the graded state never works with git" % (who, what))

    #: standard-library modules that start fixed commands for themselves (`platform`'s
    #: `uname -p`, `uuid`'s and `ctypes.util`'s look-ups): a process they start is theirs.
    #: Through any other (subprocess, os, pty, asyncio, webbrowser...) the caller starts it.
    SELF_SPAWNERS = _tuple(STDLIB + n for n in ("platform.py", "uuid.py", "ctypes" + _sep + "util.py"))

    def spawn_brought(event):
        """A process started by code the patch brought, in a file whose graded-state copy
        starts none (SPAWNERS), is critical, whatever its command says: what it reads, no
        check of this process sees. The command-text rule (`spawned`) found a test file's
        name in a command line only as text: `sh -c "cat te''st_x.py"`, a `python -c`
        program that joins the name, or `webbrowser.GenericBrowser([...]).open()` read it
        unseen."""
        f = g = _frame(2)
        while g is not None:
            name = g.f_code.co_filename
            real = name if name.startswith("<") else real_of(name)
            if real in SELF_SPAWNERS:
                return
            if not (name.startswith("<frozen") or (real.startswith(STDLIB) and "-packages" + _sep not in real)):
                break
            g = g.f_back
        patch_did(f, SPAWNERS, "%s starts a process (%s), which its code at the graded state never does (what the "
                  "process reads, no check of the test process sees)", event)

    def spawned(args, event="subprocess.Popen"):
        """Code from a disallowed file that runs a command naming a graded test file (or a
        graded file's directory with a wildcard) reads it in another process, where no open
        event of this one sees it: library code that kept the bug ran `cat` on the test file,
        parsed the expected values and was resolved (host and sandbox, strict and official).
        Critical. (A command that finds the file another way is not seen.)"""
        words = []
        for i, arg in enumerate(args):
            for item in sequence_items(arg):
                item, fspath = plain_path(item)
                if item is not None:
                    words.append(item)
                elif i < 2 or event != "subprocess.Popen":  # (not its cwd or env)
                    # a path-like of its own: subprocess converts it after this event (a
                    # pathlib path naming the test file was not seen before)
                    own = own_path_like(fspath)
                    if own is not None:
                        report_tampered("%s runs a command with a path-like argument of its own (its __fspath__ "
                                        "may name another file than this check sees)" % own)
        text = " ".join(words)
        if GIT_READERS is not None and runs_git(text):
            git_used("runs git (%s)" % text[:80], past_seal(_frame(2)))
        hit = next((n for n in GRADED_NAMES if n in text), None)
        if hit is None and ("*" in text or "?" in text or "[" in text):
            hit = next((d for d in GRADED_DIRS if d in text), None)
        if hit is None:
            return
        why, name, _passed = untrusted_caller(skip_stdlib=True)
        if why is None:
            return
        who = rel_to_root(real_of(name)) if not name.startswith("<") else name
        report_tampered("%s runs a command naming the graded test file %s (%s)" % (who or name, hit, why))

    # pytest's assertion rewriter, when installed before this plugin (pytest installs it
    # before it imports `-p` plugins): it imports every test module (its `python_files`) and
    # conftest
    REWRITERS = _tuple(f for f in (() if UNITTEST or SYMPY else _list(sys.meta_path))
                       if _getattr(_type(f), "__module__", None) == "_pytest.assertion.rewrite")
    # the code that runs a test module's code (`exec(co, module.__dict__)` in its exec_module,
    # pytest 5+; older releases ran it elsewhere, through a helper: then this rule is off)
    REWRITE_EXEC = _tuple(c for c in (_getattr(_getattr(_type(f), "exec_module", None), "__code__", None)
                                      for f in REWRITERS)
                          if _isinstance(c, types.CodeType) and "exec" in c.co_names)
    REWRITE_PATTERNS = _tuple(p for f in REWRITERS for p in (_getattr(f, "fnpats", None) or ())
                              if _isinstance(p, _str) and "/" not in p and _sep not in p)
    import fnmatch as _fnmatch_module
    _fnmatch = _fnmatch_module.fnmatch

    def rewritten(rel):
        """Would pytest's assertion rewriter import the graded file `rel` (a conftest, or a
        module its `python_files` patterns name)?"""
        name = rel.rsplit("/", 1)[-1]
        return name == "conftest.py" or _any(_fnmatch(name, p) for p in REWRITE_PATTERNS)

    code_runs = {}  # module code file name -> [test code file, graded?, its real path], or None
    first_runs = {}  # real path of a test code file -> the module code first run for it
    own_codes = {}  # real path -> every code object that module code holds (nested included)

    def graded_exec(args, verified):
        """Module code of test code (a graded test file or conftest, a test-support
        module; the `exec` audit event): what runs the second time must be what ran the
        first, and, where pytest's assertion rewriter is installed, what runs first for a
        graded file it would import is run by the rewriter (or is a checked pyc's). Library
        code that the test module imports, importing that module again under its name
        through its own loader with the asserts compiled out (`optimize=2`) and leaving it
        in `sys.modules`, where pytest takes the module from, kept the bug and was resolved
        (host and sandbox, strict and official); so was the same loader put first on
        `sys.meta_path` by library code a conftest imports. The first run's code is also
        what `genuine` takes a function of that file from."""
        code = args[0] if args else None
        if _type(code) is not types.CodeType or code.co_name != "<module>":
            return
        filename = code.co_filename
        if filename not in code_runs:
            rel = real = None
            if _type(filename) is _str and not filename.startswith("<") and (
                    _abspath(filename).startswith(ROOT_SEP) or _os_basename(filename) in GRADED_NAMES):
                real = real_of(_abspath(filename))
                rel = rel_to_root(real)
            graded = rel is not None and rel in GRADED
            code_runs[filename] = [rel, graded, real] if rel is not None and (graded or test_support(rel)) else None
        run = code_runs[filename]
        if run is None:
            return
        rel, graded, real = run
        first = first_runs.get(real)
        if first is not None:
            try:
                same_code = first == code
            except Exception:
                same_code = False
            if not same_code and graded:
                report_tampered("test code %s run again as other module code" % rel)
            return
        first_runs[real] = code
        if verified or not graded or not REWRITE_EXEC or not rewritten(rel):
            return
        caller = _frame(2)
        if caller is None or _all(caller.f_code is not c for c in REWRITE_EXEC):
            who = caller.f_code.co_filename if caller is not None else "<none>"
            report_tampered("graded test file %s run by %s, not by pytest's assertion rewriter" % (
                rel, (rel_to_root(real_of(who)) or who) if not who.startswith("<") else who))

    def genuine(code, real):
        """False for a code object that claims the test code file `real` but is none of the
        code its module code, as first run, holds (compiled under that file's name by other
        code). True when no run of that file was seen (imported before this plugin). Not a
        finding by itself: hypothesis' `@given` wrapper is such code (`impersonate` gives
        it the test's file and line, and it has no `__wrapped__`); `misnamed` uses it to
        find the definition a name's code belongs to."""
        first = first_runs.get(real)
        if first is None:
            return True
        codes = own_codes.get(real)
        if codes is None or first not in codes:
            codes, todo = _set(), [first]
            while todo:
                c = todo.pop()
                if c not in codes:
                    codes.add(c)
                    todo.extend(x for x in c.co_consts if _isinstance(x, types.CodeType))
            own_codes[real] = codes
        return code in codes

    FUNCTION_STATE = ("__code__", "__defaults__", "__kwdefaults__")

    def held_by_module(fn, real):
        """Is `fn` a global or a class member (or what one's `__wrapped__` chain reaches) of
        a loaded module of the file `real` (the file of its code before the assignment)?"""
        for mod in _list(sys.modules.values()):
            f = _getattr(mod, "__file__", None)
            if not _isinstance(f, _str) or not f.endswith(".py") or real_of(f) != real:
                continue
            todo = []
            for value in _list(_getattr(mod, "__dict__", {}).values()):
                todo.append(value)
                if _issubclass(_type(value), _type) and _getattr(value, "__module__", None) == mod.__name__:
                    todo.extend(_list(value.__dict__.values()))
            for value in todo:
                depth = 0
                try:
                    while value is not None and depth < 20:
                        if _getattr(value, "__func__", value) is fn:
                            return True
                        value, depth = _getattr(value, "__wrapped__", None), depth + 1
                except Exception:  # attribute access runs code (Django's lazy `settings` raises)
                    continue
        return False

    #: unittest.TestCase once unittest is loaded (set where the plugin wraps it): an
    #: instance's `__class__` assigned is critical (a lenient subclass for the body only)
    test_case_type = [_getattr(sys.modules.get("unittest.case"), "TestCase", None)]

    def module_class_set(module):
        """A test module's class assigned (the `object.__setattr__` audit event): a module
        subclass runs code at every attribute access, such as pytest's first look at the
        finished module before it collects. Library code that kept the bug set it on the
        half-imported test module, rewrote the `parametrize` marks there so the expected
        values matched the bug, and put the class back: resolved, host and sandbox, strict
        and official. Critical when the patch's code does it to a graded test file's module
        or a test-support one."""
        filename = _getattr(module, "__file__", None)
        if not _isinstance(filename, _str):
            return
        rel = rel_to_root(real_of(filename))
        if rel is None or not (rel in GRADED or test_support(rel)):
            return
        who = brought_by_patch(_frame(2), None, [])
        if who is not None:
            report_tampered("%s sets the class of the test module %s (code then runs at every look at it)"
                            % (who, rel))

    def function_state_set(fn, attr):
        """A function's code or defaults assigned in place (`fn.__code__ = other`, the
        `object.__setattr__` audit event, raised before the assignment): the function stays
        the same object, so the identity check passes it, and the new code, held by a
        function of the module's namespace, counts as defined by that module. Library code
        that kept the bug and gave `Function.runtest` code that swallows AssertionError, or
        the graded test function a no-op compiled under the test file's name, was resolved
        (host and sandbox, strict and official). Critical for a captured function, whoever
        assigns it, and for a function of unchanged test code (a test, a conftest's or a
        helper's function, an installed helper module's) unless test code or the
        function's own file assigns it."""
        label = captured_fns.get(_id(fn))
        if label is not None:
            report_tampered("%s.%s assigned" % (label, attr))
            return
        code = fn.__code__
        filename = code.co_filename
        if filename.startswith("<") or file_verdict(filename) is not None:
            return  # generated code, or the patch's own
        real = real_of(filename)
        rel = rel_to_root(real)
        if rel is not None and not (rel in GRADED or test_support(rel)):
            return
        if rel is None and not installed_support(_getattr(fn, "__module__", None)):
            return
        if not held_by_module(fn, real):
            return  # a function made at run time (cloudpickle rebuilding a test's closure)
        raiser = _frame(2)
        if raiser is not None and real_of(raiser.f_code.co_filename) == MONKEYPATCH_FILE:
            # through pytest's monkeypatch: judged by the repository code that called it;
            # none (pytest undoing it at teardown) is no finding
            raiser = repo_caller(raiser)
            if raiser is None:
                return
        name = raiser.f_code.co_filename if raiser is not None else "<none>"
        if not name.startswith("<"):
            rreal = real_of(name)
            rrel = rel_to_root(rreal)
            if rreal == real or (rrel is not None and (rrel in GRADED or test_support(rrel)) and
                                 file_verdict(name) is None):
                return  # test code setting it, or the function's own module
            name = rrel or rreal
        report_tampered("%s of %s (%s:%d) assigned from %s" % (
            attr, _getattr(fn, "__qualname__", "?"), rel or real, code.co_firstlineno, name))

    def repo_caller(f):
        """The first frame from `f` down the stack whose code is a repository file's, or
        None (pytest, pluggy, the standard library and installed code only)."""
        depth = 0
        while f is not None and depth < 200:
            filename = f.f_code.co_filename
            if not filename.startswith("<") and rel_to_root(real_of(filename)) is not None and \
                    not real_of(filename).startswith(RUNNER_DIRS):
                return f
            f, depth = f.f_back, depth + 1
        return None

    def import_event(event, args):
        """True for a probe event that is no look at the comparison's caller: a read of a
        function's own attribute (`__code__`: `inspect.signature`), or an event raised by
        the body of a module of an allowed file imported during the comparison (SymPy
        imports lazily: `sympy.combinatorics`'s `@dispatch` reads `__code__`, a namedtuple
        calls `sys._getframe`). A module of a disallowed file imported (or reloaded) there
        is no excuse."""
        if event == "object.__getattr__":
            name = args[1] if _len(args) > 1 else None
            if _type(name) is _str and name.startswith("__"):
                return True
        f = _frame(2)  # the code that raised it (above audit)
        raiser = f.f_code.co_filename if f is not None else "<none>"
        if not raiser.startswith("<frozen") and file_verdict(raiser) is not None:
            return False  # raised by the patch's code itself
        body = None
        depth = 0
        while f is not None and depth < 400:
            code = f.f_code
            if code.co_name == "_call_with_frames_removed" and code.co_filename.startswith("<frozen importlib"):
                return body is not None and file_verdict(body.co_filename) is None
            if code.co_name == "run_probe" and real_of(code.co_filename) == ME:
                return False
            if code.co_name == "<module>":
                body = code
            f = f.f_back
            depth += 1
        return False

    def audit(event, args):
        events = probe["events"]
        mine = plugins_event()  # (busy, and raised by the plugin's own code)
        # not this plugin's own frame accesses (busy: its pyc check of a module the
        # comparison imports) nor those of its judging below
        if events is not None and event in PROBE_EVENTS and not probe["judging"] and not mine:
            probe["judging"] = True  # import_event's own frame access raises an event too
            try:
                benign = import_event(event, args)
            except Exception:
                benign = False
            finally:
                probe["judging"] = False
            if not benign:
                events.append(event)
        if event == "open" or event == "exec":
            if not mine:
                if event == "open":
                    args = paths_formatted(args)
                with Busy():
                    try:
                        if event == "open":
                            pyc_open(args)
                            graded_open(args)
                            proc_mem_opened(args)
                        else:
                            verified = pyc_pending and pyc_exec(args)
                            try:
                                graded_exec(args, verified)
                            except Exception:  # a module code not to judge: its import goes on
                                pass
                    except (OSError, ImportError):
                        raise
                    except Exception as exc:  # a check that cannot be made refuses
                        raise OSError(13, "minisandbox: pyc refused (%s)" % _repr(exc)) from None
            return
        if event == "object.__setattr__":
            if _len(args) > 1 and args[1] in FUNCTION_STATE and _type(args[0]) is types.FunctionType:
                try:
                    function_state_set(args[0], args[1])
                except Exception:
                    pass
            elif _len(args) > 1 and args[1] == "__class__" and _isinstance(args[0], types.ModuleType) and not mine:
                with Busy():
                    try:
                        module_class_set(args[0])
                    except Exception:
                        pass
            elif _len(args) > 1 and args[1] == "__class__" and not mine and test_case_type[0] is not None and \
                    _issubclass(_type(args[0]), test_case_type[0]):
                with Busy():
                    try:
                        report_tampered("the class of test %s.%s is assigned while the run goes on (what it looks up "
                                        "is another class's then)" % (_type(args[0]).__name__,
                                                                      _getattr(args[0], "_testMethodName", "?")))
                    except Exception:
                        pass
            return
        if (event in THREAD_EVENTS or event in FORK_EVENTS) and not mine:
            with Busy():
                try:
                    if event in FORK_EVENTS:
                        fork_judged("os.fork")
                    elif args:
                        thread_started(args[0], _frame(1))
                except Exception:
                    pass
            return
        if (event == "compile" or event == "code.__new__") and not mine:
            with Busy():
                try:
                    compiled_under(args, event)
                except Exception:
                    pass
            return
        if event == "marshal.loads" and not mine and PATCHED:
            with Busy():
                try:
                    marshal_loaded(args)
                except Exception:
                    pass
            return
        if event == "sys.addaudithook" and not mine:
            with Busy():
                try:
                    hook_added()
                except Exception:
                    pass
            return
        if event == "import" and args and args[0] in NATIVE_MODULES and not mine and NATIVE_CALLERS is not None:
            with Busy():
                try:
                    native_symbol("import %s" % args[0])
                except Exception:
                    pass
        if event in MEMORY_EVENTS and not mine:
            with Busy():
                try:
                    memory_by_address(event)
                except Exception:
                    pass
            return
        if (event == "ctypes.dlsym" or event == "ctypes.dlsym/handle") and not mine and NATIVE_CALLERS is not None:
            with Busy():
                try:
                    native_symbol(_repr(args[1]) if _len(args) > 1 else event)
                except Exception:
                    pass
        if event == "ctypes.dlsym" and not mine and _len(args) > 1 and _type(args[1]) is _str and \
                (args[1].lstrip("_").startswith(C_API_REACH) or args[1] in ("dlsym", "dlvsym")):
            with Busy():
                try:
                    interpreter_symbol(args[1])
                except Exception:
                    pass
            return
        if (event == "os.rename" or event == "os.replace") and GRADED and not mine:
            with Busy():
                try:
                    graded_renamed(args)
                except Exception:
                    pass
            return
        if event == "os.link" and GRADED and not mine:
            with Busy():
                try:
                    graded_open(args[:1], "links")
                except Exception:
                    pass
            return
        if event in SPAWN_EVENTS and GRADED and not mine:
            if SPAWNERS is not None:
                with Busy():
                    try:
                        spawn_brought(event)
                    except Exception:
                        pass
            args = paths_formatted(args)
            with Busy():
                try:
                    spawned(args, event)
                except Exception:
                    pass
            return
        if event == "object.__getattr__" and _len(args) > 1 and GUARDS.get(_id(args[0])) is args[0] \
                and not mine:
            with Busy():
                # (past any standard-library frame: `inspect.signature` hands the default out)
                rel = brought_by_patch(_frame(1), None, [])
                if rel is not None:
                    report_tampered("%s reads the %s guard's %s" % (
                        rel, "signal" if args[0] is signal_guard else "fork_exec" if args[0] is fork_exec_guard else
                        "%s seal" % _getattr(args[0], "__name__", "?"), args[1]))
            return
        if INTROSPECTS is not None and not mine and (
                event == "sys._getframe" or event == "sys._current_frames" or (
                    event == "object.__getattr__" and _len(args) > 1 and args[1] in FRAME_ATTRS)):
            with Busy():
                try:
                    frame_reached(event if event != "object.__getattr__" else args[1])
                except Exception:
                    pass
        if event not in WATCH or mine:
            return
        with Busy():
            try:
                critical = WATCH[event]
                # the responsible code: past the standard library for what is critical (a
                # tracer set through bdb), the direct caller otherwise (logging walks frames)
                why, name, _passed = untrusted_caller(skip_stdlib=critical)
                if why is not None:
                    rel = rel_to_root(real_of(name)) if not name.startswith("<") else name
                    if critical and INTROSPECTS is not None and rel in INTROSPECTS:
                        critical = False  # the library's own tracer or heap walk (a file that has one)
                    # written at once: the code that walks the heap may disable this plugin next
                    report_tampered("%s called from %s (%s)" % (event, rel or name, why), critical)
            except Exception:
                pass

    add_hook = _getattr(sys, "addaudithook", None) if CHECKS else None
    if add_hook is not None:
        add_hook(audit)
    if CHECKS:
        for cls in _classes():  # the classes before any repository code ran: not the patch's
            class_seen[_id(cls)] = (_ref(cls), _fingerprint(cls), True)
        if YOUNG:
            _gc_callbacks.append(sealed_on_gc)

    # ------------------------------------------------------------------ test code's own names
    import ast as _ast

    def test_support(rel):
        """Test code of the repository by its path: test modules, conftests, and the
        test-support directories and modules (keep in sync with
        `minisandbox.grading.evalscript.TEST_DIRS`, `SUPPORT_DIRS`, `SUPPORT_FILES` and
        `SUPPORT_PATHS`)."""
        parts = rel.split("/")
        name = parts[-1]
        if name in SUPPORT_FILES or name == "conftest.py" or name == "tests.py" or rel in SUPPORT_PATHS:
            return True
        if name.startswith("test_") or name.endswith("_test.py"):
            return True
        return _any(p in SUPPORT_DIRS for p in parts[:-1])

    bindings_cache = {}  # real file -> (names its code defines, {name: (module, attr)} it imports)
    local_decorated = {}  # real file -> the names it defines by a `def` under a decorator it defines
    # real file -> (the names its module binds by a `def` under pytest marks only, {class
    # under marks only: its methods so defined}): see `unplain`
    plain_defs = {}
    def_roots = {}  # real file -> {"f" or "C.f": the names its decorators start from}

    def static_bindings(real, package):
        """The top-level names a module's source binds by `def`/`class` (a function: None;
        a class: the names its body binds by `def`) and by import (`{name: (module, attr
        or None)}`), without any name it also binds otherwise (an assignment, a `global`,
        a `del`, a fallback import): those may change."""
        got = bindings_cache.get(real)
        if got is not None:
            return got
        defined, imported, other, class_bound, decorators = {}, {}, _set(), {}, {}
        plain_funcs, plain_classes = _set(), {}
        roots_of = def_roots[real] = {}
        try:
            with open(real, "rb") as f:
                tree = _ast.parse(f.read())
        except (OSError, SyntaxError, ValueError):
            tree = None
        body = _list(tree.body) if tree is not None else []
        blocks = (_ast.If, _ast.Try, _getattr(_ast, "TryStar", _ast.Try))
        while body:
            node = body.pop(0)
            names = []
            if _isinstance(node, blocks):
                body.extend(node.body)
                body.extend(_getattr(node, "orelse", []))
                body.extend(_getattr(node, "finalbody", []))
                for h in _getattr(node, "handlers", []):
                    body.extend(h.body)
            elif _isinstance(node, (_ast.FunctionDef, _ast.AsyncFunctionDef)):
                names.append((node.name, defined, None))
                roots = [_getattr(d, "func", d) for d in node.decorator_list]
                decorators[node.name] = _set(r.id for r in roots if _isinstance(r, _ast.Name))
                if marks_only(node):
                    plain_funcs.add(node.name)
                roots_of[node.name] = decorator_roots(node)
            elif _isinstance(node, _ast.ClassDef):
                methods = _set(n.name for n in node.body if _isinstance(n, (_ast.FunctionDef, _ast.AsyncFunctionDef)))
                names.append((node.name, defined, methods))
                class_bound[node.name] = class_names(node)
                if marks_only(node):
                    plain_classes[node.name] = plain_methods(node)
                outer = decorator_roots(node)
                for n in node.body:
                    if _isinstance(n, (_ast.FunctionDef, _ast.AsyncFunctionDef)):
                        roots_of[node.name + "." + n.name] = outer + decorator_roots(n)
            elif _isinstance(node, _ast.Import):
                for a in node.names:
                    name = a.asname or a.name.split(".")[0]
                    names.append((name, imported, (a.name if a.asname else name, None)))
            elif _isinstance(node, _ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    pkg = [p for p in (package or "").split(".") if p]
                    pkg = pkg[: _len(pkg) - node.level + 1] if node.level > 1 else pkg
                    base = ".".join(pkg + ([node.module] if node.module else []))
                names.extend((a.asname or a.name, imported, (base, a.name)) for a in node.names if a.name != "*")
            for name, where, what in names:
                if name in defined or name in imported:
                    other.add(name)
                where[name] = what
        if tree is not None:
            for node in _ast.walk(tree):
                if _isinstance(node, _ast.Name) and not _isinstance(node.ctx, _ast.Load):
                    other.add(node.id)
                elif _isinstance(node, (_ast.Global, _ast.Nonlocal)):
                    other.update(node.names)
        local_decorated[real] = _set(n for n, used in decorators.items() if used & _set(decorators))
        for name in other:
            defined.pop(name, None)
            imported.pop(name, None)
        plain_defs[real] = (_set(n for n in plain_funcs if n in defined and defined[n] is None),
                            _dict((n, m) for n, m in plain_classes.items() if defined.get(n) is not None))
        got = bindings_cache[real] = (defined, imported, class_bound)
        return got

    def marks_only(node):
        """Is every decorator of a `def` or `class` statement a pytest mark (`@pytest.mark.x`,
        `@mark.x(...)`)? A mark returns what it decorates: the name is bound to what the
        statement itself made."""
        for d in node.decorator_list:
            d = d.func if _isinstance(d, _ast.Call) else d
            parts = []
            while _isinstance(d, _ast.Attribute):
                parts.append(d.attr)
                d = d.value
            if not _isinstance(d, _ast.Name):
                return False
            parts.append(d.id)
            parts.reverse()
            if not ((_len(parts) > 2 and parts[0] == "pytest" and parts[1] == "mark") or
                    (_len(parts) > 1 and parts[0] == "mark")):
                return False
        return True

    def decorator_roots(node):
        """The names a `def` or `class` statement's decorators start from (`mock` of
        `@mock.patch("x")`, `freeze_time` of `@freeze_time(...)`)."""
        roots = []
        for d in node.decorator_list:
            while _isinstance(d, (_ast.Call, _ast.Attribute)):
                d = d.func if _isinstance(d, _ast.Call) else d.value
            if _isinstance(d, _ast.Name):
                roots.append(d.id)
        return roots

    def plain_methods(node):
        """The methods a class body binds once, by a `def` under marks only, and by nothing
        else."""
        defs, stored = {}, _set()
        for n in node.body:
            if _isinstance(n, (_ast.FunctionDef, _ast.AsyncFunctionDef)):
                defs[n.name] = defs.get(n.name, 0) + (1 if marks_only(n) else 2)
                continue
            for m in _ast.walk(n):
                if _isinstance(m, _ast.Name) and not _isinstance(m.ctx, _ast.Load):
                    stored.add(m.id)
                elif _isinstance(m, (_ast.FunctionDef, _ast.AsyncFunctionDef, _ast.ClassDef)):
                    stored.add(m.name)
        return _set(n for n, count in defs.items() if count == 1 and n not in stored)

    imports_cache = {}  # real file -> {bound name: [(module, attr)]} of its `from ... import`s

    def imports_of(real, package):
        """Every `from M import x [as y]` of the file `real`, wherever it stands."""
        got = imports_cache.get(real)
        if got is not None:
            return got
        got = imports_cache[real] = {}
        try:
            with open(real, "rb") as f:
                tree = _ast.parse(f.read())
        except (OSError, SyntaxError, ValueError):
            return got
        for node in _ast.walk(tree):
            if not _isinstance(node, _ast.ImportFrom):
                continue
            base = node.module or ""
            if node.level:
                pkg = [p for p in (package or "").split(".") if p]
                pkg = pkg[: _len(pkg) - node.level + 1] if node.level > 1 else pkg
                base = ".".join(pkg + ([node.module] if node.module else []))
            for a in node.names:
                got.setdefault(a.asname or a.name, []).append((base, a.name))
        return got

    def class_names(node):
        """Every name a class statement's body binds (an over-approximation: names bound
        anywhere inside it, methods' locals included)."""
        bound = _set()
        for n in _ast.walk(node):
            if n is node:
                continue
            if _isinstance(n, _ast.Name) and not _isinstance(n.ctx, _ast.Load):
                bound.add(n.id)
            elif _isinstance(n, (_ast.FunctionDef, _ast.AsyncFunctionDef, _ast.ClassDef)):
                bound.add(n.name)
            elif _isinstance(n, (_ast.Import, _ast.ImportFrom)):
                bound.update((a.asname or a.name).split(".")[0] for a in n.names)
        return bound

    def shadowed(cls, attr):
        """The first base of class `cls` whose attribute `attr` it hides, or None."""
        for b in _getattr(cls, "__mro__", ())[1:]:
            if attr in _getattr(b, "__dict__", {}):
                return b
        return None

    def foreign_code(value, real):
        """Why `value` (a function, or a class's functions) is code of a disallowed file,
        unless its `__wrapped__` chain reaches code of `real` (a decorated definition)."""
        fn, depth = value, 0
        while fn is not None and depth < 20:
            code = _getattr(_getattr(fn, "__func__", fn), "__code__", None)
            if code is not None and real_of(code.co_filename) == real:
                return None
            fn, depth = _getattr(fn, "__wrapped__", None), depth + 1
        code = _getattr(_getattr(value, "__func__", value), "__code__", None)
        return code_verdict(code) if code is not None else None

    _partials, _callable = (functools.partial, functools.partialmethod), callable
    _bound = (types.MethodType, staticmethod, classmethod)

    def wraps_own(value, real):
        """True when `value` or its `__wrapped__` chain is code of `real` (a decorated
        definition of that file)."""
        fn, depth = value, 0
        while fn is not None and depth < 20:
            code = _getattr(_getattr(fn, "__func__", fn), "__code__", None)
            if _isinstance(code, types.CodeType) and real_of(code.co_filename) == real:
                return True
            fn, depth = _getattr(fn, "__wrapped__", None), depth + 1
        return False

    def misnamed(value, qualname, real, ns=None):
        """Why `value`, under a name test code binds by `def` (`qualname`: `test_x`,
        `TestX.test_x`), runs the code of another of its file's definitions (None when it
        may be honest): the first code of `real` in its `__wrapped__` chain is the file's
        own, but that of another function or method at module or class level. Library
        code that bound the graded test function's name to a new function made from
        another test's code (`types.FunctionType(test_sub.__code__, ...)`) kept the bug
        and was resolved. A function defined inside another (a decorator's `inner`, which
        wraps without `__wrapped__`) is not judged; nor is code without `co_qualname`
        (Python before 3.11). `ns` (the module's namespace, given for a `def` under a
        decorator the file defines): the very function the module binds under the other
        name is that decorator's honest answer (a "not available here" placeholder)."""
        fn, depth = value, 0
        while fn is not None and depth < 20:
            code = _getattr(_getattr(fn, "__func__", fn), "__code__", None)
            if _isinstance(code, types.CodeType) and real_of(code.co_filename) == real and genuine(code, real):
                own = _getattr(code, "co_qualname", None)
                if own is None or "<locals>" in own or own == qualname:
                    return None
                if ns is not None and ns.get(own) is _getattr(fn, "__func__", fn):
                    return None
                return "the code of %s" % own
            fn, depth = _getattr(fn, "__wrapped__", None), depth + 1
        return None

    def unbound(value):
        """`value` past bound methods, static and class methods and partials (8 levels)."""
        for _ in _range(8):
            if _isinstance(value, _bound):
                value = value.__func__
            elif _isinstance(value, _partials):
                value = value.func
            else:
                break
        return value

    def stand_in(value, name, real, lenient=False):
        """Why `value`, found under `name` where test code looks up a helper, stands in for
        one (None when it may be honest; `lenient`: only code of a disallowed file or a
        mock double counts): past bound methods, static and class methods and
        partials, a function of a disallowed file (unless its `__wrapped__` chain reaches
        the code of `real`, the module's own file; installed code when `real` is None), a
        `unittest.mock` double, an instance of a class whose `__call__` is such code (unless
        the instance holds the module's own code: a decorator's product), or a
        callable with no Python code of its own (`max`, `print`, a ufunc) under a name that
        is not its own; a class where test code defined a function (`fractions.Fraction`,
        which takes any two numbers), or in an installed helper a builtin class or a class
        under an `assert...` name that is not its own. Library code that made
        `calc.testing.assert_equal` `max`, a partial of a no-op, or `numpy.testing`'s
        helper `max` kept the bug and was resolved: only functions were looked at."""
        if real is not None and wraps_own(value, real):
            return None
        value = unbound(value)
        if _isinstance(value, types.FunctionType):
            if real is not None:
                return foreign_code(value, real)
            filename = value.__code__.co_filename
            if filename.startswith("<") or rel_to_root(real_of(filename)) is None:
                return None  # generated or frozen code (`<frozen abc>`), or installed code
            return code_verdict(value.__code__)
        if _isinstance(value, _type):
            own = _getattr(value, "__name__", None)
            if lenient:
                return None
            if real is not None:  # a class where test code defined a function or method
                return "the class %s.%s" % (_getattr(value, "__module__", "?"), own)
            if own != name and (_getattr(value, "__module__", None) == "builtins" or
                                _str(name).lower().startswith("assert")):
                return "the class %s.%s" % (_getattr(value, "__module__", "?"), own)
            return None
        cls = _type(value)
        if _getattr(cls, "__module__", None) == "unittest.mock":
            return "a unittest.mock %s" % cls.__name__
        call = _getattr(cls, "__call__", None)
        if _isinstance(call, types.FunctionType):
            attrs = _getattr(value, "__dict__", None)
            if real is not None and _isinstance(attrs, _dict) and _any(wraps_own(v, real) for v in attrs.values()):
                return None  # a decorator's product holding the module's own code (a click command)
            return stand_in(call, "__call__", real)
        if lenient or not _callable(value):
            return None
        own = _getattr(value, "__name__", None)
        if own != name:
            return "%s (%s), a callable with no code of its own" % (own, cls.__name__)
        return None

    def skip_wrapper_code():
        """The code of the wrapper `unittest.skip` puts in a test function's place (Django
        applies its database backend's skip lists so, at set-up: 21 critical lines on its
        suite before `unplain` let it stand)."""
        skip = _getattr(sys.modules.get("unittest.case"), "skip", None)
        try:
            return _getattr(skip("minisandbox")(lambda: None), "__code__", None) if skip is not None else None
        except Exception:  # noqa: BLE001
            return None

    SKIP_WRAPPER_CODE = skip_wrapper_code()

    def unplain(value, name, real, globs, test=False):
        """Why `value`, bound where the unchanged test code file `real` binds `name` (`f`,
        `C.f`) by a `def` under pytest marks only (`marks_only`), is not what that `def`
        made (None when it may be). A wrapper is honest only where the source applies a
        decorator. Library code rebound such tests, from a gc callback while the module was
        half imported or during collection, to a standard-library wrapper that swallowed
        their AssertionError (`contextlib.suppress` as a decorator), to a partial of its
        own, or to a `functools.wraps` wrapper of its own that told the library the
        expected value, and each was resolved.

        `test` (a test pytest runs): only the def's own function (its code, in `globs`),
        this plugin's, or a wrapper of an installed pytest11 plugin (`installed_plugin_function`)
        whose `__wrapped__` chain reaches the file's code and whose closure holds it
        (pytest-asyncio's `wrap_in_sync`, pytest-trio's runner) may stand there: a no-op
        nested in `_pytest.skipping`, made a function and given the test's `__wrapped__`,
        passed for an installed wrapper. Otherwise (a helper,
        which tests and conftests monkeypatch): past partials and bound methods, no code of
        a disallowed file, and no standard-library wrapper of the file's own code."""
        if not test:
            value = unbound(value)
        if _type(value) is not types.FunctionType:
            return "not the function its def made but a %s" % _type(value).__name__ if test else None
        code = value.__code__
        freal = real_of(code.co_filename)
        if freal == real and code.co_name == name.rsplit(".", 1)[-1] and genuine(code, real) and \
                value.__globals__ is globs:
            return None
        if freal == ME and code in PLUGIN_CODES:
            return None
        if code is SKIP_WRAPPER_CODE:
            return None  # unittest.skip's wrapper only raises SkipTest: a skip never passes
        stdlib = code.co_filename.startswith("<") or (freal.startswith(STDLIB) and "-packages" + _sep not in freal)
        rel = rel_to_root(freal)
        if code_verdict(code) is None:
            if not test and (not stdlib or not wraps_own(value, real)):
                return None  # test code's own doing (a helper monkeypatched), an installed library's
            if test and rel is None and not stdlib and wraps_own(value, real) and holds_own(value, real) and \
                    installed_plugin_function(value):
                return None
        return "not the function its def made but %s (%s:%d)" % (
            _getattr(code, "co_qualname", code.co_name), rel or code.co_filename, code.co_firstlineno)

    def holds_own(fn, real):
        """Does the closure of `fn` hold a function whose code, or whose `__wrapped__`
        chain's, is the file `real`'s (the wrapper refers to what it wraps)?"""
        for cell in _getattr(fn, "__closure__", None) or ():
            try:
                held = cell.cell_contents
            except ValueError:
                continue
            if wraps_own(held, real):
                return True
        return False

    def plain_class(cls, real):
        """Are `cls`'s methods what its body made, as far as the runtime goes: its metaclass
        `type` or `ABCMeta`, and every base `object`, a standard-library `unittest` class or
        a class of unchanged test code (a library base class or metaclass may wrap them)?"""
        meta = _type(cls)
        abc_mod = sys.modules.get("abc")
        if meta is not _type and meta is not _getattr(abc_mod, "ABCMeta", None):
            return False
        for base in _getattr(cls, "__mro__", ())[1:]:
            if base is object:
                continue
            mod = sys.modules.get(_getattr(base, "__module__", None) or "")
            f = _getattr(mod, "__file__", None)
            if not _isinstance(f, _str):
                return False
            freal = real_of(f)
            if _str(base.__module__).split(".")[0] == "unittest" and freal.startswith(STDLIB):
                continue
            rel = rel_to_root(freal)
            if rel is None or not test_support(rel) or file_verdict(freal) is not None:
                return False
        return True

    plain_seen = {}  # id(test item or case) -> (it, the function checked, plain_test's answer, what is called)

    def plain_checked(test, fn, mod, name, cls, label, obj=None):
        """The check of a test's function (`fn`, pytest's `item.function` or a unittest
        case's method) when its definition is plain (`plain_test`), once per test and
        function: a finding (critical) unless `unplain` accepts it; and of `obj`, what
        pytest calls (`item.obj`: `item.function` is its `__func__`, so an object of the
        patch's whose `__func__` was the test and whose `__call__` swallowed the failure
        passed). Returns plain_test's answer (a plain test's wrapper gets no witness)."""
        hit = plain_seen.get(_id(test))
        if hit is not None and hit[0] is test and hit[1] is fn and hit[3] is obj:
            return hit[2]
        try:
            plain = plain_test(mod, name, cls)
        except Exception:
            plain = None
        plain_seen[_id(test)] = (test, fn, plain, obj)
        if plain is not None:
            # a method as its class holds it: Django sets an async test's synchronous
            # wrapper on the test case instance (`_setup_and_call`)
            subject = fn if plain[3] is None else plain[3].__dict__.get(plain[0].rsplit(".", 1)[-1])
            why = unplain(subject, plain[0], plain[1], plain[2], True) if subject is not None else None
            called = obj.__func__ if _type(obj) is types.MethodType else obj
            if why is None and called is not None and called is not subject:
                why = unplain(called, plain[0], plain[1], plain[2], True)
            if why is not None:
                report_tampered("test %s: its function is %s" % (label, why))
        return plain

    fixtures_seen = {}  # id(FixtureDef) -> (it, its function when judged)

    def fixtures_checked(item):
        """The fixtures a test uses that pytest registered for the repository's test code (a
        test module, class or conftest: a `baseid`) must run no code of a disallowed file
        (`fixture_verdict`), once per fixture and function. Library code added an autouse
        fixture of its own to the half-imported test module under a new name; it read the
        running test's parameters from `request` and told the library the expected value:
        resolved, no finding (the test function itself untouched)."""
        n2d = _getattr(_getattr(item, "_fixtureinfo", None), "name2fixturedefs", None)
        if not _isinstance(n2d, _dict):
            return
        for name, defs in _list(n2d.items()):
            for fd in _tuple(defs or ()):
                func = _getattr(fd, "func", None)
                seen = fixtures_seen.get(_id(fd))
                if seen is not None and seen[0] is fd and seen[1] is func:
                    continue
                fixtures_seen[_id(fd)] = (fd, func)
                why = fixture_verdict(fd, func)
                if why is not None:
                    report_tampered("test %s: its fixture %s (registered for %s) is %s" % (
                        item.nodeid, name, _getattr(fd, "baseid", ""), why))

    def fixture_functions(obj):
        """The Python functions (and classes) a fixture definition runs or stands for:
        through bound methods, partials, pytest's fixture wrappers (`_fixture_function`,
        `__pytest_wrapped__`), `__wrapped__` chains and a callable instance's `__call__`."""
        found, todo, seen = [], [obj], _set()
        while todo and _len(seen) < 40:
            o = todo.pop()
            if o is None or _id(o) in seen or _isinstance(o, types.ModuleType):
                continue
            seen.add(_id(o))
            if _type(o) is types.FunctionType:
                found.append(o)
            elif _isinstance(o, _partials):
                todo.append(o.func)
            elif _isinstance(o, _type):
                found.append(o)  # a class pytest calls: its own code (hidden_logic)
            elif _type(o) is not types.BuiltinFunctionType:
                call = _getattr(_type(o), "__call__", None)
                if _type(call) is types.FunctionType:
                    todo.append(call)
            for attr in ("__func__", "_fixture_function", "__wrapped__"):
                try:
                    todo.append(_instance_dict(o, attr) if attr != "__func__" else _getattr(o, attr, None))
                except Exception:
                    pass
            wrapped = _getattr(o, "__pytest_wrapped__", None)
            if wrapped is not None:
                todo.append(_getattr(wrapped, "obj", None))
        return found

    def fixture_verdict(fd, func):
        """Why the fixture `fd` (pytest's FixtureDef) of the repository's test code runs a
        disallowed file's code, or None: a plugin's fixture (no `baseid`) is not judged
        here, and one whose function unchanged test code imports by name (`from
        pkg.testing import db`) is what its import gives."""
        if not _getattr(fd, "baseid", None):
            return None
        found = fixture_functions(func)
        if not found:
            return no_code(func) or "a callable with no code of its own (%s)" % _type(func).__name__
        for fn in found:
            if _isinstance(fn, _type):
                why = hidden_logic(fn)
                if why is not None and not imported_fixture(fn):
                    return why
                continue
            why = file_verdict(fn.__code__.co_filename)
            if why is not None and not imported_fixture(fn):
                return "%s (%s:%d): %s" % (_getattr(fn.__code__, "co_qualname", fn.__code__.co_name),
                                          rel_to_root(real_of(fn.__code__.co_filename)) or fn.__code__.co_filename,
                                          fn.__code__.co_firstlineno, why)
            why = stdlib_closure(fn)
            if why is not None:
                return why
        return None

    def imported_fixture(fn):
        """Is `fn` what a name that an unchanged test code module imports by its source
        (`static_bindings`) holds, as that import gives it?"""
        helpers, tests = test_modules()
        for mod, real, rel in helpers + tests:
            if rel is None or file_verdict(real) is not None:
                continue
            d = _getattr(mod, "__dict__", {})
            for name, source in _list(static_bindings(real, _getattr(mod, "__package__", None))[1].items()):
                value = d.get(name, _NOTHING)
                if value is _NOTHING or value is not imported_value(source) or _isinstance(value, types.ModuleType):
                    continue
                if _any(f is fn for f in fixture_functions(value)):
                    return True
        return False

    def hidden_logic(held, depth=0):
        """Why `held` (what a standard-library wrapper's closure holds, or a fixture's
        callable) carries code of a disallowed file (`file_verdict`: the code of a test
        file's function that the module binds only as a decorator's product is not found
        by `code_verdict`), or None: such a function (past partials and bound methods), a
        generator running such code, a class such a file defines or whose `__init__`,
        `__new__`, `__enter__`, `__exit__` or `__call__` is such code (a class's
        `__module__` may name any module), an object of such a class, or an object whose
        attributes hold such a function (contextlib's `_GeneratorContextManager.func`, a
        partial there; a bound method of the patch's object as `__exit__`)."""
        why = code_of_patch(held)
        if why is not None:
            return why
        cls = held if _isinstance(held, _type) else _type(held)
        why = forged_class(cls)
        if why is not None:
            return why
        if cls.__module__ != "builtins":
            mod = sys.modules.get(_getattr(cls, "__module__", None) or "")
            f = _getattr(mod, "__file__", None)
            if _isinstance(f, _str) and file_verdict(f) is not None:
                return "the class %s (%s)" % (_getattr(cls, "__qualname__", "?"), file_verdict(f))
        members = [_getattr(cls, n, None) for n in ("__init__", "__new__", "__enter__", "__exit__", "__call__")]
        if not _isinstance(held, _type):
            try:
                attrs = _instance_dict(held, "__dict__")
            except Exception:
                attrs = None
            if _type(attrs) is _dict:
                members += _list(attrs.values())
        for m in members:
            why = code_of_patch(m)
            if why is None and depth < 3:
                why = stdlib_closure(unbound(m), depth + 1)
            if why is not None:
                return why
        return None

    HEAPTYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE: a class made by Python code

    def forged_class(cls):
        """Why `cls`, a class made by Python code, names a standard-library module that does
        not hold it (`type("_Quiet", (ContextDecorator,), {"__module__": "contextlib",
        ...})`, its members all the standard library's, its `__exit__` a context manager
        that is always true), else None. mock's per-instance subclasses are mock's."""
        if not (_getattr(cls, "__flags__", 0) & HEAPTYPE):
            return None
        modname = _getattr(cls, "__module__", None)
        mod = sys.modules.get(modname or "")
        f = _getattr(mod, "__file__", None)
        if not _isinstance(f, _str) or not real_of(f).startswith(STDLIB) or "-packages" + _sep in real_of(f):
            return None
        mock = sys.modules.get("unittest.mock")
        base = _getattr(mock, "NonCallableMock", None) if mock is not None else None
        if _isinstance(base, _type) and _issubclass(cls, base):
            return None
        found = mod
        for part in _str(_getattr(cls, "__qualname__", "")).split("."):
            found = _getattr(found, part, None)
        if found is cls:
            return None
        return "the class %s.%s, which that module does not define" % (modname, cls.__qualname__)

    def code_of_patch(value):
        """Why `value` (past partials and bound methods) is a function, or a generator,
        running code of a disallowed file (`file_verdict`), else None."""
        value = unbound(value)
        code = value.__code__ if _type(value) is types.FunctionType else None
        if code is None and _type(value) is types.GeneratorType:
            code = value.gi_code
        if code is None:
            return None
        why = file_verdict(code.co_filename)
        return None if why is None else "%s (%s)" % (code.co_name, why)

    def stdlib_wrapped(value):
        """Why an element of `value`'s `__wrapped__` chain (past bound methods and partials),
        the function a test runs, carries code of a disallowed file, else None: a function
        of the standard library whose closure holds it (`stdlib_closure`: library code
        wrapped tests in a `contextlib.ContextDecorator` of its own whose `__exit__`
        swallowed AssertionError, in a `contextmanager` of its own, or in
        `contextlib.suppress` as a decorator of a class of its own, and the function that
        ran was `contextlib`'s `inner`), a function of such a file (`lru_cache` of the
        patch's function, named as the test), or an object whose class's own code is
        (`hidden_logic`). One walk of the chain."""
        fn, depth = value, 0
        while fn is not None and depth < 20:
            f = unbound(fn)
            why = stdlib_closure(f)
            if why is not None:
                return why
            why = code_of_patch(f)
            if why is None and _type(f) is not types.FunctionType and not _isinstance(f, (_type, types.ModuleType)):
                why = hidden_logic(f)
            if why is not None:
                return "wrapped in %s" % why
            fn, depth = _getattr(fn, "__wrapped__", None), depth + 1
        return None

    def stdlib_closure(f, depth=0):
        """Why `f`, when a function of the standard library, holds code of a disallowed
        file in its closure (`hidden_logic`, `depth` levels of closures in), else None."""
        if _type(f) is not types.FunctionType:
            return None
        freal = real_of(f.__code__.co_filename)
        if not freal.startswith(STDLIB) or "-packages" + _sep in freal:
            return None
        for cell in f.__closure__ or ():
            try:
                held = cell.cell_contents
            except ValueError:
                continue
            why = hidden_logic(held, depth)
            if why is not None:
                return "a wrapper of the standard library (%s) holding %s" % (
                    _getattr(f.__code__, "co_qualname", f.__code__.co_name), why)
        return None

    def decorated_by_patch(mod, name, cls):
        """Does the source decorate the test `name` (of class `cls`) with something it
        imports from a disallowed file (freezegun's `@freeze_time` when the patch changes
        freezegun: the library's own decorator, judged by the witness)? The decorator's
        name is resolved through the source's own import (`static_bindings`), as that
        import gives it: library code rebound the test module's `mock` to its own module
        and the wrapper rule was skipped."""
        f = _getattr(mod, "__file__", None)
        if not _isinstance(f, _str):
            return False
        real = real_of(f)
        imported = static_bindings(real, _getattr(mod, "__package__", None))[1]
        key = name if cls is None else "%s.%s" % (_getattr(cls, "__name__", ""), name)
        for root in def_roots.get(real, {}).get(key, ()):
            obj = imported_value(imported[root]) if root in imported else _NOTHING
            if obj is _NOTHING:
                continue
            code = _getattr(_getattr(obj, "__func__", obj), "__code__", None)
            where = _getattr(obj, "__file__", None) if _isinstance(obj, types.ModuleType) else None
            if where is not None and patched_package(where):
                return True  # `@freezegun.freeze_time`: a package the patch changes (its api.py)
            if where is None and _type(code) is types.CodeType:
                where = code.co_filename
            if where is None:
                owner = sys.modules.get(_getattr(obj if _isinstance(obj, _type) else _type(obj), "__module__", None) or "")
                where = _getattr(owner, "__file__", None)
            if _isinstance(where, _str) and file_verdict(where) is not None:
                return True
        return False

    def patched_package(init):
        """Is `init` a package's `__init__.py` under which the patch changes a file?"""
        if not _isinstance(init, _str) or _os_basename(init) != "__init__.py":
            return False
        rel = rel_to_root(real_of(_dirname(init)))
        return rel is not None and _any(p.startswith(rel + "/") for p in PATCHED)

    wrapped_seen = {}  # id(test) -> (it, its function and what pytest calls, when judged)

    def wrapped_checked(test, fn, mod, name, cls, label, obj=None):
        """The function a test runs (`fn`) and what pytest calls (`obj`, `item.obj`), once
        per test and function, unless the source decorates the test with the patch's own
        decorator: nothing of a disallowed file along the `__wrapped__` chain
        (`stdlib_wrapped`; an object of the patch's whose `__func__` is the test and whose
        `__call__` swallows stands for it as `item.obj`), and no callable of the standard
        library with no code of its own (`no_code`)."""
        called = obj.__func__ if _type(obj) is types.MethodType else obj
        hit = wrapped_seen.get(_id(test))
        if hit is not None and hit[0] is test and hit[1] is fn and hit[2] is called:
            return
        wrapped_seen[_id(test)] = (test, fn, called)
        why = None
        try:
            for value in (fn, called) if called is not None and called is not fn else (fn,):
                why = value is not None and (stdlib_wrapped(value) or no_code(value))
                if why:
                    break
            if why and decorated_by_patch(mod, name, cls):
                why = None
        except Exception:
            why = None
        if why:
            report_tampered("test %s: its function is %s" % (label, why))

    def no_code(value):
        """Why `value`, standing for a test or a fixture's function, is a callable with no
        Python code of its own that the standard library or the interpreter implements
        (a `functools.lru_cache` wrapper, a partial), else None."""
        if _isinstance(value, (types.FunctionType, types.MethodType, _type)):
            return None
        cls = _type(value)
        if _type(_getattr(cls, "__call__", None)) is types.FunctionType:
            return None  # a class of Python code: judged by its code
        mod = sys.modules.get(_getattr(cls, "__module__", None) or "")
        f = _getattr(mod, "__file__", None)
        if mod is None or not _isinstance(f, _str) or (real_of(f).startswith(STDLIB) and "-packages" + _sep not in real_of(f)):
            return "a %s.%s (a callable with no code of its own)" % (cls.__module__, cls.__qualname__)
        return None

    def method_checked(test):
        """unittest mode, right before a test method: `plain_checked` and `wrapped_checked`
        for the method as its class holds it (library code, a runner the patch changes,
        bound a function of its own there that put the real method back when called and
        swallowed its failure: the checks after the test saw the real one)."""
        name = _getattr(test, "_testMethodName", None)
        cls = _type(test)
        member = None
        for owner in _getattr(cls, "__mro__", ()):
            if name in _getattr(owner, "__dict__", {}):
                member = owner.__dict__[name]
                break
        if member is None:
            return
        mod = sys.modules.get(cls.__module__)
        label = _str(test).split("\n")[0]
        member = _getattr(member, "__func__", member)
        plain_checked(test, member, mod, name, cls, label)
        wrapped_checked(test, member, mod, name, cls, label)

    def plain_test(mod, name, cls):
        """(the definition's name, its file, the module's namespace, the class that holds
        it or None) when the test `name` (of the class `cls`, or None) is a function that
        the unchanged test file of module `mod` defines by a `def` under pytest marks only
        (in a class under marks only: `plain_class`), else None."""
        f = _getattr(mod, "__file__", None)
        if not _isinstance(f, _str) or not f.endswith(".py"):
            return None
        real = real_of(f)
        if rel_to_root(real) is None or file_verdict(real) is not None:
            return None
        static_bindings(real, _getattr(mod, "__package__", None))
        funcs, classes = plain_defs.get(real, (_set(), {}))
        if cls is None:
            return (name, real, mod.__dict__, None) if name in funcs else None
        for owner in _getattr(cls, "__mro__", ()):
            if name in _getattr(owner, "__dict__", {}):
                break
        else:
            return None
        if _getattr(owner, "__module__", None) != mod.__name__ or owner.__qualname__ != owner.__name__ or \
                mod.__dict__.get(owner.__name__) is not owner:
            return None
        if name not in classes.get(owner.__name__, ()) or not plain_class(owner, real):
            return None
        return owner.__name__ + "." + name, real, mod.__dict__, owner

    # len(sys.modules) when listed; [(module, real, rel)] of test code: helpers (every
    # module but the test modules), test modules
    ns_modules = [-1, [], []]
    ns_ok = {}  # id(module) -> (module, its values when last verified)

    def test_modules():
        if ns_modules[0] != _len(sys.modules):
            helpers, tests = [], []
            for mod in _list(sys.modules.values()):
                f = _getattr(mod, "__file__", None)
                if not _isinstance(f, _str) or not f.endswith(".py"):
                    continue
                real = real_of(f)
                rel = rel_to_root(real)
                if rel is not None and test_support(rel):
                    name = rel.rsplit("/", 1)[-1]
                    test = name.startswith("test_") or name.endswith("_test.py") or name == "tests.py"
                    (tests if test else helpers).append((mod, real, rel))
                elif rel is None and installed_support(_getattr(mod, "__name__", None)):
                    helpers.append((mod, real, None))
            ns_modules[0], ns_modules[1], ns_modules[2] = _len(sys.modules), helpers, tests
        return ns_modules[1], ns_modules[2]

    def installed_support(name):
        """An installed module of test helpers (`numpy.testing`, `pandas._testing`): its
        dotted name has a test-support component."""
        return _str(name or "").split(".")[0] in SUPPORT_PACKAGES or named_support(name)

    def named_support(name):
        """A module whose dotted name has a test-support component (`numpy.testing`)."""
        return _any(p in SUPPORT_DIRS or p + ".py" in SUPPORT_FILES for p in _str(name or "").split("."))

    def check_installed(mod, real, d):
        """An installed helper module holds no code of a disallowed repository file (as a
        module global, or a method of a class it defines): no honest library puts its own
        functions into `numpy.testing`. A module of a SUPPORT_PACKAGES package that is not
        named as test support (`hypothesis.core`) is held to that alone: such packages keep
        type aliases and builtins under names of their own."""
        name = _getattr(mod, "__name__", "?")
        lenient = not named_support(name)
        imported = {} if lenient else static_bindings(real, _getattr(mod, "__package__", None))[1]
        for attr, value in _list(d.items()):
            todo = [(attr, value)]
            if _issubclass(_type(value), _type) and _getattr(value, "__module__", None) == name:
                todo.extend((attr + "." + k, v) for k, v in _list(value.__dict__.items()))
            elif _issubclass(_type(value), _type) and attr in imported and imported_value(imported[attr]) is value:
                continue  # the value its own import gave it (tornado.testing's `basestring_type`, str)
            for label, fn in todo:
                if _issubclass(_type(fn), types.ModuleType):
                    continue
                try:
                    why = stand_in(fn, label.rsplit(".", 1)[-1], None, lenient)
                except Exception:  # attribute access runs code (Django's lazy `settings` raises)
                    call = _getattr(_type(fn), "__call__", None)
                    why = stand_in(call, "__call__", None) if _isinstance(call, types.FunctionType) else None
                if why is not None:
                    report_tampered("%s.%s (installed test helpers) is now %s" % (name, label, why))

    def imported_value(source):
        """The value `from module import attr` gives now (`source` is `(module, attr or
        None)`, as static_bindings names it), or _NOTHING."""
        module, attr = source
        src = sys.modules.get(module)
        if src is None:
            return _NOTHING
        if attr is None:
            return src
        return _getattr(src, "__dict__", {}).get(attr, _NOTHING)

    def check_namespaces(item, everything):
        """At the end of a test: the helpers and the test's own module (`item.module`);
        with `everything` (the end of the session) every test module too."""
        helpers, tests = test_modules()
        if everything:
            check_modules(helpers + tests)
            return
        own = _getattr(item, "module", None) if item is not None else None
        check_modules(helpers + [t for t in tests if t[0] is own])

    def check_modules(modules):
        """Test code's names (docs/grading.md, "Test code's own names"): in a test module or
        test-support module whose file is unchanged, a name its source binds by `def` or
        `class` must not hold code of a disallowed file (nor a method of such a class), and
        a name it imports from an unchanged module must be that module's value, unless
        neither is code of a disallowed file. Library code that replaced
        `calc.testing.assert_equal` at import, or rebound a test module's `assert_equal`,
        made a failing check pass."""
        for mod, real, rel in modules:
            d = _getattr(mod, "__dict__", None)
            if not _isinstance(d, _dict):
                continue
            last = ns_ok.get(_id(mod))
            values = _tuple(d.values())
            if last is not None and last[0] is mod and same(values, last[1]):
                continue  # nothing rebound since the last full look
            if rel is None:
                check_installed(mod, real, d)
                ns_ok[_id(mod)] = (mod, values)
                continue
            if file_verdict(real) is not None:
                continue  # the patch's own code (or changed): not test code to protect
            defined, imported, class_bound = static_bindings(real, _getattr(mod, "__package__", None))
            plain_funcs, plain_classes = plain_defs.get(real, (_set(), {}))
            base = rel.rsplit("/", 1)[-1]
            is_test = base.startswith("test_") or base.endswith("_test.py") or base == "tests.py"
            for name, methods in _list(defined.items()):
                value = d.get(name, _NOTHING)
                if methods is None and value is not _NOTHING:
                    ns = d if name in local_decorated.get(real, ()) else None
                    why = stand_in(value, name, real) or misnamed(value, name, real, ns)
                    if why is None and name in plain_funcs:
                        why = unplain(value, name, real, d, is_test and name.startswith("test"))
                    if why is not None:
                        report_tampered("%s: %s (defined there) is now %s" % (rel, name, why))
                elif methods is not None and _isinstance(value, _type) and \
                        _getattr(value, "__module__", None) == mod.__name__:
                    cdict = value.__dict__
                    plain = plain_classes.get(name, ()) if plain_class(value, real) else ()
                    for attr in methods:
                        if attr in plain and attr in cdict:
                            why = unplain(cdict[attr], name + "." + attr, real, d, is_test and attr.startswith("test"))
                            if why is not None:
                                report_tampered("%s: %s.%s (defined there) is now %s" % (rel, name, attr, why))
                                continue
                        member = _getattr(cdict.get(attr), "__func__", cdict.get(attr))
                        if _isinstance(member, types.FunctionType):
                            why = foreign_code(member, real) or misnamed(member, name + "." + attr, real)
                            if why is not None and fixture_wrapper(value, attr, cdict.get(attr), real, None):
                                why = None
                            if why is not None:
                                report_tampered("%s: %s.%s (defined there) is now %s" % (rel, name, attr, why))
                    check_class_extras(value, class_bound.get(name, ()), real, "%s: %s" % (rel, name))
            for name, (source, attr) in _list(imported.items()):
                value = d.get(name, _NOTHING)
                src = sys.modules.get(source)
                f = _getattr(src, "__file__", None)
                if value is _NOTHING or src is None or (_isinstance(f, _str) and file_verdict(f) is not None):
                    continue  # absent, or a module the patch changes: the library may rebind its own
                if attr is None:
                    if value is not src:
                        report_tampered("%s: %s is not the module %s" % (rel, name, source))
                    continue
                want = _getattr(src, "__dict__", {}).get(attr, sys.modules.get(source + "." + attr, _NOTHING))
                if want is _NOTHING or value is want or (_isinstance(value, _type) and _isinstance(want, _type)):
                    continue  # (a class imported again: a module reloaded)
                vf = _getattr(value, "__file__", None) if _isinstance(value, types.ModuleType) else None
                if _isinstance(vf, _str) and file_verdict(vf) is not None:
                    # a module the patch changes in an imported name's place (its decorator
                    # root then resolved to the patch: `decorated_by_patch`)
                    report_tampered("%s: %s is not %s.%s but the module %s" % (
                        rel, name, source, attr, _getattr(value, "__name__", "?")))
                    continue
                why = stand_in(value, attr, real)
                if why is not None:
                    report_tampered("%s: %s is not %s.%s but %s" % (rel, name, source, attr, why))
            ns_ok[_id(mod)] = (mod, values)

    def check_class_extras(cls, bound, real, label):
        """A test class's attributes its body does not bind (set on it later) that hide a
        base class's (`TestCase.assertEqual`): each must be no stand-in (stand_in). Library
        code that, while the test module was imported, set `assertEqual` of the test class
        to a no-op (a `__build_class__` hook put back at once) kept the bug and was
        resolved: only the methods the class body defines were looked at."""
        enum_mod = sys.modules.get("enum")
        enum_base = _getattr(enum_mod, "Enum", None) if enum_mod is not None else None
        is_enum = _isinstance(enum_base, _type) and _issubclass(cls, enum_base)
        for attr, member in _list(cls.__dict__.items()):
            if attr in bound or (attr.startswith("__") and attr.endswith("__")) or "pytest" in attr:
                continue
            if is_enum and attr.startswith("_") and attr.endswith("_"):
                continue  # the enum machinery's `_sunder_` names (`_new_member_` is object.__new__)
            base = shadowed(cls, attr)
            if base is None:
                continue
            hidden = base.__dict__[attr]
            if not _isinstance(_getattr(hidden, "__func__", hidden), types.FunctionType):
                continue  # hides no method: data the class machinery sets (an Enum's `_member_type_`)
            why = stand_in(member, attr, real) or misnamed_foreign(member, attr)
            if why is not None and fixture_wrapper(cls, attr, member, real, hidden):
                why = None
            if why is not None:
                report_tampered("%s.%s (hides %s.%s) is now %s" % (label, attr, base.__qualname__, attr, why))

    def misnamed_foreign(member, attr):
        """A function of the standard library or of an installed package, set on a test
        class under a name that is not its own (`AddTests.assertEqual =
        TestCase.assertIsNotNone`, `AddTests._callTestMethod = TestCase.assertTrue`, from a
        gc callback): a weaker check, or none, stands where the test looks one up; no code
        of the patch's anywhere."""
        fn = unbound(member)
        if _type(fn) is not types.FunctionType or fn.__name__ == attr:
            return None
        filename = fn.__code__.co_filename
        if filename.startswith("<") or rel_to_root(real_of(filename)) is not None:
            return None
        return "%s (%s, under another name)" % (fn.__qualname__, _os_basename(filename))

    SETUP_NAMES = frozenset(("setUp", "tearDown", "setUpClass", "tearDownClass"))

    def fixture_wrapper(cls, attr, member, real, hidden):
        """Is `member`, a unittest test class's set-up or tear-down `attr`, a wrapper (of a
        patched library: freezegun's class decorator) that holds in its closure what it
        replaced: the method the class body defines (`hidden` None), or the base class's
        `hidden`? It may stand in pytest mode, where a pass of a test method that raised is
        refused (`method_raised`), and what set-up leaves is witnessed (`arm_setup_witness`).
        Returns the cell that holds what it replaced, or None."""
        if UNITTEST or attr not in SETUP_NAMES or not method_raised_watch[0]:
            return None
        case = _getattr(sys.modules.get("unittest.case"), "TestCase", None)
        if not (_isinstance(cls, _type) and _isinstance(case, _type) and _issubclass(cls, case)):
            return None
        fn = _getattr(member, "__func__", member)
        if _type(fn) is not types.FunctionType:
            return None
        want = _getattr(hidden, "__func__", hidden)
        for cell in fn.__closure__ or ():
            try:
                held = cell.cell_contents
            except ValueError:
                continue
            if _getattr(held, "__code__", None) is SEAL_CODE:
                return cell  # witnessed already (arm_setup_witness)
            held = _getattr(held, "__func__", held)
            if hidden is not None:
                if held is want:
                    return cell
                continue
            code = _getattr(held, "__code__", None)
            if _type(held) is types.FunctionType and _type(code) is types.CodeType and code.co_name == attr and \
                    real_of(code.co_filename) == real and genuine(code, real):
                return cell
        return None

    # what set-up left on the test (setUp: the instance; setUpClass: the class), taken when
    # the set-up a wrapper of the patch's replaced returns: id -> (object, its attributes'
    # ids). Right before the test method (call_test_method) they must be the same: a
    # set-up wrapper that set `self.x = 8` after the real set-up changed the test's input.
    setup_left = {}
    setup_armed = {}  # id(cell) -> the cell: witnessed already

    def attribute_ids(obj):
        d = _getattr(obj, "__dict__", None)
        if d is None:
            return None
        return _tuple(_sorted((k, _id(v)) for k, v in _list(d.items()) if _type(k) is _str))

    def arm_setup_witness(cell):
        """Put a seal of a witness of what the set-up leaves into the wrapper's cell (for
        good: the class keeps its wrapper)."""
        if _id(cell) in setup_armed:
            return
        orig = cell.cell_contents

        def setup_witness(*args, **kwargs):
            got = orig(*args, **kwargs)
            target = _getattr(orig, "__self__", None) or (args[0] if args else None)
            if target is not None:
                setup_left[_id(target)] = (target, attribute_ids(target))
            return got

        sealed = seal(setup_witness, orig)
        cell.cell_contents = sealed
        setup_armed[_id(cell)] = cell

    def arm_setup_witnesses(items):
        """At collection: the set-up wrappers of the tests' unittest classes (fixture_wrapper)."""
        if UNITTEST or not method_raised_watch[0] or sys.version_info < (3, 7):
            return
        seen = _set()
        for item in items:
            cls = _getattr(item, "cls", None)
            if cls is None or _id(cls) in seen:
                continue
            seen.add(_id(cls))
            f = _getattr(sys.modules.get(_getattr(cls, "__module__", "") or ""), "__file__", None)
            if not _isinstance(f, _str):
                continue
            real = real_of(f)
            for attr in ("setUp", "setUpClass"):
                klass = next((k for k in _getattr(cls, "__mro__", ()) if attr in k.__dict__), None)
                if klass is None:
                    continue
                member = klass.__dict__[attr]
                base = shadowed(klass, attr)
                cell = fixture_wrapper(klass, attr, member, real, None) or (
                    fixture_wrapper(klass, attr, member, real, base.__dict__[attr]) if base is not None else None)
                if cell is not None:
                    arm_setup_witness(cell)

    def setup_changed(case):
        """Right before a test method: did anything change what the witnessed set-up left
        on the instance or (the first time) the class? Critical when so."""
        for target in (case, _type(case)):
            hit = setup_left.pop(_id(target), None)
            if hit is not None and hit[0] is target and attribute_ids(target) != hit[1]:
                report_tampered("test %s: its %s's attributes changed after its set-up (a set-up wrapper of the "
                                "patched library)" % (_str(case), "class" if target is not case else "instance"))

    def check_fixture_values(item):
        """The test's fixture values whose class test code defines (a conftest's helper
        object): as the test's own instance (check_instance). Library code that made such
        an object's `check` a no-op as the fixture built it kept the bug and was resolved."""
        args = _getattr(item, "funcargs", None)
        if not CHECKS or not _isinstance(args, _dict):
            return
        for value in _list(args.values()):
            cls = _type(value)
            f = _getattr(sys.modules.get(_getattr(cls, "__module__", None) or ""), "__file__", None)
            if not _isinstance(f, _str) or not f.endswith(".py"):
                continue
            rel = rel_to_root(real_of(f))
            if rel is not None and test_support(rel):
                check_instance(value)

    def check_instance(obj):
        """Right before a test method runs: the test instance's own attributes that hide
        a method of its class (`self.assertEqual`) must be no stand-in, and its class must
        be the one its module defines under its qualified name. Library code that `setUp`
        called set `self.assertEqual` to a no-op on the instance (reached through the
        caller's frame), or swapped the instance's `__class__` for a subclass under the
        same names whose base in the library has a no-op `assertEqual`, and the bug kept
        was resolved."""
        if not CHECKS or obj is None:
            return
        cls = _type(obj)
        mod = sys.modules.get(_getattr(cls, "__module__", None) or "")
        f = _getattr(mod, "__file__", None)
        real = real_of(f) if _isinstance(f, _str) and f.endswith(".py") else None
        rel = rel_to_root(real) if real is not None else None
        if rel is not None and test_support(rel) and file_verdict(real) is None:
            # its class too: a unittest run checks test modules' names only at the end
            bound = static_bindings(real, _getattr(mod, "__package__", None))[2].get(cls.__name__)
            if bound is not None:
                check_class_extras(cls, bound, real, "%s: %s" % (rel, cls.__name__))
        named = mod
        for part in _str(_getattr(cls, "__qualname__", "")).split("."):
            named = _getattr(named, part, None) if part != "<locals>" else None
            if named is None:
                break
        if named is not None and named is not cls:
            # a class made to stand for the test's (the instance's `__class__` swapped)
            report_tampered("test instance %s.%s: its class is not the one its module defines"
                            % (cls.__module__, cls.__qualname__))
        attrs = _getattr(obj, "__dict__", None)
        if not _isinstance(attrs, _dict) or not attrs:
            return
        for attr, value in _list(attrs.items()):
            method = _getattr(cls, attr, None) if _isinstance(attr, _str) else None
            if not _isinstance(_getattr(method, "__func__", method), types.FunctionType):
                continue  # hides no method (`self.maxDiff = None`)
            why = stand_in(value, attr, real)
            if why is not None:
                report_tampered("test instance %s.%s: %s (hides the method) is now %s"
                                % (cls.__module__, cls.__name__, attr, why))

    def check_preloaded():
        """What the snapshot took as pytest's, pluggy's, unittest's and the builtins'
        own, judged by where its code comes from (pytest runs: repository code that pytest
        imports before its `-p` plugins, `iniconfig` for one, ran before the snapshot, and a
        replacement it made is the baseline the identity checks compare with). A function
        of a repository file the patch changed (as a module global, unless the module's own
        source imports that name from the function's module; or as a method of a captured
        class), and code
        not from a file other than frozen modules' and generated class dunders (dataclasses),
        is critical; so is a class of a repository module not imported by name. A
        repository whose `iniconfig` patched `_pytest.python.Function.runtest` to swallow
        `AssertionError` as pytest imported it kept its bug and was resolved."""
        by_file = {}  # co_filename -> its verdict (one look per file)

        def origin(fn, member, name):
            fname = fn.__code__.co_filename
            if fname.startswith("<"):
                if fname.startswith("<frozen ") or (member and name.startswith("__") and name.endswith("__")):
                    return None
                return "code not from a file (%s)" % fname
            if fname not in by_file:
                real = real_of(fname)
                if real.startswith(RUNNER_DIRS) or rel_to_root(real) is None:
                    by_file[fname] = None  # pytest's or pluggy's own (pytest-dev's repository), or installed
                else:
                    why = file_verdict_now(fname)
                    by_file[fname] = None if why is None else "code of a changed file (%s)" % why
            return by_file[fname]

        def imported_by_name(mod, name, value):
            """True when the source of `mod` has a `from M import x [as name]` (anywhere:
            under an `if`, a `try`) and `M.x` is `value` now."""
            f = _getattr(mod, "__file__", None)
            if not _isinstance(f, _str) or not f.endswith(".py"):
                return False
            for source, attr in imports_of(real_of(f), _getattr(mod, "__package__", None)).get(name, ()):
                if _getattr(sys.modules.get(source), attr, _NOTHING) is value:
                    return True
            return False

        def class_origin(cls):
            f = _getattr(sys.modules.get(_getattr(cls, "__module__", None) or ""), "__file__", None)
            if not _isinstance(f, _str) or real_of(f).startswith(RUNNER_DIRS) or rel_to_root(real_of(f)) is None:
                return None
            why = file_verdict_now(f)
            return None if why is None else "a class of a changed file (%s)" % why

        mods = [("builtins", builtins)] + _list(captured_modules)
        for modname, mod in mods:
            mdict = _getattr(mod, "__dict__", None)
            if not _isinstance(mdict, _dict):
                continue
            for name, value in _list(mdict.items()):
                if _isinstance(value, types.ModuleType):
                    continue
                todo = [(name, value, False)]
                if _isinstance(value, _type):
                    why = class_origin(value)
                    if why is not None and not imported_by_name(mod, name, value):
                        report_tampered("%s.%s held %s when the results plugin started" % (modname, name, why))
                        continue
                    if _getattr(value, "__module__", None) == modname:
                        todo.extend((name + "." + a, m, True) for a, m in _list(value.__dict__.items()))
                for label, member, is_member in todo:
                    fn = member
                    for _ in _range(3):
                        if _isinstance(fn, _bound):
                            fn = fn.__func__
                        elif _isinstance(fn, property):
                            fn = fn.fget
                    if not _isinstance(fn, types.FunctionType):
                        continue
                    why = origin(fn, is_member, label.rsplit(".", 1)[-1])
                    if why is None or (not is_member and not why.startswith("code not")
                                       and imported_by_name(mod, name, fn)):
                        continue
                    report_tampered("%s.%s held %s when the results plugin started" % (modname, label, why))

    profile_mentions = {}  # real file of test code -> does its source load or register a profile
    hyp_seen = [None]  # hypothesis' active settings object when last checked

    def test_code_sets_profiles():
        """Does a loaded file of the repository's test code (a conftest, a test module, a
        helper) name hypothesis' profile API? Then its profiles decide the settings."""
        helpers, tests = test_modules()
        for _mod, real, rel in helpers + tests:
            if rel is None:
                continue
            got = profile_mentions.get(real)
            if got is None:
                try:
                    with open(real, "rb") as f:
                        text = f.read()
                except (OSError, IOError):
                    text = b""
                got = profile_mentions[real] = _any(
                    w in text for w in (b"load_profile", b"register_profile", b"settings.default"))
            if got:
                return True
        return False

    def check_hypothesis():
        """hypothesis' active settings are no weaker than its own defaults (examples,
        stateful steps, the explicit and generate phases) unless test code sets profiles.
        Library code that registered and loaded a profile with `max_examples=1` at its
        import kept the bug, and a `@given` test whose first (simplest) example does not
        show it was resolved, host and sandbox. (A profile test code loads is trusted,
        and so is a test's own `@settings`.)"""
        mod = sys.modules.get("hypothesis._settings")
        cls = _getattr(mod, "settings", None) if mod is not None else None
        if cls is None:
            return
        try:
            active = cls.default
        except Exception:
            return
        if active is None or active is hyp_seen[0]:
            return
        hyp_seen[0] = active
        weak = []
        for name, floor in HYPOTHESIS_FLOORS:
            value = _getattr(active, name, None)
            if _isinstance(value, _int) and value < floor:
                weak.append("%s=%d" % (name, value))
        phases = _getattr(active, "phases", None)
        if phases is not None:
            try:
                have = _set(_str(_getattr(p, "name", p)) for p in phases)
            except Exception:
                have = _set()
            weak.extend("no %s phase" % p for p in HYPOTHESIS_PHASES if p not in have)
        if weak and not test_code_sets_profiles():
            report_tampered("hypothesis' active settings are weaker than its defaults (%s), and no "
                            "test code sets a profile" % ", ".join(weak))

    def check_deciders():
        """The functions of DECIDERS, in the modules loaded now, are no stand-ins (no code
        of a disallowed repository file, no callable under a name not its own)."""
        for modname, names in DECIDERS:
            mod = sys.modules.get(modname)
            d = _getattr(mod, "__dict__", None) if mod is not None else None
            if not _isinstance(d, _dict):
                continue
            for name in names:
                value = d.get(name, _NOTHING)
                if value is _NOTHING:
                    continue
                try:
                    why = stand_in(value, name, None)
                except Exception:
                    why = "an object whose attributes run code"
                if why is not None:
                    report_tampered("%s.%s (decides assertions) is now %s" % (modname, name, why))

    # ------------------------------------------------------------------ the end-of-test check
    def check(item=None, everything=None):
        """Every check of the module docstring; each finding written once. Without an
        item (the end of the session) every captured method is compared, with one the
        outcome path's (HOT_MODULES)."""
        if not CHECKS:
            return
        state["memo"] = {}
        try:
            everything = item is None if everything is None else everything
            check_now(item, everything)
            check_namespaces(item, everything)
            check_hypothesis()
            check_deciders()
            state_tapped()
            examine_classes(item, everything)
        finally:
            state["memo"] = None

    def check_before(item=None):
        """Before a test's body runs (after its set-up): the outcome path's captured
        objects and test code's names, as at its end. A helper (`numpy.testing`'s, or
        `pytest.raises`) replaced at import or by a fixture with a no-op that puts the
        original back when called left nothing for the end-of-test check (it ran between
        the two); the end-of-test check alone passed it, host and sandbox, strict and
        official."""
        if not CHECKS:
            return
        forget_graded_lines()
        streams_tapped()
        descriptors_tapped()
        state_tapped()
        state["memo"] = {}
        try:
            check_now(item, False)
            check_namespaces(item, False)
            check_hypothesis()
            check_deciders()
        finally:
            state["memo"] = None

    # pytest itself puts a graded file's lines into `linecache` when it formats a location
    # in it (a warning whose stack level names the test module's import, a traceback): a
    # dictionary read then gives the whole file with no open event (library code that kept
    # the bug warned at its import and read the test file so, resolved). They are dropped
    # after collection and before each test's body (a formatter reads the file again).
    import linecache as _linecache
    GRADED_PATHS = _tuple(_set([ROOT_SEP + k for k in GRADED] + [real_of(ROOT_SEP + k) for k in GRADED]))

    def forget_graded_lines():
        cache = _getattr(_linecache, "cache", None)
        if _type(cache) is _dict:
            for path in GRADED_PATHS:
                cache.pop(path, None)

    # With `--verbose`, pytest writes the running test's id with its parameters (the expected
    # value among them) to the original stdout before the test runs: a `write` set on that
    # file object's instance saw it (library code that kept the bug, resolved).
    import io as _io
    STREAM_TYPES = (_io.TextIOWrapper, _io.BufferedWriter, _io.FileIO)
    STREAM_LOWER = {_io.TextIOWrapper: _io.TextIOWrapper.__dict__["buffer"],
                    _io.BufferedWriter: _io.BufferedWriter.__dict__["raw"]}
    _instance_dict = object.__getattribute__

    def streams_tapped():
        for name in ("__stdout__", "__stderr__"):
            stream, layer = sys.__dict__.get(name), name
            while _type(stream) in STREAM_TYPES:  # the text layer, its buffer, the raw file
                try:
                    own = _instance_dict(stream, "__dict__")
                except AttributeError:
                    own = {}
                hit = [n for n in ("write", "writelines", "flush") if n in own]
                if hit:
                    report_tampered("sys.%s.%s replaced on the file object (it sees what pytest prints: the running "
                                    "test's id with its parameters)" % (layer, hit[0]))
                    break
                below = STREAM_LOWER.get(_type(stream))
                stream = below.__get__(stream) if below is not None else None
                layer += ".buffer" if below is STREAM_LOWER[_io.TextIOWrapper] else ".raw"

    # What the interpreter hands library code without an audit event, checked before and
    # after every test (`state_tapped`):
    # * `gc.DEBUG_SAVEALL` keeps every unreachable object in `gc.garbage`, a plain list: a
    #   walk of the heap without `gc.get_objects` (pytest's nodes, the parametrize marks);
    # * the codec registry: pytest makes every string parameter's id through
    #   `str.encode("unicode_escape")`, and a search function of the patch's put first
    #   (`codecs.unregister`, then `register`) saw every expected value at collection; the
    #   registry's cache is filled here at load, so only clearing it lets another codec
    #   in (`unregister`, `_forget_codec`: guarded below), and what `lookup` answers must
    #   stay the object it answered at load;
    # * the encoding of the original stdout and stderr (`reconfigure(encoding=<a codec of
    #   the patch's>)`: the encoder saw pytest's verbose line before the test ran);
    # * `linecache.cache` as a dict subclass (its entries for the graded files, which pytest
    #   puts there when it formats a warning, were not dropped: `forget_graded_lines`).
    # Each found resolved, host and sandbox, strict and official, with no finding.
    import codecs as _codecs_mod
    CODEC_NAMES = ("unicode_escape", "raw_unicode_escape", "utf-8", "ascii", "latin-1", "utf-16", "utf-32")
    CODECS_AT_LOAD = []
    for _name in CODEC_NAMES:
        try:
            CODECS_AT_LOAD.append((_name, _codecs_mod.lookup(_name)))
        except LookupError:
            pass
    STREAM_CODINGS = _tuple((n, _getattr(sys.__dict__.get(n), "encoding", None), _getattr(sys.__dict__.get(n), "errors", None))
                            for n in ("__stdout__", "__stderr__"))
    _lookup = _codecs_mod.lookup

    def state_tapped():
        if _gc_get_debug() & gc.DEBUG_SAVEALL and not SAVEALL_AT_START:
            report_tampered("gc.DEBUG_SAVEALL is set (every unreachable object is kept in gc.garbage: the heap "
                            "without gc.get_objects)")
        for name, info in CODECS_AT_LOAD:
            try:
                now = _lookup(name)
            except LookupError:
                now = None
            if now is not info:
                report_tampered("the codec %s is not the one registered when the results plugin loaded (pytest "
                                "makes the tests' ids through it)" % name)
        for name, encoding, errors in STREAM_CODINGS if not (UNITTEST or SYMPY) else ():
            stream = sys.__dict__.get(name)
            if stream is not None and (_getattr(stream, "encoding", None), _getattr(stream, "errors", None)) != \
                    (encoding, errors):
                report_tampered("sys.%s was reconfigured to another encoding (its encoder sees what pytest prints: "
                                "the running test's id with its parameters)" % name)
        if _type(_getattr(_linecache, "cache", None)) is not _dict:
            report_tampered("linecache.cache is not a dict (the graded files' lines pytest puts there stay)")

    def codec_guard(fn, what):
        """`fn` (a `_codecs` function that clears the registry's cache) judged like
        `signal_guard`: called by code the patch brought, critical."""
        def guarded(*args, _fn=fn, _what=what):
            if not busy():
                with Busy():
                    rel = brought_by_patch(past_seal(_frame(1)), None, [])
                if rel is not None:
                    report_tampered("%s calls %s (the codec registry: pytest makes the tests' ids through it)"
                                    % (rel, _what))
            return _fn(*args)
        guarded.__name__ = guarded.__qualname__ = what.rsplit(".", 1)[-1]
        GUARDS[_id(guarded)] = guarded
        return guarded

    # `os.open(name, flags, dir_fd=fd)`: the open event carries `name` alone, relative to a
    # directory the check cannot see; a symbolic link there to the test file was read so
    # (resolved). The guard judges the path the descriptor's directory gives.
    _readlink, _fsdecode_name = os.readlink, os.fsdecode

    def dir_fd_path(path, dir_fd):
        """The path `os.open(path, dir_fd=dir_fd)` opens (`dir_fd` an int: the guard
        passes the same int on), when a graded file may be read."""
        if not GRADED or busy() or _type(dir_fd) is not _int:
            return None
        try:
            return _readlink("/proc/self/fd/%d" % dir_fd) + _sep + _fsdecode_name(path)
        except (OSError, TypeError, ValueError):
            return None

    if CHECKS:
        import posix as _posix
        _os_open = _posix.open

        def open_guard(path, flags, mode=0o777, *, dir_fd=None, _open=_os_open, _full=dir_fd_path,
                       _index=operator.index):
            if dir_fd is not None:
                dir_fd = _index(dir_fd)  # (an int subclass passed the type test before)
            full = _full(path, dir_fd) if dir_fd is not None else None
            if full is not None:
                with Busy():
                    try:
                        graded_open([full], opener=past_seal(_frame(1)))
                    except Exception:
                        pass
            return _open(path, flags, mode, dir_fd=dir_fd)

        open_guard.__name__ = open_guard.__qualname__ = "open"
        sealed_open = seal(open_guard)  # (no closure where others reach it)
        _posix.open = sealed_open
        if os.open is _os_open:
            os.open = sealed_open

        import _imp as _c_imp
        _create_builtin = _c_imp.create_builtin

        def create_builtin_guard(spec, _create=_create_builtin):
            """A second copy of a builtin module (`posix`, `_codecs`: multi-phase init) has
            none of this plugin's guards: made by anything but the import system, critical.
            Library code opened the test file through a fresh `posix.open` that way."""
            if busy():
                return _create(spec)
            with Busy():  # (its own frame look is no finding)
                caller = past_seal(_frame(1))
                # (the import system's own call: `BuiltinImporter.create_module`, through
                # `_call_with_frames_removed`)
                if not (caller is not None and importlib_file(caller.f_code.co_filename)):
                    rel = brought_by_patch(caller, None, [])
                    what = rel or (caller.f_code.co_filename if caller is not None else "?")
                    report_tampered("%s makes a second copy of a builtin module (_imp.create_builtin): it has "
                                    "none of the results plugin's guards" % what)
            return _create(spec)

        create_builtin_guard.__name__ = create_builtin_guard.__qualname__ = "create_builtin"
        _c_imp.create_builtin = seal(create_builtin_guard)  # (no closure where others reach it)

    if CHECKS:
        import _codecs as _c_codecs
        for _name in ("unregister", "_forget_codec"):
            _fn = _getattr(_c_codecs, _name, None)
            if _fn is not None:
                _g = seal(codec_guard(_fn, "codecs." + _name))  # (no closure where others reach it)
                setattr(_c_codecs, _name, _g)
                if _getattr(_codecs_mod, _name, None) is _fn:
                    setattr(_codecs_mod, _name, _g)

    # pytest writes its verbose line (the running test's id, parameters included) to the
    # original stdout through descriptors it keeps (capture's `targetfd_save`): a pipe put
    # under those, relayed by a thread, read the id before the body (library code that kept
    # the bug, resolved). They must stay the files they were when the plugin loaded.
    def fd_identity(fd):
        try:
            st = os.fstat(fd)
        except (OSError, TypeError, ValueError):
            return None
        return (st.st_dev, st.st_ino)

    LOADED_OUT = {1: fd_identity(1), 2: fd_identity(2)}

    def descriptors_tapped():
        capman = None
        config = state["config"]
        if config is not None:
            try:
                capman = config.pluginmanager.getplugin("capturemanager")
            except Exception:
                capman = None
        capturing = _getattr(capman, "_global_capturing", None)
        pairs = []
        for target, name in ((1, "out"), (2, "err")):
            saved = _getattr(_getattr(capturing, name, None), "targetfd_save", None)
            pairs.append((target, saved if _type(saved) is _int else target if capturing is None else None))
        for target, fd in pairs:
            want = LOADED_OUT.get(target)
            if fd is None or want is None:
                continue
            now = fd_identity(fd)
            if now != want:
                report_tampered("the test process's original %s (descriptor %d) is another file than when the "
                                "results plugin loaded (it is where pytest prints the running test's id)"
                                % ("stdout" if target == 1 else "stderr", fd))

    accepted = []  # (mapping, name, value) seen replacing a captured value (reported if not pytest's own)

    cm_names = _tuple(n for n, _ in captured_modules)
    cm_mods = _tuple(m for _, m in captured_modules)
    pm_fast = [None]  # the plugin manager's fingerprint when the full check last found it so

    def same(a, b):
        return _len(a) == _len(b) and _all(_map(_is, a, b))

    def caller_values(caller):
        return _list(_getattr(caller, "__dict__", {}).values())

    def pm_fingerprint(pm, relay):
        """Everything the hook checks below read, as object identities: the hook callers,
        their attributes, their implementations' functions (and how many each has), the
        plugin manager's attributes. Unchanged since a full check: nothing new to find."""
        callers = _tuple(_getattr(relay, "__dict__", {}).values())
        lists = _tuple(_map(hook_impls, callers))
        return (callers, _tuple(_map(_fn_of, _chain(lists))), _tuple(_chain(_map(caller_values, callers))),
                _tuple(_getattr(pm, "__dict__", {}).values()), _tuple(_map(_len, lists)))

    def pm_unchanged(fp):
        last = pm_fast[0]
        return fp is not None and last is not None and same(fp[0], last[0]) and same(fp[1], last[1]) and \
            same(fp[2], last[2]) and same(fp[3], last[3]) and fp[4] == last[4]

    def check_now(item, everything):
        if accepted:  # from now on, compare with what replaced it (a later change is seen again)
            for mapping, name, value in accepted:
                baseline[(_id(mapping), name)] = value
            del accepted[:]
            captured_groups[:] = regroup()
            hot_fast[0] = hot_snapshot()
        clean = False
        if not everything:  # the common case: every hot value is still the same object
            calls, expected = hot_fast[0]
            try:
                clean = _all(_map(_is, _chain(_map(_call, calls)), expected))
            except Exception:  # a name is gone (KeyError): the loop below says which
                clean = False
        for mapping, names, values, labels, hot, getter in (() if clean else captured_groups):
            if not (hot or everything):
                continue
            try:
                if _all(_map(_is, getter(mapping), values)):
                    continue  # the common case, at C speed (map stops at the shorter: a lone name is doubled)
            except Exception:  # a name is gone (KeyError): find which below
                pass
            for label, name, value in _zip(labels, names, values):
                now = mapping.get(name, MISSING)
                if now is value or fixture_set.get((_id(mapping), name), MISSING) is now:
                    continue  # (or what a fixture of test code set there, while it stays)
                # pytest patches some of its own classes (legacypath: Config methods): a
                # function of pytest's own files replacing one of pytest's is not a finding
                own = not label.startswith("builtins.") and _isinstance(now, types.FunctionType) and \
                    real_of(now.__code__.co_filename).startswith(RUNNER_DIRS) and code_verdict(now.__code__) is None
                if not own and not label.startswith("builtins."):
                    own = installed_plugin_wrapper(now, value) or (
                        label == "_pytest.unittest.TestCaseFunction.runtest" and installed_case_runner(now))
                if not own:
                    report_tampered("%s replaced" % label)
                accepted.append((mapping, name, now))
        try:
            clean = _all(_map(_is, _map(sys.modules.get, cm_names), cm_mods))
        except Exception:
            clean = False
        for modname, mod in (() if clean else captured_modules):
            if sys.modules.get(modname) is not mod:
                report_tampered("sys.modules[%r] replaced" % modname)
        pm = state["pm"]
        relay = _getattr(pm, "hook", None)
        try:
            fp = pm_fingerprint(pm, relay) if pm is not None else None
        except Exception:
            fp = None
        if pm is not None and not pm_unchanged(fp):
            callers = _list(_getattr(relay, "__dict__", {}).items())
            for hook_name, caller in callers:
                attrs = dispatch_attrs.get(_id(caller))
                if attrs is None:  # which attributes of this hook caller hold its dispatch function
                    attrs = _tuple(a for a, v in _list(_getattr(caller, "__dict__", {}).items())
                                   if _isinstance(v, (types.FunctionType, types.MethodType)))
                    dispatch_attrs[_id(caller)] = attrs
                    keep.append(caller)
                    if not attrs:
                        dispatch_attrs[_id(caller)] = attrs = ("_hookexec",)
                cdict = _getattr(caller, "__dict__", {})
                for attr in attrs:
                    value = cdict.get(attr)
                    if value is not None and callable_key(value) not in state["hookexec"]:
                        report_tampered("%s.%s replaced" % (hook_name, attr))
                try:
                    impls = hook_impls(caller)
                    seen = _tuple(_map(_id, _map(_fn_of, impls)))
                except Exception:
                    continue
                if impl_seen.get(_id(caller)) == seen:
                    continue  # the same implementations as at the last check, all verified then
                impl_seen[_id(caller)] = seen
                for impl in impls:
                    fn = _getattr(impl, "function", None)
                    if _id(fn) in ok_callables:
                        continue  # verified once: code already loaded does not change
                    why = callable_verdict(fn, _getattr(impl, "plugin", None)) or borrowed_hook(impl, hook_name)
                    if why is not None:
                        report_tampered("hook %s from %s" % (hook_name, why))
                        keep.append(fn)  # its id stays its own (impl_seen compares ids)
                    else:
                        ok_callables[_id(fn)] = fn
            for attr, value in _list(_getattr(pm, "__dict__", {}).items()):
                if _isinstance(value, (types.FunctionType, types.MethodType)) and \
                        callable_key(value) not in state["hookexec"]:
                    report_tampered("plugin manager %s replaced" % attr)
            # remembered only if nothing changed while it was checked (threads)
            pm_fast[0] = fp
            try:
                if not pm_unchanged(pm_fingerprint(pm, relay)):
                    pm_fast[0] = None
            except Exception:
                pm_fast[0] = None
        if item is not None:
            fn = None
            try:
                fn = _getattr(item, "function", None)
            except Exception:
                pass
            code = _getattr(_getattr(fn, "__func__", fn), "__code__", None)
            plain = plain_checked(item, fn, _getattr(item, "module", None), _getattr(item, "originalname", None),
                                  _getattr(item, "cls", None), item.nodeid, _getattr(item, "obj", None))
            wrapped_checked(item, fn, _getattr(item, "module", None), _getattr(item, "originalname", None),
                            _getattr(item, "cls", None), item.nodeid, _getattr(item, "obj", None))
            fixtures_checked(item)
            if fn is not None and _id(code) not in ok_callables:
                why = callable_verdict(fn, _getattr(item, "module", None))
                if why is not None and plain is None and witness_plan(item, fn) is not None:
                    why = None  # a wrapper around the graded function: the witness judges the call
                elif why is not None:
                    report_tampered("test %s: its function: %s" % (item.nodeid, why))
                elif code is not None:
                    ok_callables[_id(code)] = code
            if "runtest" in _getattr(item, "__dict__", {}):
                report_tampered("test %s: runtest replaced on the item" % item.nodeid)
        for what, getter in (("trace", _gettrace), ("profile", _getprofile)):
            fn = getter()
            if fn is not None:
                why = callable_verdict(fn, _getattr(item, "module", None))
                if why is not None:
                    report_tampered("sys.set%s function: %s" % (what, why))

    # ------------------------------------------------------------------ outcomes
    def has_xfail_mark(item):
        try:
            return _any(True for _ in item.iter_markers(name="xfail"))
        except Exception:  # very old pytest
            return item.get_marker("xfail") is not None

    def tb_files(exc):
        tb = _getattr(exc, "tb", None) or _getattr(exc, "_excinfo", (None, None, None))[2]
        files = []
        while tb is not None:
            files.append(_realpath(_abspath(tb.tb_frame.f_code.co_filename)))
            tb = tb.tb_next
        return files

    def outcome_caller(files):
        """The file of the innermost frame outside pytest that led to the outcome
        exception (who called pytest.xfail())."""
        for name in reversed(files):
            if not name.startswith(RUNNER_DIRS):
                return name
        return None

    def rootdir(item):
        return _str(_getattr(item.config, "rootpath", None) or item.config.rootdir)

    def relative(item, path):
        rel = _relpath(path, rootdir(item))
        return path if rel.startswith(".." + _sep) else rel

    def test_code(item, path):
        """True for test code (allowed to call pytest.xfail()): the test's own module, a
        conftest, test modules and anything under a tests/testing directory, and code
        outside the repository (installed test helpers)."""
        rel = _relpath(path, rootdir(item))
        if rel.startswith(".." + _sep):
            return True
        parts = rel.split(_sep)
        name = parts[-1]
        if name == "conftest.py" or name.startswith("test_") or name.endswith("_test.py") or name == "tests.py":
            return True
        return _any(p in ("tests", "test", "testing") for p in parts[:-1])

    def library_frame(item, files):
        """The first frame of an outcome's traceback (outermost first) that is repository
        code other than test code, or None. The innermost caller alone is not enough: a
        standard-library frame (`functools.singledispatch(pytest.xfail)`) or code
        compiled under a test file's name can stand between library code and
        pytest.xfail()."""
        for name in files:
            if not name.startswith(RUNNER_DIRS) and not test_code(item, name):
                return name
        return None

    def status_of(item, call, rep):
        """(status, note) of one phase, from call.excinfo; the report only decides among
        the outcomes the exception allows (xfail, xpass, strict xpass)."""
        when = call.when
        outcome = _getattr(rep, "outcome", None)
        if outcome == "rerun":
            return None, None  # pytest-rerunfailures: the attempt that counts comes later
        wasxfail = _hasattr(rep, "wasxfail")
        exc = call.excinfo
        if exc is None:
            if when != "call":
                if outcome == "failed":
                    return "ERROR", None
                if outcome != "passed":
                    return "ERROR", "report says %s without an exception" % outcome
                return None, None
            if outcome == "failed":
                return "FAILED", None  # e.g. a strict xfail that passed
            if outcome != "passed":
                return "FAILED", "report says %s without an exception" % outcome
            return ("XPASS" if wasxfail else "PASSED"), None
        etype = exc.type
        if _EXIT and _issubclass(etype, _EXIT):
            return "ERROR", None
        if _issubclass(etype, _SKIP) and not (_XFAIL and _issubclass(etype, _XFAIL)):
            if outcome != "skipped":
                return "SKIPPED", "report says %s for a skip" % outcome
            return "SKIPPED", None
        if _XFAIL and _issubclass(etype, _XFAIL):
            if outcome != "skipped" or not wasxfail:
                return "FAILED", "report says %s for an xfail() call" % outcome
            files = tb_files(exc)
            if files and not files[-1].startswith(RUNNER_DIRS):
                return "FAILED", "xfail exception not raised by pytest.xfail() (raised in %s)" % relative(
                    item, files[-1])
            caller = outcome_caller(files)
            if caller is not None and not test_code(item, caller):
                return "FAILED", "xfail() called from library code %s" % relative(item, caller)
            via = library_frame(item, files)
            if via is not None:
                return "FAILED", "xfail() called through library code %s" % relative(item, via)
            return "XFAIL", None
        # a real exception: a failure, or an expected failure of an xfail-marked test
        if outcome == "skipped" and wasxfail and has_xfail_mark(item):
            return "XFAIL", None
        status = "FAILED" if when == "call" else "ERROR"
        if outcome != "failed":
            return status, "report says %s for %s" % (outcome, etype.__name__)
        return status, None

    def report_status(report):
        """The status a report states (for reports made in another process)."""
        outcome = _getattr(report, "outcome", None)
        if outcome == "passed":
            if report.when != "call":
                return None
            return "XPASS" if _hasattr(report, "wasxfail") else "PASSED"
        if outcome == "skipped":
            return "XFAIL" if _hasattr(report, "wasxfail") else "SKIPPED"
        if outcome == "failed":
            return "FAILED" if report.when == "call" else "ERROR"
        return None

    # ------------------------------------------------------------------ the hooks
    # a plain instance (hashable: pluggy keeps plugins in sets), of a class of its own
    plugin = _type("MinisandboxResults", (object,), {"__slots__": ("__dict__", "__weakref__")})()

    def pytest_plugin_registered(plugin, manager):
        """Our own registration (a historic call): keep the plugin manager and what its
        hook callers run through, and leave sys.modules."""
        if plugin is not me or state["pm"] is not None:
            return
        state["pm"] = manager
        for value in _list(_getattr(manager, "__dict__", {}).values()):
            if _isinstance(value, (types.FunctionType, types.MethodType)):
                state["hookexec"].add(callable_key(value))
                keep.append(value)
        for caller in _list(_getattr(_getattr(manager, "hook", None), "__dict__", {}).values()):
            for value in _list(_getattr(caller, "__dict__", {}).values()):
                if _isinstance(value, (types.FunctionType, types.MethodType)):
                    state["hookexec"].add(callable_key(value))
                    keep.append(value)
        for name in _list(sys.modules):
            if sys.modules.get(name) is me:
                del sys.modules[name]

    def pytest_configure(config):
        if state["config"] is None:
            state["config"] = config

    _Function = _getattr(pytest, "Function", None)

    def pytest_pyfunc_call(pyfuncitem):
        """Right before the test function is called, after pytest's own call-phase set-up
        (its PYTEST_CURRENT_TEST variable, log capture), innermost of the wrappers: the
        checks of check_before. Run once the set-up was reported, they were passed by
        library code that replaced `os.environ` with a mapping that makes a helper a no-op
        when pytest sets PYTEST_CURRENT_TEST to "... (call)" and puts it back for
        "(teardown)": host and sandbox, strict and official. A test function that a
        wrapper of the patch's wraps runs under a witness (`arm_witness`)."""
        armed = versions = None
        if pyfuncitem.config is state["config"]:
            check_before(pyfuncitem)
            check_instance(_getattr(pyfuncitem, "instance", None))
            check_fixture_values(pyfuncitem)
            armed = arm_witness(pyfuncitem)
            versions = class_versions(_getattr(pyfuncitem, "cls", None))
        outcome = yield
        written_back(versions, "test %s" % pyfuncitem.nodeid)
        if armed is not None:
            judge_witness(pyfuncitem, armed, _getattr(outcome, "excinfo", None) is None)

    # ------------------------------------------------------------------ decorated tests
    # A library whose decorator wraps test functions (freezegun's `@freeze_time`, which
    # every freezegun task patches) puts code of the patched file between pytest and the
    # test: that wrapper decides the outcome (one that swallowed the exception would pass
    # the test with the bug kept), so it was critical, and every honest fix of such a
    # library was `results-tampered`. Now the wrapper stands when a witness sees the graded
    # function itself run: for the call, the wrapper's closure cell that holds the graded
    # function holds a seal of `witness` instead, which checks the arguments pytest gave,
    # runs the check before the body again (the wrapper ran after it), and records how the
    # function ended. A pass stands only when the function was called and returned each
    # time; else the test is FAILED and the finding critical.
    witness_plans = {}  # id(item) -> (item, plan or None)
    witness_failed = {}  # nodeid -> why the witness refused a pass

    def witness_plan(item, fn):
        """([cells holding the graded function], the graded function) when `fn`, a test's
        function, is a wrapper whose `__wrapped__` chain ends in the graded test file's own
        function for this test and whose closure holds that function; else None."""
        hit = witness_plans.get(_id(item))
        if hit is not None and hit[0] is item:
            return hit[1]
        plan = None
        try:
            plan = find_witness_plan(item, fn)
        except Exception:
            plan = None
        witness_plans[_id(item)] = (item, plan)
        keep.append(item)
        return plan

    def find_witness_plan(item, fn):
        if sys.version_info < (3, 7):
            return None  # a cell's contents are read-only before 3.7: no witness, the wrapper stays critical
        mod = _getattr(item, "module", None)
        real = real_of(_getattr(mod, "__file__", None) or "")
        # a test file of the repository the patch leaves alone (graded, or not: labelling
        # grades no file, and a critical finding there dropped every freezegun task)
        if rel_to_root(real) is None or file_verdict(real) is not None:
            return None
        chain = [_getattr(fn, "__func__", fn)]
        while _len(chain) < 16:
            inner = _getattr(chain[-1], "__wrapped__", None)
            if inner is None:
                break
            chain.append(_getattr(inner, "__func__", inner))
        last = chain[-1]
        code = _getattr(last, "__code__", None)
        if _len(chain) < 2 or _type(last) is not types.FunctionType or _type(code) is not types.CodeType or \
                real_of(code.co_filename) != real or not genuine(code, real):
            return None
        qualname = _getattr(code, "co_qualname", None)
        if qualname is not None and qualname != _getattr(item, "originalname", None) and \
                not qualname.endswith("." + _str(_getattr(item, "originalname", ""))):
            return None  # another definition's code
        cells = []
        for f in chain[:-1]:
            for cell in _getattr(f, "__closure__", None) or ():
                try:
                    if cell.cell_contents is last:
                        cells.append(cell)
                except ValueError:
                    pass
        return (cells, last) if cells else None

    def arg_shape(value, depth=3):
        """What a test's argument holds, to see a wrapper change it in place: the ids of the
        items of a list, tuple, set or dict and of an object's attributes (`depth` levels),
        a bytearray's bytes, else the value's id."""
        t = _type(value)
        if depth and t in (_list, _tuple, _set, frozenset):
            return t, _tuple(arg_shape(e, depth - 1) for e in _list(value)[:1000])
        if depth and t is _dict:
            return t, _tuple((_id(k), arg_shape(v, depth - 1)) for k, v in _list(value.items())[:1000])
        if t is bytearray:
            return t, bytes(value)
        if depth:
            try:
                d = _instance_dict(value, "__dict__")
            except Exception:
                d = None
            if _type(d) is _dict:
                return _id(value), _tuple((k, arg_shape(v, depth - 1)) for k, v in _list(d.items())[:1000])
        return _id(value)

    def same_args(code, args, kwargs, expected):
        """Is every argument pytest passed (`expected`: name -> value) passed on as itself?"""
        positional = code.co_varnames[:code.co_argcount]
        got = _dict(_zip(positional, args))
        got.update(kwargs)
        return _all(name in got and got[name] is value for name, value in expected.items())

    def arm_witness(item):
        """Put a seal of a witness into the cells that hold the graded function (see
        above); returns what judge_witness needs, or None for a test without a plan."""
        hit = witness_plans.get(_id(item))
        plan = hit[1] if hit is not None and hit[0] is item else None
        if plan is None:
            return None
        cells, last = plan
        code = last.__code__
        try:
            expected = _dict((n, item.funcargs[n]) for n in item._fixtureinfo.argnames)
        except Exception:
            expected = None
        seen = {"calls": 0, "raised": 0, "returned": 0, "args": expected is not None, "elsewhere": 0,
                "changed": 0}
        thread = _ident()
        shapes = _dict((n, arg_shape(v)) for n, v in expected.items()) if expected is not None else None

        def witness(*args, **kwargs):
            seen["calls"] += 1
            if _ident() != thread:
                seen["elsewhere"] += 1
            if expected is None or not same_args(code, args, kwargs, expected):
                seen["args"] = False
            elif _any(arg_shape(v) != shapes[n] for n, v in expected.items()):
                seen["changed"] += 1
            check_before(item)
            try:
                got = last(*args, **kwargs)
            except BaseException:
                seen["raised"] += 1
                raise
            seen["returned"] += 1
            return got

        sealed = seal(witness, last)
        for cell in cells:
            cell.cell_contents = sealed
        return cells, last, sealed, seen

    def judge_witness(item, armed, passed):
        """Put the graded function back, and refuse a pass the witness did not see."""
        cells, last, sealed, seen = armed
        for cell in cells:
            cell.cell_contents = last
        GUARDS.pop(_id(sealed), None)
        if not passed:
            return
        why = None
        if not seen["calls"]:
            why = "passed, but the test's own function never ran"
        elif seen["raised"]:
            why = "passed, but the test's own function raised"
        elif seen["elsewhere"]:
            why = "passed, but the test's own function ran on another thread"
        elif seen["returned"] != seen["calls"]:
            why = "passed before the test's own function returned"
        elif not seen["args"]:
            why = "passed, but the test's own function got other arguments than pytest gave"
        elif seen["changed"]:
            why = "passed, but what pytest gave the test's own function was changed before it ran"
        if why is not None:
            witness_failed[item.nodeid] = why
            report_tampered("test %s: its wrapper (code the patch changes) %s" % (item.nodeid, why))

    def test_fixture(fixturedef):
        """Is the fixture's function code of an unchanged test code file of the repository
        (a conftest's, a test module's, a helper's), held by that module's first run?
        (pytest 8.4+ binds a fixture's name to a wrapper, so `code_verdict`, which looks at
        what the module binds, does not find it.)"""
        fn = _getattr(fixturedef, "func", None)
        code = _getattr(_getattr(fn, "__func__", fn), "__code__", None)
        if _type(code) is not types.CodeType or code.co_filename.startswith("<"):
            return False
        got = fixture_verdicts.get(code)
        if got is None:
            real = real_of(code.co_filename)
            rel = rel_to_root(real)
            got = fixture_verdicts[code] = rel is not None and (rel in GRADED or test_support(rel)) and \
                file_verdict(code.co_filename) is None and genuine(code, real)
        return got

    def pytest_fixture_setup(fixturedef, request):
        """What a fixture of the repository's test code sets in builtins during its set-up
        (`mock.patch("builtins.input")`, `monkeypatch.setattr("builtins.open", ...)`) is the
        tests' own double until it changes again (`fixture_set`): the check before the body
        took tldextract's `mocks` fixture (a patched `input`) for tampering, so its labelling
        reference run was `results-tampered`."""
        if _getattr(request, "config", None) is not state["config"] or not test_fixture(fixturedef):
            yield
            return
        names = [n for m, group, _v, _l, _h, _g in captured_groups if m is BUILTINS_DICT for n in group]
        before = [BUILTINS_DICT.get(n, MISSING) for n in names]
        yield
        for name, was in _zip(names, before):
            now = BUILTINS_DICT.get(name, MISSING)
            if now is not was:
                fixture_set[(_id(BUILTINS_DICT), name)] = now

    def pytest_runtest_makereport(item, call):
        result = yield
        if item.config is not state["config"]:
            return  # a nested in-process session (pytester): not ours to report
        try:
            rep = result.get_result()
        except BaseException:
            rep = None
        if CHECKS:
            descriptors_tapped()
        if call.when == "teardown":
            check(item)
        elif call.when == "setup" and _type(item) is not _Function:
            check_before(item)  # a plain test function is checked in pytest_pyfunc_call, later
            case = _getattr(item, "_testcase", None)
            if case is not None:
                unittest_classes_checked("before test %s" % item.nodeid)
                run_versions.clear()  # (one test case at a time)
                run_versions[_id(case)] = (case, class_versions(_type(case)))
            if DOCTESTS:
                check_doctest(item)
        status, note = status_of(item, call, rep)
        if call.when == "call" and status in ("PASSED", "XPASS") and item.nodeid in witness_failed:
            status, note = "FAILED", witness_failed[item.nodeid]
        if call.when == "call" and method_raised:
            case = _getattr(item, "_testcase", None)
            hit = method_raised.pop(_id(case), None)
            if hit is not None and hit[0] is case and hit[1] and status in ("PASSED", "XPASS"):
                status, note = "FAILED", "its test method raised"
                report_tampered("test %s: passed, but its test method raised" % item.nodeid)
        record = {"ev": "phase", "id": item.nodeid, "when": call.when, "status": status,
                  "report": _getattr(rep, "outcome", None)}
        if note:
            record["forged"] = note
        write(record)

    def pytest_runtest_logreport(report):
        """pytest-xdist: tests run in worker processes, which have no channel (the fd
        was taken out of the environment before they started); their reports reach this
        process and are recorded as they state themselves, marked as such."""
        if _getattr(report, "node", None) is None or _getattr(report, "outcome", None) == "rerun":
            return
        write({"ev": "phase", "id": report.nodeid, "when": report.when,
               "status": report_status(report), "report": report.outcome, "worker": True})

    def pytest_collection_modifyitems(session, config, items):
        if config is state["config"]:
            state["collected"] = _len(items)
            forget_graded_lines()
            if CHECKS:
                params_rewritten_check(items)
                arm_setup_witnesses(items)

    def pytest_sessionfinish(session, exitstatus):
        if session.config is not state["config"]:
            return
        check()
        write({"ev": "end", "exitstatus": _int(exitstatus), "collected": state["collected"],
               "tampered": _sorted(state["reported"])})

    keep = []  # objects whose ids are in state["hookexec"] (ids stay unique while alive)
    hello = {"ev": "hello", "pid": os.getpid(), "python": sys.version.split()[0], "runner": runner,
             "checks": {"captured": _len(captured), "graded_files": _len(GRADED), "audit": add_hook is not None}}
    if UNITTEST or SYMPY:
        import atexit

        def finish():
            """The end of the process (a runner that calls os._exit leaves no end record)."""
            check()
            write({"ev": "end", "collected": state["collected"], "tampered": _sorted(state["reported"])})

        atexit.register(finish)
        unittest_classes_checked(None)  # (after the plugin's own wrappers of unittest's classes)
        write(hello)
        return None
    # The hooks, sealed (see `seal`): pluggy passes a hook the arguments its signature
    # names, so each seal is written out; its implementation is a keyword default, which
    # pluggy leaves alone
    def sealed_plugin_registered(plugin, manager, *, _hook=pytest_plugin_registered):
        return _hook(plugin, manager)

    def sealed_configure(config, *, _hook=pytest_configure):
        return _hook(config)

    def sealed_makereport(item, call, *, _hook=pytest_runtest_makereport):
        return (yield from _hook(item, call))

    def sealed_logreport(report, *, _hook=pytest_runtest_logreport):
        return _hook(report)

    def sealed_pyfunc_call(pyfuncitem, *, _hook=pytest_pyfunc_call):
        return (yield from _hook(pyfuncitem))

    def sealed_fixture_setup(fixturedef, request, *, _hook=pytest_fixture_setup):
        return (yield from _hook(fixturedef, request))

    def sealed_modifyitems(session, config, items, *, _hook=pytest_collection_modifyitems):
        return _hook(session, config, items)

    def sealed_sessionfinish(session, exitstatus, *, _hook=pytest_sessionfinish):
        return _hook(session, exitstatus)

    for g in (sealed_plugin_registered, sealed_configure, sealed_makereport, sealed_logreport,
              sealed_pyfunc_call, sealed_fixture_setup, sealed_modifyitems, sealed_sessionfinish):
        GUARDS[_id(g)] = g
    hookimpl = pytest.hookimpl
    plugin.pytest_plugin_registered = sealed_plugin_registered
    plugin.pytest_configure = hookimpl(tryfirst=True)(sealed_configure)
    plugin.pytest_runtest_makereport = hookimpl(hookwrapper=True, tryfirst=True)(sealed_makereport)
    plugin.pytest_runtest_logreport = hookimpl(tryfirst=True)(sealed_logreport)
    plugin.pytest_pyfunc_call = hookimpl(hookwrapper=True, trylast=True)(sealed_pyfunc_call)
    plugin.pytest_fixture_setup = hookimpl(hookwrapper=True)(sealed_fixture_setup)
    plugin.pytest_collection_modifyitems = hookimpl(trylast=True)(sealed_modifyitems)
    plugin.pytest_sessionfinish = hookimpl(trylast=True)(sealed_sessionfinish)
    me = plugin
    hello["pytest"] = _getattr(pytest, "__version__", "?")
    unittest_classes_checked(None)  # (after the plugin's own wrappers of unittest's classes)
    write(hello)
    if CHECKS:
        check_preloaded()
    return plugin


def _chain_sitecustomize():
    """Loaded as `sitecustomize` (SymPy's runner: results.SYMPY_STARTUP), run the
    environment's own `sitecustomize`, which this module shadows, as `site` would have."""
    import importlib.machinery
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))
    path = [p for p in sys.path if not p or os.path.abspath(p) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is None or spec.loader is None:
        return
    mod = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = mod
    spec.loader.exec_module(mod)


def _bootstrap(opened):
    """What pytest's `-p` import finds under this module's name when the module was
    imported at interpreter start-up: an object whose one hook, when pytest registers it,
    builds the plugin (`_install`) with the channel `opened` then ((write, manifest)), or
    opened now (None: a Python wrapper ran pytest in its own process) and registers it.
    Code that runs before the `-p` import (a repository pytest imports first) and puts
    another module under this name gets no channel: the controller accepted one
    connection, this one, and the socket's variable is gone; and when pytest never
    registers this object, an exit handler writes that as critical."""
    done = [False]
    boot = type("MinisandboxResultsStartUp", (object,), {
        "__slots__": ("__dict__", "__weakref__"),
        "__doc__": "minisandbox's results plugin, opened at start-up (PYTEST_DONT_REWRITE: already imported)",
    })()
    boot.StartUp = StartUp  # the warnings module reads the -W category from what the import returns
    boot.__loader__ = None

    def pytest_plugin_registered(plugin, manager):
        nonlocal opened
        if plugin is not boot or done[0]:
            return
        done[0] = True
        for name in list(sys.modules):
            if sys.modules.get(name) is boot:
                del sys.modules[name]
        if opened is None:
            os.environ.pop(RUNNER_VAR, None)
            now = _open_channel()
            if now is None:
                return
            write, manifest = _writer(now[0], now[2]), now[3]
        else:
            _restore_env(("PYTEST_ADDOPTS",))  # pytest has read its options
            write, manifest = opened
            opened = None  # (the exit handler's check needs only `done`)
        manager.register(_install(write, manifest, sealed=(boot.pytest_plugin_registered,)), __name__ + ".checks")

    # boot stays registered: its hook is a seal (with the hook's own argument names, which
    # pluggy reads), or its cells would hand out the channel's writer
    def sealed_plugin_registered(plugin, manager, *, _hook=pytest_plugin_registered):
        return _hook(plugin, manager)

    sealed_plugin_registered.__name__ = "pytest_plugin_registered"
    boot.pytest_plugin_registered = sealed_plugin_registered
    if opened is not None:
        import atexit

        def never_registered():
            if not done[0]:
                opened[0]({"ev": "tampered", "critical": True, "what": (
                    "pytest never registered the results plugin opened at start-up (something else was "
                    "imported under its name)")})

        atexit.register(never_registered)
    return boot


def _main():
    runner = os.environ.get(RUNNER_VAR) or "pytest"
    if runner == "pytest" and _drop_warnoption():
        # imported at start-up for a pytest run (results.UNITTEST_WARNOPTION): before pytest
        # and the repository; the channel is opened now only when pytest is the main program
        if _main_is_pytest():
            os.environ.pop(RUNNER_VAR, None)
            opened = _open_channel(("PYTHONPATH", "PYTHONWARNINGS"))
            if opened is None:
                _restore_env(("PYTEST_ADDOPTS",))  # no channel: pytest need not import this again
                return
            sys.modules[__name__] = _bootstrap((_writer(opened[0], opened[2]), opened[3]))
            return
        if os.environ.get(SOCK_VAR):  # else no channel to open: the module stays as it is (reprobe_main)
            sys.modules[__name__] = _bootstrap(None)  # environment left as it is, for the pytest it runs
        return
    os.environ.pop(RUNNER_VAR, None)
    opened = _open_channel()
    if opened is None:
        return
    fd, _nonce, key, manifest = opened
    plugin = _install(_writer(fd, key), manifest, runner=runner)
    if plugin is None:
        return  # unittest, sympy: this module stays importable (the warnings option names StartUp)
    # pytest takes the plugin from sys.modules after the import; it leaves again once
    # registered (pytest_plugin_registered)
    sys.modules[__name__] = plugin


_main()
del _main
if __name__ == "sitecustomize":
    _chain_sitecustomize()
