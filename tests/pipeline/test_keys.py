"""Content keys: stable across processes, sensitive to exactly the env-defining fields."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from minisandbox.catalog import EnvSpec
from minisandbox.pipeline import keys
from minisandbox.pipeline.keys import canonical_json, env_canonical, env_key, repo_key, slug, source_id

SRC = Path(__file__).resolve().parents[2] / "src"

SPEC = EnvSpec(
    name="arrow-py__arrow.1d70d009",
    kind="swesmith",
    source="https://github.com/arrow-py/arrow.git",
    commit="1d70d0091980ea489a64fa95a48e99b45f29f0e7",
    python="3.10",
    requirements=("pytest==8.3.3", "six==1.16.0"),
)

#: Golden values: a change here invalidates every published artifact. If the change is
#: intended, bump keys.BUILD_FORMAT (or accept the rebuild) and update these.
#: BUILD_FORMAT 4 (canonical .pyc files, pipeline/bytecode.py)
GOLDEN_ENV_KEY = "env-arrow-713da23139f62956"
GOLDEN_REPO_KEY = "repo-arrow-1d70d0091980-68a4ec8a"


def h16(spec: EnvSpec) -> str:
    return env_key(spec).rsplit("-", 1)[1]


def test_golden_keys() -> None:
    assert env_key(SPEC) == GOLDEN_ENV_KEY
    assert repo_key(SPEC.source, str(SPEC.commit)) == GOLDEN_REPO_KEY


def test_keys_follow_the_documented_formulas() -> None:
    canon = canonical_json(env_canonical(SPEC))
    assert env_key(SPEC) == f"env-arrow-{hashlib.sha256(canon.encode()).hexdigest()[:16]}"
    h8 = hashlib.sha256(f"{SPEC.source}\n{SPEC.commit}".encode()).hexdigest()[:8]
    assert repo_key(SPEC.source, str(SPEC.commit)) == f"repo-arrow-{str(SPEC.commit)[:12]}-{h8}"
    assert re.fullmatch(r"arrow-[0-9a-f]{8}", source_id(SPEC.source))
    assert source_id(SPEC.source) != source_id("https://github.com/other/arrow.git")


def test_keys_are_stable_across_processes_and_hash_seeds() -> None:
    code = (
        "from minisandbox.catalog import EnvSpec; from minisandbox.pipeline.keys import env_key;"
        f"print(env_key(EnvSpec(**{dataclasses.asdict(SPEC)!r})))"
    )
    outs = set()
    for seed in ("0", "12345"):
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(SRC)}
        outs.add(subprocess.check_output([sys.executable, "-c", code], env=env, text=True).strip())
    assert outs == {env_key(SPEC)}


#: Each env_canonical field with a different value: every one must change the key.
CHANGES = {
    "python": {"python": "3.11"},
    "source": {"source": "https://github.com/fork/arrow.git"},
    "commit": {"commit": "0" * 40},
    "requirements (a pin changes)": {"requirements": ("pytest==8.3.4", "six==1.16.0")},
    "requirements (a pin added)": {"requirements": ("pytest==8.3.3", "six==1.16.0", "tomli==2.0.1")},
    "requirements_files": {"requirements_files": ("requirements.txt",)},
    "pre_install": {"pre_install": ("sed -i s/a/b/ setup.py",)},
    "install": {"install": ("python -m pip install -e .[test]",)},
    "install order": {"install": ("pip install -e .", "pip install pytest")},
    "exclude_newer": {"exclude_newer": "2024-12-02T00:00:00Z"},
    "python_full": {"python_full": "3.10.15"},
    "system_packages": {"system_packages": ("graphviz",)},
    "warmup": {"warmup": ("python -m nltk.downloader punkt",)},
}


def test_canonical_holds_exactly_the_documented_fields() -> None:
    assert set(env_canonical(SPEC)) == {
        "build_format",
        "python",
        "source",
        "commit",
        "requirements",
        "requirements_files",
        "pre_install",
        "install",
    }


@pytest.mark.parametrize("label", list(CHANGES))
def test_env_key_changes_with_each_canonical_field(label: str) -> None:
    changed = dataclasses.replace(SPEC, **CHANGES[label])
    assert h16(changed) != h16(SPEC)


def test_install_order_matters() -> None:
    a = dataclasses.replace(SPEC, install=("pip install -e .", "pip install pytest"))
    b = dataclasses.replace(SPEC, install=("pip install pytest", "pip install -e ."))
    assert h16(a) != h16(b)


def test_build_format_bump_changes_every_key(monkeypatch: pytest.MonkeyPatch) -> None:
    before = env_key(SPEC)
    monkeypatch.setattr(keys, "BUILD_FORMAT", keys.BUILD_FORMAT + 1)
    assert env_key(SPEC) != before


@pytest.mark.parametrize(
    "change",
    [
        {"test_cmd": "pytest -x"},
        {"log_parser": "unittest"},
        {"timeout": 900},
        {"kind": "bundled"},
        {"extra": {"python_conda": "3.10.99", "note": "x"}},
        {"requirements": ("six==1.16.0", "pytest==8.3.3")},  # pins are a set: order is irrelevant
    ],
    ids=lambda c: next(iter(c)),
)
def test_env_key_ignores_fields_that_do_not_change_the_venv(change: dict) -> None:
    assert env_key(dataclasses.replace(SPEC, **change)) == env_key(SPEC)


def test_specs_that_define_the_same_venv_share_a_key() -> None:
    renamed = dataclasses.replace(SPEC, name="Other Name/with@odd#chars", kind="swebench", test_cmd="pytest -rA")
    assert env_key(renamed) == env_key(SPEC)
    odd = dataclasses.replace(SPEC, source="https://example.invalid/Odd Name@x.git")
    assert env_key(odd).startswith("env-odd-name-x-")


def test_swebench_specs_share_a_key_per_setup_commit() -> None:
    base = EnvSpec(
        name="django/django@3.0",
        kind="swebench",
        source="https://github.com/django/django.git",
        commit=None,
        python="3.6",
        requirements_files=("tests/requirements/py3.txt",),
    )
    a, b, c = base.with_commit("a" * 40), base.with_commit("a" * 40), base.with_commit("b" * 40)
    assert env_key(a) == env_key(b) != env_key(c)


@pytest.mark.parametrize(
    "name,expected",
    [
        ("arrow-py__arrow.1d70d009", "arrow-py__arrow.1d70d009"),
        ("Django/Django@3.0", "django-django-3.0"),
        ("--..weird..--", "weird"),
        ("ünïcödé", "n-c-d"),
        ("", "x"),
        ("a" * 100, "a" * 40),
        ("x" * 39 + "-y", "x" * 39),
    ],
)
def test_slug(name: str, expected: str) -> None:
    assert slug(name) == expected
    assert re.fullmatch(r"[a-z0-9_.-]{1,40}", slug(name))


def test_canonical_json_is_sorted_and_compact() -> None:
    assert canonical_json({"b": [2, 1], "a": "é"}) == '{"a":"\\u00e9","b":[2,1]}'
    assert json.loads(canonical_json(env_canonical(SPEC)))["requirements"] == ["pytest==8.3.3", "six==1.16.0"]
