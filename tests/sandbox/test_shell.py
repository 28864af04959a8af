"""minisandbox.sandbox.shell: persistent bash sessions inside a real sandbox (as root)."""

from __future__ import annotations

import threading
import time

import pytest

from minisandbox.sandbox.sandbox import Layer, Sandbox
from minisandbox.sandbox.shell import SessionError, session

pytestmark = pytest.mark.root


@pytest.fixture
def sb(as_root, tmp_path):
    layer = tmp_path / "repo"
    (layer / "sub").mkdir(parents=True)
    with Sandbox([Layer(str(layer), "/testbed")]) as box:
        box.mark_start()
        yield box


def test_cwd_and_env_persist(sb):
    s = session(sb)
    assert s.run("cd sub && export FOO=bar && x=local").returncode == 0
    res = s.run("pwd; echo $FOO $x")
    assert res.output == "/testbed/sub\nbar local\n" and res.returncode == 0
    assert s.run("false").returncode == 1
    assert s.run("printf 'no newline'").output == "no newline"
    assert s.run("echo a; echo b >&2").output == "a\nb\n"


def test_multiline_heredoc_and_syntax_error(sb):
    s = session(sb)
    res = s.run("cat > f.txt <<'EOF'\nline $HOME\nEOF\nfor i in 1 2; do\n  echo $i\ndone\ncat f.txt")
    assert res.output == "1\n2\nline $HOME\n"
    bad = s.run("if then (")
    assert bad.returncode == 2 and "syntax error" in bad.output
    assert s.run("echo alive").output == "alive\n"


def test_stdin_reading_command_does_not_eat_the_session(sb):
    s = session(sb)
    res = s.run("cat; read x; echo got=$x")
    assert res.output == "got=\n"
    assert s.run("echo next").output == "next\n"


def test_timeout_interrupts_but_keeps_state(sb):
    s = session(sb)
    s.run("export KEEP=1; cd /tmp")
    start = time.monotonic()
    res = s.run("sleep 30", timeout=0.5)
    assert res.timed_out and not res.restarted
    assert time.monotonic() - start < 5
    assert s.run("echo $KEEP; pwd").output == "1\n/tmp\n"


def test_busy_loop_in_bash_restarts_session(sb):
    s = session(sb)
    s.run("export GONE=1")
    res = s.run("while :; do :; done", timeout=0.5)
    assert res.timed_out and res.restarted
    assert s.run("echo ${GONE:-unset}").output == "unset\n"


def test_interrupt_from_another_thread(sb):
    s = session(sb)
    timer = threading.Timer(0.5, s.interrupt)
    timer.start()
    start = time.monotonic()
    res = s.run("sleep 30; echo after")
    timer2 = threading.Timer(0.5, s.interrupt)
    timer2.start()
    res2 = s.run("sleep 30 || echo interrupted=$?")
    assert time.monotonic() - start < 10
    # like Ctrl-C on one command of a script: the command dies, bash carries on
    assert res.output == "after\n" and res2.output == "interrupted=130\n"
    assert s.run("echo ok").output == "ok\n"


def test_named_sessions_are_independent(sb):
    a, b = session(sb, "a"), session(sb, "b")
    a.run("cd /tmp; export WHO=a")
    b.run("export WHO=b")
    assert a.run("echo $WHO; pwd").output == "a\n/tmp\n"
    assert b.run("echo $WHO; pwd").output == "b\n/testbed\n"
    assert sb.sessions == ["a", "b"]
    sb.close_session("a")
    assert sb.sessions == ["b"]
    assert b.run("echo still").output == "still\n"


def test_exit_ends_session(sb):
    s = session(sb, "e")
    res = s.run("exit 4")
    assert res.returncode == 4
    with pytest.raises(SessionError, match="has exited"):
        s.run("echo x")
    assert session(sb, "e").run("echo fresh").output == "fresh\n"


def test_large_output(sb):
    res = session(sb).run("seq 1 200000")
    lines = res.output.splitlines()
    assert len(lines) == 200000 and lines[-1] == "200000"
