"""End to end: the real Snakemake workflow on local git repos, a real uv build in a mount
namespace, a real local store. One workspace per test module keeps the suite fast."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from minisandbox.fsutil import file_digest
from minisandbox.node import published
from minisandbox.node.restore import extract
from minisandbox.node.store import Store
from minisandbox.paths import REPO_PATH, VENV_PATH
from minisandbox.sandbox import rootfs
from minisandbox.sandbox.interpreters import find_prefix
from tests.fixtures.pipeline import jobs_in, make_workspace

pytestmark = [pytest.mark.slow, pytest.mark.root]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The workflow with archives too (`archive=true`): the tests below unpack them by hand.
    The default (images as chunks only, no archive) is `test_images_are_published_and_verified`.
    Run once for the module (a full build each was most of this file's time): the tests
    that change the workspace (a spec, more tasks) come after the ones that only read it,
    and each leaves it built."""
    ws = make_workspace(tmp_path_factory.mktemp("built"))
    ws.config = ("archive=true",)
    proc = ws.snakemake()
    return ws, proc


@pytest.fixture(scope="module")
def validated(tmp_path_factory):
    """The workflow with the default config's layers (images as chunks, no archive) and
    validation on: one build, read by `test_images_are_published_and_verified` and then
    extended by `test_validation_reuses_results_of_unchanged_tasks` (which comes after it and
    is the only test that changes it). Each of the two used to make this same build itself."""
    ws = make_workspace(tmp_path_factory.mktemp("validated"))
    ws.snakemake(config=("validate=true",))
    return ws


def _catalog(ws) -> dict:
    return published.read_catalog(Store(str(ws.store)))


def test_full_run_publishes_verified_artifacts_and_index(built):
    ws, proc = built
    store = Store(str(ws.store))
    cat = _catalog(ws)
    # one good env, one broken env (recorded, not fatal), one repo snapshot shared by both
    statuses = {e["spec_name"]: e["status"] for e in cat["envs"].values()}
    assert statuses == {"tiny__calc.good": "ok", "tiny__calc.broken": "failed"}
    assert len(cat["repos"]) == 1
    broken = next(e for e in cat["envs"].values() if e["status"] == "failed")
    assert "exit" in broken["error"] and broken["log"]
    assert "exit 3" in store.read_text(broken["log"])  # the failed build's log is published
    # every ok artifact: archive present, digest and size as in its manifest
    for kind in ("envs", "repos"):
        for key, entry in cat[kind].items():
            if entry["status"] != "ok":
                continue
            m = entry["manifest"]
            local = ws.path / "dl" / m["artifact"]
            local.parent.mkdir(exist_ok=True)
            store.get_file(f"artifacts/{m['kind']}/{m['artifact']}", local)
            assert file_digest(local) == (m["sha256"], m["size"])
            assert json.loads(store.read_text(f"artifacts/{m['kind']}/{key}.manifest.json")) == m
    # tasks: 2 ready, 1 env-failed; the malformed record is reported, not dropped
    assert published.lookup(store, "tiny__calc.good.sub__aaaa0001")["status"] == "ready"
    assert published.lookup(store, "tiny__calc.broken.sub__bbbb0001")["status"] == "env-failed"
    assert cat["counts"]["tasks"] == 3 and cat["counts"]["tasks_ready"] == 2
    assert [r["line"] for r in cat["invalid_records"]] == [4]
    assert cat["invalid_records"][0]["field"] == "patch"
    assert "INVALID" in proc.stdout + proc.stderr
    # nothing half-written is visible
    assert not [p for p in ws.store.rglob("*") if ".tmp" in p.name]


def test_snapshot_has_no_later_history(built):
    ws, _ = built
    snap = next((ws.path / "work" / "repos").glob("repo-*[!n]"))
    log = subprocess.run(["git", "log", "--all", "--oneline"], cwd=snap, capture_output=True, text=True).stdout
    assert len(log.splitlines()) == 1
    assert subprocess.run(["git", "tag"], cwd=snap, capture_output=True, text=True).stdout == ""
    assert not (snap / "NEWS").exists()  # file of the later commit


def test_rerun_runs_zero_jobs(built):
    ws, _ = built
    proc = ws.snakemake("-n")
    assert "Nothing to be done" in proc.stdout + proc.stderr, proc.stdout[-2000:]


def test_spec_change_rebuilds_only_that_env_and_index(built):
    ws, _ = built
    ws.specs[0]["install"] = ["python -m pip install -e .", "echo changed"]
    ws.write_catalog()
    proc = ws.snakemake("-n")
    jobs = jobs_in(proc.stdout + proc.stderr)
    assert jobs.get("env") == 1 and jobs.get("index") == 1, (
        jobs,
        (proc.stdout + proc.stderr)[-3000:],
    )  # one job builds and publishes the new env
    assert "repo" not in jobs, jobs
    ws.snakemake()
    cat = _catalog(ws)
    ok = [e for e in cat["envs"].values() if e["status"] == "ok"]
    assert len(ok) == 1 and ok[0]["manifest"]["spec"]["install"][-1] == "echo changed"


def test_restored_elsewhere_runs_repo_tests(built, tmp_path):
    """Unpack both artifacts under an unrelated host path, bind them at the canonical paths
    and run the project's test suite: the venv works without relocation."""
    ws, _ = built
    store = Store(str(ws.store))
    entry = published.lookup(store, "tiny__calc.good.sub__aaaa0001")
    cat = _catalog(ws)
    layers = {}
    for kind, key in (("env", entry["env_key"]), ("repo", entry["repo_key"])):
        m = cat[f"{kind}s"][key]["manifest"]
        archive = tmp_path / m["artifact"]
        store.get_file(f"artifacts/{kind}/{m['artifact']}", archive)
        dest = tmp_path / "elsewhere" / kind
        dest.mkdir(parents=True)
        extract(archive, m["format"], dest)
        layers[m["mount_path"]] = dest
    interp = cat["envs"][entry["env_key"]]["manifest"]["interpreter"]
    # The original build tree is gone: nothing can silently fall back to it.
    assert not (ws.path / "work" / "envs" / entry["env_key"]).exists()
    out = tmp_path / "out.txt"
    with out.open("w") as fh:
        rc = rootfs.run(
            [
                rootfs.Bind(str(layers[REPO_PATH]), REPO_PATH, readonly=False),
                rootfs.Bind(str(layers[VENV_PATH]), VENV_PATH, readonly=False),
                rootfs.Bind(find_prefix(interp["version"]), interp["prefix"], readonly=True),
                rootfs.Bind(str(write_activate(tmp_path)), "/opt/miniconda3/bin", readonly=True),
            ],
            [
                "/bin/bash",
                "-c",
                "source /opt/miniconda3/bin/activate; conda activate testbed; "
                "python -c 'import sys, tinycalc; print(sys.prefix, tinycalc.__file__)'; "
                "pytest --disable-warnings --color=no --tb=no --verbose",
            ],
            env={"PATH": "/usr/bin:/bin", "HOME": "/tmp"},
            cwd=REPO_PATH,
            network="none",
            stdout=fh,
            stderr=fh,
        )
    text = out.read_text()
    assert rc == 0, text
    assert f"{VENV_PATH} {REPO_PATH}/tinycalc/__init__.py" in text
    assert "4 passed" in text


def write_activate(tmp_path: Path) -> Path:
    from minisandbox.sandbox.conda_shim import write_shim

    d = tmp_path / "conda-bin"
    write_shim(d)
    return d


def test_adding_tasks_for_built_envs_rebuilds_only_the_index(built):
    ws, _ = built
    from tests.fixtures.pipeline import task

    before = _catalog(ws)["counts"]["tasks"]
    with ws.tasks.open("a") as fh:
        for i in range(20):
            fh.write(json.dumps(task(f"tiny__calc.good.new__cccc{i:04d}", "tiny__calc.good")) + "\n")
    proc = ws.snakemake("-n")
    jobs = jobs_in(proc.stdout + proc.stderr)
    assert jobs == {"index": 1, "all": 1, "total": 2}, jobs
    ws.snakemake()
    assert before == 3 and _catalog(ws)["counts"]["tasks"] == 23
    assert published.lookup(Store(str(ws.store)), "tiny__calc.good.new__cccc0007")["status"] == "ready"


def test_images_are_published_and_verified(validated, tmp_path, monkeypatch):
    """The default config (`images=true`, `image_whole=false`, `archive=false`; validation on): each image
    is published as chunks plus a chunk list named in the manifest, not as one file, and no
    archive; `minisandbox verify` checks every chunk; a root node assembles the image from
    the chunks, checks it, mounts it and runs the task; the venv's .pyc files are valid
    inside the mounted image (normalize_tree); a node that does not mount unpacks the image."""
    from minisandbox.node.chunks import ChunkedImage, fetch_listed, read_chunk_list

    ws = validated  # only read here
    store = Store(str(ws.store))
    cat = _catalog(ws)
    # no archive of a repo or env layer (the interpreter layer has no image: it keeps its archive)
    assert not [p for kind in ("env", "repo") for p in (ws.store / "artifacts" / kind).glob("*.tar.*")]
    assert list((ws.store / "artifacts" / "interp").glob("*.tar.zst"))
    for kind in ("envs", "repos"):
        for entry in cat[kind].values():
            if entry["status"] != "ok":
                continue
            assert "artifact" not in entry["manifest"] and "sha256" not in entry["manifest"]
            img = entry["manifest"]["image"]
            assert img["format"] == "squashfs" and img["whole"] is False
            assert not store.exists(f"artifacts/{entry['manifest']['kind']}/{img['artifact']}")  # chunks only
            ref = ChunkedImage.from_manifest(entry["manifest"])
            cl = read_chunk_list(store, ref)
            local = tmp_path / img["artifact"]
            with local.open("wb") as fh:
                for i in range(len(cl.chunks)):
                    fh.write(fetch_listed(store, cl, i, ref.what))  # from its pack, checked
            assert file_digest(local) == (img["sha256"], img["size"])
    proc = subprocess.run(["minisandbox", "verify", str(ws.store)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    from minisandbox.task import open_task

    cache = tmp_path / "cache"

    def mounts() -> list[str]:
        return [line for line in Path("/proc/self/mounts").read_text().splitlines() if str(cache) in line]

    try:
        with open_task("tiny__calc.good.sub__aaaa0001", str(ws.store), cache=str(cache)) as ts:
            assert len([m for m in mounts() if " squashfs " in m]) == 2, mounts()  # env + repo images
            out = ts.sandbox.run(["python", "-c", "import tinycalc; print(tinycalc.add(2, 3), tinycalc.sub(5, 3))"])
            assert out.output.split() == ["5", "8"], out.output  # the task's bug (sub adds) is in place
            out = ts.sandbox.run(["python", "-c", PYC_CHECK])
            valid, stale = map(int, out.output.split()[-2:])
            assert valid > 100 and stale == 0, out.output  # no sandbox recompiles the venv's modules
        subprocess.run(
            ["minisandbox", "cache", "gc", "--max-bytes", "0"],
            check=True,
            capture_output=True,
            env={**os.environ, "MINISANDBOX_CACHE": str(cache)},
        )
        assert not mounts()  # gc unmounts unleased images
        # a node that does not mount images (MINISANDBOX_IMAGES=0; no loop devices, no squashfuse)
        monkeypatch.setenv("MINISANDBOX_IMAGES", "0")
        with open_task("tiny__calc.good.sub__aaaa0001", str(ws.store), cache=str(cache)) as ts:
            assert not mounts()
            layers = {p.name for p in (cache / "layers").iterdir() if p.is_dir()}
            images = {
                entry["manifest"]["image"]["sha256"]
                for kind in ("envs", "repos")
                for entry in cat[kind].values()
                if entry["status"] == "ok"
            }
            assert len(images) == 2 and images <= layers  # env and repo: unpacked images (+ interp archive)
            out = ts.sandbox.run(["python", "-c", "import tinycalc; print(tinycalc.add(2, 3), tinycalc.sub(5, 3))"])
            assert out.output.split() == ["5", "8"], out.output
            out = ts.sandbox.run(["python", "-c", PYC_CHECK])
            valid, stale = map(int, out.output.split()[-2:])
            assert valid > 100 and stale == 0, out.output
    finally:
        for line in mounts():  # never leave a loop mount behind, even when an assert failed
            subprocess.run(["umount", "-l", line.split()[1]], check=False)


#: Inside a sandbox: how many timestamp .pyc files of the venv's site-packages are valid for
#: their source (header mtime and size as the interpreter checks them) and how many stale.
PYC_CHECK = """
import importlib.util, os, sys, sysconfig
valid = stale = 0
for root, dirs, files in os.walk(sysconfig.get_paths()["purelib"]):
    if os.path.basename(root) != "__pycache__":
        continue
    for name in files:
        pyc = os.path.join(root, name)
        try:
            src = importlib.util.source_from_cache(pyc)
        except ValueError:
            continue
        if not name.endswith(sys.implementation.cache_tag + ".pyc") or not os.path.isfile(src):
            continue
        head = open(pyc, "rb").read(16)
        if int.from_bytes(head[4:8], "little") != 0:
            continue
        st = os.stat(src)
        ok = (int.from_bytes(head[8:12], "little") == int(st.st_mtime) & 0xFFFFFFFF
              and int.from_bytes(head[12:16], "little") == st.st_size & 0xFFFFFFFF)
        valid, stale = valid + ok, stale + (not ok)
print(valid, stale)
"""


def test_validation_reuses_results_of_unchanged_tasks(validated):
    """Adding tasks to a built environment validates only the new ones."""
    ws = validated  # built and validated once (the fixture); this test extends it
    from tests.fixtures.pipeline import task

    (good,) = [
        p
        for p in (ws.path / "work" / "validation").glob("env-*.json")
        if "tiny__calc.good.sub__aaaa0001" in p.read_text()
    ]
    first = json.loads(good.read_text())["tasks"]
    assert {t["status"] for t in first.values()} == {"valid"} and len(first) == 2
    with ws.tasks.open("a") as fh:
        fh.write(json.dumps(task("tiny__calc.good.new__dddd0001", "tiny__calc.good")) + "\n")
    proc = ws.snakemake("-n", config=("validate=true",))
    jobs = jobs_in(proc.stdout + proc.stderr)
    # only the job of the env that got a task reruns (validation is part of the env job) ...
    assert jobs.get("env") == 1 and "repo" not in jobs, jobs
    key = good.stem
    lock = ws.path / "work" / "locks" / f"{key}.json"  # written by resolve, the build's first step
    built = (lock.stat().st_mtime_ns, _catalog(ws)["envs"][key]["manifest"])
    ws.snakemake(config=("validate=true",))
    # ... and reuses the build: nothing resolved or published again, only validated
    assert (lock.stat().st_mtime_ns, _catalog(ws)["envs"][key]["manifest"]) == built
    assert "build reused" in (ws.path / "work" / "logs" / "env" / f"{key}.log").read_text()
    second = json.loads(good.read_text())["tasks"]
    assert {iid for iid, t in second.items() if t.get("reused")} == set(first)
    assert not second["tiny__calc.good.new__dddd0001"].get("reused")
    assert {t["status"] for t in second.values()} == {"valid"}
    assert _catalog(ws)["counts"]["validation_valid"] == 3


def test_retry_failed_rebuilds_exactly_what_failed(pipeline_workspace, monkeypatch):
    """A build fails for a reason outside the spec (here a setting of the build host, passed
    into the build, is missing). A plain rerun keeps the recorded failure (no job);
    `retry_failed=true` once the cause is gone rebuilds that environment (and the index)
    and nothing that succeeded."""
    ws = pipeline_workspace
    monkeypatch.delenv("PIP_MINISANDBOX_MIRROR_BACK", raising=False)
    ws.specs[1]["install"] = ["python -m pip install -e .", 'test "$PIP_MINISANDBOX_MIRROR_BACK" = yes || exit 3']
    ws.write_catalog()
    ws.snakemake()
    cat = _catalog(ws)
    assert {e["spec_name"]: e["status"] for e in cat["envs"].values()} == {
        "tiny__calc.good": "ok",
        "tiny__calc.broken": "failed",
    }
    good_key = next(k for k, e in cat["envs"].items() if e["status"] == "ok")
    good_receipt = ws.path / "work" / "published" / "env" / f"{good_key}.json"
    before = good_receipt.stat().st_mtime_ns
    monkeypatch.setenv("PIP_MINISANDBOX_MIRROR_BACK", "yes")  # build hosts pass PIP_* settings into builds
    proc = ws.snakemake("-n")
    assert "Nothing to be done" in proc.stdout + proc.stderr  # a plain rerun is a no-op
    proc = ws.snakemake("-n", config=("retry_failed=true",))
    assert jobs_in(proc.stdout + proc.stderr) == {"env": 1, "index": 1, "all": 1, "total": 3}, (
        proc.stdout + proc.stderr
    )[-3000:]
    assert "retry_failed: 1 failed key(s)" in proc.stderr
    failed_key = next(k for k in cat["envs"] if k != good_key)
    assert (
        json.loads((ws.path / "work" / "failed" / "env" / f"{failed_key}.json").read_text())["data"]["status"]
        == "failed"
    )
    ws.snakemake(config=("retry_failed=true",))
    cat = _catalog(ws)
    assert {e["status"] for e in cat["envs"].values()} == {"ok"}
    assert good_receipt.stat().st_mtime_ns == before  # what succeeded was not touched
    proc = ws.snakemake("-n", config=("retry_failed=true",))
    assert "Nothing to be done" in proc.stdout + proc.stderr


def test_label_mode_labels_candidates_and_the_labels_validate(pipeline_workspace, tmp_path):
    """`--config label=true` on candidates (bug patches, no lists): each env job labels its
    candidates; results/labelled_tasks.jsonl holds SWE-smith records that validate, and the
    dropped ones are reported. `minisandbox label` gives the same labels from the store."""
    from tests.fixtures.pipeline import BUG_PATCH

    ws = pipeline_workspace
    harmless = BUG_PATCH.replace("-    return a - b\n+    return a + b\n", "-    return a - b\n+    return (a - b)\n")
    cands = [
        {"instance_id": "tiny__calc.good.sub__cccc0001", "repo": "swesmith/tiny__calc.good", "patch": BUG_PATCH},
        {
            "instance_id": "tiny__calc.good.noop__cccc0002",
            "repo": "swesmith/tiny__calc.good",
            "patch": harmless,
            "FAIL_TO_PASS": [],
            "PASS_TO_PASS": [],
        },
        {"instance_id": "tiny__calc.broken.sub__cccc0003", "repo": "swesmith/tiny__calc.broken", "patch": BUG_PATCH},
    ]
    ws.tasks.write_text("".join(json.dumps(c) + "\n" for c in cands))
    ws.snakemake(config=("label=true", "validate_repeats=2"))
    out = ws.path / "results" / "labelled_tasks.jsonl"
    labelled = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["instance_id"] for r in labelled] == ["tiny__calc.good.sub__cccc0001"]
    assert labelled[0]["FAIL_TO_PASS"] == ["tests/test_calc.py::test_sub"]
    assert labelled[0]["PASS_TO_PASS"] == [
        "tests/test_calc.py::test_add",
        "tests/test_calc.py::test_mul[0-9-0]",
        "tests/test_calc.py::test_mul[2-3-6]",
    ]
    report = json.loads((ws.path / "results" / "labelling_report.json").read_text())
    assert (
        report["counts"]["labelled"] == 1 and report["dropped"]["tiny__calc.good.noop__cccc0002"]["status"] == "no-f2p"
    )
    assert report["dropped"]["tiny__calc.broken.sub__cccc0003"]["status"] == "env-broken"
    assert "Nothing to be done" in (lambda p: p.stdout + p.stderr)(
        ws.snakemake("-n", config=("label=true", "validate_repeats=2"))
    )
    # the same labels from the published store, for a handful of candidates
    cli = subprocess.run(
        [
            sys.executable,
            "-m",
            "minisandbox.cli",
            "label",
            "--tasks",
            str(ws.tasks),
            "--store",
            str(ws.store),
            "--catalog",
            str(ws.catalog),
            "--out",
            str(tmp_path / "l.jsonl"),
            "--report",
            str(tmp_path / "r.json"),
            "--logs",
            str(tmp_path / "logs"),
            "--resume-passes",
            "0",
        ],
        capture_output=True,
        text=True,
        cwd=ws.path,
    )
    assert cli.returncode == 0, cli.stderr[-3000:]
    assert [json.loads(x) for x in (tmp_path / "l.jsonl").read_text().splitlines()] == labelled
    # no bug run was killed, so SWE-smith's rule (no resume pass) labels the same; each
    # labelling JSON records the number it ran with (the workflow's default, the CLI's 0)
    assert {json.loads(p.read_text())["resume_passes"] for p in (tmp_path / "labels").glob("*.json")} == {0}
    assert {json.loads(p.read_text())["resume_passes"] for p in ws.path.rglob("labels/env-*.json")} == {2}
    assert "DROPPED tiny__calc.good.noop__cccc0002: no-f2p" in cli.stderr
    # outside label mode the candidates are invalid records; the labelled ones validate
    ws.tasks.write_text(out.read_text())
    ws.snakemake(config=("validate=true",))
    valid = (ws.path / "results" / "validated_tasks.jsonl").read_text().splitlines()
    assert [json.loads(x)["instance_id"] for x in valid] == ["tiny__calc.good.sub__cccc0001"]


def test_two_workflows_on_one_interpreter_at_once_both_succeed(pipeline_workspace, tmp_path):
    """Two users' workflows (separate work dirs and stores, two real snakemake processes)
    build environments of the same host interpreter at the same time: both publish that
    interpreter layer and their environments, and the two layers are the same bytes.
    (Staging the interpreter by hard links failed this way with `file changed as we read
    it`; the layer is now streamed from the prefix, which nothing writes.)"""
    from tests.fixtures.pipeline import Workspace

    a = pipeline_workspace
    a.specs = a.specs[:1]  # the good environment only
    a.write_catalog()
    a.tasks.write_text("".join(line + "\n" for line in a.tasks.read_text().splitlines()[:2]))
    b = Workspace(
        path=tmp_path / "run-b",
        commit=a.commit,
        store=tmp_path / "store-b",
        catalog=a.catalog,
        tasks=a.tasks,
        specs=a.specs,
    )
    b.path.mkdir()
    cmds = []
    for ws in (a, b):
        cmd = [
            sys.executable,
            "-m",
            "snakemake",
            "--snakefile",
            str(Path(__file__).parents[2] / "workflow" / "Snakefile"),
            "--directory",
            str(ws.path),
            "--cores",
            "2",
            "--config",
            f"tasks={ws.tasks}",
            f"catalog={ws.catalog}",
            f"store={ws.store}",
            "workdir=work",
            "bundled=false",
            "validate=false",
        ]
        cmds.append(subprocess.Popen(cmd, cwd=ws.path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    outs = [p.communicate(timeout=1500)[0] for p in cmds]
    for p, out in zip(cmds, outs):
        assert p.returncode == 0, out[-4000:]
    layers = []
    for ws in (a, b):
        cat = _catalog(ws)
        assert [e["status"] for e in cat["envs"].values()] == ["ok"]
        assert [e["status"] for e in cat["interps"].values()] == ["ok"]
        layers.append({k: e["manifest"]["sha256"] for k, e in cat["interps"].items()})
    assert layers[0] == layers[1]  # the same interpreter, the same deterministic archive
