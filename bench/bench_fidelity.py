#!/usr/bin/env python3
"""Real-repository fidelity benchmark (docs/fidelity.md). Not part of CI.

Builds real SWE-smith profiles of `config/catalog/swesmith.yaml` from their real upstream
repositories through the real Snakemake workflow, then runs each profile's official test
command at the clean start state in the sandbox (network off) and prints one row per
profile: built?, seconds, tests collected, passed / failed / errors, pass rate, and the
failure class of every broken profile. Target (docs/fidelity.md): >= 95% of the chosen profiles
build and reach >= 95% pass rate.

Inputs: a folder of git repositories brought in with the search tool's `fetch`
(`github:<owner>/<repo>` lands in `<MIRRORS>/<owner>+<repo>/repo`, a bare git dir; MIRRORS is
the folder `fetch` reports).
The catalog names `https://github.com/<owner>/<repo>.git`; the bench points those URLs at
the local repositories with git's `url.<path>.insteadOf` in a GIT_CONFIG_GLOBAL file of its
own (`<out>/gitconfig`; the user's ~/.gitconfig is never read or touched). The workflow's
`minisandbox pipeline mirror` clones with the caller's environment, so the mapping reaches it.

"Clean start state": one task per profile whose bug patch only adds an inert file
(`.fidelity-bench`, no test reads it) and whose FAIL_TO_PASS / PASS_TO_PASS are empty, so
the start state is the profile commit as the official image has it (records require a
non-empty unified diff). The test command is the spec's `test_cmd` (the whole suite, as
at the start of a SWE-smith validation run), run with `minisandbox run` under
`--test-timeout` (default 900 s; the catalog's 90 s is for single test files at grading).

`--rev REV` benchmarks a committed revision (exported with `git archive` into
`<out>/code`, used for the Snakefile, the catalog and PYTHONPATH) instead of the working
tree, so a before/after comparison does not depend on uncommitted edits.

Results: `<out>/results.json` (everything the table is made from); `--report FILE`
re-prints the table of a saved run, `--compare BEFORE.json` adds a before/after summary.

Usage:
  nice -n 10 .venv/bin/python bench/bench_fidelity.py --mirrors MIRRORS --profiles 30 \
      --out /tmp/fid/run --jobs 2 [--rev HEAD]
  .venv/bin/python bench/bench_fidelity.py --report /tmp/fid/run/results.json [--compare before.json]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml
from tabulate import tabulate

ROOT = Path(__file__).resolve().parents[1]

#: Profiles chosen for this machine: pure Python (or wheels only), no system packages,
#: small suites; a mix of build backends (setuptools, setuptools_scm, hatch(-vcs), flit,
#: poetry) so the as-of-date and install-residue classes are exercised. `--profiles N`
#: takes the first N of these that are present in --mirrors (then other catalog profiles).
DEFAULT_PROFILES = [
    "adrienverge__yamllint.8513d9b9",
    "agronholm__exceptiongroup.0b4f4937",
    "aio-libs__async-timeout.d0baa9f1",
    "alecthomas__voluptuous.a7a55f83",
    "andialbrecht__sqlparse.e57923b3",
    "arrow-py__arrow.1d70d009",
    "borntyping__python-colorlog.dfa10f59",
    "bottlepy__bottle.a8dfef30",
    "cknd__stackprinter.219fcc52",
    "cloudpipe__cloudpickle.6220b0ce",
    "dbader__schedule.82a43db1",
    "erikrose__parsimonious.0d3f5f93",
    "gweis__isodate.17cb25eb",
    "hukkin__tomli.443a0c1b",
    "jd__tenacity.0d40e76f",
    "keleshev__schema.24a30457",
    "kennethreitz__records.5941ab27",
    "Knio__dominate.9082227e",
    "life4__textdistance.c3aca916",
    "madzak__python-json-logger.5f85723f",
    "martinblech__xmltodict.0952f382",
    "mewwts__addict.75284f95",
    "msiemens__tinydb.10644a0e",
    "pytest-dev__iniconfig.16793ead",
    "python-hyper__h11.bed0dd4a",
    "r1chardj0n3s__parse.30da9e4f",
    "rustedpy__result.0b855e1e",
    "Suor__funcy.207a7810",
    "termcolor__termcolor.3a42086f",
    "theskumar__python-dotenv.2b8635b7",
    "un33k__python-slugify.872b3750",
    # second batch (same criteria)
    "google__textfsm.c31b6007",
    "gruns__furl.da386f68",
    "gruns__icecream.f76fef56",
    "jaraco__inflect.c079a96a",
    "john-kurkowski__tldextract.3d1bf184",
    "luozhouyang__python-string-similarity.115acaac",
    "mahmoud__boltons.3bfcfdd0",
    "mahmoud__glom.fb3c4e76",
    "Mimino666__langdetect.a1598f1a",
    "mozillazg__python-pinyin.e42dede5",
    "pexpect__ptyprocess.1067dbda",
    "pwaller__pyfiglet.f8c5f35b",
    "pyasn1__pyasn1.0f07d724",
    "seatgeek__thefuzz.8a05a3ee",
    "sloria__environs.73c372df",
    "vi3k6i5__flashtext.b316c7e9",
    # third batch: suites with binary test data (pydicom downloads some at collection time)
    "pdfminer__pdfminer.six.1a8bd2f7",
    "pydicom__pydicom.7d361b3d",
    "python-openxml__python-docx.0cf6d71f",
]

#: The clean start state's "bug": an inert new file (see the module docstring).
CLEAN_PATCH = """\
diff --git a/.fidelity-bench b/.fidelity-bench
new file mode 100644
--- /dev/null
+++ b/.fidelity-bench
@@ -0,0 +1 @@
+clean start state (bench/bench_fidelity.py)
"""

TARGET = 0.95

#: The `minisandbox` command of the code under test (its entry point, `minisandbox.cli:main`,
#: in every layout of the package), found through PYTHONPATH.
MINISANDBOX = [sys.executable, "-c", "import sys; from minisandbox.cli import main; sys.exit(main())"]


# ---------------------------------------------------------------- stopping


class Stopped(KeyboardInterrupt):
    """SIGTERM or SIGINT asked the bench to stop. Raised in the main thread (and by
    `run_child` in worker threads) so that every `finally` runs: the node cache holds mounted
    layer images (loop devices as root), leases and sandboxes that only the cleanup releases."""


class _StopState:
    """The children the bench is waiting for, and whether a stop was asked (shared with the
    worker threads that run test suites)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.asked = threading.Event()
        self.children: set[subprocess.Popen] = set()
        self.signum = 0  # the first stopping signal, for the exit status
        self.cleaning = False  # a signal now only marks the stop: the cleanup is not cut short


STOP = _StopState()
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)

#: Seconds a child has to end after SIGINT (snakemake cancels its jobs, `minisandbox run` ends
#: its sandbox) before its whole process group is killed.
STOP_GRACE = 20.0

#: Seconds a child that ran out of time has to end after SIGTERM (`minisandbox run` closes
#: its sandbox: no cgroup or scratch directory left for a later start to reap) before its
#: process group is killed.
TERM_GRACE = 10.0


def _signal_group(proc: subprocess.Popen, sig: int) -> None:
    """`sig` to the child's process group (it leads one: `run_child` starts a new session)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)


def _running(proc: subprocess.Popen) -> bool:
    """Whether the child has not exited. Read from /proc, not `poll()`: the thread that the
    signal interrupted may hold the child's wait lock, and poll() then always says running."""
    if proc.returncode is not None:
        return False
    try:
        state = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def stop_children(grace: float | None = None) -> None:
    """Mark the stop and end every running child: SIGINT to its process group, SIGKILL to the
    group after `grace` seconds (also when the child itself ended: what it started may not)."""
    with STOP.lock:
        STOP.asked.set()
        children = list(STOP.children)
    for proc in children:
        _signal_group(proc, signal.SIGINT)
    deadline = time.monotonic() + (STOP_GRACE if grace is None else grace)
    while any(_running(p) for p in children) and time.monotonic() < deadline:
        time.sleep(0.1)
    if late := [p for p in children if _running(p)]:
        names = ", ".join(f"{p.pid} ({Path(str(p.args[3 if p.args[0] == 'nice' else 0])).name})" for p in late)
        print(f"bench_fidelity: still running after SIGINT, killed: {names}", file=sys.stderr, flush=True)
    for proc in children:
        _signal_group(proc, signal.SIGKILL)


def _unblock(mask: set[signal.Signals]) -> None:
    """In a child between fork and exec: the signal mask it had before `run_child` blocked
    the stop signals."""
    signal.pthread_sigmask(signal.SIG_SETMASK, mask)


def run_child(cmd: list[str], timeout: float | None = None, **kwargs: Any) -> subprocess.CompletedProcess:
    """`subprocess.run(cmd, timeout=timeout, **kwargs)` for the long steps (the workflow, test
    suites): the child leads a process group of its own and is registered, so that a stop
    ends it and everything it started. Raises Stopped once a stop was asked, so a worker
    thread starts nothing more."""
    # started and registered at once: a stop either sees the child or comes first (the signals
    # wait meanwhile: a handler run here, in the main thread, would find the lock held)
    old = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        with STOP.lock:
            if STOP.asked.is_set():
                raise Stopped("stopped")
            # (the child must not inherit the blocked signals: a stop's SIGINT and a
            # timeout's SIGTERM would wait for ever in a child that does not unblock them)
            proc = subprocess.Popen(cmd, start_new_session=True, preexec_fn=lambda: _unblock(old), **kwargs)
            STOP.children.add(proc)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
    with proc:
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _signal_group(proc, signal.SIGTERM)  # `minisandbox run` closes its sandbox first
            try:
                out, err = proc.communicate(timeout=TERM_GRACE)
            except subprocess.TimeoutExpired:
                _signal_group(proc, signal.SIGKILL)
                out, err = proc.communicate()
            _signal_group(proc, signal.SIGKILL)  # what the child left running in its group
            raise subprocess.TimeoutExpired(cmd, timeout or 0, out, err) from None
        finally:
            with STOP.lock:
                STOP.children.discard(proc)
    if STOP.asked.is_set():
        raise Stopped("stopped")
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


@contextlib.contextmanager
def stop_guard(cleanup: Callable[[], None]) -> Iterator[None]:
    """Run the block with SIGTERM and SIGINT turned into Stopped (after the children are
    ended), and `cleanup` afterwards in every case; a signal during the cleanup does not cut
    it short. Without a handler, SIGTERM would end the process and skip every `finally`."""

    def on_signal(signum: int, frame: Any) -> None:
        first = not STOP.signum
        STOP.signum = STOP.signum or signum
        if STOP.cleaning or STOP.asked.is_set():
            if first or STOP.cleaning:
                print("bench_fidelity: stopping, the cleanup goes on", file=sys.stderr, flush=True)
            STOP.asked.set()
            return
        name = signal.Signals(signum).name
        print(
            f"bench_fidelity: {name}: ending the running steps, then releasing the cache", file=sys.stderr, flush=True
        )
        stop_children()
        raise Stopped(name)

    main_thread = threading.current_thread() is threading.main_thread()
    old = {s: signal.signal(s, on_signal) for s in STOP_SIGNALS} if main_thread else {}
    try:
        yield
    finally:
        STOP.cleaning = True
        try:
            cleanup()
        finally:
            STOP.cleaning = False
            for s, handler in old.items():
                signal.signal(s, handler)


def map_stoppable(fn: Callable[[Any], None], items: Iterable[Any], jobs: int) -> None:
    """`fn` over `items` in `jobs` threads. Stopped (or any error) cancels what has not
    started (`cancel_futures`): the pool's own exit would run every queued suite first."""
    pool = ThreadPoolExecutor(max_workers=max(1, jobs))
    try:
        list(pool.map(fn, items))
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


# ---------------------------------------------------------------- inputs


def github_slug(source: str) -> str | None:
    """`owner/repo` of a GitHub URL, else None."""
    m = re.match(r"^(?:https://github\.com/|git@github\.com:)([^/]+)/([^/]+?)(?:\.git)?/?$", source)
    return f"{m.group(1)}/{m.group(2)}" if m else None


def mirror_git_dir(mirrors: Path, source: str) -> Path | None:
    """The local git dir for a GitHub source: `<mirrors>/<owner>+<repo>/repo` (what `fetch`
    makes), `<mirrors>/<owner>+<repo>` or `<mirrors>/<repo>.git`; None when absent."""
    slug = github_slug(source)
    if slug is None:
        return None
    owner, repo = slug.split("/")
    for cand in (mirrors / f"{owner}+{repo}" / "repo", mirrors / f"{owner}+{repo}", mirrors / f"{repo}.git"):
        if (cand / "HEAD").is_file() or (cand / ".git" / "HEAD").is_file():
            return cand
    return None


def all_mirrors(mirrors: Path) -> dict[str, Path]:
    """`https://github.com/<owner>/<repo>.git` -> git dir, for every `<owner>+<repo>/repo`
    under `mirrors` (what `fetch` makes)."""
    out = {}
    for d in sorted(mirrors.glob("*+*/repo")):
        if (d / "HEAD").is_file():
            owner, repo = d.parent.name.split("+", 1)
            out[f"https://github.com/{owner}/{repo}.git"] = d
    return out


def has_commit(git_dir: Path, commit: str) -> bool:
    return (
        subprocess.run(
            ["git", "--git-dir", str(git_dir), "cat-file", "-e", f"{commit}^{{commit}}"], capture_output=True
        ).returncode
        == 0
    )


def missing_objects(git_dir: Path, commit: str) -> int:
    """How many objects of the commit's tree the repository lacks (0: it can be checked out)."""
    proc = subprocess.run(
        ["git", "--git-dir", str(git_dir), "rev-list", "--objects", "--missing=print", "--no-walk", commit],
        capture_output=True,
        text=True,
    )
    return sum(1 for line in proc.stdout.splitlines() if line.startswith("?"))


def choose_profiles(specs: dict[str, dict], mirrors: Path, selection: str) -> tuple[list[str], dict[str, str]]:
    """Profiles to build and the ones skipped (name -> why). `selection`: a count (first N
    available of DEFAULT_PROFILES, then other catalog profiles), `all`, or comma-separated names."""
    if selection.isdigit() or selection == "all":
        wanted = [*DEFAULT_PROFILES, *sorted(n for n in specs if n not in DEFAULT_PROFILES)]
        limit = None if selection == "all" else int(selection)
        explicit = False
    else:
        wanted = [n.strip() for n in selection.split(",") if n.strip()]
        limit, explicit = None, True
    chosen: list[str] = []
    skipped: dict[str, str] = {}
    for name in wanted:
        if limit is not None and len(chosen) >= limit:
            break
        spec = specs.get(name)
        if spec is None:
            raise SystemExit(f"bench_fidelity: profile {name!r} is not in the SWE-smith catalog")
        git_dir = mirror_git_dir(mirrors, spec["source"])
        if git_dir is None:
            if explicit or name in DEFAULT_PROFILES:
                skipped[name] = f"no repository for {spec['source']} under {mirrors}"
            continue
        if not has_commit(git_dir, spec["commit"]):
            skipped[name] = f"{git_dir} lacks the profile commit {spec['commit'][:12]}"
            continue
        if missing := missing_objects(git_dir, spec["commit"]):
            skipped[name] = (
                f"{git_dir} lacks {missing} object(s) of the profile commit's tree "
                "(fetch snapshots omit files of 4 MiB and more)"
            )
            continue
        chosen.append(name)
    return chosen, skipped


def copy_code(src: Path, out: Path) -> tuple[Path, dict[str, Any]]:
    """A snapshot of another checkout (`--code DIR`, e.g. a colleague's patched copy) in
    out/code, so edits made there during the run do not change what is measured."""
    code = out / "code"
    if code.exists():
        shutil.rmtree(code)
    shutil.copytree(
        src,
        code,
        symlinks=True,
        ignore=shutil.ignore_patterns(".venv", ".git", "results", ".snakemake", "__pycache__", "tests"),
    )
    digest = subprocess.run(
        f"cd {shlex.quote(str(code))} && find src workflow config -type f | sort | xargs sha256sum | sha256sum",
        shell=True,
        capture_output=True,
        text=True,
    ).stdout[:12]
    return code, {"root": str(code), "rev": f"copy of {src}", "commit": f"copy-{digest}", "dirty": False}


def export_code(rev: str | None, out: Path) -> tuple[Path, dict[str, Any]]:
    """The code to benchmark: the working tree (rev None) or `git archive REV` in out/code."""

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()

    if rev is None:
        dirty = bool(git("status", "--porcelain", "--untracked-files=no"))
        return ROOT, {"root": str(ROOT), "rev": "working tree", "commit": git("rev-parse", "HEAD"), "dirty": dirty}
    commit = git("rev-parse", "--verify", f"{rev}^{{commit}}")
    code = out / "code"
    if code.exists():
        shutil.rmtree(code)
    code.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "archive", "--format=tar", commit], cwd=ROOT, capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(code)], input=archive, check=True)
    return code, {"root": str(code), "rev": rev, "commit": commit, "dirty": False}


def write_gitconfig(path: Path, urls: dict[str, Path]) -> None:
    """`url.<local>.insteadOf <github url>` for every source (with and without `.git`)."""
    lines = []
    for url, git_dir in sorted(urls.items()):
        lines.append(f'[url "{git_dir}"]')
        lines.append(f"\tinsteadOf = {url}")
        if url.endswith(".git"):
            lines.append(f"\tinsteadOf = {url[:-4]}")
    # (a submodule cloned from a local mirror: git refuses the file transport for
    # submodules by default since 2.38.1)
    lines += ["[safe]", "\tdirectory = *", '[protocol "file"]', "\tallow = always"]
    path.write_text("\n".join(lines) + "\n")


def task_id(profile: str) -> str:
    """The bench task of a profile; a SWE-bench spec name (`owner/repo@version`) becomes
    `owner__repo-version` (instance ids allow letters, digits, `_.-`)."""
    return f"{profile.replace('/', '__').replace('@', '-')}.fidelity__clean000"


def clean_task(profile: str) -> dict[str, Any]:
    return {
        "instance_id": task_id(profile),
        "repo": f"swesmith/{profile}",
        "patch": CLEAN_PATCH,
        "FAIL_TO_PASS": [],
        "PASS_TO_PASS": [],
        "image_name": "",
        "problem_statement": "clean start state (bench_fidelity)",
    }


# ---------------------------------------------------------------- workflow


def code_env(code: Path, gitconfig: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(code / "src"), *filter(None, [os.environ.get("PYTHONPATH")])])
    env["GIT_CONFIG_GLOBAL"] = str(gitconfig)
    env["GIT_TERMINAL_PROMPT"] = "0"
    # `run` in-process: a node-local helper started by the bench would outlive it, and its
    # spare sandbox would keep the task's images leased and mounted when the bench cleans up
    env["MINISANDBOX_HELPER"] = "off"
    # the workflow's steps call `minisandbox`: the one installed beside this interpreter
    # (run as .venv/bin/python, the venv is not on PATH), importing `code` through PYTHONPATH
    bindir = Path(sys.executable).parent
    if (bindir / "minisandbox").exists():
        env["PATH"] = os.pathsep.join([str(bindir), env.get("PATH", "")])
    return env


def run_workflow(code: Path, out: Path, tasks: Path, catalog: Path, jobs: int, env: dict[str, str]) -> dict[str, Any]:
    run_dir = out / "run"
    run_dir.mkdir(parents=True, exist_ok=True)
    cmd = [
        "nice",
        "-n",
        "10",
        sys.executable,
        "-m",
        "snakemake",
        "--snakefile",
        str(code / "workflow" / "Snakefile"),
        "--directory",
        str(run_dir),
        "--cores",
        str(max(2, 2 * jobs)),
        "--keep-going",
        "--config",
        f"tasks={tasks}",
        f"catalog={catalog}",
        f"store={out / 'store'}",
        "workdir=work",
        "bundled=false",
        "validate=false",
    ]
    t0 = time.monotonic()
    with (out / "snakemake.log").open("w") as fh:
        proc = run_child(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env, cwd=run_dir)
    return {"returncode": proc.returncode, "seconds": round(time.monotonic() - t0, 1), "cmd": cmd}


_TS = re.compile(r"^\[(\w{3} \w{3} +\d+ \d\d:\d\d:\d\d \d{4})\]$")
_RULE = re.compile(r"^(?:local)?rule (\w+):$")


def job_seconds(log_text: str) -> list[dict[str, Any]]:
    """Per-job rule, wildcards and wall seconds from Snakemake's own log."""
    jobs: dict[str, dict[str, Any]] = {}
    stamp: datetime | None = None
    current: dict[str, Any] | None = None
    for raw in log_text.splitlines():
        line = raw.strip()
        if m := _TS.match(line):
            stamp = datetime.strptime(m.group(1), "%a %b %d %H:%M:%S %Y")
            continue
        if m := _RULE.match(line):
            current = {"rule": m.group(1), "start": stamp, "wildcards": {}}
            continue
        if current is not None and line.startswith("jobid:"):
            jobs[line.split(":", 1)[1].strip()] = current
        elif current is not None and line.startswith("wildcards:"):
            for part in line.split(":", 1)[1].split(","):
                k, _, v = part.strip().partition("=")
                current["wildcards"][k] = v
        elif m := re.match(r"^Finished jobid: (\d+)", line):
            job = jobs.get(m.group(1))
            if job is not None and job["start"] is not None and stamp is not None:
                job["seconds"] = (stamp - job["start"]).total_seconds()
    return [j for j in jobs.values() if "seconds" in j]


def profile_keys(work: Path) -> dict[str, dict[str, str]]:
    """profile -> env_key, repo_key, source_id from the workflow's plan."""
    plan = json.loads((work / "plan" / "current.json").read_text())
    envs = plan["envs"].items() if isinstance(plan["envs"], dict) else plan["envs"]
    repos = dict(plan["repos"]) if not isinstance(plan["repos"], dict) else plan["repos"]
    keys = {}
    for env_key, env in envs:
        repo_key = env.get("repo_key", "")
        keys[env["spec"]["name"]] = {
            "env_key": env_key,
            "repo_key": repo_key,
            "source_id": repos.get(repo_key, {}).get("source_id", ""),
        }
    return keys


def read_json(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def build_outcome(work: Path, keys: dict[str, str], report: dict[str, Any]) -> dict[str, Any]:
    """Did the profile's environment and repo get published? With the error and log."""
    env_key, repo_key = keys.get("env_key"), keys.get("repo_key")
    error = (report.get("failed_envs") or {}).get(env_key) or (report.get("failed_repos") or {}).get(repo_key)
    logs = sorted(str(p) for k in (env_key, repo_key, keys.get("source_id")) if k for p in work.glob(f"logs/*/{k}.log"))
    ok = error is None and env_key is not None and (work / "published" / "env" / f"{env_key}.json").exists()
    if not ok and error is None:
        error = "not published (see snakemake.log)"
    return {"built": ok, "build_error": error, "logs": logs}


# ---------------------------------------------------------------- tests


_SUMMARY = re.compile(  # `in 4.73s`; before pytest 5.1 `in 4.73 seconds`
    r"^=+ (.*\d+ (?:passed|failed|errors?|skipped|xfailed|xpassed|deselected|warnings?).*) in [\d.]+ ?s"
)
_COUNT = re.compile(r"(\d+) (passed|failed|errors?|skipped|xfailed|xpassed|deselected)")
#: a progress line of pytest without -v: `tests/test_x.py ..F.s   [ 12%]` or a continuation
_PROGRESS = re.compile(r"^(?:\S+\.py )?([.FEsxX]+)\s*\[\s*\d+%\]$")
_COLLECTED = re.compile(r"^(?:collect(?:ed|ing) .*?(\d+) items?|Found (\d+) test\(s\)\.)")  # pytest; django
#: terminal colour codes: a runner that forces colour (tox passes it on to pytest) wraps each
#: progress character in them
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def pytest_counts(log: str, statuses: dict[str, str]) -> dict[str, Any]:
    """Counts from pytest's final summary line, else from the per-test statuses."""
    counts = {
        "collected": None,
        "passed": 0,
        "failed": 0,
        "errors": 0,
        "skipped": 0,
        "xfailed": 0,
        "xpassed": 0,
        "source": "none",
    }
    for line in log.splitlines():
        if m := _COLLECTED.match(line.strip()):
            counts["collected"] = int(m.group(1) or m.group(2))
    summary = None
    for line in log.splitlines():
        if m := _SUMMARY.match(line.strip()):
            summary = m.group(1)
    if summary is not None:
        for n, word in _COUNT.findall(summary):
            word = "errors" if word.startswith("error") else word
            if word in counts:
                counts[word] = int(n)
        counts["source"] = "summary"
    elif statuses:
        for st in statuses.values():
            key = {
                "PASSED": "passed",
                "FAILED": "failed",
                "ERROR": "errors",
                "SKIPPED": "skipped",
                "XFAIL": "xfailed",
                "XPASS": "xpassed",
            }.get(st)
            if key:
                counts[key] += 1
        counts["source"] = "per-test"
    else:  # cut before the summary, without -v: pytest's progress characters
        plain = _ANSI.sub("", log)
        marks = "".join(m.group(1) for line in plain.splitlines() if (m := _PROGRESS.match(line.strip())))
        for ch, key in (
            (".", "passed"),
            ("F", "failed"),
            ("E", "errors"),
            ("s", "skipped"),
            ("x", "xfailed"),
            ("X", "xpassed"),
        ):
            counts[key] = marks.count(ch)
        counts["source"] = "progress" if marks else "none"
    good = counts["passed"] + counts["xfailed"] + counts["xpassed"]
    denom = good + counts["failed"] + counts["errors"]
    counts["pass_rate"] = round(good / denom, 4) if denom else None
    return counts


def whole_suite(spec: dict[str, Any]) -> dict[str, Any]:
    """`spec` with the test command that runs its whole suite: without a dangling `-k`
    (SWE-smith's mypy profile ends in `-k`, for the names a task's tests are selected by)."""
    from minisandbox.grading.evalscript import whole_suite_command

    return {**spec, "test_cmd": whole_suite_command(spec["test_cmd"])}


def load_parser(name: str):
    """The project's log parser (`minisandbox.grading.logparsers`)."""
    for module in ("minisandbox.grading.logparsers",):
        try:
            mod = __import__(module, fromlist=["get_parser"])
            return mod.get_parser(name)
        except (ImportError, AttributeError):
            continue
    return None


_PYTEST_VERBOSE = re.compile(r"^\S+\.py::\S.* (PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)\b", re.M)


def suite_statuses(parser_name: str, text: str) -> tuple[dict[str, str], str | None]:
    """The per-test statuses of the spec's log parser; when it reads nothing from a log of
    pytest's verbose lines (sympy 1.14: its `bin/test` hands the run to pytest, while
    the spec keeps the parser of sympy's own runner), pytest's parser's, with a note saying so."""
    parser = load_parser(parser_name)
    statuses = parser(text) if parser is not None else {}
    if statuses or parser_name in PYTEST_PARSERS or not _PYTEST_VERBOSE.search(text):
        return statuses, None
    fallback = load_parser("pytest")
    note = f"counted with the pytest parser: the {parser_name!r} parser read no test from pytest's output"
    return (fallback(text) if fallback is not None else {}), note


def run_tests(
    profile: str, spec: dict[str, Any], out: Path, env: dict[str, str], timeout: float, run_args: tuple[str, ...] = ()
) -> dict[str, Any]:
    """The spec's test command in the sandbox, counted; `run_args`: more `minisandbox run`
    options (the SWE-bench mode keeps more output: its suites print megabytes)."""
    log_path = out / "tests" / f"{log_name(profile)}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    cmd = [
        "nice",
        "-n",
        "10",
        *MINISANDBOX,
        "run",
        "--store",
        str(out / "store"),
        "--cache",
        str(out / "cache"),
        "--timeout",
        str(timeout),
        *run_args,
        task_id(profile),
        "--",
        spec["test_cmd"],
    ]
    t0 = time.monotonic()
    try:
        proc = run_child(cmd, timeout=timeout + 600, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        rc, text = proc.returncode, proc.stdout + proc.stderr
    except subprocess.TimeoutExpired as exc:
        rc, text = 124, f"{exc.stdout or ''}{exc.stderr or ''}\nbench_fidelity: minisandbox run did not return"
    seconds = round(time.monotonic() - t0, 1)
    log_path.write_text(text)
    statuses, parser_note = suite_statuses(spec.get("log_parser") or "pytest", text)
    counts = pytest_counts(text, statuses)
    bad = sorted(t for t, s in statuses.items() if s in ("FAILED", "ERROR"))
    result = {
        "returncode": rc,
        "test_seconds": seconds,
        "test_log": str(log_path),
        **counts,
        "not_passing": bad[:50],
        **({"parser_note": parser_note} if parser_note else {}),
        # pytest's final line is printed when the session is over: a cap that strikes after
        # it (the process was still exiting) did not cut the suite short
        "timed_out": rc == 124 and counts["source"] != "summary",
        "capped_after_summary": rc == 124 and counts["source"] == "summary",
    }
    if (spec.get("log_parser") or "pytest") in PYTEST_PARSERS and (
        counts["pass_rate"] is None or counts["errors"] or counts["failed"]
    ):
        files = sorted({rerun_path(t.split("::")[0]) for t in bad if "::" in t})[:10]
        failing_files = files if counts["failed"] and files else None
        if rc == 124 and not statuses:  # (a suite cut by the cap while tests ran is no hang)
            result["diag_log"] = diagnose_hang(profile, spec, out, env)
        else:
            result["diag_log"] = diagnose(profile, spec, out, env, failing_files)
        if failing_files and passes_alone(result["diag_log"]):
            result["passes_alone"] = True  # (no probe can name a cause: nothing fails alone)
        elif failing_files:
            result["probe"] = probe(profile, spec, out, env, failing_files)
    return result


def passes_alone(diag_log: str | None) -> bool:
    """Whether the diagnostic rerun of the failing test files, unchanged but without the
    rest of the suite, passed them all: the failures then depend on what ran before them
    (state left by another test), not on the environment."""
    try:
        text = Path(diag_log).read_text(errors="replace") if diag_log else ""
    except OSError:
        return False
    counts = pytest_counts(text, {})
    return counts["source"] == "summary" and bool(counts["passed"]) and not counts["failed"] and not counts["errors"]


def rerun_path(file: str) -> str:
    """A failing test's file as a rerun in /testbed can name it. Outside its rootdir pytest
    prints ids through `..`: with a profile's `-c /dev/null` the rootdir is /dev and the ids
    read `../dev/tests/x.py`, a path that does not exist; the repository's `tests/x.py` does."""
    return re.sub(r"^(?:\.\./)+[^/]+/", "", file)


#: Log parsers of pytest output: the failing files can be rerun with pytest options.
PYTEST_PARSERS = ("pytest", "pytest_v2", "pytest_options", "seaborn")


def log_name(profile: str) -> str:
    """A file name for a profile's logs (SWE-bench spec names hold `/`)."""
    return profile.replace("/", "__")


def sandbox_run(profile: str, out: Path, env: dict[str, str], command: str, log_name: str, timeout: float = 300) -> str:
    """Output of one command in a fresh sandbox of the profile's task, also saved in tests/."""
    cmd = [
        "nice",
        "-n",
        "10",
        *MINISANDBOX,
        "run",
        "--store",
        str(out / "store"),
        "--cache",
        str(out / "cache"),
        "--timeout",
        str(timeout),
        task_id(profile),
        "--",
        command,
    ]
    proc = run_child(cmd, timeout=timeout + 600, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    text = proc.stdout + proc.stderr
    (out / "tests" / log_name).write_text(f"$ {command}\n{text}")
    return text


def diagnose(profile: str, spec: dict[str, Any], out: Path, env: dict[str, str], files: list[str] | None) -> str:
    """The official command hides why tests fail (`--tb=no`, `--disable-warnings`): rerun it
    with tracebacks and warnings on stderr in a fresh sandbox, on the failing test files
    (`files`) or, for collection errors, `--collect-only`; logged beside the test log."""
    extra = (
        "--tb=short -p no:warnings " + " ".join(shlex.quote(f) for f in files) if files else "--collect-only --tb=short"
    )
    sandbox_run(profile, out, env, f"{spec['test_cmd']} {extra}", f"{log_name(profile)}.diag.log")
    return str(out / "tests" / f"{log_name(profile)}.diag.log")


#: pytest's collection with a Python stack dump of every thread after this many seconds.
HANG_DUMP_SECONDS = 120


def diagnose_hang(profile: str, spec: dict[str, Any], out: Path, env: dict[str, str]) -> str | None:
    """Where a timed-out suite hangs: its collection once more, under faulthandler's
    `dump_traceback_later` (the stack names the download loop, the socket, ...)."""
    head, sep, args = spec["test_cmd"].rpartition("pytest ")
    if not sep:
        return None
    # a dup of stderr: pytest's fd capture replaces fd 2 during collection
    wrapper = (
        "python -c 'import faulthandler, os, sys; faulthandler.dump_traceback_later("
        f'{HANG_DUMP_SECONDS}, exit=True, file=os.fdopen(os.dup(2), "w")); import pytest; '
        "sys.exit(pytest.main(sys.argv[1:]))' "
    )
    sandbox_run(
        profile,
        out,
        env,
        f"{head}{wrapper}{args} --collect-only",
        f"{log_name(profile)}.diag.log",
        timeout=HANG_DUMP_SECONDS + 60,
    )
    return str(out / "tests" / f"{log_name(profile)}.diag.log")


#: Experiments on failing tests: each changes one thing in which the sandbox is known to
#: differ from the official image (or turns off one pytest feature); a probe that makes every
#: failing test file pass names the cause. `{cmd}` is the test command on the failing files.
PROBES = [
    ("ANSI colours off in the sandbox (TERM=dumb; the image has no TERM)", "unset TERM; {cmd}"),
    (
        "file mtimes are 0 in /testbed (deterministic archives; the image has checkout times)",
        "find /testbed -path /testbed/.git -prune -o -type f -exec touch -d 2020-01-01 {{}} + ; {cmd}",
    ),
    (
        "/tmp and /testbed are different mounts in the sandbox (rename: EXDEV)",
        "mkdir -p /testbed/.fidelity-tmp && export TMPDIR=/testbed/.fidelity-tmp; {cmd}",
    ),
    ("upstream: fails under pytest's assertion rewriting (passes with --assert=plain)", "{cmd} --assert=plain"),
]


def probe(profile: str, spec: dict[str, Any], out: Path, env: dict[str, str], files: list[str]) -> str | None:
    """The first PROBES entry under which the failing test files all pass, else None."""
    cmd = f"{spec['test_cmd']} " + " ".join(shlex.quote(f) for f in files)
    for i, (label, template) in enumerate(PROBES):
        text = sandbox_run(profile, out, env, template.format(cmd=cmd), f"{log_name(profile)}.probe{i}.log")
        counts = pytest_counts(text, {})
        if counts["source"] == "summary" and counts["passed"] and not counts["failed"] and not counts["errors"]:
            return label
    return None


# ---------------------------------------------------------------- failure classes


def read_logs(paths: list[str]) -> str:
    """The tails of a profile's workflow logs (mirror, resolve, build)."""
    return "\n".join(Path(p).read_text(errors="replace")[-20000:] for p in paths if Path(p).exists())


def classify_build(error: str, log_text: str) -> str:
    text = f"{error}\n{log_text}"
    checks = [
        # (before "mirror": the install's own fetch from GitHub fails the same way a clone does)
        (
            "build: the install needs the network (pre-commit fetches its hooks)",
            r"\[INFO\] Initializing environment for https?://",
        ),
        (
            "build: a git dependency's mirror lacks objects (fetch omits files of 4 MiB and more)",
            r"upload-pack: not our ref|could not fetch \w+ from promisor remote",
        ),
        ("mirror", r"mirror failed|git clone.*failed|Could not resolve host: github"),
        ("build: the spec's requirements file is not in the tree", r"requirements file .* not found in the snapshot"),
        ("build: pkg_resources missing (setuptools drift)", r"No module named '?pkg_resources"),
        (  # requests 0.7-0.9's setup.py imports the package, which imports `cookielib`
            "build: the code is Python 2's (the spec's Python 3 cannot run its setup.py)",
            r"No module named '(?:cookielib|urllib2|httplib|urlparse|StringIO|ConfigParser|Queue)'",
        ),
        (
            "build: build backend drift (today's release rejects the repo's config)",
            r"flit_core|\[tool\.flit\.metadata\]|ConfigError|invalid pyproject|backend.*(?:rejected|unsupported)",
        ),
        (
            "build: system package missing",
            r"fatal error: .*\.h: No such file|command '(?:gcc|cc|g\+\+)' failed|"
            r"pkg-config|missing system package|needs Debian packages that are not installed",
        ),
        (  # astropy 4.1-4.3: pip's isolated build environment takes today's markupsafe, which
            # removed `soft_unicode`, under the jinja2 2.x that astropy-helpers' build needs
            "build: the isolated build environment's unpinned markupsafe removed soft_unicode (jinja2 2.x)",
            r"cannot import name 'soft_unicode' from 'markupsafe'",
        ),
        (  # astropy 0.1: distribute_setup.py wants distribute 0.6.19 and downloads it from
            # a URL written in the file (pypi.python.org, not the build's index)
            "build: the tag's distribute_setup.py downloads distribute from a hard-coded pypi.python.org URL",
            r"distribute_setup\.py[\s\S]*(?:urlopen error|Name or service not known)",
        ),
        (  # astropy 0.2: its bundled pytest (astropy/extern/pytest.py) asserts an old `py`,
            # and the spec's pytest 3.3 brings py 1.11
            "build: the tag's bundled pytest refuses the spec's newer `py`",
            r"installation problem: [\d.]+ is too old, remove or upgrade 'py'",
        ),
        (  # astropy 1.3: astropy-helpers is a git submodule, which SWE-bench's image clones
            # from GitHub at install time (ah_bootstrap); a snapshot holds no submodule
            "build: a git submodule the install needs is not in the snapshot (astropy_helpers)",
            r"(?:pathspec '[\w./-]+' did not match any file\(s\) known to git[\s\S]*No source found for)|"
            r"An unexpected error occurred updating the git submodule",
        ),
        (  # astropy 0.1-1.3 pin markupsafe 1.0, an sdist whose setup.py imports
            # `setuptools.Feature` (gone since 46.0): the resolve builds it with the spec's
            # setuptools now (`resolve.build_constraints`), so only its own error counts
            "resolve: a pinned sdist needs a setuptools older than any the build may take (`Feature` removed)",
            r"building `[^`]+` failed: .*cannot import name 'Feature' from 'setuptools'",
        ),
        ("resolve: an exact pin is newer than the as-of date", r"could not find the pins .* as of .*unsatisfiable"),
        ("resolve: pins unsatisfiable", r"No solution found|unsatisfiable|No matching distribution"),
        ("build: timeout", r"timed out after"),
    ]
    for label, pattern in checks:
        if re.search(pattern, text, re.I):
            return label
    return "build: other (see log)"


#: Causes recognised in a test log (or its diagnostic re-run), most specific first. Each was
#: confirmed on a real profile; docs/fidelity.md explains them.
TEST_CAUSES = [
    (
        "install residue lost (file generated by the install missing in /testbed)",
        r"No module named '[\w.]*[._]version'|cannot import name '_?version'|_version\.py|PackageNotFoundError|"
        r"did not find a version",
    ),
    ("pkg_resources missing (setuptools drift)", r"No module named '?pkg_resources"),
    ("/tmp and /testbed on different mounts (rename: EXDEV)", r"Invalid cross-device link"),
    (
        # requests 2.9-2.22: `pytest.mark.xfail(...)` as a parametrize value; the spec's
        # unpinned `pytest` is today's, which refuses it, and collection stops there
        "collection error: a mark used as a parametrize value, refused by the spec's unpinned (newer) pytest",
        r"TypeError: object of type 'MarkDecorator' has no len\(\)",
    ),
    (
        # astropy 1.x at its tags: the spec pins pytest-remotedata, whose option the tag's
        # own test plugin adds too (the later commits SWE-bench's tasks are at leave it to
        # the plugin), and collection stops before any test
        "collection error: a pinned pytest plugin adds an option the code's own plugin adds (the spec's plugins are newer than the tag)",
        r"ValueError: option names \{'--[\w-]+'\} already added",
    ),
    (
        # astropy 0.3 at its tag: the spec's pytest-astropy-header imports a test helper
        # (`ignore_warnings`) the tag does not have yet, and pytest stops at start-up
        "the spec's pytest plugin is newer than the code: it imports a name the tag lacks",
        r'site-packages/pytest_\w+/\w+\.py", line \d+, in <module>\n\s*from [\w.]+ import [\w, ]+\n'
        r"ImportError: cannot import name",
    ),
    (
        # a conftest fixture that wraps the plugin's own (requests' `httpbin`) recurses without it
        "test plugin not installed: fixture not found (the spec does not install it)",
        r"fixture '\w+' not found|recursive dependency involving fixture '\w+' detected",
    ),
    # (a non-empty uncoloured text where colours were expected; not an unexpected coloured
    # warning compared with '', as sphinx's `assert '' == warning.getvalue()` shows it)
    ("ANSI colours off in the sandbox (TERM=dumb)", r"AssertionError: assert '[^'\n]+' == '[^'\n]*\\x1b\["),
    (
        # pvlib 0.6-0.9: `packages: pandas scipy` leaves numpy unpinned; as of the harness's
        # date PyPI's numpy is 2.0, which removed `np.Inf` (SWE-bench's conda numpy was 1.x)
        "the spec leaves numpy unpinned: numpy 2.0 removed an alias the code uses",
        r"was removed in the NumPy 2\.0 release",
    ),
    (
        # sphinx 4.5, 2.x: SWE-bench's spec pins sphinxcontrib-* for 4.0-4.4 only; the releases
        # the resolver then takes refuse to load into a Sphinx older than 5.0. Before docutils:
        # it fails every test app's build, where docutils' drift fails some assertions
        "the spec leaves sphinxcontrib-* unpinned: the releases it gets need a newer Sphinx",
        r"VersionRequirementError: The sphinxcontrib\.\w+ extension used by this project needs at least Sphinx",
    ),
    (
        # sphinx 1.6, 1.5: the spec leaves pytest unpinned; their fixtures call
        # `request.node.get_marker`, which pytest 4 removed (every test errs at set-up). Before
        # alabaster's, which these logs show a few times too
        "the spec leaves pytest unpinned: pytest 4 removed Node.get_marker, which the test fixtures call",
        r"'Function' object has no attribute 'get_marker'",
    ),
    (
        # sphinx 1.8: the spec leaves the alabaster theme unpinned; the release the resolver
        # takes refuses to load into a Sphinx older than 3.4 (every test app's build fails)
        "the spec leaves alabaster unpinned: the release it gets needs a newer Sphinx",
        r"VersionRequirementError: The alabaster extension used by this project needs at least Sphinx",
    ),
    (
        # pydicom 2.1+: its tests take data files from `get_testdata_file`, which downloads
        # the ones not in the repository (None offline, and `dcmread(None)` fails)
        "test data downloaded at run time (sandbox offline)",
        r"dcmread: Expected a file path or a file-like, but got NoneType",
    ),
    (
        # pydicom 1.4-2.1: test classes set up in nose-style `setup(self)`; the spec leaves
        # pytest unpinned, and pytest 8 (as of the harness's date) no longer calls them
        "the spec leaves pytest unpinned: pytest 8 no longer calls nose-style setup() methods",
        r"(?s)pytest-8\.\d.*AttributeError: 'Test\w+' object has no attribute '\w+'",
    ),
    (
        # sphinx 3.x: its HTML and warnings under docutils 0.18+ (`<figure>` for
        # `div.figure`, `traverse()` deprecated), which the spec leaves unpinned
        "the spec leaves docutils unpinned: the release it gets is newer than the code",
        r"div\[@class='figure align-default'\]|traverse\(\) is obsoleted by Node\.findall\(\)",
    ),
    (
        # requests 0.11's tests/test_requests_async.py: `from requests import async` (a keyword since 3.7)
        "the spec's Python is newer than the code: a test module does not compile under it",
        r"(?m)^E\s+SyntaxError: invalid syntax",
    ),
    (
        # requests 1.x: its bundled urllib3 passes `strict`, gone from http.client since 3.4
        "the spec's Python is newer than the code: http.client has no `strict` since Python 3.4",
        r"unexpected keyword argument 'strict'",
    ),
    (
        # astropy 5.1: the spec pins numpy 1.25, newer than the release; a test module's
        # import hits a NumPy deprecation, which the suite's `filterwarnings = error` raises
        "the spec's numpy is newer than the code: a NumPy deprecation the suite makes an error",
        r"DeprecationWarning: [^\n]*\(Deprecated NumPy \d",
    ),
    (
        # astropy 3.0-3.2: `np.int` and the other builtin aliases, removed in NumPy 1.24 (the
        # spec's numpy is newer than the release)
        "the spec's numpy is newer than the code: an alias NumPy 1.24 removed",
        r"module 'numpy' has no attribute '(?:int|float|bool|object|str|long|complex|unicode)'",
    ),
    (
        # sympy 1.0, 0.7: `from fractions import gcd`, removed in Python 3.9 (the spec's)
        "the spec's Python is newer than the code: it imports a name the standard library removed",
        r"ImportError: cannot import name '\w+' from '[\w.]+' \([^)]*/lib/python3\.\d+/(?!site-packages/)[^)]*\)",
    ),
    (
        "upstream: `executing` cannot read pytest-rewritten asserts on Python < 3.11",
        r"Failed to access the underlying source code for analysis",
    ),
    (
        "network needed by tests",
        r"Temporary failure in name resolution|Network is unreachable|"
        r"Name or service not known|ConnectionError|urlopen error",
    ),
]


#: The class of failures that the diagnostic rerun of their files alone does not repeat.
ORDER_DEPENDENT = "order-dependent: the failing tests pass when their files run alone"

#: A verbose pytest line of a test that did not fail, or a node of `--collect-only`'s tree
#: (`<Module test_prior_version.py>`); dropped before the causes are matched.
PASSING_LINE = re.compile(r"(?m)^\S+::\S.* (?:PASSED|SKIPPED|XFAIL|XPASS)\b.*$|^\s*<\w+ [^\n]*>$")


def own_missing_module(text: str, repo_tree: Path | None) -> tuple[str, str | None] | None:
    """A module of the project itself (`pkg.sub` with `pkg/` in the snapshot but no
    `pkg/sub`) that fails to import, and where the tree has a module of that name elsewhere
    in `pkg` (dotted), if it does. Not there at all: only the install can have made it, so
    its loss is install residue (e.g. pyfiglet's `pyfiglet/fonts`, copied by setup.py).
    Elsewhere: the module moved and a test still imports it by its old name (sqlfluff
    1.4's plugin example imports `sqlfluff.testing`, by then `sqlfluff.utils.testing`)."""
    if repo_tree is None or not repo_tree.is_dir():
        return None
    for mod in re.findall(r"No module named '([\w.]+)'", text):
        parts = mod.split(".")
        if len(parts) < 2:
            continue
        for base in (repo_tree, repo_tree / "src"):
            pkg = base.joinpath(*parts[:-1])
            leaf = pkg / parts[-1]
            if pkg.is_dir() and not leaf.exists() and not leaf.with_suffix(".py").exists():
                top = base / parts[0]
                moved = sorted(
                    ".".join(found.relative_to(base).with_suffix("").parts)
                    for found in [*top.rglob(parts[-1]), *top.rglob(parts[-1] + ".py")]
                    if found.is_file() or (found / "__init__.py").is_file()
                )
                return mod, (moved[0] if moved else None)
    return None


def classify_tests(result: dict[str, Any], repo_tree: Path | None = None) -> str | None:
    """None when no test failed; else the most specific cause the logs show (profiles that
    still reach the target get a class too: the table says which are broken)."""
    rate = result.get("pass_rate")
    if rate == 1.0 and not result.get("timed_out"):
        return None
    text = ""
    for key in ("test_log", "diag_log"):
        try:
            text += Path(result[key]).read_text(errors="replace") if result.get(key) else ""
        except OSError:
            pass
    if result.get("timed_out"):
        if re.search(r'File ".*(?:download|retry|urllib/request|socket|requests/)[^"]*"', text, re.I):
            return "timeout: test data downloaded at collection (sandbox offline)"
        return "timeout"
    if result.get("passes_alone"):
        return ORDER_DEPENDENT
    text = PASSING_LINE.sub("", text)  # (a passing test's name is no evidence: `test_version.py`)
    for label, pattern in TEST_CAUSES[:2]:
        if re.search(pattern, text):
            return label
    if missing := own_missing_module(text, repo_tree):
        mod, moved = missing
        if moved:
            return f"upstream: a test imports `{mod}`, which this tag has as `{moved}`"
        return f"install residue lost (`{mod}` made by the install, missing in /testbed)"
    if result.get("probe"):
        return result["probe"]
    for label, pattern in TEST_CAUSES[2:]:
        if re.search(pattern, text):
            return label
    if re.search(r"ModuleNotFoundError|ImportError", text):
        return "missing module"
    if re.search(r"Interrupted: \d+ errors? during collection|errors? during collection", text):
        return "collection error"
    if rate is None:
        return "unparseable log (no test-session output)"
    return "test failures (see not_passing)"


def meets_target(r: dict[str, Any]) -> bool:
    rate = r.get("pass_rate")
    return bool(r["built"]) and rate is not None and rate >= TARGET and not r.get("timed_out")


# ---------------------------------------------------------------- report


def rows(results: list[dict[str, Any]]) -> list[list[Any]]:
    out = []
    for r in results:
        rate = r.get("pass_rate")
        out.append(
            [
                r["profile"],
                "yes" if r["built"] else "NO",
                r.get("build_seconds"),
                r.get("test_seconds"),
                r.get("collected"),
                r.get("passed"),
                r.get("failed"),
                r.get("errors"),
                f"{rate * 100:.1f}%" if rate is not None else "-",
                ("" if meets_target(r) else "BROKEN: ") + (r.get("failure_class") or "")
                if r.get("failure_class")
                else "",
            ]
        )
    return out


HEADERS = [
    "profile",
    "built",
    "build s",
    "test s",
    "collected",
    "passed",
    "failed",
    "errors",
    "pass rate",
    "failure class",
]


def summary(results: list[dict[str, Any]]) -> dict[str, Any]:
    n = len(results)
    built = sum(r["built"] for r in results)
    good = sum(1 for r in results if meets_target(r))
    return {
        "profiles": n,
        "built": built,
        "meet_target": good,
        "built_pct": round(100 * built / n, 1) if n else 0.0,
        "meet_target_pct": round(100 * good / n, 1) if n else 0.0,
    }


def render(data: dict[str, Any], fmt: str = "github") -> str:
    results = data["results"]
    s = summary(results)
    commit = data["code"]["commit"]
    lines = [
        f"code: {data['code']['rev']} ({commit if ',' in commit else commit[:10]}"
        f"{', dirty' if data['code'].get('dirty') else ''})"
        f"; workflow {data['workflow']['seconds']} s (exit {data['workflow']['returncode']}); {data.get('date', '')}",
        "",
        tabulate(rows(results), headers=HEADERS, tablefmt=fmt),
        "",
        f"built: {s['built']}/{s['profiles']} ({s['built_pct']}%); built and >= {TARGET:.0%} pass rate: "
        f"{s['meet_target']}/{s['profiles']} ({s['meet_target_pct']}%); target: >= {TARGET:.0%} of profiles",
    ]
    if data.get("skipped"):
        lines.append("skipped (not benchmarked): " + "; ".join(f"{k}: {v}" for k, v in data["skipped"].items()))
    return "\n".join(lines)


def compare(before: dict[str, Any], after: dict[str, Any]) -> str:
    b = {r["profile"]: r for r in before["results"]}
    table = []
    for r in after["results"]:
        old = b.get(r["profile"])

        def fmt(x: dict[str, Any] | None) -> str:
            if x is None:
                return "-"
            if not x["built"]:
                return "not built"
            rate = x.get("pass_rate")
            return f"{rate * 100:.1f}%" if rate is not None else "no result"

        table.append(
            [r["profile"], fmt(old), (old or {}).get("failure_class") or "", fmt(r), r.get("failure_class") or ""]
        )
    sb, sa = summary(before["results"]), summary(after["results"])
    return "\n".join(
        [
            tabulate(table, headers=["profile", "before", "before class", "after", "after class"], tablefmt="github"),
            "",
            f"before ({before['code']['commit'][:10]}): built {sb['built']}/{sb['profiles']}, meet target "
            f"{sb['meet_target']}/{sb['profiles']} ({sb['meet_target_pct']}%)",
            f"after  ({after['code']['commit'][:10]}): built {sa['built']}/{sa['profiles']}, meet target "
            f"{sa['meet_target']}/{sa['profiles']} ({sa['meet_target_pct']}%)",
        ]
    )


def build_evidence_kept(result: dict[str, Any]) -> bool:
    """True when a failed build's cause can be read again: some of its logs are still on
    disk, or it has no stored cause. Logs are deleted with old runs; re-classifying from
    the one-line build error alone would replace the cause the run saw by a vaguer one."""
    return not result.get("failure_class") or any(Path(p).exists() for p in result.get("logs", []) if p)


def load_results(paths: str) -> dict[str, Any]:
    """One results.json, or several (comma-separated) runs merged into one table (a profile
    measured twice: the later file wins). Each result keeps the commit of the code it was
    measured with (`code_commit`), so runs of different code can be merged and still be told
    apart. Failure classes are recomputed from the saved logs (the classifier may have learnt
    more since the run); a result whose logs are gone keeps the class it was stored with."""
    runs = [json.loads(Path(p).read_text()) for p in paths.split(",") if p]
    data = dict(runs[0])
    if data.get("mode") == "swebench":  # builds deleted, logs kept
        data = merge_swebench(runs)
        for r in data["results"]:
            if not r["built"] and build_evidence_kept(r):
                r["failure_class"] = classify_build(r.get("build_error") or "", read_logs(r.get("logs", [])))
            elif r["built"] and Path(r.get("test_log", "")).exists():
                r["failure_class"] = classify_tests(r)
        return data
    latest: dict[str, dict[str, Any]] = {}
    for run in runs:
        for r in run["results"]:
            latest[r["profile"]] = {**r, "code_commit": r.get("code_commit") or run["code"]["commit"]}
    data["results"] = sorted(latest.values(), key=lambda r: r["profile"].lower())
    commits = list(dict.fromkeys(r["code_commit"] for r in data["results"]))
    if len(commits) > 1:
        data["code"] = {"rev": "several", "commit": ", ".join(c[:10] for c in commits), "dirty": False}
    data["workflow"] = {
        "seconds": round(sum(r["workflow"]["seconds"] for r in runs), 1),
        "returncode": max(r["workflow"]["returncode"] for r in runs),
    }
    data["skipped"] = {k: v for run in runs for k, v in run.get("skipped", {}).items()}
    for r in data["results"]:
        if not r["built"] and build_evidence_kept(r):
            r["failure_class"] = classify_build(r.get("build_error") or "", read_logs(r.get("logs", [])))
        elif r["built"] and Path(r.get("test_log", "")).exists():
            tree = r.get("repo_tree") or (
                r.get("repo_key") and str(Path(r["test_log"]).parents[1] / "run" / "work" / "repos" / r["repo_key"])
            )
            r["failure_class"] = classify_tests(r, Path(tree) if tree else None)
    return data


# ---------------------------------------------------------------- SWE-bench mode
#
# `--swebench`: the specs of config/catalog/swebench.yaml (one per repository and version, a
# minor series such as django 5.2 or requests 2.31), each built at the newest release tag of
# its series and run with the spec's test command on the whole suite, one spec at a time:
# build, test, record, delete the build. results.json is rewritten after every spec, so a
# stop loses nothing and a rerun with the same --out goes on where it stopped.

#: Measuring order: the pure-Python repositories first, then the rest, and last the ones
#: whose build compiles C/C++ for a long time on a small machine.
SWEBENCH_ORDER = [
    "psf/requests",
    "pallets/flask",
    "pytest-dev/pytest",
    "pylint-dev/pylint",
    "sphinx-doc/sphinx",
    "mwaskom/seaborn",
    "pydata/xarray",
    "sympy/sympy",
    "django/django",
    "marshmallow-code/marshmallow",
    "pylint-dev/astroid",
    "sqlfluff/sqlfluff",
    "pydicom/pydicom",
    "pvlib/pvlib-python",
    "pyvista/pyvista",
]
SWEBENCH_COMPILED = ["astropy/astropy", "matplotlib/matplotlib", "scikit-learn/scikit-learn"]

#: `minisandbox run` options for the suites: verbose runners (django, sympy, `-rA`) print
#: more than the default 8 MiB kept per command, and the counts are at the end.
SWEBENCH_RUN_ARGS = ("--max-output", "512M")

#: Wall-time cap of one suite (seconds); a capped suite reports the tests that ran.
SWEBENCH_CAP = 1200.0

_NUM = re.compile(r"\d+")
#: A release tag: an optional word prefix (`v`, `sympy-`) and a dotted version...
_RELEASE_TAG = re.compile(r"^(?:[A-Za-z]+[-_]?)?(\d+(?:\.\d+)+)(?P<pre>[.-]?(?:a|b|rc|alpha|beta|dev)\.?\d*)?$")


def version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in _NUM.findall(text))


def series_tag(tags: list[str], version: str) -> str | None:
    """The tag a SWE-bench version (a minor series: `2.31`, `2024.05`) is measured at: its
    newest final release (`v2.31.0`, `v2024.05.0`, `sympy-1.14.0`), else its newest
    pre-release (`8.0.0rc2`); None when no tag belongs to the series (e.g. a version that
    was never released, such as requests 3.0)."""
    candidates = series_tags(tags, version)
    return candidates[0] if candidates else None


def series_tags(tags: list[str], version: str) -> list[str]:
    """The release tags of a series, best first: final releases newest first, then
    pre-releases newest first."""
    want = version_tuple(version)
    finals: list[tuple[tuple[int, ...], str]] = []
    pres: list[tuple[tuple[int, ...], str]] = []
    for tag in tags:
        m = _RELEASE_TAG.match(tag)
        if m is None or version_tuple(m.group(1))[: len(want)] != want:
            continue
        (pres if m.group("pre") else finals).append((version_tuple(tag), tag))
    return [t for _, t in sorted(finals, reverse=True)] + [t for _, t in sorted(pres, reverse=True)]


def has_path(git_dir: Path, rev: str, path: str) -> bool:
    return (
        subprocess.run(
            ["git", "--git-dir", str(git_dir), "cat-file", "-e", f"{rev}:{path}"], capture_output=True
        ).returncode
        == 0
    )


def buildable_tag(git_dir: Path, spec: dict[str, Any], candidates: list[str]) -> tuple[str | None, str]:
    """The first candidate tag at which the spec's recipe can run: SWE-bench installs from
    the first of its requirements files that exists and stops when none does (flask 3.1.1
    and later dropped `requirements/dev.txt`, which the 3.1 spec names). Returns the tag
    and a note naming the newer tags passed over."""
    files = [*spec.get("requirements_files", []), *(spec.get("extra") or {}).get("requirements_files_alternatives", [])]
    if not files:
        return (candidates[0] if candidates else None), ""
    for i, tag in enumerate(candidates):
        if any(has_path(git_dir, f"refs/tags/{tag}", f) for f in files):
            note = f"newer {', '.join(candidates[:i])} lack(s) {' / '.join(files)}" if i else ""
            return tag, note
    return (candidates[0] if candidates else None), f"no tag of the series has {' / '.join(files)}"


def git_tags(git_dir: Path) -> list[str]:
    proc = subprocess.run(
        ["git", "--git-dir", str(git_dir), "for-each-ref", "--format=%(refname:short)", "refs/tags"],
        capture_output=True,
        text=True,
    )
    return proc.stdout.split()


def tag_commit(git_dir: Path, tag: str) -> str | None:
    proc = subprocess.run(
        ["git", "--git-dir", str(git_dir), "rev-parse", "--verify", "--quiet", f"refs/tags/{tag}^{{commit}}"],
        capture_output=True,
        text=True,
    )
    return proc.stdout.strip() or None


def swebench_order(names: list[str]) -> list[str]:
    """Spec names in measuring order: round robin over the repositories of SWEBENCH_ORDER
    (newest version of each first), then the other repositories, then SWEBENCH_COMPILED."""
    by_repo: dict[str, list[str]] = {}
    for name in names:
        by_repo.setdefault(name.split("@")[0], []).append(name)
    for versions in by_repo.values():
        versions.sort(key=lambda n: version_tuple(n.split("@")[1]), reverse=True)
    others = sorted(r for r in by_repo if r not in SWEBENCH_ORDER and r not in SWEBENCH_COMPILED)
    ordered: list[str] = []
    for group in (SWEBENCH_ORDER + others, SWEBENCH_COMPILED):
        queues = [list(by_repo.get(r, [])) for r in group]
        while any(queues):
            for q in queues:
                if q:
                    ordered.append(q.pop(0))
    return ordered


def swebench_plan(specs: dict[str, dict], mirrors: Path, python_missing) -> dict[str, Any]:
    """Every spec, sorted into: `planned` (measurable here, in measuring order, each with its
    tag and commit), `excluded` (no interpreter of the spec's Python can be had offline
    here) and `unavailable` (no repository under `mirrors`, no release tag of the series, or
    objects of the tag's tree missing). `python_missing(version)` -> why, or None."""
    planned: list[dict[str, Any]] = []
    excluded: dict[str, str] = {}
    unavailable: dict[str, str] = {}
    tags_of: dict[Path, list[str]] = {}
    for name in sorted(specs):
        spec = specs[name]
        if why := python_missing(str(spec["python"])):
            excluded[name] = f"Python {spec['python']}: {why}"
            continue
        git_dir = mirror_git_dir(mirrors, spec["source"])
        if git_dir is None:
            unavailable[name] = f"no repository for {spec['source']} under {mirrors}"
            continue
        tags = tags_of.setdefault(git_dir, git_tags(git_dir))
        version = name.split("@", 1)[1]
        tag, note = buildable_tag(git_dir, spec, series_tags(tags, version))
        commit = tag_commit(git_dir, tag) if tag else None
        if tag is None or commit is None:
            unavailable[name] = f"no release tag of the {version} series in {git_dir}"
            continue
        if missing := missing_objects(git_dir, commit):
            unavailable[name] = (
                f"{git_dir} lacks {missing} object(s) of {tag}'s tree (fetch snapshots omit files of 4 MiB and more)"
            )
            continue
        planned.append({"name": name, "tag": tag, "commit": commit, "git_dir": str(git_dir), "tag_note": note})
    rank = {n: i for i, n in enumerate(swebench_order([e["name"] for e in planned]))}
    return {"planned": sorted(planned, key=lambda e: rank[e["name"]]), "excluded": excluded, "unavailable": unavailable}


def swebench_task(name: str, commit: str) -> dict[str, Any]:
    """A SWE-bench record at the tag's clean state: base and environment setup commit are the
    tag's commit, the patch only adds an inert file, no test patch, no test lists."""
    repo, version = name.split("@", 1)
    return {
        "instance_id": task_id(name),
        "repo": repo,
        "version": version,
        "base_commit": commit,
        "environment_setup_commit": commit,
        "patch": CLEAN_PATCH,
        "test_patch": "",
        "FAIL_TO_PASS": [],
        "PASS_TO_PASS": [],
        "problem_statement": "clean start state (bench_fidelity)",
    }


def mounts_under(root: Path) -> list[str]:
    """Mount points at or under `root` (this mount namespace), innermost first."""
    base = str(root.resolve())
    points = set()
    with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as fh:
        for line in fh:
            point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), line.split()[4])
            if point == base or point.startswith(base + "/"):
                points.add(point)
    return sorted(points, reverse=True)


def unmount_under(root: Path) -> list[str]:
    """Lazily unmount what is still mounted under `root` (a stopped build's scratch mounts);
    returns what could not be unmounted."""
    for point in mounts_under(root):
        subprocess.run(["umount", "--lazy", point], capture_output=True)
    return mounts_under(root)


def release_cache(cache: Path, env: dict[str, str] | None = None) -> list[str]:
    """Unmount and remove a run's node cache, as `minisandbox cache clear --force` does
    (it ends sandboxes of the bench still leasing a layer); returns the mount points under
    `cache` that are still there afterwards (nothing should be: a mount left behind keeps a
    loop device and stops `rm -rf`). `cache gc` is not enough: it keeps leased layers and
    never stops the rootless mount holder."""
    if not cache.is_dir():
        return []
    proc = subprocess.run(
        [*MINISANDBOX, "cache", "clear", "--force", "--cache", str(cache)],
        capture_output=True,
        text=True,
        env={**(env or os.environ), "MINISANDBOX_HELPER": "off"},
    )
    left = unmount_under(cache)  # what the cache did not know of (a killed run's scratch mounts)
    if proc.returncode != 0 or left:
        print(
            f"bench_fidelity: cache clear {cache}: exit {proc.returncode} "
            f"{(proc.stderr or proc.stdout).strip()[-300:]}; mounts left: {', '.join(left) or 'none'}",
            file=sys.stderr,
            flush=True,
        )
    return left


def remove_build(d: Path) -> None:
    """Delete a measured spec's workflow run, store and cache (its logs stay): the cache's
    image mounts are released first, as a node's gc would."""
    release_cache(d / "cache")
    for sub in ("run", "store", "cache", "code"):
        subprocess.run(["rm", "-rf", "--one-file-system", str(d / sub)], capture_output=True)


@contextlib.contextmanager
def load_range(every: float = 30.0) -> Iterator[dict[str, str]]:
    """Samples the 1-minute load average while the block runs and leaves `"min-max"` under
    `"load"` in the yielded dict: on a shared machine a spec's seconds mean little without it."""
    seen = [os.getloadavg()[0]]
    done = threading.Event()

    def sample() -> None:
        while not done.wait(every):
            seen.append(os.getloadavg()[0])

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    out: dict[str, str] = {}
    try:
        yield out
    finally:
        done.set()
        thread.join()
        seen.append(os.getloadavg()[0])
        out["load"] = f"{min(seen):.1f}-{max(seen):.1f}"


def swebench_measure(
    entry: dict[str, Any], spec: dict[str, Any], code: Path, catalog: Path, out: Path, cap: float, keep: bool = False
) -> dict[str, Any]:
    """Build one spec at its tag through the real workflow, run its suite, classify a miss."""
    name = entry["name"]
    d = out / "specs" / log_name(name)
    if d.exists():  # an attempt that was stopped: start over
        remove_build(d)
        shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    # one store for all specs: an interpreter layer is packed once, not once per spec
    (out / "store").mkdir(exist_ok=True)
    (d / "store").symlink_to(out / "store")
    gitconfig = d / "gitconfig"
    # every fetched repository: an install may clone a submodule (astropy 1.3: astropy-helpers)
    urls = all_mirrors(Path(entry["git_dir"]).parent.parent)
    urls[spec["source"]] = Path(entry["git_dir"])
    write_gitconfig(gitconfig, urls)
    tasks = d / "tasks.jsonl"
    tasks.write_text(json.dumps(swebench_task(name, entry["commit"])) + "\n")
    env = code_env(code, gitconfig)
    workflow = run_workflow(code, d, tasks, catalog, 1, env)
    work = d / "run" / "work"
    report = read_json(d / "run" / "results" / "report.json") or {}
    try:
        keys = profile_keys(work).get(name, {})
    except (OSError, ValueError, KeyError):
        keys = {}
    repo, version = name.split("@", 1)
    r: dict[str, Any] = {
        "profile": name,
        "repo": repo,
        "version": version,
        "tag": entry["tag"],
        "tag_note": entry.get("tag_note", ""),
        "commit": entry["commit"],
        "python": str(spec["python"]),
        "cap_seconds": cap,
        **keys,
        **build_outcome(work, keys, report),
        "workflow": workflow,
    }
    if not r["built"] and not keys:
        r["build_error"] = r["build_error"] or "the workflow planned no environment (see snakemake.log)"
    jobs = job_seconds((d / "snakemake.log").read_text(errors="replace"))
    mine = {v for v in keys.values() if v}
    r["build_seconds"] = round(sum(j["seconds"] for j in jobs if mine & set(j["wildcards"].values())), 1) or None
    tree = work / "repos" / keys["repo_key"] if keys.get("repo_key") else None
    if r["built"]:
        r.update(run_tests(name, spec, d, env, cap, SWEBENCH_RUN_ARGS))
        r["capped"] = r["timed_out"]
        r["failure_class"] = classify_tests(r, tree)
        if (
            r.get("source") == "summary"
            and r.get("passed") == 0
            and spec.get("log_parser") in PYTEST_PARSERS
            and re.search(r"Interrupted: \d+ errors? during collection", Path(r["test_log"]).read_text())
        ):
            # pytest stops the whole session at a collection error: what would the rest give?
            text = sandbox_run(
                name,
                d,
                env,
                f"{spec['test_cmd']} --continue-on-collection-errors",
                f"{log_name(name)}.rest.log",
                timeout=cap,
            )
            rest = pytest_counts(text, load_parser(spec["log_parser"])(text))
            r["rest"] = {k: rest[k] for k in ("passed", "failed", "errors", "skipped", "pass_rate", "source")}
            r["rest"]["capped"] = rest["source"] == "progress"  # no final line: the cap cut it
    else:
        r["failure_class"] = classify_build(
            r["build_error"] or "", read_logs(r["logs"]) + (d / "snakemake.log").read_text(errors="replace")[-20000:]
        )
    saved = d / "logs"  # the workflow's logs of this spec outlive the build
    saved.mkdir(exist_ok=True)
    for i, p in enumerate(r["logs"]):
        dest = saved / f"{i}-{Path(p).parent.name}-{Path(p).name}"
        shutil.copyfile(p, dest)
        r["logs"][i] = str(dest)
    if not keep:
        remove_build(d)
    return r


def run_record(run: dict[str, Any]) -> list[dict[str, Any]]:
    """The runs a results.json is made of: its own `runs` (an earlier merge), else itself."""
    if run.get("runs"):
        return list(run["runs"])
    return [{k: run[k] for k in ("code", "date", "test_timeout", "mirrors") if k in run}]


def run_key(rec: dict[str, Any]) -> tuple[str, str]:
    """One run however often it was merged: its output folder's code copy and commit (a run
    merged again after it measured more keeps only its latest record)."""
    return rec["code"].get("root", ""), rec["code"]["commit"]


def merge_swebench(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """SWE-bench runs of several sessions as one: a spec measured again replaces its earlier
    result (the later file wins), each result keeps its `code_commit`, and a spec counts as
    planned when any run could plan it (runs may use mirrors completed to different extents),
    else as excluded or not measurable with the reason the first run that sorted it gave (a
    merged file comes first and keeps the reasons written for it)."""
    latest: dict[str, dict[str, Any]] = {}
    planned: dict[str, dict[str, Any]] = {}
    excluded: dict[str, str] = {}
    unavailable: dict[str, str] = {}
    for run in runs:
        for r in run["results"]:
            latest[r["profile"]] = {**r, "code_commit": r.get("code_commit") or run["code"]["commit"]}
        planned.update({e["name"]: e for e in run.get("planned", [])})
        excluded = {**run.get("excluded", {}), **excluded}
        unavailable = {**run.get("unavailable", {}), **unavailable}
    order = {n: i for i, n in enumerate(swebench_order(list(planned)))}
    data = dict(runs[-1])
    data.update(
        planned=sorted(planned.values(), key=lambda e: order[e["name"]]),
        excluded={k: v for k, v in sorted(excluded.items()) if k not in planned},
        unavailable={k: v for k, v in sorted(unavailable.items()) if k not in planned and k not in excluded},
        results=list(latest.values()),
        runs=list({run_key(rec): rec for run in runs for rec in run_record(run)}.values()),
    )
    commits = list(dict.fromkeys(r["code_commit"] for r in data["results"]))
    if len(commits) > 1:
        data["code"] = {"rev": "several", "commit": ", ".join(c[:10] for c in commits), "dirty": False}
    return data


def swebench_meets(r: dict[str, Any]) -> bool:
    """Built and >= 95% of what ran passed (a capped suite counts what ran before the cap)."""
    rate = r.get("pass_rate")
    return bool(r["built"]) and rate is not None and rate >= TARGET


def rest_note(r: dict[str, Any]) -> str:
    """What the suite gives past its collection errors (`--continue-on-collection-errors`);
    counted from progress characters means the cap cut that run before pytest's final line."""
    rest = r.get("rest")
    if not rest or rest.get("pass_rate") is None:
        return ""
    capped = rest.get("capped") or rest.get("source") == "progress"
    return (
        f"; past them: {rest['passed']} passed, {rest['failed']} failed, {rest['errors']} errors "
        f"({rest['pass_rate'] * 100:.1f}%{', capped' if capped else ''})"
    )


SWEBENCH_HEADERS = [
    "repo",
    "version",
    "tag (commit)",
    "python",
    "built",
    "build s",
    "test s",
    "collected",
    "passed",
    "failed",
    "errors",
    "skipped",
    "pass rate",
    "capped",
    "cause of a miss",
]


def render_swebench(data: dict[str, Any], fmt: str = "github") -> str:
    """The SWE-bench table, then the counts and the specs that were not measured (and why)."""
    results = data["results"]
    table = []
    for r in results:
        rate = r.get("pass_rate")
        table.append(
            [
                r["repo"],
                r["version"],
                f"{r['tag']} ({r['commit'][:10]})",
                r["python"],
                "yes" if r["built"] else "NO",
                r.get("build_seconds"),
                r.get("test_seconds"),
                r.get("collected"),
                r.get("passed"),
                r.get("failed"),
                r.get("errors"),
                r.get("skipped"),
                f"{rate * 100:.1f}%" if rate is not None else "-",
                (f"capped at {r['cap_seconds']:.0f} s" if r.get("cap_seconds") else "capped")
                if r.get("capped")
                else "",
                "" if swebench_meets(r) else (r.get("failure_class") or "") + rest_note(r),
            ]
        )
    done = {r["profile"] for r in results}
    waiting = [e["name"] for e in data["planned"] if e["name"] not in done]
    met = sum(swebench_meets(r) for r in results)
    causes: dict[str, int] = {}
    for r in results:
        if not swebench_meets(r):
            causes[r.get("failure_class") or "?"] = causes.get(r.get("failure_class") or "?", 0) + 1
    total = len(data["planned"]) + len(data["excluded"]) + len(data["unavailable"])
    commit = data["code"]["commit"]
    lines = [
        f"code: {data['code']['rev']} ({commit if ',' in commit else commit[:10]}"
        f"{', dirty' if data['code'].get('dirty') else ''})"
        f"; cap {data['test_timeout']:.0f} s per suite; {data.get('date', '')}",
        "",
        tabulate(table, headers=SWEBENCH_HEADERS, tablefmt=fmt, disable_numparse=True),  # 4.0 stays 4.0
        "",
        f"series (specs): {total}; measured: {len(results)}; built: {sum(r['built'] for r in results)}; "
        f">= {TARGET:.0%} pass rate: {met}/{len(results)}; excluded (interpreter): {len(data['excluded'])}; "
        f"not measurable here: {len(data['unavailable'])}; not measured (time): {len(waiting)}",
    ]
    if causes:
        lines.append("missed by cause: " + "; ".join(f"{k}: {v}" for k, v in sorted(causes.items())))
    for title, items in (("excluded", data["excluded"]), ("not measurable here", data["unavailable"])):
        if items:
            lines.append(f"{title}: " + "; ".join(f"{k} ({v})" for k, v in items.items()))
    if waiting:
        lines.append("not measured (time): " + ", ".join(waiting))
    return "\n".join(lines)


def python_checker():
    """`python_missing(version)` of the code under test: why no interpreter of that
    version can be had offline here (pyenv, uv's own, the system's), or None."""
    from minisandbox.sandbox import interpreters

    def python_missing(version: str) -> str | None:
        try:
            interpreters.find_interpreter(version)
        except Exception as exc:  # InterpreterNotFound (a MinisandboxError) in every layout
            return str(exc).splitlines()[0].split(" (have:")[0][:160]
        return None

    return python_missing


def code_trees(commit: str) -> str | None:
    """The git trees of what is measured (src, workflow, config) at `commit`: a rerun resumes
    the saved results when they are the same (a change to the bench itself does not count)."""
    proc = subprocess.run(
        ["git", "rev-parse", *(f"{commit}:{d}" for d in ("src", "workflow", "config"))],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    return " ".join(proc.stdout.split()) if proc.returncode == 0 else None


def swebench_main(args: argparse.Namespace) -> int:
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    if args.mirrors is None:
        raise SystemExit("bench_fidelity: --mirrors DIR is required to build (the folder of fetched repositories)")
    mirrors = args.mirrors.resolve()
    code, code_info = export_code(args.rev, out)
    sys.path.insert(0, str(code / "src"))  # the log parser and interpreter finder of the code under test
    catalog = code / "config" / "catalog" / "swebench.yaml"
    specs = {s["name"]: s for s in yaml.safe_load(catalog.read_text())["specs"]}
    results_path = out / "results.json"
    previous = read_json(results_path) or {}
    plan = swebench_plan(specs, mirrors, python_checker())
    # the selection says what this run measures; the plan (and the report's "not measured")
    # stays the whole catalog, named specs first in the order given
    selection = args.profiles or "all"
    chosen = {e["name"] for e in plan["planned"]}
    if selection != "all" and not selection.isdigit():
        wanted = [n.strip() for n in selection.split(",") if n.strip()]
        if unknown := [n for n in wanted if n not in specs]:
            raise SystemExit(f"bench_fidelity: not in the SWE-bench catalog: {', '.join(unknown)}")
        by_name = {e["name"]: e for e in plan["planned"]}
        plan["planned"] = [by_name[n] for n in wanted if n in by_name] + [
            e for e in plan["planned"] if e["name"] not in wanted
        ]
        chosen = set(wanted)
    elif selection.isdigit():
        chosen = {e["name"] for e in plan["planned"][: int(selection)]}
    code_info["trees"] = code_trees(code_info["commit"]) if not code_info.get("dirty") else None
    same = code_info["trees"] is not None and previous.get("code", {}).get("trees") == code_info["trees"]
    results = previous.get("results", []) if same else []
    data = {
        "mode": "swebench",
        "code": code_info,
        "mirrors": str(mirrors),
        "test_timeout": args.test_timeout,
        **plan,
        "results": results,
    }

    def save() -> None:
        data["date"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        tmp = results_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=1, default=str))
        tmp.replace(results_path)

    save()
    done = {r["profile"] for r in results}
    todo = [e for e in plan["planned"] if e["name"] not in done and e["name"] in chosen]
    print(
        f"bench_fidelity --swebench: {len(todo)} specs to measure ({len(done)} done), "
        f"{len(plan['excluded'])} excluded, {len(plan['unavailable'])} not measurable here",
        flush=True,
    )
    current: list[Path] = []

    def cleanup() -> None:  # a spec stopped halfway: its cache's mounts and leases, its build
        for d in current:
            remove_build(d)
        if STOP.asked.is_set():  # (--keep-builds keeps finished builds mounted on purpose)
            unmount_under(out)

    with stop_guard(cleanup):
        for entry in todo:
            if STOP.asked.is_set():  # a signal came during the last spec's own cleanup
                break
            t0 = time.monotonic()
            print(f"  {entry['name']} at {entry['tag']} ...", flush=True)
            current[:] = [out / "specs" / log_name(entry["name"])]
            with load_range() as load:
                r = swebench_measure(
                    entry, specs[entry["name"]], code, catalog, out, args.test_timeout, args.keep_builds
                )
            r.update(load)
            current.clear()
            data["results"].append(r)
            save()
            print(
                f"  {entry['name']}: built={r['built']} {r.get('passed')} passed, {r.get('failed')} failed, "
                f"{r.get('errors')} errors{' (capped)' if r.get('capped') else ''}; {r.get('failure_class') or ''} "
                f"[{time.monotonic() - t0:.0f} s, load {r['load']}]",
                flush=True,
            )
    print(render_swebench(data))
    print(f"\nresults: {results_path}")
    return 0


# ---------------------------------------------------------------- main


def build_and_test(
    args: argparse.Namespace,
    out: Path,
    code: Path,
    catalog: Path,
    specs: dict[str, dict],
    chosen: list[str],
    tasks: Path,
    env: dict[str, str],
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The workflow for the chosen profiles, then each built profile's suite (`--jobs` at once)."""
    if args.skip_build and (out / "workflow.json").exists():
        workflow = json.loads((out / "workflow.json").read_text())
    else:
        workflow = run_workflow(code, out, tasks, catalog, args.jobs, env)
        (out / "workflow.json").write_text(json.dumps(workflow, indent=1))
    print(f"bench_fidelity: workflow exit {workflow['returncode']} in {workflow['seconds']} s", flush=True)

    work = out / "run" / "work"
    report = read_json(out / "run" / "results" / "report.json") or {}
    try:
        keys = profile_keys(work)
    except (OSError, ValueError, KeyError) as exc:
        raise SystemExit(
            f"bench_fidelity: the workflow wrote no usable plan ({exc}); see {out / 'snakemake.log'}"
        ) from None
    jobs = job_seconds((out / "snakemake.log").read_text(errors="replace"))

    results: list[dict[str, Any]] = []
    for p in chosen:
        k = keys.get(p, {})
        r: dict[str, Any] = {"profile": p, **k, **build_outcome(work, k, report)}
        r["repo_tree"] = str(work / "repos" / k["repo_key"]) if k.get("repo_key") else None
        mine = {v for v in k.values() if v}
        r["build_seconds"] = round(sum(j["seconds"] for j in jobs if mine & set(j["wildcards"].values())), 1) or None
        results.append(r)

    def test_one(r: dict[str, Any]) -> None:
        if not r["built"]:
            return
        r.update(run_tests(r["profile"], specs[r["profile"]], out, env, args.test_timeout))
        print(
            f"  {r['profile']}: {r.get('passed')} passed, {r.get('failed')} failed, {r.get('errors')} errors "
            f"({r['test_seconds']} s)",
            flush=True,
        )

    map_stoppable(test_one, results, args.jobs)
    return results, workflow


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--mirrors",
        type=Path,
        help="folder of fetched repositories (<owner>+<repo>/repo, as the search tool's fetch lays them out)",
    )
    ap.add_argument(
        "--profiles", help="a count, `all`, or comma-separated profile names (default: 25; --swebench: all)"
    )
    ap.add_argument("--out", type=Path, help="output folder (workflow run, store, cache, logs, results.json)")
    ap.add_argument("--jobs", type=int, default=2, help="parallel builds and parallel test runs")
    ap.add_argument("--rev", help="benchmark this committed revision instead of the working tree")
    ap.add_argument("--code", type=Path, help="benchmark a copy of this checkout (no git needed) instead")
    ap.add_argument("--test-timeout", type=float, default=900.0, help="seconds for one profile's whole suite")
    ap.add_argument("--skip-build", action="store_true", help="reuse the workflow run already in --out")
    ap.add_argument("--report", help="only print the table of saved results.json files (comma-separated: merged)")
    ap.add_argument("--compare", help="results.json file(s) of an earlier run: print before/after")
    ap.add_argument(
        "--swebench",
        action="store_true",
        help="the SWE-bench specs (config/catalog/swebench.yaml) at release tags, one at a time; "
        "--profiles names specs (owner/repo@version) or a count; --test-timeout is the cap per "
        f"suite (default {SWEBENCH_CAP:.0f} s)",
    )
    ap.add_argument("--keep-builds", action="store_true", help="--swebench: keep each spec's build (default: delete)")
    args = ap.parse_args(argv)

    if args.report:
        data = load_results(args.report)
        if data.get("mode") == "swebench":
            print(render_swebench(data))
            return 0
        print(render(data))
        if args.compare:
            print("\n" + compare(load_results(args.compare), data))
        return 0
    if args.out is None:
        ap.error("--out is required (unless --report)")
    if args.swebench:
        if args.test_timeout == ap.get_default("test_timeout"):
            args.test_timeout = SWEBENCH_CAP
        return swebench_main(args)
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    if args.mirrors is None:
        raise SystemExit("bench_fidelity: --mirrors DIR is required to build (the folder of fetched repositories)")
    mirrors = args.mirrors.resolve()

    if args.skip_build and (args.rev or args.code):
        code, code_info = out / "code", json.loads((out / "code.json").read_text())
    elif args.code:
        code, code_info = copy_code(args.code.resolve(), out)
    else:
        code, code_info = export_code(args.rev, out)
    (out / "code.json").write_text(json.dumps(code_info, indent=1))
    sys.path.insert(0, str(code / "src"))  # the log parser of the code under test
    catalog = code / "config" / "catalog" / "swesmith.yaml"
    specs = {s["name"]: whole_suite(s) for s in yaml.safe_load(catalog.read_text())["specs"]}
    chosen, skipped = choose_profiles(specs, mirrors, args.profiles or "25")
    if not chosen:
        raise SystemExit(f"bench_fidelity: none of the selected profiles has a repository under {mirrors}")
    print(f"bench_fidelity: {len(chosen)} profiles, code {code_info['rev']} ({code_info['commit'][:10]})", flush=True)

    gitconfig = out / "gitconfig"
    # every fetched repository, not only the profiles': an install command may take a
    # dependency from GitHub (MONAI: segment-anything), as an offline cluster's mirror rules do
    urls = all_mirrors(mirrors)
    urls.update({specs[p]["source"]: mirror_git_dir(mirrors, specs[p]["source"]) for p in chosen})
    write_gitconfig(gitconfig, urls)
    tasks = out / "tasks.jsonl"
    tasks.write_text("".join(json.dumps(clean_task(p)) + "\n" for p in chosen))
    env = code_env(code, gitconfig)

    left: list[str] = []

    def cleanup() -> None:  # also when stopped: the cache's layer images are mounted (loop devices as root)
        left.extend(release_cache(out / "cache", env))
        left.extend(unmount_under(out))

    with stop_guard(cleanup):
        results, workflow = build_and_test(args, out, code, catalog, specs, chosen, tasks, env)

    for r in results:
        if not r["built"]:
            r["failure_class"] = classify_build(r["build_error"] or "", read_logs(r["logs"]))
        else:
            r["failure_class"] = classify_tests(r, Path(r["repo_tree"]) if r.get("repo_tree") else None)

    data = {
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "code": code_info,
        "workflow": workflow,
        "mirrors": str(mirrors),
        "test_timeout": args.test_timeout,
        "skipped": skipped,
        "results": results,
        "summary": summary(results),
        "mounts_left": left,
    }
    (out / "results.json").write_text(json.dumps(data, indent=1, default=str))
    print(render(data))
    if args.compare:
        print("\n" + compare(load_results(args.compare), data))
    print(f"\nresults: {out / 'results.json'}")
    return 0


def cli() -> int:
    """`main()` with the exit status of a stopping signal (128 + its number) once stopped."""
    try:
        code = main()
    except Stopped:
        code = 0
    return 128 + STOP.signum if STOP.signum else code


if __name__ == "__main__":
    sys.exit(cli())
