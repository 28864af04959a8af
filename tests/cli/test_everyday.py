"""What a user meets at the command line: bad arguments give one line and what to do, never
a traceback; a closed pipe ends a command quietly; `tasks` output (header, order); which
default store was used; global -q/-v/--no-progress; `cache clear`; shell completion."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from minisandbox.cli import main


def _cli(argv: list[str], cwd: Path | None = None, **env: str) -> subprocess.CompletedProcess:
    """The real command in a subprocess (stderr a pipe), as a user's shell or a job runs it."""
    return subprocess.run(
        [sys.executable, "-m", "minisandbox.cli", *argv],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **env},
        cwd=cwd,
    )


# ------------------------------------------------------------------ bad arguments
def _bad_invocations(tmp: Path) -> list[list[str]]:
    """Each user command with something wrong a user can type: a missing store, cache, file
    or command, a bad value. Usage errors (argparse) are included: they too must be short."""
    missing = str(tmp / "missing")
    (tmp / "not-jsonl.jsonl").write_text("{not json\n")
    return [
        ["run", "--store", missing, "T"],  # no command after the task id
        ["run", "--store", missing, "T", "--", "true"],  # a store that does not exist
        ["shell", "--store", missing, "T"],
        ["fetch", "--store", missing, "--cache", str(tmp / "c"), "T"],
        ["tasks", "--store", missing],
        ["tasks", "--status", "bogus"],
        ["cache", "ls", "--cache", missing],
        ["cache", "gc", "--cache", missing, "--max-bytes", "lots"],
        ["cache", "clear", "--cache", missing],
        ["eval", "--store", missing, "--predictions", missing],
        ["eval", "--store", missing, "--predictions", str(tmp / "not-jsonl.jsonl")],
        ["push", missing, str(tmp / "dst")],
        ["pull", missing, str(tmp / "dst")],
        ["verify", missing],
        ["plan", "--tasks", missing, "--catalog", missing],
        ["plan", "--tasks", str(tmp / "not-jsonl.jsonl"), "--catalog", missing],
        ["sandbox-exec", "--layer", "nocolon"],
        ["sandbox-exec", "--python", missing, "--", "true"],
        ["sandbox-exec", "--memory", "lots", "--", "true"],
        ["doctor", "--bogus"],
        ["completion", "fish"],
        ["completion"],
        ["nonsense"],
        [],
    ]


def test_every_command_with_bad_arguments_says_one_thing_and_no_traceback(tmp_path: Path) -> None:
    for argv in _bad_invocations(tmp_path):
        res = _cli(argv, cwd=tmp_path)
        where = f"minisandbox {' '.join(argv)}"
        assert res.returncode in (1, 2), f"{where}: exit {res.returncode}\n{res.stderr}"
        assert "Traceback" not in res.stderr, f"{where}:\n{res.stderr}"
        errors = [line for line in res.stderr.splitlines() if "error:" in line]
        assert len(errors) == 1, f"{where}: one error line expected:\n{res.stderr}"
        assert res.stderr.splitlines()[-1] == errors[0], f"{where}: the error comes last:\n{res.stderr}"
        assert res.stdout == "", f"{where}: stdout is for results only:\n{res.stdout}"


def test_run_without_a_command_is_a_usage_error(capsys) -> None:
    assert main(["run", "--store", "/nonexistent", "T"]) == 2
    err = capsys.readouterr().err
    assert err == (
        "minisandbox run: error: no command given: add `-- CMD ...` after the task id "
        "(or use `minisandbox shell TASK_ID`)\n"
    )


def test_verbose_shows_the_traceback_behind_an_error(tmp_path: Path) -> None:
    quiet = _cli(["tasks", "--store", str(tmp_path)])
    loud = _cli(["-v", "tasks", "--store", str(tmp_path)])
    assert "Traceback" not in quiet.stderr and "Traceback" in loud.stderr
    assert loud.stderr.splitlines()[-1] == quiet.stderr.splitlines()[-1]


# ------------------------------------------------------------------ closed pipes
def _closed_pipe_run(argv: list[str], **env: str) -> subprocess.CompletedProcess:
    """Run with stdout a pipe whose reader is already gone (`| head` that has exited): every
    write fails with EPIPE, deterministically."""
    r, w = os.pipe()
    os.close(r)
    try:
        return subprocess.run(
            [sys.executable, "-m", "minisandbox.cli", *argv],
            stdout=w,
            stderr=subprocess.PIPE,
            text=True,
            timeout=300,
            env={**os.environ, **env},
        )
    finally:
        os.close(w)


@pytest.mark.parametrize("which", ["tasks", "tasks --json", "cache ls --json", "completion", "help"])
def test_a_closed_stdout_ends_quietly(which: str, published_store, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    argv = {
        "tasks": ["tasks", "--store", published_store["url"]],
        "tasks --json": ["tasks", "--store", published_store["url"], "--json"],
        "cache ls --json": ["cache", "ls", "--cache", str(cache), "--json"],
        "completion": ["completion", "bash"],
        "help": ["--help"],
    }[which]
    if which == "cache ls --json":
        (cache / "layers").mkdir(parents=True)
    res = _closed_pipe_run(argv)
    assert "Traceback" not in res.stderr and "BrokenPipe" not in res.stderr, res.stderr
    assert "Exception ignored" not in res.stderr, res.stderr
    assert res.returncode == 141  # 128 + SIGPIPE, what a pipeline expects of a writer cut short


def test_tasks_into_head_prints_the_first_row(published_store) -> None:
    out = subprocess.run(
        f"{sys.executable} -m minisandbox.cli tasks --store {published_store['url']} | head -1",
        shell=True,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.stdout == "demo__proj.0000\tready\tenv-demo0-0000000000000000\tdemo0\t-\n"
    assert "Traceback" not in out.stderr


# ------------------------------------------------------------------ tasks
def test_tasks_rows_are_sorted_and_the_header_only_on_request_or_a_terminal(published_store, capsys) -> None:
    assert main(["tasks", "--store", published_store["url"]]) == 0
    rows = capsys.readouterr().out.splitlines()
    ids = [r.split("\t")[0] for r in rows]
    assert ids == sorted(t["instance_id"] for t in published_store["tasks"])  # no header on a pipe
    assert main(["tasks", "--store", published_store["url"], "--header"]) == 0
    assert capsys.readouterr().out.splitlines() == ["INSTANCE_ID\tSTATUS\tENV_KEY\tSPEC_NAME\tVALIDATION", *rows]
    assert main(["tasks", "--store", published_store["url"], "--json"]) == 0
    assert [r["instance_id"] for r in json.loads(capsys.readouterr().out)] == ids


def test_tasks_header_on_a_terminal(published_store) -> None:
    """Under a pseudo-terminal the header is there; --no-header takes it away."""
    import pty

    def run(*extra: str) -> str:
        out = b""
        pid, fd = pty.fork()
        if pid == 0:  # child: stdout is the terminal
            os.execv(
                sys.executable,
                [sys.executable, "-m", "minisandbox.cli", "-q", "tasks", "--store", published_store["url"], *extra],
            )
        while True:
            try:
                data = os.read(fd, 65536)
            except OSError:
                break
            if not data:
                break
            out += data
        os.waitpid(pid, 0)
        return out.decode().replace("\r\n", "\n")

    assert run().splitlines()[0] == "INSTANCE_ID\tSTATUS\tENV_KEY\tSPEC_NAME\tVALIDATION"
    assert run("--no-header").splitlines()[0].startswith("demo__proj.0000\t")


def test_a_missing_default_store_names_the_default_used(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "MINISANDBOX_STORE"}
    res = subprocess.run(
        [sys.executable, "-m", "minisandbox.cli", "tasks"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=300,
    )
    assert res.returncode == 1
    assert (
        f"(no --store given: used {tmp_path}/results/store, the default ./results/store under the current "
        f"directory; pass --store URL or set MINISANDBOX_STORE)"
    ) in res.stderr
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "config.yaml").write_text("store: elsewhere/store\n")
    res = subprocess.run(
        [sys.executable, "-m", "minisandbox.cli", "fetch", "--cache", str(tmp_path / "c"), "T"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=300,
    )
    assert f"used {tmp_path}/elsewhere/store, the store: of {tmp_path}/config/config.yaml;" in res.stderr
    res = _cli(["tasks"], cwd=tmp_path, MINISANDBOX_STORE=str(tmp_path / "env-store"))
    assert f"used {tmp_path}/env-store, from $MINISANDBOX_STORE;" in res.stderr
    explicit = _cli(["tasks", "--store", str(tmp_path / "x")], cwd=tmp_path)  # given: nothing to explain
    assert explicit.returncode == 1 and "no --store given" not in explicit.stderr


# ------------------------------------------------------------------ global options
def test_quiet_drops_notes_and_progress_but_not_results(published_store, tmp_path: Path) -> None:
    ids = [t["instance_id"] for t in published_store["tasks"] if t["status"] == "ready"]
    res = _cli(
        ["-q", "fetch", "--store", published_store["url"], "--cache", str(tmp_path / "c"), *ids],
        MINISANDBOX_PROGRESS_INTERVAL="0",
    )
    assert res.returncode == 0 and res.stderr == ""
    assert len(res.stdout.splitlines()) == len(ids)
    listed = _cli(["-q", "tasks", "--store", published_store["url"]])
    assert listed.stderr == "" and len(listed.stdout.splitlines()) == len(published_store["tasks"])


def test_no_progress_turns_progress_off(published_store, tmp_path: Path) -> None:
    ids = [t["instance_id"] for t in published_store["tasks"] if t["status"] == "ready"]
    base = ["fetch", "--store", published_store["url"], "--json"]
    shown = _cli([*base, "--cache", str(tmp_path / "a"), *ids], MINISANDBOX_PROGRESS_INTERVAL="0")
    assert "fetch: " in shown.stderr  # the baseline does print progress
    hidden = _cli(["--no-progress", *base, "--cache", str(tmp_path / "b"), *ids], MINISANDBOX_PROGRESS_INTERVAL="0")
    assert hidden.returncode == 0 and "fetch: " not in hidden.stderr
    assert len(json.loads(hidden.stdout)) == len(ids)


# ------------------------------------------------------------------ cache clear
def _lease_holder(cache: Path, published_store) -> subprocess.Popen:
    """A live process holding leases on a task's layers (as a sandbox does), until killed."""
    code = (
        "import sys, time\n"
        "from minisandbox.node.cache import Cache\n"
        "from minisandbox.node.runtime import prepare\n"
        f"p = prepare({published_store['tasks'][0]['instance_id']!r}, {published_store['url']!r}, "
        f"cache=Cache(__import__('pathlib').Path({str(cache)!r})))\n"
        "print('leased', flush=True)\n"
        "time.sleep(600)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    assert line == "leased\n", proc.stderr.read() if proc.poll() is not None else line
    return proc


def test_cache_clear_refuses_while_leased_and_force_ends_the_holder(published_store, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    holder = _lease_holder(cache, published_store)
    try:
        assert any((cache / "layers").iterdir())
        refused = _cli(["cache", "clear", "--cache", str(cache)])
        assert refused.returncode == 1
        assert f"layers leased by pid {holder.pid} ({published_store['tasks'][0]['instance_id']})" in refused.stderr
        assert "pass --force" in refused.stderr and cache.is_dir()
        forced = _cli(["cache", "clear", "--cache", str(cache), "--force", "--json"])
        assert forced.returncode == 0, forced.stderr
        report = json.loads(forced.stdout)
        assert report["ended"] == {str(holder.pid): published_store["tasks"][0]["instance_id"]}
        assert report["entries"] >= 2 and report["freed"] > 0
        assert holder.wait(10) is not None  # ended by the clear
        assert not cache.exists()
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()


@pytest.mark.root
@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("mksquashfs"), reason="kernel image mounts need root")
def test_cache_clear_unmounts_image_layers(tmp_path: Path) -> None:
    """Mounted image layers are read-only file systems: `rm -rf` fails on each of their files.
    `cache clear` unmounts them first and removes the rest."""
    from minisandbox.node.cache import Cache
    from minisandbox.node.runtime import prepare
    from tests.fixtures.runtime import build_store

    pub = build_store(tmp_path / "store", tmp_path / "work", n_envs=1, n_tasks=1, images=True)
    cache = tmp_path / "cache"
    prepare(pub["tasks"][0]["instance_id"], pub["url"], cache=Cache(cache), images=True).lease.release()
    mounted = [p for p in (cache / "layers").iterdir() if os.path.ismount(p)]
    assert mounted, "the fixture's images should be mounted"
    res = _cli(["cache", "clear", "--cache", str(cache)])
    assert res.returncode == 0, res.stderr
    assert f"{len(mounted)} image layers unmounted" in res.stdout
    assert not cache.exists() and not any(os.path.ismount(p) for p in mounted)


def test_cache_clear_refuses_a_directory_that_is_not_a_cache(tmp_path: Path) -> None:
    (tmp_path / "precious").mkdir()
    (tmp_path / "precious" / "thesis.tex").write_text("...")
    res = _cli(["cache", "clear", "--cache", str(tmp_path / "precious")])
    assert res.returncode == 1 and "does not look like a minisandbox cache" in res.stderr
    assert (tmp_path / "precious" / "thesis.tex").is_file()


# ------------------------------------------------------------------ completion
def _complete_bash(script: str, words: list[str]) -> list[str]:
    prog = (
        f"{script}\nCOMP_WORDS=({' '.join(repr(w) for w in words)}); COMP_CWORD={len(words) - 1}\n"
        "_minisandbox; printf '%s\\n' \"${COMPREPLY[@]}\"\n"
    )
    out = subprocess.run(["bash", "-c", prog], capture_output=True, text=True, timeout=60, check=True)
    return out.stdout.split()


def test_bash_completion_completes_commands_options_and_choices(capsys) -> None:
    assert main(["completion", "bash"]) == 0
    script = capsys.readouterr().out
    assert _complete_bash(script, ["minisandbox", "ca"]) == ["cache"]
    assert _complete_bash(script, ["minisandbox", "cache", ""]) == ["ls", "gc", "clear"]
    assert _complete_bash(script, ["minisandbox", "-q", "tasks", "--st"]) == ["--store", "--status"]
    assert _complete_bash(script, ["minisandbox", "tasks", "--status", "re"]) == ["ready", "repo-failed"]
    assert _complete_bash(script, ["minisandbox", "completion", ""]) == ["bash", "zsh"]
    assert "--force" in _complete_bash(script, ["minisandbox", "cache", "clear", "--"])


@pytest.mark.skipif(not shutil.which("zsh"), reason="zsh is not installed")
def test_zsh_completion_script_loads_and_completes(tmp_path: Path, capsys) -> None:
    assert main(["completion", "zsh"]) == 0
    (tmp_path / "_minisandbox").write_text(capsys.readouterr().out)
    # compadd is replaced by a function that prints what would be offered
    prog = (
        f"autoload -U compinit && compinit -u -D; source {tmp_path}/_minisandbox\n"
        "compadd() { while [[ $1 == -* && $1 != -- ]]; do shift; done; [[ $1 == -- ]] && shift; print -l -- $@; }\n"
        "words=(minisandbox cache ''); CURRENT=3; _minisandbox\n"
        "words=(minisandbox tasks --status ''); CURRENT=4; _minisandbox\n"
    )
    out = subprocess.run(
        ["zsh", "-f", "-c", prog], capture_output=True, text=True, timeout=60, env={**os.environ, "HOME": str(tmp_path)}
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["ls", "gc", "clear", "ready", "env-failed", "repo-failed"]


def test_completion_follows_the_parser() -> None:
    """Every command and option of the parser is in the script (it is generated from it)."""
    from minisandbox.cli import build_parser
    from minisandbox.cli.completion import _tables

    cmds, opts, _choices = _tables(build_parser())
    assert "clear" in cmds["minisandbox cache"] and "--header" in opts["minisandbox tasks"]
    assert {"-q", "-v", "--no-progress"} <= set(opts["minisandbox"])


# ------------------------------------------------------------------ catalog mistakes
def test_plan_with_a_misspelled_catalog_key_blames_the_catalog(tmp_path: Path) -> None:
    """`spec:` for `specs:` used to load an empty catalog and report every task as invalid."""
    good = Path(__file__).resolve().parents[2] / "config" / "catalog" / "bundled.yaml"
    bad = tmp_path / "catalog.yaml"
    bad.write_text(good.read_text().replace("specs:", "spec:", 1))
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(
        json.dumps(
            {
                "instance_id": "a__b.1",
                "repo": "swesmith/a__b.12345678",
                "patch": "x",
                "FAIL_TO_PASS": ["t"],
                "PASS_TO_PASS": [],
            }
        )
        + "\n"
    )
    res = _cli(["plan", "--tasks", str(tasks), "--catalog", str(bad), "--plan-dir", str(tmp_path / "plan")])
    assert res.returncode == 1 and "Traceback" not in res.stderr
    assert res.stderr == (
        f"minisandbox plan: error: {bad}: unknown top-level key 'spec' (did you mean 'specs'?): a "
        f"catalog is a mapping with one key, `specs:` (a list of specs)\n"
    )


# ------------------------------------------------------------------ progress
@pytest.mark.parametrize("images", [False, True])
def test_fetch_progress_total_is_known_up_front(tmp_path: Path, images: bool) -> None:
    """Every progress line shows the same total (no percentage or ETA jumping back as more
    archives are found), the last one 100% and only once."""
    from tests.fixtures.runtime import build_store

    if images and not shutil.which("mksquashfs"):
        pytest.skip("images need mksquashfs")
    pub = build_store(tmp_path / "store", tmp_path / "work", n_envs=2, n_tasks=3, images=images)
    ids = [t["instance_id"] for t in pub["tasks"] if t["status"] == "ready"]
    cache = tmp_path / "cache"
    res = _cli(
        ["fetch", "--store", pub["url"], "--cache", str(cache), *ids],
        MINISANDBOX_PROGRESS_INTERVAL="0",
        MINISANDBOX_IMAGES="1" if images else "0",
    )
    assert res.returncode == 0, res.stderr
    lines = [line for line in res.stderr.splitlines() if line.startswith("fetch: ")]
    assert len(lines) >= 3, res.stderr
    totals = {line.split("/")[1].split(" ")[0] for line in lines}
    assert len(totals) == 1, lines
    done, total = lines[-1].removeprefix("fetch: ").split(" ")[0].split("/")
    assert done == total and "(100%)" in lines[-1]
    assert lines[-2].removeprefix("fetch: ").split(" ")[0] != lines[-1].removeprefix("fetch: ").split(" ")[0]
    if images:
        _cli(["cache", "clear", "--cache", str(cache)])


# ------------------------------------------------------------------ workflow --config mistakes
@pytest.mark.parametrize(
    "setting,expect",
    [
        (
            "stor=s3://bucket/x",
            "minisandbox: config key 'stor' is not a workflow setting; did you mean 'store'? "
            "(every key: config/README.md)",
        ),
        (
            "zstd_level=abc",
            "minisandbox: config zstd_level: 'abc' is not of type 'integer' (every key: config/README.md)",
        ),
    ],
)
def test_a_config_typo_is_one_line_not_the_schema(setting: str, expect: str, tmp_path: Path) -> None:
    pytest.importorskip("snakemake")
    root = Path(__file__).resolve().parents[2]
    res = subprocess.run(
        [
            str(Path(sys.executable).parent / "snakemake"),
            "-n",
            "--cores",
            "1",
            "--snakefile",
            str(root / "workflow" / "Snakefile"),
            "--directory",
            str(tmp_path),
            "--config",
            setting,
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert res.returncode == 1
    assert expect in res.stderr.splitlines(), res.stderr[-3000:]
    assert "Failed validating" not in res.stderr and "'properties'" not in res.stderr  # no schema dump
