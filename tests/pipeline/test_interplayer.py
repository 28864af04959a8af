"""The interpreter layer on the build side: planning an interpreter into the env key,
packing and publishing a real pyenv interpreter once per build, and the errors."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import tarfile
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import zstandard

from minisandbox.catalog import EnvSpec
from minisandbox.fsutil import file_digest
from minisandbox.pipeline.interplayer import env_key_part, local_interpreter, plan_interpreter, step_interp
from minisandbox.pipeline.keys import env_key
from minisandbox.sandbox import interpreters
from minisandbox.sandbox.interpreters import InterpreterNotFound
from minisandbox.status import read_status


def _smallest_pyenv() -> interpreters.Interpreter:
    """The oldest pyenv CPython 3 (the smallest tree to pack)."""
    found = [
        i
        for i in interpreters.available()
        if i.kind == interpreters.PYENV and tuple(map(int, i.version.split("."))) >= (3, 6)
    ]
    if not found:
        pytest.skip("no pyenv CPython 3 on this machine")
    return min(found, key=lambda i: tuple(map(int, i.version.split("."))))


def test_plan_records_the_build_and_the_key_follows_it() -> None:
    interp = _smallest_pyenv()
    planned = plan_interpreter(interp.version)
    assert planned["key"] == interpreters.interpreter_key(interp) and planned["kind"] == "pyenv"
    assert planned["prefix"] == planned["host_prefix"] == interp.prefix
    spec = EnvSpec.from_dict(
        {"name": "demo", "kind": "bundled", "source": "/src/demo", "commit": "a" * 40, "python": interp.version}
    )
    assert env_key(spec, env_key_part(planned)) != env_key(
        spec, env_key_part({**planned, "key": planned["key"][:-1] + "0"})
    )
    assert env_key(spec, env_key_part(planned)) == env_key(spec, env_key_part(plan_interpreter(interp.version)))
    assert local_interpreter(planned).prefix == interp.prefix


def test_missing_version_is_planned_and_fails_the_build_with_how_to() -> None:
    planned = plan_interpreter("3.1.99")
    assert planned["version"] == "3.1.99" and "key" not in planned
    assert env_key_part(planned) == "missing-3.1.99"
    with pytest.raises(InterpreterNotFound, match=r"no CPython 3\.1\.99 .*uv python install 3\.1\.99"):
        local_interpreter(planned)


def test_another_build_of_the_version_is_refused() -> None:
    interp = _smallest_pyenv()
    planned = {**plan_interpreter(interp.version), "key": f"cpython-{interp.version}-pyenv-{'0' * 16}"}
    with pytest.raises(InterpreterNotFound, match="plan uses interpreter .* this machine's is"):
        local_interpreter(planned)


def test_interp_layer_is_packed_published_once_and_complete(tmp_path: Path) -> None:
    interp = _smallest_pyenv()
    planned = plan_interpreter(interp.version)
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(planned))
    store = tmp_path / "store"
    st = step_interp(spec, str(store), tmp_path / "work", tmp_path / "receipt.json", "tar.zst", 3)
    assert st.ok, st.error
    m = st.data["manifest"]
    key = planned["key"]
    assert m["kind"] == "interp" and m["key"] == key and m["mount_path"] == interp.prefix
    assert m["interpreter"]["kind"] == "pyenv" and m["interpreter"]["version"] == interp.version
    archive = store / "artifacts" / "interp" / m["artifact"]
    assert file_digest(archive) == (m["sha256"], m["size"])
    assert json.loads((store / "artifacts" / "interp" / f"{key}.manifest.json").read_text()) == m
    with zstandard.open(archive, "rb") as fh, tarfile.open(fileobj=fh, mode="r|") as tar:
        names = {t.name for t in tar}
    assert f"./bin/python{interp.minor}" in names
    assert any(n.startswith("./lib/libpython") for n in names)
    site = f"./lib/python{interp.minor}/site-packages"
    assert site in names and not any(n.startswith(site + "/") for n in names)  # base site-packages left out
    assert f"./lib/python{interp.minor}/os.py" in names
    # a second environment of the same build reuses the published layer
    mtime = archive.stat().st_mtime_ns
    again = step_interp(spec, str(store), tmp_path / "work", tmp_path / "receipt2.json", "tar.zst", 3)
    assert again.ok and again.data["manifest"] == m and archive.stat().st_mtime_ns == mtime
    assert read_status(tmp_path / "receipt2.json").data["status"] == "ok"
    assert not list((tmp_path / "work").glob("*.tar.zst"))  # scratch archive removed


def test_failed_interp_is_recorded_not_raised(tmp_path: Path) -> None:
    spec = tmp_path / "spec.json"
    spec.write_text(
        json.dumps(
            {
                "key": "cpython-3.1.99-pyenv-" + "0" * 16,
                "version": "3.1.99",
                "missing": "no CPython 3.1.99 on this machine (have: none): install it",
            }
        )
    )
    st = step_interp(spec, str(tmp_path / "store"), tmp_path / "work", tmp_path / "r.json", "tar.zst", 3)
    assert not st.ok and st.error.startswith("interp: no CPython 3.1.99")
    assert not (tmp_path / "store" / "artifacts").exists()


def _touch_ctimes(prefix: str, stop: threading.Event) -> int:
    """What a neighbouring build does to a shared install: change the inodes' ctimes (as a
    new hard link does) while others read it. chmod to the same mode changes nothing else."""
    touched = 0
    while not stop.is_set():
        for root, _dirs, names in os.walk(prefix):
            for name in names:
                path = os.path.join(root, name)
                st = os.lstat(path)
                if stat.S_ISREG(st.st_mode):
                    os.chmod(path, stat.S_IMODE(st.st_mode))
                    touched += 1
            if stop.is_set():
                break
    return touched


@pytest.mark.slow
def test_concurrent_packings_of_one_interpreter_both_succeed(tmp_path: Path) -> None:
    """Two interp jobs for one interpreter at the same time (two workflows on one host: one
    work dir and store each; and two jobs of one workflow: a shared work dir and store), while
    a neighbour keeps changing the install's inode ctimes: every job publishes, and the
    archives of the separate stores are byte-identical."""
    interp = _smallest_pyenv()
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(plan_interpreter(interp.version)))

    def job(name: str, store: str, work: str) -> subprocess.Popen:
        return subprocess.Popen(
            [
                sys.executable,
                "-m",
                "minisandbox.cli",
                "pipeline",
                "interp",
                "--spec",
                str(spec),
                "--store",
                store,
                "--work",
                work,
                "--format",
                "tar.zst",
                "--level",
                "3",
                "--out",
                str(tmp_path / f"{name}.json"),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )

    stop = threading.Event()
    with ThreadPoolExecutor(1) as pool:
        toucher = pool.submit(_touch_ctimes, interp.prefix, stop)
        try:
            procs = {
                "a": job("a", str(tmp_path / "store-a"), str(tmp_path / "work-a")),
                "b": job("b", str(tmp_path / "store-b"), str(tmp_path / "work-b")),
                "c": job("c", str(tmp_path / "store-c"), str(tmp_path / "work-c")),
                "d": job("d", str(tmp_path / "store-c"), str(tmp_path / "work-c")),
            }
            outs = {n: p.communicate(timeout=600)[0] for n, p in procs.items()}
        finally:
            stop.set()
        assert toucher.result() > 0
    for name, proc in procs.items():
        st = read_status(tmp_path / f"{name}.json")
        assert proc.returncode == 0 and st.ok and st.data["status"] == "ok", (name, st.error, outs[name])
    ms = {n: read_status(tmp_path / f"{n}.json").data["manifest"] for n in procs}
    assert ms["a"]["sha256"] == ms["b"]["sha256"] == ms["c"]["sha256"] == ms["d"]["sha256"]
    assert not list((tmp_path / "work-c").glob("*.tar.zst")) and not list((tmp_path / "work-c").glob(".cpython-*.*/"))
