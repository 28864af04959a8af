"""The build's cached assertion-rewritten test modules (`minisandbox.pipeline.testpycs`) and
the eval script step that uses them: a pyc goes in only beside the very bytes it was made
from, and what pytest then runs is that pyc. The attacks on the cache (forged pycs from a
patch or planted while the tests run) are in tests/security/test_pyc_cache.py; both use
the helpers here: a real repository, the real pytest of this interpreter, the real eval
script, results plugin and channel."""

from __future__ import annotations

import marshal
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from minisandbox.grading.evalscript import EvalScript
from minisandbox.grading.evaluate import run_bash
from minisandbox.grading.results import SOCKET_VAR, ResultsChannel, parse_channel, plugin_dir
from minisandbox.paths import PYTEST_CONFIG_NAMES
from minisandbox.pipeline.testpycs import MTIME, config_digest, harvest

TEST_CMD = f"{sys.executable} -m pytest -p no:cacheprovider -rA"
LIB = "def inc(x):\n    return x + 1\n"
TEST_A = "from pkg import inc\n\n\ndef test_a():\n    assert inc(1) == 2\n"
TEST_B = "from pkg import inc\n\n\ndef test_b():\n    assert inc(1) == 3\n"  # fails: the F2P test


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.pop("PYTEST_ADDOPTS", None)
    return env


@dataclass
class Built:
    """A repository as the build leaves it (warm-up pycs harvested into `cache`), then
    stripped of every `__pycache__` like the published repo layer."""

    repo: Path
    cache: Path

    def script(self, patch: str | None = None, **kw) -> EvalScript:
        refs = {p: (self.repo / p).read_bytes() for p in ("tests/test_a.py", "tests/test_b.py")}
        return EvalScript(
            test_cmd=TEST_CMD,
            timeout=60,
            patch=patch,
            repo_dir=str(self.repo),
            reference_files=kw.pop("reference_files", refs),
            test_pycs=str(self.cache),
            **kw,
        )

    def prep(self, script: EvalScript) -> str:
        res = run_bash(script.render_prep(), cwd=str(self.repo), env=_env(), timeout=60)
        assert res.returncode == 0, res.output
        return res.output

    def run(self, script: EvalScript) -> tuple[str, dict[str, str], list[dict]]:
        """The whole script with the results channel: (output, channel statuses, tampered)."""
        with ResultsChannel(script.results_manifest()) as channel:
            script.results_dir = str(plugin_dir())
            env = {**_env(), SOCKET_VAR: channel.socket_path(), "PYTHONPATH": str(self.repo)}
            res = run_bash(script.render(), cwd=str(self.repo), env=env, timeout=120)
            text = channel.collect()
        ch = parse_channel(text, channel.nonce)
        assert ch.present and ch.complete, res.output
        return res.output, ch.statuses, ch.tampered

    def pycs(self) -> dict[str, bytes]:
        return {str(p.relative_to(self.repo)): p.read_bytes() for p in self.repo.rglob("*-pytest-*.pyc")}


def git(repo: Path, *args: str) -> str:
    env = {**_env(), "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t"}
    env["GIT_COMMITTER_EMAIL"] = "t@t"
    return subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True, text=True).stdout


def build(root: Path) -> Built:
    repo = root / "repo"
    (repo / "tests").mkdir(parents=True)
    (repo / "pkg").mkdir()
    (repo / "pkg/__init__.py").write_text(LIB)
    (repo / "tests/test_a.py").write_text(TEST_A)
    (repo / "tests/test_b.py").write_text(TEST_B)
    (repo / "setup.cfg").write_text("[tool:pytest]\nxfail_strict = true\n")
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    # the build's collection warm-up (EnvSpec.warmup_commands)
    subprocess.run(
        [*TEST_CMD.split(), "--collect-only", "-q"],
        cwd=repo,
        env={**_env(), "PYTHONPATH": str(repo)},
        check=True,
        capture_output=True,
    )
    cache = root / "cache"
    assert harvest(repo, cache, TEST_CMD) == 2
    for d in list(repo.rglob("__pycache__")):
        subprocess.run(["rm", "-rf", str(d)], check=True)
    return Built(repo, cache)


@pytest.fixture
def built(tmp_path: Path) -> Built:
    return build(tmp_path)


def cached_code(built: Built, name: str) -> bytes:
    return next((built.cache / "tree/tests/__pycache__").glob(f"{name}.*")).read_bytes()


def test_config_digest_is_what_the_eval_script_computes(tmp_path: Path) -> None:
    """The build computes in Python what the eval script computes with find/sha256sum."""
    (tmp_path / "sub/deeper").mkdir(parents=True)
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git/setup.cfg").write_text("ignored")
    (tmp_path / "setup.cfg").write_text("[tool:pytest]\n")
    (tmp_path / "sub/deeper/tox.ini").write_text("[pytest]\naddopts = -q\n")
    (tmp_path / "sub/pyproject.toml").write_text("[tool.pytest.ini_options]\n")
    (tmp_path / "sub/conftest.py").write_text("")
    os.symlink("setup.cfg", tmp_path / "sub/pytest.ini")  # not a regular file: not counted
    names = " -o ".join(f"-name {n}" for n in PYTEST_CONFIG_NAMES)
    shell = subprocess.run(
        f"find . -path ./.git -prune -o \\( {names} \\) -type f -exec sha256sum -- {{}} + | LC_ALL=C sort | sha256sum",
        shell=True,
        cwd=tmp_path,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    assert config_digest(tmp_path) == shell
    (tmp_path / "sub/deeper/tox.ini").write_text("[pytest]\naddopts = -x\n")  # same size
    assert config_digest(tmp_path) != shell


def test_cached_pycs_go_in_beside_their_exact_bytes(built: Built) -> None:
    built.prep(built.script())
    placed = built.pycs()
    assert sorted(placed) == [
        f"tests/__pycache__/{p.name}" for p in sorted((built.cache / "tree/tests/__pycache__").iterdir())
    ]
    for name, data in placed.items():
        assert data == cached_code(built, Path(name).name.split(".")[0])
    for name in ("tests/test_a.py", "tests/test_b.py"):
        assert int((built.repo / name).stat().st_mtime) == MTIME


def test_pytest_runs_what_the_cache_holds(built: Built) -> None:
    """The cache is what pytest executes (shown with a cache entry that differs from its
    source: the cache is trusted by construction, so only the build can do this)."""
    pyc = next((built.cache / "tree/tests/__pycache__").glob("test_b.*"))
    data = pyc.read_bytes()
    src = str(built.repo / "tests/test_b.py")
    pyc.write_bytes(data[:16] + marshal.dumps(compile(TEST_B.replace("== 3", "== 2"), src, "exec")))
    _, statuses, tampered = built.run(built.script())
    assert statuses == {"tests/test_a.py::test_a": "PASSED", "tests/test_b.py::test_b": "PASSED"}
    assert tampered == []
    pyc.write_bytes(data)  # the real entry: the verdict of a run without any cache
    _, statuses, tampered = built.run(built.script())
    assert statuses == {"tests/test_a.py::test_a": "PASSED", "tests/test_b.py::test_b": "FAILED"}
    assert tampered == []


def test_no_pyc_for_changed_bytes_even_with_the_recorded_size_and_mtime(built: Built) -> None:
    """A reference file whose bytes differ (same size, given the recorded mtime) gets no
    pyc: the digest decides, not pytest's mtime/size check."""
    other = TEST_A.replace("inc(1) == 2", "inc(2) == 3").encode()
    assert len(other) == len(TEST_A)
    script = built.script(reference_files={"tests/test_a.py": other, "tests/test_b.py": TEST_B.encode()})
    built.prep(script)
    assert [n for n in built.pycs() if "test_a." in n] == []
    assert [n for n in built.pycs() if "test_b." in n]


@pytest.mark.parametrize("what", ["config", "test command"])
def test_a_changed_configuration_turns_the_cache_off(built: Built, what: str) -> None:
    if what == "config":  # the same size: only the digest tells
        (built.repo / "setup.cfg").write_text("[tool:pytest]\nxfail_strict = True\n")
        script = built.script()
    else:
        script = built.script()
        script.test_cmd = TEST_CMD + " -q"
    built.prep(script)
    assert built.pycs() == {}


def test_no_cache_directory_is_a_no_op(built: Built, tmp_path: Path) -> None:
    script = built.script()
    script.test_pycs = str(tmp_path / "absent")
    built.prep(script)
    assert built.pycs() == {}
    _, statuses, _ = built.run(script)
    assert statuses["tests/test_b.py::test_b"] == "FAILED"


def test_harvest_keeps_only_valid_pytest_pycs(tmp_path: Path) -> None:
    """Only pytest's pycs that are valid for their source are kept; stale ones, plain
    CPython pycs and symlinks are not."""
    b = build(tmp_path / "b")
    repo = tmp_path / "r"
    (repo / "tests/__pycache__").mkdir(parents=True)
    (repo / "tests/test_x.py").write_text("def test_x():\n    pass\n")
    tail = (b.cache / "key").read_text().splitlines()[3]
    good = cached_code(b, "test_a")
    (repo / "tests/__pycache__" / ("test_x" + tail)).write_bytes(good)  # hash of test_a's bytes
    os.symlink("/etc/passwd", repo / "tests/__pycache__" / ("test_y" + tail))
    (repo / "tests/test_y.py").write_text("")
    (repo / "tests/__pycache__/test_x.cpython-311.pyc").write_bytes(good)
    with tempfile.TemporaryDirectory() as d:
        assert harvest(repo, Path(d) / "c", TEST_CMD) == 0  # stale (hash, or size and mtime)
        (repo / "tests/test_x.py").write_text(TEST_A)
        os.utime(repo / "tests/test_x.py", (MTIME, MTIME))  # what a timestamp-based cached pyc records
        assert harvest(repo, Path(d) / "c", TEST_CMD) == 1  # now valid for test_x's bytes
        assert sorted(p.name for p in (Path(d) / "c/tree/tests/__pycache__").iterdir()) == ["test_x" + tail]


READS_A_PYC = """import os, py_compile


def test_reads_a_pyc_as_data():
    here = os.path.dirname(os.path.abspath(__file__))
    src = os.path.join(here, "made_here.py")
    with open(src, "w") as f:
        f.write("X = 1\\n")
    pyc = py_compile.compile(src)  # written during the run, under the repository root
    with open(pyc, "rb") as f:
        assert f.read(4) == __import__("importlib.util").util.MAGIC_NUMBER
"""


def test_a_pyc_read_as_data_is_not_the_importers(built: Built) -> None:
    """The plugin checks only the importer's reads (pytest's rewriter, importlib): a test
    that reads a pyc written during the run as data is left alone."""
    refs = {p: (built.repo / p).read_bytes() for p in ("tests/test_a.py", "tests/test_b.py")}
    refs["tests/test_c.py"] = READS_A_PYC.encode()
    _, statuses, tampered = built.run(built.script(reference_files=refs))
    assert statuses["tests/test_c.py::test_reads_a_pyc_as_data"] == "PASSED", statuses
    assert statuses["tests/test_b.py::test_b"] == "FAILED"
    assert tampered == []


def test_a_cached_pyc_that_does_not_load_falls_back_to_the_source(built: Built) -> None:
    """A pyc with a valid header and a body that is not code (the importer then compiles the
    source) is refused by the plugin as well: the source's verdict, and no finding."""
    pyc = next((built.cache / "tree/tests/__pycache__").glob("test_b.*"))
    pyc.write_bytes(pyc.read_bytes()[:16] + b"\xff not marshal data")
    _, statuses, tampered = built.run(built.script())
    assert statuses == {"tests/test_a.py::test_a": "PASSED", "tests/test_b.py::test_b": "FAILED"}
    assert tampered == []
