"""minisandbox.sandbox.init_program: which `bash -c` commands the command spawner may exec
without bash (pure functions; the end-to-end behaviour is in test_sandbox.py)."""

from __future__ import annotations

import pytest

from minisandbox.sandbox.init_program import _plain_words

ENV = {"PATH": "/usr/bin:/bin", "HOME": "/root", "LANG": "C.UTF-8"}


@pytest.mark.parametrize(
    ("command", "words"),
    [
        ("ls -la src", ["ls", "-la", "src"]),
        ("  git\tstatus --short  ", ["git", "status", "--short"]),
        (
            "python -m pytest tests/a.py::test_x -k a,b -x",
            ["python", "-m", "pytest", "tests/a.py::test_x", "-k", "a,b", "-x"],
        ),
        ("env A=1 printenv A", ["env", "A=1", "printenv", "A"]),
        ("/usr/bin/env", ["/usr/bin/env"]),
        ("true", ["true"]),
        ("false", ["false"]),
    ],
)
def test_plain_commands_are_their_words(command, words):
    assert _plain_words(["bash", "-c", command], ENV) == words


@pytest.mark.parametrize(
    "command",
    [
        "",
        "   ",
        "echo $HOME",  # expansion
        "ls *.py",  # glob
        "ls ~",  # tilde
        "cd /tmp && ls",  # operator
        "ls; ls",
        "ls\nls",  # a newline separates commands
        "ls > out",  # redirection
        "echo 'a b'",  # quoting
        'echo "a"',
        "echo a\\ b",
        "ls # comment",
        "ls {a,b}",  # brace expansion
        "ls | wc",
        "sleep 1 &",
        "A=1 env",  # an assignment
        "%1",  # a job
        "exit 3",  # builtins and reserved words
        "cd /tmp",
        "echo hi",
        "pwd",
        "test -e x",
        "source x",
        ". x",
        "time ls",
        "true --version",  # the builtin, not the program
        "false 1",
        "exec ls",
        "ls\u00a0x",  # not a blank for bash
        "caf\u00e9",
    ],
)
def test_anything_bash_would_treat_specially_stays_with_bash(command):
    assert _plain_words(["bash", "-c", command], ENV) is None


@pytest.mark.parametrize(
    "env",
    [
        {"HOME": "/root"},  # no PATH: bash's default search path is not ours
        {**ENV, "BASH_ENV": "/etc/profile"},  # a start-up file
        {**ENV, "BASH_FUNC_ls%%": "() { echo no; }"},  # an exported function
        {**ENV, "BASHOPTS": "extglob"},
        {**ENV, "SHELLOPTS": "xtrace"},
        {**ENV, "ENV": "/x"},
        {**ENV, "POSIXLY_CORRECT": "1"},
        {**ENV, "EXECIGNORE": "*"},
        {**ENV, "PWD": "/x"},  # what bash rewrites
        {**ENV, "OLDPWD": "/x"},
        {**ENV, "SHLVL": "3"},
        {**ENV, "_": "/x"},
    ],
)
def test_an_environment_that_changes_bash_keeps_bash(env):
    assert _plain_words(["bash", "-c", "ls -la"], env) is None


def test_only_a_bash_dash_c_argv_qualifies():
    assert _plain_words(["sh", "-c", "ls"], ENV) is None
    assert _plain_words(["bash", "-c", "ls", "name"], ENV) is None
    assert _plain_words(["bash", "-e", "ls"], ENV) is None


@pytest.mark.parametrize("close_range", [True, False])
def test_close_all_but_leaves_exactly_the_kept_descriptors(close_range):
    """The command spawner drops init's descriptors with `_close_all_but` (one close_range
    per gap, or a listing of /proc/self/fd where the kernel has no close_range): in a fork,
    every descriptor but the kept ones (including those in the gaps between them and above
    the highest) is closed."""
    import os

    from minisandbox.sandbox import init_program
    from minisandbox.sandbox.init_program import _close_all_but

    if close_range and not init_program._has_close_range():
        pytest.skip("this kernel has no close_range")

    opened = [os.open(os.devnull, os.O_RDONLY) for _ in range(8)]
    high = os.dup2(opened[0], 300)
    keep = {0, 1, 2, opened[2], opened[5]}
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            init_program._HAS_CLOSE_RANGE = close_range
            _close_all_but(keep | {w})
            left = sorted(int(name) for name in os.listdir("/proc/self/fd"))
            os.write(w, " ".join(map(str, left)).encode())
        finally:
            os._exit(0)
    os.close(w)
    os.waitpid(pid, 0)
    left = [int(x) for x in os.read(r, 4096).split()]
    os.close(r)
    for fd in [*opened, high]:
        os.close(fd)
    # the only other descriptor is the one listdir itself had open: the lowest free one
    listing = min(fd for fd in range(1024) if fd not in keep | {w})
    assert set(left) == keep | {w, listing}


def test_set_handler_takes_the_signal_modules_handlers_and_callables():
    """`_set_handler` (the forked processes' `signal.signal` without enum conversions)
    accepts what `signal.signal` does: a callable, and the `signal` module's SIG_DFL and
    SIG_IGN (enum members, which `_signal.signal` alone refuses)."""
    import signal

    from minisandbox.sandbox.init_program import _set_handler

    before = signal.getsignal(signal.SIGUSR1)
    try:

        def handler(*_args):
            return None

        _set_handler(signal.SIGUSR1, handler)
        assert signal.getsignal(signal.SIGUSR1) is handler
        _set_handler(signal.SIGUSR1, signal.SIG_IGN)
        assert signal.getsignal(signal.SIGUSR1) == signal.SIG_IGN
        _set_handler(signal.SIGUSR1, signal.SIG_DFL)
        assert signal.getsignal(signal.SIGUSR1) == signal.SIG_DFL
    finally:
        signal.signal(signal.SIGUSR1, before)
