"""CLI smoke tests: every command's help works, `--version`, the internal workflow steps
appear only under `minisandbox pipeline`, and the error contract of `main`."""

from __future__ import annotations

import subprocess
import sys

import pytest

from minisandbox import __version__
from minisandbox.cli import build_parser, main
from minisandbox.errors import MinisandboxError

USER_COMMANDS = [
    "fetch",
    "tasks",
    "cache",
    "run",
    "shell",
    "sandbox-exec",
    "eval",
    "push",
    "pull",
    "verify",
    "doctor",
    "plan",
    "label",
    "pipeline",
    "completion",
    "helper",
]
PIPELINE_STEPS = [
    "bundled",
    "mirror",
    "snapshot",
    "resolve",
    "build",
    "pack",
    "checksum",
    "publish",
    "repo",
    "env",
    "interp",
    "validate",
    "validated-tasks",
    "labelled-tasks",
    "index",
]


def _choices(parser) -> list[str]:
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    return list(sub.choices)


def test_top_level_lists_user_commands_and_the_pipeline_group_only() -> None:
    top = _choices(build_parser())
    assert top == USER_COMMANDS
    assert not set(PIPELINE_STEPS) & set(top)


def test_pipeline_group_holds_every_workflow_step() -> None:
    pipeline = next(a for a in build_parser()._actions if a.__class__.__name__ == "_SubParsersAction").choices[
        "pipeline"
    ]
    assert sorted(_choices(pipeline)) == sorted(PIPELINE_STEPS)


@pytest.mark.parametrize(
    "argv",
    [[c] for c in USER_COMMANDS]
    + [["cache", "ls"], ["cache", "gc"], ["cache", "clear"]]
    + [["pipeline", s] for s in PIPELINE_STEPS],
)
def test_help_of_every_command_exits_0(argv: list[str], capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        main([*argv, "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: minisandbox " + " ".join(argv))


def test_every_command_and_option_has_help_text() -> None:
    def walk(parser, path):
        for action in parser._actions:
            if action.__class__.__name__ == "_SubParsersAction":
                for choice in action._choices_actions:
                    assert choice.help and choice.help[0].isupper() and choice.help.endswith("."), (
                        f"{path} {choice.dest}: help should be a sentence: {choice.help!r}"
                    )
                for name, sub in action.choices.items():
                    walk(sub, f"{path} {name}")
            elif action.dest != "help" and action.option_strings:
                assert action.help, f"{path} {'/'.join(action.option_strings)} has no help text"

    walk(build_parser(), "minisandbox")


def test_version() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "minisandbox.cli", "--version"], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0 and out.stdout.strip() == f"minisandbox {__version__}"


def test_project_errors_print_one_line_and_bugs_keep_their_traceback(monkeypatch, capsys) -> None:
    from minisandbox.cli import taskcmds

    def fail(_args):
        raise MinisandboxError("store s3://x has no index; pass --store URL")

    monkeypatch.setattr(taskcmds, "cmd_tasks", fail)
    assert main(["tasks"]) == 1
    assert capsys.readouterr().err == "minisandbox tasks: error: store s3://x has no index; pass --store URL\n"

    def bug(_args):
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(taskcmds, "cmd_tasks", bug)
    with pytest.raises(ZeroDivisionError):
        main(["tasks"])


def test_a_bad_size_is_a_usage_error(capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["cache", "gc", "--max-bytes", "lots"])
    assert exc.value.code == 2
    assert "'lots' is not a size" in capsys.readouterr().err


def test_a_command_alone_parses_as_in_the_whole_parser() -> None:
    """`main` builds only the parser of the command a call names (where its module registers
    each command on its own): the same arguments give the same namespace as the whole parser,
    and the other commands are not in it."""
    for argv in (
        ["run", "--store", "s", "--memory", "1G", "--diff", "TASK", "--", "echo", "x"],
        ["shell", "--network", "host", "TASK"],
        ["sandbox-exec", "--layer", "/a:/b", "--", "true"],
    ):
        alone = build_parser(["minisandbox.cli.sandboxcmds"], argv[0])
        assert _choices(alone) == [argv[0]]
        assert vars(alone.parse_args(argv)) == vars(build_parser().parse_args(argv))


def test_a_run_process_pauses_the_cyclic_gc_only_until_its_sandbox_is_open(monkeypatch) -> None:
    """The `minisandbox run` process holds the cyclic GC off while it imports and sets up, and
    turns it on again (the set-up's objects frozen) before the command streams; a caller's
    `main(argv)` (tests, the helper's workers) never touches its process's collector."""
    import gc

    import minisandbox.cli as cli

    assert gc.isenabled()
    seen = {}

    def fake_in_process(argv):
        seen["during"] = gc.isenabled()
        cli.resume_gc()  # what `run` does once its sandbox is open
        seen["after"] = gc.isenabled()
        return 0

    monkeypatch.setattr(cli, "_in_process", fake_in_process)
    # the process's own `run` ends with os._exit (`_end_process`): here it would end pytest, exit 0
    monkeypatch.setattr(cli, "_end_process", lambda code: code)
    monkeypatch.setenv("MINISANDBOX_HELPER", "off")
    try:
        assert cli._main(["run", "TASK", "--", "true"], helper=True) == 0
        assert seen == {"during": False, "after": True} and gc.get_freeze_count() > 0
        seen.clear()
        assert cli._main(["run", "TASK", "--", "true"]) == 0
        assert seen == {"during": True, "after": True}
    finally:
        gc.unfreeze()
        gc.enable()


def test_a_run_served_by_the_helper_ends_its_process_without_finalization(monkeypatch) -> None:
    """The client of a node-local helper ends like the in-process `run` (`_end_process`:
    flush, exit handlers, `os._exit`) once the helper's worker reported the status, instead
    of returning into the interpreter's finalization; a call the helper did not take runs
    in-process and ends the same way."""
    import minisandbox.cli as cli
    from minisandbox.cli import helperclient

    ended = []
    monkeypatch.setattr(cli, "_end_process", lambda code: ended.append(code) or code)
    monkeypatch.setattr(helperclient, "try_run", lambda argv: 3)
    monkeypatch.setattr(cli, "_in_process", lambda argv: pytest.fail("the helper's worker ran it"))
    assert cli._main(["run", "TASK", "--", "true"], helper=True) == 3
    assert ended == [3]
    monkeypatch.setattr(helperclient, "try_run", lambda argv: None)
    monkeypatch.setattr(cli, "_in_process", lambda argv: 5)
    assert cli._main(["run", "TASK", "--", "true"], helper=True) == 5
    assert ended == [3, 5]
