"""The graded state: which tests are marked xfail, from the graded-state sources only."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import textwrap

import pytest

from minisandbox.grading.evalscript import EvalScript
from minisandbox.grading.gradedstate import GradedState, graded_state, scan_marks
from minisandbox.grading.grading import make_report
from minisandbox.grading.results import KEY_BYTES, ResultsChannel

SOURCE = textwrap.dedent(
    """\
    import sys
    import pytest

    known = pytest.mark.xfail(reason="known")
    CASES = [1, pytest.param(2, marks=pytest.mark.xfail), 3]


    def test_plain():
        assert True


    @pytest.mark.xfail(sys.platform == "win32", reason="only there")
    def test_conditional():
        pass


    @known
    def test_alias():
        pass


    @pytest.mark.parametrize("x", [1, pytest.param(2, marks=[pytest.mark.xfail(strict=True)])])
    def test_param(x):
        pass


    @pytest.mark.parametrize("x", CASES)
    def test_param_list(x):
        pass


    def test_imperative():
        if sys.version_info < (3,):
            pytest.xfail("old python")


    class TestGroup:
        pytestmark = [pytest.mark.xfail]

        def test_in_group(self):
            pass


    class TestOther:
        def test_not_marked(self):
            pass

        @pytest.mark.xfail
        def test_marked(self):
            pass


    class Cases(unittest.TestCase):
        @unittest.expectedFailure
        def test_expected(self):
            pass
    """
)


def test_marks_are_read_from_the_source():
    m = scan_marks(SOURCE)
    assert not m.module
    marked = {".".join(q) for q in m.marked}
    assert marked == {
        "test_conditional",
        "test_alias",
        "test_param",
        "test_param_list",
        "test_imperative",
        "TestGroup",
        "TestOther.test_marked",
        "Cases.test_expected",
    }
    assert m.function_marked(("TestGroup", "test_in_group"))
    assert not m.function_marked(("TestOther", "test_not_marked"))
    assert not m.function_marked(("test_plain",))
    assert scan_marks("import pytest\npytestmark = pytest.mark.xfail\ndef test_a(): pass\n").module
    assert not scan_marks("this is not python(").marked


#: cloudpickle's and typeguard's honest XFAILs (found on their real suites)
INHERITED = textwrap.dedent(
    """    import pytest

    from elsewhere import ImportedBase


    class TestBase:
        def test_known_issue(self):
            pytest.xfail("known issue")

        def test_fine(self):
            pass


    class TestDerived(TestBase):
        pass


    class TestGrandchild(TestDerived):
        def test_fine(self):
            pass


    class TestFromElsewhere(ImportedBase):
        pass


    class TestParams:
        xfail_known = pytest.mark.xfail(reason="known", strict=True)

        @pytest.mark.parametrize("x", [pytest.param(1), pytest.param(2, marks=xfail_known)])
        def test_param(self, x):
            pass

        def test_unrelated(self):
            pass
    """
)


def test_inherited_tests_and_class_level_mark_aliases_are_marked():
    m = scan_marks(INHERITED)
    assert m.function_marked(("TestDerived", "test_known_issue"))  # inherited from a base of the module
    assert m.function_marked(("TestGrandchild", "test_known_issue"))
    assert not m.function_marked(("TestDerived", "test_fine"))
    assert not m.function_marked(("TestGrandchild", "test_fine"))  # its own definition decides
    assert m.function_marked(("TestFromElsewhere", "test_known_issue"))  # a base elsewhere: any definition of the name
    assert not m.function_marked(("TestFromElsewhere", "test_other"))
    assert m.function_marked(("TestParams", "test_param"))
    assert not m.function_marked(("TestParams", "test_unrelated"))


def test_xfail_marked_by_id_kind(tmp_path):
    files = {
        "tests/test_m.py": SOURCE.encode(),
        "tests/admin/tests.py": b"import unittest\nclass AdminTests(unittest.TestCase):\n"
        b"    @unittest.expectedFailure\n    def test_e(self): pass\n"
        b"    def test_f(self): pass\n",
    }
    st = GradedState(files)
    assert st.xfail_marked("tests/test_m.py::test_param[2]")
    assert st.xfail_marked("tests/test_m.py::TestGroup::test_in_group")
    assert not st.xfail_marked("tests/test_m.py::TestOther::test_not_marked")
    assert not st.xfail_marked("tests/test_m.py::test_plain")
    assert not st.xfail_marked("tests/elsewhere.py::test_alias")  # not a graded file
    assert st.xfail_marked("test_e (admin.tests.AdminTests)")  # Django's runner
    assert st.xfail_marked("test_e (admin.tests.AdminTests.test_e)")  # ... on Python 3.11+
    assert not st.xfail_marked("test_f (admin.tests.AdminTests)")
    assert st.xfail_marked("test_alias")  # sympy's runner names the function only
    assert not st.xfail_marked("test_plain")


def test_a_conftest_that_adds_xfail_marks_counts_for_its_directory():
    st = GradedState(
        {
            "tests/conftest.py": b"def pytest_collection_modifyitems(items):\n    items[0].add_marker('xfail')\n",
            "tests/test_a.py": b"def test_a(): pass\n",
            "other/test_b.py": b"def test_b(): pass\n",
        }
    )
    assert st.xfail_marked("tests/test_a.py::test_a")
    assert not st.xfail_marked("other/test_b.py::test_b")


def test_graded_state_applies_the_test_patch_and_takes_every_conftest(tmp_path):
    ref = tmp_path / "ref"
    (ref / "tests" / "sub").mkdir(parents=True)
    (ref / "tests" / "test_a.py").write_text("def test_a():\n    pass\n")
    (ref / "tests" / "sub" / "conftest.py").write_text("X = 1\n")
    (ref / "tests" / "test_other.py").write_text("def test_o(): pass\n")
    test_patch = (
        "diff --git a/tests/test_a.py b/tests/test_a.py\n--- a/tests/test_a.py\n+++ b/tests/test_a.py\n"
        "@@ -1,2 +1,4 @@\n+import pytest\n+@pytest.mark.xfail\n def test_a():\n     pass\n"
    )
    script = EvalScript(
        test_cmd="pytest",
        timeout=10,
        patch="diff --git a/lib.py b/lib.py\n",
        reference_files={"tests/test_a.py": (ref / "tests" / "test_a.py").read_bytes()},
        test_patch=test_patch,
    )
    st = graded_state(script, ref, ["tests/test_a.py::test_a", "tests/test_other.py::test_o"])
    assert st.files["tests/test_a.py"].startswith(b"import pytest\n@pytest.mark.xfail")
    assert st.xfail_marked("tests/test_a.py::test_a")  # marked by the test patch
    assert set(st.files) == {"tests/test_a.py", "tests/test_other.py", "tests/sub/conftest.py"}
    man = st.manifest("/testbed")
    assert man["root"] == "/testbed" and man["patched"] == ["lib.py"]
    assert man["files"]["tests/sub/conftest.py"] == hashlib.sha256(b"X = 1\n").hexdigest()


def test_the_manifest_follows_the_nonce_on_the_results_socket():
    """The first connection gets the nonce and the manifest; the socket is then gone, so
    no later process (repository code, a nested pytest) can connect."""
    import socket

    man = {"root": "/testbed", "files": {"t.py": "0" * 64}, "patched": ["lib.py"]}
    with ResultsChannel(man) as ch:
        theirs = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        theirs.settimeout(5)
        theirs.connect(ch.socket_path())
        data = b""
        while data.count(b"\n") < 1 or not data[KEY_BYTES + data.index(b"\n") + 1 :].endswith(b"\n"):
            data += theirs.recv(1 << 16)
        late = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        with pytest.raises(OSError):
            late.connect(ch.socket_path())
        late.close()
        nonce, rest = data.split(b"\n", 1)
        key, line = rest[:KEY_BYTES], rest[KEY_BYTES:]
        assert nonce.decode() == ch.nonce and json.loads(line) == man
        nonce = nonce.decode()
        body = json.dumps({"ev": "hello", "p": 7, "q": 0}).encode()
        theirs.sendall(hmac.new(key, body, hashlib.sha256).hexdigest().encode() + b" " + body + b"\n")
        theirs.close()
        assert [json.loads(ln) for ln in ch.collect().splitlines()] == [{"ev": "hello", "p": 7, "q": 0, "n": nonce}]
    assert not os.path.exists(ch.dir)


def test_channel_records_that_do_not_verify_are_critical():
    """What the controller accepts from the plugin (results.verify_records): each record
    authenticated with the run's key and numbered per process. A line changed in transit,
    one without the key, and a count that skips (a record dropped) each add a critical
    finding; a fork's records may start at its parent's count; a last line cut off
    mid-write is dropped, and its test, with no teardown record, fails."""
    from minisandbox.grading.results import parse_channel, verify_records

    key = b"k" * KEY_BYTES

    def rec(**fields):
        body = json.dumps(fields, sort_keys=True).encode()
        return hmac.new(key, body, hashlib.sha256).hexdigest().encode() + b" " + body + b"\n"

    hello = rec(ev="hello", p=1, q=0)
    setup = rec(ev="phase", id="t.py::a", when="setup", status="PASSED", p=1, q=1)
    call = rec(ev="phase", id="t.py::a", when="call", status="FAILED", p=1, q=2)
    down = rec(ev="phase", id="t.py::a", when="teardown", status="PASSED", p=1, q=3)
    fork = rec(ev="phase", id="t.py::b", when="teardown", status="PASSED", p=9, q=2)
    honest = parse_channel(verify_records(hello + setup + call + down + fork, key, "N"), "N")
    assert honest.present and not honest.critical and honest.statuses["t.py::a"] == "FAILED"
    for forged in (
        hello + setup + call.replace(b'"FAILED"', b'"PASSED"') + down,  # rewritten in transit
        hello + setup + b"0" * 64 + call[64:] + down,  # a MAC made without the key
        hello + setup + down,  # the call's record dropped
        hello + setup + call + call + down,  # replayed
        setup + call + down,  # the first process's count does not start at 0
    ):
        ch = parse_channel(verify_records(forged, key, "N"), "N")
        assert ch.critical and ch.critical[0].startswith("results channel altered"), forged
    cut = parse_channel(verify_records(hello + setup + call[:-1], key, "N"), "N")
    assert not cut.critical and cut.statuses == {"t.py::a": "FAILED"} and cut.unfinished == ["t.py::a"]


LOG = ">>>>> Applied Patch N\n>>>>> Start Test Output N\n{}\n>>>>> End Test Output N\n>>>>> Test Exit Code 0 N\n"
PATCH = "diff --git a/x.py b/x.py\n--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a\n+b\n"


@pytest.mark.parametrize("mode", ["strict", "official"])
def test_xfail_counts_only_when_marked_at_the_graded_state(mode):
    log = LOG.format("t.py::test_a XFAIL\nt.py::test_b PASSED\nXFAIL t.py::test_a\nPASSED t.py::test_b")

    def rep(marked):
        return make_report(
            "i",
            PATCH,
            log,
            fail_to_pass=["t.py::test_a"],
            pass_to_pass=["t.py::test_b"],
            log_parser="pytest",
            nonce="N",
            grading=mode,
            xfail_marked=marked,
        )["i"]

    r = rep(None)
    assert not r["resolved"] and r["reason"] == "tests-failed"
    assert r["tests_status"]["FAIL_TO_PASS"]["failure"] == ["t.py::test_a"]
    assert "xfail: t.py::test_a: reported XFAIL but not marked xfail at the graded state" in r["suspicious"]
    assert not rep(lambda t: False)["resolved"]
    assert rep(lambda t: t == "t.py::test_a")["resolved"]
    xpass = LOG.format("t.py::test_a XPASS\nt.py::test_b PASSED\nXPASS t.py::test_a\nPASSED t.py::test_b")
    assert not make_report(
        "i",
        PATCH,
        xpass,
        fail_to_pass=["t.py::test_a"],
        pass_to_pass=["t.py::test_b"],
        log_parser="pytest",
        nonce="N",
        grading=mode,
        xfail_marked=lambda t: True,
    )["i"]["resolved"]


@pytest.mark.parametrize("mode", ["strict", "official"])
def test_a_critical_channel_finding_is_never_resolved(mode):
    log = LOG.format("t.py::test_a PASSED\nPASSED t.py::test_a")
    lines = [
        {"ev": "hello"},
        {"ev": "phase", "id": "t.py::test_a", "when": "call", "status": "PASSED"},
        {"ev": "phase", "id": "t.py::test_a", "when": "teardown", "status": "PASSED"},
        {"ev": "tampered", "what": "builtins.AssertionError replaced", "critical": True},
        {"ev": "end", "exitstatus": 0, "collected": 1},
    ]
    text = "\n".join(json.dumps({**rec, "n": "K"}) for rec in lines)
    r = make_report(
        "i",
        PATCH,
        log,
        fail_to_pass=["t.py::test_a"],
        pass_to_pass=[],
        log_parser="pytest",
        nonce="N",
        grading=mode,
        results=text,
        results_nonce="K",
    )["i"]
    assert not r["resolved"] and r["reason"] == "results-tampered"
    assert r["results_channel"]["critical"] == ["builtins.AssertionError replaced"]
    assert "runtime: tampered: builtins.AssertionError replaced" in r["suspicious"]
    clean = "\n".join(json.dumps({**rec, "n": "K"}) for rec in lines if rec["ev"] != "tampered")
    assert make_report(
        "i",
        PATCH,
        log,
        fail_to_pass=["t.py::test_a"],
        pass_to_pass=[],
        log_parser="pytest",
        nonce="N",
        grading=mode,
        results=clean,
        results_nonce="K",
    )["i"]["resolved"]


def test_the_manifest_names_the_patched_files_that_look_into_the_program_at_the_graded_state(tmp_path):
    """The results plugin's frame rule and its tracer and heap events are critical only for
    files whose snapshot copy does none of it: the manifest says which patched files do
    (and nothing without a snapshot, which turns the frame rule off)."""
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "log.py").write_text("import sys\n\n\ndef caller():\n    return sys._getframe(1)\n")
    (tmp_path / "pkg" / "tb.py").write_text("def first(e):\n    return e.__traceback__.tb_frame\n")
    (tmp_path / "pkg" / "snoop.py").write_text("import sys\n\n\ndef on(t):\n    sys.settrace(t)\n")
    (tmp_path / "pkg" / "who.py").write_text(
        "from inspect import signature, stack\n\n\ndef who():\n    return stack()\n"
    )
    (tmp_path / "pkg" / "alarm.py").write_text("import signal\n\n\ndef arm(h):\n    signal.signal(signal.SIGALRM, h)\n")
    (tmp_path / "pkg" / "calc.py").write_text("def add(a, b):\n    return a + b  # no stack here\n")
    patched = ["pkg/log.py", "pkg/tb.py", "pkg/snoop.py", "pkg/who.py", "pkg/alarm.py", "pkg/calc.py", "pkg/new.py"]
    st = GradedState({}, tmp_path, patched)
    want = ["pkg/log.py", "pkg/tb.py", "pkg/snoop.py", "pkg/who.py", "pkg/alarm.py"]
    assert st.manifest("/testbed")["introspects"] == want
    assert "introspects" not in GradedState({}, None, patched).manifest("/testbed")


def test_the_manifest_names_the_patched_files_that_work_with_git_at_the_graded_state(tmp_path):
    """The repository's `.git` holds every test file's content: the results plugin's git
    rule is critical only for patched files whose snapshot copy never works with git (a
    library that runs git or reads `.git` keeps doing so), and is off without a snapshot."""
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "vcs.py").write_text(
        'import subprocess\n\n\ndef head():\n    return subprocess.run(["git", "rev-parse"])\n'
    )
    (tmp_path / "pkg" / "repo.py").write_text(
        'import os\n\n\ndef objects(root):\n    return os.path.join(root, ".git")\n'
    )
    (tmp_path / "pkg" / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    patched = ["pkg/vcs.py", "pkg/repo.py", "pkg/calc.py", "pkg/new.py"]
    assert GradedState({}, tmp_path, patched).manifest("/testbed")["git_readers"] == ["pkg/vcs.py", "pkg/repo.py"]
    assert "git_readers" not in GradedState({}, None, patched).manifest("/testbed")


def test_the_manifest_names_the_patched_files_that_start_processes_at_the_graded_state(tmp_path):
    """What a process reads, no check of the test process sees: the results plugin's spawn
    rule is critical only for patched files whose snapshot copy starts no process (a CLI
    wrapper keeps running its commands), and is off without a snapshot. Words that only
    look alike (an inflection table's `sh` suffix) name no spawner."""
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "cli.py").write_text("import subprocess\n\n\ndef run(cmd):\n    return subprocess.run(cmd)\n")
    (tmp_path / "pkg" / "shell.py").write_text("import os\n\n\ndef run(cmd):\n    return os.system(cmd)\n")
    (tmp_path / "pkg" / "words.py").write_text('PLURALS = [(r"(x|ch|ss|sh)$", r"\\1es")]\n')
    patched = ["pkg/cli.py", "pkg/shell.py", "pkg/words.py", "pkg/new.py"]
    assert GradedState({}, tmp_path, patched).manifest("/testbed")["spawners"] == ["pkg/cli.py", "pkg/shell.py"]
    assert "spawners" not in GradedState({}, None, patched).manifest("/testbed")
