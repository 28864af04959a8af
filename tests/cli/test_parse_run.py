"""`run`'s parser without argparse (`minisandbox.cli._parse_common`, `sandboxcmds.parse_run`):
wherever it answers, its namespace is the argparse parser's; everything else (help, errors,
abbreviations, unusual forms) goes to argparse, whose messages the user then sees."""

from __future__ import annotations

import pytest

from minisandbox.cli import _parse_common, build_parser, main, sandboxcmds

#: Forms the common parser reads: each must give argparse's namespace exactly.
READ = [
    ["run", "TASK", "--", "true"],
    ["run", "TASK", "--", "echo", "-n", "--", "x", "-h", "--store"],
    ["run", "TASK", "true"],
    ["run", "TASK", "echo", "a b"],
    ["run", "TASK"],
    ["run", "TASK", "--"],
    ["run", "--store", "s3://b/x", "--cache", "/c", "TASK", "--", "true"],
    ["run", "--store=/s", "--cache=", "TASK", "--", "true"],
    ["run", "--diff", "--rootless", "--no-seccomp", "--allow-ptrace", "--copy-layers", "T", "--", "x"],
    ["run", "--network", "host", "--scratch", "/tmp/s", "--timeout", "2.5", "T", "--", "x"],
    ["run", "--network=none", "--timeout=1e1", "T", "--", "x"],
    ["run", "--memory", "1G", "--pids", "none", "--cpu-seconds", "30", "T", "--", "x"],
    ["run", "--sandbox-cpu-seconds=60", "--file-size", "10M", "--tmpfs", "2G", "--max-output", "1k", "T", "true"],
    ["run", "--memory", "1G", "--memory", "2G", "T", "--", "x"],
    ["-q", "run", "T", "--", "x"],
    ["--quiet", "-v", "-v", "--no-progress", "--accept-older-store", "run", "T", "--", "x"],
    ["--verbose", "--store-public-key", "/k.pem", "run", "T", "--", "x"],
    ["--store-public-key=/k.pem", "run", "--store", "s", "T", "--", "x"],
]

#: Forms it leaves to argparse (None): help, abbreviations, values argparse reads
#: differently or refuses, options after the task id, other commands.
LEFT = [
    ["run", "--help"],
    ["-h", "run", "T"],
    ["run", "-h"],
    ["run", "--stor", "s", "T", "--", "x"],
    ["run", "--store"],
    ["run", "--store", "-x", "T"],
    ["run", "--timeout", "-5", "T", "--", "x"],
    ["run", "--timeout", "soon", "T", "--", "x"],
    ["run", "--network", "lan", "T", "--", "x"],
    ["run", "--memory", "lots", "T", "--", "x"],
    ["run", "--diff=yes", "T", "--", "x"],
    ["run", "T", "--memory", "1G", "--", "x"],
    ["run", "T", "echo", "-n"],
    ["run", "--", "T", "--", "x"],
    ["run"],
    ["-vv", "run", "T", "--", "x"],
    ["--store-public-key", "--x", "run", "T"],
    ["shell", "T"],
    ["fetch", "T"],
    ["--version"],
    [],
]


def _argparse(argv: list[str]) -> dict:
    return vars(build_parser().parse_args(argv))


def _command(args: dict) -> list[str]:
    """The command `run` runs (`sandboxcmds._argv`: a leading `--` is dropped; argparse
    versions differ in whether they drop the one after the task id themselves)."""
    cmd = args.pop("cmd")
    return sandboxcmds._argv(cmd) if [w for w in cmd if w != "--"] else []


@pytest.mark.parametrize("argv", READ, ids=" ".join)
def test_the_common_form_parses_as_argparse_does(argv: list[str]) -> None:
    ours = _parse_common(argv)
    assert ours is not None, f"{argv} should be read without argparse"
    ours, theirs = vars(ours), _argparse(argv)
    assert _command(ours) == _command(theirs)
    assert ours == theirs


@pytest.mark.parametrize("argv", LEFT, ids=lambda a: " ".join(a) or "(empty)")
def test_anything_else_is_left_to_argparse(argv: list[str]) -> None:
    assert _parse_common(argv) is None


def test_it_knows_every_run_option_argparse_knows() -> None:
    """The option table and defaults of `parse_run` are `_register_run`'s: an option added
    to one and not the other fails here."""
    parser = build_parser(["minisandbox.cli.sandboxcmds"], "run")
    run = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction").choices["run"]
    options = {s: a.dest for a in run._actions for s in a.option_strings if s.startswith("--") and s != "--help"}
    assert options == {opt: dest for opt, (dest, _read) in sandboxcmds._RUN_OPTIONS.items()}
    defaults = {a.dest: a.default for a in run._actions if a.option_strings and a.dest != "help"}
    assert {k: v for k, v in defaults.items() if v != "==SUPPRESS=="} == sandboxcmds._RUN_DEFAULTS


def test_errors_and_help_still_come_from_argparse(capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["run", "--memory", "lots", "T", "--", "true"])
    assert exc.value.code == 2
    assert "--memory: 'lots' is not a size" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(["run", "--help"])
    assert exc.value.code == 0
    assert "TASK_ID" in capsys.readouterr().out
