"""The loopback as-of index (minisandbox.pipeline.asof_index) against a loopback upstream
with upload times: what it lists, and a real pip whose isolated build goes through it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from minisandbox.pipeline.asof_index import JSON_TYPE, AsOfIndex, AsOfIndexError, parse_date
from minisandbox.tools import uv_bin
from tests.fixtures.fidelity import AS_OF, OLDCFG_FILES, FixtureIndex, make_repo


@pytest.fixture(scope="module")
def upstream():
    index = FixtureIndex()
    yield index
    index.close()


def _get(url: str, accept: str = JSON_TYPE) -> tuple[str, bytes]:
    req = urllib.request.Request(url, headers={"Accept": accept})
    with urllib.request.urlopen(req, timeout=30) as resp:
        return resp.headers["Content-Type"], resp.read()


def test_lists_only_files_uploaded_before_the_date(upstream: FixtureIndex) -> None:
    ctype, body = _get(upstream.url + "tinybackend/")
    assert {f["filename"] for f in json.loads(body)["files"]} == {
        "tinybackend-1.0-py3-none-any.whl",
        "tinybackend-2.0-py3-none-any.whl",
    }
    with AsOfIndex(upstream.url, AS_OF) as idx:
        ctype, body = _get(idx.url + "tinybackend/")
        assert ctype == JSON_TYPE
        files = json.loads(body)["files"]
        assert [f["filename"] for f in files] == ["tinybackend-1.0-py3-none-any.whl"]
        assert files[0]["url"] == upstream.url.replace("/simple/", "/files/") + "tinybackend-1.0-py3-none-any.whl"
        ctype, body = _get(idx.url + "tinybackend/", accept="text/html")  # PEP 503 clients
        assert ctype.startswith("text/html") and b"tinybackend-1.0" in body and b"tinybackend-2.0" not in body
    with AsOfIndex(upstream.url, "2040-01-01T00:00:00Z") as idx:
        assert len(json.loads(_get(idx.url + "tinybackend/")[1])["files"]) == 2
    # a per-project cutoff (an exact pin newer than the date) moves that project only
    with AsOfIndex(upstream.url, AS_OF, {"TinyBackend": "2031-01-01T00:00:00Z"}) as idx:
        assert len(json.loads(_get(idx.url + "tinybackend/")[1])["files"]) == 2
    with AsOfIndex(upstream.url, AS_OF, {"tinybackend": "false"}) as idx:  # no cutoff at all
        assert len(json.loads(_get(idx.url + "tinybackend/")[1])["files"]) == 2


def test_bad_input_is_one_line() -> None:
    with pytest.raises(AsOfIndexError, match="not an RFC 3339"):
        parse_date("yesterday")
    with pytest.raises(AsOfIndexError, match="only http"):
        AsOfIndex("file:///opt/pypi/simple", AS_OF)


def test_pips_isolated_build_resolves_as_of_the_date(upstream: FixtureIndex, tmp_path: Path) -> None:
    """The flit-style breakage: today's backend rejects the old config table."""
    repo = tmp_path / "oldcfg"
    make_repo(repo, OLDCFG_FILES)
    venv = tmp_path / "venv"
    subprocess.run([uv_bin(), "venv", "--seed", "-q", "--python", sys.executable, str(venv)], check=True)
    env = {**os.environ, "PIP_FIND_LINKS": "", "PIP_EXTRA_INDEX_URL": "", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--no-cache-dir", "-e", str(repo)]
    today = subprocess.run(pip, env={**env, "PIP_INDEX_URL": upstream.url}, capture_output=True, text=True)
    assert today.returncode != 0 and "no longer supported" in today.stdout + today.stderr
    with AsOfIndex(upstream.url, AS_OF) as idx:
        asof = subprocess.run(pip, env={**env, "PIP_INDEX_URL": idx.url}, capture_output=True, text=True)
    assert asof.returncode == 0, asof.stdout[-2000:] + asof.stderr[-2000:]
    out = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import oldcfg; print(oldcfg.inc(1))"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert out.stdout.strip() == "2"
    assert parse_date(AS_OF).year == 2021
