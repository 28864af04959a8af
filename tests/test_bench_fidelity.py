"""bench/bench_fidelity.py's SWE-bench mode on local fixtures (no network, no build): which
release tag a series is measured at, which specs are excluded or not measurable, the task
record it builds (accepted by the records reader and the catalog), the counts of a capped
suite and the table with its summary line."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from minisandbox.catalog import Catalog, spec_for, task_commit
from minisandbox.records import normalize

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def bf():
    spec = importlib.util.spec_from_file_location("bench_fidelity", ROOT / "bench" / "bench_fidelity.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["bench_fidelity"] = mod  # dataclass-free, but keep it importable by name
    spec.loader.exec_module(mod)
    return mod


def git(*args: str, cwd: Path) -> str:
    env = {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
        "HOME": str(cwd),
        "GIT_CONFIG_NOSYSTEM": "1",
        "PATH": "/usr/bin:/bin",
    }
    return subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=True).stdout.strip()


@pytest.fixture()
def mirrors(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """`<mirrors>/acme+lib/repo`, a bare repository as `fetch` brings it, with release tags of
    two series (and a pre-release, a later patch release, an unrelated tag); `req.txt`
    exists at v1.2.0 only."""
    work = tmp_path / "src"
    work.mkdir()
    git("init", "-q", "-b", "main", cwd=work)
    commits = {}
    for tag in ["v1.2.0", "v1.2.3", "v1.3.0rc1", "v1.10.0", "vendored-backup"]:
        (work / "f.txt").write_text(tag)
        if tag == "v1.2.0":
            (work / "req.txt").write_text("six\n")
        elif (work / "req.txt").exists():
            (work / "req.txt").unlink()
        git("add", "-A", cwd=work)
        git("commit", "-q", "-m", tag, cwd=work)
        git("tag", tag, cwd=work)
        commits[tag] = git("rev-parse", "HEAD", cwd=work)
    mirrors = tmp_path / "mirrors"
    (mirrors / "acme+lib").mkdir(parents=True)
    git("clone", "-q", "--bare", str(work), str(mirrors / "acme+lib" / "repo"), cwd=tmp_path)
    return mirrors, commits


def test_series_tag_is_the_newest_release_of_the_series(bf):
    tags = [
        "v2.31.0",
        "v2.3.0",
        "v2.3.1",
        "v2.31.0rc1",
        "v2.32.0",
        "vendored-mccabe-backup",
        "sympy-1.14.0",
        "sympy-1.14.0rc2",
        "v2024.05.0",
        "v2024.06.0",
        "8.0.0rc2",
        "8.0.0rc1",
    ]
    assert bf.series_tag(tags, "2.3") == "v2.3.1"  # not 2.31: series are matched by component
    assert bf.series_tag(tags, "2.31") == "v2.31.0"  # a final release beats its release candidate
    assert bf.series_tag(tags, "1.14") == "sympy-1.14.0"
    assert bf.series_tag(tags, "2024.05") == "v2024.05.0"
    assert bf.series_tag(tags, "8.0") == "8.0.0rc2"  # no final release: the newest pre-release
    assert bf.series_tag(tags, "3.0") is None


def test_plan_sorts_specs_into_planned_excluded_and_unavailable(bf, mirrors):
    root, commits = mirrors
    src = "https://github.com/acme/lib.git"
    specs = {
        "acme/lib@1.10": {"name": "acme/lib@1.10", "source": src, "python": "3.11"},
        "acme/lib@1.3": {"name": "acme/lib@1.3", "source": src, "python": "3.9"},
        "acme/lib@1.2": {"name": "acme/lib@1.2", "source": src, "python": "3.9", "requirements_files": ["req.txt"]},
        "acme/lib@2.0": {"name": "acme/lib@2.0", "source": src, "python": "3.9"},
        "acme/lib@0.9": {"name": "acme/lib@0.9", "source": src, "python": "3.5"},
        "other/gone@1.0": {"name": "other/gone@1.0", "source": "https://github.com/other/gone.git", "python": "3.9"},
    }
    plan = bf.swebench_plan(specs, root, lambda v: "no CPython 3.5 here" if v == "3.5" else None)
    assert [(e["name"], e["tag"], e["commit"]) for e in plan["planned"]] == [
        ("acme/lib@1.10", "v1.10.0", commits["v1.10.0"]),  # newest series first
        ("acme/lib@1.3", "v1.3.0rc1", commits["v1.3.0rc1"]),
        ("acme/lib@1.2", "v1.2.0", commits["v1.2.0"]),  # v1.2.3 lacks the spec's requirements file
    ]
    assert plan["planned"][2]["tag_note"] == "newer v1.2.3 lack(s) req.txt"
    assert plan["excluded"] == {"acme/lib@0.9": "Python 3.5: no CPython 3.5 here"}
    assert sorted(plan["unavailable"]) == ["acme/lib@2.0", "other/gone@1.0"]
    assert "no release tag of the 2.0 series" in plan["unavailable"]["acme/lib@2.0"]
    assert "no repository for https://github.com/other/gone.git" in plan["unavailable"]["other/gone@1.0"]


def test_order_puts_pure_python_repositories_first_round_robin(bf):
    names = [
        "astropy/astropy@5.2",
        "django/django@5.0",
        "django/django@5.2",
        "psf/requests@2.27",
        "psf/requests@2.31",
        "sympy/sympy@1.14",
        "acme/lib@1.0",
    ]
    assert bf.swebench_order(names) == [
        "psf/requests@2.31",
        "sympy/sympy@1.14",
        "django/django@5.2",
        "acme/lib@1.0",
        "psf/requests@2.27",
        "django/django@5.0",
        "astropy/astropy@5.2",
    ]


def test_task_is_a_swebench_record_at_the_tag(bf, tmp_path):
    commit = "0123456789abcdef0123456789abcdef01234567"
    record = normalize(bf.swebench_task("psf/requests@2.31", commit))
    assert record.format == "swebench"
    assert (record.repo, record.version, record.base_commit) == ("psf/requests", "2.31", commit)
    assert record.instance_id == "psf__requests-2.31.fidelity__clean000"
    catalog = tmp_path / "c.yaml"
    catalog.write_text(
        "specs:\n  - name: psf/requests@2.31\n    kind: swebench\n"
        "    source: https://github.com/psf/requests.git\n    commit: null\n    python: '3.9'\n"
    )
    spec = spec_for(Catalog.load([catalog]), record)
    assert spec.commit == commit and task_commit(spec, record) == commit


def test_capped_suite_counts_what_ran(bf):
    """A suite cut by the cap has no final summary: the per-test statuses count; django's
    `Found N test(s).` is the collected count."""
    log = "Found 5 test(s).\ntest_a (m.T) ... ok\ntest_b (m.T) ... ok\ntest_c (m.T) ... FAIL\n"
    parser = bf.load_parser("django")
    counts = bf.pytest_counts(log, parser(log))
    assert counts["collected"] == 5
    assert (counts["passed"], counts["failed"], counts["source"]) == (2, 1, "per-test")
    assert counts["pass_rate"] == round(2 / 3, 4)


def test_capped_coloured_progress_is_counted(bf):
    """tox forces colour on pytest (sphinx's `tox --current-env`): every progress character
    is wrapped in escape codes, and a capped run has no summary to fall back on."""

    def c(ch: str) -> str:
        return f"\x1b[32m{ch}\x1b[0m"

    log = (
        "py39: commands[0]> python -m pytest -rA\n\x1b[1m===== test session starts =====\x1b[0m\n"
        "collected 2279 items\n\n"
        f"tests/test_a.py {c('.') * 3}{c('s')}{c('.')}  [  0%]\x1b[0m\n"
        f"\x1b[0m{c('.') * 4}{c('F')}  [  1%]\x1b[0m\n"
        f"tests/test_b.py {c('.') * 2}minisandbox: command timed out after 600.0 s; killed its process tree\n"
    )
    counts = bf.pytest_counts(log, {})
    assert counts["source"] == "progress" and counts["collected"] == 2279
    assert (counts["passed"], counts["failed"], counts["skipped"]) == (8, 1, 1)


def test_summary_line_of_pytest_before_5_1_is_read(bf):
    """pytest < 5.1 ends with `in 4.73 seconds`: read as the summary, so a run stopped at a
    collection error is one (and the bench runs the rest past it)."""
    log = (
        "collected 2291 items / 1 errors / 2290 selected\n"
        "!!!!!!!!!!!!!!!!!!! Interrupted: 1 errors during collection !!!!!!!!!!!!!!!!!!!!\n"
        "=========================== 1 error in 4.73 seconds ============================\n"
    )
    counts = bf.pytest_counts(log, {"testing/python/metafunc.py": "FAILED"})
    assert counts["source"] == "summary" and (counts["passed"], counts["failed"], counts["errors"]) == (0, 0, 1)
    log = "collected 3 items\n\n===== 2 passed, 1 skipped in 0.12 seconds =====\n"
    assert bf.pytest_counts(log, {})["passed"] == 2


def test_capped_pytest_run_without_v_counts_its_progress_characters(bf):
    log = (
        "collected 9 items\n\ntests/test_a.py ..F.s  [ 50%]\n.Ex           [ 80%]\n"
        "tests/test_b.py ....minisandbox: command timed out after 1200.0 s; killed its process tree\n"
    )
    counts = bf.pytest_counts(log, {})
    assert counts["source"] == "progress" and counts["collected"] == 9
    assert (counts["passed"], counts["failed"], counts["errors"], counts["skipped"], counts["xfailed"]) == (
        4,
        1,
        1,
        1,
        1,
    )


def test_render_lists_counts_and_what_was_not_measured(bf):
    base = {"repo": "psf/requests", "python": "3.9", "built": True, "skipped": 0, "errors": 0}
    data = {
        "mode": "swebench",
        "code": {"rev": "HEAD", "commit": "abcdef0123456789"},
        "test_timeout": 1200.0,
        "planned": [
            {"name": n} for n in ("psf/requests@2.31", "psf/requests@2.27", "psf/requests@2.26", "psf/requests@2.25")
        ],
        "excluded": {"django/django@2.2": "Python 3.5: none"},
        "unavailable": {"psf/requests@3.0": "no tag"},
        "results": [
            {
                **base,
                "profile": "psf/requests@2.31",
                "version": "2.31",
                "tag": "v2.31.0",
                "commit": "c" * 40,
                "passed": 99,
                "failed": 1,
                "pass_rate": 0.99,
                "capped": True,
                "cap_seconds": 600.0,
            },
            {
                **base,
                "profile": "psf/requests@2.27",
                "version": "2.27",
                "tag": "v2.27.1",
                "commit": "d" * 40,
                "passed": 50,
                "failed": 50,
                "pass_rate": 0.5,
                "failure_class": "network needed by tests",
                "rest": {
                    "passed": 40,
                    "failed": 1,
                    "errors": 0,
                    "skipped": 0,
                    "pass_rate": 0.9756,
                    "source": "summary",
                },
            },
            {
                **base,
                "profile": "psf/requests@2.26",
                "version": "2.26",
                "tag": "v2.26.0",
                "commit": "e" * 40,
                "built": False,
                "failure_class": "build: system package missing",
            },
        ],
    }
    text = bf.render_swebench(data)
    assert (
        "series (specs): 6; measured: 3; built: 2; >= 95% pass rate: 1/3; excluded (interpreter): 1; "
        "not measurable here: 1; not measured (time): 1"
    ) in text
    assert "missed by cause: build: system package missing: 1; network needed by tests: 1" in text
    assert "not measured (time): psf/requests@2.25" in text
    assert "| v2.31.0 (cccccccccc) |" in text
    assert "| capped at 600 s |" in text  # the cap that suite ran under (runs may differ)
    data["results"][2]["version"] = "4.0"
    assert "| psf/requests | 4.0 " in bf.render_swebench(data)  # a version, not the number 4
    assert "network needed by tests; past them: 40 passed, 1 failed, 0 errors (97.6%)" in text
    # a run past the collection errors that the cap cut (counted from progress characters)
    data["results"][1]["rest"]["source"] = "progress"
    assert "past them: 40 passed, 1 failed, 0 errors (97.6%, capped)" in bf.render_swebench(data)


def _mounted(path: Path) -> bool:
    with open("/proc/self/mountinfo", encoding="utf-8") as fh:
        return any(line.split()[4] == str(path) for line in fh)


@pytest.mark.slow
@pytest.mark.root
def test_cleanup_unmounts_a_layer_that_gc_keeps(bf, tmp_path):
    """The bench's cleanup leaves no squashfs mount behind: a layer image mounted in the run's
    cache and leased by a live process (a sandbox of the bench still open, as a helper's spare
    was) is kept mounted by `cache gc`, the old cleanup; `release_cache` ends the holder,
    unmounts it and removes the cache."""
    import json
    import os
    import shutil
    import time

    from minisandbox.node.cache import Cache
    from minisandbox.sandbox.leftovers import proc_start

    if os.geteuid() != 0 or shutil.which("mksquashfs") is None:
        pytest.skip("needs root and mksquashfs (squashfs-tools)")
    src = tmp_path / "src"
    src.mkdir()
    (src / "f").write_text("layer")
    image = tmp_path / "img.sqfs"
    subprocess.run(["mksquashfs", str(src), str(image), "-quiet", "-noappend"], check=True, capture_output=True)
    cache = Cache(tmp_path / "cache")
    digest = "ab" * 32
    layer = cache.layers / digest
    layer.mkdir()
    holder = subprocess.Popen(["sleep", "300"])
    try:
        subprocess.run(["mount", "-t", "squashfs", "-o", "loop,ro", str(image), str(layer)], check=True)
        (cache.leases / digest).mkdir()
        (cache.leases / digest / "spare.json").write_text(
            json.dumps({"pid": holder.pid, "start": proc_start(holder.pid), "owner": "spare", "created": time.time()})
        )
        env = {**os.environ, "MINISANDBOX_CACHE": str(cache.root), "MINISANDBOX_HELPER": "off"}
        subprocess.run([*bf.MINISANDBOX, "cache", "gc", "--max-bytes", "0"], env=env, capture_output=True, check=True)
        assert _mounted(layer) and (layer / "f").read_text() == "layer"  # what the bench used to leave

        assert bf.release_cache(cache.root) == []
        assert not _mounted(layer) and bf.mounts_under(tmp_path) == []
        assert holder.wait(timeout=30) is not None and not cache.root.exists()
    finally:
        holder.kill()
        holder.wait()
        for point in bf.mounts_under(tmp_path):
            subprocess.run(["umount", "--lazy", point], capture_output=True)


def test_bench_runs_sandboxes_without_the_node_local_helper(bf, tmp_path):
    """A helper started by the bench's `run`s would outlive it and hold its images."""
    env = bf.code_env(tmp_path, tmp_path / "gitconfig")
    assert env["MINISANDBOX_HELPER"] == "off" and env["GIT_CONFIG_GLOBAL"] == str(tmp_path / "gitconfig")


@pytest.fixture(scope="module")
def cm():
    spec = importlib.util.spec_from_file_location("complete_mirror", ROOT / "bench" / "complete_mirror.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_complete_mirror_fills_missing_blobs_from_the_sdist_only_when_their_ids_match(cm, bf, tmp_path):
    """A snapshot that lacks two blobs of a tag (as `fetch` omits big files): the sdist's
    identical bytes are added, other bytes are not, and the original snapshot is untouched."""
    import io
    import tarfile

    work = tmp_path / "src"
    work.mkdir()
    git("init", "-q", "-b", "main", cwd=work)
    (work / "data").mkdir()
    (work / "data" / "big.bin").write_bytes(b"\x00big table\n" * 1000)
    (work / "data" / "other.bin").write_bytes(b"upstream bytes\n")
    (work / "small.py").write_text("x = 1\n")
    git("add", "-A", cwd=work)
    git("commit", "-q", "-m", "release", cwd=work)
    git("tag", "v1.0.0", cwd=work)
    snap = tmp_path / "snap.git"
    git("clone", "-q", "--bare", "--no-local", str(work), str(snap), cwd=tmp_path)
    git("--git-dir", str(snap), "repack", "-a", "-d", "-q", cwd=tmp_path)
    # drop the two data blobs from the snapshot: rewrite its pack without them
    big = git("rev-parse", "v1.0.0:data/big.bin", cwd=work)
    other = git("rev-parse", "v1.0.0:data/other.bin", cwd=work)
    keep = [
        line.split()[0]
        for line in git("--git-dir", str(snap), "rev-list", "--objects", "--all", cwd=tmp_path).splitlines()
        if line.split()[0] not in (big, other)
    ]
    subprocess.run(
        ["git", "--git-dir", str(snap), "pack-objects", "-q", str(tmp_path / "pack")],
        input="\n".join(keep) + "\n",
        text=True,
        check=True,
        capture_output=True,
    )
    for p in (snap / "objects" / "pack").iterdir():
        p.unlink()
    for p in tmp_path.glob("pack-*"):
        p.rename(snap / "objects" / "pack" / p.name)
    commit = git("rev-parse", "v1.0.0", cwd=work)
    assert bf.missing_objects(snap, commit) == 2
    sdist = tmp_path / "lib-1.0.0.tar.gz"
    with tarfile.open(sdist, "w:gz") as tf:
        for name, data in (("data/big.bin", b"\x00big table\n" * 1000), ("data/other.bin", b"sdist bytes\n")):
            info = tarfile.TarInfo(f"lib-1.0.0/{name}")
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    dest = tmp_path / "mirrors" / "acme+lib" / "repo"
    assert cm.main(["--git-dir", str(snap), "--out", str(dest), "--sdist", f"v1.0.0={sdist}"]) == 0
    assert cm.complete(snap, dest, [("v1.0.0", sdist)]) == [
        "v1.0.0: 1 missing, 0 filled from lib-1.0.0.tar.gz; still missing: data/other.bin (other bytes in the sdist)"
    ]
    assert bf.missing_objects(dest, commit) == 1 and bf.missing_objects(snap, commit) == 2
    assert bf.tag_commit(dest, "v1.0.0") == commit  # the upstream commit, not a rewrite
    blob = subprocess.run(["git", "--git-dir", str(dest), "cat-file", "blob", big], capture_output=True, check=True)
    assert blob.stdout == b"\x00big table\n" * 1000
    assert cm.main(["--git-dir", str(snap), "--out", str(dest), "--sdist", "v1.0.0"]) == 2
    # a commit no tag names (a SWE-smith profile commit), filled from a release's sdist
    by_commit = tmp_path / "mirrors2" / "acme+lib" / "repo"
    assert cm.complete(snap, by_commit, [(commit[:10], sdist)]) == [
        f"{commit[:10]}: 2 missing, 1 filled from lib-1.0.0.tar.gz; "
        "still missing: data/other.bin (other bytes in the sdist)"
    ]
    assert bf.missing_objects(by_commit, commit) == 1


def test_report_merges_runs_of_different_code_and_keeps_each_results_commit(bf, tmp_path):
    """Profiles measured one at a time over several sessions: one table, each result tagged with
    the commit it was measured at, and a profile measured again replaces its earlier result."""
    import json

    def run(commit: str, results: list[dict]) -> str:
        path = tmp_path / f"{commit}-{len(results)}.json"
        data = {
            "date": "2026-12-01T20:00:00Z",
            "code": {"rev": commit[:7], "commit": commit, "dirty": False},
            "workflow": {"seconds": 10.0, "returncode": 0},
            "results": results,
        }
        path.write_text(json.dumps(data))
        return str(path)

    def result(profile: str, built: bool, passed: int | None = None) -> dict:
        r = {"profile": profile, "built": built, "build_error": None if built else "boom", "logs": []}
        if built:
            r.update(passed=passed, failed=0, errors=0, pass_rate=1.0, test_log=str(tmp_path / "absent.log"))
        return r

    old, new = "a" * 40, "b" * 40
    first = run(old, [result("acme__lib.1", True, 5), result("acme__tool.2", False)])
    second = run(new, [result("acme__tool.2", True, 7)])
    data = bf.load_results(f"{first},{second}")
    by = {r["profile"]: r for r in data["results"]}
    assert by["acme__lib.1"]["code_commit"] == old and by["acme__lib.1"]["passed"] == 5
    assert by["acme__tool.2"]["code_commit"] == new and by["acme__tool.2"]["built"] and len(data["results"]) == 2
    assert data["workflow"]["seconds"] == 20.0
    text = bf.render(data)
    assert f"code: several ({old[:10]}, {new[:10]})" in text
    assert "built and >= 95% pass rate: 2/2" in text
    # one run keeps its own code line
    assert f"code: {old[:7]} ({old[:10]})" in bf.render(bf.load_results(first))


def test_sigterm_ends_the_running_suites_cancels_the_queued_ones_and_runs_the_cleanup(tmp_path):
    """A SIGTERM to the bench used to end it at once and skip its cleanup (the node cache's
    mounted images, leases and sandboxes stayed). Now: the running children are ended with
    their process groups (a grandchild that ignores SIGINT too, after the grace period), the
    queued suites never start, the cleanup runs to its end even when a second SIGTERM arrives
    during it, and the exit status is 128 + SIGTERM."""
    import os
    import signal
    import textwrap
    import time

    out = tmp_path / "out"
    out.mkdir()
    script = tmp_path / "stop.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import importlib.util, sys, time
            from pathlib import Path
            spec = importlib.util.spec_from_file_location("bench_fidelity", {str(ROOT / "bench" / "bench_fidelity.py")!r})
            bf = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(bf)
            bf.STOP_GRACE = 1.0
            out = Path({str(out)!r})

            def suite(i):
                # sh's background job ignores SIGINT: only the group's SIGKILL ends it
                bf.run_child(["sh", "-c", f"sleep 300 & echo $! > {{out}}/grandchild{{i}}; : > {{out}}/suite{{i}}; wait"])

            def cleanup():
                (out / "cleaning").write_text("")
                time.sleep(1.5)  # the test's second SIGTERM arrives now
                (out / "released").write_text("")

            def main():
                with bf.stop_guard(cleanup):
                    bf.map_stoppable(suite, range(4), 2)
                return 0

            bf.main = main
            sys.exit(bf.cli())
            """
        )
    )
    proc = subprocess.Popen([sys.executable, str(script)], stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not ((out / "grandchild0").exists() and (out / "grandchild1").exists()):
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read() if proc.poll() else ""
            time.sleep(0.05)
        grandchildren = [int((out / f"grandchild{i}").read_text()) for i in (0, 1)]
        proc.send_signal(signal.SIGTERM)
        while not (out / "cleaning").exists():
            assert time.monotonic() < deadline, "the cleanup did not start"
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 128 + signal.SIGTERM, proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert (out / "released").exists()  # the cleanup ran to its end
    assert not (out / "suite2").exists() and not (out / "suite3").exists()  # queued suites cancelled

    def alive(pid: int) -> bool:
        try:
            return (Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]) not in ("Z", "X")
        except OSError:
            return False

    for pid in grandchildren:
        if alive(pid):
            os.kill(pid, signal.SIGKILL)
            pytest.fail(f"the suite's grandchild {pid} outlived the bench")
    assert "SIGTERM: ending the running steps" in proc.stderr.read()


def test_failing_files_outside_the_rootdir_are_rerun_by_their_repository_path(bf):
    """mido's command has `-c /dev/null`: pytest's ids read `../dev/tests/...`, and the rerun
    with tracebacks found no such file."""
    assert bf.rerun_path("../dev/tests/midifiles/test_tracks.py") == "tests/midifiles/test_tracks.py"
    assert bf.rerun_path("../../a/b/t.py") == "b/t.py"
    assert bf.rerun_path("tests/test_x.py") == "tests/test_x.py"


def test_a_cap_that_strikes_after_pytests_final_line_did_not_cut_the_suite(bf, tmp_path, monkeypatch):
    """astroid's suite printed `1671 passed ... in 586.42s` and its process was still exiting
    when the 600 s cap struck: the suite ran whole, so it is not a timed-out suite. Without
    that line a capped suite stays timed out."""
    summary = "tests/a.py::test_x PASSED\n===== 1 passed, 2 skipped in 586.42s (0:09:46) =====\n"
    cut = "tests/a.py::test_x PASSED\ntests/a.py::test_y "
    for log, timed_out in ((summary, False), (cut, True)):
        monkeypatch.setattr(
            bf,
            "run_child",
            lambda cmd, log=log, **kw: subprocess.CompletedProcess(
                cmd, 124, stdout=log, stderr="minisandbox: command timed out after 600.0 s; killed its process tree\n"
            ),
        )
        r = bf.run_tests("p__q.1", {"test_cmd": "pytest", "log_parser": "pytest"}, tmp_path, {}, 600)
        assert (r["timed_out"], r["capped_after_summary"], r["passed"]) == (timed_out, not timed_out, 1)


def test_report_merges_swebench_runs_of_several_sessions(bf, tmp_path):
    """`--report a.json,b.json` of SWE-bench runs: one table of both runs' specs (the later
    run wins for a spec measured twice), each result keeps its commit, the runs are listed,
    and a spec one run could plan (a completed mirror) stays planned."""
    import json

    def result(name: str, passed: int) -> dict:
        repo, version = name.split("@")
        return {
            "profile": name,
            "repo": repo,
            "version": version,
            "tag": f"v{version}.0",
            "commit": "c" * 40,
            "python": "3.9",
            "built": True,
            "passed": passed,
            "failed": 0,
            "errors": 0,
            "pass_rate": 1.0,
            "test_log": str(tmp_path / "absent.log"),
        }

    def run(commit: str, date: str, planned: list[str], unavailable: dict, results: list[dict]) -> str:
        path = tmp_path / f"{commit[:3]}.json"
        data = {
            "mode": "swebench",
            "code": {"rev": "HEAD", "commit": commit, "dirty": False},
            "date": date,
            "test_timeout": 600.0,
            "planned": [{"name": n} for n in planned],
            "excluded": {"django/django@2.2": "Python 3.5: none"},
            "unavailable": unavailable,
            "results": results,
        }
        path.write_text(json.dumps(data))
        return str(path)

    old, new = "a" * 40, "b" * 40
    first = run(
        old,
        "2026-12-01T20:00:00Z",
        ["psf/requests@2.31", "psf/requests@2.27", "pvlib/pvlib-python@0.9"],
        {"psf/requests@3.0": "never released"},
        [result("psf/requests@2.31", 5), result("psf/requests@2.27", 1)],
    )
    second = run(
        new,
        "2026-12-02T13:00:00Z",
        ["psf/requests@2.31", "psf/requests@2.27", "psf/requests@2.26"],
        {"pvlib/pvlib-python@0.9": "snapshot lacks objects", "psf/requests@3.0": "no tag"},
        [result("psf/requests@2.27", 7), result("psf/requests@2.26", 3)],
    )
    data = bf.load_results(f"{first},{second}")
    by = {r["profile"]: r for r in data["results"]}
    assert sorted(by) == ["psf/requests@2.26", "psf/requests@2.27", "psf/requests@2.31"]
    assert by["psf/requests@2.31"]["code_commit"] == old and by["psf/requests@2.27"]["code_commit"] == new
    assert by["psf/requests@2.27"]["passed"] == 7
    assert [r["code"]["commit"] for r in data["runs"]] == [old, new]
    assert "pvlib/pvlib-python@0.9" in {e["name"] for e in data["planned"]}
    assert data["unavailable"] == {"psf/requests@3.0": "never released"}  # the first reason stays
    text = bf.render_swebench(data)
    assert f"code: several ({old[:10]}, {new[:10]})" in text
    assert "measured: 3;" in text and "not measured (time): pvlib/pvlib-python@0.9" in text
    # a merged file merges again without losing its runs, and with a run that measured
    # more since it was merged, without listing that run twice
    merged = tmp_path / "merged.json"
    merged.write_text(json.dumps(data))
    assert len(bf.load_results(str(merged))["runs"]) == 2
    later = json.loads(Path(second).read_text())
    later["date"] = "2026-12-02T14:00:00Z"
    Path(second).write_text(json.dumps(later))
    again = bf.load_results(f"{merged},{second}")["runs"]
    assert [r["date"] for r in again] == ["2026-12-01T20:00:00Z", "2026-12-02T14:00:00Z"]


def test_load_range_records_the_load_average_while_a_spec_runs(bf, monkeypatch):
    """The lowest and highest 1-minute load average sampled while the block ran."""
    loads = [3.0, 12.5, 7.25]
    calls: list[float] = []

    def getloadavg() -> tuple[float, float, float]:
        calls.append(loads[min(len(calls), len(loads) - 1)])
        return calls[-1], 0.0, 0.0

    monkeypatch.setattr(bf.os, "getloadavg", getloadavg)
    with bf.load_range(every=0.01) as load:
        deadline = bf.time.monotonic() + 10
        while len(calls) < 3 and bf.time.monotonic() < deadline:
            bf.time.sleep(0.01)
        assert "load" not in load
    assert load["load"] == "3.0-12.5"


def test_a_child_that_runs_out_of_time_gets_sigterm_first(bf, monkeypatch) -> None:
    """`run_child` ends a child past its timeout with SIGTERM (a `minisandbox run` closes its
    sandbox then), SIGKILL after the grace; the child does not inherit the signals
    `run_child` blocks while it registers it (it would never see SIGINT or SIGTERM)."""
    monkeypatch.setattr(bf, "TERM_GRACE", 30.0)
    mask = bf.run_child(
        [sys.executable, "-c", "print(open('/proc/self/status').read().split('SigBlk:')[1].split()[0])"],
        timeout=60,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert int(mask.stdout, 16) & ((1 << 1) | (1 << 14)) == 0  # SIGINT (2) and SIGTERM (15) unblocked
    handles = "import signal, sys, time; signal.signal(signal.SIGTERM, lambda *a: sys.exit(print('closed') or 3)); time.sleep(60)"
    with pytest.raises(subprocess.TimeoutExpired) as info:
        bf.run_child([sys.executable, "-c", handles], timeout=2, stdout=subprocess.PIPE, text=True)
    assert info.value.output == "closed\n"


def test_a_passing_tests_name_is_not_evidence_of_a_cause(bf, tmp_path):
    """dvc's `tests/func/test_version.py::test_ PASSED` once classified its unrelated
    failures as lost install residue (the pattern `_version\\.py`)."""
    log = tmp_path / "t.log"
    log.write_text(
        "tests/func/test_version.py::test_ PASSED [ 50%]\n"
        "tests/x/test_studio.py::test_post FAILED [ 80%]\n"
        "=== 1 failed, 1 passed in 1.0s ===\n"
    )
    result = {"pass_rate": 0.5, "test_log": str(log)}
    assert bf.classify_tests(result) == "test failures (see not_passing)"
    log.write_text(log.read_text() + "E   ModuleNotFoundError: No module named 'pkg._version'\n")
    assert bf.classify_tests(result).startswith("install residue lost")


def test_a_missing_module_of_the_project_is_residue_unless_it_moved(bf, tmp_path):
    """`pkg.sub` missing from a snapshot that has `pkg/`: install residue (pyfiglet's fonts,
    copied by setup.py), unless the tree has `sub` elsewhere in `pkg` (sqlfluff 1.4's plugin
    example imports `sqlfluff.testing`, by then `sqlfluff.utils.testing`): a stale test."""
    tree = tmp_path / "tree"
    (tree / "src" / "sqlfluff" / "utils" / "testing").mkdir(parents=True)
    (tree / "src" / "sqlfluff" / "utils" / "testing" / "__init__.py").write_text("")
    (tree / "pyfiglet").mkdir()
    log = tmp_path / "t.log"
    result = {"pass_rate": 0.0, "test_log": str(log)}
    log.write_text(
        "E   ModuleNotFoundError: No module named 'sqlfluff.testing'\nInterrupted: 1 error during collection\n"
    )
    assert (
        bf.classify_tests(result, tree)
        == "upstream: a test imports `sqlfluff.testing`, which this tag has as `sqlfluff.utils.testing`"
    )
    log.write_text(
        "E   ModuleNotFoundError: No module named 'pyfiglet.fonts'\nInterrupted: 1 error during collection\n"
    )
    assert (
        bf.classify_tests(result, tree)
        == "install residue lost (`pyfiglet.fonts` made by the install, missing in /testbed)"
    )


def test_sphinx_extensions_newer_than_the_spec_s_sphinx_are_named(bf, tmp_path):
    """sphinx 4.5's spec leaves sphinxcontrib-* unpinned: every build of a test app fails
    with their version requirement, under a traceback that also shows `except ImportError`."""
    log = tmp_path / "t.log"
    log.write_text(
        "            except ImportError as err:\n"
        "E       sphinx.errors.VersionRequirementError: The sphinxcontrib.applehelp extension used by "
        "this project needs at least Sphinx v5.0; it therefore cannot be built with this version.\n"
        "=== 31 failed, 420 passed, 1308 errors in 300.0s ===\n"
    )
    result = {"pass_rate": 0.24, "test_log": str(log)}
    assert (
        bf.classify_tests(result)
        == "the spec leaves sphinxcontrib-* unpinned: the releases it gets need a newer Sphinx"
    )


def test_colours_off_and_docutils_drift_are_told_apart(bf, tmp_path):
    """Colours expected but absent (TERM=dumb) is one cause; sphinx 3.4's unexpected coloured
    warnings compared with '' under a newer docutils are another."""
    log = tmp_path / "t.log"
    result = {"pass_rate": 0.5, "test_log": str(log)}
    log.write_text("E   AssertionError: assert 'hello' == '\\x1b[31mhello\\x1b[0m'\n=== 1 failed, 1 passed ===\n")
    assert bf.classify_tests(result) == "ANSI colours off in the sandbox (TERM=dumb)"
    log.write_text(
        "E   AssertionError: assert '' == '\\x1b[91mWARNING: node class 'meta' is already registered\\x1b[39;49;00m\\n'\n"
        "E   AssertionError: did not find any node matching xpath \".//div[@class='figure align-default']/p\" in file index.html\n"
        "=== 131 failed, 1487 passed ===\n"
    )
    assert bf.classify_tests(result) == "the spec leaves docutils unpinned: the release it gets is newer than the code"


def test_sphinxcontrib_drift_is_named_before_docutils_drift(bf, tmp_path):
    """sphinx 2.1-2.4 logs show both drifts; the sphinxcontrib one fails every test app's
    build (most of the failures), so it is the cause named."""
    log = tmp_path / "t.log"
    log.write_text(
        "E       AssertionError: did not find any node matching xpath \".//div[@class='figure align-default']/p\"\n"
        "E       sphinx.errors.VersionRequirementError: The sphinxcontrib.applehelp extension used by "
        "this project needs at least Sphinx v5.0; it therefore cannot be built with this version.\n"
        "=== 30 failed, 280 passed, 954 errors ===\n"
    )
    result = {"pass_rate": 0.22, "test_log": str(log)}
    assert (
        bf.classify_tests(result)
        == "the spec leaves sphinxcontrib-* unpinned: the releases it gets need a newer Sphinx"
    )


def test_an_alabaster_newer_than_the_spec_s_sphinx_is_named(bf, tmp_path):
    """sphinx 1.8's spec leaves the alabaster theme unpinned: every test app's build fails."""
    log = tmp_path / "t.log"
    log.write_text(
        "        except ImportError as err:\n"
        "E               sphinx.errors.VersionRequirementError: The alabaster extension used by this project "
        "needs at least Sphinx v3.4; it therefore cannot be built with this version.\n"
        "=== 33 failed, 261 passed, 1046 errors ===\n"
    )
    result = {"pass_rate": 0.19, "test_log": str(log)}
    assert bf.classify_tests(result) == "the spec leaves alabaster unpinned: the release it gets needs a newer Sphinx"


def test_pytest_s_removed_get_marker_is_named_before_alabaster(bf, tmp_path):
    """sphinx 1.6 and 1.5 under pytest 8: their fixtures call `get_marker` (960 errors on
    1.6), and a few builds meet the alabaster drift too (25): the first is the cause."""
    log = tmp_path / "t.log"
    log.write_text(
        "E       AttributeError: 'Function' object has no attribute 'get_marker'\n"
        "E   sphinx.errors.VersionRequirementError: The alabaster extension used by this project "
        "needs at least Sphinx v3.4; it therefore cannot be built with this version.\n"
        "=== 2 failed, 176 passed, 985 errors ===\n"
    )
    result = {"pass_rate": 0.15, "test_log": str(log)}
    assert (
        bf.classify_tests(result)
        == "the spec leaves pytest unpinned: pytest 4 removed Node.get_marker, which the test fixtures call"
    )


def test_pydicom_s_offline_data_and_nose_style_setup_are_named(bf, tmp_path):
    """pydicom 1.4-2.1 under pytest 8: nose-style `setup(self)` is not called (the test
    class has no attribute it sets); from 2.1 its downloaded test data is missing offline."""
    log = tmp_path / "t.log"
    head = "platform linux -- Python 3.8.18, pytest-8.2.2, pluggy-1.5.0\n"
    nose = "E       AttributeError: 'TestDataset' object has no attribute 'ds'\n"
    log.write_text(head + nose + "=== 216 failed, 1283 passed ===\n")
    result = {"pass_rate": 0.86, "test_log": str(log)}
    want = "the spec leaves pytest unpinned: pytest 8 no longer calls nose-style setup() methods"
    assert bf.classify_tests(result) == want
    log.write_text(head.replace("pytest-8.2.2", "pytest-7.4.4") + nose + "=== 1 failed ===\n")
    assert bf.classify_tests(result) != want  # (pytest 7 still calls them: another cause)
    offline = "E           TypeError: dcmread: Expected a file path or a file-like, but got NoneType\n"
    log.write_text(head + offline * 3 + nose + "=== 424 failed, 1351 passed ===\n")
    assert bf.classify_tests(result) == "test data downloaded at run time (sandbox offline)"


def test_numpy_2_removals_are_the_unpinned_numpys(bf, tmp_path):
    """pvlib's `import pvlib` under PyPI's numpy 2.0 stops collection at `np.Inf`."""
    log = tmp_path / "t.log"
    log.write_text(
        "E   AttributeError: `np.Inf` was removed in the NumPy 2.0 release. Use `np.inf` instead.\n"
        "!!!!!!!!!!!!!!!!!!!! Interrupted: 1 error during collection !!!!!!!!!!!!!!!!!!!!\n"
    )
    result = {"pass_rate": 0.0, "test_log": str(log)}
    assert bf.classify_tests(result) == "the spec leaves numpy unpinned: numpy 2.0 removed an alias the code uses"


def test_a_collection_error_is_classed_by_its_cause_before_what_the_rest_run_shows(bf, tmp_path):
    """requests 2.22's whole suite stops at a mark used as a parametrize value (today's
    pytest refuses it); past it, the run shows tests reaching for the network and a conftest
    fixture that wraps pytest-httpbin's, which the spec does not install."""
    log, diag = tmp_path / "t.log", tmp_path / "d.log"
    log.write_text(
        "E   TypeError: object of type 'MarkDecorator' has no len()\n"
        "ERROR tests/test_utils.py::TestSuperLen - TypeError: object of type 'MarkDeco...\n"
        "!!!!!!!!!!!!!!!!!!!! Interrupted: 1 error during collection !!!!!!!!!!!!!!!!!!!!\n"
    )
    diag.write_text(
        "E       recursive dependency involving fixture 'httpbin' detected\n"
        "E   requests.exceptions.ConnectionError: [Errno 101] Network is unreachable\n"
    )
    result = {"pass_rate": 0.0, "test_log": str(log), "diag_log": str(diag)}
    assert bf.classify_tests(result).startswith("collection error: a mark used as a parametrize value")
    result["test_log"] = str(diag)
    assert bf.classify_tests(result).startswith("test plugin not installed")


def test_code_older_than_the_specs_python_is_classed_so(bf, tmp_path):
    """requests 1.x under the spec's Python 3.9: every request fails in http.client."""
    log = tmp_path / "t.log"
    log.write_text("E   TypeError: __init__() got an unexpected keyword argument 'strict'\n")
    result = {"pass_rate": 0.3, "test_log": str(log)}
    assert bf.classify_tests(result).startswith("the spec's Python is newer than the code: http.client")
    log.write_text(  # requests 0.11: `async` is a keyword since Python 3.7
        'E     File "/testbed/tests/test_requests_async.py", line 14\n'
        "E       from requests import async\n"
        "E   SyntaxError: invalid syntax\n"
        "!!!!!!!!!!!!!!!!!!!! Interrupted: 1 error during collection !!!!!!!!!!!!!!!!!!!!\n"
    )
    assert bf.classify_tests(result).startswith("the spec's Python is newer than the code: a test module")


def test_failures_that_pass_when_their_files_run_alone_are_order_dependent(bf, tmp_path):
    diag = tmp_path / "d.log"
    diag.write_text("tests/x/test_studio.py::test_post PASSED [100%]\n=== 1 passed in 0.5s ===\n")
    assert bf.passes_alone(str(diag))
    result = {"pass_rate": 0.99, "test_log": str(diag), "diag_log": str(diag), "passes_alone": True}
    assert bf.classify_tests(result) == bf.ORDER_DEPENDENT
    diag.write_text("tests/x/test_studio.py::test_post FAILED [100%]\n=== 1 failed in 0.5s ===\n")
    assert not bf.passes_alone(str(diag))
    assert not bf.passes_alone(str(tmp_path / "missing.log"))


def test_a_runner_that_hands_over_to_pytest_is_counted_with_pytests_parser(bf):
    # sympy 1.14's bin/test prints pytest's lines; the spec keeps sympy's runner's parser
    log = (
        "collecting ... collected 3 items\n"
        "sympy/a/tests/test_x.py::test_one PASSED [ 33%]\n"
        "sympy/a/tests/test_x.py::test_two XFAIL [ 66%]\n"
        "sympy/a/tests/test_x.py::test_three FAILED [100%]\n"
        "minisandbox: command timed out after 1800.0 s; killed its process tree\n"
    )
    statuses, note = bf.suite_statuses("sympy", log)
    assert statuses == {
        "sympy/a/tests/test_x.py::test_one": "PASSED",
        "sympy/a/tests/test_x.py::test_two": "XFAIL",
        "sympy/a/tests/test_x.py::test_three": "FAILED",
    }
    assert "pytest parser" in note
    counts = bf.pytest_counts(log, statuses)
    assert (counts["passed"], counts["xfailed"], counts["failed"], counts["source"]) == (1, 1, 1, "per-test")
    # the runner's own format is read by its own parser, without a note
    own = "test_one ok\ntest_three F\n"
    statuses, note = bf.suite_statuses("sympy", own)
    assert note is None and statuses


@pytest.mark.parametrize(
    ("log", "cause"),
    [
        (  # pydantic's `make install` runs `pre-commit install --install-hooks`, which clones from GitHub
            "[INFO] Initializing environment for https://github.com/pre-commit/pre-commit-hooks.\n"
            "stderr:\n    fatal: unable to access 'https://github.com/pre-commit/pre-commit-hooks/': "
            "Could not resolve host: github.com\nmake: *** [Makefile:16: install] Error 3\n",
            "build: the install needs the network",
        ),
        (  # MONAI's segment-anything: the fetched snapshot lacks a notebook of 4 MiB and more
            "  fatal: remote error: upload-pack: not our ref 0c1d6dac9ef9fce429d99317055e0b24fdde2072\n"
            "  fatal: could not fetch 0c1d6dac9ef9fce429d99317055e0b24fdde2072 from promisor remote\n"
            "ERROR: No matching distribution found\n",
            "build: a git dependency's mirror lacks",
        ),
        ("fatal: Could not resolve host: github.com", "mirror"),
        (  # requests 0.7's setup.py under the spec's Python 3.9
            "      ModuleNotFoundError: No module named 'cookielib'\nerror: metadata-generation-failed\n",
            "build: the code is Python 2's",
        ),
    ],
)
def test_a_build_failure_of_the_install_is_told_from_a_mirror_failure(bf, log, cause):
    assert bf.classify_build("build of p failed (exit 2)", log).startswith(cause)


def test_a_test_command_ending_in_k_runs_the_whole_suite_without_it(bf):
    # SWE-smith's mypy profile: `pytest --color=no -rA -k` expects test names after it
    spec = {"name": "python__mypy.e93f06ce", "test_cmd": "conda activate testbed; pytest --color=no -rA -k"}
    assert bf.whole_suite(spec)["test_cmd"] == "conda activate testbed; pytest --color=no -rA"
    assert bf.whole_suite({"test_cmd": "pytest -k x"})["test_cmd"] == "pytest -k x"


def test_every_fetched_repository_is_a_mirror_rule(bf, tmp_path):
    # an install command may clone a dependency from GitHub (MONAI's segment-anything)
    for name in ("owner+proj", "facebookresearch+segment-anything"):
        (tmp_path / name / "repo").mkdir(parents=True)
        (tmp_path / name / "repo" / "HEAD").write_text("ref: refs/heads/main\n")
    (tmp_path / "stray").mkdir()
    urls = bf.all_mirrors(tmp_path)
    assert urls == {
        "https://github.com/facebookresearch/segment-anything.git": tmp_path
        / "facebookresearch+segment-anything"
        / "repo",
        "https://github.com/owner/proj.git": tmp_path / "owner+proj" / "repo",
    }
    bf.write_gitconfig(tmp_path / "gitconfig", urls)
    text = (tmp_path / "gitconfig").read_text()
    assert "insteadOf = https://github.com/facebookresearch/segment-anything.git" in text
    assert "insteadOf = https://github.com/facebookresearch/segment-anything\n" in text


def test_report_keeps_a_stored_cause_whose_logs_are_gone(bf, tmp_path):
    """`--report` classifies failures again from the saved logs; a result whose logs were
    deleted keeps the cause it was stored with instead of one guessed from its error line."""
    import json

    log = tmp_path / "build.log"
    log.write_text("      ModuleNotFoundError: No module named 'cookielib'\nerror: metadata-generation-failed\n")

    def failed(name: str, logs: list[str]) -> dict:
        repo, version = name.split("@")
        return {
            "profile": name,
            "repo": repo,
            "version": version,
            "tag": f"v{version}",
            "commit": "c" * 40,
            "python": "3.9",
            "built": False,
            "build_error": "build of p failed (exit 2)",
            "failure_class": "build: the code is Python 2's (stored)",
            "logs": logs,
        }

    data = {
        "mode": "swebench",
        "code": {"rev": "HEAD", "commit": "a" * 40, "dirty": False},
        "date": "2026-12-04T13:00:00Z",
        "test_timeout": 600.0,
        "planned": [],
        "excluded": {},
        "unavailable": {},
        "results": [
            failed("psf/requests@0.7", [str(tmp_path / "gone.log")]),
            failed("psf/requests@0.8", [str(log)]),
        ],
    }
    path = tmp_path / "run.json"
    path.write_text(json.dumps(data))
    by = {r["profile"]: r for r in bf.load_results(str(path))["results"]}
    assert by["psf/requests@0.7"]["failure_class"] == "build: the code is Python 2's (stored)"
    reclassified = by["psf/requests@0.8"]["failure_class"]
    assert reclassified.startswith("build: the code is Python 2's") and "(stored)" not in reclassified


def test_a_name_the_standard_library_removed_is_the_spec_s_newer_python(bf, tmp_path):
    """sympy 1.0 under the spec's Python 3.9: `from fractions import gcd` (removed in 3.9)
    stops every test module's import; a name missing from an installed package is not that."""
    log = tmp_path / "t.log"
    log.write_text(
        '  File "/testbed/sympy/ntheory/egyptian_fraction.py", line 6, in <module>\n'
        "    from fractions import gcd\n"
        "ImportError: cannot import name 'gcd' from 'fractions' "
        "(/root/.pyenv/versions/3.9.18/lib/python3.9/fractions.py)\n"
    )
    result = {"pass_rate": None, "test_log": str(log)}
    assert bf.classify_tests(result) == (
        "the spec's Python is newer than the code: it imports a name the standard library removed"
    )
    log.write_text(
        "ImportError: cannot import name 'soft_unicode' from 'markupsafe' "
        "(/opt/env/lib/python3.9/site-packages/markupsafe/__init__.py)\n"
    )
    assert bf.classify_tests(result) == "missing module"


def test_collect_only_tree_lines_are_no_evidence_and_a_numpy_deprecation_error_is_named(bf, tmp_path):
    """astropy 5.1: its diagnostic `--collect-only` lists `<Module test_prior_version.py>`,
    which is no lost `_version.py`; the collection errors are NumPy 1.25's deprecation made
    an error by the suite's warning filter."""
    log, diag = tmp_path / "t.log", tmp_path / "d.log"
    log.write_text(
        "E   DeprecationWarning: Conversion of an array with ndim > 0 to a scalar is deprecated, and will "
        "error in future. (Deprecated NumPy 1.25.)\n"
        "!!!!!!!!!!!!!!!!!!! Interrupted: 2 errors during collection !!!!!!!!!!!!!!!!!!!!\n"
    )
    diag.write_text("  <Module test_prior_version.py>\n    <Function test_c>\n")
    result = {"pass_rate": None, "test_log": str(log), "diag_log": str(diag)}
    assert bf.classify_tests(result) == (
        "the spec's numpy is newer than the code: a NumPy deprecation the suite makes an error"
    )
    log.write_text("!!!!!!!!!!!!!!!!!!! Interrupted: 2 errors during collection !!!!!!!!!!!!!!!!!!!!\n")
    assert bf.classify_tests(result) == "collection error"


def test_an_isolated_build_s_unpinned_markupsafe_is_named(bf):
    """astropy 4.1-4.3: the build requirements' jinja2 2.x under today's markupsafe."""
    log = (
        "  ImportError: cannot import name 'soft_unicode' from 'markupsafe' "
        "(/tmp/pip-build-env-x/overlay/lib/python3.9/site-packages/markupsafe/__init__.py)\n"
        "  error: subprocess-exited-with-error\n"
    )
    assert bf.classify_build("build of astropy/astropy@4.3 failed (exit 1)", log).startswith(
        "build: the isolated build environment's unpinned markupsafe"
    )


def test_removed_numpy_aliases_and_an_unbuildable_pinned_sdist_are_named(bf, tmp_path):
    """astropy 3.x: `np.int` under the spec's numpy 1.25; astropy 0.1-1.3: markupsafe 1.0's
    setup.py under any setuptools the build can take (when the resolve says so), and
    astropy-helpers, the git submodule a snapshot does not hold."""
    log = tmp_path / "t.log"
    log.write_text("E   AttributeError: module 'numpy' has no attribute 'int'.\n")
    assert bf.classify_tests({"pass_rate": 0.0, "test_log": str(log)}) == (
        "the spec's numpy is newer than the code: an alias NumPy 1.24 removed"
    )
    build = "error: Failed to build `markupsafe==1.0`\n  ImportError: cannot import name 'Feature' from 'setuptools'\n"
    error = (
        "uv could not resolve astropy/astropy@1.3: building `markupsafe==1.0` failed: "
        "ImportError: cannot import name 'Feature' from 'setuptools' (/x/setuptools/__init__.py)"
    )
    assert bf.classify_build(error, build).startswith("resolve: a pinned sdist needs a setuptools older")
    # the resolve's first compile fails so and its retry with the spec's setuptools succeeds:
    # that log is no evidence once the build fails for its own reason (astropy 1.3's submodule)
    install = (
        "  error: pathspec 'astropy_helpers' did not match any file(s) known to git\n"
        "  No source found for the 'astropy_helpers' package; astropy_helpers must be available\n"
    )
    assert bf.classify_build("build of astropy/astropy@1.3 failed (exit 1)", build + install) == (
        "build: a git submodule the install needs is not in the snapshot (astropy_helpers)"
    )
    assert bf.classify_build("build of astropy/astropy@1.3 failed (exit 1)", build) == "build: other (see log)"


def test_a_plugin_option_added_twice_is_named(bf, tmp_path):
    """astropy 1.3 at its tag: the spec's pytest-remotedata and astropy's own plugin both add
    `--remote-data`: collection stops with one error and no test."""
    log = tmp_path / "t.log"
    log.write_text("collected 0 items / 1 errors\nE   ValueError: option names {'--remote-data'} already added\n")
    assert bf.classify_tests({"pass_rate": 0.0, "test_log": str(log)}).startswith(
        "collection error: a pinned pytest plugin adds an option the code's own plugin adds"
    )


def test_old_bootstraps_of_astropy_0_1_and_0_2_are_named(bf):
    """astropy 0.1 downloads distribute from a URL in distribute_setup.py; astropy 0.2's
    bundled pytest refuses the spec's py 1.11."""
    error = "build of astropy/astropy@0.1 failed (exit 1)"
    log = (
        '  File "/testbed/distribute_setup.py", line 193, in download_setuptools\n'
        "  urllib.error.URLError: <urlopen error [Errno -2] Name or service not known>\n"
    )
    assert bf.classify_build(error, log).startswith("build: the tag's distribute_setup.py downloads")
    log = "  AssertionError: installation problem: 1.11.0 is too old, remove or upgrade 'py'\n"
    assert bf.classify_build(error, log) == "build: the tag's bundled pytest refuses the spec's newer `py`"


def test_a_plugin_newer_than_the_code_is_named(bf, tmp_path):
    """astropy 0.3 at its tag: pytest-astropy-header imports `ignore_warnings` from
    astropy.tests.helper, which the tag does not have."""
    log = tmp_path / "t.log"
    log.write_text(
        '  File "/opt/miniconda3/envs/testbed/lib/python3.6/site-packages/pytest_astropy_header/display.py", '
        "line 16, in <module>\n    from astropy.tests.helper import ignore_warnings\n"
        "ImportError: cannot import name 'ignore_warnings'\n"
    )
    assert bf.classify_tests({"pass_rate": None, "test_log": str(log)}) == (
        "the spec's pytest plugin is newer than the code: it imports a name the tag lacks"
    )
